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
//! what is sent is that SSE through a front translator of the engine (Chat chunks or Responses
//! events, `: ping` comments instead of `ping` events), and a fold is the same translator
//! folding (a `chat.completion` or `response` object, or an OpenAI error). An engine that fails
//! there (a trap) ends the answer with an error the client reads, like a panic in the relay.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt;
use http::{Response, StatusCode};
use tokio::sync::mpsc;
use tracing::{Instrument, error, info, warn};

use bridge_core::anthropic::events::{ApiError, ErrorKind};
use bridge_core::api::{SseFolder, StreamEnd};

use super::body::ResponseBody;
use super::json_response;
use super::observe::{OpenStream, Outcome, Tally};
use super::shape::{self, ClientShape, OpenAiClient};
use crate::engine::{EngineError, StreamSession};
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
            ClientShape::OpenAi(client) => client.stream(),
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
                    ClientShape::OpenAi(client) => client.complete(status, &body),
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
                let folder = match Folder::new(shape) {
                    Ok(folder) => folder,
                    Err(e) => return engine_failed(shape, &e, outcome),
                };
                let (response, tally) = self.fold(source, folder, shape).await;
                if let Some(outcome) = outcome {
                    outcome.finish(response.status().as_u16(), &tally);
                }
                response
            }
            Answer::Stream { source, .. } => {
                let front = match shape {
                    ClientShape::Anthropic => None,
                    ClientShape::OpenAi(client) => match client.session(true) {
                        Ok(session) => Some(session),
                        Err(e) => return engine_failed(shape, &e, outcome),
                    },
                };
                let (tx, rx) = mpsc::channel::<Bytes>(CHANNEL_DEPTH);
                let span = tracing::Span::current();
                let on_panic = tx.clone();
                // Made only if the relay panics: not on every answer's way to its first token.
                let panic_shape = shape.clone();
                let out = Outbound {
                    finished: false,
                    tx,
                    front,
                    shape: shape.clone(),
                    failure: None,
                };
                // A relay that panics never reaches its line: this copy writes it instead.
                let panicked_outcome = outcome.clone();
                let relay = AssertUnwindSafe(self.stream(source, out, outcome)).catch_unwind();
                tokio::spawn(
                    async move {
                        if let Err(panic) = relay.await {
                            error!(panic = panic_message(&*panic), "relaying a stream panicked");
                            let panic_sse =
                                panic_shape.error_sse(&ApiError::new(ErrorKind::Api, RELAY_FAILED));
                            let _ = on_panic.send(Bytes::from(panic_sse)).await;
                            if let Some(outcome) = panicked_outcome {
                                outcome.finish(
                                    200,
                                    &Tally::failed(ErrorKind::Api.as_str(), RELAY_FAILED),
                                );
                            }
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
        shape: &ClientShape,
    ) -> (Response<ResponseBody>, Tally) {
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
                let body = shape.error_body(&ApiError::new(ErrorKind::Api, RELAY_FAILED));
                (
                    json_response(StatusCode::INTERNAL_SERVER_ERROR, body),
                    Tally::failed(ErrorKind::Api.as_str(), RELAY_FAILED),
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
        // No pings: nothing reaches a folding client before the end.
        let mut deadlines = Deadlines::new(self, false);
        let mut take = |folder: &mut Folder, sse: String| {
            tally.saw(&sse);
            folder.feed(sse);
        };
        loop {
            if deadlines.out_of_time() {
                let last = source.fail(ErrorKind::Timeout, &self.stream_timeout_message());
                take(&mut folder, last);
                break;
            }
            let next = tokio::select! {
                biased;
                next = source.next() => Ok(next),
                due = deadlines.next_due() => Err(due),
            };
            match next {
                Ok(Next::Sse(sse)) => {
                    deadlines.output();
                    folded += sse.len();
                    if folded > MAX_FOLDED_BYTES {
                        let message = format!(
                            "the answer grew past {} MiB; ask for a stream (\"stream\": true) to \
                             receive answers this large",
                            MAX_FOLDED_BYTES >> 20
                        );
                        folder = match folder.restarted() {
                            Ok(folder) => folder,
                            Err((folder, e)) => {
                                error!(error = %e, "the engine failed restarting a fold");
                                folder
                            }
                        };
                        let last = source.fail(ErrorKind::Api, &message);
                        take(&mut folder, last);
                        break;
                    }
                    take(&mut folder, sse);
                }
                Ok(Next::End) => break,
                // Ended at the top of the loop.
                Err(Due::StreamTimeout) => {}
                Err(Due::Idle) => {
                    let last = source.fail(ErrorKind::Timeout, &self.idle_message());
                    take(&mut folder, last);
                    break;
                }
                // Not asked for (a fold has no pings).
                Err(Due::Ping) => deadlines.pinged(),
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
        mut out: Outbound,
        mut outcome: Option<Outcome>,
    ) {
        let _open = OpenStream::open();
        let mut tally = Tally::default();
        self.stream_source(source, &mut out, &mut tally, &mut outcome)
            .await;
        end_request(&mut outcome, &out, &mut tally);
    }

    async fn stream_source(
        self,
        mut source: Box<dyn EventSource>,
        out: &mut Outbound,
        tally: &mut Tally,
        outcome: &mut Option<Outcome>,
    ) {
        let mut deadlines = Deadlines::new(self, true);
        // A client that leaves is noticed at once (not at the next send), so the upstream
        // request and the engine instance are freed at once. The watch is made once.
        let client = out.tx.clone();
        let client_gone = client.closed();
        tokio::pin!(client_gone);
        loop {
            if deadlines.out_of_time() {
                let last = source.fail(ErrorKind::Timeout, &self.stream_timeout_message());
                tally.saw(&last);
                out.last(last).await;
                return;
            }
            // `next` is cancel-safe: a ping in between loses nothing.
            let next = tokio::select! {
                biased;
                next = source.next() => Ok(next),
                () = &mut client_gone => {
                    info!(
                        ms = deadlines.started.elapsed().as_millis() as u64,
                        "client disconnected; upstream request cancelled"
                    );
                    return;
                }
                due = deadlines.next_due() => Err(due),
            };
            let sent = match next {
                Ok(Next::Sse(sse)) => {
                    deadlines.output();
                    let seen = tally.saw(&sse);
                    // An upstream's error may quote a key back.
                    let sent = if seen.error {
                        out.sse(crate::redact::redact(&sse).into_owned(), seen.ends)
                            .await
                    } else {
                        out.sse(sse, seen.ends).await
                    };
                    deadlines.sent();
                    sent
                }
                Ok(Next::End) => {
                    out.end().await;
                    return;
                }
                // Ended at the top of the loop.
                Err(Due::StreamTimeout) => continue,
                Err(Due::Idle) => {
                    let last = source.fail(ErrorKind::Timeout, &self.idle_message());
                    tally.saw(&last);
                    out.last(last).await;
                    return;
                }
                Err(Due::Ping) => {
                    let sent = out.ping().await;
                    deadlines.pinged();
                    sent
                }
            };
            if out.finished {
                // The last event is queued: the request ends (its line, its ledger record) at
                // once — before the upstream is drained, and in practice before the client reads
                // the end — so an answer a client has in full is on record even if the process
                // is killed the moment after.
                end_request(outcome, out, tally);
                // The answer is complete: nothing, not a ping, follows the last event. What the
                // upstream still sends (usually its end, at once) is read for a moment, so its
                // connection can serve the next request; one that holds its connection open is
                // not waited for longer than that.
                drain(source).await;
                out.end().await;
                return;
            }
            if !sent {
                if out.failure.is_some() {
                    return;
                }
                info!(
                    ms = deadlines.started.elapsed().as_millis() as u64,
                    "client disconnected; upstream request cancelled"
                );
                return;
            }
        }
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

/// What the one timer of an answer found due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// `--stream-timeout` passed.
    StreamTimeout,
    /// Nothing for the client for `--idle-timeout`.
    Idle,
    /// The client heard nothing for the ping interval (only when pings were asked for).
    Ping,
}

/// The deadlines of one answer (its pings, the idle timeout, the stream timeout) under a single
/// timer, set to the earliest and moved only when it fires: a chunk only notes the time
/// ([`Self::output`], [`Self::sent`]), so a stream of many chunks does not arm and disarm a
/// timer for each. The streamed and the folded relay both keep one.
struct Deadlines {
    relay: Relay,
    started: Instant,
    last_output: Instant,
    /// When the client was last sent something; `None`: no pings (a fold).
    last_sent: Option<Instant>,
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl Deadlines {
    fn new(relay: Relay, pings: bool) -> Self {
        let started = Instant::now();
        let mut deadlines = Self {
            relay,
            started,
            last_output: started,
            last_sent: pings.then_some(started),
            timer: Box::pin(tokio::time::sleep_until(started.into())),
        };
        deadlines.rearm();
        deadlines
    }

    /// Whether the answer has run past `--stream-timeout`.
    fn out_of_time(&self) -> bool {
        self.relay
            .stream_timeout
            .is_some_and(|limit| self.started.elapsed() >= limit)
    }

    /// The source gave something.
    fn output(&mut self) {
        self.last_output = Instant::now();
    }

    /// Something reached the client (a chunk).
    fn sent(&mut self) {
        if self.last_sent.is_some() {
            self.last_sent = Some(Instant::now());
        }
    }

    /// A ping went out: the next one is a ping interval away.
    fn pinged(&mut self) {
        self.sent();
        self.rearm();
    }

    /// Waits until something is due (cancel-safe: dropped, it only leaves the timer where it
    /// is). When the timer fires with nothing due (a chunk moved it), it is set again.
    async fn next_due(&mut self) -> Due {
        loop {
            self.timer.as_mut().await;
            if self.out_of_time() {
                return Due::StreamTimeout;
            }
            if self.last_output.elapsed() >= self.relay.idle_timeout {
                return Due::Idle;
            }
            if self
                .last_sent
                .is_some_and(|sent| sent.elapsed() >= self.relay.ping_interval)
            {
                return Due::Ping;
            }
            self.rearm();
        }
    }

    /// Sets the timer to the earliest thing due: the client's next ping, the idle timeout or
    /// the stream timeout (at least a millisecond away, so a zero interval cannot spin).
    fn rearm(&mut self) {
        let now = Instant::now();
        let far = now + Duration::from_secs(86_400);
        let after = |from: Instant, wait: Duration| from.checked_add(wait).unwrap_or(far);
        let mut due = after(self.last_output, self.relay.idle_timeout);
        if let Some(sent) = self.last_sent {
            due = due.min(after(sent, self.relay.ping_interval));
        }
        if let Some(limit) = self.relay.stream_timeout {
            due = due.min(after(self.started, limit));
        }
        self.timer
            .as_mut()
            .reset(due.max(now + Duration::from_millis(1)).into());
    }
}

/// Longest the rest of a finished answer's upstream is read.
const DRAIN: Duration = Duration::from_secs(1);

/// The request ends (its line, its ledger record), once: a stream the front translator failed
/// ended with an error the tally could not read (an OpenAI client's error is a `data:` object,
/// not an `error` event), so that is counted first.
fn end_request(outcome: &mut Option<Outcome>, out: &Outbound, tally: &mut Tally) {
    if let Some(outcome) = outcome.take() {
        if let Some(kind) = out.failure {
            tally.fail(kind.as_str());
        }
        outcome.finish(200, tally);
    }
}

/// Read a finished answer's upstream to its end (its output is not sent: the client's answer
/// ended), for at most [`DRAIN`].
async fn drain(mut source: Box<dyn EventSource>) {
    let _ = tokio::time::timeout(DRAIN, async {
        while !matches!(source.next().await, Next::End) {}
    })
    .await;
}

/// Where a streamed answer goes: the client's channel, through a front translator for an
/// OpenAI client.
struct Outbound {
    tx: mpsc::Sender<Bytes>,
    front: Option<Box<dyn StreamSession>>,
    /// Who gets it (the error an engine failure ends the stream with).
    shape: ClientShape,
    /// The front translator failed (the error's kind); the stream was ended with an error.
    failure: Option<ErrorKind>,
    /// The answer's last event (`message_stop` or `error`) was sent: nothing may follow it, a
    /// `ping` included, so everything after it is dropped.
    finished: bool,
}

impl Outbound {
    /// Send a run of Anthropic SSE (transcoded for an OpenAI client; a run that makes no
    /// output sends nothing); `ends`: it holds the stream's last event. `false` when the client
    /// is gone or the stream had to end.
    async fn sse(&mut self, sse: String, ends: bool) -> bool {
        if self.finished {
            return false;
        }
        self.finished = ends;
        let input_len = sse.len();
        let out = match &mut self.front {
            None => return self.tx.send(Bytes::from(sse)).await.is_ok(),
            Some(front) => front.feed_owned(sse.into_bytes()),
        };
        match out {
            Ok(out) => self.send_front(out, input_len).await,
            Err(e) => {
                self.front_failed(&e).await;
                false
            }
        }
    }

    /// Sends a front translator's output for a run of `input_len` bytes, then what it held
    /// back, each piece sent before the next is made (a long Responses answer's closing
    /// events, one at a time; a long run's output, made once the run was let go).
    async fn send_front(&mut self, mut out: String, mut input_len: usize) -> bool {
        loop {
            let len = out.len();
            if len == 0 {
                if self.tx.is_closed() {
                    return false;
                }
            } else if self.tx.send(Bytes::from(out)).await.is_err() {
                return false;
            }
            // A long piece waits until the client's writer took it (every slot of the channel
            // free again), so the pieces do not pile up in the channel while a slow socket
            // writes the first.
            if len >= shape::FRONT_OUTPUT_LIMIT
                && self.tx.reserve_many(CHANNEL_DEPTH).await.is_err()
            {
                return false;
            }
            let more = match &mut self.front {
                Some(front) => shape::more_output(front.as_mut(), input_len, len),
                None => Ok(None),
            };
            input_len = 0;
            match more {
                Ok(Some(next)) => out = next,
                Ok(None) => return true,
                Err(e) => {
                    self.front_failed(&e).await;
                    return false;
                }
            }
        }
    }

    /// The front translator failed (an engine trap): the client gets an error, not a stream
    /// that stops short.
    async fn front_failed(&mut self, e: &EngineError) {
        error!(error = %e, "the engine failed writing an OpenAI client's stream");
        self.failure = Some(e.kind());
        self.front = None;
        let last = self
            .shape
            .error_sse(&ApiError::new(e.kind(), e.to_string()));
        let _ = self.tx.send(Bytes::from(last)).await;
    }

    /// A keep-alive in the client's dialect.
    async fn ping(&mut self) -> bool {
        if self.finished {
            return false;
        }
        let ping = match self.shape {
            ClientShape::Anthropic => PING,
            ClientShape::OpenAi(_) => COMMENT_PING,
        };
        self.tx.send(Bytes::from_static(ping)).await.is_ok()
    }

    /// The answer ended: an OpenAI stream gets its end (`[DONE]`, or a terminal event when the
    /// upstream never sent one).
    async fn end(&mut self) {
        if let Some(front) = &mut self.front {
            match front.finish(&StreamEnd::default()) {
                Ok(tail) if tail.body.is_empty() => {}
                Ok(tail) => {
                    self.send_front(tail.body, 0).await;
                }
                Err(e) => self.front_failed(&e).await,
            }
        }
    }

    /// The last SSE of an answer the relay ends (a timeout), then the end.
    async fn last(&mut self, sse: String) {
        if self.sse(sse, true).await {
            self.end().await;
        }
    }
}

/// What a non-streamed answer is folded into.
enum Folder {
    /// The Anthropic message (or error envelope).
    Anthropic(Box<SseFolder>),
    /// An OpenAI client's object (or OpenAI error): a front translator folding, the client it
    /// folds for, and the engine's failure if it failed.
    Front {
        session: Box<dyn StreamSession>,
        client: Box<OpenAiClient>,
        failed: Option<EngineError>,
    },
}

impl Folder {
    fn new(shape: &ClientShape) -> Result<Self, EngineError> {
        Ok(match shape {
            ClientShape::Anthropic => Self::Anthropic(Box::default()),
            ClientShape::OpenAi(client) => Self::Front {
                session: client.session(false)?,
                client: client.clone(),
                failed: None,
            },
        })
    }

    /// An empty folder of the same kind (what was folded is dropped); the old one back with
    /// the engine's error when a new translator cannot be had.
    fn restarted(self) -> Result<Self, (Self, EngineError)> {
        match self {
            Self::Anthropic(_) => Ok(Self::Anthropic(Box::default())),
            Self::Front {
                session,
                client,
                failed,
            } => match client.session(false) {
                Ok(session) => Ok(Self::Front {
                    session,
                    client,
                    failed,
                }),
                Err(e) => Err((
                    Self::Front {
                        session,
                        client,
                        failed,
                    },
                    e,
                )),
            },
        }
    }

    /// Folds a run of Anthropic SSE in (given away: a long event's data is taken, not copied).
    fn feed(&mut self, sse: String) {
        match self {
            Self::Anthropic(folder) => folder.feed_owned(sse.into_bytes()),
            Self::Front {
                session, failed, ..
            } => {
                if failed.is_none()
                    && let Err(e) = session.feed_owned(sse.into_bytes())
                {
                    *failed = Some(e);
                }
            }
        }
    }

    fn finish(self) -> (u16, String) {
        match self {
            Self::Anthropic(folder) => {
                let finished = folder.finish();
                (finished.status, finished.body)
            }
            Self::Front {
                mut session,
                client,
                failed,
            } => {
                let finished = match failed {
                    Some(e) => Err(e),
                    None => session.finish(&StreamEnd::default()),
                };
                match finished {
                    Ok(finished) => (finished.status, finished.body),
                    Err(e) => {
                        error!(error = %e, "the engine failed folding an OpenAI client's answer");
                        let shape = ClientShape::OpenAi(client);
                        let api = ApiError::new(e.kind(), e.to_string());
                        (
                            bridge_core::front::openai_status(e.kind()),
                            shape.error_body(&api),
                        )
                    }
                }
            }
        }
    }
}

/// The answer for a client whose front translator could not be had (no free engine
/// instance, a trap): an error in its envelope, and the request's line.
fn engine_failed(
    shape: &ClientShape,
    e: &EngineError,
    outcome: Option<Outcome>,
) -> Response<ResponseBody> {
    error!(error = %e, "no front translator for an OpenAI client");
    let status = bridge_core::front::openai_status(e.kind());
    if let Some(outcome) = outcome {
        outcome.finish(status, &Tally::failed(e.kind().as_str(), &e.to_string()));
    }
    let mut response = json_response(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        shape.error_body(&ApiError::new(e.kind(), e.to_string())),
    );
    if matches!(e, EngineError::Busy(_)) {
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    response
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

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;

    use super::*;

    /// A source that panics on its first `next`: a bug in the bridge in the middle of an answer.
    struct Panicking;

    impl EventSource for Panicking {
        fn next(&mut self) -> futures_util::future::BoxFuture<'_, Next> {
            Box::pin(async { panic!("a bug in the source") })
        }

        fn fail(&mut self, _kind: ErrorKind, _message: &str) -> String {
            String::new()
        }
    }

    #[tokio::test]
    async fn a_relay_that_panics_ends_the_stream_with_an_error_event() {
        let relay = Relay {
            ping_interval: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            stream_timeout: None,
        };
        let answer = Answer::Stream {
            client_stream: true,
            source: Box::new(Panicking),
        };
        let response = relay.respond(answer, None, &ClientShape::Anthropic).await;
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let expected =
            ClientShape::Anthropic.error_sse(&ApiError::new(ErrorKind::Api, RELAY_FAILED));
        assert_eq!(std::str::from_utf8(&body).unwrap(), expected);
        assert!(expected.starts_with("event: error\n"), "{expected}");
    }
}
