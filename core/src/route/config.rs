//! The `[router]` table: where each kind of request goes, the fallbacks, and the rules.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::pool::{Balance, Pool};
use super::target::Target;

/// `long_context_threshold` when the table does not set it (estimated input tokens).
pub const DEFAULT_LONG_CONTEXT_THRESHOLD: u32 = 60_000;

/// The router's configuration, in the shape of the `[router]` table (DESIGN §5); targets are
/// written as strings (`"provider,model"` or `"provider"`), and every route value may be a list
/// of equivalent targets (a [`Pool`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// Where a request goes when nothing else matches (required: every request has a target).
    pub default: Pool,
    /// Requests whose client model name contains `haiku` (Claude Code's background calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<Pool>,
    /// Requests that ask for thinking: `thinking.type` `enabled`, or `output_config.effort`
    /// `high` / `max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think: Option<Pool>,
    /// Requests whose estimated input tokens exceed `long_context_threshold`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_context: Option<Pool>,
    /// The `long_context` threshold in estimated input tokens.
    #[serde(default = "default_threshold")]
    pub long_context_threshold: u32,
    /// Tried in order when a target fails before the client got a byte.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<Target>,
    /// Checked first, in order; the first whose pattern matches the client's model wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// How a pool's least loaded member is measured (requests without a session).
    #[serde(default, skip_serializing_if = "is_default_balance")]
    pub balance: Balance,
}

fn is_default_balance(balance: &Balance) -> bool {
    *balance == Balance::default()
}

fn default_threshold() -> u32 {
    DEFAULT_LONG_CONTEXT_THRESHOLD
}

/// `[[router.rules]]`: a glob on the client's model name and where matching requests go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// `*` and `?` glob on the client's model name (see [`super::glob_match`]).
    pub model: String,
    /// Where matching requests go.
    pub to: Pool,
}

/// A key of the `[router]` table, to say which one is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RouterKey {
    /// `default`.
    Default,
    /// `background`.
    Background,
    /// `think`.
    Think,
    /// `long_context`.
    LongContext,
    /// `fallback[i]` (zero-based).
    Fallback(usize),
    /// `rules[i].model` (zero-based).
    RuleModel(usize),
    /// `rules[i].to` (zero-based).
    RuleTo(usize),
}

impl fmt::Display for RouterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::Background => f.write_str("background"),
            Self::Think => f.write_str("think"),
            Self::LongContext => f.write_str("long_context"),
            Self::Fallback(i) => write!(f, "fallback[{i}]"),
            Self::RuleModel(i) => write!(f, "rules[{i}].model"),
            Self::RuleTo(i) => write!(f, "rules[{i}].to"),
        }
    }
}

/// A router configuration that parses but cannot work: which key, and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("router.{key}: {message}")]
pub struct InvalidRouter {
    /// The key at fault.
    pub key: RouterKey,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl RouterConfig {
    /// Every request to `default`, nothing else configured (the flags-only setup is
    /// `RouterConfig::new(Target::provider("default"))`).
    #[must_use]
    pub fn new(default: impl Into<Pool>) -> Self {
        Self {
            default: default.into(),
            background: None,
            think: None,
            long_context: None,
            long_context_threshold: DEFAULT_LONG_CONTEXT_THRESHOLD,
            fallback: Vec::new(),
            rules: Vec::new(),
            balance: Balance::default(),
        }
    }

    /// Read a router configuration from JSON (the `[router]` table's shape).
    ///
    /// # Errors
    /// The JSON does not have that shape, or a target does not parse; the message says which.
    pub fn from_json(json: &str) -> Result<Self, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    /// Every target with the key it is written under, in the order the router considers them
    /// (a pool's members in the order written).
    pub fn targets(&self) -> impl Iterator<Item = (RouterKey, &Target)> {
        let rules = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| (RouterKey::RuleTo(i), &rule.to));
        let named = [
            (RouterKey::LongContext, self.long_context.as_ref()),
            (RouterKey::Background, self.background.as_ref()),
            (RouterKey::Think, self.think.as_ref()),
            (RouterKey::Default, Some(&self.default)),
        ]
        .into_iter()
        .filter_map(|(key, pool)| pool.map(|p| (key, p)));
        let pools = rules
            .chain(named)
            .flat_map(|(key, pool)| pool.members().iter().map(move |t| (key, t)));
        let fallback = self
            .fallback
            .iter()
            .enumerate()
            .map(|(i, target)| (RouterKey::Fallback(i), target));
        pools.chain(fallback)
    }

