//! A tool's `input_schema`, kept as the client's JSON text until something needs its structure.
//!
//! Tool schemas are most of a Claude Code request (31 KB of the 52 KB captured in
//! `tests/fixtures/claude_code_tool_round_trip`), and read into `serde_json::Value` (an ordered
//! map per object, each key hashed) they were most of the time converting one took. So a schema
//! is only checked when the request is read (valid JSON; an object, by the request's own
//! checks), and written into an upstream body by one pass over its text ([`ToolSchema::cleaned`])
//! that leaves out what upstreams refuse (`$schema`) and writes it compact, with strings escaped
//! and numbers written exactly as serde_json writes them: the body is byte for byte what the
//! parsed form gave ([`crate::anthropic::schema::clean_schema`]), which the tests compare
//! on generated schemas. A schema the pass does not take (a key twice in one object, or the
//! strict cleaning some upstreams need) goes through the parsed form instead.
//!
//! ```
//! use bridge_core::anthropic::tool_schema::ToolSchema;
//!
//! let schema: ToolSchema = serde_json::from_str(
//!     r#"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
//!         "properties": {"path": {"type": "string", "description": "caf\u00e9"}}}"#,
//! ).unwrap();
//! assert_eq!(
//!     schema.cleaned(false).get(),
//!     r#"{"type":"object","properties":{"path":{"type":"string","description":"café"}}}"#
//! );
//! ```

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Number, Value};

use crate::anthropic::schema::{DROPPED, Member, clean_schema};

/// A tool's JSON schema as the client sent it (checked to be valid JSON).
#[derive(Debug, Clone)]
pub struct ToolSchema(Box<RawValue>);

impl ToolSchema {
    /// A schema built in the bridge (an OpenAI client's `parameters`).
    #[must_use]
    pub fn from_value(value: &Value) -> Self {
        Self(raw(value.to_string()))
    }

    /// Whether it is a JSON object (what the Messages API requires).
    #[must_use]
    pub fn is_object(&self) -> bool {
        self.0.get().trim_start().starts_with('{')
    }

    /// The schema parsed.
    #[must_use]
    pub fn to_value(&self) -> Value {
        // The text was checked when it was read, so it parses.
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The schema cleaned for an OpenAI upstream (see [`clean_schema`]) as compact JSON text,
    /// byte for byte what `clean_schema` of the parsed schema writes.
    #[must_use]
    pub fn cleaned(&self, strict: bool) -> CleanedSchema {
        self.cleaned_counted(strict).0
    }

    /// [`Self::cleaned`], and [`Self::json_chars`] counted in the same pass.
    #[must_use]
    pub fn cleaned_counted(&self, strict: bool) -> (CleanedSchema, usize) {
        let one_pass = (!strict)
            .then(|| Pass::whole(self.0.get(), Place::Schema, true))
            .flatten();
        match one_pass {
            Some((chars, text)) => (CleanedSchema(text), chars),
            None => (
                CleanedSchema(clean_schema(self.to_value(), strict).to_string()),
                self.json_chars(),
            ),
        }
    }

    /// Its size as the token estimate counts a JSON value (`tokens::json_chars` of the parsed
    /// schema).
    #[must_use]
    pub fn json_chars(&self) -> usize {
        Pass::whole(self.0.get(), PLAIN, false)
            .map_or_else(|| json_chars(&self.to_value()), |(chars, _)| chars)
    }
}

/// A schema as it goes upstream: compact JSON text, written into a request body as it is.
///
/// The text is JSON by construction (written by [`Pass`] from checked JSON, or by serde_json),
/// so unlike a `RawValue` it is not parsed again to check it.
#[derive(Debug, Clone)]
pub struct CleanedSchema(String);

impl CleanedSchema {
    /// The JSON text.
    #[must_use]
    pub fn get(&self) -> &str {
        &self.0
    }
}

impl PartialEq for CleanedSchema {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Serialize for CleanedSchema {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        crate::compact_json::serialize_raw(&self.0, serializer)
    }
}

/// The length of `value` as compact JSON, roughly (strings counted unescaped): what the token
/// estimate counts for a JSON value.
pub(crate) fn json_chars(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(json_chars).sum::<usize>() + items.len(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() + 3 + json_chars(v))
                .sum::<usize>()
                + map.len()
        }
    }
}

/// Text known to be one JSON value (written by serde_json or by [`Pass`]).
fn raw(text: String) -> Box<RawValue> {
    // Every caller passes JSON it wrote; `null` (the default) keeps the function total.
    RawValue::from_string(text).unwrap_or_default()
}

impl PartialEq for ToolSchema {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get() || self.to_value() == other.to_value()
    }
}

