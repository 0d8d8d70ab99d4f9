//! Web search on upstreams that have their own: the request's `web_search_…` server tool becomes
//! the upstream's tool — OpenAI Responses' hosted `web_search`, OpenRouter's
//! `openrouter:web_search` — and what the upstream searched and cited becomes Anthropic's
//! `server_tool_use` + `web_search_tool_result` blocks and `web_search_result_location`
//! citations. The translators (`translate::responses_*`, `translate::chat_*`) call these;
//! this module holds the one mapping of settings and results both use.
//!
//! | Anthropic `web_search_…` | Responses `web_search` | OpenRouter `openrouter:web_search` |
//! |---|---|---|
//! | `allowed_domains` | `filters.allowed_domains` | `parameters.allowed_domains` |
//! | `blocked_domains` | — (dropped with a warning) | `parameters.excluded_domains` |
//! | `user_location` | `user_location` | `parameters.user_location` |
//! | `max_uses` | the request's `max_tool_calls` | `parameters.max_uses` |
//!
//! ```
//! use bridge_core::server_tools::hosted::{HostedSearch, search_result_content};
//! let tool: serde_json::Value = serde_json::json!({"type":"web_search_20250305","name":"web_search",
//!     "max_uses":3,"blocked_domains":["spam.example"]});
//! let search = HostedSearch::of(&tool).expect("a web search tool");
//! let mut warnings = Vec::new();
//! assert_eq!(search.openrouter_tool()["parameters"]["excluded_domains"][0], "spam.example");
//! let _ = search.responses_tool(&mut warnings);
//! assert!(warnings[0].contains("blocked_domains"));
//! let content = search_result_content(["https://a.example/x"].iter().map(|u| (*u, None)));
//! assert_eq!(content[0]["type"], "web_search_result");
//! ```

use serde_json::{Map, Value, json};

use super::plan::{count, strings};
use crate::openai::responses::WebSearchTool;

/// A request's web search tool, as the upstream's own search takes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostedSearch {
    /// Most searches one answer may make.
    pub max_uses: Option<u32>,
    /// Only results from these domains.
    pub allowed_domains: Vec<String>,
    /// Never results from these domains.
    pub blocked_domains: Vec<String>,
    /// `{type:"approximate", city, region, country, timezone}`, as the client sent it.
    pub user_location: Option<Value>,
}

/// Whether a tool `type` is Anthropic's web search (`web_search_20250305`, …).
#[must_use]
pub fn is_web_search(tool_type: &str) -> bool {
    tool_type.starts_with("web_search_")
}

impl HostedSearch {
    /// The settings of a `web_search_…` tool (`None` for any other tool).
    #[must_use]
    pub fn of(tool: &Value) -> Option<Self> {
        let fields = tool.as_object()?;
        Self::of_fields(fields.get("type").and_then(Value::as_str)?, fields)
    }

    /// The same from a parsed tool: its `type` and its other fields.
    #[must_use]
    pub fn of_fields(kind: &str, fields: &Map<String, Value>) -> Option<Self> {
        is_web_search(kind).then(|| Self {
            max_uses: count(fields, "max_uses"),
            allowed_domains: strings(fields, "allowed_domains"),
            blocked_domains: strings(fields, "blocked_domains"),
            user_location: fields
                .get("user_location")
                .filter(|l| l.is_object())
                .cloned(),
        })
    }

    /// OpenAI Responses' hosted tool. `blocked_domains` has no equivalent there: dropped, with
    /// a warning. (`max_uses` goes as the request's `max_tool_calls`.)
    #[must_use]
    pub fn responses_tool(&self, warnings: &mut Vec<String>) -> WebSearchTool {
        if !self.blocked_domains.is_empty() {
            warnings.push(String::from(
                "web_search blocked_domains dropped: the Responses API's web search takes only allowed domains",
            ));
        }
        WebSearchTool {
            kind: "web_search",
            filters: (!self.allowed_domains.is_empty())
                .then(|| json!({"allowed_domains": self.allowed_domains})),
            user_location: self.user_location.clone(),
        }
    }

    /// OpenRouter's server tool (`{type:"openrouter:web_search", parameters}`).
    #[must_use]
    pub fn openrouter_tool(&self) -> Value {
        let mut parameters = Map::new();
        if let Some(max_uses) = self.max_uses {
            parameters.insert(String::from("max_uses"), Value::from(max_uses));
        }
        if !self.allowed_domains.is_empty() {
            parameters.insert(String::from("allowed_domains"), json!(self.allowed_domains));
        }
        if !self.blocked_domains.is_empty() {
            parameters.insert(
                String::from("excluded_domains"),
                json!(self.blocked_domains),
            );
        }
        if let Some(location) = &self.user_location {
            parameters.insert(String::from("user_location"), location.clone());
        }
        json!({"type": "openrouter:web_search", "parameters": parameters})
    }
}

