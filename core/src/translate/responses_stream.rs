//! OpenAI Responses stream → Anthropic events: a sans-IO state machine written through the
//! [`AnthropicWriter`].
//!
//! Bytes go in through [`ResponsesStreamTranslator::feed`] (any chunking: the SSE decoder keeps
//! partial lines and characters), events come out; every output satisfies
//! [`crate::anthropic::stream::Validator`], whatever the upstream sends.
//!
//! ```text
//!   Idle ──feed──► Streaming ──response.completed / .incomplete──► Done (message_delta + stop)
//!                     │  response.failed / error / fail() ─────────► Done (error event)
//!                     └─ body ends (or [DONE]) before a terminal event ─► Done (error event)
//! ```
//!
//! Output items become blocks, one block per item, in the order the items appear:
//!
//! | upstream | Anthropic |
//! |---|---|
//! | `message`: `response.output_text.delta`, `response.refusal.delta` | text |
//! | `reasoning`: `response.reasoning_summary_text.delta`, `response.reasoning_text.delta` (parts joined by a blank line) | thinking; its signature carries the item's `encrypted_content` ([`reasoning_signature`]), or is an invented one when there is none; an item with only `encrypted_content` is an empty, signed thinking block |
//! | `function_call` + `response.function_call_arguments.delta` | tool_use (id = `call_id`) + input_json_delta; without deltas, the arguments of `.done` / `output_item.done` |
//! | `custom_tool_call` + `response.custom_tool_call_input.delta` | tool_use whose input is `{"input": <the raw text>}` |
//! | `web_search_call` (the hosted web search) whose action is a `search` | `server_tool_use` `web_search` {query} + `web_search_tool_result` of the action's sources (failed: the `unavailable` error), written at its `output_item.done`; counted in `usage.server_tool_use.web_search_requests` |
//! | `url_citation` annotations (`response.output_text.annotation.added`, or a complete item's) | `citations_delta` {`web_search_result_location`} in the message's text block |
//! | other hosted tools (`code_interpreter_call`, …), a search's `open_page` / `find_in_page` steps, unknown events | skipped |
//!
//! Only the earliest unfinished item writes; deltas of later items are buffered and written, in
//! full, once the items before them are done (interleaved items lose nothing). A message or
//! reasoning item whose deltas never came is written from its `output_item.done`.
//!
//! The end: `response.completed` → `tool_use` when a call was made, else `end_turn`;
//! `response.incomplete` → `max_tokens` for `max_output_tokens`, `refusal` for `content_filter`
//! (as the Chat translator maps `content_filter`). Usage: `input_tokens` minus cached →
//! `input_tokens`, cached → `cache_read_input_tokens`, `output_tokens` (reasoning included) as
//! is; estimates when the upstream gives none. `data: [DONE]` is tolerated; a plain JSON body
//! (not SSE) is read as a whole response or as an error.
//!
//! Errors (`response.failed`'s `response.error`, `error` events, plain error bodies), by the
//! first match on the upstream's code or type:
//!
//! | code / type contains | Anthropic error |
//! |---|---|
//! | `context_length`, `context_window`, `too_long` | `invalid_request_error`, "prompt is too long: …" (Claude Code compacts on it) |
//! | `insufficient_quota`, `billing` | `billing_error` |
//! | `rate_limit` | `rate_limit_error` |
//! | `overloaded`, `slow_down` | `overloaded_error` |
//! | `timeout` | `timeout_error` |
//! | `api_key`, `authentication` | `authentication_error` |
//! | `permission` | `permission_error` |
//! | `invalid`, `not_found`, `bad_request` | `invalid_request_error` |
//! | anything else (`server_error`, …) | `api_error` |
//!
//! ```
//! use bridge_core::translate::responses_stream::ResponsesStreamTranslator;
//! use bridge_core::anthropic::stream::Validator;
//! let mut t = ResponsesStreamTranslator::new("claude-x".into(), 12, 1);
//! let mut events = t.feed(b"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"Bash\",\"arguments\":\"\"}}\n\n");
//! events.extend(t.feed(b"data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,\"delta\":\"{\\\"command\\\":\\\"ls\\\"}\"}\n\n"));
//! events.extend(t.feed(b"data: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":30,\"output_tokens\":9}}}\n\n"));
//! events.extend(t.finish());
//! let mut v = Validator::new();
//! for e in &events { v.push(e).unwrap(); }
//! v.finish().unwrap();
//! ```

