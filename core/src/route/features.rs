//! What the router looks at in a request.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::anthropic::request::MessagesRequest;
use crate::error::RequestError;

/// The facts about a request that decide its route.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Features {
    /// The model name the client asked for.
    pub model: String,
    /// `thinking.type` (`enabled`, `adaptive`, `disabled`, …), when the request has one.
    pub thinking: Option<String>,
    /// `output_config.effort` (`low`, `medium`, `high`, `max`, …), when the request has one.
    pub effort: Option<String>,
    /// Estimated input tokens ([`crate::tokens::estimate_request`]).
    pub input_tokens: u32,
    /// Whether the request offers tools.
    pub tools: bool,
}

impl Features {
    /// A background request: the client's model name contains `haiku` (Claude Code sends its
    /// titles, summaries and other small calls to a Haiku model).
    #[must_use]
    pub fn is_background(&self) -> bool {
        self.model.contains("haiku")
    }

    /// A request that asks for thinking: `thinking.type` `enabled`, or `output_config.effort`
    /// `high` or `max`. Adaptive thinking alone is not enough (Claude Code sends it on most
    /// requests).
    #[must_use]
    pub fn wants_thinking(&self) -> bool {
        self.thinking.as_deref() == Some("enabled")
            || matches!(self.effort.as_deref(), Some("high" | "max"))
    }
}

/// The routing facts of a parsed request.
#[must_use]
pub fn features(request: &MessagesRequest) -> Features {
    Features {
        model: request.model.clone(),
        thinking: text_at(request.thinking.as_ref(), "type"),
        effort: text_at(request.output_config.as_ref(), "effort"),
        input_tokens: crate::tokens::estimate_request(request),
        tools: request.tools.as_ref().is_some_and(|t| !t.is_empty()),
    }
}

/// The string at `key` of an object, if it is one.
fn text_at(value: Option<&Value>, key: &str) -> Option<String> {
    value
        .and_then(|v| v.get(key))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The routing facts of a raw request body.
///
/// # Errors
/// [`RequestError`] when the body is not a Messages request.
pub fn features_from_bytes(request: &[u8]) -> Result<Features, RequestError> {
    crate::anthropic::request::parse_request(request).map(|r| features(&r))
}

/// [`features_from_bytes`] for a router that does not look at the token estimate (no
/// `long_context` target): the messages, system prompt and tool schemas are skipped, not built
/// (a Claude Code request is mostly history, and the provider parses it once anyway), and
/// `input_tokens` is 0. With `with_tokens`, or when the skim cannot read the body, it is
/// [`features_from_bytes`] (so a bad body gets the same error either way).
///
/// ```
/// use bridge_core::route::{features_from_bytes, skim_features};
/// let body = br#"{"model":"claude-haiku-4-5","max_tokens":8,"thinking":{"type":"enabled","budget_tokens":1024},
///     "messages":[{"role":"user","content":"a long history"}],"tools":[{"name":"Bash","input_schema":{}}]}"#;
/// let skimmed = skim_features(body, false).unwrap();
/// let full = features_from_bytes(body).unwrap();
/// assert_eq!((skimmed.input_tokens, full.input_tokens > 0), (0, true));
/// assert_eq!(skimmed, bridge_core::route::Features { input_tokens: 0, ..full });
/// ```
///
/// # Errors
/// As [`features_from_bytes`].
pub fn skim_features(request: &[u8], with_tokens: bool) -> Result<Features, RequestError> {
    /// The fields routing reads; everything else is skipped by the parser.
    #[derive(Deserialize)]
    struct Skim<'a> {
        #[serde(borrow)]
        model: std::borrow::Cow<'a, str>,
        #[serde(default)]
        thinking: Option<Value>,
        #[serde(default)]
        output_config: Option<Value>,
        #[serde(default)]
        tools: Option<Vec<serde::de::IgnoredAny>>,
        #[expect(
            dead_code,
            reason = "required, as the full parse requires it; never read"
        )]
        messages: serde::de::IgnoredAny,
    }
    if with_tokens {
        return features_from_bytes(request);
    }
    let Ok(skim) = serde_json::from_slice::<Skim<'_>>(request) else {
        return features_from_bytes(request);
    };
    Ok(Features {
        model: skim.model.into_owned(),
        thinking: text_at(skim.thinking.as_ref(), "type"),
        effort: text_at(skim.output_config.as_ref(), "effort"),
        input_tokens: 0,
        tools: skim.tools.is_some_and(|t| !t.is_empty()),
    })
}

