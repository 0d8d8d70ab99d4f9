//! The checked configuration: what the server is built from. Settings left out of the file are
//! `None` (the serve flag's default applies); secrets are [`SecretString`]s.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use bridge_core::route::RouterConfig;
use secrecy::SecretString;
use serde::Deserialize;

use crate::cli::{
    DocumentsChoice, PaymentChoice, SelectionChoice, ToolFormatChoice, WebSearchChoice,
};

/// A loaded, checked `claude-bridge.toml`.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from.
    pub file: PathBuf,
    /// `listen` (the `--listen` flag wins).
    pub listen: Option<SocketAddr>,
    /// `client_key`, resolved.
    pub client_key: Option<SecretString>,
    /// The providers by name (at least one).
    pub providers: BTreeMap<String, Provider>,
    /// `[router]`; every target names a provider above. Without a `[router]` table and with one
    /// provider, every request goes to it with the client's model name.
    pub router: RouterConfig,
    /// `[search]`, resolved.
    pub search: Option<Search>,
    /// `[fetch]`: the bridge's web fetch.
    pub fetch: super::file::FetchRaw,
    /// `admin_key`, `[store]`, `[[keys]]` and prices.
    pub gateway: crate::gateway::Settings,
    /// Whether the file has a `[store]` table (which turns the gateway on by itself).
    pub store_table: bool,
    /// The file's text with its secrets masked ([`super::shown`]; empty when parsed from a
    /// text, not loaded from a file).
    pub shown: String,
}

/// The `[search]` table: the web search backend.
#[derive(Debug, Clone)]
pub struct Search {
    /// Which backend.
    pub kind: crate::cli::SearchKind,
    /// Its address (checked to be an http(s) URL).
    pub base_url: Option<String>,
    /// Its key.
    pub api_key: Option<SecretString>,
}

/// One `[providers.NAME]` table.
#[derive(Debug, Clone)]
pub struct Provider {
    /// The kind and its settings.
    pub kind: ProviderKind,
    /// Models listed by `GET /v1/models`.
    pub models: Vec<String>,
    /// Extra trusted CA certificates (relative paths are relative to the config file).
    pub ca_cert: Option<PathBuf>,
    /// Seconds; `None`: the flags' defaults.
    pub timeouts: Timeouts,
    /// `retries`: how many times a failing request is sent to this provider again (with
    /// backoff, honouring `retry-after`) before the next target is tried.
    pub retries: u32,
    /// `weight`, `max_parallel`, `rpm`, `tpm`, `queue_timeout`: its share in pools and its own
    /// limits (enforced by `crate::server::upstreams`).
    pub limits: UpstreamLimits,
    /// `health_check`: probe it this often, so a dead pool member is skipped before a client's
    /// request finds out.
    pub health_check: Option<std::time::Duration>,
    /// `[providers.NAME.defaults]`: Messages API fields filled in when a request lacks them
    /// (see [`bridge_core::anthropic::defaults`]).
    pub defaults: serde_json::Map<String, serde_json::Value>,
}

/// Upstream timeouts in seconds (`connect_timeout`, `first_byte_timeout`, `idle_timeout`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP/TLS connection.
    pub connect: Option<u64>,
    /// Until the response headers.
    pub first_byte: Option<u64>,
    /// Silence allowed inside a stream.
    pub idle: Option<u64>,
}

/// The provider's protocol, with the settings only it takes.
#[derive(Debug, Clone)]
pub enum ProviderKind {
    /// OpenAI Chat Completions.
    Openai {
        /// Where and how to call it.
        upstream: HttpUpstream,
        /// Request conversion settings.
        options: ChatSettings,
    },
    /// The OpenAI Responses API.
    Responses {
        /// Where and how to call it.
        upstream: HttpUpstream,
        /// Request conversion settings.
        options: ResponsesSettings,
    },
    /// The Anthropic Messages API, passed through (without `api_key`, the client's credentials
    /// are forwarded).
    Anthropic {
        /// Where and how to call it.
        upstream: HttpUpstream,
    },
    /// Fabstir host nodes.
    Fabstir(Box<FabstirSettings>),
}

