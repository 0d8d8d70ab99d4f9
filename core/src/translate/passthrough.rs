//! Anthropic Messages → Anthropic Messages: the pass-through dialect
//! ([`crate::api::Dialect::Anthropic`]), for real Claude behind the bridge.
//!
//! The request goes through as the client's bytes, unless the history needs the repair every
//! provider gets ([`crate::anthropic::repair`]) or the options name another model. The stream is
//! relayed frame by frame as it arrives — each frame re-encoded whole, so a cut never leaves half
//! a frame at the client, and event types this bridge does not know pass too — while the events
//! it knows are watched:
//!
//! ```text
//!   Relaying ──message_stop / error──► Complete (anything after it is dropped)
//!      │
//!      ├──fail(error)───────────────► Complete (an `error` event)
//!      └──finish, no end seen────────► Complete (an `error` event: the stream was cut)
//! ```
//!
//! ```
//! use bridge_core::translate::passthrough::PassThrough;
//! let mut relay = PassThrough::default();
//! let out = relay.feed(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\nevent: ping\ndata: {\"type\":\"ping\"}");
//! assert!(out.sse.starts_with("event: message_start\ndata: {"));
//! assert_eq!(out.events.len(), 1);
//! // Cut here (the ping's blank line never came): the whole ping, then a well-formed error.
//! let end = relay.finish();
//! assert!(end.sse.starts_with("event: ping\n"));
//! assert!(end.sse.ends_with("\"message\":\"the upstream's stream ended before message_stop\"}}\n\n"));
//! ```

use serde::{Deserialize, Serialize};

use crate::anthropic::events::{ApiError, ErrorKind, StreamEvent};
use crate::anthropic::repair::repair_warnings;
use crate::error::RequestError;
use crate::sse::decoder::{SseDecoder, SseFrame};
use crate::translate::chat_request::ConvertedRequest;
use crate::translate::{MAX_HELD_BYTES, held_too_much};

/// How [`prepare`] shapes a pass-through request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnthropicOptions {
    /// The model every request is sent with; `None` keeps the client's.
    pub model: Option<String>,
}

/// The request to send: the client's bytes unchanged unless the model or the history changes.
/// `max_tokens` is not required here (`count_tokens` has none): Anthropic itself says what it
/// refuses.
///
/// # Errors
/// [`RequestError`] when the body is not a Messages request.
pub fn prepare(
    request: &[u8],
    options: &AnthropicOptions,
) -> Result<ConvertedRequest, RequestError> {
    let parsed = crate::anthropic::repair::parse_and_repair(request)?;
    let client_model = parsed.request.model.clone();
    let model = options.model.as_deref().filter(|m| !m.is_empty());
    let upstream_model = model.unwrap_or(&client_model).to_owned();
    let input_tokens_estimate = crate::tokens::estimate_request(&parsed.request);
    let client_stream = parsed.request.stream.unwrap_or(false);
    let warnings = repair_warnings(&parsed.repairs);
    // An OpenAI client's schema `name`/`strict` (kept for OpenAI upstreams) Anthropic refuses.
    let openai_format =
        crate::anthropic::fields::has_openai_format_fields(parsed.request.output_config.as_ref());
    let body =
        if model.is_none_or(|m| m == client_model) && parsed.repaired.is_none() && !openai_format {
            String::from_utf8(request.to_vec())
                .map_err(|e| RequestError::Json(format!("the body is not UTF-8: {e}")))?
        } else {
            let mut value = match parsed.repaired {
                Some(value) => value,
                None => serde_json::from_slice(request)
                    .map_err(|e| RequestError::Json(e.to_string()))?,
            };
            if let Some(model) = model {
                value["model"] = serde_json::Value::String(model.to_owned());
            }
            crate::anthropic::fields::strip_openai_format_fields(&mut value);
            value.to_string()
        };
    Ok(ConvertedRequest {
        body,
        upstream_model,
        client_model,
        client_stream,
        input_tokens_estimate,
        warnings,
        // Anthropic takes the client's own names.
        tool_names: crate::translate::tool_names::ToolNames::default(),
    })
}

