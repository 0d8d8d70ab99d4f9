//! The usage ledger: one [`Record`] per request when it ends, written to the store in batches by
//! one background task ([`Ledger`]). Never the prompt or the answer: who, what, how much, how it
//! went.
//!
//! Every record is also appended to a local journal file as it is queued, and the files are
//! deleted once the store has the records (the last one is emptied and kept for the next
//! records instead, so a busy bridge does not make a file every batch): when the store is down
//! or slow, records wait in memory (up to [`MEMORY_RECORDS`]) and in the journal; a process that
//! ends without writing them (SIGKILL, the store away at SIGTERM) leaves its journal to the next
//! process started with the same state directory. A record carries the request's id, and the
//! store skips an id it has, so a record written twice counts once.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, oneshot};
use tracing::{info, warn};

use super::journal::{self, Journal};
use super::limits::{Limiter, Metric};
use super::store::{Dialect, Store};

/// One finished request. Queued and journaled as its row ([`Entry`]); it reads from JSON too
/// as an object, the form journals held before rows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    #[serde(default)]
    pub settles: Vec<Settle>,
}

/// One quota a request used: `rpm` 1, `tpm` and `tokens` its tokens, `usd` its cost. In a row
/// it is `["tpm", win, used]`; an object (`{"metric": …}`, what journals held before) reads too.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Settle {
    /// `rpm`, `tpm`, `usd`, `tokens`.
    pub metric: Metric,
    /// The window's start.
    pub win: i64,
    /// How much.
    pub used: f64,
}

impl Serialize for Settle {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (self.metric, self.win, self.used).serialize(serializer)
    }
}

/// What a row's JSON starts with room for.
const ROW_BYTES: usize = 320;

/// A [`Record`] and its row: the JSON array of its ledger columns (in the store's column
/// order), then its replica and what it settles. The row is the record's journal line (with a
/// newline) and, joined with the others of a batch, what the store's `INSERT` takes apart, so
/// a record is made into JSON once.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The record.
    pub record: Record,
    row: String,
}

impl Entry {
    /// The record with its row.
    ///
    /// # Errors
    /// It cannot be made into JSON (never, for these types; kept typed rather than assumed).
    pub fn new(record: Record) -> serde_json::Result<Self> {
        // Room for a typical row (about 230 bytes), so it is seldom grown while written.
        let mut row = Vec::with_capacity(ROW_BYTES);
        serde_json::to_writer(&mut row, &Row::of(&record))?;
        let row = String::from_utf8(row).map_err(serde::ser::Error::custom)?;
        Ok(Self { record, row })
    }

    /// The row's JSON.
    #[must_use]
    pub fn row(&self) -> &str {
        &self.row
    }

    /// A journal line: a row (kept as it is), or a record as an object (what journals held
    /// before rows; made into its row).
    fn read(line: &str) -> Option<Self> {
        match serde_json::from_str::<Row<'_>>(line) {
            Ok(row) => Some(Self {
                record: row.into_record(),
                row: line.to_owned(),
            }),
            Err(_) => Self::new(serde_json::from_str::<Record>(line).ok()?).ok(),
        }
    }
}

/// One ledger row: the store's columns in order (`LEDGER_COLUMNS` in `store.rs`; `day` made
/// from `at_ms`, flags as 0 or 1), then the replica and the settles, which the `INSERT` does
/// not read.
#[derive(Serialize, Deserialize)]
struct Row<'a>(
    #[serde(borrow)] Cow<'a, str>,
    i64,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    i64,
    i64,
    i64,
    i64,
    i64,
    f64,
    i64,
    Option<i64>,
    i64,
    i64,
    #[serde(borrow)] Option<Cow<'a, str>>,
    i64,
    #[serde(borrow)] Option<Cow<'a, str>>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    #[serde(borrow)] Cow<'a, str>,
    Cow<'a, [Settle]>,
);

