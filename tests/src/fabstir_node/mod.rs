//! A local Fabstir host node that speaks the live host's protocol exactly
//! (`reference/fabstir-protocol.md` §1–2): WebSocket at `/v1/ws`, `connected` greeting, the
//! `encrypted_session_init` opened with real secp256k1 ECDH + HKDF + XChaCha20-Poly1305 and its
//! signature recovered, `session_init_ack`, prompts decrypted, the reply sealed chunk by chunk
//! (`chunk_<i>`, `encrypted_response_final`), `stream_end` with token usage, `stream_cancel`
//! honoured mid-stream, and a closed socket recorded as the job settled.
//!
//! Only the model is scripted: a [`Script`] turns each decrypted prompt into the tokens to emit.
//!
//! It reads every client frame and plaintext with the real node's own types and checks, and
//! answers a refusal with the real node's error frame ([`wire`] lists each check and what it
//! mirrors), so a client that drifts from the live protocol fails here too.
//!
//! On a chain ([`HostNode::start_on_chain`]) the node also does what the live host does with the
//! job: an init for a job that is not an active job of this host is refused, and a socket that
//! closes settles its job on-chain (tokens proven, then `completeSessionJob`). A killed session
//! ([`HostNode::kill_sessions`], a crash) settles nothing.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use claude_bridge::fabstir::crypto::{self, Key, Randomness};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

pub mod wire;

pub use wire::NodePrompt;

/// The model: the tokens to answer a prompt with.
pub type Script = Arc<dyn Fn(&NodePrompt) -> Vec<String> + Send + Sync>;

/// What the node saw.
#[derive(Debug, Default, Clone)]
pub struct NodeLog {
    /// Decrypted prompts as the real node reads them, in order.
    pub prompts: Vec<NodePrompt>,
    /// (job id, the client address recovered from the init signature), per init.
    pub inits: Vec<(String, String)>,
    /// Jobs whose socket closed (the live host settles them on-chain).
    pub settled: Vec<String>,
    /// `stream_cancel` frames received.
    pub cancels: usize,
    /// Sockets accepted.
    pub connections: usize,
    /// Sockets the client closed properly (a WebSocket close frame), not just dropped.
    pub closed_by_client: usize,
    /// Sessions that crashed on a prompt before its first token ([`HostNode::crash_before_reply`]).
    pub crashed_before_reply: usize,
    /// Error frames sent (`code` or, for validation errors, `error`), in order.
    pub errors: Vec<String>,
    /// Frames dropped because a reply was streaming (the real node drops them too).
    pub dropped_while_streaming: usize,
}

/// A running node; stopped on drop.
#[derive(Debug)]
pub struct HostNode {
    addr: SocketAddr,
    tls: bool,
    pubkey: Vec<u8>,
    log: Arc<Mutex<NodeLog>>,
    accept: JoinHandle<()>,
    sessions: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// Prompts still to be answered by a crash (see [`HostNode::crash_before_reply`]).
    crashes: Arc<AtomicU64>,
}

/// Aborts its task when dropped, so killing a session kills its writer and its replies too.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Deterministic bytes for the node's nonces (a test node needs no secrecy).
struct Counter(u64);

impl Randomness for Counter {
    fn fill(&mut self, out: &mut [u8]) {
        for b in out {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            *b = (self.0 >> 33) as u8;
        }
    }
}

impl HostNode {
    /// Start on `127.0.0.1:0` with this static key and model.
    ///
    /// # Errors
    /// Binding fails or the key is invalid.
    pub async fn start(secret: [u8; 32], script: Script) -> crate::Result<Self> {
        Self::start_with(secret, script, None, None).await
    }

    /// Start with jobs checked against and settled on the local chain.
    ///
    /// # Errors
    /// Binding fails or the key is invalid.
    pub async fn start_on_chain(
        secret: [u8; 32],
        script: Script,
        chain: Arc<crate::evm_world::NodeChain>,
    ) -> crate::Result<Self> {
        Self::start_with(secret, script, None, Some(chain)).await
    }

