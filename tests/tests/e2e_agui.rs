//! The AG-UI front end to end: `@ag-ui/client`'s `HttpAgent` (npm, run by
//! `tests/e2e/agui_client.mjs` as a web app would) against the real `claude-bridge agui`, whose
//! real Claude Code children talk to the same process's Anthropic front (`--upstream self`),
//! backed by a scripted OpenAI upstream (the model). Text streams; a Bash call waits for approval
//! through the management API and really runs, or is denied and reported; `agent/stop`
//! interrupts a long run; `agent/connect` replays the thread; a frontend tool is called through
//! the MCP server and its result returns in the next run.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail the test on purpose"
)]

use std::time::Duration;

use bridge_core::agui::events::AguiEvent;
use bridge_core::agui::verify::Verifier;
use bridge_tests::bridge::{Bridge, BridgeOptions};
use bridge_tests::chunks::{ChatStream, split_fragments, text_stream, tool_call_stream};
use bridge_tests::clients::{claude_code_bin, e2e_dir, run};
use bridge_tests::tempdir::TempDir;
use bridge_tests::upstream::{RecordedRequest, ScriptedResponse, Upstream, background_response};
use serde_json::{Value, json};
use tokio::process::Command;

const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);
const LONG_CHUNKS: usize = 60;

/// The model: requests without tools are Claude Code's background requests; otherwise the
/// scenario named in the latest user turn that names one decides.
async fn upstream() -> Upstream {
    Upstream::start(|req: &RecordedRequest| {
        // The latest user turn that names a scenario (a thread may run several).
        let text = req
            .messages()
            .iter()
            .rev()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].to_string())
            .find(|t| t.contains("SCENARIO:"))
            .unwrap_or_default();
        let answered = fresh_tool_result(req);
        if !req.is_chat() || req.tools().is_empty() {
            background_response()
        } else if text.contains("SCENARIO:text") {
            text_stream(&["Hello ", "from ", "the bridge."])
        } else if text.contains("SCENARIO:think") {
            ChatStream::new()
                .role()
                .reasoning("The user wants a number. ")
                .reasoning("Seven is fine.")
                .texts(&["It is ", "7."])
                .finish("stop")
                .build()
        } else if text.contains("SCENARIO:fail") {
            ScriptedResponse::openai_error(
                400,
                "the model refuses this prompt",
                "invalid_request_error",
                None,
            )
        } else if text.contains("SCENARIO:long") {
            let mut stream = ChatStream::new().role();
            for i in 0..LONG_CHUNKS {
                stream = stream.text(&format!("part{i} ")).pause(Duration::from_millis(200));
            }
            stream.finish("stop").build()
        } else if text.contains("SCENARIO:edit") {
            if answered {
                text_stream(&["Written."])
            } else {
                let path = text
                    .split("PATH=")
                    .nth(1)
                    .and_then(|rest| rest.split([' ', '"', '\\']).next())
                    .unwrap_or_default();
                let args = json!({"file_path": path, "content": "written by the model\n"}).to_string();
                tool_call_stream("call_write", "Write", &[&args])
            }
        } else if text.contains("SCENARIO:mcp") {
            if answered {
                text_stream(&["Found: ", &tool_results_text(req)])
            } else {
                let args = json!({"topic": "bridges"}).to_string();
                tool_call_stream("call_fact", "mcp__docs__lookup_fact", &[&args])
            }
        } else if text.contains("SCENARIO:newtool") {
            if answered {
                text_stream(&["Picked."])
            } else {
                tool_call_stream("call_pick", "mcp__frontend__pick_color", &["{}"])
            }
        } else if text.contains("SCENARIO:sdkmcp") {
            if answered {
                text_stream(&["App says: ", &tool_results_text(req)])
            } else {
                let args = json!({"key": "motto"}).to_string();
                tool_call_stream("call_app", "mcp__appdocs__app_fact", &[&args])
            }
        } else if text.contains("SCENARIO:envbash") {
            if answered {
                text_stream(&["Saved."])
            } else {
                let args = json!({"command": "echo \"mark=$AGUI_MARK\" > env.txt", "description": "Save a variable"})
                    .to_string();
                tool_call_stream("call_env", "Bash", &[&args])
            }
        } else if text.contains("SCENARIO:hookbash") {
            if answered {
                text_stream(&["Understood."])
            } else {
                let args = json!({"command": "echo hooked > hooked.txt", "description": "Write a file"})
                    .to_string();
                tool_call_stream("call_hook", "Bash", &[&args])
            }
        } else if text.contains("SCENARIO:frontend") {
            if req.has_tool_result() {
                text_stream(&["Card ", "shown."])
            } else {
                let args = json!({"title": "Hi"}).to_string();
                tool_call_stream("call_card", "mcp__frontend__show_card", &[&args])
            }
        } else if text.contains("SCENARIO:bash") {
            if req.has_tool_result() {
                text_stream(&["All ", "done."])
            } else {
                let args = json!({"command": "echo agui > made-by-agui.txt", "description": "Create a file"})
                    .to_string();
                let pieces = split_fragments(&args, 4);
                let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
                tool_call_stream("call_bash", "Bash", &pieces)
            }
        } else {
            text_stream(&["?"])
        }
    })
    .await
    .unwrap()
}

/// The tool results the model was sent, as one text.
fn tool_results_text(req: &RecordedRequest) -> String {
    req.tool_messages()
        .iter()
        .map(|m| m["content"].to_string())
        .collect()
}

/// Whether a tool result came after the latest user message that names a scenario (a thread may
/// run several scenarios, each with its own tool call).
fn fresh_tool_result(req: &RecordedRequest) -> bool {
    let messages = req.messages();
    let start = messages
        .iter()
        .rposition(|m| m["role"] == "user" && m["content"].to_string().contains("SCENARIO:"))
        .unwrap_or(0);
    messages[start..].iter().any(|m| m["role"] == "tool")
}

struct World {
    upstream: Upstream,
    bridge: Bridge,
    cwd: TempDir,
    _home: TempDir,
}

async fn world(name: &str) -> World {
    world_with(name, &[]).await
}

