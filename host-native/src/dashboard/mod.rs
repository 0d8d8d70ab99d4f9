//! What the dashboard shows, gathered as requests end: the page at `/ui` ([`page`]), the JSON
//! and event stream behind it ([`api`]), `claude-bridge statusline` ([`statusline`]) and
//! `claude-bridge top` ([`top`]) all read it.
//!
//! Every request that ends — answered, failed upstream, or refused — becomes one [`Finished`]
//! ([`Board::record`], called from `server::observe::Outcome::finish` and the refusal paths).
//! The board keeps:
//!
//! - the last [`RECENT`] of them, for a *Live* view that opens late;
//! - a broadcast of each as it ends ([`Board::subscribe`]), so *Live* is pushed, not polled;
//! - the last hour in minute slots ([`window::HourWindow`]), for everyone and per key, for the
//!   *Now* view's rates and time-to-first-token percentiles;
//! - each session's totals ([`SessionTotals`]), for the status line.
//!
//! It is in memory, per process: the ledger (`/v1/usage`) is the record that lasts and that the
//! *Spend* view reads.
//!
//! ```
//! use claude_bridge::dashboard::{Board, Finished};
//! let board = Board::default();
//! let mut live = board.subscribe();
//! board.record(Finished { id: "req_1".into(), at_ms: 1_795_000_000_000, key: Some("alice".into()),
//!     session: Some("s1".into()), target: "local,qwen".into(), status: 200,
//!     output_tokens: Some(7), cost_usd: Some(0.01), ..Finished::default() });
//! assert_eq!(live.try_recv().unwrap().id, "req_1");
//! let s = board.session("s1").unwrap();
//! assert_eq!((s.requests, s.output_tokens, s.last_target.as_str()), (1, 7, "local,qwen"));
//! ```

pub mod api;
pub mod client;
pub mod page;
pub mod statusline;
pub mod top;
pub mod window;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use self::window::{HourSummary, HourWindow};

/// Requests the board keeps for a *Live* view that opens late.
pub const RECENT: usize = 200;
/// Sessions whose totals it keeps (the oldest go first).
const SESSIONS: usize = 4_096;
/// Keys with an hour window of their own (past this, new keys share the everyone window only).
const KEY_WINDOWS: usize = 4_096;

/// One request, as it ended.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Finished {
    /// Its `request-id`.
    pub id: String,
    /// When it ended (ms since the epoch).
    pub at_ms: i64,
    /// The gateway key's name (`None`: no gateway, or no key got that far).
    pub key: Option<String>,
    /// The client, from its `user-agent` (`claude-code`, `codex`, `anthropic-sdk`, …).
    pub client: String,
    /// Claude Code's session id.
    pub session: Option<String>,
    /// The front it came in by: `messages`, `chat`, `responses`.
    pub front: String,
    /// The route that chose the first target.
    pub route: String,
    /// `provider,model` that answered (or was tried last; empty: none was).
    pub target: String,
    /// The client's model name.
    pub model: String,
    /// Why the target that answered was tried (`only`, `affinity`, `load`, `pool`, `fallback`).
    pub pick: String,
    /// Targets tried.
    pub attempts: usize,
    /// The HTTP status the client got (200 for a stream that then ended with an error event).
    pub status: u16,
    /// The error type it ended with (`None`: it did not fail).
    pub error: Option<String>,
    /// What the error said.
    pub message: Option<String>,
    /// Time to first token (ms).
    pub ttft_ms: Option<u64>,
    /// Time to the end (ms).
    pub ms: u64,
    /// Input tokens (the upstream's count).
    pub input_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// What it cost in USD (`None`: no price for its target, or no gateway).
    pub cost_usd: Option<f64>,
}

impl Finished {
    /// It failed: an error status, or an error that ended its stream.
    #[must_use]
    pub fn failed(&self) -> bool {
        self.error.is_some() || self.status >= 400
    }
}

