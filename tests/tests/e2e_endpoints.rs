//! The bridge's other endpoints (DESIGN §5): probes, `/v1/models`, `count_tokens`, CORS, the
//! optional client key, and the request log lines — through the real binary.
//!
//! Needs `cargo build -p claude-bridge`.

#![expect(clippy::unwrap_used, reason = "test helpers fail the test on purpose")]

use std::time::Duration;

use bridge_tests::bridge::{Bridge, BridgeOptions};
use bridge_tests::chunks::text_stream;
use bridge_tests::http;
use bridge_tests::upstream::Upstream;
use serde_json::json;

const T: Duration = Duration::from_secs(20);
const ANTHROPIC: [(&str, &str); 3] = [
    ("content-type", "application/json"),
    ("anthropic-version", "2023-06-01"),
    ("x-api-key", "sk-test"),
];

async fn setup(name: &str) -> (Upstream, Bridge) {
    let upstream = Upstream::always(text_stream(&["hi"])).await.unwrap();
    let bridge = Bridge::start(&upstream.base_url(), name).await.unwrap();
    (upstream, bridge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer() {
    let (upstream, bridge) = setup("ep-probes").await;
    let base = bridge.base_url();
    for (method, path) in [("HEAD", "/"), ("HEAD", "/api/hello"), ("GET", "/health")] {
        let r = http::send(method, &format!("{base}{path}"), &[], None, T)
            .await
            .unwrap();
        assert!(
            (200..300).contains(&r.status),
            "{method} {path}: {}\n{}",
            r.status,
            bridge.log()
        );
    }
    assert!(
        upstream.requests().is_empty(),
        "probes stay local: {}",
        upstream.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_list_is_in_anthropic_shape() {
    let (_upstream, bridge) = setup("ep-models").await;
    let r = http::send(
        "GET",
        &format!("{}/v1/models", bridge.base_url()),
        &ANTHROPIC,
        None,
        T,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json().unwrap();
    assert!(v["data"].is_array(), "no data array: {v:#}");
    let data = v["data"].as_array().unwrap();
    assert!(!data.is_empty(), "{v:#}");
    let ids: Vec<&str> = data.iter().filter_map(|m| m["id"].as_str()).collect();
    // Claude Code's model discovery keeps only ids that start with `claude` (pitfalls 12): they
    // come first; then the model the flags serve (`--model test-model`), for OpenAI clients.
    assert!(ids[0].starts_with("claude"), "{ids:?}");
    assert_eq!(ids.last(), Some(&"test-model"), "{ids:?}");
    assert_eq!(
        ids.iter().filter(|id| !id.starts_with("claude")).count(),
        1,
        "{ids:?}"
    );
    for m in data {
        assert_eq!(m["type"], "model", "{v:#}");
        assert!(
            m["display_name"].is_string() && m["created_at"].is_string(),
            "{v:#}"
        );
    }
    assert!(v["has_more"].is_boolean(), "{v:#}");
    assert_eq!(v["first_id"], data[0]["id"], "{v:#}");
    assert_eq!(v["last_id"], data[data.len() - 1]["id"], "{v:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_estimates_locally() {
    let (upstream, bridge) = setup("ep-count").await;
    let url = format!("{}/v1/messages/count_tokens?beta=true", bridge.base_url());
    let small =
        json!({"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "hi"}]});
    let big = json!({"model": "claude-sonnet-4-6", "system": "You are terse.",
        "tools": [{"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "word ".repeat(2000)}]});
    let mut counts = Vec::new();
    for body in [small, big] {
        let r = http::send(
            "POST",
            &url,
            &ANTHROPIC,
            Some(body.to_string().into_bytes()),
            T,
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200, "{}\n{}", r.text(), bridge.log());
        let v = r.json().unwrap();
        let n = v["input_tokens"].as_u64().unwrap_or(0);
        assert!(n > 0, "{v:#}");
        counts.push(n);
    }
    assert!(
        counts[1] > counts[0] + 1000,
        "2000 words count as more than 1000 tokens more: {counts:?}"
    );
    assert!(
        upstream.model_requests().is_empty(),
        "count_tokens does not spend a completion: {}",
        upstream.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_preflight_and_headers() {
    let (_upstream, bridge) = setup("ep-cors").await;
    let url = format!("{}/v1/messages", bridge.base_url());
    let r = http::send(
        "OPTIONS",
        &url,
        &[
            ("origin", "http://localhost:5173"),
            ("access-control-request-method", "POST"),
            (
                "access-control-request-headers",
                "content-type,x-api-key,anthropic-version",
            ),
        ],
        None,
        T,
    )
    .await
    .unwrap();
    assert!(
        (200..300).contains(&r.status),
        "preflight status {}: {:?}",
        r.status,
        r.headers
    );
    assert!(
        r.header("access-control-allow-origin").is_some(),
        "{:?}",
        r.headers
    );
    let methods = r
        .header("access-control-allow-methods")
        .unwrap_or_default()
        .to_ascii_uppercase();
    assert!(
        methods.contains("POST") || methods == "*",
        "{:?}",
        r.headers
    );
    let mut headers = ANTHROPIC.to_vec();
    headers.push(("origin", "http://localhost:5173"));
    let body = json!({"model": "claude-sonnet-4-6", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]});
    let r = http::send(
        "POST",
        &url,
        &headers,
        Some(body.to_string().into_bytes()),
        T,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.header("access-control-allow-origin").is_some(),
        "{:?}",
        r.headers
    );
    // A page may read which target answered, and whether to retry a failure.
    let exposed = r
        .header("access-control-expose-headers")
        .unwrap_or_default();
    for name in [
        "request-id",
        "retry-after",
        "x-should-retry",
        "x-claude-bridge-target",
    ] {
        assert!(
            exposed.split(',').any(|h| h.trim() == name),
            "{name} is not exposed: {exposed:?}"
        );
    }
    assert!(
        r.header("x-claude-bridge-target").is_some(),
        "{:?}",
        r.headers
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_key_is_required_when_set() {
    let upstream = Upstream::always(text_stream(&["hi"])).await.unwrap();
    let opts = BridgeOptions {
        env: vec![("CLAUDE_BRIDGE_CLIENT_KEY".into(), "ck-secret-123".into())],
        ..BridgeOptions::default()
    };
    let bridge = Bridge::start_with(&upstream.base_url(), "ep-client-key", opts)
        .await
        .unwrap();
    let url = format!("{}/v1/messages", bridge.base_url());
    let body = json!({"model": "claude-sonnet-4-6", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
        .to_string()
        .into_bytes();
    let base = [
        ("content-type", "application/json"),
        ("anthropic-version", "2023-06-01"),
    ];
    let cases: [(&[(&str, &str)], u16); 7] = [
        (&[], 401),
        (&[("x-api-key", "wrong")], 401),
        (&[("x-api-key", "ck-secret-12")], 401),
        (&[("authorization", "Basic ck-secret-123")], 401),
        (&[("x-api-key", "ck-secret-123")], 200),
        (&[("authorization", "Bearer ck-secret-123")], 200),
        // Authentication schemes are case-insensitive.
        (&[("authorization", "bearer ck-secret-123")], 200),
    ];
    for (extra, want) in cases {
        let mut h = base.to_vec();
        h.extend_from_slice(extra);
        let r = http::send("POST", &url, &h, Some(body.clone()), T)
            .await
            .unwrap();
        assert_eq!(r.status, want, "{extra:?}: {}", r.text());
        if want == 401 {
            let v = r.json().unwrap();
            assert_eq!(v["type"], "error");
            assert_eq!(v["error"]["type"], "authentication_error", "{v:#}");
            assert!(r.header("request-id").is_some());
        }
    }
    assert_eq!(
        upstream.model_requests().len(),
        3,
        "only authorised requests reach the upstream"
    );
    // The bridge's own key is not the upstream key: the upstream gets --api-key.
    for req in upstream.model_requests() {
        assert_eq!(req.header("authorization"), Some("Bearer sk-upstream-test"));
    }
    // Probes stay open.
    let r = http::send(
        "GET",
        &format!("{}/health", bridge.base_url()),
        &[],
        None,
        T,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
}

#[test]
fn a_reachable_bridge_needs_a_client_key_and_an_empty_key_is_refused() {
    let bin = bridge_tests::bridge::binary_path().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["serve", "--listen", "0.0.0.0:0"], "without --client-key"),
        (&["agui", "--listen", "0.0.0.0:0"], "without --client-key"),
        (
            &["serve", "--listen", "127.0.0.1:0", "--client-key", ""],
            "--client-key is empty",
        ),
    ];
    for (args, words) in cases {
        let out = std::process::Command::new(&bin)
            .args(args)
            .env_remove("CLAUDE_BRIDGE_CLIENT_KEY")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started: {stderr}");
        assert!(stderr.contains(words), "{args:?}: {stderr}");
    }
}

/// `claude-bridge translate` runs the translator of `--provider`'s dialect over captured files:
/// the Anthropic pass-through relays the capture's frames, Responses events become Anthropic
/// events, and a raw-text (Fabstir) capture's inline tool call becomes a `tool_use` block.
#[test]
fn translate_runs_the_providers_dialect_over_captured_files() {
    let fixtures = bridge_tests::conformance::fixtures_dir();
    let run = |provider: &str, case: &std::path::Path, capture: &std::path::Path| {
        let out = std::process::Command::new(bridge_tests::bridge::binary_path().unwrap())
            .args(["translate", "--provider", provider, "--engine", "native"])
            .arg("--request")
            .arg(case.join("request.json"))
            .arg("--capture")
            .arg(capture)
            .env("CLAUDE_BRIDGE_LOG", "warn")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{provider}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let anthropic = fixtures.join("anthropic/parallel_tool_use");
    let relayed = run("anthropic", &anthropic, &anthropic.join("upstream.sse"));
    assert_eq!(
        relayed,
        std::fs::read_to_string(anthropic.join("upstream.sse")).unwrap()
    );
    let responses = fixtures.join("responses/reasoning_then_function_call");
    let events = run("responses", &responses, &responses.join("upstream.sse"));
    assert!(events.starts_with("event: message_start\n"), "{events}");
    assert!(events.contains(r#""type":"tool_use""#), "{events}");
    let raw = bridge_tests::tempdir::TempDir::new("translate-raw").unwrap();
    let reply = raw.path().join("reply.txt");
    std::fs::write(
        &reply,
        "Listing.<tool_call>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}</tool_call>",
    )
    .unwrap();
    let text = run("fabstir", &anthropic, &reply);
    assert!(text.contains(r#""name":"Bash""#), "{text}");
    assert!(text.contains(r#""stop_reason":"tool_use""#), "{text}");
}

/// DESIGN's log contract (docs/endpoints.md): a model request that is answered writes one INFO
/// line, `request done`, when its answer ends; nothing at INFO before its first token. A model
/// request turned away, and every other route, still writes its `handled` line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_model_request_writes_one_info_line() {
    let (upstream, bridge) = setup("ep-log-lines").await;
    let base = bridge.base_url();
    let body = json!({"model": "claude-sonnet-4-6", "max_tokens": 64, "stream": true,
                      "messages": [{"role": "user", "content": "hi"}]});
    let r = http::post_messages(&base, &body, T).await.unwrap();
    assert_eq!(r.status, 200, "{}", bridge.log());
    let url = format!("{base}/v1/messages");
    let bad = http::send("POST", &url, &ANTHROPIC, Some(b"{".to_vec()), T)
        .await
        .unwrap();
    assert_eq!(bad.status, 400, "{}", bridge.log());
    let models = http::send("GET", &format!("{base}/v1/models"), &ANTHROPIC, None, T)
        .await
        .unwrap();
    assert_eq!(models.status, 200, "{}", bridge.log());
    let mut waited = Duration::ZERO;
    while !bridge.log().contains("request done") && waited < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    let log = bridge.log();
    let info = |needle: &str| {
        log.lines()
            .filter(|l| l.contains(" INFO ") && l.contains(needle))
            .count()
    };
    assert_eq!(info("request done"), 1, "{log}");
    assert_eq!(info("forwarding"), 0, "{log}");
    assert_eq!(
        info("handled method=POST path=/v1/messages status=200"),
        0,
        "{log}"
    );
    assert_eq!(
        info("handled method=POST path=/v1/messages status=400"),
        1,
        "{log}"
    );
    assert_eq!(
        info("handled method=GET path=/v1/models status=200"),
        1,
        "{log}"
    );
    // At debug (as these tests run the bridge) both are still there.
    assert!(log.contains("forwarding"), "{log}");
    drop(upstream);
}
