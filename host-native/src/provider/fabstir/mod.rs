//! The Fabstir backend's host side: what touches keys (and, as it grows, sockets and the chain).
//! The protocol's rules live in the core (`bridge_core::fabstir`, `bridge_core::chatml`).
//!
//! - `chain` (feature `fabstir-chain`): NodeRegistry discovery and pricing, JobMarketplace jobs
//!   paid in ETH or USDC.
//! - [`crypto`]: secp256k1 ECDH, HKDF-SHA256, XChaCha20-Poly1305 and the init signature.
//! - [`driver`]: the task that owns the encrypted WebSocket and the core's session machine.
//! - [`jobs`]: where jobs come from (direct: the given one; chain: discovered, scored, paid).
//! - [`ledger`]: the job ledger file and the spending it remembers.
//! - [`setup`]: flags to backend; the `hosts` listing.
//! - [`source`]: the [`crate::provider::Provider`] for Fabstir hosts.

#[cfg(feature = "fabstir-chain")]
pub mod chain;
pub mod crypto;
pub mod driver;
pub mod jobs;
pub mod ledger;
pub mod setup;
pub mod source;

/// The operating system's randomness (session keys, ephemeral keys, nonces).
#[derive(Debug, Clone, Copy)]
pub struct OsRandomness;

impl crypto::Randomness for OsRandomness {
    fn fill(&mut self, out: &mut [u8]) {
        if getrandom::fill(out).is_err() {
            // No OS randomness means no safe keys: refuse to continue rather than reuse bytes.
            std::process::abort();
        }
    }
}
