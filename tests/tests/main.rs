//! Every integration test of claude-bridge in one test binary: cross-runtime conformance and the
//! end-to-end suites with real clients (Claude Code, Codex, the SDKs, AG-UI apps, a local chain).
//!
//! One binary instead of one per file: each would link the whole bridge (wasmtime, alloy, tokio)
//! again, which made a cold `make test` spend most of its time compiling and linking. Run one suite
//! with its module path, e.g. `cargo test -p bridge-tests --test suite e2e_agui::`.

mod conformance;
mod e2e_agui;
mod e2e_claude_code;
mod e2e_dashboard;
mod e2e_endpoints;
mod e2e_errors;
mod e2e_fabstir;
mod e2e_fabstir_chain;
mod e2e_first_run;
mod e2e_gateway;
mod e2e_harness;
mod e2e_host;
mod e2e_pools;
mod e2e_providers;
mod e2e_sdks;
mod e2e_streaming;
mod fabstir_crypto_interop;
mod stand_ins;
mod tool_choice_degrade;
