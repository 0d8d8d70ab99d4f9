//! The OpenAI fronts through the core's facade ([`crate::api::prepare`] and
//! [`crate::api::Translator`]), so the native host, the WASI component in wasmtime and the npm
//! package run them alike — and a `--core` plug-in may bring its own — without a new function in
//! the component's world: a front is two more dialect names.
//!
//! ```text
//!  prepare("front_openai_chat", OpenAI request) ──► body = {"request": Anthropic request, "answer": FrontOptions}
//!                                                    or    {"refusal": {"status": 400, "error": {message,type,param,code}}}
//!  Translator{dialect: "front_openai_chat", front: FrontOptions} : Anthropic SSE ──► Chat chunks / chat.completion
//!  Translator{dialect: "front_openai_responses", …}              : Anthropic SSE ──► response.* events / response
//! ```
//!
//! A request the front refuses is a normal answer of `prepare` (the `refusal` body), not an
//! error: the refusal carries what OpenAI's envelope needs (`param`, `code`) and the
//! component's error record has no room for it. The Anthropic request always asks for a stream
//! (the host folds the answer itself for a client that did not).
//!
//! ```
//! use bridge_core::api::{prepare, Dialect, FrontOptions, StreamOptions, Translator, StreamEnd};
//! let converted = prepare(Dialect::FrontOpenaiChat,
//!     br#"{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}"#, "{}").unwrap();
//! let body: serde_json::Value = serde_json::from_str(&converted.body).unwrap();
//! assert_eq!(body["request"]["stream"], true);
//! let answer: FrontOptions = serde_json::from_value(body["answer"].clone()).unwrap();
//!
//! let mut fold = Translator::new(StreamOptions {
//!     stream: false, model: converted.client_model, dialect: Dialect::FrontOpenaiChat,
//!     front: FrontOptions { id: "abc".into(), created: 1_700_000_000, ..answer },
//!     ..StreamOptions::default()
//! });
//! fold.feed(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n");
//! fold.feed(b"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
//! let done = fold.finish(&StreamEnd::default());
//! assert_eq!(done.status, 200);
//! assert!(done.body.contains(r#""id":"chatcmpl-abc""#));
//!
//! let refused = prepare(Dialect::FrontOpenaiChat,
//!     br#"{"model":"gpt-x","n":2,"messages":[{"role":"user","content":"hi"}]}"#, "{}").unwrap();
//! assert!(refused.body.contains(r#""param":"n""#));
//! ```

use serde::{Deserialize, Serialize};

use crate::anthropic::events::{ApiError, ErrorKind};
use crate::anthropic::request::MessagesRequest;
pub use crate::dialect::Front;
use crate::front::FrontError;
use crate::front::client_tools::ResponsesTools;
use crate::front::transcode::{FrontAnswer, FrontFold, FrontShape, FrontStream};
use crate::translate::chat_request::ConvertedRequest;

/// How a front writes its answer: what `prepare` read from the client's request, plus the
/// answer's id and time, which the host fills in (`prepare` leaves them empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontOptions {
    /// The completion / response id without its prefix (`chatcmpl-`, `resp_`); empty: derived
    /// from the translator's `id_seed`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub id: String,
    /// The answer's time, Unix seconds.
    #[serde(
        default,
        skip_serializing_if = "is_zero",
        deserialize_with = "null_as_default"
    )]
    pub created: u64,
    /// Chat: `stream_options.include_usage` (the stream ends with a usage chunk).
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "null_as_default"
    )]
    pub include_usage: bool,
    /// Responses: how the request's tools are called on the way back (`custom_tools`,
    /// `namespaced_tools`, flat in the JSON).
    #[serde(flatten)]
    pub tools: ResponsesTools,
    /// Responses: `include: ["reasoning.encrypted_content"]`.
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "null_as_default"
    )]
    pub include_encrypted_reasoning: bool,
    /// Responses: the request's settings every response object repeats (`tools`, `store`,
    /// `text`, `instructions`, …), as OpenAI's do.
    #[serde(
        default,
        skip_serializing_if = "serde_json::Map::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub echo: serde_json::Map<String, serde_json::Value>,
}

/// `null` (JSON) or `undefined` (a JS object's field) reads as the default, like a missing field.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The body `prepare` returns for a front dialect.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Prepared<'a> {
    Request {
        request: &'a MessagesRequest,
        answer: &'a FrontOptions,
    },
    Refusal {
        refusal: Refusal,
    },
}

/// A request the front cannot take: the status and OpenAI's `error` object.
#[derive(Debug, Serialize)]
struct Refusal {
    status: u16,
    error: serde_json::Value,
}

impl Refusal {
    fn of(error: &FrontError) -> Self {
        Self {
            status: error.status(),
            error: error.error_object(),
        }
    }
}

