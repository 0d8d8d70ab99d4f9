//! One guard for every server of the bridge: what a hostile web page or a DNS-rebinding attack
//! would send is refused before routing, so a page the user happens to open cannot spend the
//! upstream key or Fabstir deposits (Anthropic front) or drive Claude Code (AG-UI front).
//!
//! - A browser `Origin` that is not a loopback page (`http://localhost:3000`), the bridge's own
//!   page (an origin whose host is the request's `Host`: the dashboard at `/ui`) or an
//!   `--allowed-origin` is refused (403).
//! - Without `--client-key`, a `Host` that is not an address of this machine (a name a rebinding
//!   page would use) is refused (403): with a key, names are fine (a proxy or Docker network).
//! - A POST that is not `application/json` is refused (415): browsers send "simple" cross-site
//!   requests (`text/plain`, forms) without a preflight.
//!
//! ```
//! use claude_bridge::guard::{Guard, Refusal};
//! let guard = Guard::new(&["https://app.example.com".into()], false).unwrap();
//! let ok = http::Request::post("/v1/messages").header("host", "127.0.0.1:3456")
//!     .header("content-type", "application/json").body(()).unwrap();
//! assert_eq!(guard.check(&ok), Ok(()));
//! let evil = http::Request::post("/v1/messages").header("host", "127.0.0.1:3456")
//!     .header("origin", "https://evil.example").header("content-type", "application/json")
//!     .body(()).unwrap();
//! assert!(matches!(guard.check(&evil), Err(Refusal::Origin(_))));
//! ```

use http::{HeaderMap, Method, Request, StatusCode};

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A browser page from an origin that may not call.
    #[error("the origin {0} may not call this bridge; start it with --allowed-origin {0}")]
    Origin(String),
    /// A `Host` name that is not an address of this machine, and no client key.
    #[error("Host {0} is not an address of this bridge; set --client-key to serve it under a name")]
    Host(String),
    /// A POST that is not JSON.
    #[error("send JSON with `Content-Type: application/json`")]
    NotJson,
}

impl Refusal {
    /// The HTTP status.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Origin(_) | Self::Host(_) => StatusCode::FORBIDDEN,
            Self::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }
}

/// The checks, configured once per server.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    allowed_origins: Vec<String>,
    client_key: bool,
}

impl Guard {
    /// A guard allowing `allowed_origins` (besides loopback pages; `*` for any) and, when
    /// `client_key` is set, any `Host` name.
    ///
    /// # Errors
    /// `*` without a client key (any web page could call).
    pub fn new(allowed_origins: &[String], client_key: bool) -> Result<Self, String> {
        let allowed_origins: Vec<String> = allowed_origins
            .iter()
            .map(|o| o.trim().trim_end_matches('/').to_owned())
            .filter(|o| !o.is_empty())
            .collect();
        if !client_key && allowed_origins.iter().any(|o| o == "*") {
            return Err(String::from(
                "--allowed-origin '*' lets any web page call this bridge: it needs --client-key",
            ));
        }
        Ok(Self {
            allowed_origins,
            client_key,
        })
    }

    /// Whether a browser origin may call: loopback pages, or an allowed one.
    #[must_use]
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/');
        let host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .unwrap_or("");
        matches!(without_port(host), "localhost" | "127.0.0.1" | "[::1]")
            || self.allowed_origins.iter().any(|o| o == "*" || o == origin)
    }

    /// Check a request before routing.
    ///
    /// # Errors
    /// The [`Refusal`] to answer with.
    pub fn check<B>(&self, req: &Request<B>) -> Result<(), Refusal> {
        let headers = req.headers();
        if let Some(origin) = header(headers, http::header::ORIGIN)
            && !self.origin_allowed(origin)
            && !same_origin(origin, header(headers, http::header::HOST))
        {
            return Err(Refusal::Origin(origin.to_owned()));
        }
        if !self.client_key {
            let host = header(headers, http::header::HOST).unwrap_or("");
            let name = without_port(host);
            let literal = name.trim_start_matches('[').trim_end_matches(']');
            if name != "localhost" && literal.parse::<std::net::IpAddr>().is_err() {
                return Err(Refusal::Host(host.to_owned()));
            }
        }
        if req.method() == Method::POST {
            let json = header(headers, http::header::CONTENT_TYPE).is_some_and(|c| {
                c.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("application/json")
            });
            if !json {
                return Err(Refusal::NotJson);
            }
        }
        Ok(())
    }
}

