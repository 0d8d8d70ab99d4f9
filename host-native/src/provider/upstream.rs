//! The HTTP(S) client every HTTP provider shares: one pool per provider, timeouts, and upstream
//! error statuses mapped to Anthropic errors (with `retry-after` kept).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use bridge_core::anthropic::events::ErrorKind;

use crate::error::BridgeError;

/// Largest upstream error body read (the rest is ignored).
const MAX_ERROR_BODY: usize = 64 * 1024;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// A configured upstream endpoint.
#[derive(Debug, Clone)]
pub struct Upstream {
    client: Client<Connector, Full<Bytes>>,
    /// The same connector without a pool: a request whose pooled connection turned out to be
    /// closed is sent again on a fresh one.
    fresh: Client<Connector, Full<Bytes>>,
    url: String,
    /// Sent with every request (e.g. the provider's key); marked sensitive.
    headers: HeaderMap,
    first_byte_timeout: Duration,
    /// Where a successful answer that says a rate budget is spent is noted (the router's view
    /// of this provider), when there is one.
    free_at: Option<std::sync::Arc<super::rate_limit::FreeAt>>,
}

/// `base` with `endpoint` joined to its path (unless the path already ends with it), its query
/// string kept: `…/deployments/d1?api-version=1` + `chat/completions` →
/// `…/deployments/d1/chat/completions?api-version=1`.
///
/// # Errors
/// Not an `http://` or `https://` URL.
pub fn join_url(base: &str, endpoint: &str) -> Result<String, String> {
    let (path, query) = match base.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (base, None),
    };
    let path = path.trim_end_matches('/');
    let endpoint = endpoint.trim_start_matches('/');
    let mut url = if path.ends_with(&format!("/{endpoint}")) {
        path.to_owned()
    } else {
        format!("{path}/{endpoint}")
    };
    if let Some(query) = query.filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(query);
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("invalid --base-url {base:?}: {e}"))?;
    match uri.scheme_str() {
        Some("http" | "https") => Ok(url),
        _ => Err(format!(
            "invalid --base-url {base:?}: use http:// or https://"
        )),
    }
}

