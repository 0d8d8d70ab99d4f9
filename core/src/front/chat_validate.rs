//! The rules a Chat Completions SSE stream the bridge writes must satisfy — what the OpenAI
//! SDKs' stream accumulators rely on.
//!
//! - Every frame is `data:` only (no `event:` name); the data is `[DONE]` or a JSON object.
//! - Chunks: `object: "chat.completion.chunk"`, the same `id`, `created` and `model` throughout,
//!   at most one choice, with `index` 0.
//! - The first chunk's delta has `role: "assistant"`; no later one has a role.
//! - Tool calls: a new call takes the next `index` (0, 1, …) and its first fragment carries
//!   `id`, `type: "function"` and `function.name`; later fragments carry only `index` and
//!   `function.arguments`. Each call's arguments, joined, parse as a JSON object by `[DONE]`.
//! - Exactly one non-null `finish_reason` (`stop`, `length`, `tool_calls`, `content_filter`),
//!   and no choice chunk after it.
//! - Usage: with `include_usage` every chunk has `"usage": null` except one chunk after the
//!   finish with `choices: []` and `usage` {`prompt_tokens`, `completion_tokens`,
//!   `total_tokens` = their sum}; without it no chunk has a usage.
//! - The stream ends with `data: [DONE]`, or with an error chunk `{"error":{"message","type",…}}`
//!   (which may come at any point); nothing follows either.
//!
//! ```
//! use bridge_core::front::chat_validate::check_chat_sse;
//! let ok = concat!(
//!     "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
//!     "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
//!     "data: [DONE]\n\n");
//! assert!(check_chat_sse(ok.as_bytes(), false).is_ok());
//! assert!(check_chat_sse(b"data: [DONE]\n\n", false).is_err()); // no finish_reason
//! ```

use serde_json::{Map, Value};

use crate::anthropic::stream::Violation;
use crate::sse::decoder::SseDecoder;

#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    Done,
    Error,
}

/// Checks a Chat Completions stream frame by frame.
#[derive(Debug)]
pub struct ChatValidator {
    include_usage: bool,
    position: usize,
    identity: Option<(Value, Value, Value)>,
    role_seen: bool,
    tool_args: Vec<String>,
    finished: bool,
    usage_seen: bool,
    end: Option<End>,
}

impl ChatValidator {
    /// A validator for a stream requested with (or without) `stream_options.include_usage`.
    #[must_use]
    pub fn new(include_usage: bool) -> Self {
        Self {
            include_usage,
            position: 0,
            identity: None,
            role_seen: false,
            tool_args: Vec::new(),
            finished: false,
            usage_seen: false,
            end: None,
        }
    }

    /// Check the next frame's data (`[DONE]` or a JSON text).
    ///
    /// # Errors
    /// The rule the frame breaks.
    pub fn push(&mut self, data: &str) -> Result<(), Violation> {
        let position = self.position;
        self.position += 1;
        let name = if data == "[DONE]" { "[DONE]" } else { "chunk" };
        let fail = |rule: String| Violation {
            position,
            event: name.to_owned(),
            rule,
        };
        if self.end.is_some() {
            return Err(fail(String::from(
                "nothing may follow [DONE] or an error chunk",
            )));
        }
        if data == "[DONE]" {
            return self.done().map_err(fail);
        }
        let Ok(Value::Object(chunk)) = serde_json::from_str::<Value>(data) else {
            return Err(fail(String::from(
                "data is neither [DONE] nor a JSON object",
            )));
        };
        if let Some(error) = chunk.get("error") {
            let ok = error.get("message").is_some_and(Value::is_string)
                && error.get("type").is_some_and(Value::is_string);
            if !ok {
                return Err(fail(String::from(
                    "an error chunk needs error.message and error.type strings",
                )));
            }
            self.end = Some(End::Error);
            return Ok(());
        }
        self.chunk(&chunk).map_err(fail)
    }

    /// The stream ended: it must have ended with `[DONE]` or an error chunk.
    ///
    /// # Errors
    /// A violation when it did not.
    pub fn finish(&self) -> Result<(), Violation> {
        if self.end.is_some() {
            return Ok(());
        }
        Err(Violation {
            position: self.position,
            event: String::from("<end>"),
            rule: String::from("the stream ended without [DONE] or an error chunk"),
        })
    }

