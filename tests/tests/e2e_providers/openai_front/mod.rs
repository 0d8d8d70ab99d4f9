//! The OpenAI fronts end to end (issue 12): the official OpenAI TypeScript SDK (`openai`, its
//! stream helpers assemble and check every stream) talks Chat Completions and Responses to the
//! real bridge, whose provider is a scripted OpenAI-compatible upstream. What each API gets back
//! — text, tool calls, Codex's free-form `apply_patch` as a `custom_tool_call`, usage, errors in
//! OpenAI's envelope — is read from what the SDK returns or raises.
//!
//! (A module of `e2e_providers`, so it shares that test binary.)

use std::time::Duration;

use bridge_tests::bridge::Bridge;
use bridge_tests::chunks::{
    parallel_tool_calls_stream, reasoning_text_stream, text_stream, tool_call_stream,
};
use bridge_tests::clients::{Sdk, e2e_dir, python_bin, run};
use bridge_tests::upstream::{RecordedRequest, ScriptedResponse, Upstream};
use serde_json::Value;

const T: Duration = Duration::from_secs(30);
const PATCH: &str = "*** Begin Patch\n*** Add File: hi.txt\n+hi\n*** End Patch";

/// One job of the `openai` SDK driver: API, scenario, mode (see `tests/e2e/openai_client.mjs`).
type Job<'a> = (&'a str, &'a str, &'a str);

/// The reports of jobs of the `openai` SDK driver, looked up by job.
struct Reports<'a>(Vec<(Job<'a>, Value)>);

impl<'a> Reports<'a> {
    /// Runs the `openai` SDK driver of `lang` (`tests/e2e/openai_client.{py,mjs}`) once for all
    /// of `jobs` (starting the SDK costs more than a job: one process per job made this
    /// module's tests take a minute).
    async fn run(bridge: &Bridge, lang: Sdk, jobs: &[Job<'a>]) -> Self {
        let mut cmd = match lang {
            Sdk::Python => {
                let mut c = tokio::process::Command::new(python_bin().unwrap());
                c.arg(e2e_dir().join("openai_client.py"));
                c
            }
            Sdk::TypeScript => {
                let mut c = tokio::process::Command::new("node");
                c.arg(e2e_dir().join("openai_client.mjs"));
                c
            }
        };
        cmd.arg(format!("{}/v1", bridge.base_url()))
            .args(
                jobs.iter()
                    .flat_map(|(api, scenario, mode)| [api, scenario, mode]),
            )
            .current_dir(e2e_dir())
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL");
        // Each job is held to `T` by the client's own timeout; the process gets that per job.
        let limit = T * u32::try_from(jobs.len()).unwrap();
        let out = run(cmd, limit, &format!("{} openai SDK driver", lang.name()))
            .await
            .unwrap();
        assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
        let reports: Vec<Value> = out
            .stdout
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| {
                serde_json::from_str(l)
                    .map_err(|e| format!("{e}: {l}"))
                    .unwrap()
            })
            .collect();
        assert_eq!(
            reports.len(),
            jobs.len(),
            "one report per job: {}\n{}",
            out.stdout,
            out.stderr
        );
        Self(jobs.iter().copied().zip(reports).collect())
    }

    fn get(&self, api: &str, scenario: &str, mode: &str) -> Value {
        self.0
            .iter()
            .find(|(job, _)| *job == (api, scenario, mode))
            .map(|(_, report)| report.clone())
            .ok_or_else(|| format!("no job {api} {scenario} {mode}"))
            .unwrap()
    }
}

async fn post(url: &str, body: &Value) -> bridge_tests::http::HttpResponse {
    let headers = [("content-type", "application/json")];
    bridge_tests::http::send(
        "POST",
        url,
        &headers,
        Some(body.to_string().into_bytes()),
        T,
    )
    .await
    .unwrap()
}

