//! The AG-UI server's routes: CopilotKit's runtime transport (REST and single endpoint), the
//! management API (sessions, control requests, tool approval) and the frontend tools' MCP server.
//!
//! Every route also answers under `/api/copilotkit` (where CopilotKit apps mount their runtime:
//! `POST /api/copilotkit`, `GET /api/copilotkit/info`, …); a known path asked with another
//! method is `405` with `allow`.
//!
//! | route | what |
//! |---|---|
//! | `GET /info` | CopilotKit RuntimeInfo (one agent, `default`) |
//! | `GET /health` | `{"status":"ok","sessions":N}` |
//! | `POST /` | single endpoint: `{"method":"info"}`, `{"method":"agent/run"\|"agent/connect","params":{"agentId"},"body":RunAgentInput}`, `{"method":"agent/stop","params":{"agentId","threadId"}}` |
//! | `POST /agent/{agentId}/run` | run: SSE of AG-UI events |
//! | `POST /agent/{agentId}/connect` | the thread's earlier events again, user messages included (SSE as one complete body with `Content-Length` and `Connection: close`, so browsers' `fetch()` ends; none for an unknown thread) |
//! | `POST /agent/{agentId}/stop/{threadId}` | interrupt the thread's run |
//! | `GET /sessions` | the Claude Code sessions and their status |
//! | `GET /sessions/{threadId}` | one session: status, capabilities (`system/init` + the `initialize` answer), settings, history kept |
//! | `POST /sessions/{threadId}/initialize` | `{"systemPrompt"?, "appendSystemPrompt"?, "hooks"?: {"PreToolUse": [{"matcher": "Bash", "timeout"?: 30}]}}`: (re)start Claude Code with them; Claude Code's `initialize` answer (commands, models, account, …) |
//! | `POST /sessions/{threadId}/control` | a control request (see [`CONTROLS`]) and Claude Code's answer |
//! | `GET /approvals` | tool calls waiting for approval |
//! | `POST /approvals/{requestId}` | `{"behavior":"allow","updatedInput":{…}}` or `{"behavior":"deny","message":"…"}` |
//! | `GET`, `POST /approvals/rules` | auto-approve rules (`{"tool":"Read","behavior":"allow"}`) |
//! | `GET /hooks` | hook calls waiting for the app |
//! | `POST /hooks/{requestId}` | the hook's answer, in Claude Code's hook-output shape (`{"decision":"block","reason":"…"}`, `{"hookSpecificOutput":{…}}`, `{"continue":true}`) |
//! | `GET /mcp-requests` | requests for MCP servers the app hosts (`sdkMcpServers`) waiting for the app |
//! | `POST /mcp-requests/{requestId}` | the app's JSON-RPC response to one |
//! | `POST /mcp/{threadId}` | the frontend tools' MCP server (Streamable HTTP) |
//! | `GET /mcp/{threadId}` | its notification stream (`notifications/tools/list_changed` when the client's tools change) |

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bridge_core::agui::events::encode_sse;
use bridge_core::agui::input::RunAgentInput;
use bridge_core::agui::session::{AnswerError, ControlError, InitOptions};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};

use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::approvals::{self, Rule};
use super::mcp::{self, McpReply};
use super::session::{AnswerKind, InitRefused, RunRefused};
use super::supervisor::Supervisor;
use crate::server::body::ResponseBody;
use crate::server::{cors, json_response, sse_response, status_only};

/// Control requests the management API passes on.
pub const CONTROLS: [&str; 13] = [
    "set_model",
    "set_permission_mode",
    "set_max_thinking_tokens",
    "interrupt",
    "rewind_files",
    "mcp_status",
    "mcp_toggle",
    "mcp_set_servers",
    "mcp_reconnect",
    "mcp_message",
    "update_environment_variables",
    "get_context_usage",
    "stop_task",
];

/// The AG-UI server's state.
#[derive(Debug)]
pub struct AguiState {
    /// The sessions.
    pub supervisor: Supervisor,
    /// `--client-key`, required on every route when set.
    pub client_key: Option<String>,
    /// Largest accepted body.
    pub max_body_bytes: usize,
    /// Connection cap and client timeouts.
    pub limits: crate::server::conn::ConnLimits,
    /// `--allowed-origin`: browser origins allowed besides loopback ones (`*`: any).
    pub guard: crate::guard::Guard,
}

