//! AG-UI's `RunAgentInput` (the body a client POSTs to start a run) and the Claude Code stdin
//! message made from it.
//!
//! An AG-UI client sends the whole conversation on every run; Claude Code keeps its own session,
//! so only what the run adds is sent: the messages after the last assistant message
//! ([`new_messages`]). [`to_claude_user_message`] makes them one stream-json `user` line:
//!
//! 1. tool messages as `tool_result` blocks (the Messages API wants them first), except the
//!    ids the host routes itself ([`InputOptions::exclude_tool_call_ids`]: results of pending
//!    frontend tool calls, which answer an MCP call instead, see [`tool_results`]);
//! 2. the app's readable context, as one text block (`Context from the app:\n- <description>: <value>`);
//! 3. the app's frontend tools, as one text block naming them as MCP tools
//!    (`mcp__<server>__<name>`: the host serves them to Claude Code over MCP);
//! 4. system and developer messages as text blocks (`Instructions from the app:\n…`), and user
//!    messages as text, image and document blocks, in order.
//!
//! Parsing is tolerant: unknown fields are ignored, and a message with an unknown role (or a
//! malformed known one) or an unknown content part is kept as JSON and skipped when converting.
//!
//! ```
//! use bridge_core::agui::input::{to_claude_user_message, InputOptions, RunAgentInput};
//! let body = r#"{"threadId":"t","runId":"r","state":{},"tools":[],"context":[],"forwardedProps":{},
//!   "messages":[{"id":"1","role":"user","content":"Hello"},{"id":"2","role":"assistant","content":"Hi!"},
//!               {"id":"3","role":"user","content":"List files"}]}"#;
//! let input: RunAgentInput = serde_json::from_str(body).unwrap();
//! let line = to_claude_user_message(&input, &InputOptions::default()).unwrap();
//! assert_eq!(line["message"]["content"][0]["text"], "List files");
//! assert_eq!(line["session_id"], "default");
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The body of an AG-UI run request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The conversation.
    pub thread_id: String,
    /// This run.
    pub run_id: String,
    /// The run that started this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The agent's state as the client knows it.
    #[serde(default)]
    pub state: Value,
    /// The whole conversation.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Tools the frontend executes.
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// Readable context the app shares with the agent.
    #[serde(default)]
    pub context: Vec<Context>,
    /// Anything else the client forwards.
    #[serde(default)]
    pub forwarded_props: Value,
    /// Answers to interrupts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<Value>>,
}

/// A tool the frontend executes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Its arguments' JSON Schema.
    #[serde(default)]
    pub parameters: Value,
}

/// A piece of readable context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    /// What it is.
    #[serde(default)]
    pub description: String,
    /// Its value.
    #[serde(default)]
    pub value: String,
}

/// A conversation message, by `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// `developer`: instructions.
    Developer(TextMessage),
    /// `system`: instructions.
    System(TextMessage),
    /// `user`.
    User(UserMessage),
    /// `assistant`: text and tool calls.
    Assistant(AssistantMessage),
    /// `tool`: a tool call's result.
    Tool(ToolMessage),
    /// `reasoning`.
    Reasoning(ReasoningMessage),
    /// `activity`: app-defined progress.
    Activity(ActivityMessage),
    /// A role this module does not know, or a known role in a shape it cannot read.
    #[serde(untagged)]
    Unknown(Value),
}

impl Message {
    /// The message's `id` (empty when missing).
    #[must_use]
    pub fn id(&self) -> &str {
        match self {
            Self::Developer(m) | Self::System(m) => &m.id,
            Self::User(m) => &m.id,
            Self::Assistant(m) => &m.id,
            Self::Tool(m) => &m.id,
            Self::Reasoning(m) => &m.id,
            Self::Activity(m) => &m.id,
            Self::Unknown(v) => v.get("id").and_then(Value::as_str).unwrap_or_default(),
        }
    }
}

/// A `developer` or `system` message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextMessage {
    /// The message.
    #[serde(default)]
    pub id: String,
    /// The text.
    #[serde(default)]
    pub content: String,
    /// The author's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A `user` message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// The message.
    #[serde(default)]
    pub id: String,
    /// Text, or parts.
    pub content: Content,
    /// The author's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// An `assistant` message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// The message.
    #[serde(default)]
    pub id: String,
    /// The text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The author's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A tool call of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call.
    pub id: String,
    /// `function`.
    #[serde(default, rename = "type")]
    pub kind: String,
    /// The tool and its arguments.
    pub function: FunctionCall,
    /// An opaque value to send back (a signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
}

