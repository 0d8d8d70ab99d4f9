//! The config file, `claude-bridge.toml` (DESIGN §5, "Stable config contract"): one table per
//! provider, and a `[router]` saying which provider and model serve each request.
//!
//! ```toml
//! listen = "127.0.0.1:3456"             # optional; --listen wins
//! client_key = "env:BRIDGE_CLIENT_KEY"  # a literal or "env:NAME" (every secret field accepts both)
//!
//! [providers.local]                     # the key is the provider's name
//! kind = "openai"                       # openai | responses | anthropic | fabstir
//! base_url = "http://127.0.0.1:11434/v1"
//! models = ["qwen3-coder"]
//!
//! [router]
//! default = "local,qwen3-coder"         # "provider,model", or "provider" to forward the client's model
//! ```
//!
//! Per-provider keys are the serve flags' names with `_` for `-` (`max_tokens_cap`,
//! `strict_schemas`, `ca_cert`, the timeouts, the Fabstir flags…) plus `headers = { … }`; each
//! kind takes only its own, so a typo or a key of another kind is an error. Every error names
//! the file, the line and column, the key, and what is allowed:
//! ``claude-bridge.toml:7:8: providers.local.kind: unknown kind `olama`; allowed: openai, responses, anthropic, fabstir``.
//!
//! - [`locate`]: where the file is ([`find`]) and the environment it reads ([`Env`]).
//! - `document`: the parsed TOML and its spans (byte ranges ↔ dotted keys).
//! - `file`: the serde structs of the file.
//! - `validate`: the checks serde cannot make, giving the checked [`Config`] ([`types`]).
//! - [`secret`]: literal or `env:NAME` secrets, never printed.
//! - [`error`]: [`ConfigError`], what every failure says.
//! - [`watch`]: notice when the file changes (for hot reload).

mod document;
pub mod error;
mod file;
pub mod locate;
pub mod secret;
pub mod shown;
pub mod types;
mod validate;
pub mod watch;

use std::path::Path;

pub use error::{ConfigError, Position};
pub use locate::{Env, Located, Origin, find};
pub use types::{
    ChatSettings, Config, DEFAULT_QUEUE_TIMEOUT, FabstirSettings, HttpUpstream, Provider,
    ProviderKind, ResponsesSettings, Timeouts, UpstreamLimits,
};

use document::Document;

/// Anthropic's API, the default `base_url` of an `anthropic` provider (`/v1/messages` is appended).
pub const ANTHROPIC_API_URL: &str = "https://api.anthropic.com";

/// OpenAI's API, the default `base_url` of a `responses` provider.
pub const OPENAI_API_URL: &str = "https://api.openai.com/v1";

impl Config {
    /// Read and check the file at `path` (relative paths against `env`'s working directory).
    ///
    /// # Errors
    /// The file cannot be read, or [`Config::parse`] refuses it.
    pub fn load(path: &Path, env: &Env) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(env.absolute(path)).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            position: None,
            key: None,
            message: format!("cannot read the config file: {e}"),
        })?;
        let mut config = Self::parse(&text, path, env)?;
        config.shown = shown::masked(&text);
        Ok(config)
    }

    /// Check a config file's text. `path` names the file in messages, and its directory is
    /// where relative paths in the file (`ca_cert`, `ledger`, `private_key_file`) start from.
    ///
    /// # Errors
    /// The first problem, with its file, line, column and key.
    pub fn parse(text: &str, path: &Path, env: &Env) -> Result<Self, ConfigError> {
        let doc = Document::parse(text, path)?;
        validate::check_kinds(&doc)?;
        let raw: file::FileRaw = doc.deserialize(&[])?;
        let dir = env.absolute(path.parent().unwrap_or(Path::new("")));
        validate::build(&doc, raw, env, &dir, path)
    }
}

#[cfg(test)]
mod tests;

/// The config file the arguments and environment name or the default places hold, read and
/// checked; its secrets are registered for redaction.
///
/// # Errors
/// The file does not parse or validate (the message names file, line and key).
pub fn load_config(args: &crate::cli::ServeArgs) -> Result<Option<Config>, String> {
    let env = Env::process().map_err(|e| e.to_string())?;
    let Some(located) = find(args.config.as_deref(), &env) else {
        return Ok(None);
    };
    let config = Config::load(&located.path, &env).map_err(|e| e.to_string())?;
    register_config_secrets(&config);
    Ok(Some(config))
}

fn register_config_secrets(config: &Config) {
    use secrecy::ExposeSecret;
    let search_key = config.search.as_ref().and_then(|s| s.api_key.as_ref());
    for key in config.client_key.iter().chain(search_key) {
        crate::redact::register(key.expose_secret());
    }
    for provider in config.providers.values() {
        let upstream = match &provider.kind {
            ProviderKind::Openai { upstream, .. }
            | ProviderKind::Responses { upstream, .. }
            | ProviderKind::Anthropic { upstream } => upstream,
            ProviderKind::Fabstir(_) => continue,
        };
        if let Some(key) = &upstream.api_key {
            crate::redact::register(key.expose_secret());
        }
        for value in upstream.headers.values() {
            crate::redact::register(value.expose_secret());
        }
    }
}
