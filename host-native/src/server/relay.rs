//! The only relay: what a provider answered ([`Answer`]) becomes the client's response.
//!
//! Streaming clients get the response headers as soon as the provider resolved (the upstream
//! answered), then every piece of SSE the moment the provider's source yields it (no
//! buffering), `ping` events while the client has received nothing for `ping_interval`, and —
//! when nothing reached the client for `idle_timeout` — a well-formed `error` event written by
//! the source's translator. Non-streaming clients get the same stream folded into one message by
//! the core ([`SseFolder`]). A client that disconnects drops the response body; the relay's next
//! send fails, the source is dropped, and with it the upstream request (its connection closed, a
//! Fabstir prompt cancelled).
//!
//! ```text
//!   Answer::Complete ─────────────────────────────────────────► JSON as the upstream sent it
//!   Answer::Stream ──client_stream──► [next ─► send]* ─► End ─► SSE body ends
//!                 │                     │ silent ping_interval ─► ping
//!                 │                     │ silent idle_timeout  ─► source.fail(timeout) ─► End
//!                 │                     └ send failed (client gone) ─► drop source (cancel)
//!                 └─not streaming──► [next ─► fold]* ─► End ─► folded Message or error envelope
//! ```

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt;
use http::{Response, StatusCode};
use tokio::sync::mpsc;
use tracing::{Instrument, error, info, warn};

use bridge_core::anthropic::events::{ApiError, ErrorKind};
use bridge_core::api::SseFolder;

use super::body::ResponseBody;
use super::json_response;
use super::observe::{OpenStream, Outcome, Tally};
use crate::provider::{Answer, EventSource, Next};

/// Exact bytes of a keep-alive event.
const PING: &[u8] = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";

/// Chunks buffered between the relay task and a slow client before the relay waits.
const CHANNEL_DEPTH: usize = 64;

/// Most SSE a non-streaming answer may fold before it is ended with an error (an endless
/// upstream would otherwise grow the folded message until the process runs out of memory).
const MAX_FOLDED_BYTES: usize = 64 << 20;

/// How answers are relayed.
#[derive(Debug, Clone, Copy)]
pub struct Relay {
    /// Client silence before a `ping`.
    pub ping_interval: Duration,
    /// Silence (nothing for the client) before the answer is ended with a `timeout_error`.
    pub idle_timeout: Duration,
    /// Longest an answer may take in all (`--stream-timeout`), if limited.
    pub stream_timeout: Option<Duration>,
}

impl Relay {
    /// The response for `answer`; with an `outcome`, the request's line is logged and the
    /// metrics moved when the answer is over ([`super::observe`]).
    pub async fn respond(self, answer: Answer, outcome: Option<Outcome>) -> Response<ResponseBody> {
        match answer {
            Answer::Complete { status, body } => {
                let body = String::from_utf8_lossy(&body).into_owned();
                if let Some(outcome) = outcome {
                    let mut tally = Tally::default();
                    tally.saw_folded(&body);
                    outcome.finish(status, &tally);
                }
                json_response(
                    StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
                    body,
                )
            }
            Answer::Stream {
                client_stream: false,
                source,
            } => {
                let _open = OpenStream::open();
                let response = self.fold(source).await;
                if let Some(outcome) = outcome {
                    let tally = response_tally(&response);
                    outcome.finish(response.status().as_u16(), &tally);
                }
                response
            }
            Answer::Stream {
                client_stream: true,
                source,
            } => {
                let (tx, rx) = mpsc::channel::<Bytes>(CHANNEL_DEPTH);
                let span = tracing::Span::current();
                let on_panic = tx.clone();
                let relay = AssertUnwindSafe(self.stream(source, tx, outcome)).catch_unwind();
                tokio::spawn(
                    async move {
                        if let Err(panic) = relay.await {
                            error!(panic = panic_message(&*panic), "relaying a stream panicked");
                            let api = ApiError::new(ErrorKind::Api, RELAY_FAILED);
                            let last = format!("event: error\ndata: {}\n\n", api.envelope());
                            let _ = on_panic.send(Bytes::from(last)).await;
                        }
                    }
                    .instrument(span),
                );
                super::sse_response(rx)
            }
        }
    }

    /// Everything the source yields, folded into the message a non-streaming client gets.
    async fn fold(self, source: Box<dyn EventSource>) -> Response<ResponseBody> {
        match AssertUnwindSafe(self.fold_source(source))
            .catch_unwind()
            .await
        {
            Ok(response) => response,
            Err(panic) => {
                error!(
                    panic = panic_message(&*panic),
                    "relaying an answer panicked"
                );
                let api = ApiError::new(ErrorKind::Api, RELAY_FAILED);
                json_response(StatusCode::INTERNAL_SERVER_ERROR, api.envelope())
            }
        }
    }