impl Upstream {
    /// An upstream at `base_url` joined with `endpoint` (see [`join_url`]), authorised with
    /// `Authorization: Bearer api_key` when a key is given (see [`Upstream::with_header`]).
    ///
    /// # Errors
    /// The URL or the API key cannot be used.
    pub fn new(
        base_url: &str,
        endpoint: &str,
        api_key: Option<&str>,
        ca_cert: Option<&std::path::Path>,
        connect_timeout: Duration,
        first_byte_timeout: Duration,
    ) -> Result<Self, String> {
        // `http://user:password@host/v1`: the userinfo is Basic auth (unless a key is given),
        // never part of the URL the bridge shows or logs.
        let (base_url, userinfo) = crate::redact::split_userinfo(base_url);
        let url = join_url(&base_url, endpoint)?;
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(connect_timeout));
        http.set_nodelay(true);
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(ca_cert)?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(1024)
            .build(connector.clone());
        let fresh = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        let upstream = Self {
            client,
            fresh,
            url,
            headers: HeaderMap::new(),
            first_byte_timeout,
            free_at: None,
        };
        match (api_key.filter(|k| !k.is_empty()), userinfo) {
            (Some(key), _) => {
                upstream.with_header(http::header::AUTHORIZATION, &format!("Bearer {key}"))
            }
            (None, Some((user, password))) => {
                use base64::Engine as _;
                let decode = crate::redact::percent_decode;
                let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
                    "{}:{}",
                    decode(&user),
                    decode(&password)
                ));
                upstream.with_header(http::header::AUTHORIZATION, &format!("Basic {credentials}"))
            }
            (None, None) => Ok(upstream),
        }
    }

    /// Send `name: value` with every request (marked sensitive: never logged).
    ///
    /// # Errors
    /// The value has characters a header cannot carry.
    pub fn with_header(mut self, name: HeaderName, value: &str) -> Result<Self, String> {
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            format!("the value for {name} contains characters not allowed in a header")
        })?;
        value.set_sensitive(true);
        self.headers.insert(name, value);
        Ok(self)
    }

    /// Note in `free_at` when a successful answer says a rate budget is spent.
    #[must_use]
    pub fn noting_rate_limits(
        mut self,
        free_at: Option<std::sync::Arc<super::rate_limit::FreeAt>>,
    ) -> Self {
        self.free_at = free_at;
        self
    }

    /// The same client and headers for another URL (a pass-through's `count_tokens`).
    #[must_use]
    pub fn at(&self, url: String) -> Self {
        Self {
            url,
            ..self.clone()
        }
    }

    /// The full URL requests go to.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// POST `body` (JSON) to this upstream's URL (with `query` appended when given), with
    /// `extra` headers and then the configured ones (which win); a 2xx response's body is
    /// returned unread.
    ///
    /// # Errors
    /// [`BridgeError`] for connection failures, timeouts and non-2xx answers.
    pub async fn post(
        &self,
        body: Bytes,
        query: Option<&str>,
        extra: &HeaderMap,
    ) -> Result<Response<Incoming>, BridgeError> {
        let url = match query.filter(|q| !q.is_empty()) {
            Some(q) if self.url.contains('?') => format!("{}&{q}", self.url),
            Some(q) => format!("{}?{q}", self.url),
            None => self.url.clone(),
        };
        let request = || {
            let mut request = Request::post(&url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(http::header::ACCEPT, "text/event-stream, application/json")
                .body(Full::new(body.clone()))
                .map_err(|e| BridgeError::Internal(e.to_string()))?;
            let headers = request.headers_mut();
            for (name, value) in extra {
                headers.insert(name, value.clone());
            }
            for (name, value) in &self.headers {
                headers.insert(name, value.clone());
            }
            Ok::<_, BridgeError>(request)
        };
        let sent = async {
            match self.client.request(request()?).await {
                // A pooled keep-alive connection the upstream closed as the request went out:
                // nothing was answered, so send it once more on a fresh connection.
                Err(e) if closed_before_answer(&e) => {
                    tracing::info!(error = %describe_client_error(&e), "pooled upstream connection was closed; retrying on a fresh one");
                    Ok(self.fresh.request(request()?).await)
                }
                other => Ok(other),
            }
        };
        let response = match tokio::time::timeout(self.first_byte_timeout, sent).await {
            Err(_) => {
                return Err(BridgeError::UpstreamTimeout {
                    url: self.url.clone(),
                    seconds: self.first_byte_timeout.as_secs(),
                });
            }
            Ok(Err(e)) => return Err(e),
            Ok(Ok(Err(e))) => {
                return Err(BridgeError::UpstreamConnect {
                    url: self.url.clone(),
                    reason: describe_client_error(&e),
                });
            }
            Ok(Ok(Ok(response))) => response,
        };
        let status = response.status();
        if status.is_success() {
            if let Some(free_at) = &self.free_at {
                let now = i64::try_from(crate::ids::unix_millis()).unwrap_or(i64::MAX);
                if let Some(wait) = super::rate_limit::spent_wait(response.headers(), now) {
                    free_at.set(std::time::Instant::now() + wait);
                }
            }
            return Ok(response);
        }
        // A 429 without `retry-after` may still say when it resets (x-ratelimit-reset-*,
        // anthropic-ratelimit-*-reset): that is its retry-after, for the pool and the client.
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .cloned()
            .or_else(|| {
                let now = i64::try_from(crate::ids::unix_millis()).unwrap_or(i64::MAX);
                (status.as_u16() == 429)
                    .then(|| super::rate_limit::reset_wait(response.headers(), now))
                    .flatten()
                    .and_then(|wait| {
                        let seconds = wait.as_millis().div_ceil(1000).max(1);
                        http::HeaderValue::from_str(&seconds.to_string()).ok()
                    })
            });
        let bytes = match Limited::new(response.into_body(), MAX_ERROR_BODY)
            .collect()
            .await
        {
            Ok(collected) => collected.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let detail = crate::redact::redact(&upstream_error_message(&bytes)).into_owned();
        // `max_tokens` above what the model can write: not a full context (compacting would not
        // help). The OpenAI providers send the request once more with the limit.
        if let Some(limit) = bridge_core::anthropic::overflow::max_tokens_limit(&detail) {
            return Err(BridgeError::UpstreamStatus {
                kind: ErrorKind::InvalidRequest,
                status: status.as_u16(),
                message: format!(
                    "upstream answered {}: {detail} — the model writes at most {limit} output tokens (max_tokens)",
                    status.as_u16()
                ),
                retry_after,
            });
        }
        // A full context becomes Anthropic's "prompt is too long", which Claude Code answers by
        // compacting the conversation.
        if let Some(overflow) = context_overflow(&bytes, &detail) {
            return Err(BridgeError::UpstreamStatus {
                kind: ErrorKind::InvalidRequest,
                status: status.as_u16(),
                message: overflow.message(&detail),
                retry_after,
            });
        }
        // The upstream refused the bridge's own key: that is not the client's key being wrong
        // (Claude Code would ask its user to log in again), and no retry will fix it.
        let own_key = self.headers.contains_key(http::header::AUTHORIZATION)
            || self.headers.contains_key("x-api-key");
        if own_key && matches!(status.as_u16(), 401 | 403) {
            return Err(BridgeError::UpstreamStatus {
                kind: ErrorKind::Api,
                status: status.as_u16(),
                message: format!(
                    "the upstream at {} refused the bridge's key ({}): {detail} — check the provider's key (--api-key, or api_key in the config file)",
                    self.url,
                    status.as_u16()
                ),
                retry_after,
            });
        }
        // A 404 is a model the upstream does not have (or a wrong URL). Claude Code shows its
        // own "issue with the selected model" for not_found_error and drops the upstream's
        // words; as an invalid request it shows them, with the fix.
        if status.as_u16() == 404 {
            return Err(BridgeError::UpstreamStatus {
                kind: ErrorKind::InvalidRequest,
                status: 404,
                message: format!(
                    "the upstream at {} answered 404: {detail} — choose a model it serves (--model, a route in the config file, or ANTHROPIC_MODEL for Claude Code), or check --base-url",
                    self.url
                ),
                retry_after,
            });
        }
        Err(BridgeError::UpstreamStatus {
            kind: ErrorKind::from_upstream_status(status.as_u16()),
            status: status.as_u16(),
            message: format!("upstream answered {}: {detail}", status.as_u16()),
            retry_after,
        })
    }
}

/// Web PKI roots, plus the certificates of `ca_cert` (PEM) for self-signed or private upstreams.
///
/// # Errors
/// The file cannot be read or holds no certificate.
pub fn tls_config(ca_cert: Option<&std::path::Path>) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_cert {
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("--ca-cert {}: {e}", path.display()))?;
        let mut added = 0;
        for cert in certs {
            let cert = cert.map_err(|e| format!("--ca-cert {}: {e}", path.display()))?;
            roots
                .add(cert)
                .map_err(|e| format!("--ca-cert {}: {e}", path.display()))?;
            added += 1;
        }
        if added == 0 {
            return Err(format!(
                "--ca-cert {}: no PEM certificate in the file",
                path.display()
            ));
        }
    }
    Ok(rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Whether an upstream's error body says the prompt does not fit the model's context (with the
/// numbers, when its error object carries them: `code`/`type`, llama.cpp's `n_prompt_tokens`).
fn context_overflow(
    body: &[u8],
    detail: &str,
) -> Option<bridge_core::anthropic::overflow::ContextOverflow> {
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let error = value
        .get("error")
        .filter(|e| e.is_object())
        .unwrap_or(&value);
    let code = [error.get("code"), error.get("type")]
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    bridge_core::anthropic::overflow::recognise(detail, Some(&code), Some(error))
}

/// Whether a request failed because its (pooled) connection was closed before any answer came:
/// the keep-alive race, where the upstream closes an idle connection just as a request is sent
/// on it. Connect failures are not this (a fresh connection would fail the same way).
fn closed_before_answer(e: &hyper_util::client::legacy::Error) -> bool {
    if e.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        if let Some(hyper) = inner.downcast_ref::<hyper::Error>()
            && (hyper.is_incomplete_message() || hyper.is_canceled())
        {
            return true;
        }
        if let Some(io) = inner.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            )
        {
            return true;
        }
        source = inner.source();
    }
    false
}

