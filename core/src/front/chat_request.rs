//! OpenAI Chat Completions request → Anthropic Messages request.
//!
//! | Chat Completions | Anthropic |
//! |---|---|
//! | `system` / `developer` messages before the first other message | `system` (one text block each) |
//! | `system` / `developer` later in the conversation | a text block in a user turn at that place (a `role:"system"` message would need Anthropic's `mid-conversation-system` beta) |
//! | `user` content string / `text` parts | `text` blocks |
//! | `image_url` with a `data:<type>;base64,` URL / an http(s) URL | `image` block, `base64` / `url` source |
//! | `file` with `file_data` (a `data:` URL) | `document` block, `base64` source |
//! | assistant `content` + `tool_calls` | `text` + `tool_use` blocks (arguments parsed: they must be a JSON object) |
//! | `tool` messages | `tool_result` blocks in one user message (consecutive ones merge, a following user message joins them) |
//! | `tools` (`type:"function"`) | tools with `input_schema` = `parameters` |
//! | `tool_choice` `none` / `auto` / `required` / `{function:{name}}` | `none` / `auto` / `any` / `{type:"tool",name}` |
//! | `parallel_tool_calls: false` | `tool_choice.disable_parallel_tool_use: true` |
//! | `max_completion_tokens`, else `max_tokens` (neither: none, as OpenAI's API) | `max_tokens` (absent: the host sends none, or the target's default where the upstream needs one) |
//! | `reasoning_effort` `none` | `thinking: {type:"disabled"}` |
//! | `reasoning_effort` `minimal`/`low`/`medium`/`high`/`xhigh` | `thinking: {type:"adaptive"}`, `output_config.effort` (`minimal` → `low`) |
//! | `stop` (string or array) | `stop_sequences` |
//! | `temperature`, `top_p` | the same (passed as given: OpenAI's temperature range is 0–2, Anthropic's 0–1) |
//! | `stream`, `stream_options.include_usage` | `stream`; [`ChatFrontRequest::include_usage`] for the encoder |
//! | `response_format` `json_schema` | `output_config.format: {type:"json_schema", schema, name, strict}` (`name`, `strict` kept for OpenAI upstreams; the Anthropic pass-through drops them) |
//! | `response_format` `json_object` | an instruction appended to `system` (no guarantee, only a request) |
//! | `user` | `metadata.user_id` |
//!
//! The reverse direction (`translate::chat_request`) maps Anthropic's effort settings to
//! OpenAI's (`adaptive` + `output_config.effort`: `low` → low, `high`/`xhigh`/`max` → high, else
//! medium); the effort mapping here is its inverse, and `adaptive` thinking avoids Anthropic's
//! rule that a thinking budget be below `max_tokens`.
//!
//! Refused with a [`FrontError`] naming the field: `n` > 1, audio input, `file_id` files,
//! legacy `function` messages, tool-call arguments that are not a JSON object, unknown roles and
//! part types, wrong JSON types. Dropped with a warning (the host logs them): `logprobs`,
//! `top_logprobs`, `logit_bias`, `seed`, penalties, `metadata`, `store`, `service_tier`,
//! `prediction`, `modalities`, `audio`, `web_search_options`, non-function tools, the restriction
//! of an `allowed_tools` choice, message `name`s, assistant `refusal` and `reasoning_content`
//! (no signature: an Anthropic upstream would refuse it as thinking); image `detail` is dropped silently.
//!
//! ```
//! use bridge_core::front::chat_request::chat_to_anthropic;
//! let front = chat_to_anthropic(br#"{"model":"gpt-x","max_completion_tokens":500,
//!   "messages":[{"role":"user","content":"list files"},
//!     {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
//!       "function":{"name":"ls","arguments":"{\"path\":\".\"}"}}]},
//!     {"role":"tool","tool_call_id":"call_1","content":"a.txt"}],
//!   "tools":[{"type":"function","function":{"name":"ls","parameters":{"type":"object"}}}],
//!   "tool_choice":"required","parallel_tool_calls":false}"#).unwrap();
//! let body: serde_json::Value = serde_json::from_str(&front.body()).unwrap();
//! assert_eq!(body["max_tokens"], 500);
//! assert_eq!(body["messages"][1]["content"][0]["input"]["path"], ".");
//! assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "call_1");
//! assert_eq!(body["tool_choice"], serde_json::json!({"type":"any","disable_parallel_tool_use":true}));
//!
//! let err = chat_to_anthropic(br#"{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}"#).unwrap_err();
//! assert_eq!(err.param(), Some("n"));
//! ```