/// A world whose bridge gets `extra` arguments too.
async fn world_with(name: &str, extra: &[&str]) -> World {
    world_running(name, extra, &claude_code_bin().unwrap(), &[]).await
}

/// A world whose bridge starts `claude` for Claude Code, with `more_env` in its environment.
async fn world_running(
    name: &str,
    extra: &[&str],
    claude: &std::path::Path,
    more_env: &[(String, String)],
) -> World {
    let upstream = upstream().await;
    let cwd = TempDir::new("agui-cwd").unwrap();
    let home = TempDir::new("agui-home").unwrap();
    let mut env: Vec<(String, String)> = [
        ("HOME", home.path().to_str().unwrap()),
        ("SHELL", "/bin/bash"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("CLAUDE_CODE_MAX_RETRIES", "0"),
        ("DISABLE_AUTOUPDATER", "1"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    // How tests/fixtures/agui/captured_* were made: E2E_AGUI_TRANSCRIPT_DIR=/some/dir.
    if let Ok(dir) = std::env::var("E2E_AGUI_TRANSCRIPT_DIR") {
        env.push(("CLAUDE_BRIDGE_TRANSCRIPT_DIR".to_owned(), dir));
    }
    env.extend_from_slice(more_env);
    let opts = BridgeOptions {
        subcommand: "agui".into(),
        env,
        ..BridgeOptions::default()
    }
    .args(&[
        "--claude-bin",
        claude.to_str().unwrap(),
        "--cwd",
        cwd.path().to_str().unwrap(),
        "--upstream",
        "self",
    ])
    .args(extra);
    let bridge = Bridge::start_with(&upstream.base_url(), name, opts)
        .await
        .unwrap();
    World {
        upstream,
        bridge,
        cwd,
        _home: home,
    }
}

/// What the client saw.
struct Seen {
    out: Value,
}

impl Seen {
    fn run(&self, i: usize) -> &Value {
        &self.out["runs"][i]
    }

    fn events(&self, i: usize) -> Vec<Value> {
        self.run(i)["events"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn types(&self, i: usize) -> Vec<String> {
        self.events(i)
            .iter()
            .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn text(&self, i: usize) -> String {
        self.events(i)
            .iter()
            .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
            .map(|e| e["delta"].as_str().unwrap_or_default())
            .collect()
    }

    fn runs(&self) -> usize {
        self.out["runs"].as_array().map_or(0, Vec::len)
    }
}

/// Every run the client saw passes the core's AG-UI verifier too, and never uses THINKING_*.
fn verified(seen: &Seen, context: &str) {
    for i in 0..seen.runs() {
        assert!(
            seen.run(i)["error"].is_null(),
            "run {i} failed in @ag-ui/client: {}\n{context}",
            seen.run(i)["error"]
        );
        let events: Vec<AguiEvent> = seen
            .events(i)
            .into_iter()
            .map(|e| serde_json::from_value(e).unwrap())
            .collect();
        Verifier::check(&events).unwrap_or_else(|v| panic!("run {i}: {v:?}\n{context}"));
        assert!(
            !seen.types(i).iter().any(|t| t.starts_with("THINKING_")),
            "{context}"
        );
        assert_eq!(
            seen.types(i).first().map(String::as_str),
            Some("RUN_STARTED")
        );
    }
}

async fn client(world: &World, spec: Value) -> Seen {
    let mut spec = spec;
    spec["base"] = json!(world.bridge.base_url());
    Seen {
        out: node_script(world, "agui_client.mjs", &spec).await,
    }
}

/// Run one of `tests/e2e`'s AG-UI scripts with `spec`: the JSON object it printed (it must say no
/// `error`).
async fn node_script(world: &World, script: &str, spec: &Value) -> Value {
    let mut cmd = Command::new("node");
    cmd.arg(e2e_dir().join(script))
        .arg(spec.to_string())
        .current_dir(e2e_dir());
    let output = run(cmd, CLIENT_TIMEOUT, script).await.unwrap();
    let out: Value = serde_json::from_str(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{script} printed no result ({e}):\n{}\n{}\n--- bridge log:\n{}",
            output.stdout,
            output.stderr,
            world.bridge.log()
        )
    });
    assert!(
        out["error"].is_null(),
        "{}\n--- bridge log:\n{}",
        out["error"],
        world.bridge.log()
    );
    out
}

fn context(world: &World, seen: &Seen) -> String {
    format!(
        "client saw: {}\n--- upstream saw {} requests\n--- bridge log:\n{}",
        serde_json::to_string_pretty(&seen.out).unwrap_or_default(),
        world.upstream.requests().len(),
        world.bridge.log()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_streams_and_connect_replays_the_thread() {
    let world = world("agui-text").await;
    let seen = client(
        &world,
        json!({"threadId": "thread-text", "prompt": "SCENARIO:text say hello", "connectAfter": true}),
    )
    .await;
    let ctx = context(&world, &seen);
    verified(&seen, &ctx);
    assert_eq!(seen.text(0), "Hello from the bridge.", "{ctx}");
    let types = seen.types(0);
    assert!(types.contains(&"STATE_SNAPSHOT".to_owned()), "{ctx}");
    assert!(types.contains(&"TEXT_MESSAGE_START".to_owned()), "{ctx}");
    assert_eq!(
        types.last().map(String::as_str),
        Some("RUN_FINISHED"),
        "{ctx}"
    );
    let stats = seen
        .events(0)
        .into_iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "result_stats")
        .unwrap_or_else(|| panic!("no result_stats\n{ctx}"));
    assert_eq!(stats["value"]["num_turns"], 1, "{ctx}");

    // A fresh client connecting to the thread gets the same run again.
    let connect = &seen.out["connect"];
    assert!(connect["error"].is_null(), "{ctx}");
    let replayed: Vec<&str> = connect["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        replayed,
        types.iter().map(String::as_str).collect::<Vec<_>>(),
        "{ctx}"
    );
    // …and redraws both sides of the thread: the user's message, then the answer.
    let redrawn: Vec<(&str, &str)> = connect["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        redrawn,
        [
            ("user", "SCENARIO:text say hello"),
            ("assistant", "Hello from the bridge.")
        ],
        "{ctx}"
    );

    // A page in headless Chromium reconnects the same way: the browser's fetch() gets a
    // complete body (it ends; its Content-Length is the body's), and @ag-ui/client in the
    // browser redraws the thread.
    let page = node_script(
        &world,
        "agui_browser.mjs",
        &json!({"base": world.bridge.base_url(), "threadId": "thread-text"}),
    )
    .await;
    let ctx = format!("page saw: {page:#}\n{ctx}");
    assert_eq!(page["problems"], json!([]), "{ctx}");
    assert!(
        page["origin"].as_str().unwrap() != world.bridge.base_url(),
        "{ctx}"
    );
    let fetched = &page["fetch"];
    assert_eq!(fetched["status"], 200, "{ctx}");
    assert_eq!(
        fetched["contentLength"]
            .as_str()
            .and_then(|n| n.parse::<u64>().ok()),
        fetched["bytes"].as_u64(),
        "{ctx}"
    );
    let fetched_types: Vec<&str> = fetched["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(fetched_types, replayed, "{ctx}");
    assert_eq!(page["agent"]["messages"], connect["messages"], "{ctx}");
}

/// Claude Code, started through a shell that writes down the signals the bridge sends it.
const SIGNAL_RECORDER: &str = r#"#!/bin/sh
trap 'echo TERM >> "$SIGNALS_SEEN"; kill -TERM "$child" 2>/dev/null; wait "$child"; exit 143' TERM
# A background command's stdin would be /dev/null: hand it the pipe through fd 3.
exec 3<&0
"$REAL_CLAUDE" "$@" <&3 3<&- &
child=$!
wait "$child"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_is_asked_to_stop_before_it_would_be_killed() {
    let dir = TempDir::new("agui-signals").unwrap();
    let recorder = dir.path().join("claude");
    std::fs::write(&recorder, SIGNAL_RECORDER).unwrap();
    std::fs::set_permissions(
        &recorder,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let seen = dir.path().join("signals");
    let env = [
        ("SIGNALS_SEEN".to_owned(), seen.display().to_string()),
        (
            "REAL_CLAUDE".to_owned(),
            claude_code_bin().unwrap().display().to_string(),
        ),
    ];
    let mut world = world_running("agui-signals", &[], &recorder, &env).await;
    let seen_run = client(
        &world,
        json!({"threadId": "thread-signals", "prompt": "SCENARIO:text say hello"}),
    )
    .await;
    let ctx = context(&world, &seen_run);
    assert_eq!(seen_run.text(0), "Hello from the bridge.", "{ctx}");
    // The bridge shuts down: its Claude Code gets SIGTERM (time to write its session file),
    // not an immediate SIGKILL, and stops within the grace.
    world.bridge.signal("TERM").unwrap();
    let exited = world
        .bridge
        .wait_exit(Duration::from_secs(30))
        .await
        .unwrap();
    let log = world.bridge.log();
    assert!(exited.is_some(), "the bridge did not exit\n{log}");
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap_or_default(),
        "TERM\n",
        "{log}"
    );
    assert!(
        log.contains("Claude Code session stopped") && !log.contains("did not stop after SIGTERM"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bash_call_waits_for_approval_then_really_runs() {
    let world = world("agui-approve").await;
    let seen = client(
        &world,
        json!({"threadId": "thread-bash", "prompt": "SCENARIO:bash make the file", "approval": "allow"}),
    )
    .await;
    let ctx = context(&world, &seen);
    verified(&seen, &ctx);
    let approvals = seen.out["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{ctx}");
    assert_eq!(approvals[0]["toolName"], "Bash", "{ctx}");
    assert_eq!(approvals[0]["status"], 200, "{ctx}");
    assert_eq!(
        approvals[0]["waiting"], true,
        "GET /approvals listed the call: {ctx}"
    );
    let made = world.cwd.path().join("made-by-agui.txt");
    assert!(made.is_file(), "the approved Bash call did not run\n{ctx}");
    assert_eq!(std::fs::read_to_string(&made).unwrap().trim(), "agui");
    let events = seen.events(0);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "TOOL_CALL_START" && e["toolCallName"] == "Bash"),
        "{ctx}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "TOOL_CALL_RESULT"),
        "{ctx}"
    );
    assert!(seen.text(0).ends_with("All done."), "{ctx}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_is_reported_and_does_not_run() {
    let world = world("agui-deny").await;
    let seen = client(
        &world,
        json!({"threadId": "thread-deny", "prompt": "SCENARIO:bash make the file", "approval": "deny"}),
    )
    .await;
    let ctx = context(&world, &seen);
    verified(&seen, &ctx);
    assert_eq!(seen.out["approvals"][0]["status"], 200, "{ctx}");
    assert!(
        !world.cwd.path().join("made-by-agui.txt").exists(),
        "a denied call ran\n{ctx}"
    );
    // Claude Code reported the denial to the model, and the client saw it as the tool's result.
    let told = world.upstream.requests().iter().any(|r| {
        r.tool_messages()
            .iter()
            .any(|m| m.to_string().contains("Not on my machine"))
    });
    assert!(told, "{ctx}");
    assert!(
        seen.events(0)
            .iter()
            .any(|e| e["type"] == "TOOL_CALL_RESULT"
                && e["content"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("Not on my machine")),
        "{ctx}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_stop_interrupts_a_long_run() {
    // Issue 16.4: with --max-sessions 1 and that session busy, a run for another thread is
    // refused (429, retry-after), not given a seventh Claude Code process.
    let world = world_with("agui-stop", &["--max-sessions", "1"]).await;
    let base = world.bridge.base_url();
    let refused = async {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let sessions = list_sessions(&base).await;
            if sessions["sessions"][0]["status"]["state"] == "running" {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "never running: {sessions}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let r = post(
            &format!("{base}/agent/default/run"),
            &run_input("thread-other", "run-other", "SCENARIO:text hi"),
        )
        .await;
        let pids = list_sessions(&base).await["sessions"]
            .as_array()
            .map_or(0, Vec::len);
        (r, pids)
    };
    let (seen, (refused, sessions)) = tokio::join!(
        client(
            &world,
            json!({"threadId": "thread-long", "prompt": "SCENARIO:long talk a lot", "stopAfterFirstText": true}),
        ),
        refused
    );
    let ctx = context(&world, &seen);
    assert_eq!(refused.status, 429, "{}\n{ctx}", refused.text());
    assert_eq!(refused.header("retry-after"), Some("5"), "{ctx}");
    assert!(
        refused.text().contains("--max-sessions"),
        "{}",
        refused.text()
    );
    assert_eq!(sessions, 1, "no second session was started\n{ctx}");
    verified(&seen, &ctx);
    assert_eq!(seen.out["stops"][0]["status"], 200, "{ctx}");
    let types = seen.types(0);
    let last = types.last().map(String::as_str);
    assert!(
        last == Some("RUN_FINISHED"),
        "the run did not end: {types:?}\n{ctx}"
    );
    let parts = seen.text(0).matches("part").count();
    assert!(
        parts < LONG_CHUNKS,
        "the whole answer streamed ({parts} parts): the stop did nothing\n{ctx}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontend_tool_is_called_through_mcp_and_answers_in_the_next_run() {
    let world = world("agui-frontend").await;
    let seen = client(
        &world,
        json!({
            "threadId": "thread-frontend",
            "prompt": "SCENARIO:frontend show me a card",
            "tools": [{"name": "show_card", "description": "Show a card in the app",
                       "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}],
            "context": [{"description": "The page", "value": "dashboard"}],
            "frontendResults": {"show_card": "The card is on screen."},
        }),
    )
    .await;
    let ctx = context(&world, &seen);
    verified(&seen, &ctx);
    assert_eq!(seen.runs(), 2, "{ctx}");
    let first = seen.events(0);
    let call = first
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_START")
        .unwrap_or_else(|| panic!("no tool call in the first run\n{ctx}"));
    assert_eq!(call["toolCallName"], "show_card", "{ctx}");
    assert_eq!(
        seen.types(0).last().map(String::as_str),
        Some("RUN_FINISHED")
    );
    assert_eq!(seen.text(1), "Card shown.", "{ctx}");
    // The model got the app's result as the tool's result, and the app's context.
    let requests = world.upstream.requests();
    assert!(
        requests.iter().any(|r| r
            .tool_messages()
            .iter()
            .any(|m| m.to_string().contains("The card is on screen."))),
        "{ctx}"
    );
    assert!(
        requests.iter().any(|r| r.all_text().contains("dashboard")),
        "{ctx}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_streams_as_reasoning_and_a_failed_turn_is_a_run_error() {
    let world = world("agui-think").await;
    let seen = client(
        &world,
        json!({"threadId": "thread-think", "prompt": "SCENARIO:think pick a number",
               "forwardedProps": {"model": "claude-haiku-4-5", "permissionMode": "plan"}}),
    )
    .await;
    let ctx = context(&world, &seen);
    verified(&seen, &ctx);
    // The model switch the app forwarded took effect for this turn.
    let stats = seen
        .events(0)
        .into_iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "result_stats")
        .unwrap();
    assert!(
        stats["value"]["modelUsage"]
            .get("claude-haiku-4-5")
            .is_some(),
        "{stats}"
    );
    let types = seen.types(0);
    for wanted in [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ] {
        assert!(types.iter().any(|t| t == wanted), "no {wanted}\n{ctx}");
    }
    let reasoning: String = seen
        .events(0)
        .iter()
        .filter(|e| e["type"] == "REASONING_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        reasoning, "The user wants a number. Seven is fine.",
        "{ctx}"
    );
    assert_eq!(seen.text(0), "It is 7.", "{ctx}");

    let failed = client(
        &world,
        json!({"threadId": "thread-fail", "prompt": "SCENARIO:fail do it"}),
    )
    .await;
    let ctx = context(&world, &failed);
    verified(&failed, &ctx);
    let last = failed.events(0).last().cloned().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{ctx}");
    assert!(
        last["message"]
            .as_str()
            .unwrap_or_default()
            .contains("the model refuses this prompt"),
        "the upstream's message reaches the client: {last}\n{ctx}"
    );
}

async fn post(url: &str, body: &Value) -> bridge_tests::http::HttpResponse {
    bridge_tests::http::send(
        "POST",
        url,
        &[("content-type", "application/json")],
        Some(body.to_string().into_bytes()),
        CLIENT_TIMEOUT,
    )
    .await
    .unwrap()
}

/// The AG-UI events of an SSE body (`data: <json>` frames).
fn sse_events(body: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(body)
        .split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .map(|json| serde_json::from_str(json).unwrap())
        .collect()
}

/// `GET /sessions`.
async fn list_sessions(base: &str) -> Value {
    bridge_tests::http::send(
        "GET",
        &format!("{base}/sessions"),
        &[],
        None,
        CLIENT_TIMEOUT,
    )
    .await
    .unwrap()
    .json()
    .unwrap()
}

/// One run of `thread-single` over REST: its events and the raw SSE text.
async fn run_thread(base: &str, run: &str, text: &str) -> (Vec<Value>, String) {
    let r = post(
        &format!("{base}/agent/default/run"),
        &run_input("thread-single", run, text),
    )
    .await;
    (sse_events(&r.body), r.text())
}

fn run_input(thread: &str, run: &str, text: &str) -> Value {
    json!({"threadId": thread, "runId": run, "state": {}, "tools": [], "context": [], "forwardedProps": {},
           "messages": [{"id": format!("{run}-user"), "role": "user", "content": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_single_endpoint_the_management_api_and_a_crashed_session() {
    let world = world("agui-single").await;
    let base = world.bridge.base_url();
    let ctx = || format!("--- bridge log:\n{}", world.bridge.log());

    // The single endpoint: info, and its errors.
    let info = post(&base, &json!({"method": "info"})).await;
    assert_eq!(info.status, 200);
    assert_eq!(info.json().unwrap()["agents"]["default"]["name"], "default");
    // CopilotKit apps' own mount point answers too; a wrong method says what is allowed.
    let info = post(
        &format!("{base}/api/copilotkit"),
        &json!({"method": "info"}),
    )
    .await;
    assert_eq!(info.json().unwrap()["agents"]["default"]["name"], "default");
    let get = |path: &'static str| {
        let base = base.clone();
        async move {
            bridge_tests::http::send("GET", &format!("{base}{path}"), &[], None, CLIENT_TIMEOUT)
                .await
                .unwrap()
        }
    };
    let info = get("/api/copilotkit/info").await;
    assert_eq!(info.json().unwrap()["agents"]["default"]["name"], "default");
    let r = get("/agent/default/run").await;
    assert_eq!(
        (r.status, r.header("allow")),
        (405, Some("POST")),
        "{}",
        r.text()
    );
    let r = get("/api/copilotkitx/info").await;
    assert_eq!(r.status, 404, "{}", r.text());
    let raw = |headers: Vec<(&'static str, &'static str)>, body: &'static [u8]| {
        let base = base.clone();
        async move {
            bridge_tests::http::send("POST", &base, &headers, Some(body.to_vec()), CLIENT_TIMEOUT)
                .await
                .unwrap()
        }
    };
    let r = raw(vec![("content-type", "application/json")], b"not json").await;
    assert_eq!(r.status, 415);
    assert_eq!(
        r.json().unwrap()["message"],
        "Single-route endpoint expects JSON payloads"
    );
    // What a hostile web page could send is refused: a simple (non-JSON) POST, a foreign
    // origin, a rebound host name. A local dev server's origin is allowed, with CORS headers.
    let info_body: &[u8] = br#"{"method":"info"}"#;
    let r = raw(vec![("content-type", "text/plain")], info_body).await;
    assert_eq!(r.status, 415, "{}", r.text());
    let r = raw(
        vec![
            ("content-type", "application/json"),
            ("origin", "https://evil.example"),
        ],
        info_body,
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.header("access-control-allow-origin").is_none());
    let r = raw(
        vec![
            ("content-type", "application/json"),
            ("host", "evil.example"),
        ],
        info_body,
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = raw(
        vec![
            ("content-type", "application/json"),
            ("origin", "http://localhost:3000"),
        ],
        info_body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://localhost:3000")
    );
    let r = post(&base, &json!({"params": {}})).await;
    assert_eq!(
        (r.status, r.json().unwrap()["message"].clone()),
        (400, json!("Missing method field"))
    );
    let r = post(&base, &json!({"method": "agent/run", "params": {}})).await;
    assert_eq!(
        r.json().unwrap()["message"],
        "Missing or invalid parameter 'agentId'"
    );
    let r = post(
        &base,
        &json!({"method": "agent/dance", "params": {"agentId": "default"}}),
    )
    .await;
    assert_eq!(
        r.json().unwrap()["message"],
        "Unsupported method 'agent/dance'"
    );

    // agent/run through the single endpoint streams the run.
    let r = post(
        &base,
        &json!({"method": "agent/run", "params": {"agentId": "default"},
                "body": run_input("thread-single", "run-1", "SCENARIO:text hi")}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", ctx());
    assert!(
        r.header("content-type")
            .unwrap_or_default()
            .starts_with("text/event-stream")
    );
    let events = sse_events(&r.body);
    let parsed: Vec<AguiEvent> = events
        .iter()
        .map(|e| serde_json::from_value(e.clone()).unwrap())
        .collect();
    Verifier::check(&parsed).unwrap();
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{}", ctx());

    // The session is listed with its process; control requests reach Claude Code and answer.
    let sessions = list_sessions(&base).await;
    let session = &sessions["sessions"][0];
    assert_eq!(session["threadId"], "thread-single");
    assert_eq!(session["status"]["state"], "ready", "{sessions}");
    assert_eq!(session["active"], true);
    let pid = session["pid"].as_u64().unwrap();
    let control = format!("{base}/sessions/thread-single/control");
    let r = post(
        &control,
        &json!({"subtype": "set_permission_mode", "mode": "acceptEdits"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}\n{}", r.text(), ctx());
    assert_eq!(r.json().unwrap()["response"]["mode"], "acceptEdits");
    let r = post(
        &control,
        &json!({"subtype": "set_model", "model": "claude-haiku-4-5"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}\n{}", r.text(), ctx());
    let r = post(&control, &json!({"subtype": "mcp_status"})).await;
    assert_eq!(r.status, 200, "{}\n{}", r.text(), ctx());
    assert!(
        r.text().contains("frontend"),
        "the frontend MCP server is listed: {}",
        r.text()
    );
    let r = post(&control, &json!({"subtype": "rm_rf"})).await;
    assert_eq!(r.status, 400);
    let r = post(
        &format!("{base}/approvals/nope"),
        &json!({"behavior": "allow"}),
    )
    .await;
    assert_eq!(r.status, 400, "allow without updatedInput: {}", r.text());

    // Claude Code crashes: the session says so, and the next run restarts it where it was.
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut crashed = false;
    for _ in 0..100 {
        let sessions = list_sessions(&base).await;
        if sessions["sessions"][0]["status"]["state"] == "crashed" {
            crashed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(crashed, "{}", ctx());
    let (events, text) = run_thread(&base, "run-2", "SCENARIO:text again").await;
    assert_eq!(
        events.last().unwrap()["type"],
        "RUN_FINISHED",
        "{text}\n{}",
        ctx()
    );
    // Resumed: the model got the first turn too, and the switched model answered.
    let last = world
        .upstream
        .requests()
        .into_iter()
        .rev()
        .find(|r| !r.tools().is_empty())
        .unwrap();
    assert!(last.all_text().contains("SCENARIO:text hi"), "{}", ctx());
    assert!(last.all_text().contains("SCENARIO:text again"), "{}", ctx());
    let stats = events
        .iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "result_stats")
        .unwrap();
    assert!(
        stats["value"]["modelUsage"]
            .get("claude-haiku-4-5")
            .is_some(),
        "set_model did not stick across the restart: {stats}"
    );

    // A failed turn, then another run: connect replays a history the AG-UI rules accept.
    let (events, text) = run_thread(&base, "run-3", "SCENARIO:fail now").await;
    assert_eq!(events.last().unwrap()["type"], "RUN_ERROR", "{text}");
    let (events, text) = run_thread(&base, "run-4", "SCENARIO:text once more").await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{text}");
    let r = post(
        &format!("{base}/agent/default/connect"),
        &run_input("thread-single", "run-5", ""),
    )
    .await;
    let replay: Vec<AguiEvent> = sse_events(&r.body)
        .into_iter()
        .map(|e| serde_json::from_value(e).unwrap())
        .collect();
    Verifier::check(&replay).unwrap_or_else(|v| panic!("{v:?}\n{}", r.text()));
    let runs = replay
        .iter()
        .filter(|e| e.type_name() == "RUN_STARTED")
        .count();
    assert_eq!(runs, 4, "{}", r.text());
    assert!(r.text().contains(r#""name":"run_error""#), "{}", r.text());
}

/// Run `tests/e2e/agui_app.mjs` (a scripted web app) against the world's bridge: what each step saw.
async fn app(world: &World, thread: &str, steps: Value) -> Vec<Value> {
    app_with(world, json!({"threadId": thread, "steps": steps})).await["steps"]
        .as_array()
        .unwrap()
        .clone()
}

/// `agui_app.mjs` with a whole spec (`threadId`, `steps`, `sdkServer`): all it printed.
async fn app_with(world: &World, spec: Value) -> Value {
    let mut spec = spec;
    spec["base"] = json!(world.bridge.base_url());
    node_script(world, "agui_app.mjs", &spec).await
}

/// The events of a run step's runs, each run checked by the core's AG-UI verifier.
fn run_events(step: &Value, ctx: &str) -> Vec<Vec<Value>> {
    step["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("not a run step: {step}\n{ctx}"))
        .iter()
        .map(|run| {
            assert!(
                run["error"].is_null(),
                "run failed: {}\n{ctx}",
                run["error"]
            );
            let events: Vec<Value> = run["events"].as_array().unwrap().clone();
            let typed: Vec<AguiEvent> = events
                .iter()
                .map(|e| serde_json::from_value(e.clone()).unwrap())
                .collect();
            Verifier::check(&typed).unwrap_or_else(|v| panic!("{v:?}\n{ctx}"));
            events
        })
        .collect()
}

fn run_text(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap_or_default())
        .collect()
}

fn app_context(world: &World, steps: &[Value]) -> String {
    format!(
        "app saw: {}\n--- upstream saw:\n{}\n--- bridge log:\n{}",
        serde_json::to_string_pretty(steps).unwrap_or_default(),
        world.upstream.dump(),
        world.bridge.log()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_an_app_hook_a_slash_command_and_the_capabilities() {
    let world = world("agui-init").await;
    let commands = world.cwd.path().join(".claude/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(
        commands.join("greet.md"),
        "---\ndescription: Greets someone\n---\nSCENARIO:text Greet $ARGUMENTS warmly.\n",
    )
    .unwrap();
    let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "the app allows no shell here"}});
    let sdk_server = json!({"name": "appdocs", "results": {"app_fact": "APP-FACT-3318"},
        "tools": [{"name": "app_fact", "description": "A fact the app knows",
            "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}}}]});
    let out = app_with(
        &world,
        json!({"threadId": "thread-init", "sdkServer": sdk_server, "steps": [
            {"op": "initialize", "body": {"appendSystemPrompt": "APP-PROMPT-MARK-51",
                "hooks": {"PreToolUse": [{"matcher": "Bash", "timeout": 60}]},
                "sdkMcpServers": ["appdocs"]}},
            {"op": "run", "prompt": "/greet world"},
            {"op": "run", "prompt": "SCENARIO:hookbash make a file", "hookAnswer": deny},
            {"op": "get", "path": "/sessions/{threadId}"},
            {"op": "initialize", "body": {"hooks": {"": []}}},
            {"op": "initialize", "body": {"systemPrompt": 7}},
            {"op": "run", "prompt": "SCENARIO:sdkmcp ask the app", "approval": "allow"},
            // A new prompt for a thread whose Claude Code already recorded one: it restarts
            // (--resume) and the new prompt is the one the model gets.
            {"op": "initialize", "body": {"appendSystemPrompt": "APP-PROMPT-MARK-52"}},
            {"op": "run", "prompt": "SCENARIO:text say hello again"},
        ]}),
    )
    .await;
    let steps = out["steps"].as_array().unwrap().clone();
    let ctx = app_context(&world, &steps);

    // initialize answered with Claude Code's commands, models and account.
    assert_eq!(steps[0]["status"], 200, "{ctx}");
    let answer = &steps[0]["body"]["initialize"];
    assert!(
        answer["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "greet"),
        "{ctx}"
    );
    assert!(
        answer["models"].is_array() && answer["account"].is_object(),
        "{ctx}"
    );

    // The slash command ran: Claude Code expanded it, the model answered.
    let greet = &run_events(&steps[1], &ctx)[0];
    assert_eq!(run_text(greet), "Hello from the bridge.", "{ctx}");
    let requests = world.upstream.model_requests();
    let expanded = requests
        .iter()
        .find(|r| r.all_text().contains("Greet world warmly"))
        .unwrap_or_else(|| panic!("the command was not expanded\n{ctx}"));
    assert!(
        expanded
            .all_text()
            .contains("<command-name>/greet</command-name>"),
        "{ctx}"
    );
    // The app's system prompt reached the model.
    assert!(
        expanded.messages()[0]["content"]
            .to_string()
            .contains("APP-PROMPT-MARK-51"),
        "{ctx}"
    );
    // The capabilities are the state: system/init's and the initialize answer's.
    let snapshot = greet
        .iter()
        .rev()
        .find(|e| e["type"] == "STATE_SNAPSHOT")
        .unwrap_or_else(|| panic!("no STATE_SNAPSHOT\n{ctx}"));
    let state = &snapshot["snapshot"];
    assert!(
        state["slash_commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "greet"),
        "{ctx}"
    );
    assert!(
        state["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "Bash"),
        "{ctx}"
    );
    for key in [
        "commands",
        "models",
        "account",
        "agents",
        "skills",
        "plugins",
        "mcp_servers",
        "model",
        "permissionMode",
    ] {
        assert!(!state[key].is_null(), "{key} missing from the state\n{ctx}");
    }

    // The app's hook denied the Bash call; the model saw why; nothing ran.
    let hooked = &steps[2]["runs"][0];
    let hooks = hooked["hooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 1, "{ctx}");
    assert_eq!(hooks[0]["status"], 200, "{ctx}");
    assert_eq!(hooks[0]["listed"]["hookEvent"], "PreToolUse", "{ctx}");
    assert_eq!(hooks[0]["listed"]["input"]["tool_name"], "Bash", "{ctx}");
    assert!(hooked["approvals"].as_array().unwrap().is_empty(), "{ctx}");
    assert_eq!(
        run_text(&run_events(&steps[2], &ctx)[0]),
        "Understood.",
        "{ctx}"
    );
    assert!(!world.cwd.path().join("hooked.txt").exists(), "{ctx}");
    let seen = world
        .upstream
        .model_requests()
        .iter()
        .flat_map(|r| {
            r.tool_messages()
                .into_iter()
                .map(|m| m["content"].to_string())
                .collect::<Vec<_>>()
        })
        .find(|c| c.contains("the app allows no shell here"));
    assert!(
        seen.is_some_and(|c| c.contains("PreToolUse:Bash hook")),
        "the model did not see the hook's reason\n{ctx}"
    );

    // After the restart the model's system prompt carries the new mark, not the old one.
    assert_eq!(steps[7]["status"], 200, "{ctx}");
    assert_eq!(
        run_text(&run_events(&steps[8], &ctx)[0]),
        "Hello from the bridge.",
        "{ctx}"
    );
    let last = world
        .upstream
        .model_requests()
        .into_iter()
        .rev()
        .find(|r| {
            r.messages()
                .iter()
                .any(|m| m["content"].to_string().contains("say hello again"))
        })
        .unwrap_or_else(|| panic!("no model request for the last run\n{ctx}"));
    let system = last.messages()[0]["content"].to_string();
    assert!(
        system.contains("APP-PROMPT-MARK-52") && !system.contains("APP-PROMPT-MARK-51"),
        "the resumed session kept its recorded prompt\n{ctx}"
    );

    // GET /sessions/{threadId}.
    let session = &steps[3]["body"];
    assert_eq!(steps[3]["status"], 200, "{ctx}");
    assert_eq!(session["status"]["state"], "ready", "{ctx}");
    assert_eq!(
        session["initialize"]["appendSystemPrompt"], "APP-PROMPT-MARK-51",
        "{ctx}"
    );
    assert!(
        session["capabilities"]["slash_commands"].is_array(),
        "{ctx}"
    );
    assert!(session["pid"].is_u64(), "{ctx}");
    assert_eq!(session["history"]["runs"], 2, "{ctx}");
    // Bad options are refused with what to fix.
    assert_eq!(steps[4]["status"], 400, "{ctx}");
    assert!(
        steps[4]["body"]["message"]
            .as_str()
            .unwrap()
            .contains("hook event"),
        "{ctx}"
    );
    assert_eq!(steps[5]["status"], 400, "{ctx}");
    assert!(
        steps[5]["body"]["message"]
            .as_str()
            .unwrap()
            .contains("systemPrompt"),
        "{ctx}"
    );

    // The app's own MCP server (sdkMcpServers): Claude Code's requests went through the bridge
    // to the app, which answered them; the model called its tool and saw the answer.
    let methods: Vec<&str> = out["sdkRequests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert!(methods.starts_with(&["initialize"]), "{methods:?}\n{ctx}");
    assert!(methods.contains(&"tools/list"), "{methods:?}\n{ctx}");
    assert!(methods.contains(&"tools/call"), "{methods:?}\n{ctx}");
    assert_eq!(
        steps[6]["runs"][0]["approvals"][0]["toolName"], "mcp__appdocs__app_fact",
        "{ctx}"
    );
    assert!(
        run_text(&run_events(&steps[6], &ctx)[0]).contains("APP-FACT-3318"),
        "{ctx}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_is_undone_with_rewind_files() {
    let world = world("agui-rewind").await;
    let path = world.cwd.path().join("rewind-me.txt");
    let steps = app(
        &world,
        "thread-rewind",
        json!([
            {"op": "run", "messageId": "edit-msg", "approval": "allow",
             "prompt": format!("SCENARIO:edit PATH={} please", path.display())},
            {"op": "control", "body": {"subtype": "rewind_files", "user_message_id": "edit-msg", "dry_run": true}},
            {"op": "get", "path": "/sessions/{threadId}"},
            {"op": "control", "body": {"subtype": "rewind_files", "user_message_id": "edit-msg"}},
            {"op": "control", "body": {"subtype": "rewind_files", "user_message_id": "no-such-message", "dry_run": true}},
            {"op": "control", "body": {"subtype": "update_environment_variables", "variables": {"AGUI_MARK": "m-2981"}}},
            {"op": "run", "prompt": "SCENARIO:envbash save it", "approval": "allow"},
            {"op": "get", "path": "/sessions/{threadId}"},
        ]),
    )
    .await;
    let ctx = app_context(&world, &steps);
    assert_eq!(
        run_text(&run_events(&steps[0], &ctx)[0]),
        "Written.",
        "{ctx}"
    );
    assert_eq!(
        steps[0]["runs"][0]["approvals"][0]["toolName"], "Write",
        "{ctx}"
    );
    // The dry run lists the file and leaves it.
    assert_eq!(steps[1]["status"], 200, "{ctx}");
    let dry = &steps[1]["body"]["response"];
    assert_eq!(dry["canRewind"], true, "{ctx}");
    assert!(
        dry["filesChanged"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().ends_with("rewind-me.txt")),
        "{ctx}"
    );
    assert!(steps[2]["body"]["pid"].is_u64(), "{ctx}");
    // The rewind removed what the edit made.
    assert_eq!(steps[3]["status"], 200, "{ctx}");
    assert_eq!(steps[3]["body"]["response"]["canRewind"], true, "{ctx}");
    assert!(!path.exists(), "the file is still there\n{ctx}");
    // A message with no checkpoint cannot be rewound, and says so.
    assert_eq!(steps[4]["body"]["response"]["canRewind"], false, "{ctx}");
    assert!(steps[4]["body"]["response"]["error"].is_string(), "{ctx}");

    // An environment variable Claude Code cannot take live: its tools see it from the next run,
    // in a restarted process that resumed the conversation.
    assert_eq!(steps[5]["status"], 200, "{ctx}");
    assert_eq!(
        steps[5]["body"]["response"]["atNextRun"],
        json!(["AGUI_MARK"]),
        "{ctx}"
    );
    assert_eq!(run_text(&run_events(&steps[6], &ctx)[0]), "Saved.", "{ctx}");
    let saved = std::fs::read_to_string(world.cwd.path().join("env.txt")).unwrap_or_default();
    assert_eq!(saved.trim(), "mark=m-2981", "{ctx}");
    let pid = steps[7]["body"]["pid"].as_u64();
    assert!(
        pid.is_some() && pid != steps[2]["body"]["pid"].as_u64(),
        "{ctx}"
    );
    assert_eq!(
        steps[7]["body"]["environment"],
        json!(["AGUI_MARK"]),
        "{ctx}"
    );
    let resumed = world.bridge.log();
    assert!(resumed.contains("resume=Some("), "{ctx}");
    // The resumed conversation still holds the first turn.
    let last = world.upstream.model_requests().pop().unwrap();
    assert!(last.all_text().contains("SCENARIO:edit"), "{ctx}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_and_frontend_tools_change_without_a_new_process() {
    let world = world("agui-mcp").await;
    let docs = bridge_tests::mcp::DocsServer::start(None).await.unwrap();
    let pick = json!([{"name": "pick_color", "description": "Let the user pick a color", "parameters": {"type": "object", "properties": {}}}]);
    let steps = app(
        &world,
        "thread-mcp",
        json!([
            {"op": "run", "prompt": "SCENARIO:text hello"},
            {"op": "get", "path": "/sessions/{threadId}"},
            {"op": "control", "body": {"subtype": "mcp_set_servers", "servers": {"docs": {"type": "http", "url": docs.url}}}},
            {"op": "run", "prompt": "SCENARIO:mcp look it up", "approval": "allow"},
            {"op": "run", "prompt": "SCENARIO:newtool pick one", "tools": pick, "frontendResults": {"pick_color": "teal"}},
            {"op": "control", "body": {"subtype": "mcp_status"}},
            {"op": "control", "body": {"subtype": "mcp_reconnect", "serverName": "frontend"}},
            {"op": "control", "body": {"subtype": "mcp_set_servers", "servers": {"frontend": {"type": "http", "url": "http://x"}}}},
            {"op": "control", "body": {"subtype": "no_such_control"}},
            {"op": "get", "path": "/sessions/{threadId}"},
        ]),
    )
    .await;
    let ctx = app_context(&world, &steps);
    let pid = steps[1]["body"]["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("{ctx}"));

    // The server added at run time: connected, its tool approved, called, its answer seen.
    assert_eq!(steps[2]["status"], 200, "{ctx}");
    let added = &steps[2]["body"]["response"];
    assert!(
        added["added"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "docs"),
        "{ctx}"
    );
    assert_eq!(added["errors"], json!({}), "{ctx}");
    assert_eq!(
        steps[3]["runs"][0]["approvals"][0]["toolName"], "mcp__docs__lookup_fact",
        "{ctx}"
    );
    assert_eq!(
        docs.calls(),
        vec![json!({"called": "lookup_fact", "arguments": {"topic": "bridges"}})],
        "{ctx}"
    );
    assert!(
        run_text(&run_events(&steps[3], &ctx)[0]).contains("FACT-7731"),
        "{ctx}"
    );

    // A frontend tool registered now is called by the same process.
    let runs = run_events(&steps[4], &ctx);
    assert_eq!(
        runs.len(),
        2,
        "the tool call ends a run, its result starts the next\n{ctx}"
    );
    assert!(
        runs[0]
            .iter()
            .any(|e| e["type"] == "TOOL_CALL_START" && e["toolCallName"] == "pick_color"),
        "{ctx}"
    );
    assert_eq!(run_text(&runs[1]), "Picked.", "{ctx}");
    // Claude Code listed the tools again when told (`notifications/tools/list_changed`), before
    // the run's message went.
    assert!(
        !world
            .bridge
            .log()
            .contains("did not list the changed frontend tools in time"),
        "{ctx}"
    );
    let picked = world.upstream.model_requests().iter().any(|r| {
        r.tool_messages()
            .iter()
            .any(|m| m["content"].to_string().contains("teal"))
    });
    assert!(picked, "the client's result did not reach the model\n{ctx}");

    // Both servers are up; the frontend server is the bridge's own name.
    let servers = steps[5]["body"]["response"]["mcpServers"]
        .as_array()
        .unwrap();
    for name in ["frontend", "docs"] {
        assert!(
            servers
                .iter()
                .any(|s| s["name"] == name && s["status"] == "connected"),
            "{name}\n{ctx}"
        );
    }
    assert_eq!(steps[6]["status"], 200, "{ctx}");
    assert_eq!(steps[7]["status"], 400, "{ctx}");
    assert!(
        steps[7]["body"]["message"]
            .as_str()
            .unwrap()
            .contains("the bridge's"),
        "{ctx}"
    );
    assert_eq!(steps[8]["status"], 400, "{ctx}");
    assert!(
        steps[8]["body"]["message"]
            .as_str()
            .unwrap()
            .contains("rewind_files"),
        "{ctx}"
    );
    // Never a new process.
    assert_eq!(steps[9]["body"]["pid"].as_u64(), Some(pid), "{ctx}");
    assert_eq!(
        world
            .bridge
            .log()
            .matches("Claude Code session started")
            .count(),
        1,
        "{ctx}"
    );
}
