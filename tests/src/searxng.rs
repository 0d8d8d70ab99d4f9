//! A local SearXNG: a search server for end-to-end tests that speaks SearXNG's search API and
//! refuses what SearXNG refuses.
//!
//! It acts as a SearXNG deployment whose `settings.yml` has `search.formats: [html, json]` (the
//! shipped `searx/settings.yml` enables only `html`, so a stock instance answers `format=json` with
//! 403) and a single web engine, [`ENGINE`], whose hits for a query are whatever the test's `answer`
//! function returns. Every request is recorded ([`SearxNg::queries`]), refused ones included.
//!
//! # Real SearXNG behaviour (what is modelled, and where it comes from)
//!
//! Read in the searxng repository (`searxng/searxng`, master of 2026-08) and checked by running that
//! source's Flask app (`searx.webapp.app.test_client()`) with an offline test engine:
//!
//! - Routes (`searx/webapp.py`): `/search` and `/` take GET and POST; `/healthz` takes GET and
//!   answers `OK` (`text/plain; charset=utf-8`). Flask adds HEAD (the GET answer without a body) and
//!   OPTIONS (200, empty, `Allow`) to each; any other method is werkzeug's 405 page with an `Allow`
//!   header. `/` with a non-empty `q` is a 308 to `/search?<the same query string>`; without one it is
//!   the start page. Any other path (`/search/` too: no slash redirect) is the 404 page of
//!   `searx/templates/simple/404.html` ("Page not found"). The real instance has more pages
//!   (`/config`, `/preferences`, `/stats`, `/robots.txt`, ...); here they are 404.
//! - Parameters (`searx/webapp.py`, `pre_request`): POST form fields (an
//!   `application/x-www-form-urlencoded` body) and URL query arguments are merged, the form winning;
//!   of a repeated name the first value counts.
//! - `format` (`searx/webapp.py`, `search`; `OUTPUT_FORMATS` in `searx/settings_defaults.py`):
//!   absent, or not one of `html csv json rss` (`JSON`, `xml`, empty) → `html`. A known format not in
//!   `search.formats` (`csv`, `rss` here) → `flask.abort(403)`: werkzeug's HTML "403 Forbidden" page.
//! - `q` (`searx/webapp.py`, `search`): absent or empty → for `json` status 400, body
//!   `{"error": "No query"}` (`index_error`); for `html` the start page with status 200. A `q` of
//!   only spaces passes, and searches for the empty string.
//! - Validation (`searx/webadapter.py`, `get_search_query_from_webapp`, in this order), each failure
//!   a `SearxParameterException` (`searx/exceptions.py`) answered with status 400 and
//!   `{"error": "<message>"}` (the start page for `html`), the message being
//!   `Empty <name> parameter` for an empty value, else `Invalid value <value> for parameter <name>`:
//!   - `pageno` (default `1`): ASCII digits, at least 1 (`007` is fine).
//!   - `safesearch` (default `0`): digits whose integer is 0..=2; the message shows the integer
//!     (`0003` → `Invalid value 3 for parameter safesearch`).
//!   - `time_range`: absent, empty or `None`, or one of `day week month year`.
//!   - `timeout_limit`: absent, empty or `None`, or what Python's `float()` takes (`1.5`, ` 2 `,
//!     `1_0`, `inf`).
//!   - a parameter named `engine_data…` must split on `-` into exactly three parts, else Python
//!     raises a `ValueError`, which `search` answers with status 500, `{"error": "search error"}`.
//!   - `language` (default `auto`): `auto` or `^[a-z]{2,3}(-[a-zA-Z]{2})?$` (`all`, `en`, `en-US`;
//!     not `EN`, `english`). Python's `$` also matches before a final newline: such a value passes
//!     the check and then fails later in the search, status 500 `{"error": "search error"}`.
//!   - `categories` and `engines` are not refused: unknown names are dropped
//!     (`parse_category_form`, `parse_generic`) and the search goes on.
//! - The JSON answer (`searx/webutils.py`, `get_json_response`; `application/json`, no charset) has,
//!   in this order, `query` (the words of `q` joined by one space, `RawTextQuery.getQuery` in
//!   `searx/query.py`), `results`, `answers`, `corrections`, `infoboxes`, `suggestions`,
//!   `unresponsive_engines` (pairs `[engine, message]`). There is no `number_of_results`: commit
//!   dd27fce3b (2026-05-25, "drop meaningless field") removed it; releases before carry it.
//! - Each result is a `MainResult` (`searx/result_types/_base.py`; engines such as duckduckgo and
//!   google add these) serialised by `as_dict` and `webutils.JSONEncoder`, keys in this order:
//!   `template` (`default.html`), `title`, `content`, `img_src`, `iframe_src`, `audio_src`,
//!   `thumbnail` (all `""`), `publishedDate` (`datetime.isoformat()` or null), `pubdate`
//!   (`%Y-%m-%d %H:%M:%S%z` or `""`), `length` (null), `views`, `author`, `metadata`, `priority`
//!   (`""`), `engines` (list), `open_group`, `close_group` (false), `positions`, `score`, `category`
//!   (`general`), `url`, `engine`, `parsed_url` (the six fields of Python's `urlparse`).
//! - Result processing (`searx/result_types/_base.py`, `searx/results.py`): the URL is re-parsed
//!   (scheme defaults to `http`) and re-assembled; runs of space/tab/newline in title and content
//!   become one space, both are stripped, and a content equal to the title is emptied. Results with
//!   the same template, URL without scheme and image merge: the longer title and content win, an
//!   `https` scheme wins, positions are joined. Score = Σ len(positions) / position (engine weight 1);
//!   the list is sorted by score, descending, stable. A result with an empty URL makes the merge
//!   raise; an online engine then loses that result and all after it and is listed in
//!   `unresponsive_engines` as `[engine, "unexpected crash"]` (`searx/search/processors/online.py`,
//!   `searx/search/processors/abstract.py`, `webutils.get_translated_errors`).
//! - Headers: every answer carries `search.default_http_headers` of `searx/settings.yml`
//!   (`X-Content-Type-Options`, `X-Download-Options`, `X-Robots-Tag`, `Referrer-Policy`) and a
//!   `Server-Timing` header (`post_request`).
//!
//! # Not modelled
//!
//! The HTML pages are minimal documents, not SearXNG's templates. The query syntax of `q`
//! (`!bang`, `!!external`, `:lang`, `<timeout`) is not parsed: every word is part of the query.
//! Cookies and the `preferences` parameter are ignored. `answer` gets the query only, so every
//! `pageno` gets the same hits (a real paging engine returns the next page). Multipart form bodies
//! are not read. Non-ASCII digits in `pageno`/`safesearch` are refused with 400 (Python's `isdigit`
//! would take some, then crash with 500 on others). Punycode hosts (`xn--…`) are not decoded. The
//! order of the `Allow` header is fixed here (werkzeug's comes from a Python set).

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The engine every hit is credited to (a web engine of the `general` category in SearXNG's
/// shipped settings).
pub const ENGINE: &str = "duckduckgo";

/// `search.formats` of the deployment this server stands in for.
pub const FORMATS: &[&str] = &["html", "json"];

/// SearXNG's `OUTPUT_FORMATS` (`searx/settings_defaults.py`): the formats it knows at all.
const OUTPUT_FORMATS: &[&str] = &["html", "csv", "json", "rss"];

/// One hit the engine finds for a query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchResultSpec {
    /// The link (SearXNG re-parses it; a URL without a scheme gets `http`).
    pub url: String,
    /// The link title.
    pub title: String,
    /// The snippet.
    pub content: String,
    /// Publication time as Python's `datetime.isoformat()` writes it (`2024-05-01T12:30:00`,
    /// `2024-05-01T12:30:00+00:00`; `Z` and a bare date are taken too). Another string is passed
    /// through as it is, with an empty `pubdate`.
    pub published: Option<String>,
}

