//! The facade every build of the core exposes: native host, WASI component and npm package.
//!
//! Values that cross a runtime boundary are JSON strings or bytes, so the three builds can be
//! compared byte for byte. Each operation has one function (or one stateful type) here; the
//! component (`core/component`) and the JS facade (`pkg-js`) only map these to their own types.
//!
//! ```
//! use bridge_core::api::{convert_request, ChatStream, ConvertOptions, StreamOptions};
//!
//! let req = br#"{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}"#;
//! let converted = convert_request(req, &ConvertOptions::default()).unwrap();
//! assert!(converted.body.contains(r#""stream":true"#));
//!
//! let mut stream = ChatStream::new(StreamOptions {
//!     stream: true,
//!     model: converted.client_model.clone(),
//!     input_tokens_estimate: converted.input_tokens_estimate,
//!     id_seed: 7,
//!     dialect: Default::default(),
//! });
//! let mut sse = stream.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n");
//! sse.push_str(&stream.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"));
//! sse.push_str(&stream.finish().body);
//! assert!(sse.starts_with("event: message_start\n"));
//! assert!(sse.contains(r#""text":"Hello""#));
//! assert!(sse.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
//! ```

use serde::{Deserialize, Serialize};

use crate::anthropic::accumulate::Accumulator;
use crate::anthropic::events::ApiError;
use crate::error::RequestError;
use crate::translate::chat_stream::ChatStreamTranslator;
use crate::translate::responses_stream::ResponsesStreamTranslator;
use crate::translate::token_stream::TokenStreamTranslator;

pub use crate::anthropic::events::{ErrorKind, StreamEvent};
pub use crate::anthropic::stream::{Validator, Violation};
pub use crate::chatml::render::{ChatmlOptions, ChatmlPrompt, PromptImage, ToolFormat};
pub use crate::chatml::tool_calls::ToolHint;
pub use crate::route::{Route, RouterConfig, Target};
pub use crate::sse::decoder::{SseDecoder, SseFrame};
pub use crate::sse::encoder::EncodeError;
pub use crate::translate::chat_request::{ConvertOptions, ConvertedRequest};
pub use crate::translate::responses_request::ResponsesOptions;
pub use crate::translate::token_stream::StreamEnd;

/// Anthropic Messages request (JSON bytes) → OpenAI Chat Completions request.
///
/// # Errors
/// [`RequestError`] when the body is not JSON or lacks a field the Messages API requires.
pub fn convert_request(
    request: &[u8],
    options: &ConvertOptions,
) -> Result<ConvertedRequest, RequestError> {
    crate::translate::chat_request::convert(request, options)
}

/// Estimated input tokens of an Anthropic request (`/v1/messages/count_tokens`).
///
/// # Errors
/// [`RequestError`] when the body is not JSON or has no `messages`.
pub fn count_tokens(request: &[u8]) -> Result<u32, RequestError> {
    crate::tokens::count_request_tokens(request)
}

/// Route an Anthropic request: its primary target, the fallbacks and why (see [`crate::route`]).
/// `config_json` is the `[router]` table as JSON (targets as `"provider,model"` strings).
///
/// ```
/// let config = r#"{"default":"local","background":"local,qwen3-coder:1.7b"}"#;
/// let request = br#"{"model":"claude-haiku-4-5","max_tokens":8,"messages":[{"role":"user","content":"title?"}]}"#;
/// let chosen = bridge_core::api::route(config, request).unwrap();
/// assert_eq!(chosen.primary.to_string(), "local,qwen3-coder:1.7b");
/// assert_eq!(chosen.reason.to_string(), "background");
/// ```
///
/// # Errors
/// [`RequestError::Options`] when the configuration does not parse (it names the key);
/// [`RequestError`] of the request's kind when the body is not a Messages request.
pub fn route(config_json: &str, request: &[u8]) -> Result<Route, RequestError> {
    let config = RouterConfig::from_json(config_json)
        .map_err(|e| RequestError::Options(format!("router config: {e}")))?;
    let features = crate::route::features_from_bytes(request)?;
    Ok(crate::route::route(&config, &features))
}

/// The upstream API a request is prepared for and a stream is read from. The facade is keyed by
/// it ([`prepare`], [`StreamOptions::dialect`]), so another dialect is a change to the core only:
/// the component, the npm package and the host pass the name through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// OpenAI Chat Completions (`/chat/completions`), options: [`ConvertOptions`].
    #[default]
    OpenaiChat,
    /// The OpenAI Responses API (`/responses`), options: [`ResponsesOptions`].
    OpenaiResponses,
}

