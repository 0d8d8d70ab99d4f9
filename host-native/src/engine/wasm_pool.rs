//! The wasm engine's instances, shared by streams and reused by calls.
//!
//! A fresh instance per operation costs an instantiation (a pool slot, its tables reset, page
//! faults as the guest touches its stack and heap again) and keeps its own pages resident for
//! as long as a stream is open. So one instance serves up to `streams_per_instance` open
//! translators at once (each a resource of the component, with its own state in the guest's
//! heap), and instances with nothing to do are kept, up to `keep_idle`, for the next request's
//! `prepare` and translator. Calls into one instance take its lock; they are microseconds long.
//!
//! What is given up: isolation. A trap in one call leaves its instance unusable, so the other
//! streams on it fail too, and a guest's heap keeps its high-water mark. Hence:
//!
//! - an instance that trapped, or that took more than `retire_after_bytes` of input in all,
//!   is *retired*: it takes no new work and is dropped (its slot freed, its pages returned)
//!   when its last user leaves;
//! - an input larger than `private_above_bytes` gets an instance of its own, dropped after use;
//! - plug-ins (`--core`) run one stream per instance, as before: their traps are theirs.
//!
//! And kept instances do not hold memory for ever: [`Pool::trim`] drops those that have had no
//! user for a while (the engine calls it from a thread, see `wasm.rs`), so a bridge left alone
//! goes back to the memory it started with. The next request pays one instantiation and the
//! page faults of its first use, which a pause that long hides.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How a [`Pool`] shares and keeps instances.
#[derive(Debug, Clone, Copy)]
pub(super) struct PoolLimits {
    /// Open translators one instance serves at once.
    pub streams_per_instance: usize,
    /// Instances with no user kept for reuse.
    pub keep_idle: usize,
    /// Input an instance may take in all before it is retired (bounds its heap's high-water
    /// mark, which stays resident while it lives).
    pub retire_after_bytes: usize,
    /// One input larger than this gets a private instance.
    pub private_above_bytes: usize,
}

/// One instance and who uses it.
#[derive(Debug)]
pub(super) struct Pooled<I> {
    instance: Mutex<I>,
    /// Open translators and calls in progress.
    users: AtomicUsize,
    /// Input taken so far (feeds and requests).
    bytes_in: AtomicUsize,
    /// Takes no new work; dropped when its last user leaves.
    retired: AtomicBool,
}

impl<I> Pooled<I> {
    fn new(instance: I, private: bool) -> Arc<Self> {
        Arc::new(Self {
            instance: Mutex::new(instance),
            users: AtomicUsize::new(1),
            bytes_in: AtomicUsize::new(0),
            retired: AtomicBool::new(private),
        })
    }

    /// The instance, for one call. A panic while it was held leaves it usable as far as the
    /// guest is concerned (the call either returned or trapped, and a trap retires it).
    pub fn lock(&self) -> MutexGuard<'_, I> {
        self.instance.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `n` more bytes of input went in.
    pub fn took(&self, n: usize, limits: &PoolLimits) {
        let total = self.bytes_in.fetch_add(n, Ordering::Relaxed) + n;
        if total > limits.retire_after_bytes {
            self.retire();
        }
    }

    /// It trapped or grew: no new work.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
    }

    /// Whether it takes new work (not retired).
    pub fn is_open(&self) -> bool {
        !self.retired.load(Ordering::Relaxed)
    }
}

/// A pooled instance and, when it has no user, since when.
#[derive(Debug)]
struct Slot<I> {
    pooled: Arc<Pooled<I>>,
    /// Set by the release that left it without users; stale while it has users again.
    idle_since: Option<Instant>,
}

impl<I> Slot<I> {
    fn new(pooled: &Arc<Pooled<I>>) -> Self {
        Self {
            pooled: Arc::clone(pooled),
            idle_since: None,
        }
    }
}

/// Every shared instance of one component.
#[derive(Debug)]
pub(super) struct Pool<I> {
    limits: PoolLimits,
    instances: Mutex<Vec<Slot<I>>>,
    /// Instances made so far.
    made: AtomicUsize,
}

impl<I> Pool<I> {
    pub fn new(limits: PoolLimits) -> Self {
        Self {
            limits,
            instances: Mutex::new(Vec::new()),
            made: AtomicUsize::new(0),
        }
    }

