//! Property tests of the stream translator:
//! 1. whatever the upstream sends (valid chunks, garbage, errors, truncation, any chunking),
//!    the output is a stream the validator accepts;
//! 2. nothing is lost: interleaved tool-call fragments come out as complete calls with exactly
//!    the arguments the upstream sent, and all text arrives in order.
#![expect(clippy::disallowed_methods, reason = "test code reads fixture files")]

use bridge_core::anthropic::accumulate::Accumulator;
use bridge_core::anthropic::events::{ContentBlock, StreamEvent};
use bridge_core::anthropic::stream::Validator;
use bridge_core::sse::decoder::SseDecoder;
use bridge_core::translate::chat_stream::ChatStreamTranslator;
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
enum Item {
    Text(String),
    Reasoning(String),
    Tool {
        index: u32,
        id: Option<u8>,
        name: Option<String>,
        args: String,
    },
    Finish(&'static str),
    Usage(u32, u32),
    Error,
    Garbage(Vec<u8>),
    Done,
}

fn render(item: &Item) -> Vec<u8> {
    let chunk = |delta: serde_json::Value| {
        format!(
            "data: {}\n\n",
            json!({"choices":[{"index":0,"delta":delta}]})
        )
    };
    match item {
        Item::Text(t) => chunk(json!({"content": t})).into_bytes(),
        Item::Reasoning(t) => chunk(json!({"reasoning_content": t})).into_bytes(),
        Item::Tool {
            index,
            id,
            name,
            args,
        } => {
            let mut call = json!({"index": index, "function": {"arguments": args}});
            if let Some(id) = id {
                call["id"] = json!(format!("call_{id}"));
            }
            if let Some(name) = name {
                call["function"]["name"] = json!(name);
            }
            chunk(json!({"tool_calls": [call]})).into_bytes()
        }
        Item::Finish(reason) => format!(
            "data: {}\n\n",
            json!({"choices":[{"index":0,"delta":{},"finish_reason":reason}]})
        )
        .into_bytes(),
        Item::Usage(p, c) => format!(
            "data: {}\n\n",
            json!({"choices":[],"usage":{"prompt_tokens":p,"completion_tokens":c}})
        )
        .into_bytes(),
        Item::Error => {
            b"data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n".to_vec()
        }
        Item::Garbage(bytes) => bytes.clone(),
        Item::Done => b"data: [DONE]\n\n".to_vec(),
    }
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        4 => "[a-zé😀 ]{0,6}".prop_map(Item::Text),
        2 => "[a-z ]{0,6}".prop_map(Item::Reasoning),
        4 => (0u32..3, proptest::option::of(0u8..4), proptest::option::of("[A-Z][a-z]{0,3}"), "[{}\\[\\]\":a-z0-9,]{0,6}")
            .prop_map(|(index, id, name, args)| Item::Tool { index, id, name, args }),
        1 => prop_oneof![Just("stop"), Just("length"), Just("tool_calls"), Just("content_filter"), Just("weird")].prop_map(Item::Finish),
        1 => (0u32..100, 0u32..100).prop_map(|(p, c)| Item::Usage(p, c)),
        1 => Just(Item::Error),
        1 => proptest::collection::vec(any::<u8>(), 0..12).prop_map(Item::Garbage),
        1 => Just(Item::Done),
    ]
}

