//! What a client connection may cost: how many may be open, how slowly a client may send.
//!
//! Every server of the bridge accepts through [`accept_loop`]:
//!
//! - at most [`ConnLimits::max_connections`] connections are served at once. Past the cap,
//!   [`OVER_CAP_CONNECTIONS`] more are accepted and marked [`OverCap`]: each answers one request
//!   and closes — `/health` and `/metrics` at once (a probe or a scrape never waits behind long
//!   streams), anything else once a slot frees within [`ConnLimits::cap_wait`], else with an
//!   overload error (`529`, or `503` for an OpenAI client; `retry-after: 1`). Only when those
//!   are taken too does the loop stop accepting (the kernel's backlog holds newcomers) until one
//!   closes — back-pressure instead of file-descriptor exhaustion;
//! - a client must send a request's headers within [`ConnLimits::client_timeout`] of starting
//!   it, and an idle keep-alive connection is closed after that long (hyper's header-read
//!   timer covers both), so slowloris sockets do not pile up;
//! - each piece of a request body must arrive within the same time ([`read_request_body`]),
//!   or the request is answered 408;
//! - request bodies share one byte budget ([`BodyBudget`]): a large body waits (its bytes
//!   unread) until the bodies before it are done, so ten 30 MB uploads at once do not each
//!   take their parse's memory at the same time;
//! - the soft open-files limit is raised to the hard one at start ([`raise_fd_limit`]), and the
//!   cap is lowered to what the limit can hold (each client may need an upstream socket too).
//!
//! ```
//! use std::time::Duration;
//! use claude_bridge::server::conn::ConnLimits;
//! let limits = ConnLimits { max_connections: 512, client_timeout: Duration::from_secs(30), cap_wait: Duration::from_secs(5) };
//! assert_eq!(limits.fitted_to(4096).max_connections, 512);
//! assert_eq!(limits.fitted_to(256).max_connections, 64);
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

/// Limits on client connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Longest wait for a request's headers, an idle keep-alive connection, or the next piece
    /// of a request body.
    pub client_timeout: Duration,
    /// Longest a request past the cap waits for a free slot before the overload answer.
    pub cap_wait: Duration,
}

/// File descriptors kept for everything that is not a client or upstream socket (logs, the
/// listener, DNS, the wasm cache, a Claude Code child's pipes).
const RESERVED_FDS: u64 = 64;

/// Connections accepted past the cap, each answering one request at once (see the module
/// docs): room for probes, scrapes and fast overload answers while the cap is full.
pub const OVER_CAP_CONNECTIONS: usize = 64;

/// Longest a connection past the cap may take to send its request's headers.
pub const OVER_CAP_HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Marks a request that came on a connection past the cap (a request extension): `/health`
/// and `/metrics` are served on it at once; anything else first waits for a slot
/// ([`OverCap::refused`]).
#[derive(Debug, Clone)]
pub struct OverCap {
    /// The cap (`--max-connections`), for the answer's message.
    pub max_connections: usize,
    /// How long to wait for a slot.
    pub cap_wait: Duration,
    /// The cap's slots.
    slots: Arc<Semaphore>,
    /// A slot this connection got, held until the connection closes.
    held: Arc<std::sync::Mutex<Option<OwnedSemaphorePermit>>>,
}

impl OverCap {
    /// A marker for one connection past the cap of `slots`.
    #[must_use]
    pub fn new(limits: ConnLimits, slots: Arc<Semaphore>) -> Self {
        Self {
            max_connections: limits.max_connections,
            cap_wait: limits.cap_wait,
            slots,
            held: Arc::default(),
        }
    }

    /// For a request that came past the cap (the marker is on it) and is not one of `probes`
    /// (paths answered at once): wait for a slot; the cap, when none freed up in time (the
    /// caller then answers with its overload error).
    pub async fn refused<B>(req: &http::Request<B>, probes: &[&str]) -> Option<usize> {
        let cap = req.extensions().get::<Self>()?;
        if probes.contains(&req.uri().path().trim_end_matches('/')) || cap.wait_for_slot().await {
            return None;
        }
        Some(cap.max_connections)
    }

    /// Wait up to `cap_wait` for one of the cap's slots; `true` when this connection got one
    /// (it is then served as any other, and gives the slot back when it closes).
    async fn wait_for_slot(&self) -> bool {
        let acquired =
            tokio::time::timeout(self.cap_wait, Arc::clone(&self.slots).acquire_owned()).await;
        match acquired {
            Ok(Ok(permit)) => {
                if let Ok(mut held) = self.held.lock() {
                    *held = Some(permit);
                }
                true
            }
            _ => false,
        }
    }
}

