//! Cross-runtime conformance: every golden fixture in `tests/fixtures/<case>/` through the native
//! core and through the WASI component in wasmtime (the engine the `claude-bridge` binary runs)
//! must give the same bytes — request conversion, token count, the streaming SSE and the folded
//! non-streaming message, whatever the chunking of the upstream bytes — and those bytes must be
//! the insta snapshots `core/tests/golden.rs` checks (`tests/fixtures/snapshots/`).
//!
//! `BRIDGE_FIXTURES_DIR` points the test at another fixture directory.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers: a failed unwrap is a failed test"
)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use claude_bridge::engine::{
    self, ConvertOptions, Engine, EngineError, ErrorKind, Finished, StreamOptions,
};

/// The id seed every run uses, as in the core's golden test.
const SEED: u64 = 42;
/// Chunk sizes the upstream bytes are fed in (`usize::MAX`: all at once).
const CHUNKINGS: [usize; 3] = [usize::MAX, 1, 7];

fn fixtures_dir() -> PathBuf {
    std::env::var_os("BRIDGE_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"))
}

/// Fixture cases: directories holding a `request.json` or an `upstream.sse`.
fn cases(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("no golden fixtures: cannot read {}: {e}", dir.display()));
    let mut cases: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("request.json").is_file() || p.join("upstream.sse").is_file())
        .collect();
    cases.sort();
    assert!(
        !cases.is_empty(),
        "no golden fixtures found under {} (each case is a directory with request.json and/or \
         upstream.sse): the conformance test would prove nothing",
        dir.display()
    );
    cases
}

/// Everything one engine produces for one case, rendered to text so runs compare byte for byte
/// and a mismatch can be shown.
#[derive(Debug, Default)]
struct Outputs {
    /// (what, bytes) in a fixed order.
    parts: Vec<(String, String)>,
}

impl Outputs {
    fn push(&mut self, what: impl Into<String>, bytes: impl Into<String>) {
        self.parts.push((what.into(), bytes.into()));
    }

    fn get(&self, what: &str) -> Option<&str> {
        self.parts
            .iter()
            .find(|(w, _)| w == what)
            .map(|(_, b)| b.as_str())
    }
}

fn show_error(e: &EngineError) -> String {
    match e {
        EngineError::Request { kind, message } => format!("error {}: {message}", kind.as_str()),
        EngineError::Trap(t) => panic!("the engine trapped: {t}"),
    }
}

fn show_finished(f: &Finished) -> String {
    format!("status: {}\n{}", f.status, f.body)
}

/// Feeds `upstream` in pieces of `chunk` bytes; with `fail_at`, fails the stream after that
/// many bytes instead of feeding the rest. Returns everything the session wrote, in order.
fn run_stream(
    engine: &dyn Engine,
    options: &StreamOptions,
    upstream: &[u8],
    chunk: usize,
    fail_at: Option<usize>,
) -> String {
    let mut session = engine.chat_stream(options).unwrap();
    let fed = fail_at.map_or(upstream, |n| &upstream[..n.min(upstream.len())]);
    let mut out = String::new();
    for piece in fed.chunks(chunk) {
        out.push_str(&session.feed(piece).unwrap());
    }
    if fail_at.is_some() {
        out.push_str(
            &session
                .fail(ErrorKind::Overloaded, "the upstream connection was reset")
                .unwrap(),
        );
    }
    let finished = session.finish().unwrap();
    write!(out, "\n--- finish\n{}", show_finished(&finished)).unwrap();
    out
}

fn run_case(engine: &dyn Engine, case: &Path) -> Outputs {
    let mut out = Outputs::default();
    let request = std::fs::read(case.join("request.json")).ok();
    let options: ConvertOptions = std::fs::read(case.join("options.json"))
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or_default();
    let upstream = std::fs::read(case.join("upstream.sse")).ok();

    let mut model = "claude-conformance".to_owned();
    let mut estimate = 0;
    if let Some(request) = &request {
        match engine.convert_request(request, &options) {
            Ok(c) => {
                model.clone_from(&c.client_model);
                estimate = c.input_tokens_estimate;
                let body: serde_json::Value = serde_json::from_str(&c.body).unwrap();
                let view = serde_json::json!({
                    "upstream_model": c.upstream_model,
                    "client_model": c.client_model,
                    "client_stream": c.client_stream,
                    "input_tokens_estimate": c.input_tokens_estimate,
                    "warnings": c.warnings,
                    "body": body,
                });
                out.push("request", serde_json::to_string_pretty(&view).unwrap());
                out.push("request.body", c.body);
            }
            Err(e) => out.push("request", show_error(&e)),
        }
        let tokens = engine
            .count_tokens(request)
            .map_or_else(|e| show_error(&e), |n| n.to_string());
        out.push("count_tokens", tokens);
    }

    if let Some(upstream) = &upstream {
        for stream in [true, false] {
            let options = StreamOptions {
                stream,
                model: model.clone(),
                input_tokens_estimate: estimate,
                id_seed: SEED,
            };
            let mode = if stream { "stream" } else { "folded" };
            for chunk in CHUNKINGS {
                let label = format!("{mode} chunk={chunk}");
                out.push(label, run_stream(engine, &options, upstream, chunk, None));
            }
            let half = upstream.len() / 2;
            out.push(
                format!("{mode} failed at {half}"),
                run_stream(engine, &options, upstream, 7, Some(half)),
            );
        }
    }
    out
}

