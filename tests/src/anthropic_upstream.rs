//! A scripted Anthropic Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`) as strict
//! as the real one where the bridge could drift: it refuses what the real API refuses, with the
//! real API's status, error type and words — a missing `anthropic-version`, a wrong or missing
//! key, an OAuth bearer without the `oauth-2025-04-20` beta, a body without `max_tokens` or with
//! empty `messages`, a `tool_use` without its `tool_result` in the next message, a `tool_result`
//! without its `tool_use` — and answers the rest with a scripted message, streamed as real SSE
//! (`message_start` … `message_stop`) or as one JSON `Message`. Only the model is scripted.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::upstream::{RecordedRequest, ScriptedResponse, StreamEnd};

/// Who may call: the keys the stand-in accepts.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// Accepted `x-api-key` values.
    pub api_keys: Vec<String>,
    /// Accepted OAuth bearer tokens (`sk-ant-oat…`).
    pub oauth_tokens: Vec<String>,
}

/// An Anthropic error response, as the API writes it.
#[must_use]
pub fn error(status: u16, kind: &str, message: &str) -> ScriptedResponse {
    ScriptedResponse::Full {
        status,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("request-id".into(), "req_upstream".into()),
        ],
        body: Bytes::from(
            json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_upstream"})
                .to_string(),
        ),
    }
}

/// Blocks of a scripted answer.
#[derive(Debug, Clone)]
pub enum Block {
    /// Text, streamed in these pieces.
    Text(Vec<String>),
    /// Thinking with its signature.
    Thinking(String, String),
    /// A tool call: id, name, the input JSON in pieces.
    ToolUse(String, String, Vec<String>),
}

/// A scripted assistant message.
#[derive(Debug, Clone)]
pub struct Message {
    /// Its blocks.
    pub blocks: Vec<Block>,
    /// `end_turn`, `tool_use`, `max_tokens`…
    pub stop_reason: String,
    /// Usage: input, output tokens.
    pub usage: (u64, u64),
}

impl Message {
    /// A text answer.
    #[must_use]
    pub fn text(pieces: &[&str]) -> Self {
        Self {
            blocks: vec![Block::Text(
                pieces.iter().map(|s| (*s).to_owned()).collect(),
            )],
            stop_reason: "end_turn".into(),
            usage: (120, 7),
        }
    }

    /// Some text, then a tool call whose input JSON arrives in `pieces`.
    #[must_use]
    pub fn tool_call(text: &str, id: &str, name: &str, pieces: &[String]) -> Self {
        Self {
            blocks: vec![
                Block::Text(vec![text.to_owned()]),
                Block::ToolUse(id.into(), name.into(), pieces.to_vec()),
            ],
            stop_reason: "tool_use".into(),
            usage: (300, 40),
        }
    }

