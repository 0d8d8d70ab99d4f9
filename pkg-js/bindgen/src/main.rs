//! `bridge-bindgen <bridge_core_js.wasm> <out dir>`: writes the npm package's wasm and its
//! JavaScript glue — `bridge_core.js`, `bridge_core.d.ts`, `bridge_core_bg.wasm` and the
//! snippets — as `wasm-bindgen --target web --remove-name-section --remove-producers-section
//! --out-name bridge_core` does (`scripts/build-js.sh` runs it).
//!
//! A workspace tool rather than the installed `wasm-bindgen-cli`: it is the same library that
//! CLI wraps (`wasm-bindgen-cli-support`, pinned to the version of the `wasm-bindgen` crate the
//! package links), without the CLI's test runner, web server and HTTP client, and it builds with
//! the workspace (sharing its dependencies) instead of through a `cargo install` of its own.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use wasm_bindgen_cli_support::Bindgen;

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [input, out_dir] = args.as_slice() else {
        eprintln!("usage: bridge-bindgen <bridge_core_js.wasm> <out dir>");
        return ExitCode::from(2);
    };
    match generate(input, out_dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "bridge-bindgen: cannot make the glue for {}: {e}",
                input.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// The error with its causes (`{:#}` of the library's `anyhow` error).
fn generate(input: &Path, out_dir: &Path) -> Result<(), String> {
    let mut bindgen = Bindgen::new();
    bindgen
        .input_path(input)
        .web(true)
        .map_err(|e| format!("{e:#}"))?
        // The CLI's default where the library's differs: without an argument, the glue loads
        // `new URL('bridge_core_bg.wasm', import.meta.url)` (the output is byte-identical to
        // the CLI's).
        .omit_default_module_path(false)
        .remove_name_section(true)
        .remove_producers_section(true)
        .typescript(true)
        .out_name("bridge_core")
        .generate(out_dir)
        .map_err(|e| format!("{e:#}"))
}