/// Whether `origin` is a page this server itself served: its host (and port) is the request's
/// `Host`. A rebinding page cannot pass this and the `Host` check below both.
fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let origin = origin.trim_end_matches('/');
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    matches!((authority, host), (Some(a), Some(h)) if !a.is_empty() && a.eq_ignore_ascii_case(h))
}

fn header(headers: &HeaderMap, name: http::header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `host:port` → `host` (an IPv6 literal keeps its brackets).
fn without_port(host: &str) -> &str {
    host.rsplit_once(':')
        .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        .map_or(host, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)], method: Method) -> Request<()> {
        let mut builder = Request::builder().method(method).uri("/v1/messages");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn what_a_web_page_sends_is_refused() {
        let guard = Guard::new(&[], false).unwrap_or_else(|e| panic!("{e}"));
        let json = ("content-type", "application/json");
        let local = ("host", "127.0.0.1:3456");
        assert_eq!(guard.check(&request(&[local, json], Method::POST)), Ok(()));
        assert_eq!(
            guard.check(&request(
                &[
                    ("host", "localhost:3456"),
                    ("origin", "http://localhost:3000"),
                    json
                ],
                Method::POST
            )),
            Ok(())
        );
        assert_eq!(
            guard.check(&request(&[("host", "[::1]:3456"), json], Method::POST)),
            Ok(())
        );
        assert!(matches!(
            guard.check(&request(
                &[local, ("origin", "https://evil.example"), json],
                Method::POST
            )),
            Err(Refusal::Origin(_))
        ));
        assert!(matches!(
            guard.check(&request(
                &[("host", "rebound.evil.example:3456"), json],
                Method::POST
            )),
            Err(Refusal::Host(_))
        ));
        assert_eq!(
            guard.check(&request(
                &[local, ("content-type", "text/plain")],
                Method::POST
            )),
            Err(Refusal::NotJson)
        );
        assert_eq!(guard.check(&request(&[local], Method::GET)), Ok(()));
    }

    #[test]
    fn a_client_key_allows_names_and_star_needs_one() {
        let keyed = Guard::new(&["https://app.example.com/".into()], true)
            .unwrap_or_else(|e| panic!("{e}"));
        let json = ("content-type", "application/json");
        assert_eq!(
            keyed.check(&request(&[("host", "bridge:3456"), json], Method::POST)),
            Ok(())
        );
        assert_eq!(
            keyed.check(&request(
                &[
                    ("host", "bridge"),
                    ("origin", "https://app.example.com"),
                    json
                ],
                Method::POST
            )),
            Ok(())
        );
        assert!(Guard::new(&["*".into()], false).is_err());
    }

    #[test]
    fn the_bridges_own_page_may_call_it() {
        let keyed = Guard::new(&[], true).unwrap_or_else(|e| panic!("{e}"));
        let json = ("content-type", "application/json");
        let own = [
            ("host", "bridge.team.example"),
            ("origin", "https://bridge.team.example"),
            json,
        ];
        assert_eq!(keyed.check(&request(&own, Method::POST)), Ok(()));
        let other = [
            ("host", "bridge.team.example"),
            ("origin", "https://evil.example"),
            json,
        ];
        assert!(matches!(
            keyed.check(&request(&other, Method::POST)),
            Err(Refusal::Origin(_))
        ));
        // Without a key, a rebinding page's own origin still fails the Host check.
        let open = Guard::new(&[], false).unwrap_or_else(|e| panic!("{e}"));
        let rebound = [
            ("host", "rebound.evil.example:3456"),
            ("origin", "http://rebound.evil.example:3456"),
            json,
        ];
        assert!(matches!(
            open.check(&request(&rebound, Method::POST)),
            Err(Refusal::Host(_))
        ));
    }
}
