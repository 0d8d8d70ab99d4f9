//! The local ledger of paid Fabstir jobs: one JSON file (`--ledger`, default
//! `$XDG_STATE_HOME/claude-bridge/fabstir-ledger.json`) listing every job this wallet opened through
//! the bridge — host, deposit, price, tokens used, settlement — so it survives restarts and
//! crashes. Every change re-reads the file under an exclusive lock (`<ledger>.lock`), applies
//! itself and replaces the file atomically, so several bridges can share one ledger.
//!
//! A job's life in the ledger:
//!
//! ```text
//!   pending ──(receipt)──► open ──(socket closed)──► closed ──(chain: inactive)──► settled
//!      │ (tx sent, no receipt yet)                                ▲
//!      └──(reverted: nothing paid)──► reverted        open ───────┘ (chain: inactive)
//! ```
//!
//! It is also the memory of the spending cap: `--max-spend` bounds what earlier runs cost plus
//! the deposits of this run ([`Ledger::spent`]); a job counts its whole deposit until the chain
//! says what it was charged. Before paying for a job the bridge reserves it in the ledger under
//! the cap ([`Ledger::reserve`]: checked and recorded in one locked step), so bridges sharing a
//! ledger never cross the cap together. At start the bridge asks the chain about every job whose
//! end it has not seen confirmed ([`Ledger::to_reconcile`]).
//!
//! With the team gateway on, the ledger lives in the gateway's store, one row per wallet
//! ([`Ledger::open_store`]; the file is imported once), so every replica shares it.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! # let dir = std::env::temp_dir().join(format!("ledger-doc-{}", std::process::id()));
//! use claude_bridge::fabstir::ledger::{JobEntry, Ledger};
//! let mut ledger = Ledger::open(&dir.join("ledger.json")).unwrap();
//! ledger.add(JobEntry { chain_id: 84532, job_id: 7, deposit: 1000, price_per_token: 2000,
//!     payment: "eth".into(), ..JobEntry::default() }).await.unwrap();
//! ledger.add_tokens(84532, 7, 100).await.unwrap();
//! ledger.close(84532, 7).await.unwrap();
//! assert_eq!(ledger.spent(84532, "eth"), 1000); // until the chain says, the deposit counts
//! ledger.settle(84532, 7, Some(200)).await.unwrap();
//! assert_eq!(ledger.spent(84532, "eth"), 200); // settled: what the deposit did not get back
//! // Before paying, a job is reserved under the cap (bridges sharing the ledger see it):
//! let job = JobEntry { chain_id: 84532, deposit: 1000, payment: "eth".into(), ..JobEntry::default() };
//! assert_eq!(ledger.reserve(job.clone(), 1000, "r1").await.unwrap(), None); // 200 + 1000 > 1000
//! assert_eq!(ledger.reserve(job, 1200, "r2").await.unwrap().as_deref(), Some("r2"));
//! ledger.reservation_paid("r2", "0xabc", 8).await.unwrap();
//! assert_eq!(ledger.spent(84532, "eth"), 1200);
//! # std::fs::remove_dir_all(&dir).ok();
//! # });
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The contract's price scale: a job costs `tokens × price_per_token / PRICE_PRECISION`.
pub const PRICE_PRECISION: u128 = 1000;

/// One job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEntry {
    /// The chain.
    pub chain_id: u64,
    /// The job (and session) id.
    pub job_id: u64,
    /// The host's operator address.
    pub host: String,
    /// The host's API URL.
    pub host_url: String,
    /// The model.
    pub model: String,
    /// `eth` or `usdc`.
    pub payment: String,
    /// Deposit, in base units (wei, or USDC's 6-decimal units).
    #[serde(with = "decimal")]
    pub deposit: u128,
    /// Price per token × 1000, in base units.
    #[serde(with = "decimal")]
    pub price_per_token: u128,
    /// The transaction that created the job.
    pub tx: String,
    /// When the job was created (Unix seconds).
    pub created_at: u64,
    /// Prompts answered in this job.
    pub prompts: u64,
    /// Tokens the host reported in `stream_end`.
    pub tokens_used: u64,
    /// `pending`, `open`, `closed`, `settled` or `reverted` (see the module docs).
    pub status: String,
    /// What the job cost (deposit minus refund), once the chain says so (base units).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "decimal_opt")]
    pub charged: Option<u128>,
    /// Fields this version does not know (written by a newer bridge): kept as they are.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

