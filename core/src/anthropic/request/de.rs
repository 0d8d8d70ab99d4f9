//! Reading [`Content`] and [`Block`] without serde's untagged buffering.
//!
//! The derived untagged and internally tagged readers first copy the input into serde's private
//! `Content` buffer, then try each variant against that buffer, copying every string a second
//! time (and building an error for each variant that did not fit). A Claude Code request is a
//! few hundred kilobytes of such blocks, sent again every turn, so that was most of the time the
//! bridge spent reading it. Here a block is read once into a short list of its members (no hash
//! map: a block has a handful of keys and is taken apart at once), checked against the variant
//! its `type` names, and its values are moved into that variant. The decisions are the derive's
//! (`tests::same_as_the_derive` holds them to it):
//!
//! - a block that is not an object, has no string `type`, names an unknown type, or lacks or
//!   mistypes a field its variant requires stays [`Block::Other`] exactly as sent;
//! - a known block's unknown fields go to its `extra` map in the order they came (but
//!   `redacted_thinking` and the image `source` variants keep none, as their derive keeps none);
//! - `null` in an optional field is `None`; a missing `tool_use.input` is `null`.
//!
//! Three inputs read differently from the derive, on purpose (no client sends them, and the
//! derive's reading came from serde internals, not from the Messages API): a `type` given as a
//! number (the derive took `0` for `text`, its variant's position) or a block written as an
//! array (`["redacted_thinking","…"]`) stays [`Block::Other`]; and a key given twice counts once,
//! its last value winning (the derive refused the block as known and kept it as `Other`), as
//! JSON parsers that keep the last value read it.
//!
//! ```
//! use bridge_core::anthropic::request::{Block, Content, KnownBlock};
//!
//! let content: Content = serde_json::from_str(
//!     r#"[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}},{"type":"text"}]"#,
//! )
//! .unwrap();
//! let Content::Blocks(blocks) = content else { panic!("an array is blocks") };
//! let Block::Known(KnownBlock::Text { text, extra }) = &blocks[0] else { panic!() };
//! assert_eq!((text.as_str(), extra.len()), ("hi", 1));
//! // No `text`: kept as it came, not refused.
//! assert_eq!(blocks[1], Block::Other(serde_json::json!({"type": "text"})));
//! ```

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::{Block, Content, ImageSource, KnownBlock};

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ContentVisitor)
    }
}

/// A string is [`Content::Text`], an array [`Content::Blocks`]; anything else is refused.
struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Content;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or an array of content blocks")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Content, E> {
        Ok(Content::Text(text.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Content, E> {
        Ok(Content::Text(text))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
        let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(block) = seq.next_element::<Block>()? {
            blocks.push(block);
        }
        Ok(Content::Blocks(blocks))
    }
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(BlockVisitor)
    }
}

/// A JSON object's members in the order they came, each key once (a repeated key keeps its
/// first place and its last value, as `serde_json::Map` does). A block has a handful of keys,
/// so looking one up is a short scan: cheaper than hashing every key into a map that the block
/// is taken apart from at once.
type Fields = Vec<(String, Value)>;

/// Keys a block may have before it is read into a map instead (see `visit_map`).
const SCANNED_KEYS: usize = 16;

