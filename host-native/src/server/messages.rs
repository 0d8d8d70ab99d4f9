//! `POST /v1/messages` and `POST /v1/messages/count_tokens`: route the request
//! ([`super::routes`]), hand it to each target in turn until one answers, relay what it answers
//! ([`super::relay`]). No provider-specific branch lives here.
//!
//! A target that fails before the client received a byte with an error another upstream may not
//! have ([`BridgeError::retryable`]: connect errors, timeouts, 401/403/404/408/429/5xx/529)
//! hands the request to the next; a request the upstream refused as wrong in itself (a 400)
//! goes back to the client at once. Every answer, error or not, names the target that gave it in
//! `x-claude-bridge-target: provider,model`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderValue, Response, StatusCode};
use tracing::warn;

use bridge_core::anthropic::events::ErrorKind;

use super::body::ResponseBody;
use super::observe::{Metrics, Outcome, Sender, Tally};
use super::routes::TargetEntry;
use super::shape::ClientShape;
use super::{AppState, error_response, json_response};
use crate::error::BridgeError;
use crate::gateway::Admission;
use crate::provider::Call;

/// The response header that names the target that answered.
pub const TARGET_HEADER: &str = "x-claude-bridge-target";

pub(super) async fn create(
    state: &AppState,
    call: Call,
    sender: &Arc<Sender>,
    admission: Option<Arc<Admission>>,
) -> Response<ResponseBody> {
    dispatch(
        state,
        call,
        sender,
        &ClientShape::Anthropic,
        admission,
        None,
    )
    .await
}

/// The conversation a Messages request belongs to, for pool affinity: Claude Code's
/// `x-claude-code-session-id`, else the body's `metadata.user_id` (Claude Code's holds its
/// session id too; another client's names its user).
fn session_of(call: &Call) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Body {
        metadata: Option<Metadata>,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        user_id: Option<String>,
    }
    if let Some(id) = call
        .headers
        .get("x-claude-code-session-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
    {
        return Some(id.to_owned());
    }
    serde_json::from_slice::<Body>(&call.body)
        .ok()?
        .metadata?
        .user_id
        .filter(|u| !u.is_empty())
}

