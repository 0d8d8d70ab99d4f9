//! Anthropic Messages request → OpenAI Chat Completions request.
//!
//! What a Chat upstream cannot express is dropped here, deliberately and in one place, with a
//! warning the host logs: `cache_control` (everywhere), `metadata`, `context_management`,
//! `top_k`, `thinking` (unless mapped to `reasoning_effort`), server tools without an input
//! schema, redacted thinking, and the `x-anthropic-billing-header` attribution block Claude Code
//! puts first in `system`.
//!
//! ```
//! use bridge_core::translate::chat_request::{convert, ConvertOptions};
//! let req = br#"{"model":"claude-x","max_tokens":100000,"system":"Be brief.",
//!   "messages":[{"role":"user","content":"hi"}]}"#;
//! let out = convert(req, &ConvertOptions { model: Some("qwen3".into()), max_tokens_cap: Some(8192), ..Default::default() }).unwrap();
//! assert_eq!(out.upstream_model, "qwen3");
//! assert_eq!(out.client_model, "claude-x");
//! let body: serde_json::Value = serde_json::from_str(&out.body).unwrap();
//! assert_eq!(body["max_tokens"], 8192);
//! assert_eq!(body["messages"][0], serde_json::json!({"role":"system","content":"Be brief."}));
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::anthropic::request::system_text;
use crate::anthropic::request::{
    Block, Content, ImageSource, InputMessage, KnownBlock, Role, Tool,
};
use crate::error::RequestError;
use crate::openai::chat::{ChatFunction, ChatMessage, ChatRequest, ChatTool};
use crate::server_tools::hosted::{HostedSearch, history_text, is_search_block};
use crate::tokens::ToolChars;
use crate::translate::tool_names::ToolNames;

/// How to shape the upstream request (set by the host from flags and routes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConvertOptions {
    /// Upstream model; `None` forwards the client's model name.
    pub model: Option<String>,
    /// Upper bound for `max_tokens` (Claude Code asks for 32k–128k).
    pub max_tokens_cap: Option<u64>,
    /// Send `max_completion_tokens` instead of `max_tokens` (OpenAI o-series).
    pub use_max_completion_tokens: bool,
    /// Clean tool schemas for strict validators (Gemini-style).
    pub strict_schemas: bool,
    /// Map `thinking`/`output_config.effort` to `reasoning_effort`.
    pub reasoning_effort: bool,
    /// Send earlier thinking back as `reasoning_content` on assistant turns (DeepSeek requires it
    /// after tool calls; other servers ignore it).
    pub reasoning_passback: bool,
    /// Keep mid-conversation `role: "system"` messages where they are instead of folding their
    /// text into the adjacent user message (only for upstreams whose templates accept that).
    pub keep_mid_conversation_system: bool,
    /// Send neither `tool_choice` nor `parallel_tool_calls` (set by the host when an upstream
    /// rejected them: the request is retried once with the model choosing freely).
    pub drop_tool_choice: bool,
    /// Require `max_tokens` as `/v1/messages` does (`false` for `count_tokens`).
    pub require_max_tokens: bool,
    /// Ask for usage on every chunk (`stream_options.continuous_usage_stats`, vLLM and SGLang),
    /// so `message_start` announces the real input and cache tokens instead of an estimate.
    pub continuous_usage_stats: bool,
    /// What the upstream gets for a PDF document (text documents are always inlined).
    pub documents: DocumentMode,
    /// The upstream runs web search itself (OpenRouter's `openrouter:web_search` server tool):
    /// a `web_search_…` server tool becomes that tool, earlier searches go back as text. Off,
    /// server tools are dropped with a warning (the host runs them before this).
    pub hosted_web_search: bool,
}

