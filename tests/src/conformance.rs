//! One fixture case through one engine, rendered as text parts that compare byte for byte
//! across runtimes: the native core, the WASI component in wasmtime (`tests/tests/conformance.rs`)
//! and the npm package in Node and Chromium (`pkg-js/tests/harness.mjs` renders the very same
//! parts; `conformance-dump` writes the native ones for it to compare with).
//!
//! Parts, in order: `request` (the conversion's metadata as compact JSON, or `error <kind>:
//! <message>`), `request.body` (the upstream body), `count_tokens`, then for `stream` and
//! `folded` one run per chunking (`<mode> chunk=all|1|7`) and one run failed half-way
//! (`<mode> failed at <n>`): everything the session wrote, then `\n--- finish\nstatus: <s>\n<body>`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use bridge_core::api::FrontOptions;
use claude_bridge::engine::{Dialect, Engine, EngineError, ErrorKind, StreamOptions};

/// The id seed every run uses, as in the core's golden test.
pub const SEED: u64 = 42;

/// Chunk sizes the upstream bytes are fed in, with their labels (`all`: everything at once).
pub const CHUNKINGS: [(&str, usize); 3] = [("all", usize::MAX), ("1", 1), ("7", 7)];

/// The fixture directory shared by every runtime (`BRIDGE_FIXTURES_DIR` overrides it).
#[must_use]
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("BRIDGE_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"))
}

/// Fixture cases, sorted: directories holding a `request.json` or an `upstream.sse`.
///
/// # Errors
/// The directory cannot be read, or holds no case (a conformance run would prove nothing).
pub fn cases(dir: &Path) -> crate::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| crate::err(format!("cannot read fixtures {}: {e}", dir.display())))?;
    let mut cases = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.join("request.json").is_file() || path.join("upstream.sse").is_file() {
            cases.push(path);
        }
    }
    cases.sort();
    if cases.is_empty() {
        return Err(crate::err(format!(
            "no golden fixtures under {} (each case is a directory with request.json and/or \
             upstream.sse)",
            dir.display()
        )));
    }
    Ok(cases)
}

/// Everything one engine produces for one case, in a fixed order.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Outputs {
    /// (what, text) pairs.
    pub parts: Vec<(String, String)>,
}

impl Outputs {
    fn push(&mut self, what: impl Into<String>, text: impl Into<String>) {
        self.parts.push((what.into(), text.into()));
    }

    /// The part named `what`.
    #[must_use]
    pub fn get(&self, what: &str) -> Option<&str> {
        self.parts
            .iter()
            .find(|(w, _)| w == what)
            .map(|(_, b)| b.as_str())
    }
}

fn show_error(e: &EngineError) -> crate::Result<String> {
    match e {
        EngineError::Request { kind, message } => Ok(format!("error {}: {message}", kind.as_str())),
        EngineError::Trap(t) => Err(crate::err(format!("the engine trapped: {t}"))),
        EngineError::Busy(b) => Err(crate::err(format!("the engine was busy: {b}"))),
    }
}

/// Feeds `upstream` in pieces of `chunk` bytes; with `fail_at`, fails the stream after that
/// many bytes instead of feeding the rest. Returns everything the session wrote, in order.
///
/// # Errors
/// The engine trapped.
pub fn run_stream(
    engine: &dyn Engine,
    options: &StreamOptions,
    upstream: &[u8],
    chunk: usize,
    fail_at: Option<usize>,
) -> crate::Result<String> {
    let mut session = engine.translator(options)?;
    let fed = fail_at.map_or(upstream, |n| &upstream[..n.min(upstream.len())]);
    let mut out = String::new();
    for piece in fed.chunks(chunk) {
        out.push_str(&session.feed(piece)?);
    }
    if fail_at.is_some() {
        out.push_str(&session.fail(ErrorKind::Overloaded, "the upstream connection was reset")?);
    }
    let finished = session.finish(&bridge_core::api::StreamEnd::default())?;
    write!(
        out,
        "\n--- finish\nstatus: {}\n{}",
        finished.status, finished.body
    )?;
    Ok(out)
}

/// Runs one case through `engine`.
///
/// # Errors
/// A fixture file is unreadable or the engine trapped.
pub fn run_case(engine: &dyn Engine, case: &Path) -> crate::Result<Outputs> {
    run_case_in(engine, case, Dialect::OpenaiChat)
}

