//! One Claude Code child process per AG-UI thread, driven over stdin/stdout stream-json (the
//! transport of the official Agent SDK).
//!
//! Everything the session decides is the core's [`AguiSession`] machine: control-request
//! correlation and timeouts, approvals, hooks, frontend-tool binding, the interrupt grace,
//! settings replay and the replay history. This file only owns what the machine cannot: the
//! process and its pipes, the clock, and the channels of the callers waiting on it. An actor
//! task feeds the machine (`handle_*`) and carries out its [`Output`]s; every channel into and
//! out of it is bounded.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bridge_core::agui::claude::LineBuffer;
use bridge_core::agui::events::AguiEvent;
use bridge_core::agui::input::{RunAgentInput, Tool};
use bridge_core::agui::session::{
    AguiSession, AnswerError, ApprovalPolicy, Caller, ControlError, FRONTEND_SERVER, InitOptions,
    Limits, LogLevel, Output, ToolOutcome,
};
pub use bridge_core::agui::session::{RunRefused, Status};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::approvals::Approvals;

/// Commands waiting for a session's actor.
const COMMAND_QUEUE: usize = 64;
/// Events waiting for a run's client; a client that falls this far behind loses its stream
/// (the run goes on, and `agent/connect` replays it).
const EVENT_QUEUE: usize = 4096;

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
    /// Runs kept per thread for `agent/connect` (`--history-runs`).
    pub history_runs: usize,
}

enum SessionCommand {
    Run {
        input: Box<RunAgentInput>,
        events: mpsc::Sender<AguiEvent>,
        started: oneshot::Sender<Result<(), RunRefused>>,
    },
    Control {
        caller: Caller,
        request: Value,
        reply: oneshot::Sender<Result<Value, ControlError>>,
    },
    Withdraw(Caller),
    FrontendGone(Caller),
    Initialize {
        options: Box<InitOptions>,
        reply: oneshot::Sender<Result<Value, InitRefused>>,
    },
    Answer {
        request_id: String,
        answer: Value,
        kind: AnswerKind,
        reply: oneshot::Sender<Result<(), AnswerError>>,
    },
    FrontendCall {
        caller: Caller,
        name: String,
        reply: oneshot::Sender<ToolOutcome>,
    },
    Describe(oneshot::Sender<Value>),
    Replay(oneshot::Sender<Vec<AguiEvent>>),
    Tools {
        reply: oneshot::Sender<Vec<Tool>>,
        /// Claude Code's MCP client asked (`tools/list`).
        listed: bool,
    },
    Stop {
        done: oneshot::Sender<()>,
    },
}

/// Why `initialize` did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InitRefused {
    /// A run is streaming (the app's fault: wait for it).
    #[error("{0}")]
    Busy(String),
    /// The options are wrong (the app's fault).
    #[error("{0}")]
    Invalid(String),
    /// Claude Code could not start or refused (not the app's fault).
    #[error("{0}")]
    Failed(String),
}

/// What the app answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    /// A tool approval (`can_use_tool`).
    Approval,
    /// A hook call.
    Hook,
    /// A request for one of the app's MCP servers.
    Mcp,
}

/// A handle to a session's actor.
#[derive(Debug, Clone)]
pub struct Session {
    /// The AG-UI thread.
    pub thread_id: String,
    commands: mpsc::Sender<SessionCommand>,
    shared: Arc<Shared>,
}

/// What the supervisor reads without asking the actor (copied after every step).
#[derive(Debug)]
struct Shared {
    status: Mutex<Status>,
    claude_session: Mutex<Option<String>>,
    pid: Mutex<Option<u32>>,
    waiting_client: AtomicBool,
    next_caller: AtomicU64,
    /// Bumped when the frontend tools change (the MCP server's notification stream watches it).
    tools_changed: watch::Sender<u64>,
}

impl std::fmt::Debug for SessionCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionCommand")
    }
}

/// Tells the actor when a caller goes away before its answer (`Withdraw` for a control
/// request, `FrontendGone` for an MCP call). A lost notice is covered by the control timeout /
/// the next run.
struct GoneOnDrop {
    notice: Option<SessionCommand>,
    commands: mpsc::Sender<SessionCommand>,
}

impl GoneOnDrop {
    fn disarm(&mut self) {
        self.notice = None;
    }
}

