//! Claude Code's stdout in `--output-format stream-json`: one JSON message per line (NDJSON).
//!
//! The model is tolerant on purpose. Claude Code adds fields and message types between releases,
//! so every message keeps its whole JSON as `raw` and the typed fields are only the ones the
//! translator reads; a field that is missing or has an unexpected shape reads as absent, and a
//! `type` this module does not know becomes [`ClaudeMessage::Unknown`].
//!
//! [`LineBuffer`] splits a byte stream into lines. Partial input is normal: bytes after the last
//! line break wait for the next chunk, so a line (or a UTF-8 character) may be cut anywhere.
//!
//! ```
//! use bridge_core::agui::claude::{parse_line, ClaudeMessage, LineBuffer};
//! let mut lines = LineBuffer::new();
//! assert!(lines.push(b"{\"type\":\"keep_al").is_empty());
//! let complete = lines.push(b"ive\"}\n\n{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false}\n");
//! assert_eq!(complete.len(), 2);
//! assert!(matches!(parse_line(&complete[0]), Ok(ClaudeMessage::KeepAlive(_))));
//! let Ok(ClaudeMessage::Result(result)) = parse_line(&complete[1]) else { panic!() };
//! assert!(!result.is_error);
//! ```

use serde_json::{Map, Value};

/// Why a line is not a Claude Code message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The line is empty or only whitespace ([`LineBuffer`] never yields such lines).
    #[error("empty line")]
    Empty,
    /// The line is not JSON (Claude Code wrote something else to stdout).
    #[error("not JSON: {0}")]
    NotJson(String),
    /// The line is JSON but not an object.
    #[error("not a JSON object")]
    NotAnObject,
}

/// One line of Claude Code's NDJSON output.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaudeMessage {
    /// `{"type":"system","subtype":…}`: init, status, api_retry, hooks, tasks, …
    System(SystemMessage),
    /// `{"type":"stream_event","event":…}`: one raw Anthropic SSE event
    /// (only with `--include-partial-messages`).
    StreamEvent(StreamEventMessage),
    /// `{"type":"assistant","message":…}`: a complete assistant message (in stream-json, one
    /// content block per message).
    Assistant(AssistantMessage),
    /// `{"type":"user","message":…}`: tool results, replays of the host's own messages.
    User(UserMessage),
    /// `{"type":"result",…}`: the turn is over.
    Result(ResultMessage),
    /// `{"type":"control_request","request_id":…,"request":{"subtype":…}}`: the CLI asks the host.
    ControlRequest(ControlRequest),
    /// `{"type":"control_response",…}`: the CLI answers one of the host's requests.
    ControlResponse(OtherMessage),
    /// `{"type":"control_cancel_request","request_id":…}`: the CLI withdraws a request.
    ControlCancelRequest(OtherMessage),
    /// `{"type":"keep_alive"}`.
    KeepAlive(OtherMessage),
    /// `{"type":"tool_progress",…}`.
    ToolProgress(OtherMessage),
    /// `{"type":"rate_limit_event",…}`.
    RateLimitEvent(OtherMessage),
    /// `{"type":"auth_status",…}`.
    AuthStatus(OtherMessage),
    /// Any other object (a type newer than this module, or no `type` at all).
    Unknown(Value),
}

impl ClaudeMessage {
    /// The whole message as Claude Code wrote it.
    #[must_use]
    pub fn raw(&self) -> &Value {
        match self {
            Self::System(m) => &m.raw,
            Self::StreamEvent(m) => &m.raw,
            Self::Assistant(m) => &m.raw,
            Self::User(m) => &m.raw,
            Self::Result(m) => &m.raw,
            Self::ControlRequest(m) => &m.raw,
            Self::ControlResponse(m)
            | Self::ControlCancelRequest(m)
            | Self::KeepAlive(m)
            | Self::ToolProgress(m)
            | Self::RateLimitEvent(m)
            | Self::AuthStatus(m) => &m.raw,
            Self::Unknown(raw) => raw,
        }
    }

