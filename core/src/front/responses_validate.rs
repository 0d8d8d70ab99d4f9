//! The rules a Responses event stream the bridge writes must satisfy — what the Codex CLI and
//! the OpenAI SDKs' Responses stream helpers rely on.
//!
//! - Every frame has an `event:` name equal to its JSON `type`, and a `sequence_number`
//!   strictly greater than the one before.
//! - `response.created` comes first (unless the stream is a lone `error` event);
//!   `response.in_progress` may follow; the `response.id` is the same on every event carrying one.
//! - Items, one open at a time: `response.output_item.added` with `output_index` = the number of
//!   items before it and a new `item.id`; then only events naming that `item_id` and
//!   `output_index`; `response.output_item.done` last, with the same id, status `completed`
//!   (for messages and tool calls) and the full content.
//! - Inside an item: a part is added (`content_part.added` / `reasoning_summary_part.added`)
//!   before its deltas; a `*.done` carries exactly the concatenated deltas and comes after them;
//!   the part's `.done` after the text's; a function call's arguments are a JSON object.
//! - Exactly one terminal event, nothing after it: `response.completed` or
//!   `response.incomplete` (no item open, `output` = the items done, in order, usage with
//!   `total_tokens` = input + output), `response.failed` (with `error.message`), or `error`.
//!
//! ```
//! use bridge_core::front::responses_validate::check_responses_sse;
//! let lone_error = "event: error\ndata: {\"type\":\"error\",\"sequence_number\":0,\"code\":\"server_error\",\"message\":\"boom\",\"param\":null}\n\n";
//! assert!(check_responses_sse(lone_error.as_bytes()).is_ok());
//! assert!(check_responses_sse(b"").is_err()); // no terminal event
//! ```

use serde_json::Value;

use crate::anthropic::stream::Violation;
use crate::sse::decoder::SseDecoder;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartState {
    None,
    Open,
    TextDone,
    Done,
}

#[derive(Debug)]
struct Item {
    id: String,
    output_index: u64,
    kind: String,
    part: PartState,
    text: String,
    args_done: bool,
}

/// Checks a Responses stream event by event.
#[derive(Debug, Default)]
pub struct ResponsesValidator {
    position: usize,
    last_seq: Option<u64>,
    response_id: Option<String>,
    created: bool,
    items_done: Vec<Value>,
    ids: Vec<String>,
    open: Option<Item>,
    ended: bool,
}