impl SearchResultSpec {
    /// A hit without a date.
    pub fn new(url: &str, title: &str, content: &str) -> Self {
        Self {
            url: url.to_owned(),
            title: title.to_owned(),
            content: content.to_owned(),
            published: None,
        }
    }

    /// The same hit with a publication time (see [`SearchResultSpec::published`]).
    #[must_use]
    pub fn with_published(mut self, published: &str) -> Self {
        self.published = Some(published.to_owned());
        self
    }
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedQuery {
    /// HTTP method.
    pub method: String,
    /// The path, without the query string.
    pub path: String,
    /// The URL query arguments, decoded, in order (repeats kept).
    pub params: Vec<(String, String)>,
    /// The fields of an `application/x-www-form-urlencoded` body, decoded, in order.
    pub form: Vec<(String, String)>,
    /// The status answered.
    pub status: u16,
}

impl RecordedQuery {
    /// The value SearXNG reads for `name`: the first form field of that name, else the first URL
    /// query argument.
    pub fn param(&self, name: &str) -> Option<&str> {
        first(&self.form, name).or_else(|| first(&self.params, name))
    }
}

fn first<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

type Answer = dyn Fn(&str) -> Vec<SearchResultSpec> + Send + Sync;

struct State {
    queries: Mutex<Vec<RecordedQuery>>,
    answer: Box<Answer>,
}

/// The running server. Stops accepting when dropped.
pub struct SearxNg {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for SearxNg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearxNg")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for SearxNg {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SearxNg {
    /// Serve on `127.0.0.1:0`; `answer(query)` gives the engine's hits for a query (the words of `q`
    /// joined by single spaces), best first.
    pub async fn start<F>(answer: F) -> crate::Result<Self>
    where
        F: Fn(&str) -> Vec<SearchResultSpec> + Send + Sync + 'static,
    {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .map_err(|e| crate::err(format!("searxng: cannot listen on 127.0.0.1: {e}")))?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            queries: Mutex::new(Vec::new()),
            answer: Box::new(answer),
        });
        let accept_state = Arc::clone(&state);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let conn_state = Arc::clone(&accept_state);
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(Arc::clone(&conn_state), req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self { addr, state, task })
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The instance root, `http://127.0.0.1:PORT` (the API is `GET {base_url}/search?q=…&format=json`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `{base_url}/search?q=<query, encoded>&format=json`.
    pub fn json_search_url(&self, query: &str) -> String {
        format!(
            "{}/search?q={}&format=json",
            self.base_url(),
            percent_encode(query)
        )
    }

    /// Every request received so far, refused ones included.
    pub fn queries(&self) -> Vec<RecordedQuery> {
        self.state
            .queries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What the server answers, before it becomes a hyper response.
struct Reply {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: String,
}

impl Reply {
    fn new(status: u16, content_type: &'static str, body: String) -> Self {
        Self {
            status,
            content_type,
            headers: Vec::new(),
            body,
        }
    }

    fn html(status: u16, body: String) -> Self {
        Self::new(status, "text/html; charset=utf-8", body)
    }

    fn json(status: u16, body: &Value) -> Self {
        // Python's json.dumps separators: ", " and ": ".
        Self::new(status, "application/json", python_json(body))
    }

    fn json_error(status: u16, message: &str) -> Self {
        Self::json(status, &json!({ "error": message }))
    }

    fn header(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let raw = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let method = parts.method.as_str().to_owned();
    let path = parts.uri.path().to_owned();
    let raw_query = parts.uri.query().unwrap_or_default().to_owned();
    let params = parse_urlencoded(&raw_query);
    let is_form = parts
        .headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    let form = if is_form {
        parse_urlencoded(&String::from_utf8_lossy(&raw))
    } else {
        Vec::new()
    };
    let mut recorded = RecordedQuery {
        method,
        path,
        params,
        form,
        status: 0,
    };
    let reply = route(&state, &recorded, &raw_query);
    recorded.status = reply.status;
    state
        .queries
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(recorded);
    Ok(respond(reply))
}

fn respond(reply: Reply) -> Response<Full<Bytes>> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", reply.content_type);
    for (k, v) in &reply.headers {
        b = b.header(*k, v.as_str());
    }
    // `search.default_http_headers` of searx/settings.yml, and post_request's Server-Timing.
    b = b
        .header("x-content-type-options", "nosniff")
        .header("x-download-options", "noopen")
        .header("x-robots-tag", "noindex, nofollow")
        .header("referrer-policy", "no-referrer")
        .header("server-timing", "total;dur=0.1, render;dur=0");
    b.body(Full::new(Bytes::from(reply.body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

fn route(state: &State, req: &RecordedQuery, raw_query: &str) -> Reply {
    let allowed: &[&str] = match req.path.as_str() {
        "/" | "/search" => &["GET", "HEAD", "OPTIONS", "POST"],
        "/healthz" => &["GET", "HEAD", "OPTIONS"],
        _ => return Reply::html(404, not_found_page()),
    };
    let allow = allowed.join(", ");
    if !allowed.contains(&req.method.as_str()) {
        return Reply::html(
            405,
            werkzeug_error(
                405,
                "Method Not Allowed",
                "The method is not allowed for the requested URL.",
            ),
        )
        .header("allow", allow);
    }
    if req.method == "OPTIONS" {
        return Reply::html(200, String::new()).header("allow", allow);
    }
    match req.path.as_str() {
        "/healthz" => Reply::new(200, "text/plain; charset=utf-8", "OK".to_owned()),
        "/" => {
            if req.param("q").is_some_and(|q| !q.is_empty()) {
                let location = if raw_query.is_empty() {
                    "/search".to_owned()
                } else {
                    format!("/search?{raw_query}")
                };
                let shown = html_escape(&location);
                let body = format!(
                    "<!doctype html>\n<html lang=en>\n<title>Redirecting...</title>\n\
                     <h1>Redirecting...</h1>\n<p>You should be redirected automatically to the \
                     target URL: <a href=\"{shown}\">{shown}</a>. If not, click the link.\n"
                );
                Reply::html(308, body).header("location", location)
            } else {
                Reply::html(200, start_page(None))
            }
        }
        _ => search(state, req),
    }
}

/// `searx/webapp.py`'s `search` view.
fn search(state: &State, req: &RecordedQuery) -> Reply {
    let mut format = req.param("format").unwrap_or("html");
    if !OUTPUT_FORMATS.contains(&format) {
        format = "html";
    }
    if !FORMATS.contains(&format) {
        return Reply::html(
            403,
            werkzeug_error(
                403,
                "Forbidden",
                "You don't have the permission to access the requested resource. It is either \
                 read-protected or not readable by the server.",
            ),
        );
    }
    let json = format == "json";
    let q = req.param("q").unwrap_or_default();
    if q.is_empty() {
        return if json {
            Reply::json_error(400, "No query")
        } else {
            Reply::html(200, start_page(None))
        };
    }
    if let Err((status, message)) = validate(req) {
        return if json {
            Reply::json_error(status, &message)
        } else {
            Reply::html(status, start_page(Some("search error")))
        };
    }
    let query = q.split_whitespace().collect::<Vec<_>>().join(" ");
    let (results, crashed) = merge_results((state.answer)(&query));
    if json {
        let unresponsive: Vec<Value> = if crashed {
            vec![json!([ENGINE, "unexpected crash"])]
        } else {
            Vec::new()
        };
        let body = json!({
            "query": query,
            "results": results.iter().map(Hit::to_json).collect::<Vec<_>>(),
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": unresponsive,
        });
        Reply::json(200, &body)
    } else {
        Reply::html(200, results_page(&query, &results))
    }
}

/// `searx/webadapter.py`'s checks, in its order: Err((status, message)).
fn validate(req: &RecordedQuery) -> Result<(), (u16, String)> {
    let pageno = req.param("pageno").unwrap_or("1");
    if !is_ascii_digits(pageno) || pageno.bytes().all(|b| b == b'0') {
        return Err(param_error("pageno", pageno));
    }
    if let Some(safesearch) = req.param("safesearch") {
        if !is_ascii_digits(safesearch) {
            return Err(param_error("safesearch", safesearch));
        }
        let int = safesearch.trim_start_matches('0');
        if int.len() > 1 || int > "2" {
            return Err(param_error("safesearch", int));
        }
    }
    if let Some(time_range) = req.param("time_range")
        && !["", "None", "day", "week", "month", "year"].contains(&time_range)
    {
        return Err(param_error("time_range", time_range));
    }
    if let Some(timeout) = req.param("timeout_limit")
        && !["", "None"].contains(&timeout)
        && !python_float(timeout)
    {
        return Err(param_error("timeout_limit", timeout));
    }
    let names = req.form.iter().chain(&req.params).map(|(k, _)| k);
    for name in names {
        if name.starts_with("engine_data") && name.split('-').count() != 3 {
            return Err((500, "search error".to_owned()));
        }
    }
    if let Some(language) = req.param("language")
        && language != "auto"
    {
        if !valid_language_code(language) {
            return Err(param_error("language", language));
        }
        if language.ends_with('\n') {
            return Err((500, "search error".to_owned()));
        }
    }
    Ok(())
}

/// `SearxParameterException`'s message (searx/exceptions.py), status 400.
fn param_error(name: &str, value: &str) -> (u16, String) {
    let message = if value.is_empty() {
        format!("Empty {name} parameter")
    } else {
        format!("Invalid value {value} for parameter {name}")
    };
    (400, message)
}

fn is_ascii_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `VALID_LANGUAGE_CODE` of searx/webutils.py, `^[a-z]{2,3}(-[a-zA-Z]{2})?$`, with Python's `$`
/// (which also matches before a final newline).
fn valid_language_code(s: &str) -> bool {
    let s = s.strip_suffix('\n').unwrap_or(s);
    let (lang, region) = match s.split_once('-') {
        Some((l, r)) => (l, Some(r)),
        None => (s, None),
    };
    (2..=3).contains(&lang.len())
        && lang.bytes().all(|b| b.is_ascii_lowercase())
        && region.is_none_or(|r| r.len() == 2 && r.bytes().all(|b| b.is_ascii_alphabetic()))
}

/// Whether Python's `float()` takes `s`: surrounding whitespace, underscores between digits.
fn python_float(s: &str) -> bool {
    let s = s.trim();
    let chars: Vec<char> = s.chars().collect();
    let mut plain = String::with_capacity(s.len());
    for (i, c) in chars.iter().enumerate() {
        if *c == '_' {
            let between_digits = i > 0
                && chars[i - 1].is_ascii_digit()
                && chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if !between_digits {
                return false;
            }
        } else {
            plain.push(*c);
        }
    }
    plain.parse::<f64>().is_ok()
}

/// Python's `urllib.parse.urlparse` result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedUrl {
    scheme: String,
    netloc: String,
    path: String,
    params: String,
    query: String,
    fragment: String,
}

const USES_PARAMS: &[&str] = &[
    "", "ftp", "hdl", "prospero", "http", "imap", "https", "shttp", "rtsp", "rtsps", "rtspu",
    "sip", "sips", "mms", "sftp", "tel",
];

const USES_NETLOC: &[&str] = &[
    "",
    "ftp",
    "http",
    "gopher",
    "nntp",
    "telnet",
    "imap",
    "wais",
    "file",
    "mms",
    "https",
    "shttp",
    "snews",
    "prospero",
    "rtsp",
    "rtsps",
    "rtspu",
    "rsync",
    "svn",
    "svn+ssh",
    "sftp",
    "nfs",
    "git",
    "git+ssh",
    "ws",
    "wss",
    "itms-services",
];

impl ParsedUrl {
    /// `urlparse(url)`, then the scheme `http` when it has none (`_normalize_url_fields`).
    pub fn parse(url: &str) -> Self {
        let cleaned: String = url
            .trim_start_matches(|c: char| c <= ' ')
            .chars()
            .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
            .collect();
        let mut rest = cleaned.as_str();
        let mut scheme = String::new();
        if let Some(i) = rest.find(':')
            && i > 0
            && rest.as_bytes()[0].is_ascii_alphabetic()
            && rest[..i]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        {
            scheme = rest[..i].to_ascii_lowercase();
            rest = &rest[i + 1..];
        }
        let mut netloc = "";
        if let Some(after) = rest.strip_prefix("//") {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            netloc = &after[..end];
            rest = &after[end..];
        }
        let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
        let (mut path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut params = "";
        if USES_PARAMS.contains(&scheme.as_str()) && path.contains(';') {
            let from = path.rfind('/').unwrap_or(0);
            let at = if path.contains('/') {
                path[from..].find(';').map(|i| from + i)
            } else {
                path.find(';')
            };
            if let Some(at) = at {
                params = &path[at + 1..];
                path = &path[..at];
            }
        }
        if scheme.is_empty() {
            "http".clone_into(&mut scheme);
        }
        Self {
            scheme,
            netloc: netloc.to_owned(),
            path: path.to_owned(),
            params: params.to_owned(),
            query: query.to_owned(),
            fragment: fragment.to_owned(),
        }
    }

    /// `geturl()` (`urlunparse`).
    pub fn url(&self) -> String {
        let mut url = self.path.clone();
        if !self.params.is_empty() {
            url = format!("{url};{}", self.params);
        }
        if !self.netloc.is_empty()
            || (!self.scheme.is_empty()
                && USES_NETLOC.contains(&self.scheme.as_str())
                && !url.starts_with("//"))
        {
            if !url.is_empty() && !url.starts_with('/') {
                url.insert(0, '/');
            }
            url = format!("//{}{url}", self.netloc);
        }
        if !self.scheme.is_empty() {
            url = format!("{}:{url}", self.scheme);
        }
        if !self.query.is_empty() {
            url = format!("{url}?{}", self.query);
        }
        if !self.fragment.is_empty() {
            url = format!("{url}#{}", self.fragment);
        }
        url
    }

    /// `MainResult.__hash__`'s key without the template and image (equal for every hit here).
    fn merge_key(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}",
            self.netloc, self.path, self.params, self.query, self.fragment
        )
    }

    pub fn to_json(&self) -> Value {
        json!([
            self.scheme,
            self.netloc,
            self.path,
            self.params,
            self.query,
            self.fragment
        ])
    }
}

/// One merged main result.
#[derive(Debug, Clone)]
struct Hit {
    parsed: ParsedUrl,
    title: String,
    content: String,
    published: Option<(String, String)>,
    positions: Vec<u32>,
    score: f64,
}

impl Hit {
    fn to_json(&self) -> Value {
        let (published, pubdate) = match &self.published {
            Some((iso, pubdate)) => (Value::String(iso.clone()), pubdate.clone()),
            None => (Value::Null, String::new()),
        };
        json!({
            "template": "default.html",
            "title": self.title,
            "content": self.content,
            "img_src": "",
            "iframe_src": "",
            "audio_src": "",
            "thumbnail": "",
            "publishedDate": published,
            "pubdate": pubdate,
            "length": null,
            "views": "",
            "author": "",
            "metadata": "",
            "priority": "",
            "engines": [ENGINE],
            "open_group": false,
            "close_group": false,
            "positions": self.positions,
            "score": self.score,
            "category": "general",
            "url": self.parsed.url(),
            "engine": ENGINE,
            "parsed_url": self.parsed.to_json(),
        })
    }
}

/// `ResultContainer.extend` + `close` + `get_ordered_results` for one engine's hits; whether the
/// engine crashed (a hit with an empty URL).
fn merge_results(specs: Vec<SearchResultSpec>) -> (Vec<Hit>, bool) {
    let mut hits: Vec<Hit> = Vec::new();
    let mut crashed = false;
    for (position, spec) in (1u32..).zip(specs) {
        if spec.url.is_empty() {
            // MainResult.__hash__ raises ValueError: the rest of the engine's hits are lost.
            crashed = true;
            break;
        }
        let parsed = ParsedUrl::parse(&spec.url);
        let title = normalize_text(&spec.title);
        let mut content = normalize_text(&spec.content);
        if content == title {
            content.clear();
        }
        let key = parsed.merge_key();
        if let Some(origin) = hits.iter_mut().find(|h| h.parsed.merge_key() == key) {
            if content.chars().count() > origin.content.chars().count() {
                origin.content = content;
            }
            if title.chars().count() > origin.title.chars().count() {
                origin.title = title;
            }
            if !origin.parsed.scheme.ends_with('s') && parsed.scheme.ends_with('s') {
                origin.parsed.scheme = parsed.scheme;
            }
            origin.positions.push(position);
        } else {
            hits.push(Hit {
                parsed,
                title,
                content,
                published: spec.published.as_deref().map(python_dates),
                positions: vec![position],
                score: 0.0,
            });
        }
    }
    for hit in &mut hits {
        let weight = hit.positions.len() as f64;
        hit.score = hit.positions.iter().map(|p| weight / f64::from(*p)).sum();
    }
    // Stable, like Python's sorted(..., reverse=True). The grouping pass of get_ordered_results
    // keeps this order: every hit has the same category, template and no image.
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
    (hits, crashed)
}

/// `WHITESPACE_REGEX.sub(" ", s).strip()` of searx/result_types/_base.py: runs of space, tab and
/// newline become one space (not `\r`), then surrounding whitespace goes.
pub fn normalize_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_run = false;
    for c in s.chars() {
        if matches!(c, ' ' | '\t' | '\n') {
            if !in_run {
                out.push(' ');
            }
            in_run = true;
        } else {
            out.push(c);
            in_run = false;
        }
    }
    out.trim().to_owned()
}

/// `(datetime.isoformat(), strftime('%Y-%m-%d %H:%M:%S%z'))` for an ISO 8601 time; an unreadable
/// string is passed through with an empty `pubdate`.
pub fn python_dates(s: &str) -> (String, String) {
    parse_iso(s).unwrap_or_else(|| (s.to_owned(), String::new()))
}

fn parse_iso(s: &str) -> Option<(String, String)> {
    let digits = |t: &str, n: usize| t.len() == n && t.bytes().all(|b| b.is_ascii_digit());
    let (date, rest) = s.split_at_checked(10)?;
    let mut d = date.split('-');
    let (y, mo, da) = (d.next()?, d.next()?, d.next()?);
    if !(digits(y, 4) && digits(mo, 2) && digits(da, 2)) {
        return None;
    }
    let (time, tz) = if rest.is_empty() {
        ("00:00:00", "")
    } else {
        let rest = rest.strip_prefix(['T', ' '])?;
        let at = rest.find(['Z', '+', '-']).unwrap_or(rest.len());
        (&rest[..at], &rest[at..])
    };
    let (hms, micro) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':');
    let (h, mi) = (t.next()?, t.next()?);
    let sec = t.next().unwrap_or("00");
    if !(digits(h, 2) && digits(mi, 2) && digits(sec, 2)) || t.next().is_some() {
        return None;
    }
    let micro_ok =
        micro.is_empty() || (micro.len() <= 6 && micro.bytes().all(|b| b.is_ascii_digit()));
    if !micro_ok {
        return None;
    }
    let micro = if micro.bytes().all(|b| b == b'0') {
        String::new()
    } else {
        format!(".{micro:0<6}")
    };
    let (iso_tz, py_tz) = match tz {
        "" => (String::new(), String::new()),
        "Z" => ("+00:00".to_owned(), "+0000".to_owned()),
        _ => {
            let (sign, off) = tz.split_at(1);
            let (oh, om) = off.split_once(':').unwrap_or(off.split_at_checked(2)?);
            if !(digits(oh, 2) && digits(om, 2)) {
                return None;
            }
            (format!("{sign}{oh}:{om}"), format!("{sign}{oh}{om}"))
        }
    };
    let iso = format!("{date}T{h}:{mi}:{sec}{micro}{iso_tz}");
    let pubdate = format!("{date} {h}:{mi}:{sec}{py_tz}");
    Some((iso, pubdate))
}

/// Python's `json.dumps` layout (`", "` and `": "`, non-ASCII escaped) of a value.
fn python_json(v: &Value) -> String {
    let mut out = String::new();
    write_python_json(v, &mut out);
    out
}

fn write_python_json(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json_string(k, out);
                out.push_str(": ");
                write_python_json(item, out);
            }
            out.push('}');
        }
        Value::String(s) => write_json_string(s, out),
        Value::Number(n) if n.is_f64() => {
            // Python writes floats as repr(): 1.0, 0.5, 2.6666666666666665.
            let f = n.as_f64().unwrap_or_default();
            out.push_str(&format!("{f:?}"));
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A JSON string as Python's `json.dumps` writes it (`ensure_ascii`: `\uXXXX` beyond ASCII).
fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Decode `a=1&b=x+y` as werkzeug does (`parse_qsl(…, keep_blank_values=True,
/// errors="werkzeug.url_quote")`): `+` is a space, `%XX` a byte, bad UTF-8 left percent-encoded,
/// blank values kept.
pub fn parse_urlencoded(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    // werkzeug's "werkzeug.url_quote" codec error handler: invalid UTF-8 stays percent-encoded.
    let mut text = String::with_capacity(out.len());
    let mut rest = out.as_slice();
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                text.push_str(valid);
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                let bad = e.error_len().unwrap_or(after.len());
                for b in &after[..bad] {
                    let _ = write!(text, "%{b:02X}");
                }
                rest = &after[bad..];
            }
        }
    }
    text
}

