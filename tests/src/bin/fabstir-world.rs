//! The local Fabstir world for trying the bridge's chain mode by hand, with no real chain, money
//! or host: hardhat's EVM node (chain id 84532) with the contracts deployed, two local host nodes
//! registered in the NodeRegistry (real protocol and encryption, the toy model of
//! `fabstir-test-node`, jobs settled on-chain when a session closes), and a funded wallet.
//!
//! ```text
//! make fabstir-world            # or: cargo run -p bridge-tests --bin fabstir-world
//! ```
//! It writes `target/fabstir-world/bridge.env` (the bridge's settings: RPC, contracts, model,
//! wallet key file, ledger) and prints the `make run` line that uses it. Ctrl-C stops everything.

use std::sync::Arc;

use alloy::primitives::{Address, U256};
use bridge_core::fabstir::model_id::ModelId;
use bridge_tests::evm_world::EvmWorld;
use bridge_tests::fabstir_node::{HostNode, Script, toy_model};
use claude_bridge::fabstir::crypto;

/// The model the toy hosts serve.
const MODEL: &str = "fabstir-world/toy-model-GGUF:toy-model-Q4_K_M.gguf";
/// Fixed keys: this is a throw-away local world, never a real chain.
const HOST_KEYS: [[u8; 32]; 2] = [[0x11; 32], [0x12; 32]];
const WALLET_KEY: [u8; 32] = [0x22; 32];

#[tokio::main]
async fn main() -> bridge_tests::Result<()> {
    let dir = bridge_tests::bridge::profile_dir()?
        .join("..")
        .join("fabstir-world");
    std::fs::create_dir_all(&dir)?;
    let dir = dir.canonicalize()?;
    eprintln!("starting hardhat and deploying the contracts…");
    let world = EvmWorld::start().await?;
    let model = ModelId::parse(MODEL)?;
    let mut nodes = Vec::new();
    for (i, key) in HOST_KEYS.iter().enumerate() {
        let script: Script = Arc::new(toy_model);
        let node = HostNode::start_on_chain(*key, script, world.node_chain(key)?).await?;
        // 0.001 and 0.002 ETH (or 0.002 and 0.004 USDC) per 1000 tokens.
        let scale = i as u128 + 1;
        let address = world
            .register_host(
                key,
                &node.url(),
                &model,
                scale * 1_000_000_000_000_000,
                scale * 2_000,
            )
            .await?;
        nodes.push((node, address));
    }
    let wallet = crypto::secret_key(&WALLET_KEY, "wallet")?;
    let wallet_address = Address::from(crypto::address(&wallet.public_key()));
    world
        .fund(
            wallet_address,
            U256::from(10u128.pow(19)),
            U256::from(100_000_000u64),
        )
        .await?;
    let key_file = dir.join("wallet.key");
    std::fs::write(&key_file, format!("0x{}\n", crypto::to_hex(&WALLET_KEY)))?;
    let ledger = dir.join("ledger.json");
    let _ = std::fs::remove_file(&ledger);
    let env_file = dir.join("bridge.env");
    std::fs::write(
        &env_file,
        format!(
            "# The local Fabstir world (fabstir-world); only valid while it runs.\n\
             CLAUDE_BRIDGE_PROVIDER=fabstir\n\
             CLAUDE_BRIDGE_MODEL={MODEL}\n\
             CLAUDE_BRIDGE_RPC_URL={}\n\
             CLAUDE_BRIDGE_JOB_MARKETPLACE={}\n\
             CLAUDE_BRIDGE_NODE_REGISTRY={}\n\
             CLAUDE_BRIDGE_USDC={}\n\
             CLAUDE_BRIDGE_PRIVATE_KEY_FILE={}\n\
             CLAUDE_BRIDGE_LEDGER={}\n",
            world.rpc_url,
            world.marketplace,
            world.registry,
            world.usdc,
            key_file.display(),
            ledger.display()
        ),
    )?;
    println!("Local Fabstir world ready (Ctrl-C stops it):");
    println!(
        "  chain    {} (hardhat, chain id {})",
        world.rpc_url, world.chain_id
    );
    println!(
        "  contracts JobMarketplace {}, NodeRegistry {}, USDC {}",
        world.marketplace, world.registry, world.usdc
    );
    for (node, address) in &nodes {
        println!("  host     {address} at {}", node.url());
    }
    println!(
        "  wallet   {wallet_address}: 10 ETH, 100 USDC (key in {})",
        key_file.display()
    );
    println!("  model    {MODEL}");
    println!("\nIn another terminal:");
    println!("  make run ARGS=\"--env-file {}\"", env_file.display());
    println!(
        "  ANTHROPIC_BASE_URL=http://127.0.0.1:3456 ANTHROPIC_AUTH_TOKEN=any claude -p 'run `ls`' --allowedTools Bash"
    );
    println!(
        "  target/release/claude-bridge hosts --env-file {}",
        env_file.display()
    );
    tokio::signal::ctrl_c().await?;
    for (node, address) in &nodes {
        let log = node.log();
        println!(
            "host {address}: {} prompts, jobs settled: {:?}",
            log.prompts.len(),
            log.settled
        );
    }
    Ok(())
}
