//! Anthropic stream events → OpenAI Responses stream events (what the Codex CLI reads), and the
//! same folded into one `response` object for non-streaming clients ([`ResponsesFold`]: the
//! terminal event's `response`, so both modes share one code path).
//!
//! Every frame is `event: <type>\ndata: {"type":<type>,"sequence_number":N,…}\n\n`, `N`
//! counting from 0; there is no `[DONE]`. Each Anthropic content block becomes one output item
//! (`output_index` counts items from 0):
//!
//! | Anthropic block | Responses item and its events |
//! |---|---|
//! | text | `message`: `output_item.added`, `content_part.added` (`output_text`), `output_text.delta`*, `output_text.done`, `content_part.done`, `output_item.done` |
//! | thinking | `reasoning`: `output_item.added`, `reasoning_summary_part.added`, `reasoning_summary_text.delta`*, `.done`, `reasoning_summary_part.done`, `output_item.done` (with `encrypted_content` = the block's signature when the request's `include` asked for it) |
//! | tool_use | `function_call` (`call_id` = the tool_use id): `output_item.added`, `function_call_arguments.delta`*, `.done`, `output_item.done` |
//! | tool_use of a `custom` tool | `custom_tool_call`: `output_item.added`, `custom_tool_call_input.delta`, `.done`, `output_item.done`; the `input` is the raw text of the call's `{"input": …}` argument (sent as one delta when the block closes: partial JSON is not cut into text) |
//!
//! The stream opens with `response.created` and `response.in_progress` and ends with exactly one
//! of: `response.completed`; `response.incomplete` (`max_tokens` → `incomplete_details.reason:
//! "max_output_tokens"`, `refusal` → `"content_filter"`), both with the output and `usage`
//! (`input_tokens` including cached tokens, `input_tokens_details.cached_tokens`,
//! `output_tokens`, `total_tokens`); `response.failed` with `error: {code, message}` for an
//! Anthropic `error` event or a stream cut before its stop reason; or a lone `error` event when
//! the failure comes before anything was written.
//!
//! Item ids are `msg_`, `rs_`, `fc_` and `ctc_` + the response id's suffix + `_` + the output
//! index: deterministic, from the id passed in.
//!
//! ```
//! use bridge_core::anthropic::events::*;
//! use bridge_core::front::responses_stream::{ResponsesStreamEncoder, ResponsesStreamOptions};
//! let mut enc = ResponsesStreamEncoder::new(ResponsesStreamOptions {
//!     id: "r1".into(), created_at: 1_700_000_000, model: "gpt-5.5".into(), ..Default::default() });
//! let mut sse = enc.push(StreamEvent::MessageStart { message: Box::new(MessageShell::new("msg_1".into(), "m".into(), 5)) });
//! sse.push_str(&enc.push(StreamEvent::ContentBlockDelta { index: 0, delta: Delta::TextDelta { text: "Hi".into() } }));
//! sse.push_str(&enc.finish()); // no stop reason came: the response failed
//! assert!(sse.starts_with("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,"));
//! assert!(sse.contains("event: response.output_text.delta\n"));
//! assert!(sse.contains("event: response.failed\n"));
//! ```

use serde_json::{Value, json};

use crate::anthropic::accumulate::merge_usage;
use crate::anthropic::events::{
    ApiError, BlockStart, Delta, ErrorKind, StopReason, StreamEvent, Usage,
};
use crate::front::Failure;
use crate::front::client_tools::ResponsesTools;

/// What the encoder needs to know about the response it writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponsesStreamOptions {
    /// The response id (`resp_` is prefixed unless present).
    pub id: String,
    /// Unix seconds.
    pub created_at: u64,
    /// The model name reported to the client.
    pub model: String,
    /// How the request's tools are called on the way back
    /// ([`crate::front::responses_request::ResponsesFrontRequest::client_tools`]).
    pub tools: ResponsesTools,
    /// Put thinking signatures into reasoning items' `encrypted_content`.
    pub include_encrypted_reasoning: bool,
    /// The request's settings every response object repeats (`tools`, `store`, `text`, …:
    /// [`crate::front::responses_request::request_echo`]), as OpenAI's do.
    pub echo: serde_json::Map<String, Value>,
}

/// One Responses stream event: its `type` and its JSON (which holds the same `type`).
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesFrame {
    /// The event type (also the SSE `event:` name).
    pub kind: &'static str,
    /// The event's JSON.
    pub data: Value,
}

impl ResponsesFrame {
    /// Append the frame's SSE bytes.
    pub fn encode(&self, out: &mut String) {
        // Event types are fixed identifiers and serde_json writes no raw line break: the JSON
        // goes straight into `out`, one `data:` line, with no copy of it made on the way.
        out.push_str("event: ");
        out.push_str(self.kind);
        out.push_str("\ndata: ");
        let start = out.len();
        if crate::compact_json::write_into(out, &self.data).is_err() {
            out.truncate(start);
            out.push_str("{}");
        }
        out.push_str("\n\n");
    }
}

/// Where the encoder's frames go: written out at once (each frame's JSON dropped as soon as it
/// is written, so a large answer's copies do not pile up), kept whole, or — for a fold — only
/// the terminal one kept.
#[derive(Debug)]
enum Sink {
    Sse(String),
    Frames(Vec<ResponsesFrame>),
    Terminal(Option<ResponsesFrame>),
}

