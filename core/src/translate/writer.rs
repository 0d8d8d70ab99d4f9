//! The one Anthropic stream writer: every translator that produces Anthropic events writes them
//! through an [`AnthropicWriter`], so "well-formed by construction" is one type, not a convention.
//!
//! A translator decides *what* the model said (text, reasoning, a tool call, how it ended); the
//! writer decides *how* that becomes events: `message_start` first and once, blocks opened and
//! closed in index order 0..n with at most one open, deltas only to the open block and of its
//! kind, `message_delta` + `message_stop` last, or an `error` event and nothing after it.
//!
//! ```text
//!             start() / any write
//!   Idle ───────────────────────────► Between ◄──────────── close_block() ───────┐
//!     │                                │  open_text() / open_thinking() /          │
//!     │                                │  open_tool_use() / text_delta() /         │
//!     │                                ▼  thinking_delta()                         │
//!     │                              Open(kind) ── delta of that kind ──► Open(kind)
//!     │                                │  opening another block closes this one first
//!     │                                │
//!     │        finish(stop, usage): closes the open block, message_delta, message_stop
//!     │                                ▼
//!     │                              Done ◄── fail(error): an error event (from any phase)
//!     └──────────────── fail(error) ───┘
//! ```
//!
//! Rules the writer keeps so callers cannot break them:
//! - `text_delta`/`thinking_delta` open a block of their kind when another (or none) is open;
//!   empty deltas write nothing.
//! - `input_json_delta` and `signature_delta` are refused (return `false`) unless a tool_use
//!   (resp. an unsigned thinking) block is open: they cannot invent a tool name or a thinking block.
//! - A thinking block always closes with a signature (clients require one): the caller's, or an
//!   invented `bridge-sig-…` id. After a signature, more reasoning opens a new thinking block.
//! - A tool_use block's input is closed into parseable JSON when the block closes (a cut-off
//!   string, array or object is completed), and a tool_use needs a non-empty name (else refused).
//! - Nothing is written after `finish` or `fail`. `fail` does not write `message_start` first:
//!   an error may be a stream's only event.
//!
//! Ids come from the writer's [`IdSource`] (seeded by the caller): the message id, invented
//! signatures, and whatever the translator asks [`AnthropicWriter::next_id`] for, in call order.
//!
//! ```
//! use bridge_core::anthropic::events::{StopReason, StreamEvent};
//! use bridge_core::anthropic::stream::Validator;
//! use bridge_core::translate::writer::{AnthropicWriter, UpstreamUsage};
//! let mut w = AnthropicWriter::new("claude-x".into(), 12, 7);
//! w.thinking_delta("Let me look.");
//! w.text_delta("Listing files."); // closes the thinking block (with a signature) first
//! let id = w.next_id("toolu_");
//! assert!(w.open_tool_use(id, "Bash".into()));
//! assert!(w.input_json_delta("{\"command\":\"l"));
//! let usage = w.usage(&UpstreamUsage { prompt_tokens: Some(40), cached_tokens: Some(30), ..Default::default() });
//! w.finish(StopReason::ToolUse, usage); // repairs the cut JSON, closes, ends the message
//! let events = w.take();
//! let mut v = Validator::new();
//! for e in &events { v.push(e).unwrap(); }
//! v.finish().unwrap();
//! assert!(matches!(events.last(), Some(StreamEvent::MessageStop)));
//! assert!(!w.text_delta("too late") && w.take().is_empty());
//! ```

use serde_json::Value;

use crate::anthropic::events::{
    ApiError, BlockStart, CacheCreation, Delta, MessageDeltaBody, MessageShell, ServerToolUsage,
    StopReason, StreamEvent, Usage,
};
use crate::ids::IdSource;
use crate::tokens::estimate_text;
use crate::translate::tool_names::ToolNames;

/// The most events a vector given back to [`AnthropicWriter::recycle`] may have room for to be
/// kept (136 bytes each).
pub const RECYCLED_EVENTS_AT_MOST: usize = 64;

/// The kind of the open content block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A text block.
    Text,
    /// A thinking block.
    Thinking,
    /// A tool_use block.
    ToolUse,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Open {
    Text,
    Thinking {
        signed: bool,
    },
    /// The input JSON written so far (to close it into parseable JSON).
    ToolUse {
        input: String,
    },
    /// A block written whole by one call (a server tool's use or result).
    Whole,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Nothing written yet.
    Idle,
    /// `message_start` written, no block open.
    Between,
    /// One block is open at index `next_index`.
    Open(Open),
    /// `message_stop` or `error` written: nothing follows.
    Done,
}

