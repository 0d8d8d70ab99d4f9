//! OpenAI Responses request (`POST /v1/responses`, what the Codex CLI sends) → Anthropic
//! Messages request.
//!
//! | Responses | Anthropic |
//! |---|---|
//! | `instructions`, and `system`/`developer` messages before any other item | `system` (one text block each) |
//! | `system`/`developer` messages later | a text block in a user turn at that place (as Chat's) |
//! | `input` string | one user message |
//! | `message` items: `input_text` / `output_text` / `input_image` / `input_file` | `text` / `text` / `image` / `document` blocks of a user or assistant message |
//! | `function_call` {call_id, name, arguments} | assistant `tool_use` {id: call_id, input: arguments parsed} |
//! | `custom_tool_call` {call_id, name, input} | assistant `tool_use` {id: call_id, input: `{"input": <the raw text>}`} |
//! | `function_call_output` / `custom_tool_call_output` | `tool_result` blocks in a user message (text and images) |
//! | `reasoning` with `encrypted_content` | a `thinking` block (text: the summary, signature: the `encrypted_content`) |
//! | `reasoning` without `encrypted_content` | dropped (a thinking block needs a signature) |
//! | `function` tools | tools, `parameters` as `input_schema` |
//! | `custom` tools (Codex's `apply_patch`) | a tool taking `{"input": string}`, the grammar in its description ([`custom_tool_schema`]) |
//! | `namespace` tools, in `tools` or in an `additional_tools` input item (Codex's lite models) | their tools, flat ([`crate::front::client_tools`]: calls go back with their `namespace`) |
//! | `function_call` / `custom_tool_call` with a `namespace` | `tool_use` of the name that tool was offered under |
//! | hosted tools (`web_search`, `file_search`, …) | dropped with a warning |
//! | `tool_choice` `none`/`auto`/`required`/`{type:"function"|"custom", name}` | `none`/`auto`/`any`/`{type:"tool", name}` |
//! | `parallel_tool_calls: false` | `disable_parallel_tool_use: true` |
//! | `max_output_tokens` (absent: none, as OpenAI's API) | `max_tokens` (absent: the host sends none, or the target's default where the upstream needs one) |
//! | `reasoning.effort` | as Chat's `reasoning_effort` (`none` → thinking disabled; else adaptive + `output_config.effort`) |
//! | `text.format` `json_schema` / `json_object` | `output_config.format` / a system instruction |
//! | `temperature`, `top_p`, `stream`, `user` | the same, `metadata.user_id` |
//! | `include: ["reasoning.encrypted_content"]` | [`ResponsesFrontRequest::include_encrypted_reasoning`] for the encoder |
//!
//! The answer's thinking blocks come back to the client as `reasoning` items whose
//! `encrypted_content` is the block's signature, so a reasoning item the bridge wrote returns
//! here as the same thinking block (text and signature), which is what Anthropic requires when a
//! conversation with thinking and tool use continues.
//!
//! Refused: `previous_response_id` and `item_reference` items (a host that keeps responses
//! resolves them first with [`crate::front::responses_state`]; this conversion takes the whole
//! conversation), `conversation`, `file_id` images and files, wrong JSON types, tool-call
//! arguments that are not a JSON object. Dropped with a warning: hosted tools and their call
//! items, `reasoning.summary`, `text.verbosity`, `store`, `metadata`, `truncation`,
//! `max_tool_calls`, `prompt_cache_key`, `service_tier`, `background`, assistant `refusal`
//! parts, unknown item types.
//!
//! ```
//! use bridge_core::front::responses_request::responses_to_anthropic;
//! let front = responses_to_anthropic(br#"{"model":"gpt-5.5","stream":true,
//!   "input":[{"type":"message","role":"developer","content":"You are Codex."},
//!     {"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]},
//!     {"type":"custom_tool_call","call_id":"call_1","name":"apply_patch","input":"*** Begin Patch"},
//!     {"type":"custom_tool_call_output","call_id":"call_1","output":"Done!"}],
//!   "tools":[{"type":"custom","name":"apply_patch","description":"Edit files.",
//!     "format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch"}}],
//!   "include":["reasoning.encrypted_content"]}"#).unwrap();
//! let body: serde_json::Value = serde_json::from_str(&front.body()).unwrap();
//! assert_eq!(body["system"], "You are Codex.");
//! assert_eq!(body["messages"][1]["content"][0]["input"]["input"], "*** Begin Patch");
//! assert_eq!(body["tools"][0]["input_schema"]["required"][0], "input");
//! assert_eq!(front.client_tools.custom_tools, ["apply_patch"]);
//! assert!(front.stream && front.include_encrypted_reasoning);
//! ```

use serde_json::{Map, Value, json};

use crate::anthropic::request::{
    Block, Content, InputMessage, KnownBlock, MessagesRequest, Role, Tool,
};
use crate::anthropic::tool_schema::ToolSchema;
use crate::front::FrontError;
use crate::front::chat_request::JSON_OBJECT_INSTRUCTION;
use crate::front::client_tools::{NamespacedTool, ResponsesTools};
use crate::front::convert::{
    arguments_object, data_url, effort_to_thinking, image_source, non_null, optional_bool,
    optional_number, positive_int, push_message, string_field, text_block,
};