/// What a Chat Completions upstream gets for a PDF (or any document that is not text).
///
/// Text documents (`text` and `content` sources) are inlined as text in every mode, under
/// their title.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DocumentMode {
    /// OpenAI's `file` content part with the PDF as a data URL (`file_data`): OpenAI and
    /// OpenRouter read it; most other servers refuse the request.
    File,
    /// The document's text. Extracting it is the host's part (it rewrites the PDF into a text
    /// document before the request reaches the core); a PDF still here becomes a note saying it
    /// was left out.
    #[default]
    Text,
    /// A note in place of the PDF.
    Omit,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        Self {
            model: None,
            max_tokens_cap: None,
            use_max_completion_tokens: false,
            strict_schemas: false,
            reasoning_effort: false,
            reasoning_passback: true,
            keep_mid_conversation_system: false,
            drop_tool_choice: false,
            require_max_tokens: true,
            continuous_usage_stats: false,
            documents: DocumentMode::Text,
            hosted_web_search: false,
        }
    }
}

/// The converted request and what the response translator needs to know about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvertedRequest {
    /// The Chat Completions body (JSON), always with `stream: true`.
    pub body: String,
    /// The model sent upstream.
    pub upstream_model: String,
    /// The model the client asked for (reported back to it).
    pub client_model: String,
    /// Whether the client wants SSE (`stream: true`) or one JSON message.
    pub client_stream: bool,
    /// Estimated input tokens (for `message_start` before real usage arrives).
    pub input_tokens_estimate: u32,
    /// What was dropped or degraded, for the host's log.
    pub warnings: Vec<String>,
    /// Tools the upstream is offered under other names (it refuses the client's: too long, or
    /// characters outside `[a-zA-Z0-9_-]`); give them to the answer's translator
    /// ([`crate::api::StreamOptions::tool_names`]).
    #[serde(default, skip_serializing_if = "ToolNames::is_empty")]
    pub tool_names: ToolNames,
}

/// Convert an Anthropic request to a Chat Completions request.
///
/// # Errors
/// [`RequestError`] when the request lacks what the Messages API requires.
pub fn convert(request: &[u8], options: &ConvertOptions) -> Result<ConvertedRequest, RequestError> {
    let (mut req, mut warnings) =
        crate::anthropic::fields::read_for_translation(request, options.require_max_tokens)?;
    let tool_names = crate::translate::tool_names::rename_request(&mut req);
    let mut messages = Vec::with_capacity(req.messages.len() + 1);

    if let Some(system) = &req.system {
        let text = system_text(system, &mut warnings);
        if !text.is_empty() {
            messages.push(text_message("system", text));
        }
    }
    let mut mid_system = Vec::new();
    for (i, message) in req.messages.iter().enumerate() {
        if message.role == Role::System && !options.keep_mid_conversation_system {
            mid_system.push((messages.len(), plain_text(&message.content)));
            continue;
        }
        convert_message(i, message, options, &mut messages, &mut warnings);
    }
    fold_mid_conversation_system(&mut messages, mid_system);

    let mut tool_chars = ToolChars::default();
    let (tools, web_search) =
        convert_tools(req.tools.take(), options, &mut tool_chars, &mut warnings);
    let input_tokens_estimate = crate::tokens::estimate_with_tools(&req, &tool_chars);
    let (tool_choice, parallel_tool_calls) = if tools.is_none() {
        (None, None)
    } else if options.drop_tool_choice {
        if req.tool_choice.is_some() {
            warnings.push(String::from(
                "tool_choice dropped: the upstream rejected it, so the model chooses (auto)",
            ));
        }
        (None, None)
    } else {
        convert_tool_choice(
            req.tool_choice.as_ref(),
            web_search.as_deref(),
            &mut warnings,
        )
    };

    let max_tokens = req
        .max_tokens
        .map(|m| options.max_tokens_cap.map_or(m, |cap| m.min(cap)));
    let (max_tokens, max_completion_tokens) = if options.use_max_completion_tokens {
        (None, max_tokens)
    } else {
        (max_tokens, None)
    };
    if req.top_k.is_some() {
        warnings.push(String::from("top_k dropped: Chat Completions has no top_k"));
    }
    let reasoning_effort = if options.reasoning_effort {
        reasoning_effort(req.thinking.as_ref(), req.output_config.as_ref())
    } else {
        None
    };
    let response_format = req
        .output_config
        .as_ref()
        .and_then(|c| c.get("format"))
        .and_then(response_format);
    let upstream_model = options.model.clone().unwrap_or_else(|| req.model.clone());
    let chat = ChatRequest {
        model: upstream_model.clone(),
        messages,
        max_tokens,
        max_completion_tokens,
        temperature: req.temperature,
        top_p: req.top_p,
        stop: req.stop_sequences.clone().filter(|s| !s.is_empty()),
        tools,
        tool_choice,
        parallel_tool_calls,
        reasoning_effort,
        response_format,
        stream: true,
        stream_options: if options.continuous_usage_stats {
            json!({"include_usage": true, "continuous_usage_stats": true})
        } else {
            json!({"include_usage": true})
        },
    };
    let body =
        crate::compact_json::to_string(&chat).map_err(|e| RequestError::Json(e.to_string()))?;
    Ok(ConvertedRequest {
        body,
        upstream_model,
        client_model: req.model.clone(),
        client_stream: req.stream.unwrap_or(false),
        input_tokens_estimate,
        warnings,
        tool_names,
    })
}