/// Upstream token counts, as OpenAI-style servers report them (prompt tokens include cached).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamUsage {
    /// All prompt tokens, cached included; `None` or 0 means unknown (the estimate is used).
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens read from a cache.
    pub cached_tokens: Option<u64>,
    /// Prompt tokens written to a cache.
    pub cache_write_tokens: Option<u64>,
    /// Output tokens (reasoning included); `None` means unknown (estimated from the output).
    pub output_tokens: Option<u64>,
    /// Web searches the upstream says it ran (OpenRouter), when it says: the usage reports the
    /// larger of this and the searches written ([`AnthropicWriter::web_search`]).
    pub web_search_requests: Option<u64>,
}

/// Writes one well-formed Anthropic event stream; see the module docs.
#[derive(Debug)]
pub struct AnthropicWriter {
    ids: IdSource,
    /// Tools the upstream knows by other names ([`ToolNames`]): calls get the client's back.
    tool_names: ToolNames,
    model: String,
    input_tokens: u32,
    phase: Phase,
    next_index: u32,
    output_chars: usize,
    out: Vec<StreamEvent>,
    /// What the upstream reported of its input before `message_start` was written.
    early_usage: Option<Usage>,
    /// Web searches the upstream ran itself ([`AnthropicWriter::web_search`]), for the usage.
    web_searches: u32,
}

impl AnthropicWriter {
    /// A writer for a message reporting `model`, announcing `input_tokens` (at least 1) in
    /// `message_start`, with ids drawn from `id_seed`.
    #[must_use]
    pub fn new(model: String, input_tokens: u32, id_seed: u64) -> Self {
        Self {
            ids: IdSource::new(id_seed),
            tool_names: ToolNames::default(),
            model,
            input_tokens: input_tokens.max(1),
            phase: Phase::Idle,
            next_index: 0,
            output_chars: 0,
            out: Vec::new(),
            early_usage: None,
            web_searches: 0,
        }
    }

    /// The upstream's input usage, known before `message_start` is written (vLLM's
    /// `continuous_usage_stats` puts it on every chunk, the first one included):
    /// `message_start` announces it instead of the estimate — input and cache tokens, which
    /// clients such as LangChain read from `message_start` alone. After `message_start`, or
    /// without a prompt count, it changes nothing.
    pub fn announce_input(&mut self, upstream: &UpstreamUsage) {
        if self.phase == Phase::Idle && upstream.prompt_tokens.is_some_and(|p| p > 0) {
            self.early_usage = Some(Usage {
                output_tokens: 0,
                ..self.usage(upstream)
            });
        }
    }

    /// Tools the upstream was offered under other names: a call by such a name is written with
    /// the client's name.
    pub fn rename_tools(&mut self, names: ToolNames) {
        self.tool_names = names;
    }

    /// The next id from the writer's sequence (e.g. `toolu_…` for a call without an id).
    pub fn next_id(&mut self, prefix: &str) -> String {
        self.ids.next_id(prefix)
    }

    /// Bytes the writer holds for the open block (a tool_use block's input so far).
    #[must_use]
    pub fn held(&self) -> usize {
        match &self.phase {
            Phase::Open(Open::ToolUse { input }) => input.len(),
            _ => 0,
        }
    }

    /// The events written since the last call.
    pub fn take(&mut self) -> Vec<StreamEvent> {
        std::mem::take(&mut self.out)
    }

    /// Takes back a vector [`Self::take`] returned, to write the next events into (emptied; a
    /// translator fed a chunk at a time then allocates no vector per chunk). One that held
    /// more than [`RECYCLED_EVENTS_AT_MOST`] events is dropped: a stream keeps no large vector
    /// for one large call.
    pub fn recycle(&mut self, mut spare: Vec<StreamEvent>) {
        if self.out.capacity() == 0 && spare.capacity() <= RECYCLED_EVENTS_AT_MOST {
            spare.clear();
            self.out = spare;
        }
    }

    /// The input-token estimate announced in `message_start` (at least 1).
    #[must_use]
    pub fn input_tokens(&self) -> u32 {
        self.input_tokens
    }

    /// Characters of the deltas written so far: text, reasoning and tool inputs (for an output
    /// estimate when the upstream reports none).
    #[must_use]
    pub fn output_chars(&self) -> usize {
        self.output_chars
    }

    /// How many blocks were opened so far.
    #[must_use]
    pub fn blocks_opened(&self) -> u32 {
        match self.phase {
            Phase::Open(_) => self.next_index + 1,
            _ => self.next_index,
        }
    }

