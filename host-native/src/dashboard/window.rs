//! The last hour of requests in one-minute slots: how many, how many failed, and their times to
//! first token as a histogram, so the dashboard's *Now* view can say requests per second and
//! TTFT p50/p99 without keeping every request.
//!
//! A slot is stamped with its minute; a slot older than an hour is cleared when its place comes
//! round again, so nothing needs a timer. Times come in as arguments (milliseconds since the
//! epoch).
//!
//! ```
//! use claude_bridge::dashboard::window::HourWindow;
//! let mut hour = HourWindow::default();
//! let t = 1_795_000_000_000;
//! hour.add(t, false, Some(40));
//! hour.add(t + 1_000, true, None);
//! let now = hour.summary(t + 2_000);
//! assert_eq!((now.requests, now.errors), (2, 1));
//! assert!(now.ttft_p50_ms.unwrap() >= 40.0);
//! ```

use serde::Serialize;

/// Minutes kept.
pub const MINUTES: usize = 60;
/// Histogram buckets: a quarter octave each, from 1 ms (bucket 0: under 1 ms) to about 18 hours.
const BUCKETS: usize = 96;

/// One minute's requests.
#[derive(Debug, Clone)]
struct Slot {
    /// The minute (`ms / 60_000`) this slot holds; `-1`: never used.
    minute: i64,
    requests: u32,
    errors: u32,
    ttft: [u32; BUCKETS],
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            minute: -1,
            requests: 0,
            errors: 0,
            ttft: [0; BUCKETS],
        }
    }
}

/// The last hour, a slot a minute.
#[derive(Debug, Clone)]
pub struct HourWindow {
    slots: Box<[Slot; MINUTES]>,
}

impl Default for HourWindow {
    fn default() -> Self {
        Self {
            slots: Box::new(std::array::from_fn(|_| Slot::default())),
        }
    }
}

/// One minute of the series the *Now* view charts.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Minute {
    /// The minute's start (ms since the epoch).
    pub at_ms: i64,
    /// Requests that ended in it.
    pub requests: u32,
    /// Of those, failed ones (an error status or an error event).
    pub errors: u32,
    /// Time to first token, median (ms; `None`: no request had a first token).
    pub ttft_p50_ms: Option<f64>,
}

/// The hour in numbers.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HourSummary {
    /// Requests that ended in the last hour.
    pub requests: u64,
    /// Of those, failed ones.
    pub errors: u64,
    /// Requests per second over the last minute.
    pub per_second: f64,
    /// Time to first token over the hour, median and 99th percentile (ms, a bucket's upper
    /// edge: at most 19 % above the true value).
    pub ttft_p50_ms: Option<f64>,
    /// See `ttft_p50_ms`.
    pub ttft_p99_ms: Option<f64>,
    /// Minute by minute, oldest first (sixty of them, empty minutes included).
    pub minutes: Vec<Minute>,
}

fn bucket_of(ms: u64) -> usize {
    if ms < 1 {
        return 0;
    }
    // Quarter octaves: 4 × log2(ms), rounded up, plus one.
    let quarter_octaves = (4.0 * (ms as f64).log2()).ceil() as usize;
    (quarter_octaves + 1).min(BUCKETS - 1)
}

/// The upper edge of a bucket (ms).
fn bucket_edge(bucket: usize) -> f64 {
    if bucket == 0 {
        return 1.0;
    }
    2f64.powf((bucket - 1) as f64 / 4.0)
}

fn quantile(histogram: &[u32; BUCKETS], q: f64) -> Option<f64> {
    let total: u64 = histogram.iter().map(|&n| u64::from(n)).sum();
    if total == 0 {
        return None;
    }
    // The smallest bucket holding at least q of the requests.
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0u64;
    for (bucket, &n) in histogram.iter().enumerate() {
        seen += u64::from(n);
        if seen >= rank {
            return Some(bucket_edge(bucket));
        }
    }
    Some(bucket_edge(BUCKETS - 1))
}

impl HourWindow {
    /// A request ended at `at_ms`.
    pub fn add(&mut self, at_ms: i64, failed: bool, ttft_ms: Option<u64>) {
        let minute = at_ms.div_euclid(60_000);
        let slot = &mut self.slots[minute.rem_euclid(MINUTES as i64) as usize];
        if slot.minute != minute {
            *slot = Slot {
                minute,
                ..Slot::default()
            };
        }
        slot.requests = slot.requests.saturating_add(1);
        if failed {
            slot.errors = slot.errors.saturating_add(1);
        }
        if let Some(ms) = ttft_ms {
            let b = bucket_of(ms);
            slot.ttft[b] = slot.ttft[b].saturating_add(1);
        }
    }

