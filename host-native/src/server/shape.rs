//! Who asked, and so how the answer is written: every provider answers Anthropic SSE; an
//! Anthropic client gets it as it is, an OpenAI client (Chat Completions or Responses) gets it
//! through the core's front — a translator of the engine (`front_openai_chat`,
//! `front_openai_responses`; native, the embedded component or a `--core` plug-in): streamed,
//! or folded into one object, with errors in OpenAI's envelope.
//!
//! The one place that says what an error looks like to each kind of client when the bridge
//! itself ends an answer ([`ClientShape::error_body`], [`ClientShape::error_sse`]).

use std::sync::Arc;

use bridge_core::anthropic::events::{ApiError, Message};
use bridge_core::api::{Front, StreamEnd, StreamOptions};

use super::error_response::Envelope;
use super::responses_store::{Keep, Keeping};
use crate::engine::{Engine, EngineError, StreamSession};

/// How many bytes a streaming front translator makes in one call before it hands back (the
/// rest comes from feeding it an empty run, [`more_output`]): a Responses answer repeats its
/// text in four closing events, and each is written before the next is made.
pub const FRONT_OUTPUT_LIMIT: usize = 1 << 20;

/// What a streaming front translator held back after a call that took `input_len` bytes and
/// gave `output_len`: `None` when both were under [`FRONT_OUTPUT_LIMIT`] (it held nothing
/// back) or nothing more is left. (A call given a long run makes its output only when asked
/// again, once the caller has let the run go.)
///
/// # Errors
/// The engine failed.
pub fn more_output(
    session: &mut dyn StreamSession,
    input_len: usize,
    output_len: usize,
) -> Result<Option<String>, EngineError> {
    if input_len < FRONT_OUTPUT_LIMIT && output_len < FRONT_OUTPUT_LIMIT {
        return Ok(None);
    }
    let more = session.feed(&[])?;
    Ok((!more.is_empty()).then_some(more))
}

/// The client's API.
#[derive(Debug, Clone)]
pub enum ClientShape {
    /// The Anthropic Messages API (streaming or not, as the request said).
    Anthropic,
    /// An OpenAI API.
    OpenAi(Box<OpenAiClient>),
}

/// An OpenAI client's answer: the engine that writes it and the front translator's options
/// (the front dialect, the client's `stream`, the model it is told, the answer's id and time).
#[derive(Clone)]
pub struct OpenAiClient {
    engine: Arc<dyn Engine>,
    front: Front,
    options: StreamOptions,
    /// Responses: the answer is kept for later references ([`super::responses_store`]).
    keep: Option<Keep>,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("engine", &self.engine.name())
            .field("front", &self.front)
            .field("stream", &self.options.stream)
            .finish_non_exhaustive()
    }
}

impl OpenAiClient {
    /// A `front` client answered by `engine` (`options.dialect` is set to the front's).
    #[must_use]
    pub fn new(engine: Arc<dyn Engine>, front: Front, options: StreamOptions) -> Self {
        Self {
            engine,
            front,
            options: StreamOptions {
                dialect: front.dialect(),
                ..options
            },
            keep: None,
        }
    }

    /// The same client, its answer kept with `keep` (a Responses request with `store` on).
    #[must_use]
    pub fn keeping(self, keep: Option<Keep>) -> Self {
        Self { keep, ..self }
    }

    /// Whether the client asked for a stream.
    #[must_use]
    pub fn stream(&self) -> bool {
        self.options.stream
    }

    /// A front translator: Anthropic SSE in, the client's stream (`stream`) or object out.
    ///
    /// # Errors
    /// The engine failed (a trap, no free instance).
    pub fn session(&self, stream: bool) -> Result<Box<dyn StreamSession>, EngineError> {
        let session = self.engine.translator(&StreamOptions {
            stream,
            output_limit: stream.then_some(FRONT_OUTPUT_LIMIT),
            ..self.options.clone()
        })?;
        Ok(match &self.keep {
            Some(keep) => Box::new(Keeping::new(session, keep.clone(), stream)),
            None => session,
        })
    }

    /// An Anthropic answer that came whole (a non-streaming upstream, or its error) as this
    /// client's object or OpenAI error: the status and body. A message goes through the
    /// engine's front translator as the events it stands for; an error is mapped to OpenAI's
    /// envelope.
    #[must_use]
    pub fn complete(&self, status: u16, body: &[u8]) -> (u16, String) {
        if (200..300).contains(&status)
            && let Ok(message) = serde_json::from_slice::<Message>(body)
        {
            let sse: String = bridge_core::front::transcode::events_of_message(&message)
                .iter()
                .map(bridge_core::api::encode_event)
                .collect();
            let folded = self.session(false).and_then(|mut session| {
                session.feed(sse.as_bytes())?;
                session.finish(&StreamEnd::default())
            });
            return match folded {
                Ok(folded) => (folded.status, folded.body),
                Err(e) => (
                    bridge_core::front::openai_status(e.kind()),
                    bridge_core::front::openai_error_body(&ApiError::new(e.kind(), e.to_string())),
                ),
            };
        }
        let answer = bridge_core::front::facade::answer(
            self.front,
            &self.options.model,
            self.options.id_seed,
            &self.options.front,
        );
        bridge_core::front::transcode::complete(&answer, status, body)
    }
}

impl ClientShape {
    /// The error envelope this client reads.
    #[must_use]
    pub fn envelope(&self) -> Envelope {
        match self {
            Self::Anthropic => Envelope::Anthropic,
            Self::OpenAi(_) => Envelope::OpenAi,
        }
    }

    /// The JSON body of an error response for this client.
    #[must_use]
    pub fn error_body(&self, error: &ApiError) -> String {
        match self {
            Self::Anthropic => error.envelope(),
            Self::OpenAi(_) => bridge_core::front::openai_error_body(error),
        }
    }

    /// The last SSE of a stream the bridge ends with `error`: an `error` event, or for an
    /// OpenAI client a `data:` object holding `error` (its SDKs raise on it).
    #[must_use]
    pub fn error_sse(&self, error: &ApiError) -> String {
        match self {
            Self::Anthropic => format!("event: error\ndata: {}\n\n", error.envelope()),
            Self::OpenAi(_) => {
                format!("data: {}\n\n", bridge_core::front::openai_error_body(error))
            }
        }
    }
}