impl Dialect {
    /// The dialect's name, as the facades take it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenaiChat => "openai_chat",
            Self::OpenaiResponses => "openai_responses",
        }
    }

    /// Read a dialect name (`openai_chat`, `openai_responses`).
    ///
    /// # Errors
    /// [`RequestError::Options`] naming the dialects there are.
    pub fn parse(name: &str) -> Result<Self, RequestError> {
        serde_json::from_value(serde_json::Value::String(name.to_owned())).map_err(|_| {
            RequestError::Options(format!(
                "unknown dialect {name:?}: expected openai_chat or openai_responses"
            ))
        })
    }
}

/// Anthropic Messages request → the upstream request of `dialect`. `options_json` is that
/// dialect's options object (`{}` for the defaults): [`ConvertOptions`] or [`ResponsesOptions`].
///
/// ```
/// use bridge_core::api::{prepare, Dialect};
/// let req = br#"{"model":"claude-x","max_tokens":64,"system":"be brief","messages":[{"role":"user","content":"hi"}]}"#;
/// let converted = prepare(Dialect::OpenaiResponses, req, r#"{"model":"gpt-5"}"#).unwrap();
/// assert!(converted.body.contains(r#""instructions":"be brief""#));
/// ```
///
/// # Errors
/// [`RequestError`] when the body is not a Messages request, or the options do not parse.
pub fn prepare(
    dialect: Dialect,
    request: &[u8],
    options_json: &str,
) -> Result<ConvertedRequest, RequestError> {
    fn options<T: serde::de::DeserializeOwned>(json: &str) -> Result<T, RequestError> {
        let json = if json.trim().is_empty() { "{}" } else { json };
        serde_json::from_str(json).map_err(|e| RequestError::Options(e.to_string()))
    }
    match dialect {
        Dialect::OpenaiChat => convert_request(request, &options(options_json)?),
        Dialect::OpenaiResponses => {
            crate::translate::responses_request::convert(request, &options(options_json)?)
        }
    }
}

/// How a [`ChatStream`] presents its output.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StreamOptions {
    /// `true`: `feed`/`finish` return Anthropic SSE bytes. `false`: they return nothing until
    /// `finish`, which returns the folded `Message` JSON (or an error envelope).
    pub stream: bool,
    /// The model name reported to the client (the one it asked for).
    pub model: String,
    /// Input-token estimate reported in `message_start` until the upstream reports real usage.
    pub input_tokens_estimate: u32,
    /// Seed for the ids the bridge must invent (`msg_…`, `toolu_…`, signatures).
    pub id_seed: u64,
    /// The upstream's stream format (default: OpenAI Chat Completions).
    #[serde(default)]
    pub dialect: Dialect,
}

/// What [`ChatStream::finish`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    /// HTTP status a non-streaming response should carry (200, or the error's status).
    /// For a streaming response this is 200 even when the stream ended with an `error` event.
    pub status: u16,
    /// Streaming: the last SSE bytes. Non-streaming: the `Message` JSON or the error envelope.
    pub body: String,
}

/// OpenAI Chat Completions stream (raw upstream bytes) → Anthropic response, as SSE or folded.
///
/// The same translator serves both modes; non-streaming output is its events folded by the
/// [`Accumulator`] the tests use, so the two can never disagree.
#[derive(Debug)]
pub struct ChatStream {
    translator: StreamTranslator,
    sink: Sink,
}

/// The translator of each [`Dialect`].
#[derive(Debug)]
enum StreamTranslator {
    Chat(Box<ChatStreamTranslator>),
    Responses(Box<ResponsesStreamTranslator>),
}

impl StreamTranslator {
    fn feed(&mut self, chunk: &[u8]) -> Vec<StreamEvent> {
        match self {
            Self::Chat(t) => t.feed(chunk),
            Self::Responses(t) => t.feed(chunk),
        }
    }

    fn fail(&mut self, error: ApiError) -> Vec<StreamEvent> {
        match self {
            Self::Chat(t) => t.fail(error),
            Self::Responses(t) => t.fail(error),
        }
    }

    fn finish(&mut self) -> Vec<StreamEvent> {
        match self {
            Self::Chat(t) => t.finish(),
            Self::Responses(t) => t.finish(),
        }
    }
}

/// Where a translator's events go: SSE text now, or folded into one message at the end.
#[derive(Debug)]
enum Sink {
    Sse,
    Fold(Box<Accumulator>),
}

impl Sink {
    fn new(stream: bool) -> Self {
        if stream {
            Self::Sse
        } else {
            Self::Fold(Box::default())
        }
    }

