//! OpenAI types: Chat Completions (the request the bridge sends and the stream chunks it reads)
//! and the Responses API (request items, stream events, and the signature that carries encrypted
//! reasoning through an Anthropic thinking block).

pub mod chat;
mod chat_chunk;
pub mod responses;
