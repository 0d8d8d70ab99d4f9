//! The benchmarks' upstream answers. The large stream: a deterministic OpenAI Chat Completions
//! stream shaped like a long agentic answer (reasoning, text, parallel tool calls with many
//! argument fragments, a usage chunk), in the exact chunk format real servers send; `bench-core`
//! writes it to a file so the native, wasmtime and Node measurements translate the very same
//! bytes. The small stream ([`small_stream_parts`]): what `make bench-proxy`'s upstream answers
//! and what `make bench` feeds a chunk at a time.

use std::fmt::Write as _;

use bytes::Bytes;

use crate::chunks::ChatStream;

/// The Anthropic request the stream answers.
pub const REQUEST: &str = r#"{"model":"claude-sonnet-4-6","max_tokens":32000,"stream":true,"tools":[{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}],"messages":[{"role":"user","content":"Refactor the project and run the tests."}]}"#;

const WORDS: [&str; 16] = [
    "the ",
    "bridge ",
    "translates ",
    "every ",
    "stream ",
    "chunk ",
    "into ",
    "Anthropic ",
    "events, ",
    "keeping ",
    "tool ",
    "calls ",
    "and ",
    "reasoning ",
    "intact. ",
    "\u{e9}t\u{e9} ",
];

fn chunk(sse: &mut String, delta: &serde_json::Value, finish: Option<&str>) {
    let chunk = serde_json::json!({
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "bench-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
    });
    let _ = write!(sse, "data: {chunk}\n\n");
}

/// About `target_bytes` of upstream SSE (at least one round of every kind of delta).
#[must_use]
pub fn large_stream(target_bytes: usize) -> String {
    let mut sse = String::with_capacity(target_bytes + 4096);
    chunk(
        &mut sse,
        &serde_json::json!({"role": "assistant", "content": ""}),
        None,
    );
    let mut i = 0usize;
    while sse.len() < target_bytes / 5 {
        let piece = WORDS[i % WORDS.len()];
        chunk(
            &mut sse,
            &serde_json::json!({"reasoning_content": piece}),
            None,
        );
        i += 1;
    }
    while sse.len() < target_bytes * 3 / 5 {
        let piece = WORDS[(i * 7) % WORDS.len()];
        chunk(&mut sse, &serde_json::json!({"content": piece}), None);
        i += 1;
    }
    chunk(
        &mut sse,
        &serde_json::json!({"tool_calls": [
            {"index": 0, "id": "call_a", "type": "function", "function": {"name": "Bash", "arguments": ""}},
            {"index": 1, "id": "call_b", "type": "function", "function": {"name": "Bash", "arguments": ""}},
        ]}),
        None,
    );
    // Two parallel calls whose argument fragments interleave, as some servers send them.
    for call in 0..2 {
        let open = serde_json::json!({"tool_calls": [{"index": call, "function": {"arguments": "{\"command\": \"echo "}}]});
        chunk(&mut sse, &open, None);
    }
    let mut call = 0;
    while sse.len() < target_bytes {
        let piece = WORDS[i % WORDS.len()];
        let args =
            serde_json::json!({"tool_calls": [{"index": call, "function": {"arguments": piece}}]});
        chunk(&mut sse, &args, None);
        call = 1 - call;
        i += 1;
    }
    for call in 0..2 {
        let close =
            serde_json::json!({"tool_calls": [{"index": call, "function": {"arguments": "\"}"}}]});
        chunk(&mut sse, &close, None);
    }
    chunk(&mut sse, &serde_json::json!({}), Some("tool_calls"));
    sse.push_str("data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":5000,\"completion_tokens\":90000,\"total_tokens\":95000}}\n\n");
    sse.push_str("data: [DONE]\n\n");
    sse
}

/// The small streamed answer: a role chunk, 50 text chunks of four characters, the finish chunk,
/// the usage chunk and `[DONE]`, each its own piece, as a server generating token by token
/// writes them.
#[must_use]
pub fn small_stream_parts() -> Vec<Bytes> {
    let mut script = ChatStream::new().role();
    for i in 0..50 {
        script = script.text(&format!("w{i:02} "));
    }
    script.finish("stop").usage(40, 50, 0).sse_parts()
}
