//! Claude Code's NDJSON messages → AG-UI events: the sans-IO state machine [`ClaudeToAgui`].
//!
//! The host reads Claude Code's stdout, splits it into lines ([`crate::agui::claude::LineBuffer`]),
//! parses each ([`crate::agui::claude::parse_line`]) and feeds the messages here; the events that
//! come out are written to the AG-UI client in order. The same input always gives the same
//! events: the ids the translator invents come from the seed.
//!
//! ```text
//!                start() / first feed()                 result (is_error: false)
//!   NotStarted ─────────────────────────► Running ──────────────────────────────► Finished
//!        │                                  │  │
//!        │ fail() / finish()                │  │ result (is_error: true), fail(), or finish()
//!        │ (RUN_STARTED + RUN_ERROR)        │  │ (output ended without a result)
//!        └──────────────────────────────────┴──┴────────────────────────────────► Errored
//! ```
//! `Finished` and `Errored` are final: `feed`, `fail` and `finish` return nothing there.
//!
//! # Mapping
//!
//! | Claude Code message | AG-UI events |
//! |---|---|
//! | `system`/`init` | `STATE_SNAPSHOT{snapshot: the init fields without type/subtype}` |
//! | `system`/`status` | `CUSTOM{name:"system_status", value:{status, permissionMode?}}`, then the same as `CUSTOM{name:"status"}` (the earlier name) |
//! | `system`/any other subtype (`api_retry`, `compact_boundary`, `task_*`, `hook_*`, …) | `CUSTOM{name: subtype, value: fields without type/subtype}` |
//! | `stream_event` text block | `TEXT_MESSAGE_START{messageId:"<msg id>:<index>", role:"assistant"}`, `_CONTENT` per non-empty delta, `_END` |
//! | `stream_event` tool_use block | `TOOL_CALL_START{toolCallId, toolCallName, parentMessageId: msg id}`, `TOOL_CALL_ARGS` per non-empty delta, `TOOL_CALL_END` |
//! | `stream_event` thinking block | `REASONING_START`, `REASONING_MESSAGE_START{role:"reasoning"}`, `REASONING_MESSAGE_CONTENT`…, `REASONING_MESSAGE_END`, `REASONING_ENCRYPTED_VALUE{subtype:"message"}` (the signature, if any), `REASONING_END` |
//! | `stream_event` redacted_thinking block | `REASONING_ENCRYPTED_VALUE{subtype:"message", entityId:"<msg id>:<index>"}` |
//! | `stream_event` server tool result block | `TOOL_CALL_RESULT` |
//! | `stream_event` message_delta / message_stop / ping / error | nothing |
//! | `assistant` | the same events for each block that was not streamed |
//! | `user` with `tool_result` blocks | `TOOL_CALL_RESULT{messageId:"<uuid>:<position>", toolCallId, content, role:"tool"}` each |
//! | `user` with `isReplay: true`, or without tool results | nothing |
//! | `control_request`/`can_use_tool` | `CUSTOM{name:"tool_approval_request", value:{requestId, toolName, toolUseId, input, …}}` |
//! | `control_request`/`hook_callback` | `CUSTOM{name:"hook_callback", value:{requestId, callbackId, toolUseId, input}}`, then as other subtypes |
//! | `control_request`/other subtypes | `CUSTOM{name:"claude_code_control_request", value: the whole control_request message}` |
//! | `control_cancel_request` | `CUSTOM{name:"control_cancel_request", value:{requestId}}` |
//! | `tool_progress` | `CUSTOM{name:"tool_progress", value: fields without type}` |
//! | `rate_limit_event` | `CUSTOM{name:"rate_limit_event", value: fields without type}` (a UI can show limits) |
//! | `auth_status` | `CUSTOM{name:"auth_status", value: fields without type}` |
//! | `tool_use_summary` | `CUSTOM{name:"tool_use_summary", value: fields without type}` |
//! | `keep_alive`, `control_response` | nothing |
//! | unknown `type` | `RAW{event: the message, source:"claude-code"}` |
//! | `result` | `CUSTOM{name:"result_stats"}`, the end of everything still open, then `RUN_FINISHED{result, usage?}` or, when `is_error`, `RUN_ERROR{message, code}` |
//!
//! Which blocks were streamed: every `content_block_start` marks `(message id, index)` (and a
//! tool_use's id). In stream-json Claude Code emits one `assistant` message per block, with the
//! stream's message id; the index of a block of such a message is the number of blocks seen in
//! earlier `assistant` messages with the same id plus its position in `content`. So with
//! `--include-partial-messages` the `assistant` messages add nothing, and without it they carry
//! everything.
//!
//! Token usage (`RUN_FINISHED.usage`): one entry per model of the result's `modelUsage` (else
//! one from `usage`), `inputTokens` counting the cached prompt tokens too (Anthropic's
//! `input_tokens` excludes them) and `cachedInputTokens` the cache reads.
//!
//! ```
//! use bridge_core::agui::claude::parse_line;
//! use bridge_core::agui::translate::ClaudeToAgui;
//! let mut t = ClaudeToAgui::new("thread-1", "run-1", 7);
//! let mut events = t.start();
//! let line = r#"{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"Hi"}]}}"#;
//! events.extend(t.feed(&parse_line(line).unwrap()));
//! events.extend(t.feed(&parse_line(r#"{"type":"result","subtype":"success","is_error":false,"result":"Hi"}"#).unwrap()));
//! let types: Vec<&str> = events.iter().map(|e| e.type_name()).collect();
//! assert_eq!(types, ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "CUSTOM", "RUN_FINISHED"]);
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::agui::claude::{
    AnthropicEvent, AssistantMessage, BlockDelta, ClaudeMessage, ContentBlock, ControlRequest,
    ResultMessage, StreamEventMessage, SystemMessage, UserMessage, without_keys,
};
use crate::agui::events::{AguiEvent, EncryptedSubtype, Role, TokenUsage};
use crate::ids::IdSource;

