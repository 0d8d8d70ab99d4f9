//! The OpenAI fronts: OpenAI clients (the OpenAI SDKs, tools built on Chat Completions) talking
//! to a bridge that speaks Anthropic inside.
//!
//! The rest of the core turns an *Anthropic* request into whatever the upstream speaks and the
//! upstream's answer back into Anthropic events. A front wraps that pipeline from the outside:
//!
//! ```text
//!  OpenAI client ──chat.completions request──► chat_request ──Anthropic request──► (router, providers)
//!  OpenAI client ◄──chat.completion.chunk SSE── chat_stream  ◄──Anthropic events─── (any upstream)
//!  Codex CLI ─────────responses request────────► responses_request ──Anthropic request──► …
//!  Codex CLI ◄───────response.* event SSE─────── responses_stream  ◄──Anthropic events─── …
//! ```
//!
//! - [`chat_request`]: a Chat Completions request (JSON bytes) → an Anthropic
//!   [`MessagesRequest`](crate::anthropic::request::MessagesRequest), plus what the answer's
//!   encoder needs to know (streaming or not, `include_usage`). Errors name the field to fix.
//! - [`chat_stream`]: Anthropic [`StreamEvent`](crate::anthropic::events::StreamEvent)s →
//!   `data: {chunk}\n\n` … `data: [DONE]\n\n` (a sans-IO encoder), and the same events folded
//!   into one `chat.completion` object for non-streaming clients (one code path: the fold reads
//!   the encoder's chunks).
//! - [`chat_validate`]: checks that a Chat Completions SSE stream is well-formed (role first,
//!   tool-call fragments in order, one `finish_reason`, the usage chunk, `[DONE]` last).
//! - [`responses_request`]: a Responses request (what the Codex CLI sends) → an Anthropic
//!   request; Codex's `custom` tools (`apply_patch`) become tools taking one string.
//! - [`responses_stream`]: Anthropic events → the Responses event stream (item lifecycle,
//!   `sequence_number`s, one terminal event) and the folded `response` object.
//! - [`transcode`]: for a host: Anthropic SSE bytes (what every provider answers) → the
//!   client's stream or folded object, and a whole Anthropic answer likewise.
//! - [`responses_validate`]: checks a Responses event stream (sequence numbers, item lifecycle,
//!   done texts equal to their deltas, exactly one terminal event).
//!
//! Like the rest of the core nothing here reads a clock or draws randomness: the completion id
//! and the `created` time are arguments.
//!
//! ```
//! use bridge_core::anthropic::events::*;
//! use bridge_core::front::chat_request::chat_to_anthropic;
//! use bridge_core::front::chat_stream::ChatStreamEncoder;
//! use bridge_core::front::chat_validate::check_chat_sse;
//!
//! // The request side: OpenAI in, Anthropic out.
//! let front = chat_to_anthropic(br#"{"model":"gpt-x","stream":true,
//!     "stream_options":{"include_usage":true},
//!     "messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}"#).unwrap();
//! assert_eq!(front.request.max_tokens, None); // none invented: the target decides
//! assert!(front.stream && front.include_usage);
//!
//! // The answer side: Anthropic events in, Chat Completions SSE out.
//! let mut enc = ChatStreamEncoder::new("abc", 1_700_000_000, "gpt-x", front.include_usage);
//! let mut sse = String::new();
//! for event in [
//!     StreamEvent::MessageStart { message: Box::new(MessageShell::new("msg_1".into(), "gpt-x".into(), 9)) },
//!     StreamEvent::ContentBlockStart { index: 0, content_block: BlockStart::Text { text: String::new() } },
//!     StreamEvent::ContentBlockDelta { index: 0, delta: Delta::TextDelta { text: "Hello".into() } },
//!     StreamEvent::ContentBlockStop { index: 0 },
//!     StreamEvent::MessageDelta {
//!         delta: MessageDeltaBody { stop_reason: Some(StopReason::EndTurn), stop_sequence: None },
//!         usage: Usage { input_tokens: 9, output_tokens: 2, ..Default::default() },
//!     },
//!     StreamEvent::MessageStop,
//! ] {
//!     sse.push_str(&enc.push(event));
//! }
//! sse.push_str(&enc.finish());
//! assert!(sse.contains(r#""delta":{"content":"Hello"}"#));
//! assert!(sse.ends_with("data: [DONE]\n\n"));
//! check_chat_sse(sse.as_bytes(), true).unwrap();
//! ```
//!
//! The Responses front works the same way; its encoder also needs the request's custom tool
//! names (their calls become `custom_tool_call` items) and whether to pass reasoning signatures:
//!
//! ```
//! use bridge_core::anthropic::events::*;
//! use bridge_core::front::responses_request::responses_to_anthropic;
//! use bridge_core::front::responses_stream::{ResponsesStreamEncoder, ResponsesStreamOptions};
//! use bridge_core::front::responses_validate::check_responses_sse;
//!
//! let front = responses_to_anthropic(br#"{"model":"gpt-5.5","stream":true,"input":"hi",
//!     "tools":[{"type":"custom","name":"apply_patch"}]}"#).unwrap();
//! let mut enc = ResponsesStreamEncoder::new(ResponsesStreamOptions {
//!     id: "r1".into(), created_at: 1_700_000_000, model: "gpt-5.5".into(),
//!     tools: front.client_tools.clone(),
//!     include_encrypted_reasoning: front.include_encrypted_reasoning,
//!     echo: front.echo.clone(),
//! });
//! let mut sse = String::new();
//! for event in [
//!     StreamEvent::MessageStart { message: Box::new(MessageShell::new("msg_1".into(), "gpt-5.5".into(), 9)) },
//!     StreamEvent::ContentBlockStart { index: 0, content_block: BlockStart::ToolUse {
//!         id: "toolu_1".into(), name: "apply_patch".into(), input: serde_json::json!({}) } },
//!     StreamEvent::ContentBlockDelta { index: 0,
//!         delta: Delta::InputJsonDelta { partial_json: r#"{"input":"*** Begin Patch"}"#.into() } },
//!     StreamEvent::ContentBlockStop { index: 0 },
//!     StreamEvent::MessageDelta {
//!         delta: MessageDeltaBody { stop_reason: Some(StopReason::ToolUse), stop_sequence: None },
//!         usage: Usage { input_tokens: 9, output_tokens: 7, ..Default::default() },
//!     },
//!     StreamEvent::MessageStop,
//! ] {
//!     sse.push_str(&enc.push(event));
//! }
//! let events = check_responses_sse(sse.as_bytes()).unwrap();
//! let done = &events.last().unwrap()["response"];
//! assert_eq!(done["status"], "completed");
//! assert_eq!(done["output"][0]["type"], "custom_tool_call");
//! assert_eq!(done["output"][0]["input"], "*** Begin Patch");
//! ```

pub mod chat_request;
pub mod chat_stream;
pub mod chat_validate;
pub mod client_tools;
pub mod facade;
pub mod responses_request;
pub mod responses_state;
pub mod responses_stream;
pub mod responses_validate;
pub mod transcode;

mod convert;
mod error;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod request_properties;

pub use error::{Failure, FrontError, openai_error_body, openai_error_fields, openai_status};

/// `out` followed by `more`; the first piece is taken as it is, not copied (one event can be a
/// whole answer, tens of MB).
pub(crate) fn append_taken(out: &mut String, more: String) {
    if out.is_empty() {
        *out = more;
    } else {
        out.push_str(&more);
    }
}
