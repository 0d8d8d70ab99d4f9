//! The facade every build of the core exposes: native host, WASI component and npm package.
//!
//! Values that cross a runtime boundary are JSON strings or bytes, so the three builds can be
//! compared byte for byte. Each operation has one function (or one stateful type) here; the
//! component (`core/component`) and the JS facade (`pkg-js`) only map these to their own types.
//!
//! ```
//! use bridge_core::api::{prepare, Dialect, StreamEnd, StreamOptions, Translator};
//!
//! let req = br#"{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}"#;
//! let converted = prepare(Dialect::OpenaiChat, req, "{}").unwrap();
//! assert!(converted.body.contains(r#""stream":true"#));
//!
//! let mut stream = Translator::new(StreamOptions {
//!     stream: true,
//!     model: converted.client_model.clone(),
//!     input_tokens_estimate: converted.input_tokens_estimate,
//!     id_seed: 7,
//!     dialect: Dialect::OpenaiChat,
//!     ..StreamOptions::default()
//! });
//! let mut sse = stream.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n");
//! sse.push_str(&stream.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"));
//! sse.push_str(&stream.finish(&StreamEnd::default()).body);
//! assert!(sse.starts_with("event: message_start\n"));
//! assert!(sse.contains(r#""text":"Hello""#));
//! assert!(sse.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
//! ```

use serde::{Deserialize, Serialize};

use crate::anthropic::accumulate::Accumulator;
use crate::anthropic::events::ApiError;
use crate::error::RequestError;
use crate::front::facade::FrontTranslator;
use crate::translate::SseTranslate as _;
use crate::translate::chat_stream::ChatStreamTranslator;
use crate::translate::passthrough::{PassThrough, Relayed};
use crate::translate::responses_stream::ResponsesStreamTranslator;
use crate::translate::token_stream::TokenStreamTranslator;

pub use crate::anthropic::accumulate::Finished;
pub use crate::anthropic::events::{ErrorKind, StreamEvent};
pub use crate::anthropic::stream::{Validator, Violation};
pub use crate::chatml::render::{ChatmlOptions, ChatmlPrompt, PromptImage, ToolFormat};
pub use crate::chatml::tool_calls::ToolHint;
pub use crate::dialect::Dialect;
pub use crate::front::facade::{Front, FrontOptions};
pub use crate::route::{Route, RouterConfig, Target};
pub use crate::sse::decoder::{SseDecoder, SseFrame};
pub use crate::sse::encoder::EncodeError;
pub use crate::translate::chat_request::{ConvertOptions, ConvertedRequest, DocumentMode};
pub use crate::translate::passthrough::AnthropicOptions;
pub use crate::translate::responses_request::ResponsesOptions;
pub use crate::translate::token_stream::StreamEnd;
pub use crate::translate::tool_names::{ToolName, ToolNames};

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

/// Anthropic Messages request → the upstream request of `dialect`. `options_json` is that
/// dialect's options object (`{}` for the defaults): [`ConvertOptions`], [`ResponsesOptions`],
/// [`ChatmlOptions`] or [`AnthropicOptions`].
///
/// ```
/// use bridge_core::api::{prepare, ChatmlPrompt, Dialect};
/// let req = br#"{"model":"claude-x","max_tokens":64,"system":"be brief","messages":[{"role":"user","content":"hi"}]}"#;
/// let converted = prepare(Dialect::OpenaiResponses, req, r#"{"model":"gpt-5"}"#).unwrap();
/// assert!(converted.body.contains(r#""instructions":"be brief""#));
///
/// let raw = prepare(Dialect::Chatml, req, "{}").unwrap();
/// let prompt: ChatmlPrompt = serde_json::from_str(&raw.body).unwrap();
/// assert!(prompt.prompt.ends_with("<|im_start|>assistant\n"));
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
        Dialect::Chatml => {
            let prompt = crate::chatml::render::render(request, &options(options_json)?)?;
            Ok(ConvertedRequest {
                body: serde_json::to_string(&prompt)
                    .map_err(|e| RequestError::Options(format!("the ChatML prompt: {e}")))?,
                upstream_model: prompt.upstream_model,
                client_model: prompt.client_model,
                client_stream: prompt.client_stream,
                input_tokens_estimate: prompt.input_tokens_estimate,
                warnings: prompt.warnings,
                // A raw-text model reads its tools' names from the prompt: any name will do.
                tool_names: ToolNames::default(),
            })
        }
        Dialect::Anthropic => {
            crate::translate::passthrough::prepare(request, &options(options_json)?)
        }
        Dialect::FrontOpenaiChat => Ok(crate::front::facade::prepare(Front::Chat, request)),
        Dialect::FrontOpenaiResponses => {
            Ok(crate::front::facade::prepare(Front::Responses, request))
        }
    }
}

