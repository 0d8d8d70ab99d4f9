//! OpenAI Chat Completions request (written) and stream chunk (read, tolerantly) types.

use crate::anthropic::tool_schema::CleanedSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::chat_chunk::{ChatChunk, Choices, ChunkChoice, ChunkDelta};

/// `POST /v1/chat/completions` body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    /// Upstream model.
    pub model: String,
    /// Conversation.
    pub messages: Vec<ChatMessage>,
    /// Output limit (`max_tokens`, or `max_completion_tokens` for providers that want it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Output limit for o-series style providers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Stop strings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// Function tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ChatTool>>,
    /// `auto` / `required` / `none` / `{type:function,…}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// `false` when the client disabled parallel tool use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// `low` / `medium` / `high` (only when the provider takes it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Structured output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    /// Always `true`: the bridge streams from upstreams even for non-streaming clients.
    pub stream: bool,
    /// `{include_usage: true}`.
    pub stream_options: Value,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, `tool`.
    pub role: &'static str,
    /// String or content parts; `null` for an assistant turn with only tool calls.
    pub content: Value,
    /// Assistant tool calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<Value>>,
    /// For `tool` messages: the call answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Reasoning of an assistant turn, passed back (DeepSeek-style servers require it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

/// One entry of a request's `tools`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ChatTool {
    /// `{"type":"function","function":{…}}`.
    Function {
        /// Always `function`.
        #[serde(rename = "type")]
        kind: &'static str,
        /// The function.
        function: ChatFunction,
    },
    /// Another kind, as JSON (OpenRouter's web search).
    Other(Value),
}

/// A function tool's `function`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatFunction {
    /// Tool name.
    pub name: String,
    /// Description (the client's JSON text where it can be: see [`crate::json_string`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<crate::json_string::JsonString>,
    /// JSON schema of the arguments.
    pub parameters: CleanedSchema,
}

/// A fragment of a tool call.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolCallDelta {
    /// Which call (Ollama reuses 0 for every call; a new id there means a new call).
    #[serde(default)]
    pub index: Option<u32>,
    /// Call id (some servers send integers).
    #[serde(default)]
    pub id: Option<Value>,
    /// Name and argument fragment.
    #[serde(default)]
    pub function: Option<FunctionDelta>,
    // Other members (`type`, Gemini's `extra_content`) are skipped unread: a `flatten` map here
    // made serde buffer every fragment's members before reading them, on every tool-call chunk.
}

/// Name and arguments fragment.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FunctionDelta {
    /// Name (usually only on the first fragment; some servers repeat it).
    #[serde(default)]
    pub name: Option<String>,
    /// Arguments fragment (a JSON text piece; some servers send an object).
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// Token usage as OpenAI reports it (`prompt_tokens` includes cached tokens).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChatUsage {
    /// All prompt tokens, cached included.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// Cache details.
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// Server tools run for the answer (OpenRouter: `{web_search_requests}`).
    #[serde(default)]
    pub server_tool_use_details: Option<Value>,
}

/// Cached prompt tokens.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PromptTokensDetails {
    /// Tokens read from the cache.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    /// Tokens written to the cache (some providers).
    #[serde(default)]
    pub cache_write_tokens: Option<u64>,
}