impl Drop for GoneOnDrop {
    fn drop(&mut self) {
        if let Some(notice) = self.notice.take() {
            let _ = self.commands.try_send(notice);
        }
    }
}

impl Session {
    /// Start the actor of a new session (its process starts with the first run).
    ///
    /// `resume`: Claude Code's session id of an earlier process of this thread (evicted), so the
    /// conversation goes on where it was.
    #[must_use]
    pub fn start(
        thread_id: &str,
        config: Arc<AgentConfig>,
        approvals: Arc<Approvals>,
        resume: Option<String>,
    ) -> Self {
        let (commands, rx) = mpsc::channel(COMMAND_QUEUE);
        let shared = Arc::new(Shared {
            status: Mutex::new(Status::Idle),
            claude_session: Mutex::new(resume.clone()),
            pid: Mutex::new(None),
            waiting_client: AtomicBool::new(false),
            next_caller: AtomicU64::new(1),
            tools_changed: watch::Sender::new(0),
        });
        let limits = Limits {
            control_timeout_ms: u64::try_from(config.control_timeout.as_millis())
                .unwrap_or(u64::MAX),
            history_runs: config.history_runs.max(1),
            ..Limits::default()
        };
        let mut machine = AguiSession::new(thread_id, seed_of(thread_id), limits, resume);
        machine.seed_uuids(crate::ids::seed());
        machine.set_frontend_server(frontend_server(&config, thread_id));
        let actor = Actor {
            thread_id: thread_id.to_owned(),
            machine,
            config,
            approvals,
            shared: Arc::clone(&shared),
            process: None,
            run_events: None,
            controls: HashMap::new(),
            tool_calls: HashMap::new(),
            epoch: Instant::now(),
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

    /// Whether Claude Code waits for a frontend tool's result (the session must not be evicted).
    #[must_use]
    pub fn waits_for_client(&self) -> bool {
        self.shared.waiting_client.load(Ordering::Relaxed)
    }

    /// A receiver that changes whenever the frontend tools change.
    #[must_use]
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.shared.tools_changed.subscribe()
    }

    /// Start a run: its events arrive on the returned channel, which closes after `RUN_FINISHED`
    /// or `RUN_ERROR`.
    ///
    /// # Errors
    /// A run is already streaming on this thread, or Claude Code cannot be started.
    pub async fn run(&self, input: RunAgentInput) -> Result<mpsc::Receiver<AguiEvent>, RunRefused> {
        let (events, rx) = mpsc::channel(EVENT_QUEUE);
        let (started, ok) = oneshot::channel();
        self.send(SessionCommand::Run {
            input: Box::new(input),
            events,
            started,
        })
        .await
        .map_err(RunRefused::Failed)?;
        ok.await
            .map_err(|_| RunRefused::Failed(String::from("the session stopped")))??;
        Ok(rx)
    }

    /// Send a control request (`{"subtype": …, …}`) and wait for Claude Code's answer. If the
    /// caller stops waiting, Claude Code is told (`control_cancel_request`).
    ///
    /// # Errors
    /// Claude Code answered with an error, did not answer in time, or is not running.
    pub async fn control(&self, request: Value) -> Result<Value, ControlError> {
        let stopped = || ControlError::Lost(String::from("the session stopped"));
        let caller = self.shared.next_caller.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        self.send(SessionCommand::Control {
            caller,
            request,
            reply,
        })
        .await
        .map_err(|_| stopped())?;
        let mut guard = GoneOnDrop {
            notice: Some(SessionCommand::Withdraw(caller)),
            commands: self.commands.clone(),
        };
        let result = answer.await;
        guard.disarm();
        result.map_err(|_| stopped())?
    }

    /// Set what `initialize` carries (system prompt, hooks) and (re)start Claude Code with it;
    /// returns Claude Code's `initialize` answer (commands, models, account, …).
    ///
    /// # Errors
    /// Bad options, a run is streaming, or Claude Code cannot be started.
    pub async fn initialize(&self, options: InitOptions) -> Result<Value, InitRefused> {
        let (reply, answer) = oneshot::channel();
        self.send(SessionCommand::Initialize {
            options: Box::new(options),
            reply,
        })
        .await
        .map_err(InitRefused::Failed)?;
        answer
            .await
            .map_err(|_| InitRefused::Failed(String::from("the session stopped")))?
    }

    /// Answer what Claude Code asked the app.
    ///
    /// # Errors
    /// Nothing of this kind waits under `request_id`, the answer has the wrong shape, or the
    /// session is gone.
    pub async fn answer(
        &self,
        request_id: &str,
        answer: Value,
        kind: AnswerKind,
    ) -> Result<(), AnswerError> {
        let stopped = || AnswerError::NotWaiting(String::from("the session stopped"));
        let (reply, done) = oneshot::channel();
        self.send(SessionCommand::Answer {
            request_id: request_id.to_owned(),
            answer,
            kind,
            reply,
        })
        .await
        .map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }

    /// Claude Code called a frontend tool (through MCP): wait for the client's result.
    ///
    /// # Errors
    /// The session is gone or stopped before the client answered.
    pub async fn frontend_call(&self, name: &str) -> Result<ToolOutcome, String> {
        let caller = self.shared.next_caller.fetch_add(1, Ordering::Relaxed);
        let (reply, outcome) = oneshot::channel();
        self.send(SessionCommand::FrontendCall {
            caller,
            name: name.to_owned(),
            reply,
        })
        .await?;
        let mut guard = GoneOnDrop {
            notice: Some(SessionCommand::FrontendGone(caller)),
            commands: self.commands.clone(),
        };
        let result = outcome.await;
        guard.disarm();
        result.map_err(|_| String::from("the session ended before the client answered"))
    }

    /// What `GET /sessions/{threadId}` shows.
    pub async fn describe(&self) -> Option<Value> {
        let (reply, answer) = oneshot::channel();
        self.send(SessionCommand::Describe(reply)).await.ok()?;
        let mut described = answer.await.ok()?;
        described["pid"] = json!(self.pid());
        Some(described)
    }

    /// The thread's runs, valid to replay (`agent/connect`).
    pub async fn replay(&self) -> Vec<AguiEvent> {
        let (reply, answer) = oneshot::channel();
        if self.send(SessionCommand::Replay(reply)).await.is_err() {
            return Vec::new();
        }
        answer.await.unwrap_or_default()
    }

    /// The frontend tools the client registered in its latest run; `listed`: Claude Code's MCP
    /// client asked for them (`tools/list`), so a run waiting for that may go on.
    pub async fn frontend_tools(&self, listed: bool) -> Vec<Tool> {
        let (reply, answer) = oneshot::channel();
        if self
            .send(SessionCommand::Tools { reply, listed })
            .await
            .is_err()
        {
            return Vec::new();
        }
        answer.await.unwrap_or_default()
    }

    /// Kill the process and end the actor.
    pub async fn stop(&self) {
        let (done, wait) = oneshot::channel();
        if self.send(SessionCommand::Stop { done }).await.is_ok() {
            let _ = wait.await;
        }
    }

    async fn send(&self, command: SessionCommand) -> Result<(), String> {
        self.commands
            .send(command)
            .await
            .map_err(|_| String::from("the session stopped"))
    }
}

/// The frontend tools' MCP server of a thread, as Claude Code's MCP config names it.
fn frontend_server(config: &AgentConfig, thread_id: &str) -> Value {
    json!({
        "type": "http",
        "url": format!("{}/mcp/{}", config.mcp_base, url_segment(thread_id)),
    })
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
    machine: AguiSession,
    config: Arc<AgentConfig>,
    approvals: Arc<Approvals>,
    shared: Arc<Shared>,
    process: Option<Process>,
    run_events: Option<mpsc::Sender<AguiEvent>>,
    controls: HashMap<Caller, oneshot::Sender<Result<Value, ControlError>>>,
    tool_calls: HashMap<Caller, oneshot::Sender<ToolOutcome>>,
    epoch: Instant,
}

enum Read {
    Bytes(usize),
    Closed,
}

impl ApprovalPolicy for Approvals {
    fn auto_answer(&self, tool_name: &str, input: &Value) -> Option<Value> {
        Approvals::auto_answer(self, tool_name, input)
    }
}

/// How long Claude Code has to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

impl Actor {
    async fn run(mut self, mut commands: mpsc::Receiver<SessionCommand>) {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let deadline = self
                .machine
                .poll_timeout()
                .map(|ms| self.epoch + Duration::from_millis(ms));
            tokio::select! {
                command = commands.recv() => match command {
                    Some(SessionCommand::Stop { done }) => {
                        self.kill("the session was stopped", true).await;
                        let _ = done.send(());
                        return;
                    }
                    Some(command) => self.command(command).await,
                    None => {
                        self.kill("the bridge is shutting down", true).await;
                        return;
                    }
                },
                read = read_some(&mut self.process, &mut buffer) => match read {
                    Read::Bytes(n) => {
                        let lines = match self.process.as_mut() {
                            Some(p) => p.lines.push(&buffer[..n]),
                            None => Vec::new(),
                        };
                        for line in lines {
                            self.line(&line);
                        }
                    }
                    Read::Closed => self.exited().await,
                },
                () = sleep_until(deadline) => {
                    let now = self.now();
                    self.machine.handle_timeout(now);
                }
            }
            self.carry_out().await;
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn command(&mut self, command: SessionCommand) {
        let now = self.now();
        match command {
            SessionCommand::Run {
                input,
                events,
                started,
            } => {
                let result = self.start_run(&input, events).await;
                let _ = started.send(result);
            }
            SessionCommand::Control {
                caller,
                request,
                reply,
            } => {
                self.controls.insert(caller, reply);
                self.machine.handle_control(caller, request, now);
            }
            SessionCommand::Withdraw(caller) => {
                self.controls.remove(&caller);
                self.machine.handle_withdraw(caller, now);
            }
            SessionCommand::FrontendGone(caller) => {
                self.tool_calls.remove(&caller);
                self.machine.handle_frontend_gone(caller, now);
            }
            SessionCommand::Initialize { options, reply } => {
                self.initialize(*options, reply).await;
            }
            SessionCommand::Answer {
                request_id,
                answer,
                kind,
                reply,
            } => {
                let done = match kind {
                    AnswerKind::Approval => self.machine.handle_approval(&request_id, answer),
                    AnswerKind::Hook => self.machine.handle_hook_answer(&request_id, answer),
                    AnswerKind::Mcp => self.machine.handle_mcp_answer(&request_id, answer),
                };
                let _ = reply.send(done);
            }
            SessionCommand::FrontendCall {
                caller,
                name,
                reply,
            } => {
                self.tool_calls.insert(caller, reply);
                self.machine.handle_frontend_call(caller, &name, now);
            }
            SessionCommand::Describe(reply) => {
                let _ = reply.send(self.machine.describe());
            }
            SessionCommand::Replay(reply) => {
                let _ = reply.send(self.machine.replay());
            }
            SessionCommand::Tools { reply, listed } => {
                if listed {
                    self.machine.handle_tools_listed(now);
                }
                let _ = reply.send(self.machine.frontend_tools().to_vec());
            }
            SessionCommand::Stop { .. } => {}
        }
    }

    async fn start_run(
        &mut self,
        input: &RunAgentInput,
        events: mpsc::Sender<AguiEvent>,
    ) -> Result<(), RunRefused> {
        self.machine.check_run()?;
        if self.machine.needs_restart() {
            self.kill(
                "restarting so Claude Code reads the app's environment variables",
                false,
            )
            .await;
            self.carry_out().await;
        }
        if !self.machine.is_alive() {
            self.spawn(None).map_err(RunRefused::Failed)?;
        }
        self.machine.handle_run(input, self.now())?;
        self.run_events = Some(events);
        Ok(())
    }

    /// New `initialize` options: Claude Code restarts (resuming its conversation) to take them.
    async fn initialize(
        &mut self,
        options: InitOptions,
        reply: oneshot::Sender<Result<Value, InitRefused>>,
    ) {
        if self.machine.is_alive() && !self.machine.can_restart() {
            let _ = reply.send(Err(InitRefused::Busy(format!(
                "Claude Code is busy on thread {} (a run streams, a turn is under way or a frontend tool waits for its result); initialize when it is done",
                self.thread_id
            ))));
            return;
        }
        if let Err(e) = self.machine.set_init_options(options) {
            let _ = reply.send(Err(InitRefused::Invalid(e)));
            return;
        }
        // Claude Code's answer (or its failure) reaches the app as the reply.
        let (answered, answer) = oneshot::channel::<Result<Value, ControlError>>();
        tokio::spawn(async move {
            let result = answer
                .await
                .unwrap_or_else(|_| Err(ControlError::Lost(String::from("the session stopped"))));
            let _ = reply.send(result.map_err(|e| InitRefused::Failed(e.to_string())));
        });
        let reply = answered;
        if self.machine.is_alive() {
            self.kill("restarting with new initialize options", false)
                .await;
            self.carry_out().await;
        }
        let caller = self.shared.next_caller.fetch_add(1, Ordering::Relaxed);
        self.controls.insert(caller, reply);
        if let Err(e) = self.spawn(Some(caller))
            && let Some(reply) = self.controls.remove(&caller)
        {
            let _ = reply.send(Err(ControlError::Lost(e)));
        }
    }

    fn spawn(&mut self, caller: Option<Caller>) -> Result<(), String> {
        let mcp = json!({"mcpServers": {
            FRONTEND_SERVER: frontend_server(&self.config, &self.thread_id),
        }});
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
        let resume = self.machine.claude_session_id().map(str::to_owned);
        if let Some(id) = &resume {
            command.args(["--resume", id]);
        }
        if let Some(cwd) = &self.config.cwd {
            command.current_dir(cwd);
        }
        // `--env-file`'s variables, then the session's own, then the app's.
        command.envs(crate::environment::file_only());
        for (k, v) in &self.config.env {
            command.env(k, v);
        }
        command.envs(self.machine.environment());
        command
            .env("CLAUDE_CODE_ENTRYPOINT", "sdk-claude-bridge")
            // `rewind_files` needs Claude Code's file checkpoints (off in SDK mode by default).
            .env("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING", "true")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let now = self.now();
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                let reason = format!(
                    "cannot start Claude Code `{}`: {e} (set --claude-bin)",
                    self.config.claude_path
                );
                self.machine.handle_spawn_failed(&reason, now);
                self.sync_shared();
                return Err(reason);
            }
        };
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
        self.machine.handle_spawned(now, caller);
        Ok(())
    }