/// The smallest cap the descriptor limit can lower `--max-connections` to.
const MIN_CONNECTIONS: usize = 4;

impl ConnLimits {
    /// The limits with the connection cap lowered to fit `open_files` descriptors: every client
    /// connection may hold an upstream connection as well.
    #[must_use]
    pub fn fitted_to(self, open_files: u64) -> Self {
        let spare = RESERVED_FDS + OVER_CAP_CONNECTIONS as u64;
        let fits = usize::try_from(open_files.saturating_sub(spare) / 2).unwrap_or(usize::MAX);
        Self {
            max_connections: self.max_connections.min(fits.max(MIN_CONNECTIONS)),
            ..self
        }
    }
}

/// Raise the soft open-files limit to the hard limit; returns the soft limit now in force
/// (`None` where the platform has no such limit).
#[must_use]
pub fn raise_fd_limit() -> Option<u64> {
    rlimit::increase_nofile_limit(u64::MAX).ok()
}

/// Bodies smaller than this are read without touching the budget.
const SMALL_BODY: usize = 64 << 10;

/// The budget's unit (a semaphore permit is one KiB).
const BUDGET_UNIT: usize = 1 << 10;

/// How the budget grows for a body of unknown length: this much more each time it fills.
const BUDGET_STEP: usize = 1 << 20;

/// The bytes of request bodies the server holds at once, across requests. A body larger than
/// [`SMALL_BODY`] reserves its size (all of it when `content-length` says it, else step by
/// step as it arrives) before its bytes are read, and gives it back when its request is done.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use claude_bridge::server::conn::BodyBudget;
/// let budget = BodyBudget::new(4 << 20);
/// let first = budget.reserve(3 << 20, Duration::from_millis(10)).await;
/// assert!(first.is_some());
/// assert!(budget.reserve(2 << 20, Duration::from_millis(10)).await.is_none(), "only 1 MiB left");
/// drop(first);
/// assert!(budget.reserve(2 << 20, Duration::from_millis(10)).await.is_some());
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct BodyBudget {
    units: Arc<Semaphore>,
    total: usize,
}

/// Room reserved in a [`BodyBudget`]; given back when dropped.
#[derive(Debug, Default)]
pub struct BodyReservation {
    permits: Vec<OwnedSemaphorePermit>,
}

impl BodyBudget {
    /// A budget of `bytes` (at least one unit).
    #[must_use]
    pub fn new(bytes: usize) -> Self {
        let units = (bytes / BUDGET_UNIT).clamp(1, Semaphore::MAX_PERMITS);
        Self {
            units: Arc::new(Semaphore::new(units)),
            total: units * BUDGET_UNIT,
        }
    }

    /// The budget in bytes.
    #[must_use]
    pub fn total(&self) -> usize {
        self.total
    }

    /// Reserve room for `bytes` more (capped at the whole budget), waiting up to `wait`;
    /// `None` when it did not free up in time.
    pub async fn reserve(&self, bytes: usize, wait: Duration) -> Option<BodyReservation> {
        let mut reservation = BodyReservation::default();
        self.extend(&mut reservation, bytes, wait)
            .await
            .then_some(reservation)
    }

    /// Add room for `bytes` more to `reservation`; `false` when it did not free up in time.
    async fn extend(
        &self,
        reservation: &mut BodyReservation,
        bytes: usize,
        wait: Duration,
    ) -> bool {
        let units = bytes
            .div_ceil(BUDGET_UNIT)
            .min(self.total / BUDGET_UNIT)
            .saturating_sub(reservation.units());
        let Ok(units) = u32::try_from(units) else {
            return false;
        };
        if units == 0 {
            return true;
        }
        match tokio::time::timeout(wait, Arc::clone(&self.units).acquire_many_owned(units)).await {
            Ok(Ok(permit)) => {
                reservation.permits.push(permit);
                true
            }
            _ => false,
        }
    }
}

impl BodyReservation {
    fn units(&self) -> usize {
        self.permits.iter().map(|p| p.num_permits()).sum()
    }
}

/// Most a request body's buffer is sized to from its `content-length` before the bytes come.
const RESERVE_AT_MOST: usize = 4 << 20;

