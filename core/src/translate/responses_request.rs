//! Anthropic Messages request → OpenAI Responses request (`POST /v1/responses`).
//!
//! The mapping, in the order of the request:
//! - `system` (a string or text blocks) → `instructions`; mid-conversation `role:"system"`
//!   messages → `developer` messages where they stand.
//! - user text / images / documents → a `user` message of `input_text` / `input_image` (a URL or
//!   a `data:` URL) / `input_file` (a PDF as a `data:` URL, or a URL) parts; `tool_result` →
//!   `function_call_output` {call_id, output text, `Error: ` before a failed result's text}, the
//!   results' images following as one `user` message.
//! - assistant text → an `assistant` message of `output_text`; `tool_use` → `function_call`
//!   {call_id = the tool_use id, name, arguments as a JSON text}; `thinking` whose signature is a
//!   [`reasoning_signature`](crate::openai::responses::reasoning_signature) (one the bridge made
//!   from a reasoning item) → a `reasoning` item with that `encrypted_content` and the thinking
//!   text as its summary; all in the order of the blocks.
//! - tools → flat function tools `{type:"function",name,description,parameters,strict:false}`
//!   (schemas cleaned by [`clean_schema`]); `tool_choice` auto/any/tool/none →
//!   `"auto"`/`"required"`/`{type:"function",name}`/`"none"`; `disable_parallel_tool_use` →
//!   `parallel_tool_calls:false`.
//! - `max_tokens` → `max_output_tokens` (capped by the options, raised to the API's minimum of 16);
//!   `temperature`, `top_p`; `output_config.format` json_schema → `text.format` json_schema.
//! - reasoning: `thinking` enabled → effort by budget (< 4096 tokens `low`, < 16384 `medium`,
//!   else `high`); adaptive (or no `thinking` but `output_config.effort`) → the effort (`low`,
//!   `medium`, `high`; `xhigh`/`max` → `high`; unset → `medium`); disabled → none. The option
//!   [`ResponsesOptions::reasoning_effort`] overrides it. With reasoning on, the request carries
//!   `reasoning:{effort,summary:"auto"}` and `include:["reasoning.encrypted_content"]`.
//! - always `store:false` (the bridge is stateless: the whole conversation goes each time) and
//!   `stream:true` (non-streaming clients get the stream folded).
//!
//! Dropped, deliberately and only here, with a warning for the host's log where the client
//! asked for something: `stop_sequences` (Responses has none), `top_k`, `temperature`/`top_p`
//! when reasoning is on (reasoning models reject them), thinking without a bridge signature
//! (Responses cannot take plain-text reasoning back), `redacted_thinking`, server tools without
//! an input schema, documents and images whose source cannot be sent (a placeholder text stays),
//! unknown block types; silently: `cache_control`, `metadata`, `context_management`,
//! `service_tier`, the `x-anthropic-billing-header` system block Claude Code sends first.
//!
//! ```
//! use bridge_core::translate::responses_request::{convert, ResponsesOptions};
//! let req = br#"{"model":"claude-x","max_tokens":64000,"system":"Be brief.",
//!   "thinking":{"type":"enabled","budget_tokens":2000},
//!   "messages":[{"role":"user","content":"hi"}]}"#;
//! let options = ResponsesOptions { model: Some("gpt-5".into()), max_tokens_cap: Some(32000), ..Default::default() };
//! let out = convert(req, &options).unwrap();
//! let body: serde_json::Value = serde_json::from_str(&out.body).unwrap();
//! assert_eq!(body["instructions"], "Be brief.");
//! assert_eq!(body["max_output_tokens"], 32000);
//! assert_eq!(body["reasoning"], serde_json::json!({"effort":"low","summary":"auto"}));
//! assert_eq!(body["input"][0], serde_json::json!({"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}));
//! assert_eq!((body["store"].as_bool(), body["stream"].as_bool()), (Some(false), Some(true)));
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::anthropic::request::system_text;
use crate::anthropic::request::{
    Block, Content, ImageSource, KnownBlock, MessagesRequest, Role, Tool as AnthropicTool,
};
use crate::anthropic::schema::clean_schema;
use crate::error::RequestError;
use crate::openai::responses::{
    ContentPart, FunctionTool, InputItem, ReasoningConfig, ResponsesRequest, SummaryText, Tool,
    encrypted_reasoning,
};
use crate::server_tools::hosted::{
    HostedSearch, history_text, is_search_block, result_pages, upstream_search_id,
};
use crate::tokens::ToolChars;
use crate::translate::chat_request::ConvertedRequest;

