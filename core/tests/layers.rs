//! The core's modules form layers: each top-level module (`anthropic`, `translate`, `front`,
//! `api`, …) only uses modules beneath it, never one that uses it back. Read from the sources:
//! every `crate::<module>` path outside comments is an edge; the graph must have no cycle.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code reads the source tree"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/translate/chat_request.rs` → `translate`).
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap().as_os_str();
    first.to_str().unwrap().trim_end_matches(".rs").to_owned()
}

/// The modules a line names as `crate::<module>`, comments left out.
fn used(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or_default();
    code.match_indices("crate::")
        .filter(|(at, _)| !code[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .map(|(at, _)| {
            code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .filter(|m: &String| !m.is_empty())
        .collect()
}

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let from = module_of(&src, file);
        if from == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        // Tests may reach anywhere (a unit test of a low module builds inputs with a high one).
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for line in code.lines() {
            for to in used(line) {
                if to != from {
                    edges.entry(from.clone()).or_default().insert(to);
                }
            }
        }
    }
    assert!(
        edges.contains_key("translate") && edges["api"].contains("translate"),
        "the scan found the modules: {edges:?}"
    );
    // Kahn's algorithm: whatever cannot be ordered is on a cycle.
    let mut remaining = edges.clone();
    loop {
        let leaves: Vec<String> = remaining
            .iter()
            .filter(|(_, to)| to.iter().all(|t| !remaining.contains_key(t)))
            .map(|(m, _)| m.clone())
            .collect();
        if leaves.is_empty() {
            break;
        }
        for leaf in leaves {
            remaining.remove(&leaf);
        }
    }
    assert!(
        remaining.is_empty(),
        "these modules use each other in a cycle (move what both need beneath them): {remaining:#?}"
    );
}
