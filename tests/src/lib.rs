//! Test support for claude-bridge: the end-to-end harness.
//!
//! - [`bench_stream`]: the deterministic large upstream stream `make bench` translates.
//! - [`upstream`]: a scripted OpenAI Chat Completions server that stands in for the model.
//! - [`chunks`]: builders for the OpenAI stream chunks the scripted upstream sends.
//! - [`bridge`]: starts the real `claude-bridge` binary against an upstream.
//! - [`http`]: a tiny hyper client with timeouts (raw requests to the bridge).
//! - [`sse`]: an Anthropic SSE parser and an independent stream-shape validator.
//! - [`conformance`]: one fixture case through one engine, as parts every runtime must match.
//! - [`evm_world`]: the local chain: hardhat's EVM node (84532) with our contracts, compiled by solc.
//! - [`fabstir_node`]: a local Fabstir host node speaking the live host's protocol (real crypto).
//! - [`mcp`]: the official MCP SDK's server, for Claude Code's MCP tools.
//! - [`clients`]: real clients (Claude Code CLI, the Python and TypeScript Anthropic SDKs).
//! - [`tempdir`]: throw-away directories removed on drop.
//! - [`tls`]: a self-signed certificate made at test time for the HTTPS upstream.
//! - [`tmux`]: a real terminal (tmux) for the interactive Claude Code and Codex.
//!
//! The README beside this crate (`tests/README.md`) says how to run the suite.

pub mod anthropic_upstream;
pub mod bench_stream;
pub mod bridge;
pub mod chunks;
pub mod clients;
pub mod codex;
pub mod conformance;
pub mod evm_world;
pub mod fabstir_node;
pub mod http;
pub mod mcp;
pub mod responses_upstream;
pub mod searxng;
pub mod servers;
pub mod sse;
pub mod tempdir;
pub mod tls;
pub mod tmux;
pub mod upstream;
pub mod website;

/// The error type of the harness: anything, with a message good enough to fail a test on.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias of the harness.
pub type Result<T> = std::result::Result<T, BoxError>;

/// Make an error from a message.
pub fn err(msg: impl Into<String>) -> BoxError {
    msg.into().into()
}
