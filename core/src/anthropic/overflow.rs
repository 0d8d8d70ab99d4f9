//! Context overflow, as Claude Code understands it.
//!
//! Claude Code compacts a conversation (and carries on) when the API answers
//! `invalid_request_error` "prompt is too long: N tokens > M maximum". Every other server says it
//! its own way; [`recognise`] reads the messages of OpenAI, vLLM, DeepSeek and OpenRouter ("This
//! model's maximum context length is M tokens. However, your messages resulted in N tokens"),
//! llama.cpp's server (`exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`),
//! llama-cpp-python ("Requested tokens (N) exceed context window of M"), LM Studio ("Trying to
//! keep the first N tokens when context the overflows. However, the model is loaded with context
//! length of only M tokens"), the Responses API (`context_length_exceeded`) and the generic
//! wordings of the rest, keeping the numbers when the server gave them.
//!
//! ```
//! use bridge_core::anthropic::overflow::recognise;
//! let said = "This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.";
//! let overflow = recognise(said, Some("context_length_exceeded"), None).unwrap();
//! assert_eq!(overflow.message(said), "prompt is too long: 8227 tokens > 8192 maximum");
//! ```

use serde_json::Value;

/// The upstream's context is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContextOverflow {
    /// Tokens the request needed, when the upstream said.
    pub prompt_tokens: Option<u64>,
    /// The model's context, when the upstream said.
    pub max_tokens: Option<u64>,
}

impl ContextOverflow {
    /// Anthropic's wording (what makes Claude Code compact), with the upstream's words when it
    /// gave no numbers.
    #[must_use]
    pub fn message(&self, upstream_said: &str) -> String {
        match (self.prompt_tokens, self.max_tokens) {
            (Some(n), Some(m)) => format!("prompt is too long: {n} tokens > {m} maximum"),
            _ => format!("prompt is too long: {}", upstream_said.trim()),
        }
    }
}

