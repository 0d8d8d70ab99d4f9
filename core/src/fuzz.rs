//! Fuzz targets: each takes arbitrary bytes and checks what must hold for every input.
//!
//! The cargo-fuzz crate (`core/fuzz`, `make fuzz`) drives them with libFuzzer; the smoke test
//! (`core/tests/fuzz_smoke.rs`, part of `make test`) runs each over the golden fixtures and a few
//! thousand deterministic mutations of them, so the targets keep building and every crash found
//! once stays fixed (crash inputs go to `tests/fixtures/fuzz/<target>/`).
//!
//! A target returns `Err` with what was violated; the drivers turn that into a crash.
//!
//! ```
//! use bridge_core::fuzz;
//! assert!(fuzz::chat_stream(b"\x07data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n").is_ok());
//! ```

use crate::anthropic::events::StreamEvent;
use crate::api::{self, ConvertOptions, Dialect, StreamOptions};
use crate::sse::decoder::SseDecoder;

/// A fuzz target: arbitrary bytes in, `Err` with what was violated.
pub type Target = fn(&[u8]) -> Result<(), String>;

/// Every fuzz target, by name (the cargo-fuzz binaries and the fixtures' folders use these).
pub const TARGETS: &[(&str, Target)] = &[
    ("sse_decoder", sse_decoder),
    ("chat_stream", chat_stream),
    ("responses_stream", responses_stream),
    ("token_stream", token_stream),
    ("request", request),
    ("agui_ndjson", agui_ndjson),
];

/// The first byte picks how the rest is cut into chunks (1–64 bytes, or whole).
fn split(data: &[u8]) -> (usize, &[u8]) {
    match data.split_first() {
        Some((&first, rest)) if first % 65 != 0 => (usize::from(first % 65), rest),
        Some((_, rest)) => (rest.len().max(1), rest),
        None => (1, data),
    }
}

/// SSE decoding does not depend on where the input is cut.
///
/// # Errors
/// The frames differ between a whole feed and a chunked one.
pub fn sse_decoder(data: &[u8]) -> Result<(), String> {
    let (chunk, input) = split(data);
    let mut whole = SseDecoder::new();
    let mut expected = whole.feed(input);
    expected.extend(whole.finish());
    let mut pieces = SseDecoder::new();
    let mut got = Vec::new();
    for piece in input.chunks(chunk) {
        got.extend(pieces.feed(piece));
    }
    got.extend(pieces.finish());
    if got == expected {
        Ok(())
    } else {
        Err(format!(
            "cut every {chunk} bytes: {got:?} != whole: {expected:?}"
        ))
    }
}

/// The events of an SSE text, checked by the stream validator, and ended.
fn validate_sse(sse: &str) -> Result<(), String> {
    let events = api::validate_sse(sse.as_bytes()).map_err(|v| format!("{v}: {sse}"))?;
    if !matches!(
        events.last(),
        Some(StreamEvent::MessageStop | StreamEvent::Error { .. })
    ) {
        return Err(format!(
            "the stream ends neither with message_stop nor error: {sse}"
        ));
    }
    Ok(())
}

fn upstream_stream(data: &[u8], dialect: Dialect) -> Result<(), String> {
    let (chunk, input) = split(data);
    let options = |stream| StreamOptions {
        stream,
        model: "claude-fuzz".into(),
        input_tokens_estimate: 10,
        id_seed: 1,
        dialect,
        ..StreamOptions::default()
    };
    let mut streaming = api::Translator::new(options(true));
    let mut sse = String::new();
    for piece in input.chunks(chunk) {
        sse.push_str(&streaming.feed(piece));
    }
    let finished = streaming.finish(&api::StreamEnd::default());
    sse.push_str(&finished.body);
    validate_sse(&sse)?;
    // Folding the same input must give a message or an error envelope with its status.
    let mut folding = api::Translator::new(options(false));
    for piece in input.chunks(chunk) {
        let _ = folding.feed(piece);
    }
    let folded = folding.finish(&api::StreamEnd::default());
    let body: serde_json::Value = serde_json::from_str(&folded.body)
        .map_err(|e| format!("the folded answer is not JSON ({e}): {}", folded.body))?;
    match (folded.status, body["type"].as_str()) {
        (200, Some("message")) => Ok(()),
        (status, Some("error")) if status >= 400 => Ok(()),
        (status, kind) => Err(format!(
            "folded status {status} with type {kind:?}: {}",
            folded.body
        )),
    }
}

/// An OpenAI Chat stream, cut anywhere, becomes a well-formed Anthropic stream; folded, a
/// message or an error envelope.
///
/// # Errors
/// The output breaks the stream rules.
pub fn chat_stream(data: &[u8]) -> Result<(), String> {
    upstream_stream(data, Dialect::OpenaiChat)
}

/// The same for an OpenAI Responses stream.
///
/// # Errors
/// The output breaks the stream rules.
pub fn responses_stream(data: &[u8]) -> Result<(), String> {
    upstream_stream(data, Dialect::OpenaiResponses)
}

/// A raw-text model's reply (Fabstir), tool-call text included and cut anywhere (inside a
/// UTF-8 character too), becomes a well-formed stream; folded, a message or an error envelope.
///
/// # Errors
/// The output breaks the stream rules.
pub fn token_stream(data: &[u8]) -> Result<(), String> {
    upstream_stream(data, Dialect::Chatml)
}

/// Any body given as a client request is converted or refused with a request error, for every
/// dialect; never a panic.
///
/// # Errors
/// Never: a panic is the failure this target looks for.
pub fn request(data: &[u8]) -> Result<(), String> {
    let _ = api::convert_request(data, &ConvertOptions::default());
    for dialect in Dialect::ALL {
        let _ = api::prepare(dialect, data, "{}");
    }
    let _ = api::count_tokens(data);
    Ok(())
}

/// Claude Code's stream-json lines (what the AG-UI front reads from its child) are parsed or
/// refused line by line; never a panic.
///
/// # Errors
/// Never: a panic is the failure this target looks for.
pub fn agui_ndjson(data: &[u8]) -> Result<(), String> {
    for line in String::from_utf8_lossy(data).lines() {
        let _ = crate::agui::claude::parse_line(line);
    }
    Ok(())
}
