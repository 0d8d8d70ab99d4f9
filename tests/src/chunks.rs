//! Builders for OpenAI Chat Completions stream chunks (protocols.md §3.3) and ready-made scripts.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::upstream::{Gate, ScriptedResponse, StreamEnd, StreamResponse};

/// Default pause between stream writes: small, but enough that every chunk is its own TCP write.
pub const DEFAULT_DELAY: Duration = Duration::from_millis(5);

/// A Chat Completions stream under construction. Each method appends one chunk.
#[derive(Debug, Clone)]
pub struct ChatStream {
    id: String,
    model: String,
    chunks: Vec<Value>,
    done: bool,
    end: StreamEnd,
    delay: Duration,
    pauses: Vec<(usize, Duration)>,
    holds: Vec<(usize, Gate)>,
    split: Option<usize>,
    trailing_garbage: Vec<Bytes>,
}

impl Default for ChatStream {
    fn default() -> Self {
        Self::new()
    }
}

impl ChatStream {
    /// An empty stream with id `chatcmpl-test`, model `test-model`, ending with `data: [DONE]`.
    pub fn new() -> Self {
        Self {
            id: "chatcmpl-test".into(),
            model: "test-model".into(),
            chunks: Vec::new(),
            done: true,
            end: StreamEnd::Clean,
            delay: DEFAULT_DELAY,
            pauses: Vec::new(),
            holds: Vec::new(),
            split: None,
            trailing_garbage: Vec::new(),
        }
    }

    fn envelope(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": self.model,
            "system_fingerprint": null,
            "choices": choices,
        })
    }

    /// Append a chunk with this `delta` and `finish_reason`.
    #[must_use]
    pub fn delta(mut self, delta: Value, finish_reason: Option<&str>) -> Self {
        let choice =
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]);
        let chunk = self.envelope(choice);
        self.chunks.push(chunk);
        self
    }

    /// The opening role chunk `{"role":"assistant","content":""}`.
    #[must_use]
    pub fn role(self) -> Self {
        self.delta(
            json!({"role": "assistant", "content": "", "refusal": null}),
            None,
        )
    }

    /// A text delta.
    #[must_use]
    pub fn text(self, text: &str) -> Self {
        self.delta(json!({"content": text}), None)
    }

    /// Several text deltas.
    #[must_use]
    pub fn texts(self, parts: &[&str]) -> Self {
        parts.iter().fold(self, |s, p| s.text(p))
    }

    /// A `reasoning_content` delta (DeepSeek / vLLM style).
    #[must_use]
    pub fn reasoning(self, text: &str) -> Self {
        self.delta(json!({"content": null, "reasoning_content": text}), None)
    }

    /// A reasoning delta under another field name (e.g. `reasoning`, OpenRouter / newer vLLM).
    #[must_use]
    pub fn reasoning_field(self, field: &str, text: &str) -> Self {
        let mut d = Map::new();
        d.insert(field.into(), Value::String(text.into()));
        self.delta(Value::Object(d), None)
    }

    /// The first chunk of a tool call: index, id, name and empty arguments.
    #[must_use]
    pub fn tool_start(self, index: u32, id: &str, name: &str) -> Self {
        self.delta(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            None,
        )
    }

    /// An arguments fragment of the tool call at `index`.
    #[must_use]
    pub fn tool_args(self, index: u32, fragment: &str) -> Self {
        self.delta(
            json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
            None,
        )
    }

    /// The closing chunk with this finish reason (`stop`, `tool_calls`, `length`, …).
    #[must_use]
    pub fn finish(self, reason: &str) -> Self {
        self.delta(json!({}), Some(reason))
    }

    /// The usage chunk (`choices: []`) sent after the finish chunk when `include_usage` is on.
    #[must_use]
    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64, cached_tokens: u64) -> Self {
        let mut chunk = self.envelope(json!([]));
        if let Some(obj) = chunk.as_object_mut() {
            obj.insert(
                "usage".into(),
                json!({
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                    "prompt_tokens_details": {"cached_tokens": cached_tokens},
                }),
            );
        }
        self.chunks.push(chunk);
        self
    }

    /// Append any JSON value as a `data:` line (e.g. a mid-stream `{"error":…}`).
    #[must_use]
    pub fn raw(mut self, value: Value) -> Self {
        self.chunks.push(value);
        self
    }

    /// Append bytes as they are, after the chunks (garbage).
    #[must_use]
    pub fn raw_bytes(mut self, bytes: &[u8]) -> Self {
        self.trailing_garbage.push(Bytes::copy_from_slice(bytes));
        self
    }

    /// Pause between writes.
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Pause this long (on top of the delay) before the next chunk. Ignored with [`ChatStream::split_every`].
    #[must_use]
    pub fn pause(mut self, pause: Duration) -> Self {
        self.pauses.push((self.chunks.len(), pause));
        self
    }

    /// Wait before the next chunk until the test opens `gate`. Ignored with
    /// [`ChatStream::split_every`].
    #[must_use]
    pub fn hold_until(mut self, gate: &Gate) -> Self {
        self.holds.push((self.chunks.len(), gate.clone()));
        self
    }

    /// Leave out `data: [DONE]`.
    #[must_use]
    pub fn no_done(mut self) -> Self {
        self.done = false;
        self
    }

    /// Drop the connection after the chunks (no `[DONE]`, no chunked terminator).
    #[must_use]
    pub fn disconnect(mut self) -> Self {
        self.done = false;
        self.end = StreamEnd::Disconnect;
        self
    }

    /// Re-cut the SSE bytes into pieces of `n` bytes (splits lines, JSON and UTF-8 characters).
    #[must_use]
    pub fn split_every(mut self, n: usize) -> Self {
        self.split = Some(n.max(1));
        self
    }

    /// The SSE bytes, one piece per chunk (before any re-cutting).
    pub fn sse_parts(&self) -> Vec<Bytes> {
        let mut parts: Vec<Bytes> = self
            .chunks
            .iter()
            .map(|c| Bytes::from(format!("data: {c}\n\n")))
            .collect();
        parts.extend(self.trailing_garbage.iter().cloned());
        if self.done {
            parts.push(Bytes::from_static(b"data: [DONE]\n\n"));
        }
        parts
    }

    /// The scripted response.
    pub fn build(self) -> ScriptedResponse {
        let mut parts = self.sse_parts();
        let mut pauses = self.pauses;
        let mut holds = self.holds;
        if let Some(n) = self.split {
            let all: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
            parts = all.chunks(n).map(Bytes::copy_from_slice).collect();
            pauses.clear();
            holds.clear();
        }
        ScriptedResponse::Stream(StreamResponse {
            status: 200,
            parts,
            delay: self.delay,
            pauses,
            holds,
            end: self.end,
            headers: Vec::new(),
        })
    }
}