/// How a [`Translator`] reads its input and presents its output.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
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
    /// [`Dialect::Chatml`]: the offered tools (`ChatmlPrompt::tools`), to type the arguments of
    /// tool calls the model writes inline. Ignored by the other dialects (their upstreams type
    /// their own calls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolHint>,
    /// The names the upstream was offered the request's tools under, where they are not the
    /// client's ([`ConvertedRequest::tool_names`]): calls coming back get the client's names.
    #[serde(
        default,
        skip_serializing_if = "ToolNames::is_empty",
        deserialize_with = "crate::front::facade::null_as_default"
    )]
    pub tool_names: ToolNames,
    /// The front dialects: how the client's answer is written (the `answer` object `prepare`
    /// returned, with the id and time filled in). Ignored by the upstream dialects.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "crate::front::facade::null_as_default"
    )]
    pub front: FrontOptions,
    /// [`Dialect::OpenaiChat`]: the upstream reports usage on its first chunk (vLLM's
    /// `continuous_usage_stats`), so `message_start` waits for that chunk and announces the real
    /// input and cache tokens. Otherwise it goes out with the first upstream bytes, estimated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage_on_first_chunk: bool,
    /// The front dialects, streaming: each call stops making output once it holds about this
    /// many bytes, and the rest comes from feeding an empty chunk — so a caller that writes
    /// each piece before asking for the next holds one large closing event of a long answer at
    /// a time, not all of them. A call given at least this many bytes makes no output (its
    /// events wait for the next call), so the caller frees a long input before the output is
    /// made. Ask again (an empty chunk) after a call whose input or output reached the limit;
    /// otherwise nothing was held back. Unset: every call returns all it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_limit: Option<usize>,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// An upstream's reply (raw bytes of its [`Dialect`]) → Anthropic response, as SSE or folded.
///
/// The one stateful translator of the facade: the component's `translator` resource and the npm
/// package's `Translator` class are this type. The same translator serves both modes;
/// non-streaming output is its events folded by the [`Accumulator`] the tests use, so the two can
/// never disagree.
#[derive(Debug)]
pub struct Translator {
    mode: Mode,
}

/// Which way a translator reads.
#[derive(Debug)]
enum Mode {
    /// An upstream's reply → Anthropic SSE, or the folded message.
    Upstream {
        translator: DialectTranslator,
        sink: Sink,
    },
    /// Anthropic SSE → an OpenAI client's stream or object (the fronts fold their own).
    Front(Box<FrontTranslator>),
}

/// The translator of each [`Dialect`].
#[derive(Debug)]
enum DialectTranslator {
    Chat(Box<ChatStreamTranslator>),
    Responses(Box<ResponsesStreamTranslator>),
    Chatml {
        translator: Box<TokenStreamTranslator>,
        text: Utf8Reader,
    },
    Anthropic(Box<PassThrough>),
}

/// What one step of a translator gives: events to encode, or (pass-through) the upstream's
/// frames already as SSE with the events read from them.
#[derive(Debug)]
enum Step {
    Events(Vec<StreamEvent>),
    Relayed(Relayed),
}