/// `RAW.source` of passed-through messages.
const RAW_SOURCE: &str = "claude-code";

/// The fields of a `result` message copied into `CUSTOM{name:"result_stats"}`, in this order.
const RESULT_STATS_FIELDS: [&str; 10] = [
    "subtype",
    "duration_ms",
    "duration_api_ms",
    "num_turns",
    "total_cost_usd",
    "usage",
    "modelUsage",
    "permission_denials",
    "stop_reason",
    "session_id",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    NotStarted,
    Running,
    /// `RUN_FINISHED` was emitted.
    Finished,
    /// `RUN_ERROR` was emitted.
    Errored,
}

/// A streamed block whose AG-UI events are open.
#[derive(Debug)]
struct OpenBlock {
    /// The Anthropic message it belongs to.
    message_id: String,
    /// Its index in that message.
    index: u64,
    kind: OpenKind,
}

#[derive(Debug)]
enum OpenKind {
    Text {
        id: String,
    },
    ToolCall {
        id: String,
        /// The input of the block start, sent at the end if no argument delta came.
        input: Value,
        args_sent: bool,
    },
    Reasoning {
        id: String,
        signature: String,
    },
}

/// Claude Code messages → AG-UI events, for one run.
#[derive(Debug)]
pub struct ClaudeToAgui {
    thread_id: String,
    run_id: String,
    ids: IdSource,
    lifecycle: Lifecycle,
    /// The Anthropic message being streamed, per agent (`None`: the main agent; otherwise the
    /// subagent's `parent_tool_use_id`).
    streaming: BTreeMap<Option<String>, String>,
    open: Vec<OpenBlock>,
    /// `(message id, index)` of every block that began in a `stream_event`.
    streamed_blocks: BTreeSet<(String, u64)>,
    /// Ids of every tool call already emitted.
    emitted_tool_calls: BTreeSet<String>,
    /// Blocks seen in `assistant` messages, per message id.
    assistant_blocks: BTreeMap<String, u64>,
    /// The model `system/init` reported.
    model: Option<String>,
    /// Tools whose names start with this are the client's own (`mcp__frontend__`): their tool
    /// calls carry the name without it, as the client registered the tool.
    client_tool_prefix: Option<String>,
    /// The host asked Claude Code to stop the turn: its error result is the stop, not a failure.
    interrupted: bool,
}

impl ClaudeToAgui {
    /// A translator for the run `run_id` of the conversation `thread_id`; `id_seed` seeds the
    /// ids it must invent.
    #[must_use]
    pub fn new(thread_id: impl Into<String>, run_id: impl Into<String>, id_seed: u64) -> Self {
        Self {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            ids: IdSource::new(id_seed),
            lifecycle: Lifecycle::NotStarted,
            streaming: BTreeMap::new(),
            open: Vec::new(),
            streamed_blocks: BTreeSet::new(),
            emitted_tool_calls: BTreeSet::new(),
            assistant_blocks: BTreeMap::new(),
            model: None,
            client_tool_prefix: None,
            interrupted: false,
        }
    }

    /// The host asked Claude Code to interrupt the turn (`agent/stop`): the result that ends it
    /// (`error_during_execution`) finishes the run (`RUN_FINISHED`) rather than failing it.
    pub fn note_interrupt(&mut self) {
        if self.lifecycle == Lifecycle::Running {
            self.interrupted = true;
        }
    }

    /// Tool calls of tools named `<prefix><name>` are the client's tools (offered to Claude
    /// Code through an MCP server): `TOOL_CALL_START` names them `<name>`.
    pub fn set_client_tool_prefix(&mut self, prefix: impl Into<String>) {
        self.client_tool_prefix = Some(prefix.into());
    }