/// Where two texts first differ, with some context, for the failure message.
fn first_difference(a: &str, b: &str) -> String {
    let at = a
        .bytes()
        .zip(b.bytes())
        .position(|(x, y)| x != y)
        .unwrap_or_else(|| a.len().min(b.len()));
    let context = |s: &str| {
        let start = s.floor_char_boundary(at.saturating_sub(80));
        let end = s.ceil_char_boundary((at + 80).min(s.len()));
        format!("{:?}", &s[start..end])
    };
    format!(
        "byte {at} (lengths {} vs {}):\n    {}\n    {}",
        a.len(),
        b.len(),
        context(a),
        context(b)
    )
}

/// The content of an insta snapshot file (after its `---` header), if there is one.
fn snapshot(dir: &Path, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("snapshots").join(format!("{name}.snap"))).ok()?;
    let rest = text.strip_prefix("---\n")?;
    let (_, content) = rest.split_once("\n---\n")?;
    Some(content.to_owned())
}

/// Compares one engine's outputs for a case with the expected ones; records mismatches.
fn compare(case: &str, expected: &Outputs, label: &str, got: &Outputs, failures: &mut Vec<String>) {
    let names = |o: &Outputs| o.parts.iter().map(|(w, _)| w.clone()).collect::<Vec<_>>();
    if names(expected) != names(got) {
        failures.push(format!(
            "{case}: {label} produced different outputs: {:?} vs {:?}",
            names(expected),
            names(got)
        ));
        return;
    }
    for ((what, a), (_, b)) in expected.parts.iter().zip(&got.parts) {
        if a != b {
            failures.push(format!(
                "{case}: {label}: `{what}` differs at {}",
                first_difference(a, b)
            ));
        }
    }
}

#[test]
fn native_and_wasm_give_identical_bytes_for_every_fixture() {
    let dir = fixtures_dir();
    let native = engine::native();
    let wasm = engine::wasm(None).unwrap();
    assert_eq!((native.name(), wasm.name()), ("native", "wasm"));

    let mut failures = Vec::new();
    let mut snapshots_checked = 0;
    let cases = cases(&dir);
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let reference = run_case(native.as_ref(), case);
        assert!(!reference.parts.is_empty(), "{name}: nothing to compare");

        // Every chunking of one mode must give the same bytes as feeding everything at once.
        for mode in ["stream", "folded"] {
            let whole = reference.get(&format!("{mode} chunk={}", usize::MAX));
            for chunk in CHUNKINGS {
                let got = reference.get(&format!("{mode} chunk={chunk}"));
                if let (Some(whole), Some(got)) = (whole, got)
                    && whole != got
                {
                    failures.push(format!(
                        "{name}: native {mode}, chunk size {chunk} changed the output at {}",
                        first_difference(whole, got)
                    ));
                }
            }
        }

        compare(
            &name,
            &reference,
            "wasm vs native",
            &run_case(wasm.as_ref(), case),
            &mut failures,
        );

        // The bytes are the golden ones the core's own test pins (when the snapshots exist).
        let expectations = [
            ("request", reference.get("request").map(str::to_owned)),
            (
                "events",
                reference
                    .get(&format!("stream chunk={}", usize::MAX))
                    .map(|s| s.replacen("\n--- finish\nstatus: 200\n", "", 1)),
            ),
            (
                "message",
                reference
                    .get(&format!("folded chunk={}", usize::MAX))
                    .and_then(|s| s.strip_prefix("\n--- finish\n"))
                    .map(|s| {
                        let (status, body) = s.split_once('\n').unwrap_or((s, ""));
                        let pretty = serde_json::from_str::<serde_json::Value>(body)
                            .map(|v| serde_json::to_string_pretty(&v).unwrap())
                            .unwrap_or_else(|_| body.to_owned());
                        format!("{status}\n{pretty}")
                    }),
            ),
        ];
        for (kind, ours) in expectations {
            let (Some(golden), Some(ours)) = (snapshot(&dir, &format!("{name}.{kind}")), ours)
            else {
                continue;
            };
            snapshots_checked += 1;
            let (golden, ours) = (golden.trim_end_matches('\n'), ours.trim_end_matches('\n'));
            if golden != ours {
                failures.push(format!(
                    "{name}: differs from snapshots/{name}.{kind}.snap at {}",
                    first_difference(golden, ours)
                ));
            }
        }
    }

    assert!(
        failures.is_empty(),
        "{} mismatches over {} fixtures:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    eprintln!(
        "conformance: {} fixtures identical across native and wasm ({} snapshot files matched)",
        cases.len(),
        snapshots_checked
    );
}

