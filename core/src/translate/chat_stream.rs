//! OpenAI Chat Completions stream → Anthropic events: a sans-IO state machine.
//!
//! Bytes go in through [`ChatStreamTranslator::feed`] (any chunking: the SSE decoder keeps
//! partial lines), events come out. Every output satisfies [`crate::anthropic::stream::Validator`].
//!
//! ```text
//!   Idle ──feed──► Streaming ──finish_reason──► Finishing ──[DONE] or finish()──► Done
//!                     │  upstream {"error":…} / fail()  ─────────────────────────► Done (error event)
//!                     └─ finish() without finish_reason ─────────────────────────► Done (error event)
//! ```
//!
//! Blocks: at most one Anthropic block is open. Reasoning opens a thinking block, text a text
//! block, a tool call a tool_use block; opening one closes the previous. Tool calls are keyed by
//! the upstream `index`, and a new `id` on a used index is a new call (Ollama). Fragments of a
//! call that is not the open block are buffered and emitted as one consecutive block when the
//! open call is complete, so interleaved parallel calls become consecutive blocks. An open tool
//! call whose arguments are not yet complete JSON is never cut: text arriving meanwhile waits.
//!
//! ```
//! use bridge_core::translate::chat_stream::ChatStreamTranslator;
//! use bridge_core::anthropic::stream::Validator;
//! let mut t = ChatStreamTranslator::new("claude-x".into(), 12, 1);
//! let mut events = t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"Bash\",\"arguments\":\"{\\\"comm\"}}]}}]}\n\n");
//! events.extend(t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"and\\\":\\\"ls\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"));
//! let mut v = Validator::new();
//! for e in &events { v.push(e).unwrap(); }
//! v.finish().unwrap();
//! ```

use serde_json::Value;

use crate::anthropic::events::{
    ApiError, BlockStart, Delta, ErrorKind, MessageDeltaBody, MessageShell, StopReason,
    StreamEvent, Usage,
};
use crate::ids::IdSource;
use crate::openai::chat::{ChatChunk, ChatUsage, ChunkChoice, ToolCallDelta};
use crate::sse::decoder::{SseDecoder, SseFrame};
use crate::tokens::estimate_text;

