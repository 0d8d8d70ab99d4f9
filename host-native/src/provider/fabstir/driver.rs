//! The Fabstir session driver: one task that owns the encrypted WebSocket to the host and the
//! core's session state machine ([`bridge_core::fabstir::session::Session`]), and carries out its
//! effects. Request handlers hand it prompts ([`Fabstir::prompt`]) and read the reply's decrypted
//! tokens from a channel; everything about order, recovery, spending and timeouts is decided by
//! the state machine.
//!
//! Jobs come from a [`JobSource`]: in direct mode (for host operators) the one job given with
//! `--job-id`, which after the host settles it (the socket closed) cannot be replaced; in chain
//! mode a new job paid on-chain with a host chosen from the NodeRegistry, recorded in the ledger.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use k256::SecretKey;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tracing::{debug, info, warn};

use bridge_core::anthropic::events::{ApiError, ErrorKind};
use bridge_core::api::StreamEnd;
use bridge_core::fabstir::protocol::{
    ClientFrame, HostFrame, INIT_ALG, InitPayload, PromptPlain, Sealed, SessionInitPlain,
    parse_host_frame,
};
use bridge_core::fabstir::session::{Effect, Limits, PromptId, Session};

use super::crypto::{self, Key, Randomness};
use super::jobs::{JobSource, Target};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What every session of the driver shares.
#[derive(Clone)]
pub struct SessionConfig {
    /// The chain the jobs are on (sent in the init).
    pub chain_id: u64,
    /// The client's wallet key (signs the init).
    pub wallet: SecretKey,
    /// The model's name as the host knows it.
    pub model: String,
    /// Seconds to connect.
    pub connect_timeout: Duration,
    /// TLS for `https://` hosts (web PKI roots plus `--ca-cert`).
    pub tls: std::sync::Arc<rustls::ClientConfig>,
    /// Deposits, the spending cap and timeouts.
    pub limits: Limits,
    /// The core that writes the session-init plaintext (the same engine that renders prompts).
    pub engine: std::sync::Arc<dyn crate::engine::Engine>,
}

impl std::fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionConfig")
            .field("chain_id", &self.chain_id)
            .field("model", &self.model)
            .field("wallet", &"<secret>")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// What a prompt's reader receives.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Decrypted model text.
    Text(String),
    /// The reply is complete; what its tokens cost at the job's price (chain mode and direct
    /// mode with a price).
    End(StreamEnd, Option<crate::gateway::Paid>),
    /// The prompt failed.
    Failed(ApiError),
}

enum Command {
    Prompt {
        id: PromptId,
        plain: PromptPlain,
        reply: mpsc::UnboundedSender<Reply>,
    },
    ClientGone(PromptId),
    /// Close the session (the host settles the job), then say so.
    Shutdown(tokio::sync::oneshot::Sender<()>),
}

/// A handle to the driver task.
#[derive(Debug, Clone)]
pub struct Fabstir {
    commands: mpsc::UnboundedSender<Command>,
    next_id: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The prompt's handle: its replies, and a guard that tells the driver when the reader leaves.
#[derive(Debug)]
pub struct PromptHandle {
    /// Replies, in order; ends after `End` or `Failed`.
    pub replies: mpsc::UnboundedReceiver<Reply>,
    id: PromptId,
    commands: mpsc::UnboundedSender<Command>,
    finished: bool,
}

impl PromptHandle {
    /// The reader got `End` or `Failed`: dropping the handle is not a cancellation.
    pub fn mark_finished(&mut self) {
        self.finished = true;
    }
}

impl Drop for PromptHandle {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.commands.send(Command::ClientGone(self.id));
        }
    }
}

