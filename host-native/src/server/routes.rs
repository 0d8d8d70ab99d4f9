//! Where each request goes: the router's targets, each a provider, with fallbacks and a
//! circuit breaker per target.
//!
//! A [`Routes`] is built from a config file (`serve --config`, DESIGN §5) or, with flags only,
//! as one provider named `default`. Every `provider,model` the `[router]` names becomes one
//! [`TargetEntry`] with its own provider instance (built with that model as its `--model`), so
//! providers stay unaware of routing. [`Routes::plan`] asks the core's pure router
//! (`bridge_core::route`) for the ordered targets of a request; the front tries them in order
//! while a target fails before the client got a byte ([`BridgeError::retryable`]).
//!
//! A target that failed [`Circuit::THRESHOLD`] times in a row is skipped for
//! [`Circuit::COOL_DOWN`] (unless it is the last one left), then tried again; `/health` shows
//! each target's state. A reload builds a new `Routes`; requests in flight keep the one they
//! started with (they hold an `Arc`).
//!
//! ```text
//!   request ──features──► core route() ──► [primary, fallback…]
//!        for each: circuit open? skip ─► provider.open ─► Ok: answer (x-claude-bridge-target)
//!                                                     └► Err(retryable): next target
//!                                                     └► Err(other): the client's error
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bridge_core::route::{Pick, Reason, RouterConfig, Target};

use crate::cli::ServeArgs;
use crate::config::Config;
use crate::engine::Engine;
use crate::error::BridgeError;
use crate::provider::Provider;

use super::upstreams::{Upstream, UpstreamLimits};

/// The provider name flags describe (DESIGN §5: a one-provider config named `default`).
pub const FLAGS_PROVIDER: &str = "default";

/// One target: a provider (built for this model) and its health.
pub struct TargetEntry {
    /// `provider,model` or `provider`.
    pub target: Target,
    /// The provider's kind (`openai`, …).
    pub kind: &'static str,
    /// The provider, built with the target's model.
    pub provider: Arc<dyn Provider>,
    /// The provider's own limits and load (shared by every target on it).
    pub upstream: Arc<Upstream>,
    /// Consecutive failures and the cool-down (a passing health probe closes it too).
    pub circuit: Arc<Circuit>,
    /// Times a failed request is sent again to this target before the next one.
    pub retries: u32,
    /// The provider's `idle_timeout`, when its table sets one (else `--idle-timeout`).
    pub idle_timeout: Option<Duration>,
    /// The provider's default request parameters (merged under each request's own).
    pub defaults: Arc<serde_json::Map<String, serde_json::Value>>,
}

impl std::fmt::Debug for TargetEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetEntry")
            .field("target", &self.target.to_string())
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl TargetEntry {
    /// `provider,model` as the `x-claude-bridge-target` header says it: the model the request
    /// was sent as.
    #[must_use]
    pub fn label(&self, client_model: &str) -> String {
        format!(
            "{},{}",
            self.target.provider,
            self.target.model.as_deref().unwrap_or(client_model)
        )
    }
}

/// A target's failures in a row, and when it may be tried again.
#[derive(Debug, Default)]
pub struct Circuit {
    state: Mutex<CircuitState>,
}

#[derive(Debug, Default, Clone)]
struct CircuitState {
    failures: u32,
    open_until: Option<Instant>,
    last_error: Option<String>,
    answered: u64,
    failed: u64,
}

impl Circuit {
    /// Failures in a row that open the circuit.
    pub const THRESHOLD: u32 = 3;
    /// How long an open circuit skips its target before it is probed again.
    pub const COOL_DOWN: Duration = Duration::from_secs(30);

    fn lock(&self) -> std::sync::MutexGuard<'_, CircuitState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the target is being skipped at `now`.
    #[must_use]
    pub fn is_open(&self, now: Instant) -> bool {
        self.lock().open_until.is_some_and(|until| now < until)
    }

