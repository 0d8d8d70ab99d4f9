//! Keys: who may call, and with what limits. A key comes from the config (`[[keys]]`: the
//! secret as a literal, `env:NAME` or `sha256:<hex>`) or from the store (made at run time with
//! `claude-bridge keys create` or `POST /admin/keys`: only its SHA-256 is kept). Lookups go by
//! the SHA-256 of what the client sent, so the secret is never compared byte by byte, logged or
//! echoed.
//!
//! ```
//! use claude_bridge::gateway::keys::{KeySpec, hash_secret, target_allowed};
//! let spec = KeySpec { name: "alice".into(), targets: vec!["local,*".into(), "claude".into()], ..KeySpec::default() };
//! assert!(target_allowed(&spec.targets, "local,qwen3-coder"));
//! assert!(target_allowed(&spec.targets, "claude,claude-sonnet-5"));
//! assert!(!target_allowed(&spec.targets, "openai,gpt-5"));
//! assert_eq!(hash_secret("abc").len(), 64);
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::period::{BudgetPeriod, parse_time, rfc3339};

/// A key's name and limits: a `[[keys]]` table without `key`, `POST /admin/keys`' body, and
/// what the store keeps beside the key's hash.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySpec {
    /// Its name (in the ledger, `/v1/usage`, metrics and errors).
    pub name: String,
    /// The secret, in a `[[keys]]` table only (a literal, `env:NAME` or `sha256:<hex>`); never
    /// stored, listed, or taken from `POST /admin/keys` (the bridge makes those).
    #[serde(default, rename = "key", skip_serializing)]
    pub secret: Option<String>,
    /// Globs on `provider,model` it may use (a pattern without a comma is a provider, any
    /// model); empty: every target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// Requests per minute, whole deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u64>,
    /// Tokens (input + output) per minute, whole deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u64>,
    /// Requests in flight at once, whole deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u64>,
    /// US dollars per budget period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// Tokens (input + output + cache) per budget period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u64>,
    /// When budgets start again.
    #[serde(default)]
    pub budget_period: BudgetPeriod,
    /// When the key stops working (RFC 3339, or a date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
}

impl KeySpec {
    /// The checks serde cannot make: a usable name, limits above zero, a time that parses.
    ///
    /// # Errors
    /// What is wrong, naming the field.
    pub fn check(&self) -> Result<(), String> {
        if !valid_name(&self.name) {
            return Err(format!(
                "name `{}`: a key name is 1-64 letters, digits, '-', '_', '.' or '@'",
                self.name
            ));
        }
        for (field, value) in [
            ("rpm", self.rpm),
            ("tpm", self.tpm),
            ("max_parallel", self.max_parallel),
            ("budget_tokens", self.budget_tokens),
        ] {
            if value == Some(0) {
                return Err(format!(
                    "{field} = 0 would refuse every request: leave it out for no limit, or revoke the key"
                ));
            }
        }
        if let Some(usd) = self.budget_usd
            && !(usd.is_finite() && usd > 0.0)
        {
            return Err(String::from(
                "budget_usd must be a number above 0 (leave it out for no budget)",
            ));
        }
        for target in &self.targets {
            if target.trim().is_empty() {
                return Err(String::from(
                    "targets: an empty pattern; write \"provider,model-glob\" or \"provider\"",
                ));
            }
        }
        self.expires_ms().map(|_| ())
    }

    /// `expires` in Unix milliseconds.
    ///
    /// # Errors
    /// `expires` does not parse.
    pub fn expires_ms(&self) -> Result<Option<i64>, String> {
        self.expires
            .as_deref()
            .map(|t| parse_time(t).map_err(|e| format!("expires: {e}")))
            .transpose()
    }

    /// Whether any limit or budget applies.
    #[must_use]
    pub fn limited(&self) -> bool {
        self.rpm.is_some()
            || self.tpm.is_some()
            || self.max_parallel.is_some()
            || self.budget_usd.is_some()
            || self.budget_tokens.is_some()
    }
}

/// Key names: safe in a URL path, a metric label, a CSV cell.
#[must_use]
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

/// Whether `target` (`provider,model`) is one `patterns` allow (none: all).
#[must_use]
pub fn target_allowed(patterns: &[String], target: &str) -> bool {
    patterns.is_empty()
        || patterns.iter().any(|p| {
            let p = p.trim();
            if p.contains(',') {
                bridge_core::route::glob_match(p, target)
            } else {
                target
                    .split_once(',')
                    .map_or(target, |(provider, _)| provider)
                    .eq(p)
                    || bridge_core::route::glob_match(p, target)
            }
        })
}

/// Lowercase hex SHA-256 of a secret (what the store and `sha256:` keys hold).
#[must_use]
pub fn hash_secret(secret: &str) -> String {
    bridge_core::hex::encode(&Sha256::digest(secret.as_bytes()))
}

/// A new secret: `cb-` and 40 base62 characters (238 bits).
#[must_use]
pub fn new_secret() -> String {
    format!("cb-{}", crate::ids::random_base62(40))
}

/// Where a key was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeySource {
    /// A `[[keys]]` table.
    Config,
    /// `keys create`, `POST /admin/keys`.
    Store,
}

