//! One Claude Code child process per AG-UI thread, driven over stdin/stdout stream-json (the
//! transport of the official Agent SDK): an actor task owns the process, writes user turns and
//! control messages to its stdin, and reads its NDJSON stdout through the core's translator
//! ([`bridge_core::agui::translate::ClaudeToAgui`]) into the AG-UI events of the running run.
//!
//! ```text
//!            run                    system/init        run ends (result)
//!  Idle ──────────────► Starting ───────────► Running ──────────────────► Idle
//!   ▲ (no process yet)     │ spawn failed        │ process exited
//!   │                      ▼                     ▼
//!   └──────── run ─────── Crashed ◄──────────────┘   (the next run restarts it with --resume)
//! ```
//!
//! Control requests (`initialize`, `interrupt`, `set_model`, `set_permission_mode`,
//! `set_max_thinking_tokens`, `mcp_status`, `mcp_toggle`) carry a request id; the answer comes
//! back as a `control_response` with the same id, or the request fails after the control timeout.
//! Claude Code's own requests: `can_use_tool` waits in [`Approvals`] (or is answered by a rule);
//! frontend tools reach the session through the MCP server ([`super::mcp`]) and end the run, so
//! the client can run the tool; its result, in the next run's input, answers the MCP call.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bridge_core::agui::claude::{ClaudeMessage, LineBuffer, parse_line};
use bridge_core::agui::events::AguiEvent;
use bridge_core::agui::input::{self, InputOptions, RunAgentInput, Tool};
use bridge_core::agui::translate::ClaudeToAgui;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use super::approvals::{Approvals, PendingApproval};

/// The MCP server name under which frontend tools are offered to Claude Code.
pub const FRONTEND_SERVER: &str = "frontend";
/// The prefix Claude Code gives the frontend tools.
pub const FRONTEND_PREFIX: &str = "mcp__frontend__";
/// How long after an interrupt was accepted the run may take to end by itself.
const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// How the sessions run Claude Code.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The executable.
    pub claude_path: String,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// Extra environment (`ANTHROPIC_BASE_URL` for `--upstream self`).
    pub env: Vec<(String, String)>,
    /// `http://127.0.0.1:PORT` of the AG-UI server (its MCP endpoint is `/mcp/<thread>`).
    pub mcp_base: String,
    /// How long a control request may take.
    pub control_timeout: Duration,
    /// `--transcript-dir`: where Claude Code's output is copied, one file per thread.
    pub transcript_dir: Option<PathBuf>,
}

/// Where a session is in its life.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Status {
    /// No process yet (it starts with the first run).
    #[default]
    Idle,
    /// The process was started; Claude Code has not said `system/init` yet.
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

/// What a frontend tool call comes back with.
#[derive(Debug, Clone)]
pub struct ToolOutcome {
    /// The result text.
    pub content: String,
    /// The tool failed.
    pub is_error: bool,
}

pub(crate) enum SessionCommand {
    Run {
        input: Box<RunAgentInput>,
        events: mpsc::UnboundedSender<AguiEvent>,
        started: oneshot::Sender<Result<(), RunRefused>>,
    },
    Control {
        request: Value,
        reply: oneshot::Sender<Result<Value, String>>,
    },
    ControlTimeout(String),
    Answer {
        request_id: String,
        answer: Value,
    },
    FrontendCall {
        name: String,
        reply: oneshot::Sender<ToolOutcome>,
    },
    Stop {
        done: oneshot::Sender<()>,
    },
}

/// A handle to a session's actor.
#[derive(Debug, Clone)]
pub struct Session {
    /// The AG-UI thread.
    pub thread_id: String,
    commands: mpsc::UnboundedSender<SessionCommand>,
    shared: Arc<Shared>,
}

/// What the HTTP side reads without asking the actor.
#[derive(Debug, Default)]
pub struct Shared {
    status: Mutex<Status>,
    history: Mutex<Vec<AguiEvent>>,
    tools: Mutex<Vec<Tool>>,
    claude_session: Mutex<Option<String>>,
    pid: Mutex<Option<u32>>,
    waiting_client: std::sync::atomic::AtomicBool,
}

