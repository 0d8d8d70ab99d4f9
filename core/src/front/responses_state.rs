//! Stored responses, sans-IO: a Responses request that points back — `previous_response_id`,
//! `{"type":"item_reference","id":…}` input items — becomes the whole conversation it stands
//! for, as OpenAI's API makes it. The host keeps what it answered (in memory, or a shared store)
//! behind [`Recall`]; this module only reads and rewrites the request.
//!
//! ```text
//!  client request ──► resolve(&mut request, &recall) ──► Resolved.input: the previous response's
//!                         │                               context + this input, references replaced
//!                         └─ 404 / 400 naming the id ◄─── (kept with the answer: the next context)
//!  request_body(&request, &resolved.input) ──► the body the front converts (`previous_response_id`
//!                                              removed, `instructions` this request's own)
//! ```
//!
//! The items are shared (`Arc`), so a conversation stored turn by turn holds each item once.
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::{json, Value};
//! use bridge_core::front::responses_state::{Recall, resolve, request_body};
//!
//! struct One(Vec<Arc<Value>>);
//! impl Recall for One {
//!     fn context(&self, id: &str) -> Option<Vec<Arc<Value>>> { (id == "resp_1").then(|| self.0.clone()) }
//!     fn item(&self, id: &str) -> Option<Arc<Value>> { self.0.iter().find(|i| i["id"] == id).cloned() }
//! }
//! let kept = One(vec![
//!     Arc::new(json!({"type": "message", "role": "user", "content": "hi"})),
//!     Arc::new(json!({"type": "message", "id": "msg_1", "role": "assistant",
//!                     "content": [{"type": "output_text", "text": "Hello."}]})),
//! ]);
//! let mut request = json!({"model": "m", "previous_response_id": "resp_1", "input": "and now?"})
//!     .as_object().cloned().unwrap();
//! let resolved = resolve(&mut request, &kept).unwrap();
//! assert_eq!(resolved.input.len(), 3);
//! assert_eq!(resolved.previous_response_id.as_deref(), Some("resp_1"));
//! let body: Value = serde_json::from_str(&request_body(&request, &resolved.input)).unwrap();
//! assert_eq!(body["input"][2]["content"], "and now?");
//! assert!(body.get("previous_response_id").is_none());
//!
//! let mut unknown = json!({"model": "m", "input": [{"type": "item_reference", "id": "msg_9"}]})
//!     .as_object().cloned().unwrap();
//! assert_eq!(resolve(&mut unknown, &kept).unwrap_err().status(), 404);
//! ```

use std::sync::Arc;

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value, json};

use crate::front::FrontError;

/// What the host kept: a stored response's whole context (its input, references resolved, and
/// its output items), and any item by its `id`.
pub trait Recall {
    /// The items the response `id` stands for in a later request's `previous_response_id`.
    fn context(&self, id: &str) -> Option<Vec<Arc<Value>>>;
    /// The item `id` (an output item the bridge returned, or an input item that had an `id`).
    fn item(&self, id: &str) -> Option<Arc<Value>>;
}

/// A request with what it referred to in place.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    /// The whole input: the previous response's context, then this request's items (each
    /// `item_reference` replaced by the item; a string input as one user message).
    pub input: Vec<Arc<Value>>,
    /// The response this one continues (the response object repeats it).
    pub previous_response_id: Option<String>,
}

/// Whether a request may refer to stored items: a cheap look at its bytes, so a request that
/// cannot (Codex's, every stateless client's) is not parsed twice. A `false` is certain.
#[must_use]
pub fn may_refer(body: &[u8]) -> bool {
    memchr::memmem::find(body, b"previous_response_id").is_some()
        || memchr::memmem::find(body, b"item_reference").is_some()
}

