//! The host around the translator, through the real bridge binary: an HTTPS upstream with a
//! self-signed certificate (`--ca-cert`), upstream connection reuse over http and https, graceful
//! shutdown on SIGTERM, and the request body limit.
//!
//! Needs `cargo build -p claude-bridge`.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail the test on purpose"
)]

use std::time::{Duration, Instant};

use bridge_tests::bridge::{Bridge, BridgeOptions};
use bridge_tests::chunks::{ChatStream, text_stream};
use bridge_tests::http::{self, HttpResponse, MESSAGES_HEADERS};
use bridge_tests::sse;
use bridge_tests::upstream::Upstream;
use serde_json::{Value, json};

/// Deadline of every client call.
const T: Duration = Duration::from_secs(20);
/// How long the bridge may take to exit after SIGTERM (its drain is 10 s).
const EXIT_TIMEOUT: Duration = Duration::from_secs(12);
const ANSWER: &[&str] = &["Over ", "TLS ", "it ", "works."];

fn request(stream: bool) -> Value {
    json!({"model": "claude-sonnet-4-6", "max_tokens": 256, "stream": stream,
           "messages": [{"role": "user", "content": "Say something."}]})
}

fn ctx(r: &HttpResponse, upstream: &Upstream, bridge: &Bridge) -> String {
    format!(
        "status {} body:\n{}\nbody error: {:?}\n--- upstream ({} connections, {} failed TLS handshakes):\n{}\n--- bridge log {}:\n{}",
        r.status,
        r.text(),
        r.body_error,
        upstream.connections(),
        upstream.tls_failures(),
        upstream.dump(),
        bridge.log_path().display(),
        bridge.log()
    )
}

/// The bridge against `upstream`, trusting its certificate when it has one.
async fn bridge_for(upstream: &Upstream, name: &str) -> Bridge {
    let mut opts = BridgeOptions::default();
    if let Some(pem) = upstream.ca_cert() {
        opts = opts.args(&["--ca-cert", &pem.display().to_string()]);
    }
    Bridge::start_with(&upstream.base_url(), name, opts)
        .await
        .unwrap()
}

/// The message of a streamed response: a well-formed event stream that ends with `message_stop`.
fn streamed_message(r: &HttpResponse, c: &str) -> Value {
    let events = sse::parse(&r.body);
    sse::validate(&events).unwrap_or_else(|e| panic!("malformed stream: {e}\n{c}"));
    assert_eq!(
        sse::names(&events).last().map(String::as_str),
        Some("message_stop"),
        "{c}"
    );
    sse::accumulate(&events).unwrap_or_else(|e| panic!("{e}\n{c}"))
}