impl<'de> Deserialize<'de> for ToolSchema {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Self)
    }
}

impl Serialize for ToolSchema {
    /// Compact, as the parsed schema would be written (the client's spacing is not kept).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match Pass::whole(self.0.get(), PLAIN, true) {
            Some((_, text)) => crate::compact_json::serialize_raw(&text, serializer),
            None => self.to_value().serialize(serializer),
        }
    }
}

/// Where a value sits, for what [`clean_schema`] does to it.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// A schema: an object's `$schema` is left out and its keywords say where its members are.
    Schema,
    /// A member of a schema object, by its key ([`Member::Plain`]: anything not in a schema).
    In(Member),
}

/// Anything else: written as it is (compact).
const PLAIN: Place = Place::In(Member::Plain);

/// The pass gave up: the parsed form is used instead.
struct Declined;

/// One pass over a JSON text: writes it compact (when `write`), leaving out schema objects'
/// `$schema`, and counts its size as `tokens::json_chars` does.
struct Pass<'a> {
    text: &'a str,
    at: usize,
    write: bool,
    out: String,
    /// The keys of the objects open at the cursor, outermost first (one list for all of them,
    /// not one allocated per object).
    keys: Vec<Cow<'a, str>>,
}

impl<'a> Pass<'a> {
    fn new(text: &'a str, write: bool) -> Self {
        Self {
            text,
            at: 0,
            write,
            out: String::with_capacity(if write { text.len() } else { 0 }),
            keys: Vec::new(),
        }
    }

    /// `text`, a value at `place`, in one pass: its `json_chars` and (when `write`) the text
    /// written; `None` when the pass declines it or something follows the value.
    fn whole(text: &'a str, place: Place, write: bool) -> Option<(usize, String)> {
        let mut pass = Self::new(text, write);
        let chars = pass.value(place).ok()?;
        pass.at_end().then_some((chars, pass.out))
    }

    fn at_end(&mut self) -> bool {
        self.skip_space();
        self.at == self.text.len()
    }

    fn byte(&self, at: usize) -> Option<u8> {
        self.text.as_bytes().get(at).copied()
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.byte(self.at) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.byte(self.at)
    }

    fn push(&mut self, text: &str) {
        if self.write {
            self.out.push_str(text);
        }
    }

    /// The value at the cursor; its `json_chars`.
    fn value(&mut self, place: Place) -> Result<usize, Declined> {
        match self.peek().ok_or(Declined)? {
            // An object where a schema or a list of them goes is a schema.
            b'{' if place == Place::In(Member::SchemaOrList) => self.object(Place::Schema),
            b'{' => self.object(place),
            b'[' => self.array(place),
            b'"' => {
                let text = self.string()?;
                let chars = text.len() + 2;
                self.write_string(&text);
                Ok(chars)
            }
            b't' => self.literal("true", 5),
            b'f' => self.literal("false", 5),
            b'n' => self.literal("null", 4),
            _ => self.number(),
        }
    }

