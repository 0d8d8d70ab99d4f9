//! The session machine's rules, one test each, with a fixed clock and scripted Claude Code lines.

use serde_json::{Value, json};

use super::*;

const T: &str = "thread-1";

fn session() -> AguiSession {
    AguiSession::new(T, 7, Limits::default(), None)
}

fn drain(s: &mut AguiSession) -> Vec<Output> {
    std::iter::from_fn(|| s.poll_output()).collect()
}

/// The JSON lines written to stdin.
fn writes(outputs: &[Output]) -> Vec<Value> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Write(line) => {
                assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
                Some(serde_json::from_str(line).unwrap())
            }
            _ => None,
        })
        .collect()
}

fn events(outputs: &[Output]) -> Vec<&'static str> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e.type_name()),
            _ => None,
        })
        .collect()
}

fn input(run: &str, messages: Value) -> RunAgentInput {
    serde_json::from_value(json!({"threadId": T, "runId": run, "messages": messages})).unwrap()
}

fn user(run: &str, id: &str, text: &str) -> RunAgentInput {
    input(run, json!([{"id": id, "role": "user", "content": text}]))
}

/// A spawned session whose `initialize` was answered.
fn ready() -> AguiSession {
    let mut s = session();
    s.handle_spawned(0, None);
    let id = writes(&drain(&mut s))[0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    s.handle_line(
        &json!({"type": "control_response", "response": {"subtype": "success", "request_id": id,
            "response": {"commands": [{"name": "compact"}], "models": [], "account": {"email": "a@b"}}}})
        .to_string(),
        1,
        &NoRules,
    );
    assert!(drain(&mut s).is_empty());
    assert_eq!(s.status(), Status::Ready);
    s
}

fn line(s: &mut AguiSession, value: Value, now: u64) -> Vec<Output> {
    s.handle_line(&value.to_string(), now, &NoRules);
    drain(s)
}

fn result() -> Value {
    json!({"type": "result", "subtype": "success", "is_error": false, "result": "done"})
}

fn text(t: &str) -> Value {
    json!({"type": "assistant", "message": {"id": format!("msg_{t}"), "role": "assistant",
        "content": [{"type": "text", "text": t}]}})
}

fn control_done(outputs: &[Output], caller: Caller) -> Option<Result<Value, String>> {
    control_error(outputs, caller).map(|r| r.map_err(|e| e.to_string()))
}

fn control_error(outputs: &[Output], caller: Caller) -> Option<Result<Value, ControlError>> {
    outputs.iter().find_map(|o| match o {
        Output::ControlDone { caller: c, result } if *c == caller => Some(result.clone()),
        _ => None,
    })
}

/// Answer the latest control request written in `outputs` with success.
fn accept(s: &mut AguiSession, outputs: &[Output], now: u64) -> Vec<Output> {
    let id = writes(outputs)
        .iter()
        .rev()
        .find(|w| w["type"] == "control_request")
        .unwrap()["request_id"]
        .clone();
    line(
        s,
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id}}),
        now,
    )
}

#[test]
fn initialize_carries_the_apps_prompt_and_hooks_and_its_answer_is_kept() {
    let mut s = session();
    let mut hooks = BTreeMap::new();
    hooks.insert(
        "PreToolUse".to_owned(),
        vec![HookMatcher {
            matcher: Some("Bash".into()),
            timeout: Some(30),
        }],
    );
    s.set_init_options(InitOptions {
        system_prompt: None,
        append_system_prompt: Some("Be brief.".into()),
        hooks,
        sdk_mcp_servers: Vec::new(),
    })
    .unwrap();
    s.handle_spawned(0, Some(9));
    assert_eq!(s.status(), Status::Starting);
    let out = drain(&mut s);
    let init = &writes(&out)[0];
    assert_eq!(init["type"], "control_request");
    assert_eq!(
        init["request"],
        json!({"subtype": "initialize", "appendSystemPrompt": "Be brief.",
            "systemPromptSnapshot": false,
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["hook_0"], "timeout": 30}]}})
    );
    let id = init["request_id"].as_str().unwrap();
    let out = line(
        &mut s,
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id,
            "response": {"commands": [], "models": [{"value": "opus"}], "account": {}}}}),
        5,
    );
    let answer = control_done(&out, 9).unwrap().unwrap();
    assert_eq!(answer["models"][0]["value"], "opus");
    assert_eq!(s.capabilities()["models"][0]["value"], "opus");
    assert_eq!(s.status(), Status::Ready);
}

