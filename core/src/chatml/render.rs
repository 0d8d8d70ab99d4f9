//! Anthropic Messages request → one ChatML prompt, for backends that take raw text (Fabstir host
//! nodes).
//!
//! A Fabstir host strips the `<|im_start|>role` / `<|im_end|>` markers and re-wraps the text in
//! its own chat template, so the framing is a transport convention and everything the model must
//! know has to be plain in the text: tool definitions and the exact call format go into the
//! system turn, earlier tool calls are written in that same format, and tool results come back in
//! `<tool_response>` blocks. Images travel beside the prompt (`{data, format}`).
//!
//! ```
//! use bridge_core::chatml::render::{render, ChatmlOptions};
//! let req = br#"{"model":"claude-x","max_tokens":99,"system":"Be brief.","messages":[{"role":"user","content":"hi"}]}"#;
//! let out = render(req, &ChatmlOptions::default()).unwrap();
//! assert_eq!(out.prompt, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
//! assert_eq!(out.max_tokens, Some(99));
//! ```
//!
//! What plain text cannot carry is dropped here and named in `warnings`: earlier thinking,
//! `cache_control`, `top_p`/`top_k`, `stop_sequences`, images given by URL, documents.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::anthropic::request::system_text;
use crate::anthropic::request::{
    Block, Content, ImageSource, InputMessage, KnownBlock, MessagesRequest, Role, Tool,
};
use crate::anthropic::tool_schema::ToolSchema;
use crate::chatml::tool_calls::ToolHint;
use crate::error::RequestError;
use crate::tokens::estimate_text;

/// The call format the system turn asks the model for (the parser reads every format anyway).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolFormat {
    /// `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Hermes, Qwen, most models).
    #[default]
    Json,
    /// `<tool_call>Name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>` (GLM).
    Glm,
}

/// How to render.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatmlOptions {
    /// The model to run (e.g. `org/repo:file.gguf`); `None` keeps the client's name.
    pub model: Option<String>,
    /// Upper bound for `max_tokens`.
    pub max_tokens_cap: Option<u64>,
    /// The tool-call format to ask for.
    pub tool_format: ToolFormat,
    /// Require `max_tokens` as `/v1/messages` does.
    pub require_max_tokens: bool,
}

impl Default for ChatmlOptions {
    fn default() -> Self {
        Self {
            model: None,
            max_tokens_cap: None,
            tool_format: ToolFormat::Json,
            require_max_tokens: true,
        }
    }
}

/// An image taken out of the conversation, as a Fabstir host takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptImage {
    /// Base64 data.
    pub data: String,
    /// `png`, `jpeg`, `gif`, `webp`.
    pub format: String,
}

/// The rendered prompt and what the host and the reply translator need with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatmlPrompt {
    /// The ChatML text, ending with `<|im_start|>assistant\n` (or an assistant prefill).
    pub prompt: String,
    /// Images in the order they appeared.
    pub images: Vec<PromptImage>,
    /// The model to run.
    pub upstream_model: String,
    /// The model the client asked for.
    pub client_model: String,
    /// Whether the client wants SSE.
    pub client_stream: bool,
    /// `max_tokens` to forward (capped).
    pub max_tokens: Option<u64>,
    /// `temperature` to forward.
    pub temperature: Option<f64>,
    /// Estimated prompt tokens.
    pub input_tokens_estimate: u32,
    /// The offered tools, for the reply's tool-call parser.
    pub tools: Vec<ToolHint>,
    /// What could not be expressed.
    pub warnings: Vec<String>,
}

