//! Golden fixtures: every case in `tests/fixtures/<case>/` through the native core, checked
//! against insta snapshots in `tests/fixtures/snapshots/` (the same files the wasmtime and Node
//! runs compare against). Each output must also pass the stream validator, and every chunking of
//! the upstream bytes must give the same bytes.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code reads fixture files"
)]

use std::path::{Path, PathBuf};

use bridge_core::anthropic::stream::Validator;
use bridge_core::api::{
    ChatStream, ConvertOptions, Finished, StreamOptions, convert_request, fold_sse,
};

const SEED: u64 = 42;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("request.json").exists())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 10,
        "golden fixtures missing under {}",
        fixtures_dir().display()
    );
    cases
}

fn run(case: &Path, chunk_size: usize, stream: bool) -> (String, Finished) {
    let request = std::fs::read(case.join("request.json")).unwrap();
    let options: ConvertOptions = std::fs::read(case.join("options.json"))
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or_default();
    let upstream = std::fs::read(case.join("upstream.sse")).unwrap();
    let converted = convert_request(&request, &options).unwrap();
    let mut translator = ChatStream::new(StreamOptions {
        stream,
        model: converted.client_model,
        input_tokens_estimate: converted.input_tokens_estimate,
        id_seed: SEED,
        dialect: Default::default(),
    });
    let mut out = String::new();
    for piece in upstream.chunks(chunk_size.max(1)) {
        out.push_str(&translator.feed(piece));
    }
    let finished = translator.finish();
    (out, finished)
}

#[test]
fn golden_fixtures() {
    let settings = {
        let mut s = insta::Settings::clone_current();
        s.set_snapshot_path(fixtures_dir().join("snapshots"));
        s.set_prepend_module_to_snapshot(false);
        s.set_omit_expression(true);
        s
    };
    settings.bind(|| {
        for case in cases() {
            let name = case.file_name().unwrap().to_string_lossy().into_owned();
            let request = std::fs::read(case.join("request.json")).unwrap();
            let options: ConvertOptions = std::fs::read(case.join("options.json"))
                .map(|b| serde_json::from_slice(&b).unwrap())
                .unwrap_or_default();
            let converted = convert_request(&request, &options).unwrap();
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

            let (head, finished) = run(&case, usize::MAX, true);
            let sse = format!("{head}{}", finished.body);
            Validator::check_sse(sse.as_bytes())
                .unwrap_or_else(|v| panic!("{name}: invalid stream: {v}\n{sse}"));
            insta::assert_snapshot!(format!("{name}.events"), sse);
            for size in [1, 2, 3, 7, 64] {
                let (h, f) = run(&case, size, true);
                assert_eq!(
                    format!("{h}{}", f.body),
                    sse,
                    "{name}: chunk size {size} changed the output"
                );
            }

            let (nothing, folded) = run(&case, 5, false);
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
