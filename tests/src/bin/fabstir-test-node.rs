//! A local Fabstir host node for trying the bridge's Fabstir provider without a real host: the
//! same protocol and encryption as a live node (`tests/src/fabstir_node/`), with a toy model that
//! answers in plain text — or with a Bash tool call when the prompt asks it to "run `CMD`".
//!
//! ```text
//! cargo run -p bridge-tests --bin fabstir-test-node
//! ```
//! It prints the `claude-bridge serve --provider fabstir …` line to use (any job id works).

use std::sync::Arc;

use bridge_tests::fabstir_node::{HostNode, Script, toy_model};

/// The toy node's fixed key: this is a test node, never a real host.
const NODE_KEY: [u8; 32] = [0x11; 32];

#[tokio::main]
async fn main() -> bridge_tests::Result<()> {
    let script: Script = Arc::new(toy_model);
    let node = HostNode::start(NODE_KEY, script).await?;
    println!(
        "Fabstir test node listening at {} (Ctrl-C to stop)",
        node.url()
    );
    println!(
        "\nexport CLAUDE_BRIDGE_PRIVATE_KEY=0x{}\nclaude-bridge serve --provider fabstir --host-url {} --host-pubkey {} --job-id 1 --model test/toy:model.gguf\n",
        "22".repeat(32),
        node.url(),
        node.pubkey_hex()
    );
    tokio::signal::ctrl_c().await?;
    println!("node saw: {:?}", node.log().prompts.len());
    Ok(())
}
