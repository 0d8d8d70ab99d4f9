//! OpenAI Chat Completions types: the request the bridge sends and the stream chunks it reads.

pub mod chat;
