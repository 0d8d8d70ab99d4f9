//! The web fetch the bridge runs `web_fetch` through for upstreams without one: the page at a
//! call's address, as text for the model and as a document for the client.
//!
//! What reaches the network is checked here, after the core has checked the address against
//! the tool's domains and the conversation (`bridge_core::server_tools::fetch`):
//!
//! - **No private or loopback addresses.** A name is resolved by the bridge's own resolver,
//!   which drops loopback, private, link-local, CGNAT and other non-public addresses; an
//!   address written as an IP is checked the same way. The connection goes to an address that
//!   was checked (no second lookup an attacker's DNS could answer differently).
//!   `--fetch-allow-private` (or `allow_private = true` under `[fetch]`) lifts this, for a
//!   bridge whose users may read an intranet.
//! - **Redirects** are followed by hand, at most five, each hop checked like the first
//!   (scheme, domains, address).
//! - **Limits:** 20 s for the whole fetch, 10 MiB of body (an HTML or text page longer than
//!   that is cut, a PDF refused), no proxy from the environment.
//! - **What a page may be:** HTML (its text, links as numbered footnotes, so the model can
//!   fetch them next), plain or structured text (JSON, XML, Markdown, CSV) as it is, PDF (the
//!   file for the client, its text for the model). Anything else is `unsupported_content_type`.
//!
//! Failures carry the error codes of Anthropic's tool: `url_not_accessible` (unreachable, an
//! error status, a refused address), `too_many_requests` (the site answered 429),
//! `unsupported_content_type`, `url_not_allowed` (a redirect outside the tool's domains).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bridge_core::server_tools::fetch::{FetchedPage, PageBody};
use bridge_core::server_tools::search::domain_allowed;
use bridge_core::server_tools::turn::{FetchCall, ToolFailure};
use tracing::{info, warn};

/// How long one fetch may take, redirects included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(20);

/// Most body bytes read from a page.
const MAX_PAGE_BYTES: usize = 10 << 20;

/// Most redirects followed.
const MAX_REDIRECTS: usize = 5;

/// Width HTML text is wrapped at (links are never wrapped).
const TEXT_WIDTH: usize = 120;

/// Fetches pages for `web_fetch` calls.
#[derive(Debug)]
pub struct WebFetcher {
    http: reqwest::Client,
    allow_private: bool,
}