/// [`run_case`] for an upstream of another dialect (the case's `options.json` is that
/// dialect's options).
///
/// # Errors
/// As [`run_case`].
pub fn run_case_in(engine: &dyn Engine, case: &Path, dialect: Dialect) -> crate::Result<Outputs> {
    let mut out = Outputs::default();
    let request = std::fs::read(case.join("request.json")).ok();
    let options =
        std::fs::read_to_string(case.join("options.json")).unwrap_or_else(|_| "{}".into());
    let upstream = std::fs::read(case.join("upstream.sse")).ok();

    let mut model = "claude-conformance".to_owned();
    let mut estimate = 0;
    let mut tool_names = bridge_core::api::ToolNames::default();
    let mut front = FrontOptions::default();
    if let Some(request) = &request {
        match engine.prepare(dialect, request, &options) {
            Ok(c) => {
                model.clone_from(&c.client_model);
                estimate = c.input_tokens_estimate;
                tool_names.clone_from(&c.tool_names);
                if dialect.front().is_some() {
                    front = front_options(&c.body)?;
                }
                let mut meta = serde_json::json!({
                    "upstream_model": c.upstream_model,
                    "client_model": c.client_model,
                    "client_stream": c.client_stream,
                    "input_tokens_estimate": c.input_tokens_estimate,
                    "warnings": c.warnings,
                });
                if !c.tool_names.is_empty() {
                    meta["tool_names"] = serde_json::to_value(&c.tool_names)?;
                }
                out.push("request", serde_json::to_string(&meta)?);
                out.push("request.body", c.body);
            }
            Err(e) => out.push("request", show_error(&e)?),
        }
        let tokens = match engine.count_tokens(request) {
            Ok(n) => n.to_string(),
            Err(e) => show_error(&e)?,
        };
        out.push("count_tokens", tokens);
    }

    if let Some(upstream) = &upstream {
        for stream in [true, false] {
            let options = StreamOptions {
                stream,
                model: model.clone(),
                input_tokens_estimate: estimate,
                id_seed: SEED,
                dialect,
                front: front.clone(),
                tool_names: tool_names.clone(),
                ..StreamOptions::default()
            };
            let mode = if stream { "stream" } else { "folded" };
            for (label, chunk) in CHUNKINGS {
                out.push(
                    format!("{mode} chunk={label}"),
                    run_stream(engine, &options, upstream, chunk, None)?,
                );
            }
            let half = upstream.len() / 2;
            out.push(
                format!("{mode} failed at {half}"),
                run_stream(engine, &options, upstream, 7, Some(half))?,
            );
        }
    }
    Ok(out)
}

/// The `created` time a front's answer is given in these runs (the host gives the clock's).
pub const FRONT_CREATED: u64 = 1_700_000_000;

/// A front dialect's answer options: the `answer` its prepared body holds (none for a
/// refusal), with [`FRONT_CREATED`].
///
/// # Errors
/// The body is not JSON, or its `answer` is not a `FrontOptions` object.
pub fn front_options(prepared_body: &str) -> crate::Result<FrontOptions> {
    let body: serde_json::Value = serde_json::from_str(prepared_body)?;
    let mut front: FrontOptions = match body.get("answer") {
        Some(answer) => serde_json::from_value(answer.clone())?,
        None => FrontOptions::default(),
    };
    front.created = FRONT_CREATED;
    Ok(front)
}

/// Where two texts first differ, with some context, for a failure message.
#[must_use]
pub fn first_difference(a: &str, b: &str) -> String {
    let at = a
        .bytes()
        .zip(b.bytes())
        .position(|(x, y)| x != y)
        .unwrap_or_else(|| a.len().min(b.len()));
    let context = |s: &str| {
        let start = s.floor_char_boundary(at.saturating_sub(80));
        let end = s.ceil_char_boundary((at + 80).min(s.len()));
        format!("{:?}", &s[start..end])
    };
    format!(
        "byte {at} (lengths {} vs {}):\n    {}\n    {}",
        a.len(),
        b.len(),
        context(a),
        context(b)
    )
}

/// The pretty request view the `<case>.request` snapshot holds, from the `request` and
/// `request.body` parts (an error text stays as it is).
///
/// # Errors
/// The parts are not the JSON [`run_case`] writes.
pub fn request_view(outputs: &Outputs) -> crate::Result<Option<String>> {
    let Some(request) = outputs.get("request") else {
        return Ok(None);
    };
    let Some(body) = outputs.get("request.body") else {
        return Ok(Some(request.to_owned()));
    };
    let mut view: serde_json::Value = serde_json::from_str(request)?;
    if let Some(map) = view.as_object_mut() {
        map.insert("body".to_owned(), serde_json::from_str(body)?);
    }
    Ok(Some(serde_json::to_string_pretty(&view)?))
}

/// Raw-text (Fabstir) cases under `dir` (`tests/fixtures/fabstir`), sorted: directories holding a
/// `tokens.json`.
///
/// # Errors
/// The directory cannot be read.
pub fn fabstir_cases(dir: &Path) -> crate::Result<Vec<PathBuf>> {
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.join("tokens.json").is_file() {
            cases.push(path);
        }
    }
    cases.sort();
    Ok(cases)
}

