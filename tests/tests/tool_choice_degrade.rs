//! Pitfall 11: an upstream that rejects `tool_choice` gets the request once more without it,
//! and the client still gets its answer.

use std::time::Duration;

use bridge_tests::bridge::Bridge;
use bridge_tests::chunks::tool_call_stream;
use bridge_tests::http::post_messages;
use bridge_tests::sse;
use bridge_tests::upstream::{ScriptedResponse, Upstream};
use serde_json::json;

fn request(tool_choice: serde_json::Value) -> serde_json::Value {
    json!({
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "stream": true,
        "tool_choice": tool_choice,
        "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "list files"}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_tool_choice_is_retried_without_it() {
    let upstream = Upstream::start(|req| {
        if req.body.get("tool_choice").is_some() {
            ScriptedResponse::openai_error(
                400,
                "tool_choice is not supported by this model",
                "invalid_request_error",
                None,
            )
        } else {
            tool_call_stream("call_1", "Bash", &["{\"command\":", "\"ls\"}"])
        }
    })
    .await
    .unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "tool-choice-degrade")
        .await
        .unwrap();
    let response = post_messages(
        &bridge.base_url(),
        &request(json!({"type": "any", "disable_parallel_tool_use": true})),
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    let events = sse::parse(&response.body);
    sse::validate(&events).unwrap();
    let message = sse::accumulate(&events).unwrap();
    assert_eq!(message["content"][0]["input"], json!({"command": "ls"}));
    let sent = upstream.model_requests();
    assert_eq!(
        sent.len(),
        2,
        "one rejected try, one retry\n{}",
        upstream.dump()
    );
    assert_eq!(sent[0].body["tool_choice"], json!("required"));
    assert_eq!(sent[0].body["parallel_tool_calls"], json!(false));
    assert!(sent[1].body.get("tool_choice").is_none());
    assert!(sent[1].body.get("parallel_tool_calls").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_400s_are_not_retried() {
    let upstream = Upstream::always(ScriptedResponse::openai_error(
        400,
        "context length exceeded",
        "invalid_request_error",
        None,
    ))
    .await
    .unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "tool-choice-no-retry")
        .await
        .unwrap();
    let response = post_messages(
        &bridge.base_url(),
        &request(json!({"type": "auto"})),
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert_eq!(response.status, 400);
    assert!(response.text().contains("context length exceeded"));
    assert_eq!(upstream.model_requests().len(), 1);
}