/// Mid-conversation `role: "system"` text (Claude Code sends one after the first user turn)
/// folded into the next user message, or the last one before it: many chat templates (Qwen,
/// Mistral) reject a system message that is not first. Claude Code itself folds it this way for
/// models it knows cannot take it. `positions` are where each would have been inserted.
fn fold_mid_conversation_system(messages: &mut Vec<ChatMessage>, positions: Vec<(usize, String)>) {
    for (position, text) in positions.into_iter().rev() {
        if text.is_empty() {
            continue;
        }
        let is_user = |m: &ChatMessage| m.role == "user";
        let next = messages
            .iter()
            .skip(position)
            .position(is_user)
            .map(|i| i + position);
        if let Some(i) = next {
            prepend_text(&mut messages[i].content, &text);
        } else if let Some(i) = messages[..position.min(messages.len())]
            .iter()
            .rposition(is_user)
        {
            append_text(&mut messages[i].content, &text);
        } else {
            messages.insert(position.min(messages.len()), text_message("system", text));
        }
    }
}

fn prepend_text(content: &mut Value, text: &str) {
    match content {
        Value::String(s) => *s = format!("{text}\n\n{s}"),
        Value::Array(parts) => parts.insert(0, json!({"type": "text", "text": text})),
        other => *other = Value::String(text.to_owned()),
    }
}

fn append_text(content: &mut Value, text: &str) {
    match content {
        Value::String(s) => {
            s.push_str("\n\n");
            s.push_str(text);
        }
        Value::Array(parts) => parts.push(json!({"type": "text", "text": text})),
        other => *other = Value::String(text.to_owned()),
    }
}

fn text_message(role: &'static str, text: String) -> ChatMessage {
    plain_message(role, Value::String(text))
}

/// A message with content only (no tool calls, no reasoning).
fn plain_message(role: &'static str, content: Value) -> ChatMessage {
    ChatMessage {
        role,
        content,
        tool_calls: None,
        tool_call_id: None,
        reasoning_content: None,
    }
}

/// Converts one Anthropic message into one or more Chat messages.
fn convert_message(
    position: usize,
    message: &InputMessage,
    options: &ConvertOptions,
    out: &mut Vec<ChatMessage>,
    warnings: &mut Vec<String>,
) {
    match &message.role {
        Role::System => {
            let text = plain_text(&message.content);
            if !text.is_empty() {
                out.push(text_message("system", text));
            }
        }
        Role::Assistant => convert_assistant(&message.content, options, out, warnings),
        Role::User => convert_user(&message.content, options.documents, out, warnings),
        Role::Other(role) => {
            warnings.push(format!(
                "messages.{position}: unknown role {role:?} sent as user"
            ));
            convert_user(&message.content, options.documents, out, warnings);
        }
    }
}