use serde_json::{Value, json};

use crate::anthropic::events::{ApiError, ErrorKind, StopReason, StreamEvent};
use crate::openai::responses::{
    Annotation, ErrorObject, OutputItem, ResponseObject, ResponsesEvent, SearchAction, TextPart,
    reasoning_signature,
};
use crate::server_tools::hosted::{
    citation, search_error_content, search_result_content, server_tool_use_id,
};
use crate::translate::writer::{AnthropicWriter, UpstreamUsage};
use crate::translate::{SseBody, SseTranslate};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    Reasoning,
    FunctionCall,
    CustomToolCall,
    /// The hosted web search.
    WebSearch,
    /// Other hosted tools and anything unknown: skipped.
    Other,
}

impl Kind {
    fn of(item_type: &str) -> Self {
        match item_type {
            "message" => Self::Message,
            "reasoning" => Self::Reasoning,
            "function_call" => Self::FunctionCall,
            "custom_tool_call" => Self::CustomToolCall,
            "web_search_call" => Self::WebSearch,
            _ => Self::Other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing written yet (a call waits for its name).
    Waiting,
    /// Its block is open.
    Writing,
    /// Finished.
    Closed,
}

/// One output item and what of it is not yet written.
#[derive(Debug)]
struct Item {
    output_index: Option<u64>,
    id: Option<String>,
    kind: Kind,
    call_id: String,
    name: String,
    /// Text, reasoning or arguments received but not yet written.
    pending: String,
    /// Deltas (or the complete text of a `.done` event) arrived: `output_item.done` adds nothing.
    streamed: bool,
    /// The reasoning part the last delta belonged to (summary or raw, index).
    part: Option<(bool, u64)>,
    encrypted: Option<String>,
    /// A message's citations not yet written.
    citations: Vec<Value>,
    /// Citations came as events: the complete item's annotations add nothing.
    cited: bool,
    /// A web search's action (from its complete item) and whether it failed.
    search: Option<SearchAction>,
    failed: bool,
    done: bool,
    state: State,
}

impl Item {
    fn new(output_index: Option<u64>, id: Option<String>, kind: Kind) -> Self {
        Self {
            output_index,
            id,
            kind,
            call_id: String::new(),
            name: String::new(),
            pending: String::new(),
            streamed: false,
            part: None,
            encrypted: None,
            citations: Vec::new(),
            cited: false,
            search: None,
            failed: false,
            done: false,
            state: State::Waiting,
        }
    }

    /// Take ids and the name from an announced or complete item.
    fn learn(&mut self, item: &OutputItem) {
        if self.id.is_none() {
            self.id.clone_from(&item.id);
        }
        if self.call_id.is_empty()
            && let Some(call_id) = &item.call_id
        {
            self.call_id.clone_from(call_id);
        }
        if self.name.is_empty()
            && let Some(name) = &item.name
        {
            self.name.clone_from(name);
        }
    }
}

/// The translator for one upstream response.
#[derive(Debug)]
pub struct ResponsesStreamTranslator {
    body: SseBody,
    writer: AnthropicWriter,
    items: Vec<Item>,
    /// The earliest item not yet closed: the only one that writes.
    next: usize,
    tool_calls: usize,
    /// Frames that were Responses events (have a `type`).
    recognised: usize,
}

impl ResponsesStreamTranslator {
    /// A translator reporting `model` to the client, with an input-token estimate for
    /// `message_start` and a seed for invented ids.
    #[must_use]
    pub fn new(model: String, input_tokens_estimate: u32, id_seed: u64) -> Self {
        Self {
            body: SseBody::default(),
            writer: AnthropicWriter::new(model, input_tokens_estimate, id_seed),
            items: Vec::new(),
            next: 0,
            tool_calls: 0,
            recognised: 0,
        }
    }

    /// Feed upstream bytes; returns the events they complete. The first call always returns
    /// `message_start`, even for empty input.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<StreamEvent> {
        self.feed_body(chunk)
    }

    /// The upstream failed: end with an `error` event.
    pub fn fail(&mut self, error: ApiError) -> Vec<StreamEvent> {
        self.writer.fail(error);
        self.writer.take()
    }

    /// The upstream body ended: without a terminal event that is an error.
    pub fn finish(&mut self) -> Vec<StreamEvent> {
        self.finish_body()
    }

    fn event(&mut self, event: ResponsesEvent) {
        let reasoning_part =
            |summary: bool, index: Option<u64>| Some((summary, index.unwrap_or(0)));
        match event.kind.as_str() {
            "response.output_item.added" | "response.output_item.done" => {
                if let Some(item) = &event.item {
                    let done = event.kind.ends_with(".done");
                    self.item(event.output_index, item, done);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                self.delta(&event, Kind::Message, None);
            }
            "response.reasoning_summary_text.delta" => {
                self.delta(
                    &event,
                    Kind::Reasoning,
                    reasoning_part(true, event.summary_index),
                );
            }
            "response.reasoning_text.delta" => {
                self.delta(
                    &event,
                    Kind::Reasoning,
                    reasoning_part(false, event.content_index),
                );
            }
            "response.function_call_arguments.delta" => {
                self.delta(&event, Kind::FunctionCall, None);
            }
            "response.custom_tool_call_input.delta" => {
                self.delta(&event, Kind::CustomToolCall, None);
            }
            "response.function_call_arguments.done" => {
                self.complete_text(&event, Kind::FunctionCall, event.arguments.as_deref());
            }
            "response.custom_tool_call_input.done" => {
                self.complete_text(&event, Kind::CustomToolCall, event.input.as_deref());
            }
            "response.output_text.annotation.added" => self.annotation(&event),
            "response.completed" | "response.incomplete" => {
                let incomplete = event.kind == "response.incomplete";
                self.end(event.response.unwrap_or_default(), incomplete);
            }
            "response.failed" => {
                let error = event.response.and_then(|r| r.error).unwrap_or_default();
                self.writer.fail(upstream_error(&error));
            }
            "error" => {
                let nested = event.error.unwrap_or_default();
                self.writer.fail(upstream_error(&ErrorObject {
                    code: event.code.or(nested.code),
                    kind: nested.kind,
                    message: event.message.or(nested.message),
                }));
            }
            // Lifecycle, content parts, `.done` texts, annotations, hosted tools, future events.
            _ => {}
        }
    }

    /// The item an event is about: by output index, else by item id, else the last unfinished
    /// item of the kind; a new one when none is known. `None` when the kinds disagree.
    fn find(&mut self, output_index: Option<u64>, id: Option<&str>, kind: Kind) -> Option<usize> {
        let found = match (output_index, id) {
            (Some(index), _) => self
                .items
                .iter()
                .rposition(|it| it.output_index == Some(index)),
            (None, Some(id)) => self
                .items
                .iter()
                .rposition(|it| it.id.as_deref() == Some(id)),
            (None, None) => self
                .items
                .iter()
                .rposition(|it| it.kind == kind && !it.done),
        };
        match found {
            Some(i) => (self.items[i].kind == kind).then_some(i),
            None => {
                self.items
                    .push(Item::new(output_index, id.map(str::to_owned), kind));
                Some(self.items.len() - 1)
            }
        }
    }

    /// `response.output_item.added` / `.done`.
    fn item(&mut self, output_index: Option<u64>, item: &OutputItem, done: bool) {
        let kind = Kind::of(&item.kind);
        let Some(i) = self.find(output_index, item.id.as_deref(), kind) else {
            return;
        };
        let entry = &mut self.items[i];
        entry.learn(item);
        if done {
            if entry.encrypted.is_none() {
                entry.encrypted = item.encrypted_content.clone().filter(|e| !e.is_empty());
            }
            if !entry.streamed {
                entry.pending = complete_item_text(kind, item);
                entry.streamed = true;
            }
            if kind == Kind::Message && !entry.cited {
                let annotations = item.content.iter().flat_map(|part| &part.annotations);
                entry.citations.extend(annotations.filter_map(citation_of));
            }
            if kind == Kind::WebSearch {
                entry.search.clone_from(&item.action);
                entry.failed = item.status.as_deref() == Some("failed");
            }
            entry.done = true;
        }
        self.pump();
    }

    fn delta(&mut self, event: &ResponsesEvent, kind: Kind, part: Option<(bool, u64)>) {
        let Some(delta) = event.delta.as_deref().filter(|d| !d.is_empty()) else {
            return;
        };
        let Some(i) = self.find(event.output_index, event.item_id.as_deref(), kind) else {
            return;
        };
        let item = &mut self.items[i];
        if let Some(part) = part {
            if item.part.is_some_and(|seen| seen != part) {
                item.pending.push_str("\n\n");
            }
            item.part = Some(part);
        }
        item.pending.push_str(delta);
        item.streamed = true;
        self.pump();
    }

    /// `response.output_text.annotation.added`: a citation for the message's text.
    fn annotation(&mut self, event: &ResponsesEvent) {
        let Some(citation) = event.annotation.as_ref().and_then(citation_of) else {
            return;
        };
        let Some(i) = self.find(event.output_index, event.item_id.as_deref(), Kind::Message) else {
            return;
        };
        let item = &mut self.items[i];
        item.citations.push(citation);
        item.cited = true;
        self.pump();
    }

    /// A call's complete arguments / input: used when no delta came.
    fn complete_text(&mut self, event: &ResponsesEvent, kind: Kind, text: Option<&str>) {
        let Some(i) = self.find(event.output_index, event.item_id.as_deref(), kind) else {
            return;
        };
        let item = &mut self.items[i];
        if let Some(name) = event.name.as_deref().filter(|n| !n.is_empty())
            && item.name.is_empty()
        {
            name.clone_into(&mut item.name);
        }
        if !item.streamed
            && let Some(text) = text
        {
            item.pending = text.to_owned();
            item.streamed = true;
        }
        self.pump();
    }

    /// Write the earliest unfinished item's news; close items that are done, in order.
    fn pump(&mut self) {
        while self.next < self.items.len() && !self.writer.is_done() {
            let i = self.next;
            if self.items[i].kind != Kind::Other {
                self.write(i);
                if !self.items[i].done {
                    return;
                }
                self.close(i);
            }
            self.items[i].state = State::Closed;
            self.next += 1;
        }
    }

    fn write(&mut self, i: usize) {
        let item = &mut self.items[i];
        let pending = std::mem::take(&mut item.pending);
        match item.kind {
            Kind::Message => {
                if self.writer.text_delta(pending) {
                    item.state = State::Writing;
                }
                for citation in item.citations.drain(..) {
                    self.writer.citation(citation);
                    item.state = State::Writing;
                }
            }
            Kind::Reasoning => {
                if self.writer.thinking_delta(pending) {
                    item.state = State::Writing;
                }
            }
            Kind::FunctionCall | Kind::CustomToolCall => {
                let custom = item.kind == Kind::CustomToolCall;
                if item.state == State::Waiting {
                    let id = if item.call_id.is_empty() {
                        item.id.clone().unwrap_or_default()
                    } else {
                        item.call_id.clone()
                    };
                    if !self.writer.open_tool_use(id, item.name.clone()) {
                        // No name yet: keep the arguments until it comes.
                        item.pending = pending;
                        return;
                    }
                    item.state = State::Writing;
                    self.tool_calls += 1;
                    if custom {
                        self.writer.input_json_delta("{\"input\":\"");
                    }
                }
                let json = if custom {
                    json_string_content(&pending)
                } else {
                    pending
                };
                self.writer.input_json_delta(json);
            }
            Kind::WebSearch | Kind::Other => {}
        }
    }

    fn close(&mut self, i: usize) {
        let item = &mut self.items[i];
        match (item.kind, item.state) {
            (Kind::WebSearch, _) => {
                let search = item.search.take().unwrap_or_default();
                if !matches!(search.kind.as_str(), "search" | "") {
                    // A step of a search (opening a page, finding in it), not a search.
                    return;
                }
                let upstream_id = item.id.clone().unwrap_or_default();
                let id = if upstream_id.is_empty() {
                    self.writer.next_id("srvtoolu_")
                } else {
                    server_tool_use_id(&upstream_id)
                };
                let query = search.query.or_else(|| search.queries.first().cloned());
                let input = query.map_or_else(|| json!({}), |q| json!({"query": q}));
                let content = if item.failed {
                    search_error_content("unavailable")
                } else {
                    let pages = search
                        .sources
                        .iter()
                        .filter_map(|s| s.url.as_deref())
                        .map(|url| (url, None));
                    Value::Array(search_result_content(pages))
                };
                self.writer.web_search(id, &input, content);
            }
            (Kind::Reasoning, state) if item.encrypted.is_some() => {
                if state != State::Writing {
                    self.writer.open_thinking();
                }
                let encrypted = item.encrypted.as_deref().unwrap_or_default();
                self.writer.signature_delta(reasoning_signature(encrypted));
                self.writer.close_block();
            }
            (Kind::CustomToolCall, State::Writing) => {
                self.writer.input_json_delta("\"}");
                self.writer.close_block();
            }
            (Kind::FunctionCall | Kind::CustomToolCall, State::Waiting) => {
                // A call that never got a name cannot be a tool_use block: keep its text.
                let arguments = std::mem::take(&mut item.pending);
                if !arguments.is_empty() {
                    self.writer.text_delta(format!(
                        "[tool call without a name; arguments: {arguments}]"
                    ));
                    self.writer.close_block();
                }
            }
            (_, State::Writing) => self.writer.close_block(),
            _ => {}
        }
    }

    /// `response.completed` / `.incomplete` (or a whole response body): write everything, end.
    fn end(&mut self, response: ResponseObject, incomplete: bool) {
        if self.items.is_empty() {
            // A server that sent only the final response (or a non-streaming body).
            for (position, item) in response.output.iter().enumerate() {
                self.item(u64::try_from(position).ok(), item, true);
            }
        }
        for item in &mut self.items {
            item.done = true;
        }
        self.pump();
        let reason = response
            .incomplete_details
            .as_ref()
            .and_then(|d| d.reason.as_deref());
        let stop_reason = match (incomplete, reason) {
            (true, Some("max_output_tokens")) => StopReason::MaxTokens,
            (true, Some("content_filter")) => StopReason::Refusal,
            _ if self.tool_calls > 0 => StopReason::ToolUse,
            _ => StopReason::EndTurn,
        };
        let upstream = response.usage.map_or_else(UpstreamUsage::default, |u| {
            let details = u.input_tokens_details.unwrap_or_default();
            UpstreamUsage {
                prompt_tokens: u.input_tokens,
                cached_tokens: details.cached_tokens,
                cache_write_tokens: details.cache_write_tokens,
                output_tokens: u.output_tokens,
                web_search_requests: None,
            }
        });
        let usage = self.writer.usage(&upstream);
        self.writer.finish(stop_reason, usage);
    }
}

impl SseTranslate for ResponsesStreamTranslator {
    fn writer(&mut self) -> &mut AnthropicWriter {
        &mut self.writer
    }

    fn body(&mut self) -> &mut SseBody {
        &mut self.body
    }

    fn frame(&mut self, event_name: Option<&str>, data: &str) {
        match serde_json::from_str::<ResponsesEvent>(data) {
            Ok(mut event) => {
                if event.kind.is_empty()
                    && let Some(name) = event_name
                {
                    name.clone_into(&mut event.kind);
                }
                if !event.kind.is_empty() {
                    self.recognised += 1;
                    self.event(event);
                } else if let Some(error) = &event.error {
                    self.writer.fail(upstream_error(error));
                }
            }
            Err(_) if event_name == Some("error") => {
                self.writer.fail(upstream_error(&ErrorObject {
                    message: Some(data.to_owned()),
                    ..ErrorObject::default()
                }));
            }
            Err(_) => {}
        }
    }

    fn done_marker(&mut self) {
        self.body_ended();
    }

    fn held(&self) -> usize {
        self.items
            .iter()
            .map(|item| item.pending.len() + item.encrypted.as_ref().map_or(0, String::len))
            .sum()
    }

    fn clear(&mut self) {
        self.items.clear();
    }

    /// A body that is not SSE: a whole Responses JSON answer or an error object.
    fn plain_body(&mut self, raw: &[u8]) {
        let value: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
        if value.get("output").is_some() || value.get("object") == Some(&Value::from("response")) {
            let response: ResponseObject = serde_json::from_value(value).unwrap_or_default();
            match response.status.as_deref() {
                Some("failed") => {
                    let error = response.error.unwrap_or_default();
                    self.writer.fail(upstream_error(&error));
                }
                Some("incomplete") => self.end(response, true),
                _ => self.end(response, false),
            }
        } else if let Some(error) = value.get("error") {
            let error = serde_json::from_value::<ErrorObject>(error.clone())
                .ok()
                .filter(|e| e.message.is_some() || e.code.is_some())
                .unwrap_or_else(|| ErrorObject {
                    message: Some(
                        error
                            .as_str()
                            .map_or_else(|| error.to_string(), str::to_owned),
                    ),
                    ..ErrorObject::default()
                });
            self.writer.fail(upstream_error(&error));
        } else {
            let shown: String = String::from_utf8_lossy(raw).chars().take(200).collect();
            self.writer.fail(ApiError::new(
                ErrorKind::Api,
                format!("the upstream's response was not an OpenAI Responses stream: {shown:?}"),
            ));
        }
    }

    /// The body ended (or `[DONE]` came) before a terminal event.
    fn body_ended(&mut self) {
        if self.writer.is_done() {
            return;
        }
        let unreadable = self.body.frames().saturating_sub(self.recognised);
        let message = if self.body.frames() == 0 {
            String::from("the upstream closed the connection without sending a response")
        } else if self.recognised == 0 && unreadable > 0 {
            format!(
                "the upstream's response was not an OpenAI Responses stream ({unreadable} unreadable events)"
            )
        } else {
            String::from(
                "the upstream stream ended before the response was complete (no response.completed)",
            )
        };
        self.writer.fail(ApiError::new(ErrorKind::Api, message));
    }
}

/// The text a complete item carries (used when no delta came for it).
fn complete_item_text(kind: Kind, item: &OutputItem) -> String {
    let joined = |parts: &[TextPart], separator: &str| {
        parts
            .iter()
            .map(TextPart::text)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(separator)
    };
    match kind {
        Kind::Message => joined(&item.content, ""),
        Kind::Reasoning if item.summary.is_empty() => joined(&item.content, "\n\n"),
        Kind::Reasoning => joined(&item.summary, "\n\n"),
        Kind::FunctionCall => item.arguments.clone().unwrap_or_default(),
        Kind::CustomToolCall => item.input.clone().unwrap_or_default(),
        Kind::WebSearch | Kind::Other => String::new(),
    }
}

/// `raw` escaped as the inside of a JSON string (a fragment of the custom tool input).
/// A `url_citation` as Anthropic's `web_search_result_location` (other annotations: none).
fn citation_of(annotation: &Annotation) -> Option<Value> {
    let url = annotation.url.as_deref().filter(|u| !u.is_empty())?;
    (annotation.kind == "url_citation").then(|| citation(url, annotation.title.as_deref()))
}

fn json_string_content(raw: &str) -> String {
    let quoted = Value::String(raw.to_owned()).to_string();
    quoted
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or_default()
        .to_owned()
}

/// An upstream error as an Anthropic error (the table in the module docs).
fn upstream_error(error: &ErrorObject) -> ApiError {
    let code = [error.code.as_deref(), error.kind.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase();
    let message = error
        .message
        .clone()
        .or_else(|| error.code.clone())
        .unwrap_or_else(|| String::from("the response failed without details"));
    let has = |words: &[&str]| words.iter().any(|w| code.contains(w));
    if let Some(overflow) = crate::anthropic::overflow::recognise(&message, Some(&code), None) {
        return ApiError::new(ErrorKind::InvalidRequest, overflow.message(&message));
    }
    let kind = if has(&["insufficient_quota", "billing"]) {
        ErrorKind::Billing
    } else if has(&["rate_limit"]) {
        ErrorKind::RateLimit
    } else if has(&["overloaded", "slow_down"]) {
        ErrorKind::Overloaded
    } else if has(&["timeout"]) {
        ErrorKind::Timeout
    } else if has(&["api_key", "authentication"]) {
        ErrorKind::Authentication
    } else if has(&["permission"]) {
        ErrorKind::Permission
    } else if has(&["invalid", "not_found", "bad_request"]) {
        ErrorKind::InvalidRequest
    } else {
        ErrorKind::Api
    };
    ApiError::new(kind, format!("upstream error: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(code: &str) -> ErrorKind {
        upstream_error(&ErrorObject {
            code: Some(code.into()),
            ..ErrorObject::default()
        })
        .kind
    }

    #[test]
    fn error_table() {
        assert_eq!(kind("rate_limit_exceeded"), ErrorKind::RateLimit);
        assert_eq!(kind("insufficient_quota"), ErrorKind::Billing);
        assert_eq!(kind("server_error"), ErrorKind::Api);
        assert_eq!(kind("invalid_prompt"), ErrorKind::InvalidRequest);
        let e = upstream_error(&ErrorObject {
            code: Some("context_length_exceeded".into()),
            message: Some("Your input exceeds the context window.".into()),
            ..ErrorObject::default()
        });
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert!(e.message.starts_with("prompt is too long: "));
    }

    #[test]
    fn custom_input_is_escaped_piecewise() {
        assert_eq!(json_string_content("a\"b\n"), "a\\\"b\\n");
    }
}
