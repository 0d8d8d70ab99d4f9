//! Anthropic streaming events and the response message they fold into.
//!
//! Field order follows the API's own output, so encoded events read like Anthropic's.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::error::ErrorKind;

/// One SSE event of a Messages stream; its `type` is also the SSE `event:` name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// First event: the message shell with input usage.
    MessageStart {
        /// The message with empty content (boxed: inline, its 200-odd bytes made every event,
        /// the text delta each upstream chunk becomes, that large).
        message: Box<MessageShell>,
    },
    /// A content block opens at `index`.
    ContentBlockStart {
        /// Position in the final content array.
        index: u32,
        /// The block's initial (empty) state.
        content_block: BlockStart,
    },
    /// A piece of the open block.
    ContentBlockDelta {
        /// Index of the open block.
        index: u32,
        /// The piece.
        delta: Delta,
    },
    /// The block at `index` is complete.
    ContentBlockStop {
        /// Index of the closed block.
        index: u32,
    },
    /// Stop reason and cumulative usage.
    MessageDelta {
        /// Stop reason and sequence.
        delta: MessageDeltaBody,
        /// Cumulative usage.
        usage: Usage,
    },
    /// Last event of a complete message.
    MessageStop,
    /// Keep-alive.
    Ping,
    /// The stream failed; nothing follows.
    Error {
        /// What failed.
        error: ApiError,
    },
}

impl StreamEvent {
    /// The SSE `event:` name (equal to the JSON `type`).
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::MessageStart { .. } => "message_start",
            Self::ContentBlockStart { .. } => "content_block_start",
            Self::ContentBlockDelta { .. } => "content_block_delta",
            Self::ContentBlockStop { .. } => "content_block_stop",
            Self::MessageDelta { .. } => "message_delta",
            Self::MessageStop => "message_stop",
            Self::Ping => "ping",
            Self::Error { .. } => "error",
        }
    }
}

/// The message as announced by `message_start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageShell {
    /// `msg_…`
    pub id: String,
    /// Always `"message"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Always `"assistant"`.
    pub role: String,
    /// The model name the client asked for.
    pub model: String,
    /// Always empty at start.
    pub content: Vec<Value>,
    /// Always null at start.
    pub stop_reason: Option<String>,
    /// Always null at start.
    pub stop_sequence: Option<String>,
    /// Input usage (an estimate until the upstream reports).
    pub usage: Usage,
}

impl MessageShell {
    /// The shell `message_start` announces: no content yet, `input_tokens` as known so far.
    #[must_use]
    pub fn new(id: String, model: String, input_tokens: u32) -> Self {
        Self {
            id,
            kind: String::from("message"),
            role: String::from("assistant"),
            model,
            content: Vec::new(),
            stop_reason: None,
            stop_sequence: None,
            usage: Usage {
                input_tokens,
                ..Usage::zero()
            },
        }
    }
}

/// Token usage. `input_tokens` excludes cached tokens, as in Anthropic's API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    #[serde(default)]
    pub input_tokens: u32,
    /// Tokens written to the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u32>,
    /// Tokens read from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u32>,
    /// The cache writes by lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation: Option<CacheCreation>,
    /// Output tokens (cumulative).
    #[serde(default)]
    pub output_tokens: u32,
    /// Server tool calls made for this answer (web searches, fetches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tool_use: Option<ServerToolUsage>,
}

/// `usage.server_tool_use`: how many server tool calls an answer made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerToolUsage {
    /// Web searches run.
    #[serde(default)]
    pub web_search_requests: u32,
    /// Web pages fetched.
    #[serde(default)]
    pub web_fetch_requests: u32,
}

impl Usage {
    /// Every count zero and present: what the bridge's own streams start from. Anthropic
    /// always sends the cache counts and the `cache_creation` object, and some clients read
    /// them without checking.
    #[must_use]
    pub fn zero() -> Self {
        Self {
            input_tokens: 0,
            cache_creation_input_tokens: Some(0),
            cache_read_input_tokens: Some(0),
            cache_creation: Some(CacheCreation::default()),
            output_tokens: 0,
            server_tool_use: None,
        }
    }
}

/// Cache writes by lifetime, as Anthropic reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCreation {
    /// Tokens written with the 5-minute lifetime.
    #[serde(default)]
    pub ephemeral_5m_input_tokens: u32,
    /// Tokens written with the 1-hour lifetime.
    #[serde(default)]
    pub ephemeral_1h_input_tokens: u32,
}