impl DialectTranslator {
    fn feed(&mut self, chunk: &[u8]) -> Step {
        Step::Events(match self {
            Self::Chat(t) => t.feed(chunk),
            Self::Responses(t) => t.feed(chunk),
            Self::Chatml { translator, text } => translator.feed(&text.feed(chunk)),
            Self::Anthropic(t) => return Step::Relayed(t.feed(chunk)),
        })
    }

    /// Takes back a vector of events it returned, emptied, for its next events.
    fn recycle(&mut self, events: Vec<StreamEvent>) {
        let writer = match self {
            Self::Chat(t) => t.writer(),
            Self::Responses(t) => t.writer(),
            Self::Chatml { translator, .. } => translator.writer(),
            Self::Anthropic(_) => return,
        };
        writer.recycle(events);
    }

    fn fail(&mut self, error: ApiError) -> Step {
        Step::Events(match self {
            Self::Chat(t) => t.fail(error),
            Self::Responses(t) => t.fail(error),
            Self::Chatml { translator, text } => {
                let mut events = translator.feed(&text.finish());
                events.extend(translator.fail(error));
                events
            }
            Self::Anthropic(t) => return Step::Relayed(t.fail(error)),
        })
    }

    fn finish(&mut self, end: &StreamEnd) -> Step {
        Step::Events(match self {
            Self::Chat(t) => t.finish(),
            Self::Responses(t) => t.finish(),
            Self::Chatml { translator, text } => {
                let mut events = translator.feed(&text.finish());
                events.extend(translator.finish(end));
                events
            }
            Self::Anthropic(t) => return Step::Relayed(t.finish()),
        })
    }
}

/// UTF-8 text from bytes in any split: a character cut between two chunks waits for its end;
/// bytes that can never be UTF-8 become U+FFFD (a raw-text host's reply is text, so nothing
/// else can be meant).
#[derive(Debug, Default)]
struct Utf8Reader {
    /// The start of a character whose end has not arrived (at most 3 bytes).
    held: Vec<u8>,
}