#[test]
fn every_control_request_is_answered_by_its_own_id() {
    let mut s = ready();
    s.handle_control(1, json!({"subtype": "set_model", "model": "haiku"}), 10);
    s.handle_control(2, json!({"subtype": "mcp_status"}), 10);
    let sent = writes(&drain(&mut s));
    let (a, b) = (sent[0]["request_id"].clone(), sent[1]["request_id"].clone());
    assert_ne!(a, b);
    // Answered out of order; an unknown id is ignored.
    let out = line(
        &mut s,
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": b, "response": {"mcpServers": []}}}),
        11,
    );
    assert_eq!(control_done(&out, 2), Some(Ok(json!({"mcpServers": []}))));
    let out = line(
        &mut s,
        json!({"type": "control_response", "response": {"subtype": "error", "request_id": a, "error": "no such model"}}),
        12,
    );
    assert_eq!(control_done(&out, 1), Some(Err("no such model".into())));
    assert!(
        line(
            &mut s,
            json!({"type": "control_response", "response": {"subtype": "success", "request_id": "req_x"}}),
            13
        )
        .is_empty()
    );
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_control_request_times_out_and_claude_code_is_told() {
    let mut s = ready();
    s.handle_control(1, json!({"subtype": "mcp_status"}), 100);
    let id = writes(&drain(&mut s))[0]["request_id"].clone();
    assert_eq!(s.poll_timeout(), Some(100 + 30_000));
    s.handle_timeout(30_099);
    assert!(drain(&mut s).is_empty());
    s.handle_timeout(30_100);
    let out = drain(&mut s);
    let err = control_done(&out, 1).unwrap().unwrap_err();
    assert!(
        err.contains("did not answer") && err.contains("mcp_status"),
        "{err}"
    );
    assert_eq!(
        writes(&out),
        vec![json!({"type": "control_cancel_request", "request_id": id})]
    );
    // A late answer finds nobody.
    let late = line(
        &mut s,
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id}}),
        30_200,
    );
    assert!(late.is_empty());
}

#[test]
fn a_withdrawn_request_is_cancelled_and_never_answered() {
    let mut s = ready();
    s.handle_control(
        4,
        json!({"subtype": "rewind_files", "user_message_id": "x", "dry_run": true}),
        0,
    );
    let id = writes(&drain(&mut s))[0]["request_id"].clone();
    s.handle_withdraw(4, 1);
    assert_eq!(
        writes(&drain(&mut s)),
        vec![json!({"type": "control_cancel_request", "request_id": id})]
    );
    let out = line(
        &mut s,
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id}}),
        2,
    );
    assert!(out.is_empty());
    s.handle_withdraw(4, 3); // twice: nothing more
    assert!(drain(&mut s).is_empty());
}

#[test]
fn controls_are_refused_without_a_process_and_past_the_cap() {
    let mut s = session();
    s.handle_control(1, json!({"subtype": "mcp_status"}), 0);
    let err = control_done(&drain(&mut s), 1).unwrap().unwrap_err();
    assert!(err.contains("not running"), "{err}");
    let mut s = ready();
    for caller in 0..32 {
        s.handle_control(caller, json!({"subtype": "mcp_status"}), 0);
    }
    assert_eq!(writes(&drain(&mut s)).len(), 32);
    s.handle_control(99, json!({"subtype": "mcp_status"}), 0);
    let out = drain(&mut s);
    assert!(writes(&out).is_empty());
    assert!(
        control_done(&out, 99)
            .unwrap()
            .unwrap_err()
            .contains("already wait")
    );
}

#[test]
fn a_text_run_streams_and_ends_with_the_result() {
    let mut s = ready();
    s.handle_run(&user("r1", "u1", "Hi"), 10).unwrap();
    let out = drain(&mut s);
    // The initialize answer is known: the capabilities come as a state snapshot.
    assert_eq!(events(&out), ["RUN_STARTED", "STATE_SNAPSHOT"]);
    let sent = writes(&out);
    assert_eq!(sent[0]["type"], "user");
    assert_eq!(sent[0]["uuid"].as_str().unwrap().len(), 36);
    assert_eq!(s.status(), Status::Running);
    assert!(matches!(
        s.handle_run(&user("r2", "u2", "x"), 11),
        Err(RunRefused::Busy(_))
    ));
    let out = line(&mut s, text("Hello"), 12);
    assert!(events(&out).contains(&"TEXT_MESSAGE_CONTENT"));
    let out = line(&mut s, result(), 13);
    assert_eq!(events(&out).last(), Some(&"RUN_FINISHED"));
    assert!(matches!(out.last(), Some(Output::RunEnded)));
    assert_eq!(s.status(), Status::Ready);
}

