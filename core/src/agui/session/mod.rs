//! One AG-UI thread's Claude Code session, as a sans-IO state machine.
//!
//! The host owns the process, its pipes, the HTTP connections and the clock. It tells the
//! machine what happened (`handle_*`, with the time in milliseconds) and carries out the
//! [`Output`]s it polls: lines to write to Claude Code's stdin, AG-UI events for the running
//! run, answers for the callers waiting on a control request or an MCP call, approvals and hook
//! calls for the app, and a process to kill. The machine decides the rest:
//!
//! - **control requests** get an id, are answered by Claude Code's `control_response` with that
//!   id, fail after the control timeout (Claude Code is then told with a
//!   `control_cancel_request`), and are withdrawn the same way when their caller goes away;
//! - **`can_use_tool`**: frontend tools are always allowed (the client runs them), an
//!   [`ApprovalPolicy`] may answer, anything else waits for the app ([`Output::Approval`]);
//! - **hooks** the app registered ([`InitOptions::hooks`]) reach it as [`Output::Hook`];
//! - **frontend tools** are bound to their streamed calls ([`frontend`]);
//! - **interrupt**: the run may take a grace period to end by itself; after it the run ends
//!   (`RUN_FINISHED`) and whatever the abandoned turn still prints, up to its `result`, is
//!   dropped, so it is never credited to the next run; the next run's message waits for that
//!   `result`, and a turn that never ends gets the process killed;
//! - **settings** (`set_model`, `set_permission_mode`, `set_max_thinking_tokens`,
//!   `mcp_set_servers`) and environment updates are replayed to a restarted process;
//! - **history** for `agent/connect` is capped ([`history`]).
//!
//! ```text
//!                 handle_spawned             handle_run                 RUN_FINISHED / RUN_ERROR
//!   NotStarted ───────────────► Alive/idle ─────────────► Alive/running ──────────────────────► Alive/idle
//!       ▲                        │  ▲                         │
//!       │ handle_stopped         │  └── handle_spawned ──┐    │ handle_exited (the run fails)
//!       │ (restart)              ▼                       │    ▼
//!       └─────────────────── (any) ──handle_exited──► Crashed ──► (the next run respawns, --resume)
//!                                  ──handle_stopped(for good)──► Stopped
//!
//!   a turn:  Closed ──user line──► Open ──result──► Closed
//!                                   │ interrupt grace over
//!                                   ▼
//!                                Abandoned ──result (dropped)──► Closed (the held line is written)
//!                                   │ stale-turn limit
//!                                   ▼
//!                                Output::Kill
//! ```
//!
//! ```
//! use bridge_core::agui::input::RunAgentInput;
//! use bridge_core::agui::session::{AguiSession, Limits, NoRules, Output};
//!
//! let mut s = AguiSession::new("thread-1", 7, Limits::default(), None);
//! s.handle_spawned(0, None);
//! let init = s.poll_output();
//! assert!(matches!(&init, Some(Output::Write(line)) if line.contains("\"initialize\"")));
//! let input: RunAgentInput = serde_json::from_str(
//!     r#"{"threadId":"thread-1","runId":"run-1","messages":[{"id":"u1","role":"user","content":"Hi"}]}"#,
//! ).unwrap();
//! s.handle_run(&input, 1).unwrap();
//! let outputs: Vec<Output> = std::iter::from_fn(|| s.poll_output()).collect();
//! assert!(matches!(&outputs[0], Output::Event(e) if e.type_name() == "RUN_STARTED"));
//! assert!(matches!(&outputs[1], Output::Write(line) if line.contains("\"Hi\"")));
//! s.handle_line(r#"{"type":"result","subtype":"success","is_error":false,"result":"Hello"}"#, 2, &NoRules);
//! let outputs: Vec<Output> = std::iter::from_fn(|| s.poll_output()).collect();
//! assert!(matches!(outputs.last(), Some(Output::RunEnded)));
//! ```

pub mod frontend;
pub mod history;
pub mod totals;
mod types;

use std::collections::{BTreeMap, VecDeque};

use serde_json::{Map, Value, json};

use crate::agui::claude::{ClaudeMessage, ControlRequest, parse_line};
use crate::agui::events::AguiEvent;
use crate::agui::input::{self, InputOptions, RunAgentInput, Tool};
use crate::agui::translate::ClaudeToAgui;
use crate::ids::IdSource;
pub use frontend::{Binding, Called, Caller, Routed, ToolOutcome};
use history::History;
pub use types::{
    AnswerError, ApprovalPolicy, ApprovalRequest, ControlError, HookMatcher, HookRequest,
    InitOptions, Limits, LogLevel, McpRequest, NoRules, Output, RunRefused, Status,
};

/// The MCP server name under which frontend tools are offered to Claude Code.
pub const FRONTEND_SERVER: &str = "frontend";
/// The prefix Claude Code gives the frontend tools.
pub const FRONTEND_PREFIX: &str = "mcp__frontend__";

/// Control requests whose latest value is sent again to a restarted process.
const REPLAYED: [&str; 4] = [
    "set_model",
    "set_permission_mode",
    "set_max_thinking_tokens",
    "mcp_set_servers",
];

/// A control request on its way.
#[derive(Debug, Clone)]
struct PendingControl {
    /// `None`: the session's own (initialize, settings).
    caller: Option<Caller>,
    subtype: String,
    deadline: u64,
    /// A setting to replay to a restarted process once Claude Code accepted it.
    setting: Option<Value>,
    /// `update_environment_variables`: the variables asked for (kept once Claude Code answered).
    variables: BTreeMap<String, String>,
}

/// What Claude Code asked and the app must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaiting {
    Approval,
    Hook,
    Mcp,
}

/// The process, as far as the machine knows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Process {
    NotStarted,
    Alive {
        /// Claude Code answered `initialize` (or said `system/init`).
        ready: bool,
    },
    Crashed(String),
    Stopped,
}

/// The Claude Code turn the latest user line started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    Closed,
    Open,
    /// Its run ended after an interrupt; its output is dropped up to its `result`.
    Abandoned {
        until: u64,
    },
}