    /// Start serving `wss://` with this TLS acceptor (see [`crate::tls::TestCert`]).
    ///
    /// # Errors
    /// Binding fails or the key is invalid.
    pub async fn start_tls(
        secret: [u8; 32],
        script: Script,
        acceptor: tokio_rustls::TlsAcceptor,
    ) -> crate::Result<Self> {
        Self::start_with(secret, script, Some(acceptor), None).await
    }

    async fn start_with(
        secret: [u8; 32],
        script: Script,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
        chain: Option<Arc<crate::evm_world::NodeChain>>,
    ) -> crate::Result<Self> {
        let tls = acceptor.is_some();
        let key = crypto::secret_key(&secret, "node key")?;
        let pubkey = crypto::compressed(&key.public_key());
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let log = Arc::new(Mutex::new(NodeLog::default()));
        let sessions = Arc::new(Mutex::new(Vec::new()));
        let crashes = Arc::new(AtomicU64::new(0));
        let accept = {
            let (log, sessions, crashes) = (
                Arc::clone(&log),
                Arc::clone(&sessions),
                Arc::clone(&crashes),
            );
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (script, log, acceptor, chain) = (
                        Arc::clone(&script),
                        Arc::clone(&log),
                        acceptor.clone(),
                        chain.clone(),
                    );
                    let crashes = Arc::clone(&crashes);
                    let task = tokio::spawn(async move {
                        match acceptor {
                            Some(acceptor) => match acceptor.accept(stream).await {
                                Ok(stream) => {
                                    serve(stream, secret, script, log, chain, crashes).await
                                }
                                Err(e) => eprintln!("fabstir node: TLS handshake failed: {e}"),
                            },
                            None => serve(stream, secret, script, log, chain, crashes).await,
                        }
                    });
                    if let Ok(mut s) = sessions.lock() {
                        s.push(task);
                    }
                }
            })
        };
        Ok(Self {
            addr,
            tls,
            pubkey,
            log,
            accept,
            sessions,
            crashes,
        })
    }

    /// `http://127.0.0.1:PORT`, or `https://127.0.0.1:PORT` with TLS (the bridge appends `/v1/ws`).
    #[must_use]
    pub fn url(&self) -> String {
        if self.tls {
            format!("https://{}", self.addr)
        } else {
            format!("http://{}", self.addr)
        }
    }

    /// The node's public key, compressed hex.
    #[must_use]
    pub fn pubkey_hex(&self) -> String {
        crypto::to_hex(&self.pubkey)
    }

    /// What the node saw so far.
    #[must_use]
    pub fn log(&self) -> NodeLog {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// POST a streaming Messages request to the bridge at `base_url`, and once its first bytes
    /// arrived (the host is answering), kill the node's sessions; returns what the client got.
    ///
    /// # Errors
    /// The request failed at the HTTP level.
    pub async fn kill_mid_stream(
        &self,
        base_url: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> crate::Result<crate::http::HttpResponse> {
        let url = format!("{base_url}/v1/messages");
        let (first_byte, got_first) = tokio::sync::oneshot::channel();
        let pending = tokio::spawn(async move {
            crate::http::send_notify_first_byte(
                "POST",
                &url,
                crate::http::MESSAGES_HEADERS,
                Some(body),
                timeout,
                first_byte,
            )
            .await
        });
        got_first
            .await
            .map_err(|_| crate::err("the response ended before its first byte"))?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.kill_sessions();
        pending.await?
    }

    /// The next `n` prompts find the host crashing as they arrive: the session drops without a
    /// close before the first token, and its job is not settled (a crash settles nothing).
    pub fn crash_before_reply(&self, n: u64) {
        self.crashes.store(n, Ordering::SeqCst);
    }

    /// Kill every open session abruptly (as a crashed host would): sockets drop without a close.
    pub fn kill_sessions(&self) {
        if let Ok(mut sessions) = self.sessions.lock() {
            for task in sessions.drain(..) {
                task.abort();
            }
        }
    }
}

impl Drop for HostNode {
    fn drop(&mut self) {
        self.accept.abort();
        self.kill_sessions();
    }
}

/// A toy model for trying the bridge by hand: it answers in plain text, or with a Bash tool call
/// (JSON format, after a `<think>`) when the last user turn asks it to "run `CMD`", and reports a
/// tool result when it gets one.
#[must_use]
pub fn toy_model(prompt: &NodePrompt) -> Vec<String> {
    let text = &prompt.prompt;
    let last_user = text
        .rsplit("<|im_start|>user\n")
        .next()
        .unwrap_or_default()
        .split("<|im_end|>")
        .next()
        .unwrap_or_default();
    let reply = if last_user.starts_with("<tool_response>") {
        format!("The command finished. Its output:\n{}", last_user.trim())
    } else if let Some(command) = last_user
        .split_once("run `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(command, _)| command)
    {
        format!(
            "<think>The user wants me to run a command.</think>Running it.\n<tool_call>\n{}\n</tool_call>",
            serde_json::json!({"name": "Bash", "arguments": {"command": command, "description": "Run the requested command"}})
        )
    } else {
        format!(
            "Hello from the local Fabstir test node. You said: {}",
            last_user.trim()
        )
    };
    reply
        .chars()
        .collect::<Vec<_>>()
        .chunks(4)
        .map(|c| c.iter().collect())
        .collect()
}

fn text(value: &Value) -> Message {
    Message::text(value.to_string())
}

/// One client socket.
async fn serve<S>(
    stream: S,
    secret: [u8; 32],
    script: Script,
    log: Arc<Mutex<NodeLog>>,
    chain: Option<Arc<crate::evm_world::NodeChain>>,
    crashes: Arc<AtomicU64>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    #[expect(
        clippy::result_large_err,
        reason = "the signature of tungstenite's handshake callback"
    )]
    let check_path = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        if req.uri().path() == "/v1/ws" {
            Ok(resp)
        } else {
            let mut error = ErrorResponse::new(Some(format!("no route {}", req.uri().path())));
            *error.status_mut() = http::StatusCode::NOT_FOUND;
            Err(error)
        }
    };
    let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, check_path).await else {
        return;
    };
    if let Ok(mut l) = log.lock() {
        l.connections += 1;
    }
    let (mut sink, mut source) = socket.split();
    let (out, mut outgoing) = mpsc::unbounded_channel::<Message>();
    let mut writer = AbortOnDrop(tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            if sink.send(message).await.is_err() {
                break;
            }
        }
    }));
    let mut replies: Vec<AbortOnDrop> = Vec::new();
    let _ = out.send(text(
        &json!({"type": "connected", "message": "WebSocket connected successfully"}),
    ));
    let Ok(node_key) = crypto::secret_key(&secret, "node key") else {
        return;
    };
    // The real node keeps session keys by session id; the socket's own id is the last init's.
    let mut keys: std::collections::HashMap<String, Key> = std::collections::HashMap::new();
    let mut socket_session: Option<String> = None;
    let mut job_id = String::new();
    let mut cancel = Arc::new(AtomicBool::new(false));
    let streaming = Arc::new(AtomicBool::new(false));
    let mut rng = Counter(7);
    let served = Arc::new(AtomicU64::new(0));
    let refuse = |log: &Arc<Mutex<NodeLog>>, out: &mpsc::UnboundedSender<Message>, frame: Value| {
        if let Ok(mut l) = log.lock() {
            let code = frame["code"].as_str().or(frame["error"].as_str());
            l.errors.push(code.unwrap_or_default().to_owned());
        }
        let _ = out.send(text(&frame));
    };
    while let Some(Ok(message)) = source.next().await {
        let Message::Text(frame) = message else {
            if matches!(message, Message::Close(_)) {
                if let Ok(mut l) = log.lock() {
                    l.closed_by_client += 1;
                }
                break;
            }
            continue;
        };
        // Not JSON: the real node ignores it.
        let Ok(frame) = serde_json::from_str::<Value>(&frame) else {
            continue;
        };
        let kind = frame["type"].as_str().unwrap_or_default();
        if kind == "stream_cancel" {
            cancel.store(true, Ordering::SeqCst);
            if let Ok(mut l) = log.lock() {
                l.cancels += 1;
            }
            continue;
        }
        if streaming.load(Ordering::SeqCst) {
            if let Ok(mut l) = log.lock() {
                l.dropped_while_streaming += 1;
            }
            continue;
        }
        match kind {
            "encrypted_session_init" => {
                let init = match wire::open_init(&node_key, &frame) {
                    Ok(init) => init,
                    Err(e) => {
                        refuse(&log, &out, e.init_frame(&frame));
                        continue;
                    }
                };
                if let Some(chain) = &chain
                    && let Err(reason) = chain.check_job(&init.data.job_id).await
                {
                    refuse(&log, &out, json!({"type": "error", "message": reason}));
                    continue;
                }
                if let Some(id) = &init.session_id {
                    keys.insert(id.clone(), init.key);
                    socket_session = Some(id.clone());
                }
                job_id.clone_from(&init.data.job_id);
                if let Ok(mut l) = log.lock() {
                    l.inits
                        .push((init.data.job_id.clone(), init.signer.clone()));
                }
                let mut ack = json!({
                    "type": "session_init_ack", "status": "success",
                    "session_id": init.session_id.as_deref().unwrap_or("unknown"),
                    "job_id": init.job_id, "chain_id": init.chain_id,
                    "client_address": init.signer,
                    "message": "Encrypted session initialized successfully",
                });
                if !frame["id"].is_null() {
                    ack["id"] = frame["id"].clone();
                }
                let _ = out.send(text(&ack));
            }
            "encrypted_message" => {
                let Some(session_id) = frame["session_id"]
                    .as_str()
                    .or_else(|| frame["sessionId"].as_str())
                    .map(String::from)
                    .or_else(|| socket_session.clone())
                else {
                    let e = json!({"type": "error", "code": "MISSING_SESSION_ID",
                        "message": "encrypted_message requires session_id", "id": frame["id"]});
                    refuse(&log, &out, e);
                    continue;
                };
                let Some(key) = keys.get(&session_id).copied() else {
                    let e = json!({"type": "error", "code": "SESSION_KEY_NOT_FOUND",
                        "message": format!("No session key found for session_id: {session_id}"), "id": frame["id"]});
                    refuse(&log, &out, e);
                    continue;
                };
                let plaintext = match wire::open_message(&key, &frame) {
                    Ok(plaintext) => plaintext,
                    Err(e) => {
                        refuse(&log, &out, e.message_frame(&frame));
                        continue;
                    }
                };
                let prompt = match wire::read_prompt(&plaintext, &frame) {
                    wire::MessageOutcome::Run(prompt) => prompt,
                    wire::MessageOutcome::Invalid(error) => {
                        refuse(&log, &out, json!({"type": "error", "error": error}));
                        let _ = out.send(text(
                            &json!({"type": "stream_end", "reason": "error", "tokens_used": 0}),
                        ));
                        continue;
                    }
                    wire::MessageOutcome::Silent => continue,
                };
                if let Ok(mut l) = log.lock() {
                    l.prompts.push(prompt.clone());
                }
                if crashes
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    if let Ok(mut l) = log.lock() {
                        l.crashed_before_reply += 1;
                    }
                    // Gone without a close, and without settling: a crash.
                    return;
                }
                let tokens = script(&prompt);
                cancel = Arc::new(AtomicBool::new(false));
                streaming.store(true, Ordering::SeqCst);
                let reply = Reply {
                    out: out.clone(),
                    key,
                    id: frame["id"].as_str().unwrap_or_default().to_owned(),
                    session_id,
                    cancel: Arc::clone(&cancel),
                    streaming: Arc::clone(&streaming),
                    prompt_tokens: (prompt.prompt.len() / 4) as u64,
                    served: Arc::clone(&served),
                };
                let seed = rng.0;
                rng.0 = rng.0.wrapping_add(1);
                replies.push(AbortOnDrop(tokio::spawn(reply.emit(tokens, seed))));
            }
            // `ping` and unknown types: the real node answers nothing.
            _ => {}
        }
    }
    // The live host settles the job when the socket closes.
    if let Some(chain) = &chain
        && !job_id.is_empty()
        && let Err(e) = chain.settle(&job_id, served.load(Ordering::SeqCst)).await
    {
        eprintln!("fabstir node: settling job {job_id} failed: {e}");
    }
    if let Ok(mut l) = log.lock() {
        l.settled.push(job_id);
    }
    drop(out);
    for reply in &mut replies {
        let _ = (&mut reply.0).await;
    }
    let _ = (&mut writer.0).await;
}