fn describe_client_error(e: &hyper_util::client::legacy::Error) -> String {
    let mut text = crate::error::with_causes(e);
    if e.is_connect() {
        text.push_str(" (is the upstream server running and is --base-url right?)");
    }
    text
}

/// The message of an OpenAI-style error body (`{"error":{"message"}}`, `{"error":"…"}`,
/// `{"message"}`, `{"detail"}`), or its text.
#[must_use]
pub fn upstream_error_message(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        let candidates = [
            value.pointer("/error/message"),
            value.get("error").filter(|e| e.is_string()),
            value.get("message"),
            value.get("detail"),
        ];
        for candidate in candidates.into_iter().flatten() {
            if let Some(text) = candidate.as_str() {
                return text.to_owned();
            }
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        String::from("(empty body)")
    } else {
        text.chars().take(500).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages() {
        assert_eq!(
            upstream_error_message(br#"{"error":{"message":"bad model","type":"x"}}"#),
            "bad model"
        );
        assert_eq!(upstream_error_message(br#"{"error":"nope"}"#), "nope");
        assert_eq!(
            upstream_error_message(b"  Internal Server Error "),
            "Internal Server Error"
        );
        assert_eq!(upstream_error_message(b""), "(empty body)");
    }

    #[test]
    fn url_building() {
        assert_eq!(
            join_url(
                "https://x.openai.azure.com/openai/deployments/d1?api-version=2024-10-21",
                "chat/completions"
            )
            .unwrap(),
            "https://x.openai.azure.com/openai/deployments/d1/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(
            join_url("http://h/v1/chat/completions/", "chat/completions").unwrap(),
            "http://h/v1/chat/completions"
        );
        assert_eq!(
            join_url("https://api.anthropic.com", "v1/messages").unwrap(),
            "https://api.anthropic.com/v1/messages"
        );
        let u = Upstream::new(
            "http://127.0.0.1:1/v1/",
            "chat/completions",
            None,
            None,
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(u.url(), "http://127.0.0.1:1/v1/chat/completions");
        assert!(
            Upstream::new(
                "ftp://x",
                "chat/completions",
                None,
                None,
                Duration::from_secs(1),
                Duration::from_secs(1)
            )
            .is_err()
        );
    }
}
