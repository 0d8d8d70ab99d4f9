//! Builds the test-only variant of the core's WASI component (`bridge-core-component-faults`:
//! markers in an upstream chunk make the guest write to stderr, panic or loop) for the fault
//! tests, and passes its path as `FAULTY_COMPONENT`. It builds beside the embedded core
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
    let built = ComponentBuild {
        package: "bridge-core-component-faults",
    }
    .run(&workspace)?;
    println!("cargo::rustc-env=FAULTY_COMPONENT={}", built.display());
    Ok(())
}