/// One request.
pub async fn handle(
    state: Arc<AguiState>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<ResponseBody>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let origin = req.headers().get(http::header::ORIGIN).cloned();
    // Past the cap: probes at once, anything else once a slot frees (or 503).
    let refused_at_cap = crate::server::conn::OverCap::refused(&req, &["/health", "/info"]).await;
    let mut response = match (refusal(&state, peer, &req), refused_at_cap) {
        (Some(refusal), _) => refusal,
        (None, Some(max_connections)) => {
            let mut busy = error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "the bridge is serving its most connections ({max_connections}, --max-connections); try again in a moment"
                ),
            );
            busy.headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
            busy
        }
        (None, None) => route(&state, req).await,
    };
    // CORS headers only for origins that may call (the browser then refuses the others).
    if origin
        .as_ref()
        .and_then(|o| o.to_str().ok())
        .is_some_and(|o| state.guard.origin_allowed(o))
    {
        cors(response.headers_mut(), origin.as_ref());
    }
    if !path.starts_with("/mcp/") || response.status() != StatusCode::OK {
        info!(%method, %path, status = response.status().as_u16(), %peer, "agui");
    }
    Ok(response)
}

fn error(status: StatusCode, message: &str) -> Response<ResponseBody> {
    let kind = if status == StatusCode::NOT_FOUND {
        "not_found"
    } else if status == StatusCode::UNAUTHORIZED {
        "unauthorized"
    } else if status.is_server_error() {
        "internal_error"
    } else {
        "invalid_request"
    };
    json_response(
        status,
        json!({"error": kind, "message": message}).to_string(),
    )
}

/// Refuse what a hostile web page or a DNS-rebinding attack would send (the shared
/// [`crate::server::guard`]), and the MCP route from anywhere but this machine.
fn refusal(
    state: &AguiState,
    peer: SocketAddr,
    req: &Request<Incoming>,
) -> Option<Response<ResponseBody>> {
    if let Err(refusal) = state.guard.check(req) {
        return Some(error(refusal.status(), &refusal.to_string()));
    }
    if req.uri().path().starts_with("/mcp/") && !peer.ip().is_loopback() {
        return Some(error(
            StatusCode::FORBIDDEN,
            "the frontend tools' MCP server only serves this machine's Claude Code sessions",
        ));
    }
    None
}

fn authorized(state: &AguiState, headers: &HeaderMap) -> bool {
    state
        .client_key
        .as_deref()
        .is_none_or(|expected| crate::server::presents_key(headers, expected))
}

