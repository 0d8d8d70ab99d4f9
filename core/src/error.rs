//! Errors of the core's operations, typed per operation.
//!
//! The host maps them to HTTP responses in one place; each carries the Anthropic error kind it
//! becomes, so the core decides whose fault it was and the host only renders it.

use crate::anthropic::events::ErrorKind;

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
