//! A provider's default request parameters (`[providers.NAME.defaults]`: temperature, top_p,
//! reasoning effort, …) merged *under* a client's Messages request: a field the client sent —
//! `null` counts as not sent — is never changed, a `thinking` it sent is kept whole; only
//! `output_config` (which holds unrelated settings: `effort`, `format`) gets the default's
//! missing fields.
//!
//! ```
//! use bridge_core::anthropic::defaults::merge_defaults;
//! let defaults = serde_json::json!({"temperature": 0.2, "top_p": 0.9, "output_config": {"effort": "low"}});
//! let body = br#"{"model":"m","max_tokens":8,"temperature":1,"output_config":{"format":{"type":"json_schema"}},"messages":[]}"#;
//! let merged: serde_json::Value =
//!     serde_json::from_slice(&merge_defaults(body, defaults.as_object().unwrap()).unwrap()).unwrap();
//! assert_eq!(merged["temperature"], 1, "the client's own value stays");
//! assert_eq!(merged["top_p"], 0.9);
//! assert_eq!(merged["output_config"]["effort"], "low");
//! assert_eq!(merged["output_config"]["format"]["type"], "json_schema");
//! // Nothing to add: the bytes are left as they are.
//! assert!(merge_defaults(br#"{"top_p":1,"temperature":0,"output_config":{"effort":"high"}}"#, defaults.as_object().unwrap()).is_none());
//! ```

use serde_json::{Map, Value};

/// `body` with `defaults` merged under it, or `None` when nothing changes (every default is set
/// by the client already, or the body is not a JSON object — the request's own validation
/// answers that).
#[must_use]
pub fn merge_defaults(body: &[u8], defaults: &Map<String, Value>) -> Option<Vec<u8>> {
    if defaults.is_empty() {
        return None;
    }
    let Ok(Value::Object(mut request)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    if !fill(&mut request, defaults) {
        return None;
    }
    serde_json::to_vec(&Value::Object(request)).ok()
}

/// Objects whose fields are separate settings, filled field by field.
const MERGED_FIELD_BY_FIELD: &[&str] = &["output_config"];

/// Fill `into`'s missing fields from `defaults`; whether anything was added.
fn fill(into: &mut Map<String, Value>, defaults: &Map<String, Value>) -> bool {
    let mut changed = false;
    for (key, default) in defaults {
        match (into.get_mut(key), default) {
            (None | Some(Value::Null), _) => {
                into.insert(key.clone(), default.clone());
                changed = true;
            }
            (Some(Value::Object(theirs)), Value::Object(ours))
                if MERGED_FIELD_BY_FIELD.contains(&key.as_str()) =>
            {
                changed |= fill(theirs, ours);
            }
            (Some(_), _) => {}
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(body: &Value, defaults: &Value) -> Option<Value> {
        merge_defaults(
            body.to_string().as_bytes(),
            defaults.as_object().unwrap_or_else(|| unreachable!()),
        )
        .map(|b| serde_json::from_slice(&b).unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn a_null_is_not_a_value_and_a_non_object_body_is_left_alone() {
        let defaults = json!({"temperature": 0.3});
        assert_eq!(
            merged(&json!({"temperature": null}), &defaults),
            Some(json!({"temperature": 0.3}))
        );
        assert_eq!(merged(&json!([1]), &defaults), None);
        assert_eq!(merge_defaults(b"not json", &Map::new()), None);
    }

    #[test]
    fn the_clients_thinking_wins_whole() {
        let defaults = json!({"thinking": {"type": "enabled", "budget_tokens": 2048}});
        let body = json!({"thinking": {"type": "disabled"}});
        assert_eq!(merged(&body, &defaults), None);
        assert_eq!(
            merged(&json!({"model": "m"}), &defaults),
            Some(json!({"model": "m", "thinking": {"type": "enabled", "budget_tokens": 2048}}))
        );
    }
}
