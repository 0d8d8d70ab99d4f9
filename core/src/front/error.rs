//! Errors in OpenAI's shape: a request the front refuses ([`FrontError`]), and an Anthropic
//! error (from an upstream or a stream) rendered as `{"error":{"message","type","param","code"}}`.
//!
//! ```
//! use bridge_core::anthropic::events::{ApiError, ErrorKind};
//! use bridge_core::front::{openai_error_body, openai_status};
//! let e = ApiError::new(ErrorKind::Overloaded, "Overloaded");
//! assert_eq!(openai_status(e.kind), 503);
//! assert_eq!(openai_error_body(&e),
//!     r#"{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded"}}"#);
//! ```

use serde_json::{Value, json};

use crate::anthropic::events::{ApiError, ErrorKind};

/// Why an OpenAI request cannot be served. Every variant is the client's fault (HTTP 400,
/// `invalid_request_error`); `param` names the field as OpenAI does (`messages[2].content`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontError {
    /// The body is not JSON (or not a JSON object).
    #[error("the request body is not valid JSON: {0}")]
    Json(String),
    /// A required field is absent.
    #[error("{param} is required: {message}")]
    Missing {
        /// The field.
        param: String,
        /// What to send.
        message: String,
    },
    /// A field has a value the API (or the bridge) cannot take.
    #[error("{param}: {message}")]
    Invalid {
        /// The field.
        param: String,
        /// What is wrong and what to send instead.
        message: String,
    },
    /// A stored response or item the request names is not there (HTTP 404 for an item, 400
    /// for `previous_response_id`, as OpenAI answers).
    #[error("{message}")]
    NotFound {
        /// The field that names it (`previous_response_id`, `input`).
        param: String,
        /// Which id, and why it may be missing.
        message: String,
    },
    /// A field asks for something the bridge cannot provide (e.g. `n` > 1, audio input).
    #[error("{param}: {message}")]
    Unsupported {
        /// The field.
        param: String,
        /// What is not supported and what to do instead.
        message: String,
    },
}

impl FrontError {
    pub(crate) fn missing(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Missing {
            param: param.into(),
            message: message.into(),
        }
    }

    pub(crate) fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            param: param.into(),
            message: message.into(),
        }
    }

    pub(crate) fn unsupported(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Unsupported {
            param: param.into(),
            message: message.into(),
        }
    }

    /// The field at fault, if one is.
    #[must_use]
    pub fn param(&self) -> Option<&str> {
        match self {
            Self::Json(_) => None,
            Self::Missing { param, .. }
            | Self::Invalid { param, .. }
            | Self::Unsupported { param, .. }
            | Self::NotFound { param, .. } => Some(param),
        }
    }

    /// OpenAI's `code` for this error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Json(_) => "invalid_json",
            Self::Missing { .. } => "missing_required_parameter",
            Self::Invalid { .. } => "invalid_value",
            Self::Unsupported { .. } => "unsupported_value",
            Self::NotFound { param, .. } if param == "previous_response_id" => {
                "previous_response_not_found"
            }
            Self::NotFound { .. } => "not_found",
        }
    }

    /// The HTTP status: 400, or 404 for a stored item that is not there.
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            Self::NotFound { param, .. } if param != "previous_response_id" => 404,
            _ => 400,
        }
    }

    /// The error body: `{"error":{"message","type":"invalid_request_error","param","code"}}`.
    #[must_use]
    pub fn envelope(&self) -> String {
        json!({ "error": self.error_object() }).to_string()
    }

    /// The body's `error` object: `{"message","type":"invalid_request_error","param","code"}`.
    #[must_use]
    pub fn error_object(&self) -> Value {
        json!({
            "message": self.to_string(),
            "type": "invalid_request_error",
            "param": self.param(),
            "code": self.code(),
        })
    }
}

/// A failed non-streaming answer: the HTTP status and the OpenAI error body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// HTTP status ([`openai_status`]).
    pub status: u16,
    /// `{"error":{…}}`
    pub body: String,
}

impl Failure {
    /// The failure for an Anthropic error.
    #[must_use]
    pub fn from_api_error(error: &ApiError) -> Self {
        Self {
            status: openai_status(error.kind),
            body: openai_error_body(error),
        }
    }
}

/// OpenAI's `type` and `code` for an Anthropic error kind.
#[must_use]
pub fn openai_error_fields(kind: ErrorKind) -> (&'static str, Option<&'static str>) {
    match kind {
        ErrorKind::InvalidRequest => ("invalid_request_error", None),
        ErrorKind::RequestTooLarge => ("invalid_request_error", Some("request_too_large")),
        ErrorKind::Authentication => ("authentication_error", Some("invalid_api_key")),
        ErrorKind::Billing => ("insufficient_quota", Some("insufficient_quota")),
        ErrorKind::Permission => ("permission_error", None),
        ErrorKind::NotFound => ("not_found_error", Some("model_not_found")),
        ErrorKind::RateLimit => ("rate_limit_error", Some("rate_limit_exceeded")),
        ErrorKind::Api => ("server_error", None),
        ErrorKind::Timeout => ("server_error", Some("timeout")),
        ErrorKind::Overloaded => ("server_error", Some("overloaded")),
    }
}

/// The HTTP status an OpenAI server answers this error with (Anthropic's 529 becomes 503,
/// billing 429 as OpenAI's `insufficient_quota`).
#[must_use]
pub fn openai_status(kind: ErrorKind) -> u16 {
    match kind {
        ErrorKind::Overloaded => 503,
        ErrorKind::Billing => 429,
        other => other.status(),
    }
}

/// The `error` object for an Anthropic error (no `param`: the upstream does not name one).
pub(crate) fn openai_error_object(error: &ApiError) -> Value {
    let (kind, code) = openai_error_fields(error.kind);
    json!({"message": error.message, "type": kind, "param": null, "code": code})
}

/// The OpenAI error body for an Anthropic error: `{"error":{"message","type","param","code"}}`.
#[must_use]
pub fn openai_error_body(error: &ApiError) -> String {
    json!({ "error": openai_error_object(error) }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_names_the_param_and_code() {
        let e = FrontError::unsupported("n", "only n = 1 is supported");
        assert_eq!(
            e.envelope(),
            r#"{"error":{"message":"n: only n = 1 is supported","type":"invalid_request_error","param":"n","code":"unsupported_value"}}"#
        );
        let json = FrontError::Json(String::from("EOF"));
        assert!(json.envelope().contains(r#""param":null"#));
    }

    #[test]
    fn every_kind_maps_to_a_status_openai_sdks_classify() {
        assert_eq!(openai_status(ErrorKind::RateLimit), 429);
        assert_eq!(openai_status(ErrorKind::InvalidRequest), 400);
        assert_eq!(openai_status(ErrorKind::Api), 500);
        assert_eq!(
            openai_error_fields(ErrorKind::Timeout),
            ("server_error", Some("timeout"))
        );
    }
}