/// The converted request and what the answer's encoder needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesFrontRequest {
    /// The Anthropic request (its `model` is the client's model name).
    pub request: MessagesRequest,
    /// Whether the client wants SSE or one response object.
    pub stream: bool,
    /// How the client's tools are called on the way back (`custom` tools, namespaces).
    pub client_tools: ResponsesTools,
    /// `include` has `reasoning.encrypted_content`: reasoning items carry it.
    pub include_encrypted_reasoning: bool,
    /// What was dropped or degraded, for the host's log.
    pub warnings: Vec<String>,
    /// The request's settings the response objects repeat ([`request_echo`]).
    pub echo: Map<String, Value>,
}

impl ResponsesFrontRequest {
    /// The Anthropic request as JSON.
    #[must_use]
    pub fn body(&self) -> String {
        serde_json::to_string(&self.request).unwrap_or_default()
    }
}

/// The input schema a `custom` tool is offered with: one string parameter `input`.
#[must_use]
pub fn custom_tool_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The tool's input as raw text, exactly in the format the tool description gives (not JSON-encoded)."}},
        "required": ["input"],
        "additionalProperties": false
    })
}

/// The request's settings a response object repeats, as OpenAI's do: each field the request
/// gave, else the value the API reports by default (`store: true`, `tool_choice: "auto"`,
/// `temperature: 1`, …). The host overrides `store` (whether it kept the response) and
/// `previous_response_id` (which it resolved).
#[must_use]
pub fn request_echo(req: &Map<String, Value>) -> Map<String, Value> {
    let defaults = [
        ("background", json!(false)),
        ("instructions", Value::Null),
        ("max_output_tokens", Value::Null),
        ("max_tool_calls", Value::Null),
        ("metadata", json!({})),
        ("parallel_tool_calls", json!(true)),
        ("previous_response_id", Value::Null),
        ("prompt_cache_key", Value::Null),
        ("reasoning", json!({"effort": null, "summary": null})),
        ("safety_identifier", Value::Null),
        ("service_tier", json!("auto")),
        ("store", json!(true)),
        ("temperature", json!(1)),
        ("text", json!({"format": {"type": "text"}})),
        ("tool_choice", json!("auto")),
        ("tools", json!([])),
        ("top_logprobs", json!(0)),
        ("top_p", json!(1)),
        ("truncation", json!("disabled")),
        ("user", Value::Null),
    ];
    defaults
        .into_iter()
        .map(|(name, default)| {
            let given = non_null(req, name).cloned();
            (name.to_owned(), given.unwrap_or(default))
        })
        .collect()
}

/// Convert a Responses request body.
///
/// # Errors
/// A [`FrontError`] naming the field and what to send instead.
pub fn responses_to_anthropic(body: &[u8]) -> Result<ResponsesFrontRequest, FrontError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| FrontError::Json(e.to_string()))?;
    let Value::Object(req) = value else {
        return Err(FrontError::Json(String::from(
            "the body must be a JSON object",
        )));
    };
    Converter::default().convert(&req)
}

#[derive(Default)]
struct Converter {
    warnings: Vec<String>,
    system: Vec<String>,
    messages: Vec<InputMessage>,
    /// The client's tools as the answer must name them (read before the input items, whose
    /// calls name their tools the client's way).
    client_tools: ResponsesTools,
}

/// Top-level fields dropped with a warning.
const DROPPED: &[&str] = &[
    "metadata",
    "truncation",
    "max_tool_calls",
    "service_tier",
    "background",
    "top_logprobs",
    "prompt",
];

/// Hosted tool types (and their call items) the bridge cannot run.
fn hosted(kind: &str) -> bool {
    !matches!(kind, "function" | "custom")
}

