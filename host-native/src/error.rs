//! Every way a request can fail (`server::error_response` turns one into an HTTP response).
//!
//! Each variant knows whose fault it was ([`Fault`]), so logs and metrics can tell a client's
//! bad request from an upstream outage from a bridge bug (linkerd's error rescue, pingora's
//! `ErrorSource`). The response body is always Anthropic's envelope,
//! `{"type":"error","error":{"type":…,"message":…},"request_id":…}`, with a message that says
//! what to fix.

use http::{HeaderValue, StatusCode};

use bridge_core::anthropic::events::ErrorKind;

use crate::engine::EngineError;
use crate::gateway::GatewayError;
use crate::gateway::limits::LimitRefusal;

fn gateway_kind(error: &GatewayError) -> ErrorKind {
    match error {
        GatewayError::Key(_) => ErrorKind::Authentication,
        GatewayError::NotAdmin(_) | GatewayError::Target { .. } => ErrorKind::Permission,
        GatewayError::Limit(LimitRefusal::Rate { .. }) => ErrorKind::RateLimit,
        GatewayError::Limit(LimitRefusal::Budget { .. }) => ErrorKind::Billing,
        GatewayError::Limit(LimitRefusal::StoreDown(_)) | GatewayError::Store(_) => {
            ErrorKind::Overloaded
        }
        GatewayError::Invalid(_) | GatewayError::Conflict(_) => ErrorKind::InvalidRequest,
        GatewayError::NotFound(_) => ErrorKind::NotFound,
    }
}

fn gateway_status(error: &GatewayError) -> u16 {
    match error {
        GatewayError::Conflict(_) => 409,
        GatewayError::Limit(LimitRefusal::StoreDown(_)) | GatewayError::Store(_) => 503,
        other => gateway_kind(other).status(),
    }
}

/// `error` and every error that caused it, joined by `: ` (what a log or message should say:
/// reqwest's and hyper's own text names only the outermost layer).
#[must_use]
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whose fault a failure was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The client sent something wrong.
    Client,
    /// The upstream model server failed or refused.
    Upstream,
    /// The bridge itself failed.
    Bridge,
}