async fn route(state: &AguiState, req: Request<Incoming>) -> Response<ResponseBody> {
    let method = req.method().clone();
    if method == Method::OPTIONS {
        return status_only(StatusCode::NO_CONTENT);
    }
    // Claude Code's MCP client authenticates with nothing: its endpoint is loopback-only (`refusal`).
    let path = req.uri().path().trim_end_matches('/').to_owned();
    // CopilotKit apps mount their runtime at `/api/copilotkit`: the same routes answer there.
    let path = match path.strip_prefix(COPILOTKIT_PREFIX) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.to_owned(),
        _ => path,
    };
    if !path.starts_with("/mcp/") && !authorized(state, req.headers()) {
        return error(
            StatusCode::UNAUTHORIZED,
            "send the bridge's --client-key as `x-api-key` or `Authorization: Bearer`",
        );
    }
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(crate::redact::percent_decode)
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let body = if method == Method::POST {
        match read_body(req, state.max_body_bytes, state.limits.client_timeout).await {
            Ok(body) => body,
            Err(response) => return response,
        }
    } else {
        Bytes::new()
    };
    match (&method, segments.as_slice()) {
        (&Method::GET, ["info"]) => json_response(StatusCode::OK, runtime_info().to_string()),
        (&Method::GET, ["health"]) => json_response(
            StatusCode::OK,
            json!({"status": "ok", "sessions": state.supervisor.list().len()}).to_string(),
        ),
        (&Method::POST, []) => single_endpoint(state, &body).await,
        (&Method::POST, ["agent", _, "run"]) => match parse_input(&body) {
            Ok(input) => run(state, input).await,
            Err(e) => error(StatusCode::BAD_REQUEST, &e),
        },
        (&Method::POST, ["agent", _, "connect"]) => match parse_input(&body) {
            Ok(input) => connect(state, &input.thread_id).await,
            Err(e) => error(StatusCode::BAD_REQUEST, &e),
        },
        (&Method::POST, ["agent", _, "stop", thread]) => stop(state, thread).await,
        (&Method::GET, ["sessions"]) => json_response(
            StatusCode::OK,
            json!({"sessions": state.supervisor.list()}).to_string(),
        ),
        (&Method::GET, ["sessions", thread]) => describe(state, thread).await,
        (&Method::POST, ["sessions", thread, "initialize"]) => {
            initialize(state, thread, &body).await
        }
        (&Method::POST, ["sessions", thread, "control"]) => control(state, thread, &body).await,
        (&Method::GET, ["hooks"]) => json_response(
            StatusCode::OK,
            json!({"pending": state.supervisor.approvals().hooks.list()}).to_string(),
        ),
        (&Method::POST, ["hooks", request_id]) => {
            answer_app(state, request_id, &body, AnswerKind::Hook).await
        }
        (&Method::GET, ["mcp-requests"]) => json_response(
            StatusCode::OK,
            json!({"pending": state.supervisor.approvals().mcp.list()}).to_string(),
        ),
        (&Method::POST, ["mcp-requests", request_id]) => {
            answer_app(state, request_id, &body, AnswerKind::Mcp).await
        }
        (&Method::GET, ["approvals"]) => json_response(
            StatusCode::OK,
            json!({"pending": state.supervisor.approvals().tools.list()}).to_string(),
        ),
        (&Method::GET, ["approvals", "rules"]) => json_response(
            StatusCode::OK,
            json!({"rules": state.supervisor.approvals().rules()}).to_string(),
        ),
        (&Method::POST, ["approvals", "rules"]) => add_rule(state, &body),
        (&Method::POST, ["approvals", request_id]) => decide(state, request_id, &body).await,
        (&Method::POST, ["mcp", thread]) => {
            match mcp::handle(&state.supervisor, thread, &body).await {
                McpReply::Message(message) => json_response(StatusCode::OK, message.to_string()),
                McpReply::Accepted => status_only(StatusCode::ACCEPTED),
            }
        }
        (&Method::GET, ["mcp", thread]) => match state.supervisor.get(thread) {
            Some(session) => with_sse_headers(sse_response(mcp::notifications(&session))),
            None => error(
                StatusCode::NOT_FOUND,
                &format!("no session for thread {thread}"),
            ),
        },
        (&Method::DELETE, ["mcp", _]) => status_only(StatusCode::OK),
        (_, segments) => match allowed_methods(segments) {
            Some(allow) => {
                let mut response = error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    &format!("{path} does not answer {method}; it answers {allow}"),
                );
                response
                    .headers_mut()
                    .insert(http::header::ALLOW, HeaderValue::from_static(allow));
                response
            }
            None => error(
                StatusCode::NOT_FOUND,
                &format!("no route {method} {path} (see GET /info, POST /agent/default/run)"),
            ),
        },
    }
}

/// Where CopilotKit apps mount their runtime; every route answers under it too.
const COPILOTKIT_PREFIX: &str = "/api/copilotkit";

/// The methods a known path answers (CORS preflights aside), for a `405`'s `allow`.
fn allowed_methods(segments: &[&str]) -> Option<&'static str> {
    Some(match segments {
        [] | ["agent", _, "run" | "connect"] | ["agent", _, "stop", _] => "POST",
        ["sessions", _, "initialize" | "control"] => "POST",
        ["hooks" | "mcp-requests" | "approvals", _] if segments != ["approvals", "rules"] => "POST",
        ["info" | "health" | "sessions" | "hooks" | "mcp-requests" | "approvals"]
        | ["sessions", _] => "GET",
        ["approvals", "rules"] => "GET, POST",
        ["mcp", _] => "GET, POST, DELETE",
        _ => return None,
    })
}

