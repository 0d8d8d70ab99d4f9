//! Token estimates for when the upstream has not (yet) said how many tokens a prompt has.
//!
//! Anthropic-style tokenizers average roughly 3.5–4 characters per token on English and code;
//! the estimate counts characters of everything the model reads (system, messages, tool
//! definitions) and divides by 4, adds a small per-message overhead and a flat cost per image.
//! It is never 0 for a non-empty request (a 0 breaks Claude Code's context meter).
//!
//! ```
//! let n = bridge_core::tokens::count_request_tokens(
//!     br#"{"model":"m","messages":[{"role":"user","content":"Hello there, how are you today?"}]}"#,
//! ).unwrap();
//! assert!(n >= 8 && n <= 20, "{n}");
//! ```

use crate::anthropic::tool_schema::{CleanedSchema, ToolSchema, json_chars};

use crate::anthropic::request::parse_request;
use crate::anthropic::request::{Block, Content, KnownBlock, MessagesRequest, Tool};
use crate::error::RequestError;

const CHARS_PER_TOKEN: usize = 4;
const PER_MESSAGE: usize = 4;
const PER_IMAGE: usize = 1_600;

/// Estimate for a raw request body (`/v1/messages/count_tokens`).
///
/// # Errors
/// [`RequestError`] when the body is not a Messages request.
pub fn count_request_tokens(request: &[u8]) -> Result<u32, RequestError> {
    Ok(estimate_request(&parse_request(request)?))
}

/// Estimate for a parsed request.
#[must_use]
pub fn estimate_request(req: &MessagesRequest) -> u32 {
    let mut tools = ToolChars::default();
    for tool in req.tools.iter().flatten() {
        tools.add(
            tool,
            tool.input_schema.as_ref().map_or(0, ToolSchema::json_chars),
        );
    }
    estimate_with_tools(req, &tools)
}

/// What the tools of a request add to its estimate, counted by a translator as it converts
/// each one: cleaning a schema for the upstream counts it in the same pass
/// ([`ToolSchema::cleaned_counted`]), so the schema text is read once, not twice.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ToolChars(usize);

impl ToolChars {
    /// `tool`, whose schema is `schema_chars` long as the estimate counts it (0 for none).
    pub fn add(&mut self, tool: &Tool, schema_chars: usize) {
        self.0 += tool.name.len()
            + tool
                .description
                .as_ref()
                .map_or(0, crate::json_string::JsonString::len)
            + schema_chars;
    }

    /// `tool` counted, and its schema taken out of it cleaned for an OpenAI upstream
    /// ([`ToolSchema::cleaned_counted`]: counted in the same pass); `None` for a tool without
    /// one (a server tool).
    pub fn clean_and_add(&mut self, tool: &mut Tool, strict: bool) -> Option<CleanedSchema> {
        let cleaned = tool
            .input_schema
            .take()
            .map(|schema| schema.cleaned_counted(strict));
        self.add(tool, cleaned.as_ref().map_or(0, |(_, chars)| *chars));
        cleaned.map(|(schema, _)| schema)
    }
}

/// [`estimate_request`] with the tools already counted: `req.tools` is not read (a translator
/// has moved them into its body by now).
#[must_use]
pub fn estimate_with_tools(req: &MessagesRequest, tools: &ToolChars) -> u32 {
    let mut chars = tools.0;
    let mut extra = 0usize;
    if let Some(system) = &req.system {
        chars += content_chars(system, &mut extra);
    }
    for message in &req.messages {
        extra += PER_MESSAGE;
        chars += content_chars(&message.content, &mut extra);
    }
    let tokens = chars.div_ceil(CHARS_PER_TOKEN) + extra;
    u32::try_from(tokens.max(1)).unwrap_or(u32::MAX)
}

/// Estimated tokens of generated text (when the upstream reports no usage).
#[must_use]
pub fn estimate_text(chars: usize) -> u32 {
    u32::try_from(chars.div_ceil(CHARS_PER_TOKEN)).unwrap_or(u32::MAX)
}

fn content_chars(content: &Content, extra: &mut usize) -> usize {
    match content {
        Content::Text(text) => text.len(),
        Content::Blocks(blocks) => blocks.iter().map(|b| block_chars(b, extra)).sum(),
    }
}

fn block_chars(block: &Block, extra: &mut usize) -> usize {
    match block {
        Block::Known(KnownBlock::Text { text, .. }) => text.len(),
        Block::Known(KnownBlock::Thinking { thinking, .. }) => thinking.len(),
        Block::Known(KnownBlock::ToolUse { name, input, .. }) => name.len() + json_chars(input),
        Block::Known(KnownBlock::ToolResult { content, .. }) => {
            content.as_ref().map_or(0, |c| content_chars(c, extra))
        }
        Block::Known(KnownBlock::Image { .. }) => {
            *extra += PER_IMAGE;
            0
        }
        Block::Known(KnownBlock::RedactedThinking { data }) => data.len() / 4,
        Block::Known(KnownBlock::Document { source, .. }) => json_chars(source),
        Block::Other(value) => json_chars(value),
    }
}
