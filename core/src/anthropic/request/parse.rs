//! Reading a Messages API request: the tolerant types of [`super`], with what the Messages API
//! itself refuses refused here in its own words, naming the field (so a client learns what to
//! fix instead of an upstream's different complaint). Every converter, the history repair and
//! the token estimate read requests through [`parse_request`].
//!
//! ```
//! use bridge_core::anthropic::request::parse_request;
//! use bridge_core::error::RequestError;
//! let ok = parse_request(br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#);
//! assert_eq!(ok.map(|r| r.model).ok().as_deref(), Some("m"));
//! let refused = parse_request(br#"{"model":"m","max_tokens":5,"messages":[]}"#);
//! assert!(matches!(refused, Err(RequestError::Field { field, .. }) if field == "messages"));
//! ```

use serde_json::Value;

use super::{Block, Content, KnownBlock, MessagesRequest, Role};
use crate::error::RequestError;

/// Parse an Anthropic request, with field-level messages for what the Messages API requires
/// (no repair: see [`crate::anthropic::repair::parse_and_repair`]).
///
/// # Errors
/// [`RequestError`] naming the field and what to send instead.
pub fn parse_request(request: &[u8]) -> Result<MessagesRequest, RequestError> {
    // Read as text: one check of the whole body, where reading bytes checks each string on
    // its own (and a second reader of bytes would be a second copy of the request's reader in
    // the wasm builds). A body that is not UTF-8 is explained from its bytes.
    let text = match std::str::from_utf8(request) {
        Ok(text) => text,
        Err(not_utf8) => return Err(explain(request, &not_utf8)),
    };
    match serde_json::from_str::<MessagesRequest>(text) {
        Ok(req) => validate(req),
        Err(first) => Err(explain(request, &first)),
    }
}

/// What the Messages API refuses although it parses, refused here with its wording (so the
/// client learns what to fix instead of an upstream's different complaint).
fn validate(req: MessagesRequest) -> Result<MessagesRequest, RequestError> {
    if req.messages.is_empty() {
        return Err(RequestError::field(
            "messages",
            "at least one message is required",
        ));
    }
    if req.max_tokens == Some(0) {
        return Err(RequestError::field(
            "max_tokens",
            "Input should be greater than or equal to 1",
        ));
    }
    for (i, message) in req.messages.iter().enumerate() {
        if let Role::Other(role) = &message.role {
            return Err(RequestError::field(
                format!("messages.{i}.role"),
                format!("Input should be 'user' or 'assistant', not {role:?}"),
            ));
        }
        check_blocks(&message.content, &format!("messages.{i}.content"))?;
    }
    if let Some(system) = &req.system {
        check_blocks(system, "system")?;
    }
    for (i, tool) in req.tools.iter().flatten().enumerate() {
        // Server tools (`web_search_…`) have a type and no schema; client tools need both.
        let client_tool = tool.kind.as_deref().is_none_or(|k| k == "custom");
        if tool.name.is_empty() {
            return Err(RequestError::field(
                format!("tools.{i}.name"),
                "Field required",
            ));
        }
        match &tool.input_schema {
            Some(schema) if schema.is_object() => {}
            Some(_) => {
                return Err(RequestError::field(
                    format!("tools.{i}.input_schema"),
                    "Input should be a valid dictionary (a JSON schema object)",
                ));
            }
            None if client_tool => {
                return Err(RequestError::field(
                    format!("tools.{i}.input_schema"),
                    "Field required",
                ));
            }
            None => {}
        }
    }
    Ok(req)
}

/// The block types the Messages API defines and the translators act on: one of these that
/// does not read as its type (`{"type": "text", "text": 7}`) is refused, where a block of a
/// type this bridge does not know yet passes through as it is.
const KNOWN_TYPES: [&str; 7] = [
    "text",
    "image",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "document",
];

fn check_blocks(content: &Content, at: &str) -> Result<(), RequestError> {
    let Content::Blocks(blocks) = content else {
        return Ok(());
    };
    for (j, block) in blocks.iter().enumerate() {
        let Block::Other(value) = block else {
            continue;
        };
        let Some(kind) = value.get("type").and_then(Value::as_str) else {
            continue;
        };
        if !KNOWN_TYPES.contains(&kind) {
            continue;
        }
        let problem = serde_json::from_value::<KnownBlock>(value.clone())
            .err()
            .map_or_else(|| String::from("not readable"), |e| e.to_string());
        return Err(RequestError::field(
            format!("{at}.{j}"),
            format!("not a valid {kind} block: {problem}"),
        ));
    }
    Ok(())
}

/// A top-level field, the test its value must pass, and what to say when it does not.
type FieldCheck = (&'static str, fn(&Value) -> bool, &'static str);