/// A `web_search_tool_result`'s content: one `web_search_result` per page, in order, each once
/// (the title is the page's when known, else its address). Upstreams give out no page content
/// for a later turn, so `encrypted_content` is empty.
pub fn search_result_content<'a>(
    pages: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Vec<Value> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (url, title) in pages {
        if url.is_empty() || seen.contains(&url) {
            continue;
        }
        seen.push(url);
        let title = title.filter(|t| !t.trim().is_empty()).unwrap_or(url);
        out.push(json!({
            "type": "web_search_result",
            "url": url,
            "title": title,
            "encrypted_content": "",
            "page_age": null,
        }));
    }
    out
}

/// A failed search's content (`web_search_tool_result_error`).
#[must_use]
pub fn search_error_content(error_code: &str) -> Value {
    json!({"type": "web_search_tool_result_error", "error_code": error_code})
}

/// A citation of a page the upstream's search found (`web_search_result_location`). The
/// upstream quotes nothing of the page, so `cited_text` is empty.
#[must_use]
pub fn citation(url: &str, title: Option<&str>) -> Value {
    json!({
        "type": "web_search_result_location",
        "url": url,
        "title": title.filter(|t| !t.trim().is_empty()).unwrap_or(url),
        "encrypted_index": "",
        "cited_text": "",
    })
}

/// An earlier web search of the conversation as text for an upstream that cannot take it back
/// as a search of its own: `[Searched the web for: …]` for a `server_tool_use` named
/// `web_search`, `[Search results: …]` (title and address of each page) for a
/// `web_search_tool_result`; `None` for any other block (and for a result with no pages).
#[must_use]
pub fn history_text(block: &Value) -> Option<String> {
    let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
    match field("type") {
        "server_tool_use" if field("name") == "web_search" => {
            let query = block.pointer("/input/query").and_then(Value::as_str);
            Some(format!(
                "[Searched the web for: {}]",
                query.unwrap_or_default()
            ))
        }
        "web_search_tool_result" => {
            let pages = result_pages(block);
            (!pages.is_empty()).then(|| {
                let list: Vec<String> = pages
                    .iter()
                    .map(|(url, title)| format!("- {title} <{url}>"))
                    .collect();
                format!("[Search results:\n{}]", list.join("\n"))
            })
        }
        _ => None,
    }
}

/// Whether a block is an earlier web search's (its use or its result).
#[must_use]
pub fn is_search_block(block: &Value) -> bool {
    match block.get("type").and_then(Value::as_str) {
        Some("server_tool_use") => block.get("name").and_then(Value::as_str) == Some("web_search"),
        Some("web_search_tool_result") => true,
        _ => false,
    }
}

/// The `(url, title)` of each page of a `web_search_tool_result` (an error has none).
#[must_use]
pub fn result_pages(block: &Value) -> Vec<(&str, &str)> {
    block
        .get("content")
        .and_then(Value::as_array)
        .map(|results| {
            results
                .iter()
                .filter_map(|r| {
                    let url = r.get("url").and_then(Value::as_str)?;
                    Some((url, r.get("title").and_then(Value::as_str).unwrap_or(url)))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `server_tool_use` id for an upstream's search item (`ws_…` → `srvtoolu_ws_…`), so a
/// later turn can give the upstream its own id back ([`upstream_search_id`]).
#[must_use]
pub fn server_tool_use_id(upstream_id: &str) -> String {
    format!("srvtoolu_{upstream_id}")
}

/// The upstream's id inside a `server_tool_use` id made by [`server_tool_use_id`].
#[must_use]
pub fn upstream_search_id(id: &str) -> Option<&str> {
    id.strip_prefix("srvtoolu_")
        .filter(|inner| inner.starts_with("ws_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_map_to_both_upstreams() {
        let tool = json!({"type":"web_search_20250305","name":"web_search","max_uses":2,
            "allowed_domains":["docs.rs"],
            "user_location":{"type":"approximate","city":"Leeds","country":"GB"}});
        let search = HostedSearch::of(&tool).unwrap();
        let mut warnings = Vec::new();
        let responses = serde_json::to_value(search.responses_tool(&mut warnings)).unwrap();
        assert_eq!(
            responses,
            json!({"type":"web_search","filters":{"allowed_domains":["docs.rs"]},
                "user_location":{"type":"approximate","city":"Leeds","country":"GB"}})
        );
        assert!(warnings.is_empty());
        assert_eq!(
            search.openrouter_tool(),
            json!({"type":"openrouter:web_search","parameters":{"max_uses":2,
                "allowed_domains":["docs.rs"],
                "user_location":{"type":"approximate","city":"Leeds","country":"GB"}}})
        );
        assert_eq!(
            HostedSearch::of(&json!({"type":"web_fetch_20250910"})),
            None
        );
    }

    #[test]
    fn results_are_each_page_once_and_ids_round_trip() {
        let content = search_result_content(
            [
                ("https://a.example/", Some("A")),
                ("https://a.example/", None),
                ("", None),
                ("https://b.example/", Some(" ")),
            ]
            .into_iter(),
        );
        assert_eq!(content.len(), 2);
        assert_eq!(content[1]["title"], "https://b.example/");
        let id = server_tool_use_id("ws_123");
        assert_eq!(upstream_search_id(&id), Some("ws_123"));
        assert_eq!(upstream_search_id("srvtoolu_01abc"), None);
    }
}
