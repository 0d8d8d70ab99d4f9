//! The clock behind plug-in calls' deadlines, ticking only while a call is in flight (the
//! embedded core's engine has no deadline, see `wasm.rs`'s `shared_engine`).
//!
//! Wasmtime interrupts a guest by epochs: a store's deadline is a number of ticks after the
//! epoch its call started at, and a thread advances the engine's epoch every [`EPOCH_TICK`]. A
//! clock that ticked all the time kept an idle bridge busy for nothing (100 wake-ups a second;
//! a debug build idle for 30 s used 0.10 s of CPU on one machine, 0 since; on a slower one
//! 250 s in 83 minutes). So every call is bracketed by a [`Call`] (see `wasm.rs`'s `arm`), the
//! clock counts them, and it parks after [`PARK_AFTER_TICKS`] ticks with none; the call that
//! finds it parked wakes it.
//!
//! ```text
//!            a tick with calls in flight
//!              +-------+
//!              v       |
//!   start --> Ticking -+--(PARK_AFTER_TICKS ticks without a call)--> Parked
//!              ^                                                        |
//!              +------------------(a call starts: Call::begin)---------+
//! ```
//!
//! A call's deadline only counts ticks, and the clock ticks for as long as that call is in
//! flight, so a parked clock never extends a deadline: it only stops counting time nobody is
//! measuring. Calls while the clock ticks cost two atomic operations; only the first call after
//! a park takes the lock and wakes the thread.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

/// The clock's tick: how often a running guest is checked against its deadline.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(10);
/// Ticks without a call in flight after which the clock parks (1 s): a busy bridge's calls
/// (one per upstream chunk) never wait for a wake-up.
const PARK_AFTER_TICKS: u32 = 100;

/// The process's clock (of the one engine for plug-ins, see `wasm.rs`'s `shared_engine`).
static CLOCK: EpochClock = EpochClock {
    in_flight: AtomicUsize::new(0),
    parked: AtomicBool::new(false),
    lock: Mutex::new(()),
    wake: Condvar::new(),
};

struct EpochClock {
    /// Guest calls between [`Call::begin`] and the drop of their [`Call`].
    in_flight: AtomicUsize,
    /// Set (under `lock`) before the clock waits on `wake`, cleared when it runs again.
    parked: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// Starts the thread that advances `engine`'s epoch. Once per process.
pub(super) fn start(engine: &wasmtime::Engine) -> Result<(), String> {
    let engine = engine.clone();
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || CLOCK.run(&engine))
        .map(drop)
        .map_err(|e| format!("cannot start the wasm epoch clock: {e}"))
}

impl EpochClock {
    fn run(&self, engine: &wasmtime::Engine) {
        let mut idle_ticks = 0;
        loop {
            std::thread::sleep(EPOCH_TICK);
            engine.increment_epoch();
            if self.in_flight.load(SeqCst) > 0 {
                idle_ticks = 0;
                continue;
            }
            idle_ticks += 1;
            if idle_ticks < PARK_AFTER_TICKS {
                continue;
            }
            idle_ticks = 0;
            let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            // Announced before the count is read: a call that begins meanwhile either sees
            // `parked` and wakes this thread, or is seen here (both are SeqCst).
            self.parked.store(true, SeqCst);
            while self.in_flight.load(SeqCst) == 0 {
                guard = self
                    .wake
                    .wait(guard)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            self.parked.store(false, SeqCst);
        }
    }
}

/// One guest call in flight: the clock ticks until it is dropped.
#[derive(Debug)]
pub(super) struct Call(());

impl Call {
    pub(super) fn begin() -> Self {
        if CLOCK.in_flight.fetch_add(1, SeqCst) == 0 && CLOCK.parked.load(SeqCst) {
            // The lock orders this after the clock's wait began (it holds the lock until then).
            let _guard = CLOCK.lock.lock().unwrap_or_else(PoisonError::into_inner);
            CLOCK.wake.notify_one();
        }
        Self(())
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        CLOCK.in_flight.fetch_sub(1, SeqCst);
    }
}

/// Whether the clock is parked (for the tests).
#[cfg(test)]
pub(super) fn parked() -> bool {
    CLOCK.parked.load(SeqCst)
}