/// `prepare` for a front: the client's OpenAI request → the Anthropic request (always
/// streaming) and the answer's options, or the refusal.
#[must_use]
pub fn prepare(front: Front, request: &[u8]) -> ConvertedRequest {
    let converted = match front {
        Front::Chat => crate::front::chat_request::chat_to_anthropic(request).map(|c| {
            let answer = FrontOptions {
                include_usage: c.include_usage,
                ..FrontOptions::default()
            };
            (c.request, c.stream, answer, c.warnings)
        }),
        Front::Responses => {
            crate::front::responses_request::responses_to_anthropic(request).map(|c| {
                let answer = FrontOptions {
                    tools: c.client_tools,
                    include_encrypted_reasoning: c.include_encrypted_reasoning,
                    echo: c.echo,
                    ..FrontOptions::default()
                };
                (c.request, c.stream, answer, c.warnings)
            })
        }
    };
    match converted {
        Ok((mut request, stream, answer, warnings)) => {
            request.stream = Some(true);
            let body = Prepared::Request {
                request: &request,
                answer: &answer,
            };
            match serde_json::to_string(&body) {
                Ok(body) => ConvertedRequest {
                    body,
                    upstream_model: request.model.clone(),
                    client_model: request.model.clone(),
                    client_stream: stream,
                    input_tokens_estimate: crate::tokens::estimate_request(&request),
                    warnings,
                    tool_names: crate::translate::tool_names::ToolNames::default(),
                },
                Err(e) => refused(&FrontError::Json(format!(
                    "the converted request could not be encoded: {e}"
                ))),
            }
        }
        Err(error) => refused(&error),
    }
}

fn refused(error: &FrontError) -> ConvertedRequest {
    let body = serde_json::to_string(&Prepared::Refusal {
        refusal: Refusal::of(error),
    })
    .unwrap_or_default();
    ConvertedRequest {
        body,
        upstream_model: String::new(),
        client_model: String::new(),
        client_stream: false,
        input_tokens_estimate: 0,
        warnings: Vec::new(),
        tool_names: crate::translate::tool_names::ToolNames::default(),
    }
}

/// The answer a front's translator writes.
#[must_use]
pub fn answer(front: Front, model: &str, id_seed: u64, options: &FrontOptions) -> FrontAnswer {
    FrontAnswer {
        id: if options.id.is_empty() {
            format!("{id_seed:016x}")
        } else {
            options.id.clone()
        },
        created: options.created,
        model: model.to_owned(),
        shape: match front {
            Front::Chat => FrontShape::Chat {
                include_usage: options.include_usage,
            },
            Front::Responses => FrontShape::Responses {
                tools: options.tools.clone(),
                include_encrypted_reasoning: options.include_encrypted_reasoning,
                echo: options.echo.clone(),
            },
        },
    }
}

/// A front's translator: Anthropic SSE in, the client's stream or folded object out.
#[derive(Debug)]
pub enum FrontTranslator {
    /// A streaming client.
    Stream(Box<FrontStream>),
    /// A client that asked for one object; `None` once finished.
    Fold(Option<Box<FrontFold>>),
}

impl FrontTranslator {
    /// A translator for `answer`; a streaming one's calls stop making output at about
    /// `output_limit` bytes (see [`FrontStream`]).
    #[must_use]
    pub fn new(answer: &FrontAnswer, stream: bool, output_limit: Option<usize>) -> Self {
        if stream {
            let stream = FrontStream::new(answer);
            Self::Stream(Box::new(match output_limit {
                Some(limit) => stream.limited(limit),
                None => stream,
            }))
        } else {
            Self::Fold(Some(Box::new(FrontFold::new(answer))))
        }
    }

    /// Anthropic SSE bytes; the client's bytes to write now (nothing when folding).
    pub fn feed(&mut self, anthropic_sse: &[u8]) -> String {
        match self {
            Self::Stream(stream) => stream.feed(anthropic_sse),
            Self::Fold(fold) => {
                if let Some(fold) = fold {
                    fold.feed(anthropic_sse);
                }
                String::new()
            }
        }
    }

    /// [`Self::feed`] with bytes given away: a long event's data is taken, not copied.
    pub fn feed_owned(&mut self, anthropic_sse: Vec<u8>) -> String {
        match self {
            Self::Stream(stream) => stream.feed_owned(anthropic_sse),
            Self::Fold(fold) => {
                if let Some(fold) = fold {
                    fold.feed_owned(anthropic_sse);
                }
                String::new()
            }
        }
    }

    /// The answer failed upstream: it ends with an error of `kind` the client's SDK raises.
    pub fn fail(&mut self, kind: ErrorKind, message: &str) -> String {
        let event = format!(
            "event: error\ndata: {}\n\n",
            ApiError::new(kind, message).envelope()
        );
        self.feed(event.as_bytes())
    }

    /// The status and the last bytes (streaming), or the folded object or OpenAI error.
    pub fn finish(&mut self) -> (u16, String) {
        match self {
            Self::Stream(stream) => (200, stream.finish()),
            Self::Fold(fold) => fold
                .take()
                .map_or_else(|| (200, String::new()), |fold| (*fold).finish()),
        }
    }
}
