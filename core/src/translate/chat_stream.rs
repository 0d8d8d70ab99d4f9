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
//! The events are written through one [`AnthropicWriter`] (message_start, block indices,
//! signatures, closing a cut tool input into JSON, message_delta/stop or error); this module
//! decides only what the upstream said. Blocks: at most one Anthropic block is open. Reasoning
//! opens a thinking block, text a text block, a tool call a tool_use block; opening one closes
//! the previous. Tool calls are keyed by
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

use serde_json::{Value, json};

use crate::anthropic::events::{ApiError, ErrorKind, StopReason, StreamEvent};
use crate::openai::chat::{ChatChunk, ChatUsage, ChunkChoice, ToolCallDelta};
use crate::server_tools::hosted::{citation, search_result_content};
use crate::translate::writer::{AnthropicWriter, BlockKind, UpstreamUsage, is_complete_json};
use crate::translate::{SseBody, SseTranslate};

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

/// The translator for one upstream response.
#[derive(Debug)]
pub struct ChatStreamTranslator {
    body: SseBody,
    writer: AnthropicWriter,
    /// `finish_reason` seen: blocks are closed, waiting for usage and `[DONE]`.
    finishing: bool,
    /// The call whose tool_use block is open.
    open_call: Option<usize>,
    calls: Vec<Call>,
    deferred: Vec<(BlockKind, String)>,
    finish_reason: Option<String>,
    usage: Option<ChatUsage>,
    /// The chunk each frame is read into, kept from frame to frame (its choices are emptied
    /// and filled again, so reading a chunk allocates only its strings). Boxed: a frame takes
    /// it out and puts it back, and moving the chunk itself each time cost 3% of a chunk.
    read: Option<Box<ChatChunk>>,
    unreadable: usize,
    /// `message_start` waits for the first chunk, which reports the usage it announces.
    usage_on_first_chunk: bool,
    /// Pages the upstream's own web search found (OpenRouter's annotations), not yet written
    /// as a search: `(url, title)`.
    found: Vec<(String, Option<String>)>,
    /// Pages already written in a search (a later citation of one is no new search).
    listed: Vec<String>,
    /// Citations of text not yet written (a text block was not open when they came).
    held_citations: Vec<Value>,
}

impl ChatStreamTranslator {
    /// A translator reporting `model` to the client, with an input-token estimate for
    /// `message_start` and a seed for invented ids.
    #[must_use]
    pub fn new(model: String, input_estimate: u32, id_seed: u64) -> Self {
        Self {
            body: SseBody::default(),
            writer: AnthropicWriter::new(model, input_estimate, id_seed),
            finishing: false,
            open_call: None,
            calls: Vec::new(),
            deferred: Vec::new(),
            finish_reason: None,
            usage: None,
            read: None,
            found: Vec::new(),
            listed: Vec::new(),
            held_citations: Vec::new(),
            unreadable: 0,
            usage_on_first_chunk: false,
        }
    }

    /// The upstream reports usage on its first chunk (vLLM's `continuous_usage_stats`):
    /// `message_start` is written with that chunk and announces the real input and cache tokens,
    /// the same for any split of the bytes.
    pub fn start_with_first_frame(&mut self, usage_on_first_chunk: bool) {
        self.usage_on_first_chunk = usage_on_first_chunk;
    }

    /// Feed upstream bytes; returns the events they complete. The first call returns
    /// `message_start`, even for empty input, so a host can send it before the model speaks
    /// (with [`Self::start_with_first_frame`], the first call that completes a frame does).
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<StreamEvent> {
        self.feed_body(chunk)
    }

    /// The upstream failed: end with an `error` event.
    pub fn fail(&mut self, error: ApiError) -> Vec<StreamEvent> {
        self.writer.fail(error);
        self.writer.take()
    }

    /// The upstream body ended: complete the message, or end with an error if it was cut short.
    pub fn finish(&mut self) -> Vec<StreamEvent> {
        self.finish_body()
    }

    fn produced_anything(&self) -> bool {
        self.writer.blocks_opened() > 0 || !self.calls.is_empty()
    }

    /// Still reading content (not yet finishing, not done).
    fn streaming(&self) -> bool {
        !self.finishing && !self.writer.is_done()
    }

