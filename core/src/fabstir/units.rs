//! Money amounts: base units (wei, USDC's 6-decimal units) shown as decimals.
//!
//! ```
//! use bridge_core::fabstir::units::format_units;
//! assert_eq!(format_units("200000000000000", 18), "0.0002");
//! assert_eq!(format_units("1500000", 6), "1.5");
//! assert_eq!(format_units("7", 0), "7");
//! ```

/// An integer in base units (its decimal digits) as a decimal number with `decimals` places,
/// without trailing zeros.
#[must_use]
pub fn format_units(digits: &str, decimals: u32) -> String {
    let decimals = decimals as usize;
    if decimals == 0 {
        return digits.to_owned();
    }
    let padded = format!("{digits:0>width$}", width = decimals + 1);
    let (whole, frac) = padded.split_at(padded.len() - decimals);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        whole.to_owned()
    } else {
        format!("{whole}.{frac}")
    }
}