    pub fn limits(&self) -> &PoolLimits {
        &self.limits
    }

    fn list(&self) -> MutexGuard<'_, Vec<Slot<I>>> {
        self.instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// An instance for a new translator: the busiest one with room (so idle ones stay free for
    /// calls, and go when not needed), else a new one from `make`.
    pub fn for_stream<E>(&self, make: impl FnOnce() -> Result<I, E>) -> Result<Arc<Pooled<I>>, E> {
        {
            let list = self.list();
            let best = list
                .iter()
                .map(|slot| &slot.pooled)
                .filter(|p| p.is_open())
                .filter(|p| p.users.load(Ordering::Relaxed) < self.limits.streams_per_instance)
                .max_by_key(|p| p.users.load(Ordering::Relaxed));
            if let Some(pooled) = best {
                pooled.users.fetch_add(1, Ordering::Relaxed);
                return Ok(Arc::clone(pooled));
            }
        }
        let pooled = Pooled::new(self.make(make)?, false);
        self.list().push(Slot::new(&pooled));
        Ok(pooled)
    }

    /// An instance for one call with `input_len` bytes of input: an idle one, else a new one
    /// (kept afterwards like any other); a private one for a large input.
    pub fn for_call<E>(
        &self,
        input_len: usize,
        make: impl FnOnce() -> Result<I, E>,
    ) -> Result<Arc<Pooled<I>>, E> {
        if input_len > self.limits.private_above_bytes {
            return Ok(Pooled::new(self.make(make)?, true));
        }
        {
            let list = self.list();
            let idle = list
                .iter()
                .map(|slot| &slot.pooled)
                .find(|p| p.is_open() && p.users.load(Ordering::Relaxed) == 0);
            if let Some(pooled) = idle {
                pooled.users.fetch_add(1, Ordering::Relaxed);
                return Ok(Arc::clone(pooled));
            }
        }
        let pooled = Pooled::new(self.make(make)?, false);
        self.list().push(Slot::new(&pooled));
        Ok(pooled)
    }

    fn make<E>(&self, make: impl FnOnce() -> Result<I, E>) -> Result<I, E> {
        let instance = make()?;
        self.made.fetch_add(1, Ordering::Relaxed);
        Ok(instance)
    }

    /// Instances made so far (each an instantiation).
    #[cfg(test)]
    pub fn made(&self) -> usize {
        self.made.load(Ordering::Relaxed)
    }

    /// A user of `pooled` is done (at `now`). An instance left without users is dropped if it
    /// is retired or more than `keep_idle` are idle; else it is idle from `now`.
    pub fn release(&self, pooled: &Arc<Pooled<I>>, now: Instant) {
        let mut list = self.list();
        let before = pooled.users.fetch_sub(1, Ordering::Relaxed);
        debug_assert!(before > 0, "an instance released more often than taken");
        let left = before.saturating_sub(1);
        if left > 0 {
            return;
        }
        let idle = list
            .iter()
            .filter(|slot| slot.pooled.users.load(Ordering::Relaxed) == 0)
            .count();
        if !pooled.is_open() || idle > self.limits.keep_idle {
            list.retain(|slot| !Arc::ptr_eq(&slot.pooled, pooled));
        } else if let Some(slot) = list.iter_mut().find(|s| Arc::ptr_eq(&s.pooled, pooled)) {
            slot.idle_since = Some(now);
        }
    }

    /// Drops the instances that, at `now`, have had no user for `after` or longer, and says
    /// how many. (Taking an instance and releasing it go through the same lock, so one that
    /// is picked up again is never dropped under its new user.)
    pub fn trim(&self, now: Instant, after: Duration) -> usize {
        let mut list = self.list();
        let (gone, kept): (Vec<_>, Vec<_>) = list.drain(..).partition(|slot| {
            slot.pooled.users.load(Ordering::Relaxed) == 0
                && slot
                    .idle_since
                    .is_some_and(|since| now.saturating_duration_since(since) >= after)
        });
        *list = kept;
        drop(list);
        // The instances go (their pages returned) outside the lock.
        let n = gone.len();
        drop(gone);
        n
    }

