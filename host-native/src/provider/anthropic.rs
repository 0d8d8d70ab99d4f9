//! The Anthropic provider: the Messages API passed through (`{base}/v1/messages`, the client's
//! query string kept) — real Claude with an API key, or with the client's own credentials (a
//! Claude subscription's OAuth token included).
//!
//! The body goes through unchanged except the model when `--model` names one, and the history
//! repair every provider gets (`bridge_core::anthropic::repair`); the bytes are forwarded as
//! they came when neither changes anything. `anthropic-version`, `anthropic-beta` and the SDK's
//! `x-stainless-*` / `user-agent` / `x-app` headers are forwarded unchanged.
//!
//! Credentials: with a provider key, `x-api-key: KEY` and the client's credentials are dropped;
//! without one, the client's `x-api-key` or `Authorization: Bearer` is forwarded, and a bearer
//! token that is a Claude OAuth token (`sk-ant-oat…`) gets `oauth-2025-04-20` appended to
//! `anthropic-beta` when missing. Keys are never logged.
//!
//! The stream is relayed frame by frame as it arrives, watched by the core's validator: usage is
//! logged at the end, and an upstream cut mid-stream ends with a well-formed `error` event
//! instead of a truncated stream. `count_tokens` is forwarded (exact counts).

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use tracing::{debug, info, warn};

use bridge_core::anthropic::events::{ApiError, ErrorKind, StreamEvent};
use bridge_core::api::{SseDecoder, Validator, encode_sse_frame};

use super::upstream::Upstream;
use super::{Answer, BoxFuture, Call, EventSource, Next, Provider};
use crate::error::BridgeError;

/// The beta a Claude OAuth token needs.
const OAUTH_BETA: &str = "oauth-2025-04-20";

/// Largest non-streaming answer read (a Messages answer is far smaller).
const MAX_COMPLETE_BODY: usize = 64 * 1024 * 1024;

/// The Anthropic Messages API, passed through.
#[derive(Debug)]
pub struct AnthropicPassThrough {
    messages: Upstream,
    count_tokens: Upstream,
    /// With a provider key, clients' credentials are never forwarded.
    has_key: bool,
    model: Option<String>,
}

impl AnthropicPassThrough {
    /// A pass-through to `messages` (`…/v1/messages`), with `api_key` sent as `x-api-key` (or
    /// the clients' own credentials without one), every request's model replaced by `model`.
    ///
    /// # Errors
    /// The key cannot be sent in a header.
    pub fn new(
        messages: Upstream,
        api_key: Option<&str>,
        model: Option<String>,
    ) -> Result<Self, String> {
        let key = api_key.filter(|k| !k.is_empty());
        let messages = match key {
            Some(key) => messages.with_header(HeaderName::from_static("x-api-key"), key)?,
            None => messages,
        };
        let count_url = match messages.url().split_once('?') {
            Some((path, query)) => format!("{path}/count_tokens?{query}"),
            None => format!("{}/count_tokens", messages.url()),
        };
        Ok(Self {
            count_tokens: messages.at(count_url),
            messages,
            has_key: key.is_some(),
            model: model.filter(|m| !m.is_empty()),
        })
    }

    /// The headers forwarded from the client, credentials as the key policy says.
    fn forwarded_headers(&self, client: &HeaderMap) -> HeaderMap {
        let mut out = HeaderMap::new();
        for (name, value) in client {
            let n = name.as_str();
            if n.starts_with("anthropic-")
                || n.starts_with("x-stainless-")
                || matches!(n, "user-agent" | "x-app" | "x-claude-code-session-id")
            {
                out.append(name, value.clone());
            }
        }
        if self.has_key {
            return out;
        }
        if let Some(key) = client.get("x-api-key") {
            out.insert("x-api-key", sensitive(key));
        } else if let Some(auth) = client.get(http::header::AUTHORIZATION) {
            out.insert(http::header::AUTHORIZATION, sensitive(auth));
            let token = auth.to_str().unwrap_or_default();
            let is_oauth = token
                .get(..7)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer "))
                && token[7..].trim_start().starts_with("sk-ant-oat");
            if is_oauth {
                add_beta(&mut out, OAUTH_BETA);
            }
        }
        out
    }