use serde_json::{Map, Value, json};

use crate::anthropic::request::{
    Block, Content, InputMessage, KnownBlock, MessagesRequest, Role, Tool,
};
use crate::anthropic::tool_schema::ToolSchema;
use crate::front::FrontError;
use crate::front::convert::{
    arguments_object, data_url, effort_to_thinking, image_source, non_null, optional_bool,
    optional_number, part_type, positive_int, push_message, string_field, text_block,
};

/// The instruction appended to `system` for `response_format: {type:"json_object"}`.
pub const JSON_OBJECT_INSTRUCTION: &str =
    "Respond with one valid JSON object and nothing else: no prose, no code fences.";

/// The converted request and what the answer's encoder needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatFrontRequest {
    /// The Anthropic request (its `model` is the client's model name).
    pub request: MessagesRequest,
    /// Whether the client wants SSE (`stream: true`) or one `chat.completion` object.
    pub stream: bool,
    /// `stream_options.include_usage`: end the stream with a usage chunk (`choices: []`).
    pub include_usage: bool,
    /// What was dropped or degraded, for the host's log.
    pub warnings: Vec<String>,
}

impl ChatFrontRequest {
    /// The Anthropic request as JSON (what the Anthropic pipeline takes as its input bytes).
    #[must_use]
    pub fn body(&self) -> String {
        serde_json::to_string(&self.request).unwrap_or_default()
    }
}

/// Convert a Chat Completions request body.
///
/// # Errors
/// A [`FrontError`] naming the field and what to send instead.
pub fn chat_to_anthropic(body: &[u8]) -> Result<ChatFrontRequest, FrontError> {
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
}

/// Top-level fields dropped with a warning: Anthropic has no counterpart.
const DROPPED: &[&str] = &[
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "seed",
    "metadata",
    "store",
    "service_tier",
    "prediction",
    "modalities",
    "audio",
    "web_search_options",
    "verbosity",
    "prompt_cache_key",
    "safety_identifier",
    "functions",
    "function_call",
];

