//! Translators between protocols.
//!
//! - [`chat_request`]: Anthropic Messages request → OpenAI Chat Completions request.
//! - [`chat_stream`]: OpenAI Chat Completions stream → Anthropic events (a sans-IO state machine).
//! - [`responses_request`]: Anthropic Messages request → OpenAI Responses request.
//! - [`responses_stream`]: OpenAI Responses stream → Anthropic events (a sans-IO state machine).
//! - [`token_stream`]: raw model text (a Fabstir host's tokens) → Anthropic events.
//! - [`passthrough`]: Anthropic → Anthropic (real Claude): the request as it came, the stream
//!   relayed whole frame by frame and ended well when cut.
//! - [`schema`]: tool input schemas cleaned for upstreams that reject parts of JSON Schema.
//! - [`tool_names`]: tool names an OpenAI-style upstream refuses, offered under short ones and
//!   named the client's way again on the way back.
//! - [`writer`]: the one [`writer::AnthropicWriter`] every stream translator writes its events
//!   through (well-formed by construction).

pub mod chat_request;
pub mod chat_stream;
pub mod passthrough;
pub mod responses_request;
pub mod responses_stream;
pub mod token_stream;
pub mod tool_names;
pub mod writer;

use crate::anthropic::events::{ApiError, ErrorKind, StreamEvent};
use crate::sse::decoder::{SseDecoder, SseFrame};
use crate::translate::writer::AnthropicWriter;

/// Most bytes one stream may make a translator hold that it cannot write yet: an SSE line
/// without its end, a tool call's arguments, text waiting behind an unfinished call. Past this
/// the stream ends with an `error` event instead of growing until the engine runs out of
/// memory. (A single 20 MB line is fine.)
pub const MAX_HELD_BYTES: usize = 64 << 20;

/// The error a stream ends with when it crossed [`MAX_HELD_BYTES`].
pub(crate) fn held_too_much(held: usize) -> ApiError {
    ApiError::new(
        ErrorKind::Api,
        format!(
            "the upstream sent {} MiB that did not complete (an SSE line, a tool call, or text \
             behind an unfinished tool call); the bridge stops at {} MiB instead of holding more",
            held >> 20,
            MAX_HELD_BYTES >> 20
        ),
    )
}

/// Raw bytes kept while a body does not look like SSE (to read a plain JSON answer or error).
const MAX_RAW_BODY: usize = 16 * 1024 * 1024;

/// An upstream body read as SSE: the decoder's state, the frames seen, and the raw bytes of a
/// body that has shown no frame yet (a server may answer with one plain JSON object instead).
#[derive(Debug, Default)]
pub(crate) struct SseBody {
    decoder: SseDecoder,
    raw: Vec<u8>,
    frames: usize,
}

impl SseBody {
    /// How many frames were handed to the translator so far.
    pub(crate) fn frames(&self) -> usize {
        self.frames
    }

    /// Bytes held: the decoder's unfinished line and frame, and a body not known to be SSE.
    fn held(&self) -> usize {
        self.decoder.held() + self.raw.len()
    }

    /// Drop what is held (the stream ended early).
    fn clear(&mut self) {
        self.decoder = SseDecoder::default();
        self.raw = Vec::new();
    }

    /// Keeps the bytes of a body not yet known to be SSE, and takes the decoder out so that
    /// its frames can go to the translator as they complete (see `feed_body`).
    fn take_decoder(&mut self, chunk: &[u8]) -> SseDecoder {
        if self.frames == 0 && self.raw.len() < MAX_RAW_BODY {
            self.raw.extend_from_slice(chunk);
        }
        std::mem::take(&mut self.decoder)
    }

    /// A frame is handed to the translator: the body is SSE, its raw bytes are not needed.
    fn handed_over(&mut self) {
        self.frames += 1;
        self.raw = Vec::new();
    }
}

/// The driver every SSE stream translator shares: bytes in through [`SseBody`], frames to the
/// translator, events out of its [`AnthropicWriter`]. A translator says what a frame, a plain
/// (non-SSE) body and the end of the body mean; the driver keeps the order of things: the first
/// feed writes `message_start` (or, for a translator that reads usage from the first frame, the
/// first frame — the same for any split of the bytes), nothing is read once the message is
/// done, a body without frames is handed over whole at the end.
pub(crate) trait SseTranslate {
    /// The translator writes `message_start` itself when it reads the first frame (which
    /// reports the input usage `message_start` announces), not at the first bytes.
    fn starts_on_first_frame(&self) -> bool {
        false
    }

    /// The writer the translator's events go through.
    fn writer(&mut self) -> &mut AnthropicWriter;
    /// The upstream body's state.
    fn body(&mut self) -> &mut SseBody;
    /// One frame's data (trimmed, not empty, not `[DONE]`) and its `event:` name.
    fn frame(&mut self, event: Option<&str>, data: &str);
    /// `data: [DONE]`.
    fn done_marker(&mut self);
    /// The whole body, when it held no SSE frame.
    fn plain_body(&mut self, raw: &[u8]);
    /// The body ended and the message is not done yet.
    fn body_ended(&mut self);
    /// Bytes the translator itself holds back (buffered calls and text).
    fn held(&self) -> usize;
    /// Drop what the translator holds back (the stream ended early).
    fn clear(&mut self);

    /// Hand one frame over: empty data is skipped, `[DONE]` is [`Self::done_marker`].
    fn dispatch(&mut self, frame: &SseFrame) {
        match frame.data.trim() {
            "" => {}
            "[DONE]" => self.done_marker(),
            data => self.frame(frame.event.as_deref(), data),
        }
    }

