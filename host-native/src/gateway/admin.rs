//! Managing keys and reading usage, over HTTP (`POST/GET /admin/keys`,
//! `DELETE /admin/keys/{name}`, `GET /v1/usage`) and from the command line
//! (`claude-bridge keys …`, `claude-bridge usage`, `claude-bridge store …`). Both sides do the
//! same store operations; a secret is shown once, when it is made.

use std::sync::Arc;

use http::{Method, StatusCode};

use super::keys::{KeySource, KeySpec, hash_secret, new_secret};
use super::store::{Store, StoreError, now_ms};
use super::usage::{UsageQuery, UsageRow};
use super::{Caller, Gateway, GatewayError};

/// An answer: status, content type, body.
pub type Answer = (StatusCode, &'static str, String);

fn json(status: StatusCode, value: &serde_json::Value) -> Answer {
    (status, "application/json", value.to_string())
}

fn store_error(error: StoreError) -> GatewayError {
    match error {
        StoreError::KeyExists(_) => GatewayError::Conflict(error.to_string()),
        StoreError::NoSuchKey(_) => GatewayError::NotFound(error.to_string()),
        other => GatewayError::Store(other.to_string()),
    }
}

/// `/admin/keys[/{name}]` (the admin key only).
///
/// # Errors
/// Not the admin; a bad body; a name taken or unknown; the store failed.
pub async fn keys_endpoint(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    method: &Method,
    name: Option<&str>,
    body: &[u8],
) -> Result<Answer, GatewayError> {
    if !matches!(caller, Caller::Admin) {
        return Err(GatewayError::NotAdmin("/admin/keys"));
    }
    match (method, name) {
        (&Method::GET, None) => {
            let keys: Vec<serde_json::Value> = gateway.keys().iter().map(|k| k.listing()).collect();
            Ok(json(StatusCode::OK, &serde_json::json!({ "keys": keys })))
        }
        (&Method::POST, None) => {
            let spec: KeySpec = serde_json::from_slice(body).map_err(|e| {
                GatewayError::Invalid(format!(
                    "the body is a key's fields as JSON (name, targets, rpm, tpm, max_parallel, budget_usd, budget_tokens, budget_period, expires): {e}"
                ))
            })?;
            if spec.secret.is_some() {
                return Err(GatewayError::Invalid(String::from(
                    "`key`: the bridge makes the secret (it is in the answer, once); leave it out",
                )));
            }
            let secret = create(gateway.store(), gateway, spec.clone()).await?;
            gateway.reload_keys().await;
            Ok(json(
                StatusCode::CREATED,
                &serde_json::json!({ "name": spec.name, "key": secret }),
            ))
        }
        (&Method::DELETE, Some(name)) => {
            if gateway
                .keys()
                .iter()
                .any(|k| k.spec.name == name && k.source == KeySource::Config)
            {
                return Err(GatewayError::Invalid(format!(
                    "the key `{name}` is in the config file: remove its [[keys]] table there"
                )));
            }
            gateway
                .store()
                .revoke_key(name, now_ms())
                .await
                .map_err(store_error)?;
            gateway.reload_keys().await;
            Ok(json(
                StatusCode::OK,
                &serde_json::json!({ "name": name, "revoked": true }),
            ))
        }
        (&Method::POST, Some(rest)) if rest.ends_with("/rotate") => {
            let name = rest.trim_end_matches("/rotate");
            let secret = new_secret();
            gateway
                .store()
                .rotate_key(name, &hash_secret(&secret))
                .await
                .map_err(store_error)?;
            gateway.reload_keys().await;
            Ok(json(
                StatusCode::OK,
                &serde_json::json!({ "name": name, "key": secret }),
            ))
        }
        _ => Err(GatewayError::Invalid(String::from(
            "/admin/keys answers GET (list), POST (create); /admin/keys/{name} DELETE (revoke); /admin/keys/{name}/rotate POST",
        ))),
    }
}

async fn create(store: &Store, gateway: &Gateway, spec: KeySpec) -> Result<String, GatewayError> {
    spec.check().map_err(GatewayError::Invalid)?;
    if gateway
        .keys()
        .iter()
        .any(|k| k.spec.name == spec.name && k.source == KeySource::Config)
    {
        return Err(GatewayError::Conflict(format!(
            "a key named `{}` is in the config file; choose another name",
            spec.name
        )));
    }
    let secret = new_secret();
    store
        .create_key(&spec, &hash_secret(&secret), now_ms())
        .await
        .map_err(store_error)?;
    Ok(secret)
}

/// `GET /v1/usage`: a key's own rows, or (the admin key) everyone's.
///
/// # Errors
/// A bad query; the store failed.
pub async fn usage_endpoint(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    query: &str,
) -> Result<Answer, GatewayError> {
    let mut q = UsageQuery::parse(query, now_ms()).map_err(GatewayError::Invalid)?;
    match caller {
        Caller::Admin | Caller::Open => {}
        Caller::Shared => {
            if q.key.is_none() {
                q.key = Some(String::from("client_key"));
            }
            if q.key.as_deref() != Some("client_key") {
                return Err(GatewayError::NotAdmin("another key's usage"));
            }
        }
        Caller::Key(entry) => {
            if q.key.as_ref().is_some_and(|k| *k != entry.spec.name) {
                return Err(GatewayError::NotAdmin("another key's usage"));
            }
            q.key = Some(entry.spec.name.clone());
        }
    }
    let rows = gateway.usage(&q).await.map_err(store_error)?;
    Ok(if q.csv {
        (
            StatusCode::OK,
            "text/csv; charset=utf-8",
            UsageRow::csv(&rows, &q.group_by),
        )
    } else {
        (StatusCode::OK, "application/json", UsageRow::json(&rows))
    })
}

/// `claude-bridge keys create|list|revoke|rotate`, `usage`, `store migrate|status`: on the
/// store the config names (or `--store`), printing what a person reads.
pub mod cli {
    use super::*;
    use crate::cli::{KeysAction, StoreAction, StoreArgs, UsageArgs};

    /// The store's URL and the config's keys, as `args` and the config file say.
    ///
    /// # Errors
    /// The config file does not load.
    pub fn locate(args: &StoreArgs) -> Result<(String, Vec<KeySpec>), String> {
        let env = crate::config::Env::process().map_err(|e| e.to_string())?;
        let config = match crate::config::find(args.config.as_deref(), &env) {
            Some(found) => {
                Some(crate::config::Config::load(&found.path, &env).map_err(|e| e.to_string())?)
            }
            None => None,
        };
        let specs: Vec<KeySpec> = config
            .as_ref()
            .map(|c| c.gateway.keys.iter().map(|(_, s)| s.clone()).collect())
            .unwrap_or_default();
        let url = match (&args.store, config.and_then(|c| c.gateway.store_url)) {
            (Some(url), _) => url.clone(),
            (None, Some(url)) => url,
            (None, None) => super::super::store::default_url()
                .ok_or_else(|| String::from("no state directory: pass --store URL"))?,
        };
        Ok((url, specs))
    }

    /// `claude-bridge keys …`; the exit code.
    ///
    /// # Errors
    /// What failed.
    pub async fn keys(args: &StoreArgs, action: KeysAction) -> Result<u8, String> {
        let (url, config) = locate(args)?;
        let text = match action {
            KeysAction::Create {
                name,
                targets,
                rpm,
                tpm,
                max_parallel,
                budget_usd,
                budget_tokens,
                budget_period,
                expires,
            } => {
                let spec = KeySpec {
                    name,
                    secret: None,
                    targets,
                    rpm,
                    tpm,
                    max_parallel,
                    budget_usd,
                    budget_tokens,
                    budget_period: budget_period.parse()?,
                    expires,
                };
                let names: Vec<String> = config.iter().map(|s| s.name.clone()).collect();
                create_key(&url, spec, &names).await?
            }
            KeysAction::List => list_keys(&url, &config).await?,
            KeysAction::Revoke { name } => revoke_key(&url, &name).await?,
            KeysAction::Rotate { name } => rotate_key(&url, &name).await?,
        };
        print!("{text}");
        Ok(0)
    }

    /// `claude-bridge usage`.
    ///
    /// # Errors
    /// What failed.
    pub async fn usage(args: &UsageArgs) -> Result<u8, String> {
        let (url, _) = locate(&args.store)?;
        print!("{}", usage_text(&url, &args.query()).await?);
        Ok(0)
    }

    /// `claude-bridge store …`.
    ///
    /// # Errors
    /// What failed.
    pub async fn store(args: &StoreArgs, action: StoreAction) -> Result<u8, String> {
        let (url, _) = locate(args)?;
        let text = match action {
            StoreAction::Migrate => migrate(&url).await?,
            StoreAction::Status => status(&url).await?,
        };
        print!("{text}");
        Ok(0)
    }

    /// Open the store and bring its schema up to date.
    async fn open(url: &str) -> Result<Store, String> {
        let store =
            Store::open(url, std::time::Duration::from_secs(5)).map_err(|e| e.to_string())?;
        store.migrate().await.map_err(|e| e.to_string())?;
        Ok(store)
    }

    /// `keys create`: prints the secret once.
    ///
    /// # Errors
    /// A bad spec, a name taken, the store failed.
    pub async fn create_key(
        url: &str,
        spec: KeySpec,
        config_names: &[String],
    ) -> Result<String, String> {
        spec.check()?;
        if config_names.contains(&spec.name) {
            return Err(format!(
                "a key named `{}` is in the config file; choose another name",
                spec.name
            ));
        }
        let store = open(url).await?;
        let secret = new_secret();
        store
            .create_key(&spec, &hash_secret(&secret), now_ms())
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "key `{}` created. Its secret, shown only now:\n\n  {secret}\n\nClaude Code: ANTHROPIC_API_KEY={secret}\n",
            spec.name
        ))
    }

    /// `keys list`.
    ///
    /// # Errors
    /// The store failed.
    pub async fn list_keys(url: &str, config: &[KeySpec]) -> Result<String, String> {
        let store = open(url).await?;
        let mut rows: Vec<[String; 6]> = config
            .iter()
            .map(|s| row(s, "config", None, None))
            .collect();
        for (_, entry) in store.keys().await.map_err(|e| e.to_string())? {
            rows.push(row(
                &entry.spec,
                "store",
                entry.created_ms,
                entry.revoked_ms,
            ));
        }
        rows.sort();
        let mut out = format!(
            "{:<20} {:<7} {:<24} {:<36} {:<21} {}\n",
            "name", "source", "limits", "budget", "created", "state"
        );
        for r in &rows {
            out.push_str(&format!(
                "{:<20} {:<7} {:<24} {:<36} {:<21} {}\n",
                r[0], r[1], r[2], r[3], r[4], r[5]
            ));
        }
        if rows.is_empty() {
            out.push_str(
                "(no keys: add [[keys]] to the config, or `claude-bridge keys create NAME`)\n",
            );
        }
        Ok(out)
    }

    fn row(
        spec: &KeySpec,
        source: &str,
        created: Option<i64>,
        revoked: Option<i64>,
    ) -> [String; 6] {
        let mut limits = Vec::new();
        if let Some(v) = spec.rpm {
            limits.push(format!("rpm={v}"));
        }
        if let Some(v) = spec.tpm {
            limits.push(format!("tpm={v}"));
        }
        if let Some(v) = spec.max_parallel {
            limits.push(format!("par={v}"));
        }
        let mut budget = Vec::new();
        if let Some(v) = spec.budget_usd {
            budget.push(format!("${v}"));
        }
        if let Some(v) = spec.budget_tokens {
            budget.push(format!("{v} tokens"));
        }
        let budget = if budget.is_empty() {
            String::from("-")
        } else {
            format!("{}/{}", budget.join(" + "), spec.budget_period.as_str())
        };
        let state = match (revoked, &spec.expires) {
            (Some(at), _) => format!("revoked {}", super::super::period::rfc3339(at)),
            (None, Some(at)) => format!("expires {at}"),
            (None, None) => String::from("live"),
        };
        [
            spec.name.clone(),
            source.to_owned(),
            if limits.is_empty() {
                String::from("-")
            } else {
                limits.join(" ")
            },
            budget,
            created
                .map(super::super::period::rfc3339)
                .unwrap_or_else(|| String::from("-")),
            state,
        ]
    }

    /// `keys revoke NAME`.
    ///
    /// # Errors
    /// No such live key; the store failed.
    pub async fn revoke_key(url: &str, name: &str) -> Result<String, String> {
        let store = open(url).await?;
        store
            .revoke_key(name, now_ms())
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "key `{name}` revoked; every replica refuses it within 5 s\n"
        ))
    }

    /// `keys rotate NAME`: prints the new secret once.
    ///
    /// # Errors
    /// No such live key; the store failed.
    pub async fn rotate_key(url: &str, name: &str) -> Result<String, String> {
        let store = open(url).await?;
        let secret = new_secret();
        store
            .rotate_key(name, &hash_secret(&secret))
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "key `{name}` has a new secret (the old one is refused within 5 s). Shown only now:\n\n  {secret}\n"
        ))
    }

    /// `usage`.
    ///
    /// # Errors
    /// A bad query; the store failed.
    pub async fn usage_text(url: &str, query: &str) -> Result<String, String> {
        let q = UsageQuery::parse(query, now_ms())?;
        let store = open(url).await?;
        let rows = store.usage(&q).await.map_err(|e| e.to_string())?;
        Ok(if q.csv {
            UsageRow::csv(&rows, &q.group_by)
        } else {
            UsageRow::table(&rows, &q.group_by)
        })
    }

    /// `store migrate`.
    ///
    /// # Errors
    /// The store failed.
    pub async fn migrate(url: &str) -> Result<String, String> {
        let store =
            Store::open(url, std::time::Duration::from_secs(5)).map_err(|e| e.to_string())?;
        let applied = store.migrate().await.map_err(|e| e.to_string())?;
        Ok(if applied.is_empty() {
            format!("{}: up to date\n", store.url())
        } else {
            format!("{}: applied migrations {applied:?}\n", store.url())
        })
    }

    /// `store status`.
    ///
    /// # Errors
    /// The store failed.
    pub async fn status(url: &str) -> Result<String, String> {
        let store =
            Store::open(url, std::time::Duration::from_secs(5)).map_err(|e| e.to_string())?;
        let s = store.status().await.map_err(|e| e.to_string())?;
        Ok(format!(
            "store:      {}\ndatabase:   {:?}\napplied:    {:?}\npending:    {:?}\nrecords:    {}\nstore keys: {}\n",
            s.url, s.dialect, s.applied, s.pending, s.records, s.keys
        ))
    }
}