impl Sink {
    fn into_sse(self) -> String {
        match self {
            Self::Sse(out) => out,
            Self::Frames(frames) => encode(&frames),
            Self::Terminal(_) => String::new(),
        }
    }

    fn into_frames(self) -> Vec<ResponsesFrame> {
        match self {
            Self::Frames(frames) => frames,
            Self::Sse(_) => Vec::new(),
            Self::Terminal(kept) => kept.into_iter().collect(),
        }
    }
}

/// A JSON object of `fields`, moved in (the `json!` macro would copy each value).
fn object(fields: Vec<(&str, Value)>) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Message {
        text: String,
    },
    Reasoning {
        text: String,
        signature: String,
    },
    Function {
        call_id: String,
        name: String,
        namespace: Option<String>,
        args: String,
        start_input: Value,
    },
    Custom {
        call_id: String,
        name: String,
        namespace: Option<String>,
        json: String,
    },
}

impl Kind {
    /// The text this item's delta frames stream (a message's text, a summary, a call's
    /// arguments); none for an item streamed without deltas.
    fn streamed_text(&mut self) -> Option<&mut String> {
        match self {
            Self::Message { text } | Self::Reasoning { text, .. } => Some(text),
            Self::Function { args, .. } => Some(args),
            Self::Custom { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct OpenItem {
    id: String,
    output_index: usize,
    kind: Kind,
}

/// Anthropic events in, Responses SSE out; see the module docs.
#[derive(Debug)]
pub struct ResponsesStreamEncoder {
    options: ResponsesStreamOptions,
    id: String,
    seq: u64,
    started: bool,
    done: bool,
    output: Vec<Value>,
    open: Option<OpenItem>,
    stop: Option<StopReason>,
    stop_seen: bool,
    usage: Usage,
    failure: Option<ApiError>,
    /// Frames decided but not written yet, oldest first (see [`Owed`]).
    owed: std::collections::VecDeque<Owed>,
}

/// A frame the encoder owes: a closed item's `.done` events and the terminal event each repeat
/// the item's whole text, so they are made one at a time as they are written, from the one copy
/// in `output` (lent to the frame and taken back), never all at once. Any frame written later
/// pays what is owed first, so the order on the wire is the order they were decided in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owed {
    /// `output_text.done` (a message) or `reasoning_summary_text.done` of output item `.0`.
    TextDone(usize),
    /// `content_part.done` or `reasoning_summary_part.done` of output item `.0`.
    PartDone(usize),
    /// `output_item.done` of output item `.0`.
    ItemDone(usize),
    /// `response.completed`, or `response.incomplete` with this reason: the output goes into it.
    Terminal(Option<&'static str>),
}

impl ResponsesStreamEncoder {
    /// An encoder for one response.
    #[must_use]
    pub fn new(options: ResponsesStreamOptions) -> Self {
        let id = if options.id.starts_with("resp_") {
            options.id.clone()
        } else {
            format!("resp_{}", options.id)
        };
        Self {
            options,
            id,
            seq: 0,
            started: false,
            done: false,
            output: Vec::new(),
            open: None,
            stop: None,
            stop_seen: false,
            usage: Usage::default(),
            failure: None,
            owed: std::collections::VecDeque::new(),
        }
    }

    /// The SSE bytes for one event.
    pub fn push(&mut self, event: StreamEvent) -> String {
        let mut out = String::new();
        self.push_bounded(event, &mut out, usize::MAX);
        out
    }

    /// The SSE bytes that end the stream (nothing when it already ended).
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.finish_bounded(&mut out, usize::MAX);
        out
    }

    /// [`Self::push`] into `out`, writing owed frames only while `out` is shorter than
    /// `limit` bytes; the rest waits for [`Self::pay_into`] (or goes out before the next frame).
    pub fn push_bounded(&mut self, event: StreamEvent, out: &mut String, limit: usize) {
        self.write_sse(out, limit, |encoder, sink| encoder.push_into(event, sink));
    }

    /// [`Self::finish`] into `out`, bounded as [`Self::push_bounded`].
    pub fn finish_bounded(&mut self, out: &mut String, limit: usize) {
        self.write_sse(out, limit, Self::finish_into);
    }

    /// Writes owed frames into `out` while it is shorter than `limit` bytes; whether some are
    /// still owed.
    pub fn pay_into(&mut self, out: &mut String, limit: usize) -> bool {
        self.write_sse(out, limit, |_, _| {});
        self.owes()
    }

    /// `step` writing SSE into `out`, then what is owed while `out` is under `limit`.
    fn write_sse(
        &mut self,
        out: &mut String,
        limit: usize,
        step: impl FnOnce(&mut Self, &mut Sink),
    ) {
        let mut sink = Sink::Sse(std::mem::take(out));
        step(self, &mut sink);
        self.pay(&mut sink, limit);
        *out = sink.into_sse();
    }

    /// Whether frames are owed (decided, not yet written).
    #[must_use]
    pub fn owes(&self) -> bool {
        !self.owed.is_empty()
    }

    /// Whether the terminal event was written.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The frames for one event (taken, so a delta's text moves into them rather than being
    /// copied).
    pub fn push_frames(&mut self, event: StreamEvent) -> Vec<ResponsesFrame> {
        let mut out = Sink::Frames(Vec::new());
        self.push_into(event, &mut out);
        self.pay(&mut out, usize::MAX);
        out.into_frames()
    }

    fn push_into(&mut self, event: StreamEvent, out: &mut Sink) {
        if self.done {
            return;
        }
        let event = match event {
            StreamEvent::ContentBlockDelta { delta, .. } => {
                self.start(out);
                self.delta(delta, out);
                return;
            }
            event => event,
        };
        match &event {
            StreamEvent::MessageStart { message } => {
                self.usage = message.usage.clone();
                self.start(out);
            }
            StreamEvent::ContentBlockStart { content_block, .. } => {
                self.start(out);
                self.close(out);
                let kind = match content_block {
                    BlockStart::Text { .. } => Kind::Message {
                        text: String::new(),
                    },
                    BlockStart::Thinking { .. } => Kind::Reasoning {
                        text: String::new(),
                        signature: String::new(),
                    },
                    BlockStart::ToolUse { id, name, input } => {
                        let tools = &self.options.tools;
                        let (namespace, client_name) = tools.client_name(name);
                        let (namespace, client_name) =
                            (namespace.map(str::to_owned), client_name.to_owned());
                        if tools.is_custom(name) {
                            Kind::Custom {
                                call_id: id.clone(),
                                name: client_name,
                                namespace,
                                json: String::new(),
                            }
                        } else {
                            Kind::Function {
                                call_id: id.clone(),
                                name: client_name,
                                namespace,
                                args: String::new(),
                                start_input: input.clone(),
                            }
                        }
                    }
                    // Server tools ran where the answer was made; a Responses client gets
                    // what the model said about them.
                    BlockStart::RedactedThinking { .. }
                    | BlockStart::ServerToolUse { .. }
                    | BlockStart::WebSearchToolResult { .. }
                    | BlockStart::WebFetchToolResult { .. } => return,
                };
                self.open_item(kind, out);
            }
            StreamEvent::ContentBlockDelta { .. } => {}
            StreamEvent::ContentBlockStop { .. } => self.close(out),
            StreamEvent::MessageDelta { delta, usage } => {
                self.stop = delta.stop_reason;
                self.stop_seen = true;
                merge_usage(&mut self.usage, usage);
            }
            StreamEvent::MessageStop => self.end(out),
            StreamEvent::Ping => {}
            StreamEvent::Error { error } => self.fail(error, out),
        }
    }

    /// The frames that end the stream.
    pub fn finish_frames(&mut self) -> Vec<ResponsesFrame> {
        let mut out = Sink::Frames(Vec::new());
        self.finish_into(&mut out);
        self.pay(&mut out, usize::MAX);
        out.into_frames()
    }

    fn finish_into(&mut self, out: &mut Sink) {
        if self.done {
            return;
        }
        if self.stop_seen {
            self.end(out);
        } else {
            let error = ApiError::new(
                ErrorKind::Api,
                "the upstream stream ended before the response was complete",
            );
            self.fail(&error, out);
        }
    }

    fn frame(&mut self, kind: &'static str, fields: Value, out: &mut Sink) {
        self.pay(out, usize::MAX);
        self.lend(kind, fields, out);
    }

    /// Writes a frame of `fields` and gives its JSON back (a copy only when the sink keeps
    /// frames), so what was moved into it can be taken back.
    fn lend(&mut self, kind: &'static str, fields: Value, out: &mut Sink) -> Value {
        let mut data = json!({"type": kind, "sequence_number": self.seq});
        if let (Value::Object(data), Value::Object(fields)) = (&mut data, fields) {
            data.extend(fields);
        }
        self.seq += 1;
        let frame = ResponsesFrame { kind, data };
        match out {
            Sink::Sse(sse) => {
                // A frame of a long answer is made in one allocation, not by doubling one
                // (each step of which would leave the last one behind to be freed).
                // The room after a long string is the room its writer wants.
                let size = json_size_hint(&frame.data) + kind.len() + 16;
                sse.reserve(size + crate::compact_json::room_after(size));
                frame.encode(sse);
            }
            Sink::Frames(frames) => frames.push(frame.clone()),
            Sink::Terminal(kept) => {
                if matches!(kind, "response.completed" | "response.incomplete") {
                    *kept = Some(frame);
                    return Value::Null;
                }
            }
        }
        frame.data
    }

    /// Writes owed frames, oldest first, while the SSE written is shorter than `limit` bytes
    /// (a sink that keeps frames takes them all).
    fn pay(&mut self, out: &mut Sink, limit: usize) {
        while !self.owed.is_empty() {
            if let Sink::Sse(sse) = out
                && sse.len() >= limit
            {
                return;
            }
            if let Some(owed) = self.owed.pop_front() {
                self.pay_one(owed, out);
            }
        }
    }

    fn pay_one(&mut self, owed: Owed, out: &mut Sink) {
        let index = match owed {
            Owed::TextDone(i) | Owed::PartDone(i) | Owed::ItemDone(i) => i,
            Owed::Terminal(incomplete) => return self.terminal(incomplete, out),
        };
        let Some(item) = self.output.get_mut(index) else {
            return;
        };
        let id = item.get("id").cloned().unwrap_or(Value::Null);
        let message = item.get("type").and_then(Value::as_str) == Some("message");
        let (kind, pointer, name, place) = match (owed, message) {
            (Owed::TextDone(_), true) => (
                "response.output_text.done",
                "/content/0/text",
                "text",
                "content_index",
            ),
            (Owed::TextDone(_), false) => (
                "response.reasoning_summary_text.done",
                "/summary/0/text",
                "text",
                "summary_index",
            ),
            (Owed::PartDone(_), true) => (
                "response.content_part.done",
                "/content/0",
                "part",
                "content_index",
            ),
            (Owed::PartDone(_), false) => (
                "response.reasoning_summary_part.done",
                "/summary/0",
                "part",
                "summary_index",
            ),
            (_, _) => ("response.output_item.done", "", "item", ""),
        };
        let Some(lent) = item.pointer_mut(pointer).map(Value::take) else {
            return;
        };
        let mut fields = if place.is_empty() {
            vec![("output_index", json!(index))]
        } else {
            vec![
                ("item_id", id),
                ("output_index", json!(index)),
                (place, json!(0)),
            ]
        };
        fields.push((name, lent));
        if matches!(owed, Owed::TextDone(_)) && message {
            fields.push(("logprobs", json!([])));
        }
        let mut data = self.lend(kind, object(fields), out);
        if let (Some(back), Some(item)) = (
            data.get_mut(name).map(Value::take),
            self.output.get_mut(index),
        ) && let Some(slot) = item.pointer_mut(pointer)
        {
            *slot = back;
        }
    }

    /// The terminal event: the items go into it, not a copy of them.
    fn terminal(&mut self, incomplete: Option<&'static str>, out: &mut Sink) {
        let (kind, status) = match incomplete {
            Some(_) => ("response.incomplete", "incomplete"),
            None => ("response.completed", "completed"),
        };
        let output = Value::Array(std::mem::take(&mut self.output));
        let mut response = self.response_with(status, true, output);
        if let Some(reason) = incomplete {
            response["incomplete_details"] = json!({ "reason": reason });
        }
        self.lend(kind, object(vec![("response", response)]), out);
    }

    fn response(&self, status: &str, usage: bool) -> Value {
        self.response_with(status, usage, Value::Array(self.output.clone()))
    }

    /// The response object with `output` given (the last one takes the items, not a copy).
    fn response_with(&self, status: &str, usage: bool, output: Value) -> Value {
        let usage = usage.then(|| response_usage(&self.usage));
        let mut response = json!({
            "id": self.id,
            "object": "response",
            "created_at": self.options.created_at,
            "status": status,
            "error": null,
            "incomplete_details": null,
            "model": self.options.model,
            "output": null,
            "usage": usage,
        });
        if let Value::Object(fields) = &mut response {
            for (name, value) in &self.options.echo {
                fields.entry(name.as_str()).or_insert_with(|| value.clone());
            }
        }
        response["output"] = output;
        response
    }

    fn start(&mut self, out: &mut Sink) {
        if self.started {
            return;
        }
        self.started = true;
        let response = self.response("in_progress", false);
        self.frame("response.created", json!({"response": response}), out);
        let response = self.response("in_progress", false);
        self.frame("response.in_progress", json!({"response": response}), out);
    }

    fn item_id(&self, prefix: &str) -> String {
        let suffix = self.id.strip_prefix("resp_").unwrap_or(&self.id);
        format!("{prefix}_{suffix}_{}", self.output.len())
    }

    fn open_item(&mut self, kind: Kind, out: &mut Sink) {
        let output_index = self.output.len();
        let (id, item) = match &kind {
            Kind::Message { .. } => {
                let id = self.item_id("msg");
                let item = json!({"id": id, "type": "message", "status": "in_progress",
                    "role": "assistant", "content": []});
                (id, item)
            }
            Kind::Reasoning { .. } => {
                let id = self.item_id("rs");
                (
                    id.clone(),
                    json!({"id": id, "type": "reasoning", "summary": []}),
                )
            }
            Kind::Function {
                call_id,
                name,
                namespace,
                ..
            } => {
                let id = self.item_id("fc");
                let item = json!({"id": id, "type": "function_call", "status": "in_progress",
                    "arguments": "", "call_id": call_id, "name": name});
                (id, in_namespace(item, namespace.as_deref()))
            }
            Kind::Custom {
                call_id,
                name,
                namespace,
                ..
            } => {
                let id = self.item_id("ctc");
                let item = json!({"id": id, "type": "custom_tool_call", "status": "in_progress",
                    "call_id": call_id, "name": name, "input": ""});
                (id, in_namespace(item, namespace.as_deref()))
            }
        };
        self.frame(
            "response.output_item.added",
            json!({"output_index": output_index, "item": item}),
            out,
        );
        match kind {
            Kind::Message { .. } => self.frame(
                "response.content_part.added",
                json!({"item_id": id, "output_index": output_index, "content_index": 0,
                    "part": {"type": "output_text", "annotations": [], "text": ""}}),
                out,
            ),
            Kind::Reasoning { .. } => self.frame(
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": output_index, "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""}}),
                out,
            ),
            Kind::Function { .. } | Kind::Custom { .. } => {}
        }
        self.open = Some(OpenItem {
            id,
            output_index,
            kind,
        });
    }

