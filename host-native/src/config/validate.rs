//! The checks serde cannot make, each naming its key and what is allowed: which keys each kind
//! takes (before serde, on the parsed tree), then the meaning of the values (after): addresses,
//! URLs, secrets, header names, efforts, router targets naming configured providers.

use std::collections::BTreeMap;
use std::path::Path;

use bridge_core::route::{RouterConfig, RouterKey, Target};
use clap::ValueEnum;
use secrecy::{ExposeSecret, SecretString};
use toml::Spanned;
use toml::de::DeValue;

use super::document::{Document, Segment};
use super::error::ConfigError;
use super::file::{Effort, FileRaw, ProviderRaw, SearchRaw};
use super::locate::Env;
use super::secret;
use super::types::{
    ChatSettings, Config, FabstirSettings, HttpUpstream, Provider, ProviderKind, ResponsesSettings,
    Search, Timeouts,
};
use crate::cli::Provider as Kind;

/// Keys every kind takes.
const COMMON: &[&str] = &[
    "kind",
    "models",
    "ca_cert",
    "connect_timeout",
    "first_byte_timeout",
    "idle_timeout",
    "retries",
    "weight",
    "max_parallel",
    "rpm",
    "tpm",
    "queue_timeout",
    "health_check",
    "defaults",
    "prices",
    "model_prices",
];
/// Keys of the HTTP kinds (openai, responses, anthropic).
const HTTP: &[&str] = &["base_url", "api_key", "headers"];
const OPENAI: &[&str] = &[
    "max_tokens_cap",
    "max_completion_tokens",
    "strict_schemas",
    "reasoning_effort",
    "no_reasoning_passback",
    "keep_mid_conversation_system",
    "continuous_usage_stats",
    "documents",
    "web_search",
    "tokenizer",
];
const RESPONSES: &[&str] = &[
    "max_tokens_cap",
    "strict_schemas",
    "reasoning_effort",
    "web_search",
    "tokenizer",
];
const FABSTIR: &[&str] = &[
    "host_url",
    "host_pubkey",
    "job_id",
    "chain_id",
    "price_per_token",
    "private_key_file",
    "rpc_url",
    "host",
    "payment",
    "deposit",
    "max_spend",
    "selection",
    "ledger",
    "confirmations",
    "localhost_override",
    "job_marketplace",
    "node_registry",
    "usdc",
    "tool_format",
    "max_tokens_cap",
];

/// The keys a `[providers.NAME]` table of `kind` may hold.
#[must_use]
pub fn keys_of(kind: Kind) -> Vec<&'static str> {
    let own: &[&[&str]] = match kind {
        Kind::Openai => &[HTTP, OPENAI],
        Kind::Responses => &[HTTP, RESPONSES],
        Kind::Anthropic => &[HTTP],
        Kind::Fabstir => &[FABSTIR],
    };
    COMMON
        .iter()
        .chain(own.iter().flat_map(|keys| keys.iter()))
        .copied()
        .collect()
}