/// One Claude Code session's totals (what the status line prints).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SessionTotals {
    /// The key its requests came with.
    pub key: Option<String>,
    /// Requests.
    pub requests: u64,
    /// Of those, failed.
    pub errors: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// USD, summed over the requests that had a price.
    pub cost_usd: f64,
    /// The target that answered last.
    pub last_target: String,
    /// When its last request ended (ms since the epoch).
    pub last_at_ms: i64,
}

#[derive(Default)]
struct Inner {
    recent: VecDeque<Arc<Finished>>,
    hour: HourWindow,
    per_key: HashMap<String, HourWindow>,
    sessions: HashMap<String, SessionTotals>,
    /// Sessions in the order they were first seen (the oldest is dropped first).
    session_order: VecDeque<String>,
}

/// The requests that ended, as the dashboard sees them.
pub struct Board {
    inner: Mutex<Inner>,
    live: broadcast::Sender<Arc<Finished>>,
}

impl Default for Board {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            live: broadcast::Sender::new(RECENT),
        }
    }
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Board").finish_non_exhaustive()
    }
}

impl Board {
    /// The process's board.
    pub fn global() -> &'static Self {
        static BOARD: OnceLock<Board> = OnceLock::new();
        BOARD.get_or_init(Self::default)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request ended.
    pub fn record(&self, finished: Finished) {
        let finished = Arc::new(finished);
        {
            let mut inner = self.lock();
            let failed = finished.failed();
            inner.hour.add(finished.at_ms, failed, finished.ttft_ms);
            if let Some(key) = &finished.key {
                let room = inner.per_key.len() < KEY_WINDOWS;
                match inner.per_key.get_mut(key) {
                    Some(window) => window.add(finished.at_ms, failed, finished.ttft_ms),
                    None if room => {
                        let mut window = HourWindow::default();
                        window.add(finished.at_ms, failed, finished.ttft_ms);
                        inner.per_key.insert(key.clone(), window);
                    }
                    None => {}
                }
            }
            if let Some(session) = &finished.session {
                if !inner.sessions.contains_key(session) {
                    if inner.session_order.len() >= SESSIONS
                        && let Some(oldest) = inner.session_order.pop_front()
                    {
                        inner.sessions.remove(&oldest);
                    }
                    inner.session_order.push_back(session.clone());
                }
                let totals = inner.sessions.entry(session.clone()).or_default();
                totals.key.clone_from(&finished.key);
                totals.requests += 1;
                totals.errors += u64::from(failed);
                totals.input_tokens += finished.input_tokens.unwrap_or(0);
                totals.output_tokens += finished.output_tokens.unwrap_or(0);
                totals.cost_usd += finished.cost_usd.unwrap_or(0.0);
                if !finished.target.is_empty() {
                    totals.last_target.clone_from(&finished.target);
                }
                totals.last_at_ms = finished.at_ms;
            }
            if inner.recent.len() >= RECENT {
                inner.recent.pop_front();
            }
            inner.recent.push_back(Arc::clone(&finished));
        }
        // No one watching is fine.
        let _ = self.live.send(finished);
    }

    /// Every request as it ends from now on.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Finished>> {
        self.live.subscribe()
    }

    /// The last [`RECENT`] requests that `scope` may see, oldest first.
    #[must_use]
    pub fn recent(&self, scope: &Scope) -> Vec<Arc<Finished>> {
        self.lock()
            .recent
            .iter()
            .filter(|f| scope.sees(f))
            .cloned()
            .collect()
    }

    /// The last hour, of everyone's requests or one key's.
    #[must_use]
    pub fn hour(&self, scope: &Scope, now_ms: i64) -> HourSummary {
        let inner = self.lock();
        match scope {
            Scope::All => inner.hour.summary(now_ms),
            Scope::Key(key) => inner.per_key.get(key).map_or_else(
                || HourWindow::default().summary(now_ms),
                |w| w.summary(now_ms),
            ),
        }
    }

    /// A session's totals.
    #[must_use]
    pub fn session(&self, id: &str) -> Option<SessionTotals> {
        self.lock().sessions.get(id).cloned()
    }
}

