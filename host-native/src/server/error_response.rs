//! The one place a failure becomes an HTTP response: Anthropic's envelope
//! `{"type":"error","error":{"type":…,"message":…},"request_id":…}` with the status the error
//! says, `retry-after` kept from the upstream, and `x-should-retry: false` when the client's
//! request itself was wrong (retrying cannot help).

use bytes::Bytes;
use http::{HeaderValue, Response};

use bridge_core::anthropic::events::ApiError;

use super::body::{ResponseBody, full};
use crate::error::BridgeError;

/// The Anthropic-style error response for `error`.
#[must_use]
pub fn error_response(error: BridgeError, request_id: &str) -> Response<ResponseBody> {
    let status = error.status();
    let retry_after = match &error {
        BridgeError::UpstreamStatus { retry_after, .. } => retry_after.clone(),
        BridgeError::Engine(crate::engine::EngineError::Busy(_)) => {
            Some(HeaderValue::from_static("1"))
        }
        _ => None,
    };
    let message = crate::redact::redact(&error.to_string()).into_owned();
    let body = error_body(&ApiError::new(error.kind(), message), request_id);
    let mut response = Response::new(full(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(value) = retry_after {
        headers.insert(http::header::RETRY_AFTER, value);
    }
    if error.final_for_client() {
        headers.insert("x-should-retry", HeaderValue::from_static("false"));
    }
    response
}

/// `{"type":"error","error":{…},"request_id":"req_…"}`
#[must_use]
pub fn error_body(error: &ApiError, request_id: &str) -> String {
    serde_json::json!({
        "type": "error",
        "error": error,
        "request_id": request_id,
    })
    .to_string()
}
