//! A tiny HTTP/1 client with a deadline on everything, for raw requests to the bridge.
//!
//! Unlike a convenience client it keeps what a test needs to see: every header, the body as it came,
//! and whether the body ended cleanly or with a transport error (a dropped stream).

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::err;

/// A response read to its end (or to its failure).
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body bytes received.
    pub body: Vec<u8>,
    /// Set when the body did not end cleanly (connection dropped, bad chunking, …).
    pub body_error: Option<String>,
    /// Time from sending the request to the response headers.
    pub time_to_headers: Duration,
    /// Time from sending the request to the first body byte (if any).
    pub time_to_first_byte: Option<Duration>,
    /// Arrival of each body frame: time since the request was sent, body length after the frame.
    pub frames: Vec<(Duration, usize)>,
    /// Time from sending the request to the end of the body.
    pub total_time: Duration,
}

impl HttpResponse {
    /// First value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> crate::Result<Value> {
        serde_json::from_slice(&self.body).map_err(|e| {
            err(format!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            ))
        })
    }

    /// When the first occurrence of `needle` in the body had fully arrived.
    pub fn arrival_of(&self, needle: &str) -> Option<Duration> {
        let n = needle.as_bytes();
        let pos = self.body.windows(n.len().max(1)).position(|w| w == n)? + n.len();
        self.frames
            .iter()
            .find(|(_, len)| *len >= pos)
            .map(|(t, _)| *t)
    }

    /// Check that this is an error in Anthropic's envelope: a status in `statuses`, a non-empty
    /// `request-id` header, a JSON body `{"type":"error","error":{"type":error_type,"message":…}}`
    /// with a non-empty message. Returns `error`.
    pub fn anthropic_error(&self, statuses: &[u16], error_type: &str) -> crate::Result<Value> {
        if !statuses.contains(&self.status) {
            return Err(err(format!("status {} not in {statuses:?}", self.status)));
        }
        if self.header("request-id").is_none_or(str::is_empty) {
            return Err(err("error responses carry a request-id header"));
        }
        if !self
            .header("content-type")
            .unwrap_or_default()
            .contains("application/json")
        {
            return Err(err(format!(
                "JSON error body expected, content-type {:?}",
                self.header("content-type")
            )));
        }
        let body = self.json()?;
        let error = &body["error"];
        if body["type"] != "error" || error["type"] != error_type {
            return Err(err(format!(
                "expected {{\"type\":\"error\",\"error\":{{\"type\":{error_type:?}}}}}, got {body}"
            )));
        }
        if error["message"].as_str().is_none_or(str::is_empty) {
            return Err(err(format!("error without a message: {body}")));
        }
        Ok(error.clone())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Send a request and read the whole response; fails if it all takes longer than `timeout`.
pub async fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
    timeout: Duration,
) -> crate::Result<HttpResponse> {
    send_until(method, url, headers, body, timeout, None).await
}

/// Like [`send`], but once the body contains `stop_at` the client stops reading and closes the
/// connection (a client that goes away mid-stream).
pub async fn send_until(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
    timeout: Duration,
    stop_at: Option<&str>,
) -> crate::Result<HttpResponse> {
    let inner = send_inner(method, url, headers, body, stop_at, None);
    within(timeout, method, url, inner).await
}

async fn within(
    timeout: Duration,
    method: &str,
    url: &str,
    inner: impl Future<Output = crate::Result<HttpResponse>>,
) -> crate::Result<HttpResponse> {
    tokio::time::timeout(timeout, inner)
        .await
        .unwrap_or_else(|_| {
            Err(err(format!(
                "{method} {url}: no complete response within {timeout:?} (hang)"
            )))
        })
}

/// Like [`send`], and `first_byte` is told as soon as the first body byte arrives (for acting while a
/// stream is in flight); the response is still read to its end.
pub async fn send_notify_first_byte(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
    timeout: Duration,
    first_byte: oneshot::Sender<()>,
) -> crate::Result<HttpResponse> {
    let inner = send_inner(method, url, headers, body, None, Some(first_byte));
    within(timeout, method, url, inner).await
}

/// The headers an Anthropic client sends with a JSON body.
pub const MESSAGES_HEADERS: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("anthropic-version", "2023-06-01"),
    ("x-api-key", "sk-test"),
];

/// POST a JSON body with the headers an Anthropic client sends.
pub async fn post_messages(
    base_url: &str,
    body: &Value,
    timeout: Duration,
) -> crate::Result<HttpResponse> {
    let url = format!("{}/v1/messages", base_url.trim_end_matches('/'));
    send(
        "POST",
        &url,
        MESSAGES_HEADERS,
        Some(body.to_string().into_bytes()),
        timeout,
    )
    .await
}

async fn send_inner(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
    stop_at: Option<&str>,
    mut first_byte: Option<oneshot::Sender<()>>,
) -> crate::Result<HttpResponse> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| err(format!("only http:// URLs: {url}")))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let stream = TcpStream::connect(authority).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let conn_task = tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = Request::builder().method(method).uri(path);
    // The caller's own `host` (e.g. a name a DNS-rebinding page would send) replaces the default.
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req = req.header("host", authority);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    let start = Instant::now();
    let resp = sender.send_request(req).await?;
    let time_to_headers = start.elapsed();
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let mut body = resp.into_body();
    let mut out = Vec::new();
    let mut body_error = None;
    let mut time_to_first_byte = None;
    let mut frames = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => {
                if let Ok(data) = f.into_data() {
                    if time_to_first_byte.is_none() && !data.is_empty() {
                        time_to_first_byte = Some(start.elapsed());
                        if let Some(tx) = first_byte.take() {
                            let _ = tx.send(());
                        }
                    }
                    out.extend_from_slice(&data);
                    frames.push((start.elapsed(), out.len()));
                    if let Some(stop) = stop_at
                        && out.windows(stop.len().max(1)).any(|w| w == stop.as_bytes())
                    {
                        body_error = Some("stopped reading (client went away)".to_owned());
                        conn_task.abort();
                        break;
                    }
                }
            }
            Err(e) => {
                body_error = Some(e.to_string());
                break;
            }
        }
    }
    let total_time = start.elapsed();
    Ok(HttpResponse {
        status,
        headers,
        body: out,
        body_error,
        time_to_headers,
        time_to_first_byte,
        frames,
        total_time,
    })
}
