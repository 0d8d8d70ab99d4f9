//! The real Claude Code CLI (`-p` mode, its real tool loop) through the real bridge binary against a
//! scripted OpenAI upstream.
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
    ChatStream, PROMPT_TOKENS, parallel_tool_calls_stream, split_fragments, text_stream,
    tool_call_builder, tool_call_stream,
};
use bridge_tests::clients::{ClaudeRun, run_claude_code_with};
use bridge_tests::upstream::{RecordedRequest, ScriptedResponse, Upstream, background_response};
use serde_json::{Value, json};

const CLI_TIMEOUT: Duration = Duration::from_secs(90);
const FINAL_TEXT: &[&str] = &["All ", "done."];
/// Claude Code's arguments that let it run the Bash tool without asking.
const BASH: &[&str] = &["--allowedTools", "Bash"];

/// The upstream of a Claude Code run: requests without tools are background requests (title…); the
/// first turn (no tool result yet) gets `first`; a turn carrying tool results gets the final text.
async fn claude_code_upstream(first: ScriptedResponse) -> Upstream {
    Upstream::start(move |req: &RecordedRequest| {
        if !req.is_chat() {
            ScriptedResponse::openai_error(404, "not found", "invalid_request_error", None)
        } else if req.tools().is_empty() {
            background_response()
        } else if req.has_tool_result() {
            text_stream(FINAL_TEXT)
        } else {
            first.clone()
        }
    })
    .await
    .unwrap()
}

fn bash_args(command: &str) -> String {
    json!({"command": command, "description": "Create a file"}).to_string()
}