impl Converter {
    fn convert(mut self, req: &Map<String, Value>) -> Result<ResponsesFrontRequest, FrontError> {
        let model = match req.get("model") {
            Some(Value::String(m)) if !m.is_empty() => m.clone(),
            Some(Value::String(_) | Value::Null) | None => {
                return Err(FrontError::missing(
                    "model",
                    "send the model name as a string",
                ));
            }
            Some(_) => return Err(FrontError::invalid("model", "must be a string")),
        };
        for field in ["previous_response_id", "conversation"] {
            if non_null(req, field).is_some() {
                return Err(FrontError::unsupported(
                    field,
                    "not resolved here: send the whole conversation in input, or the response's id to a bridge that kept it",
                ));
            }
        }
        for field in DROPPED {
            if non_null(req, field).is_some() {
                self.warnings.push(format!(
                    "{field} is not supported by the bridge and was ignored"
                ));
            }
        }
        // Tools first (their warnings keep their place below): the input's calls and its
        // `additional_tools` items need the names the tools are offered under.
        let (tools, client_tools, mut tool_warnings) = read_tools(req)?;
        self.client_tools = client_tools;
        match non_null(req, "instructions") {
            Some(Value::String(text)) => self.system.push(text.clone()),
            Some(_) => return Err(FrontError::invalid("instructions", "must be a string")),
            None => {}
        }
        match req.get("input") {
            Some(Value::String(text)) => {
                push_message(&mut self.messages, Role::User, vec![text_block(text)]);
            }
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    self.item(item, &format!("input[{i}]"))?;
                }
            }
            None | Some(Value::Null) => {
                return Err(FrontError::missing(
                    "input",
                    "a string or an array of items",
                ));
            }
            Some(_) => {
                return Err(FrontError::invalid(
                    "input",
                    "must be a string or an array of items",
                ));
            }
        }
        if self.messages.is_empty() {
            return Err(FrontError::invalid(
                "input",
                "at least one message or tool output is required",
            ));
        }
        let max_tokens = match non_null(req, "max_output_tokens") {
            Some(v) => Some(positive_int(v, "max_output_tokens")?),
            // The upstream's own default (the model's limit), as OpenAI's API does.
            None => None,
        };
        let stream = optional_bool(req, "stream")?.unwrap_or(false);
        let include_encrypted_reasoning = match non_null(req, "include") {
            Some(Value::Array(items)) => items
                .iter()
                .any(|i| i.as_str() == Some("reasoning.encrypted_content")),
            Some(_) => return Err(FrontError::invalid("include", "must be an array")),
            None => false,
        };
        let mut output_config = Map::new();
        let thinking = match non_null(req, "reasoning") {
            Some(Value::Object(r)) => {
                if r.get("summary").is_some_and(|s| !s.is_null()) {
                    self.warnings.push(String::from(
                        "reasoning.summary is ignored: the model's thinking is sent as the summary",
                    ));
                }
                match r.get("effort").filter(|e| !e.is_null()) {
                    Some(effort) => Some(effort_to_thinking(
                        effort,
                        "reasoning.effort",
                        &mut output_config,
                    )?),
                    None => None,
                }
            }
            Some(_) => return Err(FrontError::invalid("reasoning", "must be an object")),
            None => None,
        };
        self.text_format(req, &mut output_config)?;
        self.warnings.append(&mut tool_warnings);
        let tool_choice = self.tool_choice(req, !tools.is_empty())?;
        let mut extra = Map::new();
        match non_null(req, "user").or_else(|| non_null(req, "safety_identifier")) {
            Some(Value::String(user)) => {
                extra.insert(String::from("metadata"), json!({ "user_id": user }));
            }
            Some(_) => return Err(FrontError::invalid("user", "must be a string")),
            None => {}
        }
        let system = match self.system.len() {
            0 => None,
            1 => self.system.pop().map(Content::Text),
            _ => Some(Content::Blocks(
                self.system.drain(..).map(|t| text_block(&t)).collect(),
            )),
        };
        let request = MessagesRequest {
            model,
            max_tokens,
            messages: self.messages,
            system,
            stop_sequences: None,
            temperature: optional_number(req, "temperature")?,
            top_p: optional_number(req, "top_p")?,
            top_k: None,
            stream: Some(stream),
            tools: (!tools.is_empty()).then_some(tools),
            tool_choice,
            thinking,
            output_config: (!output_config.is_empty()).then_some(Value::Object(output_config)),
            extra,
        };
        Ok(ResponsesFrontRequest {
            request,
            stream,
            client_tools: self.client_tools,
            include_encrypted_reasoning,
            warnings: self.warnings,
            echo: request_echo(req),
        })
    }

    fn item(&mut self, item: &Value, at: &str) -> Result<(), FrontError> {
        if !item.is_object() {
            return Err(FrontError::invalid(at, "each input item must be an object"));
        }
        let kind = match item.get("type") {
            Some(Value::String(t)) => t.as_str(),
            None | Some(Value::Null) if item.get("role").is_some() => "message",
            _ => {
                return Err(FrontError::missing(
                    format!("{at}.type"),
                    "message, function_call, function_call_output, custom_tool_call, custom_tool_call_output or reasoning",
                ));
            }
        };
        match kind {
            "message" => self.message(item, at),
            "function_call" => {
                let id = string_field(item, "call_id", at)?;
                let name = self.called(item, at)?;
                let input = arguments_object(item.get("arguments"), &format!("{at}.arguments"))?;
                self.assistant(tool_use(id, &name, input));
                Ok(())
            }
            "custom_tool_call" => {
                let id = string_field(item, "call_id", at)?;
                let name = self.called(item, at)?;
                let input = string_field(item, "input", at)?;
                self.assistant(tool_use(id, &name, json!({ "input": input })));
                Ok(())
            }
            // Read with the tools, before the items.
            "additional_tools" => Ok(()),
            "function_call_output" | "custom_tool_call_output" => {
                let id = string_field(item, "call_id", at)?.to_owned();
                let content = tool_output(item.get("output"), &format!("{at}.output"))?;
                let block = Block::Known(KnownBlock::ToolResult {
                    tool_use_id: id,
                    content: Some(content),
                    is_error: Some(false),
                    extra: Map::new(),
                });
                push_message(&mut self.messages, Role::User, vec![block]);
                Ok(())
            }
            "reasoning" => {
                self.reasoning(item, at);
                Ok(())
            }
            "item_reference" => Err(FrontError::unsupported(
                format!("{at}.type"),
                "not resolved here: send the item itself, or the reference to a bridge that kept it",
            )),
            other => {
                let what = if other.ends_with("_call") || other.ends_with("_call_output") {
                    "a hosted tool's item"
                } else {
                    "an unknown item type"
                };
                self.warnings
                    .push(format!("{at}: {what} ({other}) was dropped"));
                Ok(())
            }
        }
    }

    /// The name a history call's tool was offered under (its `namespace` taken into account).
    fn called(&self, item: &Value, at: &str) -> Result<String, FrontError> {
        let name = string_field(item, "name", at)?;
        let namespace = match item.get("namespace") {
            None | Some(Value::Null) => None,
            Some(Value::String(ns)) => Some(ns.as_str()),
            Some(_) => {
                return Err(FrontError::invalid(
                    format!("{at}.namespace"),
                    "must be a string",
                ));
            }
        };
        Ok(self.client_tools.sent_name(namespace, name).to_owned())
    }

    fn assistant(&mut self, block: Block) {
        push_message(&mut self.messages, Role::Assistant, vec![block]);
    }

    fn reasoning(&mut self, item: &Value, at: &str) {
        let Some(signature) = item
            .get("encrypted_content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            self.warnings.push(format!(
                "{at}: a reasoning item without encrypted_content was dropped"
            ));
            return;
        };
        let texts = |field: &str| -> Vec<String> {
            item.get(field)
                .and_then(Value::as_array)
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut text = texts("summary");
        if text.is_empty() {
            text = texts("content");
        }
        self.assistant(Block::Known(KnownBlock::Thinking {
            thinking: text.join("\n\n"),
            signature: Some(signature.to_owned()),
            extra: Map::new(),
        }));
    }

    fn message(&mut self, item: &Value, at: &str) -> Result<(), FrontError> {
        let role = match item.get("role").and_then(Value::as_str) {
            Some(r @ ("user" | "assistant" | "system" | "developer")) => r,
            Some(other) => {
                return Err(FrontError::invalid(
                    format!("{at}.role"),
                    format!("unknown role {other:?}; use user, assistant, system or developer"),
                ));
            }
            None => {
                return Err(FrontError::missing(
                    format!("{at}.role"),
                    "user, assistant, system or developer",
                ));
            }
        };
        let blocks = self.parts(item.get("content"), &format!("{at}.content"))?;
        match role {
            "system" | "developer" => {
                let mut texts = Vec::new();
                for block in &blocks {
                    match block {
                        Block::Known(KnownBlock::Text { text, .. }) => texts.push(text.as_str()),
                        _ => {
                            return Err(FrontError::invalid(
                                format!("{at}.content"),
                                "system and developer messages take text only",
                            ));
                        }
                    }
                }
                let text = texts.join("\n");
                if self.messages.is_empty() {
                    self.system.push(text);
                } else {
                    // Text in a user turn at this place: a `role:"system"` message would need
                    // Anthropic's mid-conversation-system beta, which OpenAI clients do not send.
                    push_message(&mut self.messages, Role::User, vec![text_block(&text)]);
                }
            }
            "assistant" => {
                if !blocks.is_empty() {
                    push_message(&mut self.messages, Role::Assistant, blocks);
                }
            }
            _ => push_message(&mut self.messages, Role::User, blocks),
        }
        Ok(())
    }

    fn parts(&mut self, content: Option<&Value>, at: &str) -> Result<Vec<Block>, FrontError> {
        match content {
            Some(Value::String(text)) => Ok(vec![text_block(text)]),
            Some(Value::Array(parts)) => {
                let mut blocks = Vec::with_capacity(parts.len());
                for (j, part) in parts.iter().enumerate() {
                    let here = format!("{at}[{j}]");
                    match part.get("type").and_then(Value::as_str) {
                        Some("input_text" | "output_text" | "text") => {
                            let text = string_field(part, "text", &here)?;
                            if !text.is_empty() {
                                blocks.push(text_block(text));
                            }
                        }
                        Some("input_image") => blocks.push(image(part, &here)?),
                        Some("input_file") => blocks.push(file(part, &here)?),
                        Some("refusal") => self
                            .warnings
                            .push(format!("{here}: a refusal part was dropped")),
                        Some(other) => {
                            return Err(FrontError::invalid(
                                format!("{here}.type"),
                                format!(
                                    "unknown content part type {other:?}; use input_text, output_text, input_image or input_file"
                                ),
                            ));
                        }
                        None => {
                            return Err(FrontError::missing(
                                format!("{here}.type"),
                                "every content part needs a type",
                            ));
                        }
                    }
                }
                Ok(blocks)
            }
            None | Some(Value::Null) => Err(FrontError::missing(at, "a string or parts")),
            Some(_) => Err(FrontError::invalid(
                at,
                "must be a string or an array of parts",
            )),
        }
    }

    fn text_format(
        &mut self,
        req: &Map<String, Value>,
        output_config: &mut Map<String, Value>,
    ) -> Result<(), FrontError> {
        let Some(text) = non_null(req, "text") else {
            return Ok(());
        };
        if text.get("verbosity").is_some_and(|v| !v.is_null()) {
            self.warnings.push(String::from(
                "text.verbosity is not supported and was ignored",
            ));
        }
        let Some(format) = text.get("format").filter(|f| !f.is_null()) else {
            return Ok(());
        };
        match format.get("type").and_then(Value::as_str) {
            Some("text") => {}
            Some("json_object") => self.system.push(String::from(JSON_OBJECT_INSTRUCTION)),
            Some("json_schema") => {
                let Some(schema) = format.get("schema").filter(|s| s.is_object()) else {
                    return Err(FrontError::missing(
                        "text.format.schema",
                        "a JSON Schema object",
                    ));
                };
                output_config.insert(
                    String::from("format"),
                    crate::front::convert::schema_format(
                        schema,
                        format.get("name"),
                        format.get("strict"),
                    ),
                );
            }
            _ => {
                return Err(FrontError::invalid(
                    "text.format.type",
                    "one of text, json_object, json_schema",
                ));
            }
        }
        Ok(())
    }
}