    /// One chunk, read by reference: its choices are a few hundred bytes each, and moving them
    /// from call to call showed in a profile (`memmove` under `frame`). Only the strings are
    /// taken.
    fn chunk(&mut self, chunk: &mut ChatChunk) {
        if chunk.usage.is_some() {
            self.usage = chunk.usage.take().map(|usage| *usage);
            self.writer.announce_input(&self.upstream_usage());
        }
        self.writer.start();
        if let Some(error) = &chunk.error {
            self.writer.fail(upstream_error(error));
            return;
        }
        for choice in chunk.choices.iter_mut() {
            if choice.index == 0 {
                self.choice(choice);
            }
        }
    }

    fn choice(&mut self, choice: &mut ChunkChoice) {
        let delta = &mut choice.delta;
        let reasoning = delta
            .reasoning_content
            .take()
            .filter(|r| !r.is_empty())
            .or(delta.reasoning.take());
        if self.streaming() {
            let annotations = delta.annotations.iter().flat_map(|a| a.iter());
            for annotation in annotations.chain(choice.annotations.iter().flat_map(|a| a.iter())) {
                self.annotation(annotation);
            }
            let says_more = reasoning.as_ref().is_some_and(|r| !r.is_empty())
                || delta.content.as_ref().is_some_and(|t| !t.is_empty())
                || delta.refusal.as_ref().is_some_and(|t| !t.is_empty())
                || delta.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
            if says_more {
                self.write_search();
            }
            if let Some(reasoning) = reasoning.filter(|r| !r.is_empty()) {
                self.segment(BlockKind::Thinking, reasoning);
            }
            if let Some(text) = delta.content.take().filter(|t| !t.is_empty()) {
                self.segment(BlockKind::Text, text);
            }
            if let Some(refusal) = delta.refusal.take().filter(|t| !t.is_empty()) {
                self.segment(BlockKind::Text, refusal);
            }
            let fragments = delta.tool_calls.take().map(<[_]>::into_vec);
            for (position, fragment) in fragments.into_iter().flatten().enumerate() {
                self.tool_fragment(position, fragment);
            }
        }
        if let Some(reason) = choice.finish_reason.take().filter(|r| !r.is_empty()) {
            if self.streaming() {
                self.close_everything();
                self.write_search();
                self.finishing = true;
            }
            self.finish_reason = Some(reason);
        }
    }

