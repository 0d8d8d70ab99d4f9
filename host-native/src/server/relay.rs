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
//!
//! For an OpenAI client ([`ClientShape::OpenAi`]) the same loop runs on the same Anthropic SSE;
//! what is sent is that SSE through the core's front (`FrontStream`: Chat chunks or Responses
//! events, `: ping` comments instead of `ping` events), and a fold is a `FrontFold` (a
//! `chat.completion` or `response` object, or an OpenAI error).

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
use bridge_core::front::transcode::{self, FrontFold, FrontStream};

use super::body::ResponseBody;
use super::json_response;
use super::observe::{OpenStream, Outcome, Tally};
use super::shape::ClientShape;
use crate::provider::{Answer, EventSource, Next};

/// Exact bytes of a keep-alive event.
const PING: &[u8] = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";

/// Keep-alive for OpenAI clients: an SSE comment (their SDKs skip comments).
const COMMENT_PING: &[u8] = b": ping\n\n";

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
    pub async fn respond(
        self,
        answer: Answer,
        outcome: Option<Outcome>,
        shape: &ClientShape,
    ) -> Response<ResponseBody> {
        let wants_stream = |client_stream: bool| match shape {
            ClientShape::Anthropic => client_stream,
            ClientShape::OpenAi { stream, .. } => *stream,
        };
        match answer {
            Answer::Complete { status, body } => {
                let text = String::from_utf8_lossy(&body).into_owned();
                if let Some(outcome) = outcome {
                    let mut tally = Tally::default();
                    tally.saw_folded(&text);
                    outcome.finish(status, &tally);
                }
                let (status, text) = match shape {
                    ClientShape::Anthropic => (status, text),
                    ClientShape::OpenAi { answer, .. } => {
                        transcode::complete(answer, status, &body)
                    }
                };
                json_response(
                    StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
                    text,
                )
            }
            Answer::Stream {
                client_stream,
                source,
            } if !wants_stream(client_stream) => {
                let _open = OpenStream::open();
                let (response, tally) = self.fold(source, Folder::new(shape)).await;
                if let Some(outcome) = outcome {
                    outcome.finish(response.status().as_u16(), &tally);
                }
                response
            }
            Answer::Stream { source, .. } => {
                let (tx, rx) = mpsc::channel::<Bytes>(CHANNEL_DEPTH);
                let span = tracing::Span::current();
                let on_panic = tx.clone();
                let openai = matches!(shape, ClientShape::OpenAi { .. });
                let front = match shape {
                    ClientShape::Anthropic => None,
                    ClientShape::OpenAi { answer, .. } => Some(FrontStream::new(answer)),
                };
                let relay =
                    AssertUnwindSafe(self.stream(source, tx, outcome, front)).catch_unwind();
                tokio::spawn(
                    async move {
                        if let Err(panic) = relay.await {
                            error!(panic = panic_message(&*panic), "relaying a stream panicked");
                            let api = ApiError::new(ErrorKind::Api, RELAY_FAILED);
                            // An OpenAI SDK raises on a `data:` object holding `error`.
                            let last = if openai {
                                format!("data: {}\n\n", bridge_core::front::openai_error_body(&api))
                            } else {
                                format!("event: error\ndata: {}\n\n", api.envelope())
                            };
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
    async fn fold(
        self,
        source: Box<dyn EventSource>,
        folder: Folder,
    ) -> (Response<ResponseBody>, Tally) {
        let openai = matches!(folder, Folder::Front(..));
        match AssertUnwindSafe(self.fold_source(source, folder))
            .catch_unwind()
            .await
        {
            Ok(folded) => folded,
            Err(panic) => {
                error!(
                    panic = panic_message(&*panic),
                    "relaying an answer panicked"
                );
                let api = ApiError::new(ErrorKind::Api, RELAY_FAILED);
                let body = if openai {
                    bridge_core::front::openai_error_body(&api)
                } else {
                    api.envelope()
                };
                (
                    json_response(StatusCode::INTERNAL_SERVER_ERROR, body),
                    Tally::failed(ErrorKind::Api.as_str()),
                )
            }
        }
    }

    async fn fold_source(
        self,
        mut source: Box<dyn EventSource>,
        mut folder: Folder,
    ) -> (Response<ResponseBody>, Tally) {
        let mut tally = Tally::default();
        let mut folded = 0usize;
        let started = Instant::now();
        let mut take = |folder: &mut Folder, sse: &str| {
            tally.saw(sse);
            folder.feed(sse.as_bytes());
        };
        loop {
            if self.out_of_time(started) {
                let last = source.fail(ErrorKind::Timeout, &self.stream_timeout_message());
                take(&mut folder, &last);
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
                        folder = folder.restarted();
                        let last = source.fail(ErrorKind::Api, &message);
                        take(&mut folder, &last);
                        break;
                    }
                    take(&mut folder, &sse);
                }
                Ok(Next::End) => break,
                Err(_) if self.out_of_time(started) => {}
                Err(_) => {
                    let last = source.fail(ErrorKind::Timeout, &self.idle_message());
                    take(&mut folder, &last);
                    break;
                }
            }
        }
        let (status, mut body) = folder.finish();
        if status != 200 {
            body = crate::redact::redact(&body).into_owned();
            warn!(status, body = %body, "answer folded into an error");
        }
        let response = json_response(
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
            body,
        );
        (response, tally)
    }

    /// Relay to a streaming client until the answer ends or the client leaves; then the
    /// request's line.
    async fn stream(
        self,
        source: Box<dyn EventSource>,
        tx: mpsc::Sender<Bytes>,
        outcome: Option<Outcome>,
        front: Option<FrontStream>,
    ) {
        let _open = OpenStream::open();
        let mut tally = Tally::default();
        let mut out = Outbound { tx, front };
        self.stream_source(source, &mut out, &mut tally).await;
        if let Some(outcome) = outcome {
            outcome.finish(200, &tally);
        }
    }

    async fn stream_source(
        self,
        mut source: Box<dyn EventSource>,
        out: &mut Outbound,
        tally: &mut Tally,
    ) {
        let started = Instant::now();
        let mut last_output = Instant::now();
        let mut last_sent = Instant::now();
        loop {
            if self.out_of_time(started) {
                let last = source.fail(ErrorKind::Timeout, &self.stream_timeout_message());
                tally.saw(&last);
                out.last(last).await;
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
                () = out.tx.closed() => {
                    info!(
                        ms = started.elapsed().as_millis() as u64,
                        "client disconnected; upstream request cancelled"
                    );
                    return;
                }
            };
            let sent = match next {
                Ok(Next::Sse(sse)) => {
                    last_output = Instant::now();
                    // An upstream's error may quote a key back.
                    if tally.saw(&sse) {
                        out.sse(crate::redact::redact(&sse).into_owned()).await
                    } else {
                        out.sse(sse).await
                    }
                }
                Ok(Next::End) => {
                    out.end().await;
                    return;
                }
                Err(_) if self.out_of_time(started) => continue,
                Err(_) if last_output.elapsed() >= self.idle_timeout => {
                    let last = source.fail(ErrorKind::Timeout, &self.idle_message());
                    tally.saw(&last);
                    out.last(last).await;
                    return;
                }
                Err(_) => out.ping().await,
            };
            last_sent = Instant::now();
            if !sent {
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

/// Where a streamed answer goes: the client's channel, through the core's front for an
/// OpenAI client.
struct Outbound {
    tx: mpsc::Sender<Bytes>,
    front: Option<FrontStream>,
}

impl Outbound {
    /// Send a run of Anthropic SSE (transcoded for an OpenAI client; a run that makes no
    /// output sends nothing). `false` when the client is gone.
    async fn sse(&mut self, sse: String) -> bool {
        let bytes = match &mut self.front {
            None => Bytes::from(sse),
            Some(front) => {
                let out = front.feed(sse.as_bytes());
                if out.is_empty() {
                    return !self.tx.is_closed();
                }
                Bytes::from(out)
            }
        };
        self.tx.send(bytes).await.is_ok()
    }

    /// A keep-alive in the client's dialect.
    async fn ping(&mut self) -> bool {
        let ping = if self.front.is_some() {
            COMMENT_PING
        } else {
            PING
        };
        self.tx.send(Bytes::from_static(ping)).await.is_ok()
    }

    /// The answer ended: an OpenAI stream gets its end (`[DONE]`, or a terminal event when the
    /// upstream never sent one).
    async fn end(&mut self) {
        if let Some(front) = &mut self.front {
            let tail = front.finish();
            if !tail.is_empty() {
                let _ = self.tx.send(Bytes::from(tail)).await;
            }
        }
    }

    /// The last SSE of an answer the relay ends (a timeout), then the end.
    async fn last(&mut self, sse: String) {
        if self.sse(sse).await {
            self.end().await;
        }
    }
}

/// What a non-streamed answer is folded into.
enum Folder {
    /// The Anthropic message (or error envelope).
    Anthropic(Box<SseFolder>),
    /// An OpenAI client's object (or OpenAI error); the answer it was made for.
    Front(Box<FrontFold>, Box<transcode::FrontAnswer>),
}

impl Folder {
    fn new(shape: &ClientShape) -> Self {
        match shape {
            ClientShape::Anthropic => Self::Anthropic(Box::default()),
            ClientShape::OpenAi { answer, .. } => {
                Self::Front(Box::new(FrontFold::new(answer)), Box::new(answer.clone()))
            }
        }
    }

    /// An empty folder of the same kind (what was folded is dropped).
    fn restarted(self) -> Self {
        match self {
            Self::Anthropic(_) => Self::Anthropic(Box::default()),
            Self::Front(_, answer) => Self::Front(Box::new(FrontFold::new(&answer)), answer),
        }
    }

    fn feed(&mut self, sse: &[u8]) {
        match self {
            Self::Anthropic(folder) => folder.feed(sse),
            Self::Front(fold, _) => fold.feed(sse),
        }
    }

    fn finish(self) -> (u16, String) {
        match self {
            Self::Anthropic(folder) => {
                let finished = folder.finish();
                (finished.status, finished.body)
            }
            Self::Front(fold, _) => fold.finish(),
        }
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