/// The Responses API refuses a smaller `max_output_tokens`.
const MIN_OUTPUT_TOKENS: u64 = 16;

/// Efforts the Responses API takes (`ResponsesOptions::reasoning_effort` also takes `off`).
pub const EFFORTS: [&str; 6] = ["none", "minimal", "low", "medium", "high", "xhigh"];

/// How to shape the upstream request (set by the host from flags and routes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResponsesOptions {
    /// Upstream model; `None` forwards the client's model name.
    pub model: Option<String>,
    /// Upper bound for `max_output_tokens` (Claude Code asks for 32k–128k).
    pub max_tokens_cap: Option<u64>,
    /// Clean tool schemas for strict validators.
    pub strict_schemas: bool,
    /// `None`: reasoning as the client asks (`thinking`, `output_config.effort`). `"off"`: never
    /// send `reasoning` (for models that reject the parameter). Any Responses effort (`none`,
    /// `minimal`, `low`, `medium`, `high`, `xhigh`): sent on every request, whatever the client
    /// asked.
    pub reasoning_effort: Option<String>,
    /// Send neither `tool_choice` nor `parallel_tool_calls` (set by the host when an upstream
    /// rejected them: the request is retried once with the model choosing freely).
    pub drop_tool_choice: bool,
    /// Require `max_tokens` as `/v1/messages` does (`false` for `count_tokens`).
    pub require_max_tokens: bool,
    /// The upstream runs web search itself (OpenAI's hosted `web_search`): a `web_search_…`
    /// server tool becomes that tool, earlier searches go back as `web_search_call` items.
    /// Off, server tools are dropped with a warning (the host runs them before this).
    pub hosted_web_search: bool,
}

impl Default for ResponsesOptions {
    fn default() -> Self {
        Self {
            model: None,
            max_tokens_cap: None,
            strict_schemas: false,
            reasoning_effort: None,
            drop_tool_choice: false,
            require_max_tokens: true,
            hosted_web_search: false,
        }
    }
}

/// The converted request (its `body` is the Responses JSON) and what the stream translator
/// needs to know about it: the same shape as a Chat conversion's.
pub type ConvertedResponses = ConvertedRequest;

