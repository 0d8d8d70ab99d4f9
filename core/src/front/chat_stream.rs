//! Anthropic stream events → OpenAI Chat Completions: SSE chunks for streaming clients
//! ([`ChatStreamEncoder`]) and one `chat.completion` object for the others ([`ChatCompletionFold`],
//! which folds the encoder's own chunks: one code path for both).
//!
//! | Anthropic event | Chat Completions chunk(s) |
//! |---|---|
//! | `message_start` (or the first content) | `delta: {role:"assistant", content:""}` |
//! | `text_delta` | `delta: {content}` |
//! | `thinking_delta` | `delta: {reasoning_content}` (DeepSeek's field; `signature_delta` is dropped) |
//! | `content_block_start` tool_use | `delta: {tool_calls:[{index, id, type:"function", function:{name, arguments:""}}]}`, `index` counting calls from 0 |
//! | `input_json_delta` | `delta: {tool_calls:[{index, function:{arguments}}]}` |
//! | tool_use block closed with no input streamed | one arguments fragment `{}` (or the start's input), so the arguments always parse |
//! | `message_delta` | remembered: stop reason and usage |
//! | `message_stop` | `delta: {}, finish_reason` (`end_turn`/`stop_sequence` → `stop`, `max_tokens` → `length`, `tool_use` → `tool_calls`, `refusal` → `content_filter`); with `include_usage` a chunk with `choices: []` and `usage`; `data: [DONE]` |
//! | `error` | `data: {"error":{"message","type","param","code"}}` and nothing after: openai-python's `Stream.__stream__` raises `APIError(message=error.message)` for a `data:` object with an `error` key (and stops at `[DONE]`), so no `[DONE]` follows |
//! | `ping` | nothing (the host keeps the connection alive) |
//!
//! A stream that ends without `message_stop` ends with `finish_reason` if a `message_delta`
//! brought the stop reason, otherwise with an error chunk. With `include_usage` every chunk but
//! the usage chunk carries `"usage": null`, as OpenAI's do. Usage: `prompt_tokens` = Anthropic
//! input + cache write + cache read tokens; `prompt_tokens_details.cached_tokens` = cache read.
//!
//! ```
//! use bridge_core::anthropic::events::*;
//! use bridge_core::front::chat_stream::ChatCompletionFold;
//! let mut fold = ChatCompletionFold::new("chatcmpl-1", 1_700_000_000, "gpt-x");
//! fold.push(StreamEvent::MessageStart { message: Box::new(MessageShell::new("msg_1".into(), "m".into(), 5)) });
//! fold.push(StreamEvent::ContentBlockStart { index: 0,
//!     content_block: BlockStart::ToolUse { id: "toolu_1".into(), name: "ls".into(), input: serde_json::json!({}) } });
//! fold.push(StreamEvent::ContentBlockStop { index: 0 });
//! fold.push(StreamEvent::MessageDelta {
//!     delta: MessageDeltaBody { stop_reason: Some(StopReason::ToolUse), stop_sequence: None },
//!     usage: Usage { output_tokens: 3, ..Default::default() } });
//! fold.push(StreamEvent::MessageStop);
//! let done: serde_json::Value = serde_json::from_str(&fold.finish().unwrap().to_json()).unwrap();
//! assert_eq!(done["choices"][0]["finish_reason"], "tool_calls");
//! assert_eq!(done["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{}");
//! assert_eq!(done["usage"]["total_tokens"], 8);
//! ```

use serde::Serialize;
use serde_json::Value;

use crate::anthropic::accumulate::merge_usage;
use crate::anthropic::events::{
    ApiError, BlockStart, Delta, ErrorKind, StopReason, StreamEvent, Usage,
};
use crate::front::{Failure, append_taken, openai_error_body};

/// One streamed `chat.completion.chunk`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionChunk {
    /// `chatcmpl-…`, the same on every chunk.
    pub id: String,
    /// Always `chat.completion.chunk`.
    pub object: &'static str,
    /// Unix seconds, the same on every chunk.
    pub created: u64,
    /// The model name reported to the client.
    pub model: String,
    /// One choice, or none on the usage chunk.
    pub choices: Vec<ChunkChoice>,
    /// Absent without `include_usage`; `null` on every chunk but the usage chunk with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<CompletionUsage>>,
}