/// The client's model name, read from the top of the body only as far as the `model` key, for a
/// router that looks at nothing else (no `think` or `long_context` target): Claude Code sends
/// `model` first, so the few hundred kilobytes of history after it are not read twice (the
/// provider reads the whole body anyway, and refuses a bad one with the same error
/// [`features_from_bytes`] would give). `None` when the body is not an object whose keys up to a
/// string `model` read as JSON; the caller then uses [`skim_features`], which says what is wrong.
///
/// ```
/// use bridge_core::route::skim_model;
/// assert_eq!(skim_model(br#" {"model":"claude-sonnet-4-5","messages":[ this is never read"#),
///            Some(String::from("claude-sonnet-4-5")));
/// assert_eq!(skim_model(br#"{"stream":true,"max_tokens":[1,{"a":"}"}],"model":"m"}"#), Some("m".into()));
/// assert_eq!(skim_model(br#"{"model":7}"#), None);
/// assert_eq!(skim_model(br#"{"messages":[]}"#), None);
/// assert_eq!(skim_model(br#"["model","m"]"#), None);
/// ```
#[must_use]
pub fn skim_model(request: &[u8]) -> Option<String> {
    /// One JSON value at the start of `rest` (whitespace before it skipped) and the bytes it took.
    fn value<'a, T: serde::Deserialize<'a>>(rest: &'a [u8]) -> Option<(T, usize)> {
        let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<T>();
        let read = values.next()?.ok()?;
        Some((read, values.byte_offset()))
    }
    /// `rest` after its leading whitespace and then `byte`, if `byte` comes next.
    fn after(rest: &[u8], byte: u8) -> Option<&[u8]> {
        let rest = rest.trim_ascii_start();
        (rest.first() == Some(&byte)).then(|| rest.get(1..).unwrap_or_default())
    }
    let mut rest = after(request, b'{')?;
    loop {
        let (key, used) = value::<String>(rest)?;
        rest = after(rest.get(used..)?, b':')?;
        if key == "model" {
            return value::<String>(rest).map(|(model, _)| model);
        }
        let (serde::de::IgnoredAny, used) = value(rest)?;
        rest = after(rest.get(used..)?, b',')?;
    }
}