impl Converter {
    fn convert(mut self, req: &Map<String, Value>) -> Result<ChatFrontRequest, FrontError> {
        let model = match req.get("model") {
            Some(Value::String(m)) if !m.is_empty() => m.clone(),
            Some(Value::String(_)) | None | Some(Value::Null) => {
                return Err(FrontError::missing(
                    "model",
                    "send the model name as a string",
                ));
            }
            Some(_) => return Err(FrontError::invalid("model", "must be a string")),
        };
        if let Some(n) = req.get("n").filter(|n| !n.is_null()) {
            match n.as_u64() {
                Some(1) => {}
                Some(_) => {
                    return Err(FrontError::unsupported(
                        "n",
                        "only n = 1 is supported; send several requests for several choices",
                    ));
                }
                None => return Err(FrontError::invalid("n", "must be a positive integer")),
            }
        }
        for field in DROPPED {
            if req.get(*field).is_some_and(|v| !v.is_null()) {
                self.warnings.push(format!(
                    "{field} is not supported by the bridge and was ignored"
                ));
            }
        }
        let Some(Value::Array(messages)) = req.get("messages") else {
            return Err(FrontError::missing(
                "messages",
                "send the conversation as an array of messages",
            ));
        };
        if messages.is_empty() {
            return Err(FrontError::invalid(
                "messages",
                "at least one message is required",
            ));
        }
        for (i, message) in messages.iter().enumerate() {
            self.message(i, message)?;
        }
        let max_tokens = match (
            non_null(req, "max_completion_tokens"),
            non_null(req, "max_tokens"),
        ) {
            (Some(v), _) => Some(positive_int(v, "max_completion_tokens")?),
            (None, Some(v)) => Some(positive_int(v, "max_tokens")?),
            // The upstream's own default (the model's limit), as OpenAI's API does.
            (None, None) => None,
        };
        let stream = optional_bool(req, "stream")?.unwrap_or(false);
        let include_usage = match non_null(req, "stream_options") {
            Some(Value::Object(o)) => match o.get("include_usage") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => {
                    return Err(FrontError::invalid(
                        "stream_options.include_usage",
                        "must be a boolean",
                    ));
                }
            },
            Some(_) => return Err(FrontError::invalid("stream_options", "must be an object")),
            None => false,
        };
        let mut output_config = Map::new();
        let thinking = self.reasoning_effort(req, &mut output_config)?;
        self.response_format(req, &mut output_config)?;
        let tools = self.tools(req)?;
        let tool_choice = tool_choice(req, tools.as_ref().is_some_and(|t| !t.is_empty()))?;
        let mut extra = Map::new();
        match non_null(req, "user") {
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
            stop_sequences: stop(req)?,
            temperature: optional_number(req, "temperature")?,
            top_p: optional_number(req, "top_p")?,
            top_k: None,
            stream: Some(stream),
            tools,
            tool_choice,
            thinking,
            output_config: (!output_config.is_empty()).then_some(Value::Object(output_config)),
            extra,
        };
        Ok(ChatFrontRequest {
            request,
            stream,
            include_usage,
            warnings: self.warnings,
        })
    }

    fn message(&mut self, i: usize, message: &Value) -> Result<(), FrontError> {
        let at = format!("messages[{i}]");
        let Value::Object(m) = message else {
            return Err(FrontError::invalid(at, "each message must be an object"));
        };
        let role = match m.get("role") {
            Some(Value::String(r)) => r.as_str(),
            _ => {
                return Err(FrontError::missing(
                    format!("{at}.role"),
                    "one of system, developer, user, assistant, tool",
                ));
            }
        };
        if m.get("name").is_some_and(|n| !n.is_null()) {
            self.warnings
                .push(format!("{at}.name is not supported and was ignored"));
        }
        match role {
            "system" | "developer" => {
                let text = text_content(m.get("content"), &format!("{at}.content"))?;
                if self.messages.is_empty() {
                    self.system.push(text);
                } else {
                    // Text in a user turn at this place: a `role:"system"` message would need
                    // Anthropic's mid-conversation-system beta, which OpenAI clients do not send.
                    push_message(&mut self.messages, Role::User, vec![text_block(&text)]);
                }
            }
            "user" => {
                let blocks = user_content(m.get("content"), &format!("{at}.content"))?;
                self.push(Role::User, blocks);
            }
            "assistant" => {
                let blocks = self.assistant(m, &at)?;
                if blocks.is_empty() {
                    self.warnings.push(format!(
                        "{at} has neither content nor tool_calls and was skipped"
                    ));
                } else {
                    self.push(Role::Assistant, blocks);
                }
            }
            "tool" => {
                let id = match m.get("tool_call_id") {
                    Some(Value::String(id)) if !id.is_empty() => id.clone(),
                    _ => {
                        return Err(FrontError::missing(
                            format!("{at}.tool_call_id"),
                            "the id of the tool call this message answers",
                        ));
                    }
                };
                let text = text_content(m.get("content"), &format!("{at}.content"))?;
                let block = Block::Known(KnownBlock::ToolResult {
                    tool_use_id: id,
                    content: Some(Content::Text(text)),
                    is_error: Some(false),
                    extra: Map::new(),
                });
                self.push(Role::User, vec![block]);
            }
            "function" => {
                return Err(FrontError::unsupported(
                    format!("{at}.role"),
                    "legacy function messages are not supported; send tool messages with tool_call_id",
                ));
            }
            other => {
                return Err(FrontError::invalid(
                    format!("{at}.role"),
                    format!(
                        "unknown role {other:?}; use system, developer, user, assistant or tool"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn push(&mut self, role: Role, blocks: Vec<Block>) {
        push_message(&mut self.messages, role, blocks);
    }

    fn assistant(&mut self, m: &Map<String, Value>, at: &str) -> Result<Vec<Block>, FrontError> {
        let mut blocks = Vec::new();
        match m.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => {
                if !text.is_empty() {
                    blocks.push(text_block(text));
                }
            }
            Some(Value::Array(parts)) => {
                for (j, part) in parts.iter().enumerate() {
                    let here = format!("{at}.content[{j}]");
                    match part_type(part, &here)? {
                        "text" => {
                            let text = string_field(part, "text", &here)?;
                            if !text.is_empty() {
                                blocks.push(text_block(text));
                            }
                        }
                        "refusal" => self
                            .warnings
                            .push(format!("{here}: a refusal part was dropped")),
                        other => {
                            return Err(FrontError::invalid(
                                format!("{here}.type"),
                                format!(
                                    "assistant content parts are text or refusal, not {other:?}"
                                ),
                            ));
                        }
                    }
                }
            }
            Some(_) => {
                return Err(FrontError::invalid(
                    format!("{at}.content"),
                    "must be a string, an array of parts, or null",
                ));
            }
        }
        for field in ["refusal", "reasoning_content", "function_call", "audio"] {
            if m.get(field).is_some_and(|v| !v.is_null()) {
                self.warnings
                    .push(format!("{at}.{field} is not supported and was ignored"));
            }
        }
        match m.get("tool_calls") {
            None | Some(Value::Null) => {}
            Some(Value::Array(calls)) => {
                for (j, call) in calls.iter().enumerate() {
                    blocks.push(tool_call(call, &format!("{at}.tool_calls[{j}]"))?);
                }
            }
            Some(_) => {
                return Err(FrontError::invalid(
                    format!("{at}.tool_calls"),
                    "must be an array",
                ));
            }
        }
        Ok(blocks)
    }

    fn reasoning_effort(
        &mut self,
        req: &Map<String, Value>,
        output_config: &mut Map<String, Value>,
    ) -> Result<Option<Value>, FrontError> {
        let Some(effort) = non_null(req, "reasoning_effort") else {
            return Ok(None);
        };
        effort_to_thinking(effort, "reasoning_effort", output_config).map(Some)
    }

    fn response_format(
        &mut self,
        req: &Map<String, Value>,
        output_config: &mut Map<String, Value>,
    ) -> Result<(), FrontError> {
        let Some(format) = non_null(req, "response_format") else {
            return Ok(());
        };
        match format.get("type").and_then(Value::as_str) {
            Some("text") => {}
            Some("json_object") => self.system.push(String::from(JSON_OBJECT_INSTRUCTION)),
            Some("json_schema") => {
                let Some(schema) = format
                    .get("json_schema")
                    .and_then(|s| s.get("schema"))
                    .filter(|s| s.is_object())
                else {
                    return Err(FrontError::missing(
                        "response_format.json_schema.schema",
                        "a JSON Schema object",
                    ));
                };
                let spec = format.get("json_schema");
                output_config.insert(
                    String::from("format"),
                    crate::front::convert::schema_format(
                        schema,
                        spec.and_then(|s| s.get("name")),
                        spec.and_then(|s| s.get("strict")),
                    ),
                );
            }
            _ => {
                return Err(FrontError::invalid(
                    "response_format.type",
                    "one of text, json_object, json_schema",
                ));
            }
        }
        Ok(())
    }

    fn tools(&mut self, req: &Map<String, Value>) -> Result<Option<Vec<Tool>>, FrontError> {
        let Some(tools) = non_null(req, "tools") else {
            return Ok(None);
        };
        let Value::Array(tools) = tools else {
            return Err(FrontError::invalid("tools", "must be an array"));
        };
        let mut out = Vec::with_capacity(tools.len());
        for (i, tool) in tools.iter().enumerate() {
            let at = format!("tools[{i}]");
            if tool.get("type").and_then(Value::as_str) != Some("function") {
                self.warnings.push(format!(
                    "{at}: only function tools are supported; this one was dropped"
                ));
                continue;
            }
            let Some(function) = tool.get("function").filter(|f| f.is_object()) else {
                return Err(FrontError::missing(
                    format!("{at}.function"),
                    "an object with name and parameters",
                ));
            };
            let name = string_field(function, "name", &format!("{at}.function"))?;
            if name.is_empty() {
                return Err(FrontError::invalid(
                    format!("{at}.function.name"),
                    "must not be empty",
                ));
            }
            let description = match function.get("description") {
                None | Some(Value::Null) => None,
                Some(Value::String(d)) => Some(d.clone()),
                Some(_) => {
                    return Err(FrontError::invalid(
                        format!("{at}.function.description"),
                        "must be a string",
                    ));
                }
            };
            let schema = match function.get("parameters") {
                None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
                Some(p @ Value::Object(_)) => p.clone(),
                Some(_) => {
                    return Err(FrontError::invalid(
                        format!("{at}.function.parameters"),
                        "must be a JSON Schema object",
                    ));
                }
            };
            out.push(Tool {
                name: name.to_owned(),
                description: description.map(crate::json_string::JsonString::new),
                input_schema: Some(ToolSchema::from_value(&schema)),
                kind: None,
                extra: Map::new(),
            });
        }
        Ok(Some(out))
    }
}

fn tool_call(call: &Value, at: &str) -> Result<Block, FrontError> {
    if !call.is_object() {
        return Err(FrontError::invalid(at, "each tool call must be an object"));
    }
    match call.get("type").and_then(Value::as_str) {
        None | Some("function") => {}
        Some(other) => {
            return Err(FrontError::unsupported(
                format!("{at}.type"),
                format!("only function tool calls are supported, not {other:?}"),
            ));
        }
    }
    let id = string_field(call, "id", at)?;
    let Some(function) = call.get("function").filter(|f| f.is_object()) else {
        return Err(FrontError::missing(
            format!("{at}.function"),
            "an object with name and arguments",
        ));
    };
    let name = string_field(function, "name", &format!("{at}.function"))?;
    let input = arguments_object(
        function.get("arguments"),
        &format!("{at}.function.arguments"),
    )?;
    Ok(Block::Known(KnownBlock::ToolUse {
        id: id.to_owned(),
        name: name.to_owned(),
        input,
        extra: Map::new(),
    }))
}

fn tool_choice(req: &Map<String, Value>, have_tools: bool) -> Result<Option<Value>, FrontError> {
    let parallel = match non_null(req, "parallel_tool_calls") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(FrontError::invalid(
                "parallel_tool_calls",
                "must be a boolean",
            ));
        }
    };
    let mut choice = match non_null(req, "tool_choice") {
        None => json!({"type": "auto"}),
        Some(Value::String(s)) => match s.as_str() {
            "none" => return Ok(have_tools.then(|| json!({"type": "none"}))),
            "auto" => json!({"type": "auto"}),
            "required" => json!({"type": "any"}),
            other => {
                return Err(FrontError::invalid(
                    "tool_choice",
                    format!("unknown value {other:?}; use none, auto, required or a function"),
                ));
            }
        },
        Some(Value::Object(o)) => match o.get("type").and_then(Value::as_str) {
            Some("function") => {
                let Some(name) = o
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                else {
                    return Err(FrontError::missing(
                        "tool_choice.function.name",
                        "the name of the function to call",
                    ));
                };
                json!({"type": "tool", "name": name})
            }
            Some("allowed_tools") => {
                match o
                    .get("allowed_tools")
                    .and_then(|a| a.get("mode"))
                    .and_then(Value::as_str)
                {
                    Some("required") => json!({"type": "any"}),
                    _ => json!({"type": "auto"}),
                }
            }
            _ => {
                return Err(FrontError::invalid(
                    "tool_choice.type",
                    "function or allowed_tools",
                ));
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
    Ok((!plain_auto || non_null(req, "tool_choice").is_some()).then_some(choice))
}

fn stop(req: &Map<String, Value>) -> Result<Option<Vec<String>>, FrontError> {
    match non_null(req, "stop") {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(vec![s.clone()])),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| FrontError::invalid(format!("stop[{i}]"), "must be a string"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(FrontError::invalid(
            "stop",
            "must be a string or an array of strings",
        )),
    }
}

fn user_content(content: Option<&Value>, at: &str) -> Result<Vec<Block>, FrontError> {
    match content {
        Some(Value::String(text)) => Ok(vec![text_block(text)]),
        Some(Value::Array(parts)) => {
            let mut blocks = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                let here = format!("{at}[{j}]");
                blocks.push(match part_type(part, &here)? {
                    "text" => text_block(string_field(part, "text", &here)?),
                    "image_url" => image_block(part, &here)?,
                    "file" => file_block(part, &here)?,
                    "input_audio" => {
                        return Err(FrontError::unsupported(
                            here,
                            "audio input is not supported by the bridge",
                        ));
                    }
                    other => {
                        return Err(FrontError::invalid(
                            format!("{here}.type"),
                            format!(
                                "unknown content part type {other:?}; use text, image_url or file"
                            ),
                        ));
                    }
                });
            }
            Ok(blocks)
        }
        None | Some(Value::Null) => Err(FrontError::missing(at, "the user's text or parts")),
        Some(_) => Err(FrontError::invalid(
            at,
            "must be a string or an array of parts",
        )),
    }
}

fn image_block(part: &Value, at: &str) -> Result<Block, FrontError> {
    let url = match part.get("image_url") {
        Some(Value::Object(o)) => o.get("url").and_then(Value::as_str),
        Some(Value::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let Some(url) = url.filter(|u| !u.is_empty()) else {
        return Err(FrontError::missing(
            format!("{at}.image_url.url"),
            "an https URL or a data:image/…;base64,… URL",
        ));
    };
    let source = image_source(url, &format!("{at}.image_url.url"))?;
    Ok(Block::Known(KnownBlock::Image {
        source,
        extra: Map::new(),
    }))
}

fn file_block(part: &Value, at: &str) -> Result<Block, FrontError> {
    let file = part.get("file");
    let data = file
        .and_then(|f| f.get("file_data"))
        .and_then(Value::as_str);
    let Some(data) = data else {
        return Err(FrontError::unsupported(
            format!("{at}.file"),
            "only inline files (file_data as a data: URL) are supported, not file_id",
        ));
    };
    let (media_type, data) = data_url(data).ok_or_else(|| {
        FrontError::invalid(
            format!("{at}.file.file_data"),
            "must be a data URL like data:application/pdf;base64,<data>",
        )
    })?;
    let mut extra = Map::new();
    if let Some(name) = file.and_then(|f| f.get("filename")).and_then(Value::as_str) {
        extra.insert(String::from("title"), json!(name));
    }
    Ok(Block::Known(KnownBlock::Document {
        source: json!({"type": "base64", "media_type": media_type, "data": data}),
        extra,
    }))
}

/// A string, or text parts joined (system, developer and tool messages).
fn text_content(content: Option<&Value>, at: &str) -> Result<String, FrontError> {
    match content {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                let here = format!("{at}[{j}]");
                match part_type(part, &here)? {
                    "text" => texts.push(string_field(part, "text", &here)?),
                    other => {
                        return Err(FrontError::invalid(
                            format!("{here}.type"),
                            format!("only text parts are allowed here, not {other:?}"),
                        ));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        None | Some(Value::Null) => Err(FrontError::missing(at, "a string or text parts")),
        Some(_) => Err(FrontError::invalid(
            at,
            "must be a string or an array of text parts",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(body: Value) -> Value {
        let front = chat_to_anthropic(body.to_string().as_bytes()).unwrap();
        serde_json::from_str(&front.body()).unwrap()
    }

    fn refuse(body: Value) -> FrontError {
        chat_to_anthropic(body.to_string().as_bytes()).unwrap_err()
    }

    #[test]
    fn a_plain_turn_maps_field_by_field() {
        let out = convert(json!({
            "model": "gpt-x", "max_tokens": 99, "temperature": 0.2, "top_p": 0.9,
            "stop": "END", "user": "u-1", "stream": true,
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "system", "content": [{"type": "text", "text": "Be kind."}]},
                {"role": "user", "content": "hi"}
            ]
        }));
        assert_eq!(
            out,
            json!({
                "model": "gpt-x", "max_tokens": 99,
                "messages": [{"role": "user", "content": "hi"}],
                "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
                "stop_sequences": ["END"], "temperature": 0.2, "top_p": 0.9, "stream": true,
                "metadata": {"user_id": "u-1"}
            })
        );
    }

    #[test]
    fn max_completion_tokens_wins_and_none_is_invented() {
        let both = convert(
            json!({"model": "m", "max_tokens": 5, "max_completion_tokens": 7,
            "messages": [{"role": "user", "content": "x"}]}),
        );
        assert_eq!(both["max_tokens"], 7);
        let none = convert(json!({"model": "m", "messages": [{"role": "user", "content": "x"}]}));
        assert!(none.get("max_tokens").is_none(), "{none}");
        assert_eq!(none["stream"], false);
    }

    #[test]
    fn mid_conversation_system_becomes_user_text_in_place() {
        let out = convert(json!({"model": "m", "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "ok"},
            {"role": "developer", "content": "switch to French"},
            {"role": "user", "content": "b"}
        ]}));
        assert!(out.get("system").is_none());
        assert_eq!(
            out["messages"][2],
            json!({"role": "user", "content": [
                {"type": "text", "text": "switch to French"}, {"type": "text", "text": "b"}]})
        );
        assert_eq!(out["messages"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn images_become_base64_or_url_sources() {
        let out = convert(
            json!({"model": "m", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "high"}},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.jpg"}}
            ]}]}),
        );
        assert_eq!(
            out["messages"][0]["content"],
            json!([
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://x.test/a.jpg"}}
            ])
        );
        let bad = refuse(
            json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png,AAAA"}}]}]}),
        );
        assert_eq!(bad.param(), Some("messages[0].content[0].image_url.url"));
    }

    #[test]
    fn tool_round_trip_merges_results_and_the_next_user_text() {
        let out = convert(json!({"model": "m", "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "w", "arguments": "{\"c\":\"Oslo\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "w", "arguments": ""}}
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": "rain"},
            {"role": "tool", "tool_call_id": "call_b", "content": [{"type": "text", "text": "sun"}]},
            {"role": "user", "content": "thanks"}
        ]}));
        assert_eq!(
            out["messages"][1]["content"],
            json!([
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "call_a", "name": "w", "input": {"c": "Oslo"}},
                {"type": "tool_use", "id": "call_b", "name": "w", "input": {}}
            ])
        );
        assert_eq!(
            out["messages"][2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "rain", "is_error": false},
                {"type": "tool_result", "tool_use_id": "call_b", "content": "sun", "is_error": false},
                {"type": "text", "text": "thanks"}
            ]})
        );
        assert_eq!(out["messages"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn unparseable_arguments_name_the_field() {
        let err = refuse(json!({"model": "m", "messages": [
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "w", "arguments": "{\"c\":"}}]}]}));
        assert_eq!(
            err.param(),
            Some("messages[0].tool_calls[0].function.arguments")
        );
        assert!(err.to_string().contains("not valid JSON"), "{err}");
        let array = refuse(json!({"model": "m", "messages": [
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "w", "arguments": "[1]"}}]}]}));
        assert_eq!(array.code(), "invalid_value");
    }

    #[test]
    fn tools_and_choices() {
        let base = json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "f", "description": "d"}},
                      {"type": "web_search"}]});
        let with = |extra: Value| {
            let mut body = base.clone();
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            convert(body)
        };
        let out = with(json!({}));
        assert_eq!(
            out["tools"],
            json!([{"name": "f", "description": "d", "input_schema": {"type": "object", "properties": {}}}])
        );
        assert!(out.get("tool_choice").is_none());
        assert_eq!(
            with(json!({"tool_choice": "none"}))["tool_choice"],
            json!({"type": "none"})
        );
        assert_eq!(
            with(json!({"tool_choice": "auto"}))["tool_choice"],
            json!({"type": "auto"})
        );
        assert_eq!(
            with(json!({"tool_choice": {"type": "function", "function": {"name": "f"}}}))["tool_choice"],
            json!({"type": "tool", "name": "f"})
        );
        assert_eq!(
            with(json!({"parallel_tool_calls": false}))["tool_choice"],
            json!({"type": "auto", "disable_parallel_tool_use": true})
        );
        let front = chat_to_anthropic(base.to_string().as_bytes()).unwrap();
        assert!(front.warnings.iter().any(|w| w.contains("tools[1]")));
        // No tools: no tool_choice (Anthropic refuses one without tools).
        let bare = convert(json!({"model": "m", "tool_choice": "required",
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(bare.get("tool_choice").is_none());
    }

    #[test]
    fn effort_inverts_the_reverse_mapping() {
        let effort = |e: &str| {
            convert(json!({"model": "m", "reasoning_effort": e,
                "messages": [{"role": "user", "content": "x"}]}))
        };
        let high = effort("high");
        assert_eq!(high["thinking"], json!({"type": "adaptive"}));
        assert_eq!(high["output_config"], json!({"effort": "high"}));
        // The reverse direction reads these back as the same effort.
        for (sent, back) in [
            ("low", "low"),
            ("minimal", "low"),
            ("medium", "medium"),
            ("high", "high"),
        ] {
            let out = effort(sent);
            assert_eq!(
                crate::translate::chat_request::effort_level(
                    out.get("thinking"),
                    out.get("output_config")
                ),
                Some(back)
            );
        }
        assert_eq!(effort("none")["thinking"], json!({"type": "disabled"}));
        assert_eq!(
            refuse(json!({"model": "m", "reasoning_effort": "max",
                "messages": [{"role": "user", "content": "x"}]}))
            .param(),
            Some("reasoning_effort")
        );
    }

    #[test]
    fn response_formats() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let out = convert(
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}}),
        );
        // The schema's name (and strict, when given) stay for an OpenAI upstream.
        assert_eq!(
            out["output_config"]["format"],
            json!({"type": "json_schema", "schema": schema, "name": "r"})
        );
        let strict = convert(
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "r", "strict": true, "schema": schema}}}),
        );
        assert_eq!(strict["output_config"]["format"]["strict"], true);
        let obj = convert(
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_object"}}),
        );
        assert_eq!(obj["system"], JSON_OBJECT_INSTRUCTION);
    }

    #[test]
    fn refusals_name_the_field() {
        let user = json!([{"role": "user", "content": "x"}]);
        for (body, param) in [
            (json!({"messages": user}), "model"),
            (json!({"model": "m"}), "messages"),
            (json!({"model": "m", "messages": []}), "messages"),
            (json!({"model": "m", "messages": user, "n": 3}), "n"),
            (
                json!({"model": "m", "messages": user, "stop": [1]}),
                "stop[0]",
            ),
            (
                json!({"model": "m", "messages": user, "max_tokens": -1}),
                "max_tokens",
            ),
            (
                json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}),
                "messages[0].tool_call_id",
            ),
            (
                json!({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}),
                "messages[0].role",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": [
                {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]}),
                "messages[0].content[0]",
            ),
        ] {
            let err = refuse(body);
            assert_eq!(err.param(), Some(param), "{err}");
            assert!(err.envelope().contains("invalid_request_error"));
        }
        assert!(matches!(
            chat_to_anthropic(b"{nope").unwrap_err(),
            FrontError::Json(_)
        ));
    }

    #[test]
    fn stream_options_are_read_for_the_encoder() {
        let front = chat_to_anthropic(
            br#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}],"seed":3}"#,
        )
        .unwrap();
        assert!(front.stream && front.include_usage);
        assert_eq!(front.request.stream, Some(true));
        assert!(front.warnings.iter().any(|w| w.starts_with("seed")));
    }
}