/// The choice of a chunk (always index 0).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkChoice {
    /// Always 0.
    pub index: u32,
    /// What this chunk adds.
    pub delta: ChunkDelta,
    /// `null` until the last choice chunk.
    pub finish_reason: Option<&'static str>,
}

/// What a chunk adds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChunkDelta {
    /// `assistant` on the first chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// Text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Reasoning text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// A tool call's start or an arguments fragment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallChunk>>,
}

/// A tool call fragment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallChunk {
    /// Which call (0, 1, … in order of appearance).
    pub index: u32,
    /// The call id (first fragment only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function` (first fragment only).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// Name (first fragment) and arguments piece.
    pub function: FunctionChunk,
}

/// Name and arguments piece of a tool call fragment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionChunk {
    /// Tool name (first fragment only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A piece of the arguments JSON text (`""` on the first fragment).
    pub arguments: String,
}

/// Token usage in OpenAI's shape (`prompt_tokens` includes cached tokens).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompletionUsage {
    /// All input tokens.
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// The sum.
    pub total_tokens: u64,
    /// Cache details.
    pub prompt_tokens_details: PromptDetails,
}

/// Cached input tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptDetails {
    /// Read from a cache.
    pub cached_tokens: u64,
    /// Written to a cache (when the upstream reported writes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

impl CompletionUsage {
    fn from_anthropic(usage: &Usage) -> Self {
        let cached = u64::from(usage.cache_read_input_tokens.unwrap_or(0));
        // Anthropic always reports the writes, zero included; OpenAI-style clients only
        // see the field when something was written.
        let written = usage
            .cache_creation_input_tokens
            .filter(|&n| n > 0)
            .map(u64::from);
        let prompt = u64::from(usage.input_tokens) + cached + written.unwrap_or(0);
        let completion = u64::from(usage.output_tokens);
        Self {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            prompt_tokens_details: PromptDetails {
                cached_tokens: cached,
                cache_write_tokens: written,
            },
        }
    }
}

/// One SSE frame of a Chat Completions stream.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatFrame {
    /// `data: {chunk}`
    Chunk(CompletionChunk),
    /// `data: {"error":{…}}` (the last frame).
    Error(ApiError),
    /// `data: [DONE]` (the last frame).
    Done,
}

impl ChatFrame {
    /// Append the frame's SSE bytes.
    pub fn encode(&self, out: &mut String) {
        out.push_str("data: ");
        match self {
            Self::Chunk(chunk) => {
                // Written in place: a long answer's chunk is not made twice.
                let start = out.len();
                if crate::compact_json::write_into(out, chunk).is_err() {
                    out.truncate(start);
                    out.push_str("{}");
                }
            }
            Self::Error(error) => out.push_str(&openai_error_body(error)),
            Self::Done => out.push_str("[DONE]"),
        }
        out.push_str("\n\n");
    }
}

