//! The Fabstir chain client (alloy): discover the hosts that serve a model in the NodeRegistry,
//! read their prices, and open paid session jobs in the JobMarketplace — in ETH (`msg.value`) or
//! in USDC (after an ERC-20 `approve`) — waiting for the configured confirmations
//! (`reference/fabstir-protocol.md` §3–4).
//!
//! Every contract address is configurable; [`ChainConfig::base_sepolia`] holds the live
//! deployment's. [`Chain::connect`] checks that the RPC serves the expected chain id before anything
//! is signed, so a wallet meant for a test chain never pays on another.
//!
//! HTTP goes through reqwest with our own rustls configuration (ring, web PKI roots plus
//! `--ca-cert`), the same trust as every other connection the bridge makes.

use std::sync::Arc;
use std::time::Duration;

use alloy::network::EthereumWallet;
use alloy::primitives::{Address, B256, U256, address};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolEvent;
use bridge_core::fabstir::model_id::ModelId;
use k256::PublicKey;
use thiserror::Error;

use super::crypto;

/// The contracts' ABI subset (reference/fabstir-protocol.md §3), as alloy bindings.
#[expect(
    clippy::too_many_arguments,
    reason = "the generated calls mirror the contract's own parameter lists"
)]
mod abi {
    alloy::sol! {
    #[sol(rpc)]
    interface NodeRegistry {
        function getNodesForModel(bytes32 modelId) external view returns (address[] memory);
        function getNodeFullInfo(address operator) external view returns (
            address operator,
            uint256 stake,
            bool active,
            string memory metadata,
            string memory apiUrl,
            bytes32[] memory models,
            uint256 minPriceNative,
            uint256 minPriceStable
        );
        function getModelPricing(address operator, bytes32 modelId, address token) external view returns (uint256);
    }

    #[sol(rpc)]
    interface JobMarketplace {
        function createSessionJobForModel(
            address host,
            bytes32 modelId,
            uint256 pricePerToken,
            uint256 maxDuration,
            uint256 proofInterval,
            uint256 proofTimeoutWindow
        ) external payable returns (uint256 jobId);
        function createSessionJobForModelWithToken(
            address host,
            bytes32 modelId,
            address token,
            uint256 deposit,
            uint256 pricePerToken,
            uint256 maxDuration,
            uint256 proofInterval,
            uint256 proofTimeoutWindow
        ) external returns (uint256 jobId);
        function sessionJobs(uint256 jobId) external view returns (
            uint256 id,
            address depositor,
            address host,
            address paymentToken,
            uint256 deposit,
            uint256 pricePerToken,
            uint256 tokensUsed,
            uint256 maxDuration,
            uint256 startTime,
            uint256 lastProofTime,
            uint256 proofInterval,
            uint256 proofTimeoutWindow,
            uint8 status,
            uint256 withdrawnByHost,
            uint256 refundedToUser,
            string memory conversationCID,
            bytes32 lastProofHash,
            string memory lastProofCID
        );
        event SessionJobCreated(uint256 indexed jobId, address indexed depositor, address indexed host, uint256 deposit);
    }

    #[sol(rpc)]
    interface Erc20 {
        function approve(address spender, uint256 amount) external returns (bool);
        function allowance(address owner, address spender) external view returns (uint256);
        function balanceOf(address owner) external view returns (uint256);
    }
    }
}
use abi::{Erc20, JobMarketplace, NodeRegistry};

/// A job's longest life (seconds); the bridge closes it long before.
pub const MAX_DURATION_SECS: u64 = 86_400;
/// Tokens between the host's proofs (the SDK's default).
pub const PROOF_INTERVAL_TOKENS: u64 = 1000;
/// How long the host may go without a proof (seconds, 60–3600; the SDK's default).
pub const PROOF_TIMEOUT_SECS: u64 = 300;