/// A model request refused before any target answered (a bad key, a limit, a request the
/// front or the router turned away): it shows on the board with its status and message.
pub fn refused(sender: &crate::server::observe::Sender, status: u16, message: &str) {
    let kind = bridge_core::anthropic::events::ErrorKind::from_upstream_status(status);
    Board::global().record(sender.finished(
        status,
        Some(kind.as_str()),
        Some(&crate::redact::redact(message)),
    ));
}

/// Whose requests a caller may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Everyone's (the admin key; a bridge without keys; the one `client_key` without a
    /// gateway).
    All,
    /// One key's.
    Key(String),
}

impl Scope {
    /// Whether this scope sees `finished`.
    #[must_use]
    pub fn sees(&self, finished: &Finished) -> bool {
        match self {
            Self::All => true,
            Self::Key(key) => finished.key.as_deref() == Some(key),
        }
    }

    /// The scope of a caller.
    #[must_use]
    pub fn of(caller: &crate::gateway::Caller, gateway: bool) -> Self {
        use crate::gateway::Caller;
        match caller {
            Caller::Admin | Caller::Open => Self::All,
            Caller::Shared if !gateway => Self::All,
            other => Self::Key(other.name().to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(key: &str, session: &str, target: &str, status: u16) -> Finished {
        Finished {
            id: format!("req_{key}_{session}"),
            at_ms: 1_795_000_000_000,
            key: Some(key.into()),
            session: Some(session.into()),
            target: target.into(),
            status,
            input_tokens: Some(10),
            output_tokens: Some(2),
            cost_usd: Some(0.5),
            ..Finished::default()
        }
    }

    #[test]
    fn a_key_sees_only_its_own_requests() {
        let board = Board::default();
        board.record(ended("alice", "s1", "a,m", 200));
        board.record(ended("bob", "s2", "b,m", 500));
        let alice = Scope::Key("alice".into());
        let seen: Vec<_> = board.recent(&alice).iter().map(|f| f.id.clone()).collect();
        assert_eq!(seen, ["req_alice_s1"]);
        assert_eq!(board.recent(&Scope::All).len(), 2);
        let now = 1_795_000_000_500;
        assert_eq!(board.hour(&alice, now).requests, 1);
        assert_eq!(board.hour(&alice, now).errors, 0);
        assert_eq!(board.hour(&Scope::Key("bob".into()), now).errors, 1);
        assert_eq!(board.hour(&Scope::Key("carol".into()), now).requests, 0);
        assert_eq!(board.hour(&Scope::All, now).requests, 2);
    }

    #[test]
    fn sessions_add_up_and_remember_the_last_target() {
        let board = Board::default();
        board.record(ended("alice", "s1", "a,m", 200));
        board.record(ended("alice", "s1", "b,m", 200));
        board.record(ended("alice", "s1", "", 401));
        let s = board.session("s1").unwrap();
        assert_eq!(s.requests, 3);
        assert_eq!(s.errors, 1);
        assert_eq!(s.output_tokens, 6);
        assert!((s.cost_usd - 1.5).abs() < 1e-9);
        assert_eq!(s.last_target, "b,m");
        assert!(board.session("s2").is_none());
    }

    #[test]
    fn the_recent_list_and_the_sessions_are_bounded() {
        let board = Board::default();
        for i in 0..(RECENT + 5) {
            board.record(ended("k", &format!("s{i}"), "a,m", 200));
        }
        let recent = board.recent(&Scope::All);
        assert_eq!(recent.len(), RECENT);
        assert_eq!(recent[0].id, "req_k_s5");
        for i in 0..SESSIONS {
            board.record(ended("k", &format!("t{i}"), "a,m", 200));
        }
        assert!(
            board.session("s0").is_none(),
            "the oldest sessions go first"
        );
        assert!(board.session(&format!("t{}", SESSIONS - 1)).is_some());
    }
}
