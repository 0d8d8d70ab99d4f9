//! `claude-bridge`: the host. It owns everything that touches the world (sockets, upstream
//! HTTP, the clock, randomness, configuration) and runs every translation through the pure core,
//! by default inside wasmtime ([`engine`]).
//!
//! - [`cli`]: flags and environment (the stable CLI contract).
//! - [`config`]: the config file (`claude-bridge.toml`): providers and the router, checked with
//!   errors that name the line and the key.
//! - [`server`]: the Anthropic front (hyper).
//! - [`provider`]: the upstream APIs (OpenAI Chat, Anthropic pass-through, Fabstir) behind one
//!   trait; the front relays what they answer.
//! - [`error`]: every way a request can fail, whose fault it was, whether to try elsewhere.
//! - [`guard`]: what browsers and rebinding pages may not send, for every front.
//! - [`fabstir`]: the Fabstir provider's host side (encryption, sessions, the chain (feature
//!   `fabstir-chain`), the ledger).
//! - `agui` (feature `agui`): `claude-bridge agui`, AG-UI / CopilotKit front ends driving Claude
//!   Code.
//! - [`launch`]: `claude-bridge claude` and `codex`, a bridge beside the tool they start;
//!   [`process_tree`] ends whatever that tool leaves running.
//! - [`run`]: wiring them together.

#[cfg(feature = "agui")]
pub mod agui;
pub mod cli;
pub mod codex_home;
pub mod config;
pub mod dashboard;
pub mod doctor;
pub mod engine;
pub mod environment;
pub mod error;
pub mod gateway;
pub mod guard;
pub mod ids;
pub mod launch;
pub mod process_tree;
pub mod provider;
pub mod redact;
pub mod run;
pub mod server;

pub use provider::{fabstir, upstream};