/// The tool and arguments of a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool.
    pub name: String,
    /// The arguments' JSON text.
    #[serde(default)]
    pub arguments: String,
}

/// A `tool` message: the result of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolMessage {
    /// The message.
    #[serde(default)]
    pub id: String,
    /// The result (a string; AG-UI 1.0 also allows parts).
    pub content: Content,
    /// The call it answers.
    pub tool_call_id: String,
    /// Set when the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A `reasoning` message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessage {
    /// The message.
    #[serde(default)]
    pub id: String,
    /// The reasoning text.
    #[serde(default)]
    pub content: String,
    /// An opaque value to send back (a signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
}

/// An `activity` message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityMessage {
    /// The message.
    #[serde(default)]
    pub id: String,
    /// The kind of activity.
    #[serde(default)]
    pub activity_type: String,
    /// Its content.
    #[serde(default)]
    pub content: Value,
}

/// A message's content: a string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Parts.
    Parts(Vec<InputContent>),
}

/// A part of a message's content, by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum InputContent {
    /// `{type:"text", text}`.
    Text {
        /// The text.
        text: String,
    },
    /// `{type:"image", source}`.
    Image {
        /// Where the bytes are.
        source: InputSource,
    },
    /// `{type:"audio", source}`.
    Audio {
        /// Where the bytes are.
        source: InputSource,
    },
    /// `{type:"video", source}`.
    Video {
        /// Where the bytes are.
        source: InputSource,
    },
    /// `{type:"document", source}`.
    Document {
        /// Where the bytes are.
        source: InputSource,
    },
    /// The legacy `{type:"binary", mimeType, data?|url?|id?, filename?}`.
    #[serde(rename_all = "camelCase")]
    Binary {
        /// The media type.
        #[serde(default)]
        mime_type: String,
        /// Base64 bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
        /// Where the bytes are.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// An uploaded file's id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The file's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
    /// A part this module does not know.
    #[serde(untagged)]
    Unknown(Value),
}

/// Where a part's bytes are, by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum InputSource {
    /// `{type:"data", value: <base64>, mimeType}`.
    #[serde(rename_all = "camelCase")]
    Data {
        /// Base64 bytes.
        value: String,
        /// The media type.
        #[serde(default)]
        mime_type: String,
    },
    /// `{type:"url", value, mimeType?}`.
    #[serde(rename_all = "camelCase")]
    Url {
        /// The URL.
        value: String,
        /// The media type.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A source this module does not know (1.0's `file`, …).
    #[serde(untagged)]
    Unknown(Value),
}

/// How [`to_claude_user_message`] presents the input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InputOptions {
    /// The MCP server name under which the host serves the frontend tools (`frontend`):
    /// Claude Code calls them `mcp__<server>__<name>`.
    pub mcp_server_name: String,
    /// Tool results the host routes itself (answers to pending frontend tool calls); they are
    /// not sent as `tool_result` blocks.
    pub exclude_tool_call_ids: Vec<String>,
}

impl Default for InputOptions {
    fn default() -> Self {
        Self {
            mcp_server_name: "frontend".to_owned(),
            exclude_tool_call_ids: Vec::new(),
        }
    }
}

/// A tool message's result, for the host to route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The call it answers.
    pub tool_call_id: String,
    /// The result as text (parts: text joined with `\n`, others as `[<type>]`); the error
    /// message when the content is empty and the tool failed.
    pub content: String,
    /// The tool failed (`error` was set).
    pub is_error: bool,
}

/// What this run adds to the conversation: the messages after the last assistant message (all
/// of them when there is none).
#[must_use]
pub fn new_messages(input: &RunAgentInput) -> &[Message] {
    let start = input
        .messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant(_)))
        .map_or(0, |last| last + 1);
    &input.messages[start..]
}

/// The tool results among the new messages, in order.
#[must_use]
pub fn tool_results(input: &RunAgentInput) -> Vec<ToolResult> {
    new_messages(input)
        .iter()
        .filter_map(|m| match m {
            Message::Tool(tool) => Some(ToolResult {
                tool_call_id: tool.tool_call_id.clone(),
                content: tool_message_text(tool),
                is_error: tool.error.is_some(),
            }),
            _ => None,
        })
        .collect()
}

