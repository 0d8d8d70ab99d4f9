//! What a host needs to serve an OpenAI front: every provider answers Anthropic SSE, and this
//! turns those bytes into the client's shape — streamed ([`FrontStream`]) or folded into one
//! object ([`FrontFold`]) — and an Anthropic answer that came whole ([`complete`]) likewise.
//!
//! The bytes are read with the same SSE decoder as everything else; each `data:` is parsed as a
//! [`StreamEvent`]. Frames that are not events the core models (a `ping`, a pass-through's
//! server-tool block) make no output.
//!
//! ```
//! use bridge_core::front::transcode::{FrontAnswer, FrontShape, FrontStream};
//! let answer = FrontAnswer {
//!     id: "1".into(), created: 1_700_000_000, model: "gpt-x".into(),
//!     shape: FrontShape::Chat { include_usage: false },
//! };
//! let mut stream = FrontStream::new(&answer);
//! let mut out = stream.feed(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n");
//! out.push_str(&stream.feed(b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"));
//! out.push_str(&stream.feed(b"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
//! out.push_str(&stream.finish());
//! assert!(out.contains(r#""content":"Hi""#));
//! assert!(out.ends_with("data: [DONE]\n\n"));
//!
//! // A stream cut before its end is an error the client sees, never a clean end.
//! let mut cut = FrontStream::new(&answer);
//! let _ = cut.feed(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n");
//! assert!(cut.finish().contains(r#""error""#));
//! ```

use std::collections::VecDeque;

use crate::anthropic::events::{
    ApiError, BlockStart, ContentBlock, Delta, ErrorKind, Message, MessageDeltaBody, MessageShell,
    StreamEvent,
};
use crate::front::chat_stream::{ChatCompletionFold, ChatStreamEncoder};
use crate::front::client_tools::ResponsesTools;
use crate::front::responses_stream::{
    ResponsesFold, ResponsesStreamEncoder, ResponsesStreamOptions,
};
use crate::front::{Failure, append_taken};
use crate::sse::decoder::{SseDecoder, SseFrame};

/// Which OpenAI API the client speaks, and what its encoder needs from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrontShape {
    /// Chat Completions.
    Chat {
        /// `stream_options.include_usage`.
        include_usage: bool,
    },
    /// Responses.
    Responses {
        /// How the request's tools are called on the way back (`custom`, namespaces).
        tools: ResponsesTools,
        /// `include: ["reasoning.encrypted_content"]`.
        include_encrypted_reasoning: bool,
        /// The request's settings the response objects repeat.
        echo: serde_json::Map<String, serde_json::Value>,
    },
}

/// One answer to write: its id, time (Unix seconds), the model name the client sees, and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontAnswer {
    /// The completion / response id (the encoders add their prefixes).
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The model the client is told.
    pub model: String,
    /// The client's API.
    pub shape: FrontShape,
}

impl FrontAnswer {
    fn responses_options(&self) -> Option<ResponsesStreamOptions> {
        match &self.shape {
            FrontShape::Chat { .. } => None,
            FrontShape::Responses {
                tools,
                include_encrypted_reasoning,
                echo,
            } => Some(ResponsesStreamOptions {
                id: self.id.clone(),
                created_at: self.created,
                model: self.model.clone(),
                tools: tools.clone(),
                include_encrypted_reasoning: *include_encrypted_reasoning,
                echo: echo.clone(),
            }),
        }
    }
}

/// The events in a run of Anthropic SSE bytes (partial frames wait for the next run).
#[derive(Debug, Default)]
struct EventReader {
    decoder: SseDecoder,
}

impl EventReader {
    fn feed(&mut self, sse: &[u8]) -> impl Iterator<Item = StreamEvent> {
        self.decoder.feed(sse).into_iter().filter_map(event_of)
    }

    fn feed_owned(&mut self, sse: Vec<u8>) -> impl Iterator<Item = StreamEvent> {
        self.decoder
            .feed_owned(sse)
            .into_iter()
            .filter_map(event_of)
    }

    fn finish(&mut self) -> impl Iterator<Item = StreamEvent> {
        self.decoder.finish().into_iter().filter_map(event_of)
    }
}