impl WebFetcher {
    /// A fetcher; `allow_private` lets it open loopback and private addresses.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(allow_private: bool, ca_cert: Option<&std::path::Path>) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(CheckedResolver { allow_private }))
            .use_preconfigured_tls(super::upstream::tls_config(ca_cert)?)
            .user_agent(concat!(
                "claude-bridge/",
                env!("CARGO_PKG_VERSION"),
                " (web_fetch)"
            ))
            .build()
            .map_err(|e| format!("cannot build the web fetch client: {e}"))?;
        Ok(Self {
            http,
            allow_private,
        })
    }

    /// The page `call` asks for.
    ///
    /// # Errors
    /// The address is refused, the site cannot be reached or refuses, or the page is of a
    /// kind the tool does not read (the failure says which, in Anthropic's codes).
    pub async fn fetch(&self, call: &FetchCall, now_unix: u64) -> Result<FetchedPage, ToolFailure> {
        let started = std::time::Instant::now();
        let outcome = tokio::time::timeout(FETCH_TIMEOUT, self.fetch_page(call, now_unix))
            .await
            .unwrap_or_else(|_| {
                Err(not_accessible(format!(
                    "the site did not answer within {} s",
                    FETCH_TIMEOUT.as_secs()
                )))
            });
        match &outcome {
            Ok(page) => info!(
                url = %page.url,
                kind = match page.body { PageBody::Text(_) => "text", PageBody::Pdf { .. } => "pdf" },
                ms = started.elapsed().as_millis(),
                "web fetch"
            ),
            Err(failure) => {
                warn!(url = %call.url, code = failure.code, reason = %failure.message, "web fetch failed");
            }
        }
        outcome
    }

    async fn fetch_page(
        &self,
        call: &FetchCall,
        now_unix: u64,
    ) -> Result<FetchedPage, ToolFailure> {
        let mut url = reqwest::Url::parse(&call.url)
            .map_err(|e| failure("invalid_tool_input", format!("the URL does not parse: {e}")))?;
        let mut hops = 0;
        let response = loop {
            self.check_hop(&url, call)?;
            let response = self
                .http
                .get(url.clone())
                .header(
                    "accept",
                    "text/html, text/*;q=0.9, application/pdf, application/json, */*;q=0.1",
                )
                .send()
                .await
                .map_err(|e| not_accessible(describe(&e)))?;
            if !response.status().is_redirection() {
                break response;
            }
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(not_accessible(format!(
                    "the site redirected more than {MAX_REDIRECTS} times"
                )));
            }
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| {
                    not_accessible(format!(
                        "the site answered {} without a Location",
                        response.status()
                    ))
                })?;
            url = url.join(location).map_err(|e| {
                not_accessible(format!(
                    "the site redirected to {location:?}, which does not parse: {e}"
                ))
            })?;
        };
        let status = response.status();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(failure(
                "too_many_requests",
                String::from("the site answered 429 (too many requests); try again later"),
            ));
        }
        if !status.is_success() {
            return Err(not_accessible(format!("the site answered {status}")));
        }
        let kind = PageKind::of(
            response
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|t| t.to_str().ok())
                .unwrap_or_default(),
        )?;
        let final_url = response.url().to_string();
        let (bytes, cut) = read_capped(response).await?;
        let (title, body) = match kind {
            PageKind::Html => {
                let (title, text) = tokio::task::spawn_blocking(move || html_text(&bytes))
                    .await
                    .map_err(|e| not_accessible(format!("the page could not be read: {e}")))?;
                (title, PageBody::Text(with_cut_note(text, cut)))
            }
            PageKind::Text => (
                None,
                PageBody::Text(with_cut_note(
                    String::from_utf8_lossy(&bytes).into_owned(),
                    cut,
                )),
            ),
            PageKind::Pdf => {
                if cut {
                    return Err(not_accessible(format!(
                        "the PDF is larger than {MAX_PAGE_BYTES} bytes"
                    )));
                }
                let base64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
                let text = super::pdf_text::text_of_pdf(bytes)
                    .await
                    .inspect_err(|why| warn!(url = %final_url, "a fetched PDF has no text for the model: {why}"))
                    .ok();
                (None, PageBody::Pdf { base64, text })
            }
        };
        Ok(FetchedPage {
            url: final_url,
            title,
            body,
            retrieved_at: now_unix,
        })
    }

    /// What every hop must be: http(s), within the tool's domains, and — written as an IP —
    /// a public address unless private ones are allowed (names are checked by the resolver).
    fn check_hop(&self, url: &reqwest::Url, call: &FetchCall) -> Result<(), ToolFailure> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(not_accessible(format!("{url} is not an http(s) address")));
        }
        if !domain_allowed(
            url.as_str(),
            &call.tool.allowed_domains,
            &call.tool.blocked_domains,
        ) {
            return Err(failure(
                "url_not_allowed",
                format!("the page redirected to {url}, outside the domains this tool may fetch"),
            ));
        }
        let host = url.host_str().unwrap_or_default();
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>()
            && !self.allow_private
            && !is_public(ip)
        {
            return Err(not_accessible(format!("{ip} {PRIVATE}")));
        }
        Ok(())
    }
}

/// Why a non-public address is refused, and how to allow it.
const PRIVATE: &str = "is a private, loopback or otherwise non-public address, which web_fetch \
does not open (an operator may allow it with --fetch-allow-private)";

/// What a page's `content-type` makes it.
enum PageKind {
    Html,
    Text,
    Pdf,
}

impl PageKind {
    fn of(content_type: &str) -> Result<Self, ToolFailure> {
        let media = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            "text/html" | "application/xhtml+xml" => Ok(Self::Html),
            "application/pdf" => Ok(Self::Pdf),
            // A server that names no type: read it as text (most such pages are).
            "" => Ok(Self::Text),
            m if m.starts_with("text/")
                || m.ends_with("+json")
                || m.ends_with("+xml")
                || matches!(
                    m,
                    "application/json" | "application/xml" | "application/javascript"
                ) =>
            {
                Ok(Self::Text)
            }
            other => Err(failure(
                "unsupported_content_type",
                format!("the page is {other}; web_fetch reads HTML, text and PDF"),
            )),
        }
    }
}

