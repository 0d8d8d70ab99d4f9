//! Web search results: what a search backend answered (SearXNG's JSON API, Brave's Web Search
//! API, Tavily's search API, parsed here), and the two ways they are written — the
//! `web_search_tool_result` block the client sees, and the `tool_result` text the model reads.
//!
//! ```
//! use bridge_core::server_tools::search::{parse_searxng, SearchHit};
//! let body = br#"{"query":"rust","results":[{"url":"https://rust-lang.org/","title":"Rust","content":"A language"}]}"#;
//! let hits = parse_searxng(body).unwrap();
//! assert_eq!(hits[0].title, "Rust");
//! assert_eq!(hits[0].snippet, "A language");
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One result of a web search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The page's address.
    pub url: String,
    /// The page's title.
    pub title: String,
    /// What the backend quoted from the page (may be empty).
    pub snippet: String,
    /// How old the page is, as the backend says it (a date or "2 days ago"), if it does.
    pub page_age: Option<String>,
}

/// Why a search backend's answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the search backend's answer is not {backend} JSON: {reason}")]
pub struct ParseError {
    /// `SearXNG`, `Brave` or `Tavily`.
    pub backend: &'static str,
    /// What was wrong.
    pub reason: String,
}

/// Most results handed to the model from one search.
pub const MAX_HITS: usize = 10;

/// Longest snippet kept (characters); a backend's long page extracts are cut here.
const MAX_SNIPPET_CHARS: usize = 1200;

fn parse_json<T: for<'de> Deserialize<'de>>(
    backend: &'static str,
    body: &[u8],
) -> Result<T, ParseError> {
    serde_json::from_slice(body).map_err(|e| ParseError {
        backend,
        reason: e.to_string(),
    })
}

fn hit(url: String, title: String, snippet: &str, page_age: Option<String>) -> SearchHit {
    let snippet = match snippet.char_indices().nth(MAX_SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &snippet[..cut]),
        None => snippet.to_owned(),
    };
    let title = if title.trim().is_empty() {
        url.clone()
    } else {
        title
    };
    SearchHit {
        url,
        title,
        snippet,
        page_age: page_age.filter(|a| !a.is_empty()),
    }
}

/// SearXNG's `GET /search?format=json` answer: `{"results":[{url,title,content,publishedDate}]}`.
///
/// # Errors
/// The body is not that JSON.
pub fn parse_searxng(body: &[u8]) -> Result<Vec<SearchHit>, ParseError> {
    parse_results("SearXNG", body)
}

/// The answer shape SearXNG and Tavily share: `{"results":[{url,title,content,date}]}` (the
/// date is SearXNG's `publishedDate`, Tavily's `published_date`).
fn parse_results(backend: &'static str, body: &[u8]) -> Result<Vec<SearchHit>, ParseError> {
    #[derive(Deserialize)]
    struct Answer {
        results: Vec<Result_>,
    }
    #[derive(Deserialize)]
    struct Result_ {
        url: String,
        #[serde(default)]
        title: String,
        #[serde(default)]
        content: Option<String>,
        #[serde(default, alias = "publishedDate")]
        published_date: Option<String>,
    }
    let answer: Answer = parse_json(backend, body)?;
    Ok(answer
        .results
        .into_iter()
        .take(MAX_HITS)
        .map(|r| {
            let snippet = r.content.unwrap_or_default();
            hit(r.url, r.title, &snippet, r.published_date)
        })
        .collect())
}

/// Brave's `GET /res/v1/web/search` answer: `{"web":{"results":[{url,title,description,age}]}}`
/// (`web` is absent when nothing was found).
///
/// # Errors
/// The body is not that JSON.
pub fn parse_brave(body: &[u8]) -> Result<Vec<SearchHit>, ParseError> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        web: Option<Web>,
    }
    #[derive(Deserialize)]
    struct Web {
        #[serde(default)]
        results: Vec<Result_>,
    }
    #[derive(Deserialize)]
    struct Result_ {
        url: String,
        #[serde(default)]
        title: String,
        #[serde(default)]
        description: Option<String>,
        #[serde(default)]
        age: Option<String>,
        #[serde(default)]
        page_age: Option<String>,
    }
    let answer: Answer = parse_json("Brave", body)?;
    Ok(answer
        .web
        .map(|w| w.results)
        .unwrap_or_default()
        .into_iter()
        .take(MAX_HITS)
        .map(|r| {
            let snippet = r.description.unwrap_or_default();
            hit(r.url, r.title, &snippet, r.age.or(r.page_age))
        })
        .collect())
}

