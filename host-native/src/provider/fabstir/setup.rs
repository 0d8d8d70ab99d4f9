//! From the command line to a running Fabstir backend, and the `hosts` listing.
//!
//! `--job-id` selects direct mode (one host, one existing job, no chain calls). Otherwise chain
//! mode connects to `--rpc-url`, checks the chain id, reads the ledger (and asks the chain how its
//! still-open jobs ended), and sets the spending limits: each job's `--deposit`, and `--max-spend`
//! over what the ledger's earlier jobs cost plus this run's deposits.

use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "fabstir-chain")]
use alloy_primitives::{Address, U256};
use bridge_core::api::ChatmlOptions;
use bridge_core::fabstir::model_id::ModelId;
#[cfg(feature = "fabstir-chain")]
use bridge_core::fabstir::scoring::{self, Selection};
use bridge_core::fabstir::session::Limits;
use tracing::info;
#[cfg(feature = "fabstir-chain")]
use tracing::warn;

#[cfg(feature = "fabstir-chain")]
use super::chain::{Chain, ChainConfig, Payment, format_units, parse_units, saturating_u128};
use super::crypto;
use super::driver::{Fabstir, SessionConfig};
#[cfg(feature = "fabstir-chain")]
use super::jobs::{ChainJobs, payment_name};
use super::jobs::{JobSource, Target};
#[cfg(feature = "fabstir-chain")]
use super::ledger::Ledger;
use super::source::FabstirProvider;
use crate::cli::ServeArgs;
#[cfg(feature = "fabstir-chain")]
use crate::cli::{PaymentChoice, SelectionChoice};

fn missing(flag: &str) -> String {
    format!(
        "--provider fabstir needs {flag} (chain mode: --model org/repo:file.gguf and the wallet key in \
         CLAUDE_BRIDGE_PRIVATE_KEY or --private-key-file; direct mode adds --host-url, --host-pubkey \
         and --job-id)"
    )
}

/// The Fabstir backend the flags ask for.
///
/// # Errors
/// A missing or malformed flag, an unreadable key or ledger, or a chain that cannot be reached
/// or is the wrong one.
pub async fn backend(
    args: &ServeArgs,
    engine: &std::sync::Arc<dyn crate::engine::Engine>,
) -> Result<FabstirProvider, String> {
    let model = args.model.clone().ok_or_else(|| missing("--model"))?;
    let model_id = ModelId::parse(&model).map_err(|e| format!("--model: {e}"))?;
    let wallet = wallet_key(args)?;
    let wallet_address = format!(
        "0x{}",
        crypto::to_hex(&crypto::address(&wallet.public_key()))
    );
    let tls = Arc::new(crate::upstream::tls_config(args.ca_cert.as_deref())?);
    let (jobs, limits) = if let Some(job_id) = args.job_id {
        let host_url = args.host_url.clone().ok_or_else(|| missing("--host-url"))?;
        let pubkey_hex = args
            .host_pubkey
            .as_deref()
            .ok_or_else(|| missing("--host-pubkey"))?;
        let host_pubkey = crypto::from_hex(pubkey_hex, "--host-pubkey")
            .and_then(|bytes| crypto::public_key(&bytes, "--host-pubkey"))
            .map_err(|e| {
                format!("--host-pubkey: {e} (give the host's compressed secp256k1 key as hex)")
            })?;
        info!(host = %host_url, job_id, chain_id = args.chain_id, model = %model,
            wallet = %wallet_address, "Fabstir direct mode");
        let target = Target {
            host_url,
            host_pubkey,
            job_id,
            price_per_token: args.price_per_token,
            host: None,
        };
        (
            JobSource::Direct {
                target,
                used: false,
            },
            Limits::default(),
        )
    } else {
        if args.host_url.is_some() || args.host_pubkey.is_some() {
            return Err(String::from(
                "--host-url and --host-pubkey are for direct mode and need --job-id; in chain mode \
                 hosts come from the NodeRegistry (pin one with --host 0xOPERATOR)",
            ));
        }
        chain_jobs(args, &wallet, &wallet_address, &model, model_id, &tls).await?
    };
    let config = SessionConfig {
        chain_id: args.chain_id,
        wallet,
        model: model.clone(),
        connect_timeout: Duration::from_secs(args.connect_timeout.max(1)),
        tls,
        limits,
        engine: Arc::clone(engine),
    };
    let endpoint = match (&args.job_id, &args.host_url) {
        (Some(_), Some(url)) => url.clone(),
        _ => format!("Fabstir hosts on chain {}", args.chain_id),
    };
    Ok(FabstirProvider {
        client: Fabstir::start(config, jobs, Box::new(super::OsRandomness)),
        options: ChatmlOptions {
            model: Some(model.clone()),
            ..args.chatml_options()
        },
        model,
        engine: Arc::clone(engine),
        endpoint,
    })
}

