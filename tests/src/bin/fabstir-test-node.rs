//! A local Fabstir host node for trying the bridge's Fabstir provider without a real host: the
//! same protocol and encryption as a live node (`tests/src/fabstir_node.rs`), with a toy model that
//! answers in plain text — or with a Bash tool call when the prompt asks it to "run `CMD`".
//!
//! ```text
//! cargo run -p bridge-tests --bin fabstir-test-node
//! ```
//! It prints the `claude-bridge serve --provider fabstir …` line to use (any job id works).

use std::sync::Arc;

use bridge_core::fabstir::protocol::PromptPlain;
use bridge_tests::fabstir_node::{HostNode, Script};

/// The toy node's fixed key: this is a test node, never a real host.
const NODE_KEY: [u8; 32] = [0x11; 32];

fn answer(prompt: &PromptPlain) -> Vec<String> {
    let text = &prompt.prompt;
    let last_user = text
        .rsplit("<|im_start|>user\n")
        .next()
        .unwrap_or_default()
        .split("<|im_end|>")
        .next()
        .unwrap_or_default();
    let reply = if last_user.starts_with("<tool_response>") {
        format!("The command finished. Its output:\n{}", last_user.trim())
    } else if let Some(command) = last_user
        .split_once("run `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(command, _)| command)
    {
        format!(
            "<think>The user wants me to run a command.</think>Running it.\n<tool_call>\n{}\n</tool_call>",
            serde_json::json!({"name": "Bash", "arguments": {"command": command, "description": "Run the requested command"}})
        )
    } else {
        format!(
            "Hello from the local Fabstir test node. You said: {}",
            last_user.trim()
        )
    };
    reply
        .chars()
        .collect::<Vec<_>>()
        .chunks(4)
        .map(|c| c.iter().collect())
        .collect()
}

#[tokio::main]
async fn main() -> bridge_tests::Result<()> {
    let script: Script = Arc::new(answer);
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