    /// The kind of the open block, if one is open.
    #[must_use]
    pub fn open_block(&self) -> Option<BlockKind> {
        match &self.phase {
            Phase::Open(Open::Text) => Some(BlockKind::Text),
            Phase::Open(Open::Thinking { .. }) => Some(BlockKind::Thinking),
            Phase::Open(Open::ToolUse { .. }) => Some(BlockKind::ToolUse),
            _ => None,
        }
    }

    /// Whether `message_stop` or `error` was written.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Write `message_start` unless it was written (or the stream is done).
    pub fn start(&mut self) {
        if self.phase != Phase::Idle {
            return;
        }
        self.phase = Phase::Between;
        let id = self.ids.next_id("msg_");
        let mut message = MessageShell::new(id, self.model.clone(), self.input_tokens);
        if let Some(usage) = self.early_usage.take() {
            message.usage = usage;
        }
        self.out.push(StreamEvent::MessageStart {
            message: Box::new(message),
        });
    }

    /// Open a text block (closing the open one).
    pub fn open_text(&mut self) {
        self.open(
            Open::Text,
            BlockStart::Text {
                text: String::new(),
            },
        );
    }

    /// Open a thinking block (closing the open one).
    pub fn open_thinking(&mut self) {
        self.open(
            Open::Thinking { signed: false },
            BlockStart::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
        );
    }

    /// Open a tool_use block (closing the open one). An empty `id` gets a `toolu_…` id; an empty
    /// `name` is refused (`false`, nothing written): a tool_use block needs a name.
    pub fn open_tool_use(&mut self, id: String, name: String) -> bool {
        if name.is_empty() || self.is_done() {
            return false;
        }
        let id = if id.is_empty() {
            self.ids.next_id("toolu_")
        } else {
            id
        };
        let name = if self.tool_names.is_empty() {
            name
        } else {
            self.tool_names.client(&name).to_owned()
        };
        self.open(
            Open::ToolUse {
                input: String::new(),
            },
            BlockStart::ToolUse {
                id,
                name,
                input: Value::Object(serde_json::Map::new()),
            },
        );
        true
    }

    /// Append text, opening a text block unless one is open. Returns whether it was written.
    pub fn text_delta(&mut self, text: impl Into<String>) -> bool {
        let text = text.into();
        if text.is_empty() || self.is_done() {
            return false;
        }
        if self.open_block() != Some(BlockKind::Text) {
            self.open_text();
        }
        self.output_chars += text.len();
        self.delta(Delta::TextDelta { text });
        true
    }

    /// Append reasoning, opening a thinking block unless an unsigned one is open. Returns
    /// whether it was written.
    pub fn thinking_delta(&mut self, thinking: impl Into<String>) -> bool {
        let thinking = thinking.into();
        if thinking.is_empty() || self.is_done() {
            return false;
        }
        if self.phase != Phase::Open(Open::Thinking { signed: false }) {
            self.open_thinking();
        }
        self.output_chars += thinking.len();
        self.delta(Delta::ThinkingDelta { thinking });
        true
    }

    /// Sign the open thinking block (once). Refused (`false`) when no unsigned thinking block
    /// is open or the signature is empty.
    pub fn signature_delta(&mut self, signature: impl Into<String>) -> bool {
        let signature = signature.into();
        if signature.is_empty() || self.phase != Phase::Open(Open::Thinking { signed: false }) {
            return false;
        }
        self.phase = Phase::Open(Open::Thinking { signed: true });
        self.delta(Delta::SignatureDelta { signature });
        true
    }

    /// Append to the open tool_use block's input JSON. Refused (`false`) when no tool_use block
    /// is open; an empty fragment is accepted and writes nothing.
    pub fn input_json_delta(&mut self, partial_json: impl Into<String>) -> bool {
        let partial_json = partial_json.into();
        let Phase::Open(Open::ToolUse { input }) = &mut self.phase else {
            return false;
        };
        if !partial_json.is_empty() {
            input.push_str(&partial_json);
            self.output_chars += partial_json.len();
            self.delta(Delta::InputJsonDelta { partial_json });
        }
        true
    }

    /// A web search the upstream ran itself (a hosted tool): a `server_tool_use` block named
    /// `web_search` with its input, then a `web_search_tool_result` block with what it found
    /// (`[{type:"web_search_result",…}]` or a `web_search_tool_result_error`), each closed.
    /// `id` must be new in this message (`srvtoolu_…`); the search counts in the usage's
    /// `server_tool_use.web_search_requests`.
    pub fn web_search(&mut self, id: String, input: &Value, content: Value) {
        if self.is_done() {
            return;
        }
        self.open(
            Open::Whole,
            BlockStart::ServerToolUse {
                id: id.clone(),
                name: String::from("web_search"),
                input: Value::Object(serde_json::Map::new()),
            },
        );
        let partial_json = input.to_string();
        self.output_chars += partial_json.len();
        self.delta(Delta::InputJsonDelta { partial_json });
        self.close_block();
        self.open(
            Open::Whole,
            BlockStart::WebSearchToolResult {
                tool_use_id: id,
                content,
            },
        );
        self.close_block();
        self.web_searches += 1;
    }

