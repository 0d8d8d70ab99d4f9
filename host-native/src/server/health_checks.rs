//! Active health probes: a provider with `health_check = N` (seconds) is asked for its models
//! list every N seconds, so a dead pool member is skipped before a client's request pays for
//! finding out. A failed probe takes the provider's targets out of their pools (as an open
//! circuit does) until a probe succeeds again; a passing probe also closes the targets'
//! circuits (opened by client requests failing). `/health` shows the last probe.
//!
//! The probes belong to the running [`super::routes::Routes`]: a reload starts new ones and the
//! old ones end with the old routes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use secrecy::ExposeSecret as _;
use tracing::{info, warn};

use super::routes::Circuit;
use super::upstreams::Upstream;
use crate::config::{Config, ProviderKind};

/// The running probes; dropping this ends them.
#[derive(Debug, Default)]
pub struct Probes(Vec<tokio::task::AbortHandle>);

impl Drop for Probes {
    fn drop(&mut self) {
        for probe in &self.0 {
            probe.abort();
        }
    }
}

/// Start a probe for every provider of `config` that sets `health_check` and is in
/// `upstreams` (a provider the router names); `circuits` are its targets' circuits. A Fabstir
/// provider is not probed (its hosts are checked when a session opens).
///
/// # Errors
/// A provider's `ca_cert` cannot be read.
pub fn start(
    config: &Config,
    upstreams: &BTreeMap<&str, Arc<Upstream>>,
    circuits: &BTreeMap<&str, Vec<Arc<Circuit>>>,
) -> Result<Probes, String> {
    let mut probes = Vec::new();
    for (name, provider) in &config.providers {
        let (Some(every), Some(upstream)) = (provider.health_check, upstreams.get(name.as_str()))
        else {
            continue;
        };
        let (http_upstream, path, anthropic) = match &provider.kind {
            ProviderKind::Openai { upstream, .. } | ProviderKind::Responses { upstream, .. } => {
                (upstream, "models", false)
            }
            ProviderKind::Anthropic { upstream } => (upstream, "v1/models", true),
            ProviderKind::Fabstir(_) => continue,
        };
        let http = reqwest::Client::builder()
            .timeout(every.min(Duration::from_secs(10)))
            .use_preconfigured_tls(crate::provider::upstream::tls_config(
                provider.ca_cert.as_deref(),
            )?)
            .build()
            .map_err(|e| format!("provider {name}: cannot build an HTTP client: {e}"))?;
        let base_url = http_upstream.base_url.clone();
        let key = http_upstream
            .api_key
            .as_ref()
            .map(|k| k.expose_secret().to_owned());
        let upstream = Arc::clone(upstream);
        let circuits = circuits.get(name.as_str()).cloned().unwrap_or_default();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let result = crate::provider::probe::get_models(
                    &http,
                    &base_url,
                    path,
                    key.as_deref(),
                    anthropic,
                )
                .await
                .map(|_| ())
                .map_err(|e| crate::redact::redact(&e.to_string()).into_owned());
                if result.is_ok() {
                    for circuit in &circuits {
                        circuit.close();
                    }
                }
                match (&result, upstream.probed(result.clone())) {
                    (Err(why), true) => {
                        warn!(provider = %upstream.name(), %why, "health probe failed: the provider is skipped until a probe succeeds");
                    }
                    (Ok(()), true) => {
                        info!(provider = %upstream.name(), "health probe succeeded: the provider serves again");
                    }
                    _ => {}
                }
            }
        });
        probes.push(task.abort_handle());
    }
    Ok(Probes(probes))
}
