//! A scripted OpenAI Responses API (`POST /v1/responses`) that refuses what the real API refuses
//! where the bridge could drift — no bearer key, `stream` not true when the bridge means to
//! stream, `max_output_tokens` below 16, nested (Chat-style) tools, a `function_call_output` whose
//! `call_id` has no `function_call` before it, a `reasoning` item carrying an `rs_` id while
//! `store` is false (the server keeps nothing to refer to), an unknown input item type — with the
//! real API's status and words, and answers the rest with a scripted response streamed as real
//! Responses events (`response.created` … `response.completed`, each with `sequence_number`).
//! Hosted web search as the real API streams it: a `web_search_call` announced without its
//! action, the action (query, and the sources only when `include` asks for them) on its
//! `output_item.done`; citations as `url_citation` annotations. It refuses a tool of an unknown
//! type or with a field the API does not take, an unknown `include` value and a
//! `web_search_call` input item that is not one the API gave out (`ws_…`, with its action).

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
    /// A hosted web search: its query and the addresses it drew on.
    Search(String, Vec<String>),
    /// Assistant text, in pieces, citing pages (url, title) as `url_citation` annotations.
    Cited(Vec<String>, Vec<(String, String)>),
}

/// The `include` value that asks for a web search's sources.
const SOURCES: &str = "web_search_call.action.sources";

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

    fn done_item(item: &Item, index: usize, sources: bool) -> Value {
        match item {
            Item::Search(query, urls) => {
                let mut action = json!({"type": "search", "query": query, "queries": [query]});
                if sources {
                    action["sources"] = urls
                        .iter()
                        .map(|u| json!({"type": "url", "url": u}))
                        .collect();
                }
                json!({"type": "web_search_call", "id": format!("ws_{index}"), "status": "completed", "action": action})
            }
            Item::Cited(pieces, cited) => {
                json!({"type": "message", "id": format!("msg_{index}"), "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": pieces.concat(), "annotations": Self::annotations(pieces, cited)}]})
            }
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

    /// `url_citation`s of the whole text, in characters, as the API counts.
    fn annotations(pieces: &[String], cited: &[(String, String)]) -> Vec<Value> {
        let end = pieces.concat().chars().count();
        cited
            .iter()
            .map(|(url, title)| json!({"type": "url_citation", "url": url, "title": title, "start_index": 0, "end_index": end}))
            .collect()
    }

    /// The events, in order (without `sequence_number`, added when written); a search's
    /// sources only when the request's `include` asked for them.
    #[must_use]
    pub fn events(&self, model: &str, sources: bool) -> Vec<Value> {
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
                Item::Search(..) => {
                    events.push(json!({"type": "response.output_item.added", "output_index": i,
                        "item": {"type": "web_search_call", "id": id("ws"), "status": "in_progress"}}));
                    for stage in ["in_progress", "searching", "completed"] {
                        events.push(json!({"type": format!("response.web_search_call.{stage}"),
                            "item_id": id("ws"), "output_index": i}));
                    }
                }
                Item::Cited(pieces, cited) => {
                    events.push(json!({"type": "response.output_item.added", "output_index": i,
                        "item": {"type": "message", "id": id("msg"), "role": "assistant", "status": "in_progress", "content": []}}));
                    events.push(json!({"type": "response.content_part.added", "item_id": id("msg"), "output_index": i,
                        "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}));
                    for piece in pieces {
                        events.push(json!({"type": "response.output_text.delta", "item_id": id("msg"), "output_index": i,
                            "content_index": 0, "delta": piece, "logprobs": []}));
                    }
                    for (n, annotation) in Self::annotations(pieces, cited).into_iter().enumerate()
                    {
                        events.push(json!({"type": "response.output_text.annotation.added", "item_id": id("msg"),
                            "output_index": i, "content_index": 0, "annotation_index": n, "annotation": annotation}));
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
            events.push(json!({"type": "response.output_item.done", "output_index": i, "item": Self::done_item(item, i, sources)}));
        }
        let (input, cached, output, reasoning) = self.usage;
        let output_items: Vec<Value> = self
            .items
            .iter()
            .enumerate()
            .map(|(i, it)| Self::done_item(it, i, sources))
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
        self.stream_for(model, false, end, take)
    }

    fn stream_for(
        &self,
        model: &str,
        sources: bool,
        end: StreamEnd,
        take: usize,
    ) -> ScriptedResponse {
        let events = self
            .events(model, sources)
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
        let sources = req.body["include"]
            .as_array()
            .is_some_and(|i| i.iter().any(|v| v == SOURCES));
        self.stream_for(model, sources, StreamEnd::Clean, usize::MAX)
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
        let fields: &[&str] = match tool["type"].as_str() {
            Some("function") => &["type", "name", "description", "parameters", "strict"],
            Some("web_search" | "web_search_2025_08_26") => &[
                "type",
                "filters",
                "user_location",
                "search_context_size",
                "external_web_access",
            ],
            other => {
                return invalid(
                    &format!("Invalid value: '{}'.", other.unwrap_or("null")),
                    &format!("tools[{i}].type"),
                );
            }
        };
        if let Some(unknown) = tool
            .as_object()
            .into_iter()
            .flat_map(|t| t.keys())
            .find(|k| !fields.contains(&k.as_str()))
        {
            return invalid(
                &format!("Unknown parameter: 'tools[{i}].{unknown}'."),
                &format!("tools[{i}].{unknown}"),
            );
        }
        if let Some(filters) = tool.get("filters").and_then(Value::as_object)
            && let Some(unknown) = filters.keys().find(|k| *k != "allowed_domains")
        {
            return invalid(
                &format!("Unknown parameter: 'tools[{i}].filters.{unknown}'."),
                &format!("tools[{i}].filters.{unknown}"),
            );
        }
    }
    const INCLUDABLE: &[&str] = &[
        "reasoning.encrypted_content",
        SOURCES,
        "web_search_call.results",
        "message.output_text.logprobs",
        "code_interpreter_call.outputs",
        "file_search_call.results",
    ];
    for value in body["include"].as_array().into_iter().flatten() {
        if !value.as_str().is_some_and(|v| INCLUDABLE.contains(&v)) {
            return invalid(&format!("Invalid value: {value}."), "include");
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
            "web_search_call" => {
                let id = item["id"].as_str().unwrap_or_default();
                if !id.starts_with("ws_") || item["action"]["type"].as_str().is_none() {
                    return invalid(
                        &format!(
                            "Invalid 'input[{i}]': a web_search_call needs the id and action the API gave out."
                        ),
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