/// The number right after `phrase` (case-insensitive), skipping spaces, `(` and `about`.
fn number_after(text: &str, phrase: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let start = lower.find(phrase)? + phrase.len();
    let rest = lower[start..].trim_start_matches([' ', '(']);
    let rest = rest.strip_prefix("about ").unwrap_or(rest);
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Whether an upstream error (its message, its `code`/`type`, and the error object for servers
/// that put numbers beside the message) says the prompt does not fit the model's context.
#[must_use]
pub fn recognise(
    message: &str,
    code: Option<&str>,
    error: Option<&Value>,
) -> Option<ContextOverflow> {
    let lower = message.to_ascii_lowercase();
    let code = code.unwrap_or_default().to_ascii_lowercase();
    let field = |name: &str| error.and_then(|e| e.get(name)).and_then(Value::as_u64);
    // OpenAI, vLLM, DeepSeek, OpenRouter ("This endpoint's maximum context length is …").
    if lower.contains("maximum context length is") {
        return Some(ContextOverflow {
            max_tokens: number_after(message, "maximum context length is"),
            prompt_tokens: number_after(message, "resulted in")
                .or_else(|| number_after(message, "you requested")),
        });
    }
    // llama.cpp's server.
    if code.contains("exceed_context_size") || lower.contains("exceeds the available context size")
    {
        return Some(ContextOverflow {
            prompt_tokens: field("n_prompt_tokens"),
            max_tokens: field("n_ctx"),
        });
    }
    // llama-cpp-python.
    if lower.contains("requested tokens") && lower.contains("exceed context window") {
        return Some(ContextOverflow {
            prompt_tokens: number_after(message, "requested tokens"),
            max_tokens: number_after(message, "context window of"),
        });
    }
    // LM Studio.
    if lower.contains("when context the overflows") || lower.contains("when context overflows") {
        return Some(ContextOverflow {
            prompt_tokens: number_after(message, "keep the first"),
            max_tokens: number_after(message, "context length of only"),
        });
    }
    let worded = lower.contains("context size has been exceeded")
        || lower.contains("context window")
            && (lower.contains("exceed") || lower.contains("too long"))
        || lower.contains("context length")
            && (lower.contains("exceed") || lower.contains("too long"))
        || lower.contains("prompt is too long")
        || lower.contains("input is too long");
    let coded = ["context_length", "context_window", "prompt_too_long"]
        .iter()
        .any(|c| code.contains(c));
    (worded || coded).then(ContextOverflow::default)
}

/// Smallest output budget worth retrying with when the limit is what is left of the context
/// after the prompt: below it the prompt itself is the problem (and compaction the answer).
const MIN_USEFUL_OUTPUT: u64 = 1024;

/// The most output tokens (`max_tokens`) an upstream accepts, when its error says so: the request
/// is then worth sending once more with that `max_tokens`, rather than failing the turn.
///
/// Read from OpenAI ("This model supports at most N completion tokens"), DeepSeek ("the valid
/// range of max_tokens is [1, N]"), Groq ("`max_tokens` must be less than or equal to `N`"),
/// Anthropic ("max_tokens: 64000 > N, which is the maximum allowed number of output tokens"),
/// and vLLM, whose limit is the context left after the prompt ("maximum context length is M
/// tokens and your request has P input tokens", or "you requested … (P in the messages, … in the
/// completion)"): M − P, when that leaves at least 1024 tokens (else the prompt is the problem).
///
/// ```
/// use bridge_core::anthropic::overflow::max_tokens_limit;
/// let deepseek = "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]";
/// assert_eq!(max_tokens_limit(deepseek), Some(8192));
/// assert_eq!(max_tokens_limit("Rate limit reached"), None);
/// ```
#[must_use]
pub fn max_tokens_limit(message: &str) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    let about_output = ["max_tokens", "max_completion_tokens", "in the completion"]
        .iter()
        .any(|w| lower.contains(w));
    if !about_output {
        return None;
    }
    let stated = number_after(message, "supports at most")
        .or_else(|| number_after(message, "valid range of max_tokens is [1,"))
        .or_else(|| number_after(message, "less than or equal to `"))
        .or_else(|| number_after(message, "less than or equal to"))
        .or_else(|| {
            lower
                .contains("maximum allowed number of output tokens")
                .then(|| number_after(message, " > "))
                .flatten()
        });
    if let Some(limit) = stated.filter(|n| *n > 0) {
        return Some(limit);
    }
    let context = number_after(message, "maximum context length is")?;
    let prompt = number_after(message, "your request has").or_else(|| {
        // "you requested N tokens (P in the messages, C in the completion)"
        let start = lower.find("you requested")?;
        number_after(&message[start..], "tokens (")
    })?;
    context
        .checked_sub(prompt)
        .filter(|left| *left >= MIN_USEFUL_OUTPUT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn output_limits_are_read_from_each_upstreams_words() {
        let cases = [
            (
                "max_tokens is too large: 32768. This model supports at most 16384 completion tokens, whereas you provided 32768.",
                Some(16384),
            ),
            (
                "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
                Some(8192),
            ),
            (
                "`max_tokens` must be less than or equal to `8192`, the maximum value for `max_tokens` is less than the `context_window` for this model",
                Some(8192),
            ),
            (
                "max_tokens: 64000 > 32000, which is the maximum allowed number of output tokens for claude-opus-4-1-20250805",
                Some(32000),
            ),
            (
                "'max_tokens' or 'max_completion_tokens' is too large: 32768. This model's maximum context length is 16384 tokens and your request has 1234 input tokens (32768 > 16384 - 1234). None",
                Some(15150),
            ),
            (
                "This model's maximum context length is 8192 tokens. However, you requested 33000 tokens (232 in the messages, 32768 in the completion). Please reduce the length of the messages or completion.",
                Some(7960),
            ),
            (
                "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8500 in the messages, 500 in the completion). Please reduce the length of the messages or completion.",
                None,
            ),
            // The prompt itself fills the context: compaction, not a smaller max_tokens.
            (
                "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length is 8192 tokens and your request has 7900 input tokens (4096 > 8192 - 7900). None",
                None,
            ),
            ("model 'qwen3' not found, try pulling it first", None),
            ("Rate limit reached for gpt-4o", None),
        ];
        for (message, limit) in cases {
            assert_eq!(max_tokens_limit(message), limit, "{message}");
        }
    }

    fn said(message: &str, code: Option<&str>, error: Option<&Value>) -> String {
        recognise(message, code, error)
            .map(|o| o.message(message))
            .unwrap_or_default()
    }

    #[test]
    fn openai_chat_completions() {
        let m = "This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.";
        assert_eq!(
            said(m, Some("context_length_exceeded"), None),
            "prompt is too long: 8227 tokens > 8192 maximum"
        );
        let functions = "This model's maximum context length is 128000 tokens. However, your messages resulted in 202868 tokens (202767 in the messages, 101 in the functions). Please reduce the length of the messages or functions.";
        assert_eq!(
            said(functions, None, None),
            "prompt is too long: 202868 tokens > 128000 maximum"
        );
    }

    #[test]
    fn vllm_and_deepseek_count_the_completion_too() {
        let m = "This model's maximum context length is 8192 tokens. However, you requested 8203 tokens (7691 in the messages, 512 in the completion). Please reduce the length of the messages or completion.";
        assert_eq!(
            said(m, None, None),
            "prompt is too long: 8203 tokens > 8192 maximum"
        );
    }

    #[test]
    fn openrouter() {
        let m = "This endpoint's maximum context length is 163840 tokens. However, you requested about 180034 tokens (171842 of text input, 8192 in the output). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.";
        assert_eq!(
            said(m, None, None),
            "prompt is too long: 180034 tokens > 163840 maximum"
        );
    }

    #[test]
    fn llama_cpp_server() {
        let error = json!({"code": 400, "message": "the request exceeds the available context size. try increasing the context size or enable context shift", "type": "exceed_context_size_error", "n_prompt_tokens": 14429, "n_ctx": 8192});
        let m = error["message"].as_str().unwrap();
        assert_eq!(
            said(m, Some("exceed_context_size_error"), Some(&error)),
            "prompt is too long: 14429 tokens > 8192 maximum"
        );
        // Older servers: no numbers, no type.
        let old = "the request exceeds the available context size, try increasing it";
        assert_eq!(said(old, None, None), format!("prompt is too long: {old}"));
    }

    #[test]
    fn llama_cpp_python() {
        assert_eq!(
            said(
                "Requested tokens (2285) exceed context window of 2048",
                None,
                None
            ),
            "prompt is too long: 2285 tokens > 2048 maximum"
        );
    }

    #[test]
    fn lm_studio() {
        let m = "Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded with context length of only 7866 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input";
        assert_eq!(
            said(m, None, None),
            "prompt is too long: 10136 tokens > 7866 maximum"
        );
        assert_eq!(
            said("Context size has been exceeded.", None, None),
            "prompt is too long: Context size has been exceeded."
        );
    }

    #[test]
    fn responses_api_and_ollama() {
        let m = "Your input exceeds the context window of this model. Please adjust your input and try again.";
        assert_eq!(
            said(m, Some("context_length_exceeded"), None),
            format!("prompt is too long: {m}")
        );
        let ollama = "the input length exceeds the context length";
        assert_eq!(
            said(ollama, None, None),
            format!("prompt is too long: {ollama}")
        );
    }

    #[test]
    fn other_errors_are_not_overflow() {
        for m in [
            "Rate limit reached for gpt-4o",
            "model 'qwen3' not found, try pulling it first",
            "max_tokens is too large: 32768. This model supports at most 8192 completion tokens",
            "Invalid API key",
        ] {
            assert!(
                recognise(m, Some("invalid_request_error"), None).is_none(),
                "{m}"
            );
        }
    }
}