/// The finish reason for an Anthropic stop reason.
#[must_use]
pub fn finish_reason(stop: Option<StopReason>) -> &'static str {
    match stop {
        None | Some(StopReason::EndTurn | StopReason::StopSequence | StopReason::PauseTurn) => {
            "stop"
        }
        Some(StopReason::MaxTokens) => "length",
        Some(StopReason::ToolUse) => "tool_calls",
        Some(StopReason::Refusal) => "content_filter",
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Open {
    Other,
    Tool {
        index: u32,
        sent_args: bool,
        start_input: Value,
    },
}

/// Anthropic events in, Chat Completions SSE out; see the module docs.
#[derive(Debug)]
pub struct ChatStreamEncoder {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    started: bool,
    done: bool,
    open: Option<Open>,
    tools: u32,
    stop: Option<StopReason>,
    stop_seen: bool,
    usage: Usage,
}

impl ChatStreamEncoder {
    /// An encoder writing chunks with id `chatcmpl-<id>` (`id` as is when it already starts
    /// with `chatcmpl-`), `created` unix seconds and `model`; `include_usage` from the request's
    /// `stream_options`.
    #[must_use]
    pub fn new(id: &str, created: u64, model: &str, include_usage: bool) -> Self {
        let id = if id.starts_with("chatcmpl-") {
            id.to_owned()
        } else {
            format!("chatcmpl-{id}")
        };
        Self {
            id,
            created,
            model: model.to_owned(),
            include_usage,
            started: false,
            done: false,
            open: None,
            tools: 0,
            stop: None,
            stop_seen: false,
            usage: Usage::default(),
        }
    }

    /// The SSE bytes for one event.
    pub fn push(&mut self, event: StreamEvent) -> String {
        encode(&self.push_frames(event))
    }

    /// The SSE bytes that end the stream (nothing when it already ended).
    pub fn finish(&mut self) -> String {
        encode(&self.finish_frames())
    }

    /// Whether `[DONE]` or an error chunk was written.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The frames for one event (taken, so its text moves into them rather than being copied).
    pub fn push_frames(&mut self, event: StreamEvent) -> Vec<ChatFrame> {
        let mut out = Vec::new();
        if self.done {
            return out;
        }
        match event {
            StreamEvent::MessageStart { message } => {
                self.usage = message.usage;
                self.start(&mut out);
            }
            StreamEvent::ContentBlockStart { content_block, .. } => {
                self.close_tool(&mut out);
                self.start(&mut out);
                self.open = Some(match content_block {
                    BlockStart::ToolUse { id, name, input } => {
                        let index = self.tools;
                        self.tools += 1;
                        out.push(self.tool_chunk(ToolCallChunk {
                            index,
                            id: Some(id),
                            kind: Some("function"),
                            function: FunctionChunk {
                                name: Some(name),
                                arguments: String::new(),
                            },
                        }));
                        Open::Tool {
                            index,
                            sent_args: false,
                            start_input: input,
                        }
                    }
                    // Server tools ran where the answer was made; a Chat client gets what
                    // the model said about them.
                    BlockStart::Text { .. }
                    | BlockStart::Thinking { .. }
                    | BlockStart::RedactedThinking { .. }
                    | BlockStart::ServerToolUse { .. }
                    | BlockStart::WebSearchToolResult { .. }
                    | BlockStart::WebFetchToolResult { .. } => Open::Other,
                });
            }
            StreamEvent::ContentBlockDelta { delta, .. } => {
                self.start(&mut out);
                self.delta(delta, &mut out);
            }
            StreamEvent::ContentBlockStop { .. } => self.close_tool(&mut out),
            StreamEvent::MessageDelta { delta, usage } => {
                self.stop = delta.stop_reason;
                self.stop_seen = true;
                merge_usage(&mut self.usage, &usage);
            }
            StreamEvent::MessageStop => self.end(&mut out),
            StreamEvent::Ping => {}
            StreamEvent::Error { error } => {
                self.done = true;
                out.push(ChatFrame::Error(error));
            }
        }
        out
    }

    /// The frames that end the stream.
    pub fn finish_frames(&mut self) -> Vec<ChatFrame> {
        let mut out = Vec::new();
        if self.done {
            return out;
        }
        if self.stop_seen {
            self.end(&mut out);
        } else {
            self.done = true;
            out.push(ChatFrame::Error(ApiError::new(
                ErrorKind::Api,
                "the upstream stream ended before the message was complete",
            )));
        }
        out
    }

    fn chunk(&self, delta: ChunkDelta, finish_reason: Option<&'static str>) -> ChatFrame {
        ChatFrame::Chunk(CompletionChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model.clone(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason,
            }],
            usage: self.include_usage.then_some(None),
        })
    }

    fn tool_chunk(&self, call: ToolCallChunk) -> ChatFrame {
        self.chunk(
            ChunkDelta {
                tool_calls: Some(vec![call]),
                ..ChunkDelta::default()
            },
            None,
        )
    }

    fn start(&mut self, out: &mut Vec<ChatFrame>) {
        if self.started {
            return;
        }
        self.started = true;
        out.push(self.chunk(
            ChunkDelta {
                role: Some("assistant"),
                content: Some(String::new()),
                ..ChunkDelta::default()
            },
            None,
        ));
    }

    fn delta(&mut self, delta: Delta, out: &mut Vec<ChatFrame>) {
        match delta {
            Delta::TextDelta { text } if !text.is_empty() => out.push(self.chunk(
                ChunkDelta {
                    content: Some(text),
                    ..ChunkDelta::default()
                },
                None,
            )),
            Delta::ThinkingDelta { thinking } if !thinking.is_empty() => out.push(self.chunk(
                ChunkDelta {
                    reasoning_content: Some(thinking),
                    ..ChunkDelta::default()
                },
                None,
            )),
            Delta::InputJsonDelta { partial_json } if !partial_json.is_empty() => {
                let Some(Open::Tool {
                    index, sent_args, ..
                }) = self.open.as_mut()
                else {
                    return;
                };
                *sent_args = true;
                let index = *index;
                out.push(self.tool_chunk(ToolCallChunk {
                    index,
                    id: None,
                    kind: None,
                    function: FunctionChunk {
                        name: None,
                        arguments: partial_json,
                    },
                }));
            }
            _ => {}
        }
    }

    /// Close the open block; a tool call that streamed no arguments gets `{}` (or its start
    /// input) so its arguments parse.
    fn close_tool(&mut self, out: &mut Vec<ChatFrame>) {
        if let Some(Open::Tool {
            index,
            sent_args: false,
            start_input,
        }) = self.open.take()
        {
            let arguments = match &start_input {
                Value::Object(o) if !o.is_empty() => start_input.to_string(),
                _ => String::from("{}"),
            };
            out.push(self.tool_chunk(ToolCallChunk {
                index,
                id: None,
                kind: None,
                function: FunctionChunk {
                    name: None,
                    arguments,
                },
            }));
        }
    }

    fn end(&mut self, out: &mut Vec<ChatFrame>) {
        self.close_tool(out);
        self.start(out);
        out.push(self.chunk(ChunkDelta::default(), Some(finish_reason(self.stop))));
        if self.include_usage {
            out.push(ChatFrame::Chunk(CompletionChunk {
                id: self.id.clone(),
                object: "chat.completion.chunk",
                created: self.created,
                model: self.model.clone(),
                choices: Vec::new(),
                usage: Some(Some(CompletionUsage::from_anthropic(&self.usage))),
            }));
        }
        out.push(ChatFrame::Done);
        self.done = true;
    }
}

