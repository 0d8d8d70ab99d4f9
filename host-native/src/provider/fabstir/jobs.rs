//! Where the session's jobs come from, for the driver's `CreateJob` effect.
//!
//! - **Direct** (host operators): the one job given with `--job-id` on the host given with
//!   `--host-url`/`--host-pubkey`; no chain calls. Once the host settles it, there is no other.
//! - **Chain**: discover the hosts that serve the model (NodeRegistry), score them with the core's
//!   weights (`--selection`) using what this run measured (connect latency) and remembers
//!   (failures), draw one, and pay a new job on-chain at the host's own price. Every job goes into
//!   the [`Ledger`].

#[cfg(feature = "fabstir-chain")]
use std::collections::HashMap;
#[cfg(feature = "fabstir-chain")]
use std::sync::Arc;

use alloy_primitives::Address;
#[cfg(feature = "fabstir-chain")]
use alloy_primitives::U256;
use bridge_core::anthropic::events::{ApiError, ErrorKind};
#[cfg(feature = "fabstir-chain")]
use bridge_core::fabstir::model_id::ModelId;
#[cfg(feature = "fabstir-chain")]
use bridge_core::fabstir::scoring::{self, Candidate, Selection};
use k256::PublicKey;
#[cfg(feature = "fabstir-chain")]
use tokio::sync::Mutex;
#[cfg(feature = "fabstir-chain")]
use tracing::{error, info, warn};

#[cfg(feature = "fabstir-chain")]
use super::chain::{Chain, ChainError, HostOffer, Payment, saturating_u128};
use super::crypto::Randomness;
#[cfg(feature = "fabstir-chain")]
use super::ledger::{JobEntry, Ledger};

/// The host and job a session runs on.
#[derive(Debug, Clone)]
pub struct Target {
    /// The host's base URL (`/v1/ws` is appended).
    pub host_url: String,
    /// The host's static public key.
    pub host_pubkey: PublicKey,
    /// The job.
    pub job_id: u64,
    /// The job's price per token (sent in the init as the integer the host reads).
    pub price_per_token: u64,
    /// The host's operator address (chain mode).
    pub host: Option<Address>,
}

/// Chain mode's settings and memory.
#[cfg(feature = "fabstir-chain")]
#[derive(Debug)]
pub struct ChainJobs {
    /// The chain client (with the wallet).
    pub chain: Chain,
    /// The model's id.
    pub model: ModelId,
    /// The model as given (`org/repo:file.gguf`).
    pub model_name: String,
    /// ETH or USDC.
    pub payment: Payment,
    /// How hosts are weighed.
    pub selection: Selection,
    /// `--host`: only this operator.
    pub pinned: Option<Address>,
    /// The job ledger (shared with the `hosts` view and start-up reconciliation).
    pub ledger: Arc<Mutex<Ledger>>,
    /// `--max-spend` in base units: the cap a new job's reservation is checked against.
    pub max_spend: u128,
    /// Failures per host in this run.
    pub failures: HashMap<Address, u32>,
    /// Measured connect-and-greet time per host in this run (ms).
    pub latency_ms: HashMap<Address, u64>,
}

/// Why no job came.
#[derive(Debug, Clone)]
pub struct NoJob {
    /// What the waiting prompt is told.
    pub error: ApiError,
    /// The payment may have gone out (a transaction sent but not confirmed): the deposit stays
    /// counted against the cap.
    pub maybe_paid: bool,
}

impl From<ApiError> for NoJob {
    fn from(error: ApiError) -> Self {
        Self {
            error,
            maybe_paid: false,
        }
    }
}

/// The driver's job source.
#[derive(Debug)]
pub enum JobSource {
    /// One existing job.
    Direct {
        /// Its host and id.
        target: Target,
        /// Already handed out once.
        used: bool,
    },
    /// New jobs paid on-chain.
    #[cfg(feature = "fabstir-chain")]
    Chain(Box<ChainJobs>),
}

