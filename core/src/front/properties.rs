//! Property tests of the fronts' encoders (Chat and Responses): arbitrary well-formed Anthropic streams (written
//! through the core's `AnthropicWriter`, cut or failed at any point) → the encoder's SSE is a
//! stream the validator accepts, and the fold loses nothing the Anthropic accumulator keeps.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::anthropic::accumulate::{Accumulator, parse_tool_input};
use crate::anthropic::events::{ApiError, ContentBlock, ErrorKind, StopReason, StreamEvent};
use crate::front::chat_stream::{ChatCompletionFold, ChatStreamEncoder, finish_reason};
use crate::front::chat_validate::check_chat_sse;
use crate::front::client_tools::ResponsesTools;
use crate::front::responses_stream::{
    ResponsesFold, ResponsesStreamEncoder, ResponsesStreamOptions,
};
use crate::front::responses_validate::check_responses_sse;
use crate::translate::writer::{AnthropicWriter, UpstreamUsage};

#[derive(Debug, Clone)]
enum Op {
    Text(String),
    Think(String),
    Sign,
    /// A tool call whose input JSON arrives cut at these byte positions.
    Tool(String, Value, Vec<usize>),
    /// A call of the custom tool `apply_patch` with this raw input.
    Patch(String, Vec<usize>),
    Close,
    Ping,
}

#[derive(Debug, Clone)]
enum End {
    Finish(StopReason, u64),
    Fail,
    Cut,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        "[a-z é\n\"{}]{0,12}".prop_map(Op::Text),
        "[a-z ]{0,8}".prop_map(Op::Think),
        Just(Op::Sign),
        (
            "[a-z_]{1,6}",
            proptest::collection::btree_map("[a-z]{1,4}", any::<i32>(), 0..3),
            proptest::collection::vec(0usize..40, 0..4)
        )
            .prop_map(|(name, args, cuts)| Op::Tool(name, json!(args), cuts)),
        (
            "[a-z*\n\" ]{0,16}",
            proptest::collection::vec(0usize..40, 0..4)
        )
            .prop_map(|(input, cuts)| Op::Patch(input, cuts)),
        Just(Op::Close),
        Just(Op::Ping),
    ]
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        (
            prop_oneof![
                Just(StopReason::EndTurn),
                Just(StopReason::MaxTokens),
                Just(StopReason::StopSequence),
                Just(StopReason::ToolUse),
                Just(StopReason::Refusal),
            ],
            0u64..500
        )
            .prop_map(|(s, n)| End::Finish(s, n)),
        Just(End::Fail),
        Just(End::Cut),
    ]
}

fn events(ops: &[Op], end: &End) -> Vec<StreamEvent> {
    let mut w = AnthropicWriter::new(String::from("claude"), 20, 1);
    let mut out = Vec::new();
    w.start();
    for op in ops {
        match op {
            Op::Text(t) => {
                w.text_delta(t.clone());
            }
            Op::Think(t) => {
                w.thinking_delta(t.clone());
            }
            Op::Sign => {
                w.signature_delta("sig");
            }
            Op::Tool(name, args, cuts) => {
                // Anthropic streams no input at all for a call without arguments.
                let text = if args.as_object().is_some_and(serde_json::Map::is_empty) {
                    String::new()
                } else {
                    args.to_string()
                };
                tool(&mut w, name, &text, cuts);
            }
            Op::Patch(input, cuts) => {
                tool(
                    &mut w,
                    "apply_patch",
                    &json!({ "input": input }).to_string(),
                    cuts,
                );
            }
            Op::Close => w.close_block(),
            Op::Ping => {
                out.extend(w.take());
                out.push(StreamEvent::Ping);
            }
        }
    }
    match end {
        End::Finish(stop, output) => {
            let usage = w.usage(&UpstreamUsage {
                prompt_tokens: Some(30),
                cached_tokens: Some(8),
                output_tokens: Some(*output),
                ..UpstreamUsage::default()
            });
            w.finish(*stop, usage);
        }
        End::Fail => w.fail(ApiError::new(ErrorKind::Overloaded, "busy")),
        End::Cut => {}
    }
    out.extend(w.take());
    out
}