impl Fabstir {
    /// Start the driver with its job source.
    #[must_use]
    pub fn start(
        config: SessionConfig,
        jobs: JobSource,
        rng: Box<dyn Randomness + Send + Sync>,
    ) -> Self {
        let (commands, rx) = mpsc::unbounded_channel();
        let driver = Driver {
            session: Session::new(config.limits),
            config,
            jobs,
            target: None,
            rng,
            started: Instant::now(),
            socket: None,
            prompts: HashMap::new(),
            running: None,
        };
        tokio::spawn(driver.run(rx));
        Self {
            commands,
            next_id: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1)),
        }
    }

    /// Close the session now — a WebSocket close, so the host settles the job, recorded in the
    /// ledger — instead of when the last handle goes; resolves when it is closed. Prompts
    /// queued after it fail.
    pub async fn shutdown(&self) {
        let (done, closed) = tokio::sync::oneshot::channel();
        if self.commands.send(Command::Shutdown(done)).is_ok() {
            let _ = closed.await;
        }
    }

    /// Queue a prompt; its replies arrive on the handle.
    #[must_use]
    pub fn prompt(&self, plain: PromptPlain) -> PromptHandle {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (reply, replies) = mpsc::unbounded_channel();
        let _ = self.commands.send(Command::Prompt { id, plain, reply });
        PromptHandle {
            replies,
            id,
            commands: self.commands.clone(),
            finished: false,
        }
    }
}

struct Pending {
    plain: PromptPlain,
    reply: mpsc::UnboundedSender<Reply>,
}

/// The prompt on the wire: its message id, the session key, what the host said so far.
struct Running {
    prompt: PromptId,
    /// `None` until the prompt is sent (the init was, with this key).
    message_id: Option<String>,
    key: Key,
    finish_reason: Option<String>,
    end: Option<StreamEnd>,
    /// What the host's token count cost at the job's price.
    paid: Option<crate::gateway::Paid>,
}

struct Driver {
    config: SessionConfig,
    jobs: JobSource,
    /// The current job's host and id.
    target: Option<Target>,
    rng: Box<dyn Randomness + Send + Sync>,
    session: Session,
    started: Instant,
    socket: Option<Socket>,
    prompts: HashMap<PromptId, Pending>,
    running: Option<Running>,
}

