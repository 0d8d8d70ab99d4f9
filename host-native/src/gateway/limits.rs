//! Limits that hold across replicas: `rpm`, `tpm`, `max_parallel` and budgets count for the
//! whole deployment, yet a request does not wait on the store in the common case.
//!
//! Each replica *leases* slices of a key's quota from the store ([`Store::grant`]: one
//! conditional `UPDATE`, so the slices granted to all replicas together never exceed the
//! limit) and spends them locally. A slice running low is topped up in the background; only a
//! replica whose slice is empty waits for the store, and then for one lease however many
//! requests found it empty at once. What was spent is *settled* with the ledger's next write
//! (the same transaction), unused room is given back after a short idle time, and the leases
//! of a replica that died expire ([`LEASE_TTL_MS`]) and are swept back.
//!
//! ## The bound (README, "Running it for a team")
//! - `rpm` and `max_parallel`: never over the limit while the store answers — every request
//!   admitted was covered by a leased unit. Unused leased units can make the deployment admit
//!   fewer than the limit, by at most one slice per replica (10% of the limit, at least 1),
//!   until they are given back (2 s idle) or expire (30 s, a replica that died).
//! - `tpm`, `budget_usd`, `budget_tokens`: a request's tokens and cost are known only when it
//!   ends, so admitting it reserves the room a request of its key is expected to use (what its
//!   recent requests used: quick to rise, slow to fall) from its replica's slice, and it is
//!   refused when the store has no such room left. What it uses is settled with its ledger
//!   record (the same transaction). The overshoot is what the requests in flight when the limit
//!   is reached use beyond their reservations, plus what other replicas used beyond theirs and
//!   have not yet written (the ledger writes a batch every 50 ms at most on PostgreSQL, 250 ms
//!   on SQLite: that long's worth).
//! - The store down with `on_error = "open"`: each replica counts on its own against what the
//!   store said was left at its last grant (a spent budget stays spent), so N replicas can
//!   together admit up to N × what was left when the store went away; what they spent is
//!   settled when the store is back. `on_error = "closed"` refuses (503) instead.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::warn;

use super::keys::KeySpec;
use super::ledger::Settle;
use super::period::{minute_window, rfc3339};
use super::store::{Settlement, Store};

/// How long a lease lives without renewal.
pub const LEASE_TTL_MS: i64 = 30_000;
/// Unused room is given back after this long without a request.
const IDLE_GIVE_BACK: Duration = Duration::from_secs(2);
/// How long an admission waits for the store before the request is served (open) or refused
/// (closed).
const STORE_WAIT: Duration = Duration::from_secs(2);
/// Why a request counts alone when the store did not answer within [`STORE_WAIT`].
const NO_ANSWER: &str = "no answer within 2 s";

/// What is counted (in the store and a ledger row, by its [`Metric::name`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Requests per minute.
    Rpm = 0,
    /// Tokens per minute.
    Tpm,
    /// Requests in flight.
    Parallel,
    /// US dollars per budget period.
    Usd,
    /// Tokens per budget period.
    Tokens,
}

impl Metric {
    /// Every metric, in the order of their numbers.
    const ALL: [Self; 5] = [
        Self::Rpm,
        Self::Tpm,
        Self::Parallel,
        Self::Usd,
        Self::Tokens,
    ];

    /// Its name in the store.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Rpm => "rpm",
            Self::Tpm => "tpm",
            Self::Parallel => "parallel",
            Self::Usd => "usd",
            Self::Tokens => "tokens",
        }
    }

    /// Its name in the config.
    const fn setting(self) -> &'static str {
        match self {
            Self::Rpm => "rpm",
            Self::Tpm => "tpm",
            Self::Parallel => "max_parallel",
            Self::Usd => "budget_usd",
            Self::Tokens => "budget_tokens",
        }
    }

    /// Whether a request takes one unit when it is admitted (else it needs room and pays at
    /// the end).
    const fn counts_requests(self) -> bool {
        matches!(self, Self::Rpm | Self::Parallel)
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimitRefusal {
    /// Over a rate (429, retry after).
    #[error("the key `{key}` is over its {setting} = {limit}; try again in {retry_after} s")]
    Rate {
        /// The key.
        key: String,
        /// `rpm`, `tpm`, `max_parallel`.
        setting: &'static str,
        /// The limit.
        limit: String,
        /// Seconds until there is room.
        retry_after: u64,
    },
    /// A budget is spent (not retried).
    #[error(
        "the key `{key}` has spent its {setting} budget of {limit} for this {period}{resets}; ask this bridge's admin to raise it"
    )]
    Budget {
        /// The key.
        key: String,
        /// `budget_usd`, `budget_tokens`.
        setting: &'static str,
        /// The budget.
        limit: String,
        /// Its period.
        period: &'static str,
        /// `; it resets at …`, or nothing for `total`.
        resets: String,
    },
    /// The store cannot be reached and `on_error = "closed"`.
    #[error(
        "the bridge's store cannot be reached and the bridge is set to refuse then (store.on_error = \"closed\"): {0}"
    )]
    StoreDown(String),
}