/// One tool as the client gave it: where, its JSON, and the namespace it came in.
struct GivenTool<'a> {
    at: String,
    tool: &'a Value,
    namespace: Option<&'a str>,
}

/// The client's tools: the `tools` field and `additional_tools` input items, namespaces
/// flattened ([`crate::front::client_tools`]); the Anthropic tools, how to name calls on the way
/// back, and what was dropped.
fn read_tools(
    req: &Map<String, Value>,
) -> Result<(Vec<Tool>, ResponsesTools, Vec<String>), FrontError> {
    let mut given = Vec::new();
    match non_null(req, "tools") {
        None => {}
        Some(Value::Array(list)) => given_tools(list, "tools", None, &mut given)?,
        Some(_) => return Err(FrontError::invalid("tools", "must be an array")),
    }
    if let Some(Value::Array(items)) = req.get("input") {
        for (i, item) in items.iter().enumerate() {
            if item.get("type").and_then(Value::as_str) != Some("additional_tools") {
                continue;
            }
            let at = format!("input[{i}].tools");
            match item.get("tools") {
                Some(Value::Array(list)) => given_tools(list, &at, None, &mut given)?,
                None | Some(Value::Null) => {
                    return Err(FrontError::missing(at, "the item's tools"));
                }
                Some(_) => return Err(FrontError::invalid(at, "must be an array")),
            }
        }
    }
    fn name_of<'a>(t: &GivenTool<'a>) -> &'a str {
        t.tool.get("name").and_then(Value::as_str).unwrap_or("")
    }
    let mut warnings = Vec::new();
    let mut tools = Vec::new();
    let mut client = ResponsesTools::default();
    for (i, t) in given.iter().enumerate() {
        // The same tool given twice (two `additional_tools` items in a replayed history) is one.
        let same = |o: &GivenTool<'_>| o.namespace == t.namespace && name_of(o) == name_of(t);
        if given[..i].iter().any(same) {
            continue;
        }
        let kind = t.tool.get("type").and_then(Value::as_str).unwrap_or("");
        let at = &t.at;
        if hosted(kind) {
            warnings.push(format!(
                "{at}: the hosted tool {kind:?} is not available through the bridge and was dropped"
            ));
            continue;
        }
        let name = string_field(t.tool, "name", at)?;
        if name.is_empty() {
            return Err(FrontError::invalid(
                format!("{at}.name"),
                "must not be empty",
            ));
        }
        let sent = match t.namespace {
            // Two namespaces (or a namespace and the top level) with one name: qualify it.
            Some(ns)
                if given
                    .iter()
                    .any(|o| name_of(o) == name && o.namespace != t.namespace) =>
            {
                let qualified = format!("{ns}_{name}");
                // Made here, so kept to what every upstream takes (the client sees its own
                // namespace and name either way).
                crate::translate::tool_names::ToolNames::for_names([qualified.as_str()])
                    .upstream(&qualified)
                    .to_owned()
            }
            _ => name.to_owned(),
        };
        if let Some(ns) = t.namespace {
            client.namespaced_tools.push(NamespacedTool {
                sent: sent.clone(),
                namespace: ns.to_owned(),
                name: name.to_owned(),
            });
        }
        let description = match t.tool.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(d)) => Some(d.clone()),
            Some(_) => {
                return Err(FrontError::invalid(
                    format!("{at}.description"),
                    "must be a string",
                ));
            }
        };
        let (description, schema) = if kind == "custom" {
            client.custom_tools.push(sent.clone());
            (
                Some(custom_description(
                    description.as_deref(),
                    t.tool.get("format"),
                )),
                custom_tool_schema(),
            )
        } else {
            let schema = match t.tool.get("parameters") {
                None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
                Some(p @ Value::Object(_)) => p.clone(),
                Some(_) => {
                    return Err(FrontError::invalid(
                        format!("{at}.parameters"),
                        "must be a JSON Schema object",
                    ));
                }
            };
            (description, schema)
        };
        tools.push(Tool {
            name: sent,
            description: description.map(crate::json_string::JsonString::new),
            input_schema: Some(ToolSchema::from_value(&schema)),
            kind: None,
            extra: Map::new(),
        });
    }
    Ok((tools, client, warnings))
}

