//! Each upstream's own limits and load: `[providers.NAME]`'s `weight`, `max_parallel`, `rpm`,
//! `tpm` and `queue_timeout` (DESIGN §5 "Pools"), what it has in flight and waiting, how fast
//! it answers, and when a 429 told the bridge to come back.
//!
//! One [`Upstream`] per provider, shared by every target on it (a GPU box serving two models is
//! one box). The router asks [`Upstream::load`] for what it weighs pool members by
//! ([`bridge_core::route::MemberLoad`]); a request takes a [`Slot`] ([`Upstream::acquire`])
//! before it is sent and holds it until its answer ends.
//!
//! ```text
//!   acquire ──► queued ──(a max_parallel permit, FIFO; the rpm/tpm minute has room;
//!                         no 429 wait pending — each within queue_timeout)──► in flight
//!                  └──(queue_timeout passes first)──► Busy: the next member, or 429 to the client
//!   Slot dropped (the answer ended) ──► in flight − 1, the permit back
//! ```

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bridge_core::route::MemberLoad;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use crate::config::{DEFAULT_QUEUE_TIMEOUT, UpstreamLimits};

/// The length of an `rpm`/`tpm` window.
const WINDOW: Duration = Duration::from_secs(60);

/// One upstream's limits and load.
#[derive(Debug)]
pub struct Upstream {
    name: String,
    limits: UpstreamLimits,
    permits: Option<Arc<Semaphore>>,
    in_flight: AtomicU32,
    queued: AtomicU32,
    state: Mutex<State>,
    /// What the provider read in its successful answers: a spent rate budget and its reset.
    free_at: Arc<crate::provider::rate_limit::FreeAt>,
}

#[derive(Debug, Default, Clone)]
struct State {
    /// A 429 (or 529) said not before this.
    wait_until: Option<Instant>,
    /// The current minute window's start, and what it used.
    window: Option<Instant>,
    requests: u32,
    tokens: u64,
    /// Time to the first byte, exponentially weighted (ms).
    ewma_ms: Option<f64>,
    /// Requests sent, and those that waited in the queue first.
    sent: u64,
    waited: u64,
    /// Requests that gave up waiting (queue_timeout).
    turned_away: u64,
    /// The last health probe (`health_check`): `None` before the first or without probes.
    probe: Option<Result<(), String>>,
}

/// Why a request could not get a slot in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Busy {
    /// What was full: `max_parallel 2`, `rpm 60`, `tpm 100000`, `429 retry-after`.
    pub why: String,
    /// When it may have room again (from now).
    pub retry_after: Duration,
}