/// Convert an Anthropic request to a Responses request.
///
/// # Errors
/// [`RequestError`] when the request lacks what the Messages API requires, or the options name
/// an unknown reasoning effort.
pub fn convert(
    request: &[u8],
    options: &ResponsesOptions,
) -> Result<ConvertedResponses, RequestError> {
    if let Some(effort) = options.reasoning_effort.as_deref()
        && effort != "off"
        && !EFFORTS.contains(&effort)
    {
        return Err(RequestError::Options(format!(
            "reasoning_effort {effort:?}: expected off, {}",
            EFFORTS.join(", ")
        )));
    }
    let (mut req, warnings) =
        crate::anthropic::fields::read_for_translation(request, options.require_max_tokens)?;
    let tool_names = crate::translate::tool_names::rename_request(&mut req);
    let mut warnings = Warnings(warnings);
    let instructions = req
        .system
        .as_ref()
        .map(|s| system_text(s, &mut warnings.0))
        .filter(|text| !text.is_empty());
    let mut input = Vec::with_capacity(req.messages.len());
    for (position, message) in req.messages.iter().enumerate() {
        match &message.role {
            Role::System => developer_message(&message.content, &mut input, &mut warnings),
            Role::Assistant => assistant_items(
                &message.content,
                options.hosted_web_search,
                &mut input,
                &mut warnings,
            ),
            Role::User => user_items(&message.content, &mut input, &mut warnings),
            Role::Other(role) => {
                warnings.add(format!(
                    "messages.{position}: unknown role {role:?} sent as user"
                ));
                user_items(&message.content, &mut input, &mut warnings);
            }
        }
    }
    let mut tool_chars = ToolChars::default();
    let Tools {
        tools,
        max_tool_calls,
        web_search,
    } = tools(req.tools.take(), options, &mut tool_chars, &mut warnings);
    let input_tokens_estimate = crate::tokens::estimate_with_tools(&req, &tool_chars);
    let (tool_choice, parallel_tool_calls) = if tools.is_none() {
        (None, None)
    } else if options.drop_tool_choice {
        if req.tool_choice.is_some() {
            warnings
                .add("tool_choice dropped: the upstream rejected it, so the model chooses (auto)");
        }
        (None, None)
    } else {
        tool_choice(
            req.tool_choice.as_ref(),
            web_search.as_deref(),
            &mut warnings,
        )
    };
    let reasoning = reasoning(&req, options.reasoning_effort.as_deref());
    let (temperature, top_p) = if reasoning.is_some() {
        if req.temperature.is_some() || req.top_p.is_some() {
            warnings.add("temperature/top_p dropped: reasoning models reject sampling parameters");
        }
        (None, None)
    } else {
        (req.temperature, req.top_p)
    };
    if req.top_k.is_some() {
        warnings.add("top_k dropped: the Responses API has no top_k");
    }
    if req.stop_sequences.as_ref().is_some_and(|s| !s.is_empty()) {
        warnings.add("stop_sequences dropped: the Responses API has no stop sequences");
    }
    let max_output_tokens = req.max_tokens.map(|requested| {
        let capped = options
            .max_tokens_cap
            .map_or(requested, |cap| requested.min(cap));
        if capped < MIN_OUTPUT_TOKENS {
            warnings.add(format!(
                "max_tokens {capped} raised to {MIN_OUTPUT_TOKENS}, the Responses API's minimum"
            ));
        }
        capped.max(MIN_OUTPUT_TOKENS)
    });
    let mut include = Vec::new();
    if reasoning.is_some() {
        include.push(String::from("reasoning.encrypted_content"));
    }
    if web_search.is_some() {
        include.push(String::from("web_search_call.action.sources"));
    }
    let upstream_model = options.model.clone().unwrap_or_else(|| req.model.clone());
    let body = ResponsesRequest {
        model: upstream_model.clone(),
        instructions,
        input,
        tools,
        tool_choice,
        parallel_tool_calls,
        max_output_tokens,
        max_tool_calls,
        temperature,
        top_p,
        reasoning,
        text: text_format(req.output_config.as_ref()),
        store: false,
        include,
        stream: true,
    };
    let body =
        crate::compact_json::to_string(&body).map_err(|e| RequestError::Json(e.to_string()))?;
    Ok(ConvertedResponses {
        body,
        upstream_model,
        client_model: req.model.clone(),
        client_stream: req.stream.unwrap_or(false),
        input_tokens_estimate,
        warnings: warnings.0,
        tool_names,
    })
}

/// Warnings for the host's log, each said once.
#[derive(Default)]
struct Warnings(Vec<String>);

impl Warnings {
    fn add(&mut self, warning: impl Into<String>) {
        let warning = warning.into();
        if !self.0.contains(&warning) {
            self.0.push(warning);
        }
    }
}

fn text(text: impl Into<String>) -> ContentPart {
    ContentPart::InputText { text: text.into() }
}

fn message(role: &'static str, content: Vec<ContentPart>) -> InputItem {
    InputItem::Message { role, content }
}

/// Mid-conversation system text, kept where it stands as a `developer` message.
fn developer_message(content: &Content, out: &mut Vec<InputItem>, warnings: &mut Warnings) {
    let mut parts = Vec::new();
    for block in content.blocks() {
        match block {
            Block::Known(KnownBlock::Text { text: t, .. }) if !t.is_empty() => parts.push(text(t)),
            Block::Known(KnownBlock::Text { .. }) => {}
            _ => warnings.add("non-text block in a system message dropped"),
        }
    }
    if !parts.is_empty() {
        out.push(message("developer", parts));
    }
}