fn event_of(frame: SseFrame) -> Option<StreamEvent> {
    serde_json::from_str::<StreamEvent>(&frame.data)
        .ok()
        .filter(|e| !matches!(e, StreamEvent::Ping))
}

#[derive(Debug)]
enum Encoder {
    Chat(ChatStreamEncoder),
    Responses(Box<ResponsesStreamEncoder>),
}

/// Anthropic SSE in, the client's OpenAI SSE out (sans-IO: feed bytes, get bytes).
///
/// With an output limit ([`FrontStream::limited`]) a call stops making output once it holds
/// that many bytes, and the rest comes from the next call (feed an empty run to get it): a
/// Responses answer repeats its whole text in four closing events, and so holds one of them at
/// a time, not all four. Output shorter than the limit means nothing was held back.
#[derive(Debug)]
pub struct FrontStream {
    reader: EventReader,
    encoder: Encoder,
    /// Events read but not yet written (a limited call stopped before them).
    queued: VecDeque<StreamEvent>,
    limit: usize,
    /// `finish` was called: once `queued` is written, the stream's end is.
    finishing: bool,
    /// The encoder's end was written.
    ended: bool,
}

impl FrontStream {
    /// A stream for this answer.
    #[must_use]
    pub fn new(answer: &FrontAnswer) -> Self {
        let encoder = match answer.responses_options() {
            Some(options) => Encoder::Responses(Box::new(ResponsesStreamEncoder::new(options))),
            None => Encoder::Chat(ChatStreamEncoder::new(
                &answer.id,
                answer.created,
                &answer.model,
                matches!(
                    answer.shape,
                    FrontShape::Chat {
                        include_usage: true
                    }
                ),
            )),
        };
        Self {
            reader: EventReader::default(),
            encoder,
            queued: VecDeque::new(),
            limit: usize::MAX,
            finishing: false,
            ended: false,
        }
    }

    /// The same stream, each call's output stopping once it reaches `limit` bytes (at least one
    /// event is always written); a call given at least `limit` bytes writes nothing and keeps
    /// their events for the next call (an empty run), so the caller can free a long input
    /// before its output is made, and does not hold the text as both at once.
    #[must_use]
    pub fn limited(self, limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            ..self
        }
    }

    /// The client's bytes for a run of Anthropic SSE (may be empty; an empty run gives what a
    /// limited call held back).
    pub fn feed(&mut self, anthropic_sse: &[u8]) -> String {
        self.queued.extend(self.reader.feed(anthropic_sse));
        self.output_after(anthropic_sse.len())
    }

    /// [`Self::feed`] with bytes given away (a long event's data is then not copied).
    pub fn feed_owned(&mut self, anthropic_sse: Vec<u8>) -> String {
        let input_len = anthropic_sse.len();
        self.queued.extend(self.reader.feed_owned(anthropic_sse));
        self.output_after(input_len)
    }

    /// The output of a call given `input_len` bytes: none after a long input (see
    /// [`Self::limited`]).
    fn output_after(&mut self, input_len: usize) -> String {
        if input_len >= self.limit {
            return String::new();
        }
        self.pump()
    }

    /// The bytes that end the client's stream (its terminal event, `[DONE]` for Chat); nothing
    /// when it already ended. A limited stream gives the rest to the next calls.
    pub fn finish(&mut self) -> String {
        if !self.finishing {
            self.finishing = true;
            self.queued.extend(self.reader.finish());
        }
        self.pump()
    }

    /// Writes what is owed, then queued events, then (finishing) the end, until the output
    /// reaches the limit.
    fn pump(&mut self) -> String {
        let mut out = String::new();
        loop {
            if self.encoder.pay(&mut out, self.limit) || out.len() >= self.limit {
                return out;
            }
            if let Some(event) = self.queued.pop_front() {
                self.encoder.push(event, &mut out, self.limit);
            } else if self.finishing && !self.ended {
                self.ended = true;
                self.encoder.finish(&mut out, self.limit);
            } else {
                return out;
            }
        }
    }
}