fn tool(w: &mut AnthropicWriter, name: &str, text: &str, cuts: &[usize]) {
    let id = w.next_id("toolu_");
    w.open_tool_use(id, name.to_owned());
    let mut at = 0;
    for cut in cuts {
        let cut = (*cut).min(text.len()).max(at);
        if text.is_char_boundary(cut) {
            w.input_json_delta(&text[at..cut]);
            at = cut;
        }
    }
    w.input_json_delta(&text[at..]);
}

/// Custom tools in the generated streams: `apply_patch` and names starting with `c`.
fn custom_tools(ops: &[Op]) -> Vec<String> {
    let mut names = vec![String::from("apply_patch")];
    for op in ops {
        if let Op::Tool(name, ..) = op
            && name.starts_with('c')
        {
            names.push(name.clone());
        }
    }
    names
}

/// The Anthropic message the accumulator folds: text, thinking, tool calls.
fn accumulated(events: &[StreamEvent]) -> (String, String, Vec<(String, String, Value)>) {
    let mut acc = Accumulator::default();
    let mut owned = Accumulator::default();
    for e in events {
        acc.push(e);
        owned.push_owned(e.clone());
    }
    assert_eq!(
        owned.message(),
        acc.message(),
        "push_owned folds as push does"
    );
    assert_eq!(owned.result(), acc.result());
    let mut text = String::new();
    let mut thinking = String::new();
    let mut tools = Vec::new();
    for block in acc.message().map(|m| m.content.clone()).unwrap_or_default() {
        match block {
            ContentBlock::Text { text: t, .. } => text.push_str(&t),
            ContentBlock::Thinking { thinking: t, .. } => thinking.push_str(&t),
            ContentBlock::ToolUse { id, name, input } => tools.push((id, name, input)),
            _ => {}
        }
    }
    (text, thinking, tools)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_anthropic_stream_encodes_to_a_valid_chat_stream(
        ops in proptest::collection::vec(op(), 0..12),
        end in end(),
        include_usage in any::<bool>(),
    ) {
        let events = events(&ops, &end);
        let mut enc = ChatStreamEncoder::new("p", 5, "gpt-x", include_usage);
        let mut sse: String = events.iter().map(|e| enc.push(e.clone())).collect();
        sse.push_str(&enc.finish());
        let checked = check_chat_sse(sse.as_bytes(), include_usage);
        prop_assert!(checked.is_ok(), "{checked:?}\n{sse}");
        prop_assert_eq!(sse.ends_with("data: [DONE]\n\n"), matches!(end, End::Finish(..)));
    }

    #[test]
    fn the_fold_keeps_what_the_accumulator_keeps(
        ops in proptest::collection::vec(op(), 0..12),
        end in end(),
    ) {
        let events = events(&ops, &end);
        let mut fold = ChatCompletionFold::new("p", 5, "gpt-x");
        for e in &events {
            fold.push(e.clone());
        }
        let folded = fold.finish();
        let End::Finish(stop, output) = end else {
            prop_assert!(folded.is_err());
            return Ok(());
        };
        let done = folded.map_err(|f| TestCaseError::fail(f.body))?;
        let (text, thinking, tools) = accumulated(&events);
        let choice = &done.choices[0];
        prop_assert_eq!(choice.message.content.clone().unwrap_or_default(), text);
        prop_assert_eq!(choice.message.reasoning_content.clone().unwrap_or_default(), thinking);
        let folded_tools: Vec<_> = choice.message.tool_calls.iter()
            .map(|c| (c.id.clone(), c.function.name.clone(), parse_tool_input(&c.function.arguments)))
            .collect();
        prop_assert_eq!(folded_tools, tools);
        prop_assert_eq!(choice.finish_reason, finish_reason(Some(stop)));
        prop_assert_eq!(done.usage.completion_tokens, output);
        prop_assert_eq!(done.usage.prompt_tokens, 30);
        prop_assert_eq!(done.usage.prompt_tokens_details.cached_tokens, 8);
    }

    #[test]
    fn every_anthropic_stream_encodes_to_a_valid_responses_stream(
        ops in proptest::collection::vec(op(), 0..12),
        end in end(),
        include in any::<bool>(),
    ) {
        let events = events(&ops, &end);
        let mut enc = ResponsesStreamEncoder::new(ResponsesStreamOptions {
            id: String::from("p"),
            created_at: 5,
            model: String::from("gpt-x"),
            tools: ResponsesTools {
                custom_tools: custom_tools(&ops),
                namespaced_tools: Vec::new(),
            },
            include_encrypted_reasoning: include,
            echo: serde_json::Map::new(),
        });
        let mut sse: String = events.iter().map(|e| enc.push(e.clone())).collect();
        sse.push_str(&enc.finish());
        let checked = check_responses_sse(sse.as_bytes());
        prop_assert!(checked.is_ok(), "{checked:?}\n{sse}");
        let last = checked.unwrap_or_default().pop().unwrap_or_default();
        let expected = match end {
            End::Finish(StopReason::MaxTokens | StopReason::Refusal, _) => "response.incomplete",
            End::Finish(..) => "response.completed",
            End::Fail | End::Cut => "response.failed",
        };
        prop_assert_eq!(last["type"].as_str(), Some(expected));
    }

    #[test]
    fn the_responses_fold_keeps_what_the_accumulator_keeps(
        ops in proptest::collection::vec(op(), 0..12),
        end in end(),
    ) {
        let events = events(&ops, &end);
        let custom = custom_tools(&ops);
        let mut fold = ResponsesFold::new(ResponsesStreamOptions {
            id: String::from("p"),
            tools: ResponsesTools {
                custom_tools: custom.clone(),
                namespaced_tools: Vec::new(),
            },
            ..ResponsesStreamOptions::default()
        });
        for e in &events {
            fold.push(e.clone());
        }
        let folded = fold.finish();
        let End::Finish(_, output) = end else {
            prop_assert!(folded.is_err());
            return Ok(());
        };
        let response = folded.map_err(|f| TestCaseError::fail(f.body))?;
        let (text, thinking, tools) = accumulated(&events);
        let items = response["output"].as_array().cloned().unwrap_or_default();
        let mut folded_text = String::new();
        let mut folded_thinking = String::new();
        let mut folded_tools = Vec::new();
        for item in &items {
            let field = |k: &str| item[k].as_str().unwrap_or_default().to_owned();
            match item["type"].as_str() {
                Some("message") => folded_text.push_str(item["content"][0]["text"].as_str().unwrap_or_default()),
                Some("reasoning") => folded_thinking.push_str(item["summary"][0]["text"].as_str().unwrap_or_default()),
                Some("function_call") => folded_tools.push((field("call_id"), field("name"), parse_tool_input(&field("arguments")))),
                Some("custom_tool_call") => {
                    prop_assert!(custom.contains(&field("name")));
                    let input = field("input");
                    // The raw text of {"input": text}, or the JSON as written for other shapes.
                    let value = if field("name") == "apply_patch" { json!({ "input": input }) } else { parse_tool_input(&input) };
                    folded_tools.push((field("call_id"), field("name"), value));
                }
                other => prop_assert!(false, "unexpected item {other:?}"),
            }
        }
        prop_assert_eq!(folded_text, text);
        prop_assert_eq!(folded_thinking, thinking);
        prop_assert_eq!(folded_tools, tools);
        prop_assert_eq!(response["usage"]["output_tokens"].as_u64(), Some(output));
        prop_assert_eq!(response["usage"]["input_tokens"].as_u64(), Some(30));
    }
}