    fn done(&mut self) -> Result<(), String> {
        if !self.finished {
            return Err(String::from("[DONE] before a finish_reason"));
        }
        if self.include_usage && !self.usage_seen {
            return Err(String::from(
                "[DONE] without the usage chunk include_usage asks for",
            ));
        }
        for (index, args) in self.tool_args.iter().enumerate() {
            if !matches!(serde_json::from_str::<Value>(args), Ok(Value::Object(_))) {
                return Err(format!(
                    "tool call {index}'s arguments {args:?} are not a JSON object"
                ));
            }
        }
        self.end = Some(End::Done);
        Ok(())
    }

    fn chunk(&mut self, chunk: &Map<String, Value>) -> Result<(), String> {
        if chunk.get("object").and_then(Value::as_str) != Some("chat.completion.chunk") {
            return Err(String::from("object must be chat.completion.chunk"));
        }
        let identity = (
            chunk.get("id").cloned().unwrap_or(Value::Null),
            chunk.get("created").cloned().unwrap_or(Value::Null),
            chunk.get("model").cloned().unwrap_or(Value::Null),
        );
        if !identity.0.is_string() || !identity.1.is_u64() || !identity.2.is_string() {
            return Err(String::from(
                "a chunk needs a string id, an integer created and a string model",
            ));
        }
        match &self.identity {
            None => self.identity = Some(identity),
            Some(first) if *first != identity => {
                return Err(String::from(
                    "id, created and model must be the same on every chunk",
                ));
            }
            Some(_) => {}
        }
        let usage = chunk.get("usage");
        let Some(Value::Array(choices)) = chunk.get("choices") else {
            return Err(String::from("choices must be an array"));
        };
        match choices.as_slice() {
            [] => self.usage_chunk(usage),
            [choice] => {
                match (self.include_usage, usage) {
                    (true, Some(Value::Null)) | (false, None | Some(Value::Null)) => {}
                    (true, _) => {
                        return Err(String::from(
                            "with include_usage every choice chunk has \"usage\": null",
                        ));
                    }
                    (false, Some(_)) => {
                        return Err(String::from("usage without include_usage"));
                    }
                }
                self.choice(choice)
            }
            _ => Err(String::from("at most one choice (n = 1)")),
        }
    }

    fn usage_chunk(&mut self, usage: Option<&Value>) -> Result<(), String> {
        if !self.include_usage {
            return Err(String::from(
                "a chunk without choices (the usage chunk) needs include_usage",
            ));
        }
        if !self.finished || self.usage_seen {
            return Err(String::from(
                "the usage chunk comes once, after the finish_reason",
            ));
        }
        let field = |name: &str| usage.and_then(|u| u.get(name)).and_then(Value::as_u64);
        match (
            field("prompt_tokens"),
            field("completion_tokens"),
            field("total_tokens"),
        ) {
            (Some(p), Some(c), Some(t)) if p.checked_add(c) == Some(t) => {}
            _ => {
                return Err(String::from(
                    "usage needs prompt_tokens, completion_tokens and total_tokens = their sum",
                ));
            }
        }
        self.usage_seen = true;
        Ok(())
    }

    fn choice(&mut self, choice: &Value) -> Result<(), String> {
        if self.finished {
            return Err(String::from("no choice chunk may follow the finish_reason"));
        }
        if choice.get("index").and_then(Value::as_u64) != Some(0) {
            return Err(String::from("the choice's index must be 0"));
        }
        let Some(Value::Object(delta)) = choice.get("delta") else {
            return Err(String::from("a choice needs a delta object"));
        };
        match (self.role_seen, delta.get("role")) {
            (false, Some(Value::String(r))) if r == "assistant" => self.role_seen = true,
            (false, _) => {
                return Err(String::from(
                    "the first chunk's delta must have role \"assistant\"",
                ));
            }
            (true, None) => {}
            (true, Some(_)) => return Err(String::from("only the first chunk has a role")),
        }
        for field in ["content", "reasoning_content"] {
            if delta
                .get(field)
                .is_some_and(|v| !v.is_string() && !v.is_null())
            {
                return Err(format!("delta.{field} must be a string"));
            }
        }
        match delta.get("tool_calls") {
            None | Some(Value::Null) => {}
            Some(Value::Array(calls)) => {
                for call in calls {
                    self.tool_call(call)?;
                }
            }
            Some(_) => return Err(String::from("delta.tool_calls must be an array")),
        }
        match choice.get("finish_reason") {
            None | Some(Value::Null) => {}
            Some(Value::String(reason))
                if matches!(
                    reason.as_str(),
                    "stop" | "length" | "tool_calls" | "content_filter"
                ) =>
            {
                self.finished = true;
            }
            Some(other) => return Err(format!("unknown finish_reason {other}")),
        }
        Ok(())
    }

