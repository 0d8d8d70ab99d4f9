//! The Fabstir backend's host side: what touches keys (and, as it grows, sockets and the chain).
//! The protocol's rules live in the core (`bridge_core::fabstir`, `bridge_core::chatml`).
//!
//! - [`crypto`]: secp256k1 ECDH, HKDF-SHA256, XChaCha20-Poly1305 and the init signature.

pub mod crypto;