struct Reply {
    out: mpsc::UnboundedSender<Message>,
    key: Key,
    id: String,
    session_id: String,
    cancel: Arc<AtomicBool>,
    /// Set while this reply streams (the node drops other frames meanwhile).
    streaming: Arc<AtomicBool>,
    prompt_tokens: u64,
    /// Tokens served on this socket (what the host proves on-chain).
    served: Arc<AtomicU64>,
}

impl Reply {
    async fn emit(self, tokens: Vec<String>, seed: u64) {
        let mut rng = Counter(seed);
        let mut sent = 0u64;
        let last = tokens.len().saturating_sub(1);
        for (i, token) in tokens.iter().enumerate() {
            if self.cancel.load(Ordering::SeqCst) {
                self.streaming.store(false, Ordering::SeqCst);
                let _ = self
                    .out
                    .send(text(&json!({"type": "stream_end", "reason": "cancelled",
                    "tokens_used": sent, "finish_reason": "cancelled", "id": self.id, "session_id": self.session_id})));
                return;
            }
            let nonce = crypto::nonce(&mut rng);
            let aad = format!("chunk_{i}");
            let sealed = crypto::seal(&self.key, &nonce, aad.as_bytes(), token.as_bytes());
            let mut frame = json!({"type": "encrypted_chunk", "tokens": 1, "id": self.id, "session_id": self.session_id,
                "payload": {"ciphertextHex": crypto::to_hex(&sealed), "nonceHex": crypto::to_hex(&nonce),
                            "aadHex": crypto::to_hex(aad.as_bytes()), "index": i}});
            if i == last {
                frame["final"] = json!(true);
            }
            let _ = self.out.send(text(&frame));
            sent += 1;
            self.served.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let nonce = crypto::nonce(&mut rng);
        let sealed = crypto::seal(&self.key, &nonce, b"encrypted_response_final", b"stop");
        let _ = self.out.send(text(&json!({"type": "encrypted_response", "id": self.id, "session_id": self.session_id,
            "payload": {"ciphertextHex": crypto::to_hex(&sealed), "nonceHex": crypto::to_hex(&nonce),
                        "aadHex": crypto::to_hex(b"encrypted_response_final")}})));
        // Done streaming before `stream_end` goes out: the client may send its next init at once.
        self.streaming.store(false, Ordering::SeqCst);
        let _ = self.out.send(text(
            &json!({"type": "stream_end", "reason": "complete", "tokens_used": sent,
            "id": self.id, "session_id": self.session_id, "finish_reason": "stop",
            "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": sent,
                      "total_tokens": self.prompt_tokens + sent, "context_window_size": 32768}}),
        ));
    }
}