fn plain_text(content: &Content) -> String {
    match content {
        Content::Text(text) => text.clone(),
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                Block::Known(KnownBlock::Text { text, .. }) => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// User content parts collected in order.
#[derive(Default)]
struct Parts {
    items: Vec<Value>,
    /// An image or file part: the content must be a list of parts.
    has_attachment: bool,
}

impl Parts {
    fn text(&mut self, text: &str) {
        self.items.push(json!({"type": "text", "text": text}));
    }

    fn image(&mut self, url: String) {
        self.has_attachment = true;
        self.items
            .push(json!({"type": "image_url", "image_url": {"url": url}}));
    }

    /// OpenAI's file part: `{"type":"file","file":{"filename","file_data":"data:…;base64,…"}}`.
    fn file(&mut self, filename: &str, data_url: String) {
        self.has_attachment = true;
        self.items
            .push(json!({"type": "file", "file": {"filename": filename, "file_data": data_url}}));
    }

    /// A string when there are only text parts (accepted by every server), parts otherwise.
    fn into_content(self) -> Option<Value> {
        if self.items.is_empty() {
            return None;
        }
        if self.has_attachment {
            return Some(Value::Array(self.items));
        }
        let texts: Vec<&str> = self
            .items
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        Some(Value::String(texts.join("\n")))
    }
}

/// An image as a URL an OpenAI API takes (base64 → data URL); `None` for a file id.
pub(crate) fn image_url(source: &ImageSource) -> Option<String> {
    match source {
        ImageSource::Base64 { media_type, data } => {
            Some(format!("data:{media_type};base64,{data}"))
        }
        ImageSource::Url { url } => Some(url.clone()),
        ImageSource::Other(_) => None,
    }
}

fn convert_user(
    content: &Content,
    documents: DocumentMode,
    out: &mut Vec<ChatMessage>,
    warnings: &mut Vec<String>,
) {
    let mut parts = Parts::default();
    // Images and files of tool results: a tool message takes only text, so they follow the
    // results in a user message.
    let mut tool_attachments = Parts::default();
    match content {
        Content::Text(text) => parts.text(text),
        Content::Blocks(blocks) => {
            for block in blocks {
                match block {
                    Block::Known(KnownBlock::Text { text, .. }) => parts.text(text),
                    Block::Known(KnownBlock::Image { source, .. }) => match image_url(source) {
                        Some(url) => parts.image(url),
                        None => {
                            warnings.push(String::from("image with an unsupported source dropped"));
                            parts.text(
                                "[image omitted: its source type cannot be sent to this backend]",
                            );
                        }
                    },
                    Block::Known(KnownBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                        ..
                    }) => {
                        let text = tool_result_text(
                            content.as_ref(),
                            documents,
                            &mut tool_attachments,
                            warnings,
                        );
                        let text = if is_error.unwrap_or(false) {
                            format!("Error: {text}")
                        } else {
                            text
                        };
                        out.push(ChatMessage {
                            role: "tool",
                            content: Value::String(text),
                            tool_calls: None,
                            tool_call_id: Some(tool_use_id.clone()),
                            reasoning_content: None,
                        });
                    }
                    Block::Known(KnownBlock::Document { source, extra }) => {
                        document(source, extra, documents, &mut parts, warnings);
                    }
                    Block::Known(
                        KnownBlock::Thinking { .. }
                        | KnownBlock::RedactedThinking { .. }
                        | KnownBlock::ToolUse { .. },
                    ) => {
                        warnings.push(String::from("assistant-only block in a user turn dropped"));
                    }
                    Block::Other(value) => {
                        let kind = value
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown");
                        warnings.push(format!(
                            "{kind} block dropped: no Chat Completions equivalent"
                        ));
                    }
                }
            }
        }
    }
    if let Some(content) = tool_attachments.into_content() {
        out.push(plain_message("user", content));
    }
    if let Some(content) = parts.into_content() {
        out.push(plain_message("user", content));
    }
}

/// A document block: text sources inlined under their title; a PDF as `mode` says.
fn document(
    source: &Value,
    extra: &Map<String, Value>,
    mode: DocumentMode,
    parts: &mut Parts,
    warnings: &mut Vec<String>,
) {
    let title = extra.get("title").and_then(Value::as_str);
    if let Some(text) = crate::anthropic::request::inline_document(source, extra) {
        parts.text(&text);
        return;
    }
    let field = |name: &str| source.get(name).and_then(Value::as_str);
    let media = field("media_type").unwrap_or("application/pdf");
    match (mode, field("type"), field("data")) {
        (DocumentMode::File, Some("base64"), Some(data)) => {
            let filename =
                title
                    .filter(|t| !t.is_empty())
                    .unwrap_or(if media == "application/pdf" {
                        "document.pdf"
                    } else {
                        "document"
                    });
            parts.file(filename, format!("data:{media};base64,{data}"));
        }
        (mode, _, _) => {
            let why = match mode {
                DocumentMode::Omit => {
                    "documents are omitted for this backend (documents = \"omit\")"
                }
                DocumentMode::File => "only base64 documents can be sent as files",
                DocumentMode::Text => "no text was extracted from it",
            };
            warnings.push(format!("document ({media}) left out: {why}"));
            let name = title.map_or_else(String::new, |t| format!(" {t:?}"));
            // A document given by URL: the model may still fetch it.
            let at = field("url").map_or_else(String::new, |url| format!("; it is at {url}"));
            parts.text(&format!("[document{name} omitted ({media}): {why}{at}]"));
        }
    }
}

/// A tool result's text; its images and files go to `attachments` (sent after the results).
fn tool_result_text(
    content: Option<&Content>,
    documents: DocumentMode,
    attachments: &mut Parts,
    warnings: &mut Vec<String>,
) -> String {
    match content {
        None => String::new(),
        Some(Content::Text(text)) => text.clone(),
        Some(Content::Blocks(blocks)) => {
            let mut texts = Vec::new();
            for block in blocks {
                match block {
                    Block::Known(KnownBlock::Text { text, .. }) => texts.push(text.clone()),
                    Block::Known(KnownBlock::Image { source, .. }) => {
                        if let Some(url) = image_url(source) {
                            attachments.image(url);
                            texts.push(String::from("[image attached below]"));
                        }
                    }
                    Block::Known(KnownBlock::Document { source, extra }) => {
                        let mut inline = Parts::default();
                        document(source, extra, documents, &mut inline, warnings);
                        for part in inline.items {
                            match part.get("text").and_then(Value::as_str) {
                                Some(text) => texts.push(text.to_owned()),
                                None => {
                                    attachments.has_attachment = true;
                                    attachments.items.push(part);
                                    texts.push(String::from("[document attached below]"));
                                }
                            }
                        }
                    }
                    Block::Other(value) => {
                        if let Some(t) = value.get("text").and_then(Value::as_str) {
                            texts.push(t.to_owned());
                        }
                    }
                    _ => {}
                }
            }
            texts.join("\n")
        }
    }
}

fn convert_assistant(
    content: &Content,
    options: &ConvertOptions,
    out: &mut Vec<ChatMessage>,
    warnings: &mut Vec<String>,
) {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    for block in content.blocks() {
        match block {
            Block::Known(KnownBlock::Text { text: t, .. }) => text.push_str(&t),
            Block::Known(KnownBlock::Thinking { thinking, .. }) => reasoning.push_str(&thinking),
            Block::Known(KnownBlock::ToolUse {
                id, name, input, ..
            }) => {
                let arguments = if input.is_null() {
                    String::from("{}")
                } else {
                    input.to_string()
                };
                tool_calls.push(json!({
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments}
                }));
            }
            Block::Known(KnownBlock::RedactedThinking { .. }) => {}
            Block::Other(block) if options.hosted_web_search && is_search_block(&block) => {
                if let Some(said) = history_text(&block) {
                    text.push_str(&said);
                    text.push('\n');
                }
            }
            Block::Known(_) | Block::Other(_) => {
                warnings.push(String::from("non-text block in an assistant turn dropped"));
            }
        }
    }
    let reasoning_content =
        (options.reasoning_passback && !reasoning.is_empty()).then_some(reasoning);
    if text.is_empty() && tool_calls.is_empty() && reasoning_content.is_none() {
        return;
    }
    let content = if text.is_empty() && !tool_calls.is_empty() {
        Value::Null
    } else {
        Value::String(text)
    };
    out.push(ChatMessage {
        role: "assistant",
        content,
        tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
        tool_call_id: None,
        reasoning_content,
    });
}