impl JobEntry {
    /// What this job costs or may still cost: the deposit until the chain says otherwise;
    /// once settled, what it charged (or else the tokens used at the job's price, never above
    /// the deposit); nothing when its transaction reverted.
    #[must_use]
    pub fn cost(&self) -> u128 {
        match self.status.as_str() {
            "reverted" => 0,
            "settled" => self.charged.unwrap_or_else(|| {
                (u128::from(self.tokens_used) * self.price_per_token / PRICE_PRECISION)
                    .min(self.deposit)
            }),
            _ => self.deposit,
        }
    }

    /// Whether the chain still has something to say about this job.
    #[must_use]
    pub fn unconfirmed(&self) -> bool {
        match self.status.as_str() {
            "reverted" => false,
            "settled" => self.charged.is_none(),
            _ => true,
        }
    }
}

/// The file format this bridge reads and writes.
const VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    jobs: Vec<JobEntry>,
    /// Fields this version does not know: kept as they are.
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

/// The ledger file and its contents.
#[derive(Debug)]
pub struct Ledger {
    backing: Backing,
    jobs: Vec<JobEntry>,
}

/// Where the ledger is kept.
#[derive(Debug)]
enum Backing {
    /// A JSON file (`--ledger`), shared by the processes that lock it.
    File(PathBuf),
    /// The gateway's store (the same document, one row per wallet): shared by every replica.
    Store {
        /// The store.
        store: crate::gateway::store::Store,
        /// The wallet's address (the row).
        wallet: String,
    },
}

/// The ledger cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[error("the Fabstir ledger {path}: {message}")]
pub struct LedgerError {
    /// The file.
    pub path: String,
    /// What failed.
    pub message: String,
}