/// The tools of `list` (at `at`), a `namespace` tool's own tools in its place.
fn given_tools<'a>(
    list: &'a [Value],
    at: &str,
    namespace: Option<&'a str>,
    out: &mut Vec<GivenTool<'a>>,
) -> Result<(), FrontError> {
    for (i, tool) in list.iter().enumerate() {
        let here = format!("{at}[{i}]");
        if tool.get("type").and_then(Value::as_str) != Some("namespace") {
            out.push(GivenTool {
                at: here,
                tool,
                namespace,
            });
            continue;
        }
        if namespace.is_some() {
            return Err(FrontError::invalid(
                format!("{here}.type"),
                "a namespace cannot hold another namespace",
            ));
        }
        let name = string_field(tool, "name", &here)?;
        match tool.get("tools") {
            Some(Value::Array(inner)) => {
                given_tools(inner, &format!("{here}.tools"), Some(name), out)?;
            }
            _ => {
                return Err(FrontError::missing(
                    format!("{here}.tools"),
                    "a namespace's tools, as an array",
                ));
            }
        }
    }
    Ok(())
}

impl Converter {
    fn tool_choice(
        &mut self,
        req: &Map<String, Value>,
        have_tools: bool,
    ) -> Result<Option<Value>, FrontError> {
        let parallel = optional_bool(req, "parallel_tool_calls")?.unwrap_or(true);
        let explicit = non_null(req, "tool_choice");
        let mut choice = match explicit {
            None => json!({"type": "auto"}),
            Some(Value::String(s)) => match s.as_str() {
                "none" => return Ok(have_tools.then(|| json!({"type": "none"}))),
                "auto" => json!({"type": "auto"}),
                "required" => json!({"type": "any"}),
                other => {
                    return Err(FrontError::invalid(
                        "tool_choice",
                        format!("unknown value {other:?}; use none, auto, required or a tool"),
                    ));
                }
            },
            Some(Value::Object(o)) => match o.get("type").and_then(Value::as_str) {
                Some("function" | "custom") => {
                    let Some(name) = o.get("name").and_then(Value::as_str) else {
                        return Err(FrontError::missing(
                            "tool_choice.name",
                            "the name of the tool to call",
                        ));
                    };
                    let namespace = o.get("namespace").and_then(Value::as_str);
                    let name = self.client_tools.sent_name(namespace, name);
                    json!({"type": "tool", "name": name})
                }
                Some("allowed_tools") => match o.get("mode").and_then(Value::as_str) {
                    Some("required") => json!({"type": "any"}),
                    _ => json!({"type": "auto"}),
                },
                other => {
                    self.warnings.push(format!(
                        "tool_choice {other:?} names a hosted tool; the model chooses freely"
                    ));
                    json!({"type": "auto"})
                }
            },
            Some(_) => {
                return Err(FrontError::invalid(
                    "tool_choice",
                    "a string (none, auto, required) or an object",
                ));
            }
        };
        if !have_tools {
            return Ok(None);
        }
        if !parallel && let Value::Object(o) = &mut choice {
            o.insert(String::from("disable_parallel_tool_use"), Value::Bool(true));
        }
        let plain_auto = choice == json!({"type": "auto"});
        Ok((!plain_auto || explicit.is_some()).then_some(choice))
    }
}

