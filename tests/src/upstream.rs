//! A scripted OpenAI Chat Completions upstream: it stands in for the MODEL only.
//!
//! The server binds `127.0.0.1:0`, records every request it receives ([`RecordedRequest`]) and answers
//! each with a [`ScriptedResponse`] chosen by a handler that may inspect the request. Responses can be
//! SSE streams written piece by piece with delays (real streaming, fragmentation at any byte), HTTP
//! errors with headers, garbage, streams that drop the connection mid-way, and delays before headers.
//!
//! With [`Upstream::start_tls`] it speaks HTTPS with a self-signed certificate made at test time
//! ([`crate::tls::TestCert`]; [`Upstream::ca_cert`] is the PEM file for the bridge's `--ca-cert`). It
//! counts the TCP connections it accepts ([`Upstream::connections`]), so tests can check that the
//! bridge reuses its upstream connections.
//!
//! When the bridge asks for a non-streaming completion (`"stream"` absent or false) and the script holds
//! a stream, the stream is folded into one `chat.completion` object, so a script works whichever way the
//! bridge talks to its upstream.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::chunks;
use crate::tls::TestCert;

/// One request the upstream received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// 0-based arrival order.
    pub seq: usize,
    /// 0-based accept order of the TCP connection it came on (equal numbers: a reused connection).
    pub connection: usize,
    /// HTTP method.
    pub method: String,
    /// Path and query, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers, names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Value::Null` when it is not JSON).
    pub body: Value,
    /// The raw body.
    pub raw_body: Vec<u8>,
}

impl RecordedRequest {
    /// First value of a header (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether this is a chat completions call.
    pub fn is_chat(&self) -> bool {
        self.method == "POST"
            && self
                .path
                .split('?')
                .next()
                .is_some_and(|p| p.ends_with("/chat/completions"))
    }

    /// `messages` of the body (empty when absent).
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// `tools` of the body (empty when absent).
    pub fn tools(&self) -> &[Value] {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// Whether the body asks for a stream.
    pub fn is_stream(&self) -> bool {
        self.body
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Messages with `role: "tool"` (tool results sent back to the model).
    pub fn tool_messages(&self) -> Vec<&Value> {
        self.messages()
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
            .collect()
    }

    /// Whether the conversation carries a tool result.
    pub fn has_tool_result(&self) -> bool {
        !self.tool_messages().is_empty()
    }

    /// All `tool_calls` of assistant messages, in order.
    pub fn assistant_tool_calls(&self) -> Vec<&Value> {
        self.messages()
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
            .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
            .flatten()
            .collect()
    }

    /// The text of every message, concatenated (string contents and text parts).
    pub fn all_text(&self) -> String {
        let mut out = String::new();
        for m in self.messages() {
            collect_text(m.get("content").unwrap_or(&Value::Null), &mut out);
            out.push('\n');
        }
        out
    }

    /// OpenAI's refusal of a function name it does not take (too long, or a character outside
    /// `[a-zA-Z0-9_-]`), in the tools or in an assistant message's calls; `None` for a request
    /// without one (or not a Chat Completions request).
    #[must_use]
    pub fn refused_function_name(&self) -> Option<String> {
        if !self.is_chat() {
            return None;
        }
        let tools = self.tools().iter().enumerate().map(|(i, t)| {
            (
                format!("tools[{i}].function.name"),
                t["function"]["name"].as_str().unwrap_or_default(),
            )
        });
        let calls = self.messages().iter().enumerate().flat_map(|(m, msg)| {
            msg["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(move |(c, call)| {
                    (
                        format!("messages[{m}].tool_calls[{c}].function.name"),
                        call["function"]["name"].as_str().unwrap_or_default(),
                    )
                })
        });
        tools.chain(calls).find_map(|(at, name)| {
            if name.len() > 64 {
                Some(format!(
                    "Invalid '{at}': string too long. Expected a string with maximum length 64, \
                     but got a string with length {} instead.",
                    name.len()
                ))
            } else if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                Some(format!(
                    "Invalid '{at}': string does not match pattern. Expected a string that \
                     matches the pattern '^[a-zA-Z0-9_-]+$'."
                ))
            } else {
                None
            }
        })
    }

