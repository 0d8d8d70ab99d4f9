//! Property tests of the fronts' request converters: any well-formed OpenAI conversation (Chat
//! messages or Responses items, tool calls answered, developer messages anywhere, tools and
//! options of every kind) converts to an Anthropic request the core's own pipeline takes as it
//! is — it parses, its history needs no repair, and the Chat and Responses upstream converters
//! accept it.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::anthropic::repair::parse_and_repair;
use crate::front::chat_request::chat_to_anthropic;
use crate::front::responses_request::responses_to_anthropic;
use crate::translate::{chat_request, responses_request};

#[derive(Debug, Clone)]
enum Turn {
    User(String),
    Developer(String),
    /// Assistant text (maybe) and this many tool calls, each answered.
    Assistant(Option<String>, usize),
    /// Reasoning with a signature before the assistant's calls (Responses only).
    Reasoning(String),
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        "[a-z ]{1,10}".prop_map(Turn::User),
        "[a-z ]{1,10}".prop_map(Turn::Developer),
        (proptest::option::of("[a-z ]{1,10}"), 0usize..3).prop_map(|(t, n)| Turn::Assistant(t, n)),
        "[a-z ]{0,10}".prop_map(Turn::Reasoning),
    ]
}

fn options() -> impl Strategy<Value = Value> {
    (
        any::<bool>(),
        prop_oneof![
            Just(json!(null)),
            Just(json!("auto")),
            Just(json!("none")),
            Just(json!("required"))
        ],
        any::<bool>(),
        prop_oneof![
            Just(json!(null)),
            Just(json!("none")),
            Just(json!("minimal")),
            Just(json!("high"))
        ],
        proptest::option::of(1u64..100_000),
    )
        .prop_map(|(tools, choice, parallel, effort, max)| {
            json!({"tools": tools, "tool_choice": choice, "parallel_tool_calls": parallel,
                   "effort": effort, "max": max})
        })
}