fn encode(frames: &[ChatFrame]) -> String {
    let mut out = String::new();
    for frame in frames {
        frame.encode(&mut out);
    }
    out
}

/// A complete `chat.completion` (non-streaming response).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatCompletion {
    /// `chatcmpl-…`
    pub id: String,
    /// Always `chat.completion`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The model name reported to the client.
    pub model: String,
    /// One choice.
    pub choices: Vec<CompletionChoice>,
    /// Token usage.
    pub usage: CompletionUsage,
}

impl ChatCompletion {
    /// The response body.
    #[must_use]
    pub fn to_json(&self) -> String {
        // A long answer's text is measured and written in one allocation (`compact_json`).
        crate::compact_json::to_string(self).unwrap_or_default()
    }
}

/// The one choice of a completion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionChoice {
    /// Always 0.
    pub index: u32,
    /// The assistant message.
    pub message: CompletionMessage,
    /// `stop`, `length`, `tool_calls` or `content_filter`.
    pub finish_reason: &'static str,
    /// Always `null`.
    pub logprobs: Option<Value>,
}

/// The assistant message of a completion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionMessage {
    /// Always `assistant`.
    pub role: &'static str,
    /// The text; `null` when the turn is only tool calls.
    pub content: Option<String>,
    /// Reasoning text, when the model reasoned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Always `null`.
    pub refusal: Option<String>,
    /// Tool calls, when the model made any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<CompletionToolCall>,
}

/// A complete tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionToolCall {
    /// Call id.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Name and arguments.
    pub function: CompletionFunction,
}

/// Name and full arguments of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionFunction {
    /// Tool name.
    pub name: String,
    /// Arguments as a JSON text.
    pub arguments: String,
}

/// Folds Anthropic events into one [`ChatCompletion`] by folding the chunks the
/// [`ChatStreamEncoder`] makes of them (as an OpenAI SDK's stream accumulator would).
#[derive(Debug)]
pub struct ChatCompletionFold {
    encoder: ChatStreamEncoder,
    content: String,
    reasoning: String,
    tools: Vec<CompletionToolCall>,
    finish: Option<&'static str>,
    usage: Option<CompletionUsage>,
    error: Option<ApiError>,
}