/// The function tools (each schema cleaned, and counted into `chars` in the same pass), and
/// OpenRouter's web search for the client's (its name returned).
fn convert_tools(
    tools: Option<Vec<Tool>>,
    options: &ConvertOptions,
    chars: &mut ToolChars,
    warnings: &mut Vec<String>,
) -> (Option<Vec<ChatTool>>, Option<String>) {
    let Some(tools) = tools else {
        return (None, None);
    };
    let mut out = Vec::with_capacity(tools.len());
    let mut web_search = None;
    for mut tool in tools {
        let parameters = chars.clean_and_add(&mut tool, options.strict_schemas);
        let hosted = options
            .hosted_web_search
            .then(|| HostedSearch::of_fields(tool.kind.as_deref()?, &tool.extra))
            .flatten();
        if let Some(search) = hosted {
            out.push(ChatTool::Other(search.openrouter_tool()));
            web_search = Some(tool.name.clone());
            continue;
        }
        let Some(parameters) = parameters else {
            warnings.push(format!(
                "tool {:?} ({}) dropped: server tools have no Chat Completions equivalent",
                tool.name,
                tool.kind.as_deref().unwrap_or("no input_schema")
            ));
            continue;
        };
        out.push(ChatTool::Function {
            kind: "function",
            function: ChatFunction {
                name: tool.name,
                description: tool.description,
                parameters,
            },
        });
    }
    ((!out.is_empty()).then_some(out), web_search)
}

