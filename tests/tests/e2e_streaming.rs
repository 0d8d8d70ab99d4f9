//! Streaming behaviour through the real bridge binary (raw HTTP client, scripted upstream), one test per
//! failure users hit with other proxies (shared/reference/pitfalls.md): no buffering, pings while the
//! upstream is silent, client disconnects cancel the upstream, odd tool-call chunking from real
//! providers, malformed arguments, other reasoning field names, finish reasons, concurrency.
//!
//! Needs `cargo build -p claude-bridge`.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail the test on purpose"
)]

use std::time::Duration;

use bridge_tests::bridge::{Bridge, BridgeOptions};
use bridge_tests::chunks::{
    CACHED_TOKENS, COMPLETION_TOKENS, ChatStream, PROMPT_TOKENS, text_stream,
};
use bridge_tests::http::{self, HttpResponse};
use bridge_tests::sse;
use bridge_tests::upstream::{ScriptedResponse, Upstream};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(20);

fn request(stream: bool) -> Value {
    json!({"model": "claude-sonnet-4-6", "max_tokens": 512, "stream": stream,
           "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
                     {"name": "get_time", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
           "messages": [{"role": "user", "content": "Weather and time in Paris?"}]})
}

fn ctx(r: &HttpResponse, upstream: &Upstream, bridge: &Bridge) -> String {
    format!(
        "status {} body:\n{}\nbody error: {:?}\n--- upstream:\n{}\n--- bridge log {}:\n{}",
        r.status,
        r.text(),
        r.body_error,
        upstream.dump(),
        bridge.log_path().display(),
        bridge.log()
    )
}

/// Stream `script` to a streaming client and to a non-streaming one; both must give the same, valid
/// message. Returns it.
async fn answer(name: &str, script: ScriptedResponse) -> Value {
    let upstream = Upstream::always(script).await.unwrap();
    let bridge = Bridge::start(&upstream.base_url(), name).await.unwrap();
    let r = http::post_messages(&bridge.base_url(), &request(true), T)
        .await
        .unwrap();
    let c = ctx(&r, &upstream, &bridge);
    assert_eq!(r.status, 200, "{c}");
    let events = sse::parse(&r.body);
    sse::validate(&events).unwrap_or_else(|e| panic!("malformed stream: {e}\n{c}"));
    let streamed = sse::accumulate(&events).unwrap_or_else(|e| panic!("{e}\n{c}"));
    let nr = http::post_messages(&bridge.base_url(), &request(false), T)
        .await
        .unwrap();
    let nc = ctx(&nr, &upstream, &bridge);
    assert_eq!(nr.status, 200, "{nc}");
    let created = nr.json().unwrap();
    assert_eq!(
        sse::comparable(&streamed),
        sse::comparable(&created),
        "stream vs non-stream\n{c}"
    );
    streamed
}

fn blocks(message: &Value) -> Vec<Value> {
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| match b["type"].as_str() {
            Some("tool_use") => json!({"tool_use": b["name"], "input": b["input"]}),
            Some("text") => json!({"text": b["text"]}),
            Some("thinking") => json!({"thinking": b["thinking"]}),
            _ => b.clone(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_is_streamed_as_it_arrives() {
    let script = ChatStream::new()
        .role()
        .text("first ")
        .pause(Duration::from_millis(1500))
        .text("second")
        .finish("stop")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let upstream = Upstream::always(script).await.unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "stream-text-timing")
        .await
        .unwrap();
    let r = http::post_messages(&bridge.base_url(), &request(true), T)
        .await
        .unwrap();
    let c = ctx(&r, &upstream, &bridge);
    sse::validate(&sse::parse(&r.body)).unwrap_or_else(|e| panic!("{e}\n{c}"));
    let first = r
        .arrival_of("first ")
        .unwrap_or_else(|| panic!("no first delta\n{c}"));
    assert!(r.total_time >= Duration::from_millis(1500), "{c}");
    assert!(
        first + Duration::from_millis(1000) < r.total_time,
        "the first text delta came at {first:?}, the stream ended at {:?}: the bridge buffers (pitfalls 13)\n{c}",
        r.total_time
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_arguments_are_streamed_as_they_arrive() {
    let script = ChatStream::new()
        .role()
        .tool_start(0, "call_slow", "get_weather")
        .tool_args(0, "{\"city\": \"Par")
        .pause(Duration::from_millis(1500))
        .tool_args(0, "is\"}")
        .finish("tool_calls")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let upstream = Upstream::always(script).await.unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "stream-args-timing")
        .await
        .unwrap();
    let r = http::post_messages(&bridge.base_url(), &request(true), T)
        .await
        .unwrap();
    let c = ctx(&r, &upstream, &bridge);
    sse::validate(&sse::parse(&r.body)).unwrap_or_else(|e| panic!("{e}\n{c}"));
    let start = r
        .arrival_of("\"tool_use\"")
        .unwrap_or_else(|| panic!("no tool_use block\n{c}"));
    assert!(
        start + Duration::from_millis(1000) < r.total_time,
        "the tool_use block started at {start:?}, the stream ended at {:?}: arguments held back (pitfalls 13)\n{c}",
        r.total_time
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_flow_while_the_upstream_is_silent() {
    let script = ChatStream::new()
        .role()
        .text("wait")
        .pause(Duration::from_millis(3500))
        .text("ed")
        .finish("stop")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let upstream = Upstream::always(script).await.unwrap();
    let opts = BridgeOptions {
        extra_args: vec!["--ping-interval".into(), "1".into()],
        ..BridgeOptions::default()
    };
    let bridge = Bridge::start_with(&upstream.base_url(), "stream-ping", opts)
        .await
        .unwrap();
    let r = http::post_messages(&bridge.base_url(), &request(true), T)
        .await
        .unwrap();
    let c = ctx(&r, &upstream, &bridge);
    let events = sse::parse(&r.body);
    sse::validate(&events).unwrap_or_else(|e| panic!("{e}\n{c}"));
    let pings = sse::names(&events).iter().filter(|n| *n == "ping").count();
    assert!(
        pings >= 2,
        "{pings} pings during 3.5 s of upstream silence with --ping-interval 1\n{c}"
    );
    assert_eq!(
        sse::accumulate(&events).unwrap()["content"][0]["text"],
        "waited",
        "{c}"
    );
}

/// Nothing follows the last event: an upstream that reports an error in the middle of a tool
/// call and then holds its connection open gets the client an `error` event and the end of the
/// stream at once — no `ping` after it, no waiting for the upstream to close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_follows_the_error_that_ends_a_stream() {
    let script = ChatStream::new()
        .role()
        .tool_start(0, "call_1", "Bash")
        .tool_args(0, "{\"command\":")
        .raw(serde_json::json!({"error": {"message": "the model crashed", "type": "server_error"}}))
        .pause(Duration::from_millis(3500))
        .raw_bytes(b": still here\n\n")
        .build();
    let upstream = Upstream::always(script).await.unwrap();
    let opts = BridgeOptions {
        extra_args: vec!["--ping-interval".into(), "1".into()],
        ..BridgeOptions::default()
    };
    let bridge = Bridge::start_with(&upstream.base_url(), "stream-error-end", opts)
        .await
        .unwrap();
    let r = http::post_messages(&bridge.base_url(), &request(true), T)
        .await
        .unwrap();
    let c = ctx(&r, &upstream, &bridge);
    let events = sse::parse(&r.body);
    // The validator refuses any event — a ping too — after `error`.
    sse::validate(&events).unwrap_or_else(|e| panic!("{e}\n{c}"));
    let error = sse::error_event(&events).unwrap_or_else(|| panic!("no error event\n{c}"));
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("the model crashed"),
        "{c}"
    );
    assert!(
        r.total_time < Duration::from_millis(3000),
        "the stream waited for the upstream after its error ({:?})\n{c}",
        r.total_time
    );
}

/// An SSE response of raw `parts`, one every `every` (a trickling upstream).
fn trickle(parts: impl IntoIterator<Item = bytes::Bytes>, every: Duration) -> ScriptedResponse {
    ScriptedResponse::Stream(bridge_tests::upstream::StreamResponse {
        status: 200,
        parts: parts.into_iter().collect(),
        delay: every,
        pauses: Vec::new(),
        holds: Vec::new(),
        end: bridge_tests::upstream::StreamEnd::Clean,
        headers: vec![("content-type".into(), "text/event-stream".into())],
    })
}

/// Issue 16 (item 6): pings and the idle timeout follow what the client received, not what the
/// upstream sent. An upstream that sends only `: PROCESSING` comments (as OpenRouter does while a
/// model is queued), or one SSE line a byte at a time, sends bytes every 250 ms that give the
/// client nothing: the client gets `ping` events every `--ping-interval` (1 s) and, after
/// `--idle-timeout` (4 s), a well-formed `timeout_error` event — long before the upstream ends
/// (30 s and 16 s). A non-streaming client gets a 504. (When upstream bytes reset the relay's
/// clocks, the client got no ping and no timeout: total silence until the upstream gave up.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_and_the_idle_timeout_follow_what_the_client_received() {
    let every = Duration::from_millis(250);
    let comments = trickle(
        std::iter::repeat_n(bytes::Bytes::from_static(b": PROCESSING\n\n"), 120),
        every,
    );
    let line = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n";
    let dribble = trickle(
        line.iter().map(|b| bytes::Bytes::copy_from_slice(&[*b])),
        every,
    );
    let upstream = Upstream::start(move |r| {
        if r.all_text().contains("dribble") {
            dribble.clone()
        } else {
            comments.clone()
        }
    })
    .await
    .unwrap();
    let opts = BridgeOptions::default().args(&["--ping-interval", "1", "--idle-timeout", "4"]);
    let bridge = Bridge::start_with(&upstream.base_url(), "stream-comment-only", opts)
        .await
        .unwrap();
    for (case, text) in [("comments", "comments"), ("a dribbled line", "dribble")] {
        let body = json!({"model": "claude-sonnet-4-6", "max_tokens": 64, "stream": true,
                          "messages": [{"role": "user", "content": text}]});
        let r = http::post_messages(&bridge.base_url(), &body, T)
            .await
            .unwrap_or_else(|e| panic!("{case}: {e}\n--- bridge log:\n{}", bridge.log()));
        let c = format!("{case}: {}", ctx(&r, &upstream, &bridge));
        assert_eq!(r.status, 200, "{c}");
        let events = sse::parse(&r.body);
        sse::validate(&events).unwrap_or_else(|e| panic!("{e}\n{c}"));
        let names = sse::names(&events);
        let pings = names.iter().filter(|n| *n == "ping").count();
        assert!(
            pings >= 2,
            "{pings} pings in 4 s of nothing for the client at --ping-interval 1\n{c}"
        );
        assert_eq!(
            names.iter().filter(|n| *n != "ping").collect::<Vec<_>>(),
            ["message_start", "error"],
            "{c}"
        );
        let error = sse::error_event(&events).unwrap_or_else(|| panic!("no error event\n{c}"));
        assert_eq!(error["error"]["type"], "timeout_error", "{c}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("--idle-timeout"),
            "{c}"
        );
    }
    let body = json!({"model": "claude-sonnet-4-6", "max_tokens": 64, "stream": false,
                      "messages": [{"role": "user", "content": "comments"}]});
    let r = http::post_messages(&bridge.base_url(), &body, T)
        .await
        .unwrap_or_else(|e| panic!("non-streaming: {e}\n--- bridge log:\n{}", bridge.log()));
    let c = ctx(&r, &upstream, &bridge);
    r.anthropic_error(&[504], "timeout_error")
        .unwrap_or_else(|e| panic!("{e}\n{c}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_cancels_the_upstream_stream() {
    let mut s = ChatStream::new().role().delay(Duration::from_millis(50));
    for i in 0..100 {
        s = s.text(&format!("chunk-{i} "));
    }
    let script = s
        .finish("stop")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let upstream = Upstream::always(script).await.unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "stream-cancel")
        .await
        .unwrap();
    let url = format!("{}/v1/messages", bridge.base_url());
    let body = request(true).to_string().into_bytes();
    let headers = [
        ("content-type", "application/json"),
        ("anthropic-version", "2023-06-01"),
        ("x-api-key", "sk-test"),
    ];
    let r = http::send_until("POST", &url, &headers, Some(body), T, Some("chunk-3 "))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", ctx(&r, &upstream, &bridge));
    // The upstream would need 5 s more; the bridge must hang up on it soon after the client left.
    let mut waited = Duration::ZERO;
    while upstream.cancelled_streams() == 0 && waited < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += Duration::from_millis(100);
    }
    assert_eq!(
        upstream.cancelled_streams(),
        1,
        "the upstream stream was not cancelled within 3 s of the client going away (completed: {})\n{}",
        upstream.completed_streams(),
        ctx(&r, &upstream, &bridge)
    );
    // The request that lost its client is on record all the same: its line, once.
    let mut waited = Duration::ZERO;
    while !bridge.log().contains("request done") && waited < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += Duration::from_millis(100);
    }
    let log = bridge.log();
    assert_eq!(log.matches("request done").count(), 1, "{log}");
    assert!(
        log.contains("client disconnected; upstream request cancelled"),
        "{log}"
    );
    // And the bridge still serves.
    let upstream_ok = Upstream::always(text_stream(&["ok"])).await.unwrap();
    drop(upstream_ok);
    assert!(
        http::send(
            "GET",
            &format!("{}/health", bridge.base_url()),
            &[],
            None,
            T
        )
        .await
        .unwrap()
        .status
            == 200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_style_index_reuse_with_a_new_id_is_a_new_call() {
    // Ollama sends every call complete, each with index 0 (pitfalls 17).
    let script = ChatStream::new()
        .role()
        .delta(json!({"tool_calls": [{"index": 0, "id": "call_o1", "type": "function",
                                     "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}), None)
        .delta(json!({"tool_calls": [{"index": 0, "id": "call_o2", "type": "function",
                                     "function": {"name": "get_time", "arguments": "{\"city\":\"Rome\"}"}}]}), None)
        .finish("tool_calls")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let m = answer("stream-ollama", script).await;
    assert_eq!(
        blocks(&m),
        vec![
            json!({"tool_use": "get_weather", "input": {"city": "Paris"}}),
            json!({"tool_use": "get_time", "input": {"city": "Rome"}})
        ]
    );
    assert_eq!(m["stop_reason"], "tool_use");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_resent_on_every_fragment_is_not_repeated() {
    let script = ChatStream::new()
        .role()
        .delta(json!({"tool_calls": [{"index": 0, "id": "call_n", "type": "function",
                                     "function": {"name": "get_weather", "arguments": "{\"ci"}}]}), None)
        .delta(json!({"tool_calls": [{"index": 0, "id": "call_n", "type": "function",
                                     "function": {"name": "get_weather", "arguments": "ty\":\"Paris\"}"}}]}), None)
        .finish("tool_calls")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let m = answer("stream-name-resent", script).await;
    assert_eq!(
        blocks(&m),
        vec![json!({"tool_use": "get_weather", "input": {"city": "Paris"}})]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integer_tool_call_ids_are_accepted() {
    let script = ChatStream::new()
        .role()
        .delta(json!({"tool_calls": [{"index": 0, "id": 7, "type": "function",
                                     "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}), None)
        .finish("tool_calls")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let m = answer("stream-int-id", script).await;
    assert_eq!(
        blocks(&m),
        vec![json!({"tool_use": "get_weather", "input": {"city": "Paris"}})]
    );
    assert!(
        m["content"][0]["id"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{m:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_a_tool_call_in_one_delta_keep_both() {
    let script = ChatStream::new()
        .role()
        .delta(json!({"content": "Let me check.", "tool_calls": [{"index": 0, "id": "call_mix", "type": "function",
                      "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}), None)
        .finish("tool_calls")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let m = answer("stream-mixed-delta", script).await;
    assert_eq!(
        blocks(&m),
        vec![
            json!({"text": "Let me check."}),
            json!({"tool_use": "get_weather", "input": {"city": "Paris"}})
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_tool_arguments_are_repaired_not_fatal() {
    // The model forgot the closing brace (pitfalls 14): repair it, never crash, never drop the call.
    let script = ChatStream::new()
        .role()
        .tool_start(0, "call_bad", "get_weather")
        .tool_args(0, "{\"city\": \"Par")
        .tool_args(0, "is\"")
        .finish("tool_calls")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let m = answer("stream-bad-args", script).await;
    assert_eq!(
        blocks(&m),
        vec![json!({"tool_use": "get_weather", "input": {"city": "Paris"}})]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_under_the_reasoning_field_is_thinking() {
    // vLLM ≥ 0.10 / OpenRouter call it `reasoning`.
    let script = ChatStream::new()
        .role()
        .reasoning_field("reasoning", "Hmm, ")
        .reasoning_field("reasoning", "Paris.")
        .text("Sunny.")
        .finish("stop")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let m = answer("stream-reasoning-field", script).await;
    assert_eq!(
        blocks(&m),
        vec![
            json!({"thinking": "Hmm, Paris."}),
            json!({"text": "Sunny."})
        ]
    );
    assert!(m["content"][0]["signature"].is_string(), "{m:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_reason_length_is_max_tokens() {
    let script = ChatStream::new()
        .role()
        .text("cut sh")
        .finish("length")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let m = answer("stream-length", script).await;
    assert_eq!(m["stop_reason"], "max_tokens");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_a_usage_chunk_still_reports_usage() {
    // Interrupted or older servers send no usage chunk: output_tokens must still be a number and
    // message_start's input_tokens an estimate, not 0 (pitfalls 5).
    let script = ChatStream::new()
        .role()
        .texts(&["no ", "usage"])
        .finish("stop")
        .build();
    let upstream = Upstream::always(script).await.unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "stream-no-usage")
        .await
        .unwrap();
    let r = http::post_messages(&bridge.base_url(), &request(true), T)
        .await
        .unwrap();
    let c = ctx(&r, &upstream, &bridge);
    let events = sse::parse(&r.body);
    sse::validate(&events).unwrap_or_else(|e| panic!("{e}\n{c}"));
    let input = events[0].json()["message"]["usage"]["input_tokens"]
        .as_u64()
        .unwrap_or(0);
    assert!(input > 0, "input_tokens estimate in message_start\n{c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_streams_stay_separate() {
    let upstream = Upstream::start(|req| {
        // Echo the user's text back so each client can check it got its own answer.
        let text = req
            .messages()
            .last()
            .and_then(|m| m["content"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let text = if text.is_empty() {
            req.all_text().trim().to_owned()
        } else {
            text
        };
        ChatStream::new()
            .role()
            .text("echo: ")
            .text(&text)
            .finish("stop")
            .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
            .delay(Duration::from_millis(20))
            .build()
    })
    .await
    .unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "stream-concurrent")
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..24 {
        let base = bridge.base_url();
        tasks.push(tokio::spawn(async move {
            let body = json!({"model": "claude-sonnet-4-6", "max_tokens": 64, "stream": i % 2 == 0,
                              "messages": [{"role": "user", "content": format!("client {i}")}]});
            (i, http::post_messages(&base, &body, T).await)
        }));
    }
    for t in tasks {
        let (i, r) = t.await.unwrap();
        let r = r.unwrap();
        let c = ctx(&r, &upstream, &bridge);
        assert_eq!(r.status, 200, "client {i}\n{c}");
        let message = if i % 2 == 0 {
            let events = sse::parse(&r.body);
            sse::validate(&events).unwrap_or_else(|e| panic!("client {i}: {e}\n{c}"));
            sse::accumulate(&events).unwrap()
        } else {
            r.json().unwrap()
        };
        assert_eq!(
            message["content"][0]["text"],
            format!("echo: client {i}"),
            "{c}"
        );
    }
}
