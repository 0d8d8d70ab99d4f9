//! Translators between protocols.
//!
//! - [`chat_request`]: Anthropic Messages request → OpenAI Chat Completions request.
//! - [`chat_stream`]: OpenAI Chat Completions stream → Anthropic events (a sans-IO state machine).
//! - [`token_stream`]: raw model text (a Fabstir host's tokens) → Anthropic events.
//! - [`schema`]: tool input schemas cleaned for upstreams that reject parts of JSON Schema.
//! - [`writer`]: the one [`writer::AnthropicWriter`] every stream translator writes its events
//!   through (well-formed by construction).

pub mod chat_request;
pub mod chat_stream;
pub mod schema;
pub mod token_stream;
pub mod writer;