    fn tool_call(&mut self, call: &Value) -> Result<(), String> {
        let Some(index) = call
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
        else {
            return Err(String::from("a tool call fragment needs an integer index"));
        };
        let function = call.get("function");
        let arguments = match function.and_then(|f| f.get("arguments")) {
            None => "",
            Some(Value::String(a)) => a,
            Some(_) => return Err(String::from("function.arguments must be a string")),
        };
        let name = function.and_then(|f| f.get("name"));
        if index == self.tool_args.len() {
            let id_ok = call
                .get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| !id.is_empty());
            let name_ok = name.and_then(Value::as_str).is_some_and(|n| !n.is_empty());
            let type_ok = call.get("type").and_then(Value::as_str) == Some("function");
            if !(id_ok && name_ok && type_ok) {
                return Err(format!(
                    "tool call {index}'s first fragment needs id, type \"function\" and function.name"
                ));
            }
            self.tool_args.push(arguments.to_owned());
        } else if let Some(args) = self.tool_args.get_mut(index) {
            if call.get("id").is_some() || call.get("type").is_some() || name.is_some() {
                return Err(format!(
                    "tool call {index}: later fragments carry only index and function.arguments"
                ));
            }
            args.push_str(arguments);
        } else {
            return Err(format!(
                "tool call index {index} skips {} (indices count up from 0)",
                self.tool_args.len()
            ));
        }
        Ok(())
    }
}