    /// Feed upstream bytes; returns the events they complete (at least `message_start` on the
    /// first call).
    fn feed_body(&mut self, chunk: &[u8]) -> Vec<StreamEvent> {
        if self.writer().is_done() {
            return Vec::new();
        }
        if !self.starts_on_first_frame() {
            self.writer().start();
        }
        let mut decoder = self.body().take_decoder(chunk);
        decoder.feed_each(chunk, |frame| {
            // Frames after the message is done are read and dropped.
            if !self.writer().is_done() {
                self.body().handed_over();
                self.dispatch(frame);
            }
        });
        self.body().decoder = decoder;
        let held = self.held() + self.body().held() + self.writer().held();
        if held > MAX_HELD_BYTES && !self.writer().is_done() {
            self.writer().fail(held_too_much(held));
            self.body().clear();
            self.clear();
        }
        self.writer().take()
    }

    /// The upstream body ended: the last frames, the plain body, then [`Self::body_ended`].
    fn finish_body(&mut self) -> Vec<StreamEvent> {
        if self.writer().is_done() {
            return Vec::new();
        }
        self.writer().start();
        for frame in self.body().decoder.finish() {
            self.body().handed_over();
            self.dispatch(&frame);
            if self.writer().is_done() {
                return self.writer().take();
            }
        }
        let raw = std::mem::take(&mut self.body().raw);
        if !raw.is_empty() {
            self.plain_body(&raw);
        }
        if !self.writer().is_done() {
            self.body_ended();
        }
        self.writer().take()
    }
}

#[cfg(test)]
mod tests {
    use super::chat_stream::ChatStreamTranslator;
    use super::responses_stream::ResponsesStreamTranslator;
    use super::token_stream::TokenStreamTranslator;
    use super::*;
    use crate::anthropic::events::StreamEvent;

    const MIB: usize = 1 << 20;

    fn ended_with_held_error(events: &[StreamEvent]) -> bool {
        events.iter().any(|e| {
            matches!(e, StreamEvent::Error { error } if error.message.contains("did not complete"))
        })
    }

    /// Feeds `chunk` until the translator ends the stream; returns how many bytes it took.
    fn feed_until_error(mut feed: impl FnMut() -> Vec<StreamEvent>, chunk_len: usize) -> usize {
        let mut fed = 0;
        loop {
            let events = feed();
            fed += chunk_len;
            if ended_with_held_error(&events) {
                return fed;
            }
            assert!(
                events
                    .iter()
                    .all(|e| !matches!(e, StreamEvent::Error { .. })),
                "{events:?}"
            );
            assert!(fed <= MAX_HELD_BYTES + 4 * MIB, "never stopped");
        }
    }

    #[test]
    fn an_endless_sse_line_ends_the_stream() {
        let mut t = ChatStreamTranslator::new("m".into(), 1, 1);
        // A first frame: the body is SSE, so its raw bytes are not kept as well.
        t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n");
        let chunk = vec![b'x'; MIB];
        let mut first = true;
        let fed = feed_until_error(
            || {
                let head: &[u8] = if first { b"data: " } else { b"" };
                first = false;
                t.feed(&[head, &chunk].concat())
            },
            MIB,
        );
        assert!(fed >= MAX_HELD_BYTES, "stopped early, at {fed}");
        // Nothing more after the error, and the memory is given back.
        assert!(t.feed(b"\n\n").is_empty());
        assert!(t.finish().is_empty());
    }

    #[test]
    fn a_large_line_that_ends_is_fine() {
        let mut t = ChatStreamTranslator::new("m".into(), 1, 1);
        let text = "y".repeat(20 * MIB);
        let line = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n"
        );
        let mut events = t.feed(line.as_bytes());
        events.extend(t.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"));
        events.extend(t.finish());
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, StreamEvent::Error { .. }))
        );
        assert!(matches!(events.last(), Some(StreamEvent::MessageStop)));
    }

    #[test]
    fn text_behind_an_unfinished_tool_call_is_bounded() {
        let mut t = ChatStreamTranslator::new("m".into(), 1, 1);
        // Call 0 opens with an incomplete argument; call 1 then waits behind it, and its
        // arguments and the text after it are held until call 0 finishes — which never happens.
        let open = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"Bash\",\"arguments\":\"{\\\"c\"}}]}}]}\n\n";
        let second = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"function\":{\"name\":\"Read\",\"arguments\":\"{\"}}]}}]}\n\n";
        assert!(!ended_with_held_error(&t.feed(open)));
        assert!(!ended_with_held_error(&t.feed(second)));
        let text = "z".repeat(MIB);
        let line = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":1,\"function\":{{\"arguments\":\"{text}\"}}}}]}}}}]}}\n\n"
        );
        let fed = feed_until_error(|| t.feed(line.as_bytes()), MIB);
        assert!(fed > MAX_HELD_BYTES / 2, "{fed}");
    }

    #[test]
    fn an_endless_responses_line_ends_the_stream() {
        let mut t = ResponsesStreamTranslator::new("m".into(), 1, 1);
        let chunk = vec![b'x'; MIB];
        let mut first = true;
        feed_until_error(
            || {
                let head: &[u8] = if first { b"data: " } else { b"" };
                first = false;
                t.feed(&[head, &chunk].concat())
            },
            MIB,
        );
    }

    #[test]
    fn an_unclosed_tool_call_in_model_text_is_bounded() {
        let bash = crate::chatml::tool_calls::ToolHint::from_schema("Bash", None);
        let mut t = TokenStreamTranslator::new("m".into(), 1, 1, vec![bash]);
        assert!(!ended_with_held_error(&t.feed(
            "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \""
        )));
        let text = "w".repeat(MIB);
        feed_until_error(|| t.feed(&text), MIB);
    }
}
