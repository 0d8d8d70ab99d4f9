//! Property tests of the raw-text (Fabstir) reply translator: whatever a model writes — tags,
//! half tags, broken calls, reasoning, any Unicode — cut anywhere, ended normally or by a failure,
//! the output is a stream the validator accepts, the cut changes nothing but the deltas, and no
//! character of text outside a recognised call is lost.

use bridge_core::anthropic::accumulate::Accumulator;
use bridge_core::anthropic::events::{ContentBlock, StreamEvent};
use bridge_core::anthropic::stream::Validator;
use bridge_core::translate::token_stream::{StreamEnd, TokenStreamTranslator};
use proptest::prelude::*;

/// Fragments a model writes: tags of every dialect, their pieces, JSON, text and whitespace.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("<think>".to_owned()),
        Just("</think>".to_owned()),
        Just("<tool_call>".to_owned()),
        Just("</tool_call>".to_owned()),
        Just("<tool".to_owned()),
        Just("_call>".to_owned()),
        Just("<".to_owned()),
        Just("{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}".to_owned()),
        Just("{\"name\": \"Bash\", \"arguments\": ".to_owned()),
        Just("Bash<arg_key>command</arg_key><arg_value>pwd</arg_value>".to_owned()),
        Just("<function=Bash>\n<parameter=command>\nls\n</parameter>\n</function>".to_owned()),
        Just("\n".to_owned()),
        Just("  ".to_owned()),
        "[a-z <>/{}\"é😀]{1,12}",
    ]
}

fn events_of(pieces: &[String], fail: bool) -> Vec<StreamEvent> {
    let mut t = TokenStreamTranslator::new("claude-x".into(), 10, 3, Vec::new());
    let mut events = Vec::new();
    for p in pieces {
        events.extend(t.feed(p));
    }
    if fail {
        events.extend(t.fail(bridge_core::anthropic::events::ApiError::new(
            bridge_core::anthropic::events::ErrorKind::Overloaded,
            "gone",
        )));
    }
    events.extend(t.finish(&StreamEnd::default()));
    events
}

fn message_of(events: &[StreamEvent]) -> String {
    let mut acc = Accumulator::default();
    for e in events {
        acc.push(e);
    }
    acc.result().body
}

/// Cut `text` at the given char positions.
fn cut(text: &str, cuts: &[usize]) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (chars.len() + 1)).collect();
    points.push(0);
    points.push(chars.len());
    points.sort_unstable();
    points.dedup();
    points
        .windows(2)
        .map(|w| chars[w[0]..w[1]].iter().collect())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn any_model_text_gives_a_valid_stream_whatever_the_cut(
        fragments in proptest::collection::vec(fragment(), 0..16),
        cuts in proptest::collection::vec(0usize..200, 0..10),
        fail in any::<bool>(),
    ) {
        let text: String = fragments.concat();
        let whole = events_of(std::slice::from_ref(&text), fail);
        let mut v = Validator::new();
        for e in &whole {
            prop_assert!(v.push(e).is_ok(), "{:?} on {:?}", v.push(e), text);
        }
        prop_assert!(v.finish().is_ok());
        let pieces = cut(&text, &cuts);
        let split = events_of(&pieces, fail);
        let mut v = Validator::new();
        for e in &split {
            prop_assert!(v.push(e).is_ok());
        }
        prop_assert_eq!(message_of(&split), message_of(&whole), "cut {:?}", pieces);
    }

    #[test]
    fn text_without_a_complete_call_loses_no_character(
        fragments in proptest::collection::vec(
            prop_oneof![Just("<tool".to_owned()), Just("<tool_call>".to_owned()), Just("{\"name\": ".to_owned()), "[a-z<>{}é😀]{1,8}"],
            1..12,
        ),
        cuts in proptest::collection::vec(0usize..100, 0..6),
    ) {
        // No `</tool_call>` and no `<think>` at the start: everything is text.
        let text = format!("x{}", fragments.concat());
        prop_assume!(!text.contains("</tool_call>"));
        let events = events_of(&cut(&text, &cuts), false);
        let mut acc = Accumulator::default();
        for e in &events {
            acc.push(e);
        }
        let got: String = acc
            .message()
            .map(|m| {
                m.content
                    .iter()
                    .map(|b| match b {
                        ContentBlock::Text { text, .. } => text.clone(),
                        other => format!("{other:?}"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        // An unclosed call whose body parses is a call; these bodies never parse.
        prop_assert_eq!(got, text.trim().to_owned());
    }
}
