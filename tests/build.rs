//! Passes the path of the test-only variant of the core's WASI component
//! (`bridge-core-component-faults`: markers in an upstream chunk make the guest write to stderr,
//! panic or loop) to the fault tests as `FAULTY_COMPONENT`.
//!
//! A debug build of claude-bridge builds it beside the embedded core and says where
//! (`DEP_CLAUDE_BRIDGE_CORE_FAULTY_COMPONENT`, its `links` metadata; see host-native/build.rs).
//! Otherwise (a release build, a prebuilt core) it is built here, beside the embedded core
//! (`target/component`, the same profile), so only its own small crate is compiled for it.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

include!("../host-native/build/component.rs");

fn main() -> Result<(), BoxError> {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("no CARGO_MANIFEST_DIR")?);
    let workspace = manifest_dir
        .parent()
        .ok_or("tests has no parent directory")?
        .to_path_buf();
    println!("cargo::rerun-if-changed=../host-native/build/component.rs");
    let built = match env::var_os("DEP_CLAUDE_BRIDGE_CORE_FAULTY_COMPONENT") {
        Some(path) => PathBuf::from(path),
        None => ComponentBuild {
            packages: &["bridge-core-component-faults"],
        }
        .run(&workspace)?
        .pop()
        .ok_or("the nested build returned no component")?,
    };
    println!("cargo::rustc-env=FAULTY_COMPONENT={}", built.display());
    Ok(())
}
