//! Property tests of the router:
//! 1. totality: every request gets a primary target, taken from the configuration;
//! 2. the primary follows the order rules → long_context → background → think → default, with
//!    the first matching rule winning and unset steps skipped;
//! 3. fallbacks are the configured ones in their order, never a member of the chosen pool, never
//!    repeated; the route's pool is the configured pool's members, each once;
//! 4. the glob matcher agrees with a plain recursive definition of `*` and `?`;
//! 5. skimming a body for routing reads what the full parse reads (but the token estimate).

use bridge_core::route::{
    Features, MemberLoad, Pool, Reason, RouterConfig, Rule, Target, glob_match, route, route_with,
};
use proptest::prelude::*;

/// Few providers and models, so targets collide often (dedup is exercised).
fn target() -> impl Strategy<Value = Target> {
    (
        prop::sample::select(vec!["a", "b", "c"]),
        prop::option::of(prop::sample::select(vec!["m1", "m2", "org/x:q4"])),
    )
        .prop_map(|(provider, model)| Target {
            provider: provider.to_owned(),
            model: model.map(str::to_owned),
        })
}

/// Model names and patterns over a small alphabet that includes `haiku`.
fn model() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!["claude", "-", "haiku", "opus", "4", "x"]),
        0..5,
    )
    .prop_map(|parts| parts.concat())
}

fn pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!["claude", "-", "haiku", "opus", "4", "*", "?"]),
        1..4,
    )
    .prop_map(|parts| parts.concat())
}

/// One to three distinct targets.
fn pool() -> impl Strategy<Value = Pool> {
    prop::collection::vec(target(), 1..4).prop_map(|mut members| {
        let mut seen = Vec::new();
        members.retain(|t| {
            let new = !seen.contains(t);
            seen.push(t.clone());
            new
        });
        Pool::new(members).unwrap_or_else(|e| unreachable!("one to three distinct: {e}"))
    })
}

fn config() -> impl Strategy<Value = RouterConfig> {
    (
        pool(),
        prop::option::of(pool()),
        prop::option::of(pool()),
        prop::option::of(pool()),
        0u32..200,
        prop::collection::vec(target(), 0..5),
        prop::collection::vec((pattern(), pool()), 0..4),
    )
        .prop_map(
            |(default, background, think, long_context, threshold, fallback, rules)| RouterConfig {
                default,
                background,
                think,
                long_context,
                long_context_threshold: threshold,
                fallback,
                rules: rules
                    .into_iter()
                    .map(|(model, to)| Rule { model, to })
                    .collect(),
                balance: Default::default(),
            },
        )
}

fn features() -> impl Strategy<Value = Features> {
    (
        model(),
        prop::option::of(prop::sample::select(vec![
            "enabled", "adaptive", "disabled",
        ])),
        prop::option::of(prop::sample::select(vec!["low", "medium", "high", "max"])),
        0u32..400,
        any::<bool>(),
    )
        .prop_map(|(model, thinking, effort, input_tokens, tools)| Features {
            model,
            thinking: thinking.map(str::to_owned),
            effort: effort.map(str::to_owned),
            input_tokens,
            tools,
        })
}

/// The step of the order that applies, as the design states it (rules handled separately).
fn expected_step(config: &RouterConfig, f: &Features) -> (Pool, Reason) {
    let thinking = f.thinking.as_deref() == Some("enabled")
        || matches!(f.effort.as_deref(), Some("high" | "max"));
    let steps = [
        (
            &config.long_context,
            f.input_tokens > config.long_context_threshold,
            Reason::LongContext,
        ),
        (
            &config.background,
            f.model.contains("haiku"),
            Reason::Background,
        ),
        (&config.think, thinking, Reason::Think),
    ];
    steps
        .into_iter()
        .find_map(|(target, applies, reason)| {
            target.clone().filter(|_| applies).map(|t| (t, reason))
        })
        .unwrap_or_else(|| (config.default.clone(), Reason::Default))
}

