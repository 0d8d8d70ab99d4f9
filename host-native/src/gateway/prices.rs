//! Prices: US dollars per million tokens, per provider (`[providers.NAME.prices]`) and per model
//! (`[providers.NAME.model_prices."MODEL"]`, which wins). A request with no price costs 0 and
//! its record says `priced = false`. A cache read or write with no price of its own costs what
//! an input token costs.
//!
//! ```
//! use claude_bridge::gateway::prices::{Price, Prices, Usage};
//! let mut prices = Prices::default();
//! prices.provider("local", Price { input: Some(1.0), output: Some(4.0), ..Price::default() });
//! let usage = Usage { input: 1_000_000, output: 500_000, cache_read: 0, cache_write: 0 };
//! assert_eq!(prices.cost("local,qwen3-coder", &usage), Some(3.0));
//! assert_eq!(prices.cost("other,m", &usage), None);
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

/// One price table (the four keys of `prices`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million input tokens.
    pub input: Option<f64>,
    /// Per million output tokens.
    pub output: Option<f64>,
    /// Per million input tokens read from a cache.
    pub cache_read: Option<f64>,
    /// Per million input tokens written to a cache.
    pub cache_write: Option<f64>,
    /// Fabstir jobs paid in ETH: US dollars per ETH (USDC counts 1:1 without it). Without a
    /// rate an ETH-paid request keeps its cost in ETH only (`paid`), its USD cost 0, unpriced.
    pub token_usd: Option<f64>,
}

impl Price {
    /// A value below 0 or not a number, by name.
    ///
    /// # Errors
    /// Which key.
    pub fn check(&self) -> Result<(), String> {
        for (name, value) in [
            ("input", self.input),
            ("output", self.output),
            ("cache_read", self.cache_read),
            ("cache_write", self.cache_write),
            ("token_usd", self.token_usd),
        ] {
            if let Some(v) = value
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(format!(
                    "{name}: a price is US dollars per million tokens, 0 or more"
                ));
            }
        }
        Ok(())
    }
}

/// A request's token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens (not counting cache reads and writes).
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from a cache.
    pub cache_read: u64,
    /// Input tokens written to a cache.
    pub cache_write: u64,
}

/// Every configured price.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    providers: BTreeMap<String, Price>,
    models: BTreeMap<(String, String), Price>,
}

impl Prices {
    /// Set a provider's price.
    pub fn provider(&mut self, provider: &str, price: Price) {
        self.providers.insert(provider.to_owned(), price);
    }

    /// Set one model's price.
    pub fn model(&mut self, provider: &str, model: &str, price: Price) {
        self.models
            .insert((provider.to_owned(), model.to_owned()), price);
    }

    /// What an on-chain payment cost in US dollars at `target`: USDC 1:1 unless a rate is
    /// set, another token at the provider's (or model's) `token_usd`; `None` without a rate.
    #[must_use]
    pub fn paid_cost(&self, target: &str, paid: &super::Paid) -> Option<f64> {
        let rate = self
            .price(target)
            .and_then(|p| p.token_usd)
            .or((paid.unit == "USDC").then_some(1.0))?;
        Some(paid.amount as f64 / 10f64.powi(paid.decimals as i32) * rate)
    }

    fn price(&self, target: &str) -> Option<&Price> {
        let (provider, model) = target.split_once(',').unwrap_or((target, ""));
        self.models
            .get(&(provider.to_owned(), model.to_owned()))
            .or_else(|| self.providers.get(provider))
    }

    /// What `usage` cost at `target` (`provider,model`); `None` without a price.
    #[must_use]
    pub fn cost(&self, target: &str, usage: &Usage) -> Option<f64> {
        let price = self.price(target)?;
        let input = price.input.unwrap_or(0.0);
        let per = |n: u64, p: f64| n as f64 * p / 1_000_000.0;
        Some(
            per(usage.input, input)
                + per(usage.output, price.output.unwrap_or(0.0))
                + per(usage.cache_read, price.cache_read.unwrap_or(input))
                + per(usage.cache_write, price.cache_write.unwrap_or(input)),
        )
    }
}
