//! Builds the core as a WASI 0.2 component (`core/component`, target `wasm32-wasip2`) and puts
//! it in `OUT_DIR/bridge_core_component.wasm`, where `src/engine/wasm.rs` embeds it.
//!
//! So `cargo build` at the workspace root works without Make. The nested cargo uses its own
//! target dir (`target/component`): the outer cargo holds the lock on `target/`, and sharing
//! it would deadlock. The nested cargo decides itself whether anything is stale (a no-op
//! build takes about a second); this script re-runs when the core, the component crate or the
//! WIT change.
//!
//! `CLAUDE_BRIDGE_COMPONENT_WASM=/path/to/bridge_core_component.wasm` skips the nested build
//! and embeds that file instead (prebuilt artifacts, packaging).

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

type BoxError = Box<dyn std::error::Error>;

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "component";
const ARTIFACT: &str = "bridge_core_component.wasm";

fn main() -> Result<(), BoxError> {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("no CARGO_MANIFEST_DIR")?);
    let workspace = manifest_dir
        .parent()
        .ok_or("host-native has no parent directory")?
        .to_path_buf();
    let out = PathBuf::from(env::var_os("OUT_DIR").ok_or("no OUT_DIR")?).join(ARTIFACT);

    println!("cargo::rerun-if-env-changed=CLAUDE_BRIDGE_COMPONENT_WASM");
    if let Some(prebuilt) = env::var_os("CLAUDE_BRIDGE_COMPONENT_WASM").filter(|v| !v.is_empty()) {
        let prebuilt = PathBuf::from(prebuilt);
        println!("cargo::rerun-if-changed={}", prebuilt.display());
        copy(&prebuilt, &out)?;
        return Ok(());
    }

    for input in [
        "core/src",
        "core/Cargo.toml",
        "core/component/src",
        "core/component/Cargo.toml",
        "wit",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!(
            "cargo::rerun-if-changed={}",
            workspace.join(input).display()
        );
    }

    let rustc = env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
    ensure_target(&rustc)?;

    let cargo = env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let target_dir = workspace.join("target").join("component");
    let mut command = Command::new(&cargo);
    command
        .current_dir(&workspace)
        .args([
            "build",
            "-p",
            "bridge-core-component",
            "--target",
            TARGET,
            "--profile",
            PROFILE,
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    scrub_env(&mut command);
    let output = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cargo.to_string_lossy()))?;
    if !output.status.success() {
        return Err(format!(
            "building the WASI component failed ({}):\n{}{}\n\
             (run `cargo build -p bridge-core-component --target {TARGET} --profile {PROFILE}` to see why)",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        )
        .into());
    }
    let built = target_dir.join(TARGET).join(PROFILE).join(ARTIFACT);
    // Also re-embed when the component is rebuilt or removed by hand (`make`, `cargo build -p
    // bridge-core-component …`).
    println!("cargo::rerun-if-changed={}", built.display());
    copy(&built, &out)
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

/// The nested cargo must not inherit what the outer build set up for *its* target: flags
/// meant for the host (`RUSTFLAGS`, `CARGO_ENCODED_RUSTFLAGS`, e.g. `-C target-cpu=native` or
/// coverage instrumentation), wrappers (`clippy-driver`), the outer target dir and profile
/// overrides, and the variables cargo sets for this build script. User configuration that is
/// about the machine (registry, network, `CARGO_HOME`, the jobserver) is kept.
fn scrub_env(command: &mut Command) {
    const KEEP_PREFIXES: [&str; 7] = [
        "CARGO_HOME",
        "CARGO_NET_",
        "CARGO_HTTP_",
        "CARGO_REGISTRIES_",
        "CARGO_REGISTRY_",
        "CARGO_TERM_",
        "CARGO_MAKEFLAGS",
    ];
    const REMOVE: [&str; 16] = [
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_LINKER",
        "RUSTC_BOOTSTRAP",
        "TARGET",
        "HOST",
        "OUT_DIR",
        "NUM_JOBS",
        "OPT_LEVEL",
        "DEBUG",
        "PROFILE",
        "RUSTDOC",
        "__CARGO_FIX_PLZ",
        "__CARGO_DEFAULT_LIB_METADATA",
    ];
    for (name, _) in env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let cargo_var =
            name.starts_with("CARGO_") && !KEEP_PREFIXES.iter().any(|p| name.starts_with(p));
        if cargo_var || REMOVE.contains(&name) {
            command.env_remove(name);
        }
    }
}

/// Installs the `wasm32-wasip2` standard library through rustup when the toolchain lacks it.
fn ensure_target(rustc: &OsString) -> Result<(), BoxError> {
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", rustc.to_string_lossy()))?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if sysroot.join("lib").join("rustlib").join(TARGET).is_dir() {
        return Ok(());
    }
    println!("cargo::warning=installing the {TARGET} target (rustup target add {TARGET})");
    // Output captured: this script's stdout is read by cargo as instructions.
    let output = Command::new("rustup")
        .args(["target", "add", TARGET])
        .output();
    match output {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(format!(
            "`rustup target add {TARGET}` failed ({}): {}\nThe WASI component of the core \
             needs it. Install it by hand, or set CLAUDE_BRIDGE_COMPONENT_WASM to a prebuilt \
             bridge_core_component.wasm",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim(),
        )
        .into()),
        Err(e) => Err(format!(
            "the Rust target {TARGET} is not installed and rustup could not be run ({e}). \
             Install the target for this toolchain (`rustup target add {TARGET}`), or set \
             CLAUDE_BRIDGE_COMPONENT_WASM to a prebuilt bridge_core_component.wasm"
        )
        .into()),
    }
}
