//! Exact-bytes SSE encoder for Anthropic events: `event: <type>\ndata: <json>\n\n`.
//!
//! ```
//! use bridge_core::anthropic::events::StreamEvent;
//! use bridge_core::sse::encoder::encode_event;
//! let mut out = String::new();
//! encode_event(&mut out, &StreamEvent::Ping);
//! assert_eq!(out, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
//! ```

use crate::anthropic::events::{Delta, StreamEvent};

/// Why a frame cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// An `event:` name containing CR or LF would split the frame.
    #[error("an SSE event name may not contain CR or LF")]
    LineBreakInName,
}

/// Append one frame with a raw event name and data. Data lines are split on line breaks into
/// several `data:` lines (the decoder joins them back with `\n`).
///
/// # Errors
/// [`EncodeError::LineBreakInName`] when `name` contains CR or LF.
pub fn encode_frame(out: &mut String, name: &str, data: &str) -> Result<(), EncodeError> {
    if name.contains(['\r', '\n']) {
        return Err(EncodeError::LineBreakInName);
    }
    out.push_str("event: ");
    out.push_str(name);
    out.push('\n');
    if data.contains(['\r', '\n']) {
        for line in data.split("\r\n").flat_map(|l| l.split(['\r', '\n'])) {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
    } else {
        out.push_str("data: ");
        out.push_str(data);
        out.push('\n');
    }
    out.push('\n');
    Ok(())
}

/// Append one Anthropic event. serde_json never writes raw line breaks, and event names are
/// fixed identifiers, so this cannot fail.
pub fn encode_event(out: &mut String, event: &StreamEvent) {
    out.push_str("event: ");
    out.push_str(event.name());
    out.push_str("\ndata: ");
    if let StreamEvent::ContentBlockDelta { index, delta } = event {
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
    use crate::sse::decoder::SseDecoder;

    #[test]
    fn refuses_line_breaks_in_names() {
        let mut out = String::new();
        assert_eq!(
            encode_frame(&mut out, "a\nb", "{}"),
            Err(EncodeError::LineBreakInName)
        );
        assert_eq!(
            encode_frame(&mut out, "a\rb", "{}"),
            Err(EncodeError::LineBreakInName)
        );
        assert!(out.is_empty());
    }

    #[test]
    fn multi_line_data_round_trips() {
        let mut out = String::new();
        assert!(encode_frame(&mut out, "x", "one\ntwo\r\nthree").is_ok());
        assert_eq!(out, "event: x\ndata: one\ndata: two\ndata: three\n\n");
        let frames = SseDecoder::new().feed(out.as_bytes());
        assert_eq!(frames[0].data, "one\ntwo\nthree");
    }

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
