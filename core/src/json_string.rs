//! A JSON string kept as the client's text, and written from it.
//!
//! A tool's `description` is the longest string of a Claude Code request after its history
//! (18 KB of the 52 KB captured in `tests/fixtures/claude_code_tool_round_trip`, sent again every
//! turn), full of `\n` and `\"`. Read into a `String` and written into the upstream body it was
//! unescaped and escaped again: a fifth of the conversion's instructions. Here the string keeps
//! its JSON text. When every escape in it is the one this crate's writer makes for its character
//! ([`crate::compact_json`], serde_json's: `\n`, `\"`, `\\`, `\t`, `\r`, `\b`, `\f`, and
//! `\u00XX` in lowercase for the other control characters), as in what Node's `JSON.stringify`
//! sends, the text is written as it is. Any other spelling (`\/`, `\u00e9` for `é`, a surrogate
//! pair, upper-case hex) is rewritten in one pass over the text as the writer spells it, so the
//! bytes written never depend on how the client spelled its string.
//!
//! ```
//! use bridge_core::json_string::JsonString;
//!
//! let kept: JsonString = serde_json::from_str(r#""line one\nline \"two\"""#).unwrap();
//! assert_eq!(kept.text(), "line one\nline \"two\"");
//! assert_eq!(kept.len(), 19);
//! assert_eq!(serde_json::to_string(&kept).unwrap(), r#""line one\nline \"two\"""#);
//!
//! // Another spelling of the same characters is written as serde_json writes them.
//! let read: JsonString = serde_json::from_str(r#""caf\u00e9 \/ \u0041""#).unwrap();
//! assert_eq!(read.text(), "café / A");
//! assert_eq!(serde_json::to_string(&read).unwrap(), r#""café / A""#);
//! ```

use std::borrow::Cow;

use serde::de::{Error as _, Unexpected};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A string read from JSON (see the module docs).
#[derive(Debug, Clone)]
pub struct JsonString(Kept);

#[derive(Debug, Clone)]
enum Kept {
    /// The client's JSON text, quotes included; `len` is the string's length in bytes, `as_written`
    /// whether the text is already spelled as this crate writes it.
    Json {
        json: Box<RawValue>,
        len: usize,
        as_written: bool,
    },
    /// The string itself.
    Text(String),
}

impl JsonString {
    /// A string made in the bridge.
    #[must_use]
    pub fn new(text: String) -> Self {
        Self(Kept::Text(text))
    }

    /// The string.
    #[must_use]
    pub fn text(&self) -> Cow<'_, str> {
        match &self.0 {
            Kept::Text(text) => Cow::Borrowed(text),
            Kept::Json { json, .. } => {
                let json = json.get();
                let inner = inner(json);
                if inner.contains('\\') {
                    // Its escapes were checked when it was read, so it reads.
                    Cow::Owned(serde_json::from_str(json).unwrap_or_default())
                } else {
                    Cow::Borrowed(inner)
                }
            }
        }
    }

    /// The string's length in bytes (what `String::len` of [`Self::text`] gives).
    #[must_use]
    pub fn len(&self) -> usize {
        match &self.0 {
            Kept::Text(text) => text.len(),
            Kept::Json { len, .. } => *len,
        }
    }

    /// Whether the string is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The string, owned.
    #[must_use]
    pub fn into_string(self) -> String {
        match self.0 {
            Kept::Text(text) => text,
            Kept::Json { .. } => self.text().into_owned(),
        }
    }
}

impl From<String> for JsonString {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

impl PartialEq for JsonString {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
    }
}

/// What lies between a JSON string's quotes.
fn inner(json: &str) -> &str {
    json.get(1..json.len().saturating_sub(1))
        .unwrap_or_default()
}

