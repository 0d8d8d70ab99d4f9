//! Golden fixtures of the OpenAI Responses path: every case in `tests/fixtures/responses/<case>/`
//! (`request.json`, optional `options.json`, the upstream's `upstream.sse`) through the native
//! core, checked against insta snapshots in `tests/fixtures/responses/snapshots/`: the converted
//! request, the Anthropic SSE and the message a non-streaming client gets. Each output must pass
//! the stream validator, and every chunking of the upstream bytes must give the same bytes.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code reads fixture files"
)]

use std::path::{Path, PathBuf};

use bridge_core::anthropic::stream::Validator;
use bridge_core::api::{Dialect, StreamEnd, StreamOptions, Translator, fold_sse};
use bridge_core::translate::responses_request::{ConvertedResponses, ResponsesOptions, convert};
use serde_json::{Value, json};

const SEED: u64 = 42;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/responses")
}

fn cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("request.json").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "Responses fixtures missing");
    cases
}

fn converted(case: &Path) -> ConvertedResponses {
    let request = std::fs::read(case.join("request.json")).unwrap();
    let options: ResponsesOptions = std::fs::read(case.join("options.json"))
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or_default();
    convert(&request, &options).unwrap()
}

/// The Anthropic SSE for the case's upstream bytes fed in pieces of `chunk_size`.
fn run(case: &Path, chunk_size: usize) -> String {
    let converted = converted(case);
    let upstream = std::fs::read(case.join("upstream.sse")).unwrap();
    let mut translator = Translator::new(StreamOptions {
        stream: true,
        model: converted.client_model,
        input_tokens_estimate: converted.input_tokens_estimate,
        id_seed: SEED,
        dialect: Dialect::OpenaiResponses,
        tool_names: converted.tool_names,
        ..StreamOptions::default()
    });
    let mut sse = String::new();
    for piece in upstream.chunks(chunk_size.max(1)) {
        sse.push_str(&translator.feed(piece));
    }
    sse.push_str(&translator.finish(&StreamEnd::default()).body);
    sse
}

#[test]
fn responses_golden_fixtures() {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(fixtures_dir().join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| {
        for case in cases() {
            let name = case.file_name().unwrap().to_string_lossy().into_owned();
            let converted = converted(&case);
            let body: Value = serde_json::from_str(&converted.body).unwrap();
            let mut request_view = json!({
                "upstream_model": converted.upstream_model,
                "client_model": converted.client_model,
                "client_stream": converted.client_stream,
                "input_tokens_estimate": converted.input_tokens_estimate,
                "warnings": converted.warnings,
            });
            if !converted.tool_names.is_empty() {
                request_view["tool_names"] = serde_json::to_value(&converted.tool_names).unwrap();
            }
            request_view["body"] = body;
            insta::assert_snapshot!(
                format!("{name}.request"),
                serde_json::to_string_pretty(&request_view).unwrap()
            );

            let sse = run(&case, usize::MAX);
            Validator::check_sse(sse.as_bytes())
                .unwrap_or_else(|v| panic!("{name}: invalid stream: {v}\n{sse}"));
            insta::assert_snapshot!(format!("{name}.events"), sse);
            for size in [1, 2, 3, 7, 64] {
                assert_eq!(
                    run(&case, size),
                    sse,
                    "{name}: chunk size {size} changed the output"
                );
            }

            let folded = fold_sse(sse.as_bytes());
            let shown =
                serde_json::to_string_pretty(&serde_json::from_str::<Value>(&folded.body).unwrap())
                    .unwrap();
            insta::assert_snapshot!(
                format!("{name}.message"),
                format!("status: {}\n{shown}", folded.status)
            );
        }
    });
}

/// The thinking block of one turn, sent back by the client in the next, becomes the reasoning
/// item the upstream gave out, with its `encrypted_content` unchanged.
#[test]
fn reasoning_round_trips_through_the_thinking_signature() {
    let case = fixtures_dir().join("reasoning_then_function_call");
    let folded: Value = serde_json::from_str(&fold_sse(run(&case, 5).as_bytes()).body).unwrap();
    let upstream = std::fs::read_to_string(case.join("upstream.sse")).unwrap();
    let encrypted = upstream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find_map(|e| e["item"]["encrypted_content"].as_str().map(str::to_owned))
        .unwrap();
    let request = json!({
        "model": "claude-opus-4-8",
        "max_tokens": 1000,
        "thinking": {"type": "adaptive"},
        "messages": [
            {"role": "user", "content": "list the files here"},
            {"role": "assistant", "content": folded["content"]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": folded["content"][1]["id"], "content": "a.txt"}
            ]}
        ]
    });
    let out = convert(request.to_string().as_bytes(), &ResponsesOptions::default()).unwrap();
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let body: Value = serde_json::from_str(&out.body).unwrap();
    let input = body["input"].as_array().unwrap();
    let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(input[1]["encrypted_content"], json!(encrypted));
    assert_eq!(
        input[1]["summary"][0]["text"],
        folded["content"][0]["thinking"]
    );
    assert_eq!(input[2]["call_id"], input[3]["call_id"]);
    assert_eq!(input[2]["arguments"], json!("{\"command\":\"ls -la\"}"));
}
