//! Raw-text model protocol (Fabstir hosts): ChatML prompts in, model text with inline tool calls
//! out.
//!
//! - [`render`]: Anthropic request → ChatML prompt (tools and the call format in the system turn,
//!   earlier calls and results as text, images taken out).
//! - [`tool_calls`]: streaming parser of the model's text into reasoning, text and tool calls
//!   (JSON, GLM and Qwen3-Coder dialects; tags split anywhere).
//!
//! The reply translator built on the parser is [`crate::translate::token_stream`].

pub mod render;
pub mod tool_calls;