/// The upstream's answer by what was asked: a tool call when tools were offered, else text.
fn scripted(req: &RecordedRequest) -> ScriptedResponse {
    let tools = req.tools();
    let named = |name: &str| tools.iter().any(|t| t["function"]["name"] == name);
    if req.all_text().contains("Think, then") {
        reasoning_text_stream(&["Let me ", "think."], &["Hel", "lo!"])
    } else if named("get_time") {
        parallel_tool_calls_stream(&[
            ("call_w", "get_weather", &["{\"city\":", "\"Paris\"}"]),
            ("call_t", "get_time", &["{\"city\":\"Par", "is\"}"]),
        ])
    } else if named("apply_patch") {
        let args = serde_json::json!({ "input": PATCH }).to_string();
        let (a, b) = args.split_at(args.len() / 2);
        tool_call_stream("call_patch", "apply_patch", &[a, b])
    } else if named("get_weather") {
        tool_call_stream("call_w", "get_weather", &["{\"city\":", "\"Paris\"}"])
    } else {
        text_stream(&["Hel", "lo!"])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_reads_chat_completions_and_responses_from_any_provider() {
    let upstream = Upstream::start(scripted).await.unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "openai-front")
        .await
        .unwrap();
    let ctx = || format!("{}\n--- bridge log:\n{}", upstream.dump(), bridge.log());

    let mut jobs: Vec<Job<'_>> = vec![("models", "-", "-")];
    for mode in ["stream", "create"] {
        for scenario in ["text", "tools", "parallel", "reasoning", "custom"] {
            jobs.push(("responses", scenario, mode));
            if scenario != "custom" {
                jobs.push(("chat", scenario, mode));
            }
        }
    }
    for lang in Sdk::ALL {
        let reports = Reports::run(&bridge, lang, &jobs).await;
        for mode in ["stream", "create"] {
            // Chat Completions: text, then a tool call.
            let r = reports.get("chat", "text", mode);
            assert_eq!(r["ok"], true, "chat text {mode}: {r}\n{}", ctx());
            let choice = &r["result"]["choices"][0];
            assert_eq!(choice["message"]["content"], "Hello!", "{r}");
            assert_eq!(choice["finish_reason"], "stop", "{r}");
            assert_eq!(
                r["result"]["model"], "gpt-test",
                "the client's model name comes back"
            );
            assert!(
                r["result"]["usage"]["completion_tokens"].as_u64() > Some(0),
                "{r}"
            );

            let r = reports.get("chat", "tools", mode);
            assert_eq!(r["ok"], true, "chat tools {mode}: {r}\n{}", ctx());
            let choice = &r["result"]["choices"][0];
            assert_eq!(choice["finish_reason"], "tool_calls", "{r}");
            let call = &choice["message"]["tool_calls"][0];
            assert_eq!(call["function"]["name"], "get_weather", "{r}");
            let args: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(args, serde_json::json!({"city": "Paris"}), "{r}");

            // Responses: text, a function call, and Codex's custom tool.
            let r = reports.get("responses", "text", mode);
            assert_eq!(r["ok"], true, "responses text {mode}: {r}\n{}", ctx());
            assert_eq!(r["result"]["status"], "completed", "{r}");
            assert_eq!(r["result"]["output_text"], "Hello!", "{r}");
            if mode == "stream" {
                let events: Vec<&str> = r["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                assert_eq!(events.first(), Some(&"response.created"), "{r}");
                assert_eq!(events.last(), Some(&"response.completed"), "{r}");
            }

            let r = reports.get("responses", "tools", mode);
            assert_eq!(r["ok"], true, "responses tools {mode}: {r}\n{}", ctx());
            let item = &r["result"]["output"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone();
            assert_eq!(item["type"], "function_call", "{r}");
            assert_eq!(item["name"], "get_weather", "{r}");
            assert_eq!(item["call_id"], "call_w", "{r}");

            let r = reports.get("responses", "custom", mode);
            assert_eq!(r["ok"], true, "responses custom {mode}: {r}\n{}", ctx());
            let item = &r["result"]["output"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone();
            assert_eq!(item["type"], "custom_tool_call", "{r}");
            assert_eq!(item["name"], "apply_patch", "{r}");
            assert_eq!(item["input"], PATCH, "the raw patch text, not JSON: {r}");
        }

        // Parallel calls and reasoning; and each streamed answer, folded by the SDK's stream
        // helper, equals the non-streamed answer (ids and times aside).
        for scenario in ["text", "tools", "parallel", "reasoning"] {
            let streamed = reports.get("chat", scenario, "stream");
            let chat = reports.get("chat", scenario, "create");
            assert_eq!(
                chat_essence(&streamed),
                chat_essence(&chat),
                "chat {scenario}: streamed vs created\n{streamed}\n{chat}"
            );
            let streamed = reports.get("responses", scenario, "stream");
            let responses = reports.get("responses", scenario, "create");
            assert_eq!(
                responses_essence(&streamed),
                responses_essence(&responses),
                "responses {scenario}: streamed vs created\n{streamed}\n{responses}"
            );
            let items = responses_essence(&responses)["output"].clone();
            match scenario {
                "parallel" => {
                    let calls = chat_essence(&chat)["tool_calls"].clone();
                    assert_eq!(calls.as_array().map(Vec::len), Some(2), "{chat}");
                    let functions = items
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|i| i["type"] == "function_call")
                        .count();
                    assert_eq!(functions, 2, "{items}");
                }
                "reasoning" => {
                    assert_eq!(
                        chat["result"]["choices"][0]["message"]["reasoning_content"],
                        "Let me think.",
                        "{chat}"
                    );
                    assert_eq!(items[0]["type"], "reasoning", "{items}");
                    assert_eq!(items[0]["text"], "Let me think.", "{items}");
                }
                _ => {}
            }
        }

        // The model list reads as OpenAI's (the same body serves Anthropic clients).
        let r = reports.get("models", "-", "-");
        assert_eq!(r["ok"], true, "models: {r}");
        let ids: Vec<&str> = r["result"]["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["id"].as_str())
            .collect();
        assert!(ids.contains(&"claude-sonnet-4-6"), "{r}");
        assert_eq!(r["result"]["first"]["object"], "model", "{r}");
        assert!(r["result"]["first"]["owned_by"].is_string(), "{r}");
    }

    // The custom tool reached the upstream as a function taking one string.
    let patch_request = upstream
        .model_requests()
        .into_iter()
        .find(|r| {
            r.tools()
                .iter()
                .any(|t| t["function"]["name"] == "apply_patch")
        })
        .unwrap();
    let tool = patch_request
        .tools()
        .iter()
        .find(|t| t["function"]["name"] == "apply_patch")
        .unwrap()
        .clone();
    assert_eq!(
        tool["function"]["parameters"]["properties"]["input"]["type"], "string",
        "{tool}"
    );
    assert!(
        tool["function"]["description"]
            .as_str()
            .unwrap()
            .contains("Begin Patch"),
        "the grammar is in the description: {tool}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_clients_get_openai_errors() {
    let upstream = Upstream::always(ScriptedResponse::openai_error(
        429,
        "Rate limit reached for requests",
        "requests",
        Some("rate_limit_exceeded"),
    ))
    .await
    .unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "openai-front-errors")
        .await
        .unwrap();
    let jobs: Vec<Job<'_>> = ["chat", "responses"]
        .into_iter()
        .flat_map(|api| ["stream", "create"].map(|mode| (api, "text", mode)))
        .collect();
    for lang in Sdk::ALL {
        let reports = Reports::run(&bridge, lang, &jobs).await;
        for api in ["chat", "responses"] {
            for mode in ["stream", "create"] {
                let r = reports.get(api, "text", mode);
                assert_eq!(r["ok"], false, "{} {api} {mode}: {r}", lang.name());
                assert_eq!(r["error"]["status"], 429, "{api} {mode}: {r}");
                assert_eq!(r["error"]["class"], "RateLimitError", "{api} {mode}: {r}");
                assert!(
                    r["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("Rate limit reached"),
                    "{api} {mode}: {r}"
                );
            }
        }
    }

    // An upstream that breaks off mid-answer: the stream ends in a way the SDK reports (an
    // error chunk for Chat, `response.failed` for Responses), never as a clean answer.
    let cut = Upstream::always(
        bridge_tests::chunks::ChatStream::new()
            .role()
            .text("Hel")
            .disconnect()
            .build(),
    )
    .await
    .unwrap();
    let cut_bridge = Bridge::start(&cut.base_url(), "openai-front-cut")
        .await
        .unwrap();
    let jobs = [
        ("chat", "text", "stream"),
        ("responses", "text", "stream"),
        ("chat", "text", "create"),
    ];
    for lang in Sdk::ALL {
        let reports = Reports::run(&cut_bridge, lang, &jobs).await;
        let r = reports.get("chat", "text", "stream");
        assert_eq!(r["ok"], false, "a cut Chat stream must raise: {r}");
        assert_eq!(r["error"]["class"], "APIError", "{r}");
        let r = reports.get("responses", "text", "stream");
        let failed = r["ok"] == false || r["result"]["status"] == "failed";
        assert!(failed, "a cut Responses stream must fail: {r}");
        let r = reports.get("chat", "text", "create");
        assert_eq!(
            r["ok"], false,
            "a cut answer is an error, not half a message: {r}"
        );
    }

    // A request the front cannot take: 400 in OpenAI's envelope, naming the field.
    let response = post(
        &format!("{}/v1/chat/completions", bridge.base_url()),
        &serde_json::json!({"model": "gpt-test", "n": 2,
                            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(response.status, 400, "{}", response.text());
    let body = response.json().unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert_eq!(body["error"]["param"], "n", "{body}");

    // A wrong client key on an OpenAI route is an OpenAI error too.
    let keyed = Bridge::start_with(
        &upstream.base_url(),
        "openai-front-key",
        bridge_tests::bridge::BridgeOptions::default().args(&["--client-key", "sk-bridge"]),
    )
    .await
    .unwrap();
    let response = post(
        &format!("{}/v1/responses", keyed.base_url()),
        &serde_json::json!({"model": "gpt-test", "input": "hi"}),
    )
    .await;
    assert_eq!(response.status, 401, "{}", response.text());
    let body = response.json().unwrap();
    assert!(
        body["error"]["message"].is_string() && body.get("type").is_none(),
        "{body}"
    );
}

/// The real OpenAI Codex CLI (pinned 0.169.0), started by `claude-bridge codex` with its
/// throwaway CODEX_HOME, runs a task — reasoning and two parallel `exec_command` calls, a file
/// written with its free-form `apply_patch` tool (a `custom` tool the upstream only sees as a
/// tool taking one string), then an answer — on a Chat Completions upstream and on the
/// Anthropic Messages pass-through (where the signed thinking must come back with the history).
/// Every tool really runs in the work directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_its_tools_through_the_bridge_on_chat_and_anthropic_upstreams() {
    use bridge_tests::codex::{
        ANSWER, CodexTurn, EXEC_CMD, EXEC_CMD_2, PATCH as CODEX_PATCH, REASONING, run_task,
    };
    let chat = Upstream::start(|req: &RecordedRequest| {
        let offered = |name: &str| req.tools().iter().any(|t| t["function"]["name"] == name);
        match CodexTurn::after(req.tool_messages().len()) {
            CodexTurn::Exec if offered("exec_command") => {
                let first = serde_json::json!({ "cmd": EXEC_CMD }).to_string();
                let second = serde_json::json!({ "cmd": EXEC_CMD_2 }).to_string();
                let calls: &[(&str, &str, &[&str])] = &[
                    ("call_exec", "exec_command", &[&first]),
                    ("call_exec_2", "exec_command", &[&second]),
                ];
                bridge_tests::chunks::tool_call_builder(
                    bridge_tests::chunks::ChatStream::new()
                        .role()
                        .reasoning(REASONING),
                    calls,
                )
                .finish("tool_calls")
                .build()
            }
            CodexTurn::Patch if offered("apply_patch") => {
                let args = serde_json::json!({ "input": CODEX_PATCH }).to_string();
                tool_call_stream("call_patch", "apply_patch", &[&args])
            }
            _ => text_stream(&[ANSWER]),
        }
    })
    .await
    .unwrap();
    let args = |provider: &str, base: String| -> Vec<String> {
        [
            "--provider",
            provider,
            "--base-url",
            &base,
            "--model",
            "qwen3-coder",
        ]
        .map(String::from)
        .to_vec()
    };
    run_task(&args("openai", chat.base_url()), &[], &|| chat.dump())
        .await
        .unwrap();
    let requests = chat.model_requests();
    assert!(
        requests.iter().all(|r| r.body["model"] == "qwen3-coder"),
        "{}",
        chat.dump()
    );
    assert!(
        requests.iter().any(|r| r.tool_messages().len() >= 2),
        "the apply_patch output went back to the model\n{}",
        chat.dump()
    );

    let key = "sk-ant-api03-codex";
    let anthropic = Upstream::start(move |req: &RecordedRequest| {
        use bridge_tests::anthropic_upstream::{self as anthropic, Block, Credentials, Message};
        let credentials = Credentials {
            api_keys: vec![key.into()],
            ..Credentials::default()
        };
        if let Some(refused) = anthropic::refusal(req, &credentials) {
            return refused;
        }
        let results = req.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .count();
        let pieces = |input: Value| vec![input.to_string()];
        match CodexTurn::after(results) {
            CodexTurn::Exec => Message {
                blocks: vec![
                    Block::Thinking(REASONING.into(), THINKING_SIGNATURE.into()),
                    Block::Text(vec!["Running both.".into()]),
                    Block::ToolUse(
                        "toolu_exec".into(),
                        "exec_command".into(),
                        pieces(serde_json::json!({ "cmd": EXEC_CMD })),
                    ),
                    Block::ToolUse(
                        "toolu_exec_2".into(),
                        "exec_command".into(),
                        pieces(serde_json::json!({ "cmd": EXEC_CMD_2 })),
                    ),
                ],
                stop_reason: "tool_use".into(),
                usage: (300, 60),
            }
            .answer(req),
            CodexTurn::Patch => Message::tool_call(
                "Patching.",
                "toolu_patch",
                "apply_patch",
                &pieces(serde_json::json!({ "input": CODEX_PATCH })),
            )
            .answer(req),
            CodexTurn::Answer => Message::text(&[ANSWER]).answer(req),
        }
    })
    .await
    .unwrap();
    let mut anthropic_args = args("anthropic", format!("http://{}", anthropic.addr()));
    anthropic_args.extend(["--api-key".to_owned(), key.to_owned()]);
    run_task(&anthropic_args, &[], &|| anthropic.dump())
        .await
        .unwrap();
    // The thinking went to Codex as a reasoning item (its signature the encrypted content) and
    // came back with the history, signed, as Anthropic requires for a tool loop.
    let returned = anthropic.requests().iter().any(|r| {
        r.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| {
                m["content"].as_array().into_iter().flatten().any(|b| {
                    b["type"] == "thinking"
                        && b["signature"] == THINKING_SIGNATURE
                        && b["thinking"] == REASONING
                })
            })
    });
    assert!(
        returned,
        "the signed thinking came back\n{}",
        anthropic.dump()
    );
}

/// The signature of the scripted Anthropic upstream's thinking.
const THINKING_SIGNATURE: &str = "EqQBCgIYAhIMcodexsignature";

/// What a Chat answer says, without its id and time.
fn chat_essence(report: &Value) -> Value {
    assert_eq!(report["ok"], true, "{report}");
    let result = &report["result"];
    let message = &result["choices"][0]["message"];
    let calls: Vec<Value> = message["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| {
                    serde_json::json!([c["id"], c["function"]["name"], c["function"]["arguments"]])
                })
                .collect()
        })
        .unwrap_or_default();
    // A stream's first chunk carries `content: ""` (as OpenAI's do), so an SDK's accumulator
    // may hold "" where the non-streamed message has null: the same answer.
    let content = match &message["content"] {
        Value::String(text) if text.is_empty() => Value::Null,
        other => other.clone(),
    };
    serde_json::json!({
        "content": content,
        "tool_calls": calls,
        "finish_reason": result["choices"][0]["finish_reason"],
        "model": result["model"],
        "usage": [result["usage"]["prompt_tokens"], result["usage"]["completion_tokens"]],
    })
}

/// What a Responses answer says, without ids and times.
fn responses_essence(report: &Value) -> Value {
    assert_eq!(report["ok"], true, "{report}");
    let result = &report["result"];
    let output: Vec<Value> = result["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let text: String = item["content"]
                .as_array()
                .or_else(|| item["summary"].as_array())
                .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect())
                .unwrap_or_default();
            serde_json::json!({
                "type": item["type"],
                "name": item["name"],
                "call_id": item["call_id"],
                "arguments": item["arguments"],
                "input": item["input"],
                "text": text,
            })
        })
        .collect();
    serde_json::json!({
        "status": result["status"],
        "output_text": result["output_text"],
        "output": output,
        "usage": [result["usage"]["input_tokens"], result["usage"]["output_tokens"]],
    })
}

/// Ctrl-C in a terminal reaches the whole process group: the launcher leaves it to the tool,
/// outlives it, returns the tool's exit code and removes the throwaway CODEX_HOME. (The stand-in
/// tool is `sh`: it sends SIGINT to the bridge, its parent, then checks its config is there.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigint_ends_the_tool_not_the_launcher() {
    let work = bridge_tests::tempdir::TempDir::new("codex-sigint").unwrap();
    let tmp = work.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cmd = tokio::process::Command::new(bridge_tests::bridge::binary_path().unwrap());
    cmd.args([
        "codex",
        "--codex-bin",
        "sh",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ])
    .args(["--no-upstream-check", "--log-file"])
    .arg(work.path().join("bridge.log"))
    .args([
        "--",
        "-c",
        "kill -INT $PPID; sleep 1; test -f \"$CODEX_HOME/config.toml\" && exit 3",
    ])
    .env("TMPDIR", &tmp);
    let out = run(cmd, T, "claude-bridge codex with sh").await.unwrap();
    let log = std::fs::read_to_string(work.path().join("bridge.log")).unwrap_or_default();
    assert_eq!(
        out.code,
        Some(3),
        "the launcher must outlive a SIGINT and return the tool's code\n{}\n{log}",
        out.stderr
    );
    let leftovers: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// The upstream fault the user's message names (`fault NAME`).
fn fault_named(req: &RecordedRequest) -> ScriptedResponse {
    let said = req.all_text();
    let named = |name: &str| said.contains(&format!("fault {name}"));
    if named("bad-request") {
        ScriptedResponse::openai_error(
            400,
            "max_tokens is too large",
            "invalid_request_error",
            None,
        )
    } else if named("key") {
        ScriptedResponse::openai_error(
            401,
            "Incorrect API key provided",
            "invalid_request_error",
            Some("invalid_api_key"),
        )
    } else if named("model") {
        ScriptedResponse::openai_error(
            404,
            "The model `qwen9` does not exist",
            "invalid_request_error",
            Some("model_not_found"),
        )
    } else if named("rate") {
        ScriptedResponse::openai_error(429, "Rate limit reached", "requests", None)
            .with_header("retry-after", "7")
    } else if named("server") {
        ScriptedResponse::openai_error(500, "The server had an error", "server_error", None)
    } else if named("overloaded") {
        ScriptedResponse::openai_error(529, "Overloaded", "server_error", None)
    } else {
        ScriptedResponse::garbage(b"<html>502 Bad Gateway</html>")
    }
}

/// OpenAI's `error.type` for an Anthropic error type (`bridge_core::front::openai_error_fields`).
fn openai_type(anthropic: &str) -> &'static str {
    match anthropic {
        "invalid_request_error" | "request_too_large" => "invalid_request_error",
        "authentication_error" => "authentication_error",
        "billing_error" => "insufficient_quota",
        "permission_error" => "permission_error",
        "not_found_error" => "not_found_error",
        "rate_limit_error" => "rate_limit_error",
        _ => "server_error",
    }
}