    fn delta(&mut self, delta: Delta, out: &mut Sink) {
        let wanted = match delta {
            Delta::TextDelta { .. } => Some(BlockStart::Text {
                text: String::new(),
            }),
            Delta::ThinkingDelta { .. } => Some(BlockStart::Thinking {
                thinking: String::new(),
                signature: String::new(),
            }),
            Delta::InputJsonDelta { .. }
            | Delta::SignatureDelta { .. }
            | Delta::CitationsDelta { .. } => None,
        };
        // A delta with no block of its kind open (a stream that skipped content_block_start)
        // opens one, as the Anthropic accumulator would read it.
        let fits = matches!(
            (self.open.as_ref().map(|o| &o.kind), &delta),
            (Some(Kind::Message { .. }), Delta::TextDelta { .. })
                | (
                    Some(Kind::Reasoning { .. }),
                    Delta::ThinkingDelta { .. } | Delta::SignatureDelta { .. }
                )
                | (
                    Some(Kind::Function { .. } | Kind::Custom { .. }),
                    Delta::InputJsonDelta { .. }
                )
        );
        if !fits {
            let Some(block) = wanted else {
                return;
            };
            self.push_into(
                StreamEvent::ContentBlockStart {
                    index: 0,
                    content_block: block,
                },
                out,
            );
        }
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let place = json!({"item_id": open.id, "output_index": open.output_index});
        let (kind, mut fields, kept, piece) = match (&mut open.kind, delta) {
            (Kind::Message { text }, Delta::TextDelta { text: piece }) if !piece.is_empty() => (
                "response.output_text.delta",
                json!({"content_index": 0, "delta": "", "logprobs": []}),
                text,
                piece,
            ),
            (Kind::Reasoning { text, .. }, Delta::ThinkingDelta { thinking })
                if !thinking.is_empty() =>
            {
                (
                    "response.reasoning_summary_text.delta",
                    json!({"summary_index": 0, "delta": ""}),
                    text,
                    thinking,
                )
            }
            (Kind::Function { args, .. }, Delta::InputJsonDelta { partial_json })
                if !partial_json.is_empty() =>
            {
                (
                    "response.function_call_arguments.delta",
                    json!({ "delta": "" }),
                    args,
                    partial_json,
                )
            }
            (Kind::Reasoning { signature, .. }, Delta::SignatureDelta { signature: s }) => {
                signature.push_str(&s);
                return;
            }
            (Kind::Custom { json, .. }, Delta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
                return;
            }
            _ => return,
        };
        // The item keeps the text and the frame carries the piece. The first piece (often the
        // whole answer) is lent to the frame and taken back, so it is held once, not twice.
        let lent = kept.is_empty();
        if !lent {
            kept.push_str(&piece);
        }
        fields["delta"] = Value::String(piece);
        self.pay(out, usize::MAX);
        let mut data = self.lend(kind, merge(place, fields), out);
        if lent
            && let Some(Value::String(piece)) = data.get_mut("delta").map(Value::take)
            && let Some(kept) = self.open.as_mut().and_then(|o| o.kind.streamed_text())
        {
            *kept = piece;
        }
    }

