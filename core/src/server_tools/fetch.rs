//! Web fetch: which addresses a `web_fetch` call may open, and the two ways a fetched page is
//! written — the `web_fetch_tool_result` block the client sees (Anthropic's `web_fetch_result`
//! with the page as a `document`), and the `tool_result` text the model reads.
//!
//! As with Anthropic's own tool, the model may only open an address that is already in the
//! conversation — written by the user, or returned by an earlier search or fetch — never one
//! it made up: an address built by the model could carry what it read elsewhere to a server
//! of someone else's choosing. [`SeenUrls`] keeps those addresses. The network-level checks
//! (no private or loopback addresses, the size and time limits) are the host's, which does the
//! HTTP.
//!
//! ```
//! use bridge_core::server_tools::fetch::SeenUrls;
//! let mut seen = SeenUrls::default();
//! seen.add_text("Read https://docs.example.com/guide#install, then tell me.");
//! assert!(seen.contains("https://docs.example.com/guide"));
//! assert!(seen.contains("https://DOCS.example.com/guide/"));
//! assert!(!seen.contains("https://docs.example.com/secret"));
//! ```

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::turn::ToolFailure;

/// Longest address a call may ask for (characters), as Anthropic's tool.
pub const MAX_URL_CHARS: usize = 250;

/// Characters per token when `max_content_tokens` is turned into a length.
const CHARS_PER_TOKEN: usize = 4;

/// A page the host fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPage {
    /// The address asked for (after redirects, the address the page came from).
    pub url: String,
    /// The page's title, when it has one.
    pub title: Option<String>,
    /// What the page holds.
    pub body: PageBody,
    /// When it was fetched: Unix seconds, from the host's clock.
    pub retrieved_at: u64,
}

/// What a fetched page holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageBody {
    /// Text: a plain or structured text page as it is, an HTML page's text.
    Text(String),
    /// A PDF: the file for the client, its text (when it has one) for the model.
    Pdf {
        /// The file, base64.
        base64: String,
        /// Its text.
        text: Option<String>,
    },
}

/// The addresses a conversation holds, compared without their fragment, a trailing `/` or the
/// case of scheme and host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeenUrls(BTreeSet<String>);

impl SeenUrls {
    /// Every `http(s)://` address in `text`.
    pub fn add_text(&mut self, text: &str) {
        for url in urls_in(text) {
            self.0.insert(normalise(url));
        }
    }

    /// One address.
    pub fn add(&mut self, url: &str) {
        self.0.insert(normalise(url));
    }

    /// Every address in the strings of `value` (a message, a block), at any depth.
    pub fn add_value(&mut self, value: &Value) {
        match value {
            Value::String(s) => self.add_text(s),
            Value::Array(items) => items.iter().for_each(|v| self.add_value(v)),
            Value::Object(fields) => fields.values().for_each(|v| self.add_value(v)),
            _ => {}
        }
    }

    /// Whether `url` is one of them.
    #[must_use]
    pub fn contains(&self, url: &str) -> bool {
        self.0.contains(&normalise(url))
    }
}

/// The `http://` and `https://` addresses in `text`: each runs to a space, a quote, a bracket
/// or an angle bracket, and loses the punctuation a sentence puts after it.
pub fn urls_in(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            let at = rest.find("http")?;
            let candidate = &rest[at..];
            rest = &candidate[4..];
            if !(candidate.starts_with("http://") || candidate.starts_with("https://")) {
                continue;
            }
            let end = candidate
                .find(|c: char| {
                    c.is_whitespace()
                        || matches!(
                            c,
                            '"' | '\'' | '<' | '>' | '`' | ')' | ']' | '}' | '|' | '\\'
                        )
                })
                .unwrap_or(candidate.len());
            let url = candidate[..end].trim_end_matches(['.', ',', ';', ':', '!', '?']);
            rest = &candidate[end..];
            if url.len() > "https://".len() {
                return Some(url);
            }
        }
    })
}

/// `url` without its fragment or trailing `/`, scheme and host in lower case.
fn normalise(url: &str) -> String {
    let url = url.trim();
    let url = url.split('#').next().unwrap_or(url);
    let url = url.trim_end_matches('/');
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (host, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
            format!(
                "{}://{}{path}",
                scheme.to_ascii_lowercase(),
                host.to_ascii_lowercase()
            )
        }
        None => url.to_owned(),
    }
}

