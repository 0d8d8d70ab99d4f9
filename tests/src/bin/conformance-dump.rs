//! Writes the native core's conformance outputs for every golden fixture as JSON
//! (`{"<case>": [["<part>", "<text>"], …], "fabstir/<case>": …}`), the reference the npm package's Node and
//! Chromium suites (`pkg-js/tests/`) must match byte for byte.
//!
//! ```text
//! cargo run -p bridge-tests --bin conformance-dump -- OUT.json [FIXTURES_DIR]
//! ```

use std::path::{Path, PathBuf};

use bridge_tests::conformance::{
    cases, fabstir_cases, fixtures_dir, run_case, run_case_in, run_fabstir_case,
};
use claude_bridge::engine::Dialect;

fn main() -> bridge_tests::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let out = PathBuf::from(
        args.next()
            .ok_or("usage: conformance-dump OUT.json [FIXTURES_DIR]")?,
    );
    let dir = args.next().map_or_else(fixtures_dir, PathBuf::from);
    let native = claude_bridge::engine::native();
    let name = |case: &Path| -> bridge_tests::Result<String> {
        Ok(case
            .file_name()
            .ok_or("a fixture case has no name")?
            .to_string_lossy()
            .into_owned())
    };
    let mut dump = serde_json::Map::new();
    for case in cases(&dir)? {
        let outputs = run_case(native.as_ref(), &case)?;
        dump.insert(name(&case)?, serde_json::to_value(&outputs.parts)?);
    }
    // The OpenAI Responses and Anthropic pass-through upstreams and the OpenAI fronts, keyed
    // `<folder>/<case>`.
    for (folder, dialect) in [
        ("responses", Dialect::OpenaiResponses),
        ("anthropic", Dialect::Anthropic),
        ("front_chat", Dialect::FrontOpenaiChat),
        ("front_responses", Dialect::FrontOpenaiResponses),
    ] {
        let folder_dir = dir.join(folder);
        if !folder_dir.is_dir() {
            continue;
        }
        for case in cases(&folder_dir)? {
            let outputs = run_case_in(native.as_ref(), &case, dialect)?;
            dump.insert(
                format!("{folder}/{}", name(&case)?),
                serde_json::to_value(&outputs.parts)?,
            );
        }
    }
    // The raw-text (Fabstir) cases, keyed `fabstir/<case>`.
    let fabstir_dir = dir.join("fabstir");
    if fabstir_dir.is_dir() {
        for case in fabstir_cases(&fabstir_dir)? {
            let outputs = run_fabstir_case(native.as_ref(), &case)?;
            dump.insert(
                format!("fabstir/{}", name(&case)?),
                serde_json::to_value(&outputs.parts)?,
            );
        }
    }
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&out, serde_json::to_string(&dump)?)?;
    eprintln!(
        "conformance-dump: {} fixtures -> {}",
        dump.len(),
        out.display()
    );
    Ok(())
}
