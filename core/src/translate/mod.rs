//! Translators between protocols.
//!
//! - [`chat_request`]: Anthropic Messages request → OpenAI Chat Completions request.
//! - [`chat_stream`]: OpenAI Chat Completions stream → Anthropic events (a sans-IO state machine).
//! - [`responses_request`]: Anthropic Messages request → OpenAI Responses request.
//! - [`responses_stream`]: OpenAI Responses stream → Anthropic events (a sans-IO state machine).
//! - [`token_stream`]: raw model text (a Fabstir host's tokens) → Anthropic events.
//! - [`schema`]: tool input schemas cleaned for upstreams that reject parts of JSON Schema.
//! - [`writer`]: the one [`writer::AnthropicWriter`] every stream translator writes its events
//!   through (well-formed by construction).

pub mod chat_request;
pub mod chat_stream;
pub mod responses_request;
pub mod responses_stream;
pub mod schema;
pub mod token_stream;
pub mod writer;

use crate::anthropic::events::StreamEvent;
use crate::sse::decoder::{SseDecoder, SseFrame};
use crate::translate::writer::AnthropicWriter;

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

    fn feed(&mut self, chunk: &[u8]) -> Vec<SseFrame> {
        if self.frames == 0 && self.raw.len() < MAX_RAW_BODY {
            self.raw.extend_from_slice(chunk);
        }
        self.decoder.feed(chunk)
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
/// feed writes `message_start`, nothing is read once the message is done, a body without frames
/// is handed over whole at the end.
pub(crate) trait SseTranslate {
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
        self.writer().start();
        for frame in self.body().feed(chunk) {
            self.body().handed_over();
            self.dispatch(&frame);
            if self.writer().is_done() {
                break;
            }
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
