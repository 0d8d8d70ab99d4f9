//! The official Anthropic SDKs (Python `anthropic`, TypeScript `@anthropic-ai/sdk`) through the real
//! bridge binary against a scripted OpenAI upstream: the SDK stream accumulators must accept the
//! streamed answer, and the final message must equal the non-streamed answer to the same script.
//! Raw HTTP checks of the same answers validate the SSE shape independently of the SDKs.
//!
//! Needs `cargo build -p claude-bridge` and `scripts/setup-e2e.sh` (see tests/README.md).

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail the test on purpose"
)]

use std::time::Duration;

use bridge_tests::bridge::{Bridge, BridgeOptions};
use bridge_tests::chunks::{
    CACHED_TOKENS, COMPLETION_TOKENS, ChatStream, PROMPT_TOKENS, parallel_tool_calls_stream,
    reasoning_text_stream, tool_call_stream,
};
use bridge_tests::clients::{Sdk, run_sdk};
use bridge_tests::upstream::{ScriptedResponse, Upstream};
use bridge_tests::{http, sse};
use serde_json::{Value, json};

const SDK_TIMEOUT: Duration = Duration::from_secs(40);
const RAW_TIMEOUT: Duration = Duration::from_secs(20);

/// Run both SDKs (stream then create) against one upstream script answering every request the same
/// way; check each SDK's streamed and non-streamed final messages agree, and return them.
async fn both_sdks(
    name: &str,
    scenario: &str,
    response: ScriptedResponse,
) -> (Vec<Value>, Upstream, Bridge) {
    let upstream = Upstream::always(response).await.unwrap();
    let bridge = Bridge::start(&upstream.base_url(), name).await.unwrap();
    let base = bridge.base_url();
    let (py, ts) = tokio::join!(
        run_sdk(Sdk::Python, &base, scenario, "both", SDK_TIMEOUT),
        run_sdk(Sdk::TypeScript, &base, scenario, "both", SDK_TIMEOUT)
    );
    let mut finals = Vec::new();
    for (sdk, report) in [(Sdk::Python, py), (Sdk::TypeScript, ts)] {
        let report = report.unwrap();
        let ctx = || {
            format!(
                "{} SDK report: {report:#}\n--- upstream:\n{}\n--- bridge log {}:\n{}",
                sdk.name(),
                upstream.dump(),
                bridge.log_path().display(),
                bridge.log()
            )
        };
        assert_eq!(
            report["stream"]["ok"],
            json!(true),
            "stream failed\n{}",
            ctx()
        );
        assert_eq!(
            report["create"]["ok"],
            json!(true),
            "create failed\n{}",
            ctx()
        );
        let streamed = &report["stream"]["message"];
        let created = &report["create"]["message"];
        assert_eq!(
            sse::comparable(streamed),
            sse::comparable(created),
            "streamed and non-streamed answers differ\n{}",
            ctx()
        );
        let events: Vec<&str> = report["stream"]["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(events.first(), Some(&"message_start"), "{}", ctx());
        assert_eq!(events.last(), Some(&"message_stop"), "{}", ctx());
        assert!(
            created["id"].as_str().is_some_and(|s| !s.is_empty()),
            "{}",
            ctx()
        );
        assert_eq!(created["type"], "message", "{}", ctx());
        assert_eq!(created["role"], "assistant", "{}", ctx());
        finals.push(created.clone());
    }
    (finals, upstream, bridge)
}

/// Stream the same request raw (with `?beta=true`, as Claude Code does) and non-streamed; validate the
/// SSE shape and that both fold to the same message.
async fn raw_checks(bridge: &Bridge, upstream: &Upstream, request: Value) -> Value {
    let mut streaming = request.clone();
    streaming["stream"] = json!(true);
    let url = format!("{}/v1/messages?beta=true", bridge.base_url());
    let r = http::send(
        "POST",
        &url,
        &[
            ("content-type", "application/json"),
            ("anthropic-version", "2023-06-01"),
            ("x-api-key", "sk-test"),
        ],
        Some(streaming.to_string().into_bytes()),
        RAW_TIMEOUT,
    )
    .await
    .unwrap();
    let ctx = |r: &http::HttpResponse| {
        format!(
            "status {} body:\n{}\n--- upstream:\n{}\n--- bridge log:\n{}",
            r.status,
            r.text(),
            upstream.dump(),
            bridge.log()
        )
    };
    assert_eq!(r.status, 200, "{}", ctx(&r));
    assert!(
        r.header("content-type")
            .unwrap_or_default()
            .starts_with("text/event-stream"),
        "{}",
        ctx(&r)
    );
    assert!(
        r.body_error.is_none(),
        "stream did not end cleanly: {:?}\n{}",
        r.body_error,
        ctx(&r)
    );
    let events = sse::parse(&r.body);
    if let Err(e) = sse::validate(&events) {
        panic!("malformed Anthropic stream: {e}\n{}", ctx(&r));
    }
    let streamed = sse::accumulate(&events).unwrap();
    let start = events[0].json();
    let input = start
        .pointer("/message/usage/input_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    assert!(
        input > 0,
        "message_start usage.input_tokens must not be 0 (pitfalls 5)\n{}",
        ctx(&r)
    );

    let nr = http::post_messages(&bridge.base_url(), &request, RAW_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(nr.status, 200, "{}", ctx(&nr));
    let created = nr.json().unwrap();
    assert_eq!(
        sse::comparable(&streamed),
        sse::comparable(&created),
        "raw stream vs non-stream\n{}",
        ctx(&nr)
    );
    // Usage: OpenAI prompt_tokens include the cached ones; Anthropic input_tokens exclude them.
    assert_eq!(
        created["usage"]["input_tokens"],
        json!(PROMPT_TOKENS - CACHED_TOKENS),
        "{}",
        ctx(&nr)
    );
    assert_eq!(
        created["usage"]["cache_read_input_tokens"],
        json!(CACHED_TOKENS),
        "{}",
        ctx(&nr)
    );
    assert_eq!(
        created["usage"]["output_tokens"],
        json!(COMPLETION_TOKENS),
        "{}",
        ctx(&nr)
    );
    created
}

fn text_of(content: &Value) -> Vec<Value> {
    content
        .as_array()
        .unwrap()
        .iter()
        .map(|b| json!({"type": b["type"], "text": b["text"]}))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdks_accumulate_a_text_stream() {
    let parts = ["Hel", "lo, ", "wörld ", "🌍", "!"];
    let script = ChatStream::new()
        .role()
        .texts(&parts)
        .finish("stop")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .build();
    let (finals, upstream, bridge) = both_sdks("sdk-text", "text", script).await;
    for m in &finals {
        assert_eq!(
            text_of(&m["content"]),
            vec![json!({"type": "text", "text": parts.concat()})]
        );
        assert_eq!(m["stop_reason"], "end_turn");
        assert_eq!(m["usage"]["output_tokens"], json!(COMPLETION_TOKENS));
        assert_eq!(
            m["usage"]["input_tokens"],
            json!(PROMPT_TOKENS - CACHED_TOKENS)
        );
        assert_eq!(m["usage"]["cache_read_input_tokens"], json!(CACHED_TOKENS));
    }
    let req = json!({"model": "claude-sonnet-4-6", "max_tokens": 256, "messages": [{"role": "user", "content": "Say hello."}]});
    raw_checks(&bridge, &upstream, req).await;
    // What the upstream got: the mapped model, streaming with usage, the user text.
    let first = &upstream.model_requests()[0];
    assert_eq!(first.body["model"], "test-model");
    assert_eq!(
        first.body["messages"].as_array().unwrap().last().unwrap()["role"],
        "user"
    );
    if first.is_stream() {
        assert_eq!(
            first.body["stream_options"]["include_usage"],
            json!(true),
            "{}",
            upstream.dump()
        );
    }
    assert_eq!(
        first.header("authorization"),
        Some("Bearer sk-upstream-test"),
        "upstream key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdks_accumulate_text_split_at_every_third_byte() {
    // SSE lines, JSON and UTF-8 characters all split across network writes (pitfalls 15).
    let script = ChatStream::new()
        .role()
        .texts(&["Grüße ", "aus ", "Köln ", "🚀🚀"])
        .finish("stop")
        .usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS)
        .split_every(3)
        .delay(Duration::from_millis(1))
        .build();
    let (finals, _upstream, _bridge) = both_sdks("sdk-split", "text", script).await;
    for m in &finals {
        assert_eq!(
            text_of(&m["content"]),
            vec![json!({"type": "text", "text": "Grüße aus Köln 🚀🚀"})]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdks_accumulate_a_tool_call_stream() {
    let script = tool_call_stream(
        "call_weather_1",
        "get_weather",
        &["{\"ci", "ty\": \"Par", "is\", \"unit\"", ": \"c\"}"],
    );
    let (finals, upstream, bridge) = both_sdks("sdk-tool", "tools", script).await;
    for m in &finals {
        let content = m["content"].as_array().unwrap();
        assert_eq!(content.len(), 1, "{m:#}");
        assert_eq!(content[0]["type"], "tool_use");
        assert_eq!(content[0]["name"], "get_weather");
        assert_eq!(content[0]["input"], json!({"city": "Paris", "unit": "c"}));
        assert!(content[0]["id"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!(m["stop_reason"], "tool_use");
    }
    let req = json!({"model": "claude-sonnet-4-6", "max_tokens": 256,
        "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "weather?"}]});
    raw_checks(&bridge, &upstream, req).await;
    let first = &upstream.model_requests()[0];
    let tools = first.tools();
    assert!(
        tools
            .iter()
            .any(|t| t["type"] == "function" && t["function"]["name"] == "get_weather"),
        "tools must reach the upstream as functions: {}",
        upstream.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdks_accumulate_interleaved_parallel_tool_calls() {
    let script = parallel_tool_calls_stream(&[
        ("call_p0", "get_weather", &["{\"city\"", ": \"Pa", "ris\"}"]),
        ("call_p1", "get_time", &["{\"ci", "ty\": \"Paris\"", "}"]),
    ]);
    let (finals, upstream, bridge) = both_sdks("sdk-parallel", "tools", script).await;
    for m in &finals {
        let content = m["content"].as_array().unwrap();
        let calls: Vec<(Value, Value)> = content
            .iter()
            .map(|b| (b["name"].clone(), b["input"].clone()))
            .collect();
        assert_eq!(
            calls,
            vec![
                (json!("get_weather"), json!({"city": "Paris"})),
                (json!("get_time"), json!({"city": "Paris"}))
            ],
            "{m:#}"
        );
        assert_ne!(content[0]["id"], content[1]["id"]);
        assert_eq!(m["stop_reason"], "tool_use");
    }
    let req = json!({"model": "claude-sonnet-4-6", "max_tokens": 256, "messages": [{"role": "user", "content": "x"}]});
    raw_checks(&bridge, &upstream, req).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdks_accumulate_a_reasoning_stream() {
    let reasoning = ["Let me ", "think about ", "Paris."];
    let script = reasoning_text_stream(&reasoning, &["It is ", "sunny."]);
    let (finals, upstream, bridge) = both_sdks("sdk-reasoning", "thinking", script).await;
    for m in &finals {
        let content = m["content"].as_array().unwrap();
        assert_eq!(content.len(), 2, "{m:#}");
        assert_eq!(content[0]["type"], "thinking", "{m:#}");
        assert_eq!(content[0]["thinking"], reasoning.concat());
        assert!(
            content[0]["signature"].is_string(),
            "thinking blocks need a signature field (pitfalls 2): {m:#}"
        );
        assert_eq!(
            (&content[1]["type"], &content[1]["text"]),
            (&json!("text"), &json!("It is sunny.")),
            "{m:#}"
        );
        assert_eq!(m["stop_reason"], "end_turn");
    }
    let req = json!({"model": "claude-sonnet-4-6", "max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [{"role": "user", "content": "x"}]});
    raw_checks(&bridge, &upstream, req).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_and_wasm_engines_give_the_same_answers() {
    let script = parallel_tool_calls_stream(&[
        ("call_e0", "get_weather", &["{\"city\"", ": \"Oslo\"}"]),
        ("call_e1", "get_time", &["{\"city\": ", "\"Oslo\"}"]),
    ]);
    let req = json!({"model": "claude-sonnet-4-6", "max_tokens": 256, "stream": true,
                     "messages": [{"role": "user", "content": "x"}]});
    let mut results = Vec::new();
    for engine in ["native", "wasm"] {
        let upstream = Upstream::always(script.clone()).await.unwrap();
        let bridge = Bridge::start_with(
            &upstream.base_url(),
            &format!("engine-{engine}"),
            BridgeOptions::default().engine(engine),
        )
        .await
        .unwrap();
        let r = http::post_messages(&bridge.base_url(), &req, RAW_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{engine}: {}\n{}", r.text(), bridge.log());
        let events = sse::parse(&r.body);
        sse::validate(&events).unwrap_or_else(|e| panic!("{engine}: {e}"));
        let names: Vec<String> = sse::names(&events)
            .into_iter()
            .filter(|n| n != "ping")
            .collect();
        results.push((
            engine,
            names,
            sse::comparable(&sse::accumulate(&events).unwrap()),
            upstream.model_requests()[0].body.clone(),
        ));
    }
    assert_eq!(
        results[0].1, results[1].1,
        "event sequences differ between engines"
    );
    assert_eq!(
        results[0].2, results[1].2,
        "messages differ between engines"
    );
    assert_eq!(
        results[0].3, results[1].3,
        "upstream requests differ between engines"
    );
}

/// Issue 33 item 2: litellm's `anthropic/…` structured output sends the beta's top-level
/// `output_format`; the bridge reads it as `output_config.format`, so a Chat upstream gets
/// the schema as `response_format` and the caller's JSON parses (it was dropped: prose came
/// back and litellm's caller failed to parse it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn litellm_structured_output_reaches_the_upstream() {
    let upstream = Upstream::start(|req| {
        let schema = &req.body["response_format"]["json_schema"]["schema"];
        let answer = if schema["properties"]["age"].is_object() {
            r#"{"name":"Ada Lovelace","age":36}"#
        } else {
            "Ada Lovelace was a mathematician."
        };
        ChatStream::new()
            .role()
            .text(answer)
            .finish("stop")
            .usage(PROMPT_TOKENS, COMPLETION_TOKENS, 0)
            .build()
    })
    .await
    .unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "litellm")
        .await
        .unwrap();
    let mut cmd = tokio::process::Command::new(bridge_tests::clients::python_bin().unwrap());
    cmd.arg(bridge_tests::clients::e2e_dir().join("app_sdks.py"))
        .args([bridge.base_url().as_str(), "litellm-structured"])
        .env_remove("ANTHROPIC_API_KEY")
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True");
    let report = bridge_tests::clients::run_driver(cmd, SDK_TIMEOUT, "litellm driver")
        .await
        .unwrap();
    let ctx = format!(
        "{report}\n{}\n--- bridge log:\n{}",
        upstream.dump(),
        bridge.log()
    );
    assert_eq!(report["ok"], true, "{ctx}");
    assert_eq!(
        report["parsed"],
        json!({"name": "Ada Lovelace", "age": 36}),
        "{ctx}"
    );
    let sent = &upstream.requests()[0].body;
    assert_eq!(sent["response_format"]["type"], "json_schema", "{ctx}");
}

/// Issue 33 item 3: LangChain JS reads input and cached tokens from `message_start` alone. An
/// upstream that reports usage on every chunk (vLLM, SGLang with `continuous_usage_stats`, which
/// `--continuous-usage-stats` asks for) lets the bridge announce the real counts there: the
/// client sees 1,234 input tokens and its 1,000 cache hits, not the estimate. One that reports
/// only at the end gets the prompt counted with the model's tokenizer (`--tokenizer auto`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_sees_early_usage_in_message_start() {
    let upstream = Upstream::start(|req| {
        let continuous = req.body["stream_options"]["continuous_usage_stats"] == true;
        let usage = |done: u64| {
            json!({"prompt_tokens": 1234, "completion_tokens": done, "total_tokens": 1234 + done,
                "prompt_tokens_details": {"cached_tokens": 1000}})
        };
        let chunk = |delta: Value, finish: Value, done: u64| {
            let mut c = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1,
                "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            if continuous {
                c["usage"] = usage(done);
            }
            c
        };
        ChatStream::new()
            .raw(chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
                0,
            ))
            .raw(chunk(json!({"content": "Hello"}), Value::Null, 1))
            .raw(chunk(json!({"content": "!"}), json!("stop"), 2))
            .raw(
                json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [], "usage": usage(2)}),
            )
            .build()
    })
    .await
    .unwrap();
    let bridge = Bridge::start_with(
        &upstream.base_url(),
        "langchain-usage",
        BridgeOptions::default().args(&["--continuous-usage-stats"]),
    )
    .await
    .unwrap();
    let report = langchain(&bridge).await;
    let ctx = format!(
        "{report}\n{}\n--- bridge log:\n{}",
        upstream.dump(),
        bridge.log()
    );
    assert_eq!(report["ok"], true, "{ctx}");
    assert_eq!(report["text"], "Hello!", "{ctx}");
    assert_eq!(report["usage"]["input_tokens"], 1234, "{ctx}");
    assert_eq!(
        report["usage"]["input_token_details"]["cache_read"], 1000,
        "{ctx}"
    );
    assert_eq!(report["usage"]["output_tokens"], 2, "{ctx}");
    let sent = &upstream.requests()[0].body;
    assert_eq!(
        sent["stream_options"]["continuous_usage_stats"], true,
        "{ctx}"
    );

    // An upstream that reports usage only at the end, and `--tokenizer auto` on an OpenAI model:
    // message_start holds the prompt counted with o200k_base. Expected, from OpenAI's Python
    // tiktoken 0.14.0 ("user": 1 token, "Say hello.": 3) and its formula (3 per message, 3 to
    // prime the answer): 10.
    let counted = Bridge::start_with(
        &upstream.base_url(),
        "langchain-tokenizer",
        BridgeOptions {
            model: Some(String::from("gpt-4o")),
            ..BridgeOptions::default()
        }
        .args(&["--tokenizer", "auto"]),
    )
    .await
    .unwrap();
    let report = langchain(&counted).await;
    let ctx = format!("{report}\n--- bridge log:\n{}", counted.log());
    assert_eq!(report["ok"], true, "{ctx}");
    assert_eq!(report["usage"]["input_tokens"], 10, "{ctx}");
    let sent = &upstream.requests()[1].body;
    assert!(
        sent["stream_options"]
            .get("continuous_usage_stats")
            .is_none(),
        "{ctx}"
    );
}

async fn langchain(bridge: &Bridge) -> Value {
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(bridge_tests::clients::e2e_dir().join("langchain_usage.mjs"))
        .arg(bridge.base_url())
        .current_dir(bridge_tests::clients::e2e_dir())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL");
    bridge_tests::clients::run_driver(cmd, SDK_TIMEOUT, "LangChain driver")
        .await
        .unwrap()
}

/// The page of the web fetch tests: the secret number the answer must quote, a link to follow.
const FETCH_PAGE: &str = r#"<!doctype html><html><head><title>Quokka facts</title></head>
<body><h1>Quokkas</h1><p>The quokka's secret number is <b>4521</b>.</p>
<p><a href="/more.html">More facts</a></p></body></html>"#;

/// An upstream that, offered `web_fetch`, fetches the page the user named and a made-up address
/// in one round, then answers with the secret number it was given (or "nothing").
async fn web_fetch_upstream(page: String, made_up: String) -> Upstream {
    Upstream::start(move |req: &bridge_tests::upstream::RecordedRequest| {
        let offers_fetch = req
            .tools()
            .iter()
            .any(|t| t["function"]["name"] == "web_fetch");
        if !req.is_chat() || !offers_fetch {
            bridge_tests::upstream::background_response()
        } else if req.has_tool_result() {
            let text = req.all_text();
            let found = if text.contains("4521") {
                "4521"
            } else {
                "nothing"
            };
            bridge_tests::chunks::text_stream(&["The page says: ", found, "."])
        } else {
            let page = format!(r#"{{"url":"{page}"}}"#);
            let made_up = format!(r#"{{"url":"{made_up}"}}"#);
            parallel_tool_calls_stream(&[
                ("call_page", "web_fetch", &[page.as_str()]),
                ("call_made_up", "web_fetch", &[made_up.as_str()]),
            ])
        }
    })
    .await
    .unwrap()
}

/// The `web_fetch_tool_result` content answering `server_tool_use` `call` of `message`.
fn fetch_result<'a>(message: &'a Value, input_url: &str) -> &'a Value {
    let blocks = message["content"].as_array().unwrap();
    let id = blocks
        .iter()
        .find(|b| b["type"] == "server_tool_use" && b["input"]["url"] == input_url)
        .unwrap_or_else(|| panic!("no server_tool_use for {input_url}: {message:#}"))["id"]
        .as_str()
        .unwrap();
    &blocks
        .iter()
        .find(|b| b["type"] == "web_fetch_tool_result" && b["tool_use_id"] == id)
        .unwrap_or_else(|| panic!("no result for {input_url}: {message:#}"))["content"]
}

/// The bridge runs `web_fetch` for a Chat upstream: the official Python SDK sends the tool, the
/// model asks for the page the user named and for an address it made up; the bridge fetches
/// the first from a real web server (Python's http.server) — its text reaches the model, a
/// `web_fetch_result` document reaches the SDK — and refuses the second without a request
/// (`url_not_in_prior_context`). Without `--fetch-allow-private` the loopback page itself is
/// refused (`url_not_accessible`, the model told how to allow it) and the site sees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_fetch_reads_a_named_page_and_refuses_made_up_and_private_addresses() {
    let mut site = bridge_tests::website::Website::start(&[("quokka.html", FETCH_PAGE.as_bytes())])
        .await
        .unwrap();
    let page = format!("{}/quokka.html", site.base_url());
    let made_up = format!("{}/quokka.html?leak=the-users-secrets", site.base_url());
    let upstream = web_fetch_upstream(page.clone(), made_up.clone()).await;
    let env = [("E2E_FETCH_URL", page.as_str())];

    let opts = BridgeOptions::default().args(&["--fetch-allow-private"]);
    let bridge = Bridge::start_with(&upstream.base_url(), "sdk-web-fetch", opts)
        .await
        .unwrap();
    let report = bridge_tests::clients::run_sdk_with(
        Sdk::Python,
        &bridge.base_url(),
        "web_fetch",
        "both",
        &env,
        SDK_TIMEOUT,
    )
    .await
    .unwrap();
    let ctx = format!(
        "report: {report:#}\n--- site: {:?}\n--- upstream:\n{}\n--- bridge log:\n{}",
        site.paths(),
        upstream.dump(),
        bridge.log()
    );
    for mode in ["stream", "create"] {
        assert_eq!(report[mode]["ok"], json!(true), "{mode}\n{ctx}");
        let message = &report[mode]["message"];
        let fetched = fetch_result(message, &page);
        assert_eq!(fetched["type"], "web_fetch_result", "{ctx}");
        assert_eq!(fetched["url"], page.as_str(), "{ctx}");
        assert_eq!(fetched["content"]["title"], "Quokka facts", "{ctx}");
        let text = fetched["content"]["source"]["data"].as_str().unwrap();
        // html2text writes the page as Markdown-like text: bold as **…**, links as footnotes.
        assert!(
            text.contains("The quokka's secret number is **4521**.")
                && text.contains("[1]: /more.html"),
            "{ctx}"
        );
        assert!(
            fetched["retrieved_at"].as_str().unwrap().ends_with('Z'),
            "{ctx}"
        );
        let refused = fetch_result(message, &made_up);
        assert_eq!(refused["error_code"], "url_not_in_prior_context", "{ctx}");
        let last = message["content"].as_array().unwrap().last().unwrap();
        assert_eq!(last["text"], "The page says: 4521.", "{ctx}");
        assert_eq!(
            message["usage"]["server_tool_use"]["web_fetch_requests"], 1,
            "{ctx}"
        );
    }
    assert_eq!(
        site.paths(),
        ["/quokka.html", "/quokka.html"],
        "one fetch per answer, never the made-up address\n{ctx}"
    );
    drop(bridge);

    // The same bridge without --fetch-allow-private: a loopback page is not opened.
    let bridge = Bridge::start(&upstream.base_url(), "sdk-web-fetch-private")
        .await
        .unwrap();
    let report = bridge_tests::clients::run_sdk_with(
        Sdk::Python,
        &bridge.base_url(),
        "web_fetch",
        "stream",
        &env,
        SDK_TIMEOUT,
    )
    .await
    .unwrap();
    let ctx = format!("report: {report:#}\n--- bridge log:\n{}", bridge.log());
    assert_eq!(report["stream"]["ok"], json!(true), "{ctx}");
    let message = &report["stream"]["message"];
    assert_eq!(
        fetch_result(message, &page)["error_code"],
        "url_not_accessible",
        "{ctx}"
    );
    let last = message["content"].as_array().unwrap().last().unwrap();
    assert_eq!(last["text"], "The page says: nothing.", "{ctx}");
    let told = upstream
        .model_requests()
        .iter()
        .rev()
        .find(|r| r.has_tool_result())
        .map(bridge_tests::upstream::RecordedRequest::all_text)
        .unwrap_or_default();
    assert!(told.contains("--fetch-allow-private"), "{told}\n{ctx}");
    assert_eq!(site.paths().len(), 2, "the site saw no new request\n{ctx}");
    assert!(site.is_running());
}