    /// The body to send: the client's bytes, unless the model or the history had to change.
    fn body(&self, body: &Bytes) -> Result<Bytes, BridgeError> {
        let parsed = bridge_core::anthropic::repair::parse_and_repair(body).map_err(|e| {
            BridgeError::Engine(crate::engine::EngineError::Request {
                kind: e.kind(),
                message: e.to_string(),
            })
        })?;
        for repair in &parsed.repairs {
            warn!(%repair, "repaired the conversation history");
        }
        let model_changes = self
            .model
            .as_ref()
            .is_some_and(|m| *m != parsed.request.model);
        if !model_changes && parsed.repaired.is_none() {
            return Ok(body.clone());
        }
        let mut value = match parsed.repaired {
            Some(value) => value,
            None => serde_json::from_slice(body)
                .map_err(|e| BridgeError::Internal(format!("cannot re-read the request: {e}")))?,
        };
        if let Some(model) = &self.model {
            value["model"] = serde_json::Value::String(model.clone());
        }
        serde_json::to_vec(&value)
            .map(Bytes::from)
            .map_err(|e| BridgeError::Internal(format!("cannot re-encode the request: {e}")))
    }

    async fn send(
        &self,
        upstream: &Upstream,
        call: &Call,
        body: Bytes,
    ) -> Result<Answer, BridgeError> {
        let headers = self.forwarded_headers(&call.headers);
        let response = upstream.post(body, call.query.as_deref(), &headers).await?;
        let status = response.status().as_u16();
        let is_sse = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if is_sse {
            return Ok(Answer::Stream {
                client_stream: true,
                source: Box::new(PassThroughSource::new(response.into_body())),
            });
        }
        let body = Limited::new(response.into_body(), MAX_COMPLETE_BODY)
            .collect()
            .await
            .map_err(|e| BridgeError::UpstreamConnect {
                url: upstream.url().to_owned(),
                reason: format!("the answer could not be read: {e}"),
            })?
            .to_bytes();
        Ok(Answer::Complete { status, body })
    }
}

fn sensitive(value: &HeaderValue) -> HeaderValue {
    let mut value = value.clone();
    value.set_sensitive(true);
    value
}

/// Append `beta` to `anthropic-beta` (comma-separated) unless it is there.
fn add_beta(headers: &mut HeaderMap, beta: &str) {
    let current = headers
        .get("anthropic-beta")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if current.split(',').any(|b| b.trim() == beta) {
        return;
    }
    let joined = if current.trim().is_empty() {
        beta.to_owned()
    } else {
        format!("{current},{beta}")
    };
    if let Ok(value) = HeaderValue::from_str(&joined) {
        headers.insert("anthropic-beta", value);
    }
}

impl Provider for AnthropicPassThrough {
    fn kind(&self) -> &'static str {
        "anthropic"
    }

    fn endpoint(&self) -> String {
        self.messages.url().to_owned()
    }

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    fn open(&self, call: Call) -> BoxFuture<'_, Result<Answer, BridgeError>> {
        Box::pin(async move {
            let body = self.body(&call.body)?;
            info!(
                upstream = %self.messages.url(),
                credentials = if self.has_key { "provider key" } else { "client's" },
                "forwarding to Anthropic"
            );
            self.send(&self.messages, &call, body).await
        })
    }

    fn count_tokens(&self, call: Call) -> BoxFuture<'_, Option<Result<Answer, BridgeError>>> {
        Box::pin(async move {
            let body = match self.body(&call.body) {
                Ok(body) => body,
                Err(e) => return Some(Err(e)),
            };
            Some(self.send(&self.count_tokens, &call, body).await)
        })
    }
}

/// The upstream's SSE, relayed frame by frame and checked by the validator.
struct PassThroughSource {
    body: Incoming,
    decoder: SseDecoder,
    validator: Validator,
    /// `message_stop` or `error` seen: the stream is complete.
    complete: bool,
    done: bool,
    /// Usage as reported (`message_start`, then `message_delta`), for the log.
    input_tokens: u64,
    output_tokens: u64,
}

impl PassThroughSource {
    fn new(body: Incoming) -> Self {
        Self {
            body,
            decoder: SseDecoder::new(),
            validator: Validator::new(),
            complete: false,
            done: false,
            input_tokens: 0,
            output_tokens: 0,
        }
    }

    /// Frames → the SSE text to relay (each frame re-encoded whole, so a cut never leaves half a
    /// frame at the client).
    fn relay(&mut self, frames: Vec<bridge_core::api::SseFrame>) -> String {
        let mut out = String::new();
        for frame in frames {
            if self.complete {
                break;
            }
            let event = frame
                .event
                .clone()
                .unwrap_or_else(|| String::from("message"));
            match serde_json::from_str::<StreamEvent>(&frame.data) {
                Ok(parsed) => {
                    self.watch(&parsed);
                    if let Err(violation) = self.validator.push(&parsed) {
                        debug!(%violation, "the upstream's stream breaks a rule");
                    }
                }
                Err(e) => {
                    debug!(error = %e, event = %event, "an upstream event this bridge does not know")
                }
            }
            match encode_sse_frame(&event, &frame.data) {
                Ok(text) => out.push_str(&text),
                Err(e) => {
                    debug!(error = %e, "an upstream frame that cannot be re-encoded was skipped")
                }
            }
        }
        out
    }

