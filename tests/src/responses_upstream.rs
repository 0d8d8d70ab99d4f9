//! A scripted OpenAI Responses API (`POST /v1/responses`) that refuses what the real API refuses
//! where the bridge could drift — no bearer key, `stream` not true when the bridge means to
//! stream, `max_output_tokens` below 16, nested (Chat-style) tools, a `function_call_output` whose
//! `call_id` has no `function_call` before it, a `reasoning` item carrying an `rs_` id while
//! `store` is false (the server keeps nothing to refer to), an unknown input item type — with the
//! real API's status and words, and answers the rest with a scripted response streamed as real
//! Responses events (`response.created` … `response.completed`, each with `sequence_number`).

use serde_json::{Value, json};

use crate::upstream::{RecordedRequest, ScriptedResponse, StreamEnd};

/// An OpenAI error response.
#[must_use]
pub fn error(status: u16, kind: &str, message: &str, code: Option<&str>) -> ScriptedResponse {
    ScriptedResponse::openai_error(status, message, kind, code)
}

/// One output item of a scripted response.
#[derive(Debug, Clone)]
pub enum Item {
    /// A reasoning summary (in pieces) and its encrypted content.
    Reasoning(Vec<String>, String),
    /// Assistant text, in pieces.
    Text(Vec<String>),
    /// A function call: call id, name, arguments JSON in pieces.
    Call(String, String, Vec<String>),
}

/// A scripted response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Its output items.
    pub items: Vec<Item>,
    /// Usage: input, cached, output, reasoning tokens.
    pub usage: (u64, u64, u64, u64),
}

impl Response {
    /// A text answer.
    #[must_use]
    pub fn text(pieces: &[&str]) -> Self {
        Self {
            items: vec![Item::Text(pieces.iter().map(|s| (*s).to_owned()).collect())],
            usage: (200, 0, 9, 0),
        }
    }

