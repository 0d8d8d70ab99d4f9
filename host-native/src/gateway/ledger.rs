//! The usage ledger: one [`Record`] per request when it ends, written to the store in batches by
//! one background task ([`Ledger`]). Never the prompt or the answer: who, what, how much, how it
//! went.
//!
//! When the store is down or slow, records wait in memory; past [`MEMORY_RECORDS`] they go to a
//! local spool file (JSON lines) that is written to the store once it is back — at the next
//! start if need be (spool files of a process that died are taken over). A record carries the
//! request's id, and the store skips an id it has, so a record written twice counts once.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, oneshot};
use tracing::{info, warn};

use super::limits::Limiter;
use super::store::{Settlement, Store};

/// One finished request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The request id (`req_…`).
    pub id: String,
    /// When it arrived (Unix ms).
    pub at_ms: i64,
    /// The key's name (`-`: no key).
    pub key: String,
    /// `claude-code`, `codex`, `anthropic-sdk`, `openai-sdk`, `other`.
    pub client: String,
    /// Claude Code's session id.
    pub session: Option<String>,
    /// `messages`, `chat`, `responses`.
    pub front: String,
    /// The route that chose the first target.
    pub route: String,
    /// `provider,model` that answered (or was tried last).
    pub target: String,
    /// The client's model name.
    pub model: String,
    /// The model the upstream was asked for.
    pub upstream_model: String,
    /// Input tokens (the upstream's own count unless `estimated`).
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Input tokens read from a cache.
    pub cache_read_tokens: i64,
    /// Input tokens written to a cache.
    pub cache_write_tokens: i64,
    /// The upstream gave no usage: the counts are the bridge's estimate.
    pub estimated: bool,
    /// What it cost, in US dollars.
    pub cost_usd: f64,
    /// Whether a price was known (`false`: cost 0, unpriced).
    pub priced: bool,
    /// Time to the first content (ms).
    pub ttft_ms: Option<i64>,
    /// Time to the end (ms).
    pub duration_ms: i64,
    /// The HTTP status the client got.
    pub status: i64,
    /// The error it ended with (also for a stream that began with 200).
    pub error_kind: Option<String>,
    /// Targets tried.
    pub attempts: i64,
}

/// Records held in memory while the store is away, before the spool file takes them.
pub const MEMORY_RECORDS: usize = 10_000;
/// Records per store transaction.
const BATCH: usize = 5_000;
/// How often the writer writes when records wait.
const INTERVAL: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Queue {
    records: Vec<Record>,
    flushes: Vec<oneshot::Sender<bool>>,
    closing: bool,
}

/// The ledger's handle: [`Ledger::record`] never waits.
pub struct Ledger {
    queue: Mutex<Queue>,
    wake: Notify,
    spool: PathBuf,
    replica: String,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("spool", &self.spool)
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// Start the writer for `store`; spool files live in `spool_dir` (those of other processes
    /// found there are taken over and written).
    #[must_use]
    pub fn start(
        store: Store,
        limiter: Arc<Limiter>,
        replica: &str,
        spool_dir: PathBuf,
    ) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let ledger = Arc::new(Self {
            queue: Mutex::new(Queue::default()),
            wake: Notify::new(),
            spool: spool_dir.join(format!("spool-{replica}.jsonl")),
            replica: replica.to_owned(),
        });
        let adopted = adopt_spools(&spool_dir, &ledger.spool);
        if !adopted.is_empty() {
            info!(records = adopted.len(), dir = %spool_dir.display(), "ledger: records from spool files will be written to the store");
            ledger.lock().records.extend(adopted);
        }
        let task = tokio::spawn(writer(Arc::clone(&ledger), store, limiter));
        (ledger, task)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Add a record (written within [`INTERVAL`] while the store is up).
    pub fn record(&self, record: Record) {
        self.lock().records.push(record);
        self.wake.notify_one();
    }

    /// Write what waits now; true when the store took it.
    pub async fn flush(&self) -> bool {
        let (tx, rx) = oneshot::channel();
        self.lock().flushes.push(tx);
        self.wake.notify_one();
        rx.await.unwrap_or(false)
    }

    /// The last write at shutdown: what the store does not take goes to the spool file.
    pub async fn close(&self, within: Duration) {
        let (tx, rx) = oneshot::channel();
        {
            let mut queue = self.lock();
            queue.closing = true;
            queue.flushes.push(tx);
        }
        self.wake.notify_one();
        let written = tokio::time::timeout(within, rx)
            .await
            .ok()
            .and_then(Result::ok);
        if written != Some(true) {
            let left = std::mem::take(&mut self.lock().records);
            if !left.is_empty() {
                match append_spool(&self.spool, &left) {
                    Ok(()) => {
                        warn!(records = left.len(), spool = %self.spool.display(), "ledger: the store did not take the last records; they wait in the spool file for the next start")
                    }
                    Err(error) => {
                        warn!(records = left.len(), %error, "ledger: records lost: neither the store nor the spool file took them")
                    }
                }
            }
        }
    }

