//! Folds an Anthropic event stream into one [`Message`]: the non-streaming response is the
//! streaming one, accumulated (DESIGN §3, "one code path").
//!
//! ```
//! use bridge_core::anthropic::accumulate::Accumulator;
//! use bridge_core::anthropic::events::*;
//! let mut acc = Accumulator::default();
//! acc.push(&StreamEvent::Error { error: ApiError::new(ErrorKind::Overloaded, "busy") });
//! let done = acc.result();
//! assert_eq!(done.status, 529);
//! assert!(done.body.contains("overloaded_error"));
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::anthropic::events::{
    ApiError, BlockStart, ContentBlock, Delta, ErrorKind, Message, StreamEvent, Usage,
};

/// Accumulates events; [`Accumulator::result`] gives the final response.
#[derive(Debug, Default)]
pub struct Accumulator {
    message: Option<Message>,
    tool_json: Vec<String>,
    error: Option<ApiError>,
    stopped: bool,
}

impl Accumulator {
    /// [`Self::push`] with the event given away: a delta's text moves into its block when that
    /// is still empty, rather than being copied (the first delta is often a whole answer).
    pub fn push_owned(&mut self, event: StreamEvent) {
        let StreamEvent::ContentBlockDelta { index, delta } = event else {
            return self.push(&event);
        };
        if let Some(delta) = self.move_into_empty_block(delta) {
            self.push(&StreamEvent::ContentBlockDelta { index, delta });
        }
    }

    /// Moves a delta's text into the open block when that is empty (what [`Self::push`] would
    /// append it to); the delta back otherwise.
    fn move_into_empty_block(&mut self, delta: Delta) -> Option<Delta> {
        let block = self.message.as_mut().and_then(|m| m.content.last_mut());
        let Some(json) = self.tool_json.last_mut() else {
            return Some(delta);
        };
        match (block, delta) {
            (Some(ContentBlock::Text { text, .. }), Delta::TextDelta { text: t })
                if text.is_empty() =>
            {
                *text = t;
                None
            }
            (
                Some(ContentBlock::Thinking { thinking, .. }),
                Delta::ThinkingDelta { thinking: t },
            ) if thinking.is_empty() => {
                *thinking = t;
                None
            }
            (
                Some(ContentBlock::ToolUse { .. } | ContentBlock::ServerToolUse { .. }),
                Delta::InputJsonDelta { partial_json },
            ) if json.is_empty() => {
                *json = partial_json;
                None
            }
            (_, delta) => Some(delta),
        }
    }

