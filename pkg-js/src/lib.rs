//! `bridge-core-js`: the wasm-bindgen facade of [`bridge_core`], published as the npm package
//! `@fabstir/bridge-core` (Node ≥ 20 and browsers).
//!
//! The facade only maps types and errors — every rule lives in the core, so the TypeScript SDK
//! and the browser playground run exactly the bytes the native bridge and its wasmtime engine
//! run. One JS function or class per core operation:
//!
//! | JS | core |
//! |---|---|
//! | `prepare(dialect, request, options?)` | [`bridge_core::api::prepare`] |
//! | `countTokens(request)` | [`bridge_core::api::count_tokens`] |
//! | `route(config, request)` | [`bridge_core::api::route`] |
//! | `new Translator(options)` `.feed` `.fail` `.finish(end?)` | [`bridge_core::api::Translator`] |
//! | `new SseDecoder()` `.feed` `.finish` | [`bridge_core::api::SseDecoder`] |
//! | `encodeEvent(event)`, `encodeSseFrame(event, data)` | [`bridge_core::api::encode_event`], [`bridge_core::api::encode_sse_frame`] |
//! | `new StreamValidator()` `.push` `.finish`, `validateSse(sse)` | [`bridge_core::api::Validator`], [`bridge_core::api::validate_sse`] |
//! | `foldSse(sse)` | [`bridge_core::api::fold_sse`] |
//! | `fabstirSessionInit(initJson)` | [`bridge_core::api::fabstir_session_init`] |
//!
//! Failures become a JS `BridgeCoreError` (`kind`: the Anthropic error type, `status`: its HTTP
//! status, `message`: the core's message). Its class lives in `js/error.js`; the TypeScript
//! declarations of every value that crosses live once, in `js/types.d.ts`.
//!
//! Without the default `bindings` feature the crate is the core's purity proof instead: built for
//! `wasm32-unknown-unknown`, its one plain export ([`selftest`]) drives every operation, and
//! `scripts/check-wasm-imports.py` fails if the module imports anything at all.

#[cfg(feature = "bindings")]
mod bindings;
mod selftest;

pub use selftest::selftest;