impl Encoder {
    /// One event's frames into `out`; a Responses encoder writes what it owes only while `out`
    /// is under `limit`.
    fn push(&mut self, event: StreamEvent, out: &mut String, limit: usize) {
        match self {
            Self::Chat(encoder) => append_taken(out, encoder.push(event)),
            Self::Responses(encoder) => encoder.push_bounded(event, out, limit),
        }
    }

    /// The stream's end into `out`, as [`Self::push`].
    fn finish(&mut self, out: &mut String, limit: usize) {
        match self {
            Self::Chat(encoder) => append_taken(out, encoder.finish()),
            Self::Responses(encoder) => encoder.finish_bounded(out, limit),
        }
    }

    /// Owed frames into `out` while it is under `limit`; whether some are still owed.
    fn pay(&mut self, out: &mut String, limit: usize) -> bool {
        match self {
            Self::Chat(_) => false,
            Self::Responses(encoder) => encoder.pay_into(out, limit),
        }
    }
}

#[derive(Debug)]
enum Fold {
    Chat(Box<ChatCompletionFold>),
    Responses(Box<ResponsesFold>),
}

/// Anthropic SSE in, one OpenAI object out (for a client that did not ask for a stream).
#[derive(Debug)]
pub struct FrontFold {
    reader: EventReader,
    fold: Fold,
}

impl FrontFold {
    /// A fold for this answer.
    #[must_use]
    pub fn new(answer: &FrontAnswer) -> Self {
        let fold = match answer.responses_options() {
            Some(options) => Fold::Responses(Box::new(ResponsesFold::new(options))),
            None => Fold::Chat(Box::new(ChatCompletionFold::new(
                &answer.id,
                answer.created,
                &answer.model,
            ))),
        };
        Self {
            reader: EventReader::default(),
            fold,
        }
    }

    /// Fold a run of Anthropic SSE in.
    pub fn feed(&mut self, anthropic_sse: &[u8]) {
        for event in self.reader.feed(anthropic_sse) {
            self.fold.push(event);
        }
    }

    /// [`Self::feed`] with bytes given away: a long event's data is taken, not copied.
    pub fn feed_owned(&mut self, anthropic_sse: Vec<u8>) {
        for event in self.reader.feed_owned(anthropic_sse) {
            self.fold.push(event);
        }
    }

    /// The HTTP status and body: the `chat.completion` / `response` object, or the OpenAI error
    /// the stream ended with.
    #[must_use]
    pub fn finish(mut self) -> (u16, String) {
        for event in self.reader.finish() {
            self.fold.push(event);
        }
        let result = match self.fold {
            Fold::Chat(fold) => fold.finish().map(|c| c.to_json()),
            Fold::Responses(fold) => fold
                .finish()
                .map(|r| crate::compact_json::to_string(&r).unwrap_or_default()),
        };
        match result {
            Ok(body) => (200, body),
            Err(Failure { status, body }) => (status, body),
        }
    }
}

impl Fold {
    fn push(&mut self, event: StreamEvent) {
        match self {
            Self::Chat(fold) => fold.push(event),
            Self::Responses(fold) => fold.push(event),
        }
    }
}

/// An Anthropic answer that came whole (a pass-through upstream that did not stream): a
/// message becomes the client's object, an error envelope the OpenAI error with the same
/// status, anything else an `api_error` (502) that quotes it.
#[must_use]
pub fn complete(answer: &FrontAnswer, status: u16, body: &[u8]) -> (u16, String) {
    if (200..300).contains(&status)
        && let Ok(message) = serde_json::from_slice::<Message>(body)
    {
        let mut fold = FrontFold::new(answer);
        for event in events_of_message(&message) {
            fold.fold.push(event);
        }
        return fold.finish();
    }
    let envelope = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| serde_json::from_value::<ApiError>(v.get("error")?.clone()).ok());
    let Some(error) = envelope else {
        let error = ApiError::new(
            ErrorKind::Api,
            format!(
                "the upstream answered {status} with a body that is neither a message nor an \
                 error: {}",
                String::from_utf8_lossy(&body[..body.len().min(500)])
            ),
        );
        return (502, Failure::from_api_error(&error).body);
    };
    let failure = Failure::from_api_error(&error);
    let status = if status >= 400 {
        status
    } else {
        failure.status
    };
    (status, failure.body)
}