/// Replace what `request` refers to with the items `recall` kept: `previous_response_id` and
/// `input` are taken out of `request` and come back as [`Resolved`].
///
/// # Errors
/// A wrong type (400), a `previous_response_id` not kept (400
/// `previous_response_not_found`), an `item_reference` not kept (404), as OpenAI answers.
pub fn resolve(
    request: &mut Map<String, Value>,
    recall: &dyn Recall,
) -> Result<Resolved, FrontError> {
    let previous_response_id = match request.remove("previous_response_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id),
        Some(_) => {
            return Err(FrontError::invalid(
                "previous_response_id",
                "must be a string",
            ));
        }
    };
    let mut input = match &previous_response_id {
        None => Vec::new(),
        Some(id) => recall.context(id).ok_or_else(|| FrontError::NotFound {
            param: String::from("previous_response_id"),
            message: format!(
                "Previous response with id '{id}' not found. {}",
                kept_where()
            ),
        })?,
    };
    match request.remove("input") {
        Some(Value::String(text)) => {
            input.push(Arc::new(
                json!({"type": "message", "role": "user", "content": text}),
            ));
        }
        Some(Value::Array(items)) => {
            input.reserve(items.len());
            for (i, item) in items.into_iter().enumerate() {
                input.push(resolve_item(item, i, recall)?);
            }
        }
        // Left to the front, which names what is missing or wrong.
        Some(other) => {
            request.insert(String::from("input"), other);
        }
        None => {}
    }
    Ok(Resolved {
        input,
        previous_response_id,
    })
}

fn resolve_item(item: Value, i: usize, recall: &dyn Recall) -> Result<Arc<Value>, FrontError> {
    if item.get("type").and_then(Value::as_str) != Some("item_reference") {
        return Ok(Arc::new(item));
    }
    let Some(id) = item.get("id").and_then(Value::as_str) else {
        return Err(FrontError::missing(
            format!("input[{i}].id"),
            "an item_reference names the item by its id",
        ));
    };
    recall.item(id).ok_or_else(|| FrontError::NotFound {
        param: String::from("input"),
        message: format!(
            "Item with id '{id}' not found (input[{i}]). Items are kept only for responses \
             made with store not false; send the item itself instead. {}",
            kept_where()
        ),
    })
}

fn kept_where() -> &'static str {
    "This bridge keeps responses in its memory for a limited time and size \
     (--responses-store-ttl, --responses-store-bytes): it may have expired, been evicted, or \
     been made before a restart or by another bridge process."
}

/// The request's JSON with `input` (the resolved items) in place.
#[must_use]
pub fn request_body(request: &Map<String, Value>, input: &[Arc<Value>]) -> String {
    serde_json::to_string(&WithInput { request, input }).unwrap_or_default()
}

struct WithInput<'a> {
    request: &'a Map<String, Value>,
    input: &'a [Arc<Value>],
}

impl Serialize for WithInput<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.request.len() + 1))?;
        for (name, value) in self.request {
            map.serialize_entry(name, value)?;
        }
        map.serialize_entry("input", &Items(self.input))?;
        map.end()
    }
}

struct Items<'a>(&'a [Arc<Value>]);

impl Serialize for Items<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|item| &**item))
    }
}