/// Decode SSE bytes and validate the whole stream; the chunks' data as JSON (`[DONE]` left out).
///
/// # Errors
/// The first violation.
pub fn check_chat_sse(bytes: &[u8], include_usage: bool) -> Result<Vec<Value>, Violation> {
    let mut decoder = SseDecoder::new();
    let mut frames = decoder.feed(bytes);
    frames.extend(decoder.finish());
    let mut validator = ChatValidator::new(include_usage);
    let mut chunks = Vec::with_capacity(frames.len());
    for (position, frame) in frames.iter().enumerate() {
        if frame.event.is_some() {
            return Err(Violation {
                position,
                event: frame.event.clone().unwrap_or_default(),
                rule: String::from("Chat Completions frames carry no event: name"),
            });
        }
        validator.push(&frame.data)?;
        if frame.data != "[DONE]" {
            chunks.push(serde_json::from_str(&frame.data).unwrap_or(Value::Null));
        }
    }
    validator.finish()?;
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame(v: &Value) -> String {
        format!("data: {v}\n\n")
    }

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        frame(
            &json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    }

    fn role() -> String {
        chunk(json!({"role": "assistant"}), None)
    }

    fn rule(stream: &str, include_usage: bool) -> String {
        check_chat_sse(stream.as_bytes(), include_usage)
            .unwrap_err()
            .rule
    }

    #[test]
    fn each_rule_catches_its_break() {
        let finish = chunk(json!({}), Some("stop"));
        let done = "data: [DONE]\n\n";
        let ok = format!("{}{finish}{done}", role());
        assert!(check_chat_sse(ok.as_bytes(), false).is_ok());

        assert!(rule(&format!("{finish}{done}"), false).contains("role"));
        assert!(
            rule(&format!("{}{}{finish}{done}", role(), role()), false).contains("only the first")
        );
        assert!(
            rule(&format!("{}{finish}{finish}{done}", role()), false).contains("follow the finish")
        );
        assert!(rule(&format!("{}{finish}", role()), false).contains("ended without"));
        assert!(rule(&format!("{ok}{done}"), false).contains("nothing may follow"));
        assert!(rule(&format!("{}{done}", role()), false).contains("before a finish_reason"));
        assert!(
            rule(
                &format!("{}{}{done}", role(), chunk(json!({}), Some("done"))),
                false
            )
            .contains("unknown finish_reason")
        );
        assert!(rule(&format!("event: x\n{ok}"), false).contains("no event: name"));
        let other_id = frame(
            &json!({"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 1,
            "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        );
        assert!(
            rule(&format!("{}{other_id}{done}", role()), false).contains("same on every chunk")
        );
    }

    #[test]
    fn tool_call_fragments() {
        let start = |i: u64, id: Option<&str>| {
            let mut call =
                json!({"index": i, "type": "function", "function": {"name": "f", "arguments": ""}});
            if let Some(id) = id {
                call["id"] = json!(id);
            }
            chunk(json!({"tool_calls": [call]}), None)
        };
        let args = |i: u64, a: &str| {
            chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": a}}]}),
                None,
            )
        };
        let end = format!("{}data: [DONE]\n\n", chunk(json!({}), Some("tool_calls")));
        let ok = format!(
            "{}{}{}{}{end}",
            role(),
            start(0, Some("a")),
            args(0, "{\"x\":"),
            args(0, "1}")
        );
        assert!(check_chat_sse(ok.as_bytes(), false).is_ok());
        assert!(
            rule(&format!("{}{}{end}", role(), start(0, None)), false).contains("first fragment")
        );
        assert!(
            rule(&format!("{}{}{end}", role(), start(1, Some("a"))), false).contains("skips 0")
        );
        assert!(
            rule(
                &format!(
                    "{}{}{}{end}",
                    role(),
                    start(0, Some("a")),
                    start(0, Some("b"))
                ),
                false
            )
            .contains("later fragments")
        );
        assert!(
            rule(
                &format!(
                    "{}{}{}{end}",
                    role(),
                    start(0, Some("a")),
                    args(0, "{\"x\"")
                ),
                false
            )
            .contains("not a JSON object")
        );
    }

    #[test]
    fn usage_rules() {
        let head = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"});
        let with = |mut v: Value, extra: Value| {
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            frame(&v)
        };
        let role_u = with(
            head.clone(),
            json!({"usage": null, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]}),
        );
        let finish_u = with(
            head.clone(),
            json!({"usage": null, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        );
        let usage = |t: u64| {
            with(
                head.clone(),
                json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": t}}),
            )
        };
        let done = "data: [DONE]\n\n";
        assert!(
            check_chat_sse(
                format!("{role_u}{finish_u}{}{done}", usage(3)).as_bytes(),
                true
            )
            .is_ok()
        );
        assert!(
            rule(&format!("{role_u}{finish_u}{done}"), true).contains("without the usage chunk")
        );
        assert!(rule(&format!("{role_u}{finish_u}{}{done}", usage(4)), true).contains("their sum"));
        assert!(
            rule(&format!("{role_u}{}{finish_u}{done}", usage(3)), true)
                .contains("after the finish")
        );
        assert!(rule(&format!("{}{done}", role()), true).contains("\"usage\": null"));
        assert!(
            rule(&format!("{role_u}{finish_u}{}{done}", usage(3)), false)
                .contains("needs include_usage")
        );
        let non_null = with(
            head.clone(),
            json!({"usage": {"prompt_tokens": 1}, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]}),
        );
        assert!(rule(&format!("{non_null}{done}"), false).contains("usage without include_usage"));
    }

    #[test]
    fn an_error_chunk_ends_the_stream_anywhere() {
        let error = frame(
            &json!({"error": {"message": "boom", "type": "server_error", "param": null, "code": null}}),
        );
        assert!(check_chat_sse(error.as_bytes(), true).is_ok());
        assert!(rule(&format!("{error}data: [DONE]\n\n"), true).contains("nothing may follow"));
        assert!(rule(&frame(&json!({"error": {"message": 1}})), false).contains("error.message"));
    }
}
