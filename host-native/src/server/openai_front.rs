//! The OpenAI fronts: `POST /v1/chat/completions` (the OpenAI SDKs, editors and scripts built
//! on Chat Completions) and `POST /v1/responses` (the Codex CLI, which speaks only Responses).
//!
//! The core converts the client's request into an Anthropic request
//! ([`bridge_core::front::chat_request`], [`bridge_core::front::responses_request`]); from there
//! it takes the same way as an Anthropic client's — the router, fallbacks, any provider — and
//! the answer comes back through the core's front in the client's shape
//! ([`super::shape::ClientShape::OpenAi`]). The upstream is always asked for a stream, so a
//! non-streaming client's object is folded from the same events a streaming client gets.
//! A request the front cannot take is a 400 in OpenAI's envelope naming the field (`param`).

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use tracing::info;

use bridge_core::anthropic::request::MessagesRequest;
use bridge_core::front::FrontError;
use bridge_core::front::transcode::{FrontAnswer, FrontShape};

use super::body::ResponseBody;
use super::shape::ClientShape;
use super::{AppState, json_response, messages};
use crate::provider::Call;

/// The Messages API version an OpenAI client's request is sent with.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `POST /v1/chat/completions`.
pub(super) async fn chat_completions(
    state: &AppState,
    call: Call,
    request_id: &str,
) -> Response<ResponseBody> {
    let front = match bridge_core::front::chat_request::chat_to_anthropic(&call.body) {
        Ok(front) => front,
        Err(error) => return refused(&error),
    };
    log_warnings(&front.warnings);
    let shape = FrontShape::Chat {
        include_usage: front.include_usage,
    };
    answer(state, request_id, front.request, front.stream, shape).await
}

/// `POST /v1/responses`.
pub(super) async fn responses(
    state: &AppState,
    call: Call,
    request_id: &str,
) -> Response<ResponseBody> {
    let front = match bridge_core::front::responses_request::responses_to_anthropic(&call.body) {
        Ok(front) => front,
        Err(error) => return refused(&error),
    };
    log_warnings(&front.warnings);
    let shape = FrontShape::Responses {
        custom_tools: front.custom_tools,
        include_encrypted_reasoning: front.include_encrypted_reasoning,
    };
    answer(state, request_id, front.request, front.stream, shape).await
}

async fn answer(
    state: &AppState,
    request_id: &str,
    mut request: MessagesRequest,
    stream: bool,
    shape: FrontShape,
) -> Response<ResponseBody> {
    request.stream = Some(true);
    let body = match serde_json::to_vec(&request) {
        Ok(body) => Bytes::from(body),
        Err(e) => {
            return refused(&FrontError::Json(format!(
                "the converted request could not be encoded: {e}"
            )));
        }
    };
    let answer = FrontAnswer {
        // The request id's random part: unique, and the same id the log line has.
        id: request_id.trim_start_matches("req_").to_owned(),
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        model: request.model.clone(),
        shape,
    };
    // The client's headers are OpenAI's: its `Authorization` is for this bridge, not a
    // credential for an upstream, and Anthropic needs a version. A provider gets only that.
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "anthropic-version",
        HeaderValue::from_static(ANTHROPIC_VERSION),
    );
    let call = Call {
        body,
        headers,
        query: None,
    };
    messages::dispatch(
        state,
        call,
        request_id,
        &ClientShape::OpenAi { answer, stream },
    )
    .await
}

fn log_warnings(warnings: &[String]) {
    for warning in warnings {
        info!(%warning, "part of the OpenAI request has no Anthropic equivalent");
    }
}

/// A request the front cannot take: 400, OpenAI's envelope, not worth retrying.
fn refused(error: &FrontError) -> Response<ResponseBody> {
    tracing::warn!(%error, "OpenAI request refused");
    let mut response = json_response(
        StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST),
        error.envelope(),
    );
    response
        .headers_mut()
        .insert("x-should-retry", HeaderValue::from_static("false"));
    response
}
