//! Tolerant Anthropic Messages request types.
//!
//! Everything Claude Code sends must be read: unknown fields are kept in `extra` maps and
//! unknown block types as [`Block::Other`], so nothing is rejected and nothing is silently lost.
//! Only what the Messages API itself requires (`model`, `messages`, each message's `role` and
//! `content`) is enforced, with a message that says what to fix.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod de;
mod parse;

pub use parse::parse_request;

/// `POST /v1/messages` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagesRequest {
    /// Model name the client asked for.
    pub model: String,
    /// Output token limit (required by `/v1/messages`, absent in `count_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The conversation.
    pub messages: Vec<InputMessage>,
    /// System prompt: a string or text blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Content>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u64>,
    /// Stream the answer as SSE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// How the model must use tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Extended thinking configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Value>,
    /// `effort`, structured-output `format`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_config: Option<Value>,
    /// Everything else (`metadata`, `context_management`, `cache_control`, future fields).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputMessage {
    /// `user`, `assistant` or (mid-conversation) `system`.
    pub role: Role,
    /// A string or blocks.
    pub content: Content,
    /// Unknown message fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Message role; unknown roles are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user (and tool results).
    User,
    /// The model.
    Assistant,
    /// Mid-conversation system text.
    System,
    /// Anything else.
    #[serde(untagged)]
    Other(String),
}

/// Content: a plain string or a list of blocks.
///
/// Read by hand ([`de`]): an untagged derive would first copy the whole content into serde's
/// buffer and then copy every string again from there.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content blocks.
    Blocks(Vec<Block>),
}

impl Content {
    /// The blocks of this content (a string is one text block).
    #[must_use]
    pub fn blocks(&self) -> Vec<Block> {
        match self {
            Self::Text(text) => vec![Block::Known(KnownBlock::Text {
                text: text.clone(),
                extra: Map::new(),
            })],
            Self::Blocks(blocks) => blocks.clone(),
        }
    }
}

/// A content block: a known type, or anything else kept verbatim.
///
/// Read by hand ([`de`]) into a JSON object first, whose values then move into the
/// [`KnownBlock`] its `type` names; an object that does not fit one stays [`Block::Other`],
/// unchanged. This is what the untagged derive decided, without its two copies of every string.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Block {
    /// A block type the bridge understands.
    Known(KnownBlock),
    /// Any other block (server tools, documents with unusual sources, future types).
    Other(Value),
}

/// The block types the translators act on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum KnownBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
        /// `cache_control`, `citations`, …
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// An image.
    Image {
        /// `{type:"base64",media_type,data}` or `{type:"url",url}`.
        source: ImageSource,
        /// Other fields.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// A tool call made by the assistant.
    ToolUse {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        #[serde(default)]
        input: Value,
        /// Other fields.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// The result of a tool call, sent by the user.
    ToolResult {
        /// The call it answers.
        tool_use_id: String,
        /// A string or blocks.
        #[serde(default)]
        content: Option<Content>,
        /// Whether the tool failed.
        #[serde(default)]
        is_error: Option<bool>,
        /// Other fields.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// Reasoning from an earlier assistant turn.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// Signature (may be empty or absent from non-Anthropic backends).
        #[serde(default)]
        signature: Option<String>,
        /// Other fields.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// Encrypted reasoning.
    RedactedThinking {
        /// Opaque data.
        data: String,
    },
    /// A document (text sources are read; others are kept but not translatable).
    Document {
        /// The source.
        source: Value,
        /// Other fields.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
}

/// Where an image comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource {
    /// Inline data.
    Base64 {
        /// `image/png`, …
        media_type: String,
        /// Base64 data.
        data: String,
    },
    /// A URL.
    Url {
        /// The URL.
        url: String,
    },
    /// A file id (Files API) or a future source.
    #[serde(untagged)]
    Other(Value),
}

/// A tool definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Tool name.
    #[serde(default)]
    pub name: String,
    /// Description (kept as the client's JSON text: see [`crate::json_string`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<crate::json_string::JsonString>,
    /// JSON schema of the input (absent for server tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<crate::anthropic::tool_schema::ToolSchema>,
    /// `custom` or a versioned server-tool type.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Other fields (`cache_control`, `strict`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The system prompt as one text (blocks joined by blank lines; Claude Code's billing-header
/// block left out); any non-text block is dropped with a warning.
pub(crate) fn system_text(system: &Content, warnings: &mut Vec<String>) -> String {
    match system {
        Content::Text(text) => text.clone(),
        Content::Blocks(blocks) => {
            let mut parts = Vec::new();
            for block in blocks {
                match block {
                    Block::Known(KnownBlock::Text { text, .. }) => {
                        if text.starts_with("x-anthropic-billing-header:") {
                            continue;
                        }
                        parts.push(text.as_str());
                    }
                    _ => warnings.push(String::from("non-text system block dropped")),
                }
            }
            parts.join("\n\n")
        }
    }
}

/// A text document as the text a model reads: under its title when it has one. `None` for a
/// PDF or any other file.
pub(crate) fn inline_document(source: &Value, extra: &Map<String, Value>) -> Option<String> {
    let text = document_text(source)?;
    Some(match extra.get("title").and_then(Value::as_str) {
        Some(title) if !title.is_empty() => format!("[document: {title}]\n{text}"),
        _ => text,
    })
}

/// The text of a `text` or `content` document source; `None` for PDFs and other files.
fn document_text(source: &Value) -> Option<String> {
    match source.get("type").and_then(Value::as_str) {
        Some("text") => Some(
            source
                .get("data")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        ),
        Some("content") => Some(match source.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|item| item.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }),
        _ => None,
    }
}
