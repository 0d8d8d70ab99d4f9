//! Golden fixtures of the raw-text (Fabstir) path: every case in `tests/fixtures/fabstir/<case>/`
//! — an optional `request.json` (+ `options.json`) rendered to ChatML, the model's `tokens.json`,
//! and how the reply ended (`end.json`, a `StreamEnd`, or `fail.json`, `{kind, message}`) — checked
//! against insta snapshots in `tests/fixtures/fabstir/snapshots/`. Every output must pass the stream
//! validator, and every way of cutting the model's text must give a valid stream that folds into
//! the same message.
//!
//! The reply goes through the one facade translator ([`Translator`] with [`Dialect::Chatml`]), as
//! bytes: every split point, inside a UTF-8 character too, and byte by byte.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code reads fixture files"
)]

use std::path::{Path, PathBuf};

use bridge_core::anthropic::stream::Validator;
use bridge_core::api::{
    ChatmlOptions, ChatmlPrompt, Dialect, ErrorKind, Finished, StreamEnd, StreamOptions, ToolHint,
    Translator, fold_sse, prepare,
};

const SEED: u64 = 42;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/fabstir")
}

fn read_json<T: serde::de::DeserializeOwned>(case: &Path, file: &str) -> Option<T> {
    std::fs::read(case.join(file))
        .ok()
        .map(|b| serde_json::from_slice(&b).unwrap())
}

struct Case {
    model: String,
    estimate: u32,
    tools: Vec<ToolHint>,
    end: StreamEnd,
    fail: Option<(ErrorKind, String)>,
}

/// Feeds `pieces` and ends the reply as the case says.
fn run(case: &Case, pieces: &[&[u8]], stream: bool) -> Finished {
    let mut t = Translator::new(StreamOptions {
        stream,
        model: case.model.clone(),
        input_tokens_estimate: case.estimate,
        id_seed: SEED,
        dialect: Dialect::Chatml,
        tools: case.tools.clone(),
        ..StreamOptions::default()
    });
    let mut out = String::new();
    for piece in pieces {
        out.push_str(&t.feed(piece));
    }
    if let Some((kind, message)) = &case.fail {
        out.push_str(&t.fail(*kind, message));
    }
    let finished = t.finish(&case.end);
    Finished {
        status: finished.status,
        body: format!("{out}{}", finished.body),
    }
}

#[test]
fn fabstir_golden_fixtures() {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(fixtures_dir().join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("tokens.json").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 6, "fabstir fixtures missing");
    settings.bind(|| {
        for dir in cases {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let tokens: Vec<String> = read_json(&dir, "tokens.json").unwrap();
            let options: ChatmlOptions = read_json(&dir, "options.json").unwrap_or_default();
            let mut case = Case {
                model: String::from("claude-fabstir"),
                estimate: 0,
                tools: Vec::new(),
                end: read_json(&dir, "end.json").unwrap_or_default(),
                fail: read_json::<serde_json::Value>(&dir, "fail.json").map(|f| {
                    (
                        ErrorKind::from_type_str(f["kind"].as_str().unwrap()),
                        f["message"].as_str().unwrap().to_owned(),
                    )
                }),
            };
            if let Ok(request) = std::fs::read(dir.join("request.json")) {
                let options = serde_json::to_string(&options).unwrap();
                let prepared = prepare(Dialect::Chatml, &request, &options).unwrap();
                let prompt: ChatmlPrompt = serde_json::from_str(&prepared.body).unwrap();
                assert!(prompt.prompt.ends_with("<|im_start|>assistant\n"), "{name}");
                let view = serde_json::json!({
                    "upstream_model": prompt.upstream_model,
                    "client_model": prompt.client_model,
                    "client_stream": prompt.client_stream,
                    "max_tokens": prompt.max_tokens,
                    "temperature": prompt.temperature,
                    "input_tokens_estimate": prompt.input_tokens_estimate,
                    "images": prompt.images,
                    "tools": prompt.tools,
                    "warnings": prompt.warnings,
                });
                insta::assert_snapshot!(
                    format!("{name}.prompt"),
                    format!(
                        "{}\n--- prompt\n{}",
                        serde_json::to_string_pretty(&view).unwrap(),
                        prompt.prompt
                    )
                );
                case.model = prompt.client_model;
                case.estimate = prompt.input_tokens_estimate;
                case.tools = prompt.tools;
            }

            if let Ok(init) = std::fs::read_to_string(dir.join("session_init.json")) {
                let plain = bridge_core::api::fabstir_session_init(init.trim_end())
                    .unwrap_or_else(|e| format!("error {}: {e}", e.kind().as_str()));
                insta::assert_snapshot!(format!("{name}.session_init"), plain);
            }

            let pieces: Vec<&[u8]> = tokens.iter().map(String::as_bytes).collect();
            let streamed = run(&case, &pieces, true);
            Validator::check_sse(streamed.body.as_bytes())
                .unwrap_or_else(|v| panic!("{name}: invalid stream: {v}\n{}", streamed.body));
            insta::assert_snapshot!(format!("{name}.events"), &streamed.body);

            let folded = run(&case, &pieces, false);
            assert_eq!(
                fold_sse(streamed.body.as_bytes()),
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

            // However the model's text is cut (tags split anywhere, UTF-8 characters too), the
            // stream is valid and folds into the same message: the deltas differ, never the
            // content.
            let whole: String = tokens.concat();
            let whole = whole.as_bytes();
            let same = |pieces: &[&[u8]], how: &str| {
                let split = run(&case, pieces, true);
                Validator::check_sse(split.body.as_bytes())
                    .unwrap_or_else(|v| panic!("{name}: {how}: invalid stream: {v}"));
                assert_eq!(fold_sse(split.body.as_bytes()), folded, "{name}: {how}");
            };
            if whole.len() < 4096 {
                for at in 1..whole.len() {
                    same(
                        &[&whole[..at], &whole[at..]],
                        &format!("split at byte {at}"),
                    );
                }
            }
            let by_byte: Vec<&[u8]> = whole.chunks(1).collect();
            same(&by_byte, "byte by byte");
        }
    });
}