impl LimitRefusal {
    /// Seconds a client should wait (rates only).
    #[must_use]
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Self::Rate { retry_after, .. } => Some(*retry_after),
            Self::StoreDown(_) => Some(5),
            Self::Budget { .. } => None,
        }
    }
}

#[derive(Debug, Default)]
struct Bucket {
    win: i64,
    /// Leased room not yet spent here (may go below 0: a request used more than was left).
    local: f64,
    /// Spent here, without a lease (the store was down).
    fallback_used: f64,
    /// What a request of the key used lately (reserved when the next is admitted).
    expect: f64,
    /// The quota's settled + leased total at the last grant: with the store away, a replica
    /// admits only while this, plus what it spent alone since, leaves room.
    known_used: f64,
    /// Spent here beyond the slice and not yet settled in the store: the store cannot see it
    /// yet, so grants ask for room under `limit - overflow`.
    overflow: f64,
    last_used: Option<Instant>,
    /// A lease from the store is on its way (a request's, or a background top-up): the
    /// requests that find the slice empty meanwhile wait for it instead of asking too.
    refilling: bool,
    /// Leases of this window the store answered, and its last answer: a request that waited
    /// for a lease takes its answer as its own instead of asking again.
    answers: u64,
    last_answer: Answer,
}

/// What the store said to a lease.
#[derive(Debug, Clone, Default)]
enum Answer {
    /// Room was granted.
    #[default]
    Room,
    /// No room under the limit.
    NoRoom,
    /// The store failed or did not answer in time (the error).
    Failed(String),
}

impl Answer {
    fn of(granted: &Granted) -> Self {
        match granted {
            Ok((granted, _)) if *granted > 0.0 => Self::Room,
            Ok(_) => Self::NoRoom,
            Err(error) => Self::Failed(error.clone()),
        }
    }
}

impl Bucket {
    /// Move to window `win` (a new minute or period starts empty; what a request of the key
    /// is expected to use carries over).
    fn enter(&mut self, win: i64) {
        if self.win != win {
            *self = Self {
                win,
                expect: self.expect,
                ..Self::default()
            };
        }
    }

    /// A unit (a slot, a request) comes back: to what was counted alone first, else the slice.
    fn return_unit(&mut self, amount: f64) {
        if self.fallback_used >= 1.0 {
            self.fallback_used -= 1.0;
        } else {
            self.local += amount;
        }
    }
}

/// Every key's buckets, one a metric: found by the key's name without making a `String` of it
/// (a request looks its key's buckets up about ten times).
#[derive(Debug, Default)]
struct Buckets {
    /// Each key's place in `slots`.
    index: BTreeMap<String, usize>,
    /// Each key, and its buckets by [`Metric`].
    slots: Vec<(String, [Option<Bucket>; 5])>,
}

impl Buckets {
    fn get(&self, key: &str, metric: Metric) -> Option<&Bucket> {
        let (_, metrics) = self.slots.get(*self.index.get(key)?)?;
        metrics[metric as usize].as_ref()
    }

    fn get_mut(&mut self, key: &str, metric: Metric) -> Option<&mut Bucket> {
        let (_, metrics) = self.slots.get_mut(*self.index.get(key)?)?;
        metrics[metric as usize].as_mut()
    }