    /// Fold one event in.
    pub fn push(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::MessageStart { message } => {
                self.message = Some(Message {
                    id: message.id.clone(),
                    kind: String::from("message"),
                    role: String::from("assistant"),
                    model: message.model.clone(),
                    content: Vec::new(),
                    stop_reason: None,
                    stop_sequence: None,
                    usage: message.usage.clone(),
                });
            }
            StreamEvent::ContentBlockStart { content_block, .. } => {
                let Some(msg) = self.message.as_mut() else {
                    return;
                };
                msg.content.push(match content_block {
                    BlockStart::Text { text } => ContentBlock::Text {
                        text: text.clone(),
                        citations: None,
                    },
                    BlockStart::Thinking {
                        thinking,
                        signature,
                    } => ContentBlock::Thinking {
                        thinking: thinking.clone(),
                        signature: signature.clone(),
                    },
                    BlockStart::ToolUse { id, name, input } => ContentBlock::ToolUse {
                        id: id.clone(),
                        name: name.clone(),
                        input: input.clone(),
                    },
                    BlockStart::RedactedThinking { data } => {
                        ContentBlock::RedactedThinking { data: data.clone() }
                    }
                    BlockStart::ServerToolUse { id, name, input } => ContentBlock::ServerToolUse {
                        id: id.clone(),
                        name: name.clone(),
                        input: input.clone(),
                    },
                    BlockStart::WebSearchToolResult {
                        tool_use_id,
                        content,
                    } => ContentBlock::WebSearchToolResult {
                        tool_use_id: tool_use_id.clone(),
                        content: content.clone(),
                    },
                    BlockStart::WebFetchToolResult {
                        tool_use_id,
                        content,
                    } => ContentBlock::WebFetchToolResult {
                        tool_use_id: tool_use_id.clone(),
                        content: content.clone(),
                    },
                });
                self.tool_json.push(String::new());
            }
            StreamEvent::ContentBlockDelta { delta, .. } => {
                let Some(msg) = self.message.as_mut() else {
                    return;
                };
                let (Some(block), Some(json)) = (msg.content.last_mut(), self.tool_json.last_mut())
                else {
                    return;
                };
                match (block, delta) {
                    (ContentBlock::Text { text, .. }, Delta::TextDelta { text: t }) => {
                        text.push_str(t);
                    }
                    (ContentBlock::Text { citations, .. }, Delta::CitationsDelta { citation }) => {
                        citations
                            .get_or_insert_with(Vec::new)
                            .push(citation.clone());
                    }
                    (
                        ContentBlock::Thinking { thinking, .. },
                        Delta::ThinkingDelta { thinking: t },
                    ) => {
                        thinking.push_str(t);
                    }
                    (
                        ContentBlock::Thinking { signature, .. },
                        Delta::SignatureDelta { signature: s },
                    ) => {
                        signature.push_str(s);
                    }
                    (
                        ContentBlock::ToolUse { .. } | ContentBlock::ServerToolUse { .. },
                        Delta::InputJsonDelta { partial_json },
                    ) => {
                        json.push_str(partial_json);
                    }
                    _ => {}
                }
            }
            StreamEvent::ContentBlockStop { .. } => {
                let Some(msg) = self.message.as_mut() else {
                    return;
                };
                if let (
                    Some(
                        ContentBlock::ToolUse { input, .. }
                        | ContentBlock::ServerToolUse { input, .. },
                    ),
                    Some(json),
                ) = (msg.content.last_mut(), self.tool_json.last())
                    && !json.trim().is_empty()
                {
                    *input = parse_tool_input(json);
                }
            }
            StreamEvent::MessageDelta { delta, usage } => {
                let Some(msg) = self.message.as_mut() else {
                    return;
                };
                msg.stop_reason = delta.stop_reason;
                msg.stop_sequence.clone_from(&delta.stop_sequence);
                merge_usage(&mut msg.usage, usage);
            }
            StreamEvent::MessageStop => self.stopped = true,
            StreamEvent::Ping => {}
            StreamEvent::Error { error } => self.error = Some(error.clone()),
        }
    }

    /// The final response: the message (200), or the error envelope with its status.
    #[must_use]
    pub fn result(&self) -> Finished {
        let fallback = ApiError::new(
            ErrorKind::Api,
            "the upstream response ended before the message was complete",
        );
        match (&self.error, &self.message, self.stopped) {
            (None, Some(message), true) => match crate::compact_json::to_string(message) {
                Ok(body) => Finished { status: 200, body },
                Err(e) => error_result(&ApiError::new(ErrorKind::Api, e.to_string())),
            },
            (Some(error), _, _) => error_result(error),
            _ => error_result(&fallback),
        }
    }

    /// The message folded so far (for tests and tools).
    #[must_use]
    pub fn message(&self) -> Option<&Message> {
        self.message.as_ref()
    }
}

/// What [`crate::api::Translator::finish`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    /// HTTP status a non-streaming response should carry (200, or the error's status).
    /// For a streaming response this is 200 even when the stream ended with an `error` event.
    pub status: u16,
    /// Streaming: the last SSE bytes. Non-streaming: the `Message` JSON or the error envelope.
    pub body: String,
}

fn error_result(error: &ApiError) -> Finished {
    Finished {
        status: error.kind.status(),
        body: error.envelope(),
    }
}

pub(crate) fn merge_usage(into: &mut Usage, delta: &Usage) {
    into.output_tokens = delta.output_tokens;
    if delta.input_tokens > 0 {
        into.input_tokens = delta.input_tokens;
    }
    if delta.cache_read_input_tokens.is_some() {
        into.cache_read_input_tokens = delta.cache_read_input_tokens;
    }
    if delta.cache_creation_input_tokens.is_some() {
        into.cache_creation_input_tokens = delta.cache_creation_input_tokens;
    }
    if delta.cache_creation.is_some() {
        into.cache_creation = delta.cache_creation;
    }
    if delta.server_tool_use.is_some() {
        into.server_tool_use = delta.server_tool_use;
    }
}

/// Parse a tool input the way [`Accumulator`] does (empty → `{}`).
#[must_use]
pub fn parse_tool_input(json: &str) -> Value {
    if json.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(json).unwrap_or_else(|_| serde_json::json!({ "raw_arguments": json }))
}