    fn start(model: &str, input: u64) -> Value {
        json!({"id": "msg_scripted01", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}})
    }

    /// The events of the stream, in order.
    #[must_use]
    pub fn events(&self, model: &str) -> Vec<Value> {
        let mut events =
            vec![json!({"type": "message_start", "message": Self::start(model, self.usage.0)})];
        for (index, block) in self.blocks.iter().enumerate() {
            let (start, deltas): (Value, Vec<Value>) = match block {
                Block::Text(pieces) => (
                    json!({"type": "text", "text": ""}),
                    pieces
                        .iter()
                        .map(|p| json!({"type": "text_delta", "text": p}))
                        .collect(),
                ),
                Block::Thinking(text, signature) => (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    vec![
                        json!({"type": "thinking_delta", "thinking": text}),
                        json!({"type": "signature_delta", "signature": signature}),
                    ],
                ),
                Block::ToolUse(id, name, pieces) => (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    pieces
                        .iter()
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                        .collect(),
                ),
            };
            events.push(
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            );
            if index == 0 {
                events.push(json!({"type": "ping"}));
            }
            for delta in deltas {
                events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
            }
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        events.push(json!({"type": "message_delta", "delta": {"stop_reason": self.stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": self.usage.1}}));
        events.push(json!({"type": "message_stop"}));
        events
    }

    /// The whole answer as one `Message` (what a non-streaming request gets).
    #[must_use]
    pub fn json(&self, model: &str) -> Value {
        let mut message = Self::start(model, self.usage.0);
        message["content"] = self
            .blocks
            .iter()
            .map(|block| match block {
                Block::Text(pieces) => json!({"type": "text", "text": pieces.concat()}),
                Block::Thinking(text, signature) => {
                    json!({"type": "thinking", "thinking": text, "signature": signature})
                }
                Block::ToolUse(id, name, pieces) => {
                    json!({"type": "tool_use", "id": id, "name": name,
                    "input": serde_json::from_str::<Value>(&pieces.concat()).unwrap_or_default()})
                }
            })
            .collect();
        message["stop_reason"] = json!(self.stop_reason);
        message["usage"]["output_tokens"] = json!(self.usage.1);
        message
    }

    /// The answer to `req`: SSE when it asked for a stream (one event per write), JSON otherwise.
    #[must_use]
    pub fn answer(&self, req: &RecordedRequest) -> ScriptedResponse {
        let model = req.body["model"].as_str().unwrap_or("claude-x");
        if req.body["stream"] != true {
            return ScriptedResponse::json(&self.json(model));
        }
        self.stream(model, StreamEnd::Clean, usize::MAX)
    }

    /// The stream, cut (connection dropped) after `events` events when `end` is a disconnect.
    #[must_use]
    pub fn stream(&self, model: &str, end: StreamEnd, events: usize) -> ScriptedResponse {
        let events = self.events(model).into_iter().take(events).collect();
        ScriptedResponse::sse_events(events, end)
    }
}

fn ids(message: &Value, kind: &str, field: &str) -> Vec<String> {
    message["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == kind)
                .filter_map(|b| b[field].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// What the real API answers `req` with when it refuses it, or `None` when it takes it.
#[must_use]
pub fn refusal(req: &RecordedRequest, credentials: &Credentials) -> Option<ScriptedResponse> {
    let path = req.path.split('?').next().unwrap_or_default();
    if req.method != "POST" || !matches!(path, "/v1/messages" | "/v1/messages/count_tokens") {
        return Some(error(404, "not_found_error", "Not Found"));
    }
    if req.header("anthropic-version").is_none() {
        return Some(error(
            400,
            "invalid_request_error",
            "anthropic-version: header is required",
        ));
    }
    let bearer = req.header("authorization").and_then(|a| {
        a.get(7..)
            .filter(|_| a[..7].eq_ignore_ascii_case("bearer "))
    });
    match (req.header("x-api-key"), bearer) {
        (Some(key), _) if credentials.api_keys.iter().any(|k| k == key) => {}
        (None, Some(token)) if credentials.oauth_tokens.iter().any(|t| t == token) => {
            let beta = req.header("anthropic-beta").unwrap_or_default();
            if !beta.split(',').any(|b| b.trim() == "oauth-2025-04-20") {
                return Some(error(
                    401,
                    "authentication_error",
                    "OAuth authentication is currently not supported.",
                ));
            }
        }
        (None, None) => {
            return Some(error(
                401,
                "authentication_error",
                "x-api-key header is required",
            ));
        }
        _ => return Some(error(401, "authentication_error", "invalid x-api-key")),
    }
    let body = &req.body;
    if !body.is_object() {
        return Some(error(
            400,
            "invalid_request_error",
            "There was an issue with your request body: not JSON",
        ));
    }
    if body["model"].as_str().is_none() {
        return Some(error(400, "invalid_request_error", "model: Field required"));
    }
    if path == "/v1/messages" && !body["max_tokens"].is_u64() {
        return Some(error(
            400,
            "invalid_request_error",
            "max_tokens: Field required",
        ));
    }
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        return Some(error(
            400,
            "invalid_request_error",
            "messages: at least one message is required",
        ));
    };
    for (i, message) in messages.iter().enumerate() {
        if !matches!(message["role"].as_str(), Some("user" | "assistant")) {
            return Some(error(
                400,
                "invalid_request_error",
                &format!("messages.{i}.role: Input should be 'user' or 'assistant'"),
            ));
        }
        let calls = ids(message, "tool_use", "id");
        if !calls.is_empty() {
            let answered = messages
                .get(i + 1)
                .filter(|m| m["role"] == "user")
                .map(|m| ids(m, "tool_result", "tool_use_id"))
                .unwrap_or_default();
            let missing: Vec<&String> = calls.iter().filter(|c| !answered.contains(c)).collect();
            if !missing.is_empty() {
                return Some(error(
                    400,
                    "invalid_request_error",
                    &format!(
                        "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                        i + 1,
                        missing
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        let before = i
            .checked_sub(1)
            .map(|p| ids(&messages[p], "tool_use", "id"))
            .unwrap_or_default();
        for result in ids(message, "tool_result", "tool_use_id") {
            if !before.contains(&result) {
                return Some(error(
                    400,
                    "invalid_request_error",
                    &format!(
                        "messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {result}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    ),
                ));
            }
        }
    }
    None
}

/// The token count the stand-in reports for `req` (characters / 3: not the bridge's estimate).
#[must_use]
pub fn count(req: &RecordedRequest) -> ScriptedResponse {
    let tokens = req.raw_body.len() / 3;
    ScriptedResponse::json(&json!({ "input_tokens": tokens }))
}
