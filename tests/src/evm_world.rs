//! The local Fabstir world's chain: hardhat's EVM node from npm (chain id 84532, the id of Base
//! Sepolia) running our Solidity contracts (`tests/evm/contracts`: NodeRegistry, JobMarketplace,
//! TestUSDC), compiled at test time with `solc` from npm. Started with no manual steps; stopped on
//! drop.
//!
//! The deployer is hardhat's first (unlocked) account; wallets for hosts and clients are funded
//! with `hardhat_setBalance` and USDC `mint`. A host node given a [`NodeChain`] checks every job
//! against the chain before accepting it, and settles it on-chain (proof of tokens, then
//! `completeSessionJob`) when its socket closes — the live host's behaviour.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::types::TransactionRequest;
use alloy::sol;
use alloy::sol_types::SolValue;
use bridge_core::fabstir::model_id::ModelId;
use claude_bridge::fabstir::chain::{ChainConfig, http_provider};
use claude_bridge::fabstir::crypto;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::err;

sol! {
    #[sol(rpc)]
    interface TestRegistry {
        function registerNode(string metadata, string apiUrl, bytes32[] models, uint256 minPriceNative, uint256 minPriceStable) external payable;
        function setActive(bool active) external;
    }

    #[sol(rpc)]
    interface TestMarketplace {
        function submitProofOfWork(uint256 jobId, uint256 tokensClaimed, bytes32 proofHash, string proofCID) external;
        function completeSessionJob(uint256 jobId, string conversationCID) external;
        function sessionJobs(uint256 jobId) external view returns (
            uint256 id, address depositor, address host, address paymentToken, uint256 deposit,
            uint256 pricePerToken, uint256 tokensUsed, uint256 maxDuration, uint256 startTime,
            uint256 lastProofTime, uint256 proofInterval, uint256 proofTimeoutWindow, uint8 status,
            uint256 withdrawnByHost, uint256 refundedToUser, string conversationCID,
            bytes32 lastProofHash, string lastProofCID
        );
        function nextJobId() external view returns (uint256);
    }

    #[sol(rpc)]
    interface TestToken {
        function mint(address to, uint256 amount) external;
        function balanceOf(address owner) external view returns (uint256);
    }
}

/// `tests/evm`: the npm project with hardhat, solc and the contracts.
#[must_use]
pub fn evm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("evm")
}

fn tls() -> crate::Result<Arc<rustls::ClientConfig>> {
    Ok(Arc::new(claude_bridge::upstream::tls_config(None)?))
}