/// `openai`, `responses`, … as `--provider` and `kind` spell them.
#[must_use]
pub fn kind_name(kind: Kind) -> String {
    kind.to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

fn kind_names() -> String {
    Kind::value_variants()
        .iter()
        .map(|k| kind_name(*k))
        .collect::<Vec<_>>()
        .join(", ")
}

fn provider_path(name: &str) -> Vec<Segment> {
    vec!["providers".into(), name.into()]
}

fn key_path(name: &str, key: &str) -> Vec<Segment> {
    vec!["providers".into(), name.into(), key.into()]
}

/// Provider names must be reachable from a router target (`"name,model"`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Before serde: every provider has a known `kind`, holds only that kind's keys, and has a name
/// a router target can write.
///
/// # Errors
/// The first provider at fault, at its name, its `kind` or the key that does not belong.
pub fn check_kinds(doc: &Document<'_>) -> Result<(), ConfigError> {
    for (name, name_span) in doc.keys(&["providers".into()]) {
        let path = provider_path(&name);
        if !valid_name(&name) {
            return Err(doc.error(
                name_span,
                &path,
                "a provider name is letters, digits, '-', '_' and '.' (router targets write it before a comma)",
            ));
        }
        if !matches!(
            doc.value(&path).map(Spanned::get_ref),
            Some(DeValue::Table(_))
        ) {
            continue; // serde says what it should be
        }
        let kind_path = key_path(&name, "kind");
        let kind = match doc.value(&kind_path) {
            None => {
                return Err(
                    doc.error_at_key(&path, &format!("missing `kind`; allowed: {}", kind_names()))
                );
            }
            Some(value) => match value.get_ref() {
                DeValue::String(text) => Kind::from_str(text, false).map_err(|_| {
                    doc.error(
                        value.span(),
                        &kind_path,
                        &format!("unknown kind `{text}`; allowed: {}", kind_names()),
                    )
                })?,
                _ => {
                    return Err(doc.error(
                        value.span(),
                        &kind_path,
                        &format!("a kind is a string; allowed: {}", kind_names()),
                    ));
                }
            },
        };
        let allowed = keys_of(kind);
        for (key, span) in doc.keys(&path) {
            if allowed.contains(&key.as_str()) {
                continue;
            }
            let owners: Vec<String> = Kind::value_variants()
                .iter()
                .filter(|k| keys_of(**k).contains(&key.as_str()))
                .map(|k| kind_name(*k))
                .collect();
            let what = if owners.is_empty() {
                format!("unknown key `{key}`")
            } else {
                format!("`{key}` is a key of kind {}", owners.join(", "))
            };
            return Err(doc.error(
                span,
                &key_path(&name, &key),
                &format!(
                    "{what}; kind {} allows: {}",
                    kind_name(kind),
                    allowed.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// After serde: the checked [`Config`]. Relative paths are taken against `dir` (the config
/// file's directory).
///
/// # Errors
/// The first value at fault, at its place, naming its key and what is allowed.
pub fn build(
    doc: &Document<'_>,
    raw: FileRaw,
    env: &Env,
    dir: &Path,
    file: &Path,
) -> Result<Config, ConfigError> {
    let listen = match raw.listen {
        Some(listen) => Some(
            crate::cli::parse_listen(listen.get_ref())
                .map_err(|e| doc.error(listen.span(), &["listen".into()], &e))?,
        ),
        None => None,
    };
    let client_key = raw
        .client_key
        .map(|key| resolve(doc, &key, &["client_key".into()], env))
        .transpose()?;
    if raw.providers.is_empty() {
        return Err(doc.error_at_key(
            &["providers".into()],
            &format!(
                "no provider is configured: add a [providers.NAME] table with kind = one of {}",
                kind_names()
            ),
        ));
    }
    let raw_prices: Vec<_> = raw
        .providers
        .iter()
        .map(|(name, p)| (name.clone(), p.prices, p.model_prices.clone()))
        .collect();
    let mut providers = BTreeMap::new();
    for (name, provider_raw) in raw.providers {
        let provider = provider(doc, &name, provider_raw, env, dir)?;
        providers.insert(name, provider);
    }
    let names: Vec<&str> = providers.keys().map(String::as_str).collect();
    let router = match raw.router {
        Some(router) => {
            router
                .validate(&names)
                .map_err(|e| doc.error_at_key(&router_path(e.key), &e.message))?;
            router
        }
        None => match names.as_slice() {
            [only] => RouterConfig::new(Target::provider(*only)),
            _ => {
                return Err(doc.error_at_key(
                    &["router".into()],
                    &format!(
                        "no [router] table: with more than one provider, its `default = \"provider\"` (or \"provider,model\") says where requests go; providers: {}",
                        names.join(", ")
                    ),
                ));
            }
        },
    };
    let search = raw.search.map(|raw| search(doc, raw, env)).transpose()?;
    let store_table = raw.store.is_some();
    let gateway = gateway(doc, raw.admin_key, raw.store, raw.keys, &raw_prices, env)?;
    Ok(Config {
        file: file.to_path_buf(),
        listen,
        client_key,
        providers,
        router,
        search,
        fetch: raw.fetch.unwrap_or_default(),
        gateway,
        store_table,
        shown: String::new(),
    })
}

/// `admin_key`, `[store]`, `[[keys]]` and the providers' prices, checked.
fn gateway(
    doc: &Document<'_>,
    admin_key: Option<Spanned<String>>,
    store: Option<super::file::StoreRaw>,
    keys: Vec<crate::gateway::keys::KeySpec>,
    prices: &[(
        String,
        Option<crate::gateway::prices::Price>,
        BTreeMap<String, crate::gateway::prices::Price>,
    )],
    env: &Env,
) -> Result<crate::gateway::Settings, ConfigError> {
    use crate::gateway::keys::hash_secret;
    let admin_key = admin_key
        .map(|key| resolve(doc, &key, &["admin_key".into()], env))
        .transpose()?;
    let mut settings = crate::gateway::Settings {
        admin_key,
        ..crate::gateway::Settings::default()
    };
    if let Some(store) = store {
        if let Some(url) = &store.url {
            let at: Vec<Segment> = vec!["store".into(), "url".into()];
            let resolved = resolve(doc, url, &at, env)?;
            let url_text = resolved.expose_secret().to_owned();
            if !(url_text.starts_with("sqlite://")
                || url_text.starts_with("postgres://")
                || url_text.starts_with("postgresql://"))
            {
                return Err(doc.error(
                    url.span(),
                    &at,
                    "expected \"sqlite://PATH\" or \"postgres://USER@HOST/DB\" (or \"env:NAME\")",
                ));
            }
            settings.store_url = Some(url_text);
        }
        if let Some(on_error) = &store.on_error {
            settings.closed = match on_error.get_ref().as_str() {
                "open" => false,
                "closed" => true,
                _ => {
                    return Err(doc.error(
                        on_error.span(),
                        &["store".into(), "on_error".into()],
                        "expected \"open\" (serve when the store is down) or \"closed\" (refuse with 503)",
                    ));
                }
            };
        }
    }
    let mut names: Vec<String> = Vec::new();
    for (i, spec) in keys.into_iter().enumerate() {
        let at = |key: &str| -> Vec<Segment> { vec!["keys".into(), i.into(), key.into()] };
        let table: Vec<Segment> = vec!["keys".into(), i.into()];
        spec.check().map_err(|e| doc.error_at_key(&table, &e))?;
        if names.contains(&spec.name) {
            return Err(
                doc.error_at_key(&at("name"), &format!("a second key named `{}`", spec.name))
            );
        }
        names.push(spec.name.clone());
        let Some(secret) = spec.secret.as_deref() else {
            return Err(doc.error_at_key(
                &table,
                "missing `key`: the secret as a literal, \"env:NAME\", or \"sha256:<hex of the secret>\"",
            ));
        };
        let hash = match secret.strip_prefix("sha256:") {
            Some(hex) => {
                let hex = hex.trim().to_ascii_lowercase();
                if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(doc.error_at_key(
                        &at("key"),
                        "sha256: takes the 64 hex digits of the secret's SHA-256 (`printf %s KEY | sha256sum`)",
                    ));
                }
                hex
            }
            None => {
                let value = doc
                    .value(&at("key"))
                    .map(|v| Spanned::new(v.span(), secret.to_owned()));
                let resolved = match value {
                    Some(value) => resolve(doc, &value, &at("key"), env)?,
                    None => SecretString::from(secret.to_owned()),
                };
                crate::redact::register(resolved.expose_secret());
                hash_secret(resolved.expose_secret())
            }
        };
        if settings.keys.iter().any(|(h, _)| *h == hash) {
            return Err(doc.error_at_key(
                &at("key"),
                "the same secret as another key: every key needs its own",
            ));
        }
        settings.keys.push((
            hash,
            crate::gateway::keys::KeySpec {
                secret: None,
                ..spec
            },
        ));
    }
    for (provider, price, models) in prices {
        if let Some(price) = price {
            price
                .check()
                .map_err(|e| doc.error_at_key(&key_path(provider, "prices"), &e))?;
            settings.prices.provider(provider, *price);
        }
        for (model, price) in models {
            price.check().map_err(|e| {
                doc.error_at_key(
                    &[
                        Segment::from("providers"),
                        provider.as_str().into(),
                        "model_prices".into(),
                        model.as_str().into(),
                    ],
                    &e,
                )
            })?;
            settings.prices.model(provider, model, *price);
        }
    }
    Ok(settings)
}

/// `[search]`: the address parses, Brave and Tavily have a key, SearXNG an address.
fn search(doc: &Document<'_>, raw: SearchRaw, env: &Env) -> Result<Search, ConfigError> {
    let api_key = raw
        .api_key
        .as_ref()
        .map(|key| resolve(doc, key, &["search".into(), "api_key".into()], env))
        .transpose()?;
    let at = |key: &str| vec![Segment::from("search"), Segment::from(key)];
    let base_url = match &raw.base_url {
        Some(url) => {
            let parsed = reqwest::Url::parse(url.get_ref())
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"));
            if parsed.is_none() {
                return Err(doc.error(
                    url.span(),
                    &at("base_url"),
                    "expected an http:// or https:// address, e.g. \"http://127.0.0.1:8888\"",
                ));
            }
            Some(url.get_ref().clone())
        }
        None if raw.kind == crate::cli::SearchKind::Searxng => {
            return Err(doc.error_at_key(
                &["search".into()],
                "kind = \"searxng\" needs base_url, the instance's address (e.g. \"http://127.0.0.1:8888\")",
            ));
        }
        None => None,
    };
    if raw.kind != crate::cli::SearchKind::Searxng && api_key.is_none() {
        return Err(doc.error_at_key(
            &["search".into()],
            &format!(
                "kind = \"{}\" needs api_key (a literal or \"env:NAME\")",
                raw.kind.name()
            ),
        ));
    }
    Ok(Search {
        kind: raw.kind,
        base_url,
        api_key,
    })
}

/// Where a router key is in the file.
fn router_path(key: RouterKey) -> Vec<Segment> {
    let mut path: Vec<Segment> = vec!["router".into()];
    match key {
        RouterKey::Default => path.push("default".into()),
        RouterKey::Background => path.push("background".into()),
        RouterKey::Think => path.push("think".into()),
        RouterKey::LongContext => path.push("long_context".into()),
        RouterKey::Fallback(i) => path.extend(["fallback".into(), i.into()]),
        RouterKey::RuleModel(i) => path.extend(["rules".into(), i.into(), "model".into()]),
        RouterKey::RuleTo(i) => path.extend(["rules".into(), i.into(), "to".into()]),
    }
    path
}

fn resolve(
    doc: &Document<'_>,
    value: &Spanned<String>,
    path: &[Segment],
    env: &Env,
) -> Result<SecretString, ConfigError> {
    secret::resolve(value.get_ref(), env).map_err(|e| doc.error(value.span(), path, &e))
}

fn provider(
    doc: &Document<'_>,
    name: &str,
    raw: ProviderRaw,
    env: &Env,
    dir: &Path,
) -> Result<Provider, ConfigError> {
    let mut models = Vec::with_capacity(raw.models.len());
    for (i, model) in raw.models.iter().enumerate() {
        if model.get_ref().trim().is_empty() {
            let mut path = key_path(name, "models");
            path.push(i.into());
            return Err(doc.error(model.span(), &path, "an empty model name"));
        }
        models.push(model.get_ref().clone());
    }
    let defaults = match &raw.defaults {
        Some(d) => defaults(doc, name, d)?,
        None => serde_json::Map::new(),
    };
    let kind = match raw.kind {
        Kind::Openai => ProviderKind::Openai {
            upstream: http_upstream(doc, name, &raw, env, None)?,
            options: ChatSettings {
                max_tokens_cap: raw.max_tokens_cap,
                max_completion_tokens: raw.max_completion_tokens,
                strict_schemas: raw.strict_schemas,
                reasoning_effort: switch(doc, name, raw.reasoning_effort.as_ref())?,
                no_reasoning_passback: raw.no_reasoning_passback,
                keep_mid_conversation_system: raw.keep_mid_conversation_system,
                continuous_usage_stats: raw.continuous_usage_stats,
                documents: raw.documents,
                web_search: raw.web_search,
                tokenizer: tokenizer_path(dir, raw.tokenizer.as_deref()),
            },
        },
        Kind::Responses => ProviderKind::Responses {
            upstream: http_upstream(doc, name, &raw, env, Some(super::OPENAI_API_URL))?,
            options: ResponsesSettings {
                max_tokens_cap: raw.max_tokens_cap,
                strict_schemas: raw.strict_schemas,
                reasoning_effort: level(doc, name, raw.reasoning_effort.as_ref())?,
                web_search: raw.web_search,
                tokenizer: tokenizer_path(dir, raw.tokenizer.as_deref()),
            },
        },
        Kind::Anthropic => ProviderKind::Anthropic {
            upstream: http_upstream(doc, name, &raw, env, Some(super::ANTHROPIC_API_URL))?,
        },
        Kind::Fabstir => {
            let mut settings: FabstirSettings = doc.deserialize(&provider_path(name))?;
            for path in [&mut settings.private_key_file, &mut settings.ledger] {
                *path = path.take().map(|p| dir.join(p));
            }
            ProviderKind::Fabstir(Box::new(settings))
        }
    };
    let limits = upstream_limits(doc, name, &raw)?;
    Ok(Provider {
        kind,
        models,
        ca_cert: raw.ca_cert.map(|p| dir.join(p)),
        retries: raw.retries.unwrap_or(0),
        limits,
        health_check: raw.health_check.map(std::time::Duration::from_secs),
        defaults,
        timeouts: Timeouts {
            connect: raw.connect_timeout,
            first_byte: raw.first_byte_timeout,
            idle: raw.idle_timeout,
        },
    })
}

/// `weight`, `max_parallel`, `rpm`, `tpm`, `queue_timeout`, `health_check`: each at least 1.
fn upstream_limits(
    doc: &Document<'_>,
    name: &str,
    raw: &super::file::ProviderRaw,
) -> Result<crate::config::UpstreamLimits, ConfigError> {
    let counts = [
        ("weight", raw.weight.map(u64::from)),
        ("max_parallel", raw.max_parallel.map(u64::from)),
        ("rpm", raw.rpm.map(u64::from)),
        ("tpm", raw.tpm),
        ("queue_timeout", raw.queue_timeout),
        ("health_check", raw.health_check),
    ];
    for (key, value) in counts {
        if value == Some(0) {
            return Err(doc.error_at_key(
                &key_path(name, key),
                &format!("`{key}` must be at least 1 (leave it out for no limit)"),
            ));
        }
    }
    Ok(crate::config::UpstreamLimits {
        weight: raw.weight.unwrap_or(1),
        max_parallel: raw.max_parallel,
        rpm: raw.rpm,
        tpm: raw.tpm,
        queue_timeout: raw.queue_timeout.map_or(
            crate::config::DEFAULT_QUEUE_TIMEOUT,
            std::time::Duration::from_secs,
        ),
    })
}

/// `[providers.NAME.defaults]` as the Messages API fields they fill in.
fn defaults(
    doc: &Document<'_>,
    name: &str,
    raw: &super::file::DefaultsRaw,
) -> Result<serde_json::Map<String, serde_json::Value>, ConfigError> {
    use serde_json::json;
    let path = |key: &str| {
        let mut path = key_path(name, "defaults");
        path.push(key.into());
        path
    };
    let mut out = serde_json::Map::new();
    for (key, value) in [("temperature", &raw.temperature), ("top_p", &raw.top_p)] {
        if let Some(v) = value {
            let n = *v.get_ref();
            if !(n.is_finite() && n >= 0.0) {
                return Err(doc.error(v.span(), &path(key), "a number of at least 0"));
            }
            out.insert(key.to_owned(), json!(n));
        }
    }
    if let Some(k) = raw.top_k {
        out.insert(String::from("top_k"), json!(k));
    }
    if let Some(n) = raw.max_tokens {
        out.insert(String::from("max_tokens"), json!(n));
    }
    if let Some(stops) = &raw.stop_sequences {
        out.insert(String::from("stop_sequences"), json!(stops));
    }
    if let Some(effort) = &raw.effort {
        let level = effort.get_ref().as_str();
        if !matches!(level, "low" | "medium" | "high" | "max") {
            return Err(doc.error(
                effort.span(),
                &path("effort"),
                "one of \"low\", \"medium\", \"high\", \"max\"",
            ));
        }
        out.insert(String::from("output_config"), json!({ "effort": level }));
    }
    if let Some(budget) = raw.thinking_budget {
        out.insert(
            String::from("thinking"),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    Ok(out)
}

fn http_upstream(
    doc: &Document<'_>,
    name: &str,
    raw: &ProviderRaw,
    env: &Env,
    default_url: Option<&str>,
) -> Result<HttpUpstream, ConfigError> {
    let url = match (&raw.base_url, default_url) {
        (Some(base_url), _) => {
            let url = base_url.get_ref().trim();
            if !(url.starts_with("http://") || url.starts_with("https://"))
                || url.contains(char::is_whitespace)
            {
                return Err(doc.error(
                    base_url.span(),
                    &key_path(name, "base_url"),
                    &format!("`{url}` is not an http:// or https:// URL"),
                ));
            }
            url
        }
        (None, Some(default_url)) => default_url,
        (None, None) => {
            return Err(doc.error_at_key(
                &provider_path(name),
                "missing `base_url`: the upstream's URL, e.g. \"http://127.0.0.1:11434/v1\"",
            ));
        }
    };
    let api_key = raw
        .api_key
        .as_ref()
        .map(|key| resolve(doc, key, &key_path(name, "api_key"), env))
        .transpose()?;
    let mut headers = BTreeMap::new();
    for (header, value) in &raw.headers {
        let mut path = key_path(name, "headers");
        path.push(header.as_str().into());
        if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
            return Err(doc.error_at_key(
                &path,
                "not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)",
            ));
        }
        let resolved = resolve(doc, value, &path, env)?;
        if http::HeaderValue::from_str(resolved.expose_secret()).is_err() {
            return Err(doc.error(
                value.span(),
                &path,
                "not a valid header value (visible ASCII and spaces only, no line breaks)",
            ));
        }
        headers.insert(header.clone(), resolved);
    }
    Ok(HttpUpstream {
        base_url: url.to_owned(),
        api_key,
        headers,
    })
}

fn switch(
    doc: &Document<'_>,
    name: &str,
    effort: Option<&Spanned<Effort>>,
) -> Result<Option<bool>, ConfigError> {
    match effort {
        None => Ok(None),
        Some(effort) => match effort.get_ref() {
            Effort::Switch(on) => Ok(Some(*on)),
            Effort::Level(text) => Err(doc.error(
                effort.span(),
                &key_path(name, "reasoning_effort"),
                &format!(
                    "kind openai takes true or false here (map the client's thinking to reasoning_effort), not `{text}`"
                ),
            )),
        },
    }
}

fn level(
    doc: &Document<'_>,
    name: &str,
    effort: Option<&Spanned<Effort>>,
) -> Result<Option<String>, ConfigError> {
    let Some(effort) = effort else {
        return Ok(None);
    };
    let efforts = bridge_core::translate::responses_request::EFFORTS;
    match effort.get_ref() {
        Effort::Level(text) if text == "off" || efforts.contains(&text.as_str()) => {
            Ok(Some(text.clone()))
        }
        other => {
            let given = match other {
                Effort::Level(text) => format!("`{text}`"),
                Effort::Switch(on) => format!("`{on}`"),
            };
            Err(doc.error(
                effort.span(),
                &key_path(name, "reasoning_effort"),
                &format!(
                    "unknown effort {given}; allowed: off, {} (or leave it out to follow the client)",
                    efforts.join(", ")
                ),
            ))
        }
    }
}

/// A `tokenizer` value: an encoding name as it is, a path from the config file's directory.
fn tokenizer_path(dir: &std::path::Path, value: Option<&str>) -> Option<String> {
    let value = value?;
    let is_path = value.contains('/') || value.ends_with(".json");
    Some(if is_path {
        dir.join(value).to_string_lossy().into_owned()
    } else {
        value.to_owned()
    })
}
