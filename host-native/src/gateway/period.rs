//! Time windows, as pure functions of a Unix time in milliseconds: the minute a rate limit
//! counts in, the budget period a spend counts in (and when it resets), the UTC day a ledger
//! record belongs to.
//!
//! ```
//! use claude_bridge::gateway::period::{BudgetPeriod, day_of, minute_window};
//! // 2026-11-28T10:30:15Z
//! let now = 1_795_861_815_000;
//! assert_eq!(day_of(now), "2026-11-28");
//! assert_eq!(minute_window(now).end_ms - now, 45_000);
//! let month = BudgetPeriod::Month.window(now);
//! assert_eq!(day_of(month.start_ms), "2026-11-01");
//! assert_eq!(day_of(month.end_ms.unwrap()), "2026-12-01");
//! ```

use serde::{Deserialize, Serialize};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// A span of time a count belongs to: `[start_ms, end_ms)`; no end for `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Its first millisecond (the key a store counts under).
    pub start_ms: i64,
    /// The first millisecond after it.
    pub end_ms: Option<i64>,
}

/// The minute `now_ms` falls in (rate limits count per wall-clock minute).
#[must_use]
pub fn minute_window(now_ms: i64) -> FixedWindow {
    let start_ms = now_ms.div_euclid(MINUTE) * MINUTE;
    FixedWindow {
        start_ms,
        end_ms: start_ms + MINUTE,
    }
}

/// A window that ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    /// Its first millisecond.
    pub start_ms: i64,
    /// The first millisecond after it.
    pub end_ms: i64,
}

/// How long a budget lasts before it starts again (`budget_period`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetPeriod {
    /// Five-hour blocks counted from 00:00 UTC of 1970-01-01 (00:00, 05:00, … UTC drifting by
    /// day: the blocks are fixed, not per session).
    #[serde(rename = "5h")]
    FiveHours,
    /// A UTC day.
    #[default]
    Day,
    /// A week from Monday 00:00 UTC.
    Week,
    /// A calendar month (UTC).
    Month,
    /// Never resets.
    Total,
}

impl BudgetPeriod {
    /// As the config spells it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::FiveHours => "5h",
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
            Self::Total => "total",
        }
    }

    /// The period `now_ms` falls in.
    #[must_use]
    pub fn window(self, now_ms: i64) -> Window {
        let block = |len: i64| {
            let start_ms = now_ms.div_euclid(len) * len;
            Window {
                start_ms,
                end_ms: Some(start_ms + len),
            }
        };
        match self {
            Self::FiveHours => block(5 * HOUR),
            Self::Day => block(DAY),
            Self::Week => {
                // 1970-01-01 was a Thursday: Monday is 3 days before.
                let days = now_ms.div_euclid(DAY);
                let monday = days - (days + 3).rem_euclid(7);
                Window {
                    start_ms: monday * DAY,
                    end_ms: Some((monday + 7) * DAY),
                }
            }
            Self::Month => {
                let (y, m, _) = civil_from_days(now_ms.div_euclid(DAY));
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                Window {
                    start_ms: days_from_civil(y, m, 1) * DAY,
                    end_ms: Some(days_from_civil(ny, nm, 1) * DAY),
                }
            }
            Self::Total => Window {
                start_ms: 0,
                end_ms: None,
            },
        }
    }
}

impl std::str::FromStr for BudgetPeriod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "5h" => Self::FiveHours,
            "day" => Self::Day,
            "week" => Self::Week,
            "month" => Self::Month,
            "total" => Self::Total,
            other => {
                return Err(format!(
                    "unknown budget period `{other}`; allowed: 5h, day, week, month, total"
                ));
            }
        })
    }
}