    /// A `url_citation` annotation: the page is one the upstream's web search found; a span
    /// of the text cites it (a citation for the open text block, or the next one).
    fn annotation(&mut self, annotation: &Value) {
        if annotation.get("type").and_then(Value::as_str) != Some("url_citation") {
            return;
        }
        let cited = annotation.get("url_citation").unwrap_or(annotation);
        let Some(url) = cited
            .get("url")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
        else {
            return;
        };
        let title = cited
            .get("title")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty());
        if !self.found.iter().any(|(seen, _)| seen == url) && !self.listed.iter().any(|u| u == url)
        {
            self.found.push((url.to_owned(), title.map(str::to_owned)));
        }
        let index = |key: &str| cited.get(key).and_then(Value::as_u64).unwrap_or(0);
        if index("end_index") > index("start_index") {
            let citation = citation(url, title);
            if self.writer.open_block() == Some(BlockKind::Text) {
                self.writer.citation(citation);
            } else {
                self.held_citations.push(citation);
            }
        }
    }

    /// The pages found so far, as one web search the upstream ran (`server_tool_use` +
    /// `web_search_tool_result`); the citations held for them open the next text block. Not
    /// while a tool call's arguments are incomplete (it cannot be cut).
    fn write_search(&mut self) {
        if self.found.is_empty() || self.open_tool_incomplete() {
            return;
        }
        self.close_open();
        let found = std::mem::take(&mut self.found);
        self.listed.extend(found.iter().map(|(url, _)| url.clone()));
        let pages = found
            .iter()
            .map(|(url, title)| (url.as_str(), title.as_deref()));
        let content = Value::Array(search_result_content(pages));
        let id = self.writer.next_id("srvtoolu_");
        // The upstream does not say what it searched for.
        self.writer.web_search(id, &json!({}), content);
        for citation in std::mem::take(&mut self.held_citations) {
            self.writer.citation(citation);
        }
    }

    /// Text or reasoning: appended to the open block of its kind, or a new block.
    fn segment(&mut self, kind: BlockKind, text: String) {
        if self.writer.open_block() != Some(kind) {
            if self.open_tool_incomplete() {
                match self.deferred.last_mut() {
                    Some((k, buffered)) if *k == kind => buffered.push_str(&text),
                    _ => self.deferred.push((kind, text)),
                }
                return;
            }
            self.close_open();
        }
        self.write_segment(kind, text);
    }

    fn write_segment(&mut self, kind: BlockKind, text: String) {
        if kind == BlockKind::Thinking {
            self.writer.thinking_delta(text);
        } else {
            self.writer.text_delta(text);
        }
    }

    /// An open call may still receive fragments until its arguments are a complete JSON value
    /// (empty arguments are not complete: the first fragment may simply not have come yet).
    fn open_tool_incomplete(&self) -> bool {
        self.open_call
            .and_then(|c| self.calls.get(c))
            .is_some_and(|call| call.args.trim().is_empty() || !is_complete_json(&call.args))
    }

    fn tool_fragment(&mut self, position: usize, fragment: ToolCallDelta) {
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
                    .unwrap_or_else(|| self.writer.next_id("toolu_"));
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
                    self.writer.input_json_delta(args);
                }
            }
            CallState::Pending => {
                entry.args.push_str(&args);
                self.advance_calls();
            }
            // A complete call cannot be extended; trailing whitespace is all that can arrive.
            CallState::Closed => {}
        }
    }

    /// Open pending calls in order of appearance while the block slot can be taken.
    fn advance_calls(&mut self) {
        while let Some(next) = self
            .calls
            .iter()
            .position(|c| c.state == CallState::Pending && !c.name.is_empty())
        {
            if self.open_tool_incomplete() {
                return;
            }
            self.close_open();
            self.open_call(next);
        }
    }

    /// Open call `c`'s tool_use block with the arguments buffered so far.
    fn open_call(&mut self, c: usize) {
        let call = &mut self.calls[c];
        call.state = CallState::Open;
        self.writer
            .open_tool_use(call.id.clone(), call.name.clone());
        self.writer.input_json_delta(call.args.clone());
        self.open_call = Some(c);
    }

    fn close_open(&mut self) {
        if let Some(c) = self.open_call.take() {
            self.calls[c].state = CallState::Closed;
            // Written; not needed any more.
            self.calls[c].args = String::new();
        }
        self.writer.close_block();
    }

    /// Close the open block, emit every buffered call and deferred text, in order.
    fn close_everything(&mut self) {
        loop {
            self.close_open();
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
                    self.deferred.push((BlockKind::Text, text));
                    continue;
                }
                self.open_call(next);
                continue;
            }
            break;
        }
        for (kind, text) in std::mem::take(&mut self.deferred) {
            self.write_segment(kind, text);
            self.close_open();
        }
    }

    /// `[DONE]`: the upstream is finished.
    fn done(&mut self) {
        if self.writer.is_done() {
            return;
        }
        if !self.finishing
            && self.finish_reason.is_none()
            && !self.produced_anything()
            && self.unreadable > 0
        {
            self.writer.fail(ApiError::new(
                ErrorKind::Api,
                "the upstream's response was not an OpenAI Chat Completions stream",
            ));
        } else {
            self.complete();
        }
    }

    fn complete(&mut self) {
        self.close_everything();
        self.write_search();
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
        let usage = self.writer.usage(&self.upstream_usage());
        self.writer.finish(stop_reason, usage);
    }

    /// What the upstream reported last.
    fn upstream_usage(&self) -> UpstreamUsage {
        self.usage
            .as_ref()
            .map_or_else(UpstreamUsage::default, |u| {
                let details = u.prompt_tokens_details.as_ref();
                UpstreamUsage {
                    prompt_tokens: u.prompt_tokens,
                    cached_tokens: details.and_then(|d| d.cached_tokens),
                    cache_write_tokens: details.and_then(|d| d.cache_write_tokens),
                    output_tokens: u.completion_tokens,
                    web_search_requests: u
                        .server_tool_use_details
                        .as_ref()
                        .and_then(|d| d.get("web_search_requests"))
                        .and_then(Value::as_u64),
                }
            })
    }
}

impl SseTranslate for ChatStreamTranslator {
    fn starts_on_first_frame(&self) -> bool {
        self.usage_on_first_chunk
    }

    fn writer(&mut self) -> &mut AnthropicWriter {
        &mut self.writer
    }

    fn body(&mut self) -> &mut SseBody {
        &mut self.body
    }

