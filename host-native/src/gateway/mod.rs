//! The team gateway: a key per person or service ([`keys`]), a usage and cost ledger
//! ([`ledger`], priced by [`prices`]), limits and budgets that hold across replicas
//! ([`limits`]), all kept in one store ([`store`]: SQLite on one machine, PostgreSQL for many
//! replicas), read back through `GET /v1/usage` and `claude-bridge usage` ([`usage`]) and
//! managed through `/admin/keys` and `claude-bridge keys` ([`admin`]).
//!
//! It is on when the config has `[[keys]]`, `admin_key` or a `[store]` table. A request then
//! goes: [`Gateway::authenticate`] (401 naming what is wrong with the key) →
//! [`Gateway::admit`] (429 over a rate, a budget error when spent) → routing, restricted to the
//! key's `targets` → the answer → [`Admission::finish`] (one ledger record; the limits get
//! back what the request held and pay what it used).

pub mod admin;
pub mod journal;
pub mod keys;
pub mod ledger;
pub mod limits;
pub mod period;
pub mod prices;
pub mod store;
pub mod usage;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;
use tracing::{info, warn};

use self::keys::{KeyEntry, KeyRefusal, KeyRing, KeySource, KeySpec, hash_secret};
use self::ledger::{Ledger, Record};
use self::limits::{Held, LimitRefusal, Limiter};
use self::prices::{Prices, Usage};
use self::store::Store;
use crate::server::observe::Sender;

/// What the config says of the gateway (`admin_key`, `[store]`, `[[keys]]`, prices).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `admin_key`, resolved.
    pub admin_key: Option<SecretString>,
    /// `[store] url` (`None`: the SQLite file under the state directory).
    pub store_url: Option<String>,
    /// `[store] on_error = "closed"`.
    pub closed: bool,
    /// `[[keys]]`: the hash of each secret, and its spec.
    pub keys: Vec<(String, KeySpec)>,
    /// Every provider's and model's price.
    pub prices: Prices,
}

impl Settings {
    /// Whether the gateway is on (keys, an admin key, or a store table).
    #[must_use]
    pub fn enabled(&self, store_table: bool) -> bool {
        store_table || self.admin_key.is_some() || !self.keys.is_empty()
    }
}

/// A failure the gateway answers with.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The key is missing, unknown, revoked or expired (401).
    #[error("{0}")]
    Key(#[from] KeyRefusal),
    /// Only the admin key may do this (403).
    #[error("{0} needs the admin key (admin_key in the config)")]
    NotAdmin(&'static str),
    /// The key may not use any target this request was routed to (403).
    #[error("the key `{key}` may not use {target} (its targets: {allowed})")]
    Target {
        /// The key.
        key: String,
        /// The target the router chose.
        target: String,
        /// The key's `targets`.
        allowed: String,
    },
    /// A limit or budget (429, or a budget error).
    #[error("{0}")]
    Limit(#[from] LimitRefusal),
    /// A request to `/admin` or `/v1/usage` that is wrong (400).
    #[error("{0}")]
    Invalid(String),
    /// A key of that name exists (409).
    #[error("{0}")]
    Conflict(String),
    /// No such key (404).
    #[error("{0}")]
    NotFound(String),
    /// The store failed while answering `/admin` or `/v1/usage` (503).
    #[error("{0}")]
    Store(String),
}

/// Who is calling.
#[derive(Debug, Clone)]
pub enum Caller {
    /// The admin key.
    Admin,
    /// A key.
    Key(Arc<KeyEntry>),
    /// The one `client_key`.
    Shared,
    /// Nobody needs to be anyone (no key is configured).
    Open,
}

impl Caller {
    /// The name the ledger keeps.
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Admin => "admin",
            Self::Key(entry) => &entry.spec.name,
            Self::Shared => "client_key",
            Self::Open => "-",
        }
    }
}

/// How long an unknown key's hash is remembered as unknown (no store lookup for it meanwhile).
const UNKNOWN_FOR: Duration = Duration::from_secs(5);
/// How often the store's keys are read again (a key made or revoked on another replica).
const KEYS_EVERY: Duration = Duration::from_secs(5);

/// The gateway of one process.
pub struct Gateway {
    settings: RwLock<Arc<Settings>>,
    /// SHA-256 of the admin key and of `client_key` (compared with the presented key's).
    admin_hash: RwLock<Option<String>>,
    client_key_hash: Option<String>,