/// A custom tool's description for the model: the client's text and the input's format.
fn custom_description(description: Option<&str>, format: Option<&Value>) -> String {
    let mut out = description.unwrap_or_default().to_owned();
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(
        "Call this tool with one argument, `input`: raw text in the tool's own format (not JSON).",
    );
    if let Some(format) =
        format.filter(|f| f.get("type").and_then(Value::as_str) == Some("grammar"))
    {
        let syntax = format
            .get("syntax")
            .and_then(Value::as_str)
            .unwrap_or("lark");
        if let Some(definition) = format.get("definition").and_then(Value::as_str) {
            out.push_str(&format!(
                "\nThe input must match this {syntax} grammar:\n{definition}"
            ));
        }
    }
    out
}

fn tool_use(id: &str, name: &str, input: Value) -> Block {
    Block::Known(KnownBlock::ToolUse {
        id: id.to_owned(),
        name: name.to_owned(),
        input,
        extra: Map::new(),
    })
}

/// A tool output: a string, or `input_text` / `input_image` parts.
fn tool_output(output: Option<&Value>, at: &str) -> Result<Content, FrontError> {
    match output {
        Some(Value::String(text)) => Ok(Content::Text(text.clone())),
        Some(Value::Array(parts)) => {
            let mut blocks = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                let here = format!("{at}[{j}]");
                match part.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text" | "text") => {
                        blocks.push(text_block(string_field(part, "text", &here)?));
                    }
                    Some("input_image") => blocks.push(image(part, &here)?),
                    _ => {
                        return Err(FrontError::invalid(
                            format!("{here}.type"),
                            "tool outputs take input_text and input_image parts",
                        ));
                    }
                }
            }
            Ok(Content::Blocks(blocks))
        }
        None | Some(Value::Null) => Err(FrontError::missing(at, "the tool's output")),
        Some(_) => Err(FrontError::invalid(
            at,
            "must be a string or an array of parts",
        )),
    }
}

fn image(part: &Value, at: &str) -> Result<Block, FrontError> {
    let Some(url) = part
        .get("image_url")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
    else {
        return Err(FrontError::unsupported(
            format!("{at}.image_url"),
            "send the image as image_url (an https URL or a data: URL); file_id is not supported",
        ));
    };
    let source = image_source(url, &format!("{at}.image_url"))?;
    Ok(Block::Known(KnownBlock::Image {
        source,
        extra: Map::new(),
    }))
}