/// Tavily's `POST /search` answer: `{"results":[{url,title,content,published_date}]}`.
///
/// # Errors
/// The body is not that JSON.
pub fn parse_tavily(body: &[u8]) -> Result<Vec<SearchHit>, ParseError> {
    parse_results("Tavily", body)
}

/// Keep the hits `allowed` / `blocked` let through (a backend may not filter, or only
/// loosely). A domain covers its subdomains: `example.com` allows `docs.example.com`.
#[must_use]
pub fn filter_domains(
    hits: Vec<SearchHit>,
    allowed: &[String],
    blocked: &[String],
) -> Vec<SearchHit> {
    hits.into_iter()
        .filter(|h| domain_allowed(&h.url, allowed, blocked))
        .collect()
}

/// Whether `url`'s host is within `allowed` (empty: any) and not within `blocked`. A domain
/// covers its subdomains: `example.com` allows `docs.example.com`.
#[must_use]
pub fn domain_allowed(url: &str, allowed: &[String], blocked: &[String]) -> bool {
    let host = host_of(url);
    let within = |d: &String| domain_covers(d, &host);
    (allowed.is_empty() || allowed.iter().any(within)) && !blocked.iter().any(within)
}

/// The lower-case host of an `http(s)://` address (empty when there is none).
#[must_use]
pub fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host.starts_with('[') {
        host.split_inclusive(']').next().unwrap_or(host)
    } else {
        host.split(':').next().unwrap_or(host)
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `domain` (as a client wrote it: `example.com`, `https://example.com/x`,
/// `*.example.com`) covers `host`.
fn domain_covers(domain: &str, host: &str) -> bool {
    let domain = host_of(domain.trim());
    let domain = domain.trim_start_matches("*.");
    !domain.is_empty()
        && (host == domain
            || host
                .strip_suffix(domain)
                .is_some_and(|prefix| prefix.ends_with('.')))
}

/// The `content` of the `web_search_tool_result` block the client gets: Anthropic's
/// `web_search_result` objects. Anthropic's `encrypted_content` is an opaque token only its
/// own models read back; here it carries the snippet in plain text, which is what the next
/// turn's conversion reads back and what Claude Code shows as the result's text.
#[must_use]
pub fn result_block_content(hits: &[SearchHit]) -> Value {
    Value::Array(
        hits.iter()
            .map(|h| {
                json!({
                    "type": "web_search_result",
                    "title": h.title,
                    "url": h.url,
                    "encrypted_content": h.snippet,
                    "page_age": h.page_age,
                })
            })
            .collect(),
    )
}

/// `{"type":"web_search_tool_result_error","error_code":code}`.
#[must_use]
pub fn error_block_content(code: &str) -> Value {
    json!({"type": "web_search_tool_result_error", "error_code": code})
}

/// The text the model reads for a search's results (a `tool_result`).
#[must_use]
pub fn results_for_model(query: &str, hits: &[SearchHit]) -> String {
    results_text(&format!(" for {query:?}"), hits)
}

/// Results as the model reads them; `about` follows "results" (` for "query"`, or nothing).
fn results_text(about: &str, hits: &[SearchHit]) -> String {
    use std::fmt::Write as _;
    if hits.is_empty() {
        return format!("No web search results{about}.");
    }
    let mut out = format!("Web search results{about}:\n");
    for (n, h) in hits.iter().enumerate() {
        let _ = write!(out, "\n[{}] {}\nURL: {}\n", n + 1, h.title, h.url);
        if let Some(age) = &h.page_age {
            let _ = writeln!(out, "Published: {age}");
        }
        if !h.snippet.is_empty() {
            let _ = writeln!(out, "{}", h.snippet);
        }
    }
    out.push_str("\nCite the sources you use by their URL.");
    out
}

/// The text the model reads for a `web_search_tool_result` block of the conversation's history
/// (results from any source: this bridge's, or Anthropic's with opaque `encrypted_content`,
/// which is left out).
#[must_use]
pub fn history_result_for_model(content: &Value) -> String {
    match content {
        Value::Array(results) => {
            let hits: Vec<SearchHit> = results
                .iter()
                .filter_map(|r| {
                    let url = r.get("url")?.as_str()?.to_owned();
                    let title = r.get("title").and_then(Value::as_str).unwrap_or_default();
                    let snippet = r
                        .get("encrypted_content")
                        .and_then(Value::as_str)
                        .filter(|s| looks_like_text(s))
                        .unwrap_or_default();
                    let age = r.get("page_age").and_then(Value::as_str).map(str::to_owned);
                    Some(hit(url, title.to_owned(), snippet, age))
                })
                .collect();
            results_text("", &hits)
        }
        other => {
            let code = other
                .get("error_code")
                .and_then(Value::as_str)
                .unwrap_or("unavailable");
            format!("The web search failed: {code}.")
        }
    }
}

/// Whether `s` reads as text rather than an opaque token (Anthropic's `encrypted_content` is
/// base64 without spaces).
fn looks_like_text(s: &str) -> bool {
    s.contains(' ') || s.len() < 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_backend_parses_its_documented_shape() {
        let searxng = parse_searxng(
            br#"{"query":"q","number_of_results":0,"results":[{"url":"https://a.example/","title":"A","content":"alpha","engine":"x","publishedDate":"2026-01-02T00:00:00"},{"url":"https://b.example/","title":"","content":null}],"answers":[],"suggestions":[],"unresponsive_engines":[]}"#,
        )
        .unwrap();
        assert_eq!(searxng.len(), 2);
        assert_eq!(searxng[0].page_age.as_deref(), Some("2026-01-02T00:00:00"));
        assert_eq!(
            searxng[1].title, "https://b.example/",
            "an empty title shows the URL"
        );
        let brave = parse_brave(
            br#"{"type":"search","query":{"original":"q"},"web":{"type":"search","results":[{"title":"B","url":"https://b.example/","description":"beta","age":"2 days ago"}]}}"#,
        )
        .unwrap();
        assert_eq!(brave[0].snippet, "beta");
        assert_eq!(brave[0].page_age.as_deref(), Some("2 days ago"));
        assert!(
            parse_brave(br#"{"type":"search","query":{"original":"q"}}"#)
                .unwrap()
                .is_empty()
        );
        let tavily = parse_tavily(
            br#"{"query":"q","results":[{"title":"T","url":"https://t.example/","content":"tau","score":0.9,"published_date":"2026-03-01"}],"response_time":0.5}"#,
        )
        .unwrap();
        assert_eq!(tavily[0].snippet, "tau");
        assert_eq!(tavily[0].page_age.as_deref(), Some("2026-03-01"));
        let e = parse_searxng(b"<html>").unwrap_err();
        assert!(e.to_string().contains("SearXNG"), "{e}");
    }

    #[test]
    fn long_snippets_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_SNIPPET_CHARS + 5);
        let h = hit("u".into(), "t".into(), &long, None);
        assert_eq!(h.snippet.chars().count(), MAX_SNIPPET_CHARS + 1);
        assert!(h.snippet.ends_with('…'));
    }

    #[test]
    fn domains_cover_their_subdomains_only() {
        let hits = [
            "https://docs.example.com/a",
            "https://notexample.com/",
            "http://EXAMPLE.com:8080/",
        ]
        .iter()
        .map(|u| hit((*u).to_owned(), "t".into(), "", None))
        .collect::<Vec<_>>();
        let allowed = filter_domains(hits.clone(), &["example.com".into()], &[]);
        assert_eq!(allowed.len(), 2);
        let blocked = filter_domains(hits, &[], &["https://docs.example.com".into()]);
        assert_eq!(blocked.len(), 2);
        assert_eq!(host_of("https://user@[::1]:8080/x"), "[::1]");
    }

    #[test]
    fn the_model_reads_results_and_history_alike() {
        let hits = vec![hit(
            "https://a.example/".into(),
            "A".into(),
            "alpha beta",
            Some("2026".into()),
        )];
        let text = results_for_model("q", &hits);
        assert!(
            text.contains("[1] A\nURL: https://a.example/\nPublished: 2026\nalpha beta"),
            "{text}"
        );
        let back = history_result_for_model(&result_block_content(&hits));
        assert!(back.contains("alpha beta"), "{back}");
        let opaque = json!([{"type":"web_search_result","url":"https://a.example/","title":"A","encrypted_content":"EqgfCioIARgBIiQ3YTZiMjA0"}]);
        assert!(!history_result_for_model(&opaque).contains("Eqgf"));
        assert_eq!(
            history_result_for_model(&error_block_content("max_uses_exceeded")),
            "The web search failed: max_uses_exceeded."
        );
    }
}