    fn client_name<'a>(&self, name: &'a str) -> &'a str {
        self.client_tool_prefix
            .as_deref()
            .and_then(|prefix| name.strip_prefix(prefix))
            .filter(|rest| !rest.is_empty())
            .unwrap_or(name)
    }

    /// The next run of the same conversation: the translator is ready to `start` again under
    /// `run_id`, remembering which blocks were already sent (a Claude Code turn may go on across
    /// runs, e.g. after a client tool). Nothing happens while a run is still going.
    pub fn begin_run(&mut self, run_id: impl Into<String>) {
        if self.lifecycle == Lifecycle::Running {
            return;
        }
        self.run_id = run_id.into();
        self.lifecycle = Lifecycle::NotStarted;
        self.interrupted = false;
    }

    /// End the run while Claude Code's turn goes on (it waits for a client tool's result, which
    /// comes with the next run): close everything open and emit `RUN_FINISHED`.
    pub fn suspend(&mut self) -> Vec<AguiEvent> {
        if self.is_done() {
            return Vec::new();
        }
        let mut out = self.start();
        self.close_all(&mut out);
        out.push(AguiEvent::RunFinished {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            result: None,
            outcome: None,
            usage: None,
        });
        self.lifecycle = Lifecycle::Finished;
        out
    }

    /// Whether the run ended (`RUN_FINISHED` or `RUN_ERROR` was emitted).
    #[must_use]
    pub fn is_done(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Finished | Lifecycle::Errored)
    }

    /// Begin the run: `RUN_STARTED` (nothing if it already began).
    pub fn start(&mut self) -> Vec<AguiEvent> {
        if self.lifecycle != Lifecycle::NotStarted {
            return Vec::new();
        }
        self.lifecycle = Lifecycle::Running;
        vec![AguiEvent::RunStarted {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            parent_run_id: None,
            input: None,
        }]
    }

    /// One message of Claude Code's output; returns the events it makes (the run starts first
    /// if `start` was not called). Nothing after the run ended.
    pub fn feed(&mut self, message: &ClaudeMessage) -> Vec<AguiEvent> {
        if self.is_done() {
            return Vec::new();
        }
        let mut out = self.start();
        match message {
            ClaudeMessage::System(m) => self.on_system(m, &mut out),
            ClaudeMessage::StreamEvent(m) => self.on_stream_event(m, &mut out),
            ClaudeMessage::Assistant(m) => self.on_assistant(m, &mut out),
            ClaudeMessage::User(m) => self.on_user(m, &mut out),
            ClaudeMessage::Result(m) => self.on_result(m, &mut out),
            ClaudeMessage::ControlRequest(m) => control_request_events(m, &mut out),
            ClaudeMessage::ControlCancelRequest(m) => out.push(custom(
                "control_cancel_request",
                json!({ "requestId": m.raw.get("request_id").cloned().unwrap_or(Value::Null) }),
            )),
            ClaudeMessage::ToolProgress(m) => {
                out.push(custom("tool_progress", without_keys(&m.raw, &["type"])));
            }
            ClaudeMessage::RateLimitEvent(m) => {
                out.push(custom("rate_limit_event", without_keys(&m.raw, &["type"])));
            }
            ClaudeMessage::AuthStatus(m) => {
                out.push(custom("auth_status", without_keys(&m.raw, &["type"])));
            }
            ClaudeMessage::KeepAlive(_) | ClaudeMessage::ControlResponse(_) => {}
            ClaudeMessage::Unknown(raw) if raw.get("type") == Some(&json!("tool_use_summary")) => {
                out.push(custom("tool_use_summary", without_keys(raw, &["type"])));
            }
            ClaudeMessage::Unknown(raw) => out.push(AguiEvent::Raw {
                event: raw.clone(),
                source: Some(RAW_SOURCE.to_owned()),
            }),
        }
        out
    }

    /// The run failed outside Claude Code's output (the process could not start, crashed, the
    /// client went away): close what is open and emit `RUN_ERROR{message, code}`.
    pub fn fail(&mut self, message: &str, code: &str) -> Vec<AguiEvent> {
        if self.is_done() {
            return Vec::new();
        }
        let mut out = self.start();
        self.close_all(&mut out);
        out.push(AguiEvent::RunError {
            message: message.to_owned(),
            code: Some(code.to_owned()),
            usage: None,
        });
        self.lifecycle = Lifecycle::Errored;
        out
    }

    /// Claude Code's output ended. Without a `result` first, the run failed: `RUN_ERROR`.
    pub fn finish(&mut self) -> Vec<AguiEvent> {
        self.fail(
            "Claude Code's output ended without a result message (the process exited or was cut off)",
            "no_result",
        )
    }

    fn on_system(&mut self, m: &SystemMessage, out: &mut Vec<AguiEvent>) {
        match m.subtype.as_str() {
            "init" => {
                if let Some(model) = m.raw.get("model").and_then(Value::as_str) {
                    self.model = Some(model.to_owned());
                }
                out.push(AguiEvent::StateSnapshot {
                    snapshot: m.fields(),
                });
            }
            "status" => {
                let mut value = Map::new();
                value.insert(
                    "status".into(),
                    m.raw.get("status").cloned().unwrap_or(Value::Null),
                );
                if let Some(mode) = m.raw.get("permissionMode") {
                    value.insert("permissionMode".into(), mode.clone());
                }
                let value = Value::Object(value);
                // `system_status` is the name CopilotKit apps listen for; `status` is kept
                // for apps written against earlier releases.
                out.push(custom("system_status", value.clone()));
                out.push(custom("status", value));
            }
            "" => out.push(custom("system", m.fields())),
            subtype => out.push(custom(subtype, m.fields())),
        }
    }

    fn on_stream_event(&mut self, m: &StreamEventMessage, out: &mut Vec<AguiEvent>) {
        let agent = m.parent_tool_use_id.clone();
        match &m.event {
            AnthropicEvent::MessageStart { message_id } => {
                let id = message_id
                    .clone()
                    .unwrap_or_else(|| self.ids.next_id("msg_"));
                self.streaming.insert(agent, id);
            }
            AnthropicEvent::ContentBlockStart { index, block } => {
                let message_id = self.streaming_message(agent);
                self.on_block_start(message_id, *index, block, out);
            }
            AnthropicEvent::ContentBlockDelta { index, delta } => {
                let message_id = self.streaming_message(agent);
                if let Some(open) = self
                    .open
                    .iter_mut()
                    .find(|b| b.message_id == message_id && b.index == *index)
                {
                    delta_events(&mut open.kind, delta, out);
                }
            }
            AnthropicEvent::ContentBlockStop { index } => {
                let message_id = self.streaming_message(agent);
                if let Some(position) = self
                    .open
                    .iter()
                    .position(|b| b.message_id == message_id && b.index == *index)
                {
                    let block = self.open.remove(position);
                    close_events(block.kind, out);
                }
            }
            AnthropicEvent::Other(_) => {}
        }
    }

    /// The Anthropic message an agent is streaming (invented if its `message_start` is missing).
    fn streaming_message(&mut self, agent: Option<String>) -> String {
        if let Some(id) = self.streaming.get(&agent) {
            return id.clone();
        }
        let id = self.ids.next_id("msg_");
        self.streaming.insert(agent, id.clone());
        id
    }

    fn on_block_start(
        &mut self,
        message_id: String,
        index: u64,
        block: &ContentBlock,
        out: &mut Vec<AguiEvent>,
    ) {
        if !self.streamed_blocks.insert((message_id.clone(), index)) {
            return;
        }
        let id = format!("{message_id}:{index}");
        let kind = match block {
            ContentBlock::Text { text, .. } => {
                out.push(text_start(&id));
                if !text.is_empty() {
                    out.push(text_content(&id, text));
                }
                OpenKind::Text { id }
            }
            ContentBlock::ToolUse {
                id: call_id,
                name,
                input,
            } => {
                if !self.emitted_tool_calls.insert(call_id.clone()) {
                    return;
                }
                out.push(tool_call_start(
                    call_id,
                    self.client_name(name),
                    &message_id,
                ));
                OpenKind::ToolCall {
                    id: call_id.clone(),
                    input: input.clone(),
                    args_sent: false,
                }
            }
            ContentBlock::Thinking {
                thinking,
                signature,
            } => {
                reasoning_start(&id, out);
                if !thinking.is_empty() {
                    out.push(reasoning_content(&id, thinking));
                }
                OpenKind::Reasoning {
                    id,
                    signature: signature.clone(),
                }
            }
            ContentBlock::RedactedThinking { data } => {
                out.push(encrypted_value(&id, data));
                return;
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } => {
                out.push(tool_call_result(id, tool_use_id, content));
                return;
            }
            ContentBlock::Other(_) => return,
        };
        self.open.push(OpenBlock {
            message_id,
            index,
            kind,
        });
    }

    fn on_assistant(&mut self, m: &AssistantMessage, out: &mut Vec<AguiEvent>) {
        let message_id = m
            .message_id
            .clone()
            .unwrap_or_else(|| self.ids.next_id("msg_"));
        let seen = self.assistant_blocks.entry(message_id.clone()).or_insert(0);
        let first_index = *seen;
        *seen += m.content.len() as u64;
        for (index, block) in (first_index..).zip(&m.content) {
            if self.streamed_blocks.contains(&(message_id.clone(), index)) {
                continue;
            }
            let id = format!("{message_id}:{index}");
            match block {
                ContentBlock::Text { text, .. } => {
                    if !text.is_empty() {
                        out.push(text_start(&id));
                        out.push(text_content(&id, text));
                        out.push(AguiEvent::TextMessageEnd { message_id: id });
                    }
                }
                ContentBlock::ToolUse {
                    id: call_id,
                    name,
                    input,
                } => {
                    if self.emitted_tool_calls.insert(call_id.clone()) {
                        out.push(tool_call_start(
                            call_id,
                            self.client_name(name),
                            &message_id,
                        ));
                        out.push(tool_call_args(call_id, input));
                        out.push(AguiEvent::ToolCallEnd {
                            tool_call_id: call_id.clone(),
                        });
                    }
                }
                ContentBlock::Thinking {
                    thinking,
                    signature,
                } => {
                    reasoning_start(&id, out);
                    if !thinking.is_empty() {
                        out.push(reasoning_content(&id, thinking));
                    }
                    reasoning_end(&id, signature, out);
                }
                ContentBlock::RedactedThinking { data } => out.push(encrypted_value(&id, data)),
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => out.push(tool_call_result(id, tool_use_id, content)),
                ContentBlock::Other(_) => {}
            }
        }
    }

    fn on_user(&mut self, m: &UserMessage, out: &mut Vec<AguiEvent>) {
        if m.is_replay {
            return;
        }
        for (position, block) in m.content.iter().enumerate() {
            if let ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } = block
            {
                let message_id = match &m.uuid {
                    Some(uuid) => format!("{uuid}:{position}"),
                    None => self.ids.next_id("msg_"),
                };
                out.push(tool_call_result(message_id, tool_use_id, content));
            }
        }
    }

    fn on_result(&mut self, m: &ResultMessage, out: &mut Vec<AguiEvent>) {
        let stats: Map<String, Value> = RESULT_STATS_FIELDS
            .iter()
            .filter_map(|key| m.raw.get(*key).map(|v| ((*key).to_owned(), v.clone())))
            .collect();
        out.push(custom("result_stats", Value::Object(stats)));
        self.close_all(out);
        let usage = token_usage(&m.raw, self.model.as_deref());
        let stopped = std::mem::take(&mut self.interrupted)
            && m.raw.get("subtype").and_then(Value::as_str) == Some("error_during_execution");
        if m.is_error && !stopped {
            out.push(AguiEvent::RunError {
                message: result_error_message(m),
                code: Some(result_error_code(m)),
                usage,
            });
            self.lifecycle = Lifecycle::Errored;
        } else {
            out.push(AguiEvent::RunFinished {
                thread_id: self.thread_id.clone(),
                run_id: self.run_id.clone(),
                result: m.result.clone().map(Value::String),
                outcome: None,
                usage,
            });
            self.lifecycle = Lifecycle::Finished;
        }
    }

    /// End every open block, in the order they opened.
    fn close_all(&mut self, out: &mut Vec<AguiEvent>) {
        for block in std::mem::take(&mut self.open) {
            close_events(block.kind, out);
        }
    }
}