    /// Closes the open item: it goes into `output` with its text moved in, and its `.done`
    /// frames are owed ([`Owed`]).
    fn close(&mut self, out: &mut Sink) {
        let Some(OpenItem {
            id,
            output_index,
            kind,
        }) = self.open.take()
        else {
            return;
        };
        let place = json!({"item_id": id, "output_index": output_index});
        let with = |extra: Value| merge(place.clone(), extra);
        let (item, owed) = match kind {
            Kind::Message { text } => {
                let part = object(vec![
                    ("type", json!("output_text")),
                    ("annotations", json!([])),
                    ("text", Value::String(text)),
                ]);
                let item = object(vec![
                    ("id", json!(id)),
                    ("type", json!("message")),
                    ("status", json!("completed")),
                    ("role", json!("assistant")),
                    ("content", Value::Array(vec![part])),
                ]);
                (item, true)
            }
            Kind::Reasoning { text, signature } => {
                let part = object(vec![
                    ("type", json!("summary_text")),
                    ("text", Value::String(text)),
                ]);
                let mut item = object(vec![
                    ("id", json!(id)),
                    ("type", json!("reasoning")),
                    ("summary", Value::Array(vec![part])),
                ]);
                if self.options.include_encrypted_reasoning && !signature.is_empty() {
                    item["encrypted_content"] = Value::String(signature);
                }
                (item, true)
            }
            Kind::Function {
                call_id,
                name,
                namespace,
                mut args,
                start_input,
            } => {
                if args.is_empty() {
                    args = match &start_input {
                        Value::Object(o) if !o.is_empty() => start_input.to_string(),
                        _ => String::from("{}"),
                    };
                    self.frame(
                        "response.function_call_arguments.delta",
                        with(json!({"delta": args})),
                        out,
                    );
                }
                self.frame(
                    "response.function_call_arguments.done",
                    with(json!({"name": name, "arguments": args})),
                    out,
                );
                let item = in_namespace(
                    json!({"id": id, "type": "function_call", "status": "completed",
                        "arguments": args, "call_id": call_id, "name": name}),
                    namespace.as_deref(),
                );
                (item, false)
            }
            Kind::Custom {
                call_id,
                name,
                namespace,
                json,
            } => {
                let input = custom_input(&json);
                if !input.is_empty() {
                    self.frame(
                        "response.custom_tool_call_input.delta",
                        with(json!({"delta": input})),
                        out,
                    );
                }
                self.frame(
                    "response.custom_tool_call_input.done",
                    with(json!({"input": input})),
                    out,
                );
                let item = in_namespace(
                    json!({"id": id, "type": "custom_tool_call", "status": "completed",
                        "call_id": call_id, "name": name, "input": input}),
                    namespace.as_deref(),
                );
                (item, false)
            }
        };
        if owed {
            self.owed.push_back(Owed::TextDone(output_index));
            self.owed.push_back(Owed::PartDone(output_index));
        }
        self.owed.push_back(Owed::ItemDone(output_index));
        self.output.push(item);
    }