    /// Instances alive in the pool (for tests and the measure).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.list().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(streams: usize) -> Pool<u32> {
        Pool::new(PoolLimits {
            streams_per_instance: streams,
            keep_idle: 1,
            retire_after_bytes: 100,
            private_above_bytes: 50,
        })
    }

    fn ok(n: u32) -> impl FnOnce() -> Result<u32, ()> {
        move || Ok(n)
    }

    #[test]
    fn streams_share_an_instance_up_to_the_limit() {
        let p = pool(2);
        let a = p.for_stream(ok(1)).unwrap();
        let b = p.for_stream(ok(2)).unwrap();
        let c = p.for_stream(ok(3)).unwrap();
        assert!(
            Arc::ptr_eq(&a, &b),
            "the second stream shares the first's instance"
        );
        assert_eq!(*c.lock(), 3, "the third needs a new one");
        assert_eq!(p.len(), 2);
        p.release(&a, Instant::now());
        p.release(&b, Instant::now());
        p.release(&c, Instant::now());
        assert_eq!(p.len(), 1, "one idle instance is kept");
    }

    #[test]
    fn calls_take_idle_instances_and_large_inputs_a_private_one() {
        let p = pool(4);
        let s = p.for_stream(ok(1)).unwrap();
        let call = p.for_call(10, ok(2)).unwrap();
        assert_eq!(*call.lock(), 2, "the busy instance is not used for a call");
        p.release(&call, Instant::now());
        let again = p.for_call(10, ok(3)).unwrap();
        assert_eq!(*again.lock(), 2, "the idle one is reused");
        p.release(&again, Instant::now());
        let big = p.for_call(51, ok(4)).unwrap();
        assert_eq!(*big.lock(), 4);
        p.release(&big, Instant::now());
        assert_eq!(p.len(), 2, "the private instance was never pooled");
        p.release(&s, Instant::now());
    }

    #[test]
    fn a_retired_instance_takes_nothing_new_and_goes_with_its_last_user() {
        let p = pool(4);
        let a = p.for_stream(ok(1)).unwrap();
        let b = p.for_stream(ok(2)).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        a.took(101, p.limits());
        let c = p.for_stream(ok(3)).unwrap();
        assert_eq!(*c.lock(), 3);
        p.release(&a, Instant::now());
        assert_eq!(p.len(), 2);
        p.release(&b, Instant::now());
        assert_eq!(p.len(), 1, "the retired one is gone");
        p.release(&c, Instant::now());
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn instances_idle_for_the_trim_time_are_dropped_and_busy_ones_kept() {
        let p = Pool::new(PoolLimits {
            streams_per_instance: 1,
            keep_idle: 3,
            retire_after_bytes: 100,
            private_above_bytes: 50,
        });
        let t0 = Instant::now();
        let secs = Duration::from_secs;
        let a = p.for_stream(ok(1)).unwrap();
        let b = p.for_stream(ok(2)).unwrap();
        let c = p.for_stream(ok(3)).unwrap();
        p.release(&a, t0);
        p.release(&b, t0 + secs(5));
        assert_eq!(p.len(), 3, "two idle instances are within keep_idle");
        assert_eq!(
            p.trim(t0 + secs(9), secs(10)),
            0,
            "nobody idle for 10 s yet"
        );
        assert_eq!(p.trim(t0 + secs(10), secs(10)), 1, "a went");
        assert_eq!(p.len(), 2);
        // b is taken again before its time is up, and released later: its clock restarts.
        let again = p.for_call(1, ok(4)).unwrap();
        assert!(Arc::ptr_eq(&again, &b));
        assert_eq!(p.trim(t0 + secs(20), secs(10)), 0, "b is in use");
        p.release(&again, t0 + secs(21));
        assert_eq!(p.trim(t0 + secs(30), secs(10)), 0, "b idle for 9 s only");
        assert_eq!(p.trim(t0 + secs(31), secs(10)), 1, "b went");
        assert_eq!(p.trim(t0 + secs(99), secs(10)), 0, "c was never released");
        assert_eq!(p.len(), 1);
        p.release(&c, t0 + secs(100));
        assert_eq!(p.trim(t0 + secs(110), secs(10)), 1);
        assert_eq!(p.len(), 0);
        let fresh = p.for_call(1, ok(5)).unwrap();
        assert_eq!(*fresh.lock(), 5, "a new instance after the trim");
        assert_eq!(p.made(), 4);
    }
}
