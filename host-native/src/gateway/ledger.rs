//! The usage ledger: one [`Record`] per request when it ends, written to the store in batches by
//! one background task ([`Ledger`]). Never the prompt or the answer: who, what, how much, how it
//! went.
//!
//! Every record is also appended to a local journal file as it is queued, and the files are
//! deleted once the store has the records: when the store is down or slow, records wait in
//! memory (up to [`MEMORY_RECORDS`]) and in the journal; a process that ends without writing
//! them (SIGKILL, the store away at SIGTERM) leaves its journal to the next process started with
//! the same state directory. A record carries the request's id, and the store skips an id it
//! has, so a record written twice counts once.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, oneshot};
use tracing::{info, warn};

use super::journal::{self, Journal};
use super::limits::Limiter;
use super::store::Store;

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
    /// What a Fabstir request paid, in whole tokens of `paid_unit` (`0.000042`).
    #[serde(default)]
    pub paid: Option<String>,
    /// `ETH` or `USDC`.
    #[serde(default)]
    pub paid_unit: Option<String>,
    /// The replica that admitted it (its leases paid for it).
    #[serde(default)]
    pub replica: String,
    /// What it used of its key's quotas, settled when the record is written (once: a record
    /// written again settles nothing), so a journal replayed after a crash settles too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settles: Vec<Settle>,
}

/// One quota a request used: `rpm` 1, `tpm` and `tokens` its tokens, `usd` its cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settle {
    /// `rpm`, `tpm`, `usd`, `tokens`.
    pub metric: String,
    /// The window's start.
    pub win: i64,
    /// How much.
    pub used: f64,
}

/// Records held in memory while the store is away; older ones stay in the journal files only
/// (written at the next start).
pub const MEMORY_RECORDS: usize = 200_000;
/// How often the writer looks when nothing wakes it (the store's health, a retry).
const INTERVAL: Duration = Duration::from_millis(100);
/// The least time between two writes, unless a flush or the shutdown asks: records that end
/// meanwhile go in the same batch. A busy bridge writes a few transactions a second (and opens
/// a few journal files) instead of one a request.
const BATCH_GAP: Duration = Duration::from_millis(50);

#[derive(Default)]
struct Queue {
    records: Vec<Record>,
    flushes: Vec<oneshot::Sender<bool>>,
    closing: bool,
    /// The journal file records are appended to now, and its generation.
    journal: Option<Journal>,
    generation: u64,
    /// Records dropped from memory (the store was away too long); the journal files keep them.
    dropped: usize,
    /// Journal generations below this one are deleted.
    deleted_below: u64,
}

/// The ledger's handle: [`Ledger::record`] never waits on the store.
///
/// Every record is appended to a journal file (`journal-<replica>-<generation>.jsonl` in the
/// spool directory) as it is queued; the writer starts a new generation each time it takes the
/// queue, and deletes the files it has written. A process killed with SIGKILL leaves its
/// journal files behind; the next process to start with the same directory writes them (ids
/// are unique, so a record written twice counts once). So nothing that ended is lost to a
/// SIGKILL — only the requests still in flight.
pub struct Ledger {
    queue: Mutex<Queue>,
    wake: Notify,
    dir: PathBuf,
    replica: String,
    /// The store took the last write (or answered the last probe).
    healthy: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// Start the writer for `store`; journal files live in `dir` (those other processes left
    /// there are taken over and written).
    #[must_use]
    pub fn start(
        store: Store,
        limiter: Arc<Limiter>,
        replica: &str,
        dir: PathBuf,
        healthy: bool,
    ) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let ledger = Arc::new(Self {
            queue: Mutex::new(Queue::default()),
            wake: Notify::new(),
            dir,
            replica: replica.to_owned(),
            healthy: std::sync::atomic::AtomicBool::new(healthy),
        });
        let (adopted, files) = ledger.adopt();
        if !adopted.is_empty() {
            info!(records = adopted.len(), dir = %ledger.dir.display(), "ledger: records a stopped process left will be written to the store");
        }
        for record in adopted {
            ledger.record(record);
        }
        // In our own journal now: the files taken over can go.
        for (file, _lock) in files {
            let _ = std::fs::remove_file(file);
        }
        let task = tokio::spawn(writer(Arc::clone(&ledger), store, limiter));
        (ledger, task)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn journal_path(&self, generation: u64) -> PathBuf {
        self.dir
            .join(format!("journal-{}-{generation:08}.jsonl", self.replica))
    }

    /// Add a record: appended to the journal, written to the store within [`BATCH_GAP`] (and
    /// the time the last write took).
    pub fn record(&self, record: Record) {
        let line = serde_json::to_string(&record).map(|mut l| {
            l.push('\n');
            l
        });
        let mut queue = self.lock();
        if queue.journal.is_none() {
            let path = self.journal_path(queue.generation);
            queue.journal = std::fs::create_dir_all(&self.dir)
                .and_then(|()| Journal::create(&path))
                .map_err(|error| warn!(%error, path = %path.display(), "ledger: no journal file; records live in memory only until written"))
                .ok();
        }
        if let (Some(journal), Ok(line)) = (queue.journal.as_mut(), line)
            && let Err(error) = journal.append(line.as_bytes())
        {
            warn!(%error, "ledger: a record is not in the journal (in memory only until written)");
        }
        if queue.records.len() >= MEMORY_RECORDS {
            queue.records.remove(0);
            queue.dropped += 1;
        }
        queue.records.push(record);
        drop(queue);
        self.wake.notify_one();
    }

