//! OpenAI Responses API types: the request the bridge sends (`POST /v1/responses`, written) and
//! the stream events it reads (tolerantly), plus the signature format that carries a reasoning
//! item's `encrypted_content` through an Anthropic thinking block and back.
//!
//! Reading is tolerant twice over: unknown fields and event types are ignored, and a known field
//! of an unexpected JSON type reads as absent instead of failing the whole event.
//!
//! ```
//! use bridge_core::openai::responses::{ResponsesEvent, encrypted_reasoning, reasoning_signature};
//! let e: ResponsesEvent = serde_json::from_str(
//!     r#"{"type":"response.output_text.delta","sequence_number":4,"output_index":0,"delta":"Hi","logprobs":[],"new":1}"#,
//! ).unwrap();
//! assert_eq!((e.kind.as_str(), e.delta.as_deref()), ("response.output_text.delta", Some("Hi")));
//! let signature = reasoning_signature("gAAAAB…");
//! assert_eq!(encrypted_reasoning(&signature), Some("gAAAAB…"));
//! assert_eq!(encrypted_reasoning("EqQBCkgIARABGAIiQ…"), None); // an Anthropic signature
//! ```

use crate::anthropic::tool_schema::CleanedSchema;
use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Prefix of a thinking block's signature that carries a Responses reasoning item's
/// `encrypted_content`: `claude-bridge/responses-reasoning/v1:` followed by the content as sent.
pub const REASONING_SIGNATURE_PREFIX: &str = "claude-bridge/responses-reasoning/v1:";

/// The thinking-block signature carrying `encrypted_content`.
#[must_use]
pub fn reasoning_signature(encrypted_content: &str) -> String {
    format!("{REASONING_SIGNATURE_PREFIX}{encrypted_content}")
}

/// The `encrypted_content` a signature carries, if it is one the bridge produced.
#[must_use]
pub fn encrypted_reasoning(signature: &str) -> Option<&str> {
    signature
        .strip_prefix(REASONING_SIGNATURE_PREFIX)
        .filter(|content| !content.is_empty())
}

/// `POST /v1/responses` body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponsesRequest {
    /// Upstream model.
    pub model: String,
    /// The system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The conversation as input items.
    pub input: Vec<InputItem>,
    /// Flat function tools, and the hosted web search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// `auto` / `required` / `none` / `{type:"function",name}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// `false` when the client disabled parallel tool use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Output limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Reasoning effort and summaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningConfig>,
    /// Structured output (`{format:{type:"json_schema",…}}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<Value>,
    /// The most calls to hosted tools one response may make (the web search's `max_uses`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
    /// Always `false`: the bridge is stateless and sends the whole conversation each time.
    pub store: bool,
    /// `reasoning.encrypted_content` when reasoning is on (to pass reasoning back),
    /// `web_search_call.action.sources` with the hosted web search (what a search found).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// Always `true`: the bridge streams from upstreams even for non-streaming clients.
    pub stream: bool,
}

/// `reasoning` of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasoningConfig {
    /// `none` / `minimal` / `low` / `medium` / `high` / `xhigh`.
    pub effort: String,
    /// Always `auto`: summaries become the client's thinking text.
    pub summary: String,
}

/// One input item.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InputItem {
    /// A message of `user`, `assistant` (output text) or `developer`.
    Message {
        /// The role.
        role: &'static str,
        /// Its parts.
        content: Vec<ContentPart>,
    },
    /// An earlier tool call of the model.
    FunctionCall {
        /// The call id (the Anthropic `tool_use` id).
        call_id: String,
        /// Tool name.
        name: String,
        /// Arguments as a JSON text.
        arguments: String,
    },
    /// The result of a call.
    FunctionCallOutput {
        /// The call answered.
        call_id: String,
        /// The result text.
        output: String,
    },
    /// An earlier search of the hosted web search tool, as the upstream gave it out.
    WebSearchCall {
        /// Its item id (`ws_…`).
        id: String,
        /// Always `completed`.
        status: &'static str,
        /// `{type:"search", query, sources?}`.
        action: Value,
    },
    /// Earlier reasoning, passed back encrypted (the model cannot take plain-text reasoning).
    Reasoning {
        /// The reasoning summary as the client saw it.
        summary: Vec<SummaryText>,
        /// The opaque content the upstream gave out.
        encrypted_content: String,
    },
}

