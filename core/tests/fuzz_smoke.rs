//! The fuzz targets (`bridge_core::fuzz`) on stable, in `make test`: each runs over its seed
//! corpus (the golden fixtures), the crash inputs kept in `tests/fixtures/fuzz/<target>/`, and a
//! few thousand deterministic mutations of the seeds. `make fuzz` runs the same targets under
//! libFuzzer for longer (nightly).

#![expect(
    clippy::panic,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a failed target fails the test; the test reads its corpus from files"
)]

use std::path::{Path, PathBuf};

use bridge_core::fuzz::TARGETS;

/// Mutations per target.
const MUTATIONS: usize = 5000;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// Files named `name` one or two folders below `dir`.
fn files_named(dir: &Path, name: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for sub in dirs.into_iter().filter(|p| p.is_dir()) {
        if let Ok(bytes) = std::fs::read(sub.join(name)) {
            out.push(bytes);
        }
        out.extend(files_named(&sub, name));
    }
    out
}

/// The seed corpus of a target: the fixtures of its kind, each behind a split byte.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let root = fixtures();
    let raw: Vec<Vec<u8>> = match target {
        "sse_decoder" | "chat_stream" => files_named(&root, "upstream.sse"),
        "responses_stream" => files_named(&root.join("responses"), "upstream.sse"),
        "token_stream" => files_named(&root.join("fabstir"), "tokens.json")
            .into_iter()
            .map(|json| {
                let tokens: Vec<String> = serde_json::from_slice(&json).unwrap_or_default();
                tokens.concat().into_bytes()
            })
            .collect(),
        "request" => files_named(&root, "request.json"),
        "agui_ndjson" => files_named(&root.join("agui"), "transcript.ndjson"),
        other => panic!("no seeds for {other}"),
    };
    assert!(!raw.is_empty(), "{target}: no seed fixtures found");
    let mut seeds: Vec<Vec<u8>> = raw
        .iter()
        .flat_map(|seed| [1u8, 7, 0].map(|cut| [&[cut][..], seed].concat()))
        .collect();
    // Crash inputs found by `make fuzz`, kept as they are.
    if let Ok(entries) = std::fs::read_dir(root.join("fuzz").join(target)) {
        seeds.extend(
            entries
                .flatten()
                .filter_map(|e| std::fs::read(e.path()).ok()),
        );
    }
    seeds
}

/// A deterministic xorshift generator (no dependency, the same run every time).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap()
    }
}

/// Pieces a mutation likes to insert: the syntax the parsers branch on.
const DICTIONARY: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"\n\n",
    b"data: ",
    b"event: ",
    b": comment\n",
    b"[DONE]",
    b"{",
    b"}",
    b"\"",
    b"\\",
    b"\\u00",
    b"[",
    b"]",
    b"<tool_call>",
    b"</tool_call>",
    b"\"arguments\":",
    b"null",
    b"\xF0\x9F",
    b"\xE9",
    b"\"type\":\"response.completed\"",
    b"\"finish_reason\":\"tool_calls\"",
];

fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(data.len() + 1);
        match rng.below(6) {
            0 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] ^= 1 << rng.below(8);
            }
            1 => {
                let piece = DICTIONARY[rng.below(DICTIONARY.len())];
                data.splice(at..at, piece.iter().copied());
            }
            2 => {
                let end = (at + rng.below(64)).min(data.len());
                data.drain(at..end);
            }
            3 => {
                let end = (at + rng.below(128)).min(data.len());
                let piece = data[at..end].to_vec();
                data.splice(at..at, piece);
            }
            4 => data.truncate(at),
            _ => {
                // Splice in part of another seed.
                let from = rng.below(other.len() + 1);
                let end = (from + rng.below(256)).min(other.len());
                data.splice(at..at, other[from..end].iter().copied());
            }
        }
    }
    if let Some(first) = data.first_mut() {
        *first = u8::try_from(rng.below(256)).unwrap();
    }
    data
}

#[test]
fn every_fuzz_target_holds_on_its_corpus_and_mutations() {
    for (name, target) in TARGETS {
        let seeds = seeds(name);
        for (i, seed) in seeds.iter().enumerate() {
            if let Err(e) = target(seed) {
                panic!("{name}: seed {i} fails: {e}");
            }
        }
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ name.len() as u64);
        for round in 0..MUTATIONS {
            let seed = &seeds[rng.below(seeds.len())];
            let other = &seeds[rng.below(seeds.len())];
            let input = mutate(&mut rng, seed, other);
            if let Err(e) = target(&input) {
                panic!(
                    "{name}: mutation {round} fails: {e}\ninput: {:?}",
                    String::from_utf8_lossy(&input)
                );
            }
        }
    }
}
