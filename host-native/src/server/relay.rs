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

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Response, StatusCode};
use tokio::sync::mpsc;
use tracing::{Instrument, info, warn};

use bridge_core::anthropic::events::ErrorKind;
use bridge_core::api::SseFolder;

use super::body::ResponseBody;
use super::json_response;
use crate::provider::{Answer, EventSource, Next};

/// Exact bytes of a keep-alive event.
const PING: &[u8] = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";

/// Chunks buffered between the relay task and a slow client before the relay waits.
const CHANNEL_DEPTH: usize = 64;

/// How answers are relayed.
#[derive(Debug, Clone, Copy)]
pub struct Relay {
    /// Client silence before a `ping`.
    pub ping_interval: Duration,
    /// Silence (nothing for the client) before the answer is ended with a `timeout_error`.
    pub idle_timeout: Duration,
}

impl Relay {
    /// The response for `answer`.
    pub async fn respond(self, answer: Answer) -> Response<ResponseBody> {
        match answer {
            Answer::Complete { status, body } => json_response(
                StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
                String::from_utf8_lossy(&body).into_owned(),
            ),
            Answer::Stream {
                client_stream: false,
                source,
            } => self.fold(source).await,
            Answer::Stream {
                client_stream: true,
                source,
            } => {
                let (tx, rx) = mpsc::channel::<Bytes>(CHANNEL_DEPTH);
                let span = tracing::Span::current();
                tokio::spawn(self.stream(source, tx).instrument(span));
                super::sse_response(rx)
            }
        }
    }

    /// Everything the source yields, folded into the message a non-streaming client gets.
    async fn fold(self, mut source: Box<dyn EventSource>) -> Response<ResponseBody> {
        let mut folder = SseFolder::default();
        loop {
            match tokio::time::timeout(self.idle_timeout, source.next()).await {
                Ok(Next::Sse(sse)) => folder.feed(sse.as_bytes()),
                Ok(Next::End) => break,
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
        let finished = folder.finish();
        if finished.status != 200 {
            warn!(status = finished.status, body = %finished.body, "answer folded into an error");
        }
        json_response(
            StatusCode::from_u16(finished.status).unwrap_or(StatusCode::BAD_GATEWAY),
            finished.body,
        )
    }

    /// Relay to a streaming client until the answer ends or the client leaves.
    async fn stream(self, mut source: Box<dyn EventSource>, tx: mpsc::Sender<Bytes>) {
        let started = Instant::now();
        let mut last_output = Instant::now();
        let mut last_sent = Instant::now();
        loop {
            let idle_left = self.idle_timeout.saturating_sub(last_output.elapsed());
            let ping_left = self.ping_interval.saturating_sub(last_sent.elapsed());
            let wait = idle_left.min(ping_left).max(Duration::from_millis(1));
            // `next` is cancel-safe: a ping in between loses nothing.
            let out = match tokio::time::timeout(wait, source.next()).await {
                Ok(Next::Sse(sse)) => {
                    last_output = Instant::now();
                    Bytes::from(sse)
                }
                Ok(Next::End) => return,
                Err(_) if last_output.elapsed() >= self.idle_timeout => {
                    let last = source.fail(ErrorKind::Timeout, &self.idle_message());
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

    fn idle_message(self) -> String {
        format!(
            "the upstream sent nothing for {} s (--idle-timeout)",
            self.idle_timeout.as_secs()
        )
    }
}