    /// Problems with this body as an OpenAI Chat Completions request: top-level fields OpenAI does not
    /// define, message fields outside the chat message schema (plus `reasoning_content`, the de-facto
    /// pass-back field), content-part types other than text/image_url, and Anthropic-only leftovers
    /// (`cache_control` anywhere). Empty when the body is clean.
    pub fn openai_shape_problems(&self) -> Vec<String> {
        const TOP: &[&str] = &[
            "model",
            "messages",
            "stream",
            "stream_options",
            "max_tokens",
            "max_completion_tokens",
            "temperature",
            "top_p",
            "n",
            "stop",
            "presence_penalty",
            "frequency_penalty",
            "logit_bias",
            "logprobs",
            "top_logprobs",
            "seed",
            "user",
            "store",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "response_format",
            "reasoning_effort",
            "service_tier",
            "modalities",
            "audio",
            "prediction",
            "prompt_cache_key",
            "safety_identifier",
            "verbosity",
            "web_search_options",
            "metadata",
        ];
        const MSG: &[&str] = &[
            "role",
            "content",
            "name",
            "tool_calls",
            "tool_call_id",
            "refusal",
            "reasoning_content",
        ];
        const PARTS: &[&str] = &["text", "image_url", "input_audio", "file"];
        let mut out = Vec::new();
        let Some(obj) = self.body.as_object() else {
            return vec!["body is not a JSON object".into()];
        };
        for k in obj.keys() {
            if !TOP.contains(&k.as_str()) {
                out.push(format!("top-level field {k:?}"));
            }
        }
        if let Some(meta) = obj.get("metadata")
            && !meta
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string))
        {
            out.push(format!("metadata must map strings to strings: {meta}"));
        }
        for (i, m) in self.messages().iter().enumerate() {
            let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
            if !["system", "developer", "user", "assistant", "tool"].contains(&role) {
                out.push(format!("messages[{i}] role {role:?}"));
            }
            for k in m
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default()
            {
                if !MSG.contains(&k.as_str()) {
                    out.push(format!("messages[{i}] field {k:?}"));
                }
            }
            for p in m
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let t = p.get("type").and_then(Value::as_str).unwrap_or_default();
                if !PARTS.contains(&t) {
                    out.push(format!("messages[{i}] content part type {t:?}"));
                }
            }
            if role == "tool"
                && m.get("tool_call_id")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                out.push(format!("messages[{i}] tool message without tool_call_id"));
            }
        }
        for (i, t) in self.tools().iter().enumerate() {
            if t.get("type").and_then(Value::as_str) != Some("function")
                || t.pointer("/function/name")
                    .and_then(Value::as_str)
                    .is_none()
            {
                out.push(format!("tools[{i}] is not a function tool: {t}"));
            }
        }
        if String::from_utf8_lossy(&self.raw_body).contains("cache_control") {
            out.push("cache_control forwarded (pitfalls 6)".into());
        }
        out
    }

    /// A background request of Claude Code (session title and the like): no tools, and either a
    /// structured-output request or a prompt asking for a title.
    pub fn is_background(&self) -> bool {
        if !self.tools().is_empty() {
            return false;
        }
        let structured =
            self.body.get("response_format").is_some() || self.body.get("output_config").is_some();
        let text = self.all_text();
        structured
            || text.contains("Write the title")
            || text.to_ascii_lowercase().contains("title")
    }
}

fn collect_text(content: &Value, out: &mut String) {
    match content {
        Value::String(s) => out.push_str(s),
        Value::Array(parts) => {
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    out.push_str(t);
                    out.push('\n');
                }
            }
        }
        _ => {}
    }
}

/// How a streamed response ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// End the body normally (whatever the parts held: with or without `data: [DONE]`).
    Clean,
    /// Drop the connection after the last part (no chunked terminator).
    Disconnect,
}

/// A streamed (SSE) response, written one part per write.
#[derive(Debug, Clone)]
pub struct StreamResponse {
    /// HTTP status (200 normally).
    pub status: u16,
    /// Raw byte pieces; each is written (and flushed) on its own.
    pub parts: Vec<Bytes>,
    /// Pause before each part after the first.
    pub delay: Duration,
    /// Extra pauses: `(i, d)` waits `d` more before part `i`.
    pub pauses: Vec<(usize, Duration)>,
    /// Holds: `(i, gate)` waits before part `i` until the test opens `gate` (a stream held for
    /// as long as a test needs, whatever the machine's speed).
    pub holds: Vec<(usize, Gate)>,
    /// How the body ends.
    pub end: StreamEnd,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
}