    /// The bucket, made (empty) if the key or the metric has none yet.
    fn entry(&mut self, key: &str, metric: Metric) -> &mut Bucket {
        let at = match self.index.get(key) {
            Some(&at) => at,
            None => {
                self.index.insert(key.to_owned(), self.slots.len());
                self.slots.push((key.to_owned(), Default::default()));
                self.slots.len() - 1
            }
        };
        self.slots[at].1[metric as usize].get_or_insert_with(Bucket::default)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = ((&String, Metric), &mut Bucket)> {
        self.slots.iter_mut().flat_map(|(key, metrics)| {
            let key: &String = key;
            metrics
                .iter_mut()
                .zip(Metric::ALL)
                .filter_map(move |(bucket, metric)| Some(((key, metric), bucket.as_mut()?)))
        })
    }
}

/// What a replica's own slice said.
enum Local {
    /// Taken (or there was room); `refill`: top the slice up.
    Taken { refill: bool },
    /// No room here; a lease is on its way (another request's, or a top-up). `answers`: how
    /// many leases the store had answered before it.
    Wait { answers: u64 },
    /// No room here and nothing on its way: the caller asks the store (marked on its way).
    Lease,
    /// No room here, nothing on its way, and the caller asked the store already.
    Refused,
}

/// What the store answered a lease: room granted and the quota's total, or the error.
type Granted = Result<(f64, f64), String>;

/// A request's lease on its way; when it ends, however it ends (the request's future may be
/// dropped while it waits on the store: then there is no answer), it lands
/// ([`Limiter::landed`]).
struct Leasing<'a> {
    limiter: &'a Limiter,
    key: &'a str,
    metric: Metric,
    win: i64,
    granted: Option<Granted>,
}

impl Drop for Leasing<'_> {
    fn drop(&mut self) {
        self.limiter
            .landed(self.key, self.metric, self.win, self.granted.as_ref());
    }
}

/// A request's hold on its key's limits, given back by [`Limiter::finish`].
#[derive(Debug, Clone)]
pub struct Held {
    key: String,
    /// `(metric, window, reserved)` of what it pays at the end: room reserved at admission
    /// for what a request of this key is expected to use.
    pays: Vec<(Metric, i64, f64)>,
    /// `(metric, window)` of the unit it took when admitted (`rpm`).
    requests: Vec<(Metric, i64)>,
    parallel: bool,
}

/// One replica's share of every key's limits.
#[derive(Debug)]
pub struct Limiter {
    store: Store,
    replica: String,
    closed: bool,
    buckets: Mutex<Buckets>,
    /// When "counting alone" was last logged (once every 10 s while the store is away).
    warned_alone: Mutex<Option<Instant>>,
    /// Woken when a lease (a request's, or a background top-up) lands.
    refilled: tokio::sync::Notify,
}

impl Limiter {
    /// The limiter of `replica` on `store`; `closed` refuses when the store cannot be reached.
    #[must_use]
    pub fn new(store: Store, replica: &str, closed: bool) -> Self {
        Self {
            store,
            replica: replica.to_owned(),
            closed,
            buckets: Mutex::new(Buckets::default()),
            warned_alone: Mutex::new(None),
            refilled: tokio::sync::Notify::new(),
        }
    }

