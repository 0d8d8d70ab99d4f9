//! History repair, for every provider: Claude Code leaves histories that every upstream refuses
//! after an interrupt — an assistant `tool_use` whose `tool_result` never came (Anthropic: "tool_use
//! ids were found without tool_result blocks"; OpenAI: "must be followed by tool messages"), or a
//! `tool_result` whose `tool_use` is gone. The bridge heals them:
//!
//! - a `tool_use` with no `tool_result` in the next user message gets a synthetic one
//!   (`is_error: true`, "Tool execution was interrupted.") placed first in that message, or in a
//!   new user message when the next message is not the user's;
//! - a `tool_result` whose `tool_use` is not in the assistant message just before becomes text.
//!
//! Each repair is described (with the ids) for the host's log. A history that needs nothing is
//! read once, as it is; the repair itself works on the JSON, so a pass-through keeps every field.
//!
//! ```
//! use bridge_core::anthropic::repair::{parse_and_repair, INTERRUPTED};
//! let body = br#"{"model":"m","max_tokens":9,"messages":[
//!   {"role":"user","content":"run it"},
//!   {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},
//!   {"role":"user","content":"[Request interrupted by user for tool use]"}]}"#;
//! let parsed = parse_and_repair(body).unwrap();
//! assert_eq!(parsed.repairs.len(), 1);
//! let repaired = parsed.repaired.unwrap();
//! assert_eq!(repaired["messages"][2]["content"][0]["tool_use_id"], "t1");
//! assert_eq!(repaired["messages"][2]["content"][0]["content"], INTERRUPTED);
//! assert_eq!(repaired["messages"][2]["content"][1]["type"], "text");
//! ```

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::request::{Block, Content, KnownBlock, MessagesRequest, Role};
use crate::error::RequestError;

/// The text of a synthetic `tool_result`.
pub const INTERRUPTED: &str = "Tool execution was interrupted.";

/// A request read and, when it had to be, repaired.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The request (repaired).
    pub request: MessagesRequest,
    /// What was repaired, for the log (empty when nothing was).
    pub repairs: Vec<String>,
    /// The repaired request as JSON (`None` when nothing was repaired: use the original bytes).
    pub repaired: Option<Value>,
}

/// Read a Messages request and repair its history.
///
/// # Errors
/// [`RequestError`] when the body is not a Messages request (naming the field to fix).
pub fn parse_and_repair(body: &[u8]) -> Result<Parsed, RequestError> {
    let request = super::request::parse_request(body)?;
    if !needs_repair(&request) {
        return Ok(Parsed {
            request,
            repairs: Vec::new(),
            repaired: None,
        });
    }
    let mut value: Value =
        serde_json::from_slice(body).map_err(|e| RequestError::Json(e.to_string()))?;
    let repairs = repair_value(&mut value);
    let request =
        serde_json::from_value(value.clone()).map_err(|e| RequestError::Json(e.to_string()))?;
    Ok(Parsed {
        request,
        repairs,
        repaired: Some(value),
    })
}

fn typed_tool_uses(content: &Content) -> Vec<&str> {
    match content {
        Content::Text(_) => Vec::new(),
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                Block::Known(KnownBlock::ToolUse { id, .. }) => Some(id.as_str()),
                _ => None,
            })
            .collect(),
    }
}

fn typed_tool_results(content: &Content) -> Vec<&str> {
    match content {
        Content::Text(_) => Vec::new(),
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                Block::Known(KnownBlock::ToolResult { tool_use_id, .. }) => {
                    Some(tool_use_id.as_str())
                }
                _ => None,
            })
            .collect(),
    }
}

/// Whether the history has a call without its result or a result without its call.
#[must_use]
pub fn needs_repair(request: &MessagesRequest) -> bool {
    let messages = &request.messages;
    messages.iter().enumerate().any(|(i, message)| {
        let calls_before: Vec<&str> = match i.checked_sub(1).map(|p| &messages[p]) {
            Some(prev) if prev.role == Role::Assistant => typed_tool_uses(&prev.content),
            _ => Vec::new(),
        };
        let results = typed_tool_results(&message.content);
        let orphan = results.iter().any(|id| !calls_before.contains(id));
        let unanswered = message.role == Role::Assistant && {
            let calls = typed_tool_uses(&message.content);
            let next = messages.get(i + 1).filter(|m| m.role == Role::User);
            let answered = next
                .map(|m| typed_tool_results(&m.content))
                .unwrap_or_default();
            calls.iter().any(|id| !answered.contains(id))
        };
        orphan || unanswered
    })
}

fn blocks_of<'a>(message: &'a Value, kind: &str, id_field: &str) -> Vec<&'a str> {
    message["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == kind)
                .filter_map(|b| b[id_field].as_str())
                .collect()
        })
        .unwrap_or_default()
}

/// The content of `message` as an array of blocks (a string becomes one text block).
fn content_blocks(message: &mut Value) -> Option<&mut Vec<Value>> {
    if let Some(text) = message["content"].as_str() {
        let text = text.to_owned();
        message["content"] = if text.is_empty() {
            json!([])
        } else {
            json!([{"type": "text", "text": text}])
        };
    }
    message["content"].as_array_mut()
}

fn synthetic_result(id: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": id, "is_error": true, "content": INTERRUPTED})
}

