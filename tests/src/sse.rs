//! Anthropic SSE on the client side: parse events, check the stream shape, fold it into a message.
//!
//! Written independently of `bridge-core` on purpose: the end-to-end tests must not trust the code
//! they test.

use serde_json::{Map, Value, json};

use crate::err;

/// One SSE event.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    /// The `event:` field (None when absent).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

impl SseEvent {
    /// `data` parsed as JSON (`Value::Null` if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }

    /// The event name: `event:` or else the JSON `type`.
    pub fn name(&self) -> String {
        self.event
            .clone()
            .or_else(|| {
                self.json()
                    .get("type")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    }
}

/// Parse an SSE byte stream (complete events only; a trailing partial event is ignored).
pub fn parse(bytes: &[u8]) -> Vec<SseEvent> {
    let text = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    let mut events = Vec::new();
    let mut event: Option<String> = None;
    let mut data: Vec<String> = Vec::new();
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        if lines.peek().is_none() {
            break; // the last piece has no newline after it: incomplete
        }
        if line.is_empty() {
            if event.is_some() || !data.is_empty() {
                events.push(SseEvent {
                    event: event.take(),
                    data: data.join("\n"),
                });
                data.clear();
            }
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line
            .split_once(':')
            .map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
        match field {
            "event" => event = Some(value.to_owned()),
            "data" => data.push(value.to_owned()),
            _ => {}
        }
    }
    events
}

/// Names of the events (pings included).
pub fn names(events: &[SseEvent]) -> Vec<String> {
    events.iter().map(SseEvent::name).collect()
}

/// Check the Anthropic stream invariant (DESIGN §3): one `message_start` first; blocks opened and closed
/// in index order with no overlap; deltas only to the open block and of its type; `message_delta` with
/// `usage.output_tokens`; `message_stop` last — or an `error` event and nothing after it. `ping` may
/// appear anywhere. The `event:` name must equal the JSON `type`.
pub fn validate(events: &[SseEvent]) -> crate::Result<()> {
    let mut started = false;
    let mut open: Option<(u64, String)> = None;
    let mut next_index = 0u64;
    let mut saw_message_delta = false;
    let mut ended = false;
    for (i, ev) in events.iter().enumerate() {
        let at = |msg: &str| {
            err(format!(
                "event #{i} ({}): {msg}; stream: {:?}",
                ev.data,
                names(events)
            ))
        };
        if ended {
            return Err(at("event after the end of the stream"));
        }
        let data = ev.json();
        let ty = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some(name) = &ev.event
            && name != &ty
        {
            return Err(at(&format!(
                "event name {name:?} differs from data type {ty:?}"
            )));
        }
        match ty.as_str() {
            "ping" => {}
            "error" => {
                if data
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .is_none()
                    || data
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .is_none()
                {
                    return Err(at("error event without error.type/error.message"));
                }
                ended = true;
            }
            "message_start" => {
                if started {
                    return Err(at("second message_start"));
                }
                if data
                    .pointer("/message/usage/input_tokens")
                    .and_then(Value::as_u64)
                    .is_none()
                {
                    return Err(at("message_start without usage.input_tokens"));
                }
                started = true;
            }
            _ if !started => return Err(at("event before message_start")),
            "content_block_start" => {
                if open.is_some() {
                    return Err(at("block started while another is open"));
                }
                if saw_message_delta {
                    return Err(at("block after message_delta"));
                }
                let index = data
                    .get("index")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| at("no index"))?;
                if index != next_index {
                    return Err(at(&format!("block index {index}, expected {next_index}")));
                }
                let block_type = data
                    .pointer("/content_block/type")
                    .and_then(Value::as_str)
                    .ok_or_else(|| at("no content_block.type"))?;
                if block_type == "tool_use" {
                    let name = data
                        .pointer("/content_block/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let id = data
                        .pointer("/content_block/id")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if name.is_empty() || id.is_empty() {
                        return Err(at("tool_use block with empty id or name"));
                    }
                }
                open = Some((index, block_type.to_owned()));
                next_index += 1;
            }
            "content_block_delta" => {
                let index = data
                    .get("index")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| at("no index"))?;
                let Some((open_index, block_type)) = &open else {
                    return Err(at("delta with no open block"));
                };
                if *open_index != index {
                    return Err(at(&format!(
                        "delta for block {index}, open block is {open_index}"
                    )));
                }
                let delta_type = data
                    .pointer("/delta/type")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let ok = matches!(
                    (block_type.as_str(), delta_type),
                    ("text", "text_delta" | "citations_delta")
                        | ("tool_use" | "server_tool_use", "input_json_delta")
                        | ("thinking", "thinking_delta" | "signature_delta")
                );
                if !ok {
                    return Err(at(&format!("{delta_type} in a {block_type} block")));
                }
            }
            "content_block_stop" => {
                let index = data
                    .get("index")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| at("no index"))?;
                match &open {
                    Some((open_index, _)) if *open_index == index => open = None,
                    _ => return Err(at("stop for a block that is not open")),
                }
            }
            "message_delta" => {
                if open.is_some() {
                    return Err(at("message_delta while a block is open"));
                }
                if data
                    .pointer("/usage/output_tokens")
                    .and_then(Value::as_u64)
                    .is_none()
                {
                    return Err(at("message_delta without usage.output_tokens"));
                }
                saw_message_delta = true;
            }
            "message_stop" => {
                if !saw_message_delta {
                    return Err(at("message_stop without message_delta"));
                }
                ended = true;
            }
            other => return Err(at(&format!("unknown event type {other:?}"))),
        }
    }
    if !ended {
        return Err(err(format!(
            "stream ended without message_stop or error: {:?}",
            names(events)
        )));
    }
    Ok(())
}