/// The events of a delta to an open block (nothing for empty or mismatched deltas).
fn delta_events(open: &mut OpenKind, delta: &BlockDelta, out: &mut Vec<AguiEvent>) {
    match (open, delta) {
        (OpenKind::Text { id }, BlockDelta::Text(text)) if !text.is_empty() => {
            out.push(text_content(id, text));
        }
        (OpenKind::ToolCall { id, args_sent, .. }, BlockDelta::InputJson(json))
            if !json.is_empty() =>
        {
            *args_sent = true;
            out.push(AguiEvent::ToolCallArgs {
                tool_call_id: id.clone(),
                delta: json.clone(),
            });
        }
        (OpenKind::Reasoning { id, .. }, BlockDelta::Thinking(text)) if !text.is_empty() => {
            out.push(reasoning_content(id, text));
        }
        (OpenKind::Reasoning { signature, .. }, BlockDelta::Signature(piece)) => {
            signature.push_str(piece);
        }
        _ => {}
    }
}

/// The events that end an open block.
fn close_events(open: OpenKind, out: &mut Vec<AguiEvent>) {
    match open {
        OpenKind::Text { id } => out.push(AguiEvent::TextMessageEnd { message_id: id }),
        OpenKind::ToolCall {
            id,
            input,
            args_sent,
        } => {
            if !args_sent {
                // No argument delta came: the block start's input is the whole input.
                out.push(tool_call_args(&id, &input));
            }
            out.push(AguiEvent::ToolCallEnd { tool_call_id: id });
        }
        OpenKind::Reasoning { id, signature } => reasoning_end(&id, &signature, out),
    }
}