/// What one step of the relay gives: the SSE text for the client and the events it could read.
#[derive(Debug, Default, PartialEq)]
pub struct Relayed {
    /// The frames to write, each whole, in the upstream's order.
    pub sse: String,
    /// The events among them this bridge knows (for folding and accounting).
    pub events: Vec<StreamEvent>,
}

/// The relay for one Anthropic stream.
#[derive(Debug, Default)]
pub struct PassThrough {
    decoder: SseDecoder,
    /// `message_stop` or `error` was relayed (or written): nothing more goes out.
    complete: bool,
}

impl PassThrough {
    /// Feed upstream bytes (any split); returns the whole frames they complete.
    pub fn feed(&mut self, chunk: &[u8]) -> Relayed {
        if self.complete {
            return Relayed::default();
        }
        let frames = self.decoder.feed(chunk);
        let mut out = self.relay(frames);
        let held = self.decoder.held();
        if held > MAX_HELD_BYTES && !self.complete {
            self.decoder = SseDecoder::default();
            self.end_with(held_too_much(held), &mut out);
        }
        out
    }

    /// The upstream failed: end with an `error` event, unless the stream had already ended.
    pub fn fail(&mut self, error: ApiError) -> Relayed {
        let mut out = Relayed::default();
        self.end_with(error, &mut out);
        out
    }

    /// The upstream body ended: its last frames, and an `error` event if it never said it was
    /// done.
    pub fn finish(&mut self) -> Relayed {
        if self.complete {
            return Relayed::default();
        }
        // A frame the body ended inside (no blank line after it) goes out only if its data is
        // whole JSON: half an event would break the client's parser, not end its stream.
        let frames = self
            .decoder
            .finish()
            .into_iter()
            .filter(|f| serde_json::from_str::<serde::de::IgnoredAny>(&f.data).is_ok())
            .collect();
        let mut out = self.relay(frames);
        self.end_with(
            ApiError::new(
                ErrorKind::Api,
                "the upstream's stream ended before message_stop",
            ),
            &mut out,
        );
        out
    }

    fn relay(&mut self, frames: Vec<SseFrame>) -> Relayed {
        let mut out = Relayed::default();
        for frame in frames {
            if self.complete {
                break;
            }
            let name = frame.event.as_deref().unwrap_or("message");
            if let Ok(event) = serde_json::from_str::<StreamEvent>(&frame.data) {
                self.complete =
                    matches!(event, StreamEvent::MessageStop | StreamEvent::Error { .. });
                out.events.push(event);
            }
            // The decoder never yields a name with a line break, so this always encodes.
            let _ = crate::sse::encoder::encode_frame(&mut out.sse, name, &frame.data);
        }
        out
    }