/// The fault matrix on the OpenAI routes: for every upstream failure an Anthropic client gets
/// an Anthropic error for, an OpenAI client (Chat and Responses, streaming or not) gets the same
/// status (an overloaded `529` as `503`, a `424` as `400`), the same message and `retry-after`, in OpenAI's
/// envelope with the matching type; garbage that starts a stream ends it with an error, never a
/// clean end. A dead upstream likewise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fault_matrix_gives_openai_clients_openai_errors() {
    let upstream = Upstream::start(fault_named).await.unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "openai-front-faults")
        .await
        .unwrap();
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        Bridge::start(&format!("http://127.0.0.1:{port}/v1"), "openai-front-dead")
            .await
            .unwrap()
    };
    let faults = [
        "bad-request",
        "key",
        "model",
        "rate",
        "server",
        "overloaded",
        "garbage",
    ];
    let cases = faults
        .iter()
        .map(|f| (&bridge, *f))
        .chain([(&dead, "dead")]);
    // Requests the dead upstream has failed so far: from the circuit's threshold on, its
    // answer is final (the client is not to retry into it).
    let mut dead_failures = 0;
    for (bridge, fault) in cases {
        let text = format!("fault {fault}");
        let anthropic = bridge_tests::http::post_messages(
            &bridge.base_url(),
            &serde_json::json!({"model": "claude-x", "max_tokens": 64,
                "messages": [{"role": "user", "content": text}]}),
            T,
        )
        .await
        .unwrap();
        let reference = anthropic.json().unwrap();
        assert_eq!(reference["type"], "error", "{fault}: {reference}");
        if fault == "dead" {
            dead_failures += 1;
        }
        let expected_status = match anthropic.status {
            529 => 503,
            // A failure no retry fixes that is not the client's (the upstream refusing the
            // bridge's key): Codex retries every status but 400.
            424 => 400,
            other => other,
        };
        let expected_type = openai_type(reference["error"]["type"].as_str().unwrap());
        for (route, body) in [
            (
                "chat/completions",
                serde_json::json!({"model": "gpt-x", "messages": [{"role": "user", "content": text}]}),
            ),
            (
                "responses",
                serde_json::json!({"model": "gpt-x", "input": text}),
            ),
        ] {
            for stream in [false, true] {
                let mut body = body.clone();
                body["stream"] = Value::Bool(stream);
                let r = post(&format!("{}/v1/{route}", bridge.base_url()), &body).await;
                let c = format!("{fault} {route} stream={stream}: {} {}", r.status, r.text());
                if r.status == 200 {
                    // Only a stream that had started (garbage after a 200) may end this way.
                    assert!(stream && fault == "garbage", "{c}");
                    let text = r.text();
                    assert!(
                        !text.contains("[DONE]") && !text.contains("response.completed"),
                        "{c}"
                    );
                    assert!(
                        text.contains("\"error\"") || text.contains("response.failed"),
                        "{c}"
                    );
                    continue;
                }
                let error = &r.json().unwrap()["error"];
                assert_eq!(error["type"], expected_type, "{c}");
                if fault == "dead" {
                    let circuit_open = dead_failures >= 3;
                    dead_failures += 1;
                    if circuit_open {
                        // 424 to Anthropic clients, 400 to OpenAI ones (Codex retries the rest).
                        assert_eq!(r.status, 400, "{c}");
                        assert_eq!(r.header("x-should-retry"), Some("false"), "{c}");
                        let message = error["message"].as_str().unwrap_or_default();
                        let first = reference["error"]["message"].as_str().unwrap_or_default();
                        assert!(message.starts_with(first), "{c}");
                        assert!(message.contains("failures in a row"), "{c}");
                        continue;
                    }
                }
                assert_eq!(r.status, expected_status, "{c}");
                assert_eq!(error["message"], reference["error"]["message"], "{c}");
                assert!(
                    error.get("param").is_some() && error.get("code").is_some(),
                    "{c}"
                );
                assert_eq!(
                    r.header("retry-after"),
                    anthropic.header("retry-after"),
                    "{c}"
                );
            }
        }
    }
}