    fn end(&mut self, out: &mut Sink) {
        self.start(out);
        self.close(out);
        let incomplete = match self.stop {
            Some(StopReason::MaxTokens) => Some("max_output_tokens"),
            Some(StopReason::Refusal) => Some("content_filter"),
            _ => None,
        };
        self.owed.push_back(Owed::Terminal(incomplete));
        self.done = true;
    }

    fn fail(&mut self, error: &ApiError, out: &mut Sink) {
        self.failure = Some(error.clone());
        let code = error_code(error);
        if self.started {
            let mut response = self.response("failed", false);
            response["error"] = json!({"code": code, "message": error.message});
            self.frame("response.failed", json!({ "response": response }), out);
        } else {
            self.frame(
                "error",
                json!({"code": code, "message": error.message, "param": null}),
                out,
            );
        }
        self.done = true;
    }
}

/// The raw text of a custom tool call: the string `input` of the call's JSON; failing that, the
/// only string value, or the JSON text as the model wrote it.
fn custom_input(json: &str) -> String {
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(o)) => {
            if let Some(Value::String(s)) = o.get("input") {
                return s.clone();
            }
            let mut strings = o.values().filter_map(Value::as_str);
            match (strings.next(), strings.next(), o.len()) {
                (Some(only), None, 1) => only.to_owned(),
                _ => json.to_owned(),
            }
        }
        _ => json.to_owned(),
    }
}

