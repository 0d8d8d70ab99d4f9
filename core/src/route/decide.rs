//! The decision: one request's primary target and its fallbacks, and why.

use std::fmt;

use serde::{Serialize, Serializer};

use super::config::RouterConfig;
use super::features::Features;
use super::glob::glob_match;
use super::pool::{MemberLoad, Pick, Pool, order_members_by};
use super::target::Target;

/// Where one request goes: the chosen pool's members in the order to try them (the first is
/// the primary), then the fallbacks in order (none in the pool, none twice).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    /// The first target to try (`pool[0]`).
    pub primary: Target,
    /// The chosen pool's members, in the order to try them (one, for a single target).
    pub pool: Vec<Target>,
    /// Tried in order when the pool's members failed before the client got a byte.
    pub fallbacks: Vec<Target>,
    /// Which part of the configuration chose the pool (for logs).
    #[serde(serialize_with = "as_display")]
    pub reason: Reason,
    /// Why the pool's first member (for logs).
    pub pick: Pick,
}

/// Which part of the configuration chose a route's primary target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// `[[router.rules]]` entry `index` (zero-based), whose pattern matched the client's model.
    Rule {
        /// Zero-based position in `rules`.
        index: usize,
        /// The rule's pattern.
        pattern: String,
    },
    /// The estimated input tokens exceeded `long_context_threshold`.
    LongContext,
    /// The client's model name contains `haiku`.
    Background,
    /// The request asks for thinking.
    Think,
    /// Nothing else applied.
    Default,
}

impl fmt::Display for Reason {
    /// `rule 1 (claude-opus-*)` (rules counted from 1), `long_context`, `background`, `think`,
    /// `default`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rule { index, pattern } => write!(f, "rule {} ({pattern})", index + 1),
            Self::LongContext => f.write_str("long_context"),
            Self::Background => f.write_str("background"),
            Self::Think => f.write_str("think"),
            Self::Default => f.write_str("default"),
        }
    }
}

fn as_display<S: Serializer>(value: &impl fmt::Display, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

impl Route {
    /// Every target in the order to try them (never empty).
    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.pool.iter().chain(&self.fallbacks)
    }
}

/// Route a request: the first rule whose pattern matches the client's model; else
/// `long_context` when the estimated input tokens exceed the threshold; else `background` for a
/// `haiku` model; else `think` when thinking is asked for; else `default`. Steps whose target is
/// not configured are skipped. The fallbacks follow, in order, without repeats.
///
/// A pool's members are ordered as for idle members of weight 1 with no session: a preview.
/// The host passes what it knows with [`route_with`].
#[must_use]
pub fn route(config: &RouterConfig, features: &Features) -> Route {
    route_with(config, features, |_| MemberLoad::idle(1), None, 0)
}

/// [`route`], with each member's load, the request's session (Claude Code's session id, a
/// Codex `prompt_cache_key`, an AG-UI thread) and a random `salt` to choose within a pool
/// ([`order_members`]).
#[must_use]
pub fn route_with(
    config: &RouterConfig,
    features: &Features,
    load: impl Fn(&Target) -> MemberLoad,
    session: Option<&str>,
    salt: u64,
) -> Route {
    let (pool, reason) = choose(config, features);
    let (members, pick) = order_members_by(config.balance, pool.members(), load, session, salt);
    let mut fallbacks: Vec<Target> = Vec::new();
    for target in &config.fallback {
        if !members.contains(target) && !fallbacks.contains(target) {
            fallbacks.push(target.clone());
        }
    }
    Route {
        primary: members.first().unwrap_or(pool.first()).clone(),
        pool: members,
        fallbacks,
        reason,
        pick,
    }
}

