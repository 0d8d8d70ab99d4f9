//! Request ids and translator seeds from the OS's randomness, and the wall clock in Unix
//! seconds: the core takes both as input.

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// 64 random bits (falls back to the clock if the OS has no randomness to give).
#[must_use]
pub fn seed() -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    })
}

/// `req_` followed by 24 base62 characters.
#[must_use]
pub fn request_id() -> String {
    let mut out = String::with_capacity(28);
    out.push_str("req_");
    // Eight base62 digits use 48 of the 64 random bits of each draw.
    for _ in 0..3 {
        let mut bits = seed();
        for _ in 0..8 {
            out.push(char::from(ALPHABET[(bits % 62) as usize]));
            bits /= 62;
        }
    }
    out
}

/// Now, in Unix seconds (0 for a clock before 1970).
#[must_use]
pub fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
