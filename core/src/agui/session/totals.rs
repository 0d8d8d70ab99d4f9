//! A thread's running totals for its `STATE_SNAPSHOT`: cost, turns, tokens and runs across
//! every run, so a UI shows them without adding up per-run `result_stats` itself.
//!
//! Claude Code's `result` carries `total_cost_usd` and `modelUsage` as running totals of its
//! process (each result has the total so far; a resumed process may start from the total its
//! transcript saved, or from zero). A total that goes down is a new process starting over: what
//! the earlier one reached is kept as a base. `num_turns` is per result and is added up. Without
//! `modelUsage`, the per-turn `usage` is added up instead.
//!
//! ```
//! use bridge_core::agui::session::totals::Totals;
//! use serde_json::json;
//! let mut totals = Totals::default();
//! totals.add_result(&json!({"num_turns": 2, "total_cost_usd": 0.5,
//!     "modelUsage": {"m": {"inputTokens": 100, "outputTokens": 10}}}));
//! totals.add_result(&json!({"num_turns": 1, "total_cost_usd": 0.75,
//!     "modelUsage": {"m": {"inputTokens": 150, "outputTokens": 20}}}));
//! // A restarted process counts from zero again.
//! totals.add_result(&json!({"num_turns": 1, "total_cost_usd": 0.25,
//!     "modelUsage": {"m": {"inputTokens": 40, "outputTokens": 5}}}));
//! let v = totals.to_json();
//! assert_eq!((v["runs"].as_u64(), v["turns"].as_u64()), (Some(3), Some(4)));
//! assert_eq!(v["costUsd"].as_f64(), Some(1.0));
//! assert_eq!((v["inputTokens"].as_u64(), v["outputTokens"].as_u64()), (Some(190), Some(25)));
//! ```

use serde_json::{Value, json};

/// A process's running total, kept across processes that start over.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Running {
    /// What earlier processes reached.
    base: f64,
    /// The latest total of the current process.
    last: f64,
}

impl Running {
    fn see(&mut self, total: f64) {
        if total < self.last {
            self.base += self.last;
        }
        self.last = total;
    }

    fn add(&mut self, amount: f64) {
        self.base += amount;
    }

    fn get(self) -> f64 {
        self.base + self.last
    }
}

/// The totals of one thread.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    runs: u64,
    turns: u64,
    cost_usd: Running,
    input_tokens: Running,
    output_tokens: Running,
    cache_read_input_tokens: Running,
    cache_creation_input_tokens: Running,
}

/// The token counts: `modelUsage`'s camelCase name, `usage`'s snake_case name.
const TOKEN_FIELDS: [(&str, &str); 4] = [
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("cacheReadInputTokens", "cache_read_input_tokens"),
    ("cacheCreationInputTokens", "cache_creation_input_tokens"),
];

impl Totals {
    /// Count one `result` (its `result_stats` fields).
    pub fn add_result(&mut self, stats: &Value) {
        self.runs += 1;
        self.turns += stats.get("num_turns").and_then(Value::as_u64).unwrap_or(0);
        if let Some(cost) = stats.get("total_cost_usd").and_then(Value::as_f64) {
            self.cost_usd.see(cost);
        }
        let model_usage = stats.get("modelUsage").and_then(Value::as_object);
        let counters = [
            &mut self.input_tokens,
            &mut self.output_tokens,
            &mut self.cache_read_input_tokens,
            &mut self.cache_creation_input_tokens,
        ];
        for ((camel, snake), counter) in TOKEN_FIELDS.into_iter().zip(counters) {
            match model_usage {
                Some(models) => counter.see(
                    models
                        .values()
                        .filter_map(|m| m.get(camel).and_then(Value::as_f64))
                        .sum(),
                ),
                None => counter.add(
                    stats
                        .get("usage")
                        .and_then(|u| u.get(snake))
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0),
                ),
            }
        }
    }

    /// The totals as the snapshot shows them.
    #[must_use]
    pub fn to_json(&self) -> Value {
        // Token counts are whole numbers; a float sum of them is exact far past any real count.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "sums of non-negative whole token counts"
        )]
        let tokens = |r: Running| r.get().round() as u64;
        json!({
            "runs": self.runs,
            "turns": self.turns,
            "costUsd": self.cost_usd.get(),
            "inputTokens": tokens(self.input_tokens),
            "outputTokens": tokens(self.output_tokens),
            "cacheReadInputTokens": tokens(self.cache_read_input_tokens),
            "cacheCreationInputTokens": tokens(self.cache_creation_input_tokens),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_model_usage_the_per_turn_usage_adds_up() {
        let mut t = Totals::default();
        for _ in 0..2 {
            t.add_result(&json!({"num_turns": 1, "usage": {"input_tokens": 5, "cache_read_input_tokens": 7, "output_tokens": 2}}));
        }
        let v = t.to_json();
        assert_eq!(v["inputTokens"], 10);
        assert_eq!(v["cacheReadInputTokens"], 14);
        assert_eq!(v["outputTokens"], 4);
        assert_eq!(v["costUsd"], 0.0);
    }

    #[test]
    fn a_resumed_process_that_carries_its_total_on_is_not_counted_twice() {
        let mut t = Totals::default();
        t.add_result(&json!({"total_cost_usd": 0.5}));
        // The resumed process starts from the saved 0.5.
        t.add_result(&json!({"total_cost_usd": 0.75}));
        assert_eq!(t.to_json()["costUsd"], 0.75);
    }
}