impl Ledger {
    /// Where the ledger lives when `--ledger` is not given.
    #[must_use]
    pub fn default_path() -> PathBuf {
        let state = crate::environment::var("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                crate::environment::var("HOME").map(|home| PathBuf::from(home).join(".local/state"))
            })
            .unwrap_or_else(|| PathBuf::from("."));
        state.join("claude-bridge").join("fabstir-ledger.json")
    }

    /// Read the ledger (a missing file is an empty ledger).
    ///
    /// # Errors
    /// The file exists but cannot be read or is not a ledger: it is never overwritten then.
    pub fn open(path: &Path) -> Result<Self, LedgerError> {
        let error = |message: String| LedgerError {
            path: path.display().to_string(),
            message,
        };
        let file = Self::read(path).map_err(error)?;
        Ok(Self {
            backing: Backing::File(path.to_path_buf()),
            jobs: file.jobs,
        })
    }

    /// The ledger of `wallet` in the gateway's store. The first time, the file at `import`
    /// (the ledger of runs before the store) becomes its content, and the file is renamed
    /// `….imported` so it is never imported twice.
    ///
    /// # Errors
    /// The store cannot be reached; the file cannot be read.
    pub async fn open_store(
        store: crate::gateway::store::Store,
        wallet: &str,
        import: &Path,
    ) -> Result<Self, LedgerError> {
        let mut ledger = Self {
            backing: Backing::Store {
                store,
                wallet: wallet.to_owned(),
            },
            jobs: Vec::new(),
        };
        let file = Self::read(import).map_err(|e| LedgerError {
            path: import.display().to_string(),
            message: e,
        })?;
        let doc = serde_json::to_string(&file).map_err(|e| ledger.error(e))?;
        let Backing::Store { store, .. } = &ledger.backing else {
            return Err(ledger.error("not a store ledger"));
        };
        let imported = store
            .fabstir_import(wallet, &doc)
            .await
            .map_err(|e| ledger.error(e))?;
        if imported && import.exists() {
            let mut done = import.as_os_str().to_owned();
            done.push(".imported");
            std::fs::rename(import, &done).map_err(|e| ledger.error(e))?;
            tracing::info!(file = %import.display(), jobs = file.jobs.len(), "the Fabstir ledger file was imported into the store");
        }
        // Read it back (another replica may have imported first).
        ledger.update(|_| ()).await?;
        Ok(ledger)
    }

    /// The file's contents (a missing file is an empty ledger); a version other than
    /// [`VERSION`] is refused, never read as this one and rewritten.
    fn read(path: &Path) -> Result<File, String> {
        match std::fs::read(path) {
            Ok(bytes) => {
                let file: File = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("not a ledger ({e}); move it away to start a new one"))?;
                if file.version != VERSION {
                    return Err(format!(
                        "ledger version {} is not one this bridge reads (it reads version \
                         {VERSION}); use the claude-bridge that wrote it, or move the file away \
                         to start a new one",
                        file.version
                    ));
                }
                Ok(file)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(File {
                version: VERSION,
                ..File::default()
            }),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Check that the ledger can be written (its directory created, its lock taken, the file
    /// replaced): the bridge does not pay for a job it could not record.
    ///
    /// # Errors
    /// It cannot.
    pub async fn check_writable(&mut self) -> Result<(), LedgerError> {
        self.update(|_| {}).await
    }

    /// Where it is kept, for messages.
    #[must_use]
    pub fn describe(&self) -> String {
        match &self.backing {
            Backing::File(path) => path.display().to_string(),
            Backing::Store { store, wallet } => format!("{} (wallet {wallet})", store.url()),
        }
    }

    /// Every job, oldest first.
    #[must_use]
    pub fn jobs(&self) -> &[JobEntry] {
        &self.jobs
    }

    /// What the jobs on this chain paid in this token cost (see [`JobEntry::cost`]).
    #[must_use]
    pub fn spent(&self, chain_id: u64, payment: &str) -> u128 {
        spent_in(&self.jobs, chain_id, payment)
    }

    /// Jobs on this chain the chain still has something to say about (pending transactions,
    /// jobs not known to be settled).
    #[must_use]
    pub fn to_reconcile(&self, chain_id: u64) -> Vec<JobEntry> {
        self.jobs
            .iter()
            .filter(|j| j.chain_id == chain_id && j.unconfirmed())
            .cloned()
            .collect()
    }

    /// Record a new job (open).
    ///
    /// # Errors
    /// The file cannot be written.
    pub async fn add(&mut self, mut entry: JobEntry) -> Result<(), LedgerError> {
        entry.status = String::from("open");
        self.update(|jobs| jobs.push(entry)).await
    }

    /// Record a job transaction that was sent but not confirmed (`job_id` 0 until it is).
    ///
    /// # Errors
    /// The file cannot be written.
    pub async fn add_pending(&mut self, mut entry: JobEntry) -> Result<(), LedgerError> {
        entry.status = String::from("pending");
        self.update(|jobs| jobs.push(entry)).await
    }

    /// A pending transaction turned out to have created `job_id`.
    ///
    /// # Errors
    /// The file cannot be written.
    pub async fn confirm(
        &mut self,
        chain_id: u64,
        tx: &str,
        job_id: u64,
    ) -> Result<(), LedgerError> {
        self.update(|jobs| {
            if let Some(job) = jobs
                .iter_mut()
                .find(|j| j.chain_id == chain_id && j.tx == tx && j.status == "pending")
            {
                job.job_id = job_id;
                job.status = String::from("open");
            }
        })
        .await
    }

    /// A pending transaction reverted: nothing was paid.
    ///
    /// # Errors
    /// The file cannot be written.
    pub async fn revert(&mut self, chain_id: u64, tx: &str) -> Result<(), LedgerError> {
        self.update(|jobs| {
            if let Some(job) = jobs
                .iter_mut()
                .find(|j| j.chain_id == chain_id && j.tx == tx && j.status == "pending")
            {
                job.status = String::from("reverted");
            }
        })
        .await
    }

    /// A prompt of the job finished with this many tokens.
    ///
    /// # Errors
    /// The file cannot be written.
    pub async fn add_tokens(
        &mut self,
        chain_id: u64,
        job_id: u64,
        tokens: u64,
    ) -> Result<(), LedgerError> {
        self.update(|jobs| {
            if let Some(job) = find(jobs, chain_id, job_id) {
                job.prompts += 1;
                job.tokens_used = job.tokens_used.saturating_add(tokens);
            }
        })
        .await
    }

    /// The job's socket closed (the host settles it on-chain; the chain confirms later).
    ///
    /// # Errors
    /// The file cannot be written.
    pub async fn close(&mut self, chain_id: u64, job_id: u64) -> Result<(), LedgerError> {
        self.update(|jobs| {
            if let Some(job) = find(jobs, chain_id, job_id)
                && job.status == "open"
            {
                job.status = String::from("closed");
            }
        })
        .await
    }

    /// The chain says the job ended; `charged` is what it cost (deposit minus refund), when known.
    ///
    /// # Errors
    /// The file cannot be written.
    pub async fn settle(
        &mut self,
        chain_id: u64,
        job_id: u64,
        charged: Option<u128>,
    ) -> Result<(), LedgerError> {
        self.update(|jobs| {
            if let Some(job) = find(jobs, chain_id, job_id) {
                job.status = String::from("settled");
                if charged.is_some() {
                    job.charged = charged;
                }
            }
        })
        .await
    }

    fn error(&self, message: impl std::fmt::Display) -> LedgerError {
        LedgerError {
            path: self.describe(),
            message: message.to_string(),
        }
    }

    /// Re-read the ledger (another bridge may have written it), apply `change`, write it back:
    /// the file under its lock (a temporary file renamed over it), the store in one
    /// transaction holding the wallet's row.
    async fn update<R>(
        &mut self,
        change: impl FnOnce(&mut Vec<JobEntry>) -> R,
    ) -> Result<R, LedgerError> {
        match &self.backing {
            Backing::File(path) => {
                let path = path.clone();
                self.update_file(&path, change)
            }
            Backing::Store { store, wallet } => {
                let changed = store
                    .fabstir_update(wallet, |doc| {
                        let mut file: File =
                            serde_json::from_str(doc).map_err(|e| format!("not a ledger ({e})"))?;
                        let out = change(&mut file.jobs);
                        let jobs = file.jobs.clone();
                        let text = serde_json::to_string(&file).map_err(|e| e.to_string())?;
                        Ok((text, (out, jobs)))
                    })
                    .await
                    .map_err(|e| self.error(e))?;
                let (out, jobs) = changed.map_err(|e| self.error(e))?;
                self.jobs = jobs;
                Ok(out)
            }
        }
    }

    /// [`Ledger::update`] of the file at `path`.
    fn update_file<R>(
        &mut self,
        path: &Path,
        change: impl FnOnce(&mut Vec<JobEntry>) -> R,
    ) -> Result<R, LedgerError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| self.error(e))?;
        }
        let mut lock_path = path.to_path_buf().into_os_string();
        lock_path.push(".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| self.error(e))?;
        lock.lock()
            .map_err(|e| self.error(format!("cannot lock: {e}")))?;
        let mut file = Self::read(path).map_err(|e| self.error(e))?;
        let out = change(&mut file.jobs);
        let jobs = file.jobs.clone();
        let mut text = serde_json::to_string_pretty(&file).map_err(|e| self.error(e))?;
        text.push('\n');
        let mut tmp = path.to_path_buf().into_os_string();
        tmp.push(format!(".{}.tmp", std::process::id()));
        std::fs::write(&tmp, text).map_err(|e| self.error(e))?;
        std::fs::rename(&tmp, path).map_err(|e| self.error(e))?;
        self.jobs = jobs;
        Ok(out)
    }

    /// Before paying: record a job about to be created (pending, no transaction yet) if what
    /// this wallet's jobs on the chain cost in `entry`'s token, plus its deposit, stays within
    /// `max_spend` — checked and recorded in one step, so bridges sharing the ledger (the
    /// gateway's replicas) never cross the cap together. The reservation's id, or `None` when
    /// the cap refuses.
    ///
    /// # Errors
    /// The ledger cannot be written.
    pub async fn reserve(
        &mut self,
        entry: JobEntry,
        max_spend: u128,
        id: &str,
    ) -> Result<Option<String>, LedgerError> {
        let id = id.to_owned();
        self.update(move |jobs| {
            let spent = spent_in(jobs, entry.chain_id, &entry.payment);
            if spent.saturating_add(entry.deposit) > max_spend {
                return None;
            }
            let mut entry = entry;
            entry.status = String::from("pending");
            entry.other.insert(
                String::from(RESERVATION),
                serde_json::Value::from(id.clone()),
            );
            jobs.push(entry);
            Some(id)
        })
        .await
    }

    /// The reserved job was paid and created (`tx`, `job_id`): it is open.
    ///
    /// # Errors
    /// The ledger cannot be written.
    pub async fn reservation_paid(
        &mut self,
        id: &str,
        tx: &str,
        job_id: u64,
    ) -> Result<(), LedgerError> {
        self.update(|jobs| {
            if let Some(job) = reserved(jobs, id) {
                job.other.remove(RESERVATION);
                job.tx = tx.to_owned();
                job.job_id = job_id;
                job.status = String::from("open");
            }
        })
        .await
    }

    /// The reserved job's transaction went out but was not confirmed: pending with `tx`, its
    /// deposit counted until the next start asks the chain.
    ///
    /// # Errors
    /// The ledger cannot be written.
    pub async fn reservation_sent(&mut self, id: &str, tx: &str) -> Result<(), LedgerError> {
        self.update(|jobs| {
            if let Some(job) = reserved(jobs, id) {
                job.other.remove(RESERVATION);
                job.tx = tx.to_owned();
            }
        })
        .await
    }

    /// Nothing was paid for the reserved job (the transaction failed before going out, or
    /// reverted): it goes.
    ///
    /// # Errors
    /// The ledger cannot be written.
    pub async fn reservation_dropped(&mut self, id: &str) -> Result<(), LedgerError> {
        self.update(|jobs| {
            jobs.retain(|j| j.other.get(RESERVATION).and_then(|v| v.as_str()) != Some(id));
        })
        .await
    }
}

