//! Anthropic stream events as SSE bytes: `event: <type>\ndata: <json>\n\n`, exactly as the
//! Messages API writes them.
//!
//! ```
//! use bridge_core::anthropic::events::StreamEvent;
//! use bridge_core::anthropic::encode::encode_event;
//! let mut out = String::new();
//! encode_event(&mut out, &StreamEvent::Ping);
//! assert_eq!(out, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
//! ```

use super::events::{Delta, StreamEvent};

/// Append one Anthropic event. serde_json never writes raw line breaks, and event names are
/// fixed identifiers, so this cannot fail.
pub fn encode_event(out: &mut String, event: &StreamEvent) {
    out.push_str("event: ");
    out.push_str(event.name());
    out.push_str("\ndata: ");
    if let StreamEvent::ContentBlockDelta { index, delta } = event
        && !matches!(delta, Delta::CitationsDelta { .. })
    {
        write_block_delta(out, *index, delta);
    } else {
        let start = out.len();
        if crate::compact_json::write_into(out, event).is_err() {
            out.truncate(start);
            out.push_str("{}");
        }
    }
    out.push_str("\n\n");
}

/// The data of `content_block_delta`, the event nearly every upstream chunk becomes, written
/// straight out rather than through `Serialize`: the same bytes as the derive writes (tested
/// below against it), in a fraction of the calls.
fn write_block_delta(out: &mut String, index: u32, delta: &Delta) {
    let (kind, field, text) = match delta {
        Delta::TextDelta { text } => ("text_delta", "text", text),
        Delta::InputJsonDelta { partial_json } => {
            ("input_json_delta", "partial_json", partial_json)
        }
        Delta::ThinkingDelta { thinking } => ("thinking_delta", "thinking", thinking),
        Delta::SignatureDelta { signature } => ("signature_delta", "signature", signature),
        // Written by the derive (`encode_event` never passes one here).
        Delta::CitationsDelta { .. } => return,
    };
    out.push_str("{\"type\":\"content_block_delta\",\"index\":");
    out.push_str(itoa::Buffer::new().format(index));
    out.push_str(",\"delta\":{\"type\":\"");
    out.push_str(kind);
    out.push_str("\",\"");
    out.push_str(field);
    out.push_str("\":");
    crate::compact_json::write_str(out, text);
    out.push_str("}}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derive's bytes for `event` (what every other event is written with).
    fn derived(event: &StreamEvent) -> String {
        format!(
            "event: {}\ndata: {}\n\n",
            event.name(),
            serde_json::to_string(event).unwrap()
        )
    }

    fn every_delta(text: &str) -> [Delta; 4] {
        [
            Delta::TextDelta { text: text.into() },
            Delta::InputJsonDelta {
                partial_json: text.into(),
            },
            Delta::ThinkingDelta {
                thinking: text.into(),
            },
            Delta::SignatureDelta {
                signature: text.into(),
            },
        ]
    }

    #[test]
    fn a_block_delta_is_written_as_the_derive_writes_it() {
        let texts = [
            "",
            "w",
            "a \"quoted\" \\ path\n\ttab\u{1}\u{1f}\u{7f}",
            "h\u{e9}llo \u{1f600}",
            "{\"k\":[1,2]}",
        ];
        for index in [0, 1, 9, 10, 4_294_967_295] {
            for text in texts {
                for delta in every_delta(text) {
                    let event = StreamEvent::ContentBlockDelta { index, delta };
                    let mut out = String::from("before");
                    encode_event(&mut out, &event);
                    assert_eq!(out, format!("before{}", derived(&event)));
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_block_delta_is_written_as_the_derive_writes_it(
            index: u32,
            text in "[ -~\\t\\n\\r\\x00-\\x1f\\x7f\"\\\\\u{e9}\u{1f600}]{0,48}",
            kind in 0usize..4,
        ) {
            let delta = every_delta(&text).into_iter().nth(kind).unwrap();
            let event = StreamEvent::ContentBlockDelta { index, delta };
            let mut out = String::new();
            encode_event(&mut out, &event);
            proptest::prop_assert_eq!(out, derived(&event));
        }
    }
}