/// The items a response adds to a conversation: its `output` (for the next request's
/// `previous_response_id` and `item_reference`s), taken out of it — its `output` is left an
/// empty list — so a keeper holds them once, shared, rather than a copy beside the response.
pub fn take_output_items(response: &mut Value) -> Vec<Arc<Value>> {
    match response.get_mut("output") {
        Some(Value::Array(items)) => std::mem::take(items).into_iter().map(Arc::new).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[derive(Default)]
    struct Kept {
        responses: BTreeMap<String, Vec<Arc<Value>>>,
        items: BTreeMap<String, Arc<Value>>,
    }

    impl Recall for Kept {
        fn context(&self, id: &str) -> Option<Vec<Arc<Value>>> {
            self.responses.get(id).cloned()
        }
        fn item(&self, id: &str) -> Option<Arc<Value>> {
            self.items.get(id).cloned()
        }
    }

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn references_are_replaced_by_the_items_in_their_place() {
        let reasoning = Arc::new(
            json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "sig"}),
        );
        let answer = Arc::new(
            json!({"type": "message", "id": "msg_1", "role": "assistant",
            "content": [{"type": "output_text", "text": "Calling."}]}),
        );
        let mut kept = Kept::default();
        kept.items.insert("rs_1".into(), Arc::clone(&reasoning));
        kept.items.insert("msg_1".into(), Arc::clone(&answer));
        let mut request = object(json!({"model": "m", "instructions": "Be brief.", "input": [
            {"role": "user", "content": "Weather?"},
            {"type": "item_reference", "id": "rs_1"},
            {"type": "item_reference", "id": "msg_1"},
            {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]}));
        let resolved = resolve(&mut request, &kept).unwrap();
        assert_eq!(resolved.previous_response_id, None);
        assert!(Arc::ptr_eq(&resolved.input[1], &reasoning));
        assert!(Arc::ptr_eq(&resolved.input[2], &answer));
        let body: Value = serde_json::from_str(&request_body(&request, &resolved.input)).unwrap();
        assert_eq!(body["instructions"], "Be brief.");
        assert_eq!(body["input"][1]["encrypted_content"], "sig");
        assert_eq!(body["input"][2]["content"][0]["text"], "Calling.");
        assert_eq!(body["input"][4]["output"], "sunny");
    }

    #[test]
    fn a_previous_response_comes_first_and_is_shared() {
        let first = vec![
            Arc::new(json!({"type": "message", "role": "user", "content": "hi"})),
            Arc::new(
                json!({"type": "message", "id": "msg_a", "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello."}]}),
            ),
        ];
        let mut kept = Kept::default();
        kept.responses.insert("resp_a".into(), first.clone());
        let mut request =
            object(json!({"model": "m", "previous_response_id": "resp_a", "input": "more"}));
        let resolved = resolve(&mut request, &kept).unwrap();
        assert_eq!(resolved.previous_response_id.as_deref(), Some("resp_a"));
        assert_eq!(resolved.input.len(), 3);
        assert!(Arc::ptr_eq(&resolved.input[0], &first[0]));
        assert_eq!(
            *resolved.input[2],
            json!({"type": "message", "role": "user", "content": "more"})
        );
        assert!(!request.contains_key("previous_response_id"));
    }

    #[test]
    fn what_is_not_kept_is_named_as_openai_names_it() {
        let kept = Kept::default();
        let mut request =
            object(json!({"model": "m", "previous_response_id": "resp_x", "input": "q"}));
        let e = resolve(&mut request, &kept).unwrap_err();
        assert_eq!((e.status(), e.code()), (400, "previous_response_not_found"));
        assert_eq!(e.param(), Some("previous_response_id"));
        assert!(
            e.to_string()
                .starts_with("Previous response with id 'resp_x' not found.")
        );

        let mut request = object(json!({"model": "m", "input": [
            {"role": "user", "content": "q"}, {"type": "item_reference", "id": "msg_gone"}]}));
        let e = resolve(&mut request, &kept).unwrap_err();
        assert_eq!((e.status(), e.param()), (404, Some("input")));
        assert!(e.to_string().contains("'msg_gone'"), "{e}");
        assert!(e.to_string().contains("input[1]"), "{e}");

        let mut request = object(json!({"model": "m", "previous_response_id": 7, "input": "q"}));
        assert_eq!(
            resolve(&mut request, &kept).unwrap_err().param(),
            Some("previous_response_id")
        );
        let mut request = object(json!({"model": "m", "input": [{"type": "item_reference"}]}));
        assert_eq!(
            resolve(&mut request, &kept).unwrap_err().param(),
            Some("input[0].id")
        );
    }

    #[test]
    fn only_a_body_that_names_them_is_looked_at() {
        assert!(may_refer(br#"{"previous_response_id":"resp_1"}"#));
        assert!(may_refer(
            br#"{"input":[{"type":"item_reference","id":"m"}]}"#
        ));
        assert!(!may_refer(br#"{"model":"m","input":"hi","store":false}"#));
    }

    #[test]
    fn output_items_are_the_response_output_taken_out() {
        let mut response = json!({"id": "resp_1", "output": [{"type": "message", "id": "msg_1"}]});
        let items = take_output_items(&mut response);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["id"], "msg_1");
        assert_eq!(response, json!({"id": "resp_1", "output": []}), "held once");
        assert!(take_output_items(&mut json!({"id": "r"})).is_empty());
    }
}
