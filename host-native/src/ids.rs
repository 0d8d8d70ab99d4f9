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

/// `req_` followed by 24 base62 characters: 8 of the time (Unix milliseconds, most significant
/// first, so ids sort by when they were made) and 16 random ones (95 bits).
///
/// Time first because the ledger keys its rows by request id: ids that grow with time append to
/// the end of the store's index, where random ones would touch a page of it anywhere, one page
/// written a record.
#[must_use]
pub fn request_id() -> String {
    request_id_at(unix_millis(), &random_base62(16))
}

/// The id [`request_id`] makes at `millis` with `random` after the time.
fn request_id_at(millis: u64, random: &str) -> String {
    let mut time = [0_u8; 8];
    let mut rest = millis;
    for digit in time.iter_mut().rev() {
        *digit = ALPHABET[(rest % 62) as usize];
        rest /= 62;
    }
    let mut out = String::with_capacity(28);
    out.push_str("req_");
    out.extend(time.iter().map(|&b| char::from(b)));
    out.push_str(random);
    out
}

/// `n` random base62 characters (each draw of 64 bits gives eight, 48 bits' worth).
#[must_use]
pub fn random_base62(n: usize) -> String {
    let mut out = String::with_capacity(n);
    while out.len() < n {
        let mut bits = seed();
        for _ in 0..8.min(n - out.len()) {
            out.push(char::from(ALPHABET[(bits % 62) as usize]));
            bits /= 62;
        }
    }
    out
}

/// Now, in Unix milliseconds (0 for a clock before 1970).
#[must_use]
pub fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Now, in Unix seconds (0 for a clock before 1970).
#[must_use]
pub fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_sort_by_time_and_differ_within_a_millisecond() {
        let earlier = request_id_at(1_795_861_815_000, &random_base62(16));
        let later = request_id_at(1_795_861_815_001, "0000000000000000");
        assert!(earlier < later, "{earlier} then {later}");
        // The time part is fixed width: a much later time still sorts after.
        assert!(later < request_id_at(62_u64.pow(7) * 61, "0000000000000000"));
        let now = request_id();
        assert_eq!(now.len(), 28);
        assert!(now.starts_with("req_"));
        assert!(now[4..].bytes().all(|b| ALPHABET.contains(&b)));
        assert_ne!(request_id()[12..], request_id()[12..]);
        assert_eq!(random_base62(43).len(), 43);
        let ids: Vec<String> = (0..3).map(|_| request_id()).collect();
        assert!(ids.windows(2).all(|w| w[0][..12] <= w[1][..12]));
    }
}
