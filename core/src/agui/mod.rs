//! Claude Code ⇄ AG-UI: drive Claude Code (`claude -p --input-format stream-json
//! --output-format stream-json --verbose`) from an AG-UI client such as CopilotKit.
//!
//! The host owns the process and the HTTP connection; this module only translates, in both
//! directions, and checks its own output:
//!
//! - [`input`]: the client's `RunAgentInput` → the `user` line to write to Claude Code's stdin
//!   ([`input::to_claude_user_message`]), and the tool results the host routes itself.
//! - [`claude`]: Claude Code's stdout → lines ([`claude::LineBuffer`]) → typed, tolerant
//!   messages ([`claude::parse_line`]).
//! - [`translate`]: messages → AG-UI events ([`translate::ClaudeToAgui`], a state machine per run).
//! - [`events`]: the AG-UI events and their SSE encoding ([`events::encode_sse`]).
//! - [`verify`]: the ordering rules an AG-UI client enforces ([`verify::Verifier`]).
//! - [`replay`]: a thread's history made valid to replay (`agent/connect`).
//!
//! One run, end to end (the host would write `line` to stdin and the SSE text to the client):
//!
//! ```
//! use bridge_core::agui::claude::{parse_line, LineBuffer};
//! use bridge_core::agui::events::encode_sse;
//! use bridge_core::agui::input::{to_claude_user_message, InputOptions, RunAgentInput};
//! use bridge_core::agui::translate::ClaudeToAgui;
//! use bridge_core::agui::verify::Verifier;
//!
//! let body = r#"{"threadId":"thread-1","runId":"run-1","state":{},"tools":[],"context":[],
//!   "forwardedProps":{},"messages":[{"id":"u1","role":"user","content":"Say hi"}]}"#;
//! let input: RunAgentInput = serde_json::from_str(body).unwrap();
//! let line = to_claude_user_message(&input, &InputOptions::default()).unwrap();
//! assert_eq!(line["type"], "user");
//!
//! let stdout = concat!(
//!     r#"{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"Hi!"}]}}"#, "\n",
//!     r#"{"type":"result","subtype":"success","is_error":false,"result":"Hi!"}"#, "\n",
//! );
//! let mut lines = LineBuffer::new();
//! let mut run = ClaudeToAgui::new(input.thread_id.as_str(), input.run_id.as_str(), 7);
//! let mut events = run.start();
//! for chunk in stdout.as_bytes().chunks(10) {
//!     for line in lines.push(chunk) {
//!         events.extend(run.feed(&parse_line(&line).unwrap()));
//!     }
//! }
//! assert!(run.is_done());
//! Verifier::check(&events).unwrap();
//! let sse: String = events.iter().map(encode_sse).collect();
//! assert!(sse.starts_with("data: {\"type\":\"RUN_STARTED\",\"threadId\":\"thread-1\",\"runId\":\"run-1\"}\n\n"));
//! assert!(sse.contains("\"delta\":\"Hi!\""));
//! assert!(sse.ends_with("\"result\":\"Hi!\"}\n\n"));
//! ```

pub mod claude;
pub mod events;
pub mod input;
pub mod replay;
pub mod session;
pub mod translate;
pub mod verify;