#[test]
fn system_init_becomes_the_capability_snapshot_with_the_initialize_answer() {
    let mut s = ready();
    s.handle_run(&user("r1", "u1", "Hi"), 10).unwrap();
    drain(&mut s);
    let init = json!({"type": "system", "subtype": "init", "session_id": "sess-1", "model": "m",
        "tools": ["Bash", "mcp__frontend__card"], "slash_commands": ["compact", "hello"],
        "permissionMode": "default", "agents": ["general-purpose"], "skills": [], "plugins": [],
        "mcp_servers": [{"name": "frontend", "status": "connected"}]});
    let out = line(&mut s, init, 11);
    let snapshot = out
        .iter()
        .find_map(|o| match o {
            Output::Event(AguiEvent::StateSnapshot { snapshot }) => Some(snapshot.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(snapshot["slash_commands"], json!(["compact", "hello"]));
    assert_eq!(snapshot["account"], json!({"email": "a@b"}));
    assert_eq!(s.claude_session_id(), Some("sess-1"));
    line(
        &mut s,
        json!({"type": "system", "subtype": "status", "status": null, "permissionMode": "plan"}),
        12,
    );
    assert_eq!(s.capabilities()["permissionMode"], "plan");
    assert_eq!(s.describe()["capabilities"]["model"], "m");
}

#[test]
fn an_interrupted_run_that_ends_by_itself_finishes_normally() {
    let mut s = ready();
    s.handle_run(&user("r1", "u1", "long"), 0).unwrap();
    drain(&mut s);
    s.handle_control(1, json!({"subtype": "interrupt"}), 100);
    drain(&mut s);
    assert_eq!(s.poll_timeout(), Some(100 + 5_000));
    let out = line(
        &mut s,
        json!({"type": "result", "subtype": "error_during_execution", "is_error": true}),
        200,
    );
    assert_eq!(events(&out).last(), Some(&"RUN_FINISHED"));
    assert_eq!(s.status(), Status::Ready);
}

#[test]
fn a_late_result_after_the_grace_is_never_credited_to_the_next_run() {
    let mut s = ready();
    s.handle_run(&user("r1", "u1", "long"), 0).unwrap();
    drain(&mut s);
    s.handle_control(1, json!({"subtype": "interrupt"}), 100);
    drain(&mut s);
    s.handle_timeout(5_100);
    let out = drain(&mut s);
    assert_eq!(events(&out).last(), Some(&"RUN_FINISHED"));
    assert!(!s.is_running());
    // The next run starts, but its message waits for the abandoned turn.
    s.handle_run(&user("r2", "u2", "next"), 5_200).unwrap();
    let out = drain(&mut s);
    assert_eq!(events(&out), ["RUN_STARTED", "STATE_SNAPSHOT"]);
    assert!(writes(&out).iter().all(|w| w["type"] != "user"));
    // The abandoned turn's output and result are dropped.
    assert!(events(&line(&mut s, text("stale"), 5_300)).is_empty());
    let out = line(&mut s, result(), 5_400);
    assert!(events(&out).is_empty(), "{out:?}");
    let sent = writes(&out);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["message"]["content"][0]["text"], "next");
    // The run ends with its own result.
    assert!(s.is_running());
    let out = line(&mut s, text("fresh"), 5_500);
    assert!(events(&out).contains(&"TEXT_MESSAGE_CONTENT"));
    let out = line(&mut s, result(), 5_600);
    assert_eq!(events(&out).last(), Some(&"RUN_FINISHED"));
}

#[test]
fn a_turn_that_never_ends_after_the_grace_gets_the_process_killed() {
    let mut s = ready();
    s.handle_run(&user("r1", "u1", "long"), 0).unwrap();
    s.handle_control(1, json!({"subtype": "interrupt"}), 0);
    let id = writes(&drain(&mut s)).last().unwrap()["request_id"].clone();
    let out = line(
        &mut s,
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id}}),
        1,
    );
    assert_eq!(control_done(&out, 1), Some(Ok(Value::Null)));
    s.handle_timeout(5_000);
    drain(&mut s);
    assert_eq!(s.poll_timeout(), Some(5_000 + 30_000));
    s.handle_timeout(35_000);
    let out = drain(&mut s);
    assert!(matches!(out.last(), Some(Output::Kill { .. })), "{out:?}");
    s.handle_exited("killed", 35_001);
    assert!(matches!(s.status(), Status::Crashed { .. }));
}

#[test]
fn settings_come_back_after_a_restart() {
    let mut s = ready();
    s.handle_control(1, json!({"subtype": "set_model", "model": "haiku"}), 0);
    let out = drain(&mut s);
    accept(&mut s, &out, 0);
    s.handle_control(
        2,
        json!({"subtype": "set_permission_mode", "mode": "plan"}),
        0,
    );
    let out = drain(&mut s);
    accept(&mut s, &out, 0);
    s.handle_control(3, json!({"subtype": "set_model", "model": "opus"}), 0);
    let out = drain(&mut s);
    accept(&mut s, &out, 0);
    // Refused by Claude Code: never replayed.
    s.handle_control(
        7,
        json!({"subtype": "set_max_thinking_tokens", "max_thinking_tokens": -1}),
        0,
    );
    let id = writes(&drain(&mut s))[0]["request_id"].clone();
    line(
        &mut s,
        json!({"type": "control_response", "response": {"subtype": "error", "request_id": id, "error": "bad"}}),
        0,
    );
    for caller in 1..=4 {
        s.handle_control(caller, json!({"subtype": "mcp_status"}), 0);
    }
    drain(&mut s);
    s.handle_exited("Claude Code exited (signal 9)", 1);
    let out = drain(&mut s);
    for caller in 1..=4 {
        assert_eq!(
            control_done(&out, caller),
            Some(Err("Claude Code exited (signal 9)".into()))
        );
    }
    s.handle_spawned(2, None);
    let sent: Vec<Value> = writes(&drain(&mut s))
        .into_iter()
        .map(|w| w["request"].clone())
        .collect();
    assert_eq!(sent[0]["subtype"], "initialize");
    assert_eq!(
        sent[1..],
        [
            json!({"subtype": "set_model", "model": "opus"}),
            json!({"subtype": "set_permission_mode", "mode": "plan"}),
        ]
    );
}

