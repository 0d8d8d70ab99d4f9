//! Translators between protocols.
//!
//! - [`chat_request`]: Anthropic Messages request → OpenAI Chat Completions request.
//! - [`chat_stream`]: OpenAI Chat Completions stream → Anthropic events (a sans-IO state machine).
//! - [`schema`]: tool input schemas cleaned for upstreams that reject parts of JSON Schema.

pub mod chat_request;
pub mod chat_stream;
pub mod schema;