impl JobSource {
    /// The chain id jobs are on.
    #[must_use]
    pub fn chain_id(&self, direct_chain_id: u64) -> u64 {
        match self {
            Self::Direct { .. } => direct_chain_id,
            #[cfg(feature = "fabstir-chain")]
            Self::Chain(jobs) => jobs.chain.config().chain_id,
        }
    }

    /// A job for the next prompt, paying `deposit` (base units) in chain mode.
    ///
    /// # Errors
    /// An Anthropic error for the waiting prompt: no host, no funds, a refused transaction, or
    /// (direct mode) the one job is used up.
    pub async fn create(
        &mut self,
        deposit: u128,
        rng: &mut (dyn Randomness + Send + Sync),
    ) -> Result<Target, NoJob> {
        #[cfg(not(feature = "fabstir-chain"))]
        let _ = (deposit, rng);
        match self {
            Self::Direct { target, used } => {
                if *used {
                    Err(NoJob::from(ApiError::new(
                        ErrorKind::Api,
                        format!(
                            "Fabstir job {} was settled when its session closed, and direct mode cannot \
                             create jobs: start the bridge with a new --job-id",
                            target.job_id
                        ),
                    )))
                } else {
                    *used = true;
                    Ok(target.clone())
                }
            }
            #[cfg(feature = "fabstir-chain")]
            Self::Chain(jobs) => jobs.create(deposit, rng).await,
        }
    }

    /// The host failed this session (unreachable, dropped mid-reply, silent).
    pub fn host_failed(&mut self, target: &Target) {
        #[cfg(feature = "fabstir-chain")]
        if let (Self::Chain(jobs), Some(host)) = (self, target.host) {
            *jobs.failures.entry(host).or_default() += 1;
        }
        #[cfg(not(feature = "fabstir-chain"))]
        let _ = (self, target);
    }

    /// The socket to the host opened after `millis`.
    pub fn host_reached(&mut self, target: &Target, millis: u64) {
        #[cfg(feature = "fabstir-chain")]
        if let (Self::Chain(jobs), Some(host)) = (self, target.host) {
            jobs.latency_ms.insert(host, millis);
        }
        #[cfg(not(feature = "fabstir-chain"))]
        let _ = (self, target, millis);
    }

    /// A prompt finished on the job with the host's token count.
    pub async fn tokens_used(&mut self, target: &Target, tokens: u64) {
        #[cfg(feature = "fabstir-chain")]
        if let Self::Chain(jobs) = self {
            let chain_id = jobs.chain.config().chain_id;
            let recorded = jobs
                .ledger
                .lock()
                .await
                .add_tokens(chain_id, target.job_id, tokens)
                .await;
            if let Err(e) = recorded {
                warn!(error = %e, "cannot record tokens in the ledger");
            }
        }
        #[cfg(not(feature = "fabstir-chain"))]
        let _ = (self, target, tokens);
    }

    /// The job's socket closed: the host settles it (the chain confirms later).
    pub async fn job_closed(&mut self, target: &Target) {
        #[cfg(feature = "fabstir-chain")]
        if let Self::Chain(jobs) = self {
            let chain_id = jobs.chain.config().chain_id;
            let recorded = jobs
                .ledger
                .lock()
                .await
                .close(chain_id, target.job_id)
                .await;
            if let Err(e) = recorded {
                warn!(error = %e, "cannot record the closed job in the ledger");
            }
        }
        #[cfg(not(feature = "fabstir-chain"))]
        let _ = (self, target);
    }
}