#[test]
fn environment_variables_claude_code_cannot_take_live_restart_it_before_the_next_run() {
    let mut s = ready();
    s.handle_control(
        5,
        json!({"subtype": "update_environment_variables",
            "variables": {"PROJECT": "x", "CLAUDE_CODE_OAUTH_TOKEN": "t"}}),
        0,
    );
    let sent = writes(&drain(&mut s));
    assert_eq!(sent[0]["type"], "update_environment_variables");
    assert_eq!(
        sent[0]["variables"],
        json!({"PROJECT": "x", "CLAUDE_CODE_OAUTH_TOKEN": "t"})
    );
    let id = sent[0]["request_id"].clone();
    assert!(!s.needs_restart());
    let out = line(
        &mut s,
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id,
            "response": {"applied": ["CLAUDE_CODE_OAUTH_TOKEN"]}}}),
        1,
    );
    let answer = control_done(&out, 5).unwrap().unwrap();
    assert_eq!(answer["applied"], json!(["CLAUDE_CODE_OAUTH_TOKEN"]));
    assert_eq!(answer["atNextRun"], json!(["PROJECT"]));
    assert!(s.needs_restart());
    assert_eq!(
        s.environment().get("PROJECT").map(String::as_str),
        Some("x")
    );
    // The host restarts it: the variables stay, the wish is met.
    s.handle_stopped("restart for the environment", false, 2);
    assert!(!s.needs_restart());
    s.handle_spawned(3, None);
    assert_eq!(s.environment().len(), 2);
    drain(&mut s);
    s.handle_control(
        6,
        json!({"subtype": "update_environment_variables", "variables": {"A": 1}}),
        3,
    );
    assert!(
        control_done(&drain(&mut s), 6)
            .unwrap()
            .unwrap_err()
            .contains("string")
    );
}

#[test]
fn the_apps_mcp_servers_keep_the_frontend_server() {
    let mut s = ready();
    let frontend = json!({"type": "http", "url": "http://127.0.0.1:1/mcp/thread-1"});
    s.set_frontend_server(frontend.clone());
    s.handle_control(
        1,
        json!({"subtype": "mcp_set_servers", "servers": {"docs": {"type": "http", "url": "http://x/mcp"}}}),
        0,
    );
    let out = drain(&mut s);
    let sent = writes(&out);
    assert_eq!(sent[0]["request"]["servers"]["frontend"], frontend);
    assert_eq!(sent[0]["request"]["servers"]["docs"]["url"], "http://x/mcp");
    accept(&mut s, &out, 0);
    // It is replayed to a restarted process, frontend included.
    s.handle_exited("gone", 1);
    drain(&mut s);
    s.handle_spawned(2, None);
    let sent = writes(&drain(&mut s));
    assert_eq!(sent[1]["request"]["subtype"], "mcp_set_servers");
    assert_eq!(sent[1]["request"]["servers"]["frontend"], frontend);
    for bad in [
        json!({"subtype": "mcp_set_servers"}),
        json!({"subtype": "mcp_set_servers", "servers": {"frontend": {}}}),
    ] {
        s.handle_control(2, bad, 3);
        assert!(matches!(
            control_error(&drain(&mut s), 2),
            Some(Err(ControlError::Invalid(_)))
        ));
    }
}