impl Driver {
    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        loop {
            self.carry_out_effects().await;
            let deadline = self
                .session
                .poll_timeout()
                .map(|ms| tokio::time::Instant::from_std(self.started + Duration::from_millis(ms)));
            tokio::select! {
                command = commands.recv() => match command {
                    Some(Command::Prompt { id, plain, reply }) => {
                        self.prompts.insert(id, Pending { plain, reply });
                        let now = self.now();
                        self.session.handle_prompt(id, now);
                    }
                    Some(Command::ClientGone(id)) => {
                        debug!(prompt = id, "client left");
                        let now = self.now();
                        self.session.handle_client_gone(id, now);
                        self.prompts.remove(&id);
                    }
                    Some(Command::Shutdown(done)) => {
                        if let Some(target) = &self.target
                            && self.socket.is_some()
                        {
                            info!(job_id = target.job_id, "closing the Fabstir session: the bridge is stopping");
                        }
                        self.close_socket().await;
                        for (_, pending) in self.prompts.drain() {
                            let _ = pending.reply.send(Reply::Failed(ApiError::new(
                                ErrorKind::Overloaded,
                                "the bridge is shutting down",
                            )));
                        }
                        let _ = done.send(());
                        return;
                    }
                    None => break,
                },
                frame = next_frame(&mut self.socket) => self.frame(frame).await,
                () = sleep_until(deadline) => {
                    let now = self.now();
                    self.session.handle_timeout(now);
                }
            }
        }
        self.close_socket().await;
    }

    /// Close the socket, if open: the host settles the job.
    async fn close_socket(&mut self) {
        if let Some(mut socket) = self.socket.take() {
            let _ = socket.close(None).await;
            self.job_closed().await;
        }
    }

    /// The job's socket is gone: the host settles the job.
    async fn job_closed(&mut self) {
        if let Some(target) = &self.target {
            self.jobs.job_closed(target).await;
        }
    }

    /// The job's host failed the running prompt.
    fn host_failed(&mut self) {
        if let Some(target) = &self.target {
            self.jobs.host_failed(target);
        }
    }

    fn session_id(&self) -> String {
        self.target
            .as_ref()
            .map(|t| t.job_id.to_string())
            .unwrap_or_default()
    }

    async fn carry_out_effects(&mut self) {
        while let Some(effect) = self.session.poll_effect() {
            match effect {
                Effect::CreateJob { deposit } => {
                    let created = self.jobs.create(deposit, &mut *self.rng).await;
                    let now = self.now();
                    match created {
                        Ok(target) => {
                            let job_id = target.job_id;
                            self.target = Some(target);
                            self.session.handle_job_created(job_id, now);
                        }
                        Err(no_job) if no_job.maybe_paid => {
                            warn!(message = %no_job.error.message, "no Fabstir job (perhaps paid)");
                            self.session.handle_job_unconfirmed(no_job.error, now);
                        }
                        Err(no_job) => {
                            warn!(message = %no_job.error.message, "no Fabstir job");
                            self.session.handle_job_failed(no_job.error, now);
                        }
                    }
                }
                Effect::OpenSocket { job_id } => match self.connect().await {
                    Ok((socket, millis)) => {
                        if let Some(target) = &self.target {
                            info!(job_id, host = %target.host_url, millis, "Fabstir session open");
                            self.jobs.host_reached(target, millis);
                        }
                        self.socket = Some(socket);
                        let now = self.now();
                        self.session.handle_socket_opened(now);
                    }
                    Err(error) => {
                        warn!(%error.message, "cannot reach the Fabstir host");
                        self.host_failed();
                        let now = self.now();
                        self.session.handle_socket_failed(error, now);
                    }
                },
                Effect::SendInit { job_id, prompt } => {
                    if let Err(error) = self.send_init(job_id, prompt).await {
                        self.send_failed(error);
                    }
                }
                Effect::SendPrompt { prompt } => {
                    if let Err(error) = self.send_prompt(prompt).await {
                        self.send_failed(error);
                    }
                }
                Effect::CancelPrompt { prompt } => {
                    self.prompts.remove(&prompt);
                    self.running = None;
                    let frame = ClientFrame::StreamCancel {
                        session_id: self.session_id(),
                        reason: String::from("user_cancelled"),
                    };
                    let _ = self.send(&frame).await;
                }
                Effect::PromptDone { prompt } => {
                    let running = self.running.take().filter(|r| r.prompt == prompt);
                    let paid = running.as_ref().and_then(|r| r.paid);
                    let end = running.and_then(|r| r.end).unwrap_or_default();
                    if let Some(p) = self.prompts.remove(&prompt) {
                        let _ = p.reply.send(Reply::End(end, paid));
                    }
                }
                Effect::PromptFailed { prompt, mut error } => {
                    // The session machine does not know hosts: name the one that failed.
                    if self.target.is_some() && !error.message.contains(&self.host_label()) {
                        error.message = error.message.replacen(
                            "the Fabstir host",
                            &format!("the Fabstir host {}", self.host_label()),
                            1,
                        );
                    }
                    if let Some(p) = self.prompts.remove(&prompt) {
                        let _ = p.reply.send(Reply::Failed(error));
                    }
                    if self.running.as_ref().is_some_and(|r| r.prompt == prompt) {
                        self.running = None;
                    }
                }
                Effect::PromptRecovering {
                    prompt,
                    error,
                    new_job,
                } => {
                    warn!(
                        prompt,
                        host = %self.host_label(),
                        reason = %error.message,
                        on = if new_job { "a new job" } else { "the same job" },
                        "the Fabstir session failed before the first token; sending the prompt again"
                    );
                    if self.running.as_ref().is_some_and(|r| r.prompt == prompt) {
                        self.running = None;
                    }
                }
                Effect::CloseSocket => {
                    // Only a host that stopped answering in time is abandoned.
                    self.host_failed();
                    self.close_socket().await;
                }
            }
        }
    }
}