async fn read_body(
    req: Request<Incoming>,
    limit: usize,
    stall: std::time::Duration,
) -> Result<Bytes, Response<ResponseBody>> {
    use crate::server::conn::{BodyError, read_request_body};
    // Its bodies are small (runs, answers): no budget.
    match read_request_body(req.into_body(), limit, stall, None).await {
        Ok((body, _)) => Ok(body),
        Err(BodyError::Busy) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many large bodies at once; try again",
        )),
        Err(BodyError::TooLarge) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the body is larger than {limit} bytes (--max-body-bytes)"),
        )),
        Err(BodyError::Stalled) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "the body stopped arriving: nothing came for {} s (--client-timeout)",
                stall.as_secs()
            ),
        )),
        Err(BodyError::Failed(e)) => Err(error(
            StatusCode::BAD_REQUEST,
            &format!("cannot read the body: {e}"),
        )),
    }
}

/// CopilotKit's RuntimeInfo for this server.
fn runtime_info() -> Value {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "agents": {"default": {
            "name": "default",
            "description": "Claude Code, driven by claude-bridge",
            "className": "ClaudeCodeAgent",
        }},
        "audioFileTranscriptionEnabled": false,
        "mode": "sse",
        "suggestions": false,
        "a2uiEnabled": false,
        "openGenerativeUIEnabled": false,
        "telemetryDisabled": true,
    })
}

fn parse_input(body: &[u8]) -> Result<RunAgentInput, String> {
    serde_json::from_slice(body).map_err(|e| {
        format!("the body is not an AG-UI RunAgentInput (threadId, runId, messages, …): {e}")
    })
}

async fn single_endpoint(state: &AguiState, body: &[u8]) -> Response<ResponseBody> {
    let Ok(envelope) = serde_json::from_slice::<Value>(body) else {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Single-route endpoint expects JSON payloads",
        );
    };
    let Some(method) = envelope.get("method").and_then(Value::as_str) else {
        return error(StatusCode::BAD_REQUEST, "Missing method field");
    };
    let params = envelope.get("params").cloned().unwrap_or(Value::Null);
    let needs_agent = method.starts_with("agent/");
    if needs_agent && params.get("agentId").and_then(Value::as_str).is_none() {
        return error(
            StatusCode::BAD_REQUEST,
            "Missing or invalid parameter 'agentId'",
        );
    }
    let input = || {
        let body = envelope.get("body").cloned().unwrap_or(Value::Null);
        serde_json::from_value::<RunAgentInput>(body)
            .map_err(|e| format!("`body` is not an AG-UI RunAgentInput: {e}"))
    };
    match method {
        "info" => json_response(StatusCode::OK, runtime_info().to_string()),
        "agent/run" => match input() {
            Ok(input) => run(state, input).await,
            Err(e) => error(StatusCode::BAD_REQUEST, &e),
        },
        "agent/connect" => match input() {
            Ok(input) => connect(state, &input.thread_id).await,
            Err(e) => error(StatusCode::BAD_REQUEST, &e),
        },
        "agent/stop" => match params.get("threadId").and_then(Value::as_str) {
            Some(thread) => stop(state, thread).await,
            None => error(
                StatusCode::BAD_REQUEST,
                "Missing or invalid parameter 'threadId'",
            ),
        },
        other => error(
            StatusCode::BAD_REQUEST,
            &format!("Unsupported method '{other}'"),
        ),
    }
}

/// Start a run and stream its events.
async fn run(state: &AguiState, input: RunAgentInput) -> Response<ResponseBody> {
    let (session, evicted) = match state.supervisor.session(&input.thread_id) {
        Ok(found) => found,
        Err(busy) => {
            let mut response = error(StatusCode::TOO_MANY_REQUESTS, &busy.to_string());
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("5"),
            );
            return response;
        }
    };
    for old in evicted {
        tokio::spawn(async move { old.stop().await });
    }
    let events = match session.run(input).await {
        Ok(events) => events,
        Err(RunRefused::Busy(e)) => return error(StatusCode::CONFLICT, &e),
        Err(RunRefused::Failed(e)) => return error(StatusCode::BAD_GATEWAY, &e),
    };
    stream(events)
}