#[test]
fn a_crash_fails_the_run_and_everything_waiting() {
    let mut s = ready();
    let tools = json!([{"name": "card", "description": "", "parameters": {}}]);
    let mut run = user("r1", "u1", "go");
    run.tools = serde_json::from_value(tools).unwrap();
    s.handle_run(&run, 0).unwrap();
    drain(&mut s);
    line(
        &mut s,
        json!({"type": "control_request", "request_id": "cr1", "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "ls"}}}),
        1,
    );
    s.handle_exited("Claude Code exited (exit status: 1)", 2);
    let out = drain(&mut s);
    assert_eq!(events(&out).last(), Some(&"RUN_ERROR"));
    assert!(out.contains(&Output::Withdrawn {
        request_id: "cr1".into()
    }));
    assert!(
        s.handle_approval("cr1", json!({"behavior": "deny"}))
            .is_err()
    );
}

#[test]
fn tool_approvals_wait_for_the_app_unless_a_rule_or_a_frontend_tool_decides() {
    struct DenyBash;
    impl ApprovalPolicy for DenyBash {
        fn auto_answer(&self, tool: &str, _input: &Value) -> Option<Value> {
            (tool == "Bash").then(|| json!({"behavior": "deny", "message": "no"}))
        }
    }
    let mut s = ready();
    let ask = |id: &str, tool: &str| {
        json!({"type": "control_request", "request_id": id,
            "request": {"subtype": "can_use_tool", "tool_name": tool, "input": {"a": 1}, "tool_use_id": "toolu_1"}})
        .to_string()
    };
    s.handle_line(&ask("c1", "Bash"), 0, &DenyBash);
    let out = drain(&mut s);
    assert_eq!(writes(&out)[0]["response"]["response"]["behavior"], "deny");
    s.handle_line(&ask("c2", "mcp__frontend__card"), 0, &DenyBash);
    let out = drain(&mut s);
    assert_eq!(
        writes(&out)[0]["response"],
        json!({"subtype": "success", "request_id": "c2", "response": {"behavior": "allow", "updatedInput": {"a": 1}}})
    );
    s.handle_line(&ask("c3", "Write"), 0, &DenyBash);
    let out = drain(&mut s);
    assert!(writes(&out).is_empty());
    let Some(Output::Approval(a)) = out.first() else {
        panic!("{out:?}")
    };
    assert_eq!(
        (a.request_id.as_str(), a.tool_name.as_str()),
        ("c3", "Write")
    );
    s.handle_approval("c3", json!({"behavior": "allow", "updatedInput": {"a": 2}}))
        .unwrap();
    assert_eq!(writes(&drain(&mut s))[0]["response"]["request_id"], "c3");
    assert!(
        s.handle_approval("c3", json!({})).is_err(),
        "answered twice"
    );
    // Claude Code withdraws one it asked.
    s.handle_line(&ask("c4", "Write"), 0, &DenyBash);
    drain(&mut s);
    let out = line(
        &mut s,
        json!({"type": "control_cancel_request", "request_id": "c4"}),
        1,
    );
    assert!(out.contains(&Output::Withdrawn {
        request_id: "c4".into()
    }));
}

#[test]
fn hook_calls_reach_the_app_with_their_event_and_its_answer_goes_back() {
    let mut s = session();
    let mut hooks = BTreeMap::new();
    hooks.insert(
        "PreToolUse".into(),
        vec![HookMatcher {
            matcher: Some("Bash".into()),
            timeout: None,
        }],
    );
    s.set_init_options(InitOptions {
        hooks,
        ..InitOptions::default()
    })
    .unwrap();
    s.handle_spawned(0, None);
    drain(&mut s);
    let out = line(
        &mut s,
        json!({"type": "control_request", "request_id": "h1", "request": {"subtype": "hook_callback",
            "callback_id": "hook_0", "input": {"hook_event_name": "PreToolUse", "tool_name": "Bash"}, "tool_use_id": "toolu_9"}}),
        1,
    );
    let Some(Output::Hook(hook)) = out.first() else {
        panic!("{out:?}")
    };
    assert_eq!(hook.hook_event.as_deref(), Some("PreToolUse"));
    assert_eq!(hook.matcher.as_deref(), Some("Bash"));
    assert_eq!(hook.tool_use_id.as_deref(), Some("toolu_9"));
    assert!(s.handle_hook_answer("h1", json!("no")).is_err());
    assert!(
        s.handle_approval("h1", json!({})).is_err(),
        "not an approval"
    );
    let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "not here"}});
    s.handle_hook_answer("h1", deny.clone()).unwrap();
    assert_eq!(writes(&drain(&mut s))[0]["response"]["response"], deny);
}

#[test]
fn requests_the_bridge_cannot_serve_are_refused_not_left_hanging() {
    let mut s = ready();
    let out = line(
        &mut s,
        json!({"type": "control_request", "request_id": "e1", "request": {"subtype": "elicitation", "message": "?"}}),
        0,
    );
    let sent = writes(&out);
    assert_eq!(sent[0]["response"]["subtype"], "error");
    assert!(
        sent[0]["response"]["error"]
            .as_str()
            .unwrap()
            .contains("elicitation")
    );
}

#[test]
fn frontend_tools_end_the_run_and_their_result_answers_the_mcp_call() {
    let mut s = ready();
    let tools: Vec<Tool> =
        serde_json::from_value(json!([{"name": "card", "description": "Show", "parameters": {}}]))
            .unwrap();
    let mut first = user("r1", "u1", "show a card");
    first.tools.clone_from(&tools);
    s.handle_run(&first, 0).unwrap();
    drain(&mut s);
    let tool_use = json!({"type": "assistant", "message": {"id": "msg_1", "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "mcp__frontend__card", "input": {"title": "Hi"}}]}});
    let out = line(&mut s, tool_use, 1);
    assert!(events(&out).contains(&"TOOL_CALL_START"));
    s.handle_frontend_call(50, "card", 2);
    let out = drain(&mut s);
    assert_eq!(events(&out).last(), Some(&"RUN_FINISHED"));
    assert!(s.waits_for_client());
    // The next run carries the result: the MCP call gets it, nothing is written.
    let mut second = input(
        "r2",
        json!([
            {"id": "u1", "role": "user", "content": "show a card"},
            {"id": "a1", "role": "assistant", "toolCalls": [{"id": "toolu_1", "type": "function",
                "function": {"name": "card", "arguments": "{}"}}]},
            {"id": "t1", "role": "tool", "toolCallId": "toolu_1", "content": "shown"},
        ]),
    );
    second.tools = tools;
    s.handle_run(&second, 3).unwrap();
    let out = drain(&mut s);
    assert!(out.contains(&Output::ToolAnswer {
        caller: 50,
        outcome: ToolOutcome {
            content: "shown".into(),
            is_error: false
        }
    }));
    assert!(writes(&out).iter().all(|w| w["type"] != "user"));
    assert!(s.is_running(), "Claude Code goes on in this run");
    assert!(!s.waits_for_client());
}

#[test]
fn new_frontend_tools_mid_session_are_announced() {
    let mut s = ready();
    s.handle_run(&user("r1", "u1", "a"), 0).unwrap();
    line(&mut s, result(), 1);
    let mut next = user("r2", "u2", "b");
    next.tools =
        serde_json::from_value(json!([{"name": "map", "description": "", "parameters": {}}]))
            .unwrap();
    s.handle_run(&next, 2).unwrap();
    let out = drain(&mut s);
    assert!(out.contains(&Output::ToolsChanged));
    // The message waits until Claude Code listed the tools again.
    assert!(writes(&out).iter().all(|w| w["type"] != "user"));
    assert_eq!(s.poll_timeout(), Some(2 + 3_000));
    s.handle_tools_listed(2);
    assert_eq!(writes(&drain(&mut s))[0]["type"], "user");
    line(&mut s, result(), 3);
    let mut same = user("r3", "u3", "c");
    same.tools = next.tools.clone();
    s.handle_run(&same, 4).unwrap();
    let out = drain(&mut s);
    assert!(!out.contains(&Output::ToolsChanged));
    assert_eq!(writes(&out)[0]["type"], "user");
    line(&mut s, result(), 5);
    // Nobody lists them in time: the message goes anyway.
    let mut fewer = user("r4", "u4", "d");
    fewer.tools.clear();
    s.handle_run(&fewer, 10).unwrap();
    assert!(writes(&drain(&mut s)).is_empty());
    s.handle_timeout(10 + 3_000);
    let out = drain(&mut s);
    assert_eq!(writes(&out)[0]["type"], "user");
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Log {
            level: LogLevel::Warn,
            ..
        }
    )));
}