impl Driver {
    /// Open the socket to the current job's host; also returns how long it took (ms).
    async fn connect(&self) -> Result<(Socket, u64), ApiError> {
        let Some(target) = &self.target else {
            return Err(ApiError::new(
                ErrorKind::Api,
                "no Fabstir job to connect to",
            ));
        };
        let started = Instant::now();
        let base = target.host_url.trim_end_matches('/');
        let url = if let Some(rest) = base.strip_prefix("https://") {
            format!("wss://{rest}/v1/ws")
        } else if let Some(rest) = base.strip_prefix("http://") {
            format!("ws://{rest}/v1/ws")
        } else {
            format!("{base}/v1/ws")
        };
        let unreachable = |e: String| {
            ApiError::new(
                ErrorKind::Overloaded,
                format!("cannot open the Fabstir session at {url}: {e}"),
            )
        };
        let connecting = tokio_tungstenite::connect_async_tls_with_config(
            url.as_str(),
            None,
            false,
            Some(tokio_tungstenite::Connector::Rustls(std::sync::Arc::clone(
                &self.config.tls,
            ))),
        );
        let (mut socket, _) = tokio::time::timeout(self.config.connect_timeout, connecting)
            .await
            .map_err(|_| unreachable(String::from("timed out")))?
            .map_err(|e| unreachable(e.to_string()))?;
        // The host greets with `connected` first.
        let greeting = tokio::time::timeout(self.config.connect_timeout, socket.next()).await;
        match greeting {
            Ok(Some(Ok(Message::Text(text)))) => match parse_host_frame(&text) {
                Ok(HostFrame::Connected { .. }) => Ok((
                    socket,
                    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                )),
                Ok(other) => Err(unreachable(format!("expected `connected`, got {other:?}"))),
                Err(e) => Err(unreachable(e.to_string())),
            },
            _ => Err(unreachable(String::from("no `connected` greeting"))),
        }
    }

    async fn send(&mut self, frame: &ClientFrame) -> Result<(), ApiError> {
        let text = serde_json::to_string(frame)
            .map_err(|e| ApiError::new(ErrorKind::Api, e.to_string()))?;
        let Some(socket) = self.socket.as_mut() else {
            return Err(ApiError::new(
                ErrorKind::Overloaded,
                "the Fabstir session is not open",
            ));
        };
        let sent = socket.send(Message::text(text)).await;
        sent.map_err(|e| {
            // A socket that cannot be written is gone (the host settles the job).
            self.socket = None;
            ApiError::new(
                ErrorKind::Overloaded,
                format!("the Fabstir session failed: {e}"),
            )
        })
    }

    /// Sending a prompt's frames failed: a dead socket ends the job, anything else the prompt.
    fn send_failed(&mut self, error: ApiError) {
        let now = self.now();
        if self.socket.is_none() {
            warn!(message = %error.message, "the Fabstir session is gone");
            self.session.handle_socket_closed(now);
        } else {
            self.session.handle_host_error(error, now);
        }
    }

    /// A fresh session key sealed to the host, signed by the wallet (before every prompt).
    async fn send_init(&mut self, job_id: u64, prompt: PromptId) -> Result<(), ApiError> {
        let Some(target) = self.target.clone() else {
            return Err(ApiError::new(ErrorKind::Api, "no Fabstir job"));
        };
        let key = crypto::random_key(&mut *self.rng);
        let plain = SessionInitPlain {
            session_key: format!("0x{}", crypto::to_hex(&key)),
            job_id: job_id.to_string(),
            model_name: self.config.model.clone(),
            price_per_token: target.price_per_token,
            recovery_public_key: None,
        };
        let plaintext = self
            .config
            .engine
            .fabstir_session_init(&plain.to_plaintext())
            .map_err(|e| ApiError::new(ErrorKind::Api, e.to_string()))?;
        let eph = crypto::ephemeral_key(&mut *self.rng);
        let envelope_key = crypto::derive_key(&crypto::shared_x(&eph, &target.host_pubkey));
        let nonce = crypto::nonce(&mut *self.rng);
        let ciphertext = crypto::seal(&envelope_key, &nonce, b"", plaintext.as_bytes());
        let signature = crypto::sign_sha256(&self.config.wallet, &ciphertext);
        let mut salt = [0u8; 32];
        self.rng.fill(&mut salt);
        let frame = ClientFrame::EncryptedSessionInit {
            payload: InitPayload {
                eph_pub_hex: crypto::to_hex(&crypto::compressed(&eph.public_key())),
                salt_hex: crypto::to_hex(&salt),
                nonce_hex: crypto::to_hex(&nonce),
                ciphertext_hex: crypto::to_hex(&ciphertext),
                signature_hex: crypto::to_hex(&signature),
                recid: signature[64],
                alg: String::from(INIT_ALG),
                info: String::new(),
                aad_hex: String::new(),
            },
            chain_id: self.config.chain_id,
            session_id: job_id.to_string(),
            job_id: job_id.to_string(),
        };
        self.running = Some(Running {
            prompt,
            message_id: None,
            key,
            finish_reason: None,
            end: None,
            paid: None,
        });
        self.send(&frame).await
    }