/// The arguments of a Bash call running `command`, cut into `pieces` fragments.
fn bash_fragments(command: &str, pieces: usize) -> Vec<String> {
    split_fragments(&bash_args(command), pieces)
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A stream with one Bash call running `command`, its arguments in `pieces` fragments.
fn bash_call(id: &str, command: &str, pieces: usize) -> ScriptedResponse {
    tool_call_stream(id, "Bash", &as_strs(&bash_fragments(command, pieces)))
}

fn context(run: &ClaudeRun, upstream: &Upstream, bridge: &Bridge) -> String {
    format!(
        "{}\n--- upstream requests:\n{}\n--- bridge log {}:\n{}",
        run.describe(),
        upstream.dump(),
        bridge.log_path().display(),
        bridge.log()
    )
}

/// A scripted upstream and a bridge in front of it, for Claude Code runs.
struct Session {
    upstream: Upstream,
    bridge: Bridge,
}

impl Session {
    /// [`claude_code_upstream`] answering the first turn with `first`, and a default bridge.
    async fn start(first: ScriptedResponse, name: &str) -> Self {
        Self::start_with(
            claude_code_upstream(first).await,
            name,
            BridgeOptions::default(),
        )
        .await
    }

    async fn start_with(upstream: Upstream, name: &str, opts: BridgeOptions) -> Self {
        let bridge = Bridge::start_with(&upstream.base_url(), name, opts)
            .await
            .unwrap();
        Self { upstream, bridge }
    }

    /// `claude -p PROMPT [args]` against the bridge (`env` as in [`run_claude_code_with`]).
    async fn run_with(&self, prompt: &str, args: &[&str], env: &[(&str, &str)]) -> ClaudeRun {
        run_claude_code_with(&self.bridge.base_url(), prompt, args, env, CLI_TIMEOUT)
            .await
            .unwrap()
    }

    async fn run(&self, prompt: &str, args: &[&str]) -> ClaudeRun {
        self.run_with(prompt, args, &[]).await
    }

    fn context(&self, run: &ClaudeRun) -> String {
        context(run, &self.upstream, &self.bridge)
    }

    /// [`assert_tool_loop`], and every one of `files` exists in the run's cwd (the tools really ran).
    fn assert_tool_loop(&self, run: &ClaudeRun, calls: usize, files: &[&str]) -> RecordedRequest {
        let second = assert_tool_loop(run, &self.upstream, &self.bridge, calls);
        for f in files {
            assert!(
                run.cwd.path().join(f).is_file(),
                "{f} missing: the Bash tool did not run\n{}",
                self.context(run)
            );
        }
        second
    }
}

/// Checks shared by the tool-loop tests: exit 0, the final text, and a second upstream request that
/// carries the assistant tool calls and one `tool` message per call, with matching ids.
fn assert_tool_loop(
    run: &ClaudeRun,
    upstream: &Upstream,
    bridge: &Bridge,
    calls: usize,
) -> RecordedRequest {
    let ctx = || context(run, upstream, bridge);
    assert_eq!(run.output.code, Some(0), "Claude Code failed\n{}", ctx());
    let result = run
        .result
        .as_ref()
        .unwrap_or_else(|| panic!("no JSON result on stdout\n{}", ctx()));
    assert_eq!(result["is_error"], json!(false), "{}", ctx());
    assert!(
        run.result_text().unwrap_or_default().contains("All done."),
        "final text missing\n{}",
        ctx()
    );

    let model_reqs: Vec<RecordedRequest> = upstream
        .requests()
        .into_iter()
        .filter(|r| !r.tools().is_empty())
        .collect();
    assert!(
        model_reqs.len() >= 2,
        "expected a tool turn and a final turn\n{}",
        ctx()
    );
    let first = &model_reqs[0];
    assert!(
        first.is_stream(),
        "Claude Code streams; the upstream request should too\n{}",
        ctx()
    );
    assert_eq!(
        first.body["model"],
        "test-model",
        "--model maps every client model\n{}",
        ctx()
    );
    assert!(
        first
            .tools()
            .iter()
            .any(|t| t.pointer("/function/name") == Some(&json!("Bash"))),
        "Claude Code's Bash tool must reach the upstream as a function\n{}",
        ctx()
    );

    for r in &model_reqs {
        let problems = r.openai_shape_problems();
        assert!(
            problems.is_empty(),
            "request #{} is not a clean OpenAI request: {problems:?}\n{}",
            r.seq,
            ctx()
        );
        let max = r
            .body
            .get("max_tokens")
            .or_else(|| r.body.get("max_completion_tokens"))
            .and_then(Value::as_u64);
        assert!(
            max.is_some_and(|m| m <= 32_768),
            "max_tokens capped by default (pitfalls 8): {max:?}\n{}",
            ctx()
        );
        assert_eq!(
            r.messages()[0]["role"],
            "system",
            "Claude Code's system prompt comes first\n{}",
            ctx()
        );
    }
    let second = model_reqs
        .iter()
        .find(|r| r.has_tool_result())
        .unwrap_or_else(|| panic!("no upstream request carried a tool result\n{}", ctx()))
        .clone();
    let tool_calls = second.assistant_tool_calls();
    assert_eq!(
        tool_calls.len(),
        calls,
        "assistant tool_calls replayed upstream\n{}",
        ctx()
    );
    let call_ids: Vec<&str> = tool_calls.iter().filter_map(|c| c["id"].as_str()).collect();
    let results = second.tool_messages();
    assert_eq!(results.len(), calls, "one tool message per call\n{}", ctx());
    for r in &results {
        let id = r["tool_call_id"].as_str().unwrap_or_default();
        assert!(
            call_ids.contains(&id),
            "tool_call_id {id:?} matches no assistant tool call {call_ids:?}\n{}",
            ctx()
        );
    }
    for c in &tool_calls {
        assert_eq!(c["type"], "function");
        assert_eq!(c["function"]["name"], "Bash");
        let args: Value =
            serde_json::from_str(c["function"]["arguments"].as_str().unwrap_or("null"))
                .unwrap_or_else(|e| panic!("replayed arguments are not JSON ({e})\n{}", ctx()));
        assert!(
            args["command"]
                .as_str()
                .unwrap_or_default()
                .starts_with("touch "),
            "{}",
            ctx()
        );
    }
    // Tool results come right after the assistant turn that asked for them (OpenAI requires it).
    let msgs = second.messages();
    let a = msgs
        .iter()
        .rposition(|m| m.get("tool_calls").is_some())
        .unwrap_or(0);
    for (offset, m) in msgs[a + 1..=a + calls].iter().enumerate() {
        assert_eq!(
            m["role"],
            "tool",
            "message {} after the assistant tool calls\n{}",
            offset + 1,
            ctx()
        );
    }
    second
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_plain_text_answer() {
    let s = Session::start(text_stream(&["Hello ", "from the ", "bridge."]), "cc-text").await;
    let run = s.run("say hello", &[]).await;
    let ctx = s.context(&run);
    assert_eq!(run.output.code, Some(0), "{ctx}");
    assert_eq!(run.result_text(), Some("Hello from the bridge."), "{ctx}");
    let usage = &run.result.as_ref().unwrap()["usage"];
    let total_in = usage["input_tokens"].as_u64().unwrap_or(0)
        + usage["cache_read_input_tokens"].as_u64().unwrap_or(0)
        + usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
    assert_eq!(
        total_in, PROMPT_TOKENS,
        "prompt tokens reach Claude Code (input + cache read)\n{ctx}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_a_streamed_bash_tool_call() {
    let first = bash_call("call_bash_1", "touch made_by_tool.txt", 6);
    let s = Session::start(first, "cc-tool").await;
    let run = s.run("create the file", BASH).await;
    let second = s.assert_tool_loop(&run, 1, &["made_by_tool.txt"]);
    let args: Value = serde_json::from_str(
        second.assistant_tool_calls()[0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args["command"], "touch made_by_tool.txt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_two_interleaved_parallel_tool_calls() {
    let a = bash_fragments("touch first_file.txt", 4);
    let b = bash_fragments("touch second_file.txt", 5);
    let first = parallel_tool_calls_stream(&[
        ("call_par_0", "Bash", &as_strs(&a)),
        ("call_par_1", "Bash", &as_strs(&b)),
    ]);
    let s = Session::start(first, "cc-parallel").await;
    let run = s.run("create both files", BASH).await;
    s.assert_tool_loop(&run, 2, &["first_file.txt", "second_file.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_a_tool_call_after_reasoning() {
    let frags = bash_fragments("touch after_thinking.txt", 5);
    let reasoning = [
        "The user wants ",
        "a file. I will ",
        "use Bash to touch it.",
    ];
    let thinking = reasoning
        .iter()
        .fold(ChatStream::new().role(), |s, r| s.reasoning(r));
    let first = tool_call_builder(thinking, &[("call_think_1", "Bash", &as_strs(&frags))])
        .finish("tool_calls")
        .usage(90, 30, 0)
        .build();
    let s = Session::start(first, "cc-reasoning").await;
    let run = s.run("create the file", BASH).await;
    let second = s.assert_tool_loop(&run, 1, &["after_thinking.txt"]);
    // DeepSeek-style pass-back (pitfalls 16): the reasoning of the tool-calling turn goes back upstream.
    let assistant = second
        .messages()
        .iter()
        .find(|m| m.get("tool_calls").is_some())
        .cloned()
        .unwrap_or(Value::Null);
    let passed_back = assistant["reasoning_content"].as_str().unwrap_or_default();
    assert_eq!(
        passed_back,
        reasoning.concat(),
        "reasoning_content of the tool-calling turn must be sent back upstream\n{}",
        s.context(&run)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_passes_a_failed_tool_result_back() {
    let first = bash_call("call_fail_1", "echo boom >&2; exit 3", 3);
    let s = Session::start(first, "cc-tool-error").await;
    let run = s.run("run it", BASH).await;
    let ctx = s.context(&run);
    assert_eq!(run.output.code, Some(0), "{ctx}");
    let second = s
        .upstream
        .requests()
        .into_iter()
        .find(RecordedRequest::has_tool_result)
        .unwrap_or_else(|| panic!("no tool result went upstream\n{ctx}"));
    let tool = second.tool_messages()[0].clone();
    let content = match &tool["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    assert!(
        content.contains("boom") || content.contains('3'),
        "the failed command's output goes back: {tool}\n{ctx}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_shows_the_upstream_error_message() {
    // (A full context is not this case: it becomes "prompt is too long", which Claude Code
    // words itself — see e2e_providers.)
    let error = ScriptedResponse::openai_error(
        400,
        "Invalid schema for function 'Bash': In context=('properties', 'timeout'), 'maximum' is not permitted.",
        "invalid_request_error",
        Some("invalid_function_parameters"),
    );
    let s = Session::start(error, "cc-upstream-400").await;
    let run = s.run("say hello", &[]).await;
    let ctx = s.context(&run);
    assert_ne!(
        run.output.code,
        Some(0),
        "an API error is a failed run\n{ctx}"
    );
    let result = run
        .result
        .as_ref()
        .unwrap_or_else(|| panic!("no JSON result\n{ctx}"));
    assert_eq!(result["is_error"], json!(true), "{ctx}");
    let shown = format!("{}{}", run.output.stdout, run.output.stderr);
    assert!(
        shown.contains("Invalid schema for function 'Bash'"),
        "the upstream's wording reaches the user\n{ctx}"
    );
    assert!(shown.contains("400"), "{ctx}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_fails_cleanly_when_the_upstream_drops_mid_stream() {
    let frags = bash_fragments("touch must_not_exist.txt", 4);
    // The tool call starts, then the connection drops before the arguments are complete.
    let first = tool_call_builder(
        ChatStream::new().role().text("Creating it."),
        &[("call_drop", "Bash", &as_strs(&frags[..2]))],
    )
    .disconnect()
    .build();
    let s = Session::start(first, "cc-drop").await;
    let run = s.run("create the file", BASH).await;
    let ctx = s.context(&run);
    assert_ne!(
        run.output.code,
        Some(0),
        "a dropped upstream is a failed run\n{ctx}"
    );
    assert!(
        !run.cwd.path().join("must_not_exist.txt").exists(),
        "a half tool call must never run\n{ctx}"
    );
    assert!(
        s.upstream.requests().iter().all(|r| !r.has_tool_result()),
        "no tool result can follow a broken turn\n{ctx}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_authenticates_with_the_client_key() {
    let opts = BridgeOptions {
        env: vec![("CLAUDE_BRIDGE_CLIENT_KEY".into(), "ck-cli-key".into())],
        ..Default::default()
    };
    let upstream = claude_code_upstream(text_stream(&["Authorised."])).await;
    let s = Session::start_with(upstream, "cc-client-key", opts).await;
    // ANTHROPIC_API_KEY → x-api-key; ANTHROPIC_AUTH_TOKEN → Authorization: Bearer.
    for env in [
        [
            ("ANTHROPIC_API_KEY", "ck-cli-key"),
            ("ANTHROPIC_AUTH_TOKEN", ""),
        ],
        [
            ("ANTHROPIC_API_KEY", ""),
            ("ANTHROPIC_AUTH_TOKEN", "ck-cli-key"),
        ],
    ] {
        let run = s.run_with("hi", &[], &env).await;
        let ctx = s.context(&run);
        assert_eq!(run.output.code, Some(0), "{env:?}\n{ctx}");
        assert_eq!(run.result_text(), Some("Authorised."), "{ctx}");
    }
    let run = s.run("hi", &[]).await;
    let ctx = s.context(&run);
    assert_ne!(
        run.output.code,
        Some(0),
        "a wrong key (sk-test) is refused\n{ctx}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_keeps_going_through_several_tool_steps() {
    // Turn 1: touch step_one.txt; turn 2 (one tool result): touch step_two.txt; turn 3: text.
    // Tools must not stop after the first step (pitfalls 10): history with two assistant tool turns.
    let (one, two) = (
        bash_call("call_step_1", "touch step_one.txt", 3),
        bash_call("call_step_2", "touch step_two.txt", 3),
    );
    let upstream = Upstream::start(
        move |req: &RecordedRequest| match req.tool_messages().len() {
            _ if req.tools().is_empty() => background_response(),
            0 => one.clone(),
            1 => two.clone(),
            _ => text_stream(FINAL_TEXT),
        },
    )
    .await
    .unwrap();
    let s = Session::start_with(upstream, "cc-steps", BridgeOptions::default()).await;
    let run = s.run("create two files one after the other", BASH).await;
    let ctx = s.context(&run);
    assert_eq!(run.output.code, Some(0), "{ctx}");
    assert_eq!(run.result_text(), Some("All done."), "{ctx}");
    for f in ["step_one.txt", "step_two.txt"] {
        assert!(run.cwd.path().join(f).is_file(), "{f} missing\n{ctx}");
    }
    let last = s
        .upstream
        .requests()
        .into_iter()
        .rfind(|r| r.tool_messages().len() == 2)
        .unwrap_or_else(|| panic!("{ctx}"));
    let roles: Vec<&str> = last
        .messages()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    let tail: Vec<&str> = roles.iter().rev().take(4).rev().copied().collect();
    assert_eq!(
        tail,
        ["assistant", "tool", "assistant", "tool"],
        "history of two tool steps: {roles:?}\n{ctx}"
    );
    let ids: Vec<&str> = last
        .assistant_tool_calls()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    let answered: Vec<&str> = last
        .tool_messages()
        .iter()
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    assert_eq!(ids, answered, "{ctx}");
    assert!(
        last.openai_shape_problems().is_empty(),
        "{:?}\n{ctx}",
        last.openai_shape_problems()
    );
}

/// Issue 13.5: `claude-bridge claude` runs the real Claude Code on a bridge of its own, and its
/// log goes to a file under `$XDG_STATE_HOME/claude-bridge/` (it says where on stderr, once),
/// never onto the terminal Claude Code draws on; `--listen` is honoured, not ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_launcher_runs_claude_code_and_keeps_its_log_off_the_screen() {
    let upstream =
        claude_code_upstream(bridge_tests::chunks::text_stream(&["Launched ", "fine."])).await;
    let state = bridge_tests::tempdir::TempDir::new("launcher-state").unwrap();
    let home = bridge_tests::tempdir::TempDir::new("launcher-home").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let claude = bridge_tests::clients::claude_code_bin().unwrap();
    let mut cmd = tokio::process::Command::new(bridge_tests::bridge::binary_path().unwrap());
    cmd.args([
        "claude",
        "--base-url",
        &upstream.base_url(),
        "--model",
        "test-model",
    ])
    .args(["--listen", &format!("127.0.0.1:{port}")])
    .args(["--claude-bin", &claude.to_string_lossy()])
    .args(["--", "-p", "say hi", "--output-format", "json"])
    .current_dir(home.path())
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .env("HOME", home.path())
    .env("XDG_STATE_HOME", state.path())
    .env("CLAUDE_BRIDGE_NO_UPSTREAM_CHECK", "true")
    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    .env("CLAUDE_CODE_MAX_RETRIES", "0")
    .env("DISABLE_AUTOUPDATER", "1")
    .kill_on_drop(true);
    let output = tokio::time::timeout(CLI_TIMEOUT, cmd.output())
        .await
        .unwrap()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    let shown = format!(
        "stdout:\n{stdout}\nstderr:\n{stderr}\nupstream:\n{}",
        upstream.dump()
    );
    assert_eq!(output.status.code(), Some(0), "{shown}");
    let result: Value = serde_json::from_str(stdout.trim()).unwrap_or_default();
    assert_eq!(result["result"], "Launched fine.", "{shown}");
    // The terminal got one line from the bridge: where its log is.
    let logs_dir = state.path().join("claude-bridge");
    assert_eq!(
        stderr.matches("claude-bridge: logging to").count(),
        1,
        "{shown}"
    );
    assert!(
        stderr.contains(&logs_dir.to_string_lossy().into_owned()),
        "{shown}"
    );
    assert!(
        !stdout.contains(" INFO ") && !stderr.contains(" INFO "),
        "{shown}"
    );
    let files: Vec<_> = std::fs::read_dir(&logs_dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "{shown}");
    let log = std::fs::read_to_string(files[0].path()).unwrap();
    assert!(log.contains("claude-bridge serving"), "{log}");
    assert!(
        log.contains(&format!("listen=127.0.0.1:{port}")),
        "--listen was not honoured:\n{log}"
    );
}

/// Claude Code's MCP tool names past what OpenAI takes: a real MCP server (the official SDK's)
/// whose tool Claude Code names `mcp__<server>__<tool>`, 90 characters long, through an upstream
/// that refuses function names as OpenAI does (over 64 characters, or outside `[a-zA-Z0-9_-]`).
/// The bridge offers the tool under a short name, the model calls that name, Claude Code runs
/// its own tool on the MCP server, and the result reaches the model under the short name again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tool_name_past_64_characters_is_called_through_a_strict_upstream() {
    const SERVER: &str = "acme-observability-grafana-cloud";
    const TOOL: &str = "query_prometheus_range_with_labels_and_annotations";
    let full = format!("mcp__{SERVER}__{TOOL}");
    assert!(full.len() > 64);
    let docs = bridge_tests::mcp::DocsServer::start(Some(TOOL))
        .await
        .unwrap();
    let upstream = Upstream::start(move |req: &RecordedRequest| {
        let offered = req
            .tools()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .find(|name| {
                name.starts_with("mcp__acme-observability") && !name.ends_with("lookup_fact")
            })
            .map(str::to_owned);
        match offered {
            _ if !req.is_chat() => {
                ScriptedResponse::openai_error(404, "not found", "invalid_request_error", None)
            }
            None => background_response(),
            Some(_) if req.has_tool_result() => text_stream(FINAL_TEXT),
            Some(name) => tool_call_stream("call_prom", &name, &[r#"{"query": "up"}"#]),
        }
    })
    .await
    .unwrap();
    let session = Session::start_with(upstream, "cc-long-mcp-name", BridgeOptions::default()).await;
    let config = json!({"mcpServers": {SERVER: {"type": "http", "url": docs.url}}}).to_string();
    // Every tool offered in the first request (no deferred tool search), once the server is
    // connected.
    let run = session
        .run_with(
            "What does the metrics tool say about `up`?",
            &["--mcp-config", &config, "--allowedTools", &full],
            &[
                ("ENABLE_TOOL_SEARCH", "false"),
                ("MCP_CONNECTION_NONBLOCKING", "0"),
            ],
        )
        .await;
    let ctx = session.context(&run);
    assert_eq!(run.output.code, Some(0), "{ctx}");
    assert!(
        run.result_text().unwrap_or_default().contains("All done."),
        "{ctx}"
    );
    let last = session
        .upstream
        .model_requests()
        .into_iter()
        .find(|r| r.has_tool_result())
        .unwrap_or_else(|| panic!("no request carried the tool's result\n{ctx}"));
    assert_eq!(
        docs.calls(),
        vec![json!({"called": TOOL, "arguments": {"query": "up"}})],
        "{ctx}"
    );
    // Every request went up with names the upstream takes, the long one shortened the same way
    // each time, and the tool's result came back to the model.
    let sent: Vec<String> = last
        .tools()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    let short = sent
        .iter()
        .find(|n| n.starts_with("mcp__acme-observability") && !n.ends_with("lookup_fact"))
        .unwrap_or_else(|| panic!("the MCP tool was not offered: {sent:?}\n{ctx}"));
    assert!(
        bridge_core::translate::tool_names::acceptable(short),
        "{short}\n{ctx}"
    );
    assert!(last.all_text().contains("SERIES-5521"), "{ctx}");
    assert_eq!(
        last.assistant_tool_calls()[0]["function"]["name"].as_str(),
        Some(short.as_str()),
        "{ctx}"
    );
    assert!(
        session
            .upstream
            .requests()
            .iter()
            .all(|r| r.refused_function_name().is_none()),
        "{ctx}"
    );
}

/// Whether the request offers a function named `name`.
fn offers(req: &RecordedRequest, name: &str) -> bool {
    req.tools()
        .iter()
        .any(|t| t["function"]["name"].as_str() == Some(name))
}

/// The upstream of a WebSearch run. Claude Code's main loop calls `WebSearch`; the tool runs a
/// side query with Anthropic's `web_search` server tool, which the bridge offers as a
/// `web_search` function: the model calls it, and once the search's results are in the request
/// it answers with what they say (so an answer quoting the result proves the result reached
/// the model). The main loop then answers with what the WebSearch tool returned.
async fn web_search_upstream() -> Upstream {
    Upstream::start(move |req: &RecordedRequest| {
        let secret = |text: &str| {
            ["7319", "no search backend"]
                .into_iter()
                .find(|s| text.contains(s))
                .unwrap_or("nothing")
                .to_owned()
        };
        if !req.is_chat() {
            ScriptedResponse::openai_error(404, "not found", "invalid_request_error", None)
        } else if offers(req, "web_search") {
            if req.has_tool_result() {
                let found = secret(&req.all_text());
                text_stream(&["The search says: ", &found, "."])
            } else {
                tool_call_stream(
                    "call_ws",
                    "web_search",
                    &[r#"{"query": "quokka "#, r#"secret number"}"#],
                )
            }
        } else if offers(req, "WebSearch") {
            if req.has_tool_result() {
                let found = secret(&req.all_text());
                text_stream(&["Answer: ", &found])
            } else {
                tool_call_stream(
                    "call_main",
                    "WebSearch",
                    &[r#"{"query": "quokka secret number"}"#],
                )
            }
        } else {
            background_response()
        }
    })
    .await
    .unwrap()
}

/// The Claude Code run of a WebSearch test: the tool allowed, every tool in the first request.
async fn run_web_search(session: &Session) -> ClaudeRun {
    session
        .run_with(
            "What is the quokka's secret number? Search the web.",
            &["--allowedTools", "WebSearch"],
            &[("ENABLE_TOOL_SEARCH", "false")],
        )
        .await
}

/// Claude Code's WebSearch through a Chat upstream that has no search: the bridge offers the
/// model a `web_search` function, runs the query against a SearXNG instance (a strict stand-in
/// speaking its JSON API), streams `server_tool_use` and `web_search_tool_result` to Claude Code
/// and sends the results to the model in a second round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_web_search_runs_through_the_bridge_and_searxng() {
    let searx = bridge_tests::searxng::SearxNg::start(|query| {
        vec![bridge_tests::searxng::SearchResultSpec::new(
            "https://docs.example.org/quokka",
            &format!("Quokka facts for {query}"),
            "The quokka's secret number is 7319.",
        )]
    })
    .await
    .unwrap();
    let opts =
        BridgeOptions::default().args(&["--search", "searxng", "--search-url", &searx.base_url()]);
    let session = Session::start_with(web_search_upstream().await, "cc-web-search", opts).await;
    let run = run_web_search(&session).await;
    let ctx = format!(
        "{}\n--- searxng: {:?}",
        session.context(&run),
        searx.queries()
    );
    assert_eq!(run.output.code, Some(0), "{ctx}");
    assert_eq!(run.result_text(), Some("Answer: 7319"), "{ctx}");
    let queries = searx.queries();
    assert_eq!(queries.len(), 1, "{ctx}");
    assert_eq!(queries[0].status, 200, "{ctx}");
    assert_eq!(queries[0].param("q"), Some("quokka secret number"), "{ctx}");
    assert_eq!(queries[0].param("format"), Some("json"), "{ctx}");
    let requests = session.upstream.model_requests();
    // The side query's second round carries the search's results as the function's result.
    let second = requests
        .iter()
        .find(|r| offers(r, "web_search") && r.has_tool_result())
        .unwrap_or_else(|| panic!("no round carried the search results\n{ctx}"));
    let result = second.tool_messages()[0]["content"].to_string();
    assert!(
        result.contains("7319") && result.contains("https://docs.example.org/quokka"),
        "{ctx}"
    );
    assert_eq!(
        second.assistant_tool_calls()[0]["function"]["name"],
        "web_search",
        "{ctx}"
    );
    // Claude Code read the search from the stream: its tool result lists the link it found.
    let main = requests
        .iter()
        .find(|r| offers(r, "WebSearch") && r.has_tool_result())
        .unwrap_or_else(|| panic!("the main loop got no WebSearch result\n{ctx}"));
    let shown = main.tool_messages()[0]["content"].to_string();
    assert!(shown.contains("https://docs.example.org/quokka"), "{ctx}");
    assert!(shown.contains("The search says: 7319"), "{ctx}");
}

/// The same without a search backend: the search is answered with Anthropic's `unavailable`
/// error, and the model is told how to configure a backend (never a silent nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_web_search_without_a_backend_says_how_to_configure_one() {
    let session = Session::start_with(
        web_search_upstream().await,
        "cc-web-search-none",
        BridgeOptions::default(),
    )
    .await;
    let run = run_web_search(&session).await;
    let ctx = session.context(&run);
    assert_eq!(run.output.code, Some(0), "{ctx}");
    let requests = session.upstream.model_requests();
    let second = requests
        .iter()
        .find(|r| offers(r, "web_search") && r.has_tool_result())
        .unwrap_or_else(|| panic!("no round carried the search's failure\n{ctx}"));
    let result = second.tool_messages()[0]["content"].to_string();
    assert!(
        result.contains("unavailable") && result.contains("[search]"),
        "{ctx}"
    );
    assert_eq!(
        run.result_text(),
        Some("Answer: no search backend"),
        "{ctx}"
    );
    assert!(
        session
            .bridge
            .log()
            .contains("no search backend is configured"),
        "{ctx}"
    );
}

/// Claude Code's Read tool on a PDF, through a Chat upstream, in each `--documents` mode. Claude
/// Code sends the PDF it read as a `document` block inside the tool result; a Chat tool message
/// takes only text, so the bridge sends the file after the results (`file`: OpenAI's file part,
/// the PDF byte for byte), its text (`text`: extracted by the bridge) or a note (`omit`) — and
/// never the base64 as text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_reads_a_pdf_through_a_chat_upstream_in_each_documents_mode() {
    use base64::Engine as _;
    const PDF: &[u8] = include_bytes!("../fixtures/documents/report.pdf");
    const SENTENCE: &str = "Quarterly revenue grew 12 percent";
    let dir = bridge_tests::tempdir::TempDir::new("cc-pdf").unwrap();
    let path = dir.path().join("report.pdf");
    std::fs::write(&path, PDF).unwrap();
    let data_url = format!(
        "data:application/pdf;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(PDF)
    );
    let read = tool_call_stream(
        "call_read",
        "Read",
        &[&json!({"file_path": path.to_string_lossy()}).to_string()],
    );
    let dir_arg = dir.path().to_string_lossy().into_owned();
    for mode in ["file", "text", "omit"] {
        let opts = BridgeOptions {
            extra_args: vec!["--documents".into(), mode.into()],
            ..BridgeOptions::default()
        };
        let s = Session::start_with(
            claude_code_upstream(read.clone()).await,
            &format!("cc-pdf-{mode}"),
            opts,
        )
        .await;
        let run = s
            .run(
                "Summarise report.pdf",
                &["--allowedTools", "Read", "--add-dir", &dir_arg],
            )
            .await;
        let ctx = s.context(&run);
        assert_eq!(run.output.code, Some(0), "{mode}: {ctx}");
        let second = s
            .upstream
            .requests()
            .into_iter()
            .find(RecordedRequest::has_tool_result)
            .unwrap_or_else(|| panic!("{mode}: no tool result went upstream\n{ctx}"));
        let files: Vec<&Value> = second
            .messages()
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|part| part["type"] == "file")
            .collect();
        let text = second.all_text();
        assert!(
            !text.contains("JVBERi0"),
            "{mode}: the PDF's base64 went as text\n{ctx}"
        );
        match mode {
            "file" => {
                assert_eq!(files.len(), 1, "{mode}: one file part\n{ctx}");
                assert_eq!(
                    files[0]["file"]["file_data"],
                    data_url.as_str(),
                    "{mode}\n{ctx}"
                );
                assert!(!text.contains(SENTENCE), "{mode}\n{ctx}");
            }
            "text" => {
                assert!(files.is_empty(), "{mode}\n{ctx}");
                assert!(
                    text.contains(SENTENCE),
                    "{mode}: the PDF's text reaches the model\n{ctx}"
                );
            }
            _ => {
                assert!(files.is_empty(), "{mode}\n{ctx}");
                assert!(!text.contains(SENTENCE), "{mode}\n{ctx}");
                assert!(
                    text.contains("[document omitted (application/pdf)"),
                    "{mode}\n{ctx}"
                );
            }
        }
    }
}
