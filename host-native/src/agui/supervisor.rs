//! The sessions: one per AG-UI thread, created on its first run, at most `--max-sessions` alive
//! (the least recently used idle one is stopped to make room); the most recently used one is
//! the active session.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::approvals::Approvals;
use super::session::{AgentConfig, Session, Status};

/// What `GET /sessions` lists.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    /// The AG-UI thread.
    pub thread_id: String,
    /// Claude Code's session id, once known.
    pub claude_session_id: Option<String>,
    /// Its status.
    pub status: Status,
    /// The Claude Code process id, while one runs.
    pub pid: Option<u32>,
    /// The most recently used session.
    pub active: bool,
}

/// Every session of the server.
#[derive(Debug)]
pub struct Supervisor {
    config: Arc<AgentConfig>,
    approvals: Arc<Approvals>,
    max_sessions: usize,
    /// Most recently used last.
    sessions: Mutex<Vec<Session>>,
    /// Claude Code session ids of evicted threads, so their next run resumes.
    evicted: Mutex<std::collections::HashMap<String, String>>,
}

/// Every session is busy and `--max-sessions` allows no more.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error(
    "all {max_sessions} sessions are busy (running or waiting for their client) and --max-sessions allows no more; retry when one finishes"
)]
pub struct AllBusy {
    /// The limit.
    pub max_sessions: usize,
}

impl Supervisor {
    /// No sessions yet.
    #[must_use]
    pub fn new(config: AgentConfig, approvals: Arc<Approvals>, max_sessions: usize) -> Self {
        Self {
            config: Arc::new(config),
            approvals,
            max_sessions: max_sessions.max(1),
            sessions: Mutex::new(Vec::new()),
            evicted: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// The approvals registry.
    #[must_use]
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// The thread's session, if it has one.
    #[must_use]
    pub fn get(&self, thread_id: &str) -> Option<Session> {
        let sessions = self.sessions.lock().ok()?;
        sessions.iter().find(|s| s.thread_id == thread_id).cloned()
    }

    /// The thread's session, created if needed, now the active one. Returns sessions evicted to
    /// make room (the caller stops them).
    ///
    /// # Errors
    /// [`AllBusy`] when the thread has no session, `--max-sessions` are open and every one of
    /// them is running or waiting for its client (none can be evicted): no process is started.
    pub fn session(&self, thread_id: &str) -> Result<(Session, Vec<Session>), AllBusy> {
        let start = |resume: Option<String>| {
            Session::start(
                thread_id,
                Arc::clone(&self.config),
                Arc::clone(&self.approvals),
                resume,
            )
        };
        let mut sessions = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(i) = sessions.iter().position(|s| s.thread_id == thread_id) {
            let session = sessions.remove(i);
            sessions.push(session.clone());
            return Ok((session, Vec::new()));
        }
        let idle = |s: &Session| s.status() != Status::Running && !s.waits_for_client();
        let evictable = sessions.iter().filter(|s| idle(s)).count();
        if sessions.len() + 1 > self.max_sessions + evictable {
            return Err(AllBusy {
                max_sessions: self.max_sessions,
            });
        }
        let mut evicted = Vec::new();
        while sessions.len() >= self.max_sessions {
            // Never a session that is streaming or waiting for the client's tool result.
            let Some(i) = sessions.iter().position(idle) else {
                break;
            };
            let old = sessions.remove(i);
            if let (Some(id), Ok(mut e)) = (old.claude_session_id(), self.evicted.lock()) {
                e.insert(old.thread_id.clone(), id);
            }
            evicted.push(old);
        }
        let resume = self
            .evicted
            .lock()
            .ok()
            .and_then(|mut e| e.remove(thread_id));
        let session = start(resume);
        sessions.push(session.clone());
        Ok((session, evicted))
    }

    /// Every session, least recently used first.
    #[must_use]
    pub fn list(&self) -> Vec<SessionInfo> {
        let Ok(sessions) = self.sessions.lock() else {
            return Vec::new();
        };
        let last = sessions.len().saturating_sub(1);
        sessions
            .iter()
            .enumerate()
            .map(|(i, s)| SessionInfo {
                thread_id: s.thread_id.clone(),
                claude_session_id: s.claude_session_id(),
                status: s.status(),
                pid: s.pid(),
                active: i == last,
            })
            .collect()
    }

    /// Stop every session (their processes are killed).
    pub async fn stop_all(&self) {
        let sessions: Vec<Session> = self
            .sessions
            .lock()
            .map(|mut s| s.drain(..).collect())
            .unwrap_or_default();
        // Together: each may take its stop grace.
        futures_util::future::join_all(sessions.iter().map(Session::stop)).await;
    }
}
