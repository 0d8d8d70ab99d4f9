//! Errors of the core's operations, typed per operation.
//!
//! The host maps them to HTTP responses in one place; each carries the Anthropic error kind it
//! becomes ([`ErrorKind`], defined here beneath every layer that names one), so the core decides
//! whose fault it was and the host only renders it.

use serde::{Deserialize, Serialize};

/// Why an incoming Anthropic request could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The body is not JSON, or not the JSON shape the Messages API takes.
    #[error("the request body is not valid JSON: {0}")]
    Json(String),
    /// A field the Messages API requires is missing or has the wrong type.
    #[error("{field}: {problem}")]
    Field {
        /// Path of the field, e.g. `messages.0.role`.
        field: String,
        /// What is wrong and what to send instead.
        problem: String,
    },
    /// The conversion options given by the host are not valid.
    #[error("invalid bridge options: {0}")]
    Options(String),
    /// A Fabstir session init the host built would be refused by a host node.
    #[error("invalid Fabstir session init: {0}")]
    SessionInit(String),
}

impl RequestError {
    /// The Anthropic error type this becomes (all are the client's fault except bad options).
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Json(_) | Self::Field { .. } => ErrorKind::InvalidRequest,
            Self::Options(_) | Self::SessionInit(_) => ErrorKind::Api,
        }
    }

    pub(crate) fn field(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self::Field {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// Anthropic error types, each with its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// 400
    #[serde(rename = "invalid_request_error")]
    InvalidRequest,
    /// 401
    #[serde(rename = "authentication_error")]
    Authentication,
    /// 402
    #[serde(rename = "billing_error")]
    Billing,
    /// 403
    #[serde(rename = "permission_error")]
    Permission,
    /// 404
    #[serde(rename = "not_found_error")]
    NotFound,
    /// 413
    #[serde(rename = "request_too_large")]
    RequestTooLarge,
    /// 429
    #[serde(rename = "rate_limit_error")]
    RateLimit,
    /// 500
    #[serde(rename = "api_error")]
    Api,
    /// 504
    #[serde(rename = "timeout_error")]
    Timeout,
    /// 529
    #[serde(rename = "overloaded_error")]
    Overloaded,
}

impl ErrorKind {
    /// The `error.type` string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request_error",
            Self::Authentication => "authentication_error",
            Self::Billing => "billing_error",
            Self::Permission => "permission_error",
            Self::NotFound => "not_found_error",
            Self::RequestTooLarge => "request_too_large",
            Self::RateLimit => "rate_limit_error",
            Self::Api => "api_error",
            Self::Timeout => "timeout_error",
            Self::Overloaded => "overloaded_error",
        }
    }

    /// Parse an `error.type` string; unknown strings are `api_error`.
    #[must_use]
    pub fn from_type_str(s: &str) -> Self {
        match s {
            "invalid_request_error" => Self::InvalidRequest,
            "authentication_error" => Self::Authentication,
            "billing_error" => Self::Billing,
            "permission_error" => Self::Permission,
            "not_found_error" => Self::NotFound,
            "request_too_large" => Self::RequestTooLarge,
            "rate_limit_error" => Self::RateLimit,
            "timeout_error" => Self::Timeout,
            "overloaded_error" => Self::Overloaded,
            _ => Self::Api,
        }
    }

    /// The HTTP status Anthropic answers this error with.
    #[must_use]
    pub fn status(self) -> u16 {
        match self {
            Self::InvalidRequest => 400,
            Self::Authentication => 401,
            Self::Billing => 402,
            Self::Permission => 403,
            Self::NotFound => 404,
            Self::RequestTooLarge => 413,
            Self::RateLimit => 429,
            Self::Api => 500,
            Self::Timeout => 504,
            Self::Overloaded => 529,
        }
    }

    /// The error kind for an upstream HTTP status (OpenAI-compatible servers).
    #[must_use]
    pub fn from_upstream_status(status: u16) -> Self {
        match status {
            401 => Self::Authentication,
            402 => Self::Billing,
            403 => Self::Permission,
            404 => Self::NotFound,
            413 => Self::RequestTooLarge,
            429 => Self::RateLimit,
            503 | 529 => Self::Overloaded,
            504 | 408 => Self::Timeout,
            400..=499 => Self::InvalidRequest,
            _ => Self::Api,
        }
    }
}