/// The character of the `\uXXXX` escape at `at` (two of them for a surrogate pair) and the
/// bytes the escape takes; `None` for a lone surrogate or text that is not such an escape.
fn unicode_escape(bytes: &[u8], at: usize) -> Option<(char, usize)> {
    let hex = |from: usize| {
        let digits = bytes.get(from..from + 4)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let code = hex(at + 2)?;
    match code {
        0xd800..=0xdbff => {
            if bytes.get(at + 6..at + 8)? != b"\\u" {
                return None;
            }
            let low = hex(at + 8).filter(|low| (0xdc00..=0xdfff).contains(low))?;
            let code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
            Some((char::from_u32(code)?, 12))
        }
        _ => Some((char::from_u32(code)?, 6)),
    }
}

/// The string's length in bytes and whether `inner` (the text between its quotes) is spelled as
/// [`crate::compact_json`] writes it; `None` if it holds an escape serde_json would refuse.
fn measure(inner: &str) -> Option<(usize, bool)> {
    let bytes = inner.as_bytes();
    let (mut len, mut as_written) = (bytes.len(), true);
    let mut from = 0;
    while let Some(at) = memchr::memchr(b'\\', bytes.get(from..)?).map(|i| from + i) {
        match bytes.get(at + 1).copied()? {
            b'"' | b'\\' | b'n' | b't' | b'r' | b'b' | b'f' => {
                len -= 1;
                from = at + 2;
            }
            b'/' => {
                len -= 1;
                as_written = false;
                from = at + 2;
            }
            b'u' => {
                let (ch, taken) = unicode_escape(bytes, at)?;
                // The writer's own: `\u00XX`, lowercase, for a control character without a
                // short escape.
                as_written &= taken == 6
                    && u32::from(ch) < 0x20
                    && !matches!(ch, '\u{8}' | '\t' | '\n' | '\u{c}' | '\r')
                    && bytes
                        .get(at + 2..at + 6)
                        .is_some_and(|hex| !hex.iter().any(u8::is_ascii_uppercase));
                len = len + ch.len_utf8() - taken;
                from = at + taken;
            }
            _ => return None,
        }
    }
    Some((len, as_written))
}

/// The JSON text of the string whose text between the quotes is `inner`, spelled as
/// [`crate::compact_json`] writes it ([`measure`] took it).
fn rewritten(inner: &str) -> String {
    let bytes = inner.as_bytes();
    let mut out = String::with_capacity(inner.len() + 2);
    out.push('"');
    let mut from = 0;
    while let Some(at) = bytes
        .get(from..)
        .and_then(|rest| memchr::memchr(b'\\', rest))
        .map(|i| from + i)
    {
        out.push_str(inner.get(from..at).unwrap_or_default());
        from = match bytes.get(at + 1).copied() {
            Some(b'/') => {
                out.push('/');
                at + 2
            }
            Some(b'u') => match unicode_escape(bytes, at) {
                Some((ch, taken)) => {
                    crate::compact_json::push_char(&mut out, ch);
                    at + taken
                }
                None => at + 2,
            },
            // A short escape is the writer's own.
            _ => {
                out.push_str(inner.get(at..at + 2).unwrap_or_default());
                at + 2
            }
        };
    }
    out.push_str(inner.get(from..).unwrap_or_default());
    out.push('"');
    out
}

impl<'de> Deserialize<'de> for JsonString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = Box::<RawValue>::deserialize(deserializer)?;
        let text = json.get();
        if !(text.len() >= 2 && text.starts_with('"') && text.ends_with('"')) {
            return Err(D::Error::invalid_type(
                Unexpected::Other("a JSON value that is not a string"),
                &"a string",
            ));
        }
        match measure(inner(text)) {
            Some((len, as_written)) => Ok(Self(Kept::Json {
                json,
                len,
                as_written,
            })),
            // Read as serde_json reads it, for its error (a lone surrogate).
            None => serde_json::from_str(text)
                .map(|text| Self(Kept::Text(text)))
                .map_err(D::Error::custom),
        }
    }
}

impl Serialize for JsonString {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Kept::Json {
                json,
                as_written: true,
                ..
            } => crate::compact_json::serialize_raw(json.get(), serializer),
            Kept::Json { json, .. } => {
                crate::compact_json::serialize_raw(&rewritten(inner(json.get())), serializer)
            }
            Kept::Text(text) => serializer.serialize_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings of every kind of character, each spelled every way JSON allows.
    fn spellings() -> Vec<(String, String)> {
        let mut cases = Vec::new();
        for c in (0u32..0x80).chain([0xe9, 0x2028, 0x1f600]) {
            let Some(ch) = char::from_u32(c) else {
                continue;
            };
            let text = format!("a{ch}b\n");
            let written = serde_json::to_string(&text).unwrap();
            cases.push((text.clone(), written));
            // `\uXXXX` for the character (a surrogate pair above the BMP), upper and lower case.
            let mut units = [0u16; 2];
            let units = ch.encode_utf16(&mut units);
            let lower: String = units.iter().map(|u| format!("\\u{u:04x}")).collect();
            let upper: String = units.iter().map(|u| format!("\\u{u:04X}")).collect();
            cases.push((text.clone(), format!("\"a{lower}b\\n\"")));
            cases.push((text.clone(), format!("\"a{upper}b\\n\"")));
            if ch == '/' {
                cases.push((text.clone(), "\"a\\/b\\n\"".to_owned()));
            }
        }
        cases
    }

    #[test]
    fn every_spelling_reads_as_serde_json_reads_it_and_writes_as_serde_json_writes_it() {
        for (text, json) in spellings() {
            let read: JsonString = serde_json::from_str(&json).unwrap();
            assert_eq!(read.text(), text, "{json}");
            assert_eq!(read.len(), text.len(), "{json}");
            let written = serde_json::to_string(&text).unwrap();
            assert_eq!(serde_json::to_string(&read).unwrap(), written, "{json}");
            assert_eq!(
                crate::compact_json::to_string(&read).unwrap(),
                written,
                "{json}"
            );
            assert_eq!(read.clone().into_string(), text, "{json}");
        }
    }

    #[test]
    fn only_the_writers_own_spelling_is_written_as_it_is() {
        let kept = |json: &str| {
            matches!(
                serde_json::from_str::<JsonString>(json).unwrap().0,
                Kept::Json {
                    as_written: true,
                    ..
                }
            )
        };
        assert!(kept(r#""plain""#));
        assert!(kept(r#""a\nb\t\"\\\r\b\f\u001f\u0000""#));
        assert!(!kept(r#""\u001F""#));
        assert!(!kept(r#""\u000a""#));
        assert!(!kept(r#""\/""#));
        assert!(!kept(r#""\u00e9""#));
    }

    #[test]
    fn what_serde_json_refuses_is_refused() {
        for json in [
            r#""\ud800""#,
            r#""\x""#,
            r#""\u12""#,
            "5",
            "null",
            r#"{"a":1}"#,
        ] {
            assert!(serde_json::from_str::<JsonString>(json).is_err(), "{json}");
        }
    }
}