    /// Events decided before the end: SSE text to write now (empty when folding).
    fn emit(&mut self, events: &[StreamEvent]) -> String {
        match self {
            Self::Sse => encode_all(events),
            Self::Fold(acc) => {
                for event in events {
                    acc.push(event);
                }
                String::new()
            }
        }
    }

    /// The last events: the last SSE text, or the folded message.
    fn finish(&mut self, events: &[StreamEvent]) -> Finished {
        match self {
            Self::Sse => Finished {
                status: 200,
                body: encode_all(events),
            },
            Self::Fold(acc) => {
                for event in events {
                    acc.push(event);
                }
                acc.result()
            }
        }
    }
}

impl ChatStream {
    /// A translator for one upstream response.
    #[must_use]
    pub fn new(options: StreamOptions) -> Self {
        let (model, estimate, seed) = (
            options.model,
            options.input_tokens_estimate,
            options.id_seed,
        );
        let translator = match options.dialect {
            Dialect::OpenaiChat => {
                StreamTranslator::Chat(Box::new(ChatStreamTranslator::new(model, estimate, seed)))
            }
            Dialect::OpenaiResponses => StreamTranslator::Responses(Box::new(
                ResponsesStreamTranslator::new(model, estimate, seed),
            )),
        };
        Self {
            translator,
            sink: Sink::new(options.stream),
        }
    }

    /// Feed upstream bytes (any chunking); returns SSE bytes to write now (empty when folding).
    pub fn feed(&mut self, chunk: &[u8]) -> String {
        let events = self.translator.feed(chunk);
        self.sink.emit(&events)
    }

    /// The upstream failed (transport error, timeout, disconnect): end the response with an
    /// `error` event (streaming) or make `finish` return the error (folding).
    pub fn fail(&mut self, kind: ErrorKind, message: &str) -> String {
        let events = self.translator.fail(ApiError::new(kind, message));
        self.sink.emit(&events)
    }

    /// The upstream body ended. Returns the last SSE bytes, or the folded message.
    pub fn finish(&mut self) -> Finished {
        let events = self.translator.finish();
        self.sink.finish(&events)
    }
}

/// Anthropic Messages request → one ChatML prompt for a raw-text host (Fabstir), with its images,
/// the generation parameters to forward and the tools the reply parser needs.
///
/// # Errors
/// [`RequestError`] when the body is not JSON or lacks a field the Messages API requires.
pub fn render_chatml(
    request: &[u8],
    options: &ChatmlOptions,
) -> Result<ChatmlPrompt, RequestError> {
    crate::chatml::render::render(request, options)
}

/// A Fabstir `encrypted_session_init` plaintext (a `SessionInitPlain` JSON object) in the exact
/// bytes a host accepts: read as strictly as the host reads it (`jobId` a string,
/// `pricePerToken` an integer) and written in one canonical form.
///
/// ```
/// let plain = bridge_core::api::fabstir_session_init(
///     r#"{"sessionKey":"0xab","jobId":"42","modelName":"m","pricePerToken":2000}"#).unwrap();
/// assert_eq!(plain, r#"{"sessionKey":"0xab","jobId":"42","modelName":"m","pricePerToken":2000}"#);
/// assert!(bridge_core::api::fabstir_session_init(
///     r#"{"sessionKey":"0xab","jobId":"42","modelName":"m","pricePerToken":1.0}"#).is_err());
/// ```
///
/// # Errors
/// [`RequestError::SessionInit`] (the caller built it: `api_error`) naming the field that is missing
/// or of the wrong type.
pub fn fabstir_session_init(init_json: &str) -> Result<String, RequestError> {
    crate::fabstir::protocol::SessionInitPlain::from_json(init_json)
        .map(|init| init.to_plaintext())
        .map_err(RequestError::SessionInit)
}

/// How a [`TokenStream`] presents its output.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TokenStreamOptions {
    /// `true`: SSE text; `false`: `finish` returns the folded `Message` JSON.
    pub stream: bool,
    /// The model name reported to the client.
    pub model: String,
    /// Input-token estimate reported in `message_start` (`ChatmlPrompt::input_tokens_estimate`).
    pub input_tokens_estimate: u32,
    /// Seed for invented ids.
    pub id_seed: u64,
    /// The offered tools (`ChatmlPrompt::tools`), to type tool-call arguments.
    #[serde(default)]
    pub tools: Vec<ToolHint>,
}