/// A part of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// User or developer text.
    InputText {
        /// The text.
        text: String,
    },
    /// An image (a URL or a `data:` URL).
    InputImage {
        /// The URL.
        image_url: String,
        /// Always `auto`.
        detail: &'static str,
    },
    /// A file (a PDF as a `data:` URL, or a URL).
    InputFile {
        /// A name for it.
        #[serde(skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
        /// `data:<media type>;base64,…`.
        #[serde(skip_serializing_if = "Option::is_none")]
        file_data: Option<String>,
        /// A URL.
        #[serde(skip_serializing_if = "Option::is_none")]
        file_url: Option<String>,
    },
    /// Earlier assistant text.
    OutputText {
        /// The text.
        text: String,
    },
}

/// A reasoning summary part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SummaryText {
    /// Always `summary_text`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The summary text.
    pub text: String,
}

/// A tool of the request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Tool {
    /// A function the client runs.
    Function(FunctionTool),
    /// The upstream's own web search.
    WebSearch(WebSearchTool),
}

/// The hosted web search tool (`{type:"web_search"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WebSearchTool {
    /// Always `web_search`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `{allowed_domains:[…]}`: only results from these domains (and their subdomains).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filters: Option<Value>,
    /// `{type:"approximate", city, region, country, timezone}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_location: Option<Value>,
}

/// A flat function tool (no nested `function` object, unlike Chat Completions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionTool {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Tool name.
    pub name: String,
    /// Description (the client's JSON text where it can be: see [`crate::json_string`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<crate::json_string::JsonString>,
    /// JSON schema of the arguments.
    pub parameters: CleanedSchema,
    /// Always `false`: Anthropic schemas are not written for OpenAI's strict mode.
    pub strict: bool,
}

/// One stream event (or, with `response`, the final state). Every field is optional: the reader
/// picks what an event type carries and ignores the rest.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResponsesEvent {
    /// The event type (`response.output_text.delta`, `error`, …).
    #[serde(rename = "type", default, deserialize_with = "lenient_or_default")]
    pub kind: String,
    /// Monotonic position in the stream.
    #[serde(default, deserialize_with = "lenient")]
    pub sequence_number: Option<u64>,
    /// Position of the item in the response's `output`.
    #[serde(default, deserialize_with = "lenient")]
    pub output_index: Option<u64>,
    /// The item's id.
    #[serde(default, deserialize_with = "lenient")]
    pub item_id: Option<String>,
    /// Content part of a message or of raw reasoning.
    #[serde(default, deserialize_with = "lenient")]
    pub content_index: Option<u64>,
    /// Part of a reasoning summary.
    #[serde(default, deserialize_with = "lenient")]
    pub summary_index: Option<u64>,
    /// A text, refusal, reasoning or arguments piece.
    #[serde(default, deserialize_with = "lenient")]
    pub delta: Option<String>,
    /// Complete arguments (`response.function_call_arguments.done`).
    #[serde(default, deserialize_with = "lenient")]
    pub arguments: Option<String>,
    /// Complete custom tool input (`response.custom_tool_call_input.done`).
    #[serde(default, deserialize_with = "lenient")]
    pub input: Option<String>,
    /// Tool name (`response.function_call_arguments.done` on some servers).
    #[serde(default, deserialize_with = "lenient")]
    pub name: Option<String>,
    /// The item (`response.output_item.added` / `.done`).
    #[serde(default, deserialize_with = "lenient")]
    pub item: Option<OutputItem>,
    /// A citation (`response.output_text.annotation.added`).
    #[serde(default, deserialize_with = "lenient")]
    pub annotation: Option<Annotation>,
    /// The response (`response.created`, `.completed`, `.incomplete`, `.failed`).
    #[serde(default, deserialize_with = "lenient")]
    pub response: Option<ResponseObject>,
    /// Error code (`error` events).
    #[serde(default, deserialize_with = "lenient_text")]
    pub code: Option<String>,
    /// Error message (`error` events).
    #[serde(default, deserialize_with = "lenient")]
    pub message: Option<String>,
    /// A nested error object (some servers wrap `error` events this way).
    #[serde(default, deserialize_with = "lenient")]
    pub error: Option<ErrorObject>,
}