/// The Fabstir session-init plaintext for `init` (JSON text), or the error as text.
fn session_init(engine: &dyn Engine, init: &str) -> crate::Result<String> {
    match engine.fabstir_session_init(init) {
        Ok(plain) => Ok(plain),
        Err(EngineError::Trap(t)) => Err(crate::err(format!("the engine trapped: {t}"))),
        Err(e) => Ok(format!("error {}: {e}", e.kind().as_str())),
    }
}

/// One raw-text case through `engine`, as parts the npm package must match:
/// `prompt` (the rendering's metadata as compact JSON, `\n--- prompt\n`, the prompt; or the
/// error), `session init` (with a `session_init.json`: the init plaintext, or the error),
/// then `<mode> tokens` (the model's tokens as given) and `<mode> bytes` (byte by byte, so
/// UTF-8 characters are cut too)
/// for `stream` and `folded`: everything written, then `\n--- finish\nstatus: <s>\n<body>`.
///
/// # Errors
/// A fixture file is unreadable or malformed.
pub fn run_fabstir_case(engine: &dyn Engine, case: &Path) -> crate::Result<Outputs> {
    use bridge_core::api::{ChatmlOptions, Dialect, StreamEnd, ToolHint};
    let read = |file: &str| std::fs::read(case.join(file)).ok();
    let tokens: Vec<String> =
        serde_json::from_slice(&read("tokens.json").ok_or("no tokens.json")?)?;
    let options: ChatmlOptions = match read("options.json") {
        Some(bytes) => serde_json::from_slice(&bytes)?,
        None => ChatmlOptions::default(),
    };
    let end: StreamEnd = match read("end.json") {
        Some(bytes) => serde_json::from_slice(&bytes)?,
        None => StreamEnd::default(),
    };
    let fail: Option<serde_json::Value> = match read("fail.json") {
        Some(bytes) => Some(serde_json::from_slice(&bytes)?),
        None => None,
    };

    let mut out = Outputs::default();
    let (mut model, mut estimate, mut tools) =
        ("claude-fabstir".to_owned(), 0, Vec::<ToolHint>::new());
    if let Some(request) = read("request.json") {
        match engine.render_chatml(&request, &options) {
            Ok(p) => {
                let meta = serde_json::json!({
                    "upstream_model": p.upstream_model,
                    "client_model": p.client_model,
                    "client_stream": p.client_stream,
                    "max_tokens": p.max_tokens,
                    "temperature": p.temperature,
                    "input_tokens_estimate": p.input_tokens_estimate,
                    "images": p.images,
                    "tools": p.tools,
                    "warnings": p.warnings,
                });
                out.push("prompt", format!("{meta}\n--- prompt\n{}", p.prompt));
                model = p.client_model;
                estimate = p.input_tokens_estimate;
                tools = p.tools;
            }
            Err(EngineError::Trap(t)) => {
                return Err(crate::err(format!("the engine trapped: {t}")));
            }
            Err(e) => out.push("prompt", format!("error {}: {e}", e.kind().as_str())),
        }
    }
    if let Some(init) = read("session_init.json") {
        let init = String::from_utf8(init)?;
        out.push("session init", session_init(engine, init.trim_end())?);
    }
    let whole = tokens.concat();
    let as_tokens: Vec<&[u8]> = tokens.iter().map(String::as_bytes).collect();
    let as_bytes: Vec<&[u8]> = whole.as_bytes().chunks(1).collect();
    for stream in [true, false] {
        let mode = if stream { "stream" } else { "folded" };
        for (label, pieces) in [("tokens", &as_tokens), ("bytes", &as_bytes)] {
            let mut reply = engine.translator(&StreamOptions {
                stream,
                model: model.clone(),
                input_tokens_estimate: estimate,
                id_seed: SEED,
                dialect: Dialect::Chatml,
                tools: tools.clone(),
                ..StreamOptions::default()
            })?;
            let mut text = String::new();
            for piece in pieces.iter() {
                text.push_str(&reply.feed(piece)?);
            }
            if let Some(fail) = &fail {
                let kind = fail["kind"].as_str().unwrap_or("api_error");
                let message = fail["message"].as_str().unwrap_or("");
                text.push_str(&reply.fail(ErrorKind::from_type_str(kind), message)?);
            }
            let finished = reply.finish(&end)?;
            write!(
                text,
                "\n--- finish\nstatus: {}\n{}",
                finished.status, finished.body
            )?;
            out.push(format!("{mode} {label}"), text);
        }
    }
    Ok(out)
}