/// A failed request.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The request body could not be translated.
    #[error("{0}")]
    Engine(#[from] EngineError),
    /// No route for this method and path.
    #[error("{method} {path} is not a route of this bridge (try POST /v1/messages)")]
    NotFound {
        /// Method.
        method: String,
        /// Path.
        path: String,
    },
    /// No request of this Claude Code session reached this bridge (with the caller's key) yet:
    /// what the status line hears before a session's first request, so it is logged at debug
    /// ([`BridgeError::expected`]).
    #[error("no request of Claude Code session {id} reached this bridge with your key yet")]
    NoSuchSession {
        /// The session's id.
        id: String,
    },
    /// A known path asked with a method it does not answer.
    #[error("{path} does not answer {method}; it answers {allow}")]
    MethodNotAllowed {
        /// Method.
        method: String,
        /// Path.
        path: String,
        /// The methods it answers (the `allow` header).
        allow: &'static str,
    },
    /// Large request bodies in flight hold the whole body budget, and it did not free up in time.
    #[error(
        "the bridge is reading as many large request bodies as it holds at once ({budget} bytes, --body-budget-bytes); try again in a moment"
    )]
    BodiesBusy {
        /// The budget.
        budget: usize,
    },
    /// The connection came past `--max-connections` (only probes are served on it).
    #[error(
        "the bridge is serving its most connections ({max_connections}, --max-connections); try again in a moment"
    )]
    AtCapacity {
        /// The cap.
        max_connections: usize,
    },
    /// Refused before routing (a foreign browser origin, a rebound `Host`, a POST that is not JSON).
    #[error("{0}")]
    Refused(#[from] crate::guard::Refusal),
    /// The gateway refused: a key, a target, a limit or budget, an admin request.
    #[error("{0}")]
    Gateway(#[from] crate::gateway::GatewayError),
    /// Missing or wrong client key.
    #[error(
        "invalid x-api-key: this bridge requires the key set with --client-key / CLAUDE_BRIDGE_CLIENT_KEY"
    )]
    Unauthorized,
    /// The body exceeds the limit.
    #[error("request body is larger than the bridge's limit of {limit} bytes (--max-body-bytes)")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The body could not be read from the client.
    #[error("could not read the request body: {0}")]
    ClientBody(String),
    /// The client stopped sending its body.
    #[error("the request body stopped arriving: nothing came for {seconds} s (--client-timeout)")]
    ClientStalled {
        /// The limit.
        seconds: u64,
    },
    /// The upstream answered with an error status.
    #[error("{message}")]
    UpstreamStatus {
        /// The Anthropic error type it maps to.
        kind: ErrorKind,
        /// The upstream's status.
        status: u16,
        /// What the upstream said.
        message: String,
        /// `retry-after` from the upstream, kept.
        retry_after: Option<HeaderValue>,
    },
    /// The upstream could not be reached.
    #[error("could not reach the upstream at {url}: {reason}")]
    UpstreamConnect {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The upstream did not answer in time.
    #[error("the upstream at {url} did not answer within {seconds} s (--first-byte-timeout)")]
    UpstreamTimeout {
        /// The URL.
        url: String,
        /// The limit.
        seconds: u64,
    },
    /// A host (Fabstir) failed or refused before answering anything; the message names it.
    #[error("{message}")]
    Host {
        /// The Anthropic error type: `api_error` (502), `overloaded_error` (529),
        /// `timeout_error` (504), `billing_error` (the spending cap), `invalid_request_error`
        /// (the prompt does not fit the host's model).
        kind: ErrorKind,
        /// What the host said, naming it.
        message: String,
    },
    /// A target whose circuit was open (it failed [`crate::server::routes::Circuit::THRESHOLD`]
    /// times in a row) could not be reached again: the client is told at once, with what
    /// failed, instead of being left to retry into it.
    #[error(
        "{error} — {failures} failures in a row, so the bridge answers at once instead of letting \
         the client retry (`claude-bridge doctor` checks the upstream)"
    )]
    UpstreamDown {
        /// The last failure (a connect error).
        error: Box<BridgeError>,
        /// Failures in a row.
        failures: u32,
    },
    /// The target's upstream stayed at its own limits (`max_parallel`, `rpm`, `tpm`, a 429's
    /// `retry-after`) for the provider's whole `queue_timeout`, and no other target was left.
    #[error(
        "{target} is at its own limit ({why}) and stayed there for its queue_timeout; try again in {} s",
        retry_after.as_secs().max(1)
    )]
    UpstreamBusy {
        /// `provider,model`.
        target: String,
        /// Which limit.
        why: String,
        /// When it may have room.
        retry_after: std::time::Duration,
    },
    /// The bridge could not build or send the upstream request.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The status of an error that is the upstream's (or its configuration's) and that retrying
/// cannot fix: `424 Failed Dependency`. Measured with Claude Code 2.1.330: with
/// `x-should-retry: false` it shows `API Error: 424 <message>` once, while a 5xx adds "This is a
/// server-side issue, usually temporary — try again", a 401/403 "Failed to authenticate" and a
/// 404 "issue with the selected model". OpenAI clients get 400 ([`crate::server::error_response`]):
/// the Codex CLI retries every other status.
pub const FAILED_DEPENDENCY: u16 = 424;