/// A gate a scripted stream waits at until the test opens it ([`StreamResponse::holds`],
/// [`crate::chunks::ChatStream::hold_until`]). Clones share one gate; once open it stays open.
#[derive(Debug, Clone)]
pub struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Let every stream waiting at this gate, and every one that comes to it later, go on.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    /// Wait until the gate is open.
    pub async fn opened(&self) {
        let mut open = self.0.subscribe();
        // The sender lives in `self`, so waiting cannot fail.
        let _ = open.wait_for(|o| *o).await;
    }
}

/// What the upstream answers to one request.
#[derive(Debug, Clone)]
pub enum ScriptedResponse {
    /// An SSE stream (folded to one JSON completion when the request did not ask for a stream).
    Stream(StreamResponse),
    /// A complete body: errors, garbage, a non-streaming JSON completion.
    Full {
        /// HTTP status.
        status: u16,
        /// Response headers (content-type included).
        headers: Vec<(String, String)>,
        /// The body.
        body: Bytes,
    },
    /// Wait, then answer (delay before headers).
    Delayed(Duration, Box<ScriptedResponse>),
}

impl ScriptedResponse {
    /// An SSE stream of JSON events (`event: <type>` from each event's `type`), one event per
    /// write, a few ms apart, ending with `end`.
    #[must_use]
    pub fn sse_events(events: Vec<Value>, end: StreamEnd) -> Self {
        let parts = events
            .into_iter()
            .map(|e| {
                let kind = e["type"].as_str().unwrap_or_default().to_owned();
                Bytes::from(format!("event: {kind}\ndata: {e}\n\n"))
            })
            .collect();
        Self::Stream(StreamResponse {
            status: 200,
            parts,
            delay: Duration::from_millis(2),
            pauses: Vec::new(),
            holds: Vec::new(),
            end,
            headers: vec![(
                "content-type".into(),
                "text/event-stream; charset=utf-8".into(),
            )],
        })
    }

    /// An OpenAI-style error: `{"error":{"message","type","code"}}` with the given status.
    pub fn openai_error(status: u16, message: &str, kind: &str, code: Option<&str>) -> Self {
        let body =
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
        Self::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Bytes::from(body.to_string()),
        }
    }

    /// A 200 with the given bytes as an event stream that is not one.
    pub fn garbage(bytes: &[u8]) -> Self {
        Self::Full {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: Bytes::copy_from_slice(bytes),
        }
    }

    /// A JSON body with status 200.
    pub fn json(value: &Value) -> Self {
        Self::Full {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Bytes::from(value.to_string()),
        }
    }

    /// Add a response header (e.g. `retry-after`).
    #[must_use]
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        match &mut self {
            Self::Stream(s) => s.headers.push((name.into(), value.into())),
            Self::Full { headers, .. } => headers.push((name.into(), value.into())),
            Self::Delayed(_, inner) => {
                let taken = std::mem::replace(inner.as_mut(), Self::garbage(b""));
                **inner = taken.with_header(name, value);
            }
        }
        self
    }

    /// Wait `delay` before sending headers.
    #[must_use]
    pub fn delayed(self, delay: Duration) -> Self {
        Self::Delayed(delay, Box::new(self))
    }
}

type Handler = dyn Fn(&RecordedRequest) -> ScriptedResponse + Send + Sync;

struct State {
    requests: Mutex<Vec<RecordedRequest>>,
    handler: Box<Handler>,
    /// Streams whose reader went away before the last part was written.
    cancelled: AtomicUsize,
    /// Streams written to the end.
    completed: AtomicUsize,
    /// TCP connections accepted.
    connections: AtomicUsize,
    /// TLS handshakes that failed (TLS mode only).
    tls_failures: AtomicUsize,
    /// The connections' tasks, ended with the upstream (a dropped upstream is gone, as a
    /// killed server is: its keep-alive connections close too).
    conns: Mutex<Vec<tokio::task::AbortHandle>>,
}

/// The running scripted upstream. Stops accepting when dropped.
pub struct Upstream {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
    /// The certificate in TLS mode (its PEM file lives as long as the upstream).
    tls: Option<TestCert>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("addr", &self.addr)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
        let conns = std::mem::take(
            &mut *self
                .state
                .conns
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for conn in conns {
            conn.abort();
        }
    }
}