/// An object is read into [`Fields`] and then into its block; anything else is a JSON value
/// kept as [`Block::Other`].
struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = Block;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block, A::Error> {
        let mut fields = Fields::with_capacity(map.size_hint().unwrap_or(4).min(SCANNED_KEYS));
        while let Some(key) = map.next_key::<String>()? {
            let value: Value = map.next_value()?;
            let scanned = fields.len() < SCANNED_KEYS;
            match fields.iter_mut().find(|(k, _)| *k == key) {
                Some((_, earlier)) => *earlier = value,
                None if scanned => fields.push((key, value)),
                None => {
                    // A block with many keys (no client sends one) goes on in a map, so that
                    // checking for a repeated key stays one lookup, not a scan of them all.
                    let mut object: Map<String, Value> = fields.drain(..).collect();
                    object.insert(key, value);
                    while let Some((key, value)) = map.next_entry::<String, Value>()? {
                        object.insert(key, value);
                    }
                    return Ok(block(Value::Object(object)));
                }
            }
        }
        Ok(object_block(fields))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Block, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(value) = seq.next_element::<Value>()? {
            values.push(value);
        }
        Ok(Block::Other(Value::Array(values)))
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Block, E> {
        Ok(Block::Other(Value::Bool(v)))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Block, E> {
        Ok(Block::Other(Value::from(v)))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Block, E> {
        Ok(Block::Other(Value::from(v)))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Block, E> {
        // A non-finite float is `null`, as `serde_json::Value` reads it.
        Ok(Block::Other(Value::from(v)))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Block, E> {
        Ok(Block::Other(Value::String(v.to_owned())))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Block, E> {
        Ok(Block::Other(Value::String(v)))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Block, E> {
        Ok(Block::Other(Value::Null))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Block, E> {
        Ok(Block::Other(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Block, D::Error> {
        Block::deserialize(deserializer)
    }
}

/// The block `value` is (a block inside a `tool_result`'s content, already a JSON value).
fn block(value: Value) -> Block {
    match value {
        Value::Object(object) => object_block(object.into_iter().collect()),
        other => Block::Other(other),
    }
}

/// The object `fields`: known if it fits the variant its `type` names, else kept as it came.
fn object_block(fields: Fields) -> Block {
    if fits(&fields) {
        Block::Known(known(fields))
    } else {
        Block::Other(Value::Object(fields.into_iter().collect()))
    }
}

/// The value at `key`.
fn get<'a>(fields: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, value)| value)
}

/// The value at `key`, moved out (the others keep their order).
fn take(fields: &mut Fields, key: &str) -> Option<Value> {
    let at = fields.iter().position(|(k, _)| k == key)?;
    Some(fields.remove(at).1)
}

fn is_string(value: Option<&Value>) -> bool {
    matches!(value, Some(Value::String(_)))
}

/// Absent, `null`, or what `fits` says.
fn optional(value: Option<&Value>, fits: fn(&Value) -> bool) -> bool {
    value.is_none_or(|v| v.is_null() || fits(v))
}

/// Whether `fields` read as the [`KnownBlock`] their `type` names (checked before anything
/// moves, so a block that does not fit is kept untouched, its keys in their order).
fn fits(fields: &[(String, Value)]) -> bool {
    let Some(Value::String(kind)) = get(fields, "type") else {
        return false;
    };
    let at = |key| get(fields, key);
    match kind.as_str() {
        "text" => is_string(at("text")),
        "image" | "document" => at("source").is_some(),
        "tool_use" => is_string(at("id")) && is_string(at("name")),
        "tool_result" => {
            is_string(at("tool_use_id"))
                && optional(at("content"), |c| c.is_string() || c.is_array())
                && optional(at("is_error"), Value::is_boolean)
        }
        "thinking" => is_string(at("thinking")) && optional(at("signature"), Value::is_string),
        "redacted_thinking" => is_string(at("data")),
        _ => false,
    }
}

/// The string at `key` (checked by [`fits`]), moved out.
fn take_string(fields: &mut Fields, key: &str) -> String {
    match take(fields, key) {
        Some(Value::String(text)) => text,
        _ => String::new(),
    }
}

/// What is left of a block's fields: its `extra` map, in the order the keys came.
fn extra(fields: Fields) -> Map<String, Value> {
    fields.into_iter().collect()
}

/// `fields`, which [`fits`], as their variant; what is left becomes `extra`.
fn known(mut fields: Fields) -> KnownBlock {
    let kind = take_string(&mut fields, "type");
    match kind.as_str() {
        "text" => KnownBlock::Text {
            text: take_string(&mut fields, "text"),
            extra: extra(fields),
        },
        "image" => KnownBlock::Image {
            source: image_source(take(&mut fields, "source").unwrap_or(Value::Null)),
            extra: extra(fields),
        },
        "tool_use" => KnownBlock::ToolUse {
            id: take_string(&mut fields, "id"),
            name: take_string(&mut fields, "name"),
            input: take(&mut fields, "input").unwrap_or(Value::Null),
            extra: extra(fields),
        },
        "tool_result" => KnownBlock::ToolResult {
            tool_use_id: take_string(&mut fields, "tool_use_id"),
            content: match take(&mut fields, "content") {
                Some(Value::String(text)) => Some(Content::Text(text)),
                Some(Value::Array(blocks)) => {
                    Some(Content::Blocks(blocks.into_iter().map(block).collect()))
                }
                _ => None,
            },
            is_error: take(&mut fields, "is_error").and_then(|v| v.as_bool()),
            extra: extra(fields),
        },
        "thinking" => KnownBlock::Thinking {
            thinking: take_string(&mut fields, "thinking"),
            signature: match take(&mut fields, "signature") {
                Some(Value::String(signature)) => Some(signature),
                _ => None,
            },
            extra: extra(fields),
        },
        "redacted_thinking" => KnownBlock::RedactedThinking {
            data: take_string(&mut fields, "data"),
        },
        _ => KnownBlock::Document {
            source: take(&mut fields, "source").unwrap_or(Value::Null),
            extra: extra(fields),
        },
    }
}

/// An image `source`: `base64` with string `media_type` and `data`, `url` with a string `url`
/// (other fields of those two dropped, as the derive drops them), else kept as it is.
fn image_source(source: Value) -> ImageSource {
    let Value::Object(object) = source else {
        return ImageSource::Other(source);
    };
    let mut fields: Fields = object.into_iter().collect();
    let at = |key| get(&fields, key);
    match at("type").and_then(Value::as_str) {
        Some("base64") if is_string(at("media_type")) && is_string(at("data")) => {
            ImageSource::Base64 {
                media_type: take_string(&mut fields, "media_type"),
                data: take_string(&mut fields, "data"),
            }
        }
        Some("url") if is_string(at("url")) => ImageSource::Url {
            url: take_string(&mut fields, "url"),
        },
        _ => ImageSource::Other(Value::Object(extra(fields))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What the untagged derive decided: the block's known variant, else the value as it came.
    fn derived(value: &Value) -> Block {
        serde_json::from_value::<KnownBlock>(value.clone())
            .map_or_else(|_| Block::Other(value.clone()), Block::Known)
    }

    fn cases() -> Vec<Value> {
        // Wider than the keys that are scanned: read through a map.
        let wide = |kind: &str| {
            let mut object = Map::new();
            for i in 0..20 {
                object.insert(format!("x{i}"), json!(i));
            }
            object.insert("type".into(), json!(kind));
            object.insert("text".into(), json!("wide"));
            Value::Object(object)
        };
        let mut cases = vec![wide("text"), wide("future_block")];
        cases.extend([
            json!("just a string"),
            json!(42),
            json!(null),
            json!([{"type": "text", "text": "in an array"}]),
            json!({}),
            json!({"text": "no type"}),
            json!({"type": 7, "text": "numeric type"}),
            json!({"type": "future_block", "payload": {"a": 1}}),
            json!({"type": "text", "text": "hi"}),
            json!({"text": "type last", "cache_control": {"type": "ephemeral"}, "type": "text"}),
            json!({"type": "text"}),
            json!({"type": "text", "text": null}),
            json!({"type": "text", "text": 5}),
            json!({"type": "text", "text": "x", "citations": [], "z": 1, "a": 2}),
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA", "extra": 1}}),
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png"}}),
            json!({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}, "cache_control": {}}),
            json!({"type": "image", "source": {"type": "url", "url": 3}}),
            json!({"type": "image", "source": {"type": "file", "file_id": "f_1"}}),
            json!({"type": "image", "source": "not an object"}),
            json!({"type": "image", "source": null}),
            json!({"type": "image"}),
            json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}),
            json!({"type": "tool_use", "id": "t1", "name": "Bash"}),
            json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": null, "caller": {}}),
            json!({"type": "tool_use", "id": "t1", "input": {}}),
            json!({"type": "tool_use", "id": 1, "name": "Bash", "input": {}}),
            json!({"type": "tool_result", "tool_use_id": "t1", "content": "ok"}),
            json!({"type": "tool_result", "tool_use_id": "t1"}),
            json!({"type": "tool_result", "tool_use_id": "t1", "content": null, "is_error": null}),
            json!({"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": "a"}, {"type": "image", "source": {"type": "url", "url": "u"}},
                {"type": "text"}, 5, {"type": "tool_reference", "tool_name": "x"}
            ], "is_error": true}),
            json!({"type": "tool_result", "tool_use_id": "t1", "content": {"type": "text"}}),
            json!({"type": "tool_result", "tool_use_id": "t1", "content": 5}),
            json!({"type": "tool_result", "tool_use_id": "t1", "content": "x", "is_error": "yes"}),
            json!({"type": "tool_result", "content": "no id"}),
            json!({"type": "thinking", "thinking": "hmm", "signature": "sig"}),
            json!({"type": "thinking", "thinking": "hmm"}),
            json!({"type": "thinking", "thinking": "hmm", "signature": null, "x": 1}),
            json!({"type": "thinking", "thinking": "hmm", "signature": 3}),
            json!({"type": "thinking", "signature": "sig"}),
            json!({"type": "redacted_thinking", "data": "opaque", "dropped": true}),
            json!({"type": "redacted_thinking"}),
            json!({"type": "document", "source": {"type": "text", "data": "doc"}, "title": "t"}),
            json!({"type": "document", "source": null}),
            json!({"type": "document", "title": "no source"}),
        ]);
        cases
    }

    #[test]
    fn same_as_the_derive() {
        for case in cases() {
            let ours: Block = serde_json::from_value(case.clone()).unwrap();
            assert_eq!(ours, derived(&case), "{case}");
            // Read from text as well as from a value, and written back the same way.
            let text = case.to_string();
            let from_text: Block = serde_json::from_str(&text).unwrap();
            assert_eq!(from_text, ours, "{text}");
            assert_eq!(
                serde_json::to_string(&from_text).unwrap(),
                serde_json::to_string(&derived(&case)).unwrap()
            );
        }
    }

    #[test]
    fn numeric_tags_arrays_and_repeated_keys_are_read_as_documented() {
        for kept in [
            r#"{"type":0,"text":"hi"}"#,
            r#"{"type":5,"data":"x"}"#,
            r#"["redacted_thinking","opaque"]"#,
        ] {
            let block: Block = serde_json::from_str(kept).unwrap();
            assert_eq!(
                block,
                Block::Other(serde_json::from_str(kept).unwrap()),
                "{kept}"
            );
        }
        let source: Block =
            serde_json::from_str(r#"{"type":"image","source":{"type":1,"url":"u"}}"#).unwrap();
        assert!(matches!(
            source,
            Block::Known(KnownBlock::Image {
                source: ImageSource::Other(_),
                ..
            })
        ));
        let repeated: Block =
            serde_json::from_str(r#"{"type":"text","text":"a","text":"b"}"#).unwrap();
        assert_eq!(
            repeated,
            Block::Known(KnownBlock::Text {
                text: "b".into(),
                extra: Map::new()
            })
        );
        // A repeated key keeps its first place and its last value, in `extra` and in `Other`.
        let Block::Known(KnownBlock::Text { extra, .. }) =
            serde_json::from_str(r#"{"z":1,"type":"text","y":2,"text":"t","z":3}"#).unwrap()
        else {
            panic!("a text block")
        };
        assert_eq!(serde_json::to_string(&extra).unwrap(), r#"{"z":3,"y":2}"#);
        let Block::Other(other) =
            serde_json::from_str(r#"{"type":"x","a":1,"b":2,"a":3}"#).unwrap()
        else {
            panic!("an unknown block")
        };
        assert_eq!(other.to_string(), r#"{"type":"x","a":3,"b":2}"#);
        // Past the keys that are scanned, a map: the same reading (first place, last value).
        let many: String = (0..40).map(|i| format!(r#","k{}":{i}"#, i % 30)).collect();
        let text = format!(r#"{{"type":"text","text":"t"{many},"text":"u"}}"#);
        let Block::Known(KnownBlock::Text { text: last, extra }) =
            serde_json::from_str(&text).unwrap()
        else {
            panic!("a text block")
        };
        assert_eq!(last, "u");
        let keys: Vec<_> = extra.keys().cloned().collect();
        assert_eq!(keys, (0..30).map(|i| format!("k{i}")).collect::<Vec<_>>());
        assert_eq!(extra["k5"], json!(35));
        assert_eq!(extra["k29"], json!(29));
    }

    #[test]
    fn content_is_a_string_or_blocks_and_nothing_else() {
        let text: Content = serde_json::from_str(r#""hi""#).unwrap();
        assert_eq!(text, Content::Text("hi".into()));
        let blocks: Content = serde_json::from_str(r#"[{"type":"text","text":"a"},1]"#).unwrap();
        assert_eq!(
            blocks,
            Content::Blocks(vec![
                derived(&json!({"type":"text","text":"a"})),
                Block::Other(json!(1))
            ])
        );
        for bad in ["5", "null", "{}", "true"] {
            let error = serde_json::from_str::<Content>(bad).unwrap_err();
            assert!(
                error
                    .to_string()
                    .contains("a string or an array of content blocks"),
                "{bad}: {error}"
            );
        }
    }
}