fn text_start(id: &str) -> AguiEvent {
    AguiEvent::TextMessageStart {
        message_id: id.to_owned(),
        role: Some(Role::Assistant),
        name: None,
    }
}

fn text_content(id: &str, text: &str) -> AguiEvent {
    AguiEvent::TextMessageContent {
        message_id: id.to_owned(),
        delta: text.to_owned(),
    }
}

fn tool_call_start(call_id: &str, name: &str, message_id: &str) -> AguiEvent {
    AguiEvent::ToolCallStart {
        tool_call_id: call_id.to_owned(),
        tool_call_name: name.to_owned(),
        parent_message_id: Some(message_id.to_owned()),
    }
}

/// The whole input as one `TOOL_CALL_ARGS` (`{}` when there is none).
fn tool_call_args(call_id: &str, input: &Value) -> AguiEvent {
    let delta = if input.is_null() {
        "{}".to_owned()
    } else {
        input.to_string()
    };
    AguiEvent::ToolCallArgs {
        tool_call_id: call_id.to_owned(),
        delta,
    }
}

fn tool_call_result(message_id: String, tool_use_id: &str, content: &Value) -> AguiEvent {
    AguiEvent::ToolCallResult {
        message_id,
        tool_call_id: tool_use_id.to_owned(),
        content: tool_result_text(content),
        role: Some(Role::Tool),
    }
}

fn reasoning_start(id: &str, out: &mut Vec<AguiEvent>) {
    out.push(AguiEvent::ReasoningStart {
        message_id: id.to_owned(),
    });
    out.push(AguiEvent::ReasoningMessageStart {
        message_id: id.to_owned(),
        role: Role::Reasoning,
    });
}

fn reasoning_content(id: &str, text: &str) -> AguiEvent {
    AguiEvent::ReasoningMessageContent {
        message_id: id.to_owned(),
        delta: text.to_owned(),
    }
}

fn reasoning_end(id: &str, signature: &str, out: &mut Vec<AguiEvent>) {
    out.push(AguiEvent::ReasoningMessageEnd {
        message_id: id.to_owned(),
    });
    if !signature.is_empty() {
        out.push(encrypted_value(id, signature));
    }
    out.push(AguiEvent::ReasoningEnd {
        message_id: id.to_owned(),
    });
}

fn encrypted_value(id: &str, value: &str) -> AguiEvent {
    AguiEvent::ReasoningEncryptedValue {
        subtype: EncryptedSubtype::Message,
        entity_id: id.to_owned(),
        encrypted_value: value.to_owned(),
    }
}

fn custom(name: &str, value: Value) -> AguiEvent {
    AguiEvent::Custom {
        name: name.to_owned(),
        value,
    }
}

/// `can_use_tool` → `tool_approval_request` (camelCase, only the fields the CLI sent);
/// `hook_callback` → `hook_callback` (`{requestId, callbackId, toolUseId, input}`) and then, like
/// any other request, `claude_code_control_request` with the whole message (the answer needs
/// its `request_id`).
fn control_request_events(m: &ControlRequest, out: &mut Vec<AguiEvent>) {
    let field = |key: &str| m.request.get(key).cloned().unwrap_or(Value::Null);
    match m.subtype.as_str() {
        "can_use_tool" => out.push(approval_request_event(m)),
        "hook_callback" => {
            out.push(custom(
                "hook_callback",
                json!({
                    "requestId": m.request_id,
                    "callbackId": field("callback_id"),
                    "toolUseId": field("tool_use_id"),
                    "input": field("input"),
                }),
            ));
            out.push(custom("claude_code_control_request", m.raw.clone()));
        }
        _ => out.push(custom("claude_code_control_request", m.raw.clone())),
    }
}

fn approval_request_event(m: &ControlRequest) -> AguiEvent {
    let field = |key: &str| m.request.get(key).cloned().unwrap_or(Value::Null);
    let mut value = Map::new();
    value.insert("requestId".into(), Value::String(m.request_id.clone()));
    value.insert("toolName".into(), field("tool_name"));
    value.insert("toolUseId".into(), field("tool_use_id"));
    value.insert("input".into(), field("input"));
    for (from, to) in [
        ("description", "description"),
        ("title", "title"),
        ("display_name", "displayName"),
        ("permission_suggestions", "permissionSuggestions"),
        ("blocked_path", "blockedPath"),
        ("decision_reason", "decisionReason"),
        ("agent_id", "agentId"),
    ] {
        if let Some(v) = m.request.get(from) {
            value.insert(to.into(), v.clone());
        }
    }
    custom("tool_approval_request", Value::Object(value))
}