impl Upstream {
    /// Start with a handler that picks the response for each request (plain HTTP).
    pub async fn start<F>(handler: F) -> crate::Result<Self>
    where
        F: Fn(&RecordedRequest) -> ScriptedResponse + Send + Sync + 'static,
    {
        Self::launch(Box::new(handler), None).await
    }

    /// Like [`Upstream::start`], but over HTTPS with a fresh self-signed certificate for `127.0.0.1`
    /// (give the bridge [`Upstream::ca_cert`] as `--ca-cert`).
    pub async fn start_tls<F>(handler: F) -> crate::Result<Self>
    where
        F: Fn(&RecordedRequest) -> ScriptedResponse + Send + Sync + 'static,
    {
        Self::launch(Box::new(handler), Some(TestCert::generate()?)).await
    }

    /// Like [`Upstream::start`], on a given address (a server's well-known port, e.g. Ollama's
    /// `127.0.0.1:11434`, for commands written for it).
    ///
    /// # Errors
    /// The address is taken (the message says which).
    pub async fn start_at<F>(addr: SocketAddr, handler: F) -> crate::Result<Self>
    where
        F: Fn(&RecordedRequest) -> ScriptedResponse + Send + Sync + 'static,
    {
        Self::launch_on(Box::new(handler), None, addr).await
    }

    async fn launch(handler: Box<Handler>, tls: Option<TestCert>) -> crate::Result<Self> {
        Self::launch_on(handler, tls, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    async fn launch_on(
        handler: Box<Handler>,
        tls: Option<TestCert>,
        at: SocketAddr,
    ) -> crate::Result<Self> {
        let acceptor = tls.as_ref().map(TestCert::acceptor).transpose()?;
        let listener = TcpListener::bind(at)
            .await
            .map_err(|e| crate::err(format!("cannot listen on {at}: {e}")))?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            requests: Mutex::new(Vec::new()),
            handler,
            cancelled: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            tls_failures: AtomicUsize::new(0),
            conns: Mutex::new(Vec::new()),
        });
        let accept_state = Arc::clone(&state);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let conn = accept_state.connections.fetch_add(1, Ordering::SeqCst);
                let conn_state = Arc::clone(&accept_state);
                let acceptor = acceptor.clone();
                let conns = Arc::clone(&accept_state);
                let handle = tokio::spawn(async move {
                    match acceptor {
                        None => serve_connection(conn_state, conn, stream).await,
                        Some(acceptor) => match acceptor.accept(stream).await {
                            Ok(tls_stream) => serve_connection(conn_state, conn, tls_stream).await,
                            Err(_) => {
                                conn_state.tls_failures.fetch_add(1, Ordering::SeqCst);
                            }
                        },
                    }
                });
                let mut held = conns.conns.lock().unwrap_or_else(PoisonError::into_inner);
                held.retain(|h| !h.is_finished());
                held.push(handle.abort_handle());
            }
        });
        Ok(Self {
            addr,
            state,
            task,
            tls,
        })
    }

    /// Start with a queue: each model request (chat completions, not [background](RecordedRequest::is_background))
    /// takes the next response; background requests get a short title stream; other paths get a 404;
    /// an exhausted script answers 500 "script exhausted".
    pub async fn scripted(responses: Vec<ScriptedResponse>) -> crate::Result<Self> {
        let queue = Mutex::new(VecDeque::from(responses));
        Self::start(model_only(move || {
            queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_front()
                .unwrap_or_else(|| {
                    ScriptedResponse::openai_error(
                        500,
                        "scripted upstream: script exhausted",
                        "server_error",
                        None,
                    )
                })
        }))
        .await
    }

    /// Answer every model request with the same response (background requests as in [`Upstream::scripted`]).
    pub async fn always(response: ScriptedResponse) -> crate::Result<Self> {
        Self::start(model_only(move || response.clone())).await
    }

    /// [`Upstream::always`] over HTTPS (see [`Upstream::start_tls`]).
    pub async fn always_tls(response: ScriptedResponse) -> crate::Result<Self> {
        Self::start_tls(model_only(move || response.clone())).await
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The OpenAI base URL to give the bridge: `http://127.0.0.1:PORT/v1` (`https://` in TLS mode).
    pub fn base_url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}/v1", self.addr)
    }

    /// In TLS mode, the PEM file of the upstream's self-signed certificate (for `--ca-cert`).
    pub fn ca_cert(&self) -> Option<&std::path::Path> {
        self.tls.as_ref().map(TestCert::pem_path)
    }

    /// How many TCP connections were accepted (TLS or not, whether the handshake worked or not).
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// How many TLS handshakes failed (a client that does not trust the certificate).
    pub fn tls_failures(&self) -> usize {
        self.state.tls_failures.load(Ordering::SeqCst)
    }

    /// Wait until `cond` holds (polling every 10 ms), at most `timeout`; whether it held. For counters
    /// the upstream updates just after the client saw the effect (a failed handshake, a closed stream).
    pub async fn wait_until(&self, cond: impl Fn(&Self) -> bool, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while !cond(self) {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Forget the requests recorded so far (a measurement that sends large bodies for long).
    pub fn clear_requests(&self) {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Chat completion requests that are not background requests.
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_chat() && !r.is_background())
            .collect()
    }

    /// How many streamed responses lost their reader (the bridge closed the connection) before the end.
    pub fn cancelled_streams(&self) -> usize {
        self.state.cancelled.load(Ordering::SeqCst)
    }

    /// How many streamed responses were written to the end.
    pub fn completed_streams(&self) -> usize {
        self.state.completed.load(Ordering::SeqCst)
    }

    /// A readable dump of the recorded requests (for assertion messages).
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for r in self.requests() {
            let body = serde_json::to_string(&r.body).unwrap_or_default();
            let short: String = body.chars().take(1500).collect();
            out.push_str(&format!(
                "#{} (connection {}) {} {} {}\n",
                r.seq, r.connection, r.method, r.path, short
            ));
        }
        out
    }
}

