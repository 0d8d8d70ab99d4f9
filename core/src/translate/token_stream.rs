//! Raw model text (a Fabstir host's decrypted token stream) → Anthropic events: a sans-IO state
//! machine over the [`ToolCallParser`].
//!
//! Tokens go in as text through [`TokenStreamTranslator::feed`] in any split; the end of the
//! reply comes in with the host's numbers through [`TokenStreamTranslator::finish`]. Text and
//! reasoning stream as they are decided; a tool call becomes one `tool_use` block when its
//! closing tag arrives. Every output satisfies [`crate::anthropic::stream::Validator`].
//!
//! ```text
//!   Idle ──feed──► Streaming ──finish(end)──► Done (message_delta + message_stop)
//!                     └──────fail(error)────► Done (held text flushed, then an error event)
//! ```
//!
//! ```
//! use bridge_core::translate::token_stream::{StreamEnd, TokenStreamTranslator};
//! use bridge_core::anthropic::stream::Validator;
//! use bridge_core::chatml::tool_calls::ToolHint;
//! let bash = ToolHint::from_schema("Bash", None); // the request offered Bash
//! let mut t = TokenStreamTranslator::new("claude-x".into(), 20, 7, vec![bash]);
//! let mut events = t.feed("Listing.<tool_call>{\"name\":\"Bash\",");
//! events.extend(t.feed("\"arguments\":{\"command\":\"ls\"}}</tool_call>"));
//! events.extend(t.finish(&StreamEnd { finish_reason: Some("stop".into()), prompt_tokens: Some(31), completion_tokens: Some(12) }));
//! let mut v = Validator::new();
//! for e in &events { v.push(e).unwrap(); }
//! v.finish().unwrap();
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::anthropic::events::{ApiError, StopReason, StreamEvent};
use crate::chatml::tool_calls::{Piece, ToolCallParser, ToolHint};
use crate::tokens::estimate_text;
use crate::translate::writer::{AnthropicWriter, UpstreamUsage};

/// How the host's reply ended (Fabstir `stream_end` / `encrypted_response`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamEnd {
    /// The model's finish reason (`stop`, `length`, …), if the host said.
    pub finish_reason: Option<String>,
    /// Prompt tokens the host counted (`usage.prompt_tokens`).
    pub prompt_tokens: Option<u64>,
    /// Tokens the host generated (`tokens_used` or `usage.completion_tokens`).
    pub completion_tokens: Option<u64>,
}

/// The translator for one reply.
#[derive(Debug)]
pub struct TokenStreamTranslator {
    parser: ToolCallParser,
    writer: AnthropicWriter,
    tool_calls: usize,
    /// Characters of the tool names called (output the writer does not see as deltas).
    tool_name_chars: usize,
}

impl TokenStreamTranslator {
    /// A translator reporting `model` to the client, with an input-token estimate for
    /// `message_start`, a seed for invented ids and the offered tools (to type arguments).
    #[must_use]
    pub fn new(model: String, input_estimate: u32, id_seed: u64, tools: Vec<ToolHint>) -> Self {
        Self {
            parser: ToolCallParser::new(tools),
            writer: AnthropicWriter::new(model, input_estimate, id_seed),
            tool_calls: 0,
            tool_name_chars: 0,
        }
    }

    /// Feed model text; returns the events it decides. The first call always returns
    /// `message_start`, even for empty text.
    pub fn feed(&mut self, text: &str) -> Vec<StreamEvent> {
        if self.writer.is_done() {
            return Vec::new();
        }
        self.writer.start();
        let pieces = self.parser.feed(text);
        self.pieces(pieces);
        let held = self.parser.held() + self.writer.held();
        if held > super::MAX_HELD_BYTES && !self.writer.is_done() {
            self.writer.fail(super::held_too_much(held));
            self.parser = ToolCallParser::new(Vec::new());
        }
        self.writer.take()
    }

    /// The writer its events go through.
    pub(crate) fn writer(&mut self) -> &mut AnthropicWriter {
        &mut self.writer
    }

    /// The host failed: flush what was held back, then end with an `error` event.
    pub fn fail(&mut self, error: ApiError) -> Vec<StreamEvent> {
        if self.writer.is_done() {
            return Vec::new();
        }
        self.flush();
        self.writer.fail(error);
        self.writer.take()
    }

    /// The reply is complete: decide what was held, close the blocks, report usage.
    pub fn finish(&mut self, end: &StreamEnd) -> Vec<StreamEvent> {
        if self.writer.is_done() {
            return Vec::new();
        }
        self.flush();
        let stop_reason = if self.tool_calls > 0 {
            StopReason::ToolUse
        } else {
            match end.finish_reason.as_deref() {
                Some("length" | "max_tokens") => StopReason::MaxTokens,
                Some("content_filter") => StopReason::Refusal,
                _ => StopReason::EndTurn,
            }
        };
        let usage = self.writer.usage(&UpstreamUsage {
            prompt_tokens: end.prompt_tokens,
            output_tokens: end.completion_tokens.filter(|&n| n > 0).or_else(|| {
                let chars = self.writer.output_chars() + self.tool_name_chars;
                Some(u64::from(estimate_text(chars)))
            }),
            ..UpstreamUsage::default()
        });
        self.writer.finish(stop_reason, usage);
        self.writer.take()
    }

    /// The reply is over: `message_start` if nothing came yet, then what the parser held.
    fn flush(&mut self) {
        self.writer.start();
        let pieces = self.parser.finish();
        self.pieces(pieces);
    }

    fn pieces(&mut self, pieces: Vec<Piece>) {
        for piece in pieces {
            match piece {
                Piece::Text(text) => {
                    self.writer.text_delta(text);
                }
                Piece::Thinking(thinking) => {
                    self.writer.thinking_delta(thinking);
                }
                Piece::ToolCall { name, input } => self.tool_use(name, &input),
            }
        }
    }

    /// A complete call: one tool_use block with its whole input.
    fn tool_use(&mut self, name: String, input: &Value) {
        self.writer.close_block();
        let id = self.writer.next_id("toolu_");
        let name_chars = name.len();
        if self.writer.open_tool_use(id, name) {
            self.tool_name_chars += name_chars;
            self.writer.input_json_delta(input.to_string());
            self.writer.close_block();
            self.tool_calls += 1;
        }
    }
}