/// How jobs are paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payment {
    /// The chain's native coin (`msg.value`), 18 decimals.
    Eth,
    /// The configured USDC (ERC-20, `approve` first), 6 decimals.
    Usdc,
}

impl Payment {
    /// Decimals of the unit.
    #[must_use]
    pub fn decimals(self) -> u32 {
        match self {
            Self::Eth => 18,
            Self::Usdc => 6,
        }
    }

    /// The unit's name.
    #[must_use]
    pub fn unit(self) -> &'static str {
        match self {
            Self::Eth => "ETH",
            Self::Usdc => "USDC",
        }
    }

    /// The contract's minimum deposit, in base units.
    #[must_use]
    pub fn minimum_deposit(self) -> u128 {
        match self {
            Self::Eth => 100_000_000_000_000,
            Self::Usdc => 500_000,
        }
    }
}

/// Where the contracts are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainConfig {
    /// JSON-RPC endpoint.
    pub rpc_url: String,
    /// The chain the RPC must serve.
    pub chain_id: u64,
    /// JobMarketplace.
    pub job_marketplace: Address,
    /// NodeRegistry.
    pub node_registry: Address,
    /// USDC (ERC-20).
    pub usdc: Address,
    /// Blocks to wait for after a transaction's own.
    pub confirmations: u64,
    /// How long to wait for a receipt.
    pub receipt_timeout: Duration,
    /// `--localhost-override`: the host name that replaces a registered loopback address
    /// (`localhost`, `127.x.x.x`, `[::1]`, `0.0.0.0`) in a host's URL, for a bridge in a
    /// container whose hosts registered themselves on the machine's loopback.
    pub localhost_override: Option<String>,
}

impl ChainConfig {
    /// The RPC used when `--rpc-url` is not given for Base Sepolia.
    pub const BASE_SEPOLIA_RPC: &'static str = "https://sepolia.base.org";

    /// The live deployment on Base Sepolia (chain id 84532).
    #[must_use]
    pub fn base_sepolia() -> Self {
        Self {
            rpc_url: String::from(Self::BASE_SEPOLIA_RPC),
            chain_id: 84532,
            job_marketplace: address!("D067719Ee4c514B5735d1aC0FfB46FECf2A9adA4"),
            node_registry: address!("8BC0Af4aAa2dfb99699B1A24bA85E507de10Fd22"),
            usdc: address!("036CbD53842c5426634e7929541eC2318f3dCF7e"),
            confirmations: 1,
            receipt_timeout: Duration::from_secs(120),
            localhost_override: None,
        }
    }
}

/// What went wrong talking to the chain.
#[derive(Debug, Error)]
pub enum ChainError {
    /// The RPC is unreachable or answered with an error.
    #[error("the chain RPC {url} failed: {message}")]
    Rpc {
        /// The RPC URL.
        url: String,
        /// What it said.
        message: String,
    },
    /// The RPC serves another chain.
    #[error(
        "the chain RPC {url} serves chain id {actual}, not {expected}: check --rpc-url and --chain-id"
    )]
    WrongChain {
        /// The RPC URL.
        url: String,
        /// `--chain-id`.
        expected: u64,
        /// `eth_chainId`.
        actual: u64,
    },
    /// No host can serve the model.
    #[error("no active Fabstir host serves {model} ({why})")]
    NoHost {
        /// The model as given.
        model: String,
        /// Why none qualifies.
        why: String,
    },
    /// The wallet cannot pay the deposit.
    #[error(
        "the wallet {wallet} holds {balance} {unit}, but a job's deposit is {deposit} {unit}: fund the wallet or lower --deposit"
    )]
    InsufficientFunds {
        /// The wallet.
        wallet: Address,
        /// Its balance (decimal units).
        balance: String,
        /// The deposit (decimal units).
        deposit: String,
        /// ETH or USDC.
        unit: &'static str,
    },
    /// A transaction was sent, but no receipt came: it may still be mined (and paid).
    #[error(
        "transaction {tx} was sent but not confirmed ({message}); it may still be mined: the \
         ledger keeps it as pending and the next start checks it"
    )]
    Unconfirmed {
        /// The transaction.
        tx: B256,
        /// Why the wait ended.
        message: String,
    },
    /// A transaction was refused or failed.
    #[error("{what} failed: {message}")]
    Transaction {
        /// What was being done.
        what: String,
        /// The node's or contract's message.
        message: String,
    },
}

