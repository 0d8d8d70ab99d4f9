//! The stream every HTTP provider answers with: the upstream's body, as it arrives (a chunk at
//! a time, or every chunk already waiting at once), through the core's translator of the
//! provider's dialect ([`crate::engine::StreamSession`]), with an engine failure turned into a
//! well-formed `error` event.

use bytes::{Bytes, BytesMut};
use futures_util::FutureExt;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tracing::{debug, warn};

use bridge_core::anthropic::events::ErrorKind;
use bridge_core::api::StreamEnd;

use super::{BoxFuture, EventSource, Next};
use crate::engine::{EngineError, StreamSession};

/// What a conversion dropped (debug), and the histories it repaired (warn).
pub fn log_warnings(warnings: &[String]) {
    for warning in warnings {
        if let Some(repair) = warning.strip_prefix(bridge_core::anthropic::repair::REPAIRED) {
            warn!(%repair, "repaired the conversation history");
        } else if let Some(field) =
            warning.strip_prefix(bridge_core::anthropic::fields::UNKNOWN_FIELD)
            && first_time(field)
        {
            warn!(%field, "the request has a top-level field the Messages API does not define; it is ignored (logged once per name)");
        } else {
            debug!(%warning, "dropped in translation");
        }
    }
}

/// Whether this process has not named `field` before (so each unknown field is logged once at
/// warn level, then at debug).
fn first_time(field: &str) -> bool {
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // A bound, so a client that sends ever new names cannot grow it without end.
    seen.len() < 1024 && seen.insert(field.to_owned())
}

/// Most upstream bytes gathered into one translation run (and so one write to the client).
const COALESCE_LIMIT: usize = 64 << 10;

/// How an upstream body ended.
enum Ending {
    /// Its last frame came.
    Ended,
    /// The connection failed.
    Failed(hyper::Error),
}

/// An upstream's HTTP body through the core's translator of its dialect.
///
/// Until the first translated output, each [`EventSource::next`] takes one frame at a time, so
/// the first token leaves at once. After it, `next` takes the first frame the upstream sends,
/// then every frame its connection can hand over at once (the connection task decodes one
/// frame per turn, so the source gives it turns while frames keep coming): a bridge that is
/// behind translates and writes one run where it would have made one per upstream chunk, a
/// write to the client each; one that keeps up takes frames as they come. What is gathered
/// lives in the source, so a `next` the relay drops (a ping, a timeout) loses nothing.
pub struct TranslatedSource {
    session: Box<dyn StreamSession>,
    body: Incoming,
    /// Upstream bytes taken from the body and not yet translated.
    gathered: BytesMut,
    /// The body ended, not yet told to the translator.
    ending: Option<Ending>,
    /// `message_start` was asked for (it goes out as soon as the upstream answered).
    started: bool,
    /// Something translated from the upstream's frames went out: gather from now on.
    gathering: bool,
    done: bool,
}

