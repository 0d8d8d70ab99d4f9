//! Golden fixtures: every case in `tests/fixtures/<case>/` (OpenAI Chat upstreams) and in
//! `tests/fixtures/anthropic/<case>/` (the Anthropic pass-through) through the native core's
//! facade (`prepare` and the `Translator` of the dialect), checked against insta snapshots in
//! `snapshots/` beside the cases (the same files the wasmtime and Node runs compare against).
//! Each output must also pass the stream validator, and every chunking of the upstream bytes
//! must give the same bytes.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods,
    reason = "test code reads fixture files and fails with the case's name"
)]

use std::path::{Path, PathBuf};

use bridge_core::anthropic::stream::Validator;
use bridge_core::api::{
    ConvertedRequest, Dialect, Finished, StreamEnd, StreamOptions, Translator, fold_sse, prepare,
};

const SEED: u64 = 42;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn cases(dir: &Path, at_least: usize) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("request.json").exists())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= at_least,
        "golden fixtures missing under {}",
        dir.display()
    );
    cases
}

fn prepared(case: &Path, dialect: Dialect) -> ConvertedRequest {
    let request = std::fs::read(case.join("request.json")).unwrap();
    let options = std::fs::read_to_string(case.join("options.json")).unwrap_or_default();
    prepare(dialect, &request, &options).unwrap()
}

fn run(case: &Path, dialect: Dialect, chunk_size: usize, stream: bool) -> (String, Finished) {
    let converted = prepared(case, dialect);
    let upstream = std::fs::read(case.join("upstream.sse")).unwrap();
    let mut translator = Translator::new(StreamOptions {
        stream,
        model: converted.client_model,
        input_tokens_estimate: converted.input_tokens_estimate,
        id_seed: SEED,
        dialect,
        tools: Vec::new(),
    });
    let mut out = String::new();
    for piece in upstream.chunks(chunk_size.max(1)) {
        out.push_str(&translator.feed(piece));
    }
    let finished = translator.finish(&StreamEnd::default());
    (out, finished)
}

#[test]
fn golden_fixtures() {
    check_cases(&fixtures_dir(), Dialect::OpenaiChat, 10);
}

#[test]
fn anthropic_pass_through_golden_fixtures() {
    check_cases(&fixtures_dir().join("anthropic"), Dialect::Anthropic, 5);
}

fn check_cases(dir: &Path, dialect: Dialect, at_least: usize) {
    let settings = {
        let mut s = insta::Settings::clone_current();
        s.set_snapshot_path(dir.join("snapshots"));
        s.set_prepend_module_to_snapshot(false);
        s.set_omit_expression(true);
        s
    };
    settings.bind(|| {
        for case in cases(dir, at_least) {
            let name = case.file_name().unwrap().to_string_lossy().into_owned();
            let converted = prepared(&case, dialect);
            let body: serde_json::Value = serde_json::from_str(&converted.body).unwrap();
            let request_view = serde_json::json!({
                "upstream_model": converted.upstream_model,
                "client_model": converted.client_model,
                "client_stream": converted.client_stream,
                "input_tokens_estimate": converted.input_tokens_estimate,
                "warnings": converted.warnings,
                "body": body,
            });
            insta::assert_snapshot!(
                format!("{name}.request"),
                serde_json::to_string_pretty(&request_view).unwrap()
            );

            let (head, finished) = run(&case, dialect, usize::MAX, true);
            let sse = format!("{head}{}", finished.body);
            Validator::check_sse(sse.as_bytes())
                .unwrap_or_else(|v| panic!("{name}: invalid stream: {v}\n{sse}"));
            insta::assert_snapshot!(format!("{name}.events"), sse);
            for size in [1, 2, 3, 7, 64] {
                let (h, f) = run(&case, dialect, size, true);
                assert_eq!(
                    format!("{h}{}", f.body),
                    sse,
                    "{name}: chunk size {size} changed the output"
                );
            }

            let (nothing, folded) = run(&case, dialect, 5, false);
            assert!(nothing.is_empty(), "{name}: folding mode wrote SSE");
            assert_eq!(
                fold_sse(sse.as_bytes()),
                folded,
                "{name}: folding the streamed SSE differs from the non-streaming answer"
            );
            let shown = serde_json::to_string_pretty(
                &serde_json::from_str::<serde_json::Value>(&folded.body).unwrap(),
            )
            .unwrap();
            insta::assert_snapshot!(
                format!("{name}.message"),
                format!("status: {}\n{shown}", folded.status)
            );
        }
    });
}
