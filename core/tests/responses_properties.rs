//! Property tests of the Responses stream translator:
//! 1. whatever the upstream sends (valid events, events out of order, garbage, errors,
//!    truncation, any chunking), the output is a stream the validator accepts, and the same
//!    bytes in one piece give the same events;
//! 2. nothing is lost: items whose deltas interleave come out as complete blocks, in the order
//!    the items appeared, with exactly the text and arguments the upstream sent.

use bridge_core::anthropic::accumulate::Accumulator;
use bridge_core::anthropic::events::{ContentBlock, StreamEvent};
use bridge_core::anthropic::stream::Validator;
use bridge_core::translate::responses_stream::ResponsesStreamTranslator;
use proptest::prelude::*;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
enum Item {
    Added {
        index: u8,
        kind: &'static str,
    },
    Text {
        index: u8,
        delta: String,
    },
    Reasoning {
        index: u8,
        part: u8,
        delta: String,
    },
    Arguments {
        index: u8,
        delta: String,
    },
    CustomInput {
        index: u8,
        delta: String,
    },
    Done {
        index: u8,
        kind: &'static str,
        encrypted: bool,
    },
    Completed {
        input: u32,
        cached: u32,
        output: u32,
    },
    Incomplete(&'static str),
    Failed,
    Error,
    Garbage(Vec<u8>),
    Done_,
}

fn frame(event: &Value) -> Vec<u8> {
    let kind = event["type"].as_str().unwrap_or_default();
    format!("event: {kind}\ndata: {event}\n\n").into_bytes()
}

fn item_json(index: u8, kind: &str, encrypted: bool) -> Value {
    let mut item = json!({"type": kind, "id": format!("it_{index}")});
    match kind {
        "function_call" | "custom_tool_call" => {
            item["call_id"] = json!(format!("call_{index}"));
            item["name"] = json!("Tool");
        }
        "reasoning" if encrypted => item["encrypted_content"] = json!("gAAAA=="),
        _ => {}
    }
    item
}

fn render(item: &Item) -> Vec<u8> {
    let delta = |kind: &str, index: &u8, delta: &str| {
        frame(
            &json!({"type": kind, "output_index": index, "item_id": format!("it_{index}"), "delta": delta}),
        )
    };
    match item {
        Item::Added { index, kind } => frame(
            &json!({"type": "response.output_item.added", "output_index": index, "item": item_json(*index, kind, false)}),
        ),
        Item::Text { index, delta: d } => delta("response.output_text.delta", index, d),
        Item::Reasoning {
            index,
            part,
            delta: d,
        } => frame(
            &json!({"type": "response.reasoning_summary_text.delta", "output_index": index, "summary_index": part, "delta": d}),
        ),
        Item::Arguments { index, delta: d } => {
            delta("response.function_call_arguments.delta", index, d)
        }
        Item::CustomInput { index, delta: d } => {
            delta("response.custom_tool_call_input.delta", index, d)
        }
        Item::Done {
            index,
            kind,
            encrypted,
        } => frame(
            &json!({"type": "response.output_item.done", "output_index": index, "item": item_json(*index, kind, *encrypted)}),
        ),
        Item::Completed {
            input,
            cached,
            output,
        } => frame(
            &json!({"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": output}}}),
        ),
        Item::Incomplete(reason) => frame(
            &json!({"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": {"reason": reason}}}),
        ),
        Item::Failed => frame(
            &json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}}}),
        ),
        Item::Error => {
            frame(&json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}))
        }
        Item::Garbage(bytes) => bytes.clone(),
        Item::Done_ => b"data: [DONE]\n\n".to_vec(),
    }
}

fn kind() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("message"),
        Just("reasoning"),
        Just("function_call"),
        Just("custom_tool_call"),
        Just("web_search_call"),
    ]
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        3 => (0u8..4, kind()).prop_map(|(index, kind)| Item::Added { index, kind }),
        4 => (0u8..4, "[a-zé😀 \"\\\\]{0,6}").prop_map(|(index, delta)| Item::Text { index, delta }),
        2 => (0u8..4, 0u8..2, "[a-z ]{0,6}").prop_map(|(index, part, delta)| Item::Reasoning { index, part, delta }),
        3 => (0u8..4, "[{}\\[\\]\":a-z0-9,]{0,6}").prop_map(|(index, delta)| Item::Arguments { index, delta }),
        1 => (0u8..4, "[a-z\"\n\\\\]{0,6}").prop_map(|(index, delta)| Item::CustomInput { index, delta }),
        2 => (0u8..4, kind(), any::<bool>()).prop_map(|(index, kind, encrypted)| Item::Done { index, kind, encrypted }),
        1 => (0u32..100, 0u32..100, 0u32..100).prop_map(|(input, cached, output)| Item::Completed { input, cached, output }),
        1 => prop_oneof![Just("max_output_tokens"), Just("content_filter"), Just("other")].prop_map(Item::Incomplete),
        1 => Just(Item::Failed),
        1 => Just(Item::Error),
        1 => proptest::collection::vec(any::<u8>(), 0..12).prop_map(Item::Garbage),
        1 => Just(Item::Done_),
    ]
}

