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
//! let mut t = TokenStreamTranslator::new("claude-x".into(), 20, 7, Vec::new());
//! let mut events = t.feed("Listing.<tool_call>{\"name\":\"Bash\",");
//! events.extend(t.feed("\"arguments\":{\"command\":\"ls\"}}</tool_call>"));
//! events.extend(t.finish(&StreamEnd { finish_reason: Some("stop".into()), prompt_tokens: Some(31), completion_tokens: Some(12) }));
//! let mut v = Validator::new();
//! for e in &events { v.push(e).unwrap(); }
//! v.finish().unwrap();
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::anthropic::events::{
    ApiError, BlockStart, Delta, MessageDeltaBody, MessageShell, StopReason, StreamEvent, Usage,
};
use crate::chatml::tool_calls::{Piece, ToolCallParser, ToolHint};
use crate::ids::IdSource;
use crate::tokens::estimate_text;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Streaming,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

/// The translator for one reply.
#[derive(Debug)]
pub struct TokenStreamTranslator {
    parser: ToolCallParser,
    ids: IdSource,
    model: String,
    input_estimate: u32,
    phase: Phase,
    next_index: u32,
    open: Option<Open>,
    tool_calls: usize,
    output_chars: usize,
}

impl TokenStreamTranslator {
    /// A translator reporting `model` to the client, with an input-token estimate for
    /// `message_start`, a seed for invented ids and the offered tools (to type arguments).
    #[must_use]
    pub fn new(model: String, input_estimate: u32, id_seed: u64, tools: Vec<ToolHint>) -> Self {
        Self {
            parser: ToolCallParser::new(tools),
            ids: IdSource::new(id_seed),
            model,
            input_estimate: input_estimate.max(1),
            phase: Phase::Idle,
            next_index: 0,
            open: None,
            tool_calls: 0,
            output_chars: 0,
        }
    }

    /// Feed model text; returns the events it decides. The first call always returns
    /// `message_start`, even for empty text.
    pub fn feed(&mut self, text: &str) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        if self.phase == Phase::Done {
            return out;
        }
        self.start(&mut out);
        let pieces = self.parser.feed(text);
        self.pieces(pieces, &mut out);
        out
    }

    /// The host failed: flush what was held back, then end with an `error` event.
    pub fn fail(&mut self, error: ApiError) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        if self.phase == Phase::Done {
            return out;
        }
        self.flush(&mut out);
        out.push(StreamEvent::Error { error });
        self.phase = Phase::Done;
        out
    }

    /// The reply is complete: decide what was held, close the blocks, report usage.
    pub fn finish(&mut self, end: &StreamEnd) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        if self.phase == Phase::Done {
            return out;
        }
        self.flush(&mut out);
        self.close(&mut out);
        let stop_reason = if self.tool_calls > 0 {
            StopReason::ToolUse
        } else {
            match end.finish_reason.as_deref() {
                Some("length" | "max_tokens") => StopReason::MaxTokens,
                Some("content_filter") => StopReason::Refusal,
                _ => StopReason::EndTurn,
            }
        };
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        out.push(StreamEvent::MessageDelta {
            delta: MessageDeltaBody {
                stop_reason: Some(stop_reason),
                stop_sequence: None,
            },
            usage: Usage {
                input_tokens: end
                    .prompt_tokens
                    .filter(|&n| n > 0)
                    .map_or(self.input_estimate, clamp),
                cache_creation_input_tokens: None,
                cache_read_input_tokens: None,
                output_tokens: end
                    .completion_tokens
                    .filter(|&n| n > 0)
                    .map_or_else(|| estimate_text(self.output_chars), clamp),
            },
        });
        out.push(StreamEvent::MessageStop);
        self.phase = Phase::Done;
        out
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

    /// The reply is over: `message_start` if nothing came yet, then what the parser held.
    fn flush(&mut self, out: &mut Vec<StreamEvent>) {
        self.start(out);
        let pieces = self.parser.finish();
        self.pieces(pieces, out);
    }

    fn pieces(&mut self, pieces: Vec<Piece>, out: &mut Vec<StreamEvent>) {
        for piece in pieces {
            match piece {
                Piece::Text(text) => self.stream(Open::Text, text, out),
                Piece::Thinking(thinking) => self.stream(Open::Thinking, thinking, out),
                Piece::ToolCall { name, input } => self.tool_use(name, &input, out),
            }
        }
    }

    fn stream(&mut self, kind: Open, text: String, out: &mut Vec<StreamEvent>) {
        if text.is_empty() {
            return;
        }
        if self.open != Some(kind) {
            self.close(out);
            let content_block = match kind {
                Open::Text => BlockStart::Text {
                    text: String::new(),
                },
                Open::Thinking => BlockStart::Thinking {
                    thinking: String::new(),
                    signature: String::new(),
                },
            };
            out.push(StreamEvent::ContentBlockStart {
                index: self.next_index,
                content_block,
            });
            self.open = Some(kind);
        }
        self.output_chars += text.len();
        let delta = match kind {
            Open::Text => Delta::TextDelta { text },
            Open::Thinking => Delta::ThinkingDelta { thinking: text },
        };
        out.push(StreamEvent::ContentBlockDelta {
            index: self.next_index,
            delta,
        });
    }

    fn tool_use(&mut self, name: String, input: &Value, out: &mut Vec<StreamEvent>) {
        self.close(out);
        let index = self.next_index;
        let json = input.to_string();
        self.output_chars += name.len() + json.len();
        out.push(StreamEvent::ContentBlockStart {
            index,
            content_block: BlockStart::ToolUse {
                id: self.ids.next_id("toolu_"),
                name,
                input: Value::Object(serde_json::Map::new()),
            },
        });
        out.push(StreamEvent::ContentBlockDelta {
            index,
            delta: Delta::InputJsonDelta { partial_json: json },
        });
        out.push(StreamEvent::ContentBlockStop { index });
        self.next_index += 1;
        self.tool_calls += 1;
    }

    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        let Some(open) = self.open.take() else { return };
        if open == Open::Thinking {
            // Hosts sign nothing; clients require the field (pitfall 2).
            out.push(StreamEvent::ContentBlockDelta {
                index: self.next_index,
                delta: Delta::SignatureDelta {
                    signature: self.ids.next_id("bridge-sig-"),
                },
            });
        }
        out.push(StreamEvent::ContentBlockStop {
            index: self.next_index,
        });
        self.next_index += 1;
    }
}
