//! How `claude-bridge statusline` and `claude-bridge top` read a bridge: the same `/ui/api/…`
//! the page reads, with a key, from the address Claude Code was given.

use std::time::Duration;

use serde_json::Value;

use crate::cli::DashboardClientArgs;

/// Where a bridge listens when nothing says otherwise (`serve`'s default `--listen`).
const DEFAULT_URL: &str = "http://127.0.0.1:3456";

/// A bridge to read from.
#[derive(Debug, Clone)]
pub struct BridgeClient {
    base: String,
    key: Option<String>,
    http: reqwest::Client,
}

impl BridgeClient {
    /// From the flags, else the variables Claude Code runs with (`ANTHROPIC_BASE_URL`,
    /// `ANTHROPIC_AUTH_TOKEN`, `ANTHROPIC_API_KEY`).
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(args: &DashboardClientArgs, timeout: Option<Duration>) -> Result<Self, String> {
        let base = args
            .url
            .clone()
            .filter(|u| !u.is_empty())
            .or_else(|| crate::environment::non_empty("ANTHROPIC_BASE_URL"))
            .unwrap_or_else(|| DEFAULT_URL.to_owned())
            .trim_end_matches('/')
            .to_owned();
        let key = args
            .key
            .clone()
            .filter(|k| !k.is_empty())
            .or_else(|| crate::environment::non_empty("ANTHROPIC_AUTH_TOKEN"))
            .or_else(|| crate::environment::non_empty("ANTHROPIC_API_KEY"));
        let mut builder = reqwest::Client::builder()
            .use_preconfigured_tls(crate::provider::upstream::tls_config(None)?);
        if let Some(timeout) = timeout {
            builder = builder.timeout(timeout);
        }
        let http = builder
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
        Ok(Self { base, key, http })
    }

    /// The bridge's address.
    #[must_use]
    pub fn base(&self) -> &str {
        &self.base
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.get(format!("{}{path}", self.base));
        match &self.key {
            Some(key) => request.header("x-api-key", key),
            None => request,
        }
    }

    /// `GET path` as JSON: `Ok(None)` for a 404, the error's message for another failure.
    ///
    /// # Errors
    /// Unreachable, or an error status (its message).
    pub async fn json(&self, path: &str) -> Result<Option<Value>, String> {
        let response = self.get(path).send().await.map_err(|e| {
            format!(
                "unreachable ({}): {}",
                self.base,
                crate::error::with_causes(&e)
            )
        })?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let message = body["error"]["message"].as_str().unwrap_or("");
            return Err(format!("{} {message}", status.as_u16()));
        }
        Ok(Some(body))
    }

    /// `GET /ui/api/live`: each request as it ends, sent on `tx` (ends when the stream does).
    ///
    /// # Errors
    /// Unreachable, or an error status.
    pub async fn live(&self, tx: tokio::sync::mpsc::Sender<super::Finished>) -> Result<(), String> {
        let mut response = self.get("/ui/api/live").send().await.map_err(|e| {
            format!(
                "unreachable ({}): {}",
                self.base,
                crate::error::with_causes(&e)
            )
        })?;
        if !response.status().is_success() {
            return Err(format!(
                "/ui/api/live answered {}",
                response.status().as_u16()
            ));
        }
        let mut buffer = String::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                if !event.starts_with("event: request") {
                    continue;
                }
                let data = event.lines().find_map(|l| l.strip_prefix("data: "));
                if let Some(finished) = data.and_then(|d| serde_json::from_str(d).ok())
                    && tx.send(finished).await.is_err()
                {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