fn file(part: &Value, at: &str) -> Result<Block, FrontError> {
    let source = if let Some(data) = part.get("file_data").and_then(Value::as_str) {
        let (media_type, data) = data_url(data).ok_or_else(|| {
            FrontError::invalid(
                format!("{at}.file_data"),
                "must be a data URL like data:application/pdf;base64,<data>",
            )
        })?;
        json!({"type": "base64", "media_type": media_type, "data": data})
    } else if let Some(url) = part.get("file_url").and_then(Value::as_str) {
        json!({"type": "url", "url": url})
    } else {
        return Err(FrontError::unsupported(
            at,
            "send files as file_data (a data: URL) or file_url; file_id is not supported",
        ));
    };
    let mut extra = Map::new();
    if let Some(name) = part.get("filename").and_then(Value::as_str) {
        extra.insert(String::from("title"), json!(name));
    }
    Ok(Block::Known(KnownBlock::Document { source, extra }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(body: Value) -> (Value, ResponsesFrontRequest) {
        let front = responses_to_anthropic(body.to_string().as_bytes()).unwrap();
        (serde_json::from_str(&front.body()).unwrap(), front)
    }

    fn refuse(body: Value) -> FrontError {
        responses_to_anthropic(body.to_string().as_bytes()).unwrap_err()
    }

    #[test]
    fn a_string_input_with_instructions() {
        let (out, front) = convert(
            json!({"model": "m", "instructions": "Be brief.", "input": "hi",
            "max_output_tokens": 50, "temperature": 0.5, "user": "u"}),
        );
        assert_eq!(
            out,
            json!({"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}],
                "system": "Be brief.", "temperature": 0.5, "stream": false, "metadata": {"user_id": "u"}})
        );
        assert!(!front.stream && front.client_tools.custom_tools.is_empty());
        let (default, _) = convert(json!({"model": "m", "input": "hi"}));
        assert!(
            default.get("max_tokens").is_none(),
            "none invented: {default}"
        );
    }

    /// A Codex second turn: developer prompt, user text, the model's replayed reasoning and
    /// function call (with server ids and status), and the call's output.
    #[test]
    fn a_codex_tool_round_trip() {
        let (out, front) = convert(json!({
            "model": "gpt-5.5", "stream": true, "store": false, "tool_choice": "auto",
            "parallel_tool_calls": true, "reasoning": {"effort": "medium"},
            "include": ["reasoning.encrypted_content"], "prompt_cache_key": "k",
            "text": {"verbosity": "low"},
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "make out.txt"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Use the shell."}],
                 "encrypted_content": "SIG"},
                {"type": "reasoning", "id": "rs_2", "summary": []},
                {"type": "function_call", "id": "fc_1", "status": "completed", "call_id": "toolu_1",
                 "name": "exec_command", "arguments": "{\"cmd\":\"echo hi > out.txt\"}"},
                {"type": "function_call_output", "call_id": "toolu_1", "output": "exit 0"}
            ],
            "tools": [
                {"type": "function", "name": "exec_command", "description": "Run", "strict": false,
                 "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
                {"type": "web_search"}
            ]
        }));
        assert_eq!(out["system"], "You are Codex.");
        assert_eq!(
            out["messages"],
            json!([
                {"role": "user", "content": "make out.txt"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Use the shell.", "signature": "SIG"},
                    {"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {"cmd": "echo hi > out.txt"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "exit 0", "is_error": false}
                ]}
            ])
        );
        assert_eq!(out["tools"].as_array().unwrap().len(), 1);
        assert_eq!(out["tool_choice"], json!({"type": "auto"}));
        assert_eq!(out["thinking"], json!({"type": "adaptive"}));
        assert_eq!(out["output_config"], json!({"effort": "medium"}));
        assert!(front.stream && front.include_encrypted_reasoning);
        for dropped in ["tools[1]", "input[3]", "text.verbosity"] {
            assert!(
                front.warnings.iter().any(|w| w.contains(dropped)),
                "{dropped}: {:?}",
                front.warnings
            );
        }
    }

    #[test]
    fn custom_tools_take_one_string() {
        let (out, front) = convert(json!({"model": "m", "input": "patch it",
            "tools": [{"type": "custom", "name": "apply_patch", "description": "Edit files.",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: \"*** Begin Patch\""}}],
            "tool_choice": {"type": "custom", "name": "apply_patch"}, "parallel_tool_calls": false}));
        let tool = &out["tools"][0];
        assert_eq!(tool["input_schema"], custom_tool_schema());
        let description = tool["description"].as_str().unwrap();
        assert!(description.starts_with("Edit files.\n\n"));
        assert!(description.ends_with("lark grammar:\nstart: \"*** Begin Patch\""));
        assert_eq!(
            out["tool_choice"],
            json!({"type": "tool", "name": "apply_patch", "disable_parallel_tool_use": true})
        );
        assert_eq!(front.client_tools.custom_tools, ["apply_patch"]);
    }

    #[test]
    fn namespaces_in_additional_tools_are_offered_flat_and_named_back() {
        let (out, front) = convert(json!({"model": "gpt-6.1-sol", "input": [
            {"type": "additional_tools", "id": "at_1", "role": "developer", "tools": [
                {"type": "namespace", "name": "functions", "description": "", "tools": [
                    {"type": "custom", "name": "exec", "description": "Run JS."},
                    {"type": "function", "name": "wait", "parameters": {"type": "object"}}]},
                {"type": "namespace", "name": "collaboration", "tools": [
                    {"type": "function", "name": "wait", "parameters": {"type": "object"}}]}]},
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c1", "name": "wait", "namespace": "collaboration", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            // The same tools again (a replayed history): offered once.
            {"type": "additional_tools", "id": "at_2", "role": "developer", "tools": [
                {"type": "namespace", "name": "collaboration", "tools": [
                    {"type": "function", "name": "wait", "parameters": {"type": "object"}}]}]}],
            "tool_choice": {"type": "function", "name": "wait", "namespace": "collaboration"},
            "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]}));
        let names: Vec<&str> = out["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        // `wait` is in two namespaces: each is qualified; the others keep their names.
        assert_eq!(
            names,
            ["shell", "exec", "functions_wait", "collaboration_wait"]
        );
        assert_eq!(
            out["messages"][1]["content"][0]["name"],
            "collaboration_wait"
        );
        assert_eq!(out["tool_choice"]["name"], "collaboration_wait");
        let tools = &front.client_tools;
        assert_eq!(tools.custom_tools, ["exec"]);
        assert_eq!(
            tools.client_name("collaboration_wait"),
            (Some("collaboration"), "wait")
        );
        assert_eq!(tools.client_name("exec"), (Some("functions"), "exec"));
        assert_eq!(tools.client_name("shell"), (None, "shell"));
        assert!(front.warnings.is_empty(), "{:?}", front.warnings);
    }

    #[test]
    fn a_qualified_name_past_64_characters_is_shortened_and_named_back() {
        let ns_a = "mcp__plugin_observability_grafana-cloud";
        let ns_b = "mcp__plugin_observability_datadog-cloud";
        let tool = "query_prometheus_range_with_labels";
        let namespace = |ns: &str| {
            json!({"type": "namespace", "name": ns, "tools": [
            {"type": "function", "name": tool, "parameters": {"type": "object"}}]})
        };
        let (out, front) = convert(json!({"model": "m", "input": [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c1", "name": tool, "namespace": ns_b, "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"}],
            "tools": [namespace(ns_a), namespace(ns_b)]}));
        let names: Vec<&str> = out["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 2);
        assert_ne!(names[0], names[1]);
        for (sent, ns) in names.iter().zip([ns_a, ns_b]) {
            assert!(crate::translate::tool_names::acceptable(sent), "{sent}");
            assert_eq!(front.client_tools.client_name(sent), (Some(ns), tool));
        }
        assert_eq!(out["messages"][1]["content"][0]["name"], names[1]);
    }

    #[test]
    fn a_namespace_in_a_namespace_or_without_tools_is_refused() {
        let nested = refuse(json!({"model": "m", "input": "hi", "tools": [
            {"type": "namespace", "name": "a", "tools": [{"type": "namespace", "name": "b", "tools": []}]}]}));
        assert!(
            nested.to_string().contains("tools[0].tools[0].type"),
            "{nested}"
        );
        let empty = refuse(json!({"model": "m", "input": [
            {"type": "additional_tools", "role": "developer"},
            {"role": "user", "content": "hi"}]}));
        assert!(empty.to_string().contains("input[0].tools"), "{empty}");
    }

    #[test]
    fn images_and_tool_output_parts() {
        let (out, _) = convert(json!({"model": "m", "input": [
            {"role": "user", "content": [{"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/", "detail": "auto"}]},
            {"type": "function_call", "call_id": "c", "name": "view_image", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": [
                {"type": "input_text", "text": "here"},
                {"type": "input_image", "image_url": "https://x.test/i.png"}]}
        ]}));
        assert_eq!(
            out["messages"][0]["content"][0],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"}})
        );
        assert_eq!(
            out["messages"][2]["content"][0]["content"],
            json!([{"type": "text", "text": "here"},
                   {"type": "image", "source": {"type": "url", "url": "https://x.test/i.png"}}])
        );
    }

    #[test]
    fn refusals_name_the_field() {
        for (body, param) in [
            (json!({"input": "x"}), "model"),
            (json!({"model": "m"}), "input"),
            (json!({"model": "m", "input": []}), "input"),
            (
                json!({"model": "m", "input": "x", "previous_response_id": "resp_1"}),
                "previous_response_id",
            ),
            (
                json!({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}),
                "input[0].type",
            ),
            (
                json!({"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{"}]}),
                "input[0].arguments",
            ),
            (
                json!({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}),
                "input[0].call_id",
            ),
            (
                json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}),
                "input[0].content[0].image_url",
            ),
            (
                json!({"model": "m", "input": "x", "reasoning": {"effort": "max"}}),
                "reasoning.effort",
            ),
            (
                json!({"model": "m", "input": "x", "max_output_tokens": 0}),
                "max_output_tokens",
            ),
        ] {
            let err = refuse(body);
            assert_eq!(err.param(), Some(param), "{err}");
        }
    }

    #[test]
    fn late_developer_messages_become_user_text_and_formats_map() {
        let schema = json!({"type": "object"});
        let (out, _) = convert(json!({"model": "m",
        "text": {"format": {"type": "json_schema", "name": "x", "schema": schema, "strict": true}},
        "input": [
            {"role": "user", "content": "a"},
            {"role": "developer", "content": "now b"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "ok", "annotations": []}]}
        ]}));
        assert_eq!(
            out["messages"][0],
            json!({"role": "user", "content": [
                {"type": "text", "text": "a"}, {"type": "text", "text": "now b"}]})
        );
        assert_eq!(
            out["messages"][1],
            json!({"role": "assistant", "content": "ok"})
        );
        assert_eq!(
            out["output_config"]["format"],
            json!({"type": "json_schema", "schema": schema, "name": "x", "strict": true})
        );
    }
}