fn hex(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// Percent-encode everything but RFC 3986's unreserved characters.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// markupsafe's `escape`.
fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// werkzeug's `HTTPException.get_body`.
fn werkzeug_error(code: u16, name: &str, description: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=en>\n<title>{code} {name}</title>\n<h1>{name}</h1>\n<p>{}</p>\n",
        html_escape(description)
    )
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en-EN\">\n<head>\n  <meta charset=\"UTF-8\">\n  \
         <title>{title}</title>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )
}

const SEARCH_FORM: &str = "<form id=\"search\" method=\"GET\" action=\"/search\" role=\"search\">\n  \
     <input id=\"q\" name=\"q\" type=\"text\" autocomplete=\"off\">\n  \
     <button id=\"send_search\" type=\"submit\">search</button>\n</form>\n";

/// The start page (`index.html`), with an error line when a search failed.
fn start_page(error: Option<&str>) -> String {
    let mut body =
        String::from("<div class=\"index\">\n<div class=\"title\"><h1>SearXNG</h1></div>\n");
    if let Some(error) = error {
        let _ = writeln!(
            body,
            "<div class=\"dialog-error\">{}</div>",
            html_escape(error)
        );
    }
    body.push_str(SEARCH_FORM);
    body.push_str("</div>\n");
    page("SearXNG", &body)
}

/// The results page (`results.html`), reduced to the hits.
fn results_page(query: &str, hits: &[Hit]) -> String {
    let mut body = String::from(SEARCH_FORM);
    let _ = writeln!(
        body,
        "<div id=\"results\" data-query=\"{}\">",
        html_escape(query)
    );
    for hit in hits {
        let url = html_escape(&hit.parsed.url());
        let _ = writeln!(
            body,
            "<article class=\"result result-default category-general\">\n  \
             <a href=\"{url}\" class=\"url_header\">{url}</a>\n  \
             <h3><a href=\"{url}\">{}</a></h3>\n  <p class=\"content\">{}</p>\n</article>",
            html_escape(&hit.title),
            html_escape(&hit.content)
        );
    }
    body.push_str("</div>\n");
    page("SearXNG", &body)
}

/// `404.html`.
fn not_found_page() -> String {
    page(
        "SearXNG",
        "<div class=\"center\">\n<h1>Page not found</h1>\n\
         <p>Go to <a href=\"/\">search page</a>.</p>\n</div>\n",
    )
}
