//! The web search backend the bridge runs `web_search` through for upstreams without a search
//! of their own (`[search]` in the config, or `--search`, `--search-url`, `--search-api-key`):
//!
//! - `searxng`: a SearXNG instance's JSON API, `GET {url}/search?q=…&format=json` (the
//!   instance must list `json` under `search.formats` in its `settings.yml`; it answers 403
//!   otherwise).
//! - `brave`: Brave's Web Search API, `GET {url}/res/v1/web/search` with `X-Subscription-Token`.
//! - `tavily`: Tavily's search API, `POST {url}/search` with `Authorization: Bearer`.
//!
//! The HTTP is here; reading the answers is the core's (`bridge_core::server_tools::search`).
//! A failure becomes the `error_code` Anthropic's web search uses (`too_many_requests`,
//! `unavailable`) and a message for the model that says what went wrong.

use std::time::Duration;

use bridge_core::server_tools::search::{
    MAX_HITS, SearchHit, filter_domains, parse_brave, parse_searxng, parse_tavily,
};
use bridge_core::server_tools::turn::{SearchCall, ToolFailure};
use tracing::{info, warn};

use crate::cli::SearchKind;

/// How long one search may take.
const SEARCH_TIMEOUT: Duration = Duration::from_secs(20);

/// Largest answer read from a backend.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// A configured search backend.
#[derive(Debug)]
pub struct SearchBackend {
    kind: SearchKind,
    base: reqwest::Url,
    api_key: Option<String>,
    http: reqwest::Client,
}

/// The message the model (and so the user) gets when no backend is configured.
pub const NOT_CONFIGURED: &str = "web search is unavailable: this claude-bridge has no search \
backend. Configure one with a [search] table in the config file (kind = \"searxng\" with \
base_url = \"http://…\", or kind = \"brave\" / \"tavily\" with api_key = \"env:NAME\"), or \
start it with --search searxng --search-url http://… (see docs/web-search.md)";

