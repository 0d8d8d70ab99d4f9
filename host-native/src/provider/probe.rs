//! Asking an HTTP upstream for its models list (`GET {base_url}/models`, Anthropic's
//! `/v1/models`): what `claude-bridge doctor` and the start-up check read, and what a
//! provider's `health_check` probe does every N seconds.

/// How a probe failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// The URL could not be made from the base URL.
    #[error("{0}")]
    Url(String),
    /// Nothing answered.
    #[error("cannot reach {url}: {why}")]
    Unreachable {
        /// The models URL.
        url: String,
        /// Why (with its causes).
        why: String,
    },
    /// It answered with an error status.
    #[error("GET {path} answered {status}: {said}")]
    Status {
        /// The path asked for.
        path: String,
        /// The status.
        status: u16,
        /// What the upstream said.
        said: String,
    },
}

/// `GET {base_url}/{path}` with the key (a bearer token, or Anthropic's `x-api-key`): the body
/// of a 2xx answer.
///
/// # Errors
/// [`ProbeError`]: no URL, no answer, an error status.
pub async fn get_models(
    http: &reqwest::Client,
    base_url: &str,
    path: &str,
    key: Option<&str>,
    anthropic: bool,
) -> Result<String, ProbeError> {
    let url = super::upstream::join_url(base_url, path).map_err(ProbeError::Url)?;
    let mut request = http.get(&url);
    if let Some(key) = key {
        request = if anthropic {
            request
                .header("x-api-key", key)
                .header("anthropic-version", "2023-06-01")
        } else {
            request.bearer_auth(key)
        };
    }
    let response = request.send().await.map_err(|e| ProbeError::Unreachable {
        url: url.clone(),
        why: crate::error::with_causes(&e),
    })?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(ProbeError::Status {
            path: path.to_owned(),
            status: status.as_u16(),
            said: super::upstream::upstream_error_message(body.as_bytes()),
        });
    }
    Ok(body)
}
