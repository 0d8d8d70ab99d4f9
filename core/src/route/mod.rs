//! The router: which provider and upstream model serve a request, and which to try next.
//!
//! Pure and total: [`route`] takes the `[router]` configuration ([`RouterConfig`]) and the facts
//! of one request ([`Features`], read by [`features()`]) and always returns a [`Route`] with a
//! primary [`Target`]. The order (DESIGN §5): `[[router.rules]]` (a glob on the client's model
//! name; the first match wins), `long_context` (estimated input tokens above
//! `long_context_threshold`), `background` (a `haiku` model), `think` (`thinking.type`
//! `enabled`, or `output_config.effort` `high`/`max`), `default`. The `fallback` list follows,
//! in order, without the primary and without repeats. A target without a model forwards the
//! client's model name.
//!
//! - [`target`]: `"provider,model"` targets.
//! - [`config`]: the `[router]` table and its validation against the providers there are.
//! - [`mod@features`]: what the router reads in a request.
//! - [`glob`]: `*` / `?` patterns on model names.
//! - [`pool`]: several equivalent targets under one route value, and which member serves
//!   (session affinity, load).
//! - [`decide`]: the decision ([`route`]).
//!
//! ```
//! use bridge_core::route::{features_from_bytes, route, RouterConfig};
//!
//! let config = RouterConfig::from_json(r#"{
//!     "default": "local,qwen3-coder",
//!     "think": "openai,o4-mini",
//!     "fallback": ["openai,gpt-4.1-mini"],
//!     "rules": [{"model": "claude-opus-*", "to": "openai,gpt-5"}]
//! }"#).unwrap();
//! config.validate(&["local", "openai"]).unwrap();
//!
//! let request = br#"{"model":"claude-opus-4-1","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}"#;
//! let chosen = route(&config, &features_from_bytes(request).unwrap());
//! assert_eq!(chosen.primary.to_string(), "openai,gpt-5");
//! assert_eq!(chosen.reason.to_string(), "rule 1 (claude-opus-*)");
//! assert_eq!(chosen.fallbacks[0].to_string(), "openai,gpt-4.1-mini");
//!
//! let request = br#"{"model":"claude-sonnet-4-5","max_tokens":64,"thinking":{"type":"enabled","budget_tokens":4096},"messages":[{"role":"user","content":"hi"}]}"#;
//! let chosen = route(&config, &features_from_bytes(request).unwrap());
//! assert_eq!((chosen.primary.to_string(), chosen.reason.to_string()), ("openai,o4-mini".into(), "think".into()));
//! ```

pub mod config;
pub mod decide;
pub mod features;
pub mod glob;
pub mod pool;
pub mod target;

pub use config::{DEFAULT_LONG_CONTEXT_THRESHOLD, InvalidRouter, RouterConfig, RouterKey, Rule};
pub use decide::{Reason, Route, route, route_with};
pub use features::{
    Features, features, features_for, features_from_bytes, skim_features, skim_model,
};
pub use glob::glob_match;
pub use pool::{Balance, MemberLoad, Pick, Pool, order_members, order_members_by};
pub use target::{Target, TargetError};