/// An output item, complete or as announced.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct OutputItem {
    /// `message`, `reasoning`, `function_call`, `custom_tool_call`, hosted tool types…
    #[serde(rename = "type", default, deserialize_with = "lenient_or_default")]
    pub kind: String,
    /// The item id (`msg_…`, `rs_…`, `fc_…`).
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    /// The call id of a tool call (`call_…`).
    #[serde(default, deserialize_with = "lenient")]
    pub call_id: Option<String>,
    /// Tool name.
    #[serde(default, deserialize_with = "lenient")]
    pub name: Option<String>,
    /// Function call arguments (a JSON text).
    #[serde(default, deserialize_with = "lenient")]
    pub arguments: Option<String>,
    /// Custom tool call input (free text).
    #[serde(default, deserialize_with = "lenient")]
    pub input: Option<String>,
    /// Reasoning summary parts.
    #[serde(default, deserialize_with = "lenient_or_default")]
    pub summary: Vec<TextPart>,
    /// Message parts (`output_text`, `refusal`) or raw reasoning parts (`reasoning_text`).
    #[serde(default, deserialize_with = "lenient_or_default")]
    pub content: Vec<TextPart>,
    /// Opaque reasoning to pass back in a later request.
    #[serde(default, deserialize_with = "lenient")]
    pub encrypted_content: Option<String>,
    /// `in_progress`, `completed`, `failed`, … (hosted tool calls).
    #[serde(default, deserialize_with = "lenient")]
    pub status: Option<String>,
    /// What a `web_search_call` did (on its `output_item.done`).
    #[serde(default, deserialize_with = "lenient")]
    pub action: Option<SearchAction>,
}

/// A `web_search_call`'s action: `search` (with its query and, when asked for with
/// `include`, its sources), `open_page` or `find_in_page`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SearchAction {
    /// `search`, `open_page`, `find_in_page`.
    #[serde(rename = "type", default, deserialize_with = "lenient_or_default")]
    pub kind: String,
    /// The query searched.
    #[serde(default, deserialize_with = "lenient")]
    pub query: Option<String>,
    /// The queries searched (the first is `query`).
    #[serde(default, deserialize_with = "lenient_or_default")]
    pub queries: Vec<String>,
    /// What the search drew on: `{type:"url", url}` (or `{type:"api", name}`, without a URL).
    #[serde(default, deserialize_with = "lenient_or_default")]
    pub sources: Vec<Source>,
}

/// A source of a search.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Source {
    /// `url`, `api`, …
    #[serde(rename = "type", default, deserialize_with = "lenient_or_default")]
    pub kind: String,
    /// The page.
    #[serde(default, deserialize_with = "lenient")]
    pub url: Option<String>,
}

/// An annotation of output text: a `url_citation` (`start_index`..`end_index` counts
/// characters of the text, end excluded).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Annotation {
    /// `url_citation`, `file_citation`, …
    #[serde(rename = "type", default, deserialize_with = "lenient_or_default")]
    pub kind: String,
    /// The cited page.
    #[serde(default, deserialize_with = "lenient")]
    pub url: Option<String>,
    /// Its title.
    #[serde(default, deserialize_with = "lenient")]
    pub title: Option<String>,
}

/// A text-carrying part (`output_text`, `refusal`, `summary_text`, `reasoning_text`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TextPart {
    /// The part type.
    #[serde(rename = "type", default, deserialize_with = "lenient_or_default")]
    pub kind: String,
    /// Text (`output_text`, `summary_text`, `reasoning_text`).
    #[serde(default, deserialize_with = "lenient")]
    pub text: Option<String>,
    /// Refusal text (`refusal`).
    #[serde(default, deserialize_with = "lenient")]
    pub refusal: Option<String>,
    /// Citations of `output_text` (in the complete item).
    #[serde(default, deserialize_with = "lenient_or_default")]
    pub annotations: Vec<Annotation>,
}

