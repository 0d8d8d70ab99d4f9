//! Deterministic ids from a seed: the core never asks the OS for randomness.
//!
//! ```
//! use bridge_core::ids::IdSource;
//! let mut a = IdSource::new(1);
//! let mut b = IdSource::new(1);
//! assert_eq!(a.next_id("msg_"), b.next_id("msg_"));
//! assert!(a.next_id("toolu_").starts_with("toolu_"));
//! let uuid = a.next_uuid();
//! assert_eq!((uuid.len(), &uuid[14..15]), (36, "4"));
//! ```

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A splitmix64 stream of ids; the host seeds it from real randomness, tests from a constant.
#[derive(Debug, Clone)]
pub struct IdSource {
    state: u64,
}

impl IdSource {
    /// A source that yields the same ids for the same seed.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `prefix` followed by 24 base62 characters (like `msg_01…` / `toolu_01…`).
    pub fn next_id(&mut self, prefix: &str) -> String {
        let mut out = String::with_capacity(prefix.len() + 24);
        out.push_str(prefix);
        // Eight base62 digits use 48 of the 64 random bits of each draw.
        for _ in 0..3 {
            let mut bits = self.next_u64();
            for _ in 0..8 {
                let digit = usize::try_from(bits % 62).unwrap_or(0);
                out.push(char::from(ALPHABET[digit]));
                bits /= 62;
            }
        }
        out
    }

    /// A random (version 4) UUID in its usual text form, `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`.
    pub fn next_uuid(&mut self) -> String {
        let high = (self.next_u64() & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000;
        let low = (self.next_u64() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            high >> 32,
            (high >> 16) & 0xFFFF,
            high & 0xFFFF,
            low >> 48,
            low & 0xFFFF_FFFF_FFFF
        )
    }
}