    /// Classify a parsed JSON value.
    #[must_use]
    pub fn from_value(raw: Value) -> Self {
        let kind = str_field(&raw, "type").unwrap_or_default().to_owned();
        match kind.as_str() {
            "system" => Self::System(SystemMessage {
                subtype: str_field(&raw, "subtype").unwrap_or_default().to_owned(),
                raw,
            }),
            "stream_event" => Self::StreamEvent(StreamEventMessage {
                event: AnthropicEvent::from_value(raw.get("event").unwrap_or(&Value::Null)),
                parent_tool_use_id: owned_str(&raw, "parent_tool_use_id"),
                raw,
            }),
            "assistant" => Self::Assistant(AssistantMessage::from_raw(raw)),
            "user" => Self::User(UserMessage::from_raw(raw)),
            "result" => Self::Result(ResultMessage::from_raw(raw)),
            "control_request" => {
                let request = raw.get("request").cloned().unwrap_or(Value::Null);
                Self::ControlRequest(ControlRequest {
                    request_id: owned_str(&raw, "request_id").unwrap_or_default(),
                    subtype: str_field(&request, "subtype")
                        .unwrap_or_default()
                        .to_owned(),
                    request,
                    raw,
                })
            }
            "control_response" => Self::ControlResponse(OtherMessage { raw }),
            "control_cancel_request" => Self::ControlCancelRequest(OtherMessage { raw }),
            "keep_alive" => Self::KeepAlive(OtherMessage { raw }),
            "tool_progress" => Self::ToolProgress(OtherMessage { raw }),
            "rate_limit_event" => Self::RateLimitEvent(OtherMessage { raw }),
            "auth_status" => Self::AuthStatus(OtherMessage { raw }),
            _ => Self::Unknown(raw),
        }
    }
}

/// Parse one NDJSON line (surrounding whitespace and a trailing `\r` are ignored).
///
/// # Errors
/// [`ParseError`] when the line is blank, not JSON, or not a JSON object.
pub fn parse_line(line: &str) -> Result<ClaudeMessage, ParseError> {
    let line = line.trim();
    if line.is_empty() {
        return Err(ParseError::Empty);
    }
    let value: Value =
        serde_json::from_str(line).map_err(|e| ParseError::NotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(ParseError::NotAnObject);
    }
    Ok(ClaudeMessage::from_value(value))
}

/// A `system` message; `subtype` says which (`init`, `status`, `api_retry`, `compact_boundary`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct SystemMessage {
    /// `init`, `status`, `api_retry`, … (empty when missing).
    pub subtype: String,
    /// The whole message.
    pub raw: Value,
}

impl SystemMessage {
    /// The message's fields without `type` and `subtype` (an empty object if it is not one).
    #[must_use]
    pub fn fields(&self) -> Value {
        without_keys(&self.raw, &["type", "subtype"])
    }
}

/// A `stream_event` message: one Anthropic SSE event of the response being generated.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEventMessage {
    /// The Anthropic event, read tolerantly.
    pub event: AnthropicEvent,
    /// Set when the event belongs to a subagent (the `Task` tool call that runs it).
    pub parent_tool_use_id: Option<String>,
    /// The whole message.
    pub raw: Value,
}

/// The Anthropic SSE events the translator reads; everything else is [`AnthropicEvent::Other`].
#[derive(Debug, Clone, PartialEq)]
pub enum AnthropicEvent {
    /// `message_start`: the response's message id.
    MessageStart {
        /// `message.id` (absent in malformed input).
        message_id: Option<String>,
    },
    /// `content_block_start`: a block opens at `index`.
    ContentBlockStart {
        /// Position in the message's content.
        index: u64,
        /// The block's initial state.
        block: ContentBlock,
    },
    /// `content_block_delta`: a piece of the block at `index`.
    ContentBlockDelta {
        /// Position in the message's content.
        index: u64,
        /// The piece.
        delta: BlockDelta,
    },
    /// `content_block_stop`: the block at `index` is complete.
    ContentBlockStop {
        /// Position in the message's content.
        index: u64,
    },
    /// `message_delta`, `message_stop`, `ping`, `error` or a newer event.
    Other(Value),
}