    /// Failures in a row.
    #[must_use]
    pub fn failures(&self) -> u32 {
        self.lock().failures
    }

    /// Its provider passed a health probe: the circuit closes (no answer is counted).
    pub fn close(&self) {
        let mut state = self.lock();
        state.failures = 0;
        state.open_until = None;
    }

    /// The target answered.
    pub fn success(&self) {
        let mut state = self.lock();
        state.failures = 0;
        state.open_until = None;
        state.answered += 1;
    }

    /// The target failed (retryably) at `now`; opens the circuit at the threshold.
    pub fn failure(&self, now: Instant, error: &str) {
        let mut state = self.lock();
        state.failures += 1;
        state.failed += 1;
        state.last_error = Some(crate::redact::redact(error).into_owned());
        if state.failures >= Self::THRESHOLD {
            state.open_until = Some(now + Self::COOL_DOWN);
        }
    }

    /// For `/health`.
    #[must_use]
    pub fn report(&self, now: Instant) -> serde_json::Value {
        let state = self.lock().clone();
        let circuit = match state.open_until {
            Some(until) if now < until => "open",
            Some(_) => "half-open",
            None => "closed",
        };
        serde_json::json!({
            "circuit": circuit,
            "failures_in_a_row": state.failures,
            "answered": state.answered,
            "failed": state.failed,
            "last_error": state.last_error,
        })
    }
}

/// One request's targets in the order to try them, and why.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The chosen pool's members (ordered by [`bridge_core::route::order_members`]), then the
    /// fallbacks.
    pub entries: Vec<&'a TargetEntry>,
    /// How many of `entries` are the pool's.
    pub pool_len: usize,
    /// Which part of the configuration chose the pool.
    pub reason: Reason,
    /// Why the pool's first member.
    pub pick: Pick,
    /// The client's model name.
    pub client_model: String,
    /// The request's input tokens as far as the router estimated them (0: not estimated).
    pub input_tokens: u32,
}

impl Plan<'_> {
    /// Why the `index`th entry was tried: the pool's pick for the first, `pool` for the other
    /// members, `fallback` after them.
    #[must_use]
    pub fn why(&self, index: usize) -> &'static str {
        match index {
            0 => self.pick.as_str(),
            i if i < self.pool_len => "pool",
            _ => "fallback",
        }
    }
}