#[test]
fn rewind_files_is_given_the_uuid_of_the_app_message() {
    let mut s = ready();
    s.handle_run(&user("r1", "msg-app-1", "edit it"), 0)
        .unwrap();
    let uuid = writes(&drain(&mut s))
        .into_iter()
        .find(|w| w["type"] == "user")
        .unwrap()["uuid"]
        .clone();
    line(&mut s, result(), 1);
    s.handle_control(
        8,
        json!({"subtype": "rewind_files", "user_message_id": "msg-app-1", "dry_run": true}),
        2,
    );
    let sent = writes(&drain(&mut s));
    assert_eq!(
        sent[0]["request"],
        json!({"subtype": "rewind_files", "user_message_id": uuid, "dry_run": true})
    );
    // A Claude Code uuid is passed as it is.
    s.handle_control(
        9,
        json!({"subtype": "rewind_files", "user_message_id": "0000-x"}),
        3,
    );
    assert_eq!(
        writes(&drain(&mut s))[0]["request"]["user_message_id"],
        "0000-x"
    );
}

#[test]
fn connect_replays_a_capped_history() {
    let mut s = AguiSession::new(
        T,
        7,
        Limits {
            history_runs: 2,
            ..Limits::default()
        },
        None,
    );
    s.handle_spawned(0, None);
    for i in 0..4 {
        s.handle_run(&user(&format!("r{i}"), &format!("u{i}"), "hi"), i)
            .unwrap();
        line(&mut s, result(), i);
    }
    let replay = s.replay();
    crate::agui::verify::Verifier::check(&replay).unwrap();
    assert_eq!(s.describe()["history"]["droppedRuns"], 2);
    assert!(matches!(&replay[1], AguiEvent::Custom { name, .. } if name == "history_truncated"));
}

