//! Golden fixtures: every case in `tests/fixtures/<case>/` (OpenAI Chat upstreams) and in
//! `tests/fixtures/anthropic/<case>/` (the Anthropic pass-through) through the native core's
//! facade (`prepare` and the `Translator` of the dialect), checked against insta snapshots in
//! `snapshots/` beside the cases (the same files the wasmtime and Node runs compare against).
//! Each output must also pass the stream validator, and every chunking of the upstream bytes
//! must give the same bytes. The OpenAI fronts' cases (`tests/fixtures/front_chat/`,
//! `tests/fixtures/front_responses/`: an OpenAI client's request and an Anthropic stream) go the
//! same way through the front dialects, checked by the OpenAI stream validators.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods,
    reason = "test code reads fixture files and fails with the case's name"
)]

use std::path::{Path, PathBuf};

use bridge_core::anthropic::stream::Validator;
use bridge_core::api::{
    ConvertedRequest, Dialect, Finished, FrontOptions, StreamEnd, StreamOptions, Translator,
    fold_sse, prepare,
};
use bridge_core::front::chat_validate::check_chat_sse;
use bridge_core::front::responses_validate::check_responses_sse;

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

/// Pins the prepared request (`<case>.request`); returns its body as JSON.
fn check_request_snapshot(name: &str, converted: &ConvertedRequest) -> serde_json::Value {
    let body: serde_json::Value = serde_json::from_str(&converted.body).unwrap();
    let mut request_view = serde_json::json!({
        "upstream_model": converted.upstream_model,
        "client_model": converted.client_model,
        "client_stream": converted.client_stream,
        "input_tokens_estimate": converted.input_tokens_estimate,
        "warnings": converted.warnings,
    });
    if !converted.tool_names.is_empty() {
        request_view["tool_names"] = serde_json::to_value(&converted.tool_names).unwrap();
    }
    request_view["body"] = body.clone();
    insta::assert_snapshot!(
        format!("{name}.request"),
        serde_json::to_string_pretty(&request_view).unwrap()
    );
    body
}

fn run(case: &Path, dialect: Dialect, chunk_size: usize, stream: bool) -> (String, Finished) {
    let converted = prepared(case, dialect);
    let upstream = std::fs::read(case.join("upstream.sse")).unwrap();
    let options = StreamOptions {
        stream,
        model: converted.client_model,
        input_tokens_estimate: converted.input_tokens_estimate,
        id_seed: SEED,
        dialect,
        tool_names: converted.tool_names,
        ..StreamOptions::default()
    };
    feed_all(&options, &upstream, chunk_size)
}

/// Everything a translator with `options` writes for `upstream` fed in `chunk_size` pieces.
fn feed_all(options: &StreamOptions, upstream: &[u8], chunk_size: usize) -> (String, Finished) {
    let mut translator = Translator::new(options.clone());
    let mut out = String::new();
    for piece in upstream.chunks(chunk_size.max(1)) {
        out.push_str(&translator.feed(piece));
    }
    let finished = translator.finish(&StreamEnd::default());
    (out, finished)
}

/// Insta settings that keep the snapshots beside the cases in `dir`.
fn snapshot_settings(dir: &Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(dir.join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s
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
    snapshot_settings(dir).bind(|| {
        for case in cases(dir, at_least) {
            let name = case.file_name().unwrap().to_string_lossy().into_owned();
            let converted = prepared(&case, dialect);
            check_request_snapshot(&name, &converted);

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

/// The `created` time the golden runs give a front's answer (the host gives the clock's).
const CREATED: u64 = 1_700_000_000;

/// The translator options of a front case: the `answer` its `prepare` returned, with the time.
fn front_options(
    dialect: Dialect,
    prepared: &serde_json::Value,
    model: &str,
    stream: bool,
) -> StreamOptions {
    let mut front: FrontOptions = serde_json::from_value(prepared["answer"].clone()).unwrap();
    front.created = CREATED;
    StreamOptions {
        stream,
        model: model.to_owned(),
        id_seed: SEED,
        dialect,
        front,
        ..StreamOptions::default()
    }
}

#[test]
fn openai_chat_front_golden_fixtures() {
    check_front_cases(&fixtures_dir().join("front_chat"), Dialect::FrontOpenaiChat);
}

#[test]
fn openai_responses_front_golden_fixtures() {
    check_front_cases(
        &fixtures_dir().join("front_responses"),
        Dialect::FrontOpenaiResponses,
    );
}

/// The OpenAI fronts: an OpenAI client's request → the Anthropic request (or the refusal), and
/// an Anthropic stream → the client's stream (valid by the OpenAI validators, the same bytes in
/// any chunking) and its folded object.
fn check_front_cases(dir: &Path, dialect: Dialect) {
    snapshot_settings(dir).bind(|| {
        for case in cases(dir, 8) {
            let name = case.file_name().unwrap().to_string_lossy().into_owned();
            let converted = prepared(&case, dialect);
            let body = check_request_snapshot(&name, &converted);
            let Ok(upstream) = std::fs::read(case.join("upstream.sse")) else {
                assert!(
                    body.get("refusal").is_some(),
                    "{name}: a case without an upstream is a refusal"
                );
                continue;
            };
            assert_eq!(
                body["request"]["stream"], true,
                "{name}: the upstream streams"
            );

            let options = front_options(dialect, &body, &converted.client_model, true);
            let (head, finished) = feed_all(&options, &upstream, usize::MAX);
            assert_eq!(finished.status, 200, "{name}");
            let sse = format!("{head}{}", finished.body);
            let events = match dialect {
                Dialect::FrontOpenaiChat => {
                    check_chat_sse(sse.as_bytes(), options.front.include_usage)
                }
                _ => check_responses_sse(sse.as_bytes()),
            }
            .unwrap_or_else(|v| panic!("{name}: invalid stream: {v}\n{sse}"));
            insta::assert_snapshot!(format!("{name}.events"), sse);
            for size in [1, 2, 3, 7, 64] {
                let (h, f) = feed_all(&options, &upstream, size);
                assert_eq!(
                    format!("{h}{}", f.body),
                    sse,
                    "{name}: chunk size {size} changed the output"
                );
            }

            let options = front_options(dialect, &body, &converted.client_model, false);
            let (nothing, folded) = feed_all(&options, &upstream, 5);
            assert!(nothing.is_empty(), "{name}: folding mode wrote SSE");
            let object: serde_json::Value = serde_json::from_str(&folded.body).unwrap();
            // A Responses stream's terminal event carries the response the fold gives.
            if dialect == Dialect::FrontOpenaiResponses && folded.status == 200 {
                let last = events.last().unwrap();
                assert_eq!(last["response"], object, "{name}: fold vs terminal event");
            }
            insta::assert_snapshot!(
                format!("{name}.object"),
                format!(
                    "status: {}\n{}",
                    folded.status,
                    serde_json::to_string_pretty(&object).unwrap()
                )
            );
        }
    });
}