impl ChatCompletionFold {
    /// A fold for a completion with this id (see [`ChatStreamEncoder::new`]), time and model.
    #[must_use]
    pub fn new(id: &str, created: u64, model: &str) -> Self {
        Self {
            encoder: ChatStreamEncoder::new(id, created, model, true),
            content: String::new(),
            reasoning: String::new(),
            tools: Vec::new(),
            finish: None,
            usage: None,
            error: None,
        }
    }

    /// Fold one event in.
    pub fn push(&mut self, event: StreamEvent) {
        for frame in self.encoder.push_frames(event) {
            self.absorb(frame);
        }
    }

    /// The completion, or the error the stream ended with.
    ///
    /// # Errors
    /// A [`Failure`] when the stream ended with an error or incomplete.
    pub fn finish(mut self) -> Result<ChatCompletion, Failure> {
        for frame in self.encoder.finish_frames() {
            self.absorb(frame);
        }
        if let Some(error) = &self.error {
            return Err(Failure::from_api_error(error));
        }
        let content = if self.content.is_empty() && !self.tools.is_empty() {
            None
        } else {
            Some(self.content)
        };
        Ok(ChatCompletion {
            id: self.encoder.id.clone(),
            object: "chat.completion",
            created: self.encoder.created,
            model: self.encoder.model.clone(),
            choices: vec![CompletionChoice {
                index: 0,
                message: CompletionMessage {
                    role: "assistant",
                    content,
                    reasoning_content: (!self.reasoning.is_empty()).then_some(self.reasoning),
                    refusal: None,
                    tool_calls: self.tools,
                },
                finish_reason: self.finish.unwrap_or("stop"),
                logprobs: None,
            }],
            usage: self
                .usage
                .unwrap_or_else(|| CompletionUsage::from_anthropic(&Usage::default())),
        })
    }

    fn absorb(&mut self, frame: ChatFrame) {
        match frame {
            ChatFrame::Chunk(chunk) => {
                if let Some(Some(usage)) = chunk.usage {
                    self.usage = Some(usage);
                }
                for choice in chunk.choices {
                    if let Some(reason) = choice.finish_reason {
                        self.finish = Some(reason);
                    }
                    let delta = choice.delta;
                    if let Some(content) = delta.content {
                        append_taken(&mut self.content, content);
                    }
                    if let Some(reasoning) = delta.reasoning_content {
                        append_taken(&mut self.reasoning, reasoning);
                    }
                    for call in delta.tool_calls.unwrap_or_default() {
                        self.tool_fragment(call);
                    }
                }
            }
            ChatFrame::Error(error) => self.error = Some(error),
            ChatFrame::Done => {}
        }
    }