/// The events a streaming upstream would have sent for `message`.
#[must_use]
pub fn events_of_message(message: &Message) -> Vec<StreamEvent> {
    let mut shell = MessageShell::new(
        message.id.clone(),
        message.model.clone(),
        message.usage.input_tokens,
    );
    shell.usage = message.usage.clone();
    shell.usage.output_tokens = 0;
    let mut events = vec![StreamEvent::MessageStart {
        message: Box::new(shell),
    }];
    for (index, block) in (0u32..).zip(&message.content) {
        let (start, deltas) = match block {
            ContentBlock::Text { text, citations } => (
                BlockStart::Text {
                    text: String::new(),
                },
                std::iter::once(Delta::TextDelta { text: text.clone() })
                    .chain(
                        citations
                            .iter()
                            .flatten()
                            .map(|citation| Delta::CitationsDelta {
                                citation: citation.clone(),
                            }),
                    )
                    .collect(),
            ),
            ContentBlock::Thinking {
                thinking,
                signature,
            } => (
                BlockStart::Thinking {
                    thinking: String::new(),
                    signature: String::new(),
                },
                vec![
                    Delta::ThinkingDelta {
                        thinking: thinking.clone(),
                    },
                    Delta::SignatureDelta {
                        signature: signature.clone(),
                    },
                ],
            ),
            ContentBlock::ToolUse { id, name, input } => (
                BlockStart::ToolUse {
                    id: id.clone(),
                    name: name.clone(),
                    input: serde_json::json!({}),
                },
                vec![Delta::InputJsonDelta {
                    partial_json: input.to_string(),
                }],
            ),
            ContentBlock::ServerToolUse { id, name, input } => (
                BlockStart::ServerToolUse {
                    id: id.clone(),
                    name: name.clone(),
                    input: serde_json::json!({}),
                },
                vec![Delta::InputJsonDelta {
                    partial_json: input.to_string(),
                }],
            ),
            ContentBlock::RedactedThinking { data } => {
                (BlockStart::RedactedThinking { data: data.clone() }, vec![])
            }
            ContentBlock::WebSearchToolResult {
                tool_use_id,
                content,
            } => (
                BlockStart::WebSearchToolResult {
                    tool_use_id: tool_use_id.clone(),
                    content: content.clone(),
                },
                vec![],
            ),
            ContentBlock::WebFetchToolResult {
                tool_use_id,
                content,
            } => (
                BlockStart::WebFetchToolResult {
                    tool_use_id: tool_use_id.clone(),
                    content: content.clone(),
                },
                vec![],
            ),
        };
        events.push(StreamEvent::ContentBlockStart {
            index,
            content_block: start,
        });
        events.extend(
            deltas
                .into_iter()
                .map(|delta| StreamEvent::ContentBlockDelta { index, delta }),
        );
        events.push(StreamEvent::ContentBlockStop { index });
    }
    events.push(StreamEvent::MessageDelta {
        delta: MessageDeltaBody {
            stop_reason: message.stop_reason,
            stop_sequence: message.stop_sequence.clone(),
        },
        usage: message.usage.clone(),
    });
    events.push(StreamEvent::MessageStop);
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::chat_validate::check_chat_sse;

    const STREAM: &str = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n",
        "event: ping\ndata: {\"type\":\"ping\"}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"cmd\\\":\\\"ls\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":5,\"output_tokens\":7}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    fn chat(include_usage: bool) -> FrontAnswer {
        FrontAnswer {
            id: String::from("x1"),
            created: 1_700_000_000,
            model: String::from("gpt-x"),
            shape: FrontShape::Chat { include_usage },
        }
    }

    fn responses() -> FrontAnswer {
        FrontAnswer {
            shape: FrontShape::Responses {
                tools: ResponsesTools::default(),
                include_encrypted_reasoning: false,
                echo: serde_json::Map::new(),
            },
            ..chat(false)
        }
    }

    #[test]
    fn any_split_of_the_bytes_gives_the_same_chat_stream() {
        let whole = {
            let mut s = FrontStream::new(&chat(true));
            let mut out = s.feed(STREAM.as_bytes());
            out.push_str(&s.finish());
            out
        };
        check_chat_sse(whole.as_bytes(), true).unwrap();
        assert!(whole.contains(r#""finish_reason":"tool_calls""#), "{whole}");
        for cut in [1, 7, 100, 333, STREAM.len() - 3] {
            let mut s = FrontStream::new(&chat(true));
            let mut out = s.feed(&STREAM.as_bytes()[..cut]);
            out.push_str(&s.feed(&STREAM.as_bytes()[cut..]));
            out.push_str(&s.finish());
            assert_eq!(out, whole, "cut at {cut}");
        }
    }

    /// Every call of a limited stream, the empty runs after it until one gives nothing.
    fn drained(stream: &mut FrontStream, first: String) -> Vec<String> {
        let mut pieces = vec![first];
        loop {
            let more = stream.feed(b"");
            if more.is_empty() {
                return pieces;
            }
            pieces.push(more);
        }
    }

    #[test]
    fn a_limited_stream_holds_one_long_closing_event_at_a_time() {
        let text = "lorem ipsum ".repeat(1000);
        let message = format!(
            r#"{{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{{"type":"text","text":"{text}"}}],"stop_reason":"end_turn","stop_sequence":null,"usage":{{"input_tokens":5,"output_tokens":7}}}}"#
        );
        let message: Message = serde_json::from_str(&message).unwrap();
        let sse: String = events_of_message(&message)
            .iter()
            .map(crate::api::encode_event)
            .collect();
        let mut whole = FrontStream::new(&responses());
        let expected = whole.feed(sse.as_bytes()) + &whole.finish();
        assert_eq!(
            expected.matches(text.as_str()).count(),
            5,
            "a delta and four closing events"
        );
        for limit in [1, 1000, text.len() + 1, 4 * text.len()] {
            let mut limited = FrontStream::new(&responses()).limited(limit);
            let first = limited.feed(sse.as_bytes());
            assert_eq!(
                first.is_empty(),
                sse.len() >= limit,
                "limit {limit}: a long input's output waits for the next call"
            );
            let mut pieces = drained(&mut limited, first);
            let last = limited.finish();
            pieces.extend(drained(&mut limited, last));
            assert_eq!(pieces.concat(), expected, "limit {limit}");
            for piece in &pieces {
                let copies = piece.matches(text.as_str()).count();
                let allowed = limit.div_ceil(text.len()).max(1);
                assert!(
                    copies <= allowed,
                    "limit {limit}: {copies} copies in one call"
                );
            }
        }
    }

    #[test]
    fn a_fold_and_a_complete_message_give_the_same_object() {
        let mut fold = FrontFold::new(&chat(false));
        fold.feed(STREAM.as_bytes());
        let (status, folded) = fold.finish();
        assert_eq!(status, 200, "{folded}");
        let value: serde_json::Value = serde_json::from_str(&folded).unwrap();
        assert_eq!(value["object"], "chat.completion");
        assert_eq!(
            value["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            "{\"cmd\":\"ls\"}"
        );
        assert_eq!(value["usage"]["completion_tokens"], 7);

        let message = r#"{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"cmd":"ls"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":7}}"#;
        let (status, whole) = complete(&chat(false), 200, message.as_bytes());
        assert_eq!((status, whole), (200, folded));
    }

    #[test]
    fn errors_keep_their_status_and_read_as_openai_errors() {
        let (status, body) = complete(
            &responses(),
            429,
            br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        );
        assert_eq!(status, 429);
        let value: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(value["error"]["message"], "slow down");
        let (status, body) = complete(&chat(false), 200, b"<html>oops</html>");
        assert_eq!(status, 502, "{body}");
        assert!(body.contains("oops"), "{body}");

        let mut fold = FrontFold::new(&chat(false));
        fold.feed(b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n");
        let (status, body) = fold.finish();
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("busy"));
    }

    #[test]
    fn a_responses_stream_ends_with_one_terminal_event() {
        let mut s = FrontStream::new(&responses());
        let mut out = s.feed(STREAM.as_bytes());
        out.push_str(&s.finish());
        assert!(out.contains("event: response.completed"), "{out}");
        assert_eq!(out.matches("event: response.completed").count(), 1);
        assert!(s.finish().is_empty(), "finishing twice writes nothing more");
    }
}
