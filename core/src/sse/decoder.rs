//! Incremental SSE decoder. Partial input is normal: bytes after the last line break are kept
//! until the next `feed`, so a frame, a line or a UTF-8 character may be split anywhere.
//!
//! ```
//! use bridge_core::sse::decoder::SseDecoder;
//! let mut d = SseDecoder::new();
//! assert!(d.feed(b"event: ping\r\nda").is_empty());
//! let frames = d.feed(b"ta: {}\r\n\r\n: comment\n");
//! assert_eq!(frames.len(), 1);
//! assert_eq!(frames[0].event.as_deref(), Some("ping"));
//! assert_eq!(frames[0].data, "{}");
//! ```

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SseFrame {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
}

/// Buffers up to this size are kept from one frame or line to the next (a stream's frames are
/// mostly small); a larger one, held for one large frame, is given back.
const KEEP_CAPACITY: usize = 4096;

/// An unfinished line longer than this is held in pieces, one per chunk, and joined once when
/// it ends, into one allocation of its size: a buffer grown by doubling would copy it again at
/// each step, and a heap that never shrinks (a wasm guest's) would keep every smaller buffer.
const PIECES_ABOVE: usize = 64 << 10;

/// The decoder's state between chunks.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// The unfinished line (its start, when it is held in `pieces`).
    buf: Vec<u8>,
    /// The rest of a long unfinished line, a piece per chunk, in order after `buf`.
    pieces: Vec<Vec<u8>>,
    /// The bytes in `pieces`.
    pieces_len: usize,
    pending: SseFrame,
    has_data: bool,
    seen_first_line: bool,
    /// The previous chunk ended with `\r`: a `\n` at the start of the next one belongs to it.
    skip_lf: bool,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes; returns the frames completed by them.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseFrame> {
        let mut frames = Vec::new();
        self.read(chunk, &mut |frame: &mut SseFrame| {
            frames.push(std::mem::take(frame));
        });
        frames
    }

    /// [`Self::feed`] with bytes the caller gives away: a long `data:` line in them becomes the
    /// frame's data in place, not copied (an event of a long answer, handed on whole from one
    /// translator to the next, is then held once, not twice).
    pub fn feed_owned(&mut self, mut chunk: Vec<u8>) -> Vec<SseFrame> {
        let Some((start, end)) = self.long_data_line(&chunk) else {
            return self.feed(&chunk);
        };
        let mut frames = self.feed(chunk.get(..start).unwrap_or_default());
        // A CR that ended the lines before is settled: the next byte is the `d` of `data:`.
        self.skip_lf = false;
        let mut tail = chunk.split_off(end);
        chunk.drain(..start);
        match self.data_line(chunk) {
            Ok(()) => {
                // The line's end: a CR LF counts once.
                let skip = match tail.as_slice() {
                    [b'\r', b'\n', ..] => 2,
                    [b'\r', ..] if tail.len() == 1 => {
                        self.skip_lf = true;
                        1
                    }
                    _ => 1,
                };
                tail.drain(..skip.min(tail.len()));
            }
            Err(line) => {
                let mut rest = line;
                rest.append(&mut tail);
                tail = rest;
            }
        }
        frames.extend(self.feed(&tail));
        frames
    }

    /// Where the first long `data:` line of `chunk` starts and ends (its line break not
    /// included), when it could be taken whole: nothing is held from an earlier chunk, the
    /// chunk's first line is settled, and the line ends in this chunk.
    fn long_data_line(&self, chunk: &[u8]) -> Option<(usize, usize)> {
        if chunk.len() <= KEEP_CAPACITY || self.holds_line() || self.skip_lf {
            return None;
        }
        let mut start = 0;
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', chunk.get(start..)?) {
            let end = start + offset;
            if end - start > KEEP_CAPACITY && chunk.get(start..)?.starts_with(b"data:") {
                return (start > 0 || self.seen_first_line).then_some((start, end));
            }
            start = end + 1;
        }
        None
    }

    /// Feed bytes; `each` sees every frame they complete, in order. What [`Self::feed`] does
    /// without collecting the frames: the frame being built is reused, so a stream of frames
    /// costs no allocation per frame.
    pub fn feed_each(&mut self, chunk: &[u8], mut each: impl FnMut(&SseFrame)) {
        self.read(chunk, &mut |frame: &mut SseFrame| each(frame));
    }

    /// `feed` and `feed_each`: `each` gets each completed frame, and may take it.
    fn read(&mut self, chunk: &[u8], each: &mut impl FnMut(&mut SseFrame)) {
        let mut input = chunk;
        // A CR ended the last chunk: this one's first byte settles it, LF or not. (An empty
        // chunk settles nothing; a chunk that is just that LF settles it too.)
        if self.skip_lf && !input.is_empty() {
            self.skip_lf = false;
            if let Some((&b'\n', rest)) = input.split_first() {
                input = rest;
            }
        }
        // Line breaks are found with `memchr2` (word at a time, vectorised where the target
        // allows): a byte loop here was the largest cost of a stream in the wasm engine.
        let mut start = 0;
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', &input[start..]) {
            let line_end = start + offset;
            let mut next = line_end + 1;
            if input[line_end] == b'\r' {
                match input.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            if !self.holds_line() {
                self.line(&input[start..line_end], each);
            } else {
                let mut line = self.joined(&input[start..line_end]);
                if line.len() > KEEP_CAPACITY {
                    // A long line that came in pieces is a frame's data far more often than
                    // not: the line becomes that data, so it is never held twice.
                    if let Err(line) = self.data_line(line) {
                        self.line(&line, each);
                    }
                } else {
                    self.line(&line, each);
                    // The line's buffer is kept for the next unfinished line.
                    line.clear();
                    self.buf = line;
                }
            }
            start = next;
        }
        self.hold(&input[start..]);
    }

    /// Whether part of a line is held from an earlier chunk.
    fn holds_line(&self) -> bool {
        !self.buf.is_empty() || !self.pieces.is_empty()
    }

    /// Keep the start of an unfinished line for the next chunk: in `buf` while it is short, in
    /// pieces once it is long. Each piece is filled before the next is made (at least
    /// [`PIECES_ABOVE`] bytes), so a line that comes a few bytes per chunk costs its bytes, not
    /// an allocation per chunk.
    fn hold(&mut self, rest: &[u8]) {
        if rest.is_empty() {
            return;
        }
        if self.pieces.is_empty() && self.buf.len() + rest.len() <= PIECES_ABOVE {
            self.buf.extend_from_slice(rest);
            return;
        }
        if self.pieces.is_empty() && !self.buf.is_empty() {
            let start = std::mem::take(&mut self.buf);
            self.pieces_len += start.len();
            self.pieces.push(start);
        }
        self.pieces_len += rest.len();
        let mut rest = rest;
        if let Some(last) = self.pieces.last_mut() {
            let room = last.capacity() - last.len();
            let (now, later) = rest.split_at(room.min(rest.len()));
            last.extend_from_slice(now);
            rest = later;
        }
        if !rest.is_empty() {
            let mut piece = Vec::with_capacity(rest.len().max(PIECES_ABOVE));
            piece.extend_from_slice(rest);
            self.pieces.push(piece);
        }
    }

    /// The held line with its `end`, in one allocation of its size when it was held in pieces.
    fn joined(&mut self, end: &[u8]) -> Vec<u8> {
        if self.pieces.is_empty() {
            let mut line = std::mem::take(&mut self.buf);
            line.extend_from_slice(end);
            return line;
        }
        let mut line = Vec::with_capacity(self.pieces_len + end.len());
        for piece in std::mem::take(&mut self.pieces) {
            line.extend_from_slice(&piece);
        }
        self.pieces_len = 0;
        line.extend_from_slice(end);
        line
    }

    /// Bytes held between calls: the unfinished line and the frame being built.
    #[must_use]
    pub fn held(&self) -> usize {
        self.buf.len()
            + self.pieces_len
            + self.pending.data.len()
            + self.pending.event.as_ref().map_or(0, String::len)
            + self.pending.id.as_ref().map_or(0, String::len)
    }

    /// The stream ended: a last line without a line break and a frame without the closing
    /// blank line are still delivered (servers often omit them).
    pub fn finish(&mut self) -> Vec<SseFrame> {
        let mut frames = Vec::new();
        let mut each = |frame: &mut SseFrame| frames.push(std::mem::take(frame));
        if self.holds_line() {
            let line = self.joined(b"");
            self.line(&line, &mut each);
        }
        self.line(b"", &mut each);
        frames
    }

    /// A whole `data: …` line that starts a frame's data, taken as that data (the field name
    /// cut off in place); the line back when it is anything else.
    fn data_line(&mut self, mut line: Vec<u8>) -> Result<(), Vec<u8>> {
        let skip = match line.strip_prefix(b"data:") {
            Some(rest) if rest.first() == Some(&b' ') => 6,
            Some(_) => 5,
            None => return Err(line),
        };
        if self.has_data || !self.seen_first_line || !self.pending.data.is_empty() {
            return Err(line);
        }
        line.drain(..skip);
        match String::from_utf8(line) {
            Ok(data) => {
                self.pending.data = data;
                self.has_data = true;
                Ok(())
            }
            Err(e) => {
                let mut line = e.into_bytes();
                line.splice(..0, b"data: ".iter().copied());
                Err(line)
            }
        }
    }

    fn line(&mut self, raw: &[u8], each: &mut impl FnMut(&mut SseFrame)) {
        let mut raw = raw;
        if !self.seen_first_line {
            self.seen_first_line = true;
            if let Some(rest) = raw.strip_prefix(b"\xEF\xBB\xBF") {
                raw = rest;
            }
        }
        if raw.is_empty() {
            if self.has_data {
                each(&mut self.pending);
            }
            // The next frame starts empty, in the same buffer unless that is large.
            if self.pending.data.capacity() > KEEP_CAPACITY {
                self.pending.data = String::new();
            }
            self.pending.data.clear();
            self.pending.event = None;
            self.pending.id = None;
            self.has_data = false;
            return;
        }
        if raw[0] == b':' {
            return;
        }
        let (name, value) = match raw.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &raw[colon + 1..];
                (&raw[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (raw, &b""[..]),
        };
        // `from_utf8` first: it checks ASCII a word at a time, where `from_utf8_lossy` goes
        // byte by byte; the lossy form is only for a line that is not UTF-8.
        let value = match std::str::from_utf8(value) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(value),
        };
        match name {
            b"data" => {
                if self.has_data {
                    self.pending.data.push('\n');
                }
                self.pending.data.push_str(&value);
                self.has_data = true;
            }
            b"event" => self.pending.event = Some(value.into_owned()),
            b"id" => self.pending.id = Some(value.into_owned()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_at_once(input: &[u8]) -> Vec<SseFrame> {
        let mut d = SseDecoder::new();
        let mut f = d.feed(input);
        f.extend(d.finish());
        f
    }

    #[test]
    fn every_split_point_gives_the_same_frames() {
        let input = "\u{feff}event: a\r\ndata: h\u{e9}llo \u{1f600}\r\ndata: two\r\r: c\ndata: x\r\n\nid: 7\ndata: last";
        let expected = all_at_once(input.as_bytes());
        assert_eq!(expected.len(), 3);
        assert_eq!(expected[0].data, "h\u{e9}llo \u{1f600}\ntwo");
        assert_eq!(expected[0].event.as_deref(), Some("a"));
        assert_eq!(expected[1].data, "x");
        assert_eq!(expected[2].id.as_deref(), Some("7"));
        let bytes = input.as_bytes();
        for cut in 0..=bytes.len() {
            for cut2 in cut..=bytes.len() {
                let mut d = SseDecoder::new();
                let mut f = d.feed(&bytes[..cut]);
                f.extend(d.feed(&bytes[cut..cut2]));
                f.extend(d.feed(&bytes[cut2..]));
                f.extend(d.finish());
                assert_eq!(f, expected, "split at {cut}/{cut2}");
            }
        }
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing() {
        assert!(all_at_once(b"\n\n\r\n: only a comment\n\nevent: x\n\n").is_empty());
    }

    #[test]
    fn field_without_colon_and_without_space() {
        let f = all_at_once(b"data\ndata:x\n\n");
        assert_eq!(f[0].data, "\nx");
    }

    #[test]
    fn a_value_that_is_not_utf8_is_kept_with_replacement_characters() {
        let f = all_at_once(b"event: a\xff\ndata: caf\xc3\xa9 \xc3\n\n");
        assert_eq!(f[0].event.as_deref(), Some("a\u{fffd}"));
        assert_eq!(f[0].data, "caf\u{e9} \u{fffd}");
    }

    #[test]
    fn small_buffers_are_reused_and_a_large_frames_given_back() {
        let mut d = SseDecoder::new();
        let mut seen = Vec::new();
        d.feed_each(b"data: sm", |f| seen.push(f.data.clone()));
        d.feed_each(b"all\n\n", |f| seen.push(f.data.clone()));
        assert!(
            d.buf.capacity() > 0 && d.pending.data.capacity() > 0,
            "kept for the next frame"
        );
        let big = format!("data: {}", "x".repeat(2 * KEEP_CAPACITY));
        d.feed_each(big.as_bytes(), |f| seen.push(f.data.clone()));
        d.feed_each(b"\n\n", |f| seen.push(f.data.clone()));
        assert_eq!(seen, ["small".to_owned(), "x".repeat(2 * KEEP_CAPACITY)]);
        assert_eq!(
            (d.buf.capacity(), d.pending.data.capacity()),
            (0, 0),
            "a large line and frame are not kept"
        );
    }

    #[test]
    fn nothing_of_a_frame_carries_into_the_next() {
        let frames =
            all_at_once(b"event: x\nid: 1\n\ndata: y\n\nevent: e\nid: 2\ndata: z\n\ndata: w\n\n");
        let fields: Vec<_> = frames
            .iter()
            .map(|f| (f.event.as_deref(), f.data.as_str(), f.id.as_deref()))
            .collect();
        assert_eq!(
            fields,
            [
                (None, "y", None),
                (Some("e"), "z", Some("2")),
                (None, "w", None)
            ]
        );
        let mut d = SseDecoder::new();
        let mut each = Vec::new();
        d.feed_each(
            b"event: x\nid: 1\n\ndata: y\n\nevent: e\nid: 2\ndata: z\n\ndata: w\n\n",
            |f| each.push(f.clone()),
        );
        assert_eq!(each, frames, "feed_each sees what feed returns");
    }

    #[test]
    fn long_lines_in_pieces_read_as_short_ones() {
        // Longer than a kept buffer, and longer than a line held in one buffer.
        for long in [
            "x".repeat(3 * KEEP_CAPACITY),
            "x".repeat(PIECES_ABOVE + 5000),
        ] {
            long_line_cases(&long);
        }
        // A long line that is not UTF-8 is read as the short ones are (lossily).
        let mut bytes = b"data: ".to_vec();
        bytes.extend(std::iter::repeat_n(b'y', 2 * KEEP_CAPACITY));
        bytes.extend(b"\xff\n\n");
        let mut d = SseDecoder::new();
        let mut frames = Vec::new();
        for chunk in bytes.chunks(1000) {
            frames.extend(d.feed(chunk));
        }
        assert_eq!(frames, all_at_once(&bytes));
        assert!(frames[0].data.ends_with("y\u{fffd}"));
    }

    /// Every way of feeding a frame with a line of `long` gives the frames of one feed.
    fn long_line_cases(long: &str) {
        let cases = [
            format!("data: {long}\n\n"),
            format!("data:{long}\n\n"),
            format!("data:  {long}\n\n"),
            format!("data: a\ndata: {long}\n\n"),
            format!("event: e\ndata: {long}\ndata: b\n\n"),
            format!(": {long}\ndata: c\n\n"),
            format!("id: {long}\ndata: d\n\n"),
            format!("{}data: {long}\n\n", "\u{feff}"),
            format!("data: {long}{}\n\n", "\u{e9}"),
        ];
        for input in cases {
            let whole = all_at_once(input.as_bytes());
            assert_eq!(whole.len(), 1, "{:.40}", input);
            for before in [
                "",
                "event: a\n",
                ": c\r\n",
                "data: p\r\r",
                "data: q\r\n\r\n",
            ] {
                let text = format!("{before}{input}data: after\r");
                let expected = all_at_once(text.as_bytes());
                let mut d = SseDecoder::new();
                let mut frames = d.feed(b"");
                frames.extend(d.feed_owned(text.clone().into_bytes()));
                frames.extend(d.feed(b"\n\n"));
                frames.extend(d.finish());
                assert_eq!(frames, expected, "owned: {:.60}", text);
                let mut d = SseDecoder::new();
                d.feed(b": first\n");
                let mut frames = d.feed_owned(text.clone().into_bytes());
                frames.extend(d.finish());
                let mut expected = SseDecoder::new();
                expected.feed(b": first\n");
                let mut expected_frames = expected.feed(text.as_bytes());
                expected_frames.extend(expected.finish());
                assert_eq!(frames, expected_frames, "owned after a line: {:.60}", text);
            }
            for piece in [1000, KEEP_CAPACITY - 1, KEEP_CAPACITY + 7] {
                let mut d = SseDecoder::new();
                let mut frames = Vec::new();
                for chunk in input.as_bytes().chunks(piece) {
                    frames.extend(d.feed(chunk));
                }
                frames.extend(d.finish());
                assert_eq!(frames, whole, "{:.40} in pieces of {piece}", input);
            }
        }
    }

    #[test]
    fn a_long_line_in_pieces_is_joined_once_at_its_size() {
        let text = "w".repeat(3 * PIECES_ABOVE + 11);
        let input = format!("data: {text}\n\n");
        let mut d = SseDecoder::new();
        // After the stream's first line, the joined line becomes the data in place.
        let mut frames = d.feed(b": open\n");
        for chunk in input.as_bytes().chunks(1000) {
            frames.extend(d.feed(chunk));
            assert!(d.buf.capacity() <= 2 * PIECES_ABOVE, "held in pieces");
        }
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].data, text);
        assert_eq!(
            frames[0].data.capacity(),
            "data: ".len() + text.len(),
            "one allocation of the line's size, not a doubled buffer"
        );
        assert_eq!((d.held(), d.pieces.capacity()), (0, 0), "nothing kept");
    }

    #[test]
    fn a_long_line_a_byte_at_a_time_is_held_in_full_pieces() {
        let text = "b".repeat(3 * PIECES_ABOVE);
        let input = format!("data: {text}\n\n");
        let mut d = SseDecoder::new();
        let mut frames = d.feed(b": open\n");
        for byte in input.as_bytes().chunks(1) {
            frames.extend(d.feed(byte));
            assert!(d.pieces.len() <= 4, "{} pieces", d.pieces.len());
        }
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].data, text);
    }

    #[test]
    fn an_owned_long_data_line_becomes_the_data_in_place() {
        let long = "z".repeat(2 * KEEP_CAPACITY);
        let chunk = format!("event: e\ndata: {long}\r\n\r\n").into_bytes();
        let at = chunk.as_ptr();
        let mut d = SseDecoder::new();
        d.feed(b": hello\n");
        let frames = d.feed_owned(chunk);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].data, long);
        assert_eq!(frames[0].event.as_deref(), Some("e"));
        assert_eq!(
            frames[0].data.as_ptr(),
            at,
            "the chunk's own allocation, not a copy"
        );
    }
}