impl TextPart {
    /// The part's text, whichever field carries it.
    #[must_use]
    pub fn text(&self) -> &str {
        self.text
            .as_deref()
            .or(self.refusal.as_deref())
            .unwrap_or_default()
    }
}

/// The response object (`response` of lifecycle events, or a whole non-streaming body).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResponseObject {
    /// `completed`, `incomplete`, `failed`, `in_progress`, …
    #[serde(default, deserialize_with = "lenient")]
    pub status: Option<String>,
    /// The output items (complete on the final event).
    #[serde(default, deserialize_with = "lenient_or_default")]
    pub output: Vec<OutputItem>,
    /// Token usage (on the final event).
    #[serde(default, deserialize_with = "lenient")]
    pub usage: Option<ResponseUsage>,
    /// Why it failed.
    #[serde(default, deserialize_with = "lenient")]
    pub error: Option<ErrorObject>,
    /// Why it is incomplete.
    #[serde(default, deserialize_with = "lenient")]
    pub incomplete_details: Option<IncompleteDetails>,
}

/// Token usage (`input_tokens` includes cached tokens, `output_tokens` reasoning tokens).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResponseUsage {
    /// All input tokens, cached included.
    #[serde(default, deserialize_with = "lenient")]
    pub input_tokens: Option<u64>,
    /// Cache details.
    #[serde(default, deserialize_with = "lenient")]
    pub input_tokens_details: Option<InputTokensDetails>,
    /// All output tokens, reasoning included.
    #[serde(default, deserialize_with = "lenient")]
    pub output_tokens: Option<u64>,
}

/// Cached input tokens.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InputTokensDetails {
    /// Tokens read from the cache.
    #[serde(default, deserialize_with = "lenient")]
    pub cached_tokens: Option<u64>,
    /// Tokens written to the cache (some providers).
    #[serde(default, deserialize_with = "lenient")]
    pub cache_write_tokens: Option<u64>,
}

/// `incomplete_details`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IncompleteDetails {
    /// `max_output_tokens` or `content_filter`.
    #[serde(default, deserialize_with = "lenient")]
    pub reason: Option<String>,
}

/// An error object (`response.error`, a nested `error`, or a plain error body's `error`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorObject {
    /// `rate_limit_exceeded`, `server_error`, `context_length_exceeded`, …
    #[serde(default, deserialize_with = "lenient_text")]
    pub code: Option<String>,
    /// `invalid_request_error`, `insufficient_quota`, … (plain error bodies).
    #[serde(rename = "type", default, deserialize_with = "lenient")]
    pub kind: Option<String>,
    /// What went wrong.
    #[serde(default, deserialize_with = "lenient")]
    pub message: Option<String>,
}

/// A field of the wrong JSON type reads as absent.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(serde_json::from_value(value).ok())
}

/// A field of the wrong JSON type reads as its default.
fn lenient_or_default<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(
    d: D,
) -> Result<T, D::Error> {
    Ok(lenient(d)?.unwrap_or_default())
}

/// A string, or a number read as its decimal text (error codes).
fn lenient_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_types_read_as_absent() {
        let e: ResponsesEvent = serde_json::from_str(
            r#"{"type":"response.output_item.done","output_index":"x","item":{"type":"function_call","call_id":7,"name":"Bash","summary":"no","arguments":"{}"},"code":429}"#,
        )
        .unwrap();
        assert_eq!(e.output_index, None);
        assert_eq!(e.code.as_deref(), Some("429"));
        let item = e.item.unwrap();
        assert_eq!((item.call_id, item.name.as_deref()), (None, Some("Bash")));
        assert!(item.summary.is_empty());
    }

    #[test]
    fn only_own_signatures_carry_reasoning() {
        assert_eq!(encrypted_reasoning(REASONING_SIGNATURE_PREFIX), None);
        assert_eq!(encrypted_reasoning("bridge-sig-abc"), None);
    }
}
