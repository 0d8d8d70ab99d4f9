//! Choosing a Fabstir host: the weighted score of the TS SDK (`reference/fabstir-protocol.md` §4),
//! plus what a better client knows — measured latency and remembered failures.
//!
//! `score = w_stake·min(stake, 10000 FAB)/10000 FAB + w_price·price_score + w_uptime·uptime +
//! w_latency·latency`, with `price_score` 1 at a price ≤ 100, 0 at ≥ 100000, linear between
//! (0 when unknown), then halved for every recent failure. The best ten are kept and one is
//! drawn in proportion to its score; the draw's randomness comes in as an argument.
//!
//! ```
//! use bridge_core::fabstir::scoring::{Candidate, Selection, choose};
//! let cheap = Candidate { price: Some(100), ..Candidate::default() };
//! let dear = Candidate { price: Some(100_000), ..Candidate::default() };
//! let ranked = bridge_core::fabstir::scoring::rank(&[dear, cheap], Selection::Cheapest);
//! assert_eq!(ranked[0].0, 1);
//! assert!(choose(&ranked, 0.0).is_some());
//! ```

use serde::{Deserialize, Serialize};

/// How to weigh hosts (`--selection`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Selection {
    /// Balanced.
    #[default]
    Auto,
    /// Price first.
    Cheapest,
    /// Stake and uptime first.
    Reliable,
    /// Latency first.
    Fastest,
}

impl Selection {
    /// Weights of stake, price, uptime and latency.
    #[must_use]
    pub fn weights(self) -> [f64; 4] {
        match self {
            Self::Auto => [0.35, 0.30, 0.20, 0.15],
            Self::Cheapest => [0.15, 0.70, 0.10, 0.05],
            Self::Reliable => [0.50, 0.05, 0.40, 0.05],
            Self::Fastest => [0.10, 0.20, 0.10, 0.60],
        }
    }
}

/// What is known about one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Candidate {
    /// Staked FAB, in wei (18 decimals).
    pub stake_wei: u128,
    /// The host's on-chain price for the model (`None`: unknown).
    pub price: Option<u128>,
    /// Uptime in 0..=1 (the SDK's placeholder 0.95 when not measured).
    pub uptime: f64,
    /// Latency score in 0..=1, 1 fastest (the SDK's placeholder 0.9 when not measured).
    pub latency: f64,
    /// Failures this client saw recently (each halves the score).
    pub recent_failures: u32,
}

impl Default for Candidate {
    fn default() -> Self {
        Self {
            stake_wei: 0,
            price: None,
            uptime: 0.95,
            latency: 0.9,
            recent_failures: 0,
        }
    }
}

/// 10000 FAB in wei: the stake that scores full marks.
const FULL_STAKE_WEI: u128 = 10_000 * 1_000_000_000_000_000_000;
/// How many of the best hosts the draw considers.
const KEEP: usize = 10;

/// Latency score of a measured connect-and-ack time: 1 at ≤ 100 ms, 0 at ≥ 5 s, linear between.
#[must_use]
pub fn latency_score(millis: u64) -> f64 {
    let m = millis as f64;
    ((5000.0 - m) / 4900.0).clamp(0.0, 1.0)
}

fn price_score(price: Option<u128>) -> f64 {
    match price {
        None => 0.0,
        Some(p) => ((100_000.0 - p as f64) / 99_900.0).clamp(0.0, 1.0),
    }
}

/// One host's score under `selection` (0..=1).
#[must_use]
pub fn score(c: &Candidate, selection: Selection) -> f64 {
    let [w_stake, w_price, w_uptime, w_latency] = selection.weights();
    let stake = c.stake_wei.min(FULL_STAKE_WEI) as f64 / FULL_STAKE_WEI as f64;
    let raw = w_stake * stake
        + w_price * price_score(c.price)
        + w_uptime * c.uptime.clamp(0.0, 1.0)
        + w_latency * c.latency.clamp(0.0, 1.0);
    raw * 0.5f64.powi(i32::try_from(c.recent_failures.min(30)).unwrap_or(30))
}

/// The best ten hosts, best first: (index into `candidates`, score). Ties keep input order.
#[must_use]
pub fn rank(candidates: &[Candidate], selection: Selection) -> Vec<(usize, f64)> {
    let mut ranked: Vec<(usize, f64)> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (i, score(c, selection)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(KEEP);
    ranked
}

/// Draw one of `ranked` in proportion to its score; `random` is uniform in `[0, 1)`.
/// `None` when there is nothing to choose from.
#[must_use]
pub fn choose(ranked: &[(usize, f64)], random: f64) -> Option<usize> {
    let total: f64 = ranked.iter().map(|(_, s)| s.max(0.0)).sum();
    if total <= 0.0 {
        return ranked.first().map(|(i, _)| *i);
    }
    let mut target = random.clamp(0.0, 1.0) * total;
    for (i, s) in ranked {
        target -= s.max(0.0);
        if target < 0.0 {
            return Some(*i);
        }
    }
    ranked.last().map(|(i, _)| *i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_follow_the_sdk_formula() {
        let c = Candidate {
            stake_wei: FULL_STAKE_WEI / 2,
            price: Some(100),
            uptime: 0.95,
            latency: 0.9,
            recent_failures: 0,
        };
        let expected = 0.35 * 0.5 + 0.30 * 1.0 + 0.20 * 0.95 + 0.15 * 0.9;
        assert!((score(&c, Selection::Auto) - expected).abs() < 1e-12);
        let over = Candidate {
            stake_wei: FULL_STAKE_WEI * 3,
            ..c.clone()
        };
        assert!(
            (score(&over, Selection::Reliable) - (0.5 + 0.05 + 0.4 * 0.95 + 0.05 * 0.9)).abs()
                < 1e-12
        );
        assert_eq!(price_score(None), 0.0);
        assert!((price_score(Some(50_050)) - 0.5).abs() < 1e-9);
        assert_eq!(price_score(Some(200_000)), 0.0);
        let failed = Candidate {
            recent_failures: 2,
            ..c.clone()
        };
        assert!((score(&failed, Selection::Auto) - expected / 4.0).abs() < 1e-12);
    }

    #[test]
    fn ranking_keeps_ten_and_the_draw_is_proportional() {
        let candidates: Vec<Candidate> = (0..15u128)
            .map(|i| Candidate {
                price: Some(100 + i * 5000),
                ..Candidate::default()
            })
            .collect();
        let ranked = rank(&candidates, Selection::Cheapest);
        assert_eq!(ranked.len(), 10);
        assert_eq!(ranked[0].0, 0);
        assert!(ranked.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(choose(&ranked, 0.0), Some(0));
        assert_eq!(choose(&ranked, 0.999_999), Some(ranked[9].0));
        let mut counts = [0usize; 15];
        for k in 0..10_000 {
            if let Some(i) = choose(&ranked, f64::from(k) / 10_000.0) {
                counts[i] += 1;
            }
        }
        assert!(counts[0] > counts[9], "{counts:?}");
        assert_eq!(counts[10..].iter().sum::<usize>(), 0);
        assert_eq!(choose(&[], 0.5), None);
    }

    #[test]
    fn latency_scores() {
        assert_eq!(latency_score(50), 1.0);
        assert_eq!(latency_score(6000), 0.0);
        assert!((latency_score(2550) - 0.5).abs() < 1e-9);
    }
}