fn idx(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

fn run_chunked(bytes: &[u8], cuts: &[usize]) -> Vec<StreamEvent> {
    let mut t = ChatStreamTranslator::new("claude-test".into(), 10, 3);
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    #[test]
    fn any_upstream_gives_a_valid_stream(items in proptest::collection::vec(item(), 0..24), mut cuts in proptest::collection::vec(0usize..400, 0..8)) {
        let bytes: Vec<u8> = items.iter().flat_map(render).collect();
        cuts.sort_unstable();
        let events = run_chunked(&bytes, &cuts);
        let mut v = Validator::new();
        for e in &events {
            v.push(e).map_err(|err| TestCaseError::fail(format!("{err}\n{events:#?}")))?;
        }
        v.finish().map_err(|err| TestCaseError::fail(format!("{err}\n{events:#?}")))?;
        // The same bytes in one piece give the same events.
        prop_assert_eq!(run_chunked(&bytes, &[]), events);
    }

    #[test]
    fn interleaved_tool_calls_lose_nothing(
        calls in proptest::collection::vec((proptest::collection::btree_map("[a-z]{1,4}", "[ -~é]{0,8}", 0..4), 1usize..5), 1..4),
        order_seed in proptest::collection::vec(0usize..8, 0..40),
        lead_text in "[a-z ]{0,10}",
    ) {
        // Each call's JSON arguments, split into `parts` fragments.
        let mut fragments: Vec<Vec<String>> = Vec::new();
        let mut expected = Vec::new();
        for (args, parts) in &calls {
            let text = serde_json::to_string(args).unwrap_or_default();
            expected.push(serde_json::Value::Object(args.iter().map(|(k, v)| (k.clone(), json!(v))).collect()));
            let chars: Vec<char> = text.chars().collect();
            let size = chars.len().div_ceil(*parts).max(1);
            fragments.push(chars.chunks(size).map(|c| c.iter().collect()).collect());
        }
        let mut bytes = Vec::new();
        if !lead_text.is_empty() {
            bytes.extend(render(&Item::Text(lead_text.clone())));
        }
        // Each call opens as OpenAI does (id, name, empty arguments), then fragments interleave.
        let next_len = fragments.len();
        let mut next: Vec<usize> = vec![0; next_len];
        for i in 0..next_len {
            bytes.extend(render(&Item::Tool { index: idx(i), id: Some(u8::try_from(i).unwrap_or(0)), name: Some("Tool".into()), args: String::new() }));
        }
        let mut seed = order_seed.into_iter().cycle();
        while next.iter().zip(&fragments).any(|(n, f)| *n < f.len()) {
            let open: Vec<usize> = (0..fragments.len()).filter(|&i| next[i] < fragments[i].len()).collect();
            let pick = open[seed.next().unwrap_or(0) % open.len()];
            bytes.extend(render(&Item::Tool { index: idx(pick), id: None, name: None, args: fragments[pick][next[pick]].clone() }));
            next[pick] += 1;
        }
        bytes.extend(render(&Item::Finish("tool_calls")));
        bytes.extend(render(&Item::Done));

        let events = run_chunked(&bytes, &[]);
        let mut acc = Accumulator::default();
        let mut v = Validator::new();
        for e in &events {
            v.push(e).map_err(|err| TestCaseError::fail(err.to_string()))?;
            acc.push(e);
        }
        v.finish().map_err(|err| TestCaseError::fail(err.to_string()))?;
        let message = acc.message().ok_or_else(|| TestCaseError::fail("no message"))?;
        let tools: Vec<&ContentBlock> = message.content.iter().filter(|b| matches!(b, ContentBlock::ToolUse { .. })).collect();
        prop_assert_eq!(tools.len(), expected.len());
        for (i, (block, want)) in tools.iter().zip(&expected).enumerate() {
            let ContentBlock::ToolUse { id, input, .. } = block else { unreachable!() };
            prop_assert_eq!(id, &format!("call_{i}"));
            prop_assert_eq!(input, want);
        }
        let text: String = message.content.iter().filter_map(|b| match b { ContentBlock::Text { text, .. } => Some(text.as_str()), _ => None }).collect();
        prop_assert_eq!(text, lead_text);
    }
}

#[test]
fn sse_decoder_handles_every_byte_split_of_a_real_stream() {
    let stream = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/text_basic/upstream.sse"
    ))
    .unwrap();
    let mut whole = SseDecoder::new();
    let mut expected = whole.feed(&stream);
    expected.extend(whole.finish());
    for cut in 0..stream.len() {
        let mut d = SseDecoder::new();
        let mut got = d.feed(&stream[..cut]);
        got.extend(d.feed(&stream[cut..]));
        got.extend(d.finish());
        assert_eq!(got, expected, "cut at {cut}");
    }
}