impl ProviderKind {
    /// `openai`, `responses`, `anthropic` or `fabstir`.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Openai { .. } => "openai",
            Self::Responses { .. } => "responses",
            Self::Anthropic { .. } => "anthropic",
            Self::Fabstir(_) => "fabstir",
        }
    }
}

/// An HTTP upstream: `base_url`, `api_key`, `headers`.
#[derive(Debug, Clone)]
pub struct HttpUpstream {
    /// `http://` or `https://` base URL.
    pub base_url: String,
    /// The upstream key, resolved.
    pub api_key: Option<SecretString>,
    /// Extra request headers (names checked; values resolved like secrets).
    pub headers: BTreeMap<String, SecretString>,
}

/// Settings of kind `openai` (the Chat converter's flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatSettings {
    /// `max_tokens_cap` (0 = no cap).
    pub max_tokens_cap: Option<u64>,
    /// `max_completion_tokens`.
    pub max_completion_tokens: Option<bool>,
    /// `strict_schemas`.
    pub strict_schemas: Option<bool>,
    /// `reasoning_effort` (map thinking to `reasoning_effort`).
    pub reasoning_effort: Option<bool>,
    /// `no_reasoning_passback`.
    pub no_reasoning_passback: Option<bool>,
    /// `keep_mid_conversation_system`.
    pub keep_mid_conversation_system: Option<bool>,
    /// `continuous_usage_stats`.
    pub continuous_usage_stats: Option<bool>,
    /// `documents`: what a PDF becomes (`None`: what the upstream is known to take).
    pub documents: Option<DocumentsChoice>,
    /// `web_search`: who searches (`None`: the upstream where it is known to).
    pub web_search: Option<WebSearchChoice>,
    /// `tokenizer` (paths resolved against the config file's directory).
    pub tokenizer: Option<String>,
}

/// Settings of kind `responses`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponsesSettings {
    /// `max_tokens_cap` (0 = no cap).
    pub max_tokens_cap: Option<u64>,
    /// `strict_schemas`.
    pub strict_schemas: Option<bool>,
    /// `reasoning_effort`: `None` follows the client; `off`, or an effort sent on every request.
    pub reasoning_effort: Option<String>,
    /// `web_search`: who searches (`None`: the upstream where it is known to).
    pub web_search: Option<WebSearchChoice>,
    /// `tokenizer` (paths resolved against the config file's directory).
    pub tokenizer: Option<String>,
}

/// Settings of kind `fabstir`: each field is the serve flag of the same name (`--host-url`, …;
/// see `cli::ServeArgs`). Relative paths are relative to the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct FabstirSettings {
    pub host_url: Option<String>,
    pub host_pubkey: Option<String>,
    pub job_id: Option<u64>,
    pub chain_id: Option<u64>,
    pub price_per_token: Option<u64>,
    pub private_key_file: Option<PathBuf>,
    pub rpc_url: Option<String>,
    pub host: Option<String>,
    pub payment: Option<PaymentChoice>,
    pub deposit: Option<String>,
    pub max_spend: Option<String>,
    pub selection: Option<SelectionChoice>,
    pub ledger: Option<PathBuf>,
    pub confirmations: Option<u64>,
    pub localhost_override: Option<String>,
    pub job_marketplace: Option<String>,
    pub node_registry: Option<String>,
    pub usdc: Option<String>,
    pub tool_format: Option<ToolFormatChoice>,
    pub max_tokens_cap: Option<u64>,
}

/// `queue_timeout` when the provider's table sets none (seconds).
pub const DEFAULT_QUEUE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// A provider's own limits (all optional but the weight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamLimits {
    /// Its share in its pools (at least 1).
    pub weight: u32,
    /// Requests in flight at most.
    pub max_parallel: Option<u32>,
    /// Requests a minute at most.
    pub rpm: Option<u32>,
    /// Tokens (input + output) a minute at most.
    pub tpm: Option<u64>,
    /// How long a request waits for room before it goes elsewhere.
    pub queue_timeout: std::time::Duration,
}

impl Default for UpstreamLimits {
    fn default() -> Self {
        Self {
            weight: 1,
            max_parallel: None,
            rpm: None,
            tpm: None,
            queue_timeout: DEFAULT_QUEUE_TIMEOUT,
        }
    }
}