/// Raw bytes kept while the body does not look like SSE (to read a plain JSON answer or error).
const MAX_RAW_BODY: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Streaming,
    /// `finish_reason` seen: blocks are closed, waiting for usage and `[DONE]`.
    Finishing,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    Tool(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallState {
    /// Known but not yet emitted; arguments are buffered.
    Pending,
    /// Its block is open; arguments stream through.
    Open,
    /// Its block is closed.
    Closed,
}

#[derive(Debug)]
struct Call {
    upstream_index: u32,
    upstream_id: Option<String>,
    id: String,
    name: String,
    args: String,
    state: CallState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SegmentKind {
    Text,
    Thinking,
}

/// The translator for one upstream response.
#[derive(Debug)]
pub struct ChatStreamTranslator {
    decoder: SseDecoder,
    ids: IdSource,
    model: String,
    input_estimate: u32,
    phase: Phase,
    next_index: u32,
    open: Option<Open>,
    calls: Vec<Call>,
    deferred: Vec<(SegmentKind, String)>,
    finish_reason: Option<String>,
    usage: Option<ChatUsage>,
    output_chars: usize,
    frames_seen: usize,
    unreadable: usize,
    raw: Vec<u8>,
}

impl ChatStreamTranslator {
    /// A translator reporting `model` to the client, with an input-token estimate for
    /// `message_start` and a seed for invented ids.
    #[must_use]
    pub fn new(model: String, input_estimate: u32, id_seed: u64) -> Self {
        Self {
            decoder: SseDecoder::new(),
            ids: IdSource::new(id_seed),
            model,
            input_estimate: input_estimate.max(1),
            phase: Phase::Idle,
            next_index: 0,
            open: None,
            calls: Vec::new(),
            deferred: Vec::new(),
            finish_reason: None,
            usage: None,
            output_chars: 0,
            frames_seen: 0,
            unreadable: 0,
            raw: Vec::new(),
        }
    }

    /// Feed upstream bytes; returns the events they complete. The first call always returns
    /// `message_start`, even for empty input, so a host can send it before the model speaks.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        if self.phase == Phase::Done {
            return out;
        }
        self.start(&mut out);
        if self.frames_seen == 0 && self.raw.len() < MAX_RAW_BODY {
            self.raw.extend_from_slice(chunk);
        }
        for frame in self.decoder.feed(chunk) {
            self.frame(&frame, &mut out);
            if self.phase == Phase::Done {
                break;
            }
        }
        out
    }

    /// The upstream failed: end with an `error` event.
    pub fn fail(&mut self, error: ApiError) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        if self.phase != Phase::Done {
            self.phase = Phase::Done;
            out.push(StreamEvent::Error { error });
        }
        out
    }

    /// The upstream body ended: complete the message, or end with an error if it was cut short.
    pub fn finish(&mut self) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        if self.phase == Phase::Done {
            return out;
        }
        self.start(&mut out);
        for frame in self.decoder.finish() {
            self.frame(&frame, &mut out);
            if self.phase == Phase::Done {
                return out;
            }
        }
        if self.frames_seen == 0 && !self.raw.is_empty() {
            let raw = std::mem::take(&mut self.raw);
            self.plain_body(&raw, &mut out);
            if self.phase == Phase::Done {
                return out;
            }
        }
        if self.phase == Phase::Streaming {
            let message = if self.unreadable > 0 && !self.produced_anything() {
                format!(
                    "the upstream's response was not an OpenAI Chat Completions stream ({} unreadable events)",
                    self.unreadable
                )
            } else if self.frames_seen == 0 {
                String::from("the upstream closed the connection without sending a response")
            } else {
                String::from(
                    "the upstream stream ended before the model finished (no finish_reason)",
                )
            };
            out.extend(self.fail(ApiError::new(ErrorKind::Api, message)));
            return out;
        }
        self.complete(&mut out);
        out
    }

    fn produced_anything(&self) -> bool {
        self.next_index > 0 || self.open.is_some() || !self.calls.is_empty()
    }

    fn start(&mut self, out: &mut Vec<StreamEvent>) {
        if self.phase != Phase::Idle {
            return;
        }
        self.phase = Phase::Streaming;
        out.push(StreamEvent::MessageStart {
            message: MessageShell::new(
                self.ids.next_id("msg_"),
                self.model.clone(),
                self.input_estimate,
            ),
        });
    }

    fn frame(&mut self, frame: &SseFrame, out: &mut Vec<StreamEvent>) {
        self.frames_seen += 1;
        let data = frame.data.trim();
        if data.is_empty() {
            return;
        }
        if data == "[DONE]" {
            self.done(out);
            return;
        }
        match serde_json::from_str::<ChatChunk>(data) {
            Ok(chunk) => self.chunk(chunk, out),
            Err(_) => {
                // An `event: error` frame with a non-chunk body is still an error.
                if frame.event.as_deref() == Some("error") {
                    out.extend(self.fail(upstream_error(&Value::String(data.to_owned()))));
                } else {
                    self.unreadable += 1;
                }
            }
        }
    }

    /// A body that is not SSE: a plain Chat Completions JSON answer or an error object.
    fn plain_body(&mut self, raw: &[u8], out: &mut Vec<StreamEvent>) {
        match serde_json::from_slice::<ChatChunk>(raw) {
            Ok(chunk) if chunk.error.is_some() || !chunk.choices.is_empty() => {
                self.chunk(chunk, out);
                if self.phase != Phase::Done {
                    self.done(out);
                }
            }
            _ => {
                let shown: String = String::from_utf8_lossy(raw).chars().take(200).collect();
                out.extend(self.fail(ApiError::new(
                    ErrorKind::Api,
                    format!("the upstream's response was not an OpenAI Chat Completions stream: {shown:?}"),
                )));
            }
        }
    }

    fn chunk(&mut self, chunk: ChatChunk, out: &mut Vec<StreamEvent>) {
        if let Some(error) = &chunk.error {
            out.extend(self.fail(upstream_error(error)));
            return;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        for choice in chunk.choices {
            if choice.index == 0 {
                self.choice(choice, out);
            }
        }
    }

    fn choice(&mut self, choice: ChunkChoice, out: &mut Vec<StreamEvent>) {
        let delta = choice.delta;
        let reasoning = delta
            .reasoning_content
            .filter(|r| !r.is_empty())
            .or(delta.reasoning);
        if self.phase == Phase::Streaming {
            if let Some(reasoning) = reasoning.filter(|r| !r.is_empty()) {
                self.segment(SegmentKind::Thinking, reasoning, out);
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                self.segment(SegmentKind::Text, text, out);
            }
            if let Some(refusal) = delta.refusal.filter(|t| !t.is_empty()) {
                self.segment(SegmentKind::Text, refusal, out);
            }
            for (position, fragment) in delta.tool_calls.into_iter().flatten().enumerate() {
                self.tool_fragment(position, fragment, out);
            }
        }
        if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
            if self.phase == Phase::Streaming {
                self.close_everything(out);
                self.phase = Phase::Finishing;
            }
            self.finish_reason = Some(reason);
        }
    }

    /// Text or reasoning: appended to the open block of its kind, or a new block.
    fn segment(&mut self, kind: SegmentKind, text: String, out: &mut Vec<StreamEvent>) {
        let wanted = match kind {
            SegmentKind::Text => Open::Text,
            SegmentKind::Thinking => Open::Thinking,
        };
        if self.open != Some(wanted) {
            if self.open_tool_incomplete() {
                match self.deferred.last_mut() {
                    Some((k, buffered)) if *k == kind => buffered.push_str(&text),
                    _ => self.deferred.push((kind, text)),
                }
                return;
            }
            self.close_open(out);
            self.open_block(wanted, out);
        }
        self.output_chars += text.len();
        let delta = match kind {
            SegmentKind::Text => Delta::TextDelta { text },
            SegmentKind::Thinking => Delta::ThinkingDelta { thinking: text },
        };
        out.push(StreamEvent::ContentBlockDelta {
            index: self.next_index,
            delta,
        });
    }

    /// An open call may still receive fragments until its arguments are a complete JSON value
    /// (empty arguments are not complete: the first fragment may simply not have come yet).
    fn open_tool_incomplete(&self) -> bool {
        match self.open {
            Some(Open::Tool(c)) => self
                .calls
                .get(c)
                .is_some_and(|call| call.args.trim().is_empty() || !is_complete_json(&call.args)),
            _ => false,
        }
    }

    fn tool_fragment(
        &mut self,
        position: usize,
        fragment: ToolCallDelta,
        out: &mut Vec<StreamEvent>,
    ) {
        let upstream_index = fragment
            .index
            .unwrap_or_else(|| u32::try_from(position).unwrap_or(u32::MAX));
        let upstream_id = match &fragment.id {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let existing = self
            .calls
            .iter()
            .rposition(|c| c.upstream_index == upstream_index)
            .filter(|&c| match (&upstream_id, &self.calls[c].upstream_id) {
                (Some(new), Some(old)) => new == old,
                _ => true,
            });
        let function = fragment.function.unwrap_or_default();
        let call = match existing {
            Some(c) => c,
            None => {
                let id = upstream_id
                    .clone()
                    .unwrap_or_else(|| self.ids.next_id("toolu_"));
                self.calls.push(Call {
                    upstream_index,
                    upstream_id,
                    id,
                    name: String::new(),
                    args: String::new(),
                    state: CallState::Pending,
                });
                self.calls.len() - 1
            }
        };
        let args = match function.arguments {
            Some(Value::String(s)) => s,
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let entry = &mut self.calls[call];
        if let Some(name) = function.name.filter(|n| !n.is_empty())
            && entry.state == CallState::Pending
        {
            if entry.name.is_empty() || name.starts_with(entry.name.as_str()) {
                entry.name = name;
            } else if name != entry.name {
                entry.name.push_str(&name);
            }
        }
        match entry.state {
            CallState::Open => {
                if !args.is_empty() {
                    entry.args.push_str(&args);
                    self.output_chars += args.len();
                    out.push(StreamEvent::ContentBlockDelta {
                        index: self.next_index,
                        delta: Delta::InputJsonDelta { partial_json: args },
                    });
                }
            }
            CallState::Pending => {
                entry.args.push_str(&args);
                self.advance_calls(out);
            }
            // A complete call cannot be extended; trailing whitespace is all that can arrive.
            CallState::Closed => {}
        }
    }

    /// Open pending calls in order of appearance while the block slot can be taken.
    fn advance_calls(&mut self, out: &mut Vec<StreamEvent>) {
        while let Some(next) = self
            .calls
            .iter()
            .position(|c| c.state == CallState::Pending && !c.name.is_empty())
        {
            if self.open_tool_incomplete() {
                return;
            }
            self.close_open(out);
            self.open_block(Open::Tool(next), out);
        }
    }

    fn open_block(&mut self, which: Open, out: &mut Vec<StreamEvent>) {
        let content_block = match which {
            Open::Text => BlockStart::Text {
                text: String::new(),
            },
            Open::Thinking => BlockStart::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
            Open::Tool(c) => {
                let call = &mut self.calls[c];
                call.state = CallState::Open;
                BlockStart::ToolUse {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: Value::Object(serde_json::Map::new()),
                }
            }
        };
        out.push(StreamEvent::ContentBlockStart {
            index: self.next_index,
            content_block,
        });
        self.open = Some(which);
        if let Open::Tool(c) = which {
            let args = self.calls[c].args.clone();
            if !args.is_empty() {
                self.output_chars += args.len();
                out.push(StreamEvent::ContentBlockDelta {
                    index: self.next_index,
                    delta: Delta::InputJsonDelta { partial_json: args },
                });
            }
        }
    }

    fn close_open(&mut self, out: &mut Vec<StreamEvent>) {
        let Some(open) = self.open.take() else { return };
        match open {
            Open::Thinking => out.push(StreamEvent::ContentBlockDelta {
                index: self.next_index,
                delta: Delta::SignatureDelta {
                    signature: self.ids.next_id("bridge-sig-"),
                },
            }),
            Open::Tool(c) => {
                let call = &mut self.calls[c];
                call.state = CallState::Closed;
                if let Some(suffix) = json_repair_suffix(&call.args) {
                    call.args.push_str(&suffix);
                    out.push(StreamEvent::ContentBlockDelta {
                        index: self.next_index,
                        delta: Delta::InputJsonDelta {
                            partial_json: suffix,
                        },
                    });
                }
            }
            Open::Text => {}
        }
        out.push(StreamEvent::ContentBlockStop {
            index: self.next_index,
        });
        self.next_index += 1;
    }

    /// Close the open block, emit every buffered call and deferred text, in order.
    fn close_everything(&mut self, out: &mut Vec<StreamEvent>) {
        loop {
            self.close_open(out);
            if let Some(next) = self
                .calls
                .iter()
                .position(|c| c.state == CallState::Pending)
            {
                if self.calls[next].name.is_empty() {
                    // A call without a name cannot be a tool_use block: keep its text.
                    let call = &mut self.calls[next];
                    call.state = CallState::Closed;
                    let text = format!("[tool call without a name; arguments: {}]", call.args);
                    self.deferred.push((SegmentKind::Text, text));
                    continue;
                }
                self.open_block(Open::Tool(next), out);
                continue;
            }
            break;
        }
        for (kind, text) in std::mem::take(&mut self.deferred) {
            let which = match kind {
                SegmentKind::Text => Open::Text,
                SegmentKind::Thinking => Open::Thinking,
            };
            self.open_block(which, out);
            self.output_chars += text.len();
            let delta = match kind {
                SegmentKind::Text => Delta::TextDelta { text },
                SegmentKind::Thinking => Delta::ThinkingDelta { thinking: text },
            };
            out.push(StreamEvent::ContentBlockDelta {
                index: self.next_index,
                delta,
            });
            self.close_open(out);
        }
    }

    /// `[DONE]`: the upstream is finished.
    fn done(&mut self, out: &mut Vec<StreamEvent>) {
        match self.phase {
            Phase::Streaming
                if self.finish_reason.is_none()
                    && !self.produced_anything()
                    && self.unreadable > 0 =>
            {
                out.extend(self.fail(ApiError::new(
                    ErrorKind::Api,
                    "the upstream's response was not an OpenAI Chat Completions stream",
                )));
            }
            Phase::Streaming | Phase::Finishing => self.complete(out),
            Phase::Idle | Phase::Done => {}
        }
    }

    fn complete(&mut self, out: &mut Vec<StreamEvent>) {
        self.close_everything(out);
        let any_tool = self.calls.iter().any(|c| !c.name.is_empty());
        let stop_reason = if any_tool {
            StopReason::ToolUse
        } else {
            match self.finish_reason.as_deref() {
                Some("length") => StopReason::MaxTokens,
                Some("content_filter") => StopReason::Refusal,
                _ => StopReason::EndTurn,
            }
        };
        let usage = match &self.usage {
            Some(u) => {
                let prompt = u.prompt_tokens.unwrap_or(0);
                let details = u.prompt_tokens_details.as_ref();
                let cached = details.and_then(|d| d.cached_tokens).unwrap_or(0);
                let written = details.and_then(|d| d.cache_write_tokens);
                let input = prompt
                    .saturating_sub(cached)
                    .saturating_sub(written.unwrap_or(0));
                Usage {
                    input_tokens: if prompt == 0 {
                        self.input_estimate
                    } else {
                        to_u32(input)
                    },
                    cache_creation_input_tokens: written.map(to_u32),
                    cache_read_input_tokens: details.and_then(|d| d.cached_tokens).map(to_u32),
                    output_tokens: u
                        .completion_tokens
                        .map_or_else(|| estimate_text(self.output_chars), to_u32),
                }
            }
            None => Usage {
                input_tokens: self.input_estimate,
                cache_creation_input_tokens: None,
                cache_read_input_tokens: None,
                output_tokens: estimate_text(self.output_chars),
            },
        };
        out.push(StreamEvent::MessageDelta {
            delta: MessageDeltaBody {
                stop_reason: Some(stop_reason),
                stop_sequence: None,
            },
            usage,
        });
        out.push(StreamEvent::MessageStop);
        self.phase = Phase::Done;
    }
}

fn to_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// An upstream error object (`{"message","type","code"}` or a string) as an Anthropic error.
fn upstream_error(error: &Value) -> ApiError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| error.as_str().map(str::to_owned))
        .unwrap_or_else(|| error.to_string());
    let kind_text = [error.get("type"), error.get("code")]
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v.as_str()
                .map(str::to_owned)
                .or_else(|| v.as_u64().map(|n| n.to_string()))
        })
        .collect::<Vec<_>>()
        .join(" ");
    let kind = if kind_text.contains("rate_limit") || kind_text.contains("429") {
        ErrorKind::RateLimit
    } else if kind_text.contains("overloaded")
        || kind_text.contains("503")
        || kind_text.contains("529")
    {
        ErrorKind::Overloaded
    } else if kind_text.contains("context_length") || kind_text.contains("invalid_request") {
        ErrorKind::InvalidRequest
    } else {
        ErrorKind::Api
    };
    ApiError::new(kind, format!("upstream error: {message}"))
}