fn user_items(content: &Content, out: &mut Vec<InputItem>, warnings: &mut Warnings) {
    let mut parts = Vec::new();
    let mut result_images = Vec::new();
    for block in content.blocks() {
        match block {
            Block::Known(KnownBlock::Text { text: t, .. }) => {
                if !t.is_empty() {
                    parts.push(text(t));
                }
            }
            Block::Known(KnownBlock::Image { source, .. }) => {
                parts.push(image_part(&source).unwrap_or_else(|| {
                    warnings.add("image with an unsupported source dropped");
                    text("[image omitted: its source type cannot be sent to this backend]")
                }));
            }
            Block::Known(KnownBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            }) => {
                let output = result_text(content.as_ref(), &mut result_images, warnings);
                let output = if is_error.unwrap_or(false) {
                    format!("Error: {output}")
                } else {
                    output
                };
                out.push(InputItem::FunctionCallOutput {
                    call_id: tool_use_id,
                    output,
                });
            }
            Block::Known(KnownBlock::Document { source, extra }) => {
                parts.push(document_part(&source, &extra, warnings));
            }
            Block::Known(
                KnownBlock::Thinking { .. }
                | KnownBlock::RedactedThinking { .. }
                | KnownBlock::ToolUse { .. },
            ) => warnings.add("assistant-only block in a user turn dropped"),
            Block::Other(value) => warnings.add(format!(
                "{} block dropped: no Responses equivalent",
                value
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
            )),
        }
    }
    if !result_images.is_empty() {
        out.push(message("user", result_images));
    }
    if !parts.is_empty() {
        out.push(message("user", parts));
    }
}

fn image_part(source: &ImageSource) -> Option<ContentPart> {
    Some(ContentPart::InputImage {
        image_url: crate::translate::chat_request::image_url(source)?,
        detail: "auto",
    })
}

/// A document: text sources as text (under their title), PDFs (base64 or URL) as `input_file`.
fn document_part(
    source: &Value,
    extra: &serde_json::Map<String, Value>,
    warnings: &mut Warnings,
) -> ContentPart {
    if let Some(inline) = crate::anthropic::request::inline_document(source, extra) {
        return text(inline);
    }
    let title = extra.get("title");
    let field = |name: &str| source.get(name).and_then(Value::as_str);
    let media = field("media_type").unwrap_or("application/pdf");
    match field("type") {
        Some("base64") => ContentPart::InputFile {
            filename: Some(title.and_then(Value::as_str).map_or_else(
                || {
                    String::from(if media == "application/pdf" {
                        "document.pdf"
                    } else {
                        "document"
                    })
                },
                str::to_owned,
            )),
            file_data: Some(format!(
                "data:{media};base64,{}",
                field("data").unwrap_or_default()
            )),
            file_url: None,
        },
        Some("url") => ContentPart::InputFile {
            filename: None,
            file_data: None,
            file_url: field("url").map(str::to_owned),
        },
        other => {
            warnings.add(format!(
                "document source {} cannot be sent to a Responses backend",
                other.unwrap_or("unknown")
            ));
            text("[document omitted: its source is not supported by this backend]")
        }
    }
}

/// A tool result's text; its images go to `images` (sent after the results as a user message).
fn result_text(
    content: Option<&Content>,
    images: &mut Vec<ContentPart>,
    warnings: &mut Warnings,
) -> String {
    let Some(content) = content else {
        return String::new();
    };
    let mut texts = Vec::new();
    for block in content.blocks() {
        match block {
            Block::Known(KnownBlock::Text { text: t, .. }) => texts.push(t),
            Block::Known(KnownBlock::Image { source, .. }) => match image_part(&source) {
                Some(image) => {
                    images.push(image);
                    texts.push(String::from("[image attached below]"));
                }
                None => warnings.add("image with an unsupported source dropped"),
            },
            Block::Known(KnownBlock::Document { source, .. }) => {
                if let Some(t) = source.get("data").and_then(Value::as_str) {
                    texts.push(t.to_owned());
                }
            }
            Block::Other(value) => {
                if let Some(t) = value.get("text").and_then(Value::as_str) {
                    texts.push(t.to_owned());
                }
            }
            Block::Known(_) => warnings.add("non-text block in a tool result dropped"),
        }
    }
    texts.join("\n")
}