/// Why a request body could not be read.
#[derive(Debug)]
pub enum BodyError {
    /// Larger than the limit.
    TooLarge,
    /// The client sent nothing for the client timeout.
    Stalled,
    /// The body budget did not free up within the client timeout.
    Busy,
    /// The connection failed.
    Failed(String),
}

/// Read a request body of at most `limit` bytes, each piece arriving within `stall` of the one
/// before (a client that stops mid-body is not waited for forever).
///
/// # Errors
/// [`BodyError`].
pub async fn read_request_body(
    body: Incoming,
    limit: usize,
    stall: Duration,
    budget: Option<&BodyBudget>,
) -> Result<(Bytes, BodyReservation), BodyError> {
    // `content-length` (when sent and within the limit) sizes the buffer once; a body that
    // arrives in one frame is kept as it is, not copied.
    let expected = usize::try_from(hyper::body::Body::size_hint(&body).lower())
        .unwrap_or(usize::MAX)
        .min(limit);
    // Room in the budget before the bytes are read: all of an announced large body, else a
    // step at a time as it grows.
    let mut reservation = BodyReservation::default();
    let mut reserved = 0;
    if let Some(budget) = budget
        && expected >= SMALL_BODY
    {
        if !budget.extend(&mut reservation, expected, stall).await {
            return Err(BodyError::Busy);
        }
        reserved = expected;
    }
    let mut body = Limited::new(body, limit);
    // The first frame, until a second comes: then both go into `out`.
    let mut first: Option<Bytes> = None;
    let mut out = BytesMut::new();
    loop {
        match tokio::time::timeout(stall, body.frame()).await {
            Err(_) => return Err(BodyError::Stalled),
            Ok(None) => return Ok((first.unwrap_or_else(|| out.freeze()), reservation)),
            Ok(Some(Ok(frame))) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                let held = out.len() + first.as_ref().map_or(0, Bytes::len) + data.len();
                if let Some(budget) = budget
                    && held >= SMALL_BODY
                    && held > reserved
                {
                    reserved = held.max(reserved + BUDGET_STEP);
                    if !budget.extend(&mut reservation, reserved, stall).await {
                        return Err(BodyError::Busy);
                    }
                }
                if first.is_none() && out.is_empty() {
                    first = Some(data);
                    continue;
                }
                if let Some(earlier) = first.take() {
                    // What came and what is announced, up to 4 MiB: a client that announces
                    // more and stalls holds no more than that.
                    out.reserve(
                        expected
                            .min(RESERVE_AT_MOST)
                            .max(earlier.len() + data.len()),
                    );
                    out.extend_from_slice(&earlier);
                }
                out.extend_from_slice(&data);
            }
            Ok(Some(Err(e)))
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some() =>
            {
                return Err(BodyError::TooLarge);
            }
            Ok(Some(Err(e))) => return Err(BodyError::Failed(e.to_string())),
        }
    }
}

/// Logs a repeated event at most once per [`Self::EVERY`]: a failing accept (a full descriptor
/// table fails every accept, many times a second), or reaching the connection cap (under
/// sustained overload every closing connection lets one in and the cap is reached again).
#[derive(Debug, Default)]
pub(super) struct Throttled {
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttled {
    const EVERY: Duration = Duration::from_secs(10);

    /// Whether to log this event now, and how many were not logged since the last one.
    pub(super) fn report(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.duration_since(last) < Self::EVERY => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_fits_the_descriptor_limit() {
        let limits = ConnLimits {
            cap_wait: Duration::from_secs(5),
            max_connections: 512,
            client_timeout: Duration::from_secs(1),
        };
        assert_eq!(limits.fitted_to(1 << 20).max_connections, 512);
        assert_eq!(limits.fitted_to(1024).max_connections, 448);
        assert_eq!(limits.fitted_to(64).max_connections, MIN_CONNECTIONS);
        assert_eq!(limits.fitted_to(0).max_connections, MIN_CONNECTIONS);
    }

    #[test]
    fn repeated_accept_failures_are_logged_once_per_interval() {
        let mut errors = Throttled::default();
        let t0 = Instant::now();
        assert_eq!(errors.report(t0), Some(0));
        for i in 1..=20 {
            assert_eq!(errors.report(t0 + Duration::from_millis(50 * i)), None);
        }
        assert_eq!(errors.report(t0 + Duration::from_secs(11)), Some(20));
    }
}