    fn done_item(item: &Item, index: usize) -> Value {
        match item {
            Item::Reasoning(summary, encrypted) => {
                json!({"type": "reasoning", "id": format!("rs_{index}"),
                "summary": [{"type": "summary_text", "text": summary.concat()}], "encrypted_content": encrypted})
            }
            Item::Text(pieces) => {
                json!({"type": "message", "id": format!("msg_{index}"), "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": pieces.concat(), "annotations": []}]})
            }
            Item::Call(call_id, name, pieces) => {
                json!({"type": "function_call", "id": format!("fc_{index}"),
                "call_id": call_id, "name": name, "arguments": pieces.concat(), "status": "completed"})
            }
        }
    }

    /// The events, in order (without `sequence_number`, added when written).
    #[must_use]
    pub fn events(&self, model: &str) -> Vec<Value> {
        let shell = |status: &str, output: Value, usage: Value| {
            json!({"id": "resp_scripted", "object": "response", "created_at": 1_763_900_000, "status": status,
                "model": model, "output": output, "usage": usage, "store": false})
        };
        let mut events = vec![
            json!({"type": "response.created", "response": shell("in_progress", json!([]), Value::Null)}),
            json!({"type": "response.in_progress", "response": shell("in_progress", json!([]), Value::Null)}),
        ];
        for (i, item) in self.items.iter().enumerate() {
            let id = |p: &str| format!("{p}_{i}");
            match item {
                Item::Reasoning(summary, _) => {
                    events.push(
                        json!({"type": "response.output_item.added", "output_index": i,
                        "item": {"type": "reasoning", "id": id("rs"), "summary": []}}),
                    );
                    events.push(json!({"type": "response.reasoning_summary_part.added", "item_id": id("rs"),
                        "output_index": i, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}));
                    for piece in summary {
                        events.push(json!({"type": "response.reasoning_summary_text.delta", "item_id": id("rs"),
                            "output_index": i, "summary_index": 0, "delta": piece}));
                    }
                    events.push(
                        json!({"type": "response.reasoning_summary_text.done", "item_id": id("rs"),
                        "output_index": i, "summary_index": 0, "text": summary.concat()}),
                    );
                }
                Item::Text(pieces) => {
                    events.push(json!({"type": "response.output_item.added", "output_index": i,
                        "item": {"type": "message", "id": id("msg"), "role": "assistant", "status": "in_progress", "content": []}}));
                    events.push(json!({"type": "response.content_part.added", "item_id": id("msg"), "output_index": i,
                        "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}));
                    for piece in pieces {
                        events.push(json!({"type": "response.output_text.delta", "item_id": id("msg"), "output_index": i,
                            "content_index": 0, "delta": piece, "logprobs": []}));
                    }
                    events.push(json!({"type": "response.output_text.done", "item_id": id("msg"), "output_index": i,
                        "content_index": 0, "text": pieces.concat(), "logprobs": []}));
                }
                Item::Call(call_id, name, pieces) => {
                    events.push(json!({"type": "response.output_item.added", "output_index": i,
                        "item": {"type": "function_call", "id": id("fc"), "call_id": call_id, "name": name, "arguments": "", "status": "in_progress"}}));
                    for piece in pieces {
                        events.push(json!({"type": "response.function_call_arguments.delta", "item_id": id("fc"),
                            "output_index": i, "delta": piece}));
                    }
                    events.push(
                        json!({"type": "response.function_call_arguments.done", "item_id": id("fc"),
                        "output_index": i, "name": name, "arguments": pieces.concat()}),
                    );
                }
            }
            events.push(json!({"type": "response.output_item.done", "output_index": i, "item": Self::done_item(item, i)}));
        }
        let (input, cached, output, reasoning) = self.usage;
        let output_items: Vec<Value> = self
            .items
            .iter()
            .enumerate()
            .map(|(i, it)| Self::done_item(it, i))
            .collect();
        events.push(json!({"type": "response.completed", "response": shell("completed", json!(output_items), json!({
            "input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input + output}))}));
        events
    }

    /// The stream, cut after `take` events with `end`.
    #[must_use]
    pub fn stream(&self, model: &str, end: StreamEnd, take: usize) -> ScriptedResponse {
        let events = self
            .events(model)
            .into_iter()
            .take(take)
            .enumerate()
            .map(|(seq, mut e)| {
                e["sequence_number"] = json!(seq);
                e
            })
            .collect();
        ScriptedResponse::sse_events(events, end)
    }

    /// The answer to `req`.
    #[must_use]
    pub fn answer(&self, req: &RecordedRequest) -> ScriptedResponse {
        let model = req.body["model"].as_str().unwrap_or("gpt-x");
        self.stream(model, StreamEnd::Clean, usize::MAX)
    }
}

/// What the real API answers `req` with when it refuses it, or `None` when it takes it.
#[must_use]
pub fn refusal(req: &RecordedRequest, key: &str) -> Option<ScriptedResponse> {
    let path = req.path.split('?').next().unwrap_or_default();
    if req.method != "POST" || path != "/v1/responses" {
        return Some(error(
            404,
            "invalid_request_error",
            &format!("Invalid URL (POST {path})"),
            None,
        ));
    }
    if req.header("authorization") != Some(format!("Bearer {key}").as_str()) {
        return Some(error(
            401,
            "invalid_request_error",
            "Incorrect API key provided.",
            Some("invalid_api_key"),
        ));
    }
    let body = &req.body;
    let invalid = |message: &str, param: &str| {
        Some(error(
            400,
            "invalid_request_error",
            &format!("{message} ({param})"),
            None,
        ))
    };
    if body["model"].as_str().is_none() {
        return invalid("Missing required parameter: 'model'.", "model");
    }
    if let Some(max) = body.get("max_output_tokens").and_then(Value::as_u64)
        && max < 16
    {
        return invalid(
            "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16",
            "max_output_tokens",
        );
    }
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if tool["type"] == "function" && tool["name"].as_str().is_none() {
            return invalid(
                &format!("Missing required parameter: 'tools[{i}].name'."),
                "tools",
            );
        }
    }
    let store = body["store"].as_bool().unwrap_or(true);
    let mut calls = Vec::new();
    for (i, item) in body["input"].as_array().into_iter().flatten().enumerate() {
        let kind = item["type"].as_str().unwrap_or("message");
        match kind {
            "message" => {
                if !matches!(
                    item["role"].as_str(),
                    Some("user" | "assistant" | "system" | "developer")
                ) {
                    return invalid(
                        &format!(
                            "Invalid value: '{}'. Supported values are: 'assistant', 'system', 'developer', and 'user'.",
                            item["role"]
                        ),
                        &format!("input[{i}].role"),
                    );
                }
            }
            "function_call" => calls.push(item["call_id"].as_str().unwrap_or_default().to_owned()),
            "function_call_output" => {
                let id = item["call_id"].as_str().unwrap_or_default();
                if !calls.iter().any(|c| c == id) {
                    return invalid(
                        &format!("No tool call found for function call output with call_id {id}."),
                        "input",
                    );
                }
            }
            "reasoning" => {
                if !store && item.get("id").is_some() {
                    let id = item["id"].as_str().unwrap_or_default();
                    return Some(error(
                        404,
                        "invalid_request_error",
                        &format!(
                            "Item with id '{id}' not found. Items are not persisted when `store` is set to false."
                        ),
                        None,
                    ));
                }
                if item["encrypted_content"].as_str().is_none()
                    && item["summary"].as_array().is_none()
                {
                    return invalid(
                        "Missing required parameter: 'summary'.",
                        &format!("input[{i}]"),
                    );
                }
            }
            other => {
                return invalid(
                    &format!("Invalid value: '{other}'."),
                    &format!("input[{i}].type"),
                );
            }
        }
    }
    None
}
