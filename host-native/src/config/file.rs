//! The file as serde reads it, typed, with spans where a later check needs a place. Which keys
//! each kind takes is checked before this (`super::validate`), so a key of another kind is
//! refused with the kind's own list; a provider table is then read as a [`ProviderRaw`] (the
//! keys of the HTTP kinds) and, for kind `fabstir`, also as
//! [`super::types::FabstirSettings`].
//!
//! Why not a serde enum tagged by `kind`: serde buffers an internally tagged enum's fields
//! before choosing the variant, which loses toml's spans (errors would point at the table's
//! header, and `Spanned` fields fail to deserialize).

use std::collections::BTreeMap;
use std::path::PathBuf;

use bridge_core::route::RouterConfig;
use serde::Deserialize;
use toml::Spanned;

use crate::cli::Provider as Kind;
use crate::cli::{DocumentsChoice, WebSearchChoice};

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRaw {
    /// `listen = "127.0.0.1:3456"`.
    pub listen: Option<Spanned<String>>,
    /// `client_key`: a literal or `env:NAME`.
    pub client_key: Option<Spanned<String>>,
    /// `[providers.NAME]` tables.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderRaw>,
    /// `[router]`.
    pub router: Option<RouterConfig>,
    /// `[search]`: the web search backend.
    pub search: Option<SearchRaw>,
    /// `[fetch]`: the bridge's web fetch.
    pub fetch: Option<FetchRaw>,
    /// `admin_key`: a literal or `env:NAME`.
    pub admin_key: Option<Spanned<String>>,
    /// `[store]`: the gateway's store.
    pub store: Option<StoreRaw>,
    /// `[[keys]]`: the gateway's keys.
    #[serde(default)]
    pub keys: Vec<crate::gateway::keys::KeySpec>,
}

/// The `[store]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreRaw {
    /// `sqlite://PATH` or `postgres://…`, or `env:NAME`.
    pub url: Option<Spanned<String>>,
    /// `open` (serve, spool records) or `closed` (refuse with 503).
    pub on_error: Option<Spanned<String>>,
}

/// The `[fetch]` table (`--fetch-allow-private`).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchRaw {
    /// Loopback and private addresses may be fetched.
    #[serde(default)]
    pub allow_private: bool,
}

/// The `[search]` table (`--search`, `--search-url`, `--search-api-key`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRaw {
    /// `searxng`, `brave` or `tavily`.
    pub kind: crate::cli::SearchKind,
    /// The backend's address.
    pub base_url: Option<Spanned<String>>,
    /// The backend's key: a literal or `env:NAME`.
    pub api_key: Option<Spanned<String>>,
}

/// One `[providers.NAME]` table: the keys are the serve flags' names with `_` for `-`. The
/// Fabstir keys are read separately; which keys a kind takes was checked before.
#[derive(Debug, Deserialize)]
pub struct ProviderRaw {
    /// `openai`, `responses`, `anthropic` or `fabstir`.
    pub kind: Kind,
    /// Listed by `GET /v1/models`.
    #[serde(default)]
    pub models: Vec<Spanned<String>>,
    /// `--ca-cert`.
    pub ca_cert: Option<PathBuf>,
    /// `--connect-timeout` (seconds).
    pub connect_timeout: Option<u64>,
    /// `--first-byte-timeout` (seconds).
    pub first_byte_timeout: Option<u64>,
    /// Times a failed request is sent to this provider again before the next target.
    pub retries: Option<u32>,
    /// Its share in the pools it is in (default 1).
    pub weight: Option<u32>,
    /// Requests in flight on it at most.
    pub max_parallel: Option<u32>,
    /// Requests a minute to it at most.
    pub rpm: Option<u32>,
    /// Tokens (input + output) a minute to it at most.
    pub tpm: Option<u64>,
    /// Seconds a request waits for room on it before going elsewhere (default 10).
    pub queue_timeout: Option<u64>,
    /// Seconds between active health probes (none by default).
    pub health_check: Option<u64>,
    /// `--idle-timeout` (seconds).
    pub idle_timeout: Option<u64>,
    /// `--base-url`.
    pub base_url: Option<Spanned<String>>,
    /// `--api-key`: a literal or `env:NAME`.
    pub api_key: Option<Spanned<String>>,
    /// Extra request headers; values are literals or `env:NAME`.
    #[serde(default)]
    pub headers: BTreeMap<String, Spanned<String>>,
    /// `--max-tokens-cap`.
    pub max_tokens_cap: Option<u64>,
    /// `--max-completion-tokens`.
    pub max_completion_tokens: Option<bool>,
    /// `--strict-schemas`.
    pub strict_schemas: Option<bool>,
    /// `--reasoning-effort` (openai: a switch) or the Responses effort (responses: a level).
    pub reasoning_effort: Option<Spanned<Effort>>,
    /// `--no-reasoning-passback`.
    pub no_reasoning_passback: Option<bool>,
    /// `--keep-mid-conversation-system`.
    pub keep_mid_conversation_system: Option<bool>,
    /// `--continuous-usage-stats`.
    pub continuous_usage_stats: Option<bool>,
    /// `--documents`.
    pub documents: Option<DocumentsChoice>,
    /// `--web-search`.
    pub web_search: Option<WebSearchChoice>,
    /// `--tokenizer` (a relative path starts from the config file's directory).
    pub tokenizer: Option<String>,
    /// `[providers.NAME.defaults]`: request parameters used when the client sends none.
    pub defaults: Option<DefaultsRaw>,
    /// `[providers.NAME.prices]`: US dollars per million tokens, every model.
    pub prices: Option<crate::gateway::prices::Price>,
    /// `[providers.NAME.model_prices."MODEL"]`: one model's prices.
    #[serde(default)]
    pub model_prices: BTreeMap<String, crate::gateway::prices::Price>,
}

/// `[providers.NAME.defaults]`: Messages API request parameters for requests that lack them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultsRaw {
    /// `temperature`.
    pub temperature: Option<Spanned<f64>>,
    /// `top_p`.
    pub top_p: Option<Spanned<f64>>,
    /// `top_k`.
    pub top_k: Option<u64>,
    /// `max_tokens`.
    pub max_tokens: Option<u64>,
    /// `stop_sequences`.
    pub stop_sequences: Option<Vec<String>>,
    /// `output_config.effort`: `low`, `medium`, `high` or `max`.
    pub effort: Option<Spanned<String>>,
    /// `thinking = {type = "enabled", budget_tokens = N}` when the client sends no `thinking`.
    pub thinking_budget: Option<u64>,
}

/// `reasoning_effort`: `true`/`false` (openai) or an effort name (responses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effort {
    /// `true` / `false`.
    Switch(bool),
    /// `"high"`, `"off"`, …
    Level(String),
}

impl<'de> Deserialize<'de> for Effort {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Effort;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("true or false (kind openai), or an effort name (kind responses)")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Effort, E> {
                Ok(Effort::Switch(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Effort, E> {
                Ok(Effort::Level(v.to_owned()))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}