impl BridgeError {
    /// Anthropic error type.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Engine(e) => e.kind(),
            Self::NotFound { .. } | Self::NoSuchSession { .. } => ErrorKind::NotFound,
            Self::MethodNotAllowed { .. } => ErrorKind::InvalidRequest,
            Self::AtCapacity { .. } | Self::BodiesBusy { .. } => ErrorKind::Overloaded,
            Self::Refused(refusal) if refusal.status() == StatusCode::FORBIDDEN => {
                ErrorKind::Permission
            }
            Self::Refused(_) => ErrorKind::InvalidRequest,
            Self::Gateway(e) => gateway_kind(e),
            Self::Unauthorized => ErrorKind::Authentication,
            Self::TooLarge { .. } => ErrorKind::RequestTooLarge,
            Self::ClientBody(_) | Self::ClientStalled { .. } => ErrorKind::InvalidRequest,
            Self::UpstreamStatus { kind, .. } | Self::Host { kind, .. } => *kind,
            Self::UpstreamConnect { .. } | Self::UpstreamDown { .. } | Self::Internal(_) => {
                ErrorKind::Api
            }
            Self::UpstreamTimeout { .. } => ErrorKind::Timeout,
            Self::UpstreamBusy { .. } => ErrorKind::RateLimit,
        }
    }

    /// HTTP status of the response.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        let code = match self {
            // Unreachable upstream: a gateway error, retried by Anthropic clients (≥ 500).
            Self::UpstreamConnect { .. } => 502,
            Self::Refused(refusal) => refusal.status().as_u16(),
            Self::Gateway(e) => gateway_status(e),
            Self::ClientStalled { .. } => 408,
            Self::MethodNotAllowed { .. } => 405,
            // The upstream refused the bridge's own key (not the client's 401), or stays down.
            Self::UpstreamStatus {
                kind: ErrorKind::Api,
                status: 401 | 403,
                ..
            }
            | Self::UpstreamDown { .. } => FAILED_DEPENDENCY,
            // A host that failed is a bad gateway, not the bridge's own 500.
            Self::Host {
                kind: ErrorKind::Api,
                ..
            } => 502,
            _ => self.kind().status(),
        };
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// An answer the client expects in its normal course (logged at debug, not as a failure).
    #[must_use]
    pub fn expected(&self) -> bool {
        matches!(self, Self::NoSuchSession { .. })
    }

    /// Whose fault it was.
    #[must_use]
    pub fn fault(&self) -> Fault {
        match self {
            Self::Engine(EngineError::Trap(_) | EngineError::Busy(_))
            | Self::Gateway(
                GatewayError::Store(_) | GatewayError::Limit(LimitRefusal::StoreDown(_)),
            )
            | Self::Internal(_)
            | Self::AtCapacity { .. }
            | Self::BodiesBusy { .. } => Fault::Bridge,
            Self::Engine(EngineError::Request { kind, .. }) if *kind == ErrorKind::Api => {
                Fault::Bridge
            }
            Self::Engine(_)
            | Self::NotFound { .. }
            | Self::NoSuchSession { .. }
            | Self::MethodNotAllowed { .. }
            | Self::Refused(_)
            | Self::Gateway(
                GatewayError::Key(_)
                | GatewayError::NotAdmin(_)
                | GatewayError::Target { .. }
                | GatewayError::Limit(LimitRefusal::Rate { .. } | LimitRefusal::Budget { .. })
                | GatewayError::Invalid(_)
                | GatewayError::Conflict(_)
                | GatewayError::NotFound(_),
            )
            | Self::Unauthorized
            | Self::TooLarge { .. }
            | Self::ClientBody(_)
            | Self::ClientStalled { .. }
            | Self::Host {
                kind: ErrorKind::InvalidRequest,
                ..
            } => Fault::Client,
            Self::UpstreamStatus { .. }
            | Self::Host { .. }
            | Self::UpstreamConnect { .. }
            | Self::UpstreamTimeout { .. }
            | Self::UpstreamDown { .. }
            | Self::UpstreamBusy { .. } => Fault::Upstream,
        }
    }

    /// Whether the client should not retry: errors that repeating the same request cannot fix
    /// (the client's request, the upstream refusing the bridge's key or a permission, a model
    /// it does not have, a spending cap). Transient ones (408, 429, 5xx, timeouts) may be retried.
    #[must_use]
    pub fn final_for_client(&self) -> bool {
        match self {
            Self::UpstreamStatus { status, .. } => matches!(status, 401..=404),
            Self::UpstreamDown { .. } => true,
            // A rate limit passes (retry-after says when); a spent budget does not.
            Self::Gateway(GatewayError::Limit(LimitRefusal::Rate { .. })) => false,
            Self::Host { kind, .. } => {
                matches!(kind, ErrorKind::Billing | ErrorKind::InvalidRequest)
            }
            _ => matches!(self.fault(), Fault::Client),
        }
    }

    /// Whether another target may be tried (a router's fallback): the upstream could not be
    /// reached or answered in time, or refused for a reason another upstream may not have
    /// (401/403/404/408/429/5xx/529) — never a request that is wrong in itself.
    #[must_use]
    pub fn retryable(&self) -> bool {
        match self {
            Self::UpstreamConnect { .. }
            | Self::UpstreamTimeout { .. }
            | Self::UpstreamBusy { .. } => true,
            Self::UpstreamStatus { status, .. } => {
                matches!(status, 401 | 403 | 404 | 408 | 429) || *status >= 500
            }
            Self::Host { kind, .. } => *kind != ErrorKind::InvalidRequest,
            _ => false,
        }
    }
}
