//! Reading OpenAI request fields into Anthropic request parts: the helpers both fronts' request
//! converters share (field access with OpenAI-style `param` errors, text and image blocks,
//! tool-call arguments, the effort mapping, and joining same-role turns).

use serde_json::{Map, Value, json};

use crate::anthropic::request::{Block, Content, ImageSource, InputMessage, KnownBlock, Role};
use crate::front::FrontError;

/// `data:<media type>;base64,<data>` → (media type, data).
pub(crate) fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    (!media_type.is_empty() && !data.is_empty()).then_some((media_type, data))
}

/// A plain text block.
pub(crate) fn text_block(text: &str) -> Block {
    Block::Known(KnownBlock::Text {
        text: text.to_owned(),
        extra: Map::new(),
    })
}

/// A top-level field, `null` read as absent.
pub(crate) fn non_null<'a>(req: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    req.get(field).filter(|v| !v.is_null())
}

/// Anthropic's `output_config.format` for an OpenAI client's JSON schema, keeping the schema's
/// `name` and `strict` (when given) for an OpenAI upstream, which guarantees a valid answer only
/// with `strict: true` ([`crate::anthropic::fields::OPENAI_FORMAT_FIELDS`]; the Anthropic
/// pass-through takes them out).
pub(crate) fn schema_format(schema: &Value, name: Option<&Value>, strict: Option<&Value>) -> Value {
    let mut format = Map::new();
    format.insert(String::from("type"), Value::from("json_schema"));
    format.insert(String::from("schema"), schema.clone());
    if let Some(name) = name.filter(|n| n.is_string()) {
        format.insert(String::from("name"), name.clone());
    }
    if let Some(strict) = strict.filter(|s| s.is_boolean()) {
        format.insert(String::from("strict"), strict.clone());
    }
    Value::Object(format)
}

/// An integer ≥ 1, or an error naming `field`.
pub(crate) fn positive_int(v: &Value, field: &str) -> Result<u64, FrontError> {
    v.as_u64()
        .filter(|n| *n > 0)
        .ok_or_else(|| FrontError::invalid(field, "must be a positive integer"))
}

/// An optional boolean field.
pub(crate) fn optional_bool(
    req: &Map<String, Value>,
    field: &str,
) -> Result<Option<bool>, FrontError> {
    match non_null(req, field) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(FrontError::invalid(field, "must be a boolean")),
    }
}

/// An optional number field.
pub(crate) fn optional_number(
    req: &Map<String, Value>,
    field: &str,
) -> Result<Option<f64>, FrontError> {
    match non_null(req, field) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| FrontError::invalid(field, "must be a number")),
    }
}

/// A required string field of `v`, its path `at.field` in errors.
pub(crate) fn string_field<'a>(v: &'a Value, field: &str, at: &str) -> Result<&'a str, FrontError> {
    match v.get(field) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(FrontError::missing(format!("{at}.{field}"), "a string")),
        Some(_) => Err(FrontError::invalid(
            format!("{at}.{field}"),
            "must be a string",
        )),
    }
}

/// A content part's `type`.
pub(crate) fn part_type<'a>(part: &'a Value, at: &str) -> Result<&'a str, FrontError> {
    part.get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| FrontError::missing(format!("{at}.type"), "every content part needs a type"))
}

/// Append blocks as a message of `role`, joining the previous message when it has the same
/// role (tool results and the user's next words become one user turn, as Anthropic wants).
pub(crate) fn push_message(messages: &mut Vec<InputMessage>, role: Role, mut blocks: Vec<Block>) {
    if let Some(last) = messages.last_mut()
        && last.role == role
    {
        let mut joined = last.content.blocks();
        joined.append(&mut blocks);
        last.content = Content::Blocks(joined);
        return;
    }
    let content = match blocks.as_slice() {
        [Block::Known(KnownBlock::Text { text, extra })] if extra.is_empty() => {
            Content::Text(text.clone())
        }
        _ => Content::Blocks(blocks),
    };
    messages.push(InputMessage {
        role,
        content,
        extra: Map::new(),
    });
}

/// An OpenAI effort → Anthropic `thinking` (and `output_config.effort`).
pub(crate) fn effort_to_thinking(
    effort: &Value,
    param: &str,
    output_config: &mut Map<String, Value>,
) -> Result<Value, FrontError> {
    let effort = match effort.as_str() {
        Some("none") => return Ok(json!({"type": "disabled"})),
        Some("minimal" | "low") => "low",
        Some("medium") => "medium",
        Some("high") => "high",
        Some("xhigh") => "xhigh",
        _ => {
            return Err(FrontError::invalid(
                param,
                "one of none, minimal, low, medium, high, xhigh",
            ));
        }
    };
    output_config.insert(String::from("effort"), json!(effort));
    Ok(json!({"type": "adaptive"}))
}

/// Tool-call arguments (a JSON object as a string; empty or absent is `{}`).
pub(crate) fn arguments_object(arguments: Option<&Value>, at: &str) -> Result<Value, FrontError> {
    Ok(match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(args)) if args.trim().is_empty() => Value::Object(Map::new()),
        Some(Value::String(args)) => match serde_json::from_str::<Value>(args) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return Err(FrontError::invalid(
                    at,
                    "must be a JSON object encoded as a string, e.g. \"{\\\"path\\\":\\\".\\\"}\"",
                ));
            }
            Err(e) => {
                return Err(FrontError::invalid(
                    at,
                    format!(
                        "is not valid JSON ({e}); send the arguments the model produced, as a JSON object string"
                    ),
                ));
            }
        },
        Some(_) => {
            return Err(FrontError::invalid(
                at,
                "must be a string holding a JSON object",
            ));
        }
    })
}

/// An image URL (`data:<type>;base64,…` or http(s)) as an Anthropic image source.
pub(crate) fn image_source(url: &str, param: &str) -> Result<ImageSource, FrontError> {
    if url.starts_with("data:") {
        let (media_type, data) = data_url(url).ok_or_else(|| {
            FrontError::invalid(
                param,
                "a data URL must look like data:image/png;base64,<data>",
            )
        })?;
        Ok(ImageSource::Base64 {
            media_type: media_type.to_owned(),
            data: data.to_owned(),
        })
    } else if url.starts_with("https://") || url.starts_with("http://") {
        Ok(ImageSource::Url {
            url: url.to_owned(),
        })
    } else {
        Err(FrontError::invalid(
            param,
            "must be an http(s) URL or a data: URL",
        ))
    }
}