/// One thread's session: see the module docs.
#[derive(Debug)]
pub struct AguiSession {
    thread_id: String,
    seed: u64,
    limits: Limits,
    process: Process,
    turn: Turn,
    /// The next run's user line, written once the abandoned turn ended and Claude Code listed
    /// the changed frontend tools.
    held: Option<String>,
    /// Claude Code was told the frontend tools changed and has not listed them yet (deadline).
    tools_sync: Option<u64>,
    /// The run sent no message: it waits for Claude Code to go on with this many results.
    answers_awaited: usize,
    /// The running run, with its interrupt deadline.
    run: Option<Option<u64>>,
    /// One translator for the thread: it remembers which blocks were streamed across runs.
    translator: Option<ClaudeToAgui>,
    controls: BTreeMap<String, PendingControl>,
    next_request: u64,
    awaiting: BTreeMap<String, Awaiting>,
    frontend: Binding,
    tools: Vec<Tool>,
    settings: BTreeMap<String, Value>,
    environment: BTreeMap<String, String>,
    /// Variables Claude Code cannot take while running: the process restarts before the next run.
    restart_wanted: bool,
    /// The `frontend` MCP server's config (kept in every `mcp_set_servers`).
    frontend_server: Option<Value>,
    init: InitOptions,
    /// callback id → (hook event, matcher).
    hook_ids: BTreeMap<String, (String, Option<String>)>,
    claude_session: Option<String>,
    /// `system/init`'s fields.
    capabilities: Option<Map<String, Value>>,
    /// The `initialize` answer (commands, models, account, …).
    initialized: Option<Map<String, Value>>,
    /// AG-UI user message id → the `uuid` its Claude Code user line carried.
    message_uuids: BTreeMap<String, String>,
    uuids: IdSource,
    history: History,
    /// Cost, turns and tokens across the thread's runs.
    totals: totals::Totals,
    /// Claude Code is compacting the conversation (its `status` said so).
    compacting: bool,
    outputs: VecDeque<Output>,
}

impl AguiSession {
    /// A session of `thread_id` with no process yet. `seed` seeds the ids it invents;
    /// `resume`: Claude Code's session id of an earlier process of this thread.
    #[must_use]
    ///
    /// The `uuid`s of the user lines (what `rewind_files` and Claude Code's transcript know them
    /// by) come from [`Self::seed_uuids`]; give it real randomness, so a resumed conversation
    /// never sees one twice.
    pub fn new(thread_id: &str, seed: u64, limits: Limits, resume: Option<String>) -> Self {
        Self {
            thread_id: thread_id.to_owned(),
            seed,
            limits,
            process: Process::NotStarted,
            turn: Turn::Closed,
            held: None,
            tools_sync: None,
            answers_awaited: 0,
            run: None,
            translator: None,
            controls: BTreeMap::new(),
            next_request: 0,
            awaiting: BTreeMap::new(),
            frontend: Binding::default(),
            tools: Vec::new(),
            settings: BTreeMap::new(),
            environment: BTreeMap::new(),
            restart_wanted: false,
            frontend_server: None,
            init: InitOptions::default(),
            hook_ids: BTreeMap::new(),
            claude_session: resume,
            capabilities: None,
            initialized: None,
            message_uuids: BTreeMap::new(),
            uuids: IdSource::new(seed ^ 0x5EED_0F0A_6100_0001),
            history: History::new(limits.history_runs, limits.history_events),
            totals: totals::Totals::default(),
            compacting: false,
            outputs: VecDeque::new(),
        }
    }

    // ----- reads -----