/// Whether `args` is already a complete JSON value (or empty, which means `{}`).
fn is_complete_json(args: &str) -> bool {
    let trimmed = args.trim();
    trimmed.is_empty() || serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok()
}

/// What to append to a cut-off JSON text to make it parse (closing strings, arrays and
/// objects), or `None` when it already parses or cannot be mended that way.
fn json_repair_suffix(args: &str) -> Option<String> {
    if is_complete_json(args) {
        return None;
    }
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for ch in args.chars() {
        if in_string {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => in_string = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    let mut suffix = String::new();
    if escaped {
        suffix.push('\\');
    }
    if in_string {
        suffix.push('"');
    }
    suffix.extend(stack.iter().rev());
    let mut candidate = String::with_capacity(args.len() + suffix.len());
    candidate.push_str(args);
    candidate.push_str(&suffix);
    is_complete_json(&candidate).then_some(suffix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairs_cut_json() {
        assert_eq!(json_repair_suffix(r#"{"a":"b"#).as_deref(), Some("\"}"));
        assert_eq!(json_repair_suffix(r#"{"a":[1,2"#).as_deref(), Some("]}"));
        assert_eq!(json_repair_suffix(r#"{"a":1}"#), None);
        assert_eq!(json_repair_suffix(r#"{"a":"#), None);
    }

    #[test]
    fn upstream_error_kinds() {
        let e = upstream_error(
            &serde_json::json!({"message":"slow down","type":"rate_limit_exceeded"}),
        );
        assert_eq!(e.kind, ErrorKind::RateLimit);
        assert_eq!(e.message, "upstream error: slow down");
        assert_eq!(
            upstream_error(&serde_json::json!("boom")).kind,
            ErrorKind::Api
        );
    }
}
