//! `POST /v1/messages` and `POST /v1/messages/count_tokens`: hand the request to the provider,
//! relay what it answers ([`super::relay`]). No provider-specific branch lives here.

use http::{Response, StatusCode};

use super::body::ResponseBody;
use super::{AppState, json_response};
use crate::error::BridgeError;
use crate::provider::Call;

pub(super) async fn create(
    state: &AppState,
    call: Call,
) -> Result<Response<ResponseBody>, BridgeError> {
    let answer = state.provider.open(call).await?;
    Ok(state.relay.respond(answer).await)
}

/// Exact counts when the provider's upstream can count, else the core's estimate.
pub(super) async fn count_tokens(
    state: &AppState,
    call: Call,
) -> Result<Response<ResponseBody>, BridgeError> {
    let estimate = state.engine.count_tokens(&call.body)?;
    if let Some(answer) = state.provider.count_tokens(call).await {
        return Ok(state.relay.respond(answer?).await);
    }
    Ok(json_response(
        StatusCode::OK,
        format!("{{\"input_tokens\":{estimate}}}"),
    ))
}