/// Every target of the running configuration.
pub struct Routes {
    router: RouterConfig,
    /// Some route value is a pool of more than one target.
    pooled: bool,
    targets: BTreeMap<String, TargetEntry>,
    /// Models `GET /v1/models` lists: (id a client sends, provider).
    models: Vec<(String, String)>,
    /// The config file, when there is one.
    pub file: Option<std::path::PathBuf>,
    /// Its text with the secrets masked (the dashboard's running config).
    pub shown: String,
    /// The providers' health probes (`health_check`), ended with these routes.
    _probes: super::health_checks::Probes,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("targets", &self.targets.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Routes {
    /// Flags only: one provider, `default`, every request to it (with `--model` if given).
    ///
    /// # Errors
    /// The provider cannot be built.
    pub async fn from_args(args: &ServeArgs, engine: &Arc<dyn Engine>) -> Result<Self, String> {
        let target = Target {
            provider: FLAGS_PROVIDER.to_owned(),
            model: args.model.clone(),
        };
        let runners = crate::provider::build::server_tool_runners(args)?;
        let upstream = Arc::new(Upstream::new(FLAGS_PROVIDER, UpstreamLimits::default()));
        let provider = crate::provider::build::build_provider(
            args,
            engine,
            &runners,
            Some(upstream.free_at()),
        )
        .await?;
        let mut targets = BTreeMap::new();
        targets.insert(
            target.to_string(),
            TargetEntry {
                target: target.clone(),
                kind: provider.kind(),
                provider,
                upstream,
                circuit: Arc::default(),
                retries: 0,
                idle_timeout: None,
                defaults: Arc::default(),
            },
        );
        Ok(Self {
            router: RouterConfig::new(target),
            pooled: false,
            targets,
            // Flags only: the Claude ids (each mapped to --model), then --model itself, so an
            // OpenAI client's `models.list()` shows the model it is served.
            models: args
                .model
                .iter()
                .filter(|m| !m.is_empty())
                .map(|m| (m.clone(), FLAGS_PROVIDER.to_owned()))
                .collect(),
            file: None,
            shown: String::new(),
            _probes: super::health_checks::Probes::default(),
        })
    }

    /// From a config file: one provider instance per target the router names; the flags give
    /// what the file leaves out. On a reload, `previous` are the routes running now: a provider
    /// whose limits did not change keeps its [`Upstream`] (what it has in flight and queued, its
    /// minute's counts, a 429's wait), so a reload never lets `max_parallel` be crossed.
    ///
    /// # Errors
    /// A provider cannot be built (the message names it).
    pub async fn from_config(
        config: &Config,
        args: &ServeArgs,
        engine: &Arc<dyn Engine>,
        previous: Option<&Self>,
    ) -> Result<Self, String> {
        let mut targets = BTreeMap::new();
        let mut upstreams: BTreeMap<&str, Arc<Upstream>> = BTreeMap::new();
        let runners = crate::provider::build::server_tool_runners(args)?;
        for (_, target) in config.router.targets() {
            let key = target.to_string();
            if targets.contains_key(&key) {
                continue;
            }
            let Some(provider) = config.providers.get(&target.provider) else {
                return Err(format!(
                    "the router names an unknown provider {}",
                    target.provider
                ));
            };
            let mut provider_args =
                crate::provider::build::provider_args(args, provider, target.model.clone());
            // With the gateway on, a Fabstir provider keeps its job ledger in the gateway's
            // store (shared by every replica, so they never cross the spending cap together).
            if config.gateway.enabled(config.store_table) {
                provider_args.ledger_store = config
                    .gateway
                    .store_url
                    .clone()
                    .or_else(crate::gateway::store::default_url);
            }
            let upstream = Arc::clone(upstreams.entry(target.provider.as_str()).or_insert_with(
                || {
                    previous
                        .and_then(|p| p.upstream_named(&target.provider))
                        .filter(|kept| kept.limits() == provider.limits)
                        .unwrap_or_else(|| {
                            Arc::new(Upstream::new(&target.provider, provider.limits))
                        })
                },
            ));
            let built = crate::provider::build::build_provider(
                &provider_args,
                engine,
                &runners,
                Some(upstream.free_at()),
            )
            .await
            .map_err(|e| format!("provider {}: {e}", target.provider))?;
            targets.insert(
                key,
                TargetEntry {
                    target: target.clone(),
                    kind: built.kind(),
                    provider: built,
                    upstream,
                    circuit: Arc::default(),
                    retries: provider.retries,
                    idle_timeout: provider.timeouts.idle.map(Duration::from_secs),
                    defaults: Arc::new(provider.defaults.clone()),
                },
            );
        }
        let models = config
            .providers
            .iter()
            .flat_map(|(name, p)| p.models.iter().map(|m| (m.clone(), name.clone())))
            .collect();
        let mut circuits: BTreeMap<&str, Vec<Arc<Circuit>>> = BTreeMap::new();
        for entry in targets.values() {
            circuits
                .entry(entry.upstream.name())
                .or_default()
                .push(Arc::clone(&entry.circuit));
        }
        let probes = super::health_checks::start(config, &upstreams, &circuits)?;
        Ok(Self {
            pooled: Self::any_pool(&config.router),
            router: config.router.clone(),
            targets,
            models,
            file: Some(config.file.clone()),
            shown: config.shown.clone(),
            _probes: probes,
        })
    }

    /// The targets to try for a request, in order, and why the first was chosen. `session` keeps
    /// a conversation on one pool member (prompt caches); `salt` (random) spreads ties.
    ///
    /// # Errors
    /// The body is not a Messages request (the client's fault), as far as routing reads it: a
    /// router that reads only the model name stops at the `model` key, and a body that is bad
    /// after it is refused by the provider's parse (same status and message; the answer then
    /// names the target, and the request is logged and counted for it).
    pub fn plan(
        &self,
        body: &[u8],
        session: Option<&str>,
        salt: u64,
    ) -> Result<Plan<'_>, BridgeError> {
        let features = bridge_core::route::features_for(&self.router, body).map_err(|e| {
            BridgeError::Engine(crate::engine::EngineError::Request {
                kind: e.kind(),
                message: e.to_string(),
            })
        })?;
        let now = Instant::now();
        let load = |t: &Target| match self.targets.get(&t.to_string()) {
            Some(entry) => entry.upstream.load(now, entry.circuit.is_open(now)),
            None => bridge_core::route::MemberLoad::idle(1),
        };
        let route = bridge_core::route::route_with(&self.router, &features, load, session, salt);
        let entries: Vec<&TargetEntry> = route
            .targets()
            .filter_map(|t| self.targets.get(&t.to_string()))
            .collect();
        Ok(Plan {
            pool_len: route.pool.len().min(entries.len()),
            entries,
            reason: route.reason,
            pick: route.pick,
            client_model: features.model,
            input_tokens: features.input_tokens,
        })
    }

    /// The upstream of the provider `name`, if a target is on it.
    fn upstream_named(&self, name: &str) -> Option<Arc<Upstream>> {
        self.targets
            .values()
            .find(|e| e.upstream.name() == name)
            .map(|e| Arc::clone(&e.upstream))
    }

    /// Whether a route value names more than one target (then a request's session is read).
    #[must_use]
    pub fn has_pools(&self) -> bool {
        self.pooled
    }

    fn any_pool(router: &RouterConfig) -> bool {
        let router_pools = [
            Some(&router.default),
            router.background.as_ref(),
            router.think.as_ref(),
            router.long_context.as_ref(),
        ];
        router_pools
            .into_iter()
            .flatten()
            .chain(router.rules.iter().map(|r| &r.to))
            .any(|pool| pool.members().len() > 1)
    }

    /// The default target's entry (count_tokens, `/health`'s summary).
    #[must_use]
    pub fn primary(&self) -> Option<&TargetEntry> {
        self.targets.get(&self.router.default.first().to_string())
    }

    /// Every target.
    pub fn entries(&self) -> impl Iterator<Item = &TargetEntry> {
        self.targets.values()
    }

    /// The configured models and their providers.
    #[must_use]
    pub fn models(&self) -> &[(String, String)] {
        &self.models
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_circuit_opens_after_the_threshold_and_closes_on_success() {
        let circuit = Circuit::default();
        let t0 = Instant::now();
        for _ in 0..Circuit::THRESHOLD - 1 {
            circuit.failure(t0, "503");
        }
        assert!(!circuit.is_open(t0));
        circuit.failure(t0, "503");
        assert!(circuit.is_open(t0));
        assert_eq!(circuit.report(t0)["circuit"], "open");
        assert!(!circuit.is_open(t0 + Circuit::COOL_DOWN));
        assert_eq!(
            circuit.report(t0 + Circuit::COOL_DOWN)["circuit"],
            "half-open"
        );
        circuit.success();
        assert_eq!(circuit.report(t0)["circuit"], "closed");
        assert_eq!(circuit.report(t0)["failures_in_a_row"], 0);
        // A passing health probe closes it without counting an answer.
        for _ in 0..Circuit::THRESHOLD {
            circuit.failure(t0, "503");
        }
        assert!(circuit.is_open(t0));
        circuit.close();
        assert!(!circuit.is_open(t0));
        assert_eq!(circuit.report(t0)["answered"], 1);
    }
}