#[test]
fn bad_requests_get_the_same_answer_from_both_engines() {
    let native = engine::native();
    let wasm = engine::wasm(None).unwrap();
    let requests: [(&[u8], bool); 5] = [
        (b"", true),
        (b"{not json", true),
        (b"[1,2]", true),
        (br#"{"model":"m","max_tokens":10}"#, false),
        (
            br#"{"model":"m","max_tokens":10,"messages":[{"role":"wizard","content":"hi"}]}"#,
            false,
        ),
    ];
    for (request, must_fail) in requests {
        let shown = String::from_utf8_lossy(request);
        let options = ConvertOptions::default();
        let a = native.convert_request(request, &options).map(|c| c.body);
        let b = wasm.convert_request(request, &options).map(|c| c.body);
        assert!(!must_fail || a.is_err(), "{shown}: native accepted it");
        assert!(
            !matches!(b, Err(EngineError::Trap(_))),
            "{shown}: wasm trapped: {b:?}"
        );
        assert_eq!(a, b, "{shown}: convert_request differs");
        assert_eq!(
            native.count_tokens(request),
            wasm.count_tokens(request),
            "{shown}: count_tokens differs"
        );
    }
}

/// An OpenAI Chat stream answering `text`, in a few chunks.
fn text_upstream(text: &str) -> Vec<u8> {
    let mut sse = String::new();
    for word in text.split_inclusive(' ') {
        let delta = serde_json::json!({"choices": [{"index": 0, "delta": {"content": word}}]});
        write!(sse, "data: {delta}\n\n").unwrap();
    }
    sse.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
    sse.push_str(
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4}}\n\n",
    );
    sse.push_str("data: [DONE]\n\n");
    sse.into_bytes()
}

#[test]
fn wasm_engine_serves_200_concurrent_sessions() {
    const SESSIONS: usize = 200;
    let native = engine::native();
    let wasm = engine::wasm(None).unwrap();
    // All sessions are open (200 stores alive at once) before any is fed.
    let opened = Arc::new(Barrier::new(SESSIONS));
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..SESSIONS)
            .map(|i| {
                let (native, wasm, opened) = (&native, &wasm, Arc::clone(&opened));
                scope.spawn(move || {
                    let options = StreamOptions {
                        stream: i % 2 == 0,
                        model: format!("claude-{i}"),
                        input_tokens_estimate: 9,
                        id_seed: i as u64,
                    };
                    let upstream = text_upstream(&format!("session {i} says hello to you"));
                    let mut session = wasm.chat_stream(&options).unwrap();
                    opened.wait();
                    let mut got = String::new();
                    for piece in upstream.chunks(5 + i % 11) {
                        got.push_str(&session.feed(piece).unwrap());
                        std::thread::yield_now();
                    }
                    got.push_str(&show_finished(&session.finish().unwrap()));
                    drop(session);
                    let expected =
                        run_stream(native.as_ref(), &options, &upstream, usize::MAX, None)
                            .replacen("\n--- finish\n", "", 1);
                    assert_eq!(got, expected, "session {i}: wasm differs from native");
                    let text = if options.stream {
                        format!(r#""text":"{i} ""#)
                    } else {
                        format!("session {i} says")
                    };
                    assert!(got.contains(&text), "session {i}: lost its text:\n{got}");
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
    });
    // The slots are back in the pool: a fresh conversion still works.
    let request = br#"{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(
        wasm.convert_request(request, &ConvertOptions::default())
            .map(|c| c.body),
        native
            .convert_request(request, &ConvertOptions::default())
            .map(|c| c.body),
    );
}

#[test]
fn a_missing_plugin_is_an_engine_error() {
    let missing = Path::new(env!("CARGO_MANIFEST_DIR")).join("no-such-plugin.wasm");
    match engine::wasm(Some(&missing)) {
        Err(EngineError::Trap(message)) => {
            assert!(message.contains("no-such-plugin.wasm"), "{message}")
        }
        Err(other) => panic!("unexpected error: {other}"),
        Ok(_) => panic!("a missing plug-in loaded"),
    }
}