/// The text of a `tool_result`'s content (a string, or its text blocks).
fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Repair the history of a Messages request (JSON); returns what was repaired.
pub fn repair_value(request: &mut Value) -> Vec<String> {
    let mut repairs = Vec::new();
    let Some(messages) = request["messages"].as_array_mut() else {
        return repairs;
    };
    // Calls without results.
    let mut i = 0;
    while i < messages.len() {
        if messages[i]["role"] == "assistant" {
            let calls: Vec<String> = blocks_of(&messages[i], "tool_use", "id")
                .into_iter()
                .map(String::from)
                .collect();
            let next_is_user = messages.get(i + 1).is_some_and(|m| m["role"] == "user");
            let answered: BTreeSet<String> = if next_is_user {
                blocks_of(&messages[i + 1], "tool_result", "tool_use_id")
                    .into_iter()
                    .map(String::from)
                    .collect()
            } else {
                BTreeSet::new()
            };
            let missing: Vec<&String> = calls.iter().filter(|id| !answered.contains(*id)).collect();
            if !missing.is_empty() {
                let synthetic: Vec<Value> = missing.iter().map(|id| synthetic_result(id)).collect();
                if next_is_user {
                    if let Some(blocks) = content_blocks(&mut messages[i + 1]) {
                        blocks.splice(0..0, synthetic);
                    }
                } else {
                    messages.insert(i + 1, json!({"role": "user", "content": synthetic}));
                }
                repairs.push(format!(
                    "message {i}: tool_use {} had no tool_result; answered as interrupted",
                    missing
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        i += 1;
    }
    // Results without calls.
    for i in 0..messages.len() {
        let calls: BTreeSet<String> = match i.checked_sub(1) {
            Some(p) if messages[p]["role"] == "assistant" => {
                blocks_of(&messages[p], "tool_use", "id")
                    .into_iter()
                    .map(String::from)
                    .collect()
            }
            _ => BTreeSet::new(),
        };
        let Some(blocks) = messages[i]["content"].as_array_mut() else {
            continue;
        };
        for block in blocks.iter_mut() {
            if block["type"] != "tool_result" {
                continue;
            }
            let id = block["tool_use_id"].as_str().unwrap_or_default().to_owned();
            if calls.contains(&id) {
                continue;
            }
            let text = format!(
                "(result of tool call {id}, which is not in this conversation)\n{}",
                result_text(block)
            );
            *block = json!({"type": "text", "text": text});
            repairs.push(format!(
                "message {i}: tool_result {id} answers no tool_use before it; kept as text"
            ));
        }
    }
    repairs
}

/// The history repairs as conversion warnings; the host logs these at `warn`
/// (they begin with [`REPAIRED`]).
#[must_use]
pub fn repair_warnings(repairs: &[String]) -> Vec<String> {
    repairs.iter().map(|r| format!("{REPAIRED}{r}")).collect()
}

/// How a warning about a repaired history begins.
pub const REPAIRED: &str = "repaired history: ";

#[cfg(test)]
mod tests {
    use super::*;

    fn repaired(messages: Value) -> (Value, Vec<String>) {
        let body = json!({"model": "m", "max_tokens": 5, "messages": messages}).to_string();
        let parsed = parse_and_repair(body.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let value = parsed
            .repaired
            .unwrap_or_else(|| json!({"messages": "untouched"}));
        (value["messages"].clone(), parsed.repairs)
    }

    #[test]
    fn a_sound_history_is_left_alone() {
        let (messages, repairs) = repaired(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "X", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]},
        ]));
        assert_eq!(messages, json!("untouched"));
        assert!(repairs.is_empty());
    }

    #[test]
    fn unanswered_calls_get_interrupted_results_first() {
        let (messages, repairs) = repaired(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "a", "name": "X", "input": {}},
                {"type": "tool_use", "id": "b", "name": "X", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "b", "content": "done"},
                {"type": "text", "text": "go on"}]},
        ]));
        assert_eq!(messages[2]["content"][0], synthetic_result("a"));
        assert_eq!(messages[2]["content"][1]["tool_use_id"], "b");
        assert_eq!(messages[2]["content"].as_array().map(Vec::len), Some(3));
        assert_eq!(repairs.len(), 1);
        assert!(repairs[0].contains("tool_use a"), "{repairs:?}");
    }

    #[test]
    fn a_call_followed_by_no_user_message_gets_one() {
        let (messages, _) = repaired(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "X", "input": {}}]},
            {"role": "assistant", "content": "and then?"},
            {"role": "user", "content": "well"},
        ]));
        assert_eq!(messages.as_array().map(Vec::len), Some(5));
        assert_eq!(
            messages[2],
            json!({"role": "user", "content": [synthetic_result("a")]})
        );
        assert_eq!(messages[3]["content"], "and then?");
        // At the very end, too.
        let (messages, _) = repaired(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "z", "name": "X", "input": {}}]},
        ]));
        assert_eq!(messages[2]["content"][0]["tool_use_id"], "z");
    }

    #[test]
    fn orphan_results_become_text() {
        let (messages, repairs) = repaired(json!([
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "gone", "content": [{"type": "text", "text": "42"}]},
                {"type": "text", "text": "what now"}]},
        ]));
        assert_eq!(messages[0]["content"][0]["type"], "text");
        assert!(
            messages[0]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .ends_with("\n42")
        );
        assert!(repairs[0].contains("tool_result gone"));
    }
}