/// The stream-json stdin line (as JSON) that sends the run's new messages to Claude Code, or
/// `None` when there is nothing new to send (context and tools alone are not a turn).
#[must_use]
pub fn to_claude_user_message(input: &RunAgentInput, options: &InputOptions) -> Option<Value> {
    let mut results = Vec::new();
    let mut blocks = Vec::new();
    for message in new_messages(input) {
        match message {
            Message::Developer(m) | Message::System(m) if !m.content.trim().is_empty() => {
                blocks.push(text_block(&format!(
                    "Instructions from the app:\n{}",
                    m.content
                )));
            }
            Message::User(m) => match &m.content {
                Content::Text(text) if !text.is_empty() => blocks.push(text_block(text)),
                Content::Text(_) => {}
                Content::Parts(parts) => blocks.extend(parts.iter().filter_map(part_block)),
            },
            Message::Tool(m) if !options.exclude_tool_call_ids.contains(&m.tool_call_id) => {
                results.push(json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id,
                    "content": tool_message_text(m),
                    "is_error": m.error.is_some(),
                }));
            }
            _ => {}
        }
    }
    if results.is_empty() && blocks.is_empty() {
        return None;
    }
    if let Some(command) = slash_command(&results, &blocks) {
        // Claude Code runs `/name args` (its own commands and `.claude/commands/*.md`) only
        // when it is the whole message.
        return Some(json!({
            "type": "user",
            "message": { "role": "user", "content": command },
            "parent_tool_use_id": null,
            "session_id": "default",
        }));
    }
    // The Messages API wants a user message's tool results before anything else.
    let mut content = results;
    if let Some(context) = context_text(&input.context) {
        content.push(text_block(&context));
    }
    if let Some(tools) = tools_text(&input.tools, &options.mcp_server_name) {
        content.push(text_block(&tools));
    }
    content.extend(blocks);
    Some(json!({
        "type": "user",
        "message": { "role": "user", "content": content },
        "parent_tool_use_id": null,
        "session_id": "default",
    }))
}

/// The user typed a slash command (`/compact`, `/hello world`): the turn's only content is one
/// text starting with `/` followed by a command name.
fn slash_command(results: &[Value], blocks: &[Value]) -> Option<String> {
    let [block] = blocks else {
        return None;
    };
    let text = block.get("text")?.as_str()?.trim();
    let name = text.strip_prefix('/')?.split(char::is_whitespace).next()?;
    let is_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'));
    (results.is_empty() && is_name).then(|| text.to_owned())
}

fn text_block(text: &str) -> Value {
    json!({ "type": "text", "text": text })
}

/// `Context from the app:` and one `- <description>: <value>` line per entry.
fn context_text(context: &[Context]) -> Option<String> {
    let lines: Vec<String> = context
        .iter()
        .filter(|c| !(c.description.trim().is_empty() && c.value.trim().is_empty()))
        .map(|c| format!("- {}: {}", c.description, c.value))
        .collect();
    if lines.is_empty() {
        return None;
    }
    Some(format!("Context from the app:\n{}", lines.join("\n")))
}

/// The frontend tools, with the MCP names Claude Code knows them by.
fn tools_text(tools: &[Tool], server: &str) -> Option<String> {
    if tools.is_empty() {
        return None;
    }
    let mut text = format!(
        "The app provides these tools. They run in the user's interface and are available to you as MCP tools named `mcp__{server}__<name>`:"
    );
    for tool in tools {
        text.push_str(&format!("\n- `mcp__{server}__{}`", tool.name));
        if !tool.description.trim().is_empty() {
            text.push_str(&format!(": {}", tool.description));
        }
        if !tool.parameters.is_null() {
            text.push_str(&format!(
                "\n  Parameters (JSON Schema): {}",
                tool.parameters
            ));
        }
    }
    Some(text)
}

/// A user message part as an Anthropic content block (unsupported media as a short note).
fn part_block(part: &InputContent) -> Option<Value> {
    match part {
        InputContent::Text { text } if text.is_empty() => None,
        InputContent::Text { text } => Some(text_block(text)),
        InputContent::Image { source } => Some(media_block("image", source)),
        InputContent::Document { source } => Some(media_block("document", source)),
        InputContent::Audio { .. } => Some(text_block("[audio attachment not supported]")),
        InputContent::Video { .. } => Some(text_block("[video attachment not supported]")),
        InputContent::Binary {
            mime_type,
            data,
            url,
            filename,
            ..
        } => {
            let kind = if mime_type.starts_with("image/") {
                "image"
            } else if mime_type == "application/pdf" {
                "document"
            } else {
                let name = filename.as_deref().unwrap_or(mime_type);
                return Some(text_block(&format!("[attachment not supported: {name}]")));
            };
            let source = match (data, url) {
                (Some(data), _) => InputSource::Data {
                    value: data.clone(),
                    mime_type: mime_type.clone(),
                },
                (None, Some(url)) => InputSource::Url {
                    value: url.clone(),
                    mime_type: Some(mime_type.clone()),
                },
                (None, None) => InputSource::Unknown(Value::Null),
            };
            Some(media_block(kind, &source))
        }
        InputContent::Unknown(_) => None,
    }
}