fn run_chunked(bytes: &[u8], cuts: &[usize]) -> Vec<StreamEvent> {
    let mut t = ResponsesStreamTranslator::new("claude-test".into(), 10, 3);
    let mut events = Vec::new();
    let mut start = 0;
    for &cut in cuts {
        let cut = cut.min(bytes.len()).max(start);
        events.extend(t.feed(&bytes[start..cut]));
        start = cut;
    }
    events.extend(t.feed(&bytes[start..]));
    events.extend(t.finish());
    events
}

fn validate(events: &[StreamEvent]) -> Result<(), TestCaseError> {
    let mut v = Validator::new();
    for e in events {
        v.push(e)
            .map_err(|err| TestCaseError::fail(format!("{err}\n{events:#?}")))?;
    }
    v.finish()
        .map_err(|err| TestCaseError::fail(format!("{err}\n{events:#?}")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    #[test]
    fn any_upstream_gives_a_valid_stream(items in proptest::collection::vec(item(), 0..28), mut cuts in proptest::collection::vec(0usize..600, 0..8)) {
        let bytes: Vec<u8> = items.iter().flat_map(render).collect();
        cuts.sort_unstable();
        let events = run_chunked(&bytes, &cuts);
        validate(&events)?;
        prop_assert_eq!(run_chunked(&bytes, &[]), events);
    }

    #[test]
    fn interleaved_items_lose_nothing(
        items in proptest::collection::vec((prop_oneof![Just("message"), Just("function_call")], proptest::collection::vec("[ -~é]{1,5}", 1..4)), 1..5),
        order_seed in proptest::collection::vec(0usize..8, 0..40),
    ) {
        // Every item is announced first (as parallel output), then their deltas interleave.
        let mut bytes = Vec::new();
        let mut pieces: Vec<Vec<String>> = Vec::new();
        for (i, (kind, parts)) in items.iter().enumerate() {
            let index = u8::try_from(i).unwrap_or(0);
            bytes.extend(render(&Item::Added { index, kind }));
            pieces.push(if *kind == "function_call" {
                // Arguments: a JSON object whose text is cut into the same number of pieces.
                let text = json!({"v": parts.concat()}).to_string();
                let chars: Vec<char> = text.chars().collect();
                let size = chars.len().div_ceil(parts.len()).max(1);
                chars.chunks(size).map(|c| c.iter().collect()).collect()
            } else {
                parts.clone()
            });
        }
        let mut next = vec![0usize; pieces.len()];
        let mut seed = order_seed.into_iter().cycle();
        while next.iter().zip(&pieces).any(|(n, p)| *n < p.len()) {
            let open: Vec<usize> = (0..pieces.len()).filter(|&i| next[i] < pieces[i].len()).collect();
            let pick = open[seed.next().unwrap_or(0) % open.len()];
            let index = u8::try_from(pick).unwrap_or(0);
            let delta = pieces[pick][next[pick]].clone();
            bytes.extend(render(&if items[pick].0 == "function_call" {
                Item::Arguments { index, delta }
            } else {
                Item::Text { index, delta }
            }));
            next[pick] += 1;
        }
        bytes.extend(render(&Item::Completed { input: 10, cached: 0, output: 5 }));

        let events = run_chunked(&bytes, &[]);
        validate(&events)?;
        let mut acc = Accumulator::default();
        for e in &events {
            acc.push(e);
        }
        let message = acc.message().ok_or_else(|| TestCaseError::fail("no message"))?;
        prop_assert_eq!(message.content.len(), items.len());
        for (i, (block, (kind, parts))) in message.content.iter().zip(&items).enumerate() {
            match block {
                ContentBlock::Text { text, .. } => {
                    prop_assert_eq!(*kind, "message");
                    prop_assert_eq!(text, &parts.concat());
                }
                ContentBlock::ToolUse { id, input, .. } => {
                    prop_assert_eq!(*kind, "function_call");
                    prop_assert_eq!(id, &format!("call_{i}"));
                    prop_assert_eq!(input, &json!({"v": parts.concat()}));
                }
                other => prop_assert!(false, "unexpected block {:?}", other),
            }
        }
    }
}
