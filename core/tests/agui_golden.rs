//! Golden fixtures of the Claude Code → AG-UI path: every case in `tests/fixtures/agui/<case>/`
//! is a `transcript.ndjson` (Claude Code's stdout in stream-json), run through `ClaudeToAgui`
//! (thread `thread-1`, run `run-1`, seed 7) and checked against an insta snapshot of the SSE
//! bytes in `core/tests/snapshots/`. Every output must pass the AG-UI `Verifier`, end its run,
//! contain no `THINKING_*` event, and come out the same whatever the chunking of the stdout bytes.
//! The `RunAgentInput` → stdin direction has golden cases too.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code reads fixture files"
)]

use std::path::{Path, PathBuf};

use bridge_core::agui::claude::{LineBuffer, parse_line};
use bridge_core::agui::events::{AguiEvent, encode_sse};
use bridge_core::agui::input::{
    InputOptions, RunAgentInput, new_messages, to_claude_user_message, tool_results,
};
use bridge_core::agui::translate::ClaudeToAgui;
use bridge_core::agui::verify::Verifier;

const THREAD: &str = "thread-1";
const RUN: &str = "run-1";
const SEED: u64 = 7;

/// The cases the fixtures must at least cover.
const REQUIRED_CASES: [&str; 5] = [
    "error_result",
    "text",
    "thinking",
    "tool_use_with_approval",
    "unstreamed",
];

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/agui")
}

fn cases() -> Vec<(String, Vec<u8>)> {
    let mut cases: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("transcript.ndjson").is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(p.join("transcript.ndjson")).unwrap())
        })
        .collect();
    cases.sort();
    for required in REQUIRED_CASES {
        assert!(
            cases.iter().any(|(name, _)| name == required),
            "fixture case {required} missing under {}",
            fixtures_dir().display()
        );
    }
    cases
}

/// The transcript's bytes, cut into `chunk_size` pieces, through a whole run.
fn run(transcript: &[u8], chunk_size: usize) -> Vec<AguiEvent> {
    let mut lines = LineBuffer::new();
    let mut translator = ClaudeToAgui::new(THREAD, RUN, SEED);
    let mut events = translator.start();
    let mut feed = |line: String, events: &mut Vec<AguiEvent>| {
        let message = parse_line(&line)
            .map_err(|e| format!("{e}: {line}"))
            .unwrap();
        events.extend(translator.feed(&message));
    };
    for chunk in transcript.chunks(chunk_size) {
        for line in lines.push(chunk) {
            feed(line, &mut events);
        }
    }
    if let Some(line) = lines.finish() {
        feed(line, &mut events);
    }
    events.extend(translator.finish());
    events
}

#[test]
fn golden_transcripts() {
    for (name, transcript) in cases() {
        let events = run(&transcript, transcript.len().max(1));
        let mut verifier = Verifier::new();
        for (i, event) in events.iter().enumerate() {
            verifier
                .push(event)
                .unwrap_or_else(|v| panic!("{name}: event {i} rejected: {v}"));
        }
        assert!(verifier.run_ended(), "{name}: the run never ended");
        for event in &events {
            assert!(
                !event.type_name().starts_with("THINKING_"),
                "{name}: emitted {}",
                event.type_name()
            );
        }
        let sse: String = events.iter().map(encode_sse).collect();
        assert!(!sse.contains("\"type\":\"THINKING_"), "{name}");
        insta::assert_snapshot!(name.clone(), sse);
    }
}

#[test]
fn every_chunking_gives_the_same_events() {
    for (name, transcript) in cases() {
        let whole = run(&transcript, transcript.len().max(1));
        for size in 1..=7 {
            assert_eq!(run(&transcript, size), whole, "{name}, chunks of {size}");
        }
    }
}

#[test]
fn the_stream_of_a_text_case_is_not_repeated_by_its_assistant_message() {
    let (_, transcript) = cases().into_iter().find(|(n, _)| n == "text").unwrap();
    let events = run(&transcript, transcript.len());
    let starts = events
        .iter()
        .filter(|e| matches!(e, AguiEvent::TextMessageStart { .. }))
        .count();
    assert_eq!(starts, 1);
}

fn input(json: serde_json::Value) -> RunAgentInput {
    serde_json::from_value(json).unwrap()
}

fn pretty(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap()
}

#[test]
fn input_first_turn_with_context_tools_and_an_image() {
    let input = input(serde_json::json!({
        "threadId": "thread-1",
        "runId": "run-1",
        "state": {},
        "messages": [
            {"id": "sys-1", "role": "system", "content": "Answer in one sentence."},
            {"id": "u-1", "role": "user", "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image", "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"}}
            ]}
        ],
        "tools": [{
            "name": "setTheme",
            "description": "Switch the app between light and dark mode.",
            "parameters": {"type": "object", "properties": {"mode": {"type": "string", "enum": ["light", "dark"]}}, "required": ["mode"]}
        }],
        "context": [
            {"description": "Current page", "value": "/settings"},
            {"description": "User name", "value": "Ada"}
        ],
        "forwardedProps": {"someFutureField": true},
        "aFieldFromTheFuture": 1
    }));
    let line = to_claude_user_message(&input, &InputOptions::default()).unwrap();
    insta::assert_snapshot!("input_first_turn", pretty(&line));
}

#[test]
fn input_frontend_tool_result_is_routed_not_sent() {
    let input = input(serde_json::json!({
        "threadId": "thread-1",
        "runId": "run-2",
        "state": null,
        "messages": [
            {"id": "u-1", "role": "user", "content": "Make it dark and tell me the time."},
            {"id": "a-1", "role": "assistant", "content": "On it.", "toolCalls": [
                {"id": "toolu_theme", "type": "function", "function": {"name": "mcp__frontend__setTheme", "arguments": "{\"mode\":\"dark\"}"}},
                {"id": "toolu_time", "type": "function", "function": {"name": "mcp__frontend__now", "arguments": "{}"}}
            ]},
            {"id": "t-1", "role": "tool", "toolCallId": "toolu_theme", "content": "Theme set to dark."},
            {"id": "t-2", "role": "tool", "toolCallId": "toolu_time", "content": "", "error": "The clock is unavailable."},
            {"id": "x-1", "role": "activity", "activityType": "progress", "content": {"pct": 100}},
            {"id": "u-2", "role": "user", "content": "Thanks!"}
        ],
        "tools": [],
        "context": [{"description": "Theme", "value": "dark"}],
        "forwardedProps": {}
    }));
    let ids: Vec<&str> = new_messages(&input).iter().map(|m| m.id()).collect();
    assert_eq!(ids, ["t-1", "t-2", "x-1", "u-2"]);
    let results = tool_results(&input);
    let options = InputOptions {
        mcp_server_name: "frontend".into(),
        exclude_tool_call_ids: vec!["toolu_theme".into()],
    };
    let line = to_claude_user_message(&input, &options).unwrap();
    insta::assert_snapshot!(
        "input_frontend_tool_result",
        format!("{}\n{}", pretty(&results), pretty(&line))
    );
}

#[test]
fn input_with_nothing_new_sends_nothing() {
    let input = input(serde_json::json!({
        "threadId": "thread-1",
        "runId": "run-3",
        "messages": [
            {"id": "u-1", "role": "user", "content": "Hi"},
            {"id": "a-1", "role": "assistant", "content": "Hello!"}
        ],
        "context": [{"description": "Current page", "value": "/"}]
    }));
    assert_eq!(
        to_claude_user_message(&input, &InputOptions::default()),
        None
    );
}
