//! The stream every HTTP provider answers with: the upstream's body, one chunk at a time,
//! through the core's translator of the provider's dialect ([`crate::engine::StreamSession`]),
//! with an engine failure turned into a well-formed `error` event.

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
        match warning.strip_prefix(bridge_core::translate::chat_request::REPAIRED) {
            Some(repair) => warn!(%repair, "repaired the conversation history"),
            None => debug!(%warning, "dropped in translation"),
        }
    }
}

/// An upstream's HTTP body through the core's translator of its dialect.
pub struct TranslatedSource {
    session: Box<dyn StreamSession>,
    body: Incoming,
    /// `message_start` was asked for (it goes out as soon as the upstream answered).
    started: bool,
    done: bool,
}

impl std::fmt::Debug for TranslatedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranslatedSource")
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
            started: false,
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
                match self.body.frame().await {
                    Some(Ok(frame)) => {
                        let Ok(data) = frame.into_data() else {
                            continue;
                        };
                        let fed = self.session.feed(&data);
                        if let Some(next) = self.output(fed) {
                            return next;
                        }
                    }
                    Some(Err(e)) => {
                        warn!(error = %e, "upstream stream failed");
                        let message = format!("the upstream connection failed mid-stream: {e}");
                        return Next::Sse(self.fail(ErrorKind::Api, &message));
                    }
                    None => {
                        self.done = true;
                        let last = self.session.finish(&StreamEnd::default()).map(|f| f.body);
                        return self.output(last).unwrap_or(Next::End);
                    }
                }
            }
        })
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> String {
        self.done = true;
        let ended = self
            .session
            .fail(kind, message)
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