impl ResponsesValidator {
    /// A validator expecting `response.created` (or a lone `error`).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Check the next event (`event:` name and JSON data).
    ///
    /// # Errors
    /// The rule the event breaks.
    pub fn push(&mut self, name: Option<&str>, data: &str) -> Result<(), Violation> {
        let position = self.position;
        self.position += 1;
        let parsed: Option<Value> = serde_json::from_str(data).ok();
        let kind = parsed
            .as_ref()
            .and_then(|v| v.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("<unknown>")
            .to_owned();
        let fail = |rule: String| Violation {
            position,
            event: kind.clone(),
            rule,
        };
        if self.ended {
            return Err(fail(String::from("nothing may follow the terminal event")));
        }
        let Some(event) = parsed.filter(Value::is_object) else {
            return Err(fail(String::from("data is not a JSON object")));
        };
        if name != Some(kind.as_str()) {
            return Err(fail(format!(
                "the SSE event name {name:?} differs from the JSON type"
            )));
        }
        let Some(seq) = event.get("sequence_number").and_then(Value::as_u64) else {
            return Err(fail(String::from("every event needs a sequence_number")));
        };
        if self.last_seq.is_some_and(|last| seq <= last) {
            return Err(fail(format!(
                "sequence_number {seq} does not increase (last {:?})",
                self.last_seq
            )));
        }
        self.last_seq = Some(seq);
        self.event(&kind, &event).map_err(fail)
    }

    /// The stream ended: it must have ended with a terminal event.
    ///
    /// # Errors
    /// A violation when it did not.
    pub fn finish(&self) -> Result<(), Violation> {
        if self.ended {
            return Ok(());
        }
        Err(Violation {
            position: self.position,
            event: String::from("<end>"),
            rule: String::from("the stream ended without a terminal event"),
        })
    }

    fn event(&mut self, kind: &str, event: &Value) -> Result<(), String> {
        if kind == "error" {
            if !event.get("message").is_some_and(Value::is_string) {
                return Err(String::from("an error event needs a message"));
            }
            self.ended = true;
            return Ok(());
        }
        if let Some(response) = event.get("response") {
            self.response_id(response)?;
        }
        if !self.created {
            if kind != "response.created" {
                return Err(String::from("the first event must be response.created"));
            }
            self.created = true;
            return status(event, "in_progress");
        }
        match kind {
            "response.created" => Err(String::from("response.created may appear only once")),
            "response.in_progress" => {
                if self.open.is_some() || !self.items_done.is_empty() {
                    return Err(String::from("response.in_progress after output began"));
                }
                status(event, "in_progress")
            }
            "response.output_item.added" => self.added(event),
            "response.output_item.done" => self.item_done(event),
            "response.completed" | "response.incomplete" => self.completed(kind, event),
            "response.failed" => {
                status(event, "failed")?;
                let message = event
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .and_then(|e| e.get("message"));
                if !message.is_some_and(Value::is_string) {
                    return Err(String::from("response.failed needs response.error.message"));
                }
                self.ended = true;
                Ok(())
            }
            _ => self.in_item(kind, event),
        }
    }

    fn response_id(&mut self, response: &Value) -> Result<(), String> {
        let Some(id) = response.get("id").and_then(Value::as_str) else {
            return Err(String::from("a response needs an id"));
        };
        match &self.response_id {
            Some(first) if first != id => Err(String::from(
                "the response id must be the same on every event",
            )),
            Some(_) => Ok(()),
            None => {
                self.response_id = Some(id.to_owned());
                Ok(())
            }
        }
    }

    fn added(&mut self, event: &Value) -> Result<(), String> {
        if self.open.is_some() {
            return Err(String::from("an item was added while another is open"));
        }
        let expected = u64::try_from(self.items_done.len()).unwrap_or(u64::MAX);
        if event.get("output_index").and_then(Value::as_u64) != Some(expected) {
            return Err(format!("output_index must be {expected}"));
        }
        let item = event.get("item");
        let id = item.and_then(|i| i.get("id")).and_then(Value::as_str);
        let kind = item.and_then(|i| i.get("type")).and_then(Value::as_str);
        let (Some(id), Some(kind)) = (id, kind) else {
            return Err(String::from("an added item needs an id and a type"));
        };
        if id.is_empty() || self.ids.iter().any(|seen| seen == id) {
            return Err(format!("item id {id:?} is empty or used before"));
        }
        if !matches!(
            kind,
            "message" | "reasoning" | "function_call" | "custom_tool_call"
        ) {
            return Err(format!("unknown item type {kind:?}"));
        }
        self.ids.push(id.to_owned());
        self.open = Some(Item {
            id: id.to_owned(),
            output_index: expected,
            kind: kind.to_owned(),
            part: PartState::None,
            text: String::new(),
            args_done: false,
        });
        Ok(())
    }

    fn in_item(&mut self, kind: &str, event: &Value) -> Result<(), String> {
        let Some(item) = self.open.as_mut() else {
            return Err(String::from("an item event with no item open"));
        };
        if event.get("item_id").and_then(Value::as_str) != Some(item.id.as_str())
            || event.get("output_index").and_then(Value::as_u64) != Some(item.output_index)
        {
            return Err(String::from(
                "item_id and output_index must name the open item",
            ));
        }
        let index_ok = |field: &str| event.get(field).and_then(Value::as_u64) == Some(0);
        let text = |field: &str| event.get(field).and_then(Value::as_str).map(str::to_owned);
        match (item.kind.as_str(), kind) {
            ("message", "response.content_part.added")
            | ("reasoning", "response.reasoning_summary_part.added") => {
                if item.part != PartState::None {
                    return Err(String::from("one part per item"));
                }
                item.part = PartState::Open;
            }
            ("message", "response.output_text.delta")
            | ("reasoning", "response.reasoning_summary_text.delta") => {
                if item.part != PartState::Open {
                    return Err(String::from("a text delta needs an open part"));
                }
                item.text
                    .push_str(&text("delta").ok_or("a delta needs a string delta")?);
            }
            ("message", "response.output_text.done")
            | ("reasoning", "response.reasoning_summary_text.done") => {
                if item.part != PartState::Open {
                    return Err(String::from("text done without an open part"));
                }
                if text("text").as_deref() != Some(item.text.as_str()) {
                    return Err(String::from("done text differs from the deltas joined"));
                }
                item.part = PartState::TextDone;
            }
            ("message", "response.content_part.done")
            | ("reasoning", "response.reasoning_summary_part.done") => {
                if item.part != PartState::TextDone {
                    return Err(String::from("part done before its text is done"));
                }
                let part_text = event.get("part").and_then(|p| p.get("text"));
                if part_text.and_then(Value::as_str) != Some(item.text.as_str()) {
                    return Err(String::from("the done part's text differs"));
                }
                item.part = PartState::Done;
            }
            ("function_call", "response.function_call_arguments.delta")
            | ("custom_tool_call", "response.custom_tool_call_input.delta") => {
                if item.args_done {
                    return Err(String::from("a delta after done"));
                }
                item.text
                    .push_str(&text("delta").ok_or("a delta needs a string delta")?);
            }
            ("function_call", "response.function_call_arguments.done") => {
                if item.args_done || text("arguments").as_deref() != Some(item.text.as_str()) {
                    return Err(String::from(
                        "arguments done twice or differing from the deltas joined",
                    ));
                }
                if !matches!(serde_json::from_str(&item.text), Ok(Value::Object(_))) {
                    return Err(format!("arguments {:?} are not a JSON object", item.text));
                }
                item.args_done = true;
            }
            ("custom_tool_call", "response.custom_tool_call_input.done") => {
                if item.args_done || text("input").as_deref() != Some(item.text.as_str()) {
                    return Err(String::from(
                        "input done twice or differing from the deltas joined",
                    ));
                }
                item.args_done = true;
            }
            (item_kind, _) => {
                return Err(format!("{kind} does not belong in a {item_kind} item"));
            }
        }
        if matches!(
            kind,
            "response.content_part.added" | "response.content_part.done"
        ) && !index_ok("content_index")
            || kind.contains("output_text") && !index_ok("content_index")
            || kind.contains("reasoning_summary") && !index_ok("summary_index")
        {
            return Err(String::from("content_index / summary_index must be 0"));
        }
        Ok(())
    }

    fn item_done(&mut self, event: &Value) -> Result<(), String> {
        let Some(item) = self.open.take() else {
            return Err(String::from("output_item.done with no item open"));
        };
        let done = event.get("item").cloned().unwrap_or(Value::Null);
        if event.get("output_index").and_then(Value::as_u64) != Some(item.output_index)
            || done.get("id").and_then(Value::as_str) != Some(item.id.as_str())
            || done.get("type").and_then(Value::as_str) != Some(item.kind.as_str())
        {
            return Err(String::from(
                "output_item.done must name the open item (id, type, output_index)",
            ));
        }
        let complete = match item.kind.as_str() {
            "message" => {
                item.part == PartState::Done
                    && done.pointer("/content/0/text").and_then(Value::as_str)
                        == Some(item.text.as_str())
            }
            "reasoning" => {
                item.part == PartState::Done
                    && done.pointer("/summary/0/text").and_then(Value::as_str)
                        == Some(item.text.as_str())
            }
            "function_call" => {
                item.args_done
                    && done.get("arguments").and_then(Value::as_str) == Some(item.text.as_str())
                    && done.get("call_id").is_some_and(Value::is_string)
            }
            _ => {
                item.args_done
                    && done.get("input").and_then(Value::as_str) == Some(item.text.as_str())
                    && done.get("call_id").is_some_and(Value::is_string)
            }
        };
        if !complete {
            return Err(format!(
                "the {} item is done before its parts, or its content differs from the deltas",
                item.kind
            ));
        }
        if item.kind != "reasoning"
            && done.get("status").and_then(Value::as_str) != Some("completed")
        {
            return Err(String::from("a done item has status completed"));
        }
        self.items_done.push(done);
        Ok(())
    }

    fn completed(&mut self, kind: &str, event: &Value) -> Result<(), String> {
        if self.open.is_some() {
            return Err(format!("{kind} while an item is open"));
        }
        let response = event.get("response").cloned().unwrap_or(Value::Null);
        let incomplete = kind == "response.incomplete";
        status(
            event,
            if incomplete {
                "incomplete"
            } else {
                "completed"
            },
        )?;
        if incomplete
            && !response
                .pointer("/incomplete_details/reason")
                .is_some_and(Value::is_string)
        {
            return Err(String::from(
                "response.incomplete needs incomplete_details.reason",
            ));
        }
        if response.get("output") != Some(&Value::Array(self.items_done.clone())) {
            return Err(String::from("the final output differs from the items done"));
        }
        let usage = |field: &str| {
            response
                .pointer(&format!("/usage/{field}"))
                .and_then(Value::as_u64)
        };
        match (
            usage("input_tokens"),
            usage("output_tokens"),
            usage("total_tokens"),
        ) {
            (Some(i), Some(o), Some(t)) if i.checked_add(o) == Some(t) => {}
            _ => {
                return Err(String::from(
                    "usage needs input_tokens, output_tokens and total_tokens = their sum",
                ));
            }
        }
        self.ended = true;
        Ok(())
    }
}

fn status(event: &Value, expected: &str) -> Result<(), String> {
    if event.pointer("/response/status").and_then(Value::as_str) == Some(expected) {
        Ok(())
    } else {
        Err(format!("response.status must be {expected:?}"))
    }
}

/// Decode SSE bytes and validate the whole stream; the events' JSON.
///
/// # Errors
/// The first violation.
pub fn check_responses_sse(bytes: &[u8]) -> Result<Vec<Value>, Violation> {
    let mut decoder = SseDecoder::new();
    let mut frames = decoder.feed(bytes);
    frames.extend(decoder.finish());
    let mut validator = ResponsesValidator::new();
    let mut events = Vec::with_capacity(frames.len());
    for frame in &frames {
        validator.push(frame.event.as_deref(), &frame.data)?;
        events.push(serde_json::from_str(&frame.data).unwrap_or(Value::Null));
    }
    validator.finish()?;
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::events::{
        BlockStart, Delta, MessageDeltaBody, MessageShell, StopReason, StreamEvent, Usage,
    };
    use crate::front::responses_stream::{ResponsesStreamEncoder, ResponsesStreamOptions};
    use serde_json::json;

    /// A valid stream: a text item and a function call item.
    fn valid() -> Vec<Value> {
        let mut enc = ResponsesStreamEncoder::new(ResponsesStreamOptions {
            id: String::from("v"),
            ..ResponsesStreamOptions::default()
        });
        let events = [
            StreamEvent::MessageStart {
                message: Box::new(MessageShell::new("m".into(), "m".into(), 1)),
            },
            StreamEvent::ContentBlockStart {
                index: 0,
                content_block: BlockStart::Text {
                    text: String::new(),
                },
            },
            StreamEvent::ContentBlockDelta {
                index: 0,
                delta: Delta::TextDelta { text: "a".into() },
            },
            StreamEvent::ContentBlockStop { index: 0 },
            StreamEvent::ContentBlockStart {
                index: 1,
                content_block: BlockStart::ToolUse {
                    id: "t".into(),
                    name: "f".into(),
                    input: json!({}),
                },
            },
            StreamEvent::ContentBlockDelta {
                index: 1,
                delta: Delta::InputJsonDelta {
                    partial_json: "{}".into(),
                },
            },
            StreamEvent::ContentBlockStop { index: 1 },
            StreamEvent::MessageDelta {
                delta: MessageDeltaBody {
                    stop_reason: Some(StopReason::ToolUse),
                    stop_sequence: None,
                },
                usage: Usage::default(),
            },
            StreamEvent::MessageStop,
        ];
        let sse: String = events.iter().map(|e| enc.push(e.clone())).collect();
        check_responses_sse(sse.as_bytes()).unwrap()
    }

    fn render(events: &[Value]) -> String {
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
            .collect()
    }

    fn broken(change: impl FnOnce(&mut Vec<Value>)) -> String {
        let mut events = valid();
        change(&mut events);
        check_responses_sse(render(&events).as_bytes())
            .unwrap_err()
            .rule
    }

    fn find(events: &[Value], kind: &str) -> usize {
        events.iter().position(|e| e["type"] == kind).unwrap()
    }

    #[test]
    fn the_encoder_stream_is_valid_and_renders_back() {
        let events = valid();
        assert_eq!(events.len(), 13);
        assert!(check_responses_sse(render(&events).as_bytes()).is_ok());
    }

    #[test]
    fn each_rule_catches_its_break() {
        assert!(broken(|e| e[3]["sequence_number"] = json!(1)).contains("does not increase"));
        assert!(
            broken(|e| {
                e.remove(0);
            })
            .contains("first event must be response.created")
        );
        assert!(
            broken(|e| {
                let i = find(e, "response.content_part.added");
                e.remove(i);
            })
            .contains("needs an open part")
        );
        assert!(
            broken(|e| {
                let i = find(e, "response.output_text.done");
                e[i]["text"] = json!("b");
            })
            .contains("differs from the deltas")
        );
        assert!(
            broken(|e| {
                let i = find(e, "response.output_text.delta");
                e[i]["item_id"] = json!("other");
            })
            .contains("name the open item")
        );
        assert!(
            broken(|e| {
                let i = find(e, "response.function_call_arguments.done");
                e.remove(i);
            })
            .contains("done before its parts")
        );
        assert!(
            broken(|e| {
                let i = find(e, "response.output_item.added");
                e[i]["output_index"] = json!(1);
            })
            .contains("output_index must be 0")
        );
        assert!(
            broken(|e| {
                e.pop();
            })
            .contains("without a terminal")
        );
        assert!(
            broken(|e| {
                let mut again = e[e.len() - 1].clone();
                again["sequence_number"] = json!(99);
                e.push(again);
            })
            .contains("nothing may follow")
        );
        assert!(
            broken(|e| {
                let last = e.len() - 1;
                e[last]["response"]["usage"]["total_tokens"] = json!(1000);
            })
            .contains("total_tokens")
        );
        assert!(
            broken(|e| {
                let last = e.len() - 1;
                e[last]["response"]["output"] = json!([]);
            })
            .contains("final output differs")
        );
        assert!(
            broken(|e| {
                let i = find(e, "response.output_item.done");
                e.truncate(i);
                let mut done = e[0].clone();
                done["type"] = json!("response.completed");
                done["sequence_number"] = json!(50);
                e.push(done);
            })
            .contains("while an item is open")
        );
    }

    #[test]
    fn event_names_must_match_types() {
        let events = valid();
        let sse = render(&events).replacen("event: response.created", "event: message", 1);
        assert!(
            check_responses_sse(sse.as_bytes())
                .unwrap_err()
                .rule
                .contains("differs from the JSON type")
        );
    }
}