/// Render an Anthropic request as a ChatML prompt.
///
/// # Errors
/// [`RequestError`] when the request lacks what the Messages API requires.
pub fn render(request: &[u8], options: &ChatmlOptions) -> Result<ChatmlPrompt, RequestError> {
    let (req, warnings) =
        crate::anthropic::fields::read_for_translation(request, options.require_max_tokens)?;
    let mut r = Renderer {
        format: options.tool_format,
        prompt: String::new(),
        images: Vec::new(),
        warnings,
        dropped_thinking: false,
    };

    let offered: Vec<&Tool> = offered_tools(&req, &mut r.warnings);
    let mut system = req
        .system
        .as_ref()
        .map(|s| system_text(s, &mut r.warnings))
        .unwrap_or_default();
    let instructions = tool_instructions(&offered, req.tool_choice.as_ref(), options.tool_format);
    if !instructions.is_empty() {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str(&instructions);
    }
    if !system.is_empty() {
        r.turn("system", &system);
    }

    let last = req.messages.len().saturating_sub(1);
    for (i, message) in req.messages.iter().enumerate() {
        let prefill = i == last && message.role == Role::Assistant;
        r.message(i, message, prefill);
    }
    if req
        .messages
        .last()
        .is_none_or(|m| m.role != Role::Assistant)
    {
        r.prompt.push_str("<|im_start|>assistant\n");
    }

    for (present, what) in [
        (req.top_p.is_some(), "top_p"),
        (req.top_k.is_some(), "top_k"),
        (req.stop_sequences.is_some(), "stop_sequences"),
    ] {
        if present {
            r.warnings
                .push(format!("{what} dropped: the host does not take it"));
        }
    }
    if r.dropped_thinking {
        r.warnings
            .push(String::from("earlier thinking blocks are not sent back"));
    }
    let tools = offered
        .iter()
        .map(|t| {
            let schema = t.input_schema.as_ref().map(ToolSchema::to_value);
            ToolHint::from_schema(&t.name, schema.as_ref())
        })
        .collect();
    let max_tokens = req
        .max_tokens
        .map(|m| options.max_tokens_cap.map_or(m, |cap| m.min(cap)));
    Ok(ChatmlPrompt {
        input_tokens_estimate: estimate_text(r.prompt.len()).max(1),
        prompt: r.prompt,
        images: r.images,
        upstream_model: options.model.clone().unwrap_or_else(|| req.model.clone()),
        client_model: req.model.clone(),
        client_stream: req.stream.unwrap_or(false),
        max_tokens,
        temperature: req.temperature,
        tools,
        warnings: r.warnings,
    })
}

/// Tools the model can call: those with an input schema (server tools have none).
fn offered_tools<'a>(req: &'a MessagesRequest, warnings: &mut Vec<String>) -> Vec<&'a Tool> {
    let none = req
        .tool_choice
        .as_ref()
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        == Some("none");
    let mut offered = Vec::new();
    for tool in req.tools.iter().flatten() {
        if tool.input_schema.is_none() || tool.name.is_empty() {
            warnings.push(format!(
                "tool {:?} dropped: a server tool without an input schema",
                tool.name
            ));
        } else if !none {
            offered.push(tool);
        }
    }
    offered
}

fn tool_instructions(tools: &[&Tool], choice: Option<&Value>, format: ToolFormat) -> String {
    if tools.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# Tools\n\nYou can call tools to help with the user's request. Their definitions, as JSON schemas:\n<tools>\n",
    );
    for tool in tools {
        let mut def = serde_json::Map::new();
        def.insert("name".into(), Value::String(tool.name.clone()));
        if let Some(description) = &tool.description {
            def.insert(
                "description".into(),
                Value::String(description.text().into_owned()),
            );
        }
        def.insert(
            "parameters".into(),
            tool.input_schema
                .as_ref()
                .map_or_else(|| json!({}), ToolSchema::to_value),
        );
        out.push_str(&Value::Object(def).to_string());
        out.push('\n');
    }
    out.push_str("</tools>\n\nTo call a tool, write one block per call, in exactly this form:\n");
    match format {
        ToolFormat::Json => out.push_str(
            "<tool_call>\n{\"name\": \"<tool name>\", \"arguments\": {\"<parameter>\": <value>}}\n</tool_call>\nThe arguments are one JSON object that matches the tool's schema.",
        ),
        ToolFormat::Glm => out.push_str(
            "<tool_call><tool name><arg_key><parameter></arg_key><arg_value><value></arg_value></tool_call>\nRepeat <arg_key>…</arg_key><arg_value>…</arg_value> for each parameter; write non-string values as JSON.",
        ),
    }
    out.push_str(
        " You may call several tools in one reply. After your calls, stop: each result comes back to you inside <tool_response></tool_response>.",
    );
    match choice.and_then(|c| c.get("type")).and_then(Value::as_str) {
        Some("any") => out.push_str("\nYou must call at least one tool in this reply."),
        Some("tool") => {
            if let Some(name) = choice.and_then(|c| c.get("name")).and_then(Value::as_str) {
                out.push_str(&format!("\nYou must call the tool {name} in this reply."));
            }
        }
        _ => {}
    }
    out
}

struct Renderer {
    format: ToolFormat,
    prompt: String,
    images: Vec<PromptImage>,
    warnings: Vec<String>,
    dropped_thinking: bool,
}