#[test]
fn the_replay_carries_each_runs_own_messages_in_run_started() {
    let mut s = ready();
    let first = user("r1", "u1", "Hi");
    s.handle_run(&first, 10).unwrap();
    line(&mut s, text("Hello"), 11);
    line(&mut s, result(), 12);
    // The client sends the whole thread; only what the run adds is in RUN_STARTED.
    let second = input(
        "r2",
        json!([{"id": "u1", "role": "user", "content": "Hi"},
               {"id": "a1", "role": "assistant", "content": "Hello"},
               {"id": "u2", "role": "user", "content": "And now?"}]),
    );
    s.handle_run(&second, 20).unwrap();
    line(&mut s, result(), 21);
    let replay = s.replay();
    crate::agui::verify::Verifier::check(&replay).unwrap();
    let started: Vec<Value> = replay
        .iter()
        .filter_map(|e| match e {
            AguiEvent::RunStarted { input, .. } => input.clone(),
            _ => None,
        })
        .collect();
    let ids: Vec<Vec<&str>> = started
        .iter()
        .map(|i| {
            i["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_str().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(ids, [vec!["u1"], vec!["u2"]]);
    assert_eq!(started[1]["messages"][0]["content"], "And now?");
    assert_eq!(
        (
            started[0]["threadId"].as_str(),
            started[0]["runId"].as_str()
        ),
        (Some(T), Some("r1"))
    );
    // A valid RunAgentInput (what @ag-ui/core checks): every required field is there.
    let parsed: RunAgentInput = serde_json::from_value(started[1].clone()).unwrap();
    assert!(parsed.tools.is_empty() && parsed.context.is_empty());
}

/// The snapshots among the outputs.
fn snapshots(outputs: &[Output]) -> Vec<Value> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Event(AguiEvent::StateSnapshot { snapshot }) => Some(snapshot.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_state_snapshot_carries_running_totals_and_the_compacting_flag() {
    let mut s = ready();
    let costly = |cost: f64, input: u64| {
        json!({"type": "result", "subtype": "success", "is_error": false, "result": "done",
               "num_turns": 2, "total_cost_usd": cost,
               "modelUsage": {"m": {"inputTokens": input, "outputTokens": 3}}})
    };
    s.handle_run(&user("r1", "u1", "Hi"), 10).unwrap();
    let start = drain(&mut s);
    assert_eq!(snapshots(&start)[0]["totals"]["runs"], 0);
    let out = line(&mut s, costly(0.25, 100), 11);
    // The new totals come before the run ends.
    assert_eq!(
        events(&out)[events(&out).len() - 2..],
        ["STATE_SNAPSHOT", "RUN_FINISHED"]
    );
    let totals = &snapshots(&out)[0]["totals"];
    assert_eq!(
        (
            &totals["runs"],
            &totals["turns"],
            &totals["costUsd"],
            &totals["inputTokens"]
        ),
        (&json!(1), &json!(2), &json!(0.25), &json!(100))
    );
    s.handle_run(&user("r2", "u2", "More"), 20).unwrap();
    drain(&mut s);
    let out = line(
        &mut s,
        json!({"type": "system", "subtype": "status", "status": "compacting"}),
        21,
    );
    assert_eq!(snapshots(&out)[0]["compacting"], true);
    // The same status again changes nothing: no new snapshot.
    let out = line(
        &mut s,
        json!({"type": "system", "subtype": "status", "status": "compacting"}),
        22,
    );
    assert!(snapshots(&out).is_empty());
    let out = line(
        &mut s,
        json!({"type": "system", "subtype": "compact_boundary", "compact_metadata": {"trigger": "auto"}}),
        23,
    );
    assert_eq!(snapshots(&out)[0]["compacting"], false);
    let out = line(&mut s, costly(0.5, 180), 24);
    let totals = &snapshots(&out)[0]["totals"];
    assert_eq!(
        (
            &totals["runs"],
            &totals["turns"],
            &totals["costUsd"],
            &totals["inputTokens"]
        ),
        (&json!(2), &json!(4), &json!(0.5), &json!(180)),
        "cost and modelUsage are Claude Code's running totals, not per-run"
    );
    assert_eq!(s.describe()["totals"], *totals);
    crate::agui::verify::Verifier::check(&s.replay()).unwrap();
}

#[test]
fn stopping_for_good_refuses_later_runs() {
    let mut s = ready();
    s.handle_stopped("the session was stopped", true, 0);
    assert_eq!(s.status(), Status::Stopped);
    assert!(matches!(s.check_run(), Err(RunRefused::Failed(_))));
    s.handle_exited("late exit", 1);
    assert_eq!(s.status(), Status::Stopped);
}

#[test]
fn stopping_a_run_whose_message_waits_keeps_it_from_ever_running() {
    let mut s = ready();
    s.handle_run(&user("r1", "u1", "long"), 0).unwrap();
    s.handle_control(1, json!({"subtype": "interrupt"}), 0);
    let out = drain(&mut s);
    accept(&mut s, &out, 1);
    s.handle_timeout(5_000); // r1 ends; its turn is abandoned
    drain(&mut s);
    s.handle_run(&user("r2", "u2", "second"), 5_001).unwrap();
    drain(&mut s); // r2's message waits for r1's turn
    s.handle_control(2, json!({"subtype": "interrupt"}), 5_002);
    let out = drain(&mut s);
    assert_eq!(events(&out).last(), Some(&"RUN_FINISHED"));
    assert_eq!(control_done(&out, 2), Some(Ok(Value::Null)));
    assert!(
        writes(&out).is_empty(),
        "no interrupt for a message never sent"
    );
    // r1's turn ends: nothing is written; the next run's message goes at once.
    assert!(writes(&line(&mut s, result(), 5_100)).is_empty());
    s.handle_run(&user("r3", "u3", "third"), 5_200).unwrap();
    let sent = writes(&drain(&mut s));
    assert_eq!(sent[0]["message"]["content"][0]["text"], "third");
}

#[test]
fn an_interrupt_that_could_not_be_sent_arms_no_grace() {
    let mut s = AguiSession::new(
        T,
        7,
        Limits {
            max_pending_controls: 1,
            ..Limits::default()
        },
        None,
    );
    s.handle_spawned(0, None); // initialize waits: the one slot is taken
    s.handle_run(&user("r1", "u1", "long"), 0).unwrap();
    drain(&mut s);
    s.handle_control(1, json!({"subtype": "interrupt"}), 0);
    assert!(matches!(
        control_error(&drain(&mut s), 1),
        Some(Err(ControlError::Busy(_)))
    ));
    assert_eq!(s.poll_timeout(), Some(30_000), "only initialize's deadline");
}

#[test]
fn a_tool_result_for_a_call_claude_code_gave_up_ends_the_run_at_once() {
    let tools: Vec<Tool> =
        serde_json::from_value(json!([{"name": "card", "description": "", "parameters": {}}]))
            .unwrap();
    let result_run = |run: &str| {
        let mut i = input(
            run,
            json!([
                {"id": "u1", "role": "user", "content": "show"},
                {"id": "a1", "role": "assistant", "toolCalls": [{"id": "toolu_1", "type": "function",
                    "function": {"name": "card", "arguments": "{}"}}]},
                {"id": "t1", "role": "tool", "toolCallId": "toolu_1", "content": "shown"},
            ]),
        );
        i.tools.clone_from(&tools);
        i
    };
    let streamed = |s: &mut AguiSession| {
        let mut first = user("r1", "u1", "show");
        first.tools.clone_from(&tools);
        s.handle_run(&first, 0).unwrap();
        line(
            s,
            json!({"type": "assistant", "message": {"id": "msg_1", "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "mcp__frontend__card", "input": {}}]}}),
            1,
        );
        s.handle_frontend_call(50, "card", 2);
        drain(s);
        assert!(s.waits_for_client());
    };
    // Claude Code's MCP request went away before the result came.
    let mut s = ready();
    streamed(&mut s);
    assert!(!s.can_restart());
    s.handle_frontend_gone(50, 3);
    assert!(!s.waits_for_client());
    s.handle_run(&result_run("r2"), 4).unwrap();
    let out = drain(&mut s);
    assert!(!out.iter().any(|o| matches!(o, Output::ToolAnswer { .. })));
    assert!(writes(&out).iter().all(|w| w["type"] != "user"));
    assert_eq!(events(&out).last(), Some(&"RUN_FINISHED"));
    // It went away while the result was on its way.
    let mut s = ready();
    streamed(&mut s);
    s.handle_run(&result_run("r2"), 4).unwrap();
    assert!(
        drain(&mut s)
            .iter()
            .any(|o| matches!(o, Output::ToolAnswer { caller: 50, .. }))
    );
    assert!(s.is_running());
    s.handle_tool_answer_lost(50, 5);
    assert_eq!(events(&drain(&mut s)).last(), Some(&"RUN_FINISHED"));
    assert!(!s.is_running());
}

#[test]
fn no_restart_for_the_environment_while_claude_code_waits_for_the_client() {
    let mut s = ready();
    let mut first = user("r1", "u1", "show");
    first.tools =
        serde_json::from_value(json!([{"name": "card", "description": "", "parameters": {}}]))
            .unwrap();
    s.handle_run(&first, 0).unwrap();
    line(
        &mut s,
        json!({"type": "assistant", "message": {"id": "msg_1", "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "mcp__frontend__card", "input": {}}]}}),
        1,
    );
    s.handle_frontend_call(50, "card", 2);
    s.handle_control(
        5,
        json!({"subtype": "update_environment_variables", "variables": {"X": "1"}}),
        3,
    );
    let id = writes(&drain(&mut s))
        .into_iter()
        .find(|w| w["type"] == "update_environment_variables")
        .unwrap()["request_id"]
        .clone();
    line(
        &mut s,
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": {"applied": []}}}),
        4,
    );
    assert!(!s.is_running());
    assert!(
        !s.needs_restart(),
        "Claude Code's turn waits for the client's result"
    );
}

#[test]
fn an_app_hosted_mcp_server_gets_claude_codes_requests_and_answers_them() {
    let mut s = session();
    s.set_init_options(InitOptions {
        sdk_mcp_servers: vec!["appdocs".into()],
        ..InitOptions::default()
    })
    .unwrap();
    s.handle_spawned(0, Some(1));
    let init = writes(&drain(&mut s));
    assert_eq!(init[0]["request"]["sdkMcpServers"], json!(["appdocs"]));
    let ask = |id: &str, server: &str, message: Value| {
        json!({"type": "control_request", "request_id": id,
            "request": {"subtype": "mcp_message", "server_name": server, "message": message}})
    };
    // A request goes to the app, which answers with the JSON-RPC response.
    let out = line(
        &mut s,
        ask(
            "m1",
            "appdocs",
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}),
        ),
        1,
    );
    let Some(Output::Mcp(request)) = out.first() else {
        panic!("{out:?}")
    };
    assert_eq!(
        (request.request_id.as_str(), request.server_name.as_str()),
        ("m1", "appdocs")
    );
    assert_eq!(request.message["method"], "initialize");
    assert!(s.handle_mcp_answer("m1", json!({"nope": 1})).is_err());
    assert!(s.handle_hook_answer("m1", json!({})).is_err(), "not a hook");
    let response = json!({"jsonrpc": "2.0", "id": 0, "result": {"capabilities": {}}});
    s.handle_mcp_answer("m1", response.clone()).unwrap();
    assert_eq!(
        writes(&drain(&mut s))[0]["response"],
        json!({"subtype": "success", "request_id": "m1", "response": {"mcp_response": response}})
    );
    // Notifications are acknowledged by the bridge; unknown servers are refused.
    let out = line(
        &mut s,
        ask(
            "m2",
            "appdocs",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ),
        2,
    );
    assert_eq!(writes(&out)[0]["response"]["subtype"], "success");
    assert!(!out.iter().any(|o| matches!(o, Output::Mcp(_))));
    let out = line(
        &mut s,
        ask(
            "m3",
            "other",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ),
        3,
    );
    assert_eq!(writes(&out)[0]["response"]["subtype"], "error");
    let mut bad = InitOptions::default();
    bad.sdk_mcp_servers.push("frontend".into());
    assert!(s.set_init_options(bad).is_err());
}