impl Session {
    /// Start the actor of a new session (its process starts with the first run).
    #[must_use]
    ///
    /// `resume`: Claude Code's session id of an earlier process of this thread (evicted), so the
    /// conversation goes on where it was.
    pub fn start(
        thread_id: &str,
        config: Arc<AgentConfig>,
        approvals: Arc<Approvals>,
        resume: Option<String>,
    ) -> Self {
        let (commands, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            claude_session: Mutex::new(resume),
            ..Shared::default()
        });
        let actor = Actor {
            thread_id: thread_id.to_owned(),
            config,
            approvals,
            shared: Arc::clone(&shared),
            myself: commands.clone(),
            process: None,
            translator: None,
            run_events: None,
            controls: HashMap::new(),
            next_request: 0,
            frontend_unbound: VecDeque::new(),
            frontend_pending: HashMap::new(),
            frontend_ready: HashMap::new(),
            interrupt_deadline: None,
            seed: seed_of(thread_id),
            settings: std::collections::BTreeMap::new(),
        };
        tokio::spawn(actor.run(rx));
        Self {
            thread_id: thread_id.to_owned(),
            commands,
            shared,
        }
    }

    /// The session's status.
    #[must_use]
    pub fn status(&self) -> Status {
        self.shared
            .status
            .lock()
            .map(|s| s.clone())
            .unwrap_or(Status::Stopped)
    }

    /// Claude Code's own session id (from `system/init`).
    #[must_use]
    pub fn claude_session_id(&self) -> Option<String> {
        self.shared
            .claude_session
            .lock()
            .ok()
            .and_then(|s| s.clone())
    }

    /// The Claude Code process id, while one runs.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.shared.pid.lock().ok().and_then(|p| *p)
    }

    /// Every AG-UI event of every run of this thread, in order (for `connect`).
    #[must_use]
    pub fn history(&self) -> Vec<AguiEvent> {
        self.shared
            .history
            .lock()
            .map(|h| h.clone())
            .unwrap_or_default()
    }

    /// The frontend tools the client registered in its latest run.
    #[must_use]
    pub fn frontend_tools(&self) -> Vec<Tool> {
        self.shared
            .tools
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }

    /// Start a run: its events arrive on the returned channel, which closes after `RUN_FINISHED`
    /// or `RUN_ERROR`.
    ///
    /// # Errors
    /// A run is already streaming on this thread, or Claude Code cannot be started.
    pub async fn run(
        &self,
        input: RunAgentInput,
    ) -> Result<mpsc::UnboundedReceiver<AguiEvent>, RunRefused> {
        let (events, rx) = mpsc::unbounded_channel();
        let (started, ok) = oneshot::channel();
        self.send(SessionCommand::Run {
            input: Box::new(input),
            events,
            started,
        })
        .map_err(RunRefused::Failed)?;
        ok.await
            .map_err(|_| RunRefused::Failed(String::from("the session stopped")))??;
        Ok(rx)
    }

    /// Whether Claude Code waits for a frontend tool's result (the session must not be evicted).
    #[must_use]
    pub fn waits_for_client(&self) -> bool {
        self.shared
            .waiting_client
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Send a control request (`{"subtype": …, …}`) and wait for Claude Code's answer.
    ///
    /// # Errors
    /// Claude Code answered with an error, did not answer in time, or is not running.
    pub async fn control(&self, request: Value) -> Result<Value, String> {
        let (reply, answer) = oneshot::channel();
        self.send(SessionCommand::Control { request, reply })?;
        answer
            .await
            .map_err(|_| String::from("the session stopped"))?
    }

    /// Answer a `can_use_tool` request.
    ///
    /// # Errors
    /// The session is gone.
    pub fn answer(&self, request_id: &str, answer: Value) -> Result<(), String> {
        self.send(SessionCommand::Answer {
            request_id: request_id.to_owned(),
            answer,
        })
    }

    /// Claude Code called a frontend tool (through MCP): wait for the client's result.
    ///
    /// # Errors
    /// The session is gone or stopped before the client answered.
    pub async fn frontend_call(&self, name: &str) -> Result<ToolOutcome, String> {
        let (reply, outcome) = oneshot::channel();
        self.send(SessionCommand::FrontendCall {
            name: name.to_owned(),
            reply,
        })?;
        outcome
            .await
            .map_err(|_| String::from("the session ended before the client answered"))
    }

    /// Kill the process and end the actor.
    pub async fn stop(&self) {
        let (done, wait) = oneshot::channel();
        if self.send(SessionCommand::Stop { done }).is_ok() {
            let _ = wait.await;
        }
    }

    fn send(&self, command: SessionCommand) -> Result<(), String> {
        self.commands
            .send(command)
            .map_err(|_| String::from("the session stopped"))
    }
}

