//! Self-tests of the end-to-end harness: the scripted upstream answered by a raw client, the SSE
//! validator and accumulator. They need neither the bridge nor the installed clients.

#![expect(clippy::unwrap_used, reason = "test helpers fail the test on purpose")]

use std::time::{Duration, Instant};

use bridge_tests::chunks::{
    self, ChatStream, parallel_tool_calls_stream, reasoning_text_stream, split_fragments,
    text_stream, tool_call_stream,
};
use bridge_tests::http;
use bridge_tests::sse;
use bridge_tests::upstream::{ScriptedResponse, Upstream};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);

async fn post(upstream: &Upstream, body: &Value) -> http::HttpResponse {
    http::send(
        "POST",
        &format!("{}/chat/completions", upstream.base_url()),
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer sk-up"),
        ],
        Some(body.to_string().into_bytes()),
        T,
    )
    .await
    .unwrap()
}

/// `data:` payloads of an OpenAI stream.
fn data_lines(body: &[u8]) -> Vec<String> {
    sse::parse(body).into_iter().map(|e| e.data).collect()
}

#[tokio::test]
async fn upstream_streams_text_and_records_the_request() {
    let upstream = Upstream::scripted(vec![text_stream(&["Hel", "lo"])])
        .await
        .unwrap();
    let body = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}],
                      "tools": [{"type": "function", "function": {"name": "f"}}]});
    let r = post(&upstream, &body).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert!(r.body_error.is_none());
    let lines = data_lines(&r.body);
    assert_eq!(lines.last().map(String::as_str), Some("[DONE]"));
    let text: String = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|c| {
            c.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, "Hello");
    let usage: Value = serde_json::from_str(&lines[lines.len() - 2]).unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"]["prompt_tokens_details"]["cached_tokens"],
        chunks::CACHED_TOKENS
    );

    let reqs = upstream.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-up"));
    assert_eq!(reqs[0].body, body);
    assert!(reqs[0].is_stream());
    // The script is used up: the next model request gets a 500.
    let again = post(&upstream, &body).await;
    assert_eq!(again.status, 500);
    assert_eq!(upstream.connections(), 2, "one per raw client request");
}

#[tokio::test]
async fn tls_upstream_serves_https_and_counts_failed_handshakes() {
    let upstream = Upstream::always_tls(text_stream(&["x"])).await.unwrap();
    assert_eq!(
        upstream.base_url(),
        format!("https://{}/v1", upstream.addr())
    );
    let pem = std::fs::read_to_string(upstream.ca_cert().unwrap()).unwrap();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
    // Plain HTTP to the TLS port: the handshake fails, nothing is recorded.
    let r = http::send(
        "GET",
        &format!("http://{}/v1/models", upstream.addr()),
        &[],
        None,
        T,
    )
    .await;
    assert!(
        r.is_err() || r.as_ref().is_ok_and(|r| r.status == 400),
        "{r:?}"
    );
    assert!(upstream.wait_until(|u| u.tls_failures() == 1, T).await);
    assert_eq!(upstream.connections(), 1);
    assert!(upstream.requests().is_empty());
}

#[tokio::test]
async fn upstream_answers_background_requests_without_using_the_script() {
    let upstream = Upstream::scripted(vec![text_stream(&["main"])])
        .await
        .unwrap();
    let title = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "Write the title for this"}]});
    let r = post(&upstream, &title).await;
    assert_eq!(r.status, 200);
    assert!(String::from_utf8_lossy(&r.body).contains("Test session"));
    let main =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "do it"}]});
    let r = post(&upstream, &main).await;
    assert!(String::from_utf8_lossy(&r.body).contains("main"));
    assert_eq!(upstream.model_requests().len(), 1);
    assert_eq!(upstream.requests().len(), 2);
}