/// Assistant blocks in order: text runs → `assistant` messages, tool_use → `function_call`,
/// bridge-signed thinking → `reasoning`.
fn assistant_items(
    content: &Content,
    hosted_web_search: bool,
    out: &mut Vec<InputItem>,
    warnings: &mut Warnings,
) {
    let mut texts = Vec::new();
    let flush = |texts: &mut Vec<ContentPart>, out: &mut Vec<InputItem>| {
        if !texts.is_empty() {
            out.push(message("assistant", std::mem::take(texts)));
        }
    };
    for block in content.blocks() {
        match block {
            Block::Known(KnownBlock::Text { text, .. }) if !text.is_empty() => {
                texts.push(ContentPart::OutputText { text });
            }
            Block::Known(KnownBlock::Text { .. }) => {}
            Block::Known(KnownBlock::Thinking {
                thinking,
                signature,
                ..
            }) => match signature.as_deref().and_then(encrypted_reasoning) {
                Some(encrypted) => {
                    flush(&mut texts, out);
                    let summary = if thinking.is_empty() {
                        Vec::new()
                    } else {
                        vec![SummaryText {
                            kind: "summary_text",
                            text: thinking,
                        }]
                    };
                    out.push(InputItem::Reasoning {
                        summary,
                        encrypted_content: encrypted.to_owned(),
                    });
                }
                None => warnings.add(
                    "thinking without a Responses reasoning signature dropped: \
                     the Responses API cannot take plain-text reasoning back",
                ),
            },
            Block::Known(KnownBlock::ToolUse {
                id, name, input, ..
            }) => {
                flush(&mut texts, out);
                let arguments = if input.is_null() {
                    String::from("{}")
                } else {
                    input.to_string()
                };
                out.push(InputItem::FunctionCall {
                    call_id: id,
                    name,
                    arguments,
                });
            }
            Block::Known(KnownBlock::RedactedThinking { .. }) => {
                warnings.add("redacted_thinking dropped: no Responses equivalent");
            }
            Block::Other(block) if hosted_web_search && earlier_search(&block, &mut texts, out) => {
            }
            Block::Known(_) | Block::Other(_) => {
                warnings.add("non-text block in an assistant turn dropped");
            }
        }
    }
    flush(&mut texts, out);
}

/// An earlier web search of the hosted tool, read back: the `server_tool_use` the bridge made
/// from a `web_search_call` goes back as that item (its id recovered), the result's pages as
/// the item's sources. A search the upstream did not make (another provider's, whose id it
/// would not know) goes as the assistant's text, so its findings stay in the conversation.
/// `false` for any other block.
fn earlier_search(block: &Value, texts: &mut Vec<ContentPart>, out: &mut Vec<InputItem>) -> bool {
    if !is_search_block(block) {
        return false;
    }
    let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
    if field("type") == "server_tool_use"
        && let Some(id) = upstream_search_id(field("id"))
    {
        if !texts.is_empty() {
            out.push(message("assistant", std::mem::take(texts)));
        }
        let query = block.pointer("/input/query").cloned().unwrap_or_default();
        out.push(InputItem::WebSearchCall {
            id: id.to_owned(),
            status: "completed",
            action: json!({"type": "search", "query": query}),
        });
        return true;
    }
    let call = upstream_search_id(field("tool_use_id")).and_then(|id| {
        out.iter_mut().rev().find_map(|item| match item {
            InputItem::WebSearchCall {
                id: seen, action, ..
            } if seen == id => Some(action),
            _ => None,
        })
    });
    if let Some(action) = call {
        let sources: Vec<Value> = result_pages(block)
            .iter()
            .map(|(url, _)| json!({"type": "url", "url": url}))
            .collect();
        action["sources"] = Value::Array(sources);
    } else if let Some(text) = history_text(block) {
        texts.push(ContentPart::OutputText { text });
    }
    true
}