/// An Anthropic upstream that answers with one whole message although a stream was asked for
/// (the pass-through relays it as it came): an OpenAI client still gets its own object, made by
/// the engine's front translator from the events the message stands for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_anthropic_answer_reaches_openai_clients_as_their_object() {
    use bridge_tests::anthropic_upstream::Message;
    let upstream = Upstream::start(|req: &RecordedRequest| {
        let model = req.body["model"].as_str().unwrap_or("claude-x").to_owned();
        ScriptedResponse::json(&Message::text(&["Hello", " there"]).json(&model))
    })
    .await
    .unwrap();
    let options = bridge_tests::bridge::BridgeOptions {
        provider: "anthropic".into(),
        model: None,
        api_key: Some("sk-ant-api03-whole".into()),
        ..bridge_tests::bridge::BridgeOptions::default()
    };
    let bridge = Bridge::start_with(
        &format!("http://{}", upstream.addr()),
        "openai-front-whole",
        options,
    )
    .await
    .unwrap();
    let chat = post(
        &format!("{}/v1/chat/completions", bridge.base_url()),
        &serde_json::json!({"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(chat.status, 200, "{}", chat.text());
    let chat = chat.json().unwrap();
    assert_eq!(chat["object"], "chat.completion", "{chat}");
    assert_eq!(chat["model"], "gpt-x", "{chat}");
    assert_eq!(
        chat["choices"][0]["message"]["content"], "Hello there",
        "{chat}"
    );
    assert_eq!(chat["choices"][0]["finish_reason"], "stop", "{chat}");

    let responses = post(
        &format!("{}/v1/responses", bridge.base_url()),
        &serde_json::json!({"model": "gpt-x", "input": "hi"}),
    )
    .await;
    assert_eq!(responses.status, 200, "{}", responses.text());
    let responses = responses.json().unwrap();
    assert_eq!(responses["status"], "completed", "{responses}");
    assert_eq!(
        responses["output"][0]["content"][0]["text"], "Hello there",
        "{responses}"
    );
}

/// The tool loop's upstream: a text part and a weather call, then (the tool's result in the
/// conversation) the answer; outside the loop, a name remembered only if the first turn came
/// back.
fn tool_loop(req: &RecordedRequest) -> ScriptedResponse {
    let last_role = req.messages().last().map(|m| m["role"].clone());
    let text = req.all_text();
    let format = &req.body["response_format"]["json_schema"];
    if format["strict"] == true && format["name"] == "person" {
        text_stream(&[r#"{"name":"Ada Lovelace","#, r#""age":36}"#])
    } else if last_role == Some(Value::from("tool")) {
        text_stream(&["It is sunny ", "in Paris."])
    } else if req
        .tools()
        .iter()
        .any(|t| t["function"]["name"] == "get_weather")
    {
        let start = bridge_tests::chunks::ChatStream::new()
            .role()
            .text("Let me check. ");
        bridge_tests::chunks::tool_call_builder(
            start,
            &[("call_w", "get_weather", &["{\"city\":", "\"Paris\"}"])],
        )
        .finish("tool_calls")
        .usage(120, 17, 0)
        .build()
    } else if text.contains("What is my name?") && text.contains("Nice to meet you, Ada.") {
        text_stream(&["Your name ", "is Ada."])
    } else if text.contains("What is my name?") {
        text_stream(&["I do not know."])
    } else {
        text_stream(&["Nice to meet ", "you, Ada."])
    }
}

async fn ai_sdk(bridge: &Bridge, mode: &str) -> Value {
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(e2e_dir().join("ai_sdk.mjs"))
        .args([&format!("{}/v1", bridge.base_url()), mode])
        .current_dir(e2e_dir())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL");
    bridge_tests::clients::run_driver(cmd, T, "AI SDK driver")
        .await
        .unwrap()
}

/// Issue 33 item 1: the Vercel AI SDK's `openai(...)` provider (Responses, `store: true`) sends
/// each earlier answer back as an `item_reference`; the bridge keeps what it answered, so its
/// multi-step tool loops run, streaming or not. `previous_response_id`, `GET` and `DELETE`
/// work with the official SDK, and what is not kept is a 404/400 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_sdks_continue_from_what_the_bridge_kept() {
    let upstream = Upstream::start(tool_loop).await.unwrap();
    let bridge = Bridge::start(&upstream.base_url(), "responses-kept")
        .await
        .unwrap();
    let ctx = || format!("{}\n--- bridge log:\n{}", upstream.dump(), bridge.log());

    for mode in ["generate", "stream"] {
        let before = upstream.requests().len();
        let r = ai_sdk(&bridge, mode).await;
        assert_eq!(r["ok"], true, "AI SDK {mode}: {r}\n{}", ctx());
        assert_eq!(r["text"], "It is sunny in Paris.", "{r}");
        let steps = r["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2, "{r}");
        assert_eq!(
            steps[0]["toolCalls"],
            serde_json::json!(["get_weather"]),
            "{r}"
        );
        assert_eq!(steps[0]["text"], "Let me check. ", "{r}");
        assert_eq!(steps[0]["toolResults"][0]["weather"], "sunny", "{r}");
        assert_eq!(steps[1]["finishReason"], "stop", "{r}");
        // The second step's upstream request holds the first answer the SDK referred to.
        let second = &upstream.requests()[before + 1];
        let assistant = second.messages().iter().find(|m| m["role"] == "assistant");
        assert!(assistant.is_some(), "no assistant turn: {}", second.body);
        let assistant = assistant.unwrap();
        assert_eq!(assistant["content"], "Let me check. ", "{}", second.body);
        assert_eq!(
            assistant["tool_calls"][0]["id"], "call_w",
            "{}",
            second.body
        );
        assert_eq!(second.messages().last().unwrap()["role"], "tool");
        // Issue 33 item 5: the client set no limit, so none is invented for the upstream.
        for field in ["max_tokens", "max_completion_tokens"] {
            assert!(second.body.get(field).is_none(), "{field}: {}", second.body);
        }
    }

    let r = ai_sdk(&bridge, "previous").await;
    assert_eq!(r["ok"], true, "previous_response_id: {r}\n{}", ctx());
    assert_eq!(r["first"]["store"], true, "{r}");
    assert_eq!(r["second"]["text"], "Your name is Ada.", "{r}\n{}", ctx());
    assert_eq!(r["second"]["previous_response_id"], r["first"]["id"], "{r}");
    assert_eq!(r["retrieved"]["text"], "Nice to meet you, Ada.", "{r}");
    assert_eq!(r["deleted"]["deleted"], true, "{r}");
    assert_eq!(r["afterDelete"]["status"], 404, "{r}");
    assert_eq!(r["gone"]["status"], 400, "{r}");
    assert_eq!(r["gone"]["code"], "previous_response_not_found", "{r}");
    assert_eq!(r["gone"]["param"], "previous_response_id", "{r}");

    // What is kept shows in /metrics.
    let metrics = bridge_tests::http::send(
        "GET",
        &format!("{}/metrics", bridge.base_url()),
        &[],
        None,
        T,
    )
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&metrics.body);
    let kept = text
        .lines()
        .find_map(|l| l.strip_prefix("claude_bridge_responses_kept "))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert!(kept.is_some_and(|n| n >= 4), "{text}");

    // Issue 33 item 4: a strict schema keeps its name and guarantee on both APIs.
    let r = ai_sdk(&bridge, "strict").await;
    assert_eq!(r["ok"], true, "strict: {r}\n{}", ctx());
    let ada = serde_json::json!({"name": "Ada Lovelace", "age": 36});
    assert_eq!((&r["chat"], &r["responses"]), (&ada, &ada), "{r}");
    assert_eq!(r["echoed"]["format"]["name"], "person", "{r}");
    assert_eq!(r["store"], false, "{r}");

    // Kept nothing: the loop's second step names the item it referred to.
    let stateless = Bridge::start_with(
        &upstream.base_url(),
        "responses-unkept",
        bridge_tests::bridge::BridgeOptions::default().args(&["--responses-store-bytes", "0"]),
    )
    .await
    .unwrap();
    let r = ai_sdk(&stateless, "generate").await;
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["error"]["status"], 404, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Item with id 'msg_"), "{r}");
    assert!(message.contains("--responses-store-bytes"), "{r}");
}

/// A long answer (3.6 MB, in three 1.2 MB deltas). Streamed to a Responses client, it is
/// longer than what the front translator makes in one call (1 MiB): its closing events come
/// from the calls the relay makes for what was held back, so the stream still ends with every
/// event in order, and the store still sees the terminal event. Folded for each front, every
/// long event is handed on whole (taken, not copied) and the answer is still whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_streamed_and_folded_whole_and_kept() {
    let piece = "lorem ipsum ".repeat(100_000);
    let parts = [piece.as_str(), piece.as_str(), piece.as_str()];
    let text = parts.concat();
    let script = text_stream(&parts);
    let upstream = Upstream::start(move |_: &RecordedRequest| script.clone())
        .await
        .unwrap();
    let bridge = Bridge::start(&format!("http://{}", upstream.addr()), "long-responses")
        .await
        .unwrap();
    let response = post(
        &format!("{}/v1/responses", bridge.base_url()),
        &serde_json::json!({"model": "gpt-x", "input": "write", "stream": true}),
    )
    .await;
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.text();
    let events: Vec<Value> = body
        .split("\n\n")
        .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let closing = [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ];
    assert_eq!(kinds[kinds.len() - 4..], closing, "{kinds:?}");
    for (n, event) in events.iter().enumerate() {
        assert_eq!(event["sequence_number"], n, "{}", kinds[n]);
    }
    let last = &events[events.len() - 4..];
    assert!(last[0]["text"] == text.as_str(), "output_text.done");
    assert!(
        last[1]["part"]["text"] == text.as_str(),
        "content_part.done"
    );
    assert!(
        last[2]["item"]["content"][0]["text"] == text.as_str(),
        "output_item.done"
    );
    let done = &last[3]["response"];
    assert!(done["output"][0]["content"][0]["text"] == text.as_str());
    let id = done["id"].as_str().unwrap();
    let kept = bridge_tests::http::send(
        "GET",
        &format!("{}/v1/responses/{id}", bridge.base_url()),
        &[],
        None,
        T,
    )
    .await
    .unwrap();
    assert_eq!(kept.status, 200, "the answer was kept");
    let kept = kept.json().unwrap();
    assert!(kept["output"][0]["content"][0]["text"] == text.as_str());

    // Folded, each long event is handed to the fold whole (taken, not copied): still whole.
    let base = bridge.base_url();
    let folds = [
        (
            "/v1/responses",
            serde_json::json!({"model": "gpt-x", "input": "write"}),
            "/output/0/content/0/text",
        ),
        (
            "/v1/chat/completions",
            serde_json::json!({"model": "gpt-x",
            "messages": [{"role": "user", "content": "write"}]}),
            "/choices/0/message/content",
        ),
        (
            "/v1/messages",
            serde_json::json!({"model": "gpt-x", "max_tokens": 64,
            "messages": [{"role": "user", "content": "write"}]}),
            "/content/0/text",
        ),
    ];
    for (path, body, pointer) in folds {
        let folded = post(&format!("{base}{path}"), &body).await;
        assert_eq!(folded.status, 200, "{path}");
        let folded = folded.json().unwrap();
        assert!(
            folded.pointer(pointer) == Some(&Value::from(text.as_str())),
            "{path}"
        );
    }
}