/// A host that serves the model, as the registry describes it.
#[derive(Debug, Clone)]
pub struct HostOffer {
    /// The operator address.
    pub address: Address,
    /// Its API URL (`http(s)://…`; the socket is `/v1/ws` under it).
    pub api_url: String,
    /// Its static key from the metadata's `publicKey`; `None` when missing or unreadable.
    pub public_key: Option<PublicKey>,
    /// Its stake (base units).
    pub stake: U256,
    /// Its price for the model in the payment token (`None`: `getModelPricing` reverted).
    pub price: Option<U256>,
    /// Registered as active.
    pub active: bool,
}

impl HostOffer {
    /// Why this host cannot be used, if it cannot.
    #[must_use]
    pub fn unusable(&self) -> Option<&'static str> {
        if !self.active {
            Some("inactive")
        } else if self.public_key.is_none() {
            Some("no publicKey in its metadata")
        } else if self.price.is_none() {
            Some("no price for this model and token")
        } else if self.price == Some(U256::ZERO) {
            Some("price is zero")
        } else {
            None
        }
    }
}

/// A job the chain confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedJob {
    /// The job (and session) id.
    pub job_id: u64,
    /// The transaction that created it.
    pub tx_hash: B256,
}

/// A job's settlement as the chain records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobState {
    /// Still open.
    pub active: bool,
    /// Tokens the host proved.
    pub tokens_used: u128,
    /// Paid to the host.
    pub paid: u128,
    /// Refunded to the depositor.
    pub refunded: u128,
}

/// A connected chain client (with the wallet when one is given).
#[derive(Debug, Clone)]
pub struct Chain {
    config: ChainConfig,
    provider: DynProvider,
    wallet: Option<Address>,
}