/// The field that marks a job reserved before paying (removed once it has a transaction).
const RESERVATION: &str = "reservation";

fn reserved<'a>(jobs: &'a mut [JobEntry], id: &str) -> Option<&'a mut JobEntry> {
    jobs.iter_mut()
        .find(|j| j.other.get(RESERVATION).and_then(|v| v.as_str()) == Some(id))
}

fn spent_in(jobs: &[JobEntry], chain_id: u64, payment: &str) -> u128 {
    jobs.iter()
        .filter(|j| j.chain_id == chain_id && j.payment == payment)
        .map(JobEntry::cost)
        .fold(0u128, u128::saturating_add)
}

fn find(jobs: &mut [JobEntry], chain_id: u64, job_id: u64) -> Option<&mut JobEntry> {
    jobs.iter_mut()
        .rev()
        .find(|j| j.chain_id == chain_id && j.job_id == job_id && j.status != "pending")
}

/// u128 amounts as decimal strings (JSON numbers lose precision above 2^53).
mod decimal {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&value.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

mod decimal_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    #[expect(
        clippy::ref_option,
        reason = "serde's `with` passes the field by reference"
    )]
    pub fn serialize<S: Serializer>(value: &Option<u128>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => s.serialize_str(&v.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u128>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cb-ledger-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("nested").join("ledger.json")
    }

    #[test]
    fn another_version_is_refused_and_left_alone() {
        let path = temp("version");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let v99 = r#"{"version": 99, "jobs": [], "wallets": {"a": 1}}"#;
        std::fs::write(&path, v99).unwrap();
        let e = Ledger::open(&path).unwrap_err().to_string();
        assert!(
            e.contains("ledger version 99") && e.contains("version 1"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), v99);
    }

    #[tokio::test]
    async fn fields_it_does_not_know_are_kept() {
        let path = temp("unknown");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            r#"{"version": 1, "note": "kept", "jobs": [{"chain_id": 1, "job_id": 2, "host": "", "host_url": "", "model": "", "payment": "eth", "deposit": "10", "price_per_token": "1", "tx": "", "created_at": 0, "prompts": 0, "tokens_used": 0, "status": "open", "receipt": {"block": 7}}]}"#,
        )
        .unwrap();
        let mut ledger = Ledger::open(&path).unwrap();
        ledger.add_tokens(1, 2, 5).await.unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(written["note"], "kept");
        assert_eq!(written["jobs"][0]["receipt"]["block"], 7);
        assert_eq!(written["jobs"][0]["tokens_used"], 5);
    }

    #[tokio::test]
    async fn an_unwritable_location_is_found_before_paying() {
        let path = temp("unwritable");
        // Readable (there is no ledger yet), but its lock cannot be created: a directory is in
        // the way.
        let mut lock = path.clone().into_os_string();
        lock.push(".lock");
        std::fs::create_dir_all(&lock).unwrap();
        let mut ledger = Ledger::open(&path).unwrap();
        assert!(ledger.check_writable().await.is_err());
        std::fs::remove_dir(&lock).unwrap();
        ledger.check_writable().await.unwrap();
        assert!(path.exists(), "the check writes the (empty) ledger");
    }

    #[tokio::test]
    async fn survives_a_restart_and_counts_spending() {
        let path = temp("restart");
        let mut ledger = Ledger::open(&path).unwrap();
        assert!(ledger.jobs().is_empty());
        let entry = JobEntry {
            chain_id: 84532,
            job_id: 3,
            deposit: 200_000_000_000_000,
            price_per_token: 5_000_000,
            payment: String::from("eth"),
            ..JobEntry::default()
        };
        ledger.add(entry.clone()).await.unwrap();
        ledger
            .add(JobEntry {
                job_id: 4,
                payment: String::from("usdc"),
                deposit: 1_000_000,
                ..entry.clone()
            })
            .await
            .unwrap();
        ledger.add_tokens(84532, 3, 40).await.unwrap();
        ledger.add_tokens(84532, 3, 2).await.unwrap();
        drop(ledger);

        let mut again = Ledger::open(&path).unwrap();
        assert_eq!(again.jobs().len(), 2);
        assert_eq!(again.jobs()[0].tokens_used, 42);
        assert_eq!(again.jobs()[0].prompts, 2);
        let ids = |l: &Ledger| {
            l.to_reconcile(84532)
                .iter()
                .map(|j| j.job_id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&again), vec![3, 4]);
        assert_eq!(again.spent(84532, "eth"), 200_000_000_000_000);
        assert_eq!(again.spent(84532, "usdc"), 1_000_000);
        assert_eq!(again.spent(1, "eth"), 0);
        again.close(84532, 3).await.unwrap();
        assert_eq!(
            again.spent(84532, "eth"),
            200_000_000_000_000,
            "closed: still the deposit"
        );
        again.settle(84532, 3, None).await.unwrap();
        assert_eq!(again.spent(84532, "eth"), 42 * 5_000_000 / 1000);
        assert_eq!(ids(&again), vec![3, 4]);
        again.settle(84532, 3, Some(7)).await.unwrap();
        assert_eq!(again.spent(84532, "eth"), 7);
        assert_eq!(ids(&again), vec![4]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"deposit\": \"200000000000000\""), "{text}");
        assert!(
            std::fs::read_dir(path.parent().unwrap())
                .unwrap()
                .all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".tmp"))
        );
    }

    #[tokio::test]
    async fn two_writers_keep_each_others_jobs_and_pending_transactions_resolve() {
        let path = temp("two");
        let mut a = Ledger::open(&path).unwrap();
        let mut b = Ledger::open(&path).unwrap();
        let entry = |job_id| JobEntry {
            chain_id: 1,
            job_id,
            deposit: 10,
            payment: String::from("eth"),
            ..JobEntry::default()
        };
        a.add(entry(1)).await.unwrap();
        b.add(entry(2)).await.unwrap();
        a.add_tokens(1, 1, 5).await.unwrap();
        let both = Ledger::open(&path).unwrap();
        assert_eq!(
            both.jobs().iter().map(|j| j.job_id).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(both.jobs()[0].tokens_used, 5);

        a.add_pending(JobEntry {
            tx: String::from("0xabc"),
            ..entry(0)
        })
        .await
        .unwrap();
        a.add_pending(JobEntry {
            tx: String::from("0xdef"),
            ..entry(0)
        })
        .await
        .unwrap();
        assert_eq!(a.spent(1, "eth"), 40, "pending deposits count");
        a.confirm(1, "0xabc", 3).await.unwrap();
        a.revert(1, "0xdef").await.unwrap();
        assert_eq!(a.spent(1, "eth"), 30);
        assert_eq!(
            a.to_reconcile(1)
                .iter()
                .map(|j| j.job_id)
                .collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
    }

    #[test]
    fn a_corrupt_ledger_is_refused_not_overwritten() {
        let path = temp("corrupt");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{not json").unwrap();
        let error = Ledger::open(&path).unwrap_err();
        assert!(error.to_string().contains("move it away"), "{error}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
    }

    #[tokio::test]
    async fn replicas_sharing_the_store_never_cross_the_cap_together_and_the_file_is_imported_once()
    {
        let path = temp("store");
        let dir = path.parent().unwrap().to_path_buf();
        let url = format!("sqlite://{}", dir.join("gateway.db").display());
        // An earlier run's file ledger: one settled job that cost 30.
        let mut file = Ledger::open(&path).unwrap();
        let job = JobEntry {
            chain_id: 1,
            job_id: 1,
            deposit: 50,
            payment: String::from("eth"),
            ..JobEntry::default()
        };
        file.add(job.clone()).await.unwrap();
        file.settle(1, 1, Some(30)).await.unwrap();
        let store =
            crate::gateway::store::Store::open(&url, std::time::Duration::from_secs(5)).unwrap();
        store.migrate().await.unwrap();
        let mut a = Ledger::open_store(store.clone(), "0xwallet", &path)
            .await
            .unwrap();
        assert!(!path.exists(), "the file is renamed once imported");
        assert_eq!(a.spent(1, "eth"), 30);
        // A second replica starts later: nothing to import, the store's ledger is read.
        let mut b = Ledger::open_store(store.clone(), "0xwallet", &path)
            .await
            .unwrap();
        assert_eq!(b.jobs().len(), 1);
        // Cap 100: 30 spent, deposits of 50 — one fits, not two, whichever replica asks.
        let next = JobEntry {
            job_id: 0,
            ..job.clone()
        };
        let (ra, rb) = tokio::join!(
            a.reserve(next.clone(), 100, "ra"),
            b.reserve(next.clone(), 100, "rb")
        );
        let granted = [ra.unwrap(), rb.unwrap()];
        assert_eq!(granted.iter().flatten().count(), 1, "{granted:?}");
        let (winner, id) = if granted[0].is_some() {
            (&mut a, "ra")
        } else {
            (&mut b, "rb")
        };
        winner.reservation_paid(id, "0xtx", 2).await.unwrap();
        assert_eq!(winner.spent(1, "eth"), 80);
        // The other sees it at its next change; a failed payment gives its reservation back.
        let mut c = Ledger::open_store(store, "0xwallet", &path).await.unwrap();
        assert_eq!(c.spent(1, "eth"), 80);
        assert_eq!(
            c.reserve(next.clone(), 130, "rc").await.unwrap().as_deref(),
            Some("rc")
        );
        assert_eq!(c.spent(1, "eth"), 130);
        c.reservation_dropped("rc").await.unwrap();
        assert_eq!(c.spent(1, "eth"), 80);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn cost_never_exceeds_the_deposit() {
        let job = JobEntry {
            deposit: 10,
            price_per_token: 1_000_000,
            tokens_used: 1_000,
            status: String::from("settled"),
            ..JobEntry::default()
        };
        assert_eq!(job.cost(), 10);
    }
}