    /// Records waiting (memory only).
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.lock().records.len()
    }

    /// This replica's id.
    #[must_use]
    pub fn replica(&self) -> &str {
        &self.replica
    }
}

async fn writer(ledger: Arc<Ledger>, store: Store, limiter: Arc<Limiter>) {
    let mut failing_since: Option<std::time::Instant> = None;
    loop {
        let _ = tokio::time::timeout(INTERVAL, ledger.wake.notified()).await;
        let (mut batch, flushes, closing) = {
            let mut queue = ledger.lock();
            let take = queue.records.len().min(BATCH);
            let batch: Vec<Record> = queue.records.drain(..take).collect();
            (batch, std::mem::take(&mut queue.flushes), queue.closing)
        };
        // A flush writes everything that waits, batch after batch.
        let mut settlements: Vec<Settlement> = limiter.take_settlements();
        let mut ok = true;
        loop {
            if batch.is_empty() && settlements.is_empty() {
                break;
            }
            match store.write(ledger.replica(), &batch, &settlements).await {
                Ok(()) => {
                    limiter.settled(&settlements);
                    if let Some(since) = failing_since.take() {
                        info!(
                            seconds = since.elapsed().as_secs(),
                            "ledger: the store takes records again"
                        );
                    }
                    if flushes.is_empty() && !closing {
                        break;
                    }
                    let mut queue = ledger.lock();
                    let take = queue.records.len().min(BATCH);
                    batch = queue.records.drain(..take).collect();
                    settlements = Vec::new();
                }
                Err(error) => {
                    ok = false;
                    if failing_since.is_none() {
                        failing_since = Some(std::time::Instant::now());
                        warn!(%error, "ledger: the store does not take records; they wait (in memory, then in the spool file)");
                    }
                    limiter.restore_settlements(settlements);
                    let mut queue = ledger.lock();
                    batch.append(&mut queue.records);
                    queue.records = batch;
                    if queue.records.len() > MEMORY_RECORDS {
                        let spill: Vec<Record> = queue.records.drain(..).collect();
                        drop(queue);
                        if let Err(error) = append_spool(&ledger.spool, &spill) {
                            warn!(%error, "ledger: cannot write the spool file; records stay in memory");
                            ledger.lock().records.splice(0..0, spill);
                        }
                    }
                    break;
                }
            }
        }
        if ok && !closing && failing_since.is_none() {
            drain_spool(&ledger, &store).await;
        }
        for done in flushes {
            let _ = done.send(ok);
        }
        if closing {
            return;
        }
    }
}

/// Records of the spool file go back to the store once it is up.
async fn drain_spool(ledger: &Ledger, store: &Store) {
    if !ledger.spool.exists() {
        return;
    }
    let records = read_spool(&ledger.spool);
    for chunk in records.chunks(BATCH) {
        if store.write(ledger.replica(), chunk, &[]).await.is_err() {
            return;
        }
    }
    let _ = std::fs::remove_file(&ledger.spool);
    info!(
        records = records.len(),
        "ledger: the spool file was written to the store"
    );
}

fn append_spool(path: &std::path::Path, records: &[Record]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    file.write_all(text.as_bytes())?;
    file.sync_data()
}

fn read_spool(path: &std::path::Path) -> Vec<Record> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Take over the spool files other processes left in `dir` (renamed to ours first, so two
/// starting processes never take the same one).
fn adopt_spools(dir: &std::path::Path, ours: &std::path::Path) -> Vec<Record> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut records = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !(name.starts_with("spool-") && name.ends_with(".jsonl")) || path == ours {
            continue;
        }
        let claimed = path.with_extension(format!("taken-{}", std::process::id()));
        if std::fs::rename(&path, &claimed).is_ok() {
            records.extend(read_spool(&claimed));
            let _ = std::fs::remove_file(&claimed);
        }
    }
    records
}

/// Which client sent a request, from its `user-agent`.
#[must_use]
pub fn client_kind(user_agent: &str) -> &'static str {
    let ua = user_agent.to_ascii_lowercase();
    if ua.starts_with("claude-cli") || ua.contains("claude-code") {
        "claude-code"
    } else if ua.starts_with("codex") {
        "codex"
    } else if ua.starts_with("anthropic/") {
        "anthropic-sdk"
    } else if ua.starts_with("openai/") || ua.starts_with("asyncopenai/") {
        "openai-sdk"
    } else {
        "other"
    }
}
