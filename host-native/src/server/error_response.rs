//! The one place a failure becomes an HTTP response: Anthropic's envelope
//! `{"type":"error","error":{"type":…,"message":…},"request_id":…}` — or, on the OpenAI routes,
//! OpenAI's `{"error":{"message","type","param","code"}}` — with the status the error says,
//! `retry-after` kept from the upstream, and `x-should-retry: false` when the client's request
//! itself was wrong (retrying cannot help).

use bytes::Bytes;
use http::{HeaderValue, Response};

use bridge_core::anthropic::events::ApiError;

use super::body::{ResponseBody, full};
use crate::error::BridgeError;

/// Which API's error body a client gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    /// The Anthropic Messages API's.
    Anthropic,
    /// OpenAI's (Chat Completions and Responses).
    OpenAi,
    /// OpenAI's, to the Codex CLI: a spent budget is a 400 (Codex shows a 400's message as it
    /// is; a 429 `insufficient_quota` it words itself, "Quota exceeded", losing which budget
    /// and when it resets).
    Codex,
}

impl Envelope {
    /// The envelope the clients of a path expect.
    #[must_use]
    pub fn for_path(path: &str) -> Self {
        let path = path.trim_end_matches('/');
        if path == "/v1/chat/completions" || path == "/v1/responses" {
            Self::OpenAi
        } else {
            Self::Anthropic
        }
    }

    /// The envelope for the client that sent `headers` (the Codex CLI says so in its
    /// `user-agent`).
    #[must_use]
    pub fn for_client(self, headers: &http::HeaderMap) -> Self {
        let codex = headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ua| ua.to_ascii_lowercase().starts_with("codex"));
        if self == Self::OpenAi && codex {
            Self::Codex
        } else {
            self
        }
    }
}

/// The error response for `error` in `envelope`'s shape. OpenAI clients do not know 529
/// (overloaded); they get 503; and a failure retrying cannot fix that is not theirs (424, see
/// [`crate::error::FAILED_DEPENDENCY`]) reaches them as 400.
#[must_use]
pub fn error_response_in(
    envelope: Envelope,
    error: BridgeError,
    request_id: &str,
) -> Response<ResponseBody> {
    let status = match (envelope, error.status().as_u16()) {
        (Envelope::OpenAi | Envelope::Codex, 529) => http::StatusCode::SERVICE_UNAVAILABLE,
        // The Codex CLI retries every status but 400 (for half a minute), whatever
        // `x-should-retry` says; a 400 it shows at once, body and all.
        (Envelope::OpenAi | Envelope::Codex, crate::error::FAILED_DEPENDENCY) => {
            http::StatusCode::BAD_REQUEST
        }
        (Envelope::Codex, 402) => http::StatusCode::BAD_REQUEST,
        // A spent budget: OpenAI's `insufficient_quota`.
        (Envelope::OpenAi, 402) => http::StatusCode::TOO_MANY_REQUESTS,
        (_, _) => error.status(),
    };
    let retry_after = match &error {
        BridgeError::UpstreamStatus { retry_after, .. } => retry_after.clone(),
        BridgeError::UpstreamBusy { retry_after, .. } => {
            HeaderValue::from_str(&retry_after.as_secs().max(1).to_string()).ok()
        }
        BridgeError::Engine(crate::engine::EngineError::Busy(_))
        | BridgeError::AtCapacity { .. } => Some(HeaderValue::from_static("1")),
        BridgeError::Gateway(crate::gateway::GatewayError::Limit(limit)) => limit
            .retry_after()
            .and_then(|s| HeaderValue::from_str(&s.to_string()).ok()),
        _ => None,
    };
    let message = crate::redact::redact(&error.to_string()).into_owned();
    let api = ApiError::new(error.kind(), message);
    let body = match envelope {
        Envelope::Anthropic => error_body(&api, request_id),
        Envelope::OpenAi | Envelope::Codex => bridge_core::front::openai_error_body(&api),
    };
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
    if let BridgeError::MethodNotAllowed { allow, .. } = &error {
        headers.insert(http::header::ALLOW, HeaderValue::from_static(allow));
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