/// Why the address of a call may not be fetched, before any network: not an `http(s)`
/// address, too long, outside the tool's domains, or not in the conversation.
///
/// # Errors
/// The refusal, with Anthropic's `error_code` and a message for the model.
pub fn check_url(
    url: &str,
    allowed: &[String],
    blocked: &[String],
    seen: &SeenUrls,
) -> Result<(), ToolFailure> {
    let refuse = |code: &'static str, message: String| Err(ToolFailure { code, message });
    if url.chars().count() > MAX_URL_CHARS {
        return refuse(
            "url_too_long",
            format!("the URL is longer than {MAX_URL_CHARS} characters"),
        );
    }
    let scheme_ok = url.split_once("://").is_some_and(|(scheme, rest)| {
        matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") && !rest.is_empty()
    });
    if !scheme_ok {
        return refuse(
            "invalid_tool_input",
            String::from("the URL must be an http:// or https:// address"),
        );
    }
    if !super::search::domain_allowed(url, allowed, blocked) {
        return refuse(
            "url_not_allowed",
            String::from("the URL's domain is not among the domains this tool may fetch"),
        );
    }
    if !seen.contains(url) {
        return refuse(
            "url_not_in_prior_context",
            String::from(
                "web_fetch opens only a URL that is already in the conversation (given by the \
                 user, or returned by a search or an earlier fetch); ask the user for it, or \
                 search for it first",
            ),
        );
    }
    Ok(())
}

/// `text` cut to `max_content_tokens` (about four characters a token), with a note saying so.
fn within(text: &str, max_content_tokens: Option<u32>) -> std::borrow::Cow<'_, str> {
    let limit = max_content_tokens
        .and_then(|t| usize::try_from(t).ok())
        .map(|t| t.saturating_mul(CHARS_PER_TOKEN));
    match limit.and_then(|l| text.char_indices().nth(l)) {
        Some((cut, _)) => format!(
            "{}\n[… the page is longer; cut at max_content_tokens]",
            &text[..cut]
        )
        .into(),
        None => text.into(),
    }
}

/// The `content` of the `web_fetch_tool_result` block the client gets: a `web_fetch_result`
/// holding the page as a `document` (a text source, or the PDF itself).
#[must_use]
pub fn result_block_content(
    page: &FetchedPage,
    max_content_tokens: Option<u32>,
    citations: bool,
) -> Value {
    let source = match &page.body {
        PageBody::Text(text) => json!({
            "type": "text",
            "media_type": "text/plain",
            "data": within(text, max_content_tokens),
        }),
        PageBody::Pdf { base64, .. } => json!({
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64,
        }),
    };
    let mut document = json!({"type": "document", "source": source});
    if let Some(title) = &page.title {
        document["title"] = Value::from(title.as_str());
    }
    if citations {
        document["citations"] = json!({"enabled": true});
    }
    json!({
        "type": "web_fetch_result",
        "url": page.url,
        "content": document,
        "retrieved_at": iso8601_utc(page.retrieved_at),
    })
}