fn stream(
    mut events: mpsc::Receiver<bridge_core::agui::events::AguiEvent>,
) -> Response<ResponseBody> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if tx.send(Bytes::from(encode_sse(&event))).await.is_err() {
                break;
            }
        }
    });
    with_sse_headers(sse_response(rx))
}

fn with_sse_headers(mut response: Response<ResponseBody>) -> Response<ResponseBody> {
    response.headers_mut().insert(
        http::header::CONNECTION,
        HeaderValue::from_static("keep-alive"),
    );
    response
}

/// Replay the thread's events (nothing for an unknown thread): a complete body with its
/// `Content-Length` and `Connection: close`, so a browser's `fetch()` sees the end of the
/// replay as the end of the response (a kept-alive stream would leave it waiting).
async fn connect(state: &AguiState, thread_id: &str) -> Response<ResponseBody> {
    let history = match state.supervisor.get(thread_id) {
        Some(session) => session.replay().await,
        None => Vec::new(),
    };
    let text: String = history.iter().map(encode_sse).collect();
    let mut response = Response::new(crate::server::body::full(Bytes::from(text)));
    let headers = response.headers_mut();
    crate::server::sse_headers(headers);
    headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

async fn stop(state: &AguiState, thread_id: &str) -> Response<ResponseBody> {
    let Some(session) = state.supervisor.get(thread_id) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no session for thread {thread_id}"),
        );
    };
    match session.control(json!({"subtype": "interrupt"})).await {
        Ok(_) => json_response(
            StatusCode::OK,
            json!({"stopped": true, "threadId": thread_id}).to_string(),
        ),
        Err(e) => {
            warn!(thread = thread_id, error = %e, "interrupt failed");
            control_error(&e)
        }
    }
}

async fn control(state: &AguiState, thread_id: &str, body: &[u8]) -> Response<ResponseBody> {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON control request",
        );
    };
    let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
    if !CONTROLS.contains(&subtype) {
        return error(
            StatusCode::BAD_REQUEST,
            &format!("`subtype` must be one of {}", CONTROLS.join(", ")),
        );
    }
    let Some(session) = state.supervisor.get(thread_id) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no session for thread {thread_id}"),
        );
    };
    match session.control(request).await {
        Ok(response) => json_response(StatusCode::OK, json!({"response": response}).to_string()),
        Err(e) => control_error(&e),
    }
}

/// A control request's failure, with the status that says whose it was.
fn control_error(e: &ControlError) -> Response<ResponseBody> {
    let status = match e {
        ControlError::Invalid(_) => StatusCode::BAD_REQUEST,
        ControlError::NotRunning(_) => StatusCode::CONFLICT,
        ControlError::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
        ControlError::Refused(_) | ControlError::Lost(_) => StatusCode::BAD_GATEWAY,
        ControlError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
    };
    let mut response = error(status, &e.to_string());
    if status == StatusCode::TOO_MANY_REQUESTS {
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

async fn decide(state: &AguiState, request_id: &str, body: &[u8]) -> Response<ResponseBody> {
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return error(StatusCode::BAD_REQUEST, "the body must be JSON");
    };
    let answer = match approvals::answer(&body) {
        Ok(answer) => answer,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let Some(pending) = state.supervisor.approvals().tools.take(request_id) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!(
                "no tool call waits for approval under {request_id} (GET /approvals lists them)"
            ),
        );
    };
    let Some(session) = state.supervisor.get(&pending.thread_id) else {
        return error(StatusCode::GONE, "the session of this tool call ended");
    };
    match session.answer(request_id, answer, AnswerKind::Approval).await {
        Ok(()) => json_response(
            StatusCode::OK,
            json!({"answered": request_id, "toolName": pending.request.tool_name, "behavior": body["behavior"]}).to_string(),
        ),
        Err(e) => error(StatusCode::GONE, &e.to_string()),
    }
}

