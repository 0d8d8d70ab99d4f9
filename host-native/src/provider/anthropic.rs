//! The Anthropic provider: the Messages API passed through (`{base}/v1/messages`, the client's
//! query string kept) — real Claude with an API key, or with the client's own credentials (a
//! Claude subscription's OAuth token included).
//!
//! The protocol work is the core's `anthropic` dialect
//! ([`bridge_core::translate::passthrough`], through the configured engine like every other
//! dialect): the body goes through unchanged except the model when `--model` names one, and the
//! history repair every provider gets; the bytes are forwarded as they came when neither changes
//! anything. `anthropic-version`, `anthropic-beta` and the SDK's `x-stainless-*` /
//! `user-agent` / `x-app` headers are forwarded unchanged; a request without
//! `anthropic-version` (curl, hand-written clients) gets `2023-06-01`.
//!
//! Credentials: with a provider key, `x-api-key: KEY` and the client's credentials are dropped;
//! without one, the client's `x-api-key` or `Authorization: Bearer` is forwarded, and a bearer
//! token that is a Claude OAuth token (`sk-ant-oat…`) gets `oauth-2025-04-20` appended to
//! `anthropic-beta` when missing. Keys are never logged.
//!
//! The stream is relayed frame by frame as it arrives (each frame whole), and an upstream cut
//! mid-stream ends with a well-formed `error` event instead of a truncated stream; usage is in
//! the request's log line like every provider's. `count_tokens` is forwarded (exact counts).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::{BodyExt, Limited};
use tracing::debug;

use bridge_core::api::{AnthropicOptions, ConvertedRequest, Dialect, StreamOptions};

use super::translated::{TranslatedSource, log_warnings};
use super::upstream::Upstream;
use super::{Answer, BoxFuture, Call, Provider};
use crate::engine::{Engine, encode_options};
use crate::error::BridgeError;

/// The API version sent when the client names none.
pub const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";

/// The beta a Claude OAuth token needs.
const OAUTH_BETA: &str = "oauth-2025-04-20";

/// Largest non-streaming answer read (a Messages answer is far smaller).
const MAX_COMPLETE_BODY: usize = 64 * 1024 * 1024;

/// The Anthropic Messages API, passed through.
pub struct AnthropicPassThrough {
    engine: Arc<dyn Engine>,
    messages: Upstream,
    count_tokens: Upstream,
    /// With a provider key, clients' credentials are never forwarded.
    has_key: bool,
    model: Option<String>,
    /// The `anthropic` dialect's options, encoded once.
    options_json: String,
}

impl std::fmt::Debug for AnthropicPassThrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicPassThrough")
            .field("engine", &self.engine.name())
            .field("messages", &self.messages.url())
            .field("has_key", &self.has_key)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl AnthropicPassThrough {
    /// A pass-through to `messages` (`…/v1/messages`), with `api_key` sent as `x-api-key` (or
    /// the clients' own credentials without one), every request's model replaced by `model`,
    /// requests and streams through `engine`.
    ///
    /// # Errors
    /// The key cannot be sent in a header.
    pub fn new(
        engine: Arc<dyn Engine>,
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
        let model = model.filter(|m| !m.is_empty());
        let options_json = encode_options(&AnthropicOptions {
            model: model.clone(),
        })
        .map_err(|e| e.to_string())?;
        Ok(Self {
            engine,
            count_tokens: messages.at(count_url),
            messages,
            has_key: key.is_some(),
            model,
            options_json,
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
        // Anthropic refuses a request without a version; curl and other hand-written
        // clients often omit it.
        if !out.contains_key("anthropic-version") {
            out.insert(
                "anthropic-version",
                HeaderValue::from_static(DEFAULT_ANTHROPIC_VERSION),
            );
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

    /// The request to send (the core's `anthropic` dialect): the client's bytes, unless the
    /// model or the history had to change.
    fn prepare(&self, body: &[u8]) -> Result<ConvertedRequest, BridgeError> {
        let prepared = self
            .engine
            .prepare(Dialect::Anthropic, body, &self.options_json)?;
        log_warnings(&prepared.warnings);
        Ok(prepared)
    }

    async fn send(
        &self,
        upstream: &Upstream,
        call: &Call,
        prepared: ConvertedRequest,
    ) -> Result<Answer, BridgeError> {
        let headers = self.forwarded_headers(&call.headers);
        let body = Bytes::from(prepared.body);
        let response = upstream.post(body, call.query.as_deref(), &headers).await?;
        let status = response.status().as_u16();
        let is_sse = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if is_sse {
            let session = self.engine.translator(&StreamOptions {
                stream: true,
                model: prepared.client_model,
                input_tokens_estimate: prepared.input_tokens_estimate,
                id_seed: crate::ids::seed(),
                dialect: Dialect::Anthropic,
                ..StreamOptions::default()
            })?;
            return Ok(Answer::Stream {
                client_stream: true,
                source: Box::new(TranslatedSource::new(session, response.into_body())),
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
    fn requires_max_tokens(&self) -> bool {
        true
    }

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
            let prepared = self.prepare(&call.body)?;
            // Before the first token: at debug (the request's `request done` line names the target).
            debug!(
                upstream = %self.messages.url(),
                model = %prepared.client_model,
                upstream_model = %prepared.upstream_model,
                credentials = if self.has_key { "provider key" } else { "client's" },
                "forwarding to Anthropic"
            );
            self.send(&self.messages, &call, prepared).await
        })
    }

    fn count_tokens(&self, call: Call) -> BoxFuture<'_, Option<Result<Answer, BridgeError>>> {
        Box::pin(async move {
            let prepared = match self.prepare(&call.body) {
                Ok(prepared) => prepared,
                Err(e) => return Some(Err(e)),
            };
            Some(self.send(&self.count_tokens, &call, prepared).await)
        })
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
        AnthropicPassThrough::new(crate::engine::native(), upstream, key, None)
            .unwrap_or_else(|e| panic!("{e}"))
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
