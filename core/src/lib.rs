//! `bridge-core`: the pure, sans-IO translation core of claude-bridge.
//!
//! Everything that knows a protocol lives here; nothing here touches the world. Time and
//! randomness come in as arguments, so the same input gives the same bytes natively, inside
//! wasmtime (the `core/component` build) and in Node or a browser (the `pkg-js` build).
//!
//! - [`anthropic`]: tolerant request types, stream events, the stream [`anthropic::stream::Validator`]
//!   and the [`anthropic::accumulate::Accumulator`] that folds a stream into one message.
//! - [`openai`]: OpenAI Chat Completions request and chunk types.
//! - [`sse`]: incremental Server-Sent Events decoder and exact-bytes encoder.
//! - [`front`]: the OpenAI fronts: Chat Completions requests → Anthropic requests, Anthropic
//!   events → Chat Completions SSE or one `chat.completion`, and a Chat stream validator.
//! - [`translate`]: Anthropic → OpenAI Chat request conversion, OpenAI Chat stream → Anthropic
//!   events, raw model text → Anthropic events.
//! - [`chatml`]: ChatML prompts and the streaming tool-call parser for raw-text hosts (Fabstir).
//! - [`fabstir`]: the Fabstir host protocol's frames, model ids and host scoring.
//! - [`hex`]: the one hex codec (Fabstir keys, ids and envelopes).
//! - [`tokens`]: token estimates.
//! - [`route`]: which provider and model serve a request (the `[router]` rules), and the fallbacks.
//! - [`server_tools`]: web search run by the bridge for upstreams without it (the sans-IO loop).
//! - [`agui`]: Claude Code's stream-json NDJSON → AG-UI events, and AG-UI run input → Claude Code stdin.
//! - [`api`]: the facade the host, the component and the npm package call.

pub mod agui;
pub mod anthropic;
pub mod api;
pub mod chatml;
pub mod compact_json;
pub mod dialect;
pub mod error;
pub mod fabstir;
pub mod front;
pub mod fuzz;
pub mod hex;
pub mod ids;
pub mod json_string;
pub mod openai;
pub mod route;
pub mod server_tools;
pub mod sse;
pub mod tokens;
pub mod translate;