fn explain(request: &[u8], first: &dyn std::fmt::Display) -> RequestError {
    let value: Value = match serde_json::from_slice(request) {
        Ok(v) => v,
        Err(e) => return RequestError::Json(e.to_string()),
    };
    let Some(obj) = value.as_object() else {
        return RequestError::Json(String::from("expected a JSON object"));
    };
    match obj.get("model") {
        None => return RequestError::field("model", "Field required"),
        Some(Value::String(_)) => {}
        Some(_) => return RequestError::field("model", "must be a string"),
    }
    let Some(messages) = obj.get("messages") else {
        return RequestError::field("messages", "Field required");
    };
    let Some(messages) = messages.as_array() else {
        return RequestError::field("messages", "must be an array of {role, content} objects");
    };
    for (i, m) in messages.iter().enumerate() {
        match m.get("role") {
            Some(Value::String(_)) => {}
            _ => {
                return RequestError::field(
                    format!("messages.{i}.role"),
                    "Field required: \"user\" or \"assistant\"",
                );
            }
        }
        match m.get("content") {
            Some(Value::String(_) | Value::Array(_)) => {}
            Some(_) => {
                return RequestError::field(
                    format!("messages.{i}.content"),
                    "must be a string or an array of content blocks",
                );
            }
            None => return RequestError::field(format!("messages.{i}.content"), "Field required"),
        }
    }
    // Top-level fields of the wrong type, named (serde's own message names none).
    let checks: [FieldCheck; 8] = [
        (
            "max_tokens",
            Value::is_u64,
            "Input should be a valid integer",
        ),
        (
            "system",
            |v| v.is_string() || v.is_array(),
            "must be a string or an array of text blocks",
        ),
        (
            "stream",
            Value::is_boolean,
            "Input should be a valid boolean",
        ),
        (
            "temperature",
            Value::is_number,
            "Input should be a valid number",
        ),
        ("top_p", Value::is_number, "Input should be a valid number"),
        ("top_k", Value::is_u64, "Input should be a valid integer"),
        (
            "stop_sequences",
            Value::is_array,
            "Input should be a valid list of strings",
        ),
        (
            "tools",
            Value::is_array,
            "Input should be a valid list of tools",
        ),
    ];
    for (field, ok, problem) in checks {
        if let Some(v) = obj.get(field)
            && !v.is_null()
            && !ok(v)
        {
            return RequestError::field(field, format!("{problem}, not {v}"));
        }
    }
    RequestError::Json(first.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that is not UTF-8 is refused as serde_json reads it, naming where; a string
    /// with an escape still reads (it is read as text now, not as bytes).
    #[test]
    fn a_body_that_is_not_utf8_is_refused_saying_where() {
        let mut body =
            br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"h"#.to_vec();
        body.push(0xff);
        body.extend_from_slice(br#""}]}"#);
        match parse_request(&body) {
            Err(RequestError::Json(message)) => {
                assert!(message.contains("line 1 column"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let ok = parse_request(
            br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"caf\u00e9 \ud83d\ude00"}]}"#,
        )
        .unwrap();
        assert!(matches!(&ok.messages[0].content, Content::Text(t) if t == "caf\u{e9} \u{1f600}"));
    }

    #[test]
    fn what_the_messages_api_refuses_is_refused_naming_the_field() {
        let refused = |body: &str| match parse_request(body.as_bytes()) {
            Err(RequestError::Field { field, problem }) => format!("{field}: {problem}"),
            other => panic!("{body}: {other:?}"),
        };
        let user = r#"[{"role":"user","content":"hi"}]"#;
        assert_eq!(
            refused(r#"{"model":"m","max_tokens":5,"messages":[]}"#),
            "messages: at least one message is required"
        );
        assert_eq!(
            refused(&format!(
                r#"{{"model":"m","max_tokens":0,"messages":{user}}}"#
            )),
            "max_tokens: Input should be greater than or equal to 1"
        );
        assert_eq!(
            refused(&format!(
                r#"{{"model":"m","max_tokens":"100","messages":{user}}}"#
            )),
            r#"max_tokens: Input should be a valid integer, not "100""#
        );
        assert!(
            refused(&format!(
                r#"{{"model":"m","max_tokens":5,"system":5,"messages":{user}}}"#
            ))
            .starts_with("system: ")
        );
        assert_eq!(
            refused(&format!(
                r#"{{"model":"m","max_tokens":5,"messages":{user},"tools":[{{"input_schema":{{"type":"object"}}}}]}}"#
            )),
            "tools.0.name: Field required"
        );
        assert!(
            refused(&format!(r#"{{"model":"m","max_tokens":5,"messages":{user},"tools":[{{"name":"x","input_schema":"s"}}]}}"#))
                .starts_with("tools.0.input_schema: Input should be a valid dictionary")
        );
        // Server tools have no schema.
        let web = format!(
            r#"{{"model":"m","max_tokens":5,"messages":{user},"tools":[{{"type":"web_search_20250305","name":"web_search"}}]}}"#
        );
        assert!(parse_request(web.as_bytes()).is_ok());
        // What Anthropic refuses is refused here too, not dropped or guessed.
        assert_eq!(
            refused(
                r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":7}]}]}"#
            ),
            "messages.0.content.0: not a valid text block: invalid type: integer `7`, expected a string"
        );
        assert!(
            refused(
                r#"{"model":"m","max_tokens":5,"messages":[{"role":"wizard","content":"hi"}]}"#
            )
            .starts_with("messages.0.role: Input should be 'user' or 'assistant'")
        );
        assert!(
            refused(&format!(
                r#"{{"model":"m","max_tokens":5,"system":[{{"type":"text"}}],"messages":{user}}}"#
            ))
            .starts_with("system.0: not a valid text block")
        );
        // A block type this bridge does not know passes as it is.
        assert!(
            parse_request(br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"container_upload","file_id":"f"}]}]}"#)
                .is_ok()
        );
    }
}
