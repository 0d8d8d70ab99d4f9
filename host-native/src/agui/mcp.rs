//! The frontend tools as an MCP server (Streamable HTTP, one JSON response per request) at
//! `/mcp/<thread>`: Claude Code's session of that thread lists the tools the client registered in
//! its latest run (`tools/list`) and calls them (`tools/call`). A call ends the running AG-UI run
//! (the client sees the tool call and runs the tool) and is answered with the result the client
//! sends in its next run.
//!
//! Tools the client registers later reach the running Claude Code without a new process: the
//! server says `tools.listChanged`, Claude Code keeps a `GET` stream open ([`notifications`]),
//! and a `notifications/tools/list_changed` on it makes Claude Code list the tools again.

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::session::Session;
use super::supervisor::Supervisor;

/// Protocol versions this server speaks, newest first.
const VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// What to answer an MCP POST: a JSON-RPC response, or nothing (HTTP 202) for notifications
/// and responses.
#[derive(Debug, Clone, PartialEq)]
pub enum McpReply {
    /// Send this JSON-RPC message.
    Message(Value),
    /// `202 Accepted`, no body.
    Accepted,
}

fn error(id: &Value, code: i64, message: &str) -> McpReply {
    McpReply::Message(
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

fn result(id: &Value, result: Value) -> McpReply {
    McpReply::Message(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Handle one JSON-RPC message for `thread_id`.
pub async fn handle(supervisor: &Supervisor, thread_id: &str, body: &[u8]) -> McpReply {
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return error(&Value::Null, -32700, "Parse error: the body is not JSON");
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        // A response to something we never asked, or garbage.
        return if id.is_null() {
            error(&Value::Null, -32600, "Invalid Request: no method")
        } else {
            McpReply::Accepted
        };
    };
    if id.is_null() {
        // Notifications (`notifications/initialized`, `notifications/cancelled`, …).
        return McpReply::Accepted;
    }
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    match method {
        "initialize" => {
            let asked = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or(VERSIONS[1]);
            let version = VERSIONS
                .iter()
                .find(|v| **v == asked)
                .copied()
                .unwrap_or(VERSIONS[0]);
            result(
                &id,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": true}},
                    "serverInfo": {"name": "claude-bridge-frontend", "version": env!("CARGO_PKG_VERSION")},
                    "instructions": "Tools of the web app the user is working in; the app runs them and returns their results.",
                }),
            )
        }
        "ping" => result(&id, json!({})),
        "tools/list" => {
            let tools = match supervisor.get(thread_id) {
                Some(session) => session.frontend_tools(true).await,
                None => Vec::new(),
            };
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let schema = if t.parameters.is_object() {
                        t.parameters.clone()
                    } else {
                        json!({"type": "object", "properties": {}})
                    };
                    json!({"name": t.name, "description": t.description, "inputSchema": schema})
                })
                .collect();
            result(&id, json!({"tools": tools}))
        }
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return error(&id, -32602, "Invalid params: `name` is required");
            };
            let Some(session) = supervisor.get(thread_id) else {
                return error(&id, -32602, &format!("no session for thread {thread_id}"));
            };
            if !session
                .frontend_tools(false)
                .await
                .iter()
                .any(|t| t.name == name)
            {
                return error(&id, -32602, &format!("Unknown tool: {name}"));
            }
            match session.frontend_call(name).await {
                Ok(outcome) => result(
                    &id,
                    json!({"content": [{"type": "text", "text": outcome.content}], "isError": outcome.is_error}),
                ),
                Err(e) => result(
                    &id,
                    json!({"content": [{"type": "text", "text": e}], "isError": true}),
                ),
            }
        }
        other => error(&id, -32601, &format!("Method not found: {other}")),
    }
}

/// The `GET` stream of a thread's MCP server: one `notifications/tools/list_changed` each time
/// the client's tools change, for as long as the session and the connection live.
pub fn notifications(session: &Session) -> mpsc::Receiver<Bytes> {
    let mut changes = session.tools_changed();
    changes.mark_unchanged();
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { break },
                () = tx.closed() => break,
            }
            let event = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            if tx
                .send(Bytes::from(format!("event: message\ndata: {event}\n\n")))
                .await
                .is_err()
            {
                break;
            }
        }
    });
    rx
}