/// A deterministic seed per thread for the ids the translator invents.
fn seed_of(thread_id: &str) -> u64 {
    thread_id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

struct Process {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    lines: LineBuffer,
    /// `--transcript-dir`'s file for this thread, opened once per process.
    transcript: Option<std::fs::File>,
}

struct Actor {
    thread_id: String,
    config: Arc<AgentConfig>,
    approvals: Arc<Approvals>,
    shared: Arc<Shared>,
    myself: mpsc::UnboundedSender<SessionCommand>,
    process: Option<Process>,
    /// One translator for the thread: it remembers which blocks were streamed across runs.
    translator: Option<ClaudeToAgui>,
    run_events: Option<mpsc::UnboundedSender<AguiEvent>>,
    controls: HashMap<String, oneshot::Sender<Result<Value, String>>>,
    next_request: u64,
    /// Frontend tool calls streamed (tool_use id, tool name) and not yet called through MCP.
    frontend_unbound: VecDeque<(String, String)>,
    /// MCP calls waiting for the client's result, by tool_use id.
    frontend_pending: HashMap<String, oneshot::Sender<ToolOutcome>>,
    /// Results the client sent before Claude Code called the tool (several calls in one
    /// message are called one after another), by tool_use id.
    frontend_ready: HashMap<String, ToolOutcome>,
    interrupt_deadline: Option<tokio::time::Instant>,
    seed: u64,
    /// The latest `set_model` / `set_permission_mode` / `set_max_thinking_tokens`, sent again to
    /// a restarted process so a crash does not undo the user's choices.
    settings: std::collections::BTreeMap<String, Value>,
}

enum Output {
    Bytes(usize),
    Closed,
}

impl Actor {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<SessionCommand>) {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let deadline = self.interrupt_deadline;
            tokio::select! {
                command = commands.recv() => match command {
                    Some(SessionCommand::Stop { done }) => {
                        self.kill("the session was stopped").await;
                        self.set_status(Status::Stopped);
                        let _ = done.send(());
                        return;
                    }
                    Some(command) => self.command(command).await,
                    None => {
                        self.kill("the bridge is shutting down").await;
                        return;
                    }
                },
                output = read_some(&mut self.process, &mut buffer) => match output {
                    Output::Bytes(n) => {
                        let lines = match self.process.as_mut() {
                            Some(p) => p.lines.push(&buffer[..n]),
                            None => Vec::new(),
                        };
                        for line in lines {
                            self.line(&line).await;
                        }
                    }
                    Output::Closed => self.exited().await,
                },
                () = sleep_until(deadline) => {
                    self.interrupt_deadline = None;
                    if self.run_events.is_some() {
                        warn!(thread = %self.thread_id, "the interrupted run did not end by itself; ending it");
                        self.translate(ClaudeToAgui::suspend);
                    }
                }
            }
        }
    }

    fn set_status(&self, status: Status) {
        if let Ok(mut s) = self.shared.status.lock() {
            *s = status;
        }
    }

    async fn command(&mut self, command: SessionCommand) {
        match command {
            SessionCommand::Run {
                input,
                events,
                started,
            } => {
                let result = self.start_run(*input, events).await;
                let _ = started.send(result);
            }
            SessionCommand::Control { request, reply } => {
                if self.process.is_none() {
                    let _ = reply.send(Err(String::from(
                        "Claude Code is not running in this session (start a run first)",
                    )));
                    return;
                }
                let interrupt = request.get("subtype").and_then(Value::as_str) == Some("interrupt");
                let id = self.send_control(request).await;
                if let Some(id) = id {
                    self.controls.insert(id, reply);
                    if interrupt && self.run_events.is_some() {
                        if let Some(t) = self.translator.as_mut() {
                            t.note_interrupt();
                        }
                        self.interrupt_deadline =
                            Some(tokio::time::Instant::now() + INTERRUPT_GRACE);
                    }
                } else {
                    let _ = reply.send(Err(String::from("cannot write to Claude Code")));
                }
            }
            SessionCommand::ControlTimeout(id) => {
                if let Some(reply) = self.controls.remove(&id) {
                    let _ = reply.send(Err(format!(
                        "Claude Code did not answer control request {id} within {} s",
                        self.config.control_timeout.as_secs()
                    )));
                }
            }
            SessionCommand::Answer { request_id, answer } => {
                self.respond(&request_id, answer).await;
            }
            SessionCommand::FrontendCall { name, reply } => {
                self.frontend_call(&name, reply);
            }
            SessionCommand::Stop { .. } => {}
        }
    }

    async fn start_run(
        &mut self,
        input: RunAgentInput,
        events: mpsc::UnboundedSender<AguiEvent>,
    ) -> Result<(), RunRefused> {
        if self.run_events.is_some() {
            return Err(RunRefused::Busy(format!(
                "a run is already streaming on thread {} (stop it with agent/stop first)",
                self.thread_id
            )));
        }
        if let Ok(mut tools) = self.shared.tools.lock() {
            tools.clone_from(&input.tools);
        }
        // Results for frontend tool calls Claude Code is waiting on answer those calls.
        let mut answered = Vec::new();
        let mut routed = Vec::new();
        for result in input::tool_results(&input) {
            let outcome = ToolOutcome {
                content: result.content,
                is_error: result.is_error,
            };
            let id = result.tool_call_id;
            if let Some(reply) = self.frontend_pending.remove(&id) {
                // Delivered only if Claude Code's MCP call is still waiting.
                if reply.send(outcome).is_ok() {
                    answered.push(id.clone());
                }
                routed.push(id);
            } else if self
                .frontend_unbound
                .iter()
                .any(|(unbound, _)| *unbound == id)
            {
                // Claude Code has not called this one yet: its call gets the result at once.
                self.frontend_ready.insert(id.clone(), outcome);
                routed.push(id);
            }
        }
        self.update_waiting();
        let message = input::to_claude_user_message(
            &input,
            &InputOptions {
                mcp_server_name: FRONTEND_SERVER.to_owned(),
                exclude_tool_call_ids: routed,
            },
        );
        if self.process.is_none() {
            self.spawn().await.map_err(RunRefused::Failed)?;
        }
        let translator = self.translator.get_or_insert_with(|| {
            let mut t = ClaudeToAgui::new(&input.thread_id, &input.run_id, self.seed);
            t.set_client_tool_prefix(FRONTEND_PREFIX);
            t
        });
        translator.begin_run(&input.run_id);
        let first = translator.start();
        self.run_events = Some(events);
        self.set_status(Status::Running);
        self.emit(first);
        self.apply_forwarded_props(&input.forwarded_props).await;
        match message {
            Some(message) => {
                if let Err(e) = self.write_line(&message).await {
                    self.translate(|t| t.fail(&e, "claude_code_stdin"));
                }
            }
            None if answered.is_empty() => {
                // Nothing new for Claude Code: the run ends at once.
                self.translate(ClaudeToAgui::suspend);
            }
            None => {} // Claude Code goes on with the tool results it got.
        }
        Ok(())
    }

    /// `forwardedProps.model` / `.permissionMode` / `.maxThinkingTokens` switch the session
    /// before the turn (answers are not awaited: the stdin order makes them apply first).
    async fn apply_forwarded_props(&mut self, props: &Value) {
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
            let _ = self.send_control(request).await;
        }
    }

    async fn spawn(&mut self) -> Result<(), String> {
        let mcp = json!({"mcpServers": {FRONTEND_SERVER: {
            "type": "http",
            "url": format!("{}/mcp/{}", self.config.mcp_base, url_segment(&self.thread_id)),
        }}});
        let mut command = Command::new(&self.config.claude_path);
        command
            .args([
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
                "--permission-prompt-tool",
                "stdio",
                "--mcp-config",
            ])
            .arg(mcp.to_string());
        let resume = self
            .shared
            .claude_session
            .lock()
            .ok()
            .and_then(|s| s.clone());
        if let Some(id) = &resume {
            command.args(["--resume", id]);
        }
        if let Some(cwd) = &self.config.cwd {
            command.current_dir(cwd);
        }
        // `--env-file`'s variables, then the session's own.
        command.envs(crate::environment::file_only());
        for (k, v) in &self.config.env {
            command.env(k, v);
        }
        command
            .env("CLAUDE_CODE_ENTRYPOINT", "sdk-claude-bridge")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        self.set_status(Status::Starting);
        let mut child = command.spawn().map_err(|e| {
            let reason = format!(
                "cannot start Claude Code `{}`: {e} (set --claude-bin)",
                self.config.claude_path
            );
            self.set_status(Status::Crashed {
                reason: reason.clone(),
            });
            reason
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(String::from("Claude Code started without pipes"));
        };
        info!(thread = %self.thread_id, pid = child.id(), resume = ?resume, "Claude Code session started");
        if let Ok(mut pid) = self.shared.pid.lock() {
            *pid = child.id();
        }
        self.process = Some(Process {
            child,
            stdin,
            stdout,
            lines: LineBuffer::new(),
            transcript: self.open_transcript(),
        });
        let _ = self
            .send_control(json!({"subtype": "initialize", "hooks": null}))
            .await;
        for request in self.settings.values().cloned().collect::<Vec<_>>() {
            let _ = self.send_control(request).await;
        }
        Ok(())
    }

    /// Write a control request; returns its id (the answer is matched by it).
    async fn send_control(&mut self, request: Value) -> Option<String> {
        if let Some(subtype @ ("set_model" | "set_permission_mode" | "set_max_thinking_tokens")) =
            request.get("subtype").and_then(Value::as_str)
        {
            self.settings.insert(subtype.to_owned(), request.clone());
        }
        self.next_request += 1;
        let id = format!("req_{}_{}", self.next_request, self.seed % 100_000);
        let line = json!({"type": "control_request", "request_id": id, "request": request});
        self.write_line(&line).await.ok()?;
        let myself = self.myself.clone();
        let timeout = self.config.control_timeout;
        let timed = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let _ = myself.send(SessionCommand::ControlTimeout(timed));
        });
        Some(id)
    }

    async fn respond(&mut self, request_id: &str, answer: Value) {
        let line = json!({"type": "control_response", "response": {
            "subtype": "success", "request_id": request_id, "response": answer,
        }});
        if let Err(e) = self.write_line(&line).await {
            warn!(thread = %self.thread_id, error = %e, "cannot answer Claude Code");
        }
    }

    async fn write_line(&mut self, value: &Value) -> Result<(), String> {
        let Some(process) = self.process.as_mut() else {
            return Err(String::from("Claude Code is not running"));
        };
        let mut line = value.to_string();
        line.push('\n');
        process
            .stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("cannot write to Claude Code: {e}"))?;
        process
            .stdin
            .flush()
            .await
            .map_err(|e| format!("cannot write to Claude Code: {e}"))
    }

    /// `DIR/<thread>.ndjson` for appending, when `--transcript-dir` is set.
    fn open_transcript(&self) -> Option<std::fs::File> {
        let dir = self.config.transcript_dir.as_ref()?;
        let path = dir.join(format!("{}.ndjson", url_segment(&self.thread_id)));
        let opened = std::fs::create_dir_all(dir).and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
        });
        opened
            .inspect_err(
                |e| warn!(path = %path.display(), error = %e, "cannot open the transcript"),
            )
            .ok()
    }

    /// One line of Claude Code's stdout.
    async fn line(&mut self, line: &str) {
        if let Some(file) = self.process.as_mut().and_then(|p| p.transcript.as_mut()) {
            use std::io::Write as _;
            if let Err(e) = writeln!(file, "{line}") {
                debug!(thread = %self.thread_id, error = %e, "cannot write the transcript");
            }
        }
        let message = match parse_line(line) {
            Ok(message) => message,
            Err(e) => {
                debug!(thread = %self.thread_id, error = %e, "unreadable line from Claude Code");
                return;
            }
        };
        if let ClaudeMessage::ControlRequest(m) = &message
            && self.can_use_tool(&m.raw).await
        {
            return; // answered by a rule: nothing for the client to approve
        }
        match &message {
            ClaudeMessage::ControlResponse(m) => {
                let response = m.raw.get("response").cloned().unwrap_or(Value::Null);
                let id = response
                    .get("request_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if let Some(reply) = self.controls.remove(&id) {
                    let result = if response.get("subtype").and_then(Value::as_str) == Some("error")
                    {
                        Err(response
                            .get("error")
                            .and_then(Value::as_str)
                            .unwrap_or("Claude Code refused the request")
                            .to_owned())
                    } else {
                        Ok(response.get("response").cloned().unwrap_or(Value::Null))
                    };
                    let _ = reply.send(result);
                }
                return;
            }
            ClaudeMessage::ControlCancelRequest(m) => {
                // Claude Code no longer waits (the turn was interrupted): the call leaves the list.
                if let Some(id) = m.raw.get("request_id").and_then(Value::as_str) {
                    self.approvals.take(id);
                }
            }
            ClaudeMessage::System(m) if m.subtype == "init" => {
                if let Some(id) = m.raw.get("session_id").and_then(Value::as_str)
                    && let Ok(mut s) = self.shared.claude_session.lock()
                {
                    *s = Some(id.to_owned());
                }
            }
            _ => {}
        }
        if self.run_events.is_some() {
            self.translate(|t| t.feed(&message));
        }
    }

    /// `can_use_tool`: a rule answers at once, frontend tools are always allowed (the client runs
    /// them), anything else waits for the management API. Returns whether it was answered.
    async fn can_use_tool(&mut self, raw: &Value) -> bool {
        let request = raw.get("request").cloned().unwrap_or(Value::Null);
        if request.get("subtype").and_then(Value::as_str) != Some("can_use_tool") {
            return false;
        }
        let request_id = raw
            .get("request_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let tool_name = request
            .get("tool_name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let input = request.get("input").cloned().unwrap_or_else(|| json!({}));
        let automatic = if tool_name.starts_with(FRONTEND_PREFIX) {
            Some(json!({"behavior": "allow", "updatedInput": input}))
        } else {
            self.approvals.auto_answer(&tool_name, &input)
        };
        if let Some(answer) = automatic {
            info!(thread = %self.thread_id, tool = %tool_name, behavior = %answer["behavior"], "tool call answered by a rule");
            self.respond(&request_id, answer).await;
            return true;
        }
        info!(thread = %self.thread_id, tool = %tool_name, request_id = %request_id, "tool call waits for approval");
        self.approvals.add(PendingApproval {
            request_id,
            thread_id: self.thread_id.clone(),
            tool_name,
            tool_use_id: request
                .get("tool_use_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            input,
            description: request
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
        false
    }

    /// Claude Code called a frontend tool: bind it to the streamed tool call and end the run,
    /// so the client runs the tool and answers in its next run.
    fn frontend_call(&mut self, name: &str, reply: oneshot::Sender<ToolOutcome>) {
        let position = self
            .frontend_unbound
            .iter()
            .position(|(_, tool)| tool == name);
        let Some((tool_use_id, _)) = position.and_then(|i| self.frontend_unbound.remove(i)) else {
            // Not streamed to the client (nothing to bind): say so to Claude Code.
            let _ = reply.send(ToolOutcome {
                content: format!("the bridge saw no call of the frontend tool {name} to answer"),
                is_error: true,
            });
            return;
        };
        if let Some(outcome) = self.frontend_ready.remove(&tool_use_id) {
            info!(thread = %self.thread_id, tool = %name, %tool_use_id, "frontend tool called; the client answered already");
            let _ = reply.send(outcome);
            return;
        }
        info!(thread = %self.thread_id, tool = %name, %tool_use_id, "frontend tool called; the run ends for the client to run it");
        self.frontend_pending.insert(tool_use_id, reply);
        self.update_waiting();
        self.translate(ClaudeToAgui::suspend);
    }

    fn update_waiting(&self) {
        self.shared.waiting_client.store(
            !self.frontend_pending.is_empty(),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Run the thread's translator (if it has one) and emit what it produced.
    fn translate(&mut self, step: impl FnOnce(&mut ClaudeToAgui) -> Vec<AguiEvent>) {
        let events = self.translator.as_mut().map(step).unwrap_or_default();
        self.emit(events);
    }

    /// Send events to the running run and the thread's history; the run ends with its last event.
    fn emit(&mut self, events: Vec<AguiEvent>) {
        for event in events {
            if let AguiEvent::ToolCallStart {
                tool_call_id,
                tool_call_name,
                ..
            } = &event
                && self
                    .shared
                    .tools
                    .lock()
                    .is_ok_and(|tools| tools.iter().any(|t| &t.name == tool_call_name))
            {
                self.frontend_unbound
                    .push_back((tool_call_id.clone(), tool_call_name.clone()));
            }
            let ends = matches!(
                event,
                AguiEvent::RunFinished { .. } | AguiEvent::RunError { .. }
            );
            if let Ok(mut history) = self.shared.history.lock() {
                history.push(event.clone());
            }
            if let Some(tx) = &self.run_events {
                // A client that left does not stop the run: its events stay in the history.
                let _ = tx.send(event);
            }
            if ends {
                self.run_events = None;
                self.interrupt_deadline = None;
                if self.process.is_some() {
                    self.set_status(Status::Ready);
                }
            }
        }
    }

    /// Claude Code's stdout closed: the process ended.
    async fn exited(&mut self) {
        let Some(mut process) = self.process.take() else {
            return;
        };
        let status = process.child.wait().await;
        let reason = match status {
            Ok(s) => format!("Claude Code exited ({s})"),
            Err(e) => format!("Claude Code exited: {e}"),
        };
        warn!(thread = %self.thread_id, %reason, "Claude Code session ended");
        self.lost(&reason);
        self.set_status(Status::Crashed { reason });
    }

    async fn kill(&mut self, reason: &str) {
        if let Some(mut process) = self.process.take() {
            let _ = process.child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), process.child.wait()).await;
            info!(thread = %self.thread_id, reason, "Claude Code session killed");
        }
        self.lost(reason);
    }

    /// Everything waiting on the process fails.
    fn lost(&mut self, reason: &str) {
        if let Ok(mut pid) = self.shared.pid.lock() {
            *pid = None;
        }
        if self.run_events.is_some() {
            self.translate(|t| t.fail(reason, "claude_code_exited"));
        }
        for (_, reply) in self.controls.drain() {
            let _ = reply.send(Err(reason.to_owned()));
        }
        self.frontend_pending.clear();
        self.frontend_unbound.clear();
        self.frontend_ready.clear();
        self.update_waiting();
        self.approvals.forget_thread(&self.thread_id);
    }
}

/// Read what Claude Code wrote (pending forever without a process).
async fn read_some(process: &mut Option<Process>, buffer: &mut [u8]) -> Output {
    match process {
        Some(p) => match p.stdout.read(buffer).await {
            Ok(0) | Err(_) => Output::Closed,
            Ok(n) => Output::Bytes(n),
        },
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A thread id as one URL path segment.
#[must_use]
pub fn url_segment(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