    /// Check the configuration against the providers there are: every target names one of
    /// `providers`, and no rule has an empty pattern.
    ///
    /// ```
    /// use bridge_core::route::RouterConfig;
    /// let config = RouterConfig::from_json(r#"{"default":"local","fallback":["cloud,gpt-5"]}"#).unwrap();
    /// assert!(config.validate(&["local", "cloud"]).is_ok());
    /// let err = config.validate(&["local"]).unwrap_err();
    /// assert_eq!(err.to_string(), "router.fallback[0]: unknown provider `cloud`; allowed: local");
    /// ```
    ///
    /// # Errors
    /// The first key at fault, saying what is allowed.
    pub fn validate(&self, providers: &[&str]) -> Result<(), InvalidRouter> {
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.model.is_empty() {
                return Err(InvalidRouter {
                    key: RouterKey::RuleModel(i),
                    message: String::from(
                        "empty pattern: write a glob on the client's model name, e.g. \"claude-opus-*\"",
                    ),
                });
            }
        }
        for (key, target) in self.targets() {
            if !providers.contains(&target.provider.as_str()) {
                let allowed = if providers.is_empty() {
                    String::from("(no providers are configured)")
                } else {
                    providers.join(", ")
                };
                return Err(InvalidRouter {
                    key,
                    message: format!("unknown provider `{}`; allowed: {allowed}", target.provider),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"{
        "default": "local,qwen3-coder",
        "background": "local,qwen3-coder",
        "think": "openai,o4-mini",
        "long_context": "openai,gpt-4.1",
        "long_context_threshold": 60000,
        "fallback": ["openai,gpt-4.1-mini"],
        "rules": [{"model": "claude-opus-*", "to": "openai,gpt-5"}]
    }"#;

    #[test]
    fn reads_the_router_table_shape() {
        let config = RouterConfig::from_json(FULL).unwrap();
        assert_eq!(config.default.to_string(), "local,qwen3-coder");
        assert_eq!(config.think.as_ref().unwrap().to_string(), "openai,o4-mini");
        let pooled = RouterConfig::from_json(
            r#"{"default":["a,m","b,m"],"rules":[{"model":"x","to":["c","d"]}]}"#,
        )
        .unwrap();
        assert_eq!(pooled.default.members().len(), 2);
        let keys: Vec<(String, String)> = pooled
            .targets()
            .map(|(k, t)| (k.to_string(), t.to_string()))
            .collect();
        assert_eq!(
            keys,
            [
                ("rules[0].to".into(), "c".into()),
                ("rules[0].to".into(), "d".into()),
                ("default".into(), "a,m".into()),
                ("default".into(), "b,m".into())
            ]
        );
        assert!(
            RouterConfig::from_json(r#"{"default":[]}"#)
                .is_err_and(|e| e.contains("an empty list"))
        );
        assert_eq!(config.rules[0].model, "claude-opus-*");
        assert_eq!(config.rules[0].to.to_string(), "openai,gpt-5");
        assert_eq!(config.fallback.len(), 1);
        let back = serde_json::to_string(&config).unwrap();
        assert_eq!(RouterConfig::from_json(&back).unwrap(), config);
    }

    #[test]
    fn only_default_is_required() {
        let config = RouterConfig::from_json(r#"{"default":"p"}"#).unwrap();
        assert_eq!(config, RouterConfig::new(Target::provider("p")));
        assert_eq!(
            config.long_context_threshold,
            DEFAULT_LONG_CONTEXT_THRESHOLD
        );
        assert!(
            RouterConfig::from_json("{}").is_err_and(|e| e.contains("missing field `default`"))
        );
    }

    #[test]
    fn refuses_unknown_keys_and_bad_targets() {
        assert!(
            RouterConfig::from_json(r#"{"default":"p","thinking":"q"}"#)
                .is_err_and(|e| e.contains("unknown field `thinking`") && e.contains("`think`"))
        );
        assert!(
            RouterConfig::from_json(r#"{"default":""}"#).is_err_and(|e| e.contains("empty target"))
        );
        assert!(
            RouterConfig::from_json(r#"{"default":"p","rules":[{"model":"x","to":"q","then":1}]}"#)
                .is_err_and(|e| e.contains("unknown field `then`"))
        );
    }

    #[test]
    fn validation_names_the_key_and_the_providers_allowed() {
        let config = RouterConfig::from_json(FULL).unwrap();
        assert_eq!(config.validate(&["local", "openai"]), Ok(()));
        let err = config.validate(&["local"]).unwrap_err();
        assert_eq!(err.key, RouterKey::RuleTo(0), "rules come first");
        assert_eq!(
            err.to_string(),
            "router.rules[0].to: unknown provider `openai`; allowed: local"
        );
        let err = config.validate(&[]).unwrap_err();
        assert!(err.message.contains("no providers are configured"));

        let mut config = RouterConfig::new(Target::provider("a"));
        config.fallback = vec![Target::provider("a"), Target::provider("b")];
        assert_eq!(
            config.validate(&["a"]).map_err(|e| e.key),
            Err(RouterKey::Fallback(1))
        );
        config.rules.push(Rule {
            model: String::new(),
            to: Target::provider("a").into(),
        });
        assert_eq!(
            config.validate(&["a", "b"]).map_err(|e| e.key),
            Err(RouterKey::RuleModel(0))
        );
    }

    #[test]
    fn lists_targets_in_routing_order_with_their_keys() {
        let config = RouterConfig::from_json(FULL).unwrap();
        let keys: Vec<String> = config.targets().map(|(k, _)| k.to_string()).collect();
        assert_eq!(
            keys,
            [
                "rules[0].to",
                "long_context",
                "background",
                "think",
                "default",
                "fallback[0]"
            ]
        );
    }
}
