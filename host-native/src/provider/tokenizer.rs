//! Input-token counts for `message_start` from the upstream model's own tokenizer
//! (`--tokenizer`, per provider `tokenizer`; off by default).
//!
//! An OpenAI-compatible upstream reports usage only when its stream ends, so `message_start`
//! — where some clients (LangChain JS) read input tokens, and nowhere else — holds the core's
//! estimate (about four characters a token). With a tokenizer the bridge counts the prompt it
//! sends instead, while the upstream is already working on it (a blocking task started before
//! the request goes out, awaited when the answer's headers are in): nothing waits for it.
//!
//! | `tokenizer` | what counts |
//! |---|---|
//! | `o200k_base`, `cl100k_base`, `o200k_harmony`, `p50k_base`, `r50k_base` | that OpenAI encoding (tiktoken-rs) |
//! | `auto` | the encoding OpenAI uses for the upstream model (`gpt-4o`, `gpt-4.1`, `gpt-5`, `o3` …: o200k; `gpt-4`, `gpt-3.5`: cl100k); other models keep the estimate |
//! | a path to a `tokenizer.json` | that Hugging Face tokenizer (vLLM, SGLang, llama.cpp models) |
//!
//! The count is OpenAI's formula: each message's text and role plus 3 tokens, plus 3 for the
//! answer's priming; tool definitions and call arguments as their JSON text. It is exact for
//! plain chat with OpenAI's encodings, and within a few tokens per message otherwise (a Hugging
//! Face model's chat template adds its own tokens; images are not counted). The upstream's own
//! count still comes with `message_delta`. A tokenizer is loaded once per process (an OpenAI
//! encoding takes about 20 MB and 90 ms), when the first request needs it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde_json::Value;

/// A loaded tokenizer.
pub enum Tokenizer {
    /// An OpenAI encoding.
    Openai(tiktoken_rs::CoreBPE),
    /// A Hugging Face `tokenizer.json`.
    HuggingFace(Box<tokenizers::Tokenizer>),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Openai(_) => "Tokenizer::Openai",
            Self::HuggingFace(_) => "Tokenizer::HuggingFace",
        })
    }
}

/// What `--tokenizer` names, checked at start (a missing file is an error then, not later).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenizerSpec {
    /// OpenAI's encoding for the upstream model, when it is an OpenAI model.
    Auto,
    /// One OpenAI encoding by name.
    Encoding(String),
    /// A `tokenizer.json` file.
    File(String),
}

/// OpenAI encodings tiktoken-rs carries.
const ENCODINGS: [&str; 5] = [
    "o200k_base",
    "o200k_harmony",
    "cl100k_base",
    "p50k_base",
    "r50k_base",
];

impl TokenizerSpec {
    /// Read a `--tokenizer` value.
    ///
    /// # Errors
    /// Neither `auto`, an encoding, nor a file that exists.
    pub fn parse(value: &str) -> Result<Self, String> {
        if value == "auto" {
            Ok(Self::Auto)
        } else if ENCODINGS.contains(&value) {
            Ok(Self::Encoding(value.to_owned()))
        } else if Path::new(value).is_file() {
            Ok(Self::File(value.to_owned()))
        } else {
            Err(format!(
                "--tokenizer {value:?} is neither auto, an OpenAI encoding ({}), nor a tokenizer.json file that exists",
                ENCODINGS.join(", ")
            ))
        }
    }

    /// The tokenizer for requests to `model` (`None`: keep the estimate).
    ///
    /// # Errors
    /// The encoding or file could not be loaded (said once per spec, then `None`).
    pub fn tokenizer(&self, model: &str) -> Result<Option<Arc<Tokenizer>>, String> {
        let key = match self {
            Self::Auto => match openai_encoding(model) {
                Some(encoding) => encoding.to_owned(),
                None => return Ok(None),
            },
            Self::Encoding(name) => name.clone(),
            Self::File(path) => path.clone(),
        };
        loaded(&key)
    }
}

/// OpenAI's encoding for `model`, if it is one of OpenAI's (a provider prefix such as
/// `openai/` is ignored).
fn openai_encoding(model: &str) -> Option<&'static str> {
    let model = model.rsplit('/').next().unwrap_or(model);
    match tiktoken_rs::tokenizer::get_tokenizer(model)? {
        tiktoken_rs::tokenizer::Tokenizer::O200kBase => Some("o200k_base"),
        tiktoken_rs::tokenizer::Tokenizer::O200kHarmony => Some("o200k_harmony"),
        tiktoken_rs::tokenizer::Tokenizer::Cl100kBase => Some("cl100k_base"),
        _ => None,
    }
}

/// The tokenizer for `key` (an encoding or a path), loaded on first use and shared.
fn loaded(key: &str) -> Result<Option<Arc<Tokenizer>>, String> {
    type Cache = Mutex<HashMap<String, Option<Arc<Tokenizer>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(found) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(key)
    {
        return Ok(found.clone());
    }
    // Loaded outside the lock (tens of milliseconds); two first requests may both load it.
    let result = load(key);
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    match result {
        Ok(tokenizer) => {
            let tokenizer = Some(Arc::new(tokenizer));
            cache.insert(key.to_owned(), tokenizer.clone());
            Ok(tokenizer)
        }
        Err(e) => {
            // Said once; later requests keep the estimate.
            cache.insert(key.to_owned(), None);
            Err(e)
        }
    }
}