    /// A citation (`web_search_result_location`, …) for the text being written: a
    /// `citations_delta` to the open text block, opening one unless a text block is open.
    pub fn citation(&mut self, citation: Value) {
        if self.is_done() {
            return;
        }
        if self.open_block() != Some(BlockKind::Text) {
            self.open_text();
        }
        self.delta(Delta::CitationsDelta { citation });
    }

    /// Close the open block, if any: a thinking block gets a signature if it has none, a
    /// tool_use block's input is completed into parseable JSON when it was cut off.
    pub fn close_block(&mut self) {
        let Phase::Open(open) = std::mem::replace(&mut self.phase, Phase::Between) else {
            return;
        };
        match open {
            Open::Thinking { signed: false } => {
                let signature = self.ids.next_id("bridge-sig-");
                self.delta(Delta::SignatureDelta { signature });
            }
            Open::ToolUse { input } => {
                if let Some(suffix) = json_repair_suffix(&input) {
                    self.delta(Delta::InputJsonDelta {
                        partial_json: suffix,
                    });
                }
            }
            Open::Text | Open::Thinking { signed: true } | Open::Whole => {}
        }
        self.out.push(StreamEvent::ContentBlockStop {
            index: self.next_index,
        });
        self.next_index += 1;
    }

    /// End the message: close the open block, then `message_delta` with `stop_reason` and
    /// `usage`, then `message_stop`.
    pub fn finish(&mut self, stop_reason: StopReason, usage: Usage) {
        if self.is_done() {
            return;
        }
        self.start();
        self.close_block();
        self.out.push(StreamEvent::MessageDelta {
            delta: MessageDeltaBody {
                stop_reason: Some(stop_reason),
                stop_sequence: None,
            },
            usage,
        });
        self.out.push(StreamEvent::MessageStop);
        self.phase = Phase::Done;
    }

    /// End the stream with an `error` event (nothing follows it).
    pub fn fail(&mut self, error: ApiError) {
        if self.is_done() {
            return;
        }
        self.out.push(StreamEvent::Error { error });
        self.phase = Phase::Done;
    }

    /// Anthropic usage from upstream counts: `input_tokens` excludes cached tokens (read and
    /// written), unknown counts fall back to the input estimate and an output estimate.
    #[must_use]
    pub fn usage(&self, upstream: &UpstreamUsage) -> Usage {
        let prompt = upstream.prompt_tokens.unwrap_or(0);
        let written = to_u32(upstream.cache_write_tokens.unwrap_or(0));
        let input = prompt
            .saturating_sub(upstream.cached_tokens.unwrap_or(0))
            .saturating_sub(upstream.cache_write_tokens.unwrap_or(0));
        Usage {
            input_tokens: if prompt == 0 {
                self.input_tokens
            } else {
                to_u32(input)
            },
            cache_creation_input_tokens: Some(written),
            cache_read_input_tokens: Some(to_u32(upstream.cached_tokens.unwrap_or(0))),
            // Upstreams that report cache writes (DeepSeek, vLLM) do not say for how long;
            // the 5-minute lifetime is Anthropic's default.
            cache_creation: Some(CacheCreation {
                ephemeral_5m_input_tokens: written,
                ephemeral_1h_input_tokens: 0,
            }),
            output_tokens: upstream
                .output_tokens
                .map_or_else(|| estimate_text(self.output_chars), to_u32),
            server_tool_use: {
                let searches = self
                    .web_searches
                    .max(to_u32(upstream.web_search_requests.unwrap_or(0)));
                (searches > 0).then_some(ServerToolUsage {
                    web_search_requests: searches,
                    web_fetch_requests: 0,
                })
            },
        }
    }

    fn open(&mut self, open: Open, content_block: BlockStart) {
        if self.is_done() {
            return;
        }
        self.start();
        self.close_block();
        self.out.push(StreamEvent::ContentBlockStart {
            index: self.next_index,
            content_block,
        });
        self.phase = Phase::Open(open);
    }

    fn delta(&mut self, delta: Delta) {
        self.out.push(StreamEvent::ContentBlockDelta {
            index: self.next_index,
            delta,
        });
    }
}