/// Compile the contracts (cached by the sources' content under `target/evm`).
///
/// # Errors
/// solc is missing or a contract does not compile.
pub async fn compile() -> crate::Result<Value> {
    // Tests of one process start worlds in parallel: one compiles, the others wait for it.
    static COMPILING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one_at_a_time = COMPILING.lock().await;
    static ATTEMPT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let attempt = ATTEMPT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = evm_dir();
    let mut sources = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir.join("contracts"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sol"))
        .collect();
    names.sort();
    for path in &names {
        sources.extend(std::fs::read(path)?);
    }
    sources.extend(std::fs::read(dir.join("compile.cjs"))?);
    let hash = crypto::to_hex(&sha256(&sources)[..8]);
    let out_dir = crate::bridge::profile_dir()?.join("..").join("evm");
    std::fs::create_dir_all(&out_dir)?;
    let out = out_dir.join(format!("artifacts-{hash}.json"));
    if !out.exists() {
        // Another test process may compile at the same time: its own temporary file, and the
        // rename of whichever finishes last wins (same content).
        let tmp = out_dir.join(format!(
            "artifacts-{hash}.{}-{attempt}.tmp",
            std::process::id()
        ));
        let status = Command::new("node")
            .arg(dir.join("compile.cjs"))
            .arg(&tmp)
            .current_dir(&dir)
            .stdout(Stdio::null())
            .status()
            .await?;
        if !status.success() {
            return Err(err(
                "solc failed on tests/evm/contracts (run `make setup-e2e` for tests/evm/node_modules)",
            ));
        }
        std::fs::rename(&tmp, &out)?;
    }
    Ok(serde_json::from_slice(&std::fs::read(&out)?)?)
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// A running hardhat node with the contracts deployed.
#[derive(Debug)]
pub struct EvmWorld {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub rpc_url: String,
    /// 84532.
    pub chain_id: u64,
    /// The JobMarketplace.
    pub marketplace: Address,
    /// The NodeRegistry.
    pub registry: Address,
    /// The TestUSDC token.
    pub usdc: Address,
    admin: DynProvider,
    deployer: Address,
}

impl Drop for EvmWorld {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl EvmWorld {
    /// Start hardhat on a free port, compile and deploy.
    ///
    /// # Errors
    /// npm packages missing, the node does not start, or a deployment fails.
    pub async fn start() -> crate::Result<Self> {
        let artifacts = compile().await?;
        let dir = evm_dir();
        let cli = dir.join("node_modules/hardhat/internal/cli/cli.js");
        if !cli.exists() {
            return Err(err(format!(
                "{} is missing: run `make setup-e2e`",
                cli.display()
            )));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut child = Command::new("node")
            .arg(&cli)
            .args([
                "node",
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .current_dir(&dir)
            .env("HARDHAT_DISABLE_TELEMETRY_PROMPT", "true")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| err("no hardhat stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        let started = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await? {
                if line.contains("Started HTTP") {
                    return Ok::<bool, std::io::Error>(true);
                }
            }
            Ok(false)
        })
        .await;
        if !matches!(started, Ok(Ok(true))) {
            let _ = child.start_kill();
            return Err(err("hardhat node did not start within 60 s"));
        }
        // Keep draining its log so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let rpc_url = format!("http://127.0.0.1:{port}");
        let (admin, _) = http_provider(&rpc_url, None, tls()?)?;
        let deployer = *admin
            .get_accounts()
            .await?
            .first()
            .ok_or_else(|| err("hardhat has no accounts"))?;
        let chain_id = admin.get_chain_id().await?;
        let mut world = Self {
            child,
            rpc_url,
            chain_id,
            marketplace: Address::ZERO,
            registry: Address::ZERO,
            usdc: Address::ZERO,
            admin,
            deployer,
        };
        world.usdc = world.deploy(&artifacts, "TestUSDC", Vec::new()).await?;
        world.registry = world.deploy(&artifacts, "NodeRegistry", Vec::new()).await?;
        let args = (world.registry, world.usdc).abi_encode_params();
        world.marketplace = world.deploy(&artifacts, "JobMarketplace", args).await?;
        Ok(world)
    }

    async fn deploy(
        &self,
        artifacts: &Value,
        name: &str,
        constructor_args: Vec<u8>,
    ) -> crate::Result<Address> {
        let code = artifacts[name]["bytecode"]
            .as_str()
            .ok_or_else(|| err(format!("no bytecode for {name}")))?;
        let mut data = crypto::from_hex(code, "bytecode")?;
        data.extend(constructor_args);
        let tx = TransactionRequest::default()
            .from(self.deployer)
            .with_deploy_code(Bytes::from(data));
        let receipt = self.admin.send_transaction(tx).await?.get_receipt().await?;
        receipt
            .contract_address
            .ok_or_else(|| err(format!("deploying {name} created no contract")))
    }

    /// The bridge's chain flags for this world (its chain id is the default, 84532).
    #[must_use]
    pub fn bridge_args(&self) -> Vec<String> {
        vec![
            "--rpc-url".into(),
            self.rpc_url.clone(),
            "--job-marketplace".into(),
            self.marketplace.to_string(),
            "--node-registry".into(),
            self.registry.to_string(),
            "--usdc".into(),
            self.usdc.to_string(),
        ]
    }

    /// The world as a bridge chain configuration.
    #[must_use]
    pub fn chain_config(&self) -> ChainConfig {
        ChainConfig {
            rpc_url: self.rpc_url.clone(),
            chain_id: self.chain_id,
            job_marketplace: self.marketplace,
            node_registry: self.registry,
            usdc: self.usdc,
            ..ChainConfig::base_sepolia()
        }
    }

    /// Give `address` this much ETH (wei) and mint it this much USDC (6 decimals).
    ///
    /// # Errors
    /// The node refused.
    pub async fn fund(&self, address: Address, wei: U256, usdc: U256) -> crate::Result<()> {
        let _: Value = self
            .admin
            .raw_request("hardhat_setBalance".into(), (address, format!("0x{wei:x}")))
            .await?;
        if usdc > U256::ZERO {
            let token = TestToken::new(self.usdc, &self.admin);
            token
                .mint(address, usdc)
                .from(self.deployer)
                .send()
                .await?
                .get_receipt()
                .await?;
        }
        Ok(())
    }

    /// A provider that signs with `key`.
    ///
    /// # Errors
    /// Bad key.
    pub fn signer(&self, key: &[u8; 32]) -> crate::Result<(DynProvider, Address)> {
        let secret = crypto::secret_key(key, "key")?;
        let (provider, address) = http_provider(&self.rpc_url, Some(&secret), tls()?)?;
        Ok((provider, address.ok_or_else(|| err("no address"))?))
    }

    /// Register a host operator (funded first): metadata with its `publicKey`, its URL, the
    /// model, and per-1000-token prices in wei and USDC units.
    ///
    /// # Errors
    /// A transaction failed.
    pub async fn register_host(
        &self,
        key: &[u8; 32],
        api_url: &str,
        model: &ModelId,
        price_native: u128,
        price_stable: u128,
    ) -> crate::Result<Address> {
        let (provider, address) = self.signer(key)?;
        self.fund(address, U256::from(10u128.pow(19)), U256::ZERO)
            .await?;
        let secret = crypto::secret_key(key, "key")?;
        let metadata = serde_json::json!({
            "publicKey": crypto::to_hex(&crypto::compressed(&secret.public_key())),
            "name": "claude-bridge test host",
        })
        .to_string();
        let registry = TestRegistry::new(self.registry, &provider);
        let receipt = registry
            .registerNode(
                metadata,
                api_url.to_owned(),
                vec![B256::from(model.bytes())],
                U256::from(price_native),
                U256::from(price_stable),
            )
            .value(U256::from(10u128.pow(18)))
            .send()
            .await?
            .get_receipt()
            .await?;
        if !receipt.status() {
            return Err(err("registerNode reverted"));
        }
        Ok(address)
    }

    /// A session job as the chain records it: (depositor, host, deposit, tokensUsed, status,
    /// paid to the host, refunded).
    ///
    /// # Errors
    /// The call failed.
    pub async fn job(&self, job_id: u64) -> crate::Result<JobRecord> {
        let market = TestMarketplace::new(self.marketplace, &self.admin);
        let j = market.sessionJobs(U256::from(job_id)).call().await?;
        Ok(JobRecord {
            depositor: j.depositor,
            host: j.host,
            payment_token: j.paymentToken,
            deposit: u128::try_from(j.deposit)?,
            price_per_token: u128::try_from(j.pricePerToken)?,
            tokens_used: u128::try_from(j.tokensUsed)?,
            status: j.status,
            paid: u128::try_from(j.withdrawnByHost)?,
            refunded: u128::try_from(j.refundedToUser)?,
        })
    }

    /// How many jobs exist.
    ///
    /// # Errors
    /// The call failed.
    pub async fn job_count(&self) -> crate::Result<u64> {
        let market = TestMarketplace::new(self.marketplace, &self.admin);
        let next = market.nextJobId().call().await?;
        Ok(u64::try_from(next)?.saturating_sub(1))
    }

    /// A wallet's USDC balance.
    ///
    /// # Errors
    /// The call failed.
    pub async fn usdc_balance(&self, owner: Address) -> crate::Result<u128> {
        let token = TestToken::new(self.usdc, &self.admin);
        Ok(u128::try_from(token.balanceOf(owner).call().await?)?)
    }

    /// The host's side of the chain, for a [`crate::fabstir_node::HostNode`].
    ///
    /// # Errors
    /// Bad key.
    pub fn node_chain(&self, host_key: &[u8; 32]) -> crate::Result<Arc<NodeChain>> {
        let (provider, address) = self.signer(host_key)?;
        Ok(Arc::new(NodeChain {
            provider,
            address,
            marketplace: self.marketplace,
        }))
    }
}

/// A session job on-chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// Who paid.
    pub depositor: Address,
    /// The host.
    pub host: Address,
    /// `0x0` for ETH.
    pub payment_token: Address,
    /// Deposit (base units).
    pub deposit: u128,
    /// Price per token × 1000.
    pub price_per_token: u128,
    /// Tokens the host proved.
    pub tokens_used: u128,
    /// 0 active, 1 completed, 2 timed out.
    pub status: u8,
    /// Paid to the host on settlement.
    pub paid: u128,
    /// Refunded to the depositor.
    pub refunded: u128,
}

/// The chain as a host node sees it: check jobs, settle them.
#[derive(Debug)]
pub struct NodeChain {
    provider: DynProvider,
    address: Address,
    marketplace: Address,
}

impl NodeChain {
    /// `Ok` when the job is active and this node is its host.
    ///
    /// # Errors
    /// A message for the client.
    pub async fn check_job(&self, job_id: &str) -> std::result::Result<(), String> {
        let id: u64 = job_id
            .parse()
            .map_err(|_| format!("job id {job_id} is not a number"))?;
        let market = TestMarketplace::new(self.marketplace, &self.provider);
        let job = market
            .sessionJobs(U256::from(id))
            .call()
            .await
            .map_err(|e| format!("cannot read job {id}: {e}"))?;
        if job.host != self.address {
            return Err(format!("job {id} is not a job for this host"));
        }
        if job.status != 0 {
            return Err(format!("job {id} is not active"));
        }
        Ok(())
    }

    /// Prove the tokens served, then complete the job (the host is paid, the client refunded).
    ///
    /// # Errors
    /// A transaction failed.
    pub async fn settle(&self, job_id: &str, tokens: u64) -> crate::Result<()> {
        let id = U256::from(job_id.parse::<u64>()?);
        let market = TestMarketplace::new(self.marketplace, &self.provider);
        if tokens > 0 {
            let hash = B256::from(sha256(format!("{job_id}:{tokens}").as_bytes()));
            market
                .submitProofOfWork(id, U256::from(tokens), hash, String::new())
                .send()
                .await?
                .get_receipt()
                .await?;
        }
        market
            .completeSessionJob(id, String::new())
            .send()
            .await?
            .get_receipt()
            .await?;
        Ok(())
    }
}
