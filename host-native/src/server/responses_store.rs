//! What `/v1/responses` answered, kept so a later request's `previous_response_id` and
//! `item_reference` items resolve ([`bridge_core::front::responses_state`]), and
//! `GET` / `DELETE /v1/responses/{id}` find it — as OpenAI's API does for `store` (its default)
//! not `false`. The Vercel AI SDK's `openai(...)` provider depends on it: its second tool-loop
//! step sends the first answer back as references.
//!
//! Kept in this process's memory, bounded in time (`--responses-store-ttl`, default a day) and
//! in bytes (`--responses-store-bytes`, default 64 MiB; `0` keeps nothing and every request is
//! served as `store: false`). Each response counts as its request's body plus its own JSON —
//! the whole conversation so far, though the items are shared between the turns that hold them
//! — so real memory stays under the bound; the oldest go first. A reference to a response
//! another replica or an earlier run made does not resolve (a 400/404 that says so).
//!
//! ```text
//!  POST /v1/responses ─► Pending::open (parse only when store ≠ false or a reference is seen)
//!        │                 └─ resolve references (404 / 400 naming the id)
//!        ▼
//!  front translator ─► Keeping session: sees the terminal response object go by ─► put()
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Map, Value};

use bridge_core::anthropic::events::ErrorKind;
use bridge_core::api::{Finished, StreamEnd};
use bridge_core::front::FrontError;
use bridge_core::front::responses_state::{self, Recall};

use crate::engine::{EngineError, StreamSession};

/// The kept responses and their items.
#[derive(Debug)]
pub struct ResponseStore {
    max_bytes: usize,
    ttl: Duration,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    responses: HashMap<String, Entry>,
    /// Item id → the response that holds it last, and the item.
    items: HashMap<String, (String, Arc<Value>)>,
    /// Response ids, oldest first.
    order: VecDeque<(Instant, String)>,
    bytes: usize,
}

#[derive(Debug)]
struct Entry {
    response: Arc<Value>,
    /// Input (references resolved) and output: what `previous_response_id` stands for.
    context: Vec<Arc<Value>>,
    /// How many items at the end of `context` are the response's `output` (kept there only,
    /// not in `response` too: a long answer is held once).
    outputs: usize,
    item_ids: Vec<String>,
    bytes: usize,
}

impl ResponseStore {
    /// A store of at most `max_bytes` (0: keep nothing), each response kept for `ttl`.
    #[must_use]
    pub fn new(max_bytes: usize, ttl: Duration) -> Self {
        Self {
            max_bytes,
            ttl,
            inner: Mutex::default(),
        }
    }

    /// Whether responses are kept at all.
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.max_bytes > 0 && !self.ttl.is_zero()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keep `response` (its JSON `bytes` long), made from `input` (`input_bytes` of request).
    pub fn put(
        &self,
        mut response: Value,
        bytes: usize,
        input: Vec<Arc<Value>>,
        input_bytes: usize,
    ) {
        let Some(id) = response
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return;
        };
        let size = bytes + input_bytes;
        if !self.enabled() || size > self.max_bytes {
            return;
        }
        let mut context = input;
        let output = responses_state::take_output_items(&mut response);
        let outputs = output.len();
        context.extend(output);
        let now = Instant::now();
        let mut inner = self.lock();
        inner.remove(&id);
        let mut item_ids = Vec::new();
        for item in &context {
            if let Some(item_id) = item.get("id").and_then(Value::as_str) {
                item_ids.push(item_id.to_owned());
                inner
                    .items
                    .insert(item_id.to_owned(), (id.clone(), Arc::clone(item)));
            }
        }
        inner.bytes += size;
        inner.order.push_back((now, id.clone()));
        inner.responses.insert(
            id,
            Entry {
                response: Arc::new(response),
                context,
                outputs,
                item_ids,
                bytes: size,
            },
        );
        inner.evict(now, self.ttl, self.max_bytes);
    }

    /// The response object `id`, if kept.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<Arc<Value>> {
        let (response, output) = {
            let mut inner = self.lock();
            inner.evict(Instant::now(), self.ttl, self.max_bytes);
            let e = inner.responses.get(id)?;
            let start = e.context.len().saturating_sub(e.outputs);
            (Arc::clone(&e.response), e.context.get(start..)?.to_vec())
        };
        // The output goes back in (a copy made for this answer, outside the lock).
        let mut response = Value::clone(&response);
        if let Some(slot) = response.get_mut("output") {
            *slot = Value::Array(output.iter().map(|item| Value::clone(item)).collect());
        }
        Some(Arc::new(response))
    }

    /// Forget the response `id`; whether it was kept.
    pub fn delete(&self, id: &str) -> bool {
        self.lock().remove(id)
    }

    /// Bytes and responses kept now (for `/metrics`).
    #[must_use]
    pub fn usage(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.bytes, inner.responses.len())
    }
}