fn to_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Whether `json` is already a complete JSON value (or empty, which means `{}`).
pub(crate) fn is_complete_json(json: &str) -> bool {
    let trimmed = json.trim();
    trimmed.is_empty() || serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok()
}

/// What to append to a cut-off JSON text to make it parse (closing strings, arrays and
/// objects), or `None` when it already parses or cannot be mended that way.
fn json_repair_suffix(json: &str) -> Option<String> {
    if is_complete_json(json) {
        return None;
    }
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for ch in json.chars() {
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
    let mut candidate = String::with_capacity(json.len() + suffix.len());
    candidate.push_str(json);
    candidate.push_str(&suffix);
    is_complete_json(&candidate).then_some(suffix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::events::ErrorKind;
    use crate::anthropic::stream::Validator;

    fn valid(events: &[StreamEvent]) {
        let mut v = Validator::new();
        for e in events {
            v.push(e).unwrap();
        }
        v.finish().unwrap();
    }

    #[test]
    fn a_small_vector_given_back_takes_the_next_events_and_a_large_one_is_dropped() {
        let mut w = AnthropicWriter::new("m".into(), 1, 1);
        w.text_delta("a");
        let events = w.take();
        let kept = events.as_ptr();
        w.recycle(events);
        w.text_delta("b");
        let events = w.take();
        assert_eq!(events.as_ptr(), kept, "the same allocation");
        assert!(matches!(
            events.as_slice(),
            [StreamEvent::ContentBlockDelta { .. }]
        ));
        // A second vector while one is held is not needed: the held one stays.
        w.recycle(events);
        w.recycle(Vec::with_capacity(8));
        w.text_delta("c");
        let events = w.take();
        assert_eq!(events.as_ptr(), kept);
        drop(events);
        w.recycle(Vec::with_capacity(RECYCLED_EVENTS_AT_MOST + 1));
        w.text_delta("d");
        assert!(w.take().capacity() <= RECYCLED_EVENTS_AT_MOST);
    }

    #[test]
    fn repairs_cut_json() {
        assert_eq!(json_repair_suffix(r#"{"a":"b"#).as_deref(), Some("\"}"));
        assert_eq!(json_repair_suffix(r#"{"a":[1,2"#).as_deref(), Some("]}"));
        assert_eq!(json_repair_suffix(r#"{"a":1}"#), None);
        assert_eq!(json_repair_suffix(r#"{"a":"#), None);
    }

    #[test]
    fn refuses_what_would_break_the_stream() {
        let mut w = AnthropicWriter::new("m".into(), 0, 1);
        assert!(!w.input_json_delta("{}"));
        assert!(!w.signature_delta("sig"));
        assert!(!w.open_tool_use("id".into(), String::new()));
        assert!(w.thinking_delta("hmm"));
        assert!(w.signature_delta("sig"));
        assert!(!w.signature_delta("again"));
        // Reasoning after the signature is a new block.
        assert!(w.thinking_delta("more"));
        assert_eq!(w.blocks_opened(), 2);
        w.finish(StopReason::EndTurn, Usage::default());
        let events = w.take();
        valid(&events);
        assert!(!w.text_delta("x"));
        w.fail(ApiError::new(ErrorKind::Api, "late"));
        assert!(w.take().is_empty());
    }

    #[test]
    fn an_error_may_be_the_only_event() {
        let mut w = AnthropicWriter::new("m".into(), 3, 1);
        w.fail(ApiError::new(ErrorKind::Overloaded, "busy"));
        let events = w.take();
        assert_eq!(events.len(), 1);
        valid(&events);
    }

    #[test]
    fn usage_splits_cached_tokens_out() {
        let w = AnthropicWriter::new("m".into(), 9, 1);
        let u = w.usage(&UpstreamUsage {
            prompt_tokens: Some(100),
            cached_tokens: Some(60),
            cache_write_tokens: Some(10),
            output_tokens: Some(5),
            web_search_requests: None,
        });
        assert_eq!(
            (
                u.input_tokens,
                u.cache_read_input_tokens,
                u.cache_creation_input_tokens
            ),
            (30, Some(60), Some(10))
        );
        assert_eq!(
            u.cache_creation.map(|c| c.ephemeral_5m_input_tokens),
            Some(10)
        );
        let unknown = w.usage(&UpstreamUsage::default());
        assert_eq!(
            (
                unknown.cache_read_input_tokens,
                unknown.cache_creation_input_tokens,
                unknown.cache_creation
            ),
            (Some(0), Some(0), Some(CacheCreation::default())),
            "clients read these unconditionally"
        );
        assert_eq!(w.usage(&UpstreamUsage::default()).input_tokens, 9);
    }
}