    fn frame(&mut self, event: Option<&str>, data: &str) {
        let mut chunk = self.read.take().unwrap_or_default();
        let parsed = chunk.read(data);
        if parsed.is_err() {
            self.writer.start();
        }
        match parsed {
            Ok(()) => self.chunk(&mut chunk),
            // An `event: error` frame with a non-chunk body is still an error.
            Err(_) if event == Some("error") => {
                self.writer
                    .fail(upstream_error(&Value::String(data.to_owned())));
            }
            Err(_) => self.unreadable += 1,
        }
        self.read = Some(chunk);
    }

    fn done_marker(&mut self) {
        self.writer.start();
        self.done();
    }

    fn held(&self) -> usize {
        let calls: usize = self
            .calls
            .iter()
            .filter(|c| c.state != CallState::Closed)
            .map(|c| c.args.len() + c.name.len())
            .sum();
        calls
            + self
                .deferred
                .iter()
                .map(|(_, text)| text.len())
                .sum::<usize>()
    }

    fn clear(&mut self) {
        self.calls.clear();
        self.deferred.clear();
        self.open_call = None;
    }

    /// A body that is not SSE: a plain Chat Completions JSON answer or an error object.
    fn plain_body(&mut self, raw: &[u8]) {
        let mut chunk = ChatChunk::default();
        match chunk.read_slice(raw) {
            Ok(()) if chunk.error.is_some() || !chunk.choices.is_empty() => {
                self.chunk(&mut chunk);
                if !self.writer.is_done() {
                    self.done();
                }
            }
            _ => {
                let shown: String = String::from_utf8_lossy(raw).chars().take(200).collect();
                self.writer.fail(ApiError::new(
                    ErrorKind::Api,
                    format!("the upstream's response was not an OpenAI Chat Completions stream: {shown:?}"),
                ));
            }
        }
    }

    /// The body ended: complete the message, or fail if it was cut short.
    fn body_ended(&mut self) {
        if self.finishing {
            self.complete();
            return;
        }
        let message = if self.unreadable > 0 && !self.produced_anything() {
            format!(
                "the upstream's response was not an OpenAI Chat Completions stream ({} unreadable events)",
                self.unreadable
            )
        } else if self.body.frames() == 0 {
            String::from("the upstream closed the connection without sending a response")
        } else {
            String::from("the upstream stream ended before the model finished (no finish_reason)")
        };
        self.writer.fail(ApiError::new(ErrorKind::Api, message));
    }
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
    if let Some(overflow) =
        crate::anthropic::overflow::recognise(&message, Some(&kind_text), Some(error))
    {
        return ApiError::new(ErrorKind::InvalidRequest, overflow.message(&message));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Issue 33 item 3: vLLM's `continuous_usage_stats` reports the prompt on the first chunk;
    /// `message_start` announces it (and the cache hit) instead of the estimate.
    #[test]
    fn usage_known_before_the_first_block_is_announced_in_message_start() {
        let usage = |prompt: u32, done: u32| {
            format!(
                r#""usage":{{"prompt_tokens":{prompt},"completion_tokens":{done},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":1000}}}}"#,
                prompt + done
            )
        };
        let mut t = ChatStreamTranslator::new("claude-x".into(), 6, 1);
        t.start_with_first_frame(true);
        let mut events = t.feed(
            format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}}}}],{}}}\n\n\
                 data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"Hi\"}},\"finish_reason\":\"stop\"}}],{}}}\n\ndata: [DONE]\n\n",
                usage(1234, 0),
                usage(1234, 1)
            )
            .as_bytes(),
        );
        events.extend(t.finish());
        let StreamEvent::MessageStart { message } = &events[0] else {
            panic!("{events:?}");
        };
        assert_eq!(message.usage.input_tokens, 234);
        assert_eq!(message.usage.cache_read_input_tokens, Some(1000));
        assert_eq!(message.usage.output_tokens, 0);

        // Only at the end (OpenAI), after message_start went out: the estimate stays there.
        let mut t = ChatStreamTranslator::new("claude-x".into(), 6, 1);
        t.start_with_first_frame(true);
        let events = t.feed(
            b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n",
        );
        let later = t.feed(
            format!(
                "data: {{\"choices\":[],{}}}\n\ndata: [DONE]\n\n",
                usage(1234, 1)
            )
            .as_bytes(),
        );
        assert!(
            !later
                .iter()
                .any(|e| matches!(e, StreamEvent::MessageStart { .. }))
        );
        let StreamEvent::MessageStart { message } = &events[0] else {
            panic!("{events:?}");
        };
        assert_eq!(message.usage.input_tokens, 6);
    }
}