impl Inner {
    fn remove(&mut self, id: &str) -> bool {
        let Some(entry) = self.responses.remove(id) else {
            return false;
        };
        self.bytes -= entry.bytes;
        for item_id in &entry.item_ids {
            if self
                .items
                .get(item_id)
                .is_some_and(|(owner, _)| owner == id)
            {
                self.items.remove(item_id);
            }
        }
        true
    }

    /// Drop what outlived `ttl`, then the oldest until the rest fits `max_bytes`.
    fn evict(&mut self, now: Instant, ttl: Duration, max_bytes: usize) {
        while let Some((at, id)) = self.order.front() {
            let stale = now.duration_since(*at) > ttl;
            let gone = !self.responses.contains_key(id);
            if !(stale || gone || self.bytes > max_bytes) {
                break;
            }
            if let Some((_, id)) = self.order.pop_front() {
                self.remove(&id);
            }
        }
    }
}

impl Recall for ResponseStore {
    fn context(&self, id: &str) -> Option<Vec<Arc<Value>>> {
        let mut inner = self.lock();
        inner.evict(Instant::now(), self.ttl, self.max_bytes);
        inner.responses.get(id).map(|e| e.context.clone())
    }

    fn item(&self, id: &str) -> Option<Arc<Value>> {
        let mut inner = self.lock();
        inner.evict(Instant::now(), self.ttl, self.max_bytes);
        inner.items.get(id).map(|(_, item)| Arc::clone(item))
    }
}

/// A Responses request on its way: the body the front converts (references replaced), and —
/// when the answer is to be kept — its whole input.
#[derive(Debug)]
pub struct Pending {
    /// The request body for the front.
    pub body: Bytes,
    /// What to keep the answer with (`None`: `store: false`, or storing is off).
    pub keep: Option<Keep>,
    /// The `previous_response_id` it continues (the response object repeats it).
    pub previous_response_id: Option<String>,
}

/// What the answer is kept with.
#[derive(Debug, Clone)]
pub struct Keep {
    store: Arc<ResponseStore>,
    input: Vec<Arc<Value>>,
    input_bytes: usize,
}

#[derive(serde::Deserialize)]
struct StoreField {
    store: Option<bool>,
}

impl Pending {
    /// Read what `body` refers to and whether its answer is kept: a body that names no stored
    /// item and says `store: false` (Codex's) is passed on unparsed.
    ///
    /// # Errors
    /// A reference that does not resolve, or a wrong type ([`FrontError`]).
    pub fn open(body: Bytes, store: &Arc<ResponseStore>) -> Result<Self, FrontError> {
        let refers = responses_state::may_refer(&body);
        let wants_store = store.enabled()
            && serde_json::from_slice::<StoreField>(&body).map_or(true, |f| f.store != Some(false));
        if !refers && !wants_store {
            return Ok(Self {
                body,
                keep: None,
                previous_response_id: None,
            });
        }
        // The front reports a body that is not a JSON object.
        let Ok(Value::Object(mut request)) = serde_json::from_slice::<Value>(&body) else {
            return Ok(Self {
                body,
                keep: None,
                previous_response_id: None,
            });
        };
        let resolved = responses_state::resolve(&mut request, store.as_ref())?;
        let body = if refers {
            Bytes::from(responses_state::request_body(&request, &resolved.input))
        } else {
            body
        };
        let keep = wants_store.then(|| Keep {
            store: Arc::clone(store),
            input: resolved.input,
            input_bytes: body.len(),
        });
        Ok(Self {
            body,
            keep,
            previous_response_id: resolved.previous_response_id,
        })
    }