    async fn send_prompt(&mut self, prompt: PromptId) -> Result<(), ApiError> {
        let Some(pending) = self.prompts.get(&prompt) else {
            return Err(ApiError::new(ErrorKind::Api, "the prompt is gone"));
        };
        let plaintext = serde_json::to_vec(&pending.plain)
            .map_err(|e| ApiError::new(ErrorKind::Api, e.to_string()))?;
        let now = self.now();
        let Some(running) = self.running.as_mut().filter(|r| r.prompt == prompt) else {
            return Err(ApiError::new(
                ErrorKind::Api,
                "no session key for the prompt",
            ));
        };
        let nonce = crypto::nonce(&mut *self.rng);
        // A fresh init restarts the message counter: every prompt is message 0.
        let aad = b"message_0";
        let ciphertext = crypto::seal(&running.key, &nonce, aad, &plaintext);
        let mut tag = [0u8; 6];
        self.rng.fill(&mut tag);
        let message_id = format!("{now}-{}", crypto::to_hex(&tag));
        let session_id = self.session_id();
        let Some(running) = self.running.as_mut() else {
            return Err(ApiError::new(
                ErrorKind::Api,
                "no session key for the prompt",
            ));
        };
        running.message_id = Some(message_id.clone());
        let frame = ClientFrame::EncryptedMessage {
            session_id,
            id: message_id,
            payload: Sealed {
                ciphertext_hex: crypto::to_hex(&ciphertext),
                nonce_hex: crypto::to_hex(&nonce),
                aad_hex: crypto::to_hex(aad),
                index: None,
            },
            web_search: false,
            max_searches: 0,
            search_queries: None,
        };
        self.send(&frame).await
    }