/// `*` and `?` by their definition, recursively.
fn glob_reference(pattern: &[char], text: &[char]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some(('*', rest)) => (0..=text.len()).any(|i| glob_reference(rest, &text[i..])),
        Some(('?', rest)) => !text.is_empty() && glob_reference(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && glob_reference(rest, &text[1..]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_pool_is_configured_and_follows_the_order(
        config in config(),
        f in features(),
        loads in prop::collection::vec((1u32..4, 0u32..5, any::<bool>(), any::<bool>()), 3),
        session in prop::option::of("[a-z]{1,8}"),
        salt in any::<u64>(),
    ) {
        let load = |t: &Target| {
            let i = usize::from(t.provider.as_bytes()[0] - b'a') % 3;
            let (weight, outstanding, available, has_room) = loads[i];
            MemberLoad { weight, outstanding, available, has_room, latency_us: None }
        };
        let chosen = route_with(&config, &f, load, session.as_deref(), salt);
        let first_rule = config.rules.iter().position(|r| glob_match(&r.model, &f.model));
        let (pool, reason) = match first_rule {
            Some(index) => (
                config.rules[index].to.clone(),
                Reason::Rule { index, pattern: config.rules[index].model.clone() },
            ),
            None => expected_step(&config, &f),
        };
        prop_assert_eq!(chosen.reason, reason);
        // Every member once, in some order, the primary first.
        let mut got = chosen.pool.clone();
        let mut want = pool.members().to_vec();
        got.sort();
        want.sort();
        prop_assert_eq!(got, want);
        prop_assert_eq!(Some(&chosen.primary), chosen.pool.first());
        // With a session and no load, the same member whatever the salt.
        if let Some(session) = &session {
            let idle = |_: &Target| MemberLoad::idle(1);
            let a = route_with(&config, &f, idle, Some(session), salt);
            let b = route_with(&config, &f, idle, Some(session), salt.wrapping_add(1));
            prop_assert_eq!(a.primary, b.primary);
        }
    }

    #[test]
    fn fallbacks_are_the_configured_order_without_the_primary_or_repeats(
        config in config(),
        f in features(),
    ) {
        let chosen = route(&config, &f);
        prop_assert!(chosen.targets().next().is_some());
        prop_assert!(!chosen.fallbacks.contains(&chosen.primary));
        for (i, target) in chosen.fallbacks.iter().enumerate() {
            prop_assert!(!chosen.fallbacks[..i].contains(target), "repeated {}", target);
        }
        // Exactly the configured fallbacks not in the pool, first occurrences, in order.
        let mut expected: Vec<Target> = Vec::new();
        for target in &config.fallback {
            if !chosen.pool.contains(target) && !expected.contains(target) {
                expected.push(target.clone());
            }
        }
        prop_assert_eq!(chosen.fallbacks, expected);
    }

    #[test]
    fn an_earlier_matching_rule_always_wins(
        config in config(),
        f in features(),
        extra in target(),
    ) {
        // Put a catch-all after the rules: it wins only when no earlier rule matches.
        let mut with_catch_all = config.clone();
        with_catch_all.rules.push(Rule { model: "*".into(), to: extra.clone().into() });
        let chosen = route(&with_catch_all, &f);
        let earlier = config.rules.iter().position(|r| glob_match(&r.model, &f.model));
        let index = earlier.unwrap_or(config.rules.len());
        prop_assert!(with_catch_all.rules[index].to.members().contains(&chosen.primary));
        prop_assert_eq!(chosen.reason.to_string(), format!("rule {} ({})", index + 1, with_catch_all.rules[index].model));
    }

    #[test]
    fn glob_agrees_with_its_definition(
        pattern in "[ab*?]{0,6}",
        text in "[ab]{0,8}",
    ) {
        let p: Vec<char> = pattern.chars().collect();
        let t: Vec<char> = text.chars().collect();
        prop_assert_eq!(glob_match(&pattern, &text), glob_reference(&p, &t));
    }

    #[test]
    fn a_pattern_without_wildcards_matches_only_itself(a in "[a-z0-9./:-]{0,12}", b in "[a-z0-9./:-]{0,12}") {
        prop_assert!(glob_match(&a, &a));
        prop_assert_eq!(glob_match(&a, &b), a == b);
    }
}

/// The JSON values a request field may hold, for the skim test.
fn field_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::json;
    prop::sample::select(vec![
        json!(null),
        json!("enabled"),
        json!({"type": "enabled", "budget_tokens": 1024}),
        json!({"type": "adaptive"}),
        json!({"effort": "high"}),
        json!({"effort": 3}),
        json!([]),
        json!([{"name": "Bash", "input_schema": {"type": "object"}}]),
        json!(7),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// 5. Skimming a body for routing reads the same features as the full parse (but the token
    /// estimate, which only a long_context router asks for) — or, for a body the full parse
    /// refuses, refuses it the same way or leaves the refusal to the provider's full parse.
    #[test]
    fn skimming_reads_what_the_full_parse_reads(
        model in model(),
        thinking in field_value(),
        output_config in field_value(),
        tools in field_value(),
        text in "[a-z \"\\\\é]{0,20}",
        drop in prop::sample::select(vec!["", "model", "messages", "max_tokens"]),
    ) {
        let mut body = serde_json::json!({
            "model": model, "max_tokens": 64,
            "messages": [{"role": "user", "content": text}],
            "thinking": thinking, "output_config": output_config, "tools": tools,
        });
        if let Some(map) = body.as_object_mut() {
            map.remove(drop);
        }
        let bytes = body.to_string().into_bytes();
        let full = bridge_core::route::features_from_bytes(&bytes);
        let skimmed = bridge_core::route::skim_features(&bytes, false);
        match (&full, &skimmed) {
            (Ok(full), Ok(skimmed)) => prop_assert_eq!(
                skimmed,
                &Features { input_tokens: 0, ..full.clone() }
            ),
            (Err(full), Err(skimmed)) => prop_assert_eq!(full.to_string(), skimmed.to_string()),
            // The skim does not check what routing does not read; the provider's parse refuses it.
            (Err(_), Ok(_)) => {}
            (Ok(_), Err(e)) => prop_assert!(false, "the skim refused what the full parse reads: {e}"),
        }
        prop_assert_eq!(
            bridge_core::route::skim_features(&bytes, true).map_err(|e| e.to_string()),
            full.map_err(|e| e.to_string())
        );
    }
}