/// A handler for chat completions: non-chat paths get a 404, background requests a short title
/// stream, model requests what `next` gives.
fn model_only<N>(next: N) -> impl Fn(&RecordedRequest) -> ScriptedResponse + Send + Sync + 'static
where
    N: Fn() -> ScriptedResponse + Send + Sync + 'static,
{
    move |req| {
        if !req.is_chat() {
            ScriptedResponse::openai_error(404, "not found", "invalid_request_error", None)
        } else if req.is_background() {
            background_response()
        } else {
            next()
        }
    }
}

/// Serve HTTP/1.1 on one accepted connection (plain TCP or TLS) until it closes.
async fn serve_connection<S>(state: Arc<State>, connection: usize, io: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| handle(Arc::clone(&state), connection, req));
    // Errors here are expected: scripted disconnects abort the connection.
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// What background requests get: a short text stream.
pub fn background_response() -> ScriptedResponse {
    chunks::ChatStream::new()
        .role()
        .text("{\"title\":\"Test session\"}")
        .finish("stop")
        .usage(10, 5, 0)
        .build()
}

async fn handle(
    state: Arc<State>,
    connection: usize,
    req: Request<Incoming>,
) -> Result<Response<ChanBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let raw = match body.collect().await {
        Ok(c) => c.to_bytes().to_vec(),
        Err(_) => Vec::new(),
    };
    let recorded = {
        let mut requests = state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let rec = RecordedRequest {
            seq: requests.len(),
            connection,
            method: parts.method.to_string(),
            path: parts
                .uri
                .path_and_query()
                .map_or_else(|| parts.uri.to_string(), ToString::to_string),
            headers: parts
                .headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_ascii_lowercase(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: serde_json::from_slice(&raw).unwrap_or(Value::Null),
            raw_body: raw,
        };
        requests.push(rec.clone());
        rec
    };
    // As OpenAI (and vLLM's adapter) do: a function name outside `^[a-zA-Z0-9_-]{1,64}$`, in
    // the tools or the history's calls, is a 400 before any model runs.
    let mut response = match recorded.refused_function_name() {
        Some(refusal) => {
            ScriptedResponse::openai_error(400, &refusal, "invalid_request_error", None)
        }
        None => (state.handler)(&recorded),
    };
    while let ScriptedResponse::Delayed(delay, inner) = response {
        tokio::time::sleep(delay).await;
        response = *inner;
    }
    Ok(respond(
        &state,
        response,
        recorded.is_stream() || !recorded.is_chat(),
    ))
}