    /// The settings the response object repeats that only the host knows: whether it is kept,
    /// and which response it continues.
    pub fn echo(&self, echo: &mut Map<String, Value>) {
        echo.insert(String::from("store"), Value::Bool(self.keep.is_some()));
        if let Some(id) = &self.previous_response_id {
            echo.insert(
                String::from("previous_response_id"),
                Value::String(id.clone()),
            );
        }
    }
}

/// A front translator whose terminal response object is kept when it goes by.
pub struct Keeping {
    inner: Box<dyn StreamSession>,
    keep: Option<Keep>,
    stream: bool,
}

impl std::fmt::Debug for Keeping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeping")
            .field("stream", &self.stream)
            .field("kept", &self.keep.is_none())
            .finish_non_exhaustive()
    }
}

impl Keeping {
    /// `inner` (streaming or folding as `stream` says), its answer kept with `keep`.
    #[must_use]
    pub fn new(inner: Box<dyn StreamSession>, keep: Keep, stream: bool) -> Self {
        Self {
            inner,
            keep: Some(keep),
            stream,
        }
    }

    /// Keep the response in `sse` when it holds the terminal event.
    fn look(&mut self, sse: &str) {
        const TERMINAL: [&str; 2] = [
            "event: response.completed\ndata: ",
            "event: response.incomplete\ndata: ",
        ];
        for marker in TERMINAL {
            let Some(at) = sse.find(marker) else {
                continue;
            };
            let data = &sse[at + marker.len()..];
            let data = data.split('\n').next().unwrap_or_default();
            if let Ok(mut frame) = serde_json::from_str::<Value>(data)
                && let Some(response) = frame.get_mut("response").map(Value::take)
            {
                self.keep_response(response, data.len());
            }
            return;
        }
    }

    /// A streamed piece going by: kept when it holds the terminal event.
    fn seen(&mut self, out: String) -> String {
        if self.stream && self.keep.is_some() {
            self.look(&out);
        }
        out
    }

    fn keep_response(&mut self, response: Value, bytes: usize) {
        if let Some(keep) = self.keep.take() {
            keep.store
                .put(response, bytes, keep.input, keep.input_bytes);
        }
    }
}

impl StreamSession for Keeping {
    fn feed(&mut self, chunk: &[u8]) -> Result<String, EngineError> {
        let out = self.inner.feed(chunk)?;
        Ok(self.seen(out))
    }

