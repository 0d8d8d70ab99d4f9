//! Who asked, and so how the answer is written: every provider answers Anthropic SSE; an
//! Anthropic client gets it as it is, an OpenAI client (Chat Completions or Responses) gets it
//! through the core's front ([`bridge_core::front::transcode`]): streamed, or folded into one
//! object, with errors in OpenAI's envelope.

use bridge_core::front::transcode::FrontAnswer;

use super::error_response::Envelope;

/// The client's API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientShape {
    /// The Anthropic Messages API (streaming or not, as the request said).
    Anthropic,
    /// An OpenAI API: what to write and whether the client wants a stream.
    OpenAi {
        /// The answer's id, time, model and API.
        answer: FrontAnswer,
        /// `stream: true` in the client's request.
        stream: bool,
    },
}

impl ClientShape {
    /// The error envelope this client reads.
    #[must_use]
    pub fn envelope(&self) -> Envelope {
        match self {
            Self::Anthropic => Envelope::Anthropic,
            Self::OpenAi { .. } => Envelope::OpenAi,
        }
    }
}
