//! Tool input schemas, cleaned in one place for upstreams that reject parts of JSON Schema.
//!
//! Always: `$schema` is removed (many servers reject it). Strict mode (for Gemini-style
//! validators) also removes `format`, `exclusiveMinimum`/`exclusiveMaximum`, `propertyNames`,
//! turns `const` into a one-value `enum`, and gives arrays without `items` an empty `items`.
//! Property *names* are never touched: only schema keywords are.
//!
//! ```
//! use bridge_core::anthropic::schema::clean_schema;
//! let schema = serde_json::json!({"$schema":"x","type":"object","properties":{"format":{"type":"string","format":"uri"}}});
//! let strict = clean_schema(schema, true);
//! assert_eq!(strict, serde_json::json!({"type":"object","properties":{"format":{"type":"string"}}}));
//! ```

use serde_json::{Map, Value};

/// `schema` cleaned, in place of it: its keys and values are moved, not copied (a Claude Code
/// request's tool schemas are most of its size).
#[must_use]
pub fn clean_schema(schema: Value, strict: bool) -> Value {
    match schema {
        Value::Object(map) => Value::Object(clean_object(map, strict)),
        other => other,
    }
}

/// Each member of an array of schemas cleaned; anything else as it is.
fn clean_each(value: Value, strict: bool) -> Value {
    match value {
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|s| clean_schema(s, strict)).collect())
        }
        other => other,
    }
}

/// The key cleaning always leaves out of a schema object (many servers reject it).
pub(crate) const DROPPED: &str = "$schema";

/// What a member of a schema object holds, by its key: where cleaning goes on inside it. The
/// one list of these keywords, for this cleaning and for the one pass over a schema's text
/// (`tool_schema`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Member {
    /// `properties`, `$defs`, …: an object whose every member is a schema.
    SchemaMap,
    /// `items`, `not`, …: a schema, or an array of schemas.
    SchemaOrList,
    /// `anyOf`, …: an array of schemas (anything else as it is).
    SchemaList,
    /// Anything else: kept as it is.
    Plain,
}

impl Member {
    /// The member under `key`.
    pub(crate) fn of(key: &str) -> Self {
        match key {
            "properties" | "$defs" | "definitions" | "patternProperties" => Self::SchemaMap,
            "items" | "additionalProperties" | "not" | "if" | "then" | "else" | "contains" => {
                Self::SchemaOrList
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => Self::SchemaList,
            _ => Self::Plain,
        }
    }

    /// `value`, held under a key of this kind, cleaned.
    fn clean(self, value: Value, strict: bool) -> Value {
        match (self, value) {
            (Self::SchemaMap, Value::Object(props)) => Value::Object(
                props
                    .into_iter()
                    .map(|(name, sub)| (name, clean_schema(sub, strict)))
                    .collect(),
            ),
            (Self::SchemaOrList | Self::SchemaList, items @ Value::Array(_)) => {
                clean_each(items, strict)
            }
            (Self::SchemaOrList, other) => clean_schema(other, strict),
            (_, other) => other,
        }
    }
}

fn clean_object(map: Map<String, Value>, strict: bool) -> Map<String, Value> {
    let mut out = Map::with_capacity(map.len());
    for (key, value) in map {
        match key.as_str() {
            DROPPED => {}
            "format" | "exclusiveMinimum" | "exclusiveMaximum" | "propertyNames" if strict => {}
            "const" if strict => {
                out.insert(String::from("enum"), Value::Array(vec![value]));
            }
            _ => {
                let cleaned = Member::of(&key).clean(value, strict);
                out.insert(key, cleaned);
            }
        }
    }
    if strict
        && out.get("type").and_then(Value::as_str) == Some("array")
        && !out.contains_key("items")
    {
        out.insert(String::from("items"), Value::Object(Map::new()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_mode_rewrites_keywords_everywhere() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "propertyNames": {"pattern": "^a"},
            "properties": {
                "n": {"type": "integer", "exclusiveMinimum": 0},
                "kind": {"const": "x"},
                "list": {"type": "array"},
                "nested": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]}
            }
        });
        assert_eq!(
            clean_schema(schema, true),
            json!({
                "type": "object",
                "properties": {
                    "n": {"type": "integer"},
                    "kind": {"enum": ["x"]},
                    "list": {"type": "array", "items": {}},
                    "nested": {"anyOf": [{"type": "string"}, {"type": "null"}]}
                }
            })
        );
    }

    #[test]
    fn lenient_mode_only_drops_dollar_schema() {
        let schema = json!({"$schema": "x", "type": "string", "format": "uri", "const": "a"});
        assert_eq!(
            clean_schema(schema, false),
            json!({"type": "string", "format": "uri", "const": "a"})
        );
    }
}