    /// A string as serde_json writes it: one without an escape in the text needs none
    /// written (JSON text cannot hold a raw quote or control character in a string).
    #[expect(
        clippy::ptr_arg,
        reason = "the variant says whether the text had an escape"
    )]
    fn write_string(&mut self, text: &Cow<'a, str>) {
        if !self.write {
            return;
        }
        match text {
            Cow::Borrowed(plain) => {
                self.out.push('"');
                self.out.push_str(plain);
                self.out.push('"');
            }
            Cow::Owned(unescaped) => crate::compact_json::write_str(&mut self.out, unescaped),
        }
    }

    fn literal(&mut self, word: &str, chars: usize) -> Result<usize, Declined> {
        if !self.text.as_bytes()[self.at..].starts_with(word.as_bytes()) {
            return Err(Declined);
        }
        self.at += word.len();
        self.push(word);
        Ok(chars)
    }

    /// A number as serde_json writes it once parsed: a plain integer of up to 18 digits as it
    /// is, anything else through `Number`.
    fn number(&mut self) -> Result<usize, Declined> {
        let start = self.at;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.byte(self.at) {
            self.at += 1;
        }
        let token = self.text.get(start..self.at).ok_or(Declined)?;
        let digits = token.strip_prefix('-').unwrap_or(token);
        let plain = !digits.is_empty()
            && digits.len() <= 18
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (!digits.starts_with('0') || (digits == "0" && token == "0"));
        if plain {
            self.push(token);
            return Ok(token.len());
        }
        let number: Number = token.parse().map_err(|_| Declined)?;
        let written = number.to_string();
        self.push(&written);
        Ok(written.len())
    }

    /// The string at the cursor, unescaped (borrowed when it has no escape).
    fn string(&mut self) -> Result<Cow<'a, str>, Declined> {
        let text: &'a str = self.text;
        let bytes = text.as_bytes();
        let start = self.at;
        let mut i = start + 1;
        let mut escaped = false;
        loop {
            i += memchr::memchr2(b'"', b'\\', bytes.get(i..).ok_or(Declined)?).ok_or(Declined)?;
            if bytes.get(i) == Some(&b'"') {
                break;
            }
            escaped = true;
            i += 2;
        }
        self.at = i + 1;
        if escaped {
            let token = text.get(start..self.at).ok_or(Declined)?;
            serde_json::from_str::<String>(token)
                .map(Cow::Owned)
                .map_err(|_| Declined)
        } else {
            text.get(start + 1..i).map(Cow::Borrowed).ok_or(Declined)
        }
    }

    fn array(&mut self, place: Place) -> Result<usize, Declined> {
        let item = match place {
            Place::In(Member::SchemaOrList | Member::SchemaList) => Place::Schema,
            Place::Schema | Place::In(Member::SchemaMap | Member::Plain) => PLAIN,
        };
        self.at += 1;
        self.push("[");
        let mut chars = 2;
        let mut count = 0;
        if self.peek() == Some(b']') {
            self.at += 1;
        } else {
            loop {
                if count > 0 {
                    self.push(",");
                }
                chars += self.value(item)?;
                count += 1;
                match self.peek() {
                    Some(b',') => self.at += 1,
                    Some(b']') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(Declined),
                }
            }
        }
        self.push("]");
        Ok(chars + count)
    }

    fn object(&mut self, place: Place) -> Result<usize, Declined> {
        self.at += 1;
        self.push("{");
        let mut chars = 2;
        // This object's keys are `self.keys[first..]`.
        let first = self.keys.len();
        let mut written = 0;
        if self.peek() == Some(b'}') {
            self.at += 1;
        } else {
            loop {
                if self.peek() != Some(b'"') {
                    return Err(Declined);
                }
                let key = self.string()?;
                // A key twice: the parsed form keeps the last value at the first place.
                if self.keys[first..].contains(&key) {
                    return Err(Declined);
                }
                if self.peek() != Some(b':') {
                    return Err(Declined);
                }
                self.at += 1;
                let (keep, member) = match place {
                    Place::Schema => (key != DROPPED, Place::In(Member::of(&key))),
                    Place::In(Member::SchemaMap) => (true, Place::Schema),
                    Place::In(Member::SchemaOrList | Member::SchemaList | Member::Plain) => {
                        (true, PLAIN)
                    }
                };
                let write = self.write;
                if keep && write {
                    if written > 0 {
                        self.out.push(',');
                    }
                    self.write_string(&key);
                    self.out.push(':');
                    written += 1;
                }
                self.write = keep && write;
                let value = self.value(member);
                self.write = write;
                chars += key.len() + 3 + value?;
                self.keys.push(key);
                match self.peek() {
                    Some(b',') => self.at += 1,
                    Some(b'}') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(Declined),
                }
            }
        }
        self.push("}");
        let count = self.keys.len() - first;
        self.keys.truncate(first);
        Ok(chars + count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn schema(text: &str) -> ToolSchema {
        serde_json::from_str(text).unwrap()
    }

    /// What the parsed form gives: the cleaned schema's text and the token estimate's size.
    fn parsed(text: &str, strict: bool) -> (String, usize) {
        let value: Value = serde_json::from_str(text).unwrap();
        (
            clean_schema(value.clone(), strict).to_string(),
            json_chars(&value),
        )
    }

    /// Whether the one pass takes `text` itself (else the parsed form stands in, with the same
    /// output, so the comparisons alone would not show that the pass works).
    fn pass_takes(text: &str) -> bool {
        let taken = Pass::whole(text, Place::Schema, true).is_some();
        assert_eq!(taken, Pass::whole(text, PLAIN, false).is_some());
        taken
    }

    fn same_as_parsed(text: &str) {
        assert!(pass_takes(text), "{text}");
        let s = schema(text);
        let (cleaned, chars) = parsed(text, false);
        assert_eq!(s.cleaned(false).get(), cleaned, "{text}");
        assert_eq!(s.json_chars(), chars, "{text}");
        let (counted_text, counted) = s.cleaned_counted(false);
        assert_eq!(
            (counted_text.get(), counted),
            (cleaned.as_str(), chars),
            "{text}"
        );
        assert_eq!(
            crate::compact_json::to_string(&s).unwrap(),
            s.to_value().to_string()
        );
        assert_eq!(serde_json::to_string(&s).unwrap(), s.to_value().to_string());
    }

    #[test]
    fn dollar_schema_is_left_out_only_where_a_schema_is() {
        let text = r#"{"$schema":"x","type":"object","properties":{"a":{"$schema":"y","type":"array",
            "items":[{"$schema":"z"},{"type":"string"}]},"$schema":{"type":"string"}},
            "anyOf":[{"$schema":1}],"oneOf":{"$schema":2},"default":{"$schema":3},
            "not":{"$schema":4,"allOf":[{"$schema":5}]}}"#;
        same_as_parsed(text);
        assert_eq!(
            schema(text).cleaned(false).get(),
            r#"{"type":"object","properties":{"a":{"type":"array","items":[{},{"type":"string"}]},"$schema":{"type":"string"}},"anyOf":[{}],"oneOf":{"$schema":2},"default":{"$schema":3},"not":{"allOf":[{}]}}"#
        );
    }

    #[test]
    fn strings_and_numbers_are_written_as_serde_json_writes_them() {
        same_as_parsed(
            r#"{ "d" : "a\u00e9\"\\\/\b\f\n\r\t\u0001\ud83d\ude00", "n": [0, -0, 1.0, 1e2, -1.5E-3, 12345678901234567890, -123, 0.1, 1e300, 123456789012345678901234567890 ],
               "b": [true, false, null], "e": {}, "l": [] , "k\u0041": 1}"#,
        );
    }

    #[test]
    fn a_key_twice_or_strict_cleaning_goes_through_the_parsed_form() {
        let text = r#"{"type":"object","type":"string","$schema":"x","format":"uri"}"#;
        assert!(!pass_takes(text));
        assert_eq!(schema(text).json_chars(), parsed(text, false).1);
        assert_eq!(
            schema(text).cleaned(false).get(),
            r#"{"type":"string","format":"uri"}"#
        );
        let (strict, _) = parsed(text, true);
        assert_eq!(schema(text).cleaned(true).get(), strict);
        assert_eq!(strict, r#"{"type":"string"}"#);
        // Counted all the same, for the token estimate.
        let chars = parsed(text, false).1;
        assert_eq!(schema(text).cleaned_counted(false).1, chars);
        assert_eq!(schema(text).cleaned_counted(true).1, chars);
    }

    /// A repaired history is read again from its parsed form (`repair::parse_and_repair`).
    #[test]
    fn a_schema_reads_from_a_parsed_value_too() {
        let from_value: ToolSchema =
            serde_json::from_value(json!({"$schema": "x", "type": "object"})).unwrap();
        assert_eq!(from_value.cleaned(false).get(), r#"{"type":"object"}"#);
        assert!(from_value.is_object());
    }

    /// Written into a body as it is, by this crate's writer and by serde_json's (text and
    /// `Value`), as a `RawValue` would be.
    #[test]
    fn a_cleaned_schema_is_written_as_its_text() {
        let cleaned = schema(r#"{"$schema":"x","type":"object","n":[1.5,2]}"#).cleaned(false);
        let body = json!({"type": "object", "n": [1.5, 2]});
        let wrapped = |text: String| format!(r#"{{"parameters":{text}}}"#);
        #[derive(Serialize)]
        struct Function<'a> {
            parameters: &'a CleanedSchema,
        }
        let function = Function {
            parameters: &cleaned,
        };
        assert_eq!(
            crate::compact_json::to_string(&function).unwrap(),
            wrapped(body.to_string())
        );
        assert_eq!(
            serde_json::to_string(&function).unwrap(),
            wrapped(body.to_string())
        );
        assert_eq!(
            serde_json::to_value(&function).unwrap(),
            json!({"parameters": body})
        );
    }

    #[test]
    fn only_an_object_is_an_object() {
        assert!(schema(" {}").is_object());
        assert!(!schema("[]").is_object());
        assert!(!schema("\"{\"").is_object());
        assert_eq!(schema("[1, 2]").cleaned(false).get(), "[1,2]");
        assert_eq!(
            ToolSchema::from_value(&json!({"a": 1})),
            schema(r#"{ "a" : 1 }"#)
        );
    }

    /// Any JSON value, with schema keywords among its keys.
    fn json_value() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            Just(String::from("$schema")),
            Just(String::from("properties")),
            Just(String::from("items")),
            Just(String::from("anyOf")),
            Just(String::from("type")),
            "[a-z\u{e9}\"\\\\\n]{0,3}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z\u{e9}\u{1f600}\"\\\\\n\u{1}/]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..5)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The pass gives what the parsed form gives, for compact and spaced-out text.
        #[test]
        fn the_pass_writes_what_the_parsed_form_writes(value in json_value()) {
            same_as_parsed(&value.to_string());
            same_as_parsed(&serde_json::to_string_pretty(&value).unwrap());
        }
    }
}