    /// One event from the socket (`None`: it closed).
    async fn frame(&mut self, frame: Option<Result<Message, String>>) {
        let now = self.now();
        let text = match frame {
            Some(Ok(Message::Text(text))) => text.to_string(),
            Some(Ok(Message::Close(_))) | None => {
                info!("the Fabstir host closed the session (it settles the job)");
                self.socket_gone(now).await;
                return;
            }
            Some(Ok(_)) => return,
            Some(Err(e)) => {
                warn!(error = %e, "the Fabstir session failed");
                self.socket_gone(now).await;
                return;
            }
        };
        let frame = match parse_host_frame(&text) {
            Ok(frame) => frame,
            Err(e) => {
                warn!(error = %e, "unreadable frame from the host");
                return;
            }
        };
        match frame {
            HostFrame::SessionInitAck { status, .. } => {
                if status.as_deref().is_none_or(|s| s == "success") {
                    self.session.handle_init_acked(now);
                } else {
                    let host = self.host_label();
                    self.session.handle_host_error(
                        ApiError::new(
                            ErrorKind::Api,
                            format!("the Fabstir host {host} refused the session: {status:?}"),
                        ),
                        now,
                    );
                }
            }
            HostFrame::EncryptedChunk { payload, id, .. } => {
                let Some(running) = self.running.as_ref() else {
                    return;
                };
                if id.is_some() && id != running.message_id {
                    return; // a cancelled reply's late chunk
                }
                match open(&running.key, &payload) {
                    Ok(text) => {
                        if let Some(p) = self.prompts.get(&running.prompt) {
                            let _ = p.reply.send(Reply::Text(text));
                        }
                        self.session.handle_chunk(now);
                    }
                    Err(error) => self.session.handle_host_error(error, now),
                }
            }
            HostFrame::EncryptedResponse { payload } => {
                if let Some(running) = self.running.as_mut()
                    && let Ok(reason) = open(&running.key, &payload)
                {
                    running.finish_reason = Some(reason);
                }
            }
            HostFrame::StreamEnd(end) => {
                let Some(running) = self.running.as_mut() else {
                    return;
                };
                if end.id.is_some() && end.id != running.message_id {
                    return;
                }
                if end.reason.as_deref() == Some("error") && running.end.is_none() {
                    // The error frame came first and already failed the prompt.
                }
                let usage = end.usage.clone().unwrap_or_default();
                running.end = Some(StreamEnd {
                    finish_reason: end
                        .finish_reason
                        .clone()
                        .or_else(|| running.finish_reason.clone()),
                    prompt_tokens: usage.prompt_tokens,
                    completion_tokens: end.tokens_used.or(usage.completion_tokens),
                });
                let tokens = end.tokens_used.unwrap_or(0);
                running.paid = self.target.as_ref().map(|t| crate::gateway::Paid {
                    amount: u128::from(tokens).saturating_mul(u128::from(t.price_per_token))
                        / super::ledger::PRICE_PRECISION,
                    unit: self.config.limits.unit,
                    decimals: self.config.limits.decimals,
                });
                if let Some(target) = self.target.clone() {
                    self.jobs.tokens_used(&target, tokens).await;
                }
                self.session.handle_stream_end(now);
            }
            HostFrame::Error(error) => {
                let api = error.to_api_error(&self.host_label());
                warn!(message = %api.message, "the Fabstir host reported an error");
                self.session.handle_host_error(api, now);
            }
            HostFrame::Connected { .. } | HostFrame::Pong | HostFrame::Unknown => {}
        }
    }
}

impl Driver {
    /// The current host, as error messages name it (its URL).
    fn host_label(&self) -> String {
        self.target
            .as_ref()
            .map_or_else(|| String::from("(none)"), |t| t.host_url.clone())
    }

    /// The socket closed or broke: a reply cut short counts against the host; the job is settled.
    async fn socket_gone(&mut self, now: u64) {
        self.socket = None;
        if self.running.is_some() {
            self.host_failed();
        }
        self.job_closed().await;
        self.session.handle_socket_closed(now);
    }
}

/// Decrypt a host envelope with the session key (the AAD is the one the frame carries).
fn open(key: &Key, sealed: &Sealed) -> Result<String, ApiError> {
    let bad = |e: crypto::CryptoError| {
        ApiError::new(
            ErrorKind::Api,
            format!("a reply from the Fabstir host did not decrypt: {e}"),
        )
    };
    let nonce: crypto::Nonce = crypto::from_hex_array(&sealed.nonce_hex, "nonce").map_err(bad)?;
    let aad = crypto::from_hex(&sealed.aad_hex, "aad").map_err(bad)?;
    let ciphertext = crypto::from_hex(&sealed.ciphertext_hex, "ciphertext").map_err(bad)?;
    let plain = crypto::open(key, &nonce, &aad, &ciphertext).map_err(bad)?;
    String::from_utf8(plain).map_err(|_| {
        ApiError::new(
            ErrorKind::Api,
            "a reply from the Fabstir host was not UTF-8 text",
        )
    })
}

/// The next message of the socket, or never when there is none.
async fn next_frame(socket: &mut Option<Socket>) -> Option<Result<Message, String>> {
    match socket {
        Some(socket) => socket.next().await.map(|r| r.map_err(|e| e.to_string())),
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
