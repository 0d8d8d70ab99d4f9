//! The session machine's vocabulary: its limits, what it tells the host ([`Output`]), what the
//! app may set ([`InitOptions`]) and the errors of a run or a control request.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::frontend::{Caller, ToolOutcome};
use crate::agui::events::AguiEvent;

/// Time limits and caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a control request may wait for Claude Code's answer.
    pub control_timeout_ms: u64,
    /// How long an interrupted run may take to end by itself.
    pub interrupt_grace_ms: u64,
    /// How long an abandoned turn may take to print its `result` before the process is killed.
    pub stale_turn_ms: u64,
    /// How long a run's message waits for Claude Code to list the frontend tools again after
    /// they changed (so the turn can call the new ones).
    pub tools_sync_ms: u64,
    /// Control requests that may wait at once.
    pub max_pending_controls: usize,
    /// Runs kept for `agent/connect`.
    pub history_runs: usize,
    /// Events kept for `agent/connect` (whole runs are dropped; never the latest).
    pub history_events: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            control_timeout_ms: 30_000,
            interrupt_grace_ms: 5_000,
            stale_turn_ms: 30_000,
            tools_sync_ms: 3_000,
            max_pending_controls: 32,
            history_runs: 64,
            history_events: 20_000,
        }
    }
}

/// Where a session is in its life (what `GET /sessions` shows).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Status {
    /// No process yet (it starts with the first run).
    #[default]
    Idle,
    /// The process was started; Claude Code has not answered `initialize` yet.
    Starting,
    /// A run is streaming.
    Running,
    /// The process is alive and no run is streaming.
    Ready,
    /// The process exited unexpectedly; the next run restarts it.
    Crashed {
        /// Why.
        reason: String,
    },
    /// Stopped for good.
    Stopped,
}

/// Why a run could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunRefused {
    /// A run is already streaming on the thread.
    Busy(String),
    /// Claude Code could not be started, or the session is gone.
    Failed(String),
}

impl std::fmt::Display for RunRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Busy(m) | Self::Failed(m) => f.write_str(m),
        }
    }
}

/// Why a control request has no answer from Claude Code; each says whose fault it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The request is wrong (the app's to fix).
    #[error("{0}")]
    Invalid(String),
    /// No Claude Code process runs in the session, or it is busy with what the request needs.
    #[error("{0}")]
    NotRunning(String),
    /// Too many requests wait already (retry later).
    #[error("{0}")]
    Busy(String),
    /// Claude Code answered with an error.
    #[error("{0}")]
    Refused(String),
    /// Claude Code did not answer in time.
    #[error("{0}")]
    Timeout(String),
    /// The process ended before it answered.
    #[error("{0}")]
    Lost(String),
}

/// Why the app's answer (to an approval, a hook call, an MCP request) was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The answer has the wrong shape (the app's to fix; the request still waits).
    #[error("{0}")]
    Invalid(String),
    /// Nothing of this kind waits under that id (answered, withdrawn, or the session ended).
    #[error("{0}")]
    NotWaiting(String),
}

/// Answers `can_use_tool` requests without asking the app (the host's auto-approve rules).
pub trait ApprovalPolicy {
    /// Claude Code's answer (`{"behavior":"allow",…}` / `{"behavior":"deny",…}`), if a rule
    /// decides this call.
    fn auto_answer(&self, tool_name: &str, input: &Value) -> Option<Value>;
}

/// No rules: every tool call that is not a frontend tool waits for the app.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRules;

impl ApprovalPolicy for NoRules {
    fn auto_answer(&self, _tool_name: &str, _input: &Value) -> Option<Value> {
        None
    }
}

/// A tool call that waits for the app's approval.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// Claude Code's control request id (the id to answer).
    pub request_id: String,
    /// The tool (`Bash`, `Write`, `mcp__server__tool`, …).
    pub tool_name: String,
    /// The tool call's id in the conversation.
    pub tool_use_id: Option<String>,
    /// What the tool would run with.
    pub input: Value,
    /// Claude Code's description of the call, when it gave one.
    pub description: Option<String>,
}

/// A hook the app registered fired: Claude Code waits for the app's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRequest {
    /// Claude Code's control request id (the id to answer).
    pub request_id: String,
    /// The callback id the bridge gave the hook.
    pub callback_id: String,
    /// The hook event (`PreToolUse`, …), as the app registered it.
    pub hook_event: Option<String>,
    /// The matcher it was registered with.
    pub matcher: Option<String>,
    /// The tool call it is about, if any.
    pub tool_use_id: Option<String>,
    /// The hook input Claude Code sends (`hook_event_name`, `tool_name`, `tool_input`, …).
    pub input: Value,
}

/// A JSON-RPC message from Claude Code for an MCP server the app hosts (one of
/// [`InitOptions::sdk_mcp_servers`]): the app answers it with the JSON-RPC response.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpRequest {
    /// Claude Code's control request id (the id to answer).
    pub request_id: String,
    /// The app's server it is for.
    pub server_name: String,
    /// The JSON-RPC request (`initialize`, `tools/list`, `tools/call`, …).
    pub message: Value,
}

/// How loud a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Worth knowing.
    Info,
    /// Something went wrong.
    Warn,
}

/// What the host must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Write this line (it ends with `\n`) to Claude Code's stdin.
    Write(String),
    /// An AG-UI event of the running run.
    Event(AguiEvent),
    /// The running run ended (its last event was sent): close the client's stream.
    RunEnded,
    /// A control request's answer for its caller.
    ControlDone {
        /// Who asked.
        caller: Caller,
        /// Claude Code's `response`, or why there is none.
        result: Result<Value, ControlError>,
    },
    /// Answer a frontend tool's MCP call.
    ToolAnswer {
        /// The MCP call.
        caller: Caller,
        /// The result.
        outcome: ToolOutcome,
    },
    /// A tool call waits for the app's approval.
    Approval(ApprovalRequest),
    /// A registered hook fired and waits for the app.
    Hook(HookRequest),
    /// A JSON-RPC request for an MCP server the app hosts waits for the app.
    Mcp(McpRequest),
    /// An approval, hook or MCP request no longer waits (Claude Code withdrew it, or exited).
    Withdrawn {
        /// Its request id.
        request_id: String,
    },
    /// The frontend tools changed: tell Claude Code's MCP client
    /// (`notifications/tools/list_changed`).
    ToolsChanged,
    /// Kill the process (then `handle_exited`).
    Kill {
        /// Why.
        reason: String,
    },
    /// A line for the host's log.
    Log {
        /// How loud.
        level: LogLevel,
        /// What.
        message: String,
    },
}

/// A hook registration from the app: which events and tools, and how long Claude Code waits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookMatcher {
    /// Tool name pattern (`Bash`, `Write|Edit`); absent: every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// Seconds Claude Code waits for the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}

/// What the app sets when Claude Code starts (the `initialize` control request).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InitOptions {
    /// Replaces Claude Code's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Appended to Claude Code's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_system_prompt: Option<String>,
    /// Hooks answered by the app, per hook event (`PreToolUse`, `PostToolUse`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hooks: BTreeMap<String, Vec<HookMatcher>>,
    /// MCP servers the app hosts itself: Claude Code sends their JSON-RPC requests through the
    /// bridge (`mcp_message`), and the app answers them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sdk_mcp_servers: Vec<String>,
}