/// The request's tools as the Responses API takes them.
struct Tools {
    tools: Option<Vec<Tool>>,
    /// The web search's `max_uses` (the only hosted tool the bridge sends).
    max_tool_calls: Option<u32>,
    /// The name of the client's web search tool, when the hosted one stands for it.
    web_search: Option<String>,
}

/// The tools as functions (each schema cleaned, and counted into `chars` in the same pass),
/// and the web search the upstream runs itself.
fn tools(
    tools: Option<Vec<AnthropicTool>>,
    options: &ResponsesOptions,
    chars: &mut ToolChars,
    warnings: &mut Warnings,
) -> Tools {
    let mut out = Vec::new();
    let mut max_tool_calls = None;
    let mut web_search = None;
    for mut tool in tools.unwrap_or_default() {
        let parameters = chars.clean_and_add(&mut tool, options.strict_schemas);
        let hosted = options
            .hosted_web_search
            .then(|| HostedSearch::of_fields(tool.kind.as_deref()?, &tool.extra))
            .flatten();
        if let Some(search) = hosted {
            out.push(Tool::WebSearch(search.responses_tool(&mut warnings.0)));
            max_tool_calls = search.max_uses;
            web_search = Some(tool.name.clone());
            continue;
        }
        let Some(parameters) = parameters else {
            warnings.add(format!(
                "tool {:?} ({}) dropped: server tools have no Responses function equivalent",
                tool.name,
                tool.kind.as_deref().unwrap_or("no input_schema")
            ));
            continue;
        };
        out.push(Tool::Function(FunctionTool {
            kind: "function",
            name: tool.name,
            description: tool.description,
            parameters,
            strict: false,
        }));
    }
    Tools {
        tools: (!out.is_empty()).then_some(out),
        max_tool_calls,
        web_search,
    }
}

/// `tool_choice` and `parallel_tool_calls`. A choice of the web search the hosted tool stands
/// for is `required` (the Responses API names no hosted tool in `tool_choice`; it is the only
/// tool then, or one of several the model must call one of).
fn tool_choice(
    choice: Option<&Value>,
    web_search: Option<&str>,
    warnings: &mut Warnings,
) -> (Option<Value>, Option<bool>) {
    let Some(choice) = choice else {
        return (None, None);
    };
    let parallel =
        (choice.get("disable_parallel_tool_use") == Some(&Value::Bool(true))).then_some(false);
    let mapped = match (
        choice.get("type").and_then(Value::as_str),
        choice.get("name").and_then(Value::as_str),
    ) {
        (Some("auto"), _) => json!("auto"),
        (Some("any"), _) => json!("required"),
        (Some("none"), _) => json!("none"),
        (Some("tool"), Some(name)) if Some(name) == web_search => json!("required"),
        (Some("tool"), Some(name)) => json!({"type": "function", "name": name}),
        (kind, _) => {
            warnings.add(format!("tool_choice {kind:?} not understood: using auto"));
            json!("auto")
        }
    };
    (Some(mapped), parallel)
}

/// `reasoning` from the options' override or the client's `thinking` / `output_config.effort`.
fn reasoning(req: &MessagesRequest, effort_override: Option<&str>) -> Option<ReasoningConfig> {
    let effort = match effort_override {
        Some("off") => return None,
        Some(effort) => effort,
        None => client_effort(req)?,
    };
    Some(ReasoningConfig {
        effort: effort.to_owned(),
        summary: String::from("auto"),
    })
}

/// What the client asked for: `output_config.effort` counts even without `thinking`.
fn client_effort(req: &MessagesRequest) -> Option<&'static str> {
    if req.thinking.is_none() {
        req.output_config.as_ref()?.get("effort")?;
    }
    crate::translate::chat_request::effort_level(req.thinking.as_ref(), req.output_config.as_ref())
}