/// A known key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyEntry {
    /// Its name and limits.
    pub spec: KeySpec,
    /// `spec.expires`, parsed.
    pub expires_ms: Option<i64>,
    /// When it was revoked.
    pub revoked_ms: Option<i64>,
    /// When it was made (store keys).
    pub created_ms: Option<i64>,
    /// Config or store.
    pub source: KeySource,
}

impl KeyEntry {
    /// Why this key may not call at `now_ms`, if it may not.
    #[must_use]
    pub fn refusal(&self, now_ms: i64) -> Option<KeyRefusal> {
        if let Some(at) = self.revoked_ms {
            return Some(KeyRefusal::Revoked {
                name: self.spec.name.clone(),
                at: rfc3339(at),
            });
        }
        match self.expires_ms {
            Some(at) if at <= now_ms => Some(KeyRefusal::Expired {
                name: self.spec.name.clone(),
                at: rfc3339(at),
            }),
            _ => None,
        }
    }

    /// What `GET /admin/keys` and `keys list` show (never the secret or its hash).
    #[must_use]
    pub fn listing(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(&self.spec).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            map.insert(
                "source".into(),
                serde_json::to_value(self.source).unwrap_or_default(),
            );
            map.insert(
                "created".into(),
                self.created_ms
                    .map(rfc3339)
                    .map_or(serde_json::Value::Null, Into::into),
            );
            map.insert(
                "revoked".into(),
                self.revoked_ms
                    .map(rfc3339)
                    .map_or(serde_json::Value::Null, Into::into),
            );
        }
        value
    }
}

/// Why a key was refused (401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefusal {
    /// No key was sent.
    #[error(
        "this bridge needs a key: send it as `x-api-key` or `Authorization: Bearer` (Claude Code: ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN; Codex: the provider's env_key)"
    )]
    Missing,
    /// A key no one made.
    #[error(
        "the key sent is not a key of this bridge (check for a typo, or ask its admin for one)"
    )]
    Unknown,
    /// A revoked key.
    #[error("the key `{name}` was revoked at {at}; ask this bridge's admin for a new one")]
    Revoked {
        /// Its name.
        name: String,
        /// When.
        at: String,
    },
    /// An expired key.
    #[error("the key `{name}` expired at {at}; ask this bridge's admin for a new one")]
    Expired {
        /// Its name.
        name: String,
        /// When.
        at: String,
    },
}

/// Every key known to this process, by the hash of its secret.
#[derive(Debug, Clone, Default)]
pub struct KeyRing {
    by_hash: BTreeMap<String, Arc<KeyEntry>>,
}

impl KeyRing {
    /// A ring of `(hash, entry)` pairs; a config key wins over a store key of the same name.
    #[must_use]
    pub fn new(keys: impl IntoIterator<Item = (String, KeyEntry)>) -> Self {
        let mut by_hash = BTreeMap::new();
        for (hash, entry) in keys {
            by_hash.insert(hash, Arc::new(entry));
        }
        Self { by_hash }
    }

    /// The key whose secret hashes to `hash`.
    #[must_use]
    pub fn get(&self, hash: &str) -> Option<&Arc<KeyEntry>> {
        self.by_hash.get(hash)
    }

    /// The key named `name`.
    #[must_use]
    pub fn named(&self, name: &str) -> Option<&Arc<KeyEntry>> {
        self.by_hash.values().find(|e| e.spec.name == name)
    }

    /// The hash of the key named `name`.
    #[must_use]
    pub fn hash_of(&self, name: &str) -> Option<String> {
        self.by_hash
            .iter()
            .find(|(_, e)| e.spec.name == name)
            .map(|(h, _)| h.clone())
    }

    /// Every key, by name.
    #[must_use]
    pub fn entries(&self) -> Vec<Arc<KeyEntry>> {
        let mut all: Vec<_> = self.by_hash.values().cloned().collect();
        all.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        all
    }

    /// How many keys.
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// No keys.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_with_a_zero_limit_or_a_bad_time_is_refused_naming_the_field() {
        let ok = KeySpec {
            name: "bob".into(),
            rpm: Some(10),
            expires: Some("2027-01-01T00:00:00Z".into()),
            ..KeySpec::default()
        };
        assert_eq!(ok.check(), Ok(()));
        let zero = KeySpec {
            rpm: Some(0),
            ..ok.clone()
        };
        assert!(zero.check().unwrap_err().starts_with("rpm = 0"));
        let when = KeySpec {
            expires: Some("soon".into()),
            ..ok.clone()
        };
        assert!(when.check().unwrap_err().starts_with("expires:"));
        let name = KeySpec {
            name: "a b".into(),
            ..ok
        };
        assert!(name.check().unwrap_err().contains("key name"));
    }

    #[test]
    fn refusals_say_which_without_the_secret() {
        let entry = KeyEntry {
            spec: KeySpec {
                name: "carol".into(),
                ..KeySpec::default()
            },
            expires_ms: Some(1_000),
            revoked_ms: None,
            created_ms: None,
            source: KeySource::Config,
        };
        assert_eq!(entry.refusal(999), None);
        assert!(matches!(
            entry.refusal(1_000),
            Some(KeyRefusal::Expired { .. })
        ));
        let revoked = KeyEntry {
            revoked_ms: Some(5),
            ..entry
        };
        assert!(
            revoked
                .refusal(0)
                .unwrap()
                .to_string()
                .contains("`carol` was revoked")
        );
        assert_ne!(new_secret(), new_secret());
        assert_eq!(new_secret().len(), 43);
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
