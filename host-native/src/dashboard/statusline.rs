//! `claude-bridge statusline`: a command for Claude Code's `statusLine` setting. Claude Code
//! runs it after each update with a JSON object on stdin (its `session_id`, model, workspace…)
//! and shows the first line it prints. This one asks the bridge Claude Code talks to
//! (`ANTHROPIC_BASE_URL`, with its key) for the session's totals (`/ui/api/session/{id}`) and
//! prints the target that answered last, the session's tokens and cost, and the key's budget
//! left:
//!
//! ```text
//! ⇄ local,qwen3-coder · 12.4k in 1.1k out · $0.0123 · $4.98 left today (resets 00:00Z)
//! ```
//!
//! It never fails Claude Code: a bridge it cannot reach is a line saying so, and it gives up
//! after a second.
//!
//! ```
//! use claude_bridge::dashboard::statusline::line;
//! let view = serde_json::json!({"totals": {"last_target": "local,m", "input_tokens": 1200,
//!     "output_tokens": 85, "cost_usd": 0.0123, "requests": 2}, "budgets": []});
//! assert_eq!(line(Ok(Some(&view))), "⇄ local,m · 1.2k in 85 out · $0.0123");
//! ```

use std::io::Read as _;
use std::time::Duration;

use serde_json::Value;

use super::client::BridgeClient;
use crate::cli::DashboardClientArgs;

/// How long Claude Code's status line may wait for the bridge.
const WAIT: Duration = Duration::from_secs(1);

/// Read Claude Code's JSON, ask the bridge, print the line. Always exits 0.
///
/// # Errors
/// None in practice: every failure is a line.
pub async fn run(args: &DashboardClientArgs) -> Result<u8, String> {
    let mut input = String::new();
    let _ = std::io::stdin().take(1 << 20).read_to_string(&mut input);
    let claude: Value = serde_json::from_str(&input).unwrap_or(Value::Null);
    let session = claude["session_id"].as_str().filter(|id| {
        !id.is_empty()
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    });
    let text = match (BridgeClient::new(args, Some(WAIT)), session) {
        (Err(e), _) => format!("⇄ claude-bridge: {e}"),
        (Ok(_), None) => String::from("⇄ claude-bridge · no session yet"),
        (Ok(client), Some(id)) => {
            let view = client.json(&format!("/ui/api/session/{id}")).await;
            line(view.as_ref().map(Option::as_ref).map_err(String::as_str))
        }
    };
    println!("{text}");
    Ok(0)
}

/// A count as a person reads it: 950, 12.4k, 3.1M.
fn count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1_000.0),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// The line for what `/ui/api/session/{id}` answered (`Ok(None)`: the session has no request
/// on this bridge yet).
#[must_use]
pub fn line(view: Result<Option<&Value>, &str>) -> String {
    let view = match view {
        Err(e) => return format!("⇄ claude-bridge: {e}"),
        Ok(None) => return String::from("⇄ claude-bridge · no request yet"),
        Ok(Some(view)) => view,
    };
    let totals = &view["totals"];
    let target = totals["last_target"]
        .as_str()
        .filter(|t| !t.is_empty())
        .unwrap_or("–");
    let mut parts = vec![
        format!("⇄ {target}"),
        format!(
            "{} in {} out",
            count(totals["input_tokens"].as_u64().unwrap_or(0)),
            count(totals["output_tokens"].as_u64().unwrap_or(0))
        ),
    ];
    if let Some(cost) = totals["cost_usd"].as_f64().filter(|c| *c > 0.0) {
        parts.push(format!("${cost:.4}"));
    }
    if let Some(errors) = totals["errors"].as_u64().filter(|e| *e > 0) {
        parts.push(format!("{errors} failed"));
    }
    for budget in view["budgets"].as_array().into_iter().flatten() {
        let left = match budget["metric"].as_str() {
            Some("usd") => format!("${:.2}", budget["left"].as_f64().unwrap_or(0.0)),
            _ => format!("{} tokens", count(budget["left"].as_u64().unwrap_or(0))),
        };
        let period = match budget["period"].as_str().unwrap_or("") {
            "day" => " today",
            "week" => " this week",
            "month" => " this month",
            "5h" => " this 5 h block",
            _ => "",
        };
        let resets = budget["resets"]
            .as_str()
            .and_then(|r| r.get(11..16))
            .map(|hm| format!(" (resets {hm}Z)"))
            .unwrap_or_default();
        parts.push(format!("{left} left{period}{resets}"));
    }
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_line_names_the_target_tokens_cost_and_budget() {
        let view = json!({
            "totals": {"last_target": "gpu1,qwen", "input_tokens": 12_400, "output_tokens": 1_100,
                       "cost_usd": 0.0123, "errors": 0},
            "budgets": [{"metric": "usd", "left": 4.9877, "period": "day",
                         "resets": "2026-11-29T00:00:00Z"},
                        {"metric": "tokens", "left": 99_766, "period": "week", "resets": null}],
        });
        assert_eq!(
            line(Ok(Some(&view))),
            "⇄ gpu1,qwen · 12.4k in 1.1k out · $0.0123 · $4.99 left today (resets 00:00Z) · 99.8k tokens left this week"
        );
    }

    #[test]
    fn no_request_and_no_bridge_are_lines_too() {
        assert_eq!(line(Ok(None)), "⇄ claude-bridge · no request yet");
        assert_eq!(
            line(Err("unreachable (http://127.0.0.1:9)")),
            "⇄ claude-bridge: unreachable (http://127.0.0.1:9)"
        );
        let failing = json!({"totals": {"last_target": "", "errors": 2}, "budgets": []});
        assert_eq!(line(Ok(Some(&failing))), "⇄ – · 0 in 0 out · 2 failed");
    }
}