impl<'a> Row<'a> {
    fn of(r: &'a Record) -> Self {
        let text = |s: &'a String| Cow::Borrowed(s.as_str());
        let maybe = |s: &'a Option<String>| s.as_deref().map(Cow::Borrowed);
        Self(
            text(&r.id),
            r.at_ms,
            Cow::Owned(super::period::day_of(r.at_ms)),
            text(&r.key),
            text(&r.client),
            maybe(&r.session),
            text(&r.front),
            text(&r.route),
            text(&r.target),
            text(&r.model),
            text(&r.upstream_model),
            r.input_tokens,
            r.output_tokens,
            r.cache_read_tokens,
            r.cache_write_tokens,
            i64::from(r.estimated),
            r.cost_usd,
            i64::from(r.priced),
            r.ttft_ms,
            r.duration_ms,
            r.status,
            maybe(&r.error_kind),
            r.attempts,
            maybe(&r.paid),
            maybe(&r.paid_unit),
            text(&r.replica),
            Cow::Borrowed(&r.settles),
        )
    }

    fn into_record(self) -> Record {
        let Self(
            id,
            at_ms,
            _day,
            key,
            client,
            session,
            front,
            route,
            target,
            model,
            upstream_model,
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_write_tokens,
            estimated,
            cost_usd,
            priced,
            ttft_ms,
            duration_ms,
            status,
            error_kind,
            attempts,
            paid,
            paid_unit,
            replica,
            settles,
        ) = self;
        Record {
            id: id.into_owned(),
            at_ms,
            key: key.into_owned(),
            client: client.into_owned(),
            session: session.map(Cow::into_owned),
            front: front.into_owned(),
            route: route.into_owned(),
            target: target.into_owned(),
            model: model.into_owned(),
            upstream_model: upstream_model.into_owned(),
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_write_tokens,
            estimated: estimated != 0,
            cost_usd,
            priced: priced != 0,
            ttft_ms,
            duration_ms,
            status,
            error_kind: error_kind.map(Cow::into_owned),
            attempts,
            paid: paid.map(Cow::into_owned),
            paid_unit: paid_unit.map(Cow::into_owned),
            replica: replica.into_owned(),
            settles: settles.into_owned(),
        }
    }
}

/// Records held in memory while the store is away; older ones stay in the journal files only
/// (written at the next start).
pub const MEMORY_RECORDS: usize = 200_000;
/// How often the writer looks when nothing wakes it (the store's health, a retry).
const INTERVAL: Duration = Duration::from_millis(100);
/// The least time between two writes, unless a flush or the shutdown asks: records that end
/// meanwhile go in the same batch. A busy bridge writes a few transactions a second (and opens
/// a few journal files) instead of one a request.
///
/// 50 ms on PostgreSQL, whose replicas see each other's use when it is settled (the overshoot
/// bound in `limits.rs` counts that long's worth). 250 ms on SQLite, one machine's store: each
/// commit writes the last, part-filled pages of the ledger's B-trees to the WAL again, and a
/// fifth as many commits cost the bridge 22 rather than 26 µs a request at 64 concurrent
/// (`make bench-proxy`, 9 rounds each).
const fn batch_gap(dialect: Dialect) -> Duration {
    match dialect {
        Dialect::Sqlite => Duration::from_millis(250),
        Dialect::Postgres => Duration::from_millis(50),
    }
}
/// A written journal larger than this (it grew while the store was away) is deleted, not kept
/// for the next generation.
const SPARE_MAX_BYTES: usize = 4 * journal::STEP;

