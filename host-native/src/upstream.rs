//! The OpenAI Chat Completions upstream: one pooled HTTP(S) client, timeouts, and upstream
//! error statuses mapped to Anthropic errors (with `retry-after` kept).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
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

/// A configured upstream.
#[derive(Debug, Clone)]
pub struct Upstream {
    client: Client<Connector, Full<Bytes>>,
    url: String,
    authorization: Option<HeaderValue>,
    first_byte_timeout: Duration,
}

impl Upstream {
    /// An upstream at `base_url` (`…/v1`; `/chat/completions` is appended unless present).
    ///
    /// # Errors
    /// The URL or the API key cannot be used.
    pub fn new(
        base_url: &str,
        api_key: Option<&str>,
        ca_cert: Option<&std::path::Path>,
        connect_timeout: Duration,
        first_byte_timeout: Duration,
    ) -> Result<Self, String> {
        let trimmed = base_url.trim_end_matches('/');
        let url = if trimmed.ends_with("/chat/completions") {
            trimmed.to_owned()
        } else {
            format!("{trimmed}/chat/completions")
        };
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("invalid --base-url {base_url:?}: {e}"))?;
        match uri.scheme_str() {
            Some("http" | "https") => {}
            _ => {
                return Err(format!(
                    "invalid --base-url {base_url:?}: use http:// or https://"
                ));
            }
        }
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
            .build(connector);
        let authorization = match api_key.filter(|k| !k.is_empty()) {
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                    String::from("the API key contains characters not allowed in a header")
                })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        Ok(Self {
            client,
            url,
            authorization,
            first_byte_timeout,
        })
    }

    /// The full chat completions URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Send a Chat Completions request; a 2xx response's body is returned unread.
    ///
    /// # Errors
    /// [`BridgeError`] for connection failures, timeouts and non-2xx answers.
    pub async fn chat(&self, body: String) -> Result<Response<Incoming>, BridgeError> {
        let mut request = Request::post(&self.url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "text/event-stream, application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| BridgeError::Internal(e.to_string()))?;
        if let Some(auth) = &self.authorization {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, auth.clone());
        }
        let response =
            match tokio::time::timeout(self.first_byte_timeout, self.client.request(request)).await
            {
                Err(_) => {
                    return Err(BridgeError::UpstreamTimeout {
                        url: self.url.clone(),
                        seconds: self.first_byte_timeout.as_secs(),
                    });
                }
                Ok(Err(e)) => {
                    return Err(BridgeError::UpstreamConnect {
                        url: self.url.clone(),
                        reason: describe_client_error(&e),
                    });
                }
                Ok(Ok(response)) => response,
            };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = response.headers().get(http::header::RETRY_AFTER).cloned();
        let bytes = match Limited::new(response.into_body(), MAX_ERROR_BODY)
            .collect()
            .await
        {
            Ok(collected) => collected.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let detail = upstream_error_message(&bytes);
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

fn describe_client_error(e: &hyper_util::client::legacy::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
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
        let u = Upstream::new(
            "http://127.0.0.1:1/v1/",
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
                None,
                None,
                Duration::from_secs(1),
                Duration::from_secs(1)
            )
            .is_err()
        );
    }
}