    fn tool_fragment(&mut self, call: ToolCallChunk) {
        let Ok(index) = usize::try_from(call.index) else {
            return;
        };
        if index == self.tools.len() {
            self.tools.push(CompletionToolCall {
                id: call.id.unwrap_or_default(),
                kind: "function",
                function: CompletionFunction {
                    name: call.function.name.unwrap_or_default(),
                    arguments: String::new(),
                },
            });
        }
        if let Some(tool) = self.tools.get_mut(index) {
            tool.function.arguments.push_str(&call.function.arguments);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::events::{MessageDeltaBody, MessageShell};
    use crate::front::chat_validate::check_chat_sse;
    use serde_json::json;

    fn start(input: u32) -> StreamEvent {
        StreamEvent::MessageStart {
            message: Box::new(MessageShell::new("msg_1".into(), "claude".into(), input)),
        }
    }

    fn open(index: u32, block: BlockStart) -> StreamEvent {
        StreamEvent::ContentBlockStart {
            index,
            content_block: block,
        }
    }

    fn delta(index: u32, delta: Delta) -> StreamEvent {
        StreamEvent::ContentBlockDelta { index, delta }
    }

    fn stop(stop: StopReason, usage: Usage) -> [StreamEvent; 2] {
        [
            StreamEvent::MessageDelta {
                delta: MessageDeltaBody {
                    stop_reason: Some(stop),
                    stop_sequence: None,
                },
                usage,
            },
            StreamEvent::MessageStop,
        ]
    }

    fn run(enc: &mut ChatStreamEncoder, events: &[StreamEvent]) -> String {
        let mut out: String = events.iter().map(|e| enc.push(e.clone())).collect();
        out.push_str(&enc.finish());
        out
    }

    fn text_turn() -> Vec<StreamEvent> {
        let mut events = vec![
            start(10),
            StreamEvent::Ping,
            open(
                0,
                BlockStart::Text {
                    text: String::new(),
                },
            ),
            delta(0, Delta::TextDelta { text: "Hi".into() }),
            StreamEvent::ContentBlockStop { index: 0 },
        ];
        events.extend(stop(
            StopReason::EndTurn,
            Usage {
                input_tokens: 10,
                output_tokens: 2,
                cache_read_input_tokens: Some(4),
                ..Usage::default()
            },
        ));
        events
    }

    #[test]
    fn a_text_turn_with_usage_exact_bytes() {
        let mut enc = ChatStreamEncoder::new("a1", 7, "gpt-x", true);
        let sse = run(&mut enc, &text_turn());
        let head = r#"{"id":"chatcmpl-a1","object":"chat.completion.chunk","created":7,"model":"gpt-x","choices":"#;
        assert_eq!(
            sse,
            [
                format!(r#"data: {head}[{{"index":0,"delta":{{"role":"assistant","content":""}},"finish_reason":null}}],"usage":null}}"#),
                format!(r#"data: {head}[{{"index":0,"delta":{{"content":"Hi"}},"finish_reason":null}}],"usage":null}}"#),
                format!(r#"data: {head}[{{"index":0,"delta":{{}},"finish_reason":"stop"}}],"usage":null}}"#),
                format!(r#"data: {head}[],"usage":{{"prompt_tokens":14,"completion_tokens":2,"total_tokens":16,"prompt_tokens_details":{{"cached_tokens":4}}}}}}"#),
                String::from("data: [DONE]"),
                String::new(),
            ]
            .join("\n\n")
        );
        check_chat_sse(sse.as_bytes(), true).unwrap();
        assert!(enc.is_done() && enc.push(StreamEvent::MessageStop).is_empty());
    }

    #[test]
    fn without_include_usage_there_is_no_usage_field() {
        let mut enc = ChatStreamEncoder::new("chatcmpl-b", 7, "gpt-x", false);
        let sse = run(&mut enc, &text_turn());
        assert!(!sse.contains("usage"), "{sse}");
        assert!(sse.contains(r#""id":"chatcmpl-b""#));
        check_chat_sse(sse.as_bytes(), false).unwrap();
    }

    #[test]
    fn reasoning_and_tool_calls() {
        let mut events = vec![
            start(3),
            open(
                0,
                BlockStart::Thinking {
                    thinking: String::new(),
                    signature: String::new(),
                },
            ),
            delta(
                0,
                Delta::ThinkingDelta {
                    thinking: "hmm".into(),
                },
            ),
            delta(
                0,
                Delta::SignatureDelta {
                    signature: "sig".into(),
                },
            ),
            StreamEvent::ContentBlockStop { index: 0 },
            open(
                1,
                BlockStart::ToolUse {
                    id: "toolu_a".into(),
                    name: "ls".into(),
                    input: json!({}),
                },
            ),
            delta(
                1,
                Delta::InputJsonDelta {
                    partial_json: String::new(),
                },
            ),
            delta(
                1,
                Delta::InputJsonDelta {
                    partial_json: "{\"p\":".into(),
                },
            ),
            delta(
                1,
                Delta::InputJsonDelta {
                    partial_json: "1}".into(),
                },
            ),
            StreamEvent::ContentBlockStop { index: 1 },
            open(
                2,
                BlockStart::ToolUse {
                    id: "toolu_b".into(),
                    name: "pwd".into(),
                    input: json!({}),
                },
            ),
            StreamEvent::ContentBlockStop { index: 2 },
        ];
        events.extend(stop(
            StopReason::ToolUse,
            Usage {
                output_tokens: 9,
                ..Usage::default()
            },
        ));
        let mut enc = ChatStreamEncoder::new("t", 1, "m", false);
        let sse = run(&mut enc, &events);
        let chunks = check_chat_sse(sse.as_bytes(), false).unwrap();
        let deltas: Vec<&Value> = chunks.iter().map(|c| &c["choices"][0]["delta"]).collect();
        assert_eq!(
            deltas,
            [
                &json!({"role": "assistant", "content": ""}),
                &json!({"reasoning_content": "hmm"}),
                &json!({"tool_calls": [{"index": 0, "id": "toolu_a", "type": "function", "function": {"name": "ls", "arguments": ""}}]}),
                &json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"p\":"}}]}),
                &json!({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
                &json!({"tool_calls": [{"index": 1, "id": "toolu_b", "type": "function", "function": {"name": "pwd", "arguments": ""}}]}),
                &json!({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}),
                &json!({}),
            ]
        );
        assert_eq!(chunks[7]["choices"][0]["finish_reason"], "tool_calls");

        let mut fold = ChatCompletionFold::new("t", 1, "m");
        for e in &events {
            fold.push(e.clone());
        }
        let done = serde_json::to_value(fold.finish().unwrap()).unwrap();
        assert_eq!(
            done["choices"][0],
            json!({"index": 0, "message": {"role": "assistant", "content": null,
                "reasoning_content": "hmm", "refusal": null, "tool_calls": [
                    {"id": "toolu_a", "type": "function", "function": {"name": "ls", "arguments": "{\"p\":1}"}},
                    {"id": "toolu_b", "type": "function", "function": {"name": "pwd", "arguments": "{}"}}]},
                "finish_reason": "tool_calls", "logprobs": null})
        );
        assert_eq!(done["object"], "chat.completion");
        assert_eq!(done["usage"]["completion_tokens"], 9);
    }

    #[test]
    fn stop_reasons_map_to_finish_reasons() {
        for (stop, reason) in [
            (StopReason::EndTurn, "stop"),
            (StopReason::StopSequence, "stop"),
            (StopReason::MaxTokens, "length"),
            (StopReason::ToolUse, "tool_calls"),
            (StopReason::Refusal, "content_filter"),
        ] {
            assert_eq!(finish_reason(Some(stop)), reason);
        }
        assert_eq!(finish_reason(None), "stop");
    }

    #[test]
    fn a_mid_stream_error_becomes_an_error_chunk_and_ends() {
        let mut enc = ChatStreamEncoder::new("e", 1, "m", true);
        let mut sse = enc.push(start(1));
        sse.push_str(&enc.push(StreamEvent::Error {
            error: ApiError::new(ErrorKind::Overloaded, "Overloaded"),
        }));
        sse.push_str(&enc.push(StreamEvent::MessageStop));
        sse.push_str(&enc.finish());
        assert!(sse.ends_with(
            "\n\ndata: {\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"param\":null,\"code\":\"overloaded\"}}\n\n"
        ), "{sse}");
        check_chat_sse(sse.as_bytes(), true).unwrap();

        let mut fold = ChatCompletionFold::new("e", 1, "m");
        fold.push(StreamEvent::Error {
            error: ApiError::new(ErrorKind::RateLimit, "slow down"),
        });
        let failure = fold.finish().unwrap_err();
        assert_eq!(failure.status, 429);
        assert!(failure.body.contains("rate_limit_error"));
    }

    #[test]
    fn a_cut_stream_ends_with_an_error_unless_the_stop_reason_came() {
        let mut enc = ChatStreamEncoder::new("c", 1, "m", false);
        let events = text_turn();
        let cut = run(&mut enc, &events[..4]);
        assert!(
            cut.contains(r#"{"error":{"message":"the upstream stream ended"#),
            "{cut}"
        );
        check_chat_sse(cut.as_bytes(), false).unwrap();

        let mut enc = ChatStreamEncoder::new("c", 1, "m", false);
        let no_stop = run(&mut enc, &events[..events.len() - 1]);
        assert!(no_stop.ends_with("data: [DONE]\n\n"));
        check_chat_sse(no_stop.as_bytes(), false).unwrap();
    }
}