/// Route an Anthropic request (a front's, or an OpenAI client's converted) and answer it in the
/// client's shape.
pub(super) async fn dispatch(
    state: &AppState,
    call: Call,
    sender: &Arc<Sender>,
    shape: &ClientShape,
    admission: Option<Arc<Admission>>,
    session: Option<String>,
) -> Response<ResponseBody> {
    let started = Instant::now();
    let routes = state.routes();
    let request_id = sender.request_id.as_str();
    let failed = |error, target: Option<&str>| failed(error, request_id, target, shape);
    // A failure before any target was tried still ends the gateway's record, and shows on the
    // dashboard.
    let refused = |error: BridgeError, model: &str, target: Option<&str>| {
        let kind = error.kind();
        let message = error.to_string();
        let response = failed(error, target);
        crate::dashboard::refused(sender, response.status().as_u16(), &message);
        if let Some(admission) = &admission {
            admission.finish(&crate::gateway::Ending {
                model: model.to_owned(),
                target: target.unwrap_or_default().to_owned(),
                status: response.status().as_u16(),
                error_kind: Some(kind.as_str().to_owned()),
                ..crate::gateway::Ending::default()
            });
        }
        response
    };
    let mut call = call;
    call.spend = admission.as_ref().map(|a| a.spend());
    // A conversation stays on one pool member (its prompt cache); asked only with pools.
    let (session, salt) = if routes.has_pools() {
        (session.or_else(|| session_of(&call)), crate::ids::seed())
    } else {
        (None, 0)
    };
    let planned = match routes.plan(&call.body, session.as_deref(), salt) {
        Ok(plan) => plan,
        Err(error) => return refused(error, "", None),
    };
    let client_model = planned.client_model.clone();
    let reason = planned.reason.clone();
    let tokens = if planned.input_tokens > 0 {
        u64::from(planned.input_tokens)
    } else {
        // Not estimated by the router: about four bytes a token.
        call.body.len() as u64 / 4
    };
    let plan: Vec<(&TargetEntry, &'static str)> = planned
        .entries
        .iter()
        .enumerate()
        .map(|(i, entry)| (*entry, planned.why(i)))
        .collect();
    // Only the targets the key may use.
    let plan = match &admission {
        Some(admission) => {
            let first = plan.first().map(|(t, _)| t.label(&client_model));
            let allowed: Vec<_> = plan
                .into_iter()
                .filter(|(t, _)| admission.allows(&t.label(&client_model)))
                .collect();
            if allowed.is_empty() {
                let target = first.unwrap_or_default();
                let error = BridgeError::Gateway(admission.refuse_target(&target));
                return refused(error, &client_model, Some(&target));
            }
            allowed
        }
        None => plan,
    };
    let now = Instant::now();
    // Skip targets whose circuit is open, unless none would be left.
    let live: Vec<_> = plan
        .iter()
        .filter(|(t, _)| !t.circuit.is_open(now) && !t.upstream.probe_failing())
        .collect();
    let all_open = live.is_empty();
    let tries = if all_open {
        plan.iter().collect()
    } else {
        live
    };
    let mut last: Option<(BridgeError, String)> = None;
    let outcome = |label: &str, attempts: usize, pick: &'static str| Outcome {
        client_model: client_model.clone(),
        target: label.to_owned(),
        route: reason.to_string(),
        pick,
        attempts,
        started,
        admission: admission.clone(),
        slot: None,
        sender: Arc::clone(sender),
    };
    for (attempt, (entry, why)) in tries.iter().enumerate() {
        let label = entry.label(&client_model);
        let handed_over = attempt + 1 < tries.len();
        // The upstream's own limits: wait for room (queue_timeout), else the next member.
        let slot = match entry.upstream.acquire(tokens).await {
            Ok(slot) => slot,
            Err(busy) => {
                Metrics::global().upstream_error(&label, "busy", handed_over);
                if handed_over {
                    warn!(target = %label, why = %busy.why, "target at its own limits; trying the next");
                }
                let error = BridgeError::UpstreamBusy {
                    target: label.clone(),
                    why: busy.why,
                    retry_after: busy.retry_after,
                };
                last = Some((error, label));
                continue;
            }
        };
        match open_with_retries(entry, &call, &label).await {
            Ok(answer) => {
                entry.circuit.success();
                let outcome = Outcome {
                    slot: Some(Arc::new(slot)),
                    ..outcome(&label, attempt + 1, why)
                };
                let relay = super::relay::Relay {
                    idle_timeout: entry.idle_timeout.unwrap_or(state.relay.idle_timeout),
                    ..state.relay
                };
                let mut response = relay.respond(answer, Some(outcome), shape).await;
                set_target(&mut response, &label);
                return response;
            }
            Err(error) if error.retryable() => {
                entry.circuit.failure(Instant::now(), &error.to_string());
                if let Some(wait) = told_to_wait(&error) {
                    entry.upstream.told_to_wait(Instant::now() + wait);
                }
                Metrics::global().upstream_error(&label, error.kind().as_str(), handed_over);
                if handed_over {
                    warn!(target = %label, %error, "target failed before answering; trying the next");
                }
                last = Some((error, label));
            }
            Err(error) => {
                let (kind, message) = (error.kind(), error.to_string());
                let response = failed(error, Some(&label));
                ended(
                    &outcome(&label, attempt + 1, why),
                    kind,
                    &message,
                    &response,
                );
                return response;
            }
        }
    }
    match last {
        Some((error, label)) => {
            let error = if all_open {
                stays_down(error, tries.last().map_or(0, |(t, _)| t.circuit.failures()))
            } else {
                error
            };
            let (kind, message) = (error.kind(), error.to_string());
            let response = failed(error, Some(&label));
            let why = tries.last().map_or("only", |(_, why)| why);
            ended(
                &outcome(&label, tries.len(), why),
                kind,
                &message,
                &response,
            );
            response
        }
        None => failed(
            BridgeError::Internal(String::from("the router gave no target")),
            None,
        ),
    }
}

/// A target that could not be reached again while its circuit was open: no client retry helps
/// within the cool-down, so say so at once ([`BridgeError::UpstreamDown`]). Other failures (an
/// upstream that answers 429 or 5xx, or answers too slowly) keep their own status and retry
/// advice.
fn stays_down(error: BridgeError, failures: u32) -> BridgeError {
    match error {
        BridgeError::UpstreamConnect { .. } => BridgeError::UpstreamDown {
            error: Box::new(error),
            failures,
        },
        other => other,
    }
}