    ring: RwLock<Arc<KeyRing>>,
    unknown: Mutex<BTreeMap<String, Instant>>,
    store: Store,
    limiter: Arc<Limiter>,
    ledger: Arc<Ledger>,
    replica: String,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("store", &self.store.url())
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

/// This process's replica id: host name, process id, and a random part.
fn replica_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| crate::environment::var("HOSTNAME"))
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect::<String>()
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| String::from("host"));
    format!(
        "{host}-{}-{}",
        std::process::id(),
        crate::ids::random_base62(6)
    )
}

/// Where the ledger's journal files live: `$XDG_STATE_HOME/claude-bridge/spool` (or
/// `~/.local/state/…`).
fn spool_dir() -> std::path::PathBuf {
    crate::environment::state_dir()
        .map(|d| d.join("spool"))
        .unwrap_or_else(|| std::env::temp_dir().join("claude-bridge-spool"))
}

impl Gateway {
    /// Open the store, run its migrations, start the ledger's writer and the limits' upkeep.
    /// A store that cannot be reached does not stop the start (with `on_error = "open"`):
    /// migrations are tried again in the background.
    ///
    /// # Errors
    /// The store URL is wrong.
    pub async fn start(settings: Settings, client_key: Option<&str>) -> Result<Arc<Self>, String> {
        let url = match &settings.store_url {
            Some(url) => url.clone(),
            None => store::default_url().ok_or_else(|| {
                String::from(
                    "no state directory for the store (set HOME or XDG_STATE_HOME, or [store] url)",
                )
            })?,
        };
        let store = Store::open(&url, Duration::from_secs(5)).map_err(|e| e.to_string())?;
        let reached = match store.migrate().await {
            Ok(applied) => {
                if !applied.is_empty() {
                    info!(store = store.url(), ?applied, "store: migrations applied");
                }
                true
            }
            Err(error) => {
                if settings.closed {
                    tracing::error!(%error, "store: cannot be reached at start; requests are refused (503) until it is (store.on_error = \"closed\")");
                } else {
                    warn!(%error, "store: cannot be reached at start; serving anyway (store.on_error = \"open\"), records wait");
                }
                let again = store.clone();
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        if again.migrate().await.is_ok() {
                            info!("store: reached; migrations checked");
                            return;
                        }
                    }
                });
                false
            }
        };
        let replica = replica_id();
        let limiter = Arc::new(Limiter::new(store.clone(), &replica, settings.closed));
        let (ledger, _writer) = Ledger::start(
            store.clone(),
            Arc::clone(&limiter),
            &replica,
            spool_dir(),
            reached,
        );
        tokio::spawn(Arc::clone(&limiter).maintain());
        let gateway = Arc::new(Self {
            ring: RwLock::new(Arc::new(KeyRing::new(config_entries(&settings)))),
            admin_hash: RwLock::new(admin_hash(&settings)),
            client_key_hash: client_key.map(hash_secret),

            settings: RwLock::new(Arc::new(settings)),
            unknown: Mutex::new(BTreeMap::new()),
            store,
            limiter,
            ledger,
            replica,
        });
        gateway.reload_keys().await;
        let weak = Arc::downgrade(&gateway);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(KEYS_EVERY).await;
                let Some(gateway) = weak.upgrade() else {
                    return;
                };
                gateway.reload_keys().await;
            }
        });
        info!(store = gateway.store.url(), replica = %gateway.replica, keys = gateway.ring().len(), "gateway: keys, ledger and limits on");
        Ok(gateway)
    }

    fn settings(&self) -> Arc<Settings> {
        Arc::clone(
            &self
                .settings
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn ring(&self) -> Arc<KeyRing> {
        Arc::clone(
            &self
                .ring
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The ledger.
    #[must_use]
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    /// The ledger's rows for `query`, with what this replica has not written yet (asked to
    /// write for up to 2 s first): what `/v1/usage` and the dashboard's budgets read.
    ///
    /// # Errors
    /// The store failed.
    pub async fn usage(
        &self,
        query: &usage::UsageQuery,
    ) -> Result<Vec<usage::UsageRow>, store::StoreError> {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.ledger.flush()).await;
        self.store.usage(query).await
    }

    /// New settings from a reloaded config (keys, prices, the admin key; the store's URL
    /// takes a restart).
    pub async fn reconfigure(&self, settings: Settings) {
        if settings.store_url != self.settings().store_url {
            warn!("config reload: [store] url changed; the new store is used after a restart");
        }
        *self
            .settings
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(settings);
        self.reload_keys().await;
    }

    /// Read the store's keys again, beside the config's.
    pub async fn reload_keys(&self) {
        let settings = self.settings();
        let mut entries = config_entries(&settings);
        match self.store.keys().await {
            Ok(stored) => {
                let names: Vec<String> = entries.iter().map(|(_, e)| e.spec.name.clone()).collect();
                entries.extend(
                    stored
                        .into_iter()
                        .filter(|(_, e)| !names.contains(&e.spec.name)),
                );
            }
            Err(_) => {
                // The store is away: keep the store keys known until now.
                let ring = self.ring();
                entries.extend(
                    ring.entries()
                        .iter()
                        .filter(|e| e.source == KeySource::Store)
                        .filter_map(|e| ring_hash(&ring, &e.spec.name).map(|h| (h, (**e).clone()))),
                );
            }
        }
        *self
            .ring
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(KeyRing::new(entries));
    }

    /// Every key, for `GET /admin/keys`.
    #[must_use]
    pub fn keys(&self) -> Vec<Arc<KeyEntry>> {
        self.ring().entries()
    }

    /// Whether callers need a key: there is an admin key, a `client_key`, or any key (in the
    /// config or made at run time). A gateway with only a store serves anyone, as a bridge
    /// without `client_key` does, until the first key is made.
    #[must_use]
    pub fn requires_key(&self) -> bool {
        self.client_key_hash.is_some()
            || self
                .admin_hash
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .is_some()
            || !self.ring().is_empty()
    }

    /// Who sent `headers`: the admin key, a key, the shared `client_key`, or nobody when no key
    /// is needed.
    ///
    /// # Errors
    /// The key is missing, unknown, revoked or expired.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        now_ms: i64,
    ) -> Result<Caller, KeyRefusal> {
        let Some(presented) = presented_key(headers) else {
            return if self.requires_key() {
                Err(KeyRefusal::Missing)
            } else {
                Ok(Caller::Open)
            };
        };
        let hash = hash_secret(presented);
        let same = |known: &str| bool::from(hash.as_bytes().ct_eq(known.as_bytes()));
        let admin = self
            .admin_hash
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_deref()
            .is_some_and(same);
        if admin {
            return Ok(Caller::Admin);
        }
        if self.client_key_hash.as_deref().is_some_and(same) {
            return Ok(Caller::Shared);
        }
        let entry = match self.ring().get(&hash) {
            Some(entry) => Arc::clone(entry),
            None => match self.look_up(&hash).await {
                Some(entry) => entry,
                // No key exists yet: nobody needs one (what the client sent is its own).
                None if !self.requires_key() => return Ok(Caller::Open),
                None => return Err(KeyRefusal::Unknown),
            },
        };
        match entry.refusal(now_ms) {
            Some(refusal) => Err(refusal),
            None => Ok(Caller::Key(entry)),
        }
    }

    /// A key made on another replica since the last read: asked of the store (an unknown hash
    /// is not asked again for a while).
    async fn look_up(&self, hash: &str) -> Option<Arc<KeyEntry>> {
        {
            let mut unknown = self
                .unknown
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            unknown.retain(|_, at| at.elapsed() < UNKNOWN_FOR);
            if unknown.contains_key(hash) || unknown.len() > 10_000 {
                return None;
            }
        }
        match tokio::time::timeout(Duration::from_secs(2), self.store.key_by_hash(hash)).await {
            Ok(Ok(Some(entry))) => {
                self.reload_keys().await;
                Some(Arc::new(entry))
            }
            _ => {
                self.unknown
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(hash.to_owned(), Instant::now());
                None
            }
        }
    }

    /// Admit a model request of `caller` (limits and budgets); the [`Admission`] goes with the
    /// request to its end.
    ///
    /// # Errors
    /// A limit or budget refuses it.
    pub async fn admit(
        self: &Arc<Self>,
        caller: &Caller,
        sender: &Arc<Sender>,
        now_ms: i64,
    ) -> Result<Arc<Admission>, GatewayError> {
        if self.settings().closed && !self.ledger.healthy() {
            return Err(GatewayError::Limit(LimitRefusal::StoreDown(String::from(
                "the last write to it failed; requests are served again once it answers",
            ))));
        }
        let (targets, held) = match caller {
            Caller::Key(entry) => {
                let held = if entry.spec.limited() {
                    match self.limiter.admit(&entry.spec, now_ms).await {
                        Ok(held) => Some(held),
                        Err(refusal) => {
                            crate::server::observe::Metrics::global()
                                .key_refused(&entry.spec.name, refusal_reason(&refusal));
                            return Err(refusal.into());
                        }
                    }
                } else {
                    None
                };
                (entry.spec.targets.clone(), held)
            }
            _ => (Vec::new(), None),
        };
        Ok(Arc::new(Admission {
            gateway: Arc::clone(self),
            key: caller.name().to_owned(),
            targets,
            held,
            sender: Arc::clone(sender),
            at_ms: now_ms,
            started: Instant::now(),
            done: AtomicBool::new(false),
            spend: Arc::new(Spend::default()),
        }))
    }

    /// At shutdown: the last records to the store (or left in the journal), leases given back.
    pub async fn close(&self) {
        self.ledger.close(Duration::from_secs(5)).await;
        let _ = tokio::time::timeout(Duration::from_secs(3), self.limiter.release_all()).await;
    }
}

fn admin_hash(settings: &Settings) -> Option<String> {
    settings
        .admin_key
        .as_ref()
        .map(|k| hash_secret(k.expose_secret()))
}

fn refusal_reason(refusal: &LimitRefusal) -> &'static str {
    match refusal {
        LimitRefusal::Rate { setting, .. } | LimitRefusal::Budget { setting, .. } => setting,
        LimitRefusal::StoreDown(_) => "store_down",
    }
}

