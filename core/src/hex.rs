//! Lowercase hex, as the Fabstir protocol and Ethereum write bytes (`0x` prefix optional on
//! input). One codec for the core and the host.
//!
//! ```
//! use bridge_core::hex;
//! assert_eq!(hex::encode(&[0xab, 0x01]), "ab01");
//! assert_eq!(hex::decode("0xAB01"), Some(vec![0xab, 0x01]));
//! assert_eq!(hex::decode("abc"), None);
//! ```

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Bytes → lowercase hex without `0x`.
#[must_use]
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Hex (with or without `0x`, any case) → bytes; `None` when it is not whole bytes of hex.
#[must_use]
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.strip_prefix("0x").unwrap_or(text).as_bytes();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2)
        .map(|pair| Some((nibble(pair[0])? << 4) | nibble(pair[1])?))
        .collect()
}

fn nibble(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_is_not_hex() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&bytes)), Some(bytes));
        assert_eq!(decode(""), Some(Vec::new()));
        for bad in ["0", "zz", "+1", "0x-1", "é1"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
