//! Where a request goes: `"provider,model"`, or `"provider"` alone to forward the client's model.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A provider and the upstream model to ask it for.
///
/// Written `"provider,model"` (split on the first comma, so the model may hold `/`, `:` or even
/// `,`), or `"provider"` alone: the client's model name is forwarded unchanged. Spaces around
/// either part are ignored.
///
/// ```
/// use bridge_core::route::Target;
/// let t: Target = "openrouter,qwen/qwen3-coder:free".parse().unwrap();
/// assert_eq!((t.provider.as_str(), t.model.as_deref()), ("openrouter", Some("qwen/qwen3-coder:free")));
/// assert_eq!(t.to_string(), "openrouter,qwen/qwen3-coder:free");
/// assert_eq!("local".parse::<Target>().unwrap().model, None);
/// assert!("local,".parse::<Target>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Target {
    /// The provider's name (a `[providers.NAME]` table, or `default` with flags only).
    pub provider: String,
    /// The upstream model; `None` forwards the client's model name.
    pub model: Option<String>,
}

/// Why a target does not parse; the message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TargetError(String);

impl Target {
    /// A target forwarding the client's model to `provider`.
    #[must_use]
    pub fn provider(provider: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            model: None,
        }
    }

    /// The model to ask the upstream for: this target's, else the client's.
    #[must_use]
    pub fn model_for<'a>(&'a self, client_model: &'a str) -> &'a str {
        self.model.as_deref().unwrap_or(client_model)
    }
}

impl std::str::FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        const SHAPE: &str = "a target is \"provider\" or \"provider,model\"";
        let (provider, model) = match text.split_once(',') {
            Some((provider, model)) => (provider.trim(), Some(model.trim())),
            None => (text.trim(), None),
        };
        if provider.is_empty() && model.is_none_or(str::is_empty) {
            return Err(TargetError(format!("empty target: {SHAPE}")));
        }
        if provider.is_empty() {
            return Err(TargetError(format!(
                "`{text}` names no provider before the comma: {SHAPE}"
            )));
        }
        if model == Some("") {
            return Err(TargetError(format!(
                "`{text}` names no model after the comma: write \"{provider}\" alone to forward the client's model"
            )));
        }
        Ok(Self {
            provider: provider.to_owned(),
            model: model.map(str::to_owned),
        })
    }
}

impl TryFrom<String> for Target {
    type Error = TargetError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<Target> for String {
    fn from(target: Target) -> Self {
        target.to_string()
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.model {
            Some(model) => write!(f, "{},{model}", self.provider),
            None => f.write_str(&self.provider),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(String, Option<String>), String> {
        text.parse::<Target>()
            .map(|t| (t.provider, t.model))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn splits_on_the_first_comma_and_keeps_the_model_whole() {
        assert_eq!(
            parse("local,qwen3-coder"),
            Ok(("local".into(), Some("qwen3-coder".into())))
        );
        assert_eq!(
            parse("fab,org/repo:file.gguf"),
            Ok(("fab".into(), Some("org/repo:file.gguf".into())))
        );
        assert_eq!(parse("p,a,b"), Ok(("p".into(), Some("a,b".into()))));
        assert_eq!(parse(" p , m "), Ok(("p".into(), Some("m".into()))));
        assert_eq!(parse("anthropic"), Ok(("anthropic".into(), None)));
    }

    #[test]
    fn refuses_empty_parts_saying_what_to_write() {
        assert!(parse("").is_err_and(|e| e.starts_with("empty target")));
        assert!(parse(" , ").is_err_and(|e| e.starts_with("empty target")));
        assert!(parse(",gpt-5").is_err_and(|e| e.contains("names no provider")));
        assert!(
            parse("openai, ")
                .is_err_and(|e| e.contains("names no model") && e.contains("\"openai\" alone"))
        );
    }

    #[test]
    fn round_trips_through_its_string_form() {
        for text in ["a,b/c:d", "solo", "x,y,z"] {
            let target: Target = text.parse().unwrap();
            assert_eq!(target.to_string(), text);
            let json = serde_json::to_string(&target).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Target>(&json).unwrap(), target);
        }
        assert!(serde_json::from_str::<Target>("\"p,\"").is_err());
    }

    #[test]
    fn forwards_the_client_model_without_one() {
        assert_eq!(Target::provider("p").model_for("claude-x"), "claude-x");
        let target: Target = "p,m".parse().unwrap();
        assert_eq!(target.model_for("claude-x"), "m");
    }
}