impl AnthropicEvent {
    /// Read an Anthropic SSE event's JSON.
    #[must_use]
    pub fn from_value(event: &Value) -> Self {
        let index = event.get("index").and_then(Value::as_u64);
        match (str_field(event, "type"), index) {
            (Some("message_start"), _) => Self::MessageStart {
                message_id: event
                    .get("message")
                    .and_then(|m| str_field(m, "id"))
                    .map(str::to_owned),
            },
            (Some("content_block_start"), Some(index)) => Self::ContentBlockStart {
                index,
                block: ContentBlock::from_value(event.get("content_block").unwrap_or(&Value::Null)),
            },
            (Some("content_block_delta"), Some(index)) => Self::ContentBlockDelta {
                index,
                delta: BlockDelta::from_value(event.get("delta").unwrap_or(&Value::Null)),
            },
            (Some("content_block_stop"), Some(index)) => Self::ContentBlockStop { index },
            _ => Self::Other(event.clone()),
        }
    }
}

/// A content block, of a streamed block start or of a complete message.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `{"type":"text","text":…}`.
    Text {
        /// The text (empty at a stream's block start).
        text: String,
    },
    /// `{"type":"thinking","thinking":…,"signature":…}`.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The signature (often empty at a block start).
        signature: String,
    },
    /// `{"type":"redacted_thinking","data":…}`: encrypted reasoning.
    RedactedThinking {
        /// The encrypted reasoning.
        data: String,
    },
    /// `{"type":"tool_use"|"server_tool_use"|"mcp_tool_use","id","name","input"}`.
    ToolUse {
        /// The call's id (`toolu_…`, `srvtoolu_…`).
        id: String,
        /// The tool's name.
        name: String,
        /// The complete input (`{}` at a stream's block start).
        input: Value,
    },
    /// `{"type":"tool_result","tool_use_id",…}`, or a server tool's result block
    /// (`web_search_tool_result`, …): anything with a `tool_use_id`.
    ToolResult {
        /// The call it answers.
        tool_use_id: String,
        /// `content`: a string, an array of blocks, or absent (`null`).
        content: Value,
        /// `is_error` (false when absent).
        is_error: bool,
    },
    /// Any other block (`image`, `document`, …), kept whole.
    Other(Value),
}

impl ContentBlock {
    /// Read a content block's JSON.
    #[must_use]
    pub fn from_value(block: &Value) -> Self {
        let text = |key: &str| str_field(block, key).unwrap_or_default().to_owned();
        match str_field(block, "type") {
            Some("text") => Self::Text { text: text("text") },
            Some("thinking") => Self::Thinking {
                thinking: text("thinking"),
                signature: text("signature"),
            },
            Some("redacted_thinking") => Self::RedactedThinking { data: text("data") },
            Some("tool_use" | "server_tool_use" | "mcp_tool_use") => Self::ToolUse {
                id: text("id"),
                name: text("name"),
                input: block.get("input").cloned().unwrap_or(Value::Null),
            },
            Some(_) if str_field(block, "tool_use_id").is_some() => Self::ToolResult {
                tool_use_id: text("tool_use_id"),
                content: block.get("content").cloned().unwrap_or(Value::Null),
                is_error: block
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            _ => Self::Other(block.clone()),
        }
    }
}

/// A `content_block_delta`'s `delta`.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockDelta {
    /// `text_delta`.
    Text(String),
    /// `input_json_delta`: a piece of the tool input's JSON text.
    InputJson(String),
    /// `thinking_delta`.
    Thinking(String),
    /// `signature_delta`: the thinking block's signature.
    Signature(String),
    /// `citations_delta` or a newer delta.
    Other(Value),
}

