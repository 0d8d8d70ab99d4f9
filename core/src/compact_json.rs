//! Compact JSON text, byte for byte what `serde_json::to_string` writes, with a faster string
//! escape.
//!
//! serde_json escapes a string one byte at a time. The body the bridge sends upstream is a few
//! hundred kilobytes of such strings (a Claude Code conversation, sent again every turn), and
//! writing it was the largest single cost of converting a request. Here a string is scanned
//! eight bytes at a time for the three things JSON must escape (control characters, `"` and
//! `\`), and only the word that holds one is looked at byte by byte; the escapes written are
//! serde_json's (`\n`, `\"`, `\u001f`, …). Numbers, `true`, `false` and `null` are written by
//! serde_json itself, so they cannot differ; the punctuation is the compact form (no spaces).
//!
//! ```
//! use serde_json::json;
//! let value = json!({"role": "user", "content": "line one\nline \"two\"\u{1}", "n": [1, 2.5, -3]});
//! assert_eq!(
//!     bridge_core::compact_json::to_string(&value).unwrap(),
//!     serde_json::to_string(&value).unwrap()
//! );
//! ```

use serde::Serialize;
use serde::ser::{self, Impossible};
use serde_json::Error;

/// `value` as compact JSON text, exactly as `serde_json::to_string` writes it.
///
/// # Errors
/// As `serde_json::to_string`: a `Serialize` impl that fails, or a map key that is not a string,
/// number, boolean or character.
pub fn to_string<T: ?Sized + Serialize>(value: &T) -> Result<String, Error> {
    let mut out = String::with_capacity(128);
    write_into(&mut out, value)?;
    Ok(out)
}

/// Appends `value` to `out` as [`to_string`] writes it. On an error, `out` may hold part of it.
///
/// # Errors
/// As [`to_string`].
pub fn write_into<T: ?Sized + Serialize>(out: &mut String, value: &T) -> Result<(), Error> {
    value.serialize(Writer { out, raw: false })
}

/// What a byte becomes inside a JSON string: 0 = itself, `u` = `\u00XX`, else `\` + that byte.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        table[i] = b'u';
        i += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` that is below 0x20, `"` or `\\`, and possibly of bytes
/// after the first such byte (a borrow carries into the next byte up), never of one before it:
/// so the lowest set bit is exactly the first byte to escape (little-endian order).
fn escape_mask(word: u64) -> u64 {
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    control
        | zero_byte(word ^ (ONES * u64::from(b'"')))
        | zero_byte(word ^ (ONES * u64::from(b'\\')))
}

