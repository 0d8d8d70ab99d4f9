//! When an upstream that answered 429 without `retry-after` will take requests again, from its
//! rate-limit headers: OpenAI's `x-ratelimit-reset-requests` / `x-ratelimit-reset-tokens`
//! (durations: `1s`, `6m0s`, `20ms`, `1h2m3.5s`) and Anthropic's
//! `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset` (RFC 3339 times).
//! The longest of those given is the wait: the pool keeps the member out that long, and the
//! client's `retry-after` says it.
//!
//! ```
//! use claude_bridge::provider::rate_limit::reset_wait;
//! let mut headers = http::HeaderMap::new();
//! headers.insert("x-ratelimit-reset-requests", "1m30s".parse().unwrap());
//! headers.insert("x-ratelimit-reset-tokens", "250ms".parse().unwrap());
//! assert_eq!(reset_wait(&headers, 0), Some(std::time::Duration::from_secs(90)));
//! ```

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// When an upstream said (in a successful answer's headers) that its requests or tokens are
/// spent until a reset: written by the provider that reads its answers, read by the router that
/// chooses among pool members, so no request is sent into the 429 that would follow.
#[derive(Debug, Default)]
pub struct FreeAt(Mutex<Option<Instant>>);

impl FreeAt {
    /// Not before `at` (a later time already known stays).
    pub fn set(&self, at: Instant) {
        let mut free = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if free.is_none_or(|known| known < at) {
            *free = Some(at);
        }
    }

    /// The time it is free again, if one is known and still ahead of `now`.
    #[must_use]
    pub fn after(&self, now: Instant) -> Option<Instant> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .filter(|at| now < *at)
    }
}

/// Headers of a successful answer that say a budget is spent: its remaining count is 0, and
/// its reset says until when (OpenAI `x-ratelimit-remaining-*` / `-reset-*`, Anthropic
/// `anthropic-ratelimit-*-remaining` / `-reset`). The longest such wait, from `now_ms`.
#[must_use]
pub fn spent_wait(headers: &http::HeaderMap, now_ms: i64) -> Option<Duration> {
    let zero = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() == "0")
    };
    let mut spent = http::HeaderMap::new();
    for (remaining, reset) in [
        (
            "x-ratelimit-remaining-requests",
            "x-ratelimit-reset-requests",
        ),
        ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
        (
            "anthropic-ratelimit-requests-remaining",
            "anthropic-ratelimit-requests-reset",
        ),
        (
            "anthropic-ratelimit-tokens-remaining",
            "anthropic-ratelimit-tokens-reset",
        ),
        (
            "anthropic-ratelimit-input-tokens-remaining",
            "anthropic-ratelimit-input-tokens-reset",
        ),
        (
            "anthropic-ratelimit-output-tokens-remaining",
            "anthropic-ratelimit-output-tokens-reset",
        ),
    ] {
        if zero(remaining)
            && let Some(value) = headers.get(reset)
        {
            spent.insert(reset, value.clone());
        }
    }
    reset_wait(&spent, now_ms)
}

const OPENAI: &[&str] = &["x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"];
const ANTHROPIC: &[&str] = &[
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-reset",
];

/// The longest reset the headers name, from `now_ms` (Unix ms); `None` when they name none.
#[must_use]
pub fn reset_wait(headers: &http::HeaderMap, now_ms: i64) -> Option<Duration> {
    let text = |name: &&str| headers.get(*name).and_then(|v| v.to_str().ok());
    let openai = OPENAI.iter().filter_map(text).filter_map(parse_duration);
    let anthropic = ANTHROPIC.iter().filter_map(text).filter_map(|at| {
        let at = crate::gateway::period::parse_time(at.trim()).ok()?;
        Some(Duration::from_millis(
            u64::try_from(at - now_ms).unwrap_or(0),
        ))
    });
    openai.chain(anthropic).max()
}

/// `1h2m3.5s`, `6m0s`, `20ms`, `0.5s`: a sum of numbers with `h`, `m`, `s` or `ms` after each.
fn parse_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0_f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest.get(..digits)?.parse().ok()?;
        rest = rest.get(digits..)?;
        let (unit, len) = if rest.starts_with("ms") {
            (0.001, 2)
        } else if rest.starts_with('h') {
            (3600.0, 1)
        } else if rest.starts_with('m') {
            (60.0, 1)
        } else if rest.starts_with('s') {
            (1.0, 1)
        } else {
            return None;
        };
        total += number * unit;
        rest = rest.get(len..)?;
    }
    (total.is_finite() && total >= 0.0).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_durations_parse_and_nonsense_does_not() {
        for (text, ms) in [
            ("1s", 1000),
            ("6m0s", 360_000),
            ("20ms", 20),
            ("1h2m3.5s", 3_723_500),
            ("0.5s", 500),
        ] {
            assert_eq!(
                parse_duration(text),
                Some(Duration::from_millis(ms)),
                "{text}"
            );
        }
        for text in ["", "5", "1x", "s", "1s2"] {
            assert_eq!(parse_duration(text), None, "{text}");
        }
    }

    #[test]
    fn a_successful_answer_names_a_wait_only_for_a_spent_budget() {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-ratelimit-remaining-requests", "3".parse().unwrap());
        headers.insert("x-ratelimit-reset-requests", "10s".parse().unwrap());
        assert_eq!(spent_wait(&headers, 0), None, "requests left: no wait");
        headers.insert("x-ratelimit-remaining-tokens", "0".parse().unwrap());
        headers.insert("x-ratelimit-reset-tokens", "1.5s".parse().unwrap());
        assert_eq!(spent_wait(&headers, 0), Some(Duration::from_millis(1500)));
        let free = FreeAt::default();
        let now = Instant::now();
        free.set(now + Duration::from_secs(2));
        free.set(now + Duration::from_secs(1));
        assert_eq!(
            free.after(now),
            Some(now + Duration::from_secs(2)),
            "the later stays"
        );
        assert_eq!(free.after(now + Duration::from_secs(2)), None);
    }

    #[test]
    fn the_longest_reset_of_either_vendor_is_the_wait() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(reset_wait(&headers, 0), None);
        headers.insert("x-ratelimit-reset-tokens", "2s".parse().unwrap());
        assert_eq!(reset_wait(&headers, 0), Some(Duration::from_secs(2)));
        let now = crate::gateway::period::parse_time("2026-11-28T12:00:00Z").unwrap();
        headers.insert(
            "anthropic-ratelimit-tokens-reset",
            "2026-11-28T12:00:30Z".parse().unwrap(),
        );
        assert_eq!(reset_wait(&headers, now), Some(Duration::from_secs(30)));
        // A reset already past is no wait.
        let mut past = http::HeaderMap::new();
        past.insert(
            "anthropic-ratelimit-requests-reset",
            "2026-11-28T11:59:00Z".parse().unwrap(),
        );
        assert_eq!(reset_wait(&past, now), Some(Duration::ZERO));
    }
}