/// `{type: kind, source: {type:"base64", media_type, data}}` or `{…, source: {type:"url", url}}`.
fn media_block(kind: &str, source: &InputSource) -> Value {
    match source {
        InputSource::Data { value, mime_type } => json!({
            "type": kind,
            "source": { "type": "base64", "media_type": mime_type, "data": value },
        }),
        InputSource::Url { value, .. } => json!({
            "type": kind,
            "source": { "type": "url", "url": value },
        }),
        InputSource::Unknown(_) => text_block(&format!("[{kind} attachment not supported]")),
    }
}

/// A tool message's content as text; its error when the content is empty.
fn tool_message_text(m: &ToolMessage) -> String {
    let text = match &m.content {
        Content::Text(text) => text.clone(),
        Content::Parts(parts) => parts
            .iter()
            .map(|part| match part {
                InputContent::Text { text } => text.clone(),
                InputContent::Image { .. } => "[image]".to_owned(),
                InputContent::Audio { .. } => "[audio]".to_owned(),
                InputContent::Video { .. } => "[video]".to_owned(),
                InputContent::Document { .. } => "[document]".to_owned(),
                InputContent::Binary { .. } => "[binary]".to_owned(),
                InputContent::Unknown(v) => v.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    match &m.error {
        Some(error) if text.is_empty() => error.clone(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(messages: Value) -> RunAgentInput {
        serde_json::from_value(json!({
            "threadId": "t", "runId": "r", "state": {}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": messages,
        }))
        .unwrap()
    }

    #[test]
    fn parses_every_role_and_tolerates_unknown_ones() {
        let input = input(json!([
            {"id":"1","role":"system","content":"be brief"},
            {"id":"2","role":"developer","content":"dev"},
            {"id":"3","role":"user","content":[{"type":"text","text":"hi"},{"type":"hologram","x":1}]},
            {"id":"4","role":"assistant","toolCalls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
            {"id":"5","role":"tool","toolCallId":"c1","content":"ok","extra":true},
            {"id":"6","role":"reasoning","content":"hm"},
            {"id":"7","role":"activity","activityType":"plan","content":{}},
            {"id":"8","role":"narrator","content":"?"},
            {"id":"9","role":"user","content":42},
        ]));
        let kinds: Vec<&str> = input
            .messages
            .iter()
            .map(|m| match m {
                Message::Developer(_) => "developer",
                Message::System(_) => "system",
                Message::User(_) => "user",
                Message::Assistant(_) => "assistant",
                Message::Tool(_) => "tool",
                Message::Reasoning(_) => "reasoning",
                Message::Activity(_) => "activity",
                Message::Unknown(_) => "unknown",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "system",
                "developer",
                "user",
                "assistant",
                "tool",
                "reasoning",
                "activity",
                "unknown",
                "unknown"
            ]
        );
        let ids: Vec<&str> = input.messages.iter().map(Message::id).collect();
        assert_eq!(ids, ["1", "2", "3", "4", "5", "6", "7", "8", "9"]);
        let Message::User(user) = &input.messages[2] else {
            panic!()
        };
        let Content::Parts(parts) = &user.content else {
            panic!()
        };
        assert!(matches!(parts[1], InputContent::Unknown(_)));
    }

    #[test]
    fn new_messages_follow_the_last_assistant_message() {
        let input = input(json!([
            {"id":"1","role":"user","content":"a"},
            {"id":"2","role":"assistant","content":"b"},
            {"id":"3","role":"user","content":"c"},
            {"id":"4","role":"user","content":"d"},
        ]));
        let ids: Vec<&str> = new_messages(&input).iter().map(Message::id).collect();
        assert_eq!(ids, ["3", "4"]);
        let first = super::tests::input(json!([{"id":"1","role":"user","content":"a"}]));
        assert_eq!(new_messages(&first).len(), 1);
        let none = super::tests::input(json!([{"id":"1","role":"assistant","content":"a"}]));
        assert!(new_messages(&none).is_empty());
        assert_eq!(
            to_claude_user_message(&none, &InputOptions::default()),
            None
        );
    }

    #[test]
    fn context_and_tools_alone_are_not_a_turn() {
        let mut run = input(json!([{"id":"1","role":"assistant","content":"a"}]));
        run.context.push(Context {
            description: "page".into(),
            value: "home".into(),
        });
        assert_eq!(to_claude_user_message(&run, &InputOptions::default()), None);
    }

    #[test]
    fn a_slash_command_is_sent_alone_as_claude_code_runs_it() {
        let mut run = input(json!([{"id":"1","role":"user","content":" /hello world "}]));
        run.context.push(Context {
            description: "page".into(),
            value: "home".into(),
        });
        let line = to_claude_user_message(&run, &InputOptions::default()).unwrap();
        assert_eq!(line["message"]["content"], "/hello world");
        for not_a_command in ["/ nothing", "/etc/passwd is a path", "say /hello"] {
            let run = input(json!([{"id":"1","role":"user","content": not_a_command}]));
            let line = to_claude_user_message(&run, &InputOptions::default()).unwrap();
            assert!(line["message"]["content"].is_array(), "{not_a_command}");
        }
        // With a tool result it is not a command turn.
        let run = input(json!([
            {"id":"a","role":"assistant","content":"","toolCalls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]},
            {"id":"t","role":"tool","toolCallId":"c1","content":"ok"},
            {"id":"u","role":"user","content":"/compact"},
        ]));
        let line = to_claude_user_message(&run, &InputOptions::default()).unwrap();
        assert!(line["message"]["content"].is_array());
    }

    #[test]
    fn tool_messages_become_tool_results_unless_excluded() {
        let run = input(json!([
            {"id":"1","role":"assistant","toolCalls":[
                {"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},
                {"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},
            {"id":"2","role":"tool","toolCallId":"c1","content":"ok"},
            {"id":"3","role":"tool","toolCallId":"c2","content":"","error":"denied"},
        ]));
        assert_eq!(
            tool_results(&run),
            [
                ToolResult {
                    tool_call_id: "c1".into(),
                    content: "ok".into(),
                    is_error: false
                },
                ToolResult {
                    tool_call_id: "c2".into(),
                    content: "denied".into(),
                    is_error: true
                }
            ]
        );
        let options = InputOptions {
            exclude_tool_call_ids: vec!["c1".into()],
            ..InputOptions::default()
        };
        let line = to_claude_user_message(&run, &options).unwrap();
        assert_eq!(
            line["message"]["content"],
            json!([{"type":"tool_result","tool_use_id":"c2","content":"denied","is_error":true}])
        );
        let all_excluded = InputOptions {
            exclude_tool_call_ids: vec!["c1".into(), "c2".into()],
            ..InputOptions::default()
        };
        assert_eq!(to_claude_user_message(&run, &all_excluded), None);
    }

    #[test]
    fn parts_become_anthropic_blocks() {
        let run = input(json!([{"id":"1","role":"user","content":[
            {"type":"text","text":"see"},
            {"type":"image","source":{"type":"data","value":"AAAA","mimeType":"image/png"}},
            {"type":"image","source":{"type":"url","value":"https://x/y.png"}},
            {"type":"binary","mimeType":"image/jpeg","data":"BBBB"},
            {"type":"binary","mimeType":"text/csv","filename":"a.csv","data":"CCCC"},
            {"type":"audio","source":{"type":"data","value":"DDDD","mimeType":"audio/wav"}},
            {"type":"sticker"}
        ]}]));
        let line = to_claude_user_message(&run, &InputOptions::default()).unwrap();
        assert_eq!(
            line["message"]["content"],
            json!([
                {"type":"text","text":"see"},
                {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},
                {"type":"image","source":{"type":"url","url":"https://x/y.png"}},
                {"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"BBBB"}},
                {"type":"text","text":"[attachment not supported: a.csv]"},
                {"type":"text","text":"[audio attachment not supported]"}
            ])
        );
    }

    #[test]
    fn input_options_deserialize_with_defaults() {
        let options: InputOptions = serde_json::from_str("{}").unwrap();
        assert_eq!(options, InputOptions::default());
        assert_eq!(options.mcp_server_name, "frontend");
    }
}