    /// The hour up to `now_ms`.
    #[must_use]
    pub fn summary(&self, now_ms: i64) -> HourSummary {
        let now_minute = now_ms.div_euclid(60_000);
        let mut all = [0u32; BUCKETS];
        let mut minutes = Vec::with_capacity(MINUTES);
        let (mut requests, mut errors) = (0u64, 0u64);
        for back in (0..MINUTES as i64).rev() {
            let minute = now_minute - back;
            let slot = &self.slots[minute.rem_euclid(MINUTES as i64) as usize];
            let (r, e, p50) = if slot.minute == minute {
                for (sum, &n) in all.iter_mut().zip(slot.ttft.iter()) {
                    *sum = sum.saturating_add(n);
                }
                (slot.requests, slot.errors, quantile(&slot.ttft, 0.5))
            } else {
                (0, 0, None)
            };
            requests += u64::from(r);
            errors += u64::from(e);
            minutes.push(Minute {
                at_ms: minute * 60_000,
                requests: r,
                errors: e,
                ttft_p50_ms: p50,
            });
        }
        // The last sixty seconds: this minute so far and the part of the one before.
        let into = (now_ms.rem_euclid(60_000)) as f64 / 60_000.0;
        let last = minutes.last().map_or(0.0, |m| f64::from(m.requests));
        let before = minutes
            .iter()
            .rev()
            .nth(1)
            .map_or(0.0, |m| f64::from(m.requests));
        HourSummary {
            requests,
            errors,
            per_second: (last + before * (1.0 - into)) / 60.0,
            ttft_p50_ms: quantile(&all, 0.5),
            ttft_p99_ms: quantile(&all, 0.99),
            minutes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_795_000_020_000;

    #[test]
    fn buckets_grow_by_quarter_octaves_and_hold_their_values() {
        for ms in [1u64, 2, 3, 40, 41, 999, 1000, 65_000] {
            let b = bucket_of(ms);
            assert!(bucket_edge(b) >= ms as f64, "{ms} in {b}");
            assert!(bucket_edge(b) <= ms as f64 * 1.19, "{ms} in {b}");
        }
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_come_from_the_whole_hour() {
        let mut hour = HourWindow::default();
        for i in 0..99 {
            hour.add(T0 + i * 30_000, false, Some(100));
        }
        hour.add(T0 + 100 * 30_000, false, Some(5_000));
        let now = hour.summary(T0 + 100 * 30_000);
        // 100 requests over 50 minutes: all in the hour.
        assert_eq!(now.requests, 100);
        let p50 = now.ttft_p50_ms.unwrap();
        let p99 = now.ttft_p99_ms.unwrap();
        assert!((100.0..=119.0).contains(&p50), "{p50}");
        assert!((100.0..=119.0).contains(&p99), "{p99}");
        hour.add(T0 + 100 * 30_000, false, Some(5_000));
        let p99 = hour.summary(T0 + 100 * 30_000).ttft_p99_ms.unwrap();
        assert!((5_000.0..=5_950.0).contains(&p99), "{p99}");
    }

    #[test]
    fn minutes_older_than_an_hour_are_forgotten() {
        let mut hour = HourWindow::default();
        hour.add(T0, true, Some(10));
        assert_eq!(hour.summary(T0 + 59 * 60_000).errors, 1);
        let later = hour.summary(T0 + 61 * 60_000);
        assert_eq!((later.requests, later.errors), (0, 0));
        assert_eq!(later.ttft_p50_ms, None);
        assert_eq!(later.minutes.len(), MINUTES);
        // The slot is reused for a new minute: the old counts go.
        hour.add(T0 + 60 * 60_000, false, None);
        let s = hour.summary(T0 + 60 * 60_000);
        assert_eq!((s.requests, s.errors), (1, 0));
    }

    #[test]
    fn the_rate_is_over_the_last_sixty_seconds() {
        let mut hour = HourWindow::default();
        let minute_start = T0 - T0.rem_euclid(60_000);
        for _ in 0..60 {
            hour.add(minute_start + 1_000, false, None);
        }
        // At the start of the next minute all sixty count; half way through, half of them.
        let s = hour.summary(minute_start + 60_000);
        assert!((s.per_second - 1.0).abs() < 1e-9, "{}", s.per_second);
        let s = hour.summary(minute_start + 90_000);
        assert!((s.per_second - 0.5).abs() < 1e-9, "{}", s.per_second);
        assert_eq!(s.minutes.last().unwrap().at_ms, minute_start + 60_000);
    }
}