    fn watch(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::MessageStart { message } => {
                self.input_tokens = u64::from(message.usage.input_tokens);
            }
            StreamEvent::MessageDelta { usage, .. } => {
                self.output_tokens = u64::from(usage.output_tokens);
            }
            StreamEvent::MessageStop => {
                self.complete = true;
                info!(
                    input_tokens = self.input_tokens,
                    output_tokens = self.output_tokens,
                    "Anthropic stream complete"
                );
            }
            StreamEvent::Error { error } => {
                self.complete = true;
                warn!(kind = error.kind.as_str(), message = %error.message, "Anthropic stream ended with an error");
            }
            _ => {}
        }
    }
}

impl EventSource for PassThroughSource {
    fn next(&mut self) -> BoxFuture<'_, Next> {
        Box::pin(async move {
            loop {
                if self.done {
                    return Next::End;
                }
                let frames = match self.body.frame().await {
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) => self.decoder.feed(&data),
                        Err(_) => continue,
                    },
                    Some(Err(e)) => {
                        warn!(error = %e, "the Anthropic stream failed");
                        let message = format!("the upstream connection failed mid-stream: {e}");
                        return Next::Sse(self.fail(ErrorKind::Api, &message));
                    }
                    None => {
                        let rest = self.decoder.finish();
                        let mut out = self.relay(rest);
                        if self.complete {
                            self.done = true;
                        } else {
                            out.push_str(&self.fail(
                                ErrorKind::Api,
                                "the upstream's stream ended before message_stop",
                            ));
                        }
                        return if out.is_empty() {
                            Next::End
                        } else {
                            Next::Sse(out)
                        };
                    }
                };
                let out = self.relay(frames);
                if self.complete {
                    self.done = true;
                }
                if !out.is_empty() {
                    return Next::Sse(out);
                }
            }
        })
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> String {
        self.done = true;
        if self.complete {
            return String::new();
        }
        self.complete = true;
        warn!(%message, "ending the Anthropic stream with an error");
        let error = ApiError::new(kind, message);
        format!("event: error\ndata: {}\n\n", error.envelope())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(key: Option<&str>) -> AnthropicPassThrough {
        let upstream = Upstream::new(
            "http://127.0.0.1:9",
            "v1/messages",
            None,
            None,
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(1),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        AnthropicPassThrough::new(upstream, key, None).unwrap_or_else(|e| panic!("{e}"))
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                *name,
                HeaderValue::from_str(value).unwrap_or_else(|e| panic!("{e}")),
            );
        }
        map
    }

    #[test]
    fn a_provider_key_drops_the_clients_credentials() {
        let out = provider(Some("sk-ant-api-key")).forwarded_headers(&headers(&[
            ("x-api-key", "client"),
            ("authorization", "Bearer client"),
            ("anthropic-version", "2023-06-01"),
            ("host", "127.0.0.1:3456"),
        ]));
        assert!(out.get("x-api-key").is_none() && out.get("authorization").is_none());
        assert_eq!(
            out.get("anthropic-version").map(HeaderValue::as_bytes),
            Some(&b"2023-06-01"[..])
        );
        assert!(out.get("host").is_none());
    }

    #[test]
    fn an_oauth_bearer_gets_its_beta_once() {
        let p = provider(None);
        let out = p.forwarded_headers(&headers(&[
            ("authorization", "bearer sk-ant-oat01-xyz"),
            ("anthropic-beta", "claude-code-20250219"),
        ]));
        assert_eq!(
            out.get("anthropic-beta").map(HeaderValue::as_bytes),
            Some(&b"claude-code-20250219,oauth-2025-04-20"[..])
        );
        assert!(
            out.get("authorization")
                .is_some_and(HeaderValue::is_sensitive)
        );
        let again = p.forwarded_headers(&headers(&[
            ("authorization", "Bearer sk-ant-oat01-xyz"),
            ("anthropic-beta", "oauth-2025-04-20"),
        ]));
        assert_eq!(
            again.get("anthropic-beta").map(HeaderValue::as_bytes),
            Some(&b"oauth-2025-04-20"[..])
        );
        let key = p.forwarded_headers(&headers(&[("x-api-key", "sk-ant-api")]));
        assert!(key.get("anthropic-beta").is_none());
        assert!(key.get("x-api-key").is_some());
    }
}
