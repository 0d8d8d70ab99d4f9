//! Cross-runtime conformance: every golden fixture in `tests/fixtures/<case>/` through the native
//! core and through the WASI component in wasmtime (the engine the `claude-bridge` binary runs)
//! must give the same bytes — request conversion, token count, the streaming SSE and the folded
//! non-streaming message, whatever the chunking of the upstream bytes — and those bytes must be
//! the insta snapshots `core/tests/golden.rs` checks (`tests/fixtures/snapshots/`).
//!
//! `BRIDGE_FIXTURES_DIR` points the test at another fixture directory.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Barrier};

use bridge_tests::conformance::{
    Outputs, cases, first_difference, fixtures_dir, request_view, run_case, run_stream,
};
use claude_bridge::engine::{
    self, ConvertOptions, Dialect, EngineError, Finished, StreamEnd, StreamOptions,
};

fn show_finished(f: &Finished) -> String {
    format!("status: {}\n{}", f.status, f.body)
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
    let cases = cases(&dir).unwrap();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let reference = run_case(native.as_ref(), case).unwrap();
        assert!(!reference.parts.is_empty(), "{name}: nothing to compare");

        // Every chunking of one mode must give the same bytes as feeding everything at once.
        for mode in ["stream", "folded"] {
            let whole = reference.get(&format!("{mode} chunk=all"));
            for (chunk, _) in bridge_tests::conformance::CHUNKINGS {
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
            &run_case(wasm.as_ref(), case).unwrap(),
            &mut failures,
        );

        // The bytes are the golden ones the core's own test pins (when the snapshots exist).
        let expectations = [
            ("request", request_view(&reference).unwrap()),
            (
                "events",
                reference
                    .get("stream chunk=all")
                    .map(|s| s.replacen("\n--- finish\nstatus: 200\n", "", 1)),
            ),
            (
                "message",
                reference
                    .get("folded chunk=all")
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
fn raw_text_cases_give_identical_bytes_through_wasmtime() {
    let dir = fixtures_dir().join("fabstir");
    let native = engine::native();
    let wasm = engine::wasm(None).unwrap();
    let cases = bridge_tests::conformance::fabstir_cases(&dir).unwrap();
    assert!(
        cases.len() >= 5,
        "raw-text fixtures missing under {}",
        dir.display()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let reference = bridge_tests::conformance::run_fabstir_case(native.as_ref(), case).unwrap();
        assert!(reference.parts.len() >= 4, "{name}: nothing to compare");
        let got = bridge_tests::conformance::run_fabstir_case(wasm.as_ref(), case).unwrap();
        compare(&name, &reference, "wasm vs native", &got, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The other upstream dialects, and the OpenAI fronts (an OpenAI client's request, an Anthropic
/// stream) whose streams are also checked against the snapshots `core/tests/golden.rs` pins.
#[test]
fn responses_anthropic_and_front_cases_give_identical_bytes_through_wasmtime() {
    let native = engine::native();
    let wasm = engine::wasm(None).unwrap();
    let mut failures = Vec::new();
    let mut snapshots_checked = 0;
    for (folder, dialect, at_least) in [
        ("responses", Dialect::OpenaiResponses, 10),
        ("anthropic", Dialect::Anthropic, 5),
        ("front_chat", Dialect::FrontOpenaiChat, 8),
        ("front_responses", Dialect::FrontOpenaiResponses, 8),
    ] {
        let dir = fixtures_dir().join(folder);
        let cases = cases(&dir).unwrap();
        assert!(
            cases.len() >= at_least,
            "{folder} fixtures missing under {}",
            dir.display()
        );
        for case in &cases {
            let name = format!("{folder}/{}", case.file_name().unwrap().to_string_lossy());
            let reference =
                bridge_tests::conformance::run_case_in(native.as_ref(), case, dialect).unwrap();
            let expected_parts = if case.join("upstream.sse").exists() {
                11
            } else {
                3
            };
            assert!(
                reference.parts.len() >= expected_parts,
                "{name}: nothing to compare"
            );
            let got = bridge_tests::conformance::run_case_in(wasm.as_ref(), case, dialect).unwrap();
            compare(&name, &reference, "wasm vs native", &got, &mut failures);
            if dialect.front().is_none() {
                continue;
            }
            let case_name = case.file_name().unwrap().to_string_lossy();
            let events = reference
                .get("stream chunk=all")
                .map(|s| s.replacen("\n--- finish\nstatus: 200\n", "", 1));
            if let (Some(golden), Some(ours)) =
                (snapshot(&dir, &format!("{case_name}.events")), events)
            {
                snapshots_checked += 1;
                if golden.trim_end_matches('\n') != ours.trim_end_matches('\n') {
                    failures.push(format!(
                        "{name}: differs from its events snapshot at {}",
                        first_difference(&golden, &ours)
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        snapshots_checked >= 12,
        "only {snapshots_checked} front event snapshots were compared"
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
            true,
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
                        ..StreamOptions::default()
                    };
                    let upstream = text_upstream(&format!("session {i} says hello to you"));
                    let mut session = wasm.translator(&options).unwrap();
                    opened.wait();
                    let mut got = String::new();
                    for piece in upstream.chunks(5 + i % 11) {
                        got.push_str(&session.feed(piece).unwrap());
                        std::thread::yield_now();
                    }
                    got.push_str(&show_finished(
                        &session.finish(&StreamEnd::default()).unwrap(),
                    ));
                    drop(session);
                    let expected =
                        run_stream(native.as_ref(), &options, &upstream, usize::MAX, None)
                            .unwrap()
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