/// The app answers a hook call (`POST /hooks/{id}`: Claude Code's hook output) or a request for
/// one of its MCP servers (`POST /mcp-requests/{id}`: the JSON-RPC response).
async fn answer_app(
    state: &AguiState,
    request_id: &str,
    body: &[u8],
    kind: AnswerKind,
) -> Response<ResponseBody> {
    let waiting = state.supervisor.approvals();
    let (what, list) = match kind {
        AnswerKind::Hook => ("hook call", "GET /hooks"),
        _ => ("MCP request", "GET /mcp-requests"),
    };
    let Ok(answer) = serde_json::from_slice::<Value>(body) else {
        return error(StatusCode::BAD_REQUEST, "the body must be JSON");
    };
    let thread = match kind {
        AnswerKind::Hook => waiting.hooks.thread_of(request_id),
        _ => waiting.mcp.thread_of(request_id),
    };
    let Some(thread) = thread else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no {what} waits under {request_id} ({list} lists them)"),
        );
    };
    let Some(session) = state.supervisor.get(&thread) else {
        return error(
            StatusCode::GONE,
            &format!("the session of this {what} ended"),
        );
    };
    match session.answer(request_id, answer, kind).await {
        Ok(()) => {
            waiting.forget(request_id);
            json_response(StatusCode::OK, json!({"answered": request_id}).to_string())
        }
        Err(AnswerError::Invalid(e)) => error(StatusCode::BAD_REQUEST, &e),
        Err(AnswerError::NotWaiting(e)) => error(StatusCode::GONE, &e),
    }
}

async fn describe(state: &AguiState, thread_id: &str) -> Response<ResponseBody> {
    let described = match state.supervisor.get(thread_id) {
        Some(session) => session.describe().await,
        None => None,
    };
    match described {
        Some(described) => json_response(StatusCode::OK, described.to_string()),
        None => error(
            StatusCode::NOT_FOUND,
            &format!("no session for thread {thread_id}"),
        ),
    }
}

/// Set what Claude Code starts with and (re)start it; the session is created if needed.
async fn initialize(state: &AguiState, thread_id: &str, body: &[u8]) -> Response<ResponseBody> {
    let options = match serde_json::from_slice::<InitOptions>(body) {
        Ok(options) => options,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the body must be {{\"systemPrompt\"?, \"appendSystemPrompt\"?, \"hooks\"?: {{\"PreToolUse\": [{{\"matcher\": \"Bash\", \"timeout\": 30}}]}}}}: {e}"
                ),
            );
        }
    };
    let session = match state.supervisor.session(thread_id) {
        Ok((session, evicted)) => {
            for old in evicted {
                tokio::spawn(async move { old.stop().await });
            }
            session
        }
        Err(busy) => {
            let mut response = error(StatusCode::TOO_MANY_REQUESTS, &busy.to_string());
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("5"));
            return response;
        }
    };
    match session.initialize(options).await {
        Ok(answer) => json_response(
            StatusCode::OK,
            json!({"threadId": thread_id, "initialize": answer}).to_string(),
        ),
        Err(InitRefused::Busy(e)) => error(StatusCode::CONFLICT, &e),
        Err(InitRefused::Invalid(e)) => error(StatusCode::BAD_REQUEST, &e),
        Err(InitRefused::Failed(e)) => error(StatusCode::BAD_GATEWAY, &e),
    }
}

fn add_rule(state: &AguiState, body: &[u8]) -> Response<ResponseBody> {
    let rule = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            let tool = v.get("tool")?.as_str()?.to_owned();
            let behavior = v
                .get("behavior")
                .and_then(Value::as_str)
                .unwrap_or("allow")
                .to_owned();
            Some(format!("{tool}:{behavior}"))
        })
        .ok_or_else(|| {
            String::from(
                "send {\"tool\": \"Read\" or \"mcp__x__*\", \"behavior\": \"allow\"|\"deny\"}",
            )
        })
        .and_then(|text| Rule::parse(&text));
    match rule {
        Ok(rule) => {
            state.supervisor.approvals().add_rule(rule);
            json_response(
                StatusCode::OK,
                json!({"rules": state.supervisor.approvals().rules()}).to_string(),
            )
        }
        Err(e) => error(StatusCode::BAD_REQUEST, &e),
    }
}