fn choose<'a>(config: &'a RouterConfig, features: &Features) -> (&'a Pool, Reason) {
    if let Some((index, rule)) = config
        .rules
        .iter()
        .enumerate()
        .find(|(_, rule)| glob_match(&rule.model, &features.model))
    {
        let reason = Reason::Rule {
            index,
            pattern: rule.model.clone(),
        };
        return (&rule.to, reason);
    }
    let steps = [
        (
            config.long_context.as_ref(),
            features.input_tokens > config.long_context_threshold,
            Reason::LongContext,
        ),
        (
            config.background.as_ref(),
            features.is_background(),
            Reason::Background,
        ),
        (
            config.think.as_ref(),
            features.wants_thinking(),
            Reason::Think,
        ),
    ];
    for (target, applies, reason) in steps {
        if let (Some(target), true) = (target, applies) {
            return (target, reason);
        }
    }
    (&config.default, Reason::Default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::Rule;

    fn t(text: &str) -> Target {
        text.parse().unwrap()
    }

    fn config() -> RouterConfig {
        RouterConfig {
            default: t("local,qwen3-coder").into(),
            background: Some(t("local,small").into()),
            think: Some(t("openai,o4-mini").into()),
            long_context: Some(t("openai,gpt-4.1").into()),
            long_context_threshold: 1000,
            fallback: vec![
                t("openai,gpt-4.1-mini"),
                t("local,qwen3-coder"),
                t("openai,gpt-4.1-mini"),
            ],
            rules: vec![
                Rule {
                    model: "claude-opus-*".into(),
                    to: t("openai,gpt-5").into(),
                },
                Rule {
                    model: "claude-*".into(),
                    to: t("anthropic").into(),
                },
            ],
            balance: crate::route::Balance::default(),
        }
    }

    fn request(model: &str, tokens: u32, thinking: Option<&str>) -> Features {
        Features {
            model: model.to_owned(),
            thinking: thinking.map(str::to_owned),
            input_tokens: tokens,
            ..Features::default()
        }
    }

    fn primary_and_reason(config: &RouterConfig, f: &Features) -> (String, String) {
        let r = route(config, f);
        (r.primary.to_string(), r.reason.to_string())
    }

    #[test]
    fn rules_come_first_and_the_first_match_wins() {
        let c = config();
        let f = request("claude-opus-4-1", 5000, Some("enabled"));
        assert_eq!(
            primary_and_reason(&c, &f),
            ("openai,gpt-5".into(), "rule 1 (claude-opus-*)".into())
        );
        let f = request("claude-haiku-4-5", 10, None);
        assert_eq!(
            primary_and_reason(&c, &f),
            ("anthropic".into(), "rule 2 (claude-*)".into())
        );
    }

    #[test]
    fn then_long_context_background_think_default() {
        let mut c = config();
        c.rules.clear();
        let cases = [
            (
                request("claude-haiku-4-5", 1001, Some("enabled")),
                "openai,gpt-4.1",
                "long_context",
            ),
            (
                request("claude-haiku-4-5", 1000, Some("enabled")),
                "local,small",
                "background",
            ),
            (
                request("claude-sonnet-4-5", 1000, Some("enabled")),
                "openai,o4-mini",
                "think",
            ),
            (
                request("claude-sonnet-4-5", 10, Some("adaptive")),
                "local,qwen3-coder",
                "default",
            ),
        ];
        for (f, target, reason) in cases {
            assert_eq!(
                primary_and_reason(&c, &f),
                (target.into(), reason.into()),
                "{f:?}"
            );
        }
    }

    #[test]
    fn unset_steps_are_skipped() {
        let mut c = RouterConfig::new(t("default"));
        c.think = Some(t("deep,r1").into());
        let f = request("claude-haiku-4-5", u32::MAX, Some("enabled"));
        assert_eq!(
            primary_and_reason(&c, &f),
            ("deep,r1".into(), "think".into())
        );
        c.think = None;
        let r = route(&c, &f);
        assert_eq!(
            (r.primary, r.reason, r.fallbacks),
            (Target::provider("default"), Reason::Default, vec![])
        );
    }

    #[test]
    fn fallbacks_keep_their_order_without_the_primary_or_repeats() {
        let c = config();
        let r = route(&c, &request("gpt", 1, None));
        assert_eq!(r.primary, t("local,qwen3-coder"));
        assert_eq!(r.fallbacks, vec![t("openai,gpt-4.1-mini")]);
        let r = route(&c, &request("claude-opus-4", 1, None));
        assert_eq!(
            r.fallbacks,
            vec![t("openai,gpt-4.1-mini"), t("local,qwen3-coder")]
        );
        let all: Vec<String> = r.targets().map(ToString::to_string).collect();
        assert_eq!(
            all,
            ["openai,gpt-5", "openai,gpt-4.1-mini", "local,qwen3-coder"]
        );
    }

    #[test]
    fn a_pool_is_ordered_by_load_and_its_members_are_not_fallbacks_again() {
        let mut c = config();
        c.default = Pool::new(vec![t("a,m"), t("b,m")]).unwrap();
        c.fallback = vec![t("b,m"), t("z,m")];
        let busy_a = |x: &Target| MemberLoad {
            outstanding: if x.provider == "a" { 4 } else { 0 },
            ..MemberLoad::idle(1)
        };
        let r = route_with(&c, &request("gpt", 1, None), busy_a, None, 3);
        let all: Vec<String> = r.targets().map(ToString::to_string).collect();
        assert_eq!(all, ["b,m", "a,m", "z,m"]);
        assert_eq!((r.primary, r.pick), (t("b,m"), Pick::Load));
        let r = route_with(
            &c,
            &request("gpt", 1, None),
            |_| MemberLoad::idle(1),
            Some("s1"),
            3,
        );
        assert_eq!(r.pick, Pick::Affinity);
    }

    #[test]
    fn serializes_targets_and_reason_as_strings() {
        let r = route(&config(), &request("claude-opus-4", 1, None));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"primary":"openai,gpt-5","pool":["openai,gpt-5"],"fallbacks":["openai,gpt-4.1-mini","local,qwen3-coder"],"reason":"rule 1 (claude-opus-*)","pick":"only"}"#
        );
    }
}
