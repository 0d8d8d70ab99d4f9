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
    /// `server_tool_use`: its input streams like a tool call's.
    ServerToolUse,
    /// Blocks complete at start (`redacted_thinking`, server tool results): no deltas.
    Whole,
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
    /// The `server_tool_use` ids of this message, which results must answer (each once).
    server_calls: Vec<(String, bool)>,
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
            server_calls: Vec::new(),
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
                    BlockStart::ServerToolUse { id, name, .. } => {
                        if id.is_empty() || name.is_empty() {
                            return Err(fail(
                                "server_tool_use blocks need a non-empty id and name",
                            ));
                        }
                        if self.server_calls.iter().any(|(seen, _)| seen == id) {
                            return Err(fail(&format!("server_tool_use id {id} used twice")));
                        }
                        self.server_calls.push((id.clone(), false));
                        BlockKind::ServerToolUse
                    }
                    BlockStart::WebSearchToolResult { tool_use_id, .. }
                    | BlockStart::WebFetchToolResult { tool_use_id, .. } => {
                        match self
                            .server_calls
                            .iter_mut()
                            .find(|(id, _)| id == tool_use_id)
                        {
                            Some((_, answered @ false)) => *answered = true,
                            Some(_) => {
                                return Err(fail(&format!(
                                    "server_tool_use {tool_use_id} answered twice"
                                )));
                            }
                            None => {
                                return Err(fail(&format!(
                                    "a result for {tool_use_id}, which no server_tool_use of this message opened"
                                )));
                            }
                        }
                        BlockKind::Whole
                    }
                    BlockStart::RedactedThinking { data } => {
                        if data.is_empty() {
                            return Err(fail("redacted_thinking blocks need their data"));
                        }
                        BlockKind::Whole
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
                    (
                        BlockKind::Text,
                        Delta::TextDelta { .. } | Delta::CitationsDelta { .. }
                    ) | (
                        BlockKind::ToolUse | BlockKind::ServerToolUse,
                        Delta::InputJsonDelta { .. }
                    ) | (
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

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":0}}}"#;
    const END: &str = r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1,"server_tool_use":{"web_search_requests":1,"web_fetch_requests":0}}}
{"type":"message_stop"}"#;

    fn check(body: &str) -> Result<(), Violation> {
        let mut validator = Validator::new();
        for line in format!("{START}\n{body}\n{END}").lines() {
            let event: StreamEvent = serde_json::from_str(line).map_err(|e| Violation {
                position: 0,
                event: line.to_owned(),
                rule: e.to_string(),
            })?;
            validator.push(&event)?;
        }
        validator.finish()
    }

    const SEARCH: &str = r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}
{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"q\"}"}}
{"type":"content_block_stop","index":0}"#;

    #[test]
    fn server_tools_results_and_citations_make_a_valid_stream() {
        let body = format!(
            r#"{SEARCH}
{{"type":"content_block_start","index":1,"content_block":{{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{{"type":"web_search_result","url":"https://a.example","title":"A","encrypted_content":"x","page_age":null}}]}}}}
{{"type":"content_block_stop","index":1}}
{{"type":"content_block_start","index":2,"content_block":{{"type":"text","text":""}}}}
{{"type":"content_block_delta","index":2,"delta":{{"type":"text_delta","text":"A says"}}}}
{{"type":"content_block_delta","index":2,"delta":{{"type":"citations_delta","citation":{{"type":"web_search_result_location","url":"https://a.example","cited_text":"a","encrypted_index":"i"}}}}}}
{{"type":"content_block_stop","index":2}}
{{"type":"content_block_start","index":3,"content_block":{{"type":"redacted_thinking","data":"opaque"}}}}
{{"type":"content_block_stop","index":3}}"#
        );
        assert_eq!(check(&body), Ok(()));
    }

    #[test]
    fn a_result_must_answer_one_server_call_of_the_message_once_and_takes_no_delta() {
        let result = |id: &str, index: u32| {
            format!(
                r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"web_search_tool_result","tool_use_id":"{id}","content":{{"type":"web_search_tool_result_error","error_code":"unavailable"}}}}}}
{{"type":"content_block_stop","index":{index}}}"#
            )
        };
        let stranger = check(&result("srvtoolu_9", 0)).unwrap_err();
        assert!(stranger.rule.contains("no server_tool_use"), "{stranger}");
        let twice = check(&format!(
            "{SEARCH}\n{}\n{}",
            result("srvtoolu_1", 1),
            result("srvtoolu_1", 2)
        ))
        .unwrap_err();
        assert!(twice.rule.contains("answered twice"), "{twice}");
        let delta = check(&format!(
            "{SEARCH}\n{}",
            result("srvtoolu_1", 1).replace(
                "\n",
                "\n{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n"
            )
        ))
        .unwrap_err();
        assert!(delta.rule.contains("cannot take this delta"), "{delta}");
        let citation_on_a_call = check(&SEARCH.replace(
            r#"{"type":"input_json_delta","partial_json":"{\"query\":\"q\"}"}"#,
            r#"{"type":"citations_delta","citation":{}}"#,
        ))
        .unwrap_err();
        assert!(citation_on_a_call.rule.contains("cannot take this delta"));
    }
}