/// Cut `s` into `pieces` roughly equal fragments on char boundaries (for tool-call arguments).
pub fn split_fragments(s: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let size = chars.len().div_ceil(pieces.max(1)).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// Default usage of the ready-made streams.
pub const PROMPT_TOKENS: u64 = 120;
/// Default usage of the ready-made streams.
pub const COMPLETION_TOKENS: u64 = 17;
/// Default usage of the ready-made streams.
pub const CACHED_TOKENS: u64 = 20;

/// A text answer: role chunk, one delta per part, `stop`, usage, `[DONE]`.
pub fn text_stream(parts: &[&str]) -> ScriptedResponse {
    ChatStream::new()
        .role()
        .texts(parts)
        .finish("stop")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build()
}

/// One tool call whose arguments arrive in `fragments`, then `tool_calls`, usage, `[DONE]`.
pub fn tool_call_stream(id: &str, name: &str, fragments: &[&str]) -> ScriptedResponse {
    tool_call_builder(ChatStream::new().role(), &[(id, name, fragments)])
        .finish("tool_calls")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build()
}

/// Parallel tool calls with INTERLEAVED fragments: start of call 0, start of call 1, a fragment of 0,
/// a fragment of 1, … (the way OpenAI and vLLM send them).
pub fn parallel_tool_calls_stream(calls: &[(&str, &str, &[&str])]) -> ScriptedResponse {
    tool_call_builder(ChatStream::new().role(), calls)
        .finish("tool_calls")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build()
}

/// Append tool calls to `s`: starts of all calls first, then their fragments round-robin.
pub fn tool_call_builder(mut s: ChatStream, calls: &[(&str, &str, &[&str])]) -> ChatStream {
    let mut fragments: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for (i, (id, name, frags)) in calls.iter().enumerate() {
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        s = s.tool_start(index, id, name);
        fragments.insert(i, frags.to_vec());
    }
    let longest = fragments.values().map(Vec::len).max().unwrap_or(0);
    for step in 0..longest {
        for (i, frags) in &fragments {
            if let Some(f) = frags.get(step) {
                s = s.tool_args(u32::try_from(*i).unwrap_or(u32::MAX), f);
            }
        }
    }
    s
}

/// Reasoning (`reasoning_content` deltas), then a text answer.
pub fn reasoning_text_stream(reasoning: &[&str], text: &[&str]) -> ScriptedResponse {
    reasoning
        .iter()
        .fold(ChatStream::new().role(), |s, r| s.reasoning(r))
        .texts(text)
        .finish("stop")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build()
}

/// Reasoning (`reasoning_content` deltas), then one tool call.
pub fn reasoning_tool_stream(
    reasoning: &[&str],
    id: &str,
    name: &str,
    fragments: &[&str],
) -> ScriptedResponse {
    let s = reasoning
        .iter()
        .fold(ChatStream::new().role(), |s, r| s.reasoning(r));
    tool_call_builder(s, &[(id, name, fragments)])
        .finish("tool_calls")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build()
}

/// What a stream folds to for a non-streaming request.
#[derive(Debug, Clone, PartialEq)]
pub enum Folded {
    /// A complete `chat.completion`.
    Complete(Value),
    /// The stream carried a `{"error":…}` chunk: this error body.
    Error(Value),
    /// The stream ended without `finish_reason` and without `[DONE]`: what was there so far.
    Truncated(Value),
}

/// Fold SSE parts into what a non-streaming answer to the same script would be.
pub fn fold(parts: &[Bytes]) -> Folded {
    let all: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
    let text = String::from_utf8_lossy(&all);
    let mut saw_done = false;
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        if data.trim() == "[DONE]" {
            saw_done = true;
        }
        if let Ok(v) = serde_json::from_str::<Value>(data.trim())
            && v.get("error").is_some()
        {
            return Folded::Error(json!({"error": v["error"]}));
        }
    }
    let completion = fold_stream(parts);
    if !saw_done
        && completion
            .pointer("/choices/0/finish_reason")
            .is_none_or(Value::is_null)
    {
        Folded::Truncated(completion)
    } else {
        Folded::Complete(completion)
    }
}