fn load(key: &str) -> Result<Tokenizer, String> {
    let openai = match key {
        "o200k_base" => Some(tiktoken_rs::o200k_base()),
        "o200k_harmony" => Some(tiktoken_rs::o200k_harmony()),
        "cl100k_base" => Some(tiktoken_rs::cl100k_base()),
        "p50k_base" => Some(tiktoken_rs::p50k_base()),
        "r50k_base" => Some(tiktoken_rs::r50k_base()),
        _ => None,
    };
    match openai {
        Some(bpe) => bpe
            .map(Tokenizer::Openai)
            .map_err(|e| format!("the {key} encoding did not load: {e}")),
        None => tokenizers::Tokenizer::from_file(key)
            .map(|t| Tokenizer::HuggingFace(Box::new(t)))
            .map_err(|e| format!("the tokenizer {key} did not load: {e}")),
    }
}

/// Tokens every message adds besides its text (OpenAI's formula), and the answer's priming.
const PER_MESSAGE: u32 = 3;
const PRIMING: u32 = 3;

/// Fields whose strings are data, not text the model reads as tokens.
const NOT_TEXT: [&str; 6] = ["image_url", "url", "file_data", "data", "type", "id"];

impl Tokenizer {
    /// Tokens of `text`.
    #[must_use]
    pub fn count(&self, text: &str) -> u32 {
        let n = match self {
            Self::Openai(bpe) => bpe.encode_ordinary(text).len(),
            Self::HuggingFace(t) => t.encode(text, false).map_or(0, |e| e.len()),
        };
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The prompt tokens of an upstream request body (Chat Completions `messages`, or
    /// Responses `instructions` and `input`; `tools` as their JSON), or `None` when it is not
    /// one.
    #[must_use]
    pub fn prompt_tokens(&self, body: &[u8]) -> Option<u32> {
        let request: Value = serde_json::from_slice(body).ok()?;
        let mut total = PRIMING;
        let turns = request.get("messages").or_else(|| request.get("input"))?;
        match turns {
            Value::String(text) => total += PER_MESSAGE + self.count(text),
            Value::Array(items) => {
                for item in items {
                    total = total.saturating_add(PER_MESSAGE + self.text_tokens(item));
                }
            }
            _ => return None,
        }
        if let Some(Value::String(instructions)) = request.get("instructions") {
            total = total.saturating_add(PER_MESSAGE + self.count(instructions));
        }
        if let Some(tools) = request.get("tools").filter(|t| !t.is_null()) {
            total = total.saturating_add(self.count(&tools.to_string()));
        }
        Some(total)
    }

    /// Tokens of the text in one message or item: its strings (role, content, names, call
    /// arguments), not its data (images, ids, types).
    fn text_tokens(&self, value: &Value) -> u32 {
        match value {
            Value::String(text) => self.count(text),
            Value::Array(items) => items.iter().map(|i| self.text_tokens(i)).sum(),
            Value::Object(fields) => fields
                .iter()
                .filter(|(key, _)| !NOT_TEXT.contains(&key.as_str()))
                .map(|(_, v)| self.text_tokens(v))
                .sum(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_counts_follow_the_encoding_and_the_message_formula() {
        let o200k = TokenizerSpec::parse("o200k_base")
            .unwrap()
            .tokenizer("anything")
            .unwrap()
            .unwrap();
        // Reference counts from OpenAI's Python `tiktoken` 0.14.0 (o200k_base).
        assert_eq!(
            o200k.count("Hello, world! This is a test of the tokenizer."),
            12
        );
        // [{"role":"user","content":"Say hello."}]: 3 + "user" (1) + "Say hello." (3) + 3.
        let body =
            br#"{"model":"m","messages":[{"role":"user","content":"Say hello."}],"stream":true}"#;
        assert_eq!(o200k.prompt_tokens(body), Some(10));
        // An image's data is not counted as text.
        let image = br#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}"#;
        assert_eq!(o200k.prompt_tokens(image), Some(3 + 1 + 3));
        assert_eq!(o200k.prompt_tokens(b"not json"), None);
    }

    #[test]
    fn auto_knows_openai_models_only() {
        assert_eq!(openai_encoding("gpt-4o-mini"), Some("o200k_base"));
        assert_eq!(openai_encoding("openai/gpt-4.1"), Some("o200k_base"));
        assert_eq!(openai_encoding("gpt-3.5-turbo"), Some("cl100k_base"));
        assert_eq!(openai_encoding("qwen3-coder"), None);
        assert!(
            TokenizerSpec::Auto
                .tokenizer("qwen3-coder")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_hugging_face_tokenizer_json_counts_its_own_tokens() {
        let dir = std::env::temp_dir().join(format!("bridge-tok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokenizer.json");
        // A word-level tokenizer: one token per whitespace-separated word.
        std::fs::write(
            &path,
            r#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
               "normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,
               "decoder":null,"model":{"type":"WordLevel","vocab":{"[UNK]":0,"say":1,"hello":2,"user":3},
               "unk_token":"[UNK]"}}"#,
        )
        .unwrap();
        let spec = TokenizerSpec::parse(path.to_str().unwrap()).unwrap();
        let t = spec.tokenizer("m").unwrap().unwrap();
        assert_eq!(t.count("say hello again"), 3);
        let body = br#"{"messages":[{"role":"user","content":"say hello"}]}"#;
        assert_eq!(t.prompt_tokens(body), Some(3 + 1 + 2 + 3));
        assert!(TokenizerSpec::parse("/no/such/tokenizer.json").is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
