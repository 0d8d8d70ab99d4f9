//! Reading the ledger: `GET /v1/usage` and `claude-bridge usage` take the same query
//! (`group_by` any of `key,model,target,day,session`, a `from`/`to` time range) and give the
//! same rows, as JSON, CSV or a terminal table.
//!
//! ```
//! use claude_bridge::gateway::usage::{UsageQuery, UsageRow, Group};
//! let q = UsageQuery::parse("group_by=key,day&from=2026-11-01", 1_795_861_815_000).unwrap();
//! assert_eq!(q.group_by, [Group::Key, Group::Day]);
//! let row = UsageRow { key: Some("alice".into()), day: Some("2026-11-28".into()), requests: 2, ..UsageRow::default() };
//! assert_eq!(UsageRow::csv(&[row], &q.group_by).lines().nth(1), Some("alice,2026-11-28,2,0,0,0,0,0,0.000000"));
//! ```

use serde::Serialize;

use super::period::parse_time;

/// A column rows can be grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Group {
    /// The key's name.
    Key,
    /// The client's model name.
    Model,
    /// `provider,model` that answered.
    Target,
    /// The UTC day.
    Day,
    /// Claude Code's session id.
    Session,
}

impl Group {
    const ALL: [Self; 5] = [
        Self::Key,
        Self::Model,
        Self::Target,
        Self::Day,
        Self::Session,
    ];

    /// Its name in `group_by`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Key => "key",
            Self::Model => "model",
            Self::Target => "target",
            Self::Day => "day",
            Self::Session => "session",
        }
    }

    /// The ledger column.
    #[must_use]
    pub const fn column(self) -> &'static str {
        match self {
            Self::Key => "key_name",
            Self::Model => "model",
            Self::Target => "target",
            Self::Day => "day",
            Self::Session => "session",
        }
    }

    /// `key`, `model`, … back to a group.
    ///
    /// # Errors
    /// Not a group's name.
    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|g| g.name() == name.trim())
            .ok_or_else(|| {
                format!("group_by: unknown `{name}`; allowed: key, model, target, day, session")
            })
    }
}

/// Which rows, grouped how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    /// Grouping columns, in order (none: one total row).
    pub group_by: Vec<Group>,
    /// From this Unix millisecond (inclusive).
    pub from_ms: i64,
    /// To this one (exclusive).
    pub to_ms: i64,
    /// Only this key's records (a key reading its own usage).
    pub key: Option<String>,
    /// `format=csv`.
    pub csv: bool,
}

impl UsageQuery {
    /// From a query string; `from` defaults to 30 days before `now_ms`, `to` to a millisecond
    /// after it.
    ///
    /// # Errors
    /// An unknown parameter, group or format, a time that does not parse.
    pub fn parse(query: &str, now_ms: i64) -> Result<Self, String> {
        let mut out = Self {
            group_by: Vec::new(),
            from_ms: now_ms - 30 * 86_400_000,
            to_ms: now_ms + 1,
            key: None,
            csv: false,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value);
            match name {
                "group_by" => {
                    for g in value.split(',').filter(|g| !g.trim().is_empty()) {
                        let g = Group::parse(g)?;
                        if !out.group_by.contains(&g) {
                            out.group_by.push(g);
                        }
                    }
                }
                "from" => out.from_ms = parse_time(&value).map_err(|e| format!("from: {e}"))?,
                "to" => out.to_ms = parse_time(&value).map_err(|e| format!("to: {e}"))?,
                "format" => match value.as_str() {
                    "json" => out.csv = false,
                    "csv" => out.csv = true,
                    other => return Err(format!("format: unknown `{other}`; allowed: json, csv")),
                },
                "key" => out.key = Some(value),
                other => {
                    return Err(format!(
                        "unknown parameter `{other}`; allowed: group_by, from, to, format, key"
                    ));
                }
            }
        }
        Ok(out)
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One group's totals. Only the grouped fields are present in JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UsageRow {
    /// The key's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The client's model name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `provider,model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `YYYY-MM-DD`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    /// Claude Code's session id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Requests.
    pub requests: i64,
    /// Of which ended with an error.
    pub errors: i64,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Cache-read input tokens.
    pub cache_read_tokens: i64,
    /// Cache-write input tokens.
    pub cache_write_tokens: i64,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// Requests with no price (cost 0).
    pub unpriced: i64,
}

impl UsageRow {
    /// Set the grouped field `group`.
    pub fn set(&mut self, group: Group, value: String) {
        let slot = match group {
            Group::Key => &mut self.key,
            Group::Model => &mut self.model,
            Group::Target => &mut self.target,
            Group::Day => &mut self.day,
            Group::Session => &mut self.session,
        };
        *slot = Some(value);
    }

    fn get(&self, group: Group) -> &str {
        match group {
            Group::Key => self.key.as_deref(),
            Group::Model => self.model.as_deref(),
            Group::Target => self.target.as_deref(),
            Group::Day => self.day.as_deref(),
            Group::Session => self.session.as_deref(),
        }
        .unwrap_or("")
    }