fn ring_hash(ring: &KeyRing, name: &str) -> Option<String> {
    ring.hash_of(name)
}

fn config_entries(settings: &Settings) -> Vec<(String, KeyEntry)> {
    settings
        .keys
        .iter()
        .map(|(hash, spec)| {
            (
                hash.clone(),
                KeyEntry {
                    spec: spec.clone(),
                    expires_ms: spec.expires_ms().ok().flatten(),
                    revoked_ms: None,
                    created_ms: None,
                    source: KeySource::Config,
                },
            )
        })
        .collect()
}

/// The key a request carries: `x-api-key`, else `Authorization: Bearer`.
#[must_use]
pub fn presented_key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| {
                    let (scheme, token) = v.split_once(' ')?;
                    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
                })
        })
        .filter(|k| !k.is_empty())
}

/// What a request paid in a chain token (a Fabstir job's tokens at its price).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paid {
    /// In the token's base units (wei, USDC's 6-decimal units).
    pub amount: u128,
    /// `ETH` or `USDC`.
    pub unit: &'static str,
    /// The token's decimals.
    pub decimals: u32,
}

impl Paid {
    /// The amount in whole tokens, as a decimal string (`0.000042`).
    #[must_use]
    pub fn whole(&self) -> String {
        let scale = 10u128.pow(self.decimals);
        let (int, frac) = (self.amount / scale, self.amount % scale);
        let frac = format!("{frac:0width$}", width = self.decimals as usize);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            int.to_string()
        } else {
            format!("{int}.{frac}")
        }
    }
}