    /// Carry out what the machine decided.
    async fn carry_out(&mut self) {
        while let Some(output) = self.machine.poll_output() {
            let Some(output) = self.answer(output) else {
                continue;
            };
            match output {
                Output::Write(line) => {
                    if let Err(e) = self.write(&line).await {
                        warn!(thread = %self.thread_id, error = %e, "Claude Code's stdin is closed");
                        self.kill(&e, false).await;
                        let now = self.now();
                        self.machine.handle_exited(&e, now);
                    }
                }
                Output::Approval(request) => {
                    info!(thread = %self.thread_id, tool = %request.tool_name, request_id = %request.request_id, "tool call waits for approval");
                    let id = request.request_id.clone();
                    self.approvals.tools.add(&self.thread_id, &id, request);
                }
                Output::Hook(request) => {
                    info!(thread = %self.thread_id, hook = ?request.hook_event, request_id = %request.request_id, "hook call waits for the app");
                    let id = request.request_id.clone();
                    self.approvals.hooks.add(&self.thread_id, &id, request);
                }
                Output::Mcp(request) => {
                    debug!(thread = %self.thread_id, server = %request.server_name, method = %request.message["method"], "MCP request waits for the app");
                    let id = request.request_id.clone();
                    self.approvals.mcp.add(&self.thread_id, &id, request);
                }
                Output::Withdrawn { request_id } => self.approvals.forget(&request_id),
                Output::ToolsChanged => {
                    self.shared.tools_changed.send_modify(|n| *n += 1);
                    if self.shared.tools_changed.receiver_count() == 0 {
                        // No notification stream is open: nobody will list them now.
                        let now = self.now();
                        self.machine.handle_tools_listed(now);
                    }
                }
                Output::Kill { reason } => {
                    warn!(thread = %self.thread_id, %reason, "killing Claude Code");
                    self.kill(&reason, false).await;
                    let now = self.now();
                    self.machine.handle_exited(&reason, now);
                }
                Output::Log { level, message } => match level {
                    LogLevel::Info => info!(thread = %self.thread_id, "{message}"),
                    LogLevel::Warn => warn!(thread = %self.thread_id, "{message}"),
                },
                Output::Event(_)
                | Output::RunEnded
                | Output::ControlDone { .. }
                | Output::ToolAnswer { .. } => {} // carried out by `answer`
            }
        }
        self.sync_shared();
    }

