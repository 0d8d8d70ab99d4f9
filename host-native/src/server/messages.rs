//! `POST /v1/messages` and `POST /v1/messages/count_tokens`: route the request
//! ([`super::routes`]), hand it to each target in turn until one answers, relay what it answers
//! ([`super::relay`]). No provider-specific branch lives here.
//!
//! A target that fails before the client received a byte with an error another upstream may not
//! have ([`BridgeError::retryable`]: connect errors, timeouts, 401/403/404/408/429/5xx/529)
//! hands the request to the next; a request the upstream refused as wrong in itself (a 400)
//! goes back to the client at once. Every answer, error or not, names the target that gave it in
//! `x-claude-bridge-target: provider,model`.

use std::time::Instant;

use http::{HeaderValue, Response, StatusCode};
use tracing::{info, warn};

use super::body::ResponseBody;
use super::{AppState, error_response, json_response};
use crate::error::BridgeError;
use crate::provider::Call;

/// The response header that names the target that answered.
pub const TARGET_HEADER: &str = "x-claude-bridge-target";

pub(super) async fn create(
    state: &AppState,
    call: Call,
    request_id: &str,
) -> Response<ResponseBody> {
    let routes = state.routes();
    let (plan, reason, client_model) = match routes.plan(&call.body) {
        Ok(plan) => plan,
        Err(error) => return failed(error, request_id, None),
    };
    let now = Instant::now();
    // Skip targets whose circuit is open, unless none would be left.
    let live: Vec<_> = plan.iter().filter(|t| !t.circuit.is_open(now)).collect();
    let tries = if live.is_empty() {
        plan.iter().collect()
    } else {
        live
    };
    let mut last: Option<(BridgeError, String)> = None;
    for (attempt, entry) in tries.iter().enumerate() {
        let label = entry.label(&client_model);
        match entry.provider.open(call.clone()).await {
            Ok(answer) => {
                entry.circuit.success();
                info!(target = %label, %reason, attempt = attempt + 1, "routed");
                let mut response = state.relay.respond(answer).await;
                set_target(&mut response, &label);
                return response;
            }
            Err(error) if error.retryable() => {
                entry.circuit.failure(Instant::now(), &error.to_string());
                if attempt + 1 < tries.len() {
                    warn!(target = %label, %error, "target failed before answering; trying the next");
                }
                last = Some((error, label));
            }
            Err(error) => return failed(error, request_id, Some(&label)),
        }
    }
    match last {
        Some((error, label)) => failed(error, request_id, Some(&label)),
        None => failed(
            BridgeError::Internal(String::from("the router gave no target")),
            request_id,
            None,
        ),
    }
}

fn failed(error: BridgeError, request_id: &str, target: Option<&str>) -> Response<ResponseBody> {
    warn!(kind = error.kind().as_str(), fault = ?error.fault(), %error, "request failed");
    let mut response = error_response::error_response(error, request_id);
    if let Some(target) = target {
        set_target(&mut response, target);
    }
    response
}

fn set_target(response: &mut Response<ResponseBody>, target: &str) {
    if let Ok(value) = HeaderValue::from_str(target) {
        response.headers_mut().insert(TARGET_HEADER, value);
    }
}

/// Exact counts when the default target's upstream can count, else the core's estimate.
pub(super) async fn count_tokens(
    state: &AppState,
    call: Call,
) -> Result<Response<ResponseBody>, BridgeError> {
    let estimate = state.engine.count_tokens(&call.body)?;
    let routes = state.routes();
    if let Some(primary) = routes.primary()
        && let Some(answer) = primary.provider.count_tokens(call).await
    {
        return Ok(state.relay.respond(answer?).await);
    }
    Ok(json_response(
        StatusCode::OK,
        format!("{{\"input_tokens\":{estimate}}}"),
    ))
}