impl SearchBackend {
    /// The backend of `kind` at `base_url` (the backend's public address when `None`), with
    /// `api_key` (Brave and Tavily need one).
    ///
    /// # Errors
    /// The address does not parse, a key is missing, or the HTTP client cannot be built.
    pub fn new(
        kind: SearchKind,
        base_url: Option<&str>,
        api_key: Option<&str>,
        ca_cert: Option<&std::path::Path>,
    ) -> Result<Self, String> {
        let default = match kind {
            SearchKind::Searxng => None,
            SearchKind::Brave => Some("https://api.search.brave.com"),
            SearchKind::Tavily => Some("https://api.tavily.com"),
        };
        let Some(base) = base_url.filter(|u| !u.is_empty()).or(default) else {
            return Err(String::from(
                "--search searxng needs the instance's address: --search-url http://… (or base_url in [search])",
            ));
        };
        let api_key = api_key.filter(|k| !k.is_empty()).map(str::to_owned);
        if kind != SearchKind::Searxng && api_key.is_none() {
            return Err(format!(
                "--search {} needs an API key: --search-api-key (or api_key = \"env:NAME\" in [search])",
                kind.name()
            ));
        }
        let mut base = reqwest::Url::parse(base)
            .map_err(|e| format!("--search-url {base:?} is not a URL: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(format!("--search-url {base} must be http:// or https://"));
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .timeout(SEARCH_TIMEOUT)
            .use_preconfigured_tls(super::upstream::tls_config(ca_cert)?)
            .user_agent(concat!("claude-bridge/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the search client: {e}"))?;
        Ok(Self {
            kind,
            base,
            api_key,
            http,
        })
    }

    /// Where searches go (for logs; never a secret).
    #[must_use]
    pub fn describe(&self) -> String {
        format!(
            "{} at {}",
            self.kind.name(),
            crate::redact::split_userinfo(self.base.as_str()).0
        )
    }

    /// Run `call`: the results the client's domain limits let through.
    ///
    /// # Errors
    /// The backend refused, failed or timed out (the failure says which).
    pub async fn search(&self, call: &SearchCall) -> Result<Vec<SearchHit>, ToolFailure> {
        let request = self.request(call)?;
        let started = std::time::Instant::now();
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let body = read_limited(response)
            .await
            .map_err(|e| self.unreachable(&e))?;
        if !status.is_success() {
            return Err(self.refused(status.as_u16(), &body));
        }
        let hits = match self.kind {
            SearchKind::Searxng => parse_searxng(&body),
            SearchKind::Brave => parse_brave(&body),
            SearchKind::Tavily => parse_tavily(&body),
        }
        .map_err(|e| {
            warn!(backend = %self.describe(), error = %e, "the search backend's answer does not parse");
            ToolFailure {
                code: "unavailable",
                message: e.to_string(),
            }
        })?;
        let hits = filter_domains(hits, &call.tool.allowed_domains, &call.tool.blocked_domains);
        info!(
            backend = self.kind.name(),
            results = hits.len(),
            ms = started.elapsed().as_millis(),
            "web search"
        );
        Ok(hits)
    }

    fn request(&self, call: &SearchCall) -> Result<reqwest::RequestBuilder, ToolFailure> {
        let join = |path: &str| {
            self.base.join(path).map_err(|e| ToolFailure {
                code: "unavailable",
                message: format!("the search address does not join with {path:?}: {e}"),
            })
        };
        // Domain limits go to the backend in its own terms where it has them; the results
        // are filtered here as well.
        let site_query = || {
            let mut query = call.query.clone();
            if let [only] = call.tool.allowed_domains.as_slice() {
                query = format!("{query} site:{only}");
            }
            for blocked in &call.tool.blocked_domains {
                query = format!("{query} -site:{blocked}");
            }
            query
        };
        Ok(match self.kind {
            SearchKind::Searxng => {
                let mut url = join("search")?;
                url.query_pairs_mut()
                    .append_pair("q", &site_query())
                    .append_pair("format", "json");
                self.http.get(url)
            }
            SearchKind::Brave => {
                let mut url = join("res/v1/web/search")?;
                {
                    let mut pairs = url.query_pairs_mut();
                    pairs
                        .append_pair("q", &site_query())
                        .append_pair("count", &MAX_HITS.to_string())
                        .append_pair("text_decorations", "false");
                    if let Some(country) = &call.tool.country {
                        pairs.append_pair("country", &country.to_ascii_lowercase());
                    }
                }
                self.http
                    .get(url)
                    .header("accept", "application/json")
                    .header(
                        "x-subscription-token",
                        self.api_key.as_deref().unwrap_or_default(),
                    )
            }
            SearchKind::Tavily => {
                let mut body = serde_json::json!({
                    "query": call.query,
                    "max_results": MAX_HITS,
                    "search_depth": "basic",
                });
                if !call.tool.allowed_domains.is_empty() {
                    body["include_domains"] = serde_json::json!(call.tool.allowed_domains);
                }
                if !call.tool.blocked_domains.is_empty() {
                    body["exclude_domains"] = serde_json::json!(call.tool.blocked_domains);
                }
                self.http
                    .post(join("search")?)
                    .header("content-type", "application/json")
                    .bearer_auth(self.api_key.as_deref().unwrap_or_default())
                    .body(body.to_string())
            }
        })
    }

    fn unreachable(&self, error: &reqwest::Error) -> ToolFailure {
        let what = if error.is_timeout() {
            format!("did not answer within {} s", SEARCH_TIMEOUT.as_secs())
        } else {
            format!(
                "could not be reached: {}",
                crate::redact::redact(&error.to_string())
            )
        };
        warn!(backend = %self.describe(), "the search backend {what}");
        ToolFailure {
            code: "unavailable",
            message: format!("the search backend ({}) {what}", self.kind.name()),
        }
    }

    fn refused(&self, status: u16, body: &[u8]) -> ToolFailure {
        let said: String = String::from_utf8_lossy(body).chars().take(300).collect();
        let hint = match (self.kind, status) {
            (SearchKind::Searxng, 403) => {
                " (SearXNG answers 403 when its settings.yml does not list json under search.formats)"
            }
            (_, 401 | 403 | 422) => " (is the search API key right?)",
            _ => "",
        };
        warn!(backend = %self.describe(), status, body = %said, "the search backend refused the search{hint}");
        ToolFailure {
            code: if status == 429 || status == 432 || status == 433 {
                "too_many_requests"
            } else {
                "unavailable"
            },
            message: format!(
                "the search backend ({}) answered {status}{hint}: {}",
                self.kind.name(),
                crate::redact::redact(&said)
            ),
        }
    }
}

/// The body, up to [`MAX_ANSWER_BYTES`].
async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