    fn end_with(&mut self, error: ApiError, out: &mut Relayed) {
        if self.complete {
            return;
        }
        self.complete = true;
        let event = StreamEvent::Error { error };
        crate::anthropic::encode::encode_event(&mut out.sse, &event);
        out.events.push(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n";

    #[test]
    fn the_clients_bytes_go_through_unless_the_model_or_the_history_changes() {
        let body = br#"{"model":"claude-x", "max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
        let same = prepare(body, &AnthropicOptions::default()).unwrap();
        assert_eq!(same.body.as_bytes(), body);
        assert!(same.client_stream);
        assert_eq!(same.upstream_model, "claude-x");
        let named = AnthropicOptions {
            model: Some("claude-y".into()),
        };
        let moved = prepare(body, &named).unwrap();
        assert_eq!(moved.upstream_model, "claude-y");
        assert_eq!(moved.client_model, "claude-x");
        assert!(
            moved.body.contains(r#""model":"claude-y""#),
            "{}",
            moved.body
        );
        let counting = br#"{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}"#;
        assert!(prepare(counting, &AnthropicOptions::default()).is_ok());
        assert!(prepare(b"{", &AnthropicOptions::default()).is_err());
    }

    #[test]
    fn frames_are_relayed_whole_unknown_ones_too_and_nothing_after_the_end() {
        let mut relay = PassThrough::default();
        let stream = format!(
            "{START}event: future_thing\ndata: {{\"type\":\"future_thing\"}}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\nevent: ping\ndata: {{\"type\":\"ping\"}}\n\n"
        );
        let mut sse = String::new();
        for byte in stream.as_bytes() {
            sse.push_str(&relay.feed(std::slice::from_ref(byte)).sse);
        }
        sse.push_str(&relay.finish().sse);
        let expected = stream.split("event: ping").next().unwrap_or_default();
        assert_eq!(sse, expected);
    }

    #[test]
    fn half_a_frame_at_the_cut_is_dropped_and_the_stream_ends_with_an_error() {
        let mut relay = PassThrough::default();
        let _ = relay.feed(START.as_bytes());
        let cut = relay.feed(b"event: content_block_start\ndata: {\"type\":\"content_bl");
        assert_eq!(cut, Relayed::default());
        let end = relay.finish();
        assert!(end.sse.starts_with("event: error\n"), "{}", end.sse);
        assert_eq!(end.events.len(), 1);
    }

    #[test]
    fn a_failure_after_the_end_writes_nothing_and_before_it_one_error() {
        let mut relay = PassThrough::default();
        let _ = relay.feed(START.as_bytes());
        let failed = relay.fail(ApiError::new(ErrorKind::Overloaded, "gone"));
        assert!(failed.sse.starts_with("event: error\n"), "{}", failed.sse);
        assert_eq!(
            relay.fail(ApiError::new(ErrorKind::Api, "again")),
            Relayed::default()
        );
        assert_eq!(relay.finish(), Relayed::default());
    }

    #[test]
    fn an_openai_clients_schema_name_and_strict_do_not_reach_anthropic() {
        let req = br#"{"model":"claude-x","max_tokens":9,"messages":[{"role":"user","content":"q"}],
            "output_config":{"effort":"low","format":{"type":"json_schema","name":"p","strict":true,"schema":{"type":"object"}}}}"#;
        let out = prepare(req, &AnthropicOptions::default()).unwrap();
        let body: serde_json::Value = serde_json::from_str(&out.body).unwrap();
        assert_eq!(
            body["output_config"],
            serde_json::json!({"effort": "low", "format": {"type": "json_schema", "schema": {"type": "object"}}})
        );
    }

    #[test]
    fn block_and_delta_types_the_core_does_not_model_are_relayed_byte_for_byte() {
        // Server tools, redacted thinking and citations, as Anthropic streams them with web
        // search on: the core's event types do not model these blocks (so they are neither
        // folded nor validated), but the relay passes every byte and still sees the end.
        let stream = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":12044,"output_tokens":2,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_014hJH82Qum7Td6UV8gDXThB","name":"web_search","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"tallest building\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_014hJH82Qum7Td6UV8gDXThB","content":[{"type":"web_search_result","title":"Burj Khalifa","url":"https://example.invalid/burj","encrypted_content":"EqgfCioIARgB","page_age":null}]}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: content_block_start
data: {"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","cited_text":"Burj Khalifa, 828 m","url":"https://example.invalid/burj","title":"Burj Khalifa","encrypted_index":"Eo8BCioIAhgB"}}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"The Burj Khalifa (828 m)."}}

event: content_block_stop
data: {"type":"content_block_stop","index":3}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":120,"server_tool_use":{"web_search_requests":1}}}

event: message_stop
data: {"type":"message_stop"}

"#;
        let mut relay = PassThrough::default();
        let mut sse = String::new();
        for piece in stream.as_bytes().chunks(5) {
            sse.push_str(&relay.feed(piece).sse);
        }
        let end = relay.finish();
        assert_eq!(end, Relayed::default(), "message_stop was seen");
        assert_eq!(sse, stream);
    }
}