/// A raw-text host's reply (token by token) → Anthropic response, as SSE or folded; tool calls
/// written inline by the model become `tool_use` blocks.
#[derive(Debug)]
pub struct TokenStream {
    translator: TokenStreamTranslator,
    sink: Sink,
}

impl TokenStream {
    /// A translator for one reply.
    #[must_use]
    pub fn new(options: TokenStreamOptions) -> Self {
        Self {
            translator: TokenStreamTranslator::new(
                options.model,
                options.input_tokens_estimate,
                options.id_seed,
                options.tools,
            ),
            sink: Sink::new(options.stream),
        }
    }

    /// Feed model text (any split); returns SSE text to write now (empty when folding).
    pub fn feed(&mut self, text: &str) -> String {
        let events = self.translator.feed(text);
        self.sink.emit(&events)
    }

    /// The host failed: end with an `error` event (streaming) or make `finish` return it.
    pub fn fail(&mut self, kind: ErrorKind, message: &str) -> String {
        let events = self.translator.fail(ApiError::new(kind, message));
        self.sink.emit(&events)
    }

    /// The reply is complete (`stream_end`): the last SSE text, or the folded message.
    pub fn finish(&mut self, end: &StreamEnd) -> Finished {
        let events = self.translator.finish(end);
        self.sink.finish(&events)
    }
}

fn encode_all(events: &[StreamEvent]) -> String {
    let mut out = String::new();
    for event in events {
        crate::sse::encoder::encode_event(&mut out, event);
    }
    out
}

/// One Anthropic event → its exact SSE bytes (`event: <type>\ndata: <json>\n\n`).
#[must_use]
pub fn encode_event(event: &StreamEvent) -> String {
    encode_all(std::slice::from_ref(event))
}

/// One SSE frame with any event name and data → bytes; data with line breaks becomes several
/// `data:` lines.
///
/// # Errors
/// [`EncodeError`] when the event name holds CR or LF (it would split the frame).
pub fn encode_sse_frame(event: &str, data: &str) -> Result<String, EncodeError> {
    let mut out = String::new();
    crate::sse::encoder::encode_frame(&mut out, event, data)?;
    Ok(out)
}

/// Anthropic SSE bytes → its events, when the stream keeps every rule of the [`Validator`]
/// (and each SSE `event:` name equals the JSON `type`).
///
/// # Errors
/// The first [`Violation`], or an event that does not parse.
pub fn validate_sse(sse: &[u8]) -> Result<Vec<StreamEvent>, Violation> {
    Validator::check_sse(sse)
}

/// Anthropic SSE bytes → what a non-streaming client gets: the `Message` JSON (status 200), or
/// the error envelope with its status when the stream failed or never completed.
///
/// ```
/// let sse = b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n";
/// let folded = bridge_core::api::fold_sse(sse);
/// assert_eq!(folded.status, 529);
/// ```
#[must_use]
pub fn fold_sse(sse: &[u8]) -> Finished {
    let mut folder = SseFolder::default();
    folder.feed(sse);
    folder.finish()
}

/// [`fold_sse`] a piece at a time: the host folds a translated stream for a non-streaming client
/// as it arrives, keeping only the message so far (not the SSE text).
///
/// ```
/// let mut folder = bridge_core::api::SseFolder::default();
/// folder.feed(b"event: error\ndata: {\"type\":\"error\",\"error\":");
/// folder.feed(b"{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n");
/// assert_eq!(folder.finish().status, 529);
/// ```
#[derive(Debug, Default)]
pub struct SseFolder {
    decoder: SseDecoder,
    acc: Accumulator,
    frames: usize,
    broken: bool,
}

impl SseFolder {
    /// Feed SSE bytes (any split).
    pub fn feed(&mut self, sse: &[u8]) {
        let frames = self.decoder.feed(sse);
        self.push(frames);
    }

    /// The stream ended: the `Message` JSON (200), or the error envelope with its status.
    #[must_use]
    pub fn finish(mut self) -> Finished {
        let frames = self.decoder.finish();
        self.push(frames);
        self.acc.result()
    }

    fn push(&mut self, frames: Vec<SseFrame>) {
        for frame in frames {
            if self.broken {
                return;
            }
            match serde_json::from_str::<StreamEvent>(&frame.data) {
                Ok(event) => self.acc.push(&event),
                Err(e) => {
                    let error = ApiError::new(
                        ErrorKind::Api,
                        format!(
                            "SSE frame #{} is not an Anthropic stream event: {e}",
                            self.frames
                        ),
                    );
                    self.acc.push(&StreamEvent::Error { error });
                    self.broken = true;
                }
            }
            self.frames += 1;
        }
    }
}