fn chat_body(turns: &[Turn], opts: &Value) -> Value {
    let mut messages = Vec::new();
    let mut call = 0;
    for turn in turns {
        match turn {
            Turn::User(t) => messages.push(json!({"role": "user", "content": t})),
            Turn::Developer(t) => messages.push(json!({"role": "developer", "content": t})),
            Turn::Assistant(text, calls) => {
                let ids: Vec<String> = (0..*calls).map(|i| format!("call_{}", call + i)).collect();
                call += calls;
                let tool_calls: Vec<Value> = ids
                    .iter()
                    .map(|id| {
                        json!({"id": id, "type": "function",
                        "function": {"name": "f", "arguments": "{\"a\":1}"}})
                    })
                    .collect();
                let mut m = json!({"role": "assistant", "content": text});
                if !tool_calls.is_empty() {
                    m["tool_calls"] = json!(tool_calls);
                }
                messages.push(m);
                for id in ids {
                    messages.push(json!({"role": "tool", "tool_call_id": id, "content": "ok"}));
                }
            }
            Turn::Reasoning(_) => {}
        }
    }
    messages.push(json!({"role": "user", "content": "go on"}));
    let mut body = json!({"model": "gpt-x", "messages": messages,
        "tool_choice": opts["tool_choice"], "parallel_tool_calls": opts["parallel_tool_calls"],
        "reasoning_effort": opts["effort"], "max_completion_tokens": opts["max"]});
    if opts["tools"] == json!(true) {
        body["tools"] = json!([{"type": "function", "function": {"name": "f",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}]);
    }
    body
}

fn responses_body(turns: &[Turn], opts: &Value) -> Value {
    let mut input = Vec::new();
    let mut call = 0;
    for turn in turns {
        match turn {
            Turn::User(t) => input.push(json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": t}]})),
            Turn::Developer(t) => {
                input.push(json!({"type": "message", "role": "developer", "content": t}))
            }
            Turn::Reasoning(t) => input.push(json!({"type": "reasoning", "id": "rs_1",
                "summary": [{"type": "summary_text", "text": t}], "encrypted_content": "SIG"})),
            Turn::Assistant(text, calls) => {
                if let Some(text) = text {
                    input.push(json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}));
                }
                for i in 0..*calls {
                    let id = format!("call_{}", call + i);
                    if i % 2 == 0 {
                        input.push(json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"}));
                    } else {
                        input.push(json!({"type": "custom_tool_call", "call_id": id, "name": "apply_patch", "input": "*** x"}));
                    }
                }
                for i in 0..*calls {
                    let kind = if i % 2 == 0 {
                        "function_call_output"
                    } else {
                        "custom_tool_call_output"
                    };
                    input.push(json!({"type": kind, "call_id": format!("call_{}", call + i), "output": "ok"}));
                }
                call += calls;
            }
        }
    }
    input.push(json!({"role": "user", "content": "go on"}));
    let mut body = json!({"model": "gpt-x", "input": input, "stream": true,
        "tool_choice": opts["tool_choice"], "parallel_tool_calls": opts["parallel_tool_calls"],
        "reasoning": {"effort": opts["effort"]}, "max_output_tokens": opts["max"],
        "include": ["reasoning.encrypted_content"]});
    if opts["tools"] == json!(true) {
        body["tools"] = json!([
            {"type": "function", "name": "f", "parameters": {"type": "object"}},
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
            {"type": "web_search"}
        ]);
    }
    body
}

/// The Anthropic body the core pipeline takes without repair, and both upstream converters accept
/// as the host runs them for an OpenAI client (`max_tokens` may be left out, as OpenAI's APIs
/// allow).
fn pipeline_accepts(body: &str) -> Result<(), TestCaseError> {
    let parsed =
        parse_and_repair(body.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(
        parsed.repairs.is_empty(),
        "repairs: {:?}\n{body}",
        parsed.repairs
    );
    let chat = chat_request::convert(
        body.as_bytes(),
        &chat_request::ConvertOptions {
            require_max_tokens: false,
            ..chat_request::ConvertOptions::default()
        },
    );
    prop_assert!(chat.is_ok(), "{chat:?}\n{body}");
    let responses = responses_request::convert(
        body.as_bytes(),
        &responses_request::ResponsesOptions {
            require_max_tokens: false,
            ..responses_request::ResponsesOptions::default()
        },
    );
    prop_assert!(responses.is_ok(), "{responses:?}\n{body}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn chat_requests_reach_the_pipeline_whole(turns in proptest::collection::vec(turn(), 0..8), opts in options()) {
        let body = chat_body(&turns, &opts);
        let front = chat_to_anthropic(body.to_string().as_bytes());
        prop_assert!(front.is_ok(), "{front:?}\n{body}");
        let front = front.map_err(|e| TestCaseError::fail(e.to_string()))?;
        pipeline_accepts(&front.body())?;
        // Every call the client made is a tool_use, and every answer a tool_result.
        let text = front.body();
        let calls = turns.iter().map(|t| match t { Turn::Assistant(_, n) => *n, _ => 0 }).sum::<usize>();
        prop_assert_eq!(text.matches("\"type\":\"tool_use\"").count(), calls);
        prop_assert_eq!(text.matches("\"type\":\"tool_result\"").count(), calls);
    }

    #[test]
    fn responses_requests_reach_the_pipeline_whole(turns in proptest::collection::vec(turn(), 0..8), opts in options()) {
        let body = responses_body(&turns, &opts);
        let front = responses_to_anthropic(body.to_string().as_bytes());
        prop_assert!(front.is_ok(), "{front:?}\n{body}");
        let front = front.map_err(|e| TestCaseError::fail(e.to_string()))?;
        pipeline_accepts(&front.body())?;
        let text = front.body();
        let calls = turns.iter().map(|t| match t { Turn::Assistant(_, n) => *n, _ => 0 }).sum::<usize>();
        prop_assert_eq!(text.matches("\"type\":\"tool_use\"").count(), calls);
        prop_assert_eq!(text.matches("\"type\":\"tool_result\"").count(), calls);
        let reasoning = turns.iter().filter(|t| matches!(t, Turn::Reasoning(_))).count();
        prop_assert_eq!(text.matches("\"type\":\"thinking\"").count(), reasoning);
    }
}