#[tokio::test]
async fn upstream_handler_chooses_by_request() {
    let upstream = Upstream::start(|req| {
        if req.has_tool_result() {
            text_stream(&["All done."])
        } else {
            tool_call_stream("call_1", "Bash", &["{\"command\":", "\"ls\"}"])
        }
    })
    .await
    .unwrap();
    let first = post(
        &upstream,
        &json!({"stream": true, "messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert!(String::from_utf8_lossy(&first.body).contains("call_1"));
    let second = post(
        &upstream,
        &json!({"stream": true, "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]}),
    )
    .await;
    assert!(String::from_utf8_lossy(&second.body).contains("All done."));
    let reqs = upstream.requests();
    assert_eq!(reqs[1].tool_messages().len(), 1);
    assert_eq!(reqs[1].assistant_tool_calls().len(), 1);
}

#[tokio::test]
async fn upstream_folds_a_stream_for_non_streaming_requests() {
    let calls: [(&str, &str, &[&str]); 2] = [
        ("call_a", "get_weather", &["{\"ci", "ty\":\"Paris\"}"]),
        ("call_b", "get_time", &["{}"]),
    ];
    let upstream = Upstream::always(parallel_tool_calls_stream(&calls))
        .await
        .unwrap();
    let r = post(
        &upstream,
        &json!({"messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(r.status, 200);
    let v = r.json().unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    let tc = &v["choices"][0]["message"]["tool_calls"];
    assert_eq!(tc[0]["function"]["arguments"], "{\"city\":\"Paris\"}");
    assert_eq!(tc[1]["id"], "call_b");
    assert_eq!(v["usage"]["completion_tokens"], chunks::COMPLETION_TOKENS);

    let upstream = Upstream::always(reasoning_text_stream(&["hm", "m"], &["ok"]))
        .await
        .unwrap();
    let v = post(&upstream, &json!({"messages": []}))
        .await
        .json()
        .unwrap();
    assert_eq!(v["choices"][0]["message"]["reasoning_content"], "hmm");
    assert_eq!(v["choices"][0]["message"]["content"], "ok");
}

#[tokio::test]
async fn interleaved_parallel_calls_alternate_indexes() {
    let a = split_fragments("{\"command\":\"touch a.txt\"}", 3);
    let b = split_fragments("{\"command\":\"touch b.txt\"}", 3);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let b: Vec<&str> = b.iter().map(String::as_str).collect();
    let ScriptedResponse::Stream(s) =
        parallel_tool_calls_stream(&[("c0", "Bash", &a), ("c1", "Bash", &b)])
    else {
        panic!("not a stream")
    };
    let all: Vec<u8> = s.parts.iter().flat_map(|p| p.iter().copied()).collect();
    let indexes: Vec<u64> = data_lines(&all)
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|c| {
            c.pointer("/choices/0/delta/tool_calls/0/index")
                .and_then(Value::as_u64)
        })
        .collect();
    assert_eq!(indexes, vec![0, 1, 0, 1, 0, 1, 0, 1]);
}

#[tokio::test]
async fn upstream_errors_garbage_delays_and_disconnects() {
    let upstream = Upstream::always(
        ScriptedResponse::openai_error(
            429,
            "Rate limit reached",
            "rate_limit_exceeded",
            Some("rate_limit_exceeded"),
        )
        .with_header("retry-after", "7"),
    )
    .await
    .unwrap();
    let r = post(&upstream, &json!({"stream": true, "messages": []})).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("7"));
    assert_eq!(r.json().unwrap()["error"]["message"], "Rate limit reached");

    let upstream = Upstream::always(ScriptedResponse::garbage(b"\x00\xffnot an event stream"))
        .await
        .unwrap();
    let r = post(&upstream, &json!({"stream": true, "messages": []})).await;
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, b"\x00\xffnot an event stream".as_slice())
    );

    let upstream = Upstream::always(text_stream(&["late"]).delayed(Duration::from_millis(400)))
        .await
        .unwrap();
    let start = Instant::now();
    let r = post(&upstream, &json!({"stream": true, "messages": []})).await;
    assert!(start.elapsed() >= Duration::from_millis(400));
    assert_eq!(r.status, 200);

    let upstream = Upstream::always(
        ChatStream::new()
            .role()
            .text("partial")
            .disconnect()
            .build(),
    )
    .await
    .unwrap();
    let r = post(&upstream, &json!({"stream": true, "messages": []})).await;
    assert_eq!(r.status, 200);
    assert!(
        r.body_error.is_some(),
        "a disconnect must be visible to the client"
    );
    assert!(String::from_utf8_lossy(&r.body).contains("partial"));
    assert!(!String::from_utf8_lossy(&r.body).contains("[DONE]"));
}

#[tokio::test]
async fn upstream_streams_with_real_pauses_and_split_bytes() {
    let stream = ChatStream::new()
        .role()
        .texts(&["Grüße ", "🌍"])
        .finish("stop")
        .split_every(3)
        .delay(Duration::from_millis(2))
        .build();
    let upstream = Upstream::always(stream).await.unwrap();
    let r = post(&upstream, &json!({"stream": true, "messages": []})).await;
    let text: String = data_lines(&r.body)
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|c| {
            c.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, "Grüße 🌍");
    assert!(r.time_to_first_byte.unwrap() < Duration::from_millis(300));
}

fn anthropic_stream() -> Vec<u8> {
    let evs = [
        json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}),
        json!({"type":"ping"}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}}),
        json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}),
        json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":"}}),
        json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"ls\"}"}}),
        json!({"type":"content_block_stop","index":1}),
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}),
        json!({"type":"message_stop"}),
    ];
    evs.iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn validator_accepts_a_good_stream_and_accumulates_it() {
    let events = sse::parse(&anthropic_stream());
    sse::validate(&events).unwrap();
    let msg = sse::accumulate(&events).unwrap();
    assert_eq!(msg["content"][0]["thinking"], "hmm");
    assert_eq!(msg["content"][0]["signature"], "sig");
    assert_eq!(msg["content"][1]["input"], json!({"command": "ls"}));
    assert_eq!(msg["stop_reason"], "tool_use");
    assert_eq!(msg["usage"]["output_tokens"], 9);
    assert_eq!(
        sse::comparable(&msg),
        json!({"content": [{"type": "thinking", "thinking": "hmm"},
                           {"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}],
               "stop_reason": "tool_use", "output_tokens": 9})
    );
}

#[test]
fn validator_rejects_broken_streams() {
    let good = String::from_utf8(anthropic_stream()).unwrap();
    let cases = [
        // a delta to a block that is closed
        good.replacen("\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}", "\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}", 1),
        // no message_stop
        good.replace("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", ""),
        // event after an error
        good.replace("event: ping\ndata: {\"type\":\"ping\"}", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\"}}"),
        // event name differs from type
        good.replace("event: ping", "event: pong"),
    ];
    for (i, c) in cases.iter().enumerate() {
        assert_ne!(c, &good, "case {i} did not change the stream");
        assert!(
            sse::validate(&sse::parse(c.as_bytes())).is_err(),
            "case {i} accepted"
        );
    }
    let error_only = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n\
                      event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"upstream dropped\"}}\n\n";
    let evs = sse::parse(error_only.as_bytes());
    sse::validate(&evs).unwrap();
    assert_eq!(
        sse::error_event(&evs).unwrap()["error"]["type"],
        "api_error"
    );
}

#[tokio::test]
async fn upstream_counts_completed_and_cancelled_streams() {
    let mut s = ChatStream::new().role().delay(Duration::from_millis(30));
    for i in 0..40 {
        s = s.text(&format!("chunk-{i} "));
    }
    let upstream = Upstream::always(s.finish("stop").build()).await.unwrap();
    let url = format!("{}/chat/completions", upstream.base_url());
    let body = json!({"stream": true, "messages": []})
        .to_string()
        .into_bytes();
    let r = http::send_until("POST", &url, &[], Some(body.clone()), T, Some("chunk-2 "))
        .await
        .unwrap();
    assert!(r.body_error.is_some());
    for _ in 0..30 {
        if upstream.cancelled_streams() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        (upstream.cancelled_streams(), upstream.completed_streams()),
        (1, 0)
    );
    let r = http::send("POST", &url, &[], Some(body), T).await.unwrap();
    assert!(r.body_error.is_none());
    assert!(
        r.arrival_of("chunk-39").unwrap()
            > r.arrival_of("chunk-0").unwrap() + Duration::from_millis(500)
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        (upstream.cancelled_streams(), upstream.completed_streams()),
        (1, 1)
    );
}