/// A request's hold on its upstream, from being sent until its answer ends.
#[derive(Debug)]
pub struct Slot {
    upstream: Arc<Upstream>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.upstream.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Slot {
    /// The upstream.
    #[must_use]
    pub fn upstream(&self) -> &Arc<Upstream> {
        &self.upstream
    }
}

/// Counts a request as queued while it waits.
struct Queued<'a>(&'a AtomicU32);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Upstream {
    /// An upstream named `name` with `limits`.
    #[must_use]
    pub fn new(name: &str, limits: UpstreamLimits) -> Self {
        Self {
            name: name.to_owned(),
            permits: limits
                .max_parallel
                .map(|n| Arc::new(Semaphore::new(n as usize))),
            limits,
            in_flight: AtomicU32::new(0),
            queued: AtomicU32::new(0),
            state: Mutex::new(State::default()),
            free_at: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where the provider notes a spent rate budget (give it to the provider when it is built).
    #[must_use]
    pub fn free_at(&self) -> Arc<crate::provider::rate_limit::FreeAt> {
        Arc::clone(&self.free_at)
    }

    /// The provider's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its limits.
    #[must_use]
    pub fn limits(&self) -> UpstreamLimits {
        self.limits
    }

    /// What the router weighs it by at `now`; `circuit_open` is its target's circuit.
    #[must_use]
    pub fn load(&self, now: Instant, circuit_open: bool) -> MemberLoad {
        let in_flight = self.in_flight.load(Ordering::Acquire);
        let queued = self.queued.load(Ordering::Acquire);
        let state = self.lock();
        let told_to_wait =
            state.wait_until.is_some_and(|until| now < until) || self.free_at.after(now).is_some();
        let window_full = self.window_wait(&state, now, 0).is_some();
        let probe_failing = matches!(state.probe, Some(Err(_)));
        MemberLoad {
            weight: self.limits.weight.max(1),
            outstanding: in_flight + queued,
            available: !circuit_open && !told_to_wait && !probe_failing,
            has_room: !window_full && self.limits.max_parallel.is_none_or(|n| in_flight < n),
            latency_us: state
                .ewma_ms
                .map(|ms| (ms * 1000.0).clamp(0.0, f64::from(u32::MAX)) as u32),
        }
    }

    /// When the current window lets one more request of `tokens` in: `None` now, else the
    /// window's end.
    fn window_wait(&self, state: &State, now: Instant, tokens: u64) -> Option<(Instant, String)> {
        let start = state.window.filter(|s| now < *s + WINDOW)?;
        if let Some(rpm) = self.limits.rpm
            && state.requests >= rpm
        {
            return Some((start + WINDOW, format!("rpm {rpm}")));
        }
        if let Some(tpm) = self.limits.tpm
            && state.tokens > 0
            && state.tokens + tokens > tpm
        {
            return Some((start + WINDOW, format!("tpm {tpm}")));
        }
        None
    }

    /// Wait (up to `queue_timeout`, in arrival order) until the upstream has room for a request
    /// estimated at `tokens` input tokens, and hold a place on it.
    ///
    /// # Errors
    /// [`Busy`] when `queue_timeout` passes first (or a 429's wait is longer than it).
    pub async fn acquire(self: &Arc<Self>, tokens: u64) -> Result<Slot, Busy> {
        let arrived = Instant::now();
        let deadline = arrived + self.limits.queue_timeout;
        self.queued.fetch_add(1, Ordering::AcqRel);
        let queued = Queued(&self.queued);
        let permit = match &self.permits {
            Some(permits) => {
                let permit = match permits.clone().try_acquire_owned() {
                    Ok(permit) => permit,
                    Err(_) => {
                        let waited = tokio::time::timeout_at(
                            deadline.into(),
                            permits.clone().acquire_owned(),
                        )
                        .await;
                        match waited {
                            Ok(Ok(permit)) => permit,
                            _ => {
                                return Err(self.turned_away(
                                    format!(
                                        "max_parallel {}",
                                        self.limits.max_parallel.unwrap_or_default()
                                    ),
                                    Duration::from_secs(1),
                                ));
                            }
                        }
                    }
                };
                Some(permit)
            }
            None => None,
        };
        // A 429's wait, then the minute windows.
        loop {
            let now = Instant::now();
            match self.take(
                now,
                tokens,
                now.duration_since(arrived) > Duration::from_millis(1),
            ) {
                Ok(()) => break,
                Err((until, why)) if until > deadline => {
                    return Err(self.turned_away(why, until.duration_since(now)));
                }
                Err((until, _)) => tokio::time::sleep_until(until.into()).await,
            }
        }
        drop(queued);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Ok(Slot {
            upstream: Arc::clone(self),
            _permit: permit,
        })
    }

    /// Count a request of `tokens` in the current window at `now`, or say until when it must
    /// wait (a 429's `retry-after`, a full `rpm`/`tpm` minute) and why.
    fn take(&self, now: Instant, tokens: u64, waited: bool) -> Result<(), (Instant, String)> {
        let mut state = self.lock();
        if let Some(until) = state.wait_until.filter(|until| now < *until) {
            return Err((until, String::from("429 retry-after")));
        }
        if let Some(until) = self.free_at.after(now) {
            return Err((
                until,
                String::from("its rate limit is spent until it resets"),
            ));
        }
        if let Some(wait) = self.window_wait(&state, now, tokens) {
            return Err(wait);
        }
        if state.window.is_none_or(|s| now >= s + WINDOW) {
            state.window = Some(now);
            state.requests = 0;
            state.tokens = 0;
        }
        state.requests += 1;
        state.tokens += tokens;
        state.sent += 1;
        state.waited += u64::from(waited);
        Ok(())
    }

    fn turned_away(&self, why: String, retry_after: Duration) -> Busy {
        self.lock().turned_away += 1;
        Busy { why, retry_after }
    }

    /// A health probe's result; true when it changed whether the upstream is up.
    pub fn probed(&self, result: Result<(), String>) -> bool {
        let mut state = self.lock();
        let was_up = !matches!(state.probe, Some(Err(_)));
        let up = result.is_ok();
        state.probe = Some(result);
        was_up != up
    }

    /// Whether the last health probe failed (the upstream is skipped until one succeeds).
    #[must_use]
    pub fn probe_failing(&self) -> bool {
        matches!(self.lock().probe, Some(Err(_)))
    }

    /// The upstream answered 429 (or 529) saying when to come back: nothing is sent to it
    /// before then.
    pub fn told_to_wait(&self, until: Instant) {
        let mut state = self.lock();
        if state.wait_until.is_none_or(|u| u < until) {
            state.wait_until = Some(until);
        }
    }

    /// A request on it ended: `first_byte` (when it answered) feeds the latency average, and
    /// `output_tokens` its minute's token count.
    pub fn ended(&self, first_byte: Option<Duration>, output_tokens: u64) {
        let mut state = self.lock();
        if let Some(t) = first_byte {
            let ms = t.as_secs_f64() * 1000.0;
            state.ewma_ms = Some(state.ewma_ms.map_or(ms, |e| e * 0.8 + ms * 0.2));
        }
        state.tokens += output_tokens;
    }

    /// Requests in flight on it, and waiting for it.
    #[must_use]
    pub fn counts(&self) -> (u32, u32) {
        (
            self.in_flight.load(Ordering::Acquire),
            self.queued.load(Ordering::Acquire),
        )
    }

    /// Time to the first byte, exponentially weighted (ms), once it has answered.
    #[must_use]
    pub fn latency_ewma_ms(&self) -> Option<f64> {
        self.lock().ewma_ms
    }

    /// For `/health`: in flight, queued, latency, limits and their windows.
    #[must_use]
    pub fn report(&self, now: Instant) -> serde_json::Value {
        let state = self.lock().clone();
        let window_left = state
            .window
            .filter(|s| now < *s + WINDOW)
            .map(|s| (s + WINDOW).duration_since(now).as_secs_f64());
        serde_json::json!({
            "weight": self.limits.weight,
            "in_flight": self.in_flight.load(Ordering::Acquire),
            "queued": self.queued.load(Ordering::Acquire),
            "latency_ewma_ms": state.ewma_ms.map(|ms| (ms * 10.0).round() / 10.0),
            "max_parallel": self.limits.max_parallel,
            "rpm": self.limits.rpm,
            "tpm": self.limits.tpm,
            "queue_timeout_s": self.limits.queue_timeout.as_secs_f64(),
            "window": window_left.map(|left| serde_json::json!({
                "requests": state.requests,
                "tokens": state.tokens,
                "resets_in_s": (left * 10.0).round() / 10.0,
            })),
            "told_to_wait_s": state
                .wait_until
                .filter(|u| now < *u)
                .into_iter()
                .chain(self.free_at.after(now))
                .max()
                .map(|u| u.duration_since(now).as_secs_f64()),
            "probe": match &state.probe {
                None => serde_json::Value::Null,
                Some(Ok(())) => serde_json::Value::from("ok"),
                Some(Err(why)) => serde_json::Value::from(why.as_str()),
            },
            "sent": state.sent,
            "waited": state.waited,
            "turned_away": state.turned_away,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(limits: UpstreamLimits) -> Arc<Upstream> {
        Arc::new(Upstream::new("gpu", limits))
    }

    #[tokio::test]
    async fn max_parallel_queues_in_arrival_order_and_turns_away_after_the_timeout() {
        let up = upstream(UpstreamLimits {
            max_parallel: Some(2),
            queue_timeout: Duration::from_millis(300),
            ..UpstreamLimits::default()
        });
        let a = up.acquire(0).await.unwrap();
        let _b = up.acquire(0).await.unwrap();
        assert!(!up.load(Instant::now(), false).has_room);
        let waiting = tokio::spawn({
            let up = Arc::clone(&up);
            async move { up.acquire(0).await.map(|_| Instant::now()) }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(up.load(Instant::now(), false).outstanding, 3);
        let freed = Instant::now();
        drop(a);
        let got = waiting.await.unwrap().unwrap();
        assert!(
            got >= freed,
            "the third request started only when one ended"
        );
        // Both slots held now: the next waits its 300 ms and is turned away.
        let _c = up.acquire(0).await.unwrap();
        let asked = Instant::now();
        let busy = up.acquire(0).await.unwrap_err();
        assert!(asked.elapsed() >= Duration::from_millis(300));
        assert_eq!(busy.why, "max_parallel 2");
        assert_eq!(up.report(Instant::now())["turned_away"], 1);
        assert_eq!(up.counts(), (2, 0));
    }

    #[test]
    fn rpm_and_tpm_fill_a_minute_and_a_429_holds_it_back_until_its_time() {
        let up = upstream(UpstreamLimits {
            rpm: Some(2),
            tpm: Some(1000),
            ..UpstreamLimits::default()
        });
        let t0 = Instant::now();
        assert!(up.take(t0, 600, false).is_ok());
        up.ended(Some(Duration::from_millis(40)), 300);
        // 900 of 1000 tokens: one of 200 more waits for the minute's end; one of 100 fits.
        assert_eq!(
            up.take(t0, 200, false),
            Err((t0 + WINDOW, String::from("tpm 1000")))
        );
        assert!(up.take(t0, 100, false).is_ok());
        // Two requests this minute: the third waits for the next.
        assert_eq!(
            up.take(t0 + Duration::from_secs(59), 0, false),
            Err((t0 + WINDOW, String::from("rpm 2")))
        );
        assert!(!up.load(t0, false).has_room);
        assert!(up.take(t0 + WINDOW, 0, true).is_ok());
        assert_eq!(up.report(t0 + WINDOW)["waited"], 1);
        // A 429 says two minutes: nothing before, whatever the windows say.
        up.told_to_wait(t0 + Duration::from_secs(180));
        assert!(!up.load(t0 + Duration::from_secs(179), false).available);
        assert_eq!(
            up.take(t0 + Duration::from_secs(179), 0, false)
                .map_err(|e| e.1),
            Err(String::from("429 retry-after"))
        );
        assert!(up.load(t0 + Duration::from_secs(180), false).available);
        assert!(up.take(t0 + Duration::from_secs(180), 0, false).is_ok());
        assert_eq!(up.latency_ewma_ms(), Some(40.0));
    }
}