fn respond(
    state: &Arc<State>,
    response: ScriptedResponse,
    wants_stream: bool,
) -> Response<ChanBody> {
    match response {
        ScriptedResponse::Full {
            status,
            headers,
            body,
        } => full(status, &headers, body),
        ScriptedResponse::Delayed(_, inner) => respond(state, *inner, wants_stream),
        ScriptedResponse::Stream(s) if wants_stream || s.status != 200 => stream(state, s),
        ScriptedResponse::Stream(s) => {
            let json_headers = vec![("content-type".to_owned(), "application/json".to_owned())];
            let (completion, end) = match chunks::fold(&s.parts) {
                chunks::Folded::Error(e) => {
                    return full(500, &json_headers, Bytes::from(e.to_string()));
                }
                chunks::Folded::Complete(v) if s.end == StreamEnd::Clean => {
                    let mut headers = s.headers;
                    headers.extend(json_headers);
                    return full(200, &headers, Bytes::from(v.to_string()));
                }
                chunks::Folded::Complete(v) | chunks::Folded::Truncated(v) => (v, s.end),
            };
            // Cut short: half a JSON body, then the body ends (or the connection drops).
            let body = Bytes::from(completion.to_string());
            stream(
                state,
                StreamResponse {
                    status: 200,
                    parts: vec![body.slice(..body.len() / 2)],
                    delay: Duration::ZERO,
                    pauses: Vec::new(),
                    holds: Vec::new(),
                    end,
                    headers: json_headers,
                },
            )
        }
    }
}

fn builder(status: u16, headers: &[(String, String)]) -> hyper::http::response::Builder {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    for (k, v) in headers {
        b = b.header(k.as_str(), v.as_str());
    }
    b
}

fn full(status: u16, headers: &[(String, String)], body: Bytes) -> Response<ChanBody> {
    let (tx, rx) = mpsc::channel(1);
    let len = body.len();
    if len > 0 {
        // Capacity 1: this send cannot fail or block.
        let _ = tx.try_send(Ok(Frame::data(body)));
    }
    drop(tx);
    let b = builder(status, headers).header("content-length", len.to_string());
    b.body(ChanBody { rx })
        .unwrap_or_else(|_| Response::new(ChanBody::empty()))
}

fn stream(state: &Arc<State>, s: StreamResponse) -> Response<ChanBody> {
    let state = Arc::clone(state);
    let (tx, rx) = mpsc::channel(4);
    let mut headers = s.headers.clone();
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        headers.push(("content-type".into(), "text/event-stream".into()));
    }
    headers.push(("cache-control".into(), "no-cache".into()));
    tokio::spawn(async move {
        for (i, part) in s.parts.into_iter().enumerate() {
            let extra: Duration = s
                .pauses
                .iter()
                .filter(|(at, _)| *at == i)
                .map(|(_, d)| *d)
                .sum();
            let pause = if i > 0 { s.delay + extra } else { extra };
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            for (_, gate) in s.holds.iter().filter(|(at, _)| *at == i) {
                gate.opened().await;
            }
            if tx.send(Ok(Frame::data(part))).await.is_err() {
                state.cancelled.fetch_add(1, Ordering::SeqCst);
                return;
            }
        }
        // Wait until hyper has taken every frame (or the reader went away).
        loop {
            if tx.is_closed() {
                state.cancelled.fetch_add(1, Ordering::SeqCst);
                return;
            }
            if tx.capacity() == tx.max_capacity() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if s.end == StreamEnd::Disconnect {
            // Let the last part reach the socket before the connection is aborted.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = tx
                .send(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "scripted disconnect",
                )))
                .await;
        } else {
            state.completed.fetch_add(1, Ordering::SeqCst);
        }
    });
    builder(s.status, &headers)
        .body(ChanBody { rx })
        .unwrap_or_else(|_| Response::new(ChanBody::empty()))
}

/// A response body fed through a channel; an `Err` item makes hyper drop the connection.
#[derive(Debug)]
pub struct ChanBody {
    rx: mpsc::Receiver<Result<Frame<Bytes>, io::Error>>,
}

impl ChanBody {
    fn empty() -> Self {
        let (_, rx) = mpsc::channel(1);
        Self { rx }
    }
}

impl Body for ChanBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.rx.poll_recv(cx)
    }
}