/// The `error` event of a stream, if any.
pub fn error_event(events: &[SseEvent]) -> Option<Value> {
    events
        .iter()
        .map(SseEvent::json)
        .find(|d| d.get("type").and_then(Value::as_str) == Some("error"))
}

/// Fold a stream into the final message, the way the SDK accumulators do.
pub fn accumulate(events: &[SseEvent]) -> crate::Result<Value> {
    let mut message = Value::Null;
    let mut partial_json: Vec<String> = Vec::new();
    for ev in events {
        let data = ev.json();
        match data.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message_start" => message = data.get("message").cloned().unwrap_or(Value::Null),
            "content_block_start" => {
                let block = data.get("content_block").cloned().unwrap_or(Value::Null);
                content_mut(&mut message)?.push(block);
                partial_json.push(String::new());
            }
            "content_block_delta" => {
                let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                let index = usize::try_from(index).map_err(|e| err(e.to_string()))?;
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                let block = content_mut(&mut message)?
                    .get_mut(index)
                    .ok_or_else(|| err("delta for a missing block"))?;
                let append = |block: &mut Value, key: &str, piece: Option<&str>| {
                    if let (Some(obj), Some(piece)) = (block.as_object_mut(), piece) {
                        let cur = obj
                            .get(key)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        obj.insert(key.into(), Value::String(cur + piece));
                    }
                };
                match delta
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                {
                    "text_delta" => {
                        append(block, "text", delta.get("text").and_then(Value::as_str))
                    }
                    "thinking_delta" => append(
                        block,
                        "thinking",
                        delta.get("thinking").and_then(Value::as_str),
                    ),
                    "signature_delta" => append(
                        block,
                        "signature",
                        delta.get("signature").and_then(Value::as_str),
                    ),
                    "input_json_delta" => {
                        if let (Some(p), Some(piece)) = (
                            partial_json.get_mut(index),
                            delta.get("partial_json").and_then(Value::as_str),
                        ) {
                            p.push_str(piece);
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                let index = usize::try_from(index).map_err(|e| err(e.to_string()))?;
                let json_text = partial_json.get(index).cloned().unwrap_or_default();
                let block = content_mut(&mut message)?
                    .get_mut(index)
                    .ok_or_else(|| err("stop for a missing block"))?;
                if matches!(
                    block.get("type").and_then(Value::as_str),
                    Some("tool_use" | "server_tool_use")
                ) {
                    let input = if json_text.is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&json_text).map_err(|e| {
                            err(format!("tool input is not JSON ({e}): {json_text}"))
                        })?
                    };
                    if let Some(obj) = block.as_object_mut() {
                        obj.insert("input".into(), input);
                    }
                }
            }
            "message_delta" => {
                if let Some(obj) = message.as_object_mut() {
                    for (k, v) in data
                        .get("delta")
                        .and_then(Value::as_object)
                        .into_iter()
                        .flatten()
                    {
                        obj.insert(k.clone(), v.clone());
                    }
                    let usage = obj
                        .entry("usage")
                        .or_insert_with(|| Value::Object(Map::new()));
                    for (k, v) in data
                        .get("usage")
                        .and_then(Value::as_object)
                        .into_iter()
                        .flatten()
                    {
                        if !v.is_null()
                            && let Some(u) = usage.as_object_mut()
                        {
                            u.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(message)
}

fn content_mut(message: &mut Value) -> crate::Result<&mut Vec<Value>> {
    message
        .get_mut("content")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| err("block before message_start (no content array)"))
}

/// The parts of a message two answers must agree on: content with generated ids and signatures
/// removed, `stop_reason`, `usage.output_tokens`.
pub fn comparable(message: &Value) -> Value {
    let content: Vec<Value> = message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|b| {
            let mut b = b.clone();
            if let Some(obj) = b.as_object_mut() {
                obj.remove("id");
                obj.remove("signature");
                obj.remove("citations");
                obj.retain(|_, v| !v.is_null());
            }
            b
        })
        .collect();
    json!({
        "content": content,
        "stop_reason": message.get("stop_reason").cloned().unwrap_or(Value::Null),
        "output_tokens": message.pointer("/usage/output_tokens").cloned().unwrap_or(Value::Null),
    })
}