/// `tool_choice` and `parallel_tool_calls`; a choice of the web search OpenRouter runs names
/// its server tool.
fn convert_tool_choice(
    choice: Option<&Value>,
    web_search: Option<&str>,
    warnings: &mut Vec<String>,
) -> (Option<Value>, Option<bool>) {
    let Some(choice) = choice else {
        return (None, None);
    };
    let parallel = choice
        .get("disable_parallel_tool_use")
        .and_then(Value::as_bool)
        .filter(|d| *d)
        .map(|_| false);
    let mapped = match choice.get("type").and_then(Value::as_str) {
        Some("auto") => Some(json!("auto")),
        Some("any") => Some(json!("required")),
        Some("none") => Some(json!("none")),
        Some("tool") => match choice.get("name").and_then(Value::as_str) {
            Some(name) if Some(name) == web_search => {
                Some(json!({"type": "openrouter:web_search"}))
            }
            Some(name) => Some(json!({"type": "function", "function": {"name": name}})),
            None => {
                warnings.push(String::from(
                    "tool_choice {type:tool} without a name: using auto",
                ));
                Some(json!("auto"))
            }
        },
        other => {
            warnings.push(format!("unknown tool_choice type {other:?}: using auto"));
            None
        }
    };
    (mapped, parallel)
}

fn reasoning_effort(thinking: Option<&Value>, output_config: Option<&Value>) -> Option<String> {
    let thinking = thinking?;
    effort_level(Some(thinking), output_config).map(str::to_owned)
}

