//! `POST /v1/messages`: convert, send upstream, relay the translated stream as it arrives.
//!
//! Streaming clients get the response headers and `message_start` as soon as the upstream
//! answers, then every translated event the moment its upstream bytes arrive (no buffering),
//! `ping` events while the upstream is silent, and a well-formed `error` event if the upstream
//! fails mid-stream. Non-streaming clients get the same stream folded into one message by the
//! core. A client that disconnects drops the response body; the relay's next send fails and the
//! upstream request is dropped with it (its connection is closed, cancelling generation).

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::mpsc;
use tracing::{Instrument, debug, info, warn};

use bridge_core::anthropic::events::ErrorKind;
use bridge_core::api::StreamOptions;

use super::body::ResponseBody;
use super::{AppState, json_response};
use crate::engine::{EngineError, StreamSession};
use crate::error::BridgeError;

/// Exact bytes of a keep-alive event.
const PING: &[u8] = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";

/// Chunks buffered between the relay task and a slow client before the relay waits.
const CHANNEL_DEPTH: usize = 64;

pub(super) async fn create(
    state: &AppState,
    body: Bytes,
) -> Result<Response<ResponseBody>, BridgeError> {
    if let Some(fabstir) = &state.fabstir {
        return crate::fabstir::provider::create(fabstir, &*state.engine, &body).await;
    }
    let converted = state.engine.convert_request(&body, &state.convert)?;
    for warning in &converted.warnings {
        debug!(%warning, "dropped in translation");
    }
    info!(
        model = %converted.client_model,
        upstream_model = %converted.upstream_model,
        stream = converted.client_stream,
        input_tokens_estimate = converted.input_tokens_estimate,
        "forwarding"
    );
    let upstream = send_upstream(state, &body, converted.body).await?;
    let options = StreamOptions {
        stream: converted.client_stream,
        model: converted.client_model,
        input_tokens_estimate: converted.input_tokens_estimate,
        id_seed: crate::ids::seed(),
    };
    let mut session = state.engine.chat_stream(&options)?;
    let relay = Relay {
        ping_interval: state.ping_interval,
        idle_timeout: state.idle_timeout,
    };
    let body = upstream.into_body();
    if !options.stream {
        let finished = relay.run(session, body, None).await;
        let status = StatusCode::from_u16(finished.status).unwrap_or(StatusCode::BAD_GATEWAY);
        if status != StatusCode::OK {
            warn!(status = finished.status, body = %finished.body, "upstream answer folded into an error");
        }
        return Ok(json_response(status, finished.body));
    }
    let first = session.feed(b"").map_err(BridgeError::Engine)?;
    let (tx, rx) = mpsc::channel::<Bytes>(CHANNEL_DEPTH);
    // Cannot fail: the channel is new and empty.
    let _ = tx.try_send(Bytes::from(first));
    let span = tracing::Span::current();
    tokio::spawn(
        async move {
            relay.run(session, body, Some(tx)).await;
        }
        .instrument(span),
    );
    let response = super::sse_response(rx);
    Ok(response)
}

/// Send the converted request. An upstream that rejects `tool_choice` / `parallel_tool_calls`
/// (pitfall 11) gets the request once more without them, so the model chooses freely; the
/// degradation is logged.
async fn send_upstream(
    state: &AppState,
    client_body: &[u8],
    upstream_body: String,
) -> Result<hyper::Response<Incoming>, BridgeError> {
    let has_choice = upstream_body.contains("\"tool_choice\":")
        || upstream_body.contains("\"parallel_tool_calls\":");
    let retry_body = has_choice.then(|| client_body.to_vec());
    match state.upstream.chat(upstream_body).await {
        Err(BridgeError::UpstreamStatus {
            status: 400 | 422,
            message,
            ..
        }) if rejects_tool_choice(&message) && retry_body.is_some() => {
            warn!(%message, "upstream rejected tool_choice; retrying once with the model choosing (auto)");
            let mut options = state.convert.clone();
            options.drop_tool_choice = true;
            let client_body = retry_body.unwrap_or_default();
            let converted = state.engine.convert_request(&client_body, &options)?;
            state.upstream.chat(converted.body).await
        }
        other => other,
    }
}

fn rejects_tool_choice(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("tool_choice")
        || lower.contains("tool choice")
        || lower.contains("parallel_tool_calls")
}

pub(super) fn count_tokens(
    state: &AppState,
    body: &[u8],
) -> Result<Response<ResponseBody>, BridgeError> {
    let tokens = state.engine.count_tokens(body)?;
    Ok(json_response(
        StatusCode::OK,
        format!("{{\"input_tokens\":{tokens}}}"),
    ))
}

/// Moves bytes from the upstream body through the translator to the client.
#[derive(Debug, Clone, Copy)]
struct Relay {
    ping_interval: Duration,
    idle_timeout: Duration,
}

/// What one step of the relay produced.
enum Step {
    Continue,
    Stop,
}