/// A tool result's content as text: strings as they are, text blocks joined with `\n`, images
/// as `[image]` (other blocks as `[<type>]`).
fn tool_result_text(content: &Value) -> String {
    match content {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|block| match block.get("type").and_then(Value::as_str) {
                Some("text") => block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                Some(kind) => format!("[{kind}]"),
                None => match block {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                },
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// `RUN_ERROR.message` of a failed result: its text, else its errors, else a fallback.
fn result_error_message(m: &ResultMessage) -> String {
    if let Some(text) = m.result.as_deref().filter(|t| !t.trim().is_empty()) {
        return text.to_owned();
    }
    if !m.errors.is_empty() {
        return m.errors.join("; ");
    }
    match m.api_error_status {
        Some(status) => format!("Claude Code's API request failed with HTTP status {status}"),
        None => format!("Claude Code ended the turn with an error ({})", m.subtype),
    }
}

/// `RUN_ERROR.code` of a failed result: an `error_*` subtype, else `api_error_<status>`.
fn result_error_code(m: &ResultMessage) -> String {
    if m.subtype.starts_with("error") {
        return m.subtype.clone();
    }
    match m.api_error_status {
        Some(status) => format!("api_error_{status}"),
        None if m.subtype.is_empty() || m.subtype == "success" => "claude_code_error".to_owned(),
        None => m.subtype.clone(),
    }
}

/// Token usage of a result: per model from `modelUsage`, else the total `usage`.
fn token_usage(result: &Value, model: Option<&str>) -> Option<Vec<TokenUsage>> {
    let count = |v: &Value, key: &str| v.get(key).and_then(Value::as_u64).unwrap_or(0);
    let entry = |model: Option<&str>, input: u64, cached: u64, output: u64| TokenUsage {
        provider: Some("anthropic".to_owned()),
        model: model.map(str::to_owned),
        input_tokens: Some(input),
        output_tokens: Some(output),
        total_tokens: Some(input.saturating_add(output)),
        reasoning_tokens: None,
        cached_input_tokens: Some(cached),
    };
    if let Some(models) = result
        .get("modelUsage")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    {
        let usage = models
            .iter()
            .map(|(name, u)| {
                let cached = count(u, "cacheReadInputTokens");
                let input = count(u, "inputTokens")
                    .saturating_add(cached)
                    .saturating_add(count(u, "cacheCreationInputTokens"));
                entry(Some(name), input, cached, count(u, "outputTokens"))
            })
            .collect();
        return Some(usage);
    }
    let u = result.get("usage").filter(|u| u.is_object())?;
    let cached = count(u, "cache_read_input_tokens");
    let input = count(u, "input_tokens")
        .saturating_add(cached)
        .saturating_add(count(u, "cache_creation_input_tokens"));
    Some(vec![entry(model, input, cached, count(u, "output_tokens"))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agui::claude::parse_line;
    use crate::agui::verify::Verifier;

    fn run(lines: &[&str]) -> Vec<AguiEvent> {
        let mut t = ClaudeToAgui::new("thread-1", "run-1", 7);
        let mut events = t.start();
        for line in lines {
            events.extend(t.feed(&parse_line(line).unwrap()));
        }
        events.extend(t.finish());
        Verifier::check(&events).unwrap();
        events
    }

    fn types(events: &[AguiEvent]) -> Vec<&'static str> {
        events.iter().map(AguiEvent::type_name).collect()
    }

    const RESULT_OK: &str = r#"{"type":"result","subtype":"success","is_error":false,"result":"done","usage":{"input_tokens":10,"cache_read_input_tokens":5,"cache_creation_input_tokens":1,"output_tokens":3}}"#;

    fn stream(event: &str) -> String {
        format!(r#"{{"type":"stream_event","event":{event},"parent_tool_use_id":null}}"#)
    }

    #[test]
    fn streamed_text_is_not_repeated_by_the_assistant_message() {
        let lines = [
            stream(r#"{"type":"message_start","message":{"id":"msg_A"}}"#),
            stream(r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
            stream(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}"#),
            stream(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#),
            r#"{"type":"assistant","message":{"id":"msg_A","content":[{"type":"text","text":"Hi"}]}}"#.to_owned(),
            stream(r#"{"type":"content_block_stop","index":0}"#),
            RESULT_OK.to_owned(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let events = run(&lines);
        assert_eq!(
            types(&events),
            [
                "RUN_STARTED",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "CUSTOM",
                "RUN_FINISHED"
            ]
        );
        assert_eq!(events[1], text_start("msg_A:0"));
        let AguiEvent::RunFinished { usage, result, .. } = &events[5] else {
            panic!("no RUN_FINISHED")
        };
        assert_eq!(result, &Some(json!("done")));
        let usage = usage.as_ref().unwrap();
        assert_eq!(usage[0].input_tokens, Some(16));
        assert_eq!(usage[0].cached_input_tokens, Some(5));
        assert_eq!(usage[0].total_tokens, Some(19));
    }

    #[test]
    fn assistant_block_index_counts_earlier_messages_with_the_same_id() {
        // Block 0 streamed, block 1 (second assistant message of msg_A) not streamed.
        let lines = [
            stream(r#"{"type":"message_start","message":{"id":"msg_A"}}"#),
            stream(r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"a"}}"#),
            stream(r#"{"type":"content_block_stop","index":0}"#),
            r#"{"type":"assistant","message":{"id":"msg_A","content":[{"type":"text","text":"a"}]}}"#.to_owned(),
            r#"{"type":"assistant","message":{"id":"msg_A","content":[{"type":"text","text":"b"}]}}"#.to_owned(),
            RESULT_OK.to_owned(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let events = run(&lines);
        let contents: Vec<(&str, &str)> = events
            .iter()
            .filter_map(|e| match e {
                AguiEvent::TextMessageContent { message_id, delta } => {
                    Some((message_id.as_str(), delta.as_str()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(contents, [("msg_A:0", "a"), ("msg_A:1", "b")]);
    }

    #[test]
    fn streamed_tool_call_without_deltas_sends_its_input_once() {
        let lines = [
            stream(r#"{"type":"message_start","message":{"id":"msg_T"}}"#),
            stream(r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"Ls","input":{}}}"#),
            stream(r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#),
            stream(r#"{"type":"content_block_stop","index":0}"#),
            // The same tool call again under another index must not be emitted twice.
            r#"{"type":"assistant","message":{"id":"msg_T","content":[{"type":"text","text":""},{"type":"tool_use","id":"toolu_1","name":"Ls","input":{}}]}}"#.to_owned(),
            RESULT_OK.to_owned(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let events = run(&lines);
        assert_eq!(
            types(&events)[1..4],
            ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
        );
        assert_eq!(
            events[2],
            AguiEvent::ToolCallArgs {
                tool_call_id: "toolu_1".into(),
                delta: "{}".into()
            }
        );
        assert_eq!(types(&events).len(), 6);
    }

    #[test]
    fn result_closes_open_blocks_before_run_finished() {
        let lines = [
            stream(r#"{"type":"message_start","message":{"id":"msg_X"}}"#),
            stream(
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
            ),
            stream(
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#,
            ),
            stream(
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            ),
            RESULT_OK.to_owned(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let events = run(&lines);
        assert_eq!(
            types(&events),
            [
                "RUN_STARTED",
                "REASONING_START",
                "REASONING_MESSAGE_START",
                "TEXT_MESSAGE_START",
                "CUSTOM",
                "REASONING_MESSAGE_END",
                "REASONING_ENCRYPTED_VALUE",
                "REASONING_END",
                "TEXT_MESSAGE_END",
                "RUN_FINISHED"
            ]
        );
    }

    #[test]
    fn error_result_becomes_run_error() {
        let events = run(&[
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"result":"API Error: 529 Overloaded"}"#,
        ]);
        assert_eq!(
            events.last(),
            Some(&AguiEvent::RunError {
                message: "API Error: 529 Overloaded".into(),
                code: Some("api_error_529".into()),
                usage: None,
            })
        );
        let events = run(&[
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["a","b"]}"#,
        ]);
        let Some(AguiEvent::RunError { message, code, .. }) = events.last() else {
            panic!("no RUN_ERROR")
        };
        assert_eq!(
            (message.as_str(), code.as_deref()),
            ("a; b", Some("error_max_turns"))
        );
        let events = run(&[
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":[]}"#,
        ]);
        let Some(AguiEvent::RunError { message, code, .. }) = events.last() else {
            panic!("no RUN_ERROR")
        };
        assert_eq!(
            (message.as_str(), code.as_deref()),
            (
                "Claude Code ended the turn with an error (error_during_execution)",
                Some("error_during_execution")
            )
        );
        let events = run(&[r#"{"type":"result","subtype":"success","is_error":true,"result":""}"#]);
        let Some(AguiEvent::RunError { code, .. }) = events.last() else {
            panic!("no RUN_ERROR")
        };
        assert_eq!(code.as_deref(), Some("claude_code_error"));
    }

    #[test]
    fn nothing_after_the_end() {
        let mut t = ClaudeToAgui::new("t", "r", 1);
        assert_eq!(types(&t.start()), ["RUN_STARTED"]);
        assert!(t.start().is_empty());
        let result = parse_line(RESULT_OK).unwrap();
        assert_eq!(types(&t.feed(&result)), ["CUSTOM", "RUN_FINISHED"]);
        assert!(t.is_done());
        assert!(t.feed(&result).is_empty());
        assert!(t.fail("x", "y").is_empty());
        assert!(t.finish().is_empty());
    }

    #[test]
    fn finish_without_result_is_an_error() {
        let mut t = ClaudeToAgui::new("t", "r", 1);
        let events = t.finish();
        assert_eq!(types(&events), ["RUN_STARTED", "RUN_ERROR"]);
        let AguiEvent::RunError { code, .. } = &events[1] else {
            panic!("no RUN_ERROR")
        };
        assert_eq!(code.as_deref(), Some("no_result"));
        assert!(t.finish().is_empty());
    }

    #[test]
    fn feed_before_start_starts_the_run() {
        let mut t = ClaudeToAgui::new("t", "r", 1);
        let events = t.feed(&parse_line(r#"{"type":"keep_alive"}"#).unwrap());
        assert_eq!(types(&events), ["RUN_STARTED"]);
    }

    #[test]
    fn fail_closes_open_streams() {
        let mut t = ClaudeToAgui::new("t", "r", 1);
        let mut events = t.start();
        for line in [
            stream(r#"{"type":"message_start","message":{"id":"m"}}"#),
            stream(
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}}"#,
            ),
            stream(
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            ),
        ] {
            events.extend(t.feed(&parse_line(&line).unwrap()));
        }
        events.extend(t.fail("client went away", "abort"));
        assert_eq!(
            types(&events),
            [
                "RUN_STARTED",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "RUN_ERROR"
            ]
        );
    }

    #[test]
    fn tool_result_text_flattens_blocks() {
        assert_eq!(
            tool_result_text(
                &json!([{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}])
            ),
            "a\n[image]\nb"
        );
        assert_eq!(tool_result_text(&Value::Null), "");
        assert_eq!(tool_result_text(&json!({"k":1})), r#"{"k":1}"#);
    }

    #[test]
    fn control_requests_and_passthrough() {
        let events = run(&[
            r#"{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Write","input":{"file_path":"a"},"tool_use_id":"toolu_9","blocked_path":"/x/a"}}"#,
            r#"{"type":"control_request","request_id":"r2","request":{"subtype":"hook_callback","callback_id":"c"}}"#,
            r#"{"type":"control_cancel_request","request_id":"r1"}"#,
            r#"{"type":"control_response","response":{"subtype":"success","request_id":"req_1"}}"#,
            r#"{"type":"auth_status","isAuthenticating":false}"#,
            r#"{"type":"tool_use_summary","summary":"Read 2 files","preceding_tool_use_ids":["t1"]}"#,
            r#"{"type":"something_new","x":1}"#,
        ]);
        assert_eq!(
            events[1],
            custom(
                "tool_approval_request",
                json!({"requestId":"r1","toolName":"Write","toolUseId":"toolu_9","input":{"file_path":"a"},"blockedPath":"/x/a"})
            )
        );
        assert_eq!(
            events[2],
            custom(
                "hook_callback",
                json!({"requestId":"r2","callbackId":"c","toolUseId":null,"input":null})
            )
        );
        let AguiEvent::Custom { name, value } = &events[3] else {
            panic!("no CUSTOM")
        };
        assert_eq!(name, "claude_code_control_request");
        assert_eq!(value["request_id"], "r2");
        assert_eq!(
            events[4],
            custom("control_cancel_request", json!({"requestId":"r1"}))
        );
        assert_eq!(
            events[5],
            custom("auth_status", json!({"isAuthenticating":false}))
        );
        assert_eq!(
            events[6],
            custom(
                "tool_use_summary",
                json!({"summary":"Read 2 files","preceding_tool_use_ids":["t1"]})
            )
        );
        assert_eq!(
            events[7],
            AguiEvent::Raw {
                event: json!({"type":"something_new","x":1}),
                source: Some("claude-code".into())
            }
        );
        assert_eq!(types(&events)[8], "RUN_ERROR");
    }

    #[test]
    fn replayed_user_messages_produce_nothing() {
        let events = run(&[
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]},"isReplay":true}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}}"#,
        ]);
        let results: Vec<&AguiEvent> = events
            .iter()
            .filter(|e| matches!(e, AguiEvent::ToolCallResult { .. }))
            .collect();
        assert_eq!(results.len(), 1);
        // No uuid: the message id is invented from the seed, deterministically.
        let AguiEvent::ToolCallResult { message_id, .. } = results[0] else {
            panic!()
        };
        assert!(message_id.starts_with("msg_"));
        assert_eq!(
            run(&[
                r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}}"#,
            ])[1],
            *results[0]
        );
    }

    #[test]
    fn subagent_streams_interleave_by_parent_tool_use_id() {
        let sub = |event: &str| {
            format!(
                r#"{{"type":"stream_event","event":{event},"parent_tool_use_id":"toolu_task"}}"#
            )
        };
        let lines = [
            stream(r#"{"type":"message_start","message":{"id":"msg_main"}}"#),
            stream(
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            sub(r#"{"type":"message_start","message":{"id":"msg_sub"}}"#),
            sub(
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            stream(
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"main"}}"#,
            ),
            sub(
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"sub"}}"#,
            ),
            sub(r#"{"type":"content_block_stop","index":0}"#),
            stream(r#"{"type":"content_block_stop","index":0}"#),
            RESULT_OK.to_owned(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let events = run(&lines);
        assert!(events.contains(&text_content("msg_main:0", "main")));
        assert!(events.contains(&text_content("msg_sub:0", "sub")));
    }

    #[test]
    fn usage_falls_back_to_the_total_with_the_init_model() {
        let events = run(&[
            r#"{"type":"system","subtype":"init","model":"claude-x","session_id":"s"}"#,
            RESULT_OK,
        ]);
        let AguiEvent::RunFinished { usage, .. } = events.last().unwrap() else {
            panic!()
        };
        assert_eq!(
            usage.as_ref().unwrap()[0].model.as_deref(),
            Some("claude-x")
        );
    }

    #[test]
    fn a_turn_goes_on_across_runs_after_a_client_tool() {
        let mut t = ClaudeToAgui::new("t", "run-1", 1);
        t.set_client_tool_prefix("mcp__frontend__");
        let mut events = t.start();
        for line in [
            r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_1"}}}"#,
            r#"{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"mcp__frontend__show_card","input":{}}}}"#,
            r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"title\":\"x\"}"}}}"#,
        ] {
            events.extend(t.feed(&parse_line(line).unwrap()));
        }
        // The tool call is the client's: its own name; the run ends with the call closed.
        events.extend(t.suspend());
        let names: Vec<&str> = events.iter().map(AguiEvent::type_name).collect();
        assert_eq!(
            names,
            [
                "RUN_STARTED",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "RUN_FINISHED"
            ]
        );
        assert!(
            matches!(&events[1], AguiEvent::ToolCallStart { tool_call_name, .. } if tool_call_name == "show_card")
        );
        crate::agui::verify::Verifier::check(&events).unwrap();
        assert!(
            t.feed(&parse_line(r#"{"type":"keep_alive"}"#).unwrap())
                .is_empty()
        );

        // The next run: the complete assistant message of the streamed block adds nothing.
        t.begin_run("run-2");
        let mut second = t.start();
        for line in [
            r#"{"type":"assistant","message":{"id":"msg_1","content":[{"type":"tool_use","id":"toolu_1","name":"mcp__frontend__show_card","input":{"title":"x"}}]}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"shown"}"#,
        ] {
            second.extend(t.feed(&parse_line(line).unwrap()));
        }
        let names: Vec<&str> = second.iter().map(AguiEvent::type_name).collect();
        assert_eq!(names, ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]);
        assert!(matches!(&second[0], AguiEvent::RunStarted { run_id, .. } if run_id == "run-2"));
        crate::agui::verify::Verifier::check(&second).unwrap();
    }

    #[test]
    fn an_interrupted_turn_finishes_the_run() {
        let mut t = ClaudeToAgui::new("t", "r", 1);
        let mut events = t.start();
        t.note_interrupt();
        let line = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"result":"[ede_diagnostic] interrupted"}"#;
        events.extend(t.feed(&parse_line(line).unwrap()));
        assert_eq!(
            events.last().map(AguiEvent::type_name),
            Some("RUN_FINISHED")
        );
        // Without the interrupt, the same result is an error.
        let mut t = ClaudeToAgui::new("t", "r", 1);
        let mut events = t.start();
        events.extend(t.feed(&parse_line(line).unwrap()));
        assert_eq!(events.last().map(AguiEvent::type_name), Some("RUN_ERROR"));
    }
}