/// Where a provider puts what a request paid (a Fabstir job's share), for its record.
#[derive(Debug, Default)]
pub struct Spend(Mutex<Option<Paid>>);

impl Spend {
    /// The request paid `paid` (added to what it paid before: a retried prompt pays twice).
    pub fn add(&self, paid: Paid) {
        let mut slot = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Some(match *slot {
            Some(before) if before.unit == paid.unit => Paid {
                amount: before.amount.saturating_add(paid.amount),
                ..paid
            },
            _ => paid,
        });
    }

    fn get(&self) -> Option<Paid> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How a request ended, for its record.
#[derive(Debug, Clone, Default)]
pub struct Ending {
    /// The route that chose the first target.
    pub route: String,
    /// `provider,model` that answered (or was tried last).
    pub target: String,
    /// The client's model name.
    pub model: String,
    /// Targets tried.
    pub attempts: usize,
    /// The HTTP status the client got.
    pub status: u16,
    /// The error it ended with.
    pub error_kind: Option<String>,
    /// Time to first content.
    pub ttft: Option<Duration>,
    /// Token counts; `None`: the upstream gave none.
    pub usage: Option<Usage>,
}

/// A request admitted by the gateway, until it ends.
pub struct Admission {
    gateway: Arc<Gateway>,
    key: String,
    targets: Vec<String>,
    held: Option<Held>,
    /// Who sent it: request id, client, session, front.
    sender: Arc<Sender>,
    at_ms: i64,
    started: Instant,
    done: AtomicBool,
    spend: Arc<Spend>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("key", &self.key)
            .field("request_id", &self.sender.request_id)
            .finish_non_exhaustive()
    }
}