/// Claude Code's thinking settings as an OpenAI effort (`low`/`medium`/`high`), shared by the
/// Chat and Responses converters: `thinking.type` `disabled` → none; `enabled` → by
/// `budget_tokens` (< 4096 low, < 16384 medium, else high); otherwise (adaptive, or no
/// `thinking`) → by `output_config.effort` (`low`; `high`/`xhigh`/`max` → high; else medium).
pub(crate) fn effort_level(
    thinking: Option<&Value>,
    output_config: Option<&Value>,
) -> Option<&'static str> {
    let by_effort = || match output_config
        .and_then(|c| c.get("effort"))
        .and_then(Value::as_str)
    {
        Some("low") => "low",
        Some("high" | "xhigh" | "max") => "high",
        _ => "medium",
    };
    match thinking.and_then(|t| t.get("type")).and_then(Value::as_str) {
        Some("disabled") => None,
        Some("enabled") => Some(
            match thinking
                .and_then(|t| t.get("budget_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
            {
                0..4096 => "low",
                4096..16384 => "medium",
                _ => "high",
            },
        ),
        _ => Some(by_effort()),
    }
}

fn response_format(format: &Value) -> Option<Value> {
    if format.get("type").and_then(Value::as_str) != Some("json_schema") {
        return None;
    }
    let schema = format.get("schema")?;
    let mut spec = json!({"name": format.get("name").filter(|n| n.is_string()).unwrap_or(&json!("response")), "schema": schema});
    if let Some(strict) = format.get("strict").filter(|s| s.is_boolean()) {
        spec["strict"] = strict.clone();
    }
    Some(json!({"type": "json_schema", "json_schema": spec}))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each tool's schema is counted as it is cleaned (one pass), and the estimate is the one
    /// `tokens::estimate_request` makes of the whole request, for both OpenAI translators and
    /// with a schema that goes through the parsed form (a key twice, strict cleaning).
    #[test]
    fn the_estimate_counts_the_tools_as_they_are_converted() {
        let req = br#"{"model":"m","max_tokens":5,"system":"be brief",
            "messages":[{"role":"user","content":"hello there"}],
            "tools":[
              {"name":"Read","description":"Reads a file.","input_schema":{"$schema":"x",
                "type":"object","properties":{"path":{"type":"string","description":"caf\u00e9"}}}},
              {"name":"twice","input_schema":{"type":"object","type":"object","format":"uri"}},
              {"type":"web_search_20250305","name":"web_search","max_uses":2}]}"#;
        let whole = crate::tokens::count_request_tokens(req).unwrap();
        let without_tools = crate::tokens::count_request_tokens(
            br#"{"model":"m","max_tokens":5,"system":"be brief",
            "messages":[{"role":"user","content":"hello there"}]}"#,
        )
        .unwrap();
        assert!(whole > without_tools + 20, "{whole} {without_tools}");
        for strict in [false, true] {
            let options = ConvertOptions {
                strict_schemas: strict,
                ..ConvertOptions::default()
            };
            assert_eq!(convert(req, &options).unwrap().input_tokens_estimate, whole);
            let responses = crate::translate::responses_request::ResponsesOptions {
                strict_schemas: strict,
                ..Default::default()
            };
            let converted = crate::translate::responses_request::convert(req, &responses).unwrap();
            assert_eq!(converted.input_tokens_estimate, whole);
        }
    }

    fn roles_and_text(options: &ConvertOptions) -> Vec<(String, String)> {
        let req = br#"{"model":"m","max_tokens":5,"messages":[
            {"role":"user","content":"first"},
            {"role":"system","content":"agents: none"},
            {"role":"assistant","content":"ok"},
            {"role":"user","content":[{"type":"text","text":"second"}]},
            {"role":"system","content":"late note"}]}"#;
        let out = convert(req, options).unwrap();
        let body: Value = serde_json::from_str(&out.body).unwrap();
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_owned(),
                    m["content"].to_string(),
                )
            })
            .collect()
    }

    /// A user turn with a PDF, a titled text document and a tool result carrying a PDF.
    fn documents_in(mode: DocumentMode) -> (Vec<Value>, Vec<String>) {
        let req = br#"{"model":"m","max_tokens":5,"messages":[
            {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]},
            {"role":"user","content":[
              {"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"read it"},
                {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERg=="}}]},
              {"type":"document","title":"report.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}},
              {"type":"document","title":"notes","source":{"type":"text","media_type":"text/plain","data":"plain words"}},
              {"type":"text","text":"summarise"}]}]}"#;
        let options = ConvertOptions {
            documents: mode,
            ..ConvertOptions::default()
        };
        let out = convert(req, &options).unwrap();
        let body: Value = serde_json::from_str(&out.body).unwrap();
        (body["messages"].as_array().unwrap().clone(), out.warnings)
    }

    #[test]
    fn pdfs_go_as_file_parts_in_file_mode_also_from_tool_results() {
        let (messages, warnings) = documents_in(DocumentMode::File);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(messages[1]["role"], "tool");
        assert_eq!(messages[1]["content"], "read it\n[document attached below]");
        assert_eq!(
            messages[2]["content"],
            json!([{"type": "file", "file": {"filename": "document.pdf", "file_data": "data:application/pdf;base64,JVBERg=="}}])
        );
        assert_eq!(
            messages[3]["content"],
            json!([
                {"type": "file", "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
                {"type": "text", "text": "[document: notes]\nplain words"},
                {"type": "text", "text": "summarise"}
            ])
        );
    }

    #[test]
    fn pdfs_left_in_text_or_omit_mode_become_a_note_with_a_warning() {
        for (mode, why) in [
            (DocumentMode::Text, "no text was extracted from it"),
            (DocumentMode::Omit, "documents = \"omit\""),
        ] {
            let (messages, warnings) = documents_in(mode);
            assert_eq!(warnings.len(), 2, "{warnings:?}");
            let tool = messages[1]["content"].as_str().unwrap();
            assert!(tool.starts_with("read it\n[document omitted"), "{tool}");
            assert_eq!(messages.len(), 3, "no attachment message: {messages:?}");
            let user = messages[2]["content"].as_str().unwrap();
            assert!(
                user.starts_with("[document \"report.pdf\" omitted (application/pdf): ")
                    && user.contains(why),
                "{user}"
            );
            assert!(
                user.ends_with("[document: notes]\nplain words\nsummarise"),
                "{user}"
            );
            assert!(!user.contains("JVBER"), "no base64 as text: {user}");
        }
    }

    #[test]
    fn mid_conversation_system_folds_into_the_next_user_turn_or_the_last() {
        let got = roles_and_text(&ConvertOptions::default());
        assert_eq!(
            got,
            vec![
                ("user".into(), "\"first\"".into()),
                ("assistant".into(), "\"ok\"".into()),
                (
                    "user".into(),
                    "\"agents: none\\n\\nsecond\\n\\nlate note\"".into()
                ),
            ]
        );
    }

    #[test]
    fn a_strict_schema_keeps_its_name_and_guarantee() {
        let req = br#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"}],
            "output_config":{"format":{"type":"json_schema","name":"person","strict":true,"schema":{"type":"object"}}}}"#;
        let out = convert(req, &ConvertOptions::default()).unwrap();
        let body: Value = serde_json::from_str(&out.body).unwrap();
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "person", "schema": {"type": "object"}, "strict": true}})
        );
        let req = br#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"}],
            "output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}"#;
        let out = convert(req, &ConvertOptions::default()).unwrap();
        let body: Value = serde_json::from_str(&out.body).unwrap();
        assert_eq!(
            body["response_format"]["json_schema"],
            json!({"name": "response", "schema": {"type": "object"}})
        );
    }

    #[test]
    fn mid_conversation_system_kept_in_place_on_request() {
        let options = ConvertOptions {
            keep_mid_conversation_system: true,
            ..ConvertOptions::default()
        };
        let roles: Vec<String> = roles_and_text(&options)
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        assert_eq!(roles, ["user", "system", "assistant", "user", "system"]);
    }
}