impl Relay {
    /// Runs until the upstream ends, fails or goes silent too long, or the client leaves.
    /// Returns the translator's final output (the folded message when not streaming).
    async fn run(
        self,
        mut session: Box<dyn StreamSession>,
        mut body: Incoming,
        tx: Option<mpsc::Sender<Bytes>>,
    ) -> bridge_core::api::Finished {
        let started = Instant::now();
        let mut last_upstream = Instant::now();
        // Last time the client got bytes from us (data or ping); pings only matter when streaming.
        let mut last_sent = Instant::now();
        loop {
            let idle_left = self.idle_timeout.saturating_sub(last_upstream.elapsed());
            let wait = if tx.is_some() {
                idle_left.min(self.ping_interval.saturating_sub(last_sent.elapsed()))
            } else {
                idle_left
            };
            let step = match tokio::time::timeout(wait.max(Duration::from_millis(1)), body.frame())
                .await
            {
                Ok(Some(Ok(frame))) => {
                    last_upstream = Instant::now();
                    last_sent = last_upstream;
                    match frame.into_data() {
                        Ok(data) => match session.feed(&data) {
                            Ok(out) => send(tx.as_ref(), out).await,
                            Err(e) => {
                                return self.engine_failed(&mut *session, tx.as_ref(), &e).await;
                            }
                        },
                        Err(_) => Step::Continue,
                    }
                }
                Ok(Some(Err(e))) => {
                    warn!(error = %e, "upstream stream failed");
                    let message = format!("the upstream connection failed mid-stream: {e}");
                    return self
                        .fail(&mut *session, tx.as_ref(), ErrorKind::Api, &message)
                        .await;
                }
                Ok(None) => break,
                Err(_) => {
                    if last_upstream.elapsed() >= self.idle_timeout {
                        let message = format!(
                            "the upstream sent nothing for {} s (--idle-timeout)",
                            self.idle_timeout.as_secs()
                        );
                        return self
                            .fail(&mut *session, tx.as_ref(), ErrorKind::Timeout, &message)
                            .await;
                    }
                    match &tx {
                        Some(tx) if last_sent.elapsed() >= self.ping_interval => {
                            last_sent = Instant::now();
                            match tx.send(Bytes::from_static(PING)).await {
                                Ok(()) => Step::Continue,
                                Err(_) => Step::Stop,
                            }
                        }
                        _ => Step::Continue,
                    }
                }
            };
            if let Step::Stop = step {
                info!(
                    ms = started.elapsed().as_millis() as u64,
                    "client disconnected; upstream request cancelled"
                );
                return bridge_core::api::Finished {
                    status: 499,
                    body: String::new(),
                };
            }
        }
        match session.finish() {
            Ok(finished) => {
                if tx.is_some() {
                    send(tx.as_ref(), finished.body.clone()).await;
                }
                finished
            }
            Err(e) => self.engine_failed(&mut *session, tx.as_ref(), &e).await,
        }
    }

    async fn fail(
        self,
        session: &mut dyn StreamSession,
        tx: Option<&mpsc::Sender<Bytes>>,
        kind: ErrorKind,
        message: &str,
    ) -> bridge_core::api::Finished {
        match session.fail(kind, message) {
            Ok(out) => {
                send(tx, out).await;
                match session.finish() {
                    Ok(finished) => finished,
                    Err(_) => error_finished(kind, message),
                }
            }
            Err(e) => self.engine_failed(session, tx, &e).await,
        }
    }

    /// The engine itself failed: end the stream with an error event written by the host.
    async fn engine_failed(
        self,
        _session: &mut dyn StreamSession,
        tx: Option<&mpsc::Sender<Bytes>>,
        error: &EngineError,
    ) -> bridge_core::api::Finished {
        warn!(%error, "translation engine failed mid-stream");
        let (event, finished) = engine_failure(error);
        send(tx, event).await;
        finished
    }
}

/// The engine failed mid-response: the `error` event the host writes itself (the engine's
/// session is unusable), and the folded error.
pub(crate) fn engine_failure(error: &EngineError) -> (String, bridge_core::api::Finished) {
    let api = bridge_core::anthropic::events::ApiError::new(ErrorKind::Api, error.to_string());
    let event = format!("event: error\ndata: {}\n\n", api.envelope());
    (event, error_finished(ErrorKind::Api, &error.to_string()))
}

fn error_finished(kind: ErrorKind, message: &str) -> bridge_core::api::Finished {
    let api = bridge_core::anthropic::events::ApiError::new(kind, message);
    bridge_core::api::Finished {
        status: kind.status(),
        body: api.envelope(),
    }
}

async fn send(tx: Option<&mpsc::Sender<Bytes>>, out: String) -> Step {
    match tx {
        Some(tx) if !out.is_empty() => match tx.send(Bytes::from(out)).await {
            Ok(()) => Step::Continue,
            Err(_) => Step::Stop,
        },
        _ => Step::Continue,
    }
}