/// `YYYY-MM-DD` (UTC) of a Unix time in milliseconds.
#[must_use]
pub fn day_of(ms: i64) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(DAY));
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DDTHH:MM:SSZ` of a Unix time in milliseconds.
#[must_use]
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let in_day = secs.rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}:{:02}Z",
        day_of(ms),
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}

/// A Unix time in milliseconds from `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`.
///
/// # Errors
/// Neither form.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let bad = || {
        format!(
            "`{text}` is not a time: write 2026-11-28 or 2026-11-28T10:30:00Z (UTC, or with an offset like +02:00)"
        )
    };
    let text = text.trim();
    let (date, time) = match text.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let mut parts = date.splitn(3, '-');
    let mut num = |max: i64| -> Result<i64, String> {
        parts
            .next()
            .and_then(|p| p.parse::<i64>().ok())
            .filter(|n| (0..=max).contains(n))
            .ok_or_else(bad)
    };
    let (y, m, d) = (num(9999)?, num(12)?, num(31)?);
    if m == 0 || d == 0 {
        return Err(bad());
    }
    let mut ms = days_from_civil(y, m, d) * DAY;
    if let Some(time) = time {
        let (clock, offset_min) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
            (clock, 0)
        } else if let Some(at) = time.rfind(['+', '-']) {
            let (clock, offset) = time.split_at(at);
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            let (h, mi) = offset[1..].split_once(':').ok_or_else(bad)?;
            let h: i64 = h.parse().map_err(|_| bad())?;
            let mi: i64 = mi.parse().map_err(|_| bad())?;
            (clock, sign * (h * 60 + mi))
        } else {
            (time, 0)
        };
        let mut hms = clock.splitn(3, ':');
        let h: i64 = hms.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let mi: i64 = hms.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let s: f64 = hms
            .next()
            .map_or(Ok(0.0), |v| v.parse().map_err(|_| bad()))?;
        if h > 23 || mi > 59 || !(0.0..61.0).contains(&s) {
            return Err(bad());
        }
        ms += h * HOUR + mi * MINUTE + (s * 1000.0) as i64 - offset_min * MINUTE;
    }
    Ok(ms)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_across_leap_years_and_centuries() {
        for days in [-1, 0, 59, 60, 11_016, 10_957, 20_000, 47_541] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(day_of(951_782_400_000), "2000-02-29");
        assert_eq!(parse_time("2000-02-29").unwrap(), 951_782_400_000);
    }

    #[test]
    fn periods_start_and_end_where_a_calendar_says() {
        let now = parse_time("2026-11-28T10:30:15Z").unwrap();
        let week = BudgetPeriod::Week.window(now);
        assert_eq!(rfc3339(week.start_ms), "2026-11-23T00:00:00Z"); // a Monday
        assert_eq!(rfc3339(week.end_ms.unwrap()), "2026-11-30T00:00:00Z");
        let day = BudgetPeriod::Day.window(now);
        assert_eq!(rfc3339(day.end_ms.unwrap()), "2026-11-29T00:00:00Z");
        let five = BudgetPeriod::FiveHours.window(now);
        assert!(five.start_ms <= now && now < five.end_ms.unwrap());
        assert_eq!(five.end_ms.unwrap() - five.start_ms, 5 * HOUR);
        let dec = parse_time("2026-12-31T23:59:59Z").unwrap();
        assert_eq!(
            rfc3339(BudgetPeriod::Month.window(dec).end_ms.unwrap()),
            "2027-01-01T00:00:00Z"
        );
        assert_eq!(BudgetPeriod::Total.window(now).end_ms, None);
    }

    #[test]
    fn times_parse_with_offsets_and_refuse_nonsense() {
        assert_eq!(
            parse_time("2026-11-28T12:30:15+02:00").unwrap(),
            parse_time("2026-11-28T10:30:15Z").unwrap()
        );
        assert_eq!(
            rfc3339(parse_time("2026-11-28T10:30:15.5Z").unwrap()),
            "2026-11-28T10:30:15Z"
        );
        for bad in ["yesterday", "2026-13-01", "2026-11-28T25:00:00Z", ""] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }
}