/// The routing facts `config` decides on, read from a raw body only as far as it needs: built
/// from the whole request for a `long_context` target (the token estimate), skimmed for a
/// `think` target ([`skim_features`]), and otherwise read up to the `model` key
/// ([`skim_model`]), the one fact the rules and the `background` target look at. A body that
/// cannot be read that far gets [`skim_features`]' error.
///
/// # Errors
/// As [`skim_features`].
pub fn features_for(
    config: &super::RouterConfig,
    request: &[u8],
) -> Result<Features, RequestError> {
    if config.long_context.is_none()
        && config.think.is_none()
        && let Some(model) = skim_model(request)
    {
        return Ok(Features {
            model,
            ..Features::default()
        });
    }
    skim_features(request, config.long_context.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_router_reads_only_what_it_decides_on() {
        let config = |json: &str| super::super::RouterConfig::from_json(json).unwrap();
        let cut_short =
            br#"{"model":"claude-haiku-4-5","thinking":{"type":"enabled"},"messages":[ oops"#;
        // Model rules and background only: the model is all that is read.
        let by_model = config(r#"{"default":"local","background":"local,small"}"#);
        assert_eq!(
            features_for(&by_model, cut_short).unwrap(),
            Features {
                model: "claude-haiku-4-5".into(),
                ..Features::default()
            }
        );
        // A think or long_context target reads further, and so refuses the broken body.
        for further in [
            r#"{"default":"local","think":"local,big"}"#,
            r#"{"default":"local","long_context":"local,big"}"#,
        ] {
            assert!(
                features_for(&config(further), cut_short).is_err(),
                "{further}"
            );
        }
        let whole = br#"{"model":"m","thinking":{"type":"enabled"},"messages":[{"role":"user","content":"hi"}]}"#;
        let think =
            features_for(&config(r#"{"default":"local","think":"local,big"}"#), whole).unwrap();
        assert_eq!(think.thinking.as_deref(), Some("enabled"));
        // A body without a readable model gets the full parse's error.
        assert_eq!(
            features_for(&by_model, br#"{"messages":[]}"#)
                .unwrap_err()
                .to_string(),
            features_from_bytes(br#"{"messages":[]}"#)
                .unwrap_err()
                .to_string()
        );
    }

    #[test]
    fn the_model_is_read_where_it_is_and_only_so_far() {
        let body = br#"{"model":"claude-opus-4-1","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(
            skim_model(body).as_deref(),
            Some(features_from_bytes(body).unwrap().model.as_str())
        );
        assert_eq!(
            skim_model(br#"{ "max_tokens" : 9 , "model" : "late\u0041" }"#).as_deref(),
            Some("lateA")
        );
        // Whatever follows the model is the provider's to refuse.
        assert_eq!(skim_model(br#"{"model":"m", oops"#).as_deref(), Some("m"));
        for unread in [
            &br#""#[..],
            br#"{}"#,
            br#"{"max_tokens":9}"#,
            br#"{"max_tokens":9 "model":"m"}"#,
            br#"{"max_tokens":,"model":"m"}"#,
            br#"{"model":null}"#,
            br#"{"model" "m"}"#,
            br#"[]"#,
        ] {
            assert_eq!(
                skim_model(unread),
                None,
                "{}",
                String::from_utf8_lossy(unread)
            );
        }
    }

    fn of(json: &str) -> Features {
        features_from_bytes(json.as_bytes()).unwrap()
    }

    #[test]
    fn reads_model_thinking_effort_tokens_and_tools() {
        let f = of(
            r#"{"model":"claude-opus-4-1","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":2048},
                "output_config":{"effort":"max"},"tools":[{"name":"Bash","input_schema":{"type":"object"}}],
                "messages":[{"role":"user","content":"hello there"}]}"#,
        );
        assert_eq!(f.model, "claude-opus-4-1");
        assert_eq!(f.thinking.as_deref(), Some("enabled"));
        assert_eq!(f.effort.as_deref(), Some("max"));
        assert!(f.tools);
        assert_eq!(
            f.input_tokens,
            crate::tokens::count_request_tokens(
                br#"{"model":"m","tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hello there"}]}"#
            )
            .unwrap()
        );

        let plain = of(r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[]}"#);
        assert_eq!(
            (plain.thinking, plain.effort, plain.tools),
            (None, None, false)
        );
        assert!(plain.input_tokens > 0);
    }

    #[test]
    fn thinking_means_enabled_or_a_high_effort_not_adaptive() {
        let f = |thinking: Option<&str>, effort: Option<&str>| Features {
            thinking: thinking.map(str::to_owned),
            effort: effort.map(str::to_owned),
            ..Features::default()
        };
        assert!(f(Some("enabled"), None).wants_thinking());
        assert!(f(None, Some("high")).wants_thinking());
        assert!(f(Some("adaptive"), Some("max")).wants_thinking());
        assert!(!f(Some("adaptive"), None).wants_thinking());
        assert!(!f(Some("adaptive"), Some("medium")).wants_thinking());
        assert!(!f(Some("disabled"), Some("low")).wants_thinking());
    }

    #[test]
    fn haiku_in_the_model_name_is_background() {
        let f = |model: &str| Features {
            model: model.to_owned(),
            ..Features::default()
        };
        assert!(f("claude-3-5-haiku-20241022").is_background());
        assert!(f("claude-haiku-4-5").is_background());
        assert!(!f("claude-sonnet-4-5").is_background());
    }

    #[test]
    fn a_body_that_is_not_a_request_is_refused() {
        assert!(features_from_bytes(b"{}").is_err());
        assert!(features_from_bytes(b"nope").is_err());
    }
}