/// The body, at most [`MAX_PAGE_BYTES`], and whether it was cut there.
async fn read_capped(mut response: reqwest::Response) -> Result<(Vec<u8>, bool), ToolFailure> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| not_accessible(describe(&e)))?
    {
        let room = MAX_PAGE_BYTES - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

fn with_cut_note(mut text: String, cut: bool) -> String {
    if cut {
        text.push_str(&format!(
            "\n[… the page is longer than the {MAX_PAGE_BYTES} bytes web_fetch reads]"
        ));
    }
    text
}

/// An HTML page's title and text (links as numbered footnotes).
fn html_text(html: &[u8]) -> (Option<String>, String) {
    let text = html2text::config::plain()
        .link_footnotes(true)
        .no_link_wrapping()
        .string_from_read(html, TEXT_WIDTH)
        .unwrap_or_else(|e| format!("[the page's HTML could not be read: {e}]"));
    (title_of(html), text.trim().to_owned())
}

/// The text of the page's `<title>`, entities decoded.
fn title_of(html: &[u8]) -> Option<String> {
    let head = &html[..html.len().min(64 << 10)];
    let lower = head.to_ascii_lowercase();
    let open = memchr::memmem::find(&lower, b"<title")?;
    let start = open + memchr::memchr(b'>', &lower[open..])? + 1;
    let end = start + memchr::memmem::find(&lower[start..], b"</title")?;
    let title = html2text::config::plain_no_decorate()
        .string_from_read(&head[start..end], usize::MAX / 4)
        .ok()?;
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty()).then_some(title)
}

fn failure(code: &'static str, message: String) -> ToolFailure {
    ToolFailure { code, message }
}

fn not_accessible(message: String) -> ToolFailure {
    failure("url_not_accessible", message)
}

/// A reqwest error in words, without the address's secrets.
fn describe(error: &reqwest::Error) -> String {
    format!(
        "the site could not be reached: {}",
        crate::redact::redact(&crate::error::with_causes(error))
    )
}

/// Whether `ip` is a public unicast address (not loopback, private, link-local, CGNAT,
/// documentation, benchmarking, multicast, reserved or unspecified; IPv4 inside IPv6 is
/// judged as IPv4).
#[must_use]
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let s = v6.segments();
            // NAT64 (64:ff9b::/96) carries an IPv4 address in its last 32 bits.
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_public_v4(Ipv4Addr::from_bits(
                    (u32::from(s[6]) << 16) | u32::from(s[7]),
                ));
            }
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (s[0] == 0x2001 && s[1] == 0x0db8)) // documentation
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_unspecified()
        || ip.is_multicast()
        || a == 0
        || a >= 240
        || (a == 100 && (b & 0xc0) == 64) // CGNAT 100.64/10
        || (a == 198 && (b & 0xfe) == 18) // benchmarking 198.18/15
        || (a == 192 && b == 0 && ip.octets()[2] == 0)) // IETF protocol assignments
}

/// The fetcher's resolver: the system's answer without the addresses web_fetch may not open.
struct CheckedResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let usable: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| allow_private || is_public(a.ip()))
                .collect();
            if usable.is_empty() {
                let why: Box<dyn std::error::Error + Send + Sync> = if found.is_empty() {
                    format!("{host} has no address").into()
                } else {
                    format!("{host} resolves to {} {PRIVATE}", found[0].ip()).into()
                };
                return Err(why);
            }
            let addrs: reqwest::dns::Addrs = Box::new(usable.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "198.18.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn html_becomes_text_with_its_title_and_links() {
        let html = br#"<!doctype html><html><head><title>The &amp; Guide</title>
            <style>p { color: red }</style><script>var x = 1;</script></head>
            <body><h1>Install</h1><p>Run <code>cargo add x</code>.</p>
            <p>Next: <a href="https://docs.example/next">the next page</a></p></body></html>"#;
        let (title, text) = html_text(html);
        assert_eq!(title.as_deref(), Some("The & Guide"));
        assert!(
            text.contains("Install") && text.contains("cargo add x"),
            "{text}"
        );
        assert!(text.contains("https://docs.example/next"), "{text}");
        assert!(
            !text.contains("var x") && !text.contains("color: red"),
            "{text}"
        );
    }

    #[test]
    fn content_types_decide_how_a_page_is_read() {
        assert!(matches!(
            PageKind::of("text/html; charset=utf-8"),
            Ok(PageKind::Html)
        ));
        assert!(matches!(PageKind::of("application/pdf"), Ok(PageKind::Pdf)));
        assert!(matches!(
            PageKind::of("application/ld+json"),
            Ok(PageKind::Text)
        ));
        assert!(matches!(PageKind::of("text/markdown"), Ok(PageKind::Text)));
        let refused = PageKind::of("image/png").err().unwrap();
        assert_eq!(refused.code, "unsupported_content_type");
        assert!(refused.message.contains("image/png"));
    }
}