impl std::fmt::Debug for TranslatedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranslatedSource")
            .field("gathered", &self.gathered.len())
            .field("started", &self.started)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl TranslatedSource {
    /// `body` through `session`; `message_start` (when the dialect writes one of its own) goes
    /// out at the first `next`, as soon as the upstream answered.
    #[must_use]
    pub fn new(session: Box<dyn StreamSession>, body: Incoming) -> Self {
        Self {
            session,
            body,
            gathered: BytesMut::new(),
            ending: None,
            started: false,
            gathering: false,
            done: false,
        }
    }

    /// The engine failed: the stream ends with an error event the host writes itself.
    fn engine_failed(&mut self, error: &EngineError) -> Next {
        self.done = true;
        warn!(%error, "translation engine failed mid-stream");
        Next::Sse(engine_failure_event(error))
    }

    fn output(&mut self, result: Result<String, EngineError>) -> Option<Next> {
        match result {
            Ok(out) if out.is_empty() => None,
            Ok(out) => Some(Next::Sse(out)),
            Err(e) => Some(self.engine_failed(&e)),
        }
    }

    /// Take one body frame into `gathered`, or note how the body ended.
    fn take(&mut self, frame: Option<Result<hyper::body::Frame<Bytes>, hyper::Error>>) {
        match frame {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    self.gathered.extend_from_slice(&data);
                }
            }
            Some(Err(e)) => self.ending = Some(Ending::Failed(e)),
            None => self.ending = Some(Ending::Ended),
        }
    }

    /// Wait for a frame unless some are gathered, then gather every frame the upstream's
    /// connection can hand over without waiting for the network (up to [`COALESCE_LIMIT`]).
    async fn gather(&mut self) {
        if self.gathered.is_empty() && self.ending.is_none() {
            let frame = self.body.frame().await;
            self.take(frame);
        }
        let mut gave_a_turn = false;
        while self.gathering && self.ending.is_none() && self.gathered.len() < COALESCE_LIMIT {
            match self.body.frame().now_or_never() {
                Some(frame) => {
                    self.take(frame);
                    gave_a_turn = false;
                }
                // The connection task decodes what it already read on its next turn.
                None if !gave_a_turn => {
                    tokio::task::yield_now().await;
                    gave_a_turn = true;
                }
                None => break,
            }
        }
    }

    /// The body ended (cleanly or not): the stream's last SSE; the source is done.
    fn end(&mut self, ending: Ending) -> String {
        match ending {
            Ending::Ended => {
                self.done = true;
                match self.session.finish(&StreamEnd::default()) {
                    Ok(finished) => finished.body,
                    Err(e) => {
                        warn!(error = %e, "translation engine failed mid-stream");
                        engine_failure_event(&e)
                    }
                }
            }
            Ending::Failed(e) => {
                warn!(error = %e, "upstream stream failed");
                let message = format!("the upstream connection failed mid-stream: {e}");
                self.fail(ErrorKind::Api, &message)
            }
        }
    }
}

impl EventSource for TranslatedSource {
    fn next(&mut self) -> BoxFuture<'_, Next> {
        Box::pin(async move {
            if self.done {
                return Next::End;
            }
            if !self.started {
                self.started = true;
                let first = self.session.feed(b"");
                if let Some(next) = self.output(first) {
                    return next;
                }
            }
            loop {
                self.gather().await;
                // No await from here to the return: a dropped `next` loses nothing.
                let input = self.gathered.split();
                let mut out = if input.is_empty() {
                    String::new()
                } else {
                    match self.session.feed(&input) {
                        Ok(out) => out,
                        Err(e) => return self.engine_failed(&e),
                    }
                };
                if let Some(ending) = self.ending.take() {
                    out.push_str(&self.end(ending));
                }
                if !out.is_empty() {
                    self.gathering = true;
                    return Next::Sse(out);
                }
                if self.done {
                    return Next::End;
                }
            }
        })
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> String {
        self.done = true;
        // What a dropped `next` had gathered goes first: nothing taken from the body is lost.
        let gathered = self.gathered.split();
        let head = if gathered.is_empty() {
            Ok(String::new())
        } else {
            self.session.feed(&gathered)
        };
        let ended = head
            .and_then(|head| Ok(head + &self.session.fail(kind, message)?))
            .and_then(|out| Ok(out + &self.session.finish(&StreamEnd::default())?.body));
        ended.unwrap_or_else(|e| {
            warn!(error = %e, "translation engine failed while ending the stream");
            engine_failure_event(&e)
        })
    }
}

/// The engine failed mid-response: the `error` event the host writes itself (the engine's
/// session is unusable).
#[must_use]
pub fn engine_failure_event(error: &EngineError) -> String {
    let api = bridge_core::anthropic::events::ApiError::new(ErrorKind::Api, error.to_string());
    format!("event: error\ndata: {}\n\n", api.envelope())
}