/// Longest wait between retries of one target, whatever `retry-after` says.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(10);

/// The target's answer; a retryable failure is sent again up to the target's `retries` times,
/// waiting `retry-after` (capped at [`MAX_RETRY_WAIT`]) or 250 ms, 500 ms, 1 s, … between.
async fn open_with_retries(
    entry: &TargetEntry,
    call: &Call,
    label: &str,
) -> Result<crate::provider::Answer, BridgeError> {
    let with_defaults;
    let required;
    let defaults = match required_max_tokens(entry, call) {
        Some(max_tokens) => {
            required = with_max_tokens(&entry.defaults, max_tokens);
            &required
        }
        None => &*entry.defaults,
    };
    let call = match bridge_core::anthropic::defaults::merge_defaults(&call.body, defaults) {
        Some(body) => {
            with_defaults = Call {
                body: body.into(),
                ..call.clone()
            };
            &with_defaults
        }
        None => call,
    };
    let mut retry = 0;
    loop {
        match entry.provider.open(call.clone()).await {
            Err(error) if error.retryable() && retry < entry.retries => {
                let backoff = Duration::from_millis(250u64 << retry.min(6));
                let wait = retry_after(&error).unwrap_or(backoff).min(MAX_RETRY_WAIT);
                retry += 1;
                warn!(target = %label, %error, retry, wait_ms = wait.as_millis() as u64, "retrying the same target");
                tokio::time::sleep(wait).await;
            }
            other => return other,
        }
    }
}

/// `max_tokens` for a request that may leave it out ([`Call::max_tokens_optional`]) on a target
/// whose upstream needs one (Anthropic, a Fabstir host) and whose `defaults` name none.
pub const REQUIRED_MAX_TOKENS_DEFAULT: u64 = 32_000;

fn required_max_tokens(entry: &TargetEntry, call: &Call) -> Option<u64> {
    (call.max_tokens_optional
        && entry.provider.requires_max_tokens()
        && !entry.defaults.contains_key("max_tokens"))
    .then_some(REQUIRED_MAX_TOKENS_DEFAULT)
}

fn with_max_tokens(
    defaults: &serde_json::Map<String, serde_json::Value>,
    max_tokens: u64,
) -> serde_json::Map<String, serde_json::Value> {
    let mut defaults = defaults.clone();
    defaults.insert(String::from("max_tokens"), max_tokens.into());
    defaults
}

/// How long an upstream that answered 429 (too many requests) or 529 (overloaded) asked to be
/// left alone: its `retry-after`, else a second.
fn told_to_wait(error: &BridgeError) -> Option<Duration> {
    match error {
        BridgeError::UpstreamStatus {
            status: 429 | 529, ..
        } => Some(
            retry_after(error)
                .unwrap_or(Duration::from_secs(1))
                .min(MAX_TOLD_TO_WAIT),
        ),
        _ => None,
    }
}

/// The longest an upstream's `retry-after` keeps it out of its pools.
const MAX_TOLD_TO_WAIT: Duration = Duration::from_secs(300);

/// An upstream's `retry-after` in seconds, if it gave one.
fn retry_after(error: &BridgeError) -> Option<Duration> {
    match error {
        BridgeError::UpstreamStatus {
            retry_after: Some(value),
            ..
        } => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64),
        _ => None,
    }
}

/// The line and metrics of a request that got an error instead of an answer.
fn ended(outcome: &Outcome, kind: ErrorKind, message: &str, response: &Response<ResponseBody>) {
    outcome.finish(
        response.status().as_u16(),
        &Tally::failed(kind.as_str(), message),
    );
}

fn failed(
    error: BridgeError,
    request_id: &str,
    target: Option<&str>,
    shape: &ClientShape,
) -> Response<ResponseBody> {
    warn!(kind = error.kind().as_str(), fault = ?error.fault(), %error, "request failed");
    let mut response = error_response::error_response_in(shape.envelope(), error, request_id);
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
        return Ok(state
            .relay
            .respond(answer?, None, &ClientShape::Anthropic)
            .await);
    }
    Ok(json_response(
        StatusCode::OK,
        format!("{{\"input_tokens\":{estimate}}}"),
    ))
}
