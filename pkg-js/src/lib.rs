//! Placeholder for the wasm-bindgen facade of `bridge-core` (the npm package `@fabstir/bridge-core`).
//!
//! It re-exports the core so that `cargo build -p bridge-core-js --target wasm32-unknown-unknown`
//! proves the core links for the browser target without importing anything from `env`.

pub use bridge_core::api;