/// One request; checks the answer is the message `text` (a valid event stream when streamed).
async fn assert_answer(upstream: &Upstream, bridge: &Bridge, stream: bool, text: &str) {
    let r = http::post_messages(&bridge.base_url(), &request(stream), T)
        .await
        .unwrap();
    let c = ctx(&r, upstream, bridge);
    assert_eq!(r.status, 200, "{c}");
    assert!(r.body_error.is_none(), "{c}");
    let message = if stream {
        streamed_message(&r, &c)
    } else {
        r.json().unwrap_or_else(|e| panic!("{e}\n{c}"))
    };
    assert_eq!(message["content"][0]["text"], text, "{c}");
    assert_eq!(message["stop_reason"], "end_turn", "{c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstream_with_ca_cert_streams_and_answers() {
    let upstream = Upstream::always_tls(text_stream(ANSWER)).await.unwrap();
    assert!(upstream.base_url().starts_with("https://127.0.0.1:"));
    let bridge = bridge_for(&upstream, "host-https").await;
    assert_answer(&upstream, &bridge, true, &ANSWER.concat()).await;
    assert_answer(&upstream, &bridge, false, &ANSWER.concat()).await;
    let reqs = upstream.model_requests();
    assert_eq!(reqs.len(), 2, "{}", upstream.dump());
    assert_eq!(
        reqs[0].header("authorization"),
        Some("Bearer sk-upstream-test")
    );
    assert_eq!(upstream.tls_failures(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstream_without_ca_cert_is_a_502() {
    let upstream = Upstream::always_tls(text_stream(ANSWER)).await.unwrap();
    // No --ca-cert: the self-signed certificate is not trusted.
    let bridge = Bridge::start(&upstream.base_url(), "host-https-untrusted")
        .await
        .unwrap();
    for stream in [true, false] {
        let started = Instant::now();
        let r = http::post_messages(&bridge.base_url(), &request(stream), T)
            .await
            .unwrap();
        let c = ctx(&r, &upstream, &bridge);
        let error = r
            .anthropic_error(&[502], "api_error")
            .unwrap_or_else(|e| panic!("{e}\n{c}"));
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a TLS failure is reported at once, not after a timeout\n{c}"
        );
        eprintln!("stream={stream}: {}", error["message"]);
    }
    assert!(
        upstream
            .wait_until(|u| u.tls_failures() >= 1, Duration::from_secs(5))
            .await,
        "the bridge tried TLS and gave up in the handshake"
    );
    assert!(upstream.requests().is_empty(), "{}", upstream.dump());
}

/// Five sequential requests (streamed and not, alternately) through one bridge: one upstream connection.
///
/// Between requests the client pauses briefly: hyper's client pool takes the upstream connection
/// back a moment (~1 ms) after the bridge has read the upstream body to its end, and so after the
/// client may already have the whole answer. A request sent within that moment finds no idle
/// connection and opens a second one (a pool of two, still reused); that race is not what this
/// test is about.
async fn assert_one_connection_for_five_requests(upstream: &Upstream, bridge: &Bridge) {
    for i in 0..5 {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        assert_answer(upstream, bridge, i % 2 == 0, &ANSWER.concat()).await;
    }
    let requests = upstream.model_requests();
    assert_eq!(requests.len(), 5, "{}", upstream.dump());
    assert!(
        requests.iter().all(|r| r.connection == 0),
        "every request on the first connection\n{}",
        upstream.dump()
    );
    assert_eq!(
        upstream.connections(),
        1,
        "the bridge keeps its upstream connection alive and reuses it\n--- upstream:\n{}\n--- bridge log:\n{}",
        upstream.dump(),
        bridge.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_upstream_connection_is_reused() {
    let upstream = Upstream::always(text_stream(ANSWER)).await.unwrap();
    let bridge = bridge_for(&upstream, "host-reuse-http").await;
    assert_one_connection_for_five_requests(&upstream, &bridge).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstream_connection_is_reused() {
    let upstream = Upstream::always_tls(text_stream(ANSWER)).await.unwrap();
    let bridge = bridge_for(&upstream, "host-reuse-https").await;
    assert_one_connection_for_five_requests(&upstream, &bridge).await;
    assert_eq!(upstream.tls_failures(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_the_in_flight_stream_then_exits_0() {
    // Five text chunks 300 ms apart: about 1.2 s of streaming.
    let parts = ["one ", "two ", "three ", "four ", "five."];
    let slow = parts[1..]
        .iter()
        .fold(ChatStream::new().role().text(parts[0]), |s, p| {
            s.pause(Duration::from_millis(300)).text(p)
        })
        .finish("stop")
        .usage(20, 5, 0)
        .build();
    let upstream = Upstream::always(slow).await.unwrap();
    let mut bridge = bridge_for(&upstream, "host-sigterm").await;
    let base = bridge.base_url();

    let (first_byte, got_first_byte) = tokio::sync::oneshot::channel();
    let url = format!("{base}/v1/messages");
    let in_flight = tokio::spawn(async move {
        http::send_notify_first_byte(
            "POST",
            &url,
            MESSAGES_HEADERS,
            Some(request(true).to_string().into_bytes()),
            T,
            first_byte,
        )
        .await
    });
    tokio::time::timeout(T, got_first_byte)
        .await
        .unwrap_or_else(|_| panic!("no first byte within {T:?}\n{}", bridge.log()))
        .unwrap_or_else(|_| panic!("the request ended before its first byte\n{}", bridge.log()));
    assert_eq!(
        upstream.completed_streams(),
        0,
        "the signal must come while the stream is in flight"
    );
    bridge.signal("TERM").unwrap();
    let signalled = Instant::now();

    // Once the bridge has seen the signal, a new connection must not be served.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !bridge.log().contains("SIGTERM received") {
        assert!(
            Instant::now() < deadline,
            "the bridge did not log the signal\n{}",
            bridge.log()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let fresh = http::send(
        "GET",
        &format!("{base}/health"),
        &[],
        None,
        Duration::from_secs(5),
    )
    .await;
    eprintln!(
        "new connection after SIGTERM: {:?} after {:?}",
        fresh.as_ref().map(|r| r.status),
        signalled.elapsed()
    );
    assert!(
        fresh.is_err(),
        "a connection made after SIGTERM was served: {:?}\n{}",
        fresh.map(|r| (r.status, r.text())),
        bridge.log()
    );

    let r = in_flight.await.unwrap().unwrap();
    let c = ctx(&r, &upstream, &bridge);
    assert_eq!(r.status, 200, "{c}");
    assert!(
        r.body_error.is_none(),
        "the in-flight stream ends cleanly\n{c}"
    );
    let message = streamed_message(&r, &c);
    assert_eq!(message["content"][0]["text"], parts.concat(), "{c}");
    assert!(
        upstream
            .wait_until(|u| u.completed_streams() == 1, Duration::from_secs(5))
            .await,
        "the upstream stream was read to its end\n{c}"
    );

    let status = bridge.wait_exit(EXIT_TIMEOUT).await.unwrap();
    let status = status.unwrap_or_else(|| {
        panic!(
            "still running {EXIT_TIMEOUT:?} after SIGTERM\n{}",
            bridge.log()
        )
    });
    assert!(
        status.success(),
        "exit status {status} after SIGTERM\n{}",
        bridge.log()
    );
    eprintln!("exited {status} {:?} after SIGTERM", signalled.elapsed());
}

/// A Messages request whose JSON body is exactly `len` bytes long.
fn body_of_len(len: usize) -> Vec<u8> {
    let mut value = request(false);
    let base = value.to_string().len();
    value["messages"][0]["content"] =
        Value::String("x".repeat(len - base + "Say something.".len()));
    let body = value.to_string().into_bytes();
    assert_eq!(body.len(), len);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_max_body_bytes_is_a_413() {
    let upstream = Upstream::always(text_stream(ANSWER)).await.unwrap();
    let bridge = Bridge::start_with(
        &upstream.base_url(),
        "host-body-limit",
        BridgeOptions::default().args(&["--max-body-bytes", "1000"]),
    )
    .await
    .unwrap();
    let url = format!("{}/v1/messages", bridge.base_url());

    let r = http::send("POST", &url, MESSAGES_HEADERS, Some(body_of_len(2000)), T)
        .await
        .unwrap();
    let c = ctx(&r, &upstream, &bridge);
    r.anthropic_error(&[413], "request_too_large")
        .unwrap_or_else(|e| panic!("{e}\n{c}"));
    assert!(upstream.requests().is_empty(), "{c}");

    // Under the limit: answered as usual.
    let r = http::send("POST", &url, MESSAGES_HEADERS, Some(body_of_len(900)), T)
        .await
        .unwrap();
    let c = ctx(&r, &upstream, &bridge);
    assert_eq!(r.status, 200, "{c}");
    assert_eq!(r.json().unwrap()["content"][0]["text"], ANSWER.concat());
}

/// `GET url` with the test's deadline.
async fn get(url: &str) -> HttpResponse {
    http::send("GET", url, &[], None, T).await.unwrap()
}

/// Waits until the bridge's log holds `text` (the start-up check runs in the background).
async fn log_shows(bridge: &Bridge, text: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if bridge.log().contains(text) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Issue 13.6: at start the bridge asks its upstream for the model list in the background: a
/// reachable one is an info line, one that is down or whose base URL lacks `/v1` a clear warning
/// — and it serves either way (the upstream may come up later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_is_checked_at_start_and_a_bad_one_is_a_warning_not_a_refusal() {
    let upstream = Upstream::start(|req: &bridge_tests::upstream::RecordedRequest| {
        if req.method == "GET" && req.path == "/v1/models" {
            return bridge_tests::upstream::ScriptedResponse::Full {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                body: bytes::Bytes::from(
                    json!({"object": "list", "data": [{"id": "test-model", "object": "model"}]})
                        .to_string(),
                ),
            };
        }
        bridge_tests::upstream::ScriptedResponse::openai_error(
            404,
            "404 page not found",
            "not_found",
            None,
        )
    })
    .await
    .unwrap();
    let checked = || BridgeOptions {
        upstream_check: true,
        ..BridgeOptions::default()
    };

    let good = Bridge::start_with(&upstream.base_url(), "check-good", checked())
        .await
        .unwrap();
    assert!(
        log_shows(&good, "upstream reachable").await,
        "{}",
        good.log()
    );
    assert!(good.log().contains("test-model ✓"), "{}", good.log());

    // Issue 13.7: without --model a client's model name goes upstream as it is, so /v1/models
    // lists the upstream's own ids (after the Claude ids Claude Code keeps) for clients to send.
    let forwarding = Bridge::start_with(
        &upstream.base_url(),
        "check-forwarding",
        BridgeOptions {
            model: None,
            ..checked()
        },
    )
    .await
    .unwrap();
    assert!(log_shows(&forwarding, "upstream reachable").await);
    let listed = get(&format!("{}/v1/models", forwarding.base_url())).await;
    let ids: Vec<String> = listed.json().unwrap()["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_owned))
        .collect();
    assert!(ids[0].starts_with("claude"), "{ids:?}");
    assert_eq!(
        ids.last().map(String::as_str),
        Some("test-model"),
        "{ids:?}"
    );
    let one = get(&format!("{}/v1/models/test-model", forwarding.base_url())).await;
    assert_eq!(one.status, 200, "{}", one.text());
    // With --model every name maps to it: the upstream's ids are not offered.
    let models = get(&format!("{}/v1/models", good.base_url())).await;
    assert!(
        !models.text().contains("the upstream's own"),
        "{}",
        models.text()
    );

    // Ollama's address without /v1: the check says what is wrong before any request fails.
    let root = upstream.base_url().trim_end_matches("/v1").to_owned();
    let no_v1 = Bridge::start_with(&root, "check-no-v1", checked())
        .await
        .unwrap();
    assert!(
        log_shows(&no_v1, "base_url has no /v1").await,
        "{}",
        no_v1.log()
    );
    assert!(
        no_v1.log().contains("GET models answered 404"),
        "{}",
        no_v1.log()
    );

    // Nothing listening: a warning naming the address, and the bridge still serves.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let down = Bridge::start_with(&dead, "check-down", checked())
        .await
        .unwrap();
    assert!(log_shows(&down, "cannot reach").await, "{}", down.log());
    let health = get(&format!("{}/health", down.base_url())).await;
    assert_eq!(health.status, 200, "{}", health.text());
}
