//! The dashboard page: three files under `host-native/ui/`, compiled into the binary (no CDN,
//! no build step, works offline), served with a strict Content-Security-Policy — scripts,
//! styles and requests from this bridge only, nothing inline, no frames, no forms posting
//! elsewhere.
//!
//! ```
//! use claude_bridge::dashboard::page::asset;
//! let page = asset("/ui", false).unwrap();
//! let csp = page.headers()["content-security-policy"].to_str().unwrap();
//! assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
//! assert!(asset("/ui/nope.js", false).is_none());
//! ```

use http::{HeaderValue, Response, StatusCode};

use crate::server::body::{ResponseBody, empty, full};

/// What the page may load and call: its own script and style, its own API, inline SVG.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const INDEX: &str = include_str!("../../ui/index.html");
const SCRIPT: &str = include_str!("../../ui/app.js");
const STYLE: &str = include_str!("../../ui/app.css");

/// The file at `path` (`/ui`, `/ui/`, `/ui/index.html`, `/ui/app.js`, `/ui/app.css`), as a
/// response (no body for `HEAD`); `None`: no such file.
#[must_use]
pub fn asset(path: &str, head: bool) -> Option<Response<ResponseBody>> {
    let (content_type, body) = match path.trim_end_matches('/') {
        "/ui" | "/ui/index.html" => ("text/html; charset=utf-8", INDEX),
        "/ui/app.js" => ("text/javascript; charset=utf-8", SCRIPT),
        "/ui/app.css" => ("text/css; charset=utf-8", STYLE),
        _ => return None,
    };
    let mut response = Response::new(if head { empty() } else { full(body) });
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-type", content_type),
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
        ("cache-control", "no-cache"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    Some(response)
}