    fn buckets(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The limits of `spec` that apply, with their window at `now_ms` and its end.
    fn limits(spec: &KeySpec, now_ms: i64) -> Vec<(Metric, f64, i64, Option<i64>)> {
        let minute = minute_window(now_ms);
        let period = spec.budget_period.window(now_ms);
        let mut out = Vec::new();
        let mut add = |metric, limit: Option<f64>, win: i64, end: Option<i64>| {
            if let Some(limit) = limit {
                out.push((metric, limit, win, end));
            }
        };
        add(
            Metric::Parallel,
            spec.max_parallel.map(|v| v as f64),
            0,
            None,
        );
        add(
            Metric::Rpm,
            spec.rpm.map(|v| v as f64),
            minute.start_ms,
            Some(minute.end_ms),
        );
        add(
            Metric::Tpm,
            spec.tpm.map(|v| v as f64),
            minute.start_ms,
            Some(minute.end_ms),
        );
        add(Metric::Usd, spec.budget_usd, period.start_ms, period.end_ms);
        add(
            Metric::Tokens,
            spec.budget_tokens.map(|v| v as f64),
            period.start_ms,
            period.end_ms,
        );
        out
    }

    /// Admit a request of the key `spec` at `now_ms`, or say which limit refuses it. Waits on
    /// the store only when this replica's slice of a limit is empty.
    ///
    /// # Errors
    /// The limit that refused.
    pub async fn admit(
        self: &Arc<Self>,
        spec: &KeySpec,
        now_ms: i64,
    ) -> Result<Held, LimitRefusal> {
        let mut held = Held {
            key: spec.name.clone(),
            pays: Vec::new(),
            requests: Vec::new(),
            parallel: false,
        };
        for (metric, limit, win, end) in Self::limits(spec, now_ms) {
            match self.take(spec, metric, limit, win, end, now_ms).await {
                Err(refusal) => {
                    // Give back what it took so far (slots, units, reserved room): the store
                    // never saw it used, so it stays leased here.
                    self.give_back(&held);
                    return Err(refusal);
                }
                Ok(reserved) => {
                    if metric == Metric::Parallel {
                        held.parallel = true;
                    } else if metric.counts_requests() {
                        held.requests.push((metric, win));
                    } else {
                        held.pays.push((metric, win, reserved));
                    }
                }
            }
        }
        Ok(held)
    }

    /// Take one unit of one limit (`rpm`, `max_parallel`), or reserve the room a request of
    /// this key is expected to use (tokens, dollars: what its recent requests used); returns
    /// what was taken.
    async fn take(
        self: &Arc<Self>,
        spec: &KeySpec,
        metric: Metric,
        limit: f64,
        win: i64,
        end: Option<i64>,
        now_ms: i64,
    ) -> Result<f64, LimitRefusal> {
        let key = spec.name.as_str();
        let need = if metric.counts_requests() {
            1.0
        } else {
            self.expected(key, metric).max(f64::MIN_POSITIVE)
        };
        // Slice sizes: a tenth of the limit for rates and slots, a twentieth for budgets.
        let (want, min) = match metric {
            Metric::Parallel | Metric::Rpm => ((limit / 10.0).ceil().max(1.0), 1.0),
            Metric::Tpm | Metric::Tokens => (
                (limit / 20.0).ceil().max(1.0).max(2.0 * need),
                need.max(1.0),
            ),
            Metric::Usd => ((limit / 20.0).max(2.0 * need), need.max(limit / 1000.0)),
        };
        let mut asked_store = false;
        // Registered for the next landing lease only once a look found one on its way, and the
        // slice looked at again before waiting: a lease landing in between is not missed, and
        // a request that finds room (nearly every one) registers nothing.
        let mut landed: Option<std::pin::Pin<Box<tokio::sync::futures::Notified<'_>>>> = None;
        loop {
            match self.take_local(key, metric, win, need, want, !asked_store) {
                Local::Taken { refill } => {
                    if refill {
                        self.refill(key, metric, win, want, min, limit, now_ms);
                    }
                    return Ok(if need > f64::MIN_POSITIVE { need } else { 0.0 });
                }
                // Another request's lease or a top-up is on its way: one store call for a
                // burst of requests, not one each (64 requests at once after an idle spell
                // made 64 grants a limit, and each took a whole slice).
                Local::Wait { answers } => {
                    let Some(waiting) = landed.as_mut() else {
                        let mut waiting = Box::pin(self.refilled.notified());
                        waiting.as_mut().enable();
                        landed = Some(waiting);
                        continue;
                    };
                    let woke = tokio::time::timeout(STORE_WAIT, waiting.as_mut()).await;
                    landed = None;
                    if woke.is_err() {
                        return self
                            .without_store(key, metric, limit, win, NO_ANSWER)
                            .map(|()| 0.0);
                    }
                    // What the store said to the lease it waited for is its answer too: a
                    // burst over the limit, or with the store away, does not ask once a request.
                    match self.answer_since(key, metric, answers) {
                        Some(Answer::NoRoom) => asked_store = true,
                        Some(Answer::Failed(error)) => {
                            return self
                                .without_store(key, metric, limit, win, &error)
                                .map(|()| 0.0);
                        }
                        Some(Answer::Room) | None => {}
                    }
                }
                // The slice is empty and nothing is on its way: this request asks the store.
                Local::Lease => {
                    asked_store = true;
                    let mut leasing = Leasing {
                        limiter: self,
                        key,
                        metric,
                        win,
                        granted: None,
                    };
                    let granted = tokio::time::timeout(
                        STORE_WAIT,
                        self.lease(key, metric, win, (want, min), limit, now_ms),
                    )
                    .await
                    .unwrap_or_else(|_| Err(NO_ANSWER.to_owned()));
                    let failed = granted.as_ref().err().cloned();
                    leasing.granted = Some(granted);
                    drop(leasing);
                    if let Some(error) = failed {
                        return self
                            .without_store(key, metric, limit, win, &error)
                            .map(|()| 0.0);
                    }
                }
                // The store had no room when this request asked, and nothing is on its way.
                Local::Refused => break,
            }
        }
        Err(refusal(spec, metric, limit, end, now_ms))
    }

    /// Take from this replica's slice, if it has room; else say whether to wait for a lease
    /// on its way or (`may_lease`) to ask the store, which marks a lease on its way.
    fn take_local(
        &self,
        key: &str,
        metric: Metric,
        win: i64,
        need: f64,
        want: f64,
        may_lease: bool,
    ) -> Local {
        let mut buckets = self.buckets();
        let bucket = buckets.entry(key, metric);
        bucket.enter(win);
        if bucket.local < need {
            return match (bucket.refilling, may_lease) {
                (true, _) => Local::Wait {
                    answers: bucket.answers,
                },
                (false, true) => {
                    bucket.refilling = true;
                    Local::Lease
                }
                (false, false) => Local::Refused,
            };
        }
        if metric.counts_requests() {
            bucket.local -= 1.0;
        } else if need > f64::MIN_POSITIVE {
            // Reserved: requests at once do not all count on the same room.
            bucket.local -= need;
        }
        bucket.last_used = Some(Instant::now());
        let refill = bucket.local < want / 2.0 && !bucket.refilling && metric != Metric::Parallel;
        bucket.refilling |= refill;
        Local::Taken { refill }
    }

    /// A lease landed with what the store `granted` (`None`: the request that asked was
    /// dropped meanwhile): its room is in the slice, the next request may ask, and those
    /// waiting look again.
    fn landed(&self, key: &str, metric: Metric, win: i64, granted: Option<&Granted>) {
        if let Some(bucket) = self.buckets().get_mut(key, metric)
            && bucket.win == win
        {
            bucket.refilling = false;
            if let Some(Ok((granted, used))) = granted {
                bucket.local += granted;
                bucket.known_used = *used;
            }
            if let Some(granted) = granted {
                bucket.answers += 1;
                bucket.last_answer = Answer::of(granted);
            }
        }
        self.refilled.notify_waiters();
    }

    /// Ask the store for a slice of `(want, at least min)` under the limit less what this
    /// replica spent that the store has not seen yet; what it granted and the quota's total.
    async fn lease(
        &self,
        key: &str,
        metric: Metric,
        win: i64,
        (want, min): (f64, f64),
        limit: f64,
        now_ms: i64,
    ) -> Granted {
        let room = limit - self.overflow(key, metric, win);
        self.store
            .grant(
                &self.replica,
                key,
                metric.name(),
                win,
                want,
                min,
                room,
                now_ms + LEASE_TTL_MS,
            )
            .await
            .map_err(|error| error.to_string())
    }

    /// What this replica spent beyond its slices that the store has not settled yet.
    fn overflow(&self, key: &str, metric: Metric, win: i64) -> f64 {
        self.buckets()
            .get(key, metric)
            .filter(|b| b.win == win)
            .map_or(0.0, |b| b.overflow)
    }

    /// The store settled these: what overflowed is the store's to count now.
    pub fn settled(&self, settlements: &[Settlement]) {
        let mut buckets = self.buckets();
        for s in settlements.iter().filter(|s| s.replica == self.replica) {
            if let Some(bucket) = buckets.get_mut(&s.key, s.metric)
                && bucket.win == s.win
            {
                bucket.overflow = (bucket.overflow - s.used).max(0.0);
            }
        }
    }

    /// A request refused by a later limit gives back what it took: its slot, its units and
    /// the room it reserved.
    fn give_back(&self, held: &Held) {
        let mut buckets = self.buckets();
        let back = held
            .requests
            .iter()
            .map(|(m, w)| (*m, *w, 1.0))
            .chain(held.pays.iter().copied())
            .chain(held.parallel.then_some((Metric::Parallel, 0, 1.0)));
        for (metric, win, amount) in back {
            if let Some(bucket) = buckets.get_mut(&held.key, metric)
                && bucket.win == win
            {
                if metric.counts_requests() {
                    bucket.return_unit(amount);
                } else {
                    bucket.local += amount;
                }
            }
        }
    }

    /// What a request of `key` is expected to use of `metric` (0 before its first).
    fn expected(&self, key: &str, metric: Metric) -> f64 {
        self.buckets().get(key, metric).map_or(0.0, |b| b.expect)
    }

    /// The store's last answer to a lease of this window, if it answered one since it had
    /// answered `answers`.
    fn answer_since(&self, key: &str, metric: Metric, answers: u64) -> Option<Answer> {
        self.buckets()
            .get(key, metric)
            .filter(|b| b.answers > answers)
            .map(|b| b.last_answer.clone())
    }

    /// Top a slice up in the background.
    #[expect(
        clippy::too_many_arguments,
        reason = "the lease's coordinates and terms"
    )]
    fn refill(
        self: &Arc<Self>,
        key: &str,
        metric: Metric,
        win: i64,
        want: f64,
        min: f64,
        limit: f64,
        now_ms: i64,
    ) {
        let this = Arc::clone(self);
        let key = key.to_owned();
        tokio::spawn(async move {
            let granted = this
                .lease(&key, metric, win, (want, min), limit, now_ms)
                .await;
            this.landed(&key, metric, win, Some(&granted));
        });
    }

    /// The store did not answer: refuse (closed) or count here against the whole limit (open).
    fn without_store(
        &self,
        key: &str,
        metric: Metric,
        limit: f64,
        win: i64,
        error: &str,
    ) -> Result<(), LimitRefusal> {
        if self.closed {
            return Err(LimitRefusal::StoreDown(error.to_owned()));
        }
        let mut warned = self
            .warned_alone
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
            *warned = Some(Instant::now());
            warn!(
                key,
                limit = metric.setting(),
                error,
                "limits: the store does not answer; counting on this replica alone (store.on_error = \"open\")"
            );
        }
        drop(warned);
        let mut buckets = self.buckets();
        let bucket = buckets.entry(key, metric);
        bucket.enter(win);
        if bucket.known_used + bucket.fallback_used + bucket.overflow >= limit {
            return Err(LimitRefusal::StoreDown(format!(
                "{error}; and this replica alone has used the key's whole {}",
                metric.setting()
            )));
        }
        // Tokens and dollars: room is checked here, the use counted when the request ends.
        if metric.counts_requests() {
            bucket.fallback_used += 1.0;
        }
        Ok(())
    }

    /// The request is over: it used `tokens` and cost `usd`. Returns what it used of each
    /// quota, for its ledger record (the store settles it when the record is written).
    pub fn finish(&self, held: &Held, tokens: f64, usd: f64) -> Vec<Settle> {
        let mut buckets = self.buckets();
        if held.parallel
            && let Some(bucket) = buckets.get_mut(&held.key, Metric::Parallel)
        {
            bucket.return_unit(1.0);
            bucket.last_used = Some(Instant::now());
        }
        let mut settles: Vec<Settle> = held
            .requests
            .iter()
            .map(|(metric, win)| Settle {
                metric: *metric,
                win: *win,
                used: 1.0,
            })
            .collect();
        for (metric, win, reserved) in &held.pays {
            let used = if *metric == Metric::Usd { usd } else { tokens };
            if let Some(bucket) = buckets.get_mut(&held.key, *metric)
                && bucket.win == *win
            {
                if used <= *reserved {
                    bucket.local += reserved - used;
                } else {
                    // Beyond what was reserved: from the slice while it lasts, then this
                    // replica's own (counted against the whole limit if the store stops
                    // answering); the store settles all of it.
                    let from_slice = (used - reserved).min(bucket.local.max(0.0));
                    bucket.local -= from_slice;
                    bucket.overflow += used - reserved - from_slice;
                }
                // Quick to rise, slow to fall: the room the next request reserves.
                bucket.expect = used.max(bucket.expect * 0.9 + used * 0.1);
            }
            if used <= 0.0 {
                continue;
            }
            settles.push(Settle {
                metric: *metric,
                win: *win,
                used,
            });
        }
        settles
    }

    /// This replica's id (its leases are under it).
    #[must_use]
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Background upkeep, every second until the process ends: give back room unused for
    /// [`IDLE_GIVE_BACK`], renew this replica's leases, sweep those of replicas that died.
    pub async fn maintain(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut n: u64 = 0;
        loop {
            tick.tick().await;
            n += 1;
            let now = super::store::now_ms();
            let idle: Vec<(String, Metric, i64, f64)> = {
                let mut buckets = self.buckets();
                buckets
                    .iter_mut()
                    .filter(|(_, b)| {
                        b.local >= 1e-9
                            && !b.refilling
                            && b.last_used.is_none_or(|t| t.elapsed() >= IDLE_GIVE_BACK)
                    })
                    .map(|((key, metric), b)| {
                        let back = if metric.counts_requests() {
                            b.local.floor()
                        } else {
                            b.local
                        };
                        b.local -= back;
                        (key.clone(), metric, b.win, back)
                    })
                    .filter(|(_, _, _, back)| *back > 0.0)
                    .collect()
            };
            // A release that fails is kept until the lease expires; the room returns then.
            for (key, metric, win, back) in idle {
                let _ = self
                    .store
                    .release(&self.replica, &key, metric.name(), win, back)
                    .await;
            }
            if n.is_multiple_of(5) {
                let _ = self.store.renew(&self.replica, now + LEASE_TTL_MS).await;
            }
            if n.is_multiple_of(10) {
                let _ = self.store.sweep(now, now - 2 * 60_000).await;
            }
        }
    }

    /// At shutdown: give back every lease.
    pub async fn release_all(&self) {
        let all: Vec<(String, Metric, i64, f64)> = {
            let mut buckets = self.buckets();
            buckets
                .iter_mut()
                .map(|((key, metric), b)| {
                    let back = b.local.max(0.0);
                    b.local = 0.0;
                    (key.clone(), metric, b.win, back)
                })
                .filter(|(_, _, _, back)| *back > 0.0)
                .collect()
        };
        for (key, metric, win, back) in all {
            let _ = self
                .store
                .release(&self.replica, &key, metric.name(), win, back)
                .await;
        }
    }
}