#[cfg(feature = "fabstir-chain")]
impl ChainJobs {
    async fn create(
        &mut self,
        deposit: u128,
        rng: &mut (dyn Randomness + Send + Sync),
    ) -> Result<Target, NoJob> {
        let offers = self
            .chain
            .discover(&self.model, self.payment)
            .await
            .map_err(|e| chain_error(&e))?;
        let (offer, key, price) = self.choose(&offers, rng)?;
        // Checked before paying: a job whose price no host can read would be money lost.
        let init_price = price_for_init(price)?;
        let deposit_units = U256::from(deposit);
        info!(
            host = %offer.address,
            url = %offer.api_url,
            price = %price,
            deposit = %super::chain::format_units(deposit_units, self.payment.decimals()),
            unit = self.payment.unit(),
            "opening a paid Fabstir job"
        );
        let entry = JobEntry {
            chain_id: self.chain.config().chain_id,
            host: offer.address.to_string(),
            host_url: offer.api_url.clone(),
            model: self.model_name.clone(),
            payment: String::from(payment_name(self.payment)),
            deposit,
            price_per_token: saturating_u128(price),
            created_at: crate::ids::unix_seconds(),
            ..JobEntry::default()
        };
        // Never pay for a job the ledger could not record, or past the spending cap counted
        // over every bridge that shares the ledger: the job is reserved first.
        let reservation = crate::ids::request_id();
        let reserved = self
            .ledger
            .lock()
            .await
            .reserve(entry.clone(), self.max_spend, &reservation)
            .await;
        match reserved {
            Ok(Some(_)) => {}
            Ok(None) => {
                let spent = self
                    .ledger
                    .lock()
                    .await
                    .spent(entry.chain_id, &entry.payment);
                warn!(
                    spent,
                    deposit,
                    max_spend = self.max_spend,
                    "not paying for a job: the spending cap, counted over every bridge sharing the ledger, is reached"
                );
                return Err(ApiError::new(
                    ErrorKind::Billing,
                    format!(
                        "the Fabstir spending cap (--max-spend) is reached: the jobs recorded in the shared ledger cost {} and a new job's deposit is {}; raise --max-spend or wait for jobs to settle",
                        super::chain::format_units(U256::from(spent), self.payment.decimals()),
                        super::chain::format_units(deposit_units, self.payment.decimals()),
                    ),
                )
                .into());
            }
            Err(e) => {
                error!(error = %e, "not paying for a job: the ledger cannot be written");
                return Err(ApiError::new(
                    ErrorKind::Api,
                    format!("{e}: the bridge does not pay for a job it cannot record"),
                )
                .into());
            }
        }
        let created = match self
            .chain
            .create_job(
                offer.address,
                &self.model,
                price,
                deposit_units,
                self.payment,
            )
            .await
        {
            Ok(created) => created,
            Err(ChainError::Unconfirmed { tx, message }) => {
                // Perhaps paid: keep it in the ledger (counted) until the next start checks it.
                warn!(%tx, %message, "the job's transaction was not confirmed");
                let sent = self
                    .ledger
                    .lock()
                    .await
                    .reservation_sent(&reservation, &tx.to_string())
                    .await;
                if let Err(e) = sent {
                    error!(error = %e, %tx, "PERHAPS-PAID JOB: its transaction is not recorded in the ledger (its deposit stays counted)");
                }
                let error = ChainError::Unconfirmed { tx, message };
                return Err(NoJob {
                    error: chain_error(&error),
                    maybe_paid: true,
                });
            }
            Err(e) => {
                // Nothing went out: the reservation goes.
                if let Err(e) = self
                    .ledger
                    .lock()
                    .await
                    .reservation_dropped(&reservation)
                    .await
                {
                    warn!(error = %e, "cannot drop a job reservation from the ledger; its deposit stays counted");
                }
                if !matches!(e, ChainError::InsufficientFunds { .. }) {
                    *self.failures.entry(offer.address).or_default() += 1;
                }
                return Err(chain_error(&e).into());
            }
        };
        info!(job_id = created.job_id, tx = %created.tx_hash, "Fabstir job created");
        let paid = self
            .ledger
            .lock()
            .await
            .reservation_paid(&reservation, &created.tx_hash.to_string(), created.job_id)
            .await;
        if let Err(e) = paid {
            // The job is paid either way (it is used); losing the record must be loud.
            error!(error = %e, job_id = created.job_id, tx = %created.tx_hash, "PAID JOB NOT RECORDED in the ledger: its reservation keeps the deposit counted, but the job id is not kept");
        }
        Ok(Target {
            host_url: offer.api_url.clone(),
            host_pubkey: key,
            job_id: created.job_id,
            price_per_token: init_price,
            host: Some(offer.address),
        })
    }

