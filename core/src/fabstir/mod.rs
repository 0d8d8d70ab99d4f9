//! The Fabstir network's protocol, pure (`reference/fabstir-protocol.md`): the host's WebSocket
//! frames, model ids, host scoring. The host side (`host-native`) supplies the sockets, the
//! chain, the keys and the randomness; the prompt and reply translation lives in
//! [`crate::chatml`] and [`crate::translate::token_stream`].
//!
//! - [`protocol`]: client and host frames, the plaintexts inside them, host errors → Anthropic.
//! - [`model_id`]: `org/repo:file.gguf` → the contracts' `bytes32` model id (keccak256).
//! - [`scoring`]: the weighted host score per `--selection` mode, top ten, proportional draw.
//! - [`session`]: the paid session's lifecycle as a sans-IO state machine (FIFO prompts, recovery
//!   with a new job, the spending cap, timeouts).
//! - [`units`]: base units (wei, USDC units) shown as decimals.

pub mod model_id;
pub mod protocol;
pub mod scoring;
pub mod session;
pub mod units;