/// The empty state a content block starts in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockStart {
    /// Text.
    Text {
        /// Always empty at start.
        text: String,
    },
    /// Model reasoning.
    Thinking {
        /// Always empty at start.
        thinking: String,
        /// Always empty at start; set by a `signature_delta`.
        signature: String,
    },
    /// A client tool call.
    ToolUse {
        /// `toolu_…` (or the upstream's id).
        id: String,
        /// Tool name.
        name: String,
        /// Always `{}` at start; the input streams as `input_json_delta`.
        input: Value,
    },
    /// Encrypted reasoning: complete at start, no deltas.
    RedactedThinking {
        /// Opaque data, sent back unchanged in the next request.
        data: String,
    },
    /// A server tool call (web search, web fetch, …) run where the answer is made, not by
    /// the client.
    ServerToolUse {
        /// `srvtoolu_…`
        id: String,
        /// `web_search`, `web_fetch`, …
        name: String,
        /// Always `{}` at start; the input streams as `input_json_delta`.
        input: Value,
    },
    /// What a web search found: complete at start, no deltas.
    WebSearchToolResult {
        /// The `server_tool_use` it answers.
        tool_use_id: String,
        /// `[{type:"web_search_result", url, title, encrypted_content, page_age}]` or
        /// `{type:"web_search_tool_result_error", error_code}`.
        content: Value,
    },
    /// What a web fetch got: complete at start, no deltas.
    WebFetchToolResult {
        /// The `server_tool_use` it answers.
        tool_use_id: String,
        /// `{type:"web_fetch_result", url, content:{type:"document",…}, retrieved_at}` or
        /// `{type:"web_fetch_tool_result_error", error_code}`.
        content: Value,
    },
}

impl BlockStart {
    /// The block's `type`.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Text { .. } => "text",
            Self::Thinking { .. } => "thinking",
            Self::ToolUse { .. } => "tool_use",
            Self::RedactedThinking { .. } => "redacted_thinking",
            Self::ServerToolUse { .. } => "server_tool_use",
            Self::WebSearchToolResult { .. } => "web_search_tool_result",
            Self::WebFetchToolResult { .. } => "web_fetch_tool_result",
        }
    }
}

/// A piece of a content block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    /// Text piece.
    TextDelta {
        /// The text.
        text: String,
    },
    /// Piece of a tool call's JSON input.
    InputJsonDelta {
        /// Raw JSON fragment.
        partial_json: String,
    },
    /// Reasoning piece.
    ThinkingDelta {
        /// The reasoning text.
        thinking: String,
    },
    /// The thinking block's signature.
    SignatureDelta {
        /// Opaque signature.
        signature: String,
    },
    /// A citation for the open text block (`char_location`, `web_search_result_location`, …).
    CitationsDelta {
        /// The citation object, kept as it came.
        citation: Value,
    },
}

/// Body of `message_delta`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageDeltaBody {
    /// Why the model stopped.
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that matched, if known.
    pub stop_sequence: Option<String>,
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Natural end.
    EndTurn,
    /// Output token limit.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model called tools.
    ToolUse,
    /// The model refused (content filter).
    Refusal,
    /// A long server-tool turn was paused; sending the answer back as it is goes on with it.
    PauseTurn,
}

/// The `error` object of an error response or event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// Error type.
    #[serde(rename = "type")]
    pub kind: ErrorKind,
    /// Human-readable message (what to fix).
    pub message: String,
}

impl ApiError {
    /// An error of `kind` saying `message`.
    #[must_use]
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// The error response body `{"type":"error","error":{…}}`.
    #[must_use]
    pub fn envelope(&self) -> String {
        let body = ErrorEnvelope {
            kind: "error",
            error: self,
        };
        serde_json::to_string(&body).unwrap_or_else(|_| {
            String::from(r#"{"type":"error","error":{"type":"api_error","message":"error"}}"#)
        })
    }
}

#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    error: &'a ApiError,
}

/// A complete (non-streaming) response message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `msg_…`
    pub id: String,
    /// Always `"message"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Always `"assistant"`.
    pub role: String,
    /// Model name.
    pub model: String,
    /// Content blocks in index order.
    pub content: Vec<ContentBlock>,
    /// Why the model stopped.
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that matched.
    pub stop_sequence: Option<String>,
    /// Final usage.
    pub usage: Usage,
}

/// A complete content block of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
        /// The sources the text cites (folded from `citations_delta`), when it cites any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        citations: Option<Vec<Value>>,
    },
    /// Reasoning.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// Opaque signature.
        signature: String,
    },
    /// A tool call.
    ToolUse {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Parsed input object.
        input: Value,
    },
    /// Encrypted reasoning.
    RedactedThinking {
        /// Opaque data.
        data: String,
    },
    /// A server tool call.
    ServerToolUse {
        /// `srvtoolu_…`
        id: String,
        /// `web_search`, `web_fetch`, …
        name: String,
        /// Parsed input object.
        input: Value,
    },
    /// A web search's results (or error).
    WebSearchToolResult {
        /// The call it answers.
        tool_use_id: String,
        /// Results or error, as streamed.
        content: Value,
    },
    /// A web fetch's page (or error).
    WebFetchToolResult {
        /// The call it answers.
        tool_use_id: String,
        /// Page or error, as streamed.
        content: Value,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nearly every upstream chunk becomes one text delta, moved through a `Vec<StreamEvent>`:
    /// an event is as large as its largest variant, so no variant may hold a large struct
    /// inline (`MessageStart`'s shell made every event 200-odd bytes; a block start, 128
    /// bytes, is the largest now).
    #[test]
    fn an_event_is_small() {
        let size = std::mem::size_of::<StreamEvent>();
        assert!(size <= 136, "StreamEvent is {size} bytes");
    }
}