fn refusal(
    spec: &KeySpec,
    metric: Metric,
    limit: f64,
    end: Option<i64>,
    now_ms: i64,
) -> LimitRefusal {
    let key = spec.name.clone();
    let shown = if metric == Metric::Usd {
        format!("${limit}")
    } else {
        format!("{limit}")
    };
    match metric {
        Metric::Rpm | Metric::Tpm | Metric::Parallel => LimitRefusal::Rate {
            key,
            setting: metric.setting(),
            limit: shown,
            retry_after: end.map_or(1, |end| {
                ((end - now_ms).max(0) as u64).div_ceil(1000).max(1)
            }),
        },
        Metric::Usd | Metric::Tokens => LimitRefusal::Budget {
            key,
            setting: metric.setting(),
            limit: shown,
            period: match spec.budget_period {
                super::period::BudgetPeriod::FiveHours => "5-hour block",
                super::period::BudgetPeriod::Day => "day",
                super::period::BudgetPeriod::Week => "week",
                super::period::BudgetPeriod::Month => "month",
                super::period::BudgetPeriod::Total => "key's lifetime",
            },
            resets: end
                .map(|e| format!("; it resets at {}", rfc3339(e)))
                .unwrap_or_default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_is_its_own_place_in_all_and_is_named_alike_in_the_store_and_in_json() {
        for metric in Metric::ALL {
            assert_eq!(Metric::ALL[metric as usize], metric);
            assert_eq!(
                serde_json::to_string(&metric).unwrap(),
                format!("\"{}\"", metric.name())
            );
        }
        // Each key's buckets are its own, made on first use.
        let mut buckets = Buckets::default();
        buckets.entry("a", Metric::Tpm).local = 5.0;
        buckets.entry("b", Metric::Tpm).local = 7.0;
        assert_eq!(buckets.get("a", Metric::Tpm).map(|b| b.local), Some(5.0));
        assert!(buckets.get("a", Metric::Rpm).is_none());
        assert!(buckets.get("c", Metric::Tpm).is_none());
        let all: Vec<(String, Metric, f64)> = buckets
            .iter_mut()
            .map(|((key, metric), bucket)| (key.clone(), metric, bucket.local))
            .collect();
        assert_eq!(
            all,
            [
                (String::from("a"), Metric::Tpm, 5.0),
                (String::from("b"), Metric::Tpm, 7.0)
            ]
        );
    }

    async fn limiter(name: &str) -> (Arc<Limiter>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "claude-bridge-limits-{name}-{}-{}",
            std::process::id(),
            super::super::store::now_ms()
        ));
        let url = format!("sqlite://{}", dir.join("g.db").display());
        let store = Store::open(&url, Duration::from_secs(5)).unwrap();
        store.migrate().await.unwrap();
        (Arc::new(Limiter::new(store, "r1", false)), dir)
    }

    /// `n` requests of `spec` admitted at once; their answers in order.
    async fn burst(
        limiter: &Arc<Limiter>,
        spec: &KeySpec,
        n: usize,
        now: i64,
    ) -> Vec<Result<Held, LimitRefusal>> {
        let requests: Vec<_> = (0..n)
            .map(|_| {
                let limiter = Arc::clone(limiter);
                let spec = spec.clone();
                tokio::spawn(async move { limiter.admit(&spec, now).await })
            })
            .collect();
        let mut answers = Vec::new();
        for request in requests {
            answers.push(request.await.unwrap());
        }
        answers
    }

    #[tokio::test]
    async fn max_parallel_admits_that_many_and_a_finished_request_makes_room() {
        let (limiter, dir) = limiter("parallel").await;
        let spec = KeySpec {
            name: "k".into(),
            max_parallel: Some(2),
            ..KeySpec::default()
        };
        let now = 1_795_861_815_000;
        let a = limiter.admit(&spec, now).await.unwrap();
        let _b = limiter.admit(&spec, now).await.unwrap();
        let refused = limiter.admit(&spec, now).await.unwrap_err();
        assert_eq!(refused.retry_after(), Some(1));
        assert!(
            refused.to_string().contains("max_parallel = 2"),
            "{refused}"
        );
        limiter.finish(&a, 0.0, 0.0);
        assert!(limiter.admit(&spec, now).await.is_ok());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_burst_on_an_empty_slice_waits_for_one_lease_not_one_each() {
        let (limiter, dir) = limiter("burst").await;
        let spec = KeySpec {
            name: "k".into(),
            rpm: Some(10_000),
            max_parallel: Some(1000),
            ..KeySpec::default()
        };
        let now = 1_795_861_815_000;
        let win = minute_window(now).start_ms;
        let mut held: Vec<Held> = burst(&limiter, &spec, 64, now)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        // One slice each (a tenth of the limit): 64 requests asking the store each would have
        // leased the whole limit between them.
        assert_eq!(
            limiter.store.quota("k", "rpm", win).await.unwrap(),
            (0.0, 1000.0)
        );
        assert_eq!(
            limiter.store.quota("k", "parallel", 0).await.unwrap(),
            (0.0, 100.0)
        );
        // 36 more slots in the slice, then the 101st request in flight needs another lease.
        for _ in 0..37 {
            held.push(limiter.admit(&spec, now).await.unwrap());
        }
        assert_eq!(
            limiter.store.quota("k", "parallel", 0).await.unwrap(),
            (0.0, 200.0)
        );
        for h in &held {
            limiter.finish(h, 0.0, 0.0);
        }
        // A slice of one slot: the burst's requests lease one after another, each waiter
        // asking again when the slot it waited for went to another; over the limit, refused.
        let small = KeySpec {
            name: "small".into(),
            max_parallel: Some(10),
            ..KeySpec::default()
        };
        let (mut admitted, mut refused) = (0, 0);
        for answer in burst(&limiter, &small, 20, now).await {
            match answer {
                Ok(_) => admitted += 1,
                Err(LimitRefusal::Rate {
                    setting: "max_parallel",
                    ..
                }) => refused += 1,
                Err(other) => panic!("{other}"),
            }
        }
        assert_eq!((admitted, refused), (10, 10));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_burst_with_the_store_silent_waits_for_one_lease_then_counts_alone() {
        // A server that takes connections and never answers: each lease waits out its 2 s.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("postgres://u:p@{}/db", silent.local_addr().unwrap());
        let store = Store::open(&url, Duration::from_secs(30)).unwrap();
        let limiter = Arc::new(Limiter::new(store, "r1", false));
        let spec = KeySpec {
            name: "k".into(),
            rpm: Some(100),
            ..KeySpec::default()
        };
        let now = 1_795_861_815_000;
        let started = Instant::now();
        for answer in burst(&limiter, &spec, 8, now).await {
            assert!(answer.is_ok(), "served: on_error = open");
        }
        // One lease's wait for all of them, not 2 s each in turn (16 s).
        let took = started.elapsed();
        assert!(took < Duration::from_secs(6), "the burst took {took:?}");
    }

    #[tokio::test]
    async fn rpm_refuses_until_the_minute_ends_and_a_token_budget_once_spent() {
        let (limiter, dir) = limiter("rpm").await;
        let spec = KeySpec {
            name: "k".into(),
            rpm: Some(3),
            budget_tokens: Some(1000),
            budget_period: super::super::period::BudgetPeriod::Day,
            ..KeySpec::default()
        };
        let now = 1_795_861_815_000; // 10:30:15 UTC: 45 s left in the minute
        let mut settles = Vec::new();
        for _ in 0..3 {
            let held = limiter.admit(&spec, now).await.unwrap();
            settles.extend(limiter.finish(&held, 300.0, 0.0));
        }
        let refused = limiter.admit(&spec, now).await.unwrap_err();
        assert_eq!(refused.retry_after(), Some(45), "{refused}");
        // The next minute: room again for requests, but 900 of 1000 tokens are spent and a
        // request of this key uses 300: it is not admitted on the last 100 (the room a request
        // is expected to use is reserved), so the budget is never crossed.
        let next = now + 60_000;
        let settle = |limiter: &Arc<Limiter>, settles: Vec<Settle>| {
            let settled: Vec<Settlement> = settles
                .into_iter()
                .map(|s| Settlement {
                    replica: String::from("r1"),
                    key: String::from("k"),
                    metric: s.metric,
                    win: s.win,
                    used: s.used,
                })
                .collect();
            let limiter = Arc::clone(limiter);
            async move {
                limiter.store.settle(&settled).await.unwrap();
                limiter.settled(&settled);
            }
        };
        settle(&limiter, settles).await;
        let spent = limiter.admit(&spec, next).await.unwrap_err();
        assert!(matches!(spent, LimitRefusal::Budget { .. }), "{spent}");
        assert_eq!(spent.retry_after(), None);
        assert!(
            spent.to_string().contains("resets at 2026-11-29T00:00:00Z"),
            "{spent}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