    /// Score the usable hosts and draw one.
    fn choose<'a>(
        &self,
        offers: &'a [HostOffer],
        rng: &mut (dyn Randomness + Send + Sync),
    ) -> Result<(&'a HostOffer, PublicKey, U256), NoJob> {
        let usable: Vec<&HostOffer> = offers
            .iter()
            .filter(|o| self.pinned.is_none_or(|p| p == o.address))
            .filter(|o| o.unusable().is_none())
            .collect();
        if usable.is_empty() {
            let why = if offers.is_empty() {
                String::from("the NodeRegistry lists no host for it")
            } else {
                offers
                    .iter()
                    .map(|o| {
                        let reason = if self.pinned.is_some_and(|p| p != o.address) {
                            "not the --host"
                        } else {
                            o.unusable().unwrap_or("usable")
                        };
                        format!("{}: {reason}", o.address)
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            return Err(chain_error(&ChainError::NoHost {
                model: self.model_name.clone(),
                why,
            })
            .into());
        }
        let candidates: Vec<Candidate> = usable.iter().map(|o| self.candidate(o)).collect();
        let ranked = scoring::rank(&candidates, self.selection);
        let mut bytes = [0u8; 8];
        rng.fill(&mut bytes);
        let draw = (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64;
        let index = scoring::choose(&ranked, draw).unwrap_or(0);
        let offer = usable[index];
        match (&offer.public_key, offer.price) {
            (Some(key), Some(price)) => Ok((offer, *key, price)),
            _ => Err(ApiError::new(ErrorKind::Api, "the chosen host is unusable").into()),
        }
    }

    fn candidate(&self, offer: &HostOffer) -> Candidate {
        Candidate {
            stake_wei: saturating_u128(offer.stake),
            price: offer.price.map(saturating_u128),
            latency: self
                .latency_ms
                .get(&offer.address)
                .map_or(Candidate::default().latency, |ms| {
                    scoring::latency_score(*ms)
                }),
            recent_failures: self.failures.get(&offer.address).copied().unwrap_or(0),
            ..Candidate::default()
        }
    }
}

/// `eth` / `usdc`, as the ledger writes it.
#[cfg(feature = "fabstir-chain")]
#[must_use]
pub fn payment_name(payment: Payment) -> &'static str {
    match payment {
        Payment::Eth => "eth",
        Payment::Usdc => "usdc",
    }
}

/// The on-chain price as the init's JSON number.
/// The on-chain price as the host reads it in the init (a `u64`).
#[cfg(feature = "fabstir-chain")]
fn price_for_init(price: U256) -> Result<u64, NoJob> {
    u64::try_from(price).map_err(|_| {
        NoJob::from(ApiError::new(
            ErrorKind::Api,
            format!(
                "the host's price per token ({price}) is larger than a host node can read (u64)"
            ),
        ))
    })
}

/// The one place a chain failure becomes what the client is told.
#[cfg(feature = "fabstir-chain")]
#[must_use]
pub fn chain_error(error: &ChainError) -> ApiError {
    let kind = match error {
        ChainError::InsufficientFunds { .. } => ErrorKind::Billing,
        ChainError::NoHost { .. } => ErrorKind::NotFound,
        ChainError::Rpc { .. } | ChainError::Unconfirmed { .. } => ErrorKind::Overloaded,
        ChainError::Transaction { .. } => ErrorKind::Api,
        ChainError::WrongChain { .. } => ErrorKind::Api,
    };
    ApiError::new(kind, error.to_string())
}