    /// An event for the running run's client (a client that left does not stop the run; one
    /// that reads too slowly loses its stream; `agent/connect` replays the thread).
    fn forward(&mut self, event: AguiEvent) {
        let Some(tx) = &self.run_events else {
            return;
        };
        match tx.try_send(event) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                warn!(thread = %self.thread_id, queue = EVENT_QUEUE, "the client reads too slowly: its stream is closed, the run goes on (agent/connect replays it)");
                self.run_events = None;
            }
        }
    }

    fn sync_shared(&self) {
        if let Ok(mut status) = self.shared.status.lock() {
            *status = self.machine.status();
        }
        if let Ok(mut id) = self.shared.claude_session.lock() {
            *id = self.machine.claude_session_id().map(str::to_owned);
        }
        self.shared
            .waiting_client
            .store(self.machine.waits_for_client(), Ordering::Relaxed);
    }

    async fn write(&mut self, line: &str) -> Result<(), String> {
        let Some(process) = self.process.as_mut() else {
            return Err(String::from("Claude Code is not running"));
        };
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
    fn line(&mut self, line: &str) {
        if let Some(file) = self.process.as_mut().and_then(|p| p.transcript.as_mut()) {
            use std::io::Write as _;
            if let Err(e) = writeln!(file, "{line}") {
                debug!(thread = %self.thread_id, error = %e, "cannot write the transcript");
            }
        }
        let now = self.now();
        self.machine.handle_line(line, now, self.approvals.as_ref());
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
        self.forget_process();
        let now = self.now();
        self.machine.handle_exited(&reason, now);
    }

    /// Stop the process — SIGTERM, so Claude Code finishes writing its session file (a later
    /// `--resume` reads it), then SIGKILL if it is still there after [`STOP_GRACE`];
    /// `for_good`: the session ends (otherwise it may start again).
    async fn kill(&mut self, reason: &str, for_good: bool) {
        if let Some(mut process) = self.process.take() {
            // Its stdin closed too: in stream-json mode that alone ends Claude Code.
            drop(process.stdin);
            let ended = match process.child.id() {
                Some(pid) => {
                    crate::process_tree::terminate(pid);
                    tokio::time::timeout(STOP_GRACE, process.child.wait())
                        .await
                        .is_ok()
                }
                None => true,
            };
            if ended {
                info!(thread = %self.thread_id, reason, "Claude Code session stopped");
            } else {
                let _ = process.child.start_kill();
                let _ = tokio::time::timeout(STOP_GRACE, process.child.wait()).await;
                warn!(thread = %self.thread_id, reason, grace_s = STOP_GRACE.as_secs(), "Claude Code did not stop after SIGTERM; killed");
            }
        }
        self.forget_process();
        let now = self.now();
        self.machine.handle_stopped(reason, for_good, now);
        if for_good {
            self.carry_out_final();
        }
    }

    /// The last outputs of a session that ends: nothing is written any more.
    fn carry_out_final(&mut self) {
        while let Some(output) = self.machine.poll_output() {
            self.answer(output);
        }
        self.approvals.forget_thread(&self.thread_id);
        self.sync_shared();
    }

    /// Carry out an output that only answers someone waiting (the run's client, a control
    /// request's caller, an MCP call); returns any other output.
    fn answer(&mut self, output: Output) -> Option<Output> {
        match output {
            Output::Event(event) => self.forward(event),
            Output::RunEnded => self.run_events = None,
            Output::ControlDone { caller, result } => {
                if let Some(reply) = self.controls.remove(&caller) {
                    let _ = reply.send(result);
                }
            }
            Output::ToolAnswer { caller, outcome } => {
                let delivered = self
                    .tool_calls
                    .remove(&caller)
                    .is_some_and(|reply| reply.send(outcome).is_ok());
                if !delivered {
                    let now = self.now();
                    self.machine.handle_tool_answer_lost(caller, now);
                }
            }
            other => return Some(other),
        }
        None
    }

    fn forget_process(&mut self) {
        if let Ok(mut pid) = self.shared.pid.lock() {
            *pid = None;
        }
        self.approvals.forget_thread(&self.thread_id);
    }
}

/// Read what Claude Code wrote (pending forever without a process).
async fn read_some(process: &mut Option<Process>, buffer: &mut [u8]) -> Read {
    match process {
        Some(p) => match p.stdout.read(buffer).await {
            Ok(0) | Err(_) => Read::Closed,
            Ok(n) => Read::Bytes(n),
        },
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
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