#[derive(Default)]
struct Queue {
    records: VecDeque<Entry>,
    flushes: Vec<oneshot::Sender<bool>>,
    closing: bool,
    /// The journal file records are appended to now, and its generation.
    journal: Option<Journal>,
    generation: u64,
    /// A journal whose records are all in the store, emptied to be the next generation's:
    /// a busy bridge starts a generation every [`batch_gap`], and a new file (made, grown,
    /// mapped, its pages faulted in, then cut, unmapped and deleted) each time was a fifth of
    /// what the ledger cost a request.
    spare: Option<Journal>,
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
        for entry in adopted {
            ledger.queue_entry(entry);
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

    /// Add a record: appended to the journal, written to the store within [`batch_gap`] (and
    /// the time the last write took).
    pub fn record(&self, record: Record) {
        match Entry::new(record) {
            Ok(entry) => self.queue_entry(entry),
            Err(error) => warn!(%error, "ledger: a record cannot be made into its row; it is lost"),
        }
    }

    fn queue_entry(&self, entry: Entry) {
        let mut queue = self.lock();
        if queue.journal.is_none() {
            let path = self.journal_path(queue.generation);
            let spare = queue
                .spare
                .take()
                .and_then(|mut spare| spare.rename(&path).is_ok().then_some(spare));
            queue.journal = match spare {
                Some(spare) => Some(spare),
                None => std::fs::create_dir_all(&self.dir)
                    .and_then(|()| Journal::create(&path))
                    .map_err(|error| warn!(%error, path = %path.display(), "ledger: no journal file; records live in memory only until written"))
                    .ok(),
            };
        }
        if let Some(journal) = queue.journal.as_mut()
            && let Err(error) = journal.append(entry.row().as_bytes())
        {
            warn!(%error, "ledger: a record is not in the journal (in memory only until written)");
        }
        if queue.records.len() >= MEMORY_RECORDS {
            queue.records.pop_front();
            queue.dropped += 1;
        }
        queue.records.push_back(entry);
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

    /// Take everything queued and start a new journal generation: the batch, the generation
    /// it closed and that generation's journal (no longer appended to; still open, so it can be
    /// used again once its records are in the store).
    fn take(&self) -> Taken {
        let mut queue = self.lock();
        // The next batch is likely as long: room for it (up to a busy second's), so its queue
        // is not grown a record at a time.
        let room = VecDeque::with_capacity(queue.records.len().min(8_192));
        let journal = queue.journal.take();
        let generation = queue.generation;
        if journal.is_some() {
            queue.generation += 1;
        }
        Taken {
            batch: Vec::from(std::mem::replace(&mut queue.records, room)),
            generation,
            journal,
            flushes: std::mem::take(&mut queue.flushes),
            closing: queue.closing,
        }
    }

    /// Journal generations up to `generation` are in the store: delete their files, or keep
    /// `journal` (that generation's), emptied, for the next generation.
    fn written_through(&self, generation: u64, journal: Option<Journal>) {
        let (from, keep) = {
            let mut queue = self.lock();
            let dropped = std::mem::take(&mut queue.dropped);
            if dropped > 0 {
                drop(queue);
                // Those records are only in the files: keep the files for the next start.
                warn!(
                    records = dropped,
                    "ledger: records were dropped from memory while the store was away; the journal files keep them for the next start"
                );
                return;
            }
            (
                std::mem::replace(&mut queue.deleted_below, generation + 1),
                queue.spare.is_none(),
            )
        };
        let spare = journal
            .filter(|journal| keep && journal.size() <= SPARE_MAX_BYTES)
            .and_then(|mut journal| {
                // Emptied, then renamed: a process killed in between leaves no line twice.
                journal.reset();
                journal
                    .rename(&self.spare_path())
                    .is_ok()
                    .then_some(journal)
            });
        if let Some(spare) = spare {
            self.lock().spare = Some(spare);
        }
        // What was not kept is closed by now; its file goes with the generation's others.
        for g in from..=generation {
            let _ = std::fs::remove_file(self.journal_path(g));
        }
    }

    /// At shutdown: the spare journal is not needed by anyone.
    fn discard_spare(&self) {
        let spare = self.lock().spare.take();
        if let Some(spare) = spare {
            drop(spare); // closed before its file goes
            let _ = std::fs::remove_file(self.spare_path());
        }
    }

    /// Where the spare journal waits (a journal's name: a process that dies leaves it to the
    /// next, which finds no lines in it and deletes it).
    fn spare_path(&self) -> PathBuf {
        self.dir
            .join(format!("journal-{}-spare.jsonl", self.replica))
    }

    /// Take over the journal files other processes left in the directory (those of a live
    /// process are locked, and stay its own): renamed to a name of ours and kept locked until
    /// their records are in our own journal, so two starting processes never take the same one.
    fn adopt(&self) -> (Vec<Entry>, Vec<(PathBuf, std::fs::File)>) {
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
                    records.extend(journal::lines(&text).filter_map(Entry::read));
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

/// What [`Ledger::take`] took.
struct Taken {
    batch: Vec<Entry>,
    generation: u64,
    journal: Option<Journal>,
    flushes: Vec<oneshot::Sender<bool>>,
    closing: bool,
}

async fn writer(ledger: Arc<Ledger>, store: Store, limiter: Arc<Limiter>) {
    let gap = batch_gap(store.dialect());
    let mut failing_since: Option<std::time::Instant> = None;
    let mut retry: Vec<Entry> = Vec::new();
    let mut probed = std::time::Instant::now();
    let mut wrote = tokio::time::Instant::now();
    loop {
        let _ = tokio::time::timeout(INTERVAL, ledger.wake.notified()).await;
        if !ledger.urgent() {
            tokio::time::sleep_until(wrote + gap).await;
        }
        // Away and nothing to write: ask it once a second whether it is back.
        if !ledger.healthy() && probed.elapsed() >= Duration::from_secs(1) {
            probed = std::time::Instant::now();
            if store.ping().await.is_ok() {
                ledger.set_healthy(true);
            }
        }
        let Taken {
            mut batch,
            generation,
            mut journal,
            flushes,
            closing,
        } = ledger.take();
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
                    ledger.written_through(generation, journal.take());
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
            ledger.discard_spare();
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

#[cfg(test)]
impl Record {
    /// A finished request of key `alice`, for tests.
    pub(crate) fn example(id: &str) -> Self {
        Self {
            id: id.into(),
            at_ms: 1_795_861_815_000,
            key: "alice".into(),
            client: "claude-code".into(),
            session: None,
            front: "messages".into(),
            route: "default".into(),
            target: "local,m".into(),
            model: "claude-sonnet-4-6".into(),
            upstream_model: "m".into(),
            input_tokens: 100,
            output_tokens: 10,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            estimated: false,
            cost_usd: 0.0,
            priced: false,
            ttft_ms: Some(12),
            duration_ms: 40,
            status: 200,
            error_kind: None,
            attempts: 1,
            paid: None,
            paid_unit: None,
            replica: String::from("r"),
            settles: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spool directory's files, by name, each with its lines.
    fn files(dir: &std::path::Path) -> Vec<(String, usize)> {
        let mut files: Vec<(String, usize)> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|entry| {
                let text = std::fs::read_to_string(entry.path()).unwrap();
                let name = entry.file_name().to_string_lossy().into_owned();
                (name, journal::lines(&text).count())
            })
            .collect();
        files.sort();
        files
    }

    #[test]
    fn a_row_reads_back_as_its_record_and_a_journal_line_of_the_object_form_still_reads() {
        let record = Record {
            session: Some(String::from("s \"1\"\n")),
            estimated: true,
            priced: true,
            cost_usd: 0.1 + 0.2,
            error_kind: Some(String::from("overloaded_error")),
            paid: Some(String::from("0.000042")),
            paid_unit: Some(String::from("ETH")),
            settles: vec![
                Settle {
                    metric: Metric::Rpm,
                    win: 60_000,
                    used: 1.0,
                },
                Settle {
                    metric: Metric::Usd,
                    win: 0,
                    used: 0.3,
                },
            ],
            ..Record::example("req_1")
        };
        let entry = Entry::new(record.clone()).unwrap();
        assert!(!entry.row().contains('\n'), "a row is one journal line");
        assert_eq!(
            entry.row(),
            r#"["req_1",1795861815000,"2026-11-28","alice","claude-code","s \"1\"\n","messages","default","local,m","claude-sonnet-4-6","m",100,10,0,0,1,0.30000000000000004,1,12,40,200,"overloaded_error",1,"0.000042","ETH","r",[["rpm",60000,1.0],["usd",0,0.3]]]"#
        );
        assert_eq!(Entry::read(entry.row()), Some(entry));

        // What journals held before rows: the record as an object.
        let object = r#"{"id":"req_2","at_ms":1795861815000,"key":"alice","client":"codex","session":null,"front":"chat","route":"default","target":"local,m","model":"m","upstream_model":"m","input_tokens":5,"output_tokens":6,"cache_read_tokens":0,"cache_write_tokens":0,"estimated":false,"cost_usd":0.0,"priced":false,"ttft_ms":null,"duration_ms":3,"status":200,"error_kind":null,"attempts":1,"replica":"r","settles":[{"metric":"tpm","win":60000,"used":11.0}]}"#;
        let read = Entry::read(object).unwrap();
        assert_eq!(
            read.record,
            Record {
                client: String::from("codex"),
                front: String::from("chat"),
                model: String::from("m"),
                input_tokens: 5,
                output_tokens: 6,
                ttft_ms: None,
                duration_ms: 3,
                settles: vec![Settle {
                    metric: Metric::Tpm,
                    win: 60_000,
                    used: 11.0,
                }],
                ..Record::example("req_2")
            }
        );
        assert_eq!(
            Entry::read(r#"["req_3",1"#),
            None,
            "a cut line is not a record"
        );
    }

    #[tokio::test]
    async fn a_written_journal_is_emptied_and_becomes_the_next_generations_then_goes_at_shutdown() {
        let base = std::env::temp_dir().join(format!(
            "claude-bridge-ledger-spare-{}-{}",
            std::process::id(),
            crate::ids::random_base62(8)
        ));
        let spool = base.join("spool");
        let url = format!("sqlite://{}", base.join("g.db").display());
        let store = Store::open(&url, Duration::from_secs(5)).unwrap();
        store.migrate().await.unwrap();
        let limiter = Arc::new(Limiter::new(store.clone(), "r", false));
        let (ledger, writer) = Ledger::start(store.clone(), limiter, "r", spool.clone(), true);

        ledger.record(Record::example("req_1"));
        ledger.record(Record::example("req_2"));
        assert_eq!(
            files(&spool),
            [(String::from("journal-r-00000000.jsonl"), 2)]
        );
        assert!(ledger.flush().await);
        // Written: the file is kept, empty, under the spare's name.
        assert_eq!(files(&spool), [(String::from("journal-r-spare.jsonl"), 0)]);

        // The next generation appends to it, from its start.
        ledger.record(Record::example("req_3"));
        assert_eq!(
            files(&spool),
            [(String::from("journal-r-00000001.jsonl"), 1)]
        );
        assert!(ledger.flush().await);
        assert_eq!(files(&spool), [(String::from("journal-r-spare.jsonl"), 0)]);

        // Every record reached the store once.
        let query =
            super::super::usage::UsageQuery::parse("group_by=key", 1_795_861_815_000).unwrap();
        let rows = store.usage(&query).await.unwrap();
        assert_eq!(serde_json::to_value(&rows).unwrap()[0]["requests"], 3);

        ledger.close(Duration::from_secs(5)).await;
        writer.await.unwrap();
        assert_eq!(files(&spool), [], "nothing left behind at shutdown");
        store.close().await;
        std::fs::remove_dir_all(base).unwrap();
    }
}
