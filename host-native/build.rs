//! Builds the core as a WASI 0.2 component (`core/component`, target `wasm32-wasip2`) and puts
//! it in `OUT_DIR/bridge_core_component.wasm`, where `src/engine/wasm.rs` embeds it.
//!
//! So `cargo build` at the workspace root works without Make. The nested build
//! (`build/component.rs`, shared with `tests/build.rs`) uses `component/` in the outer build's
//! target directory.
//!
//! `CLAUDE_BRIDGE_COMPONENT_WASM=/path/to/bridge_core_component.wasm` skips the nested build
//! and embeds that file instead (prebuilt artifacts, packaging).
//!
//! A debug build (the tests' and `cargo run`'s) builds the test-only variant with fault
//! injection (`bridge-core-component-faults`) in the same nested cargo, and hands its path to
//! `tests/build.rs` as the `links` metadata `faulty_component`
//! (`DEP_CLAUDE_BRIDGE_CORE_FAULTY_COMPONENT` there). A nested cargo of its own in
//! `tests/build.rs` would wait for this one's lock on the component target dir while holding one
//! of the outer build's job slots: on two cores, half the machine idle for a minute of a cold
//! `make test`.

#![expect(
    clippy::disallowed_methods,
    reason = "a build script reads cargo's environment; --env-file (crate::environment) does not apply to it"
)]

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

include!("build/component.rs");

fn main() -> Result<(), BoxError> {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("no CARGO_MANIFEST_DIR")?);
    let workspace = manifest_dir
        .parent()
        .ok_or("host-native has no parent directory")?
        .to_path_buf();
    let out = PathBuf::from(env::var_os("OUT_DIR").ok_or("no OUT_DIR")?)
        .join("bridge_core_component.wasm");

    println!("cargo::rerun-if-env-changed=CLAUDE_BRIDGE_COMPONENT_WASM");
    if let Some(prebuilt) = env::var_os("CLAUDE_BRIDGE_COMPONENT_WASM").filter(|v| !v.is_empty()) {
        let prebuilt = PathBuf::from(prebuilt);
        println!("cargo::rerun-if-changed={}", prebuilt.display());
        copy(&prebuilt, &out)?;
        return Ok(());
    }
    println!("cargo::rerun-if-changed=build/component.rs");
    // A debug build of the host embeds a core built faster (see `component_profile`), and builds
    // the test variant beside it.
    let debug = component_profile() == "component-test";
    let packages: &[&str] = if debug {
        &["bridge-core-component", "bridge-core-component-faults"]
    } else {
        &["bridge-core-component"]
    };
    let built = ComponentBuild { packages }.run(&workspace)?;
    let [embedded, rest @ ..] = built.as_slice() else {
        return Err("the nested build returned no component".into());
    };
    if let [faulty] = rest {
        println!("cargo::metadata=faulty_component={}", faulty.display());
    }
    copy(embedded, &out)
}

/// Copies unless `to` already has these bytes, so an unchanged component does not make
/// cargo recompile the host.
fn copy(from: &Path, to: &Path) -> Result<(), BoxError> {
    let bytes = std::fs::read(from)
        .map_err(|e| format!("cannot read the component {}: {e}", from.display()))?;
    if std::fs::read(to).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    std::fs::write(to, bytes).map_err(|e| format!("cannot write {}: {e}", to.display()).into())
}
