//! The stream [`Validator`]: the rules every Anthropic stream the bridge emits must satisfy.
//!
//! ```text
//!                 message_start
//!   Initial ─────────────────────► Content { next, open: None }
//!                                   │  content_block_start(index == next)
//!                                   ▼
//!                                 Content { open: Some(index, kind) } ──delta (same index, kind)──┐
//!                                   │  content_block_stop(index)           ▲───────────────────────┘
//!                                   ▼
//!                                 Content { next + 1, open: None }
//!                                   │  message_delta (no open block)
//!                                   ▼
//!                                 Delta ──message_delta──► Delta
//!                                   │  message_stop
//!                                   ▼
//!                                 Done
//!   any state but Done/Failed ──error──► Failed        (nothing may follow Done or Failed)
//! ```
//! `ping` may appear anywhere before the end.
//!
//! ```
//! use bridge_core::anthropic::stream::Validator;
//! let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n\
//! event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}\n\n\
//! event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
//! assert!(Validator::check_sse(sse.as_bytes()).is_ok());
//! assert!(Validator::check_sse(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n").is_err());
//! ```

use crate::anthropic::events::{BlockStart, Delta, StreamEvent};
use crate::sse::decoder::SseDecoder;

/// A broken rule, with the position of the offending event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("event #{position} ({event}): {rule}")]
pub struct Violation {
    /// Zero-based position of the event in the stream.
    pub position: usize,
    /// The event's name.
    pub event: String,
    /// The rule it broke.
    pub rule: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Thinking,
    ToolUse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Initial,
    Content {
        next: u32,
        open: Option<(u32, BlockKind)>,
    },
    Delta,
    Done,
    Failed,
}

/// Checks a stream event by event.
#[derive(Debug)]
pub struct Validator {
    state: State,
    position: usize,
}

impl Default for Validator {
    fn default() -> Self {
        Self::new()
    }
}

impl Validator {
    /// A validator expecting `message_start`.
    #[must_use]
    pub fn new() -> Self {
        Self {
            state: State::Initial,
            position: 0,
        }
    }

    /// Check the next event.
    ///
    /// # Errors
    /// The rule the event breaks.
    pub fn push(&mut self, event: &StreamEvent) -> Result<(), Violation> {
        let position = self.position;
        self.position += 1;
        let fail = |rule: &str| Violation {
            position,
            event: event.name().to_owned(),
            rule: rule.to_owned(),
        };
        if matches!(self.state, State::Done | State::Failed) {
            return Err(fail("nothing may follow message_stop or error"));
        }
        self.state = match (self.state, event) {
            (_, StreamEvent::Ping) => self.state,
            (_, StreamEvent::Error { .. }) => State::Failed,
            (State::Initial, StreamEvent::MessageStart { .. }) => State::Content {
                next: 0,
                open: None,
            },
            (State::Initial, _) => return Err(fail("the first event must be message_start")),
            (_, StreamEvent::MessageStart { .. }) => {
                return Err(fail("message_start may appear only once"));
            }
            (
                State::Content { next, open: None },
                StreamEvent::ContentBlockStart {
                    index,
                    content_block,
                },
            ) => {
                if *index != next {
                    return Err(fail(&format!(
                        "block index {index} opened, expected {next}"
                    )));
                }
                let kind = match content_block {
                    BlockStart::Text { .. } => BlockKind::Text,
                    BlockStart::Thinking { .. } => BlockKind::Thinking,
                    BlockStart::ToolUse { id, name, .. } => {
                        if id.is_empty() || name.is_empty() {
                            return Err(fail("tool_use blocks need a non-empty id and name"));
                        }
                        BlockKind::ToolUse
                    }
                };
                State::Content {
                    next,
                    open: Some((*index, kind)),
                }
            }
            (
                State::Content {
                    open: Some((o, _)), ..
                },
                StreamEvent::ContentBlockStart { index, .. },
            ) => {
                return Err(fail(&format!(
                    "block {index} opened while block {o} is open"
                )));
            }
            (
                State::Content {
                    next,
                    open: Some((o, kind)),
                },
                StreamEvent::ContentBlockDelta { index, delta },
            ) => {
                if *index != o {
                    return Err(fail(&format!(
                        "delta for block {index} while block {o} is open"
                    )));
                }
                let fits = matches!(
                    (kind, delta),
                    (BlockKind::Text, Delta::TextDelta { .. })
                        | (BlockKind::ToolUse, Delta::InputJsonDelta { .. })
                        | (
                            BlockKind::Thinking,
                            Delta::ThinkingDelta { .. } | Delta::SignatureDelta { .. }
                        )
                );
                if !fits {
                    return Err(fail(&format!("{kind:?} block cannot take this delta")));
                }
                State::Content {
                    next,
                    open: Some((o, kind)),
                }
            }
            (
                State::Content {
                    next,
                    open: Some((o, _)),
                },
                StreamEvent::ContentBlockStop { index },
            ) => {
                if *index != o {
                    return Err(fail(&format!(
                        "stop for block {index} while block {o} is open"
                    )));
                }
                State::Content {
                    next: next + 1,
                    open: None,
                }
            }
            (
                State::Content { open: None, .. },
                StreamEvent::ContentBlockDelta { .. } | StreamEvent::ContentBlockStop { .. },
            ) => {
                return Err(fail("no content block is open"));
            }
            (
                State::Content { open: None, .. } | State::Delta,
                StreamEvent::MessageDelta { .. },
            ) => State::Delta,
            (State::Content { open: Some(_), .. }, StreamEvent::MessageDelta { .. }) => {
                return Err(fail("message_delta while a content block is open"));
            }
            (State::Delta, StreamEvent::MessageStop) => State::Done,
            (State::Content { .. }, StreamEvent::MessageStop) => {
                return Err(fail("message_stop before message_delta"));
            }
            (State::Delta, _) => {
                return Err(fail(
                    "only message_delta or message_stop may follow message_delta",
                ));
            }
            (State::Done | State::Failed, _) => {
                return Err(fail("nothing may follow message_stop or error"));
            }
        };
        Ok(())
    }

    /// The stream ended: it must have ended with `message_stop` or `error`.
    ///
    /// # Errors
    /// A violation when the stream is incomplete.
    pub fn finish(&self) -> Result<(), Violation> {
        match self.state {
            State::Done | State::Failed => Ok(()),
            _ => Err(Violation {
                position: self.position,
                event: String::from("<end>"),
                rule: String::from("the stream ended without message_stop or error"),
            }),
        }
    }

    /// Decode SSE bytes and validate the whole stream, including that each SSE `event:` name
    /// equals the JSON `type`.
    ///
    /// # Errors
    /// The first violation, or an event that does not parse.
    pub fn check_sse(bytes: &[u8]) -> Result<Vec<StreamEvent>, Violation> {
        let mut decoder = SseDecoder::new();
        let mut frames = decoder.feed(bytes);
        frames.extend(decoder.finish());
        let mut validator = Self::new();
        let mut events = Vec::with_capacity(frames.len());
        for (position, frame) in frames.iter().enumerate() {
            let event: StreamEvent = serde_json::from_str(&frame.data).map_err(|e| Violation {
                position,
                event: frame.event.clone().unwrap_or_default(),
                rule: format!("data is not a known event: {e}"),
            })?;
            if frame.event.as_deref() != Some(event.name()) {
                return Err(Violation {
                    position,
                    event: event.name().to_owned(),
                    rule: format!(
                        "SSE event name {:?} differs from the JSON type",
                        frame.event
                    ),
                });
            }
            validator.push(&event)?;
            events.push(event);
        }
        validator.finish()?;
        Ok(events)
    }
}
