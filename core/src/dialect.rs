//! The upstream dialects the core translates to and from ([`Dialect`]): the key of the facade
//! ([`crate::api::prepare`], [`crate::api::StreamOptions::dialect`]), defined here, beneath every
//! module that needs to name one.

use serde::{Deserialize, Serialize};

use crate::error::RequestError;

/// The upstream API a request is prepared for and a stream is read from. The facade is keyed by
/// it ([`crate::api::prepare`], [`crate::api::StreamOptions::dialect`]), so another dialect is a change to the core only:
/// the component, the npm package and the host pass the name through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// OpenAI Chat Completions (`/chat/completions`), options: [`crate::api::ConvertOptions`].
    #[default]
    OpenaiChat,
    /// The OpenAI Responses API (`/responses`), options: [`crate::api::ResponsesOptions`].
    OpenaiResponses,
    /// A raw-text host (Fabstir): the request is one ChatML prompt (the prepared body is a
    /// [`crate::api::ChatmlPrompt`] JSON object), options: [`crate::api::ChatmlOptions`]; the reply is the model's text,
    /// fed as UTF-8 bytes in any split, with inline tool calls (typed by
    /// [`crate::api::StreamOptions::tools`]) and the host's numbers given to [`crate::api::Translator::finish`].
    Chatml,
    /// The Anthropic Messages API itself (pass-through), options: [`crate::api::AnthropicOptions`]; the
    /// request goes as it came unless the model or the history changes, the stream is relayed
    /// frame by frame (unknown event types too) and ends with an `error` event when cut.
    Anthropic,
    /// The other way round — an OpenAI Chat Completions *client* ([`crate::front`]): `prepare`
    /// takes its request and gives the Anthropic request with the answer's [`crate::api::FrontOptions`] (or
    /// a refusal) as the body; the translator reads Anthropic SSE (what every provider answers)
    /// and writes `chat.completion.chunk`s, or folds one `chat.completion`
    /// ([`crate::api::StreamOptions::front`]). No options.
    FrontOpenaiChat,
    /// As [`Self::FrontOpenaiChat`], for an OpenAI Responses client (the Codex CLI): `response.*`
    /// events, or one `response` object.
    FrontOpenaiResponses,
}

impl Dialect {
    /// Every dialect, in the order the error messages list them.
    pub const ALL: [Self; 6] = [
        Self::OpenaiChat,
        Self::OpenaiResponses,
        Self::Chatml,
        Self::Anthropic,
        Self::FrontOpenaiChat,
        Self::FrontOpenaiResponses,
    ];

    /// The dialect's name, as the facades take it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenaiChat => "openai_chat",
            Self::OpenaiResponses => "openai_responses",
            Self::Chatml => "chatml",
            Self::Anthropic => "anthropic",
            Self::FrontOpenaiChat => "front_openai_chat",
            Self::FrontOpenaiResponses => "front_openai_responses",
        }
    }

    /// The OpenAI client API of a front dialect; `None` for an upstream dialect.
    #[must_use]
    pub fn front(self) -> Option<Front> {
        match self {
            Self::FrontOpenaiChat => Some(Front::Chat),
            Self::FrontOpenaiResponses => Some(Front::Responses),
            Self::OpenaiChat | Self::OpenaiResponses | Self::Chatml | Self::Anthropic => None,
        }
    }

    /// Read a dialect name (`openai_chat`, `openai_responses`, `chatml`, `anthropic`).
    ///
    /// # Errors
    /// [`RequestError::Options`] naming the dialects there are.
    pub fn parse(name: &str) -> Result<Self, RequestError> {
        Self::ALL
            .into_iter()
            .find(|d| d.as_str() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|d| d.as_str()).collect();
                RequestError::Options(format!(
                    "unknown dialect {name:?}: expected one of {}",
                    names.join(", ")
                ))
            })
    }
}

/// Which OpenAI API the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// Chat Completions (`POST /v1/chat/completions`).
    Chat,
    /// Responses (`POST /v1/responses`).
    Responses,
}

impl Front {
    /// The facade's dialect for this front (the inverse of [`Dialect::front`]).
    #[must_use]
    pub fn dialect(self) -> Dialect {
        match self {
            Self::Chat => Dialect::FrontOpenaiChat,
            Self::Responses => Dialect::FrontOpenaiResponses,
        }
    }
}