/// Chain mode's job source and limits: the chain reached and checked, the ledger opened (and
/// writable: no payment without a record) and reconciled.
#[cfg(feature = "fabstir-chain")]
async fn chain_jobs(
    args: &ServeArgs,
    wallet: &k256::SecretKey,
    wallet_address: &str,
    model: &str,
    model_id: ModelId,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<(JobSource, Limits), String> {
    let payment = payment(args.payment);
    let chain = Chain::connect(chain_config(args)?, Some(wallet), Arc::clone(tls))
        .await
        .map_err(|e| e.to_string())?;
    let ledger_path = args.ledger.clone().unwrap_or_else(Ledger::default_path);
    let mut ledger = match &args.ledger_store {
        // The gateway's store: every replica shares the ledger (the file is imported once).
        Some(url) => {
            let store = crate::gateway::store::Store::open(url, std::time::Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
            store.migrate().await.map_err(|e| {
                format!("{e}: the Fabstir ledger lives in the gateway's store, which must be reachable to pay for jobs")
            })?;
            Ledger::open_store(store, wallet_address, &ledger_path)
                .await
                .map_err(|e| e.to_string())?
        }
        None => Ledger::open(&ledger_path).map_err(|e| e.to_string())?,
    };
    ledger.check_writable().await.map_err(|e| {
        format!("{e}: the bridge does not pay for jobs it cannot record (choose another file with --ledger)")
    })?;
    reconcile(&chain, &mut ledger).await;
    let limits = limits(args, payment, &ledger, chain.config().chain_id)?;
    info!(
        rpc = %chain.config().rpc_url,
        chain_id = chain.config().chain_id,
        model = %model,
        wallet = %wallet_address,
        payment = payment.unit(),
        deposit = %format_units(U256::from(limits.deposit), payment.decimals()),
        max_spend = %format_units(U256::from(limits.max_spend), payment.decimals()),
        spent_before = %format_units(U256::from(limits.already_spent), payment.decimals()),
        ledger = %ledger.describe(),
        "Fabstir chain mode"
    );
    let pinned = args
        .host
        .as_deref()
        .map(|h| parse_address(h, "--host"))
        .transpose()?;
    let jobs = JobSource::Chain(Box::new(ChainJobs {
        chain,
        model: model_id,
        model_name: model.to_owned(),
        payment,
        selection: selection(args.selection),
        pinned,
        ledger: Arc::new(tokio::sync::Mutex::new(ledger)),
        max_spend: limits.max_spend,
        failures: std::collections::HashMap::new(),
        latency_ms: std::collections::HashMap::new(),
    }));
    Ok((jobs, limits))
}

/// This build has no chain client: only direct mode.
#[cfg(not(feature = "fabstir-chain"))]
async fn chain_jobs(
    _args: &ServeArgs,
    _wallet: &k256::SecretKey,
    _wallet_address: &str,
    _model: &str,
    _model_id: ModelId,
    _tls: &Arc<rustls::ClientConfig>,
) -> Result<(JobSource, Limits), String> {
    Err(String::from(NO_CHAIN))
}

/// What a build without the `fabstir-chain` feature says when asked for chain mode.
#[cfg(not(feature = "fabstir-chain"))]
const NO_CHAIN: &str = "this claude-bridge was built without Fabstir chain mode (cargo feature \
     `fabstir-chain`): give --job-id, --host-url and --host-pubkey for direct mode, or build with \
     the default features";

/// The wallet key from `--private-key-file` or `CLAUDE_BRIDGE_PRIVATE_KEY` (never a plain flag).
fn wallet_key(args: &ServeArgs) -> Result<k256::SecretKey, String> {
    let key_text = match (
        &args.private_key_file,
        crate::environment::var("CLAUDE_BRIDGE_PRIVATE_KEY"),
    ) {
        (Some(path), _) => std::fs::read_to_string(path)
            .map_err(|e| format!("--private-key-file {}: {e}", path.display()))?,
        (None, Some(key)) => key,
        (None, None) => return Err(missing("a wallet key")),
    };
    crypto::from_hex(key_text.trim(), "private key")
        .and_then(|bytes| crypto::secret_key(&bytes, "private key"))
        .map_err(|_| String::from("the wallet private key is not 32 bytes of hex"))
}

/// The contracts and RPC from the flags, over the Base Sepolia defaults.
#[cfg(feature = "fabstir-chain")]
fn chain_config(args: &ServeArgs) -> Result<ChainConfig, String> {
    let mut config = ChainConfig::base_sepolia();
    let default_chain = args.chain_id == config.chain_id;
    config.chain_id = args.chain_id;
    config.confirmations = args.confirmations.max(1);
    config.localhost_override = args
        .localhost_override
        .as_deref()
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_owned);
    match (&args.rpc_url, default_chain) {
        (Some(url), _) => config.rpc_url.clone_from(url),
        (None, true) => {}
        (None, false) => {
            return Err(format!(
                "--chain-id {} needs --rpc-url (the default RPC serves Base Sepolia, 84532)",
                args.chain_id
            ));
        }
    }
    let contract = |value: &Option<String>, flag: &str, default: Address| match value {
        Some(text) => parse_address(text, flag),
        None if default_chain => Ok(default),
        None => Err(format!(
            "--chain-id {} needs {flag} (the defaults are Base Sepolia's contracts)",
            args.chain_id
        )),
    };
    config.job_marketplace = contract(
        &args.job_marketplace,
        "--job-marketplace",
        config.job_marketplace,
    )?;
    config.node_registry = contract(&args.node_registry, "--node-registry", config.node_registry)?;
    config.usdc = match (&args.usdc, args.payment) {
        (Some(text), _) => parse_address(text, "--usdc")?,
        (None, PaymentChoice::Eth) => config.usdc,
        (None, PaymentChoice::Usdc) => contract(&None, "--usdc", config.usdc)?,
    };
    Ok(config)
}

#[cfg(feature = "fabstir-chain")]
fn parse_address(text: &str, flag: &str) -> Result<Address, String> {
    text.trim()
        .parse::<Address>()
        .map_err(|e| format!("{flag} {text}: not an address ({e}); give 0x and 40 hex digits"))
}

#[cfg(feature = "fabstir-chain")]
fn payment(choice: PaymentChoice) -> Payment {
    match choice {
        PaymentChoice::Eth => Payment::Eth,
        PaymentChoice::Usdc => Payment::Usdc,
    }
}

#[cfg(feature = "fabstir-chain")]
fn selection(choice: SelectionChoice) -> Selection {
    match choice {
        SelectionChoice::Auto => Selection::Auto,
        SelectionChoice::Cheapest => Selection::Cheapest,
        SelectionChoice::Reliable => Selection::Reliable,
        SelectionChoice::Fastest => Selection::Fastest,
    }
}

/// Deposit and cap (base units) from the flags, and what the ledger says was spent before.
#[cfg(feature = "fabstir-chain")]
fn limits(
    args: &ServeArgs,
    payment: Payment,
    ledger: &Ledger,
    chain_id: u64,
) -> Result<Limits, String> {
    let decimals = payment.decimals();
    let amount = |text: &str, flag: &str| {
        parse_units(text, decimals)
            .map(saturating_u128)
            .map_err(|e| format!("{flag}: {e} ({})", payment.unit()))
    };
    let deposit = match &args.deposit {
        Some(text) => amount(text, "--deposit")?,
        None => match payment {
            Payment::Eth => 200_000_000_000_000,
            Payment::Usdc => 1_000_000,
        },
    };
    if deposit < payment.minimum_deposit() {
        return Err(format!(
            "--deposit {} {} is below the JobMarketplace's minimum of {} {}",
            format_units(U256::from(deposit), decimals),
            payment.unit(),
            format_units(U256::from(payment.minimum_deposit()), decimals),
            payment.unit()
        ));
    }
    let max_spend = match &args.max_spend {
        Some(text) => amount(text, "--max-spend")?,
        None => deposit.saturating_mul(5),
    };
    Ok(Limits {
        deposit,
        max_spend,
        already_spent: ledger.spent(chain_id, payment_name(payment)),
        decimals,
        unit: payment.unit(),
        ..Limits::default()
    })
}

/// Ask the chain about the ledger's unconfirmed jobs: how pending transactions ended, and what
/// each finished job cost (deposit minus refund).
#[cfg(feature = "fabstir-chain")]
async fn reconcile(chain: &Chain, ledger: &mut Ledger) {
    let chain_id = chain.config().chain_id;
    for entry in ledger.to_reconcile(chain_id) {
        let recorded = if entry.status == "pending" {
            let Ok(tx) = entry.tx.parse::<alloy_primitives::B256>() else {
                warn!(
                    created_at = entry.created_at,
                    host = %entry.host,
                    "a job reserved by an earlier run has no transaction recorded (it stopped while paying): its deposit stays counted against the cap; remove the entry from the ledger if no job was paid"
                );
                continue;
            };
            match chain.job_of_transaction(tx).await {
                Ok(Some(job)) => {
                    info!(%tx, job_id = job.job_id, "a pending job transaction was mined");
                    ledger.confirm(chain_id, &entry.tx, job.job_id).await
                }
                Ok(None) => {
                    warn!(%tx, "a job transaction of an earlier run is still unknown to the chain; its deposit stays counted");
                    continue;
                }
                Err(e @ super::chain::ChainError::Transaction { .. }) => {
                    info!(%tx, error = %e, "a pending job transaction did not create a job");
                    ledger.revert(chain_id, &entry.tx).await
                }
                Err(e) => {
                    warn!(%tx, error = %e, "cannot check a pending job transaction");
                    continue;
                }
            }
        } else {
            match chain.job(entry.job_id).await {
                Ok(state) if !state.active => {
                    ledger
                        .settle(
                            chain_id,
                            entry.job_id,
                            Some(entry.deposit.saturating_sub(state.refunded)),
                        )
                        .await
                }
                Ok(_) => {
                    info!(
                        job_id = entry.job_id,
                        "a job from an earlier run is still open on-chain"
                    );
                    continue;
                }
                Err(e) => {
                    warn!(job_id = entry.job_id, error = %e, "cannot read an earlier job from the chain");
                    continue;
                }
            }
        };
        if let Err(e) = recorded {
            warn!(error = %e, "cannot update the ledger");
        }
    }
}

/// `claude-bridge hosts --model M`: the table of hosts that serve the model.
///
/// # Errors
/// Bad flags, or the chain cannot be read.
#[cfg(feature = "fabstir-chain")]
pub async fn hosts(args: &ServeArgs) -> Result<String, String> {
    let model = args
        .model
        .clone()
        .ok_or_else(|| String::from("hosts needs --model org/repo:file.gguf"))?;
    let model_id = ModelId::parse(&model).map_err(|e| format!("--model: {e}"))?;
    let tls = Arc::new(crate::upstream::tls_config(args.ca_cert.as_deref())?);
    let payment = payment(args.payment);
    let chain = Chain::connect(chain_config(args)?, None, tls)
        .await
        .map_err(|e| e.to_string())?;
    let offers = chain
        .discover(&model_id, payment)
        .await
        .map_err(|e| e.to_string())?;
    let candidates: Vec<scoring::Candidate> = offers
        .iter()
        .map(|o| scoring::Candidate {
            stake_wei: saturating_u128(o.stake),
            price: o.price.map(saturating_u128),
            ..scoring::Candidate::default()
        })
        .collect();
    let selection = selection(args.selection);
    let mut out = format!(
        "Fabstir hosts for {model} (model id {}) on chain {}, prices in {} per 1000 tokens, --selection {}\n",
        model_id.to_hex(),
        chain.config().chain_id,
        payment.unit(),
        format!("{selection:?}").to_lowercase()
    );
    if offers.is_empty() {
        out.push_str("no host is registered for this model\n");
        return Ok(out);
    }
    let rows: Vec<[String; 6]> = offers
        .iter()
        .zip(&candidates)
        .map(|(o, c)| {
            [
                o.address.to_string(),
                o.api_url.clone(),
                o.price.map_or_else(
                    || String::from("-"),
                    |p| format_units(p, payment.decimals()),
                ),
                format_units(o.stake, 18),
                format!("{:.3}", scoring::score(c, selection)),
                o.unusable().unwrap_or("ok").to_owned(),
            ]
        })
        .collect();
    let header = ["HOST", "URL", "PRICE", "STAKE", "SCORE", "STATUS"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: [&str; 6]| {
        let text: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(text.join("  ").trim_end());
        out.push('\n');
    };
    line(header);
    for row in &rows {
        line([&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]]);
    }
    Ok(out)
}

/// `claude-bridge hosts` needs the chain client.
///
/// # Errors
/// Always, in a build without the `fabstir-chain` feature.
#[cfg(not(feature = "fabstir-chain"))]
pub async fn hosts(_args: &ServeArgs) -> Result<String, String> {
    Err(String::from(NO_CHAIN))
}