    fn numbers(&self) -> [String; 7] {
        [
            self.requests.to_string(),
            self.errors.to_string(),
            self.input_tokens.to_string(),
            self.output_tokens.to_string(),
            self.cache_read_tokens.to_string(),
            self.cache_write_tokens.to_string(),
            format!("{:.6}", self.cost_usd),
        ]
    }

    const NUMBER_HEADERS: [&'static str; 7] = [
        "requests",
        "errors",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost_usd",
    ];

    /// `{"rows":[…]}`.
    #[must_use]
    pub fn json(rows: &[Self]) -> String {
        serde_json::json!({ "rows": rows }).to_string()
    }

    /// A header line and one line per row (fields quoted when they hold a comma or quote).
    #[must_use]
    pub fn csv(rows: &[Self], groups: &[Group]) -> String {
        let quote = |s: &str| {
            if s.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_owned()
            }
        };
        let mut out: Vec<String> = vec![
            groups
                .iter()
                .map(|g| g.name())
                .chain(Self::NUMBER_HEADERS)
                .collect::<Vec<_>>()
                .join(","),
        ];
        for row in rows {
            let cells: Vec<String> = groups
                .iter()
                .map(|g| quote(row.get(*g)))
                .chain(row.numbers())
                .collect();
            out.push(cells.join(","));
        }
        out.join("\n") + "\n"
    }

    /// Columns aligned for a terminal, with a total line when there is more than one row.
    #[must_use]
    pub fn table(rows: &[Self], groups: &[Group]) -> String {
        let headers: Vec<&str> = groups
            .iter()
            .map(|g| g.name())
            .chain(Self::NUMBER_HEADERS)
            .collect();
        let mut lines: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                groups
                    .iter()
                    .map(|g| r.get(*g).to_owned())
                    .chain(r.numbers())
                    .collect()
            })
            .collect();
        if rows.len() > 1 {
            let total = Self {
                requests: rows.iter().map(|r| r.requests).sum(),
                errors: rows.iter().map(|r| r.errors).sum(),
                input_tokens: rows.iter().map(|r| r.input_tokens).sum(),
                output_tokens: rows.iter().map(|r| r.output_tokens).sum(),
                cache_read_tokens: rows.iter().map(|r| r.cache_read_tokens).sum(),
                cache_write_tokens: rows.iter().map(|r| r.cache_write_tokens).sum(),
                cost_usd: rows.iter().map(|r| r.cost_usd).sum(),
                ..Self::default()
            };
            let mut cells: Vec<String> = groups.iter().map(|_| String::new()).collect();
            if let Some(first) = cells.first_mut() {
                *first = String::from("total");
            }
            lines.push(cells.into_iter().chain(total.numbers()).collect());
        }
        let widths: Vec<usize> = (0..headers.len())
            .map(|i| {
                lines
                    .iter()
                    .map(|l| l[i].chars().count())
                    .chain([headers[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let numeric_from = groups.len();
        let render = |cells: Vec<String>| {
            cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if i >= numeric_from {
                        format!("{c:>w$}", w = widths[i])
                    } else {
                        format!("{c:<w$}", w = widths[i])
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        };
        let mut out = vec![render(headers.iter().map(|h| (*h).to_owned()).collect())];
        out.extend(lines.into_iter().map(render));
        if rows.is_empty() {
            out.push(String::from("(no requests in this range)"));
        }
        out.join("\n") + "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_string_is_read_and_its_mistakes_named() {
        let q = UsageQuery::parse(
            "group_by=model%2Csession&format=csv&to=2026-12-01T00%3A00%3A00Z",
            0,
        )
        .unwrap();
        assert_eq!(q.group_by, [Group::Model, Group::Session]);
        assert!(q.csv);
        assert_eq!(q.to_ms, parse_time("2026-12-01T00:00:00Z").unwrap());
        assert!(
            UsageQuery::parse("group_by=user", 0)
                .unwrap_err()
                .contains("allowed: key")
        );
        assert!(
            UsageQuery::parse("since=1", 0)
                .unwrap_err()
                .contains("unknown parameter")
        );
        assert!(
            UsageQuery::parse("format=xml", 0)
                .unwrap_err()
                .contains("csv")
        );
    }

    #[test]
    fn json_has_only_the_grouped_fields_and_csv_quotes_commas() {
        let row = UsageRow {
            target: Some("local,qwen".into()),
            requests: 3,
            cost_usd: 0.5,
            ..UsageRow::default()
        };
        let json: serde_json::Value =
            serde_json::from_str(&UsageRow::json(std::slice::from_ref(&row))).unwrap();
        assert_eq!(json["rows"][0]["target"], "local,qwen");
        assert!(json["rows"][0].get("key").is_none());
        let csv = UsageRow::csv(std::slice::from_ref(&row), &[Group::Target]);
        assert_eq!(
            csv.lines().nth(1),
            Some("\"local,qwen\",3,0,0,0,0,0,0.500000")
        );
        let table = UsageRow::table(&[row.clone(), row], &[Group::Target]);
        assert!(
            table.lines().last().unwrap().starts_with("total"),
            "{table}"
        );
    }
}