/// `unix_seconds` as `YYYY-MM-DDTHH:MM:SSZ` (the proleptic Gregorian calendar, UTC).
#[must_use]
pub fn iso8601_utc(unix_seconds: u64) -> String {
    let days = unix_seconds / 86_400;
    let second_of_day = unix_seconds % 86_400;
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (non-negative here).
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

/// `{"type":"web_fetch_tool_result_error","error_code":code}`.
#[must_use]
pub fn error_block_content(code: &str) -> Value {
    json!({"type": "web_fetch_tool_result_error", "error_code": code})
}

/// The text the model reads for a fetched page (a `tool_result`).
#[must_use]
pub fn page_for_model(page: &FetchedPage, max_content_tokens: Option<u32>) -> String {
    let text = match &page.body {
        PageBody::Text(text) => within(text, max_content_tokens),
        PageBody::Pdf {
            text: Some(text), ..
        } => within(text, max_content_tokens),
        PageBody::Pdf { text: None, .. } => {
            "[a PDF without extractable text (scanned pages?)]".into()
        }
    };
    let title = page
        .title
        .as_deref()
        .map(|t| format!("Title: {t}\n"))
        .unwrap_or_default();
    format!("Fetched {}\n{title}\n{text}", page.url)
}

/// The text the model reads for a `web_fetch_tool_result` block of the conversation's history.
#[must_use]
pub fn history_result_for_model(content: &Value) -> String {
    let Some(url) = content.get("url").and_then(Value::as_str) else {
        let code = content
            .get("error_code")
            .and_then(Value::as_str)
            .unwrap_or("unavailable");
        return format!("The web fetch failed: {code}.");
    };
    let document = content.get("content").unwrap_or(&Value::Null);
    let title = document
        .get("title")
        .and_then(Value::as_str)
        .map(|t| format!("Title: {t}\n"))
        .unwrap_or_default();
    let source = document.get("source").unwrap_or(&Value::Null);
    let text = match source.get("type").and_then(Value::as_str) {
        Some("text") => source
            .get("data")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        _ => "[a PDF; fetch it again to read it]",
    };
    format!("Fetched {url}\n{title}\n{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_found_in_prose_markdown_and_json() {
        let text = r#"See https://a.example/x. Or (https://b.example/y), "http://c.example:8080/z?q=1", <https://d.example/>; and [e](https://e.example/e) http://"#;
        let found: Vec<&str> = urls_in(text).collect();
        assert_eq!(
            found,
            [
                "https://a.example/x",
                "https://b.example/y",
                "http://c.example:8080/z?q=1",
                "https://d.example/",
                "https://e.example/e"
            ]
        );
    }

    #[test]
    fn times_are_written_in_iso_8601() {
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601_utc(1_795_766_400), "2026-11-27T08:00:00Z");
        assert_eq!(iso8601_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601_utc(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    #[test]
    fn a_call_is_checked_before_any_network() {
        let mut seen = SeenUrls::default();
        seen.add_value(&json!({"content":[{"type":"text","text":"read https://docs.rs/serde"}]}));
        let ok = check_url("https://docs.rs/serde/", &[], &[], &seen);
        assert!(ok.is_ok(), "{ok:?}");
        let code = |url: &str, allowed: &[String], blocked: &[String]| {
            check_url(url, allowed, blocked, &seen).unwrap_err().code
        };
        assert_eq!(
            code("https://evil.example/?q=secret", &[], &[]),
            "url_not_in_prior_context"
        );
        assert_eq!(code("file:///etc/passwd", &[], &[]), "invalid_tool_input");
        assert_eq!(code("docs.rs/serde", &[], &[]), "invalid_tool_input");
        let long = format!("https://docs.rs/{}", "a".repeat(MAX_URL_CHARS));
        assert_eq!(code(&long, &[], &[]), "url_too_long");
        assert_eq!(
            code("https://docs.rs/serde", &["crates.io".into()], &[]),
            "url_not_allowed"
        );
        assert_eq!(
            code("https://docs.rs/serde", &[], &["docs.rs".into()]),
            "url_not_allowed"
        );
    }

    #[test]
    fn a_page_is_a_document_for_the_client_and_text_for_the_model() {
        let page = FetchedPage {
            url: "https://a.example/".into(),
            title: Some("A".into()),
            body: PageBody::Text("x".repeat(100)),
            retrieved_at: 1_795_766_400,
        };
        let block = result_block_content(&page, Some(5), false);
        assert_eq!(block["type"], "web_fetch_result");
        assert_eq!(block["content"]["type"], "document");
        assert_eq!(block["content"]["title"], "A");
        assert_eq!(block["content"]["source"]["media_type"], "text/plain");
        assert!(block["content"].get("citations").is_none());
        let data = block["content"]["source"]["data"].as_str().unwrap();
        assert!(data.starts_with(&"x".repeat(20)) && !data.contains(&"x".repeat(21)));
        assert!(data.contains("max_content_tokens"));
        let model = page_for_model(&page, None);
        assert!(model.starts_with("Fetched https://a.example/\nTitle: A\n"));
        assert!(model.ends_with(&"x".repeat(100)));
        assert_eq!(
            history_result_for_model(&block),
            format!("Fetched https://a.example/\nTitle: A\n\n{}", data)
        );
        let pdf = FetchedPage {
            body: PageBody::Pdf {
                base64: "JVBER".into(),
                text: Some("Quarterly".into()),
            },
            ..page
        };
        let block = result_block_content(&pdf, None, true);
        assert_eq!(block["content"]["source"]["type"], "base64");
        assert_eq!(block["content"]["citations"]["enabled"], true);
        assert!(page_for_model(&pdf, None).ends_with("Quarterly"));
        assert_eq!(
            history_result_for_model(&error_block_content("url_not_accessible")),
            "The web fetch failed: url_not_accessible."
        );
    }
}
