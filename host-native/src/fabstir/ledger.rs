//! The local ledger of paid Fabstir jobs: one JSON file (`--ledger`, default
//! `$XDG_STATE_HOME/claude-bridge/fabstir-ledger.json`) listing every job this wallet opened through
//! the bridge — host, deposit, price, tokens used, settlement — rewritten atomically after every
//! change, so it survives restarts and crashes.
//!
//! It is also the memory of the spending cap: `--max-spend` bounds what earlier runs were charged
//! plus the deposits of this run ([`Ledger::spent`]). At start the bridge asks the chain how its
//! jobs whose end it has not seen confirmed ended ([`Ledger::unconfirmed_jobs`], [`Ledger::settle`]).
//!
//! ```
//! # let dir = std::env::temp_dir().join(format!("ledger-doc-{}", std::process::id()));
//! use claude_bridge::fabstir::ledger::{JobEntry, Ledger};
//! let mut ledger = Ledger::open(&dir.join("ledger.json")).unwrap();
//! ledger.add(JobEntry { chain_id: 84532, job_id: 7, deposit: 1000, price_per_token: 2000,
//!     payment: "eth".into(), ..JobEntry::default() }).unwrap();
//! ledger.add_tokens(84532, 7, 100).unwrap();
//! assert_eq!(ledger.spent(84532, "eth"), 1000); // open: the whole deposit counts
//! ledger.settle(84532, 7, None).unwrap();
//! assert_eq!(ledger.spent(84532, "eth"), 200); // settled: 100 tokens × 2000 / 1000
//! # std::fs::remove_dir_all(&dir).ok();
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
    /// `open` or `settled`.
    pub status: String,
    /// What the host was paid, once the chain says so (base units).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "decimal_opt")]
    pub charged: Option<u128>,
}

impl JobEntry {
    /// What this job costs or may still cost: the deposit while open; once settled, what the
    /// chain charged, or else the tokens used at the job's price (never above the deposit).
    #[must_use]
    pub fn cost(&self) -> u128 {
        if self.status != "settled" {
            return self.deposit;
        }
        self.charged.unwrap_or_else(|| {
            (u128::from(self.tokens_used) * self.price_per_token / PRICE_PRECISION)
                .min(self.deposit)
        })
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    jobs: Vec<JobEntry>,
}

/// The ledger file and its contents.
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    jobs: Vec<JobEntry>,
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
        let state = std::env::var_os("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/state"))
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
        let jobs = match std::fs::read(path) {
            Ok(bytes) => {
                let file: File = serde_json::from_slice(&bytes).map_err(|e| {
                    error(format!(
                        "not a ledger ({e}); move it away to start a new one"
                    ))
                })?;
                file.jobs
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(error(e.to_string())),
        };
        Ok(Self {
            path: path.to_path_buf(),
            jobs,
        })
    }

    /// The file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every job, oldest first.
    #[must_use]
    pub fn jobs(&self) -> &[JobEntry] {
        &self.jobs
    }

    /// What the jobs on this chain paid in this token cost (see [`JobEntry::cost`]).
    #[must_use]
    pub fn spent(&self, chain_id: u64, payment: &str) -> u128 {
        self.jobs
            .iter()
            .filter(|j| j.chain_id == chain_id && j.payment == payment)
            .map(JobEntry::cost)
            .fold(0u128, u128::saturating_add)
    }

    /// Jobs on this chain whose end the chain has not confirmed yet: still open, or closed by
    /// the bridge without a known charge.
    #[must_use]
    pub fn unconfirmed_jobs(&self, chain_id: u64) -> Vec<u64> {
        self.jobs
            .iter()
            .filter(|j| j.chain_id == chain_id && (j.status != "settled" || j.charged.is_none()))
            .map(|j| j.job_id)
            .collect()
    }

    /// Record a new job (open).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn add(&mut self, mut entry: JobEntry) -> Result<(), LedgerError> {
        entry.status = String::from("open");
        self.jobs.push(entry);
        self.save()
    }

    /// A prompt of the job finished with this many tokens.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn add_tokens(
        &mut self,
        chain_id: u64,
        job_id: u64,
        tokens: u64,
    ) -> Result<(), LedgerError> {
        if let Some(job) = self.find(chain_id, job_id) {
            job.prompts += 1;
            job.tokens_used = job.tokens_used.saturating_add(tokens);
        }
        self.save()
    }

    /// The job is settled (its socket closed); `charged` is what the chain paid the host, when known.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn settle(
        &mut self,
        chain_id: u64,
        job_id: u64,
        charged: Option<u128>,
    ) -> Result<(), LedgerError> {
        if let Some(job) = self.find(chain_id, job_id) {
            job.status = String::from("settled");
            if charged.is_some() {
                job.charged = charged;
            }
        }
        self.save()
    }

    fn find(&mut self, chain_id: u64, job_id: u64) -> Option<&mut JobEntry> {
        self.jobs
            .iter_mut()
            .rev()
            .find(|j| j.chain_id == chain_id && j.job_id == job_id)
    }

    /// Write to a temporary file beside the ledger, then rename it over the ledger.
    fn save(&self) -> Result<(), LedgerError> {
        let error = |message: String| LedgerError {
            path: self.path.display().to_string(),
            message,
        };
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| error(e.to_string()))?;
        }
        let file = File {
            version: 1,
            jobs: self.jobs.clone(),
        };
        let mut text = serde_json::to_string_pretty(&file).map_err(|e| error(e.to_string()))?;
        text.push('\n');
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        std::fs::write(&tmp, text).map_err(|e| error(e.to_string()))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| error(e.to_string()))
    }
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
    fn survives_a_restart_and_counts_spending() {
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
        ledger.add(entry.clone()).unwrap();
        ledger
            .add(JobEntry {
                job_id: 4,
                payment: String::from("usdc"),
                deposit: 1_000_000,
                ..entry.clone()
            })
            .unwrap();
        ledger.add_tokens(84532, 3, 40).unwrap();
        ledger.add_tokens(84532, 3, 2).unwrap();
        drop(ledger);

        let mut again = Ledger::open(&path).unwrap();
        assert_eq!(again.jobs().len(), 2);
        assert_eq!(again.jobs()[0].tokens_used, 42);
        assert_eq!(again.jobs()[0].prompts, 2);
        assert_eq!(again.unconfirmed_jobs(84532), vec![3, 4]);
        assert_eq!(again.spent(84532, "eth"), 200_000_000_000_000);
        assert_eq!(again.spent(84532, "usdc"), 1_000_000);
        assert_eq!(again.spent(1, "eth"), 0);
        again.settle(84532, 3, None).unwrap();
        assert_eq!(again.spent(84532, "eth"), 42 * 5_000_000 / 1000);
        assert_eq!(again.unconfirmed_jobs(84532), vec![3, 4]);
        again.settle(84532, 3, Some(7)).unwrap();
        assert_eq!(again.spent(84532, "eth"), 7);
        assert_eq!(again.unconfirmed_jobs(84532), vec![4]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"deposit\": \"200000000000000\""), "{text}");
        assert!(!Path::new(&format!("{}.tmp", path.display())).exists());
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