/// `output_config.format` json_schema → `text: {format: {type: "json_schema", …}}`.
fn text_format(output_config: Option<&Value>) -> Option<Value> {
    let format = output_config?.get("format")?;
    if format.get("type").and_then(Value::as_str) != Some("json_schema") {
        return None;
    }
    let strict = format
        .get("strict")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // A strict schema goes as the client wrote it: OpenAI checks it, and cleaning could change
    // what the guarantee covers.
    let schema = if strict {
        format.get("schema")?.clone()
    } else {
        clean_schema(format.get("schema")?.clone(), false)
    };
    let name = format
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("response");
    Some(json!({
        "format": {"type": "json_schema", "name": name, "schema": schema, "strict": strict}
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(request: &str, options: &ResponsesOptions) -> (Value, Vec<String>) {
        let out = convert(request.as_bytes(), options).unwrap();
        (serde_json::from_str(&out.body).unwrap(), out.warnings)
    }

    #[test]
    fn a_strict_schema_keeps_its_name_and_guarantee() {
        let strict = r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"}],
            "output_config":{"format":{"type":"json_schema","name":"person","strict":true,
            "schema":{"type":"object","properties":{"n":{"type":"string","format":"email"}},"required":["n"],"additionalProperties":false}}}}"#;
        let (b, _) = body(strict, &ResponsesOptions::default());
        let format = &b["text"]["format"];
        assert_eq!(
            (&format["name"], &format["strict"]),
            (&json!("person"), &json!(true))
        );
        assert_eq!(
            format["schema"]["properties"]["n"]["format"], "email",
            "sent as written"
        );
        // Claude Code's shape (no name, no strict) stays best effort under a fixed name.
        let plain = r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"}],
            "output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}"#;
        let (b, _) = body(plain, &ResponsesOptions::default());
        assert_eq!(
            (&b["text"]["format"]["name"], &b["text"]["format"]["strict"]),
            (&json!("response"), &json!(false))
        );
    }

    #[test]
    fn effort_override_and_off() {
        let req = r#"{"model":"m","max_tokens":1,"temperature":0.2,"messages":[{"role":"user","content":"q"}]}"#;
        let high = ResponsesOptions {
            reasoning_effort: Some("high".into()),
            ..ResponsesOptions::default()
        };
        let (b, warnings) = body(req, &high);
        assert_eq!(b["reasoning"]["effort"], "high");
        assert_eq!(b["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(b["max_output_tokens"], 16);
        assert!(b.get("temperature").is_none());
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let off = ResponsesOptions {
            reasoning_effort: Some("off".into()),
            ..ResponsesOptions::default()
        };
        let (b, _) = body(
            r#"{"model":"m","max_tokens":99,"thinking":{"type":"adaptive"},"messages":[{"role":"user","content":"q"}]}"#,
            &off,
        );
        assert!(b.get("reasoning").is_none() && b.get("include").is_none());
        let bad = ResponsesOptions {
            reasoning_effort: Some("huge".into()),
            ..ResponsesOptions::default()
        };
        assert!(matches!(
            convert(req.as_bytes(), &bad),
            Err(RequestError::Options(_))
        ));
    }

    #[test]
    fn effort_from_the_client() {
        let effort = |extra: &str| {
            let req = format!(
                r#"{{"model":"m","max_tokens":9,"messages":[{{"role":"user","content":"q"}}]{extra}}}"#
            );
            body(&req, &ResponsesOptions::default()).0["reasoning"]["effort"].clone()
        };
        assert_eq!(effort(""), Value::Null);
        assert_eq!(effort(r#","thinking":{"type":"disabled"}"#), Value::Null);
        assert_eq!(
            effort(r#","thinking":{"type":"enabled","budget_tokens":20000}"#),
            "high"
        );
        assert_eq!(effort(r#","thinking":{"type":"adaptive"}"#), "medium");
        assert_eq!(effort(r#","output_config":{"effort":"max"}"#), "high");
    }
}