impl Admission {
    /// Where a provider puts what the request paid on-chain.
    #[must_use]
    pub fn spend(&self) -> Arc<Spend> {
        Arc::clone(&self.spend)
    }

    /// Whether the key may use `target` (`provider,model`).
    #[must_use]
    pub fn allows(&self, target: &str) -> bool {
        keys::target_allowed(&self.targets, target)
    }

    /// The refusal for a request none of whose targets the key may use.
    #[must_use]
    pub fn refuse_target(&self, target: &str) -> GatewayError {
        GatewayError::Target {
            key: self.key.clone(),
            target: target.to_owned(),
            allowed: self.targets.join(", "),
        }
    }

    /// The request was refused before any target was tried, with `status`.
    pub fn finish_refused(&self, status: u16) {
        let kind = bridge_core::anthropic::events::ErrorKind::from_upstream_status(status);
        self.finish(&Ending {
            status,
            error_kind: Some(kind.as_str().to_owned()),
            ..Ending::default()
        });
    }

    /// The request is over: write its record, pay its limits. Only the first call counts.
    /// Returns what it cost in USD (`None`: no price for its target, or not the first call).
    pub fn finish(&self, ending: &Ending) -> Option<f64> {
        if self.done.swap(true, Ordering::AcqRel) {
            return None;
        }
        let settings = self.gateway.settings();
        let usage = ending.usage.unwrap_or_default();
        let paid = self.spend.get();
        // A Fabstir request costs what its job charged for it, in USD at the configured rate.
        let cost = match &paid {
            Some(paid) => settings.prices.paid_cost(&ending.target, paid),
            None => settings.prices.cost(&ending.target, &usage),
        };
        let tokens = usage.input + usage.output + usage.cache_read + usage.cache_write;
        let settles = self.held.as_ref().map_or_else(Vec::new, |held| {
            self.gateway
                .limiter
                .finish(held, tokens as f64, cost.unwrap_or(0.0))
        });
        let upstream_model = ending
            .target
            .split_once(',')
            .map_or("", |(_, m)| m)
            .to_owned();
        crate::server::observe::Metrics::global().key_used(
            &self.key,
            ending.status,
            &usage,
            cost.unwrap_or(0.0),
        );
        self.gateway.ledger.record(Record {
            id: self.sender.request_id.clone(),
            at_ms: self.at_ms,
            key: self.key.clone(),
            client: self.sender.client.to_owned(),
            session: self.sender.session.clone(),
            front: self.sender.front.to_owned(),
            route: ending.route.clone(),
            target: ending.target.clone(),
            model: ending.model.clone(),
            upstream_model,
            input_tokens: usage.input as i64,
            output_tokens: usage.output as i64,
            cache_read_tokens: usage.cache_read as i64,
            cache_write_tokens: usage.cache_write as i64,
            estimated: ending.usage.is_none(),
            cost_usd: cost.unwrap_or(0.0),
            priced: cost.is_some(),
            ttft_ms: ending.ttft.map(|t| t.as_millis() as i64),
            duration_ms: self.started.elapsed().as_millis() as i64,
            status: i64::from(ending.status),
            error_kind: ending.error_kind.clone(),
            attempts: ending.attempts as i64,
            paid: paid.as_ref().map(Paid::whole),
            paid_unit: paid.map(|p| p.unit.to_owned()),
            replica: self.gateway.replica.clone(),
            settles,
        });
        cost
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        // A request that ended without saying how (it failed before routing, or its task was
        // dropped): recorded all the same, so nothing it held stays held.
        if !self.done.load(Ordering::Acquire) {
            self.finish(&Ending {
                status: 499,
                error_kind: Some(String::from("client_closed")),
                ..Ending::default()
            });
        }
    }
}