/// Fold SSE parts (as [`ChatStream::sse_parts`] makes them) into one non-streaming `chat.completion`.
pub fn fold_stream(parts: &[Bytes]) -> Value {
    let all: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
    let text = String::from_utf8_lossy(&all);
    let mut content = String::new();
    let mut reasoning = String::new();
    let mut finish: Option<String> = None;
    let mut usage = Value::Null;
    let mut id = "chatcmpl-test".to_owned();
    let mut model = "test-model".to_owned();
    let mut calls: BTreeMap<u64, (String, String, String)> = BTreeMap::new();
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let Ok(chunk) = serde_json::from_str::<Value>(data.trim()) else {
            continue;
        };
        if let Some(v) = chunk.get("id").and_then(Value::as_str) {
            v.clone_into(&mut id);
        }
        if let Some(v) = chunk.get("model").and_then(Value::as_str) {
            v.clone_into(&mut model);
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            usage = u.clone();
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            continue;
        };
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            finish = Some(f.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            continue;
        };
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            content.push_str(t);
        }
        for field in ["reasoning_content", "reasoning"] {
            if let Some(t) = delta.get(field).and_then(Value::as_str) {
                reasoning.push_str(t);
            }
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let entry = calls.entry(index).or_default();
            if let Some(v) = call.get("id").and_then(Value::as_str) {
                v.clone_into(&mut entry.0);
            }
            if let Some(v) = call.pointer("/function/name").and_then(Value::as_str) {
                v.clone_into(&mut entry.1);
            }
            if let Some(v) = call.pointer("/function/arguments").and_then(Value::as_str) {
                entry.2.push_str(v);
            }
        }
    }
    let mut message = json!({
        "role": "assistant",
        "content": if content.is_empty() { Value::Null } else { Value::String(content) },
        "refusal": null,
    });
    if let Some(obj) = message.as_object_mut() {
        if !reasoning.is_empty() {
            obj.insert("reasoning_content".into(), Value::String(reasoning));
        }
        if !calls.is_empty() {
            let list: Vec<Value> = calls
                .into_values()
                .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                .collect();
            obj.insert("tool_calls".into(), Value::Array(list));
        }
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": usage,
    })
}
