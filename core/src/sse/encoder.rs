//! Exact-bytes SSE frame encoder: `event: <name>\ndata: <data>\n\n`, refusing a line break in
//! the name (the Anthropic events' own writer is [`crate::anthropic::encode`]).
//!
//! ```
//! use bridge_core::sse::encoder::encode_frame;
//! let mut out = String::new();
//! encode_frame(&mut out, "ping", "{\"type\":\"ping\"}").unwrap();
//! assert_eq!(out, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
//! assert!(encode_frame(&mut out, "a\nb", "{}").is_err());
//! ```

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
}