    /// Write what waits now; true when the store took it.
    pub async fn flush(&self) -> bool {
        let (tx, rx) = oneshot::channel();
        self.lock().flushes.push(tx);
        self.wake.notify_one();
        rx.await.unwrap_or(false)
    }

    /// The last write at shutdown; what the store does not take stays in the journal files
    /// for the next start.
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
            let left = self.lock().records.len();
            if left > 0 {
                warn!(records = left, dir = %self.dir.display(), "ledger: the store did not take the last records; the journal files keep them for the next start");
            }
        }
    }

    /// Whether the store took the last write (or answered the last probe while idle).
    #[must_use]
    pub fn healthy(&self) -> bool {
        self.healthy.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records waiting in memory.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.lock().records.len()
    }

    fn set_healthy(&self, healthy: bool) {
        self.healthy
            .store(healthy, std::sync::atomic::Ordering::Relaxed);
    }

    /// This replica's id.
    #[must_use]
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Whether a flush or the shutdown waits for the next write.
    fn urgent(&self) -> bool {
        let queue = self.lock();
        queue.closing || !queue.flushes.is_empty()
    }

    /// Take everything queued and start a new journal generation; returns the batch and the
    /// generation it closed.
    fn take(&self) -> (Vec<Record>, u64, Vec<oneshot::Sender<bool>>, bool) {
        let mut queue = self.lock();
        let batch = std::mem::take(&mut queue.records);
        let closed = queue.generation;
        let journal = queue.journal.take();
        if journal.is_some() {
            queue.generation += 1;
        }
        let taken = (
            batch,
            closed,
            std::mem::take(&mut queue.flushes),
            queue.closing,
        );
        drop(queue);
        // Closed (cut to its lines) outside the lock.
        drop(journal);
        taken
    }

    /// Journal generations up to `generation` are in the store: delete their files.
    fn written_through(&self, generation: u64) {
        let from = {
            let mut queue = self.lock();
            let dropped = std::mem::take(&mut queue.dropped);
            if dropped > 0 {
                // Those records are only in the files: keep the files for the next start.
                warn!(
                    records = dropped,
                    "ledger: records were dropped from memory while the store was away; the journal files keep them for the next start"
                );
                return;
            }
            std::mem::replace(&mut queue.deleted_below, generation + 1)
        };
        for g in from..=generation {
            let _ = std::fs::remove_file(self.journal_path(g));
        }
    }

    /// Take over the journal files other processes left in the directory (those of a live
    /// process are locked, and stay its own): renamed to a name of ours and kept locked until
    /// their records are in our own journal, so two starting processes never take the same one.
    fn adopt(&self) -> (Vec<Record>, Vec<(PathBuf, std::fs::File)>) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return (Vec::new(), Vec::new());
        };
        let mut records = Vec::new();
        let mut files = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if !Journal::is_journal(name) {
                continue;
            }
            let claimed = Journal::claimed_path(&path, &self.replica);
            match Journal::claim(&path, &claimed) {
                Ok(Some((text, lock))) => {
                    records.extend(
                        journal::lines(&text)
                            .filter_map(|line| serde_json::from_str::<Record>(line).ok()),
                    );
                    files.push((claimed, lock));
                }
                Ok(None) => {}
                Err(error) => {
                    warn!(%error, path = %path.display(), "ledger: a journal file another process left cannot be taken over");
                }
            }
        }
        (records, files)
    }
}

async fn writer(ledger: Arc<Ledger>, store: Store, limiter: Arc<Limiter>) {
    let mut failing_since: Option<std::time::Instant> = None;
    let mut retry: Vec<Record> = Vec::new();
    let mut probed = std::time::Instant::now();
    let mut wrote = tokio::time::Instant::now();
    loop {
        let _ = tokio::time::timeout(INTERVAL, ledger.wake.notified()).await;
        if !ledger.urgent() {
            tokio::time::sleep_until(wrote + BATCH_GAP).await;
        }
        // Away and nothing to write: ask it once a second whether it is back.
        if !ledger.healthy() && probed.elapsed() >= Duration::from_secs(1) {
            probed = std::time::Instant::now();
            if store.ping().await.is_ok() {
                ledger.set_healthy(true);
            }
        }
        let (mut batch, generation, flushes, closing) = ledger.take();
        if !retry.is_empty() {
            retry.append(&mut batch);
            batch = std::mem::take(&mut retry);
        }
        let ok = if batch.is_empty() {
            true
        } else {
            wrote = tokio::time::Instant::now();
            match store.write(&batch).await {
                Ok(settled) => {
                    ledger.set_healthy(true);
                    limiter.settled(&settled);
                    ledger.written_through(generation);
                    if let Some(since) = failing_since.take() {
                        info!(
                            seconds = since.elapsed().as_secs(),
                            "ledger: the store takes records again"
                        );
                    }
                    true
                }
                Err(error) => {
                    ledger.set_healthy(false);
                    if failing_since.is_none() {
                        failing_since = Some(std::time::Instant::now());
                        warn!(%error, "ledger: the store does not take records; they wait (in memory and the journal files)");
                    }
                    if batch.len() > MEMORY_RECORDS {
                        let extra = batch.len() - MEMORY_RECORDS;
                        batch.drain(..extra);
                        ledger.lock().dropped += extra;
                    }
                    retry = batch;
                    false
                }
            }
        };
        for done in flushes {
            let _ = done.send(ok);
        }
        if closing {
            return;
        }
    }
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