/// The index of the first byte at or after `from` that JSON must escape.
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let mut words = rest.chunks_exact(8);
    let mut at = from;
    for word in words.by_ref() {
        let mask = escape_mask(u64::from_le_bytes(
            <[u8; 8]>::try_from(word).unwrap_or([0; 8]),
        ));
        if mask != 0 {
            return Some(at + (mask.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let mut tail = words.remainder().iter();
    tail.position(|&byte| ESCAPE[usize::from(byte)] != 0)
        .map(|i| at + i)
}

/// Strings at least this long are measured before they are written ([`escaped_len`]), so the
/// output grows once, to its size, rather than by doubling (a heap that never shrinks — a wasm
/// guest's — would keep every smaller buffer it doubled from).
const MEASURED_STRING: usize = 64 << 10;

/// Room left after a long string for what follows it (the rest of its event or object: closing
/// braces, a response's usage and options, the frame's blank line), so a long event or a folded
/// answer is written in one allocation.
const ROOM_AFTER_STRING: usize = 4096;

/// The room to reserve beyond `size`, the bytes a value is about to take when written: what
/// [`write_str`] will want after a long string in it, none for a short value (a small event is
/// not given 4 KiB).
pub(crate) fn room_after(size: usize) -> usize {
    if size >= MEASURED_STRING {
        ROOM_AFTER_STRING
    } else {
        0
    }
}

/// The bytes `text` takes as a JSON string literal, quotes included.
fn escaped_len(bytes: &[u8]) -> usize {
    let mut len = bytes.len() + 2;
    let mut from = 0;
    while let Some(at) = next_escape(bytes, from) {
        let byte = bytes.get(at).copied().unwrap_or_default();
        len += if ESCAPE[usize::from(byte)] == b'u' {
            5
        } else {
            1
        };
        from = at + 1;
    }
    len
}

/// The bytes `text` takes as a JSON string literal: exact for a long string (what
/// [`write_str`] reserves), its length and quotes for a short one.
pub(crate) fn str_size_hint(text: &str) -> usize {
    if text.len() >= MEASURED_STRING {
        escaped_len(text.as_bytes())
    } else {
        text.len() + 2
    }
}

/// `text` as a JSON string literal, quotes included.
pub(crate) fn write_str(out: &mut String, text: &str) {
    let bytes = text.as_bytes();
    if bytes.len() < MEASURED_STRING {
        out.reserve(bytes.len() + 2);
    } else if out.capacity() - out.len() < bytes.len() + 2 + ROOM_AFTER_STRING {
        // Measured unless the caller reserved for the whole value already (a size hint that
        // counts escapes): a long string is not scanned twice.
        out.reserve(escaped_len(bytes) + ROOM_AFTER_STRING);
    }
    out.push('"');
    let mut from = 0;
    while let Some(at) = next_escape(bytes, from) {
        // `at` is an ASCII byte, so a character boundary.
        out.push_str(text.get(from..at).unwrap_or_default());
        push_char(out, char::from(bytes.get(at).copied().unwrap_or_default()));
        from = at + 1;
    }
    out.push_str(text.get(from..).unwrap_or_default());
    out.push('"');
}

/// `ch` as it is written inside a JSON string: escaped if JSON must escape it, else itself.
pub(crate) fn push_char(out: &mut String, ch: char) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let Ok(byte) = u8::try_from(ch) else {
        out.push(ch);
        return;
    };
    match ESCAPE[usize::from(byte)] {
        0 => out.push(ch),
        b'u' => {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
        escape => {
            out.push('\\');
            out.push(char::from(escape));
        }
    }
}

/// The struct name a `serde_json::value::RawValue` serializes under: its one field is its text,
/// which serde_json writes as it is, and so does this writer (compact only if the text is).
const RAW_VALUE: &str = "$serde_json::private::RawValue";

/// `text`, JSON this crate wrote itself, serialized as a `RawValue` is: written as it is by
/// this writer and by serde_json's (read back by `serde_json::to_value`), without the parse a
/// `RawValue` makes to check its text when it is made.
pub(crate) fn serialize_raw<S: ser::Serializer>(
    text: &str,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct as _;
    let mut raw = serializer.serialize_struct(RAW_VALUE, 1)?;
    raw.serialize_field(RAW_VALUE, text)?;
    raw.end()
}

/// A serializer writing compact JSON into `out`.
struct Writer<'a> {
    out: &'a mut String,
    /// Inside a `RawValue`: its text is written as it is, not as a JSON string.
    raw: bool,
}

/// Room for the longest scalar serde_json writes (an `i128` takes 40 bytes, an `f64` 24).
const SCALAR_ROOM: usize = 48;

/// Appends serde_json's own text for a scalar (a number, boolean or `null`), which `write`
/// produces with serde_json's serializer.
fn scalar(
    out: &mut String,
    write: impl FnOnce(&mut serde_json::Serializer<&mut &mut [u8]>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut room = [0u8; SCALAR_ROOM];
    let mut free: &mut [u8] = &mut room;
    write(&mut serde_json::Serializer::new(&mut free))?;
    let used = SCALAR_ROOM - free.len();
    let text = room.get(..used).unwrap_or_default();
    out.push_str(std::str::from_utf8(text).map_err(ser::Error::custom)?);
    Ok(())
}

/// Scalars, written by serde_json.
macro_rules! scalars {
    ($($method:ident : $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result<(), Error> {
            scalar(self.out, |json| ser::Serializer::$method(json, v))
        }
    )*};
}

/// Writes `"name":` — the opening of an externally tagged variant's object or of a field.
fn write_key(out: &mut String, name: &str) {
    write_str(out, name);
    out.push(':');
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    scalars!(
        serialize_bool: bool,
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_i128: i128,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_u128: u128,
        serialize_f32: f32,
        serialize_f64: f64
    );
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        if self.raw {
            self.out.push_str(v);
        } else {
            write_str(self.out, v);
        }
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        // An array of numbers, as long as the bytes: written by serde_json, then appended.
        let mut text = Vec::with_capacity(v.len() * 4 + 2);
        ser::Serializer::serialize_bytes(&mut serde_json::Serializer::new(&mut text), v)?;
        self.out
            .push_str(std::str::from_utf8(&text).map_err(ser::Error::custom)?);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.push_str("null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.out.push('{');
        write_key(self.out, variant);
        value.serialize(Writer {
            out: &mut *self.out,
            raw: false,
        })?;
        self.out.push('}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>, Error> {
        Ok(Compound::open(self.out, '[', "]"))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Error> {
        self.out.push('{');
        write_key(self.out, variant);
        Ok(Compound::open(self.out, '[', "]}"))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>, Error> {
        Ok(Compound::open(self.out, '{', "}"))
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Compound<'a>, Error> {
        if name == RAW_VALUE {
            return Ok(Compound {
                out: self.out,
                first: true,
                close: "",
                raw: true,
            });
        }
        Ok(Compound::open(self.out, '{', "}"))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Error> {
        self.out.push('{');
        write_key(self.out, variant);
        Ok(Compound::open(self.out, '{', "}}"))
    }
}

/// An array or object being written: a comma before every element but the first, and `close`
/// at the end.
struct Compound<'a> {
    out: &'a mut String,
    first: bool,
    close: &'static str,
    /// A `RawValue`: its one field is its text, written as it is (no key, no braces).
    raw: bool,
}

impl<'a> Compound<'a> {
    fn open(out: &'a mut String, open: char, close: &'static str) -> Self {
        out.push(open);
        Self {
            out,
            first: true,
            close,
            raw: false,
        }
    }

    fn comma(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.out.push(',');
        }
    }

    fn element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.comma();
        value.serialize(Writer {
            out: &mut *self.out,
            raw: false,
        })
    }

    fn field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        if self.raw {
            return value.serialize(Writer {
                out: &mut *self.out,
                raw: true,
            });
        }
        self.comma();
        write_key(self.out, key);
        value.serialize(Writer {
            out: &mut *self.out,
            raw: false,
        })
    }

    fn close(self) -> Result<(), Error> {
        self.out.push_str(self.close);
        Ok(())
    }
}

/// The four element-list traits: each element after a comma, then the closing bracket.
macro_rules! elements {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), Error> {
        self.comma();
        key.serialize(KeyWriter {
            out: &mut *self.out,
        })?;
        self.out.push(':');
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(Writer {
            out: &mut *self.out,
            raw: false,
        })
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

/// The two field-list traits: `"key":value` after a comma, then the closing brace(s).
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: ?Sized + Serialize>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                self.field(key, value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

/// A map key: a string as it is; an integer, boolean or character quoted, as serde_json
/// writes them; anything else refused with serde_json's message.
struct KeyWriter<'a> {
    out: &'a mut String,
}

impl KeyWriter<'_> {
    fn quoted(self, text: &str) -> Result<(), Error> {
        write_str(self.out, text);
        Ok(())
    }
}

/// Integer keys, quoted.
macro_rules! integer_keys {
    ($($method:ident : $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result<(), Error> {
            self.quoted(&v.to_string())
        }
    )*};
}

fn key_must_be_a_string() -> Error {
    ser::Error::custom("key must be a string")
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.quoted(if v { "true" } else { "false" })
    }
    integer_keys!(
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_i128: i128,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_u128: u128
    );
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(ser::Error::custom(
                "float key must be finite (got NaN or +/-inf)",
            ));
        }
        self.out.push('"');
        scalar(self.out, |json| ser::Serializer::serialize_f32(json, v))?;
        self.out.push('"');
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(ser::Error::custom(
                "float key must be finite (got NaN or +/-inf)",
            ));
        }
        self.out.push('"');
        scalar(self.out, |json| ser::Serializer::serialize_f64(json, v))?;
        self.out.push('"');
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.quoted(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.quoted(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn same<T: Serialize>(value: &T) {
        assert_eq!(
            to_string(value).unwrap(),
            serde_json::to_string(value).unwrap()
        );
    }

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Unit,
        Newtype(String),
        Tuple(u8, f64),
        Struct {
            a: Option<u32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            b: Option<u32>,
        },
    }

    #[derive(Serialize)]
    #[serde(tag = "type")]
    enum Tagged {
        Text { text: String },
        Empty,
    }

    #[derive(Serialize)]
    struct Newtype(Vec<char>);

    #[derive(Serialize)]
    struct Unit;

    #[test]
    fn every_shape_serde_writes() {
        same(&json!(null));
        same(&json!({"a": [1, -2, 3.5, 1e300, 0.1, true, false, null, {}, []], "": ""}));
        same(&vec![
            Shape::Unit,
            Shape::Newtype("x".into()),
            Shape::Tuple(1, 2.0),
        ]);
        same(&Shape::Struct { a: None, b: None });
        same(&Shape::Struct {
            a: Some(1),
            b: Some(2),
        });
        same(&vec![Tagged::Text { text: "t\"".into() }, Tagged::Empty]);
        same(&Newtype(vec!['a', '"', '\n', '\u{7f}', 'é']));
        same(&Unit);
        same(&(
            1u8,
            -1i64,
            u64::MAX,
            i128::MIN,
            u128::MAX,
            f32::NAN,
            f64::INFINITY,
            1.5f32,
        ));
        same(&BTreeMap::from([(1u32, "one"), (2, "two")]));
        same(&BTreeMap::from([(true, 1)]));
        same(&BTreeMap::from([('k', 1)]));
        same(&[(Some(2u8), 1)].into_iter().collect::<BTreeMap<_, _>>());
        same(&FloatMap(vec![
            (FloatKey(1.5), 1),
            (FloatKey(-0.25), 2),
            (FloatKey(1e21), 3),
        ]));
        assert!(to_string(&FloatMap(vec![(FloatKey(f64::NAN), 1)])).is_err());
        // A RawValue's text as it is (serde_json does not compact it either).
        let raw = serde_json::value::RawValue::from_string(String::from("[1, 2]")).unwrap();
        same(&raw);
        same(&BTreeMap::from([("schema", raw)]));
        same(&serde_bytes_like());
        assert!(to_string(&BTreeMap::from([(vec![1], 1)])).is_err());
    }

    /// A float map key (serde_json writes it quoted).
    struct FloatKey(f64);

    impl Serialize for FloatKey {
        fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_f64(self.0)
        }
    }

    struct FloatMap(Vec<(FloatKey, i32)>);

    /// A map with float keys, in the order given.
    impl Serialize for FloatMap {
        fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use ser::SerializeMap as _;
            let mut map = serializer.serialize_map(Some(self.0.len()))?;
            for (key, value) in &self.0 {
                map.serialize_entry(key, value)?;
            }
            map.end()
        }
    }

    fn serde_bytes_like() -> Value {
        json!([0, 255])
    }

    #[test]
    fn a_long_string_is_written_in_one_allocation_of_its_size() {
        let text = "a\"b\n\u{1}\u{e9}\\z".repeat(MEASURED_STRING / 4);
        let mut out = String::new();
        write_str(&mut out, &text);
        assert_eq!(out, serde_json::to_string(&text).unwrap());
        assert_eq!(escaped_len(text.as_bytes()), out.len());
        assert_eq!(out.capacity(), out.len() + ROOM_AFTER_STRING);
        let room = out.capacity();
        out.push_str("}}\n\n");
        assert_eq!(out.capacity(), room, "what follows fits");
    }

    #[test]
    fn every_byte_is_escaped_as_serde_escapes_it() {
        let all: String = (0u32..0x800).filter_map(char::from_u32).collect();
        same(&all);
        for c in (0u8..0x80).map(char::from) {
            // Alone, at each offset of a word, and between long clean runs.
            for pad in 0..10 {
                let text = format!("{}{c}{}", "a".repeat(pad), "é".repeat(9 - pad));
                same(&text);
            }
        }
    }

    proptest! {
        #[test]
        fn any_text_is_written_as_serde_writes_it(text in any::<String>(), ascii in "[ -~\\t\\n\\r\"\\\\]{0,64}") {
            same(&text);
            same(&ascii);
            same(&json!({ text.clone(): [ascii, text] }));
        }
    }
}