impl Renderer {
    fn turn(&mut self, role: &str, text: &str) {
        self.prompt.push_str("<|im_start|>");
        self.prompt.push_str(role);
        self.prompt.push('\n');
        self.prompt.push_str(text);
        self.prompt.push_str("<|im_end|>\n");
    }

    fn message(&mut self, position: usize, message: &InputMessage, prefill: bool) {
        let role = match &message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Other(other) => {
                self.warnings.push(format!(
                    "messages.{position}: unknown role {other:?} sent as user"
                ));
                "user"
            }
        };
        let text = match &message.content {
            Content::Text(text) => text.clone(),
            Content::Blocks(blocks) => self.blocks_text(blocks),
        };
        if prefill {
            // The model continues the client's partial answer.
            self.prompt.push_str("<|im_start|>assistant\n");
            self.prompt.push_str(&text);
        } else {
            self.turn(role, &text);
        }
    }

    /// The text of a turn's blocks, whoever wrote them: text, earlier calls and results in the
    /// asked format, images taken out (a note left for those that cannot travel).
    fn blocks_text(&mut self, blocks: &[Block]) -> String {
        let mut parts: Vec<String> = Vec::new();
        for block in blocks {
            match block {
                Block::Known(KnownBlock::Text { text, .. }) => parts.push(text.clone()),
                Block::Known(KnownBlock::Image { source, .. }) => {
                    if let Some(note) = self.image(source) {
                        parts.push(note);
                    }
                }
                Block::Known(KnownBlock::ToolResult {
                    content, is_error, ..
                }) => {
                    let mut text = String::new();
                    if *is_error == Some(true) {
                        text.push_str("Error: ");
                    }
                    match content {
                        Some(Content::Text(t)) => text.push_str(t),
                        Some(Content::Blocks(inner)) => text.push_str(&self.blocks_text(inner)),
                        None => {}
                    }
                    parts.push(format!("<tool_response>\n{text}\n</tool_response>"));
                }
                Block::Known(KnownBlock::Document { source, extra }) => {
                    match crate::anthropic::request::inline_document(source, extra) {
                        Some(text) => parts.push(text),
                        None => {
                            self.warnings.push(String::from(
                                "document dropped: the host takes text and images only",
                            ));
                            parts.push(String::from(
                                "[a document was attached here; this model cannot read documents]",
                            ));
                        }
                    }
                }
                Block::Known(KnownBlock::Thinking { .. } | KnownBlock::RedactedThinking { .. }) => {
                    self.dropped_thinking = true;
                }
                Block::Known(KnownBlock::ToolUse { name, input, .. }) => {
                    parts.push(self.call_text(name, input));
                }
                Block::Other(value) => {
                    let kind = value.get("type").and_then(Value::as_str).unwrap_or("?");
                    self.warnings
                        .push(format!("content block of type {kind:?} dropped"));
                }
            }
        }
        parts.join("\n")
    }

    /// An earlier call, written the way the model is asked to write calls.
    fn call_text(&self, name: &str, input: &Value) -> String {
        match self.format {
            ToolFormat::Json => format!(
                "<tool_call>\n{}\n</tool_call>",
                json!({"name": name, "arguments": input})
            ),
            ToolFormat::Glm => {
                let mut out = format!("<tool_call>{name}");
                if let Some(args) = input.as_object() {
                    for (key, value) in args {
                        let value = match value {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        out.push_str(&format!(
                            "<arg_key>{key}</arg_key><arg_value>{value}</arg_value>"
                        ));
                    }
                }
                out.push_str("</tool_call>");
                out
            }
        }
    }

    /// Take an image out of the text; returns a note for the text when it cannot travel.
    fn image(&mut self, source: &ImageSource) -> Option<String> {
        match source {
            ImageSource::Base64 { media_type, data } => {
                let format = media_type
                    .strip_prefix("image/")
                    .unwrap_or(media_type)
                    .to_owned();
                self.images.push(PromptImage {
                    data: data.clone(),
                    format,
                });
                None
            }
            ImageSource::Url { url } => {
                self.warnings.push(String::from(
                    "image given by URL dropped: the host takes image data only",
                ));
                Some(format!("[image: {url}]"))
            }
            ImageSource::Other(_) => {
                self.warnings
                    .push(String::from("image with an unknown source dropped"));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_json(value: &Value, options: &ChatmlOptions) -> ChatmlPrompt {
        render(value.to_string().as_bytes(), options).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_tool_round_trip_renders_calls_and_results_in_the_asked_format() {
        let req = json!({
            "model": "claude-x", "max_tokens": 100000, "temperature": 0.2,
            "system": [{"type": "text", "text": "x-anthropic-billing-header: cc"}, {"type": "text", "text": "You are Claude Code."}],
            "tools": [{"name": "Bash", "description": "Run", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}},
                      {"type": "web_search_20250305", "name": "web_search"}],
            "messages": [
                {"role": "user", "content": "list files"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": ""}, {"type": "text", "text": "Sure."}, {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt", "is_error": false}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}]}
            ]
        });
        let options = ChatmlOptions {
            model: Some("org/repo:file.gguf".into()),
            max_tokens_cap: Some(8192),
            ..ChatmlOptions::default()
        };
        let out = render_json(&req, &options);
        assert!(
            out.prompt
                .starts_with("<|im_start|>system\nYou are Claude Code.\n\n# Tools\n"),
            "{}",
            out.prompt
        );
        assert!(
            out.prompt
                .contains("{\"name\":\"Bash\",\"description\":\"Run\",\"parameters\":")
        );
        assert!(!out.prompt.contains("web_search"));
        assert!(out.prompt.contains("<|im_start|>assistant\nSure.\n<tool_call>\n{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}\n</tool_call><|im_end|>\n"));
        assert!(
            out.prompt
                .contains("<|im_start|>user\n<tool_response>\na.txt\n</tool_response><|im_end|>\n")
        );
        assert!(out.prompt.ends_with("<|im_start|>assistant\n"));
        assert!(!out.prompt.contains("hmm"));
        assert_eq!(
            out.images,
            vec![PromptImage {
                data: "iVBOR".into(),
                format: "png".into()
            }]
        );
        assert_eq!((out.max_tokens, out.temperature), (Some(8192), Some(0.2)));
        assert_eq!(out.upstream_model, "org/repo:file.gguf");
        assert_eq!(
            out.tools,
            vec![ToolHint {
                name: "Bash".into(),
                string_params: vec!["command".into()]
            }]
        );
        assert_eq!(out.warnings.len(), 2, "{:?}", out.warnings);

        let glm = render_json(
            &req,
            &ChatmlOptions {
                tool_format: ToolFormat::Glm,
                ..options
            },
        );
        assert!(glm.prompt.contains(
            "<tool_call>Bash<arg_key>command</arg_key><arg_value>ls</arg_value></tool_call>"
        ));
    }

    #[test]
    fn prefill_and_mid_conversation_system_and_errors() {
        let req = json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "q"},
            {"role": "system", "content": "be terse"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": true, "content": [{"type": "text", "text": "boom"}]}]},
            {"role": "assistant", "content": "The answer is"}
        ]});
        let out = render_json(&req, &ChatmlOptions::default());
        assert_eq!(
            out.prompt,
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>system\nbe terse<|im_end|>\n<|im_start|>user\n(result of tool call t, which is not in this conversation)\nboom<|im_end|>\n<|im_start|>assistant\nThe answer is",
            "a result whose call is not in the conversation is repaired into text"
        );
        assert!(
            out.warnings.iter().any(|w| w.contains("tool_result t")),
            "{:?}",
            out.warnings
        );
        let answered = json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "x"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": true, "content": [{"type": "text", "text": "boom"}]}]}
        ]});
        let out = render_json(&answered, &ChatmlOptions::default());
        assert!(
            out.prompt.ends_with("<|im_start|>user\n<tool_response>\nError: boom\n</tool_response><|im_end|>\n<|im_start|>assistant\n"),
            "{}",
            out.prompt
        );
        assert!(render(br#"{"model":"m","messages":[]}"#, &ChatmlOptions::default()).is_err());
    }

    #[test]
    fn tool_choice_shapes_the_instructions() {
        let base = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "q"}],
            "tools": [{"name": "Bash", "input_schema": {"type": "object"}}]});
        let with = |choice: Value| {
            let mut req = base.clone();
            req["tool_choice"] = choice;
            render_json(&req, &ChatmlOptions::default()).prompt
        };
        assert!(with(json!({"type": "any"})).contains("You must call at least one tool"));
        assert!(
            with(json!({"type": "tool", "name": "Bash"})).contains("You must call the tool Bash")
        );
        assert!(!with(json!({"type": "none"})).contains("<tools>"));
        assert!(with(json!({"type": "auto"})).contains("<tools>"));
    }
}
