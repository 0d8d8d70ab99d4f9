//! Top-level request fields a translating provider reads, for the Messages API's older shapes
//! and its unknown fields: nothing a client sends vanishes without a trace.
//!
//! - `output_format` (the structured-outputs beta's field, which litellm and others still send
//!   with `anthropic-beta: structured-outputs-2025-11-13`) is read as `output_config.format`;
//!   the GA field wins when both are given.
//! - A field the Messages API does not define is named in a warning (the host logs each name
//!   once), instead of being dropped in silence.
//!
//! ```
//! use bridge_core::anthropic::fields::{adopt_top_level, UNKNOWN_FIELD};
//! use bridge_core::anthropic::request::parse_request;
//! let mut req = parse_request(br#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"}],
//!   "output_format":{"type":"json_schema","schema":{"type":"object"}},"frobnicate":1}"#).unwrap();
//! let warnings = adopt_top_level(&mut req);
//! assert_eq!(req.output_config.unwrap()["format"]["type"], "json_schema");
//! assert_eq!(warnings, [format!("{UNKNOWN_FIELD}frobnicate")]);
//! ```

use serde_json::{Map, Value};

use super::repair::{parse_and_repair, repair_warnings};
use super::request::MessagesRequest;
use crate::error::RequestError;

/// A Messages request as every translating provider reads it: parsed, its history repaired
/// ([`super::repair`]), its top-level fields adopted ([`adopt_top_level`]), `max_tokens`
/// required when `require_max_tokens`; with the warnings for the host's log.
///
/// # Errors
/// [`RequestError`] naming the field to fix.
pub fn read_for_translation(
    body: &[u8],
    require_max_tokens: bool,
) -> Result<(MessagesRequest, Vec<String>), RequestError> {
    let parsed = parse_and_repair(body)?;
    let mut req = parsed.request;
    if require_max_tokens && req.max_tokens.is_none() {
        return Err(RequestError::field("max_tokens", "Field required"));
    }
    let mut warnings = repair_warnings(&parsed.repairs);
    warnings.extend(adopt_top_level(&mut req));
    Ok((req, warnings))
}

/// How a warning about a field the Messages API does not define begins (the rest is its name).
pub const UNKNOWN_FIELD: &str = "unknown top-level field ignored: ";

/// Fields of the Messages API that the request type keeps in `extra`: known, and handled or
/// deliberately dropped by each translator.
const KNOWN_EXTRA: &[&str] = &[
    "metadata",
    "context_management",
    "service_tier",
    "container",
    "mcp_servers",
    "inference_geo",
    "cache_control",
    "speed",
    // Claude Code's auto mode: `[{type, classifier_context}]` for Anthropic's classifiers.
    "safeguards",
];

/// Fields an OpenAI client's JSON schema brings into `output_config.format` (the schema's `name`
/// and `strict`), kept for OpenAI upstreams; Anthropic's format has neither.
pub const OPENAI_FORMAT_FIELDS: [&str; 2] = ["name", "strict"];

/// Whether `output_config` (a request's) carries [`OPENAI_FORMAT_FIELDS`].
#[must_use]
pub fn has_openai_format_fields(output_config: Option<&Value>) -> bool {
    output_config
        .and_then(|c| c.get("format"))
        .and_then(Value::as_object)
        .is_some_and(|f| OPENAI_FORMAT_FIELDS.iter().any(|k| f.contains_key(*k)))
}

/// Take [`OPENAI_FORMAT_FIELDS`] out of a request's `output_config.format` (for Anthropic).
pub fn strip_openai_format_fields(request: &mut Value) {
    if let Some(Value::Object(format)) = request
        .get_mut("output_config")
        .and_then(|c| c.get_mut("format"))
    {
        for field in OPENAI_FORMAT_FIELDS {
            format.remove(field);
        }
    }
}

/// Adopt `output_format` as `output_config.format`, and name the fields no translator reads.
pub fn adopt_top_level(req: &mut MessagesRequest) -> Vec<String> {
    if let Some(format) = req.extra.remove("output_format").filter(|f| !f.is_null()) {
        match &mut req.output_config {
            Some(Value::Object(config)) => {
                config.entry("format").or_insert(format);
            }
            _ => {
                let mut config = Map::new();
                config.insert(String::from("format"), format);
                req.output_config = Some(Value::Object(config));
            }
        }
    }
    req.extra
        .keys()
        .filter(|name| !KNOWN_EXTRA.contains(&name.as_str()))
        .map(|name| format!("{UNKNOWN_FIELD}{name}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::request::parse_request;

    fn read(body: &str) -> (MessagesRequest, Vec<String>) {
        let mut req = parse_request(body.as_bytes()).unwrap();
        let warnings = adopt_top_level(&mut req);
        (req, warnings)
    }

    #[test]
    fn the_ga_format_wins_and_other_settings_stay() {
        let (req, warnings) = read(
            r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"}],
            "output_format":{"type":"json_schema","schema":{"title":"beta"}},
            "output_config":{"effort":"high","format":{"type":"json_schema","schema":{"title":"ga"}}}}"#,
        );
        let config = req.output_config.unwrap();
        assert_eq!(config["format"]["schema"]["title"], "ga");
        assert_eq!(config["effort"], "high");
        assert!(warnings.is_empty());
        assert!(!req.extra.contains_key("output_format"));

        let (req, _) = read(
            r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"}],"output_config":{"effort":"low"},
            "output_format":{"type":"json_schema","schema":{"title":"beta"}}}"#,
        );
        let config = req.output_config.unwrap();
        assert_eq!(config["format"]["schema"]["title"], "beta");
        assert_eq!(config["effort"], "low");
    }

    #[test]
    fn only_fields_the_api_does_not_define_are_named() {
        let (_, warnings) = read(
            r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"}],"metadata":{"user_id":"u"},
            "context_management":{},"service_tier":"auto","top_logprobs":3,
            "safeguards":[{"type":"auto_mode","classifier_context":"c"}]}"#,
        );
        assert_eq!(warnings, [format!("{UNKNOWN_FIELD}top_logprobs")]);
    }
}