    /// The next thing to do.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When `handle_timeout` must be called next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        let controls = self.controls.values().map(|c| c.deadline);
        let interrupt = self.run.flatten();
        let stale = match self.turn {
            Turn::Abandoned { until } => Some(until),
            _ => None,
        };
        controls
            .chain(interrupt)
            .chain(stale)
            .chain(self.tools_sync)
            .min()
    }

    /// The session's status.
    #[must_use]
    pub fn status(&self) -> Status {
        match &self.process {
            Process::NotStarted => Status::Idle,
            Process::Crashed(reason) => Status::Crashed {
                reason: reason.clone(),
            },
            Process::Stopped => Status::Stopped,
            Process::Alive { .. } if self.run.is_some() => Status::Running,
            Process::Alive { ready: false } => Status::Starting,
            Process::Alive { ready: true } => Status::Ready,
        }
    }

    /// Whether the process runs (the host must spawn one before a run otherwise).
    #[must_use]
    pub fn is_alive(&self) -> bool {
        matches!(self.process, Process::Alive { .. })
    }

    /// Whether a run is streaming.
    #[must_use]
    pub fn is_running(&self) -> bool {
        self.run.is_some()
    }

    /// Seed the `uuid`s of the user lines.
    pub fn seed_uuids(&mut self, seed: u64) {
        self.uuids = IdSource::new(seed);
    }

    /// Whether the process should restart (resuming) before the next run: the app set
    /// environment variables Claude Code only reads at start.
    #[must_use]
    pub fn needs_restart(&self) -> bool {
        self.restart_wanted && self.is_alive() && self.can_restart()
    }

    /// Whether the process may be restarted without losing anything: no run streams, no turn
    /// is under way and no frontend tool call waits for the client.
    #[must_use]
    pub fn can_restart(&self) -> bool {
        self.run.is_none() && self.turn == Turn::Closed && !self.waits_for_client()
    }

    /// The config of the host's `frontend` MCP server (as in `--mcp-config`): an app's
    /// `mcp_set_servers` replaces Claude Code's whole set, so this one is added to each.
    pub fn set_frontend_server(&mut self, config: Value) {
        self.frontend_server = Some(config);
    }

    /// Claude Code's session id (from `system/init`, or the one to resume).
    #[must_use]
    pub fn claude_session_id(&self) -> Option<&str> {
        self.claude_session.as_deref()
    }

    /// The frontend tools the client registered in its latest run.
    #[must_use]
    pub fn frontend_tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Whether Claude Code waits for a frontend tool's result (the session must not be evicted).
    #[must_use]
    pub fn waits_for_client(&self) -> bool {
        self.frontend.waits_for_client()
    }

    /// Variables the app set with `update_environment_variables` (a restarted process gets them).
    #[must_use]
    pub fn environment(&self) -> &BTreeMap<String, String> {
        &self.environment
    }

    /// The options the next `initialize` carries.
    #[must_use]
    pub fn init_options(&self) -> &InitOptions {
        &self.init
    }

    /// The thread's runs, valid to replay (`agent/connect`).
    #[must_use]
    pub fn replay(&self) -> Vec<AguiEvent> {
        self.history.replay()
    }

    /// What Claude Code said it can do: `system/init`'s fields (tools, slash commands, agents,
    /// skills, MCP servers, plugins, permission mode, model, …) and the `initialize` answer's
    /// (commands, models, account, output styles). `null` before either came.
    #[must_use]
    pub fn capabilities(&self) -> Value {
        let mut merged = self.capabilities.clone().unwrap_or_default();
        for (key, value) in self.initialized.iter().flatten() {
            merged.entry(key.clone()).or_insert_with(|| value.clone());
        }
        if self.capabilities.is_none() && self.initialized.is_none() {
            Value::Null
        } else {
            Value::Object(merged)
        }
    }

    /// The agent state `STATE_SNAPSHOT` carries: the capabilities, the thread's running
    /// `totals` (runs, turns, cost, tokens; see [`totals`]) and whether Claude Code is
    /// `compacting` the conversation.
    #[must_use]
    pub fn state(&self) -> Value {
        let mut state = match self.capabilities() {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        state.insert(String::from("totals"), self.totals.to_json());
        state.insert(String::from("compacting"), Value::Bool(self.compacting));
        Value::Object(state)
    }

    /// Everything `GET /sessions/{threadId}` shows.
    #[must_use]
    pub fn describe(&self) -> Value {
        json!({
            "threadId": self.thread_id,
            "claudeSessionId": self.claude_session,
            "status": self.status(),
            "capabilities": self.capabilities(),
            "totals": self.totals.to_json(),
            "compacting": self.compacting,
            "settings": self.settings.values().collect::<Vec<_>>(),
            "environment": self.environment.keys().collect::<Vec<_>>(),
            "initialize": self.init,
            "frontendTools": self.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            "pendingControls": self.controls.values().map(|c| c.subtype.as_str()).collect::<Vec<_>>(),
            "waitingForApp": self.awaiting.keys().collect::<Vec<_>>(),
            "history": {
                "runs": self.history.runs(),
                "events": self.history.events(),
                "droppedRuns": self.history.dropped_runs(),
            },
        })
    }

    // ----- the process -----

    /// The host started Claude Code: `initialize` (answered to `caller`, if one waits) and the
    /// remembered settings go first.
    pub fn handle_spawned(&mut self, now: u64, caller: Option<Caller>) {
        self.process = Process::Alive { ready: false };
        self.restart_wanted = false;
        self.turn = Turn::Closed;
        self.held = None;
        let initialize = self.initialize_request();
        self.send_control(caller, initialize, now);
        for request in self.settings.values().cloned().collect::<Vec<_>>() {
            self.send_control(None, request, now);
        }
    }

    /// Claude Code could not be started.
    pub fn handle_spawn_failed(&mut self, reason: &str, _now: u64) {
        self.process = Process::Crashed(reason.to_owned());
    }

    /// Claude Code's stdout closed or it could not be written to: the process is gone.
    pub fn handle_exited(&mut self, reason: &str, _now: u64) {
        if matches!(self.process, Process::Stopped) {
            return;
        }
        self.lost(reason);
        self.process = Process::Crashed(reason.to_owned());
    }

    /// The host killed the process on purpose: for good (`Stopped`), or to start it again
    /// with new options (the next run or `initialize` respawns it).
    pub fn handle_stopped(&mut self, reason: &str, for_good: bool, _now: u64) {
        self.lost(reason);
        self.restart_wanted = false;
        self.process = if for_good {
            Process::Stopped
        } else {
            Process::NotStarted
        };
    }

    /// Options for the next `initialize`. They apply when the process (re)starts.
    ///
    /// # Errors
    /// A hook event name that is empty.
    pub fn set_init_options(&mut self, options: InitOptions) -> Result<(), String> {
        if options.hooks.keys().any(|k| k.trim().is_empty()) {
            return Err(String::from(
                "`hooks` maps hook event names (PreToolUse, PostToolUse, …) to matchers",
            ));
        }
        if let Some(bad) = options
            .sdk_mcp_servers
            .iter()
            .find(|n| n.trim().is_empty() || *n == FRONTEND_SERVER)
        {
            return Err(format!(
                "`sdkMcpServers`: {bad:?} cannot name an app's MCP server (`{FRONTEND_SERVER}` is the bridge's)"
            ));
        }
        self.init = options;
        Ok(())
    }

    fn initialize_request(&mut self) -> Value {
        self.hook_ids.clear();
        let mut hooks = Map::new();
        let mut n = 0;
        for (event, matchers) in &self.init.hooks {
            let mut list = Vec::new();
            for m in matchers {
                let id = format!("hook_{n}");
                n += 1;
                self.hook_ids
                    .insert(id.clone(), (event.clone(), m.matcher.clone()));
                let mut entry = Map::new();
                if let Some(matcher) = &m.matcher {
                    entry.insert("matcher".into(), Value::String(matcher.clone()));
                }
                entry.insert("hookCallbackIds".into(), json!([id]));
                if let Some(timeout) = m.timeout {
                    entry.insert("timeout".into(), json!(timeout));
                }
                list.push(Value::Object(entry));
            }
            hooks.insert(event.clone(), Value::Array(list));
        }
        let mut request = json!({
            "subtype": "initialize",
            "hooks": if hooks.is_empty() { Value::Null } else { Value::Object(hooks) },
        });
        if let Some(prompt) = &self.init.system_prompt {
            request["systemPrompt"] = Value::String(prompt.clone());
        }
        if let Some(prompt) = &self.init.append_system_prompt {
            request["appendSystemPrompt"] = Value::String(prompt.clone());
        }
        // Claude Code records a session's system prompt on its first request and reuses the
        // record on every `--resume` (the app's prompt would be ignored after a restart), unless
        // each process of the thread is told not to.
        if self.init.system_prompt.is_some() || self.init.append_system_prompt.is_some() {
            request["systemPromptSnapshot"] = Value::Bool(false);
        }
        if !self.init.sdk_mcp_servers.is_empty() {
            request["sdkMcpServers"] = json!(self.init.sdk_mcp_servers);
        }
        request
    }

    // ----- runs -----

    /// Whether a run could start now.
    ///
    /// # Errors
    /// [`RunRefused::Busy`] while a run streams.
    pub fn check_run(&self) -> Result<(), RunRefused> {
        if self.run.is_some() {
            return Err(RunRefused::Busy(format!(
                "a run is already streaming on thread {} (stop it with agent/stop first)",
                self.thread_id
            )));
        }
        if matches!(self.process, Process::Stopped) {
            return Err(RunRefused::Failed(String::from("the session was stopped")));
        }
        Ok(())
    }

    /// Start a run (the host spawned the process first if it was not alive).
    ///
    /// # Errors
    /// A run is streaming already, or no process runs.
    pub fn handle_run(&mut self, input: &RunAgentInput, now: u64) -> Result<(), RunRefused> {
        self.check_run()?;
        if !self.is_alive() {
            return Err(RunRefused::Failed(String::from(
                "Claude Code is not running in this session",
            )));
        }
        if self.tools != input.tools {
            let had = !self.tools.is_empty() || self.history.runs() > 0;
            self.tools.clone_from(&input.tools);
            if had {
                self.outputs.push_back(Output::ToolsChanged);
                self.tools_sync = Some(now + self.limits.tools_sync_ms);
            }
        }
        // Results for frontend tool calls Claude Code waits on answer those calls.
        let mut answered = 0;
        let mut routed = Vec::new();
        for result in input::tool_results(input) {
            let outcome = ToolOutcome {
                content: result.content,
                is_error: result.is_error,
            };
            match self.frontend.result(&result.tool_call_id, outcome.clone()) {
                Routed::Answered(caller) => {
                    self.outputs
                        .push_back(Output::ToolAnswer { caller, outcome });
                    answered += 1;
                    routed.push(result.tool_call_id);
                }
                Routed::Kept | Routed::Dropped => routed.push(result.tool_call_id),
                Routed::NotOurs => {}
            }
        }
        let message = input::to_claude_user_message(
            input,
            &InputOptions {
                mcp_server_name: FRONTEND_SERVER.to_owned(),
                exclude_tool_call_ids: routed,
            },
        )
        .map(|mut line| {
            let uuid = self.user_uuid(input);
            line["uuid"] = Value::String(uuid);
            line
        });
        let seed = self.seed;
        let translator = self.translator.get_or_insert_with(|| {
            let mut t = ClaudeToAgui::new(&input.thread_id, &input.run_id, seed);
            t.set_client_tool_prefix(FRONTEND_PREFIX);
            t
        });
        translator.begin_run(&input.run_id);
        let mut first = translator.start();
        for event in &mut first {
            if let AguiEvent::RunStarted { input: started, .. } = event {
                *started = run_started_input(input);
            }
        }
        self.run = Some(None);
        self.emit(first);
        if self.capabilities.is_some() || self.initialized.is_some() {
            self.emit(vec![AguiEvent::StateSnapshot {
                snapshot: self.capabilities(),
            }]);
        }
        self.apply_forwarded_props(&input.forwarded_props, now);
        match message {
            Some(line) => {
                if matches!(self.turn, Turn::Abandoned { .. }) {
                    self.log(
                        LogLevel::Info,
                        "the run's message waits for the interrupted turn to end",
                    );
                }
                self.held = Some(line_of(&line));
                self.release_held();
            }
            // Nothing new for Claude Code: the run ends at once.
            None if answered == 0 => self.translate(ClaudeToAgui::suspend),
            // Claude Code goes on with the tool results it got.
            None => self.answers_awaited = answered,
        }
        Ok(())
    }

    /// The `uuid` of the run's user line: a fresh one per run, remembered under the AG-UI id of
    /// the run's last user message (what `rewind_files` is given).
    fn user_uuid(&mut self, input: &RunAgentInput) -> String {
        let uuid = self.uuids.next_uuid();
        let last_user = input::new_messages(input)
            .iter()
            .rev()
            .find(|m| matches!(m, input::Message::User(_)))
            .map(|m| m.id().to_owned());
        if let Some(id) = last_user {
            self.message_uuids.insert(id, uuid.clone());
        }
        uuid
    }

    /// `forwardedProps.model` / `.permissionMode` / `.maxThinkingTokens` switch the session
    /// before the turn (the stdin order makes them apply first).
    fn apply_forwarded_props(&mut self, props: &Value, now: u64) {
        let requests = [
            props
                .get("model")
                .filter(|m| m.is_string())
                .map(|m| json!({"subtype": "set_model", "model": m})),
            props
                .get("permissionMode")
                .and_then(Value::as_str)
                .map(|m| json!({"subtype": "set_permission_mode", "mode": m})),
            props
                .get("maxThinkingTokens")
                .and_then(Value::as_u64)
                .map(|n| json!({"subtype": "set_max_thinking_tokens", "max_thinking_tokens": n})),
        ];
        for request in requests.into_iter().flatten() {
            self.send_control(None, request, now);
        }
    }

    // ----- Claude Code's output -----

    /// One line of Claude Code's stdout.
    pub fn handle_line(&mut self, line: &str, now: u64, policy: &dyn ApprovalPolicy) {
        let Ok(message) = parse_line(line) else {
            return;
        };
        match &message {
            ClaudeMessage::ControlRequest(request) if !self.control_request(request, policy) => {
                return;
            }
            ClaudeMessage::ControlResponse(m) => {
                self.control_response(&m.raw);
                return;
            }
            ClaudeMessage::ControlCancelRequest(m) => {
                if let Some(id) = m.raw.get("request_id").and_then(Value::as_str)
                    && self.awaiting.remove(id).is_some()
                {
                    self.outputs.push_back(Output::Withdrawn {
                        request_id: id.to_owned(),
                    });
                }
            }
            ClaudeMessage::System(m) if m.subtype == "init" => {
                if let Some(id) = m.raw.get("session_id").and_then(Value::as_str) {
                    self.claude_session = Some(id.to_owned());
                }
                if let Value::Object(fields) = m.fields() {
                    self.capabilities = Some(fields);
                }
                self.process = Process::Alive { ready: true };
            }
            ClaudeMessage::System(m) if m.subtype == "status" => {
                if let (Some(mode), Some(caps)) =
                    (m.raw.get("permissionMode"), self.capabilities.as_mut())
                {
                    caps.insert("permissionMode".into(), mode.clone());
                }
            }
            ClaudeMessage::Result(_) => {
                if let Turn::Abandoned { .. } = self.turn {
                    self.turn = Turn::Closed;
                    self.log(
                        LogLevel::Info,
                        "the interrupted turn ended; its result is not credited to any run",
                    );
                    self.release_held();
                    return;
                }
                self.turn = Turn::Closed;
            }
            _ => {}
        }
        if matches!(self.turn, Turn::Abandoned { .. }) {
            return; // the abandoned turn's output belongs to no run
        }
        if self.run.is_some() {
            self.translate(|t| t.feed(&message));
        }
        let _ = now;
    }

    /// Claude Code asks the host. Returns whether the client should see the request.
    fn control_request(&mut self, request: &ControlRequest, policy: &dyn ApprovalPolicy) -> bool {
        let id = request.request_id.clone();
        let field = |key: &str| request.request.get(key).cloned().unwrap_or(Value::Null);
        let text = |key: &str| {
            request
                .request
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match request.subtype.as_str() {
            "can_use_tool" => {
                let tool_name = text("tool_name").unwrap_or_default();
                let input = request
                    .request
                    .get("input")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                let automatic = if tool_name.starts_with(FRONTEND_PREFIX) {
                    Some(json!({"behavior": "allow", "updatedInput": input}))
                } else {
                    policy.auto_answer(&tool_name, &input)
                };
                if let Some(answer) = automatic {
                    self.log(
                        LogLevel::Info,
                        &format!(
                            "tool call {tool_name} answered by a rule: {}",
                            answer["behavior"]
                        ),
                    );
                    self.respond(&id, Ok(answer));
                    return false;
                }
                self.awaiting.insert(id.clone(), Awaiting::Approval);
                self.outputs.push_back(Output::Approval(ApprovalRequest {
                    request_id: id,
                    tool_name,
                    tool_use_id: text("tool_use_id"),
                    input,
                    description: text("description"),
                }));
                true
            }
            "hook_callback" => {
                let callback_id = text("callback_id").unwrap_or_default();
                let (hook_event, matcher) = self
                    .hook_ids
                    .get(&callback_id)
                    .cloned()
                    .map_or((None, None), |(e, m)| (Some(e), m));
                self.awaiting.insert(id.clone(), Awaiting::Hook);
                self.outputs.push_back(Output::Hook(HookRequest {
                    request_id: id,
                    callback_id,
                    hook_event,
                    matcher,
                    tool_use_id: text("tool_use_id"),
                    input: field("input"),
                }));
                true
            }
            "mcp_message" => {
                let server_name = text("server_name").unwrap_or_default();
                let message = field("message");
                if !self.init.sdk_mcp_servers.contains(&server_name) {
                    self.respond(
                        &id,
                        Err(format!("no app MCP server is named {server_name:?}")),
                    );
                    return false;
                }
                if message.get("id").is_none_or(Value::is_null) {
                    // A notification (`notifications/initialized`, …): nothing for the app to say.
                    self.respond(
                        &id,
                        Ok(json!({"mcp_response": {"jsonrpc": "2.0", "result": {}, "id": 0}})),
                    );
                    return false;
                }
                self.awaiting.insert(id.clone(), Awaiting::Mcp);
                self.outputs.push_back(Output::Mcp(McpRequest {
                    request_id: id,
                    server_name,
                    message,
                }));
                true
            }
            other => {
                let message =
                    format!("claude-bridge does not serve `{other}` requests from Claude Code");
                self.log(LogLevel::Warn, &message);
                self.respond(&id, Err(message));
                true
            }
        }
    }

    fn control_response(&mut self, raw: &Value) {
        let response = raw.get("response").cloned().unwrap_or(Value::Null);
        let id = response
            .get("request_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(pending) = self.controls.remove(id) else {
            return;
        };
        let result = if response.get("subtype").and_then(Value::as_str) == Some("error") {
            Err(ControlError::Refused(
                response
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("Claude Code refused the request")
                    .to_owned(),
            ))
        } else {
            Ok(response.get("response").cloned().unwrap_or(Value::Null))
        };
        // What Claude Code accepted is what a restarted process gets again.
        if result.is_ok()
            && let Some(setting) = pending.setting
        {
            self.settings.insert(pending.subtype.clone(), setting);
        }
        let result = match (pending.subtype.as_str(), result) {
            ("update_environment_variables", Ok(answer)) => {
                Ok(self.environment_answer(pending.variables, &answer))
            }
            (_, result) => result,
        };
        if pending.subtype == "initialize" {
            if let Ok(Value::Object(answer)) = &result {
                self.initialized = Some(answer.clone());
            }
            if let Process::Alive { ready } = &mut self.process {
                *ready = true;
            }
            if let Err(e) = &result {
                self.log(
                    LogLevel::Warn,
                    &format!("Claude Code refused initialize: {e}"),
                );
            }
        }
        match pending.caller {
            Some(caller) => self
                .outputs
                .push_back(Output::ControlDone { caller, result }),
            None => {
                if let Err(e) = result {
                    self.log(
                        LogLevel::Warn,
                        &format!("Claude Code refused {}: {e}", pending.subtype),
                    );
                }
            }
        }
    }

    /// Write the held user line once nothing holds it any more.
    fn release_held(&mut self) {
        if matches!(self.turn, Turn::Abandoned { .. }) || self.tools_sync.is_some() {
            return;
        }
        if let Some(line) = self.held.take() {
            self.turn = Turn::Open;
            self.outputs.push_back(Output::Write(line));
        }
    }

    /// Claude Code listed the frontend tools (`tools/list` on the MCP server), or nobody is
    /// connected to be told they changed: the run's message may go.
    pub fn handle_tools_listed(&mut self, _now: u64) {
        if self.tools_sync.take().is_some() {
            self.release_held();
        }
    }

    // ----- the app's requests -----

    /// A control request from the app (`{"subtype": …, …}`); its answer comes as
    /// [`Output::ControlDone`] for `caller`.
    pub fn handle_control(&mut self, caller: Caller, request: Value, now: u64) {
        let done = |result| Output::ControlDone { caller, result };
        if !self.is_alive() {
            self.outputs
                .push_back(done(Err(ControlError::NotRunning(String::from(
                    "Claude Code is not running in this session (start a run first)",
                )))));
            return;
        }
        let subtype = request
            .get("subtype")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match subtype.as_str() {
            "update_environment_variables" => {
                if let Err(e) = self.update_environment(caller, &request, now) {
                    self.outputs.push_back(done(Err(e)));
                }
                return;
            }
            "mcp_set_servers" => {
                match self.with_frontend_server(request) {
                    Ok(request) => {
                        self.send_checked(caller, request, now);
                    }
                    Err(e) => self.outputs.push_back(done(Err(ControlError::Invalid(e)))),
                }
                return;
            }
            "rewind_files" => {
                let mut request = request;
                if let Some(uuid) = request
                    .get("user_message_id")
                    .and_then(Value::as_str)
                    .and_then(|id| self.message_uuids.get(id))
                {
                    request["user_message_id"] = Value::String(uuid.clone());
                }
                self.send_checked(caller, request, now);
                return;
            }
            "interrupt" if self.run.is_some() => {
                if self.held.take().is_some() {
                    // The run's message never went: nothing of it runs in Claude Code.
                    self.log(
                        LogLevel::Info,
                        "the run was stopped before its message went to Claude Code",
                    );
                    self.translate(ClaudeToAgui::suspend);
                    self.outputs.push_back(done(Ok(Value::Null)));
                } else if self.send_checked(caller, request, now) {
                    // The grace starts once the interrupt is on its way.
                    if let Some(t) = self.translator.as_mut() {
                        t.note_interrupt();
                    }
                    self.run = Some(Some(now + self.limits.interrupt_grace_ms));
                }
                return;
            }
            _ => {}
        }
        self.send_checked(caller, request, now);
    }

    /// Send the app's request unless too many wait; returns whether it went.
    fn send_checked(&mut self, caller: Caller, request: Value, now: u64) -> bool {
        if let Err(busy) = self.room_for_control() {
            self.outputs.push_back(Output::ControlDone {
                caller,
                result: Err(busy),
            });
            return false;
        }
        self.send_control(Some(caller), request, now);
        true
    }

    /// Whether another control request may wait for Claude Code.
    fn room_for_control(&self) -> Result<(), ControlError> {
        if self.controls.len() < self.limits.max_pending_controls {
            return Ok(());
        }
        Err(ControlError::Busy(format!(
            "{} control requests already wait for Claude Code; retry when they are answered",
            self.controls.len()
        )))
    }

    /// The id of the next request the bridge sends Claude Code.
    fn next_control_id(&mut self) -> String {
        self.next_request += 1;
        format!("req_{}_{}", self.next_request, self.seed % 100_000)
    }

    /// `{"subtype":"update_environment_variables","variables":{NAME: value}}`. Claude Code
    /// takes a few variables while running (its auth tokens: the `applied` list of its answer);
    /// every variable is kept for the process environment, so when some were not applied the
    /// process restarts (resuming the conversation) before the next run.
    fn update_environment(
        &mut self,
        caller: Caller,
        request: &Value,
        now: u64,
    ) -> Result<(), ControlError> {
        let Some(variables) = request.get("variables").and_then(Value::as_object) else {
            return Err(ControlError::Invalid(String::from(
                "`variables` must be an object of NAME: \"value\" strings",
            )));
        };
        let mut set = BTreeMap::new();
        for (name, value) in variables {
            let Some(value) = value.as_str() else {
                return Err(ControlError::Invalid(format!(
                    "variable {name}: the value must be a string"
                )));
            };
            if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0')
            {
                return Err(ControlError::Invalid(format!(
                    "variable {name:?}: not a valid environment variable"
                )));
            }
            set.insert(name.clone(), value.to_owned());
        }
        self.room_for_control()?;
        let id = self.next_control_id();
        let line =
            json!({"type": "update_environment_variables", "variables": set, "request_id": id});
        self.outputs.push_back(Output::Write(line_of(&line)));
        self.controls.insert(
            id,
            PendingControl {
                caller: Some(caller),
                subtype: String::from("update_environment_variables"),
                deadline: now + self.limits.control_timeout_ms,
                setting: None,
                variables: set,
            },
        );
        Ok(())
    }

    /// Claude Code's answer to `update_environment_variables`: what it did not apply waits for
    /// a restart.
    fn environment_answer(&mut self, variables: BTreeMap<String, String>, answer: &Value) -> Value {
        let applied: Vec<&str> = answer
            .get("applied")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let later: Vec<String> = variables
            .keys()
            .filter(|n| !applied.contains(&n.as_str()))
            .cloned()
            .collect();
        self.environment.extend(variables);
        if !later.is_empty() {
            self.restart_wanted = true;
        }
        json!({
            "applied": applied,
            "atNextRun": later,
            "message": if later.is_empty() {
                "Claude Code applied every variable"
            } else {
                "Claude Code reads these only when it starts: it restarts before the next run, resuming the conversation"
            },
        })
    }

    /// `mcp_set_servers` replaces every server Claude Code was given, `--mcp-config`'s
    /// included: the bridge's `frontend` server is added to the set.
    fn with_frontend_server(&self, mut request: Value) -> Result<Value, String> {
        let Some(servers) = request.get_mut("servers").and_then(Value::as_object_mut) else {
            return Err(String::from(
                "`servers` must be an object of name: MCP server config ({\"type\":\"http\",\"url\":…} or {\"command\":…})",
            ));
        };
        if servers.contains_key(FRONTEND_SERVER) {
            return Err(format!(
                "the MCP server name `{FRONTEND_SERVER}` is the bridge's (the app's own tools); choose another name"
            ));
        }
        if let Some(config) = &self.frontend_server {
            servers.insert(FRONTEND_SERVER.to_owned(), config.clone());
        }
        Ok(request)
    }

    /// The caller of a control request went away: Claude Code is told
    /// (`control_cancel_request`) and the answer is not awaited.
    pub fn handle_withdraw(&mut self, caller: Caller, _now: u64) {
        let found = self
            .controls
            .iter()
            .find(|(_, c)| c.caller == Some(caller))
            .map(|(id, _)| id.clone());
        if let Some(id) = found {
            self.controls.remove(&id);
            self.cancel(&id);
        }
    }

    /// The app's answer to a tool approval.
    ///
    /// # Errors
    /// No approval of this session waits under `request_id`.
    pub fn handle_approval(&mut self, request_id: &str, answer: Value) -> Result<(), AnswerError> {
        self.answer_awaiting(request_id, Awaiting::Approval, answer)
    }

    /// The app's answer to a hook call (Claude Code's hook output: `decision`, `reason`,
    /// `hookSpecificOutput`, …).
    ///
    /// # Errors
    /// No hook call of this session waits under `request_id`, or the answer is not an object.
    pub fn handle_hook_answer(
        &mut self,
        request_id: &str,
        answer: Value,
    ) -> Result<(), AnswerError> {
        if !answer.is_object() {
            return Err(AnswerError::Invalid(String::from(
                "a hook answer is a JSON object (Claude Code's hook output, e.g. {\"decision\":\"block\",\"reason\":\"…\"})",
            )));
        }
        self.answer_awaiting(request_id, Awaiting::Hook, answer)
    }

    /// The app's JSON-RPC response to an MCP request for one of its servers.
    ///
    /// # Errors
    /// No MCP request of this session waits under `request_id`, or the answer is not a JSON-RPC
    /// response object.
    pub fn handle_mcp_answer(
        &mut self,
        request_id: &str,
        answer: Value,
    ) -> Result<(), AnswerError> {
        if !(answer.get("result").is_some() || answer.get("error").is_some()) {
            return Err(AnswerError::Invalid(String::from(
                "an MCP answer is a JSON-RPC response: {\"jsonrpc\":\"2.0\",\"id\":…,\"result\":…} or {…,\"error\":{\"code\",\"message\"}}",
            )));
        }
        self.answer_awaiting(request_id, Awaiting::Mcp, json!({"mcp_response": answer}))
    }

    fn answer_awaiting(
        &mut self,
        request_id: &str,
        kind: Awaiting,
        answer: Value,
    ) -> Result<(), AnswerError> {
        if self.awaiting.get(request_id) != Some(&kind) {
            return Err(AnswerError::NotWaiting(format!(
                "nothing of thread {} waits for this answer under {request_id}",
                self.thread_id
            )));
        }
        self.awaiting.remove(request_id);
        self.respond(request_id, Ok(answer));
        Ok(())
    }

    /// Claude Code gave up a frontend tool's MCP call (its request went away, e.g. the turn
    /// was interrupted): the client's result for it will not be delivered.
    pub fn handle_frontend_gone(&mut self, caller: Caller, _now: u64) {
        self.frontend.gone(caller);
    }

    /// A result could not be handed to its MCP call after all (it went away meanwhile). A run
    /// that only waits for Claude Code to go on with such results ends.
    pub fn handle_tool_answer_lost(&mut self, _caller: Caller, _now: u64) {
        if self.answers_awaited == 0 || self.run.is_none() {
            return;
        }
        self.answers_awaited -= 1;
        if self.answers_awaited == 0 {
            self.log(
                LogLevel::Warn,
                "Claude Code no longer waits for the client's tool results: the run ends",
            );
            self.translate(ClaudeToAgui::suspend);
        }
    }

    /// Claude Code called frontend tool `name` through MCP (`caller` waits for the result).
    pub fn handle_frontend_call(&mut self, caller: Caller, name: &str, _now: u64) {
        match self.frontend.called(caller, name) {
            Called::Answered(outcome) => {
                self.log(
                    LogLevel::Info,
                    &format!("frontend tool {name} called; the client answered already"),
                );
                self.outputs
                    .push_back(Output::ToolAnswer { caller, outcome });
            }
            Called::Waiting { tool_use_id } => {
                self.log(
                    LogLevel::Info,
                    &format!(
                        "frontend tool {name} ({tool_use_id}) called; the run ends for the client to run it"
                    ),
                );
                self.translate(ClaudeToAgui::suspend);
            }
            Called::Unbound => self.outputs.push_back(Output::ToolAnswer {
                caller,
                outcome: ToolOutcome {
                    content: format!(
                        "the bridge saw no call of the frontend tool {name} to answer"
                    ),
                    is_error: true,
                },
            }),
        }
    }

    /// Time passed (call at [`Self::poll_timeout`]).
    pub fn handle_timeout(&mut self, now: u64) {
        let expired: Vec<String> = self
            .controls
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let Some(control) = self.controls.remove(&id) else {
                continue;
            };
            let message = format!(
                "Claude Code did not answer control request {id} ({}) within {} s",
                control.subtype,
                self.limits.control_timeout_ms / 1000
            );
            self.cancel(&id);
            match control.caller {
                Some(caller) => self.outputs.push_back(Output::ControlDone {
                    caller,
                    result: Err(ControlError::Timeout(message)),
                }),
                None => self.log(LogLevel::Warn, &message),
            }
        }
        if let Some(Some(at)) = self.run
            && at <= now
        {
            self.log(
                LogLevel::Warn,
                "the interrupted run did not end by itself; ending it",
            );
            self.translate(ClaudeToAgui::suspend);
            // A message still held never reaches Claude Code: its run is over.
            self.held = None;
            if self.turn == Turn::Open {
                self.turn = Turn::Abandoned {
                    until: now + self.limits.stale_turn_ms,
                };
            }
        }
        if let Some(at) = self.tools_sync
            && at <= now
        {
            self.tools_sync = None;
            self.log(
                LogLevel::Warn,
                "Claude Code did not list the changed frontend tools in time; the run goes on",
            );
            self.release_held();
        }
        if let Turn::Abandoned { until } = self.turn
            && until <= now
        {
            self.turn = Turn::Closed;
            self.outputs.push_back(Output::Kill {
                reason: format!(
                    "Claude Code did not end the interrupted turn within {} s; it is restarted",
                    self.limits.stale_turn_ms / 1000
                ),
            });
        }
    }

    // ----- helpers -----

    fn send_control(&mut self, caller: Option<Caller>, request: Value, now: u64) {
        let subtype = request
            .get("subtype")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let setting = REPLAYED
            .contains(&subtype.as_str())
            .then(|| request.clone());
        let id = self.next_control_id();
        let line = json!({"type": "control_request", "request_id": id, "request": request});
        self.outputs.push_back(Output::Write(line_of(&line)));
        self.controls.insert(
            id,
            PendingControl {
                caller,
                subtype,
                deadline: now + self.limits.control_timeout_ms,
                setting,
                variables: BTreeMap::new(),
            },
        );
    }

    fn cancel(&mut self, request_id: &str) {
        let line = json!({"type": "control_cancel_request", "request_id": request_id});
        self.outputs.push_back(Output::Write(line_of(&line)));
    }

    fn respond(&mut self, request_id: &str, answer: Result<Value, String>) {
        let response = match answer {
            Ok(answer) => {
                json!({"subtype": "success", "request_id": request_id, "response": answer})
            }
            Err(error) => json!({"subtype": "error", "request_id": request_id, "error": error}),
        };
        let line = json!({"type": "control_response", "response": response});
        self.outputs.push_back(Output::Write(line_of(&line)));
    }

    fn log(&mut self, level: LogLevel, message: &str) {
        self.outputs.push_back(Output::Log {
            level,
            message: message.to_owned(),
        });
    }

    /// Run the thread's translator (if it has one) and emit what it produced.
    fn translate(&mut self, step: impl FnOnce(&mut ClaudeToAgui) -> Vec<AguiEvent>) {
        let events = self.translator.as_mut().map(step).unwrap_or_default();
        self.emit(events);
    }

    /// Send events to the run and the history; the run ends with its last event.
    fn emit(&mut self, events: Vec<AguiEvent>) {
        for mut event in events {
            // The state changes with a result's numbers or a compaction: a new snapshot follows.
            let state_changed = match &event {
                AguiEvent::Custom { name, value } if name == "result_stats" => {
                    self.totals.add_result(value);
                    true
                }
                AguiEvent::Custom { name, value } if name == "system_status" => {
                    let compacting = value["status"] == "compacting";
                    std::mem::replace(&mut self.compacting, compacting) != compacting
                }
                AguiEvent::Custom { name, .. } if name == "compact_boundary" => {
                    std::mem::replace(&mut self.compacting, false)
                }
                _ => false,
            };
            match &mut event {
                AguiEvent::ToolCallStart {
                    tool_call_id,
                    tool_call_name,
                    ..
                } if self.tools.iter().any(|t| &t.name == tool_call_name) => {
                    self.frontend.streamed(tool_call_id, tool_call_name);
                }
                AguiEvent::StateSnapshot { snapshot } => *snapshot = self.state(),
                _ => {}
            }
            let ends = matches!(
                event,
                AguiEvent::RunFinished { .. } | AguiEvent::RunError { .. }
            );
            self.history.push(event.clone());
            self.outputs.push_back(Output::Event(event));
            if state_changed {
                let snapshot = AguiEvent::StateSnapshot {
                    snapshot: self.state(),
                };
                self.history.push(snapshot.clone());
                self.outputs.push_back(Output::Event(snapshot));
            }
            if ends {
                self.run = None;
                self.answers_awaited = 0;
                self.outputs.push_back(Output::RunEnded);
            }
        }
    }

    /// Everything waiting on the process fails.
    fn lost(&mut self, reason: &str) {
        if self.run.is_some() {
            self.translate(|t| t.fail(reason, "claude_code_exited"));
        }
        for (_, control) in std::mem::take(&mut self.controls) {
            if let Some(caller) = control.caller {
                self.outputs.push_back(Output::ControlDone {
                    caller,
                    result: Err(ControlError::Lost(reason.to_owned())),
                });
            }
        }
        for caller in self.frontend.clear() {
            self.outputs.push_back(Output::ToolAnswer {
                caller,
                outcome: ToolOutcome {
                    content: format!("the session ended before the client answered: {reason}"),
                    is_error: true,
                },
            });
        }
        for (request_id, _) in std::mem::take(&mut self.awaiting) {
            self.outputs.push_back(Output::Withdrawn { request_id });
        }
        self.turn = Turn::Closed;
        self.held = None;
        self.tools_sync = None;
    }
}

/// What `RUN_STARTED` says the run was given: the messages this run adds (the user's turn,
/// tool results), so a client that connects later (`agent/connect`) redraws both sides of the
/// thread. The rest of the input is left out (the client had it; tools and state can be large).
fn run_started_input(input: &RunAgentInput) -> Option<Value> {
    let started = RunAgentInput {
        thread_id: input.thread_id.clone(),
        run_id: input.run_id.clone(),
        parent_run_id: input.parent_run_id.clone(),
        state: Value::Object(serde_json::Map::new()),
        messages: input::new_messages(input).to_vec(),
        tools: Vec::new(),
        context: Vec::new(),
        forwarded_props: Value::Object(serde_json::Map::new()),
        resume: None,
    };
    serde_json::to_value(started).ok()
}

fn line_of(value: &Value) -> String {
    let mut line = value.to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests;