impl Chain {
    /// Connect and check the chain id. With a wallet key, transactions are signed by it.
    ///
    /// # Errors
    /// The URL is invalid, the RPC is unreachable, or it serves another chain.
    pub async fn connect(
        config: ChainConfig,
        wallet: Option<&k256::SecretKey>,
        tls: Arc<rustls::ClientConfig>,
    ) -> Result<Self, ChainError> {
        let (provider, address) = http_provider(&config.rpc_url, wallet, tls)?;
        let actual = provider.get_chain_id().await.map_err(|e| ChainError::Rpc {
            url: config.rpc_url.clone(),
            message: e.to_string(),
        })?;
        if actual != config.chain_id {
            return Err(ChainError::WrongChain {
                url: config.rpc_url.clone(),
                expected: config.chain_id,
                actual,
            });
        }
        Ok(Self {
            config,
            provider,
            wallet: address,
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &ChainConfig {
        &self.config
    }

    /// The wallet's address, when connected with a key.
    #[must_use]
    pub fn wallet(&self) -> Option<Address> {
        self.wallet
    }

    fn rpc_error(&self, e: impl std::fmt::Display) -> ChainError {
        ChainError::Rpc {
            url: self.config.rpc_url.clone(),
            message: e.to_string(),
        }
    }

    /// The payment token's address (`0x0` for the native coin).
    #[must_use]
    pub fn token(&self, payment: Payment) -> Address {
        match payment {
            Payment::Eth => Address::ZERO,
            Payment::Usdc => self.config.usdc,
        }
    }

    /// Every host the registry lists for the model, with what the client needs to choose.
    ///
    /// # Errors
    /// The registry cannot be read.
    pub async fn discover(
        &self,
        model: &ModelId,
        payment: Payment,
    ) -> Result<Vec<HostOffer>, ChainError> {
        let registry = NodeRegistry::new(self.config.node_registry, &self.provider);
        let model_id = B256::from(model.bytes());
        let addresses = registry
            .getNodesForModel(model_id)
            .call()
            .await
            .map_err(|e| self.rpc_error(format!("NodeRegistry.getNodesForModel: {e}")))?;
        let token = self.token(payment);
        let mut offers = Vec::with_capacity(addresses.len());
        for address in addresses {
            let info = registry
                .getNodeFullInfo(address)
                .call()
                .await
                .map_err(|e| self.rpc_error(format!("NodeRegistry.getNodeFullInfo: {e}")))?;
            // A revert means "no price": the host cannot be paid in this token for this model.
            // Anything else (a timeout, a rate limit) is the RPC's failure, not the host's.
            let price = match registry
                .getModelPricing(address, model_id, token)
                .call()
                .await
            {
                Ok(price) => Some(price),
                Err(e) if is_revert(&e) => None,
                Err(e) => {
                    return Err(self.rpc_error(format!("NodeRegistry.getModelPricing: {e}")));
                }
            };
            offers.push(HostOffer {
                address,
                api_url: match &self.config.localhost_override {
                    Some(host) => override_loopback(&info.apiUrl, host),
                    None => info.apiUrl,
                },
                public_key: metadata_public_key(&info.metadata),
                stake: info.stake,
                price,
                active: info.active,
            });
        }
        Ok(offers)
    }

    /// The wallet's balance in the payment token (base units).
    ///
    /// # Errors
    /// No wallet, or the RPC failed.
    pub async fn balance(&self, payment: Payment) -> Result<U256, ChainError> {
        let wallet = self.require_wallet()?;
        match payment {
            Payment::Eth => self
                .provider
                .get_balance(wallet)
                .await
                .map_err(|e| self.rpc_error(e)),
            Payment::Usdc => Erc20::new(self.config.usdc, &self.provider)
                .balanceOf(wallet)
                .call()
                .await
                .map_err(|e| self.rpc_error(format!("USDC.balanceOf: {e}"))),
        }
    }

    fn require_wallet(&self) -> Result<Address, ChainError> {
        self.wallet.ok_or_else(|| ChainError::Transaction {
            what: String::from("signing"),
            message: String::from("no wallet key was given"),
        })
    }

    /// Open a session job with `host` for `model` at `price`, paying `deposit` (base units),
    /// and wait for its confirmations.
    ///
    /// # Errors
    /// Not enough funds, the contract refused (its reason is kept), or the RPC failed.
    pub async fn create_job(
        &self,
        host: Address,
        model: &ModelId,
        price: U256,
        deposit: U256,
        payment: Payment,
    ) -> Result<CreatedJob, ChainError> {
        let wallet = self.require_wallet()?;
        let balance = self.balance(payment).await?;
        if balance < deposit {
            return Err(ChainError::InsufficientFunds {
                wallet,
                balance: format_units(balance, payment.decimals()),
                deposit: format_units(deposit, payment.decimals()),
                unit: payment.unit(),
            });
        }
        let market = JobMarketplace::new(self.config.job_marketplace, &self.provider);
        let model_id = B256::from(model.bytes());
        let (duration, interval, window) = (
            U256::from(MAX_DURATION_SECS),
            U256::from(PROOF_INTERVAL_TOKENS),
            U256::from(PROOF_TIMEOUT_SECS),
        );
        let pending = match payment {
            Payment::Eth => market
                .createSessionJobForModel(host, model_id, price, duration, interval, window)
                .value(deposit)
                .send()
                .await
                .map_err(|e| refused("JobMarketplace.createSessionJobForModel", e))?,
            Payment::Usdc => {
                self.approve(wallet, deposit).await?;
                market
                    .createSessionJobForModelWithToken(
                        host,
                        model_id,
                        self.config.usdc,
                        deposit,
                        price,
                        duration,
                        interval,
                        window,
                    )
                    .send()
                    .await
                    .map_err(|e| refused("JobMarketplace.createSessionJobForModelWithToken", e))?
            }
        };
        let tx_hash = *pending.tx_hash();
        let receipt = pending
            .with_required_confirmations(self.config.confirmations.max(1))
            .with_timeout(Some(self.config.receipt_timeout))
            .get_receipt()
            .await
            .map_err(|e| ChainError::Unconfirmed {
                tx: tx_hash,
                message: e.to_string(),
            })?;
        self.job_from_receipt(tx_hash, &receipt)
    }

    /// The job a confirmed `createSessionJob*` transaction created.
    fn job_from_receipt(
        &self,
        tx_hash: B256,
        receipt: &alloy::rpc::types::TransactionReceipt,
    ) -> Result<CreatedJob, ChainError> {
        if !receipt.status() {
            return Err(ChainError::Transaction {
                what: String::from("creating the session job"),
                message: format!("transaction {tx_hash} reverted"),
            });
        }
        let job_id = receipt
            .logs()
            .iter()
            .filter(|log| log.address() == self.config.job_marketplace)
            .find_map(|log| JobMarketplace::SessionJobCreated::decode_log(&log.inner).ok())
            .map(|event| event.data.jobId)
            .ok_or_else(|| ChainError::Transaction {
                what: String::from("creating the session job"),
                message: format!("transaction {tx_hash} emitted no SessionJobCreated"),
            })?;
        let job_id = u64::try_from(job_id).map_err(|_| ChainError::Transaction {
            what: String::from("creating the session job"),
            message: format!("job id {job_id} does not fit 64 bits"),
        })?;
        Ok(CreatedJob { job_id, tx_hash })
    }

    /// Let the marketplace take `amount` USDC, unless it may already.
    async fn approve(&self, wallet: Address, amount: U256) -> Result<(), ChainError> {
        let usdc = Erc20::new(self.config.usdc, &self.provider);
        let allowed = usdc
            .allowance(wallet, self.config.job_marketplace)
            .call()
            .await
            .map_err(|e| self.rpc_error(format!("USDC.allowance: {e}")))?;
        if allowed >= amount {
            return Ok(());
        }
        let receipt = usdc
            .approve(self.config.job_marketplace, amount)
            .send()
            .await
            .map_err(|e| refused("USDC.approve", e))?
            .with_required_confirmations(self.config.confirmations.max(1))
            .with_timeout(Some(self.config.receipt_timeout))
            .get_receipt()
            .await
            .map_err(|e| refused("waiting for USDC.approve", e))?;
        if receipt.status() {
            Ok(())
        } else {
            Err(ChainError::Transaction {
                what: String::from("USDC.approve"),
                message: String::from("the transaction reverted"),
            })
        }
    }

    /// How a job transaction sent earlier ended: `Ok(Some(job))` mined, `Ok(None)` not (yet)
    /// known to the node.
    ///
    /// # Errors
    /// It reverted (nothing was paid), or the RPC failed.
    pub async fn job_of_transaction(&self, tx: B256) -> Result<Option<CreatedJob>, ChainError> {
        let receipt = self
            .provider
            .get_transaction_receipt(tx)
            .await
            .map_err(|e| self.rpc_error(e))?;
        match receipt {
            Some(receipt) => self.job_from_receipt(tx, &receipt).map(Some),
            None => Ok(None),
        }
    }

    /// The job as the chain records it.
    ///
    /// # Errors
    /// The RPC failed.
    pub async fn job(&self, job_id: u64) -> Result<JobState, ChainError> {
        let market = JobMarketplace::new(self.config.job_marketplace, &self.provider);
        let job = market
            .sessionJobs(U256::from(job_id))
            .call()
            .await
            .map_err(|e| self.rpc_error(format!("JobMarketplace.sessionJobs: {e}")))?;
        Ok(JobState {
            active: job.status == 0,
            tokens_used: saturating_u128(job.tokensUsed),
            paid: saturating_u128(job.withdrawnByHost),
            refunded: saturating_u128(job.refundedToUser),
        })
    }
}

/// An alloy provider over HTTP(S) with our TLS, signing with `wallet` when given (its address too).
///
/// # Errors
/// The URL is invalid or the key unusable.
pub fn http_provider(
    rpc_url: &str,
    wallet: Option<&k256::SecretKey>,
    tls: Arc<rustls::ClientConfig>,
) -> Result<(DynProvider, Option<Address>), ChainError> {
    let rpc = |message: String| ChainError::Rpc {
        url: rpc_url.to_owned(),
        message,
    };
    let url = reqwest::Url::parse(rpc_url)
        .map_err(|e| rpc(format!("not a URL ({e}); give --rpc-url http(s)://…")))?;
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured((*tls).clone())
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| rpc(e.to_string()))?;
    Ok(match wallet {
        Some(key) => {
            let signer = PrivateKeySigner::from_slice(&key.to_bytes())
                .map_err(|e| rpc(format!("the wallet key is unusable: {e}")))?;
            let address = signer.address();
            let provider = ProviderBuilder::new()
                .wallet(EthereumWallet::from(signer))
                .connect_reqwest(http, url)
                .erased();
            (provider, Some(address))
        }
        None => (
            ProviderBuilder::new().connect_reqwest(http, url).erased(),
            None,
        ),
    })
}

/// Whether a call failed because the contract reverted (rather than the RPC failing).
fn is_revert(e: &alloy::contract::Error) -> bool {
    e.as_revert_data().is_some() || e.to_string().to_ascii_lowercase().contains("revert")
}

/// A failed send or receipt, with the contract's revert reason when there is one.
fn refused(what: &str, e: impl std::fmt::Display) -> ChainError {
    ChainError::Transaction {
        what: what.to_owned(),
        message: e.to_string(),
    }
}

/// The host's static key from its registry metadata (`{"publicKey": "<compressed hex>", …}`).
#[must_use]
pub fn metadata_public_key(metadata: &str) -> Option<PublicKey> {
    let value: serde_json::Value = serde_json::from_str(metadata).ok()?;
    let hex = value.get("publicKey")?.as_str()?;
    let bytes = crypto::from_hex(hex, "publicKey").ok()?;
    crypto::public_key(&bytes, "publicKey").ok()
}

/// A U256 as u128, saturating.
#[must_use]
pub fn saturating_u128(value: U256) -> u128 {
    u128::try_from(value).unwrap_or(u128::MAX)
}

/// Base units as a decimal string (`format_units(1_500_000, 6)` = `"1.5"`).
#[must_use]
pub fn format_units(value: U256, decimals: u32) -> String {
    bridge_core::fabstir::units::format_units(&value.to_string(), decimals)
}

/// A decimal amount (`"0.0002"`) in base units of `decimals`.
///
/// # Errors
/// Not a non-negative decimal number, or more fractional digits than the unit has.
pub fn parse_units(text: &str, decimals: u32) -> Result<U256, String> {
    let text = text.trim();
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) {
        return Err(format!("`{text}` is not an amount like 0.0002"));
    }
    if frac.len() > decimals as usize {
        return Err(format!("`{text}` has more than {decimals} decimal places"));
    }
    let scaled = format!("{whole}{frac:0<width$}", width = decimals as usize);
    let scaled = scaled.trim_start_matches('0');
    if scaled.is_empty() {
        return Ok(U256::ZERO);
    }
    U256::from_str_radix(scaled, 10).map_err(|e| format!("`{text}`: {e}"))
}

/// `url` with its host replaced by `host` when it names this machine's loopback (`localhost`,
/// `127.x.x.x`, `[::1]`, `0.0.0.0`); any other URL unchanged.
#[must_use]
pub fn override_loopback(url: &str, host: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((user, hp)) => (&authority[..=user.len()], hp),
        None => ("", authority),
    };
    let (name, port) = if let Some(v6) = host_port.strip_prefix('[') {
        match v6.split_once(']') {
            Some((name, port)) => (name, port),
            None => return url.to_owned(),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((name, _)) => (name, &host_port[name.len()..]),
            None => (host_port, ""),
        }
    };
    let loopback = name.eq_ignore_ascii_case("localhost")
        || name == "0.0.0.0"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        return url.to_owned();
    }
    format!("{scheme}://{userinfo}{host}{port}{path}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_loopback_host_is_overridden() {
        let o = |url: &str| override_loopback(url, "host.docker.internal");
        assert_eq!(
            o("http://localhost:8080"),
            "http://host.docker.internal:8080"
        );
        assert_eq!(
            o("ws://127.0.0.1:8080/v1/ws"),
            "ws://host.docker.internal:8080/v1/ws"
        );
        assert_eq!(
            o("https://[::1]:443/x?y"),
            "https://host.docker.internal:443/x?y"
        );
        assert_eq!(o("http://0.0.0.0"), "http://host.docker.internal");
        assert_eq!(o("http://LOCALHOST/"), "http://host.docker.internal/");
        assert_eq!(
            o("http://u:p@127.0.0.2:1"),
            "http://u:p@host.docker.internal:1"
        );
        for kept in [
            "http://10.0.0.5:8080",
            "https://node.example:443",
            "localhost:8080",
            "http://localhost.example",
        ] {
            assert_eq!(o(kept), kept);
        }
    }

    use super::*;

    #[test]
    fn units_round_trip() {
        assert_eq!(
            parse_units("0.0002", 18).unwrap(),
            U256::from(200_000_000_000_000u64)
        );
        assert_eq!(parse_units("1.5", 6).unwrap(), U256::from(1_500_000u64));
        assert_eq!(parse_units("3", 6).unwrap(), U256::from(3_000_000u64));
        assert_eq!(parse_units("0", 6).unwrap(), U256::ZERO);
        assert_eq!(format_units(U256::from(1_500_000u64), 6), "1.5");
        assert_eq!(
            format_units(U256::from(200_000_000_000_000u64), 18),
            "0.0002"
        );
        assert_eq!(format_units(U256::ZERO, 18), "0");
        assert_eq!(format_units(U256::from(7u64), 6), "0.000007");
        assert!(
            parse_units("1.0000001", 6)
                .unwrap_err()
                .contains("6 decimal")
        );
        assert!(parse_units("abc", 6).is_err());
        assert!(parse_units("-1", 6).is_err());
        assert!(parse_units(".", 6).is_err());
    }

    #[test]
    fn base_sepolia_addresses_are_the_reference_ones() {
        let c = ChainConfig::base_sepolia();
        assert_eq!(
            c.job_marketplace.to_string(),
            "0xD067719Ee4c514B5735d1aC0FfB46FECf2A9adA4"
        );
        assert_eq!(
            c.node_registry.to_string(),
            "0x8BC0Af4aAa2dfb99699B1A24bA85E507de10Fd22"
        );
        assert_eq!(
            c.usdc.to_string(),
            "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
        );
        assert_eq!(c.chain_id, 84532);
    }

    #[test]
    fn metadata_key_is_read_or_refused() {
        let key = "02c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5";
        assert!(metadata_public_key(&format!(r#"{{"publicKey":"{key}","name":"x"}}"#)).is_some());
        assert!(metadata_public_key(r#"{"publicKey":"02zz"}"#).is_none());
        assert!(metadata_public_key("not json").is_none());
        assert!(metadata_public_key("{}").is_none());
    }
}