/// The Responses error `code` for an Anthropic error (the codes the Codex CLI tells apart).
#[must_use]
pub fn error_code(error: &ApiError) -> &'static str {
    match error.kind {
        ErrorKind::RateLimit => "rate_limit_exceeded",
        ErrorKind::Overloaded => "server_is_overloaded",
        ErrorKind::Billing => "insufficient_quota",
        ErrorKind::RequestTooLarge => "context_length_exceeded",
        ErrorKind::InvalidRequest if error.message.contains("prompt is too long") => {
            "context_length_exceeded"
        }
        ErrorKind::InvalidRequest => "invalid_request_error",
        ErrorKind::Authentication => "invalid_api_key",
        ErrorKind::Permission => "permission_denied",
        ErrorKind::NotFound => "model_not_found",
        ErrorKind::Api | ErrorKind::Timeout => "server_error",
    }
}

fn response_usage(usage: &Usage) -> Value {
    let cached = u64::from(usage.cache_read_input_tokens.unwrap_or(0));
    let input = u64::from(usage.input_tokens)
        + cached
        + u64::from(usage.cache_creation_input_tokens.unwrap_or(0));
    let output = u64::from(usage.output_tokens);
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    })
}

/// About how many bytes `value` takes as JSON: its strings' lengths (escapes not counted) and
/// a little for everything else.
fn json_size_hint(value: &Value) -> usize {
    match value {
        Value::String(s) => crate::compact_json::str_size_hint(s),
        Value::Array(items) => items.iter().map(json_size_hint).sum::<usize>() + items.len() + 2,
        Value::Object(fields) => {
            fields
                .iter()
                .map(|(k, v)| k.len() + 4 + json_size_hint(v))
                .sum::<usize>()
                + 2
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
    }
}

fn merge(mut a: Value, b: Value) -> Value {
    if let (Value::Object(a), Value::Object(b)) = (&mut a, b) {
        a.extend(b);
    }
    a
}

fn encode(frames: &[ResponsesFrame]) -> String {
    let mut out = String::new();
    for frame in frames {
        frame.encode(&mut out);
    }
    out
}

/// Folds Anthropic events into one `response` object: the `response` of the encoder's terminal
/// event (`completed` or `incomplete`), or the failure it reports.
#[derive(Debug)]
pub struct ResponsesFold {
    encoder: ResponsesStreamEncoder,
    /// Keeps only the terminal frame.
    terminal: Sink,
}

impl ResponsesFold {
    /// A fold for one response.
    #[must_use]
    pub fn new(options: ResponsesStreamOptions) -> Self {
        Self {
            encoder: ResponsesStreamEncoder::new(options),
            terminal: Sink::Terminal(None),
        }
    }

    /// Fold one event in.
    pub fn push(&mut self, event: StreamEvent) {
        self.encoder.push_into(event, &mut self.terminal);
    }

    /// The response object (status `completed` or `incomplete`), or the failure.
    ///
    /// # Errors
    /// A [`Failure`] when the stream ended with an error or before its stop reason.
    pub fn finish(mut self) -> Result<Value, Failure> {
        self.encoder.finish_into(&mut self.terminal);
        self.encoder.pay(&mut self.terminal, usize::MAX);
        if let Some(error) = &self.encoder.failure {
            return Err(Failure::from_api_error(error));
        }
        match self.terminal.into_frames().pop() {
            Some(mut frame) => Ok(frame
                .data
                .get_mut("response")
                .map(Value::take)
                .unwrap_or(Value::Null)),
            None => Err(Failure::from_api_error(&ApiError::new(
                ErrorKind::Api,
                "the response did not end",
            ))),
        }
    }
}

/// A call item with the client's `namespace`, when its tool came in one.
fn in_namespace(mut item: Value, namespace: Option<&str>) -> Value {
    if let (Some(ns), Value::Object(fields)) = (namespace, &mut item) {
        fields.insert(String::from("namespace"), Value::String(ns.to_owned()));
    }
    item
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::events::{MessageDeltaBody, MessageShell};
    use crate::front::responses_validate::check_responses_sse;

    fn options(custom: &[&str]) -> ResponsesStreamOptions {
        ResponsesStreamOptions {
            id: String::from("r1"),
            created_at: 9,
            model: String::from("gpt-5.5"),
            tools: ResponsesTools {
                custom_tools: custom.iter().map(|s| (*s).to_owned()).collect(),
                namespaced_tools: Vec::new(),
            },
            include_encrypted_reasoning: true,
            echo: serde_json::Map::new(),
        }
    }

    fn start() -> StreamEvent {
        StreamEvent::MessageStart {
            message: Box::new(MessageShell::new("msg_1".into(), "claude".into(), 10)),
        }
    }

    fn open(index: u32, block: BlockStart) -> StreamEvent {
        StreamEvent::ContentBlockStart {
            index,
            content_block: block,
        }
    }

    fn delta(index: u32, delta: Delta) -> StreamEvent {
        StreamEvent::ContentBlockDelta { index, delta }
    }

    fn end(stop: StopReason) -> [StreamEvent; 2] {
        [
            StreamEvent::MessageDelta {
                delta: MessageDeltaBody {
                    stop_reason: Some(stop),
                    stop_sequence: None,
                },
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 5,
                    cache_read_input_tokens: Some(2),
                    ..Usage::default()
                },
            },
            StreamEvent::MessageStop,
        ]
    }

    fn run(options: ResponsesStreamOptions, events: &[StreamEvent]) -> (String, Vec<Value>) {
        let mut enc = ResponsesStreamEncoder::new(options);
        let mut sse: String = events.iter().map(|e| enc.push(e.clone())).collect();
        sse.push_str(&enc.finish());
        let checked = check_responses_sse(sse.as_bytes());
        assert!(checked.is_ok(), "{checked:?}\n{sse}");
        (sse, checked.unwrap_or_default())
    }

    fn types(events: &[Value]) -> Vec<&str> {
        events.iter().map(|e| e["type"].as_str().unwrap()).collect()
    }

    #[test]
    fn a_text_turn_exact_bytes() {
        let mut events = vec![
            start(),
            open(
                0,
                BlockStart::Text {
                    text: String::new(),
                },
            ),
            delta(0, Delta::TextDelta { text: "Hi".into() }),
            StreamEvent::ContentBlockStop { index: 0 },
        ];
        events.extend(end(StopReason::EndTurn));
        let (sse, _) = run(options(&[]), &events);
        let shell = |status: &str, output: &str, usage: &str| {
            format!(
                r#"{{"id":"resp_r1","object":"response","created_at":9,"status":"{status}","error":null,"incomplete_details":null,"model":"gpt-5.5","output":[{output}],"usage":{usage}}}"#
            )
        };
        let item = r#"{"id":"msg_r1_0","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Hi"}]}"#;
        let expected = [
            format!(
                r#"event: response.created
data: {{"type":"response.created","sequence_number":0,"response":{}}}"#,
                shell("in_progress", "", "null")
            ),
            format!(
                r#"event: response.in_progress
data: {{"type":"response.in_progress","sequence_number":1,"response":{}}}"#,
                shell("in_progress", "", "null")
            ),
            String::from(
                r#"event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_r1_0","type":"message","status":"in_progress","role":"assistant","content":[]}}"#,
            ),
            String::from(
                r#"event: response.content_part.added
data: {"type":"response.content_part.added","sequence_number":3,"item_id":"msg_r1_0","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"text":""}}"#,
            ),
            String::from(
                r#"event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_r1_0","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}"#,
            ),
            String::from(
                r#"event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":5,"item_id":"msg_r1_0","output_index":0,"content_index":0,"text":"Hi","logprobs":[]}"#,
            ),
            String::from(
                r#"event: response.content_part.done
data: {"type":"response.content_part.done","sequence_number":6,"item_id":"msg_r1_0","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"text":"Hi"}}"#,
            ),
            format!(
                r#"event: response.output_item.done
data: {{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{item}}}"#
            ),
            format!(
                r#"event: response.completed
data: {{"type":"response.completed","sequence_number":8,"response":{}}}"#,
                shell(
                    "completed",
                    item,
                    r#"{"input_tokens":12,"input_tokens_details":{"cached_tokens":2},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":17}"#
                )
            ),
            String::new(),
        ];
        assert_eq!(sse, expected.join("\n\n"));
    }

    #[test]
    fn reasoning_function_and_custom_calls() {
        let mut events = vec![
            start(),
            open(
                0,
                BlockStart::Thinking {
                    thinking: String::new(),
                    signature: String::new(),
                },
            ),
            delta(
                0,
                Delta::ThinkingDelta {
                    thinking: "Plan.".into(),
                },
            ),
            delta(
                0,
                Delta::SignatureDelta {
                    signature: "SIG".into(),
                },
            ),
            StreamEvent::ContentBlockStop { index: 0 },
            open(
                1,
                BlockStart::ToolUse {
                    id: "toolu_1".into(),
                    name: "exec_command".into(),
                    input: json!({}),
                },
            ),
            delta(
                1,
                Delta::InputJsonDelta {
                    partial_json: "{\"cmd\":".into(),
                },
            ),
            delta(
                1,
                Delta::InputJsonDelta {
                    partial_json: "\"ls\"}".into(),
                },
            ),
            StreamEvent::ContentBlockStop { index: 1 },
            open(
                2,
                BlockStart::ToolUse {
                    id: "toolu_2".into(),
                    name: "apply_patch".into(),
                    input: json!({}),
                },
            ),
            delta(
                2,
                Delta::InputJsonDelta {
                    partial_json: "{\"input\":\"*** Begin".into(),
                },
            ),
            delta(
                2,
                Delta::InputJsonDelta {
                    partial_json: " Patch\\n\"}".into(),
                },
            ),
            StreamEvent::ContentBlockStop { index: 2 },
            open(
                3,
                BlockStart::ToolUse {
                    id: "toolu_3".into(),
                    name: "noargs".into(),
                    input: json!({}),
                },
            ),
            StreamEvent::ContentBlockStop { index: 3 },
        ];
        events.extend(end(StopReason::ToolUse));
        let (_, out) = run(options(&["apply_patch"]), &events);
        assert_eq!(
            types(&out)[2..],
            [
                "response.output_item.added",
                "response.reasoning_summary_part.added",
                "response.reasoning_summary_text.delta",
                "response.reasoning_summary_text.done",
                "response.reasoning_summary_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.custom_tool_call_input.delta",
                "response.custom_tool_call_input.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let output = &out.last().unwrap()["response"]["output"];
        assert_eq!(
            output[0],
            json!({"id": "rs_r1_0", "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "Plan."}], "encrypted_content": "SIG"})
        );
        assert_eq!(
            output[1],
            json!({"id": "fc_r1_1", "type": "function_call", "status": "completed",
                "arguments": "{\"cmd\":\"ls\"}", "call_id": "toolu_1", "name": "exec_command"})
        );
        assert_eq!(
            output[2],
            json!({"id": "ctc_r1_2", "type": "custom_tool_call", "status": "completed",
                "call_id": "toolu_2", "name": "apply_patch", "input": "*** Begin Patch\n"})
        );
        assert_eq!(output[3]["arguments"], "{}");

        // Without include, no encrypted_content.
        let mut plain = options(&["apply_patch"]);
        plain.include_encrypted_reasoning = false;
        let (_, out) = run(plain, &events);
        assert!(
            out.last().unwrap()["response"]["output"][0]
                .get("encrypted_content")
                .is_none()
        );
    }

    #[test]
    fn max_tokens_and_refusal_are_incomplete() {
        for (stop, reason) in [
            (StopReason::MaxTokens, "max_output_tokens"),
            (StopReason::Refusal, "content_filter"),
        ] {
            let mut events = vec![start()];
            events.extend(end(stop));
            let (_, out) = run(options(&[]), &events);
            let last = out.last().unwrap();
            assert_eq!(last["type"], "response.incomplete");
            assert_eq!(last["response"]["incomplete_details"]["reason"], reason);
        }
    }

    #[test]
    fn errors_fail_the_response() {
        let overloaded = StreamEvent::Error {
            error: ApiError::new(ErrorKind::Overloaded, "Overloaded"),
        };
        let (_, out) = run(
            options(&[]),
            &[
                start(),
                open(
                    0,
                    BlockStart::Text {
                        text: String::new(),
                    },
                ),
                delta(0, Delta::TextDelta { text: "par".into() }),
                overloaded.clone(),
            ],
        );
        let last = out.last().unwrap();
        assert_eq!(last["type"], "response.failed");
        assert_eq!(
            last["response"]["error"],
            json!({"code": "server_is_overloaded", "message": "Overloaded"})
        );
        assert_eq!(last["response"]["output"], json!([]));

        let (_, out) = run(options(&[]), std::slice::from_ref(&overloaded));
        assert_eq!(types(&out), ["error"]);

        let (_, cut) = run(options(&[]), &[start()]);
        assert_eq!(cut.last().unwrap()["type"], "response.failed");

        let mut fold = ResponsesFold::new(options(&[]));
        fold.push(start());
        fold.push(overloaded);
        let failure = fold.finish().unwrap_err();
        assert_eq!(failure.status, 503);
        assert!(failure.body.contains("Overloaded"));
    }

    #[test]
    fn the_fold_is_the_terminal_response() {
        let mut fold = ResponsesFold::new(options(&[]));
        let mut events = vec![
            start(),
            open(
                0,
                BlockStart::Text {
                    text: String::new(),
                },
            ),
            delta(
                0,
                Delta::TextDelta {
                    text: "Done.".into(),
                },
            ),
            StreamEvent::ContentBlockStop { index: 0 },
        ];
        events.extend(end(StopReason::EndTurn));
        for e in &events {
            fold.push(e.clone());
        }
        let response = fold.finish().unwrap();
        assert_eq!(response["status"], "completed");
        assert_eq!(response["output"][0]["content"][0]["text"], "Done.");
        assert_eq!(response["usage"]["total_tokens"], 17);
    }

    #[test]
    fn custom_input_reads_the_raw_text() {
        assert_eq!(custom_input(r#"{"input":"a\nb"}"#), "a\nb");
        assert_eq!(custom_input(r#"{"patch":"x"}"#), "x");
        assert_eq!(custom_input(r#"{"a":"x","b":"y"}"#), r#"{"a":"x","b":"y"}"#);
        assert_eq!(custom_input("not json"), "not json");
    }
}