impl BlockDelta {
    /// Read a delta's JSON.
    #[must_use]
    pub fn from_value(delta: &Value) -> Self {
        let text = |key: &str| str_field(delta, key).unwrap_or_default().to_owned();
        match str_field(delta, "type") {
            Some("text_delta") => Self::Text(text("text")),
            Some("input_json_delta") => Self::InputJson(text("partial_json")),
            Some("thinking_delta") => Self::Thinking(text("thinking")),
            Some("signature_delta") => Self::Signature(text("signature")),
            _ => Self::Other(delta.clone()),
        }
    }
}

/// An `assistant` message: in stream-json, one content block of a response per message; the
/// blocks of one response share `message_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantMessage {
    /// `message.id` (the Anthropic message id, the same as the stream's).
    pub message_id: Option<String>,
    /// `message.content`.
    pub content: Vec<ContentBlock>,
    /// `error`: set on synthetic error messages (`overloaded`, `rate_limit`, …).
    pub error: Option<String>,
    /// Set when the message belongs to a subagent.
    pub parent_tool_use_id: Option<String>,
    /// The whole message.
    pub raw: Value,
}

impl AssistantMessage {
    fn from_raw(raw: Value) -> Self {
        let message = raw.get("message").unwrap_or(&Value::Null);
        Self {
            message_id: owned_str(message, "id"),
            content: blocks(message.get("content")),
            error: owned_str(&raw, "error"),
            parent_tool_use_id: owned_str(&raw, "parent_tool_use_id"),
            raw,
        }
    }
}

/// A `user` message: tool results Claude Code ran, or a replay of the host's own input.
#[derive(Debug, Clone, PartialEq)]
pub struct UserMessage {
    /// `uuid`.
    pub uuid: Option<String>,
    /// `message.content` (a string content reads as one text block).
    pub content: Vec<ContentBlock>,
    /// `isReplay`: an echo of a message the host sent (or of a local command's output).
    pub is_replay: bool,
    /// Set when the message belongs to a subagent.
    pub parent_tool_use_id: Option<String>,
    /// The whole message.
    pub raw: Value,
}

impl UserMessage {
    fn from_raw(raw: Value) -> Self {
        let message = raw.get("message").unwrap_or(&Value::Null);
        Self {
            uuid: owned_str(&raw, "uuid"),
            content: blocks(message.get("content")),
            is_replay: raw.get("isReplay").and_then(Value::as_bool) == Some(true),
            parent_tool_use_id: owned_str(&raw, "parent_tool_use_id"),
            raw,
        }
    }
}

/// The `result` message that ends a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultMessage {
    /// `success`, `error_during_execution`, `error_max_turns`, … (API failures say `success`).
    pub subtype: String,
    /// `is_error`: the turn failed (true also for API failures with subtype `success`).
    pub is_error: bool,
    /// `result`: the final text (absent on error subtypes).
    pub result: Option<String>,
    /// `api_error_status`: the HTTP status of a failed API call.
    pub api_error_status: Option<u64>,
    /// `errors`: messages of the error subtypes.
    pub errors: Vec<String>,
    /// The whole message.
    pub raw: Value,
}