impl Utf8Reader {
    fn feed(&mut self, chunk: &[u8]) -> String {
        let mut bytes = std::mem::take(&mut self.held);
        bytes.extend_from_slice(chunk);
        let mut out = String::with_capacity(bytes.len());
        let mut rest = bytes.as_slice();
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    return out;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(&String::from_utf8_lossy(valid));
                    match e.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = after.get(bad..).unwrap_or_default();
                        }
                        None => {
                            self.held = after.to_vec();
                            return out;
                        }
                    }
                }
            }
        }
    }

    /// The reply ended: a character still cut is lost, shown as U+FFFD.
    fn finish(&mut self) -> String {
        if std::mem::take(&mut self.held).is_empty() {
            String::new()
        } else {
            String::from(char::REPLACEMENT_CHARACTER)
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

    /// A step's output: SSE text to write now (empty when folding). The step's vector of
    /// events goes back to `translator`, emptied, for its next events (a call per upstream
    /// chunk then allocates no new one).
    fn emit(&mut self, step: Step, translator: &mut DialectTranslator) -> String {
        match (self, step) {
            (Self::Sse, Step::Events(events)) => {
                let out = encode_all(&events);
                translator.recycle(events);
                out
            }
            (Self::Sse, Step::Relayed(relayed)) => relayed.sse,
            (Self::Fold(acc), Step::Events(mut events)) => {
                for event in events.drain(..) {
                    acc.push_owned(event);
                }
                translator.recycle(events);
                String::new()
            }
            (Self::Fold(acc), Step::Relayed(Relayed { events, .. })) => {
                for event in events {
                    acc.push_owned(event);
                }
                String::new()
            }
        }
    }

    /// The last step: the last SSE text, or the folded message.
    fn finish(&mut self, step: Step, translator: &mut DialectTranslator) -> Finished {
        let body = self.emit(step, translator);
        match self {
            Self::Sse => Finished { status: 200, body },
            Self::Fold(acc) => acc.result(),
        }
    }
}

impl Translator {
    /// A translator for one upstream reply (or, for a front dialect, one OpenAI client's answer).
    #[must_use]
    pub fn new(options: StreamOptions) -> Self {
        let (model, estimate, seed) = (
            options.model,
            options.input_tokens_estimate,
            options.id_seed,
        );
        let translator = match options.dialect {
            Dialect::OpenaiChat => {
                let mut chat = ChatStreamTranslator::new(model, estimate, seed);
                chat.writer().rename_tools(options.tool_names);
                chat.start_with_first_frame(options.usage_on_first_chunk);
                DialectTranslator::Chat(Box::new(chat))
            }
            Dialect::OpenaiResponses => {
                let mut responses = ResponsesStreamTranslator::new(model, estimate, seed);
                responses.writer().rename_tools(options.tool_names);
                DialectTranslator::Responses(Box::new(responses))
            }
            Dialect::Chatml => DialectTranslator::Chatml {
                translator: Box::new(TokenStreamTranslator::new(
                    model,
                    estimate,
                    seed,
                    options.tools,
                )),
                text: Utf8Reader::default(),
            },
            Dialect::Anthropic => DialectTranslator::Anthropic(Box::default()),
            Dialect::FrontOpenaiChat | Dialect::FrontOpenaiResponses => {
                let front = options.dialect.front().unwrap_or(Front::Chat);
                let answer = crate::front::facade::answer(front, &model, seed, &options.front);
                let translator =
                    FrontTranslator::new(&answer, options.stream, options.output_limit);
                return Self {
                    mode: Mode::Front(Box::new(translator)),
                };
            }
        };
        Self {
            mode: Mode::Upstream {
                translator,
                sink: Sink::new(options.stream),
            },
        }
    }

    /// Feed upstream bytes (any chunking); returns SSE bytes to write now (empty when folding).
    pub fn feed(&mut self, chunk: &[u8]) -> String {
        match &mut self.mode {
            Mode::Upstream { translator, sink } => {
                let step = translator.feed(chunk);
                sink.emit(step, translator)
            }
            Mode::Front(front) => front.feed(chunk),
        }
    }

    /// [`Self::feed`] with bytes the caller gives away: a front dialect's translator takes a
    /// long event's data from them in place rather than copying it (the others read them as
    /// `feed` does).
    pub fn feed_owned(&mut self, chunk: Vec<u8>) -> String {
        match &mut self.mode {
            Mode::Front(front) => front.feed_owned(chunk),
            Mode::Upstream { .. } => self.feed(&chunk),
        }
    }

    /// The upstream failed (transport error, timeout, disconnect): end the response with an
    /// `error` event (streaming) or make `finish` return the error (folding).
    pub fn fail(&mut self, kind: ErrorKind, message: &str) -> String {
        match &mut self.mode {
            Mode::Upstream { translator, sink } => {
                let step = translator.fail(ApiError::new(kind, message));
                sink.emit(step, translator)
            }
            Mode::Front(front) => front.fail(kind, message),
        }
    }

    /// The upstream's reply ended. `end` is what the upstream reported outside its stream (a
    /// raw-text host's finish reason and token counts); the SSE dialects carry that in their
    /// stream and take [`StreamEnd::default()`]. Returns the last SSE bytes, or the folded
    /// message.
    pub fn finish(&mut self, end: &StreamEnd) -> Finished {
        match &mut self.mode {
            Mode::Upstream { translator, sink } => {
                let step = translator.finish(end);
                sink.finish(step, translator)
            }
            Mode::Front(front) => {
                let (status, body) = front.finish();
                Finished { status, body }
            }
        }
    }
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

fn encode_all(events: &[StreamEvent]) -> String {
    // Room for a typical event each (a text delta is about 100 bytes).
    let mut out = String::with_capacity(events.len() * 128);
    for event in events {
        crate::anthropic::encode::encode_event(&mut out, event);
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

    /// [`Self::feed`] with bytes given away: a long event's data is taken, not copied.
    pub fn feed_owned(&mut self, sse: Vec<u8>) {
        let frames = self.decoder.feed_owned(sse);
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
                Ok(event) => self.acc.push_owned(event),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_cut_anywhere_reads_the_same_and_garbage_becomes_replacement_characters() {
        let text = "héllo 😀 – ok";
        for cut in 0..=text.len() {
            let mut reader = Utf8Reader::default();
            let (a, b) = text.as_bytes().split_at(cut);
            let mut out = reader.feed(a);
            out.push_str(&reader.feed(b));
            out.push_str(&reader.finish());
            assert_eq!(out, text, "cut at byte {cut}");
        }
        let mut reader = Utf8Reader::default();
        assert_eq!(reader.feed(b"a\xffb\xe2\x82"), "a\u{fffd}b");
        assert_eq!(reader.finish(), "\u{fffd}");
    }

    #[test]
    fn stream_options_read_a_front_or_its_absence() {
        let read = |json: &str| serde_json::from_str::<StreamOptions>(json).ok();
        let none = read(r#"{"stream":true,"model":"m","input_tokens_estimate":0,"id_seed":1}"#);
        let null = read(
            r#"{"stream":true,"model":"m","input_tokens_estimate":0,"id_seed":1,"front":null}"#,
        );
        assert_eq!(none, null);
        assert_eq!(none.map(|o| o.front), Some(FrontOptions::default()));
        let chat = read(
            r#"{"stream":true,"model":"m","input_tokens_estimate":0,"id_seed":1,
                "dialect":"front_openai_chat","front":{"include_usage":true,"created":5}}"#,
        );
        let front = chat.map(|o| (o.dialect, o.front.include_usage, o.front.created));
        assert_eq!(front, Some((Dialect::FrontOpenaiChat, true, 5)));
        let nulls = read(
            r#"{"stream":true,"model":"m","input_tokens_estimate":0,"id_seed":1,
                "front":{"id":null,"created":null,"include_usage":null,"custom_tools":null}}"#,
        );
        assert_eq!(nulls.map(|o| o.front), Some(FrontOptions::default()));
    }

    #[test]
    fn every_dialect_name_reads_back_and_an_unknown_one_lists_them() {
        for dialect in Dialect::ALL {
            assert_eq!(Dialect::parse(dialect.as_str()).ok(), Some(dialect));
            let json = serde_json::to_string(&dialect).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", dialect.as_str()));
        }
        let error = Dialect::parse("chat").err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some(
                "invalid bridge options: unknown dialect \"chat\": expected one of openai_chat, openai_responses, chatml, anthropic, front_openai_chat, front_openai_responses"
            )
        );
    }

    #[test]
    fn a_chatml_reply_in_bytes_split_inside_characters_and_tags_is_one_tool_call() {
        let request = br#"{"model":"claude-x","max_tokens":64,"tools":[{"name":"Bash","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}],"messages":[{"role":"user","content":"list"}]}"#;
        let prepared = prepare(Dialect::Chatml, request, "{}").unwrap();
        let prompt: ChatmlPrompt = serde_json::from_str(&prepared.body).unwrap();
        assert_eq!(prompt.client_model, prepared.client_model);
        let reply =
            "Listé.<tool_call>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}</tool_call>";
        let mut translator = Translator::new(StreamOptions {
            stream: false,
            model: prepared.client_model,
            input_tokens_estimate: prepared.input_tokens_estimate,
            id_seed: 3,
            dialect: Dialect::Chatml,
            tools: prompt.tools,
            ..StreamOptions::default()
        });
        for byte in reply.as_bytes() {
            assert_eq!(translator.feed(std::slice::from_ref(byte)), "");
        }
        let end = StreamEnd {
            finish_reason: Some(String::from("stop")),
            prompt_tokens: Some(30),
            completion_tokens: Some(9),
        };
        let folded = translator.finish(&end);
        assert_eq!(folded.status, 200);
        let message: serde_json::Value = serde_json::from_str(&folded.body).unwrap_or_default();
        assert_eq!(message["content"][0]["text"], "Listé.");
        assert_eq!(message["content"][1]["name"], "Bash");
        assert_eq!(message["content"][1]["input"]["command"], "ls");
        assert_eq!(message["stop_reason"], "tool_use");
        assert_eq!(message["usage"]["output_tokens"], 9);
    }
}