    fn feed_owned(&mut self, chunk: Vec<u8>) -> Result<String, EngineError> {
        let out = self.inner.feed_owned(chunk)?;
        Ok(self.seen(out))
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> Result<String, EngineError> {
        self.keep = None;
        self.inner.fail(kind, message)
    }

    fn finish(&mut self, end: &StreamEnd) -> Result<Finished, EngineError> {
        let finished = self.inner.finish(end)?;
        if self.keep.is_some() {
            if self.stream {
                self.look(&finished.body);
            } else if finished.status == 200
                && let Ok(response) = serde_json::from_str::<Value>(&finished.body)
            {
                self.keep_response(response, finished.body.len());
            }
        }
        Ok(finished)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn response(id: &str, text: &str) -> Value {
        json!({"id": id, "object": "response", "output": [
            {"type": "message", "id": format!("msg_{id}"), "role": "assistant",
             "content": [{"type": "output_text", "text": text}]}]})
    }

    fn user(text: &str) -> Arc<Value> {
        Arc::new(json!({"type": "message", "role": "user", "content": text}))
    }

    #[test]
    fn a_kept_response_resolves_its_context_and_items_until_deleted() {
        let store = ResponseStore::new(1 << 20, Duration::from_secs(60));
        store.put(response("resp_1", "Hello."), 100, vec![user("hi")], 50);
        let context = store.context("resp_1").unwrap();
        assert_eq!(context.len(), 2);
        assert_eq!(context[1]["id"], "msg_resp_1");
        assert_eq!(
            store.item("msg_resp_1").unwrap()["content"][0]["text"],
            "Hello."
        );
        assert_eq!(
            *store.get("resp_1").unwrap(),
            response("resp_1", "Hello."),
            "GET gives the whole response back"
        );
        assert!(
            Arc::ptr_eq(&store.item("msg_resp_1").unwrap(), &context[1]),
            "an output item is held once, shared by the context and the item index"
        );
        assert_eq!(store.usage(), (150, 1));
        assert!(store.delete("resp_1"));
        assert!(!store.delete("resp_1"));
        assert!(store.get("resp_1").is_none() && store.item("msg_resp_1").is_none());
        assert_eq!(store.usage(), (0, 0));
    }

    #[test]
    fn the_oldest_go_first_when_the_bytes_run_out() {
        let store = ResponseStore::new(1000, Duration::from_secs(60));
        for i in 0..5 {
            store.put(
                response(&format!("resp_{i}"), "x"),
                200,
                vec![user("q")],
                100,
            );
        }
        assert_eq!(store.usage(), (900, 3));
        assert!(store.get("resp_1").is_none());
        assert!(store.get("resp_2").is_some() && store.get("resp_4").is_some());
        assert!(store.item("msg_resp_0").is_none());
        // One larger than the whole store is not kept and evicts nothing.
        store.put(response("resp_big", "x"), 2000, vec![], 0);
        assert!(store.get("resp_big").is_none());
        assert_eq!(store.usage().1, 3);
    }

    #[test]
    fn what_outlives_the_ttl_is_gone() {
        let store = ResponseStore::new(1 << 20, Duration::from_millis(30));
        store.put(response("resp_1", "x"), 10, vec![], 0);
        assert!(store.get("resp_1").is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert!(store.get("resp_1").is_none());
        assert_eq!(store.usage(), (0, 0));
    }

    #[test]
    fn an_item_outlives_its_first_response_in_a_later_one() {
        let store = ResponseStore::new(1 << 20, Duration::from_secs(60));
        store.put(response("resp_1", "a"), 10, vec![user("q")], 10);
        let context = store.context("resp_1").unwrap();
        store.put(response("resp_2", "b"), 10, context, 10);
        store.delete("resp_1");
        assert!(store.item("msg_resp_1").is_some(), "resp_2 still holds it");
        assert_eq!(store.context("resp_2").unwrap().len(), 3);
    }

    #[test]
    fn store_false_without_references_is_not_parsed_or_kept() {
        let store = Arc::new(ResponseStore::new(1 << 20, Duration::from_secs(60)));
        let body = Bytes::from_static(br#"{"model":"m","store":false,"input":"hi"}"#);
        let pending = Pending::open(body.clone(), &store).unwrap();
        assert!(pending.keep.is_none());
        assert_eq!(pending.body, body);
        let mut echo = Map::new();
        pending.echo(&mut echo);
        assert_eq!(echo["store"], false);

        let kept =
            Pending::open(Bytes::from_static(br#"{"model":"m","input":"hi"}"#), &store).unwrap();
        assert_eq!(kept.keep.as_ref().unwrap().input.len(), 1);

        let off = Arc::new(ResponseStore::new(0, Duration::from_secs(60)));
        let pending =
            Pending::open(Bytes::from_static(br#"{"model":"m","input":"hi"}"#), &off).unwrap();
        assert!(pending.keep.is_none());
        let missing = Pending::open(
            Bytes::from_static(br#"{"model":"m","previous_response_id":"resp_x","input":"hi"}"#),
            &off,
        )
        .unwrap_err();
        assert_eq!(missing.status(), 400);
    }
}