impl ResultMessage {
    fn from_raw(raw: Value) -> Self {
        Self {
            subtype: str_field(&raw, "subtype").unwrap_or_default().to_owned(),
            is_error: raw
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            result: owned_str(&raw, "result"),
            api_error_status: raw.get("api_error_status").and_then(Value::as_u64),
            errors: raw
                .get("errors")
                .and_then(Value::as_array)
                .map(|errors| {
                    errors
                        .iter()
                        .filter_map(|e| match e {
                            Value::String(s) => Some(s.clone()),
                            Value::Null => None,
                            other => Some(other.to_string()),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            raw,
        }
    }
}

/// A `control_request` from the CLI (`can_use_tool`, `hook_callback`, `mcp_message`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct ControlRequest {
    /// `request_id`: the host's answer must carry it.
    pub request_id: String,
    /// `request.subtype`.
    pub subtype: String,
    /// `request`.
    pub request: Value,
    /// The whole message.
    pub raw: Value,
}

/// A message the translator only passes on or drops; the JSON is all there is.
#[derive(Debug, Clone, PartialEq)]
pub struct OtherMessage {
    /// The whole message.
    pub raw: Value,
}

/// Splits a byte stream into lines, whatever the chunking.
///
/// Lines end at `\n`; a `\r` before it is dropped; blank lines are skipped. Invalid UTF-8 is
/// replaced (U+FFFD) rather than failing the stream.
#[derive(Debug, Default)]
pub struct LineBuffer {
    partial: Vec<u8>,
}

impl LineBuffer {
    /// An empty buffer.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Add bytes; returns the lines they complete.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..end]);
            rest = &rest[end + 1..];
            let line = std::mem::take(&mut self.partial);
            if let Some(line) = decode_line(&line) {
                lines.push(line);
            }
        }
        self.partial.extend_from_slice(rest);
        lines
    }

    /// The stream ended: the last line if it had no line break.
    pub fn finish(&mut self) -> Option<String> {
        let line = std::mem::take(&mut self.partial);
        decode_line(&line)
    }
}

/// A line without its `\r`, or `None` when it is blank.
fn decode_line(bytes: &[u8]) -> Option<String> {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let line = String::from_utf8_lossy(bytes);
    if line.trim().is_empty() {
        None
    } else {
        Some(line.into_owned())
    }
}

/// `value[key]` when it is a string.
fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn owned_str(value: &Value, key: &str) -> Option<String> {
    str_field(value, key).map(str::to_owned)
}

/// A content field as blocks: a string is one text block; an array is read block by block.
fn blocks(content: Option<&Value>) -> Vec<ContentBlock> {
    match content {
        Some(Value::String(text)) => vec![ContentBlock::Text { text: text.clone() }],
        Some(Value::Array(items)) => items.iter().map(ContentBlock::from_value).collect(),
        _ => Vec::new(),
    }
}

/// An object's fields without `keys` (an empty object when `value` is not an object).
pub(crate) fn without_keys(value: &Value, keys: &[&str]) -> Value {
    let fields: Map<String, Value> = value
        .as_object()
        .map(|object| {
            object
                .iter()
                .filter(|(k, _)| !keys.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    Value::Object(fields)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn classifies_known_types_and_keeps_unknown_fields() {
        let line = r#"{"type":"system","subtype":"init","session_id":"s1","future":{"x":1}}"#;
        let Ok(ClaudeMessage::System(system)) = parse_line(line) else {
            panic!("not a system message");
        };
        assert_eq!(system.subtype, "init");
        assert_eq!(system.raw["future"], json!({"x":1}));
        assert_eq!(system.fields(), json!({"session_id":"s1","future":{"x":1}}));
    }

    #[test]
    fn unknown_type_and_missing_type_are_unknown() {
        let m = parse_line(r#"{"type":"brand_new","a":1}"#).unwrap();
        assert_eq!(m, ClaudeMessage::Unknown(json!({"type":"brand_new","a":1})));
        assert!(matches!(
            parse_line(r#"{"a":1}"#),
            Ok(ClaudeMessage::Unknown(_))
        ));
    }

    #[test]
    fn rejects_blank_non_json_and_non_objects() {
        assert_eq!(parse_line("  \r"), Err(ParseError::Empty));
        assert!(matches!(
            parse_line("warning: x"),
            Err(ParseError::NotJson(_))
        ));
        assert_eq!(parse_line("[1]"), Err(ParseError::NotAnObject));
    }

    #[test]
    fn reads_stream_events() {
        let line = r#"{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}},"parent_tool_use_id":"toolu_9"}"#;
        let Ok(ClaudeMessage::StreamEvent(m)) = parse_line(line) else {
            panic!("not a stream event");
        };
        assert_eq!(m.parent_tool_use_id.as_deref(), Some("toolu_9"));
        assert_eq!(
            m.event,
            AnthropicEvent::ContentBlockDelta {
                index: 1,
                delta: BlockDelta::InputJson("{\"a\"".into())
            }
        );
        let ping = AnthropicEvent::from_value(&json!({"type":"ping"}));
        assert_eq!(ping, AnthropicEvent::Other(json!({"type":"ping"})));
        // A block event without an index is not trusted.
        let bad = AnthropicEvent::from_value(&json!({"type":"content_block_stop"}));
        assert!(matches!(bad, AnthropicEvent::Other(_)));
    }

    #[test]
    fn reads_blocks_tolerantly() {
        assert_eq!(
            ContentBlock::from_value(
                &json!({"type":"server_tool_use","id":"srv_1","name":"web_search","input":{"q":"x"}})
            ),
            ContentBlock::ToolUse {
                id: "srv_1".into(),
                name: "web_search".into(),
                input: json!({"q":"x"})
            }
        );
        assert_eq!(
            ContentBlock::from_value(
                &json!({"type":"web_search_tool_result","tool_use_id":"srv_1","content":[]})
            ),
            ContentBlock::ToolResult {
                tool_use_id: "srv_1".into(),
                content: json!([]),
                is_error: false
            }
        );
        assert!(matches!(
            ContentBlock::from_value(&json!({"type":"image"})),
            ContentBlock::Other(_)
        ));
        assert_eq!(
            ContentBlock::from_value(&json!({"type":"thinking","thinking":"hm"})),
            ContentBlock::Thinking {
                thinking: "hm".into(),
                signature: String::new()
            }
        );
    }

    #[test]
    fn reads_user_assistant_result_and_control_messages() {
        let user = parse_line(r#"{"type":"user","message":{"role":"user","content":"hi"},"isReplay":true,"uuid":"u1"}"#).unwrap();
        let ClaudeMessage::User(user) = user else {
            panic!("not a user message")
        };
        assert!(user.is_replay);
        assert_eq!(user.content, vec![ContentBlock::Text { text: "hi".into() }]);

        let assistant = parse_line(r#"{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"x"}]},"error":"overloaded"}"#).unwrap();
        let ClaudeMessage::Assistant(assistant) = assistant else {
            panic!("not an assistant message")
        };
        assert_eq!(assistant.message_id.as_deref(), Some("msg_1"));
        assert_eq!(assistant.error.as_deref(), Some("overloaded"));

        let result = parse_line(r#"{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["too many",null,{"a":1}],"api_error_status":null}"#).unwrap();
        let ClaudeMessage::Result(result) = result else {
            panic!("not a result")
        };
        assert_eq!(
            result.errors,
            vec!["too many".to_owned(), r#"{"a":1}"#.to_owned()]
        );
        assert_eq!(result.api_error_status, None);
        assert_eq!(result.result, None);

        let request = parse_line(r#"{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash"}}"#).unwrap();
        let ClaudeMessage::ControlRequest(request) = request else {
            panic!("not a control request")
        };
        assert_eq!(request.request_id, "r1");
        assert_eq!(request.subtype, "can_use_tool");
        assert_eq!(request.request["tool_name"], "Bash");
    }

    #[test]
    fn line_buffer_handles_any_split() {
        let input = "{\"a\":\"é\"}\r\n\n  \n{\"b\":2}\n{\"c\":3}";
        let bytes = input.as_bytes();
        for size in 1..=bytes.len() {
            let mut buffer = LineBuffer::new();
            let mut lines = Vec::new();
            for chunk in bytes.chunks(size) {
                lines.extend(buffer.push(chunk));
            }
            lines.extend(buffer.finish());
            assert_eq!(
                lines,
                ["{\"a\":\"é\"}", "{\"b\":2}", "{\"c\":3}"],
                "size {size}"
            );
        }
    }

    #[test]
    fn line_buffer_replaces_invalid_utf8() {
        let mut buffer = LineBuffer::new();
        assert_eq!(buffer.push(b"a\xffb\n"), ["a\u{fffd}b"]);
        assert_eq!(buffer.finish(), None);
    }
}
