//! The Anthropic Messages API: tolerant request types, stream events, the stream validator and
//! the accumulator that folds a stream into one message.

pub mod accumulate;
pub mod defaults;
pub mod encode;
pub mod events;
pub mod fields;
pub mod overflow;
pub mod repair;
pub mod request;
pub mod schema;
pub mod stream;
pub mod tool_schema;