    async fn fold_source(self, mut source: Box<dyn EventSource>) -> Response<ResponseBody> {
        let mut folder = SseFolder::default();
        let mut folded = 0usize;
        let started = Instant::now();
        loop {
            if self.out_of_time(started) {
                folder.feed(
                    source
                        .fail(ErrorKind::Timeout, &self.stream_timeout_message())
                        .as_bytes(),
                );
                break;
            }
            let wait = self.idle_timeout.min(self.time_left(started));
            match tokio::time::timeout(wait, source.next()).await {
                Ok(Next::Sse(sse)) => {
                    folded += sse.len();
                    if folded > MAX_FOLDED_BYTES {
                        let message = format!(
                            "the answer grew past {} MiB; ask for a stream (\"stream\": true) to \
                             receive answers this large",
                            MAX_FOLDED_BYTES >> 20
                        );
                        folder = SseFolder::default();
                        folder.feed(source.fail(ErrorKind::Api, &message).as_bytes());
                        break;
                    }
                    folder.feed(sse.as_bytes());
                }
                Ok(Next::End) => break,
                Err(_) if self.out_of_time(started) => {}
                Err(_) => {
                    folder.feed(
                        source
                            .fail(ErrorKind::Timeout, &self.idle_message())
                            .as_bytes(),
                    );
                    break;
                }
            }
        }
        let mut finished = folder.finish();
        if finished.status != 200 {
            finished.body = crate::redact::redact(&finished.body).into_owned();
        }
        if finished.status != 200 {
            warn!(status = finished.status, body = %finished.body, "answer folded into an error");
        }
        json_response(
            StatusCode::from_u16(finished.status).unwrap_or(StatusCode::BAD_GATEWAY),
            finished.body,
        )
    }

    /// Relay to a streaming client until the answer ends or the client leaves; then the
    /// request's line.
    async fn stream(
        self,
        source: Box<dyn EventSource>,
        tx: mpsc::Sender<Bytes>,
        outcome: Option<Outcome>,
    ) {
        let _open = OpenStream::open();
        let mut tally = Tally::default();
        self.stream_source(source, tx, &mut tally).await;
        if let Some(outcome) = outcome {
            outcome.finish(200, &tally);
        }
    }

    async fn stream_source(
        self,
        mut source: Box<dyn EventSource>,
        tx: mpsc::Sender<Bytes>,
        tally: &mut Tally,
    ) {
        let started = Instant::now();
        let mut last_output = Instant::now();
        let mut last_sent = Instant::now();
        loop {
            if self.out_of_time(started) {
                let last = source.fail(ErrorKind::Timeout, &self.stream_timeout_message());
                tally.saw(&last);
                let _ = tx.send(Bytes::from(last)).await;
                return;
            }
            let idle_left = self.idle_timeout.saturating_sub(last_output.elapsed());
            let ping_left = self.ping_interval.saturating_sub(last_sent.elapsed());
            let wait = idle_left
                .min(ping_left)
                .min(self.time_left(started))
                .max(Duration::from_millis(1));
            // `next` is cancel-safe: a ping in between loses nothing. A client that leaves is
            // noticed at once (not at the next send), so the upstream request and the engine
            // instance are freed at once.
            let next = tokio::select! {
                next = tokio::time::timeout(wait, source.next()) => next,
                () = tx.closed() => {
                    info!(
                        ms = started.elapsed().as_millis() as u64,
                        "client disconnected; upstream request cancelled"
                    );
                    return;
                }
            };
            let out = match next {
                Ok(Next::Sse(sse)) => {
                    last_output = Instant::now();
                    // An upstream's error may quote a key back.
                    if tally.saw(&sse) {
                        Bytes::from(crate::redact::redact(&sse).into_owned())
                    } else {
                        Bytes::from(sse)
                    }
                }
                Ok(Next::End) => return,
                Err(_) if self.out_of_time(started) => continue,
                Err(_) if last_output.elapsed() >= self.idle_timeout => {
                    let last = source.fail(ErrorKind::Timeout, &self.idle_message());
                    tally.saw(&last);
                    let _ = tx.send(Bytes::from(last)).await;
                    return;
                }
                Err(_) => Bytes::from_static(PING),
            };
            last_sent = Instant::now();
            if tx.send(out).await.is_err() {
                info!(
                    ms = started.elapsed().as_millis() as u64,
                    "client disconnected; upstream request cancelled"
                );
                return;
            }
        }
    }

    /// Whether the answer has run past `--stream-timeout`.
    fn out_of_time(self, started: Instant) -> bool {
        self.stream_timeout
            .is_some_and(|limit| started.elapsed() >= limit)
    }

    /// Time left before `--stream-timeout` (a long time when there is none).
    fn time_left(self, started: Instant) -> Duration {
        self.stream_timeout
            .map_or(Duration::from_secs(86_400), |limit| {
                limit.saturating_sub(started.elapsed())
            })
    }

    fn stream_timeout_message(self) -> String {
        format!(
            "the answer took longer than {} s in all (--stream-timeout)",
            self.stream_timeout.unwrap_or_default().as_secs()
        )
    }

    fn idle_message(self) -> String {
        format!(
            "the upstream sent nothing for {} s (--idle-timeout)",
            self.idle_timeout.as_secs()
        )
    }
}

/// What the client is told when relaying its answer failed in the bridge itself.
const RELAY_FAILED: &str =
    "the bridge failed while relaying this answer (a bug in the bridge; its log has the details)";

/// A panic's message, for the log.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// What a folded (complete) response says, for the request's line.
fn response_tally(response: &Response<ResponseBody>) -> Tally {
    let mut tally = Tally::default();
    if let ResponseBody::Full(Some(bytes)) = response.body() {
        tally.saw_folded(&String::from_utf8_lossy(bytes));
    }
    tally
}
