//! `claude-bridge doctor`: check a configuration before serving it.
//!
//! It loads the config file (or the flags' one provider), which already names a bad key, a bad
//! value or a missing `env:` variable with its file, line and key; then asks each HTTP provider
//! for its model list (`GET {base}/models`, Anthropic's `GET {base}/v1/models`) to see that it is
//! reachable, that the key is accepted and that the configured models exist; and warns about an
//! OpenAI-compatible `base_url` without the `/v1` such servers need. It prints one row per
//! provider (`ok`, `warn` or `FAIL`) and a verdict, and exits 1 when a provider fails (cannot be
//! reached, refuses the key, lacks a configured model); a warning alone (no `/v1`, a provider no
//! route uses) keeps exit status 0.
//!
//! ```text
//! provider  kind       base_url                      status  models
//! local     openai     http://127.0.0.1:11434/v1     ok      qwen3-coder ✓
//! openai    responses  https://api.openai.com/v1     FAIL    401: Incorrect API key provided…
//! ```

use std::fmt::Write as _;
use std::time::Duration;

use secrecy::ExposeSecret;
use serde_json::Value;

use crate::cli::{Provider as ProviderChoice, ServeArgs};
use crate::config::{Config, ProviderKind};

/// One provider's findings.
#[derive(Debug, Default)]
struct Row {
    name: String,
    kind: String,
    base_url: String,
    status: String,
    models: String,
    problem: bool,
    notes: Vec<String>,
    /// The ids the provider's model list gave.
    listed: Vec<String>,
}

/// Run the checks; returns the report and whether everything is fine.
///
/// # Errors
/// Never for a check that fails (that is in the report); only when the checks cannot run.
pub async fn run(args: &ServeArgs) -> Result<(String, bool), String> {
    crate::redact::register_secrets(args);
    let config = match crate::config::load_config(args) {
        Ok(config) => config,
        Err(problem) => {
            return Ok((format!("config: {problem}\n"), false));
        }
    };
    let (header, rows) = check(args, config.as_ref()).await?;
    let failing = rows.iter().filter(|r| r.problem).count();
    let warned = rows.iter().filter(|r| r.status == "warn").count();
    let verdict = match (failing, warned) {
        (0, 0) => String::from("all ok\n"),
        (0, w) => format!("ok, with {w} warning(s) (warnings do not fail the check)\n"),
        (f, _) => format!("{f} provider(s) failing: exit status 1\n"),
    };
    Ok((header + &table(&rows) + &verdict, failing == 0))
}

/// The same checks when `serve` starts, in the background: each provider that is down, refuses
/// the key, lacks a configured model or has a `base_url` without `/v1` is a warning in the log
/// (the upstream may come up later, so serving goes on); a reachable one is one info line.
///
/// With flags and no `--model` (a client's model name goes upstream unchanged), the ids the
/// upstream listed are kept in `state` for `GET /v1/models`.
pub async fn log_at_start(args: ServeArgs, state: std::sync::Arc<crate::server::AppState>) {
    let _ = check_at_start(&args, &state).await;
}

/// One finding of the start-up check, in plain words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartProblem {
    /// `provider NAME (base_url): what`.
    pub line: String,
    /// The provider cannot serve (unreachable, key refused, model missing); else a warning.
    pub failing: bool,
}

/// [`log_at_start`], returning one plain line per problem, for a launcher to print before the
/// tool it starts takes the terminal.
pub async fn check_at_start(
    args: &ServeArgs,
    state: &crate::server::AppState,
) -> Vec<StartProblem> {
    let config = crate::config::load_config(args).ok().flatten();
    let rows = match check(args, config.as_ref()).await {
        Ok((_, rows)) => rows,
        Err(why) => {
            tracing::warn!(%why, "could not check the upstreams at start");
            return vec![StartProblem {
                line: format!("could not check the upstreams: {why}"),
                failing: false,
            }];
        }
    };
    if config.is_none()
        && args.model.as_deref().is_none_or(str::is_empty)
        && let Some(row) = rows.first()
    {
        *state
            .upstream_models
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = row.listed.clone();
    }
    let mut problems = Vec::new();
    for row in rows {
        if row.status == "-" {
            continue;
        }
        let notes = row.notes.join("; ");
        if row.problem || !row.notes.is_empty() {
            tracing::warn!(
                provider = %row.name,
                base_url = %row.base_url,
                status = %row.status,
                "upstream check at start: {notes} (serving anyway; `claude-bridge doctor` checks again)"
            );
            problems.push(StartProblem {
                line: format!("provider {} ({}): {notes}", row.name, row.base_url),
                failing: row.problem,
            });
        } else {
            tracing::info!(
                provider = %row.name,
                base_url = %row.base_url,
                models = %row.models,
                "upstream reachable"
            );
        }
    }
    problems
}

/// One row per provider of `config` (or of the flags).
async fn check(args: &ServeArgs, config: Option<&Config>) -> Result<(String, Vec<Row>), String> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.connect_timeout.max(1) + 5))
        .use_preconfigured_tls(crate::provider::upstream::tls_config(
            args.ca_cert.as_deref(),
        )?)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let mut rows = Vec::new();
    let mut header = String::new();
    match config {
        Some(config) => {
            let _ = writeln!(header, "config: {} (ok)", config.file.display());
            for (name, provider) in &config.providers {
                rows.push(check_configured(&http, name, provider).await);
            }
            unused_providers(config, &mut rows);
        }
        None => {
            let _ = writeln!(
                header,
                "config: none (the flags describe one provider, `default`)"
            );
            rows.push(check_flags(&http, args).await);
        }
    }
    for row in &mut rows {
        if row.status == "ok" && !row.notes.is_empty() {
            row.status = String::from("warn");
        }
    }
    Ok((header, rows))
}

fn unused_providers(config: &Config, rows: &mut [Row]) {
    let used: Vec<String> = config
        .router
        .targets()
        .map(|(_, t)| t.provider.clone())
        .collect();
    for row in rows.iter_mut() {
        if !used.contains(&row.name) {
            row.notes
                .push(String::from("no route or fallback names this provider"));
        }
    }
}

async fn check_configured(
    http: &reqwest::Client,
    name: &str,
    provider: &crate::config::Provider,
) -> Row {
    let mut row = Row {
        name: name.to_owned(),
        kind: provider.kind.name().to_owned(),
        ..Row::default()
    };
    let (upstream, models_path, anthropic) = match &provider.kind {
        ProviderKind::Openai { upstream, .. } | ProviderKind::Responses { upstream, .. } => {
            (upstream, "models", false)
        }
        ProviderKind::Anthropic { upstream } => (upstream, "v1/models", true),
        ProviderKind::Fabstir(_) => {
            row.status = String::from("-");
            row.notes.push(String::from(
                "fabstir: hosts are checked when serving (see `claude-bridge hosts`)",
            ));
            return row;
        }
    };
    row.base_url = crate::redact::split_userinfo(&upstream.base_url).0;
    let key = upstream
        .api_key
        .as_ref()
        .map(|k| k.expose_secret().to_owned());
    probe(
        http,
        &mut row,
        models_path,
        key.as_deref(),
        anthropic,
        &provider.models,
    )
    .await;
    row
}

async fn check_flags(http: &reqwest::Client, args: &ServeArgs) -> Row {
    let mut row = Row {
        name: String::from(crate::server::routes::FLAGS_PROVIDER),
        kind: format!("{:?}", args.provider).to_lowercase(),
        base_url: crate::redact::split_userinfo(args.base_url()).0,
        ..Row::default()
    };
    let (path, anthropic) = match args.provider {
        ProviderChoice::Openai | ProviderChoice::Responses => ("models", false),
        ProviderChoice::Anthropic => ("v1/models", true),
        ProviderChoice::Fabstir => {
            row.status = String::from("-");
            row.notes
                .push(String::from("fabstir: see `claude-bridge hosts`"));
            return row;
        }
    };
    let models: Vec<String> = args.model.iter().cloned().collect();
    probe(
        http,
        &mut row,
        path,
        args.api_key.as_deref(),
        anthropic,
        &models,
    )
    .await;
    row
}

/// Ask the provider for its models; fill in the row.
async fn probe(
    http: &reqwest::Client,
    row: &mut Row,
    path: &str,
    key: Option<&str>,
    anthropic: bool,
    models: &[String],
) {
    if !anthropic
        && !row.base_url.trim_end_matches('/').ends_with("/v1")
        && !row.base_url.contains("/v1/")
    {
        row.notes.push(String::from(
            "base_url has no /v1: OpenAI-compatible servers (Ollama, vLLM, llama.cpp, OpenAI) serve /v1/chat/completions",
        ));
    }
    let body =
        match crate::provider::probe::get_models(http, &row.base_url, path, key, anthropic).await {
            Ok(body) => body,
            Err(e) => {
                row.status = String::from("FAIL");
                row.problem = true;
                row.notes
                    .push(crate::redact::redact(&e.to_string()).into_owned());
                return;
            }
        };
    row.status = String::from("ok");
    let listed: Vec<String> = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v.get("data").and_then(Value::as_array).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect();
    row.listed.clone_from(&listed);
    let mut shown = Vec::new();
    for model in models {
        if listed.is_empty() || listed.contains(model) {
            shown.push(format!("{model} ✓"));
        } else {
            shown.push(format!("{model} ✗"));
            row.problem = true;
            row.notes.push(format!(
                "model {model} is not in the provider's list ({} listed)",
                listed.len()
            ));
        }
    }
    row.models = if shown.is_empty() {
        listed_models(&listed)
    } else {
        shown.join(" ")
    };
}

/// The models a provider listed, by name: up to [`LISTED_SHOWN`], then how many more.
fn listed_models(listed: &[String]) -> String {
    match listed.len() {
        0 => String::from("(none listed)"),
        n if n <= LISTED_SHOWN => listed.join(" "),
        n => format!(
            "{} … ({} more)",
            listed[..LISTED_SHOWN].join(" "),
            n - LISTED_SHOWN
        ),
    }
}

/// Model names a row shows when no model is configured.
const LISTED_SHOWN: usize = 6;

fn table(rows: &[Row]) -> String {
    let headers = ["provider", "kind", "base_url", "status", "models"];
    let cells: Vec<[&str; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.name.as_str(),
                r.kind.as_str(),
                r.base_url.as_str(),
                r.status.as_str(),
                r.models.as_str(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .chain([headers[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cols: [&str; 5]| {
        let mut out = String::new();
        for (i, col) in cols.iter().enumerate() {
            let _ = write!(out, "{col:<width$}  ", width = widths[i]);
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(headers);
    for (row, cols) in rows.iter().zip(&cells) {
        out.push_str(&line(*cols));
        for note in &row.notes {
            let _ = writeln!(out, "  - {}: {note}", row.name);
        }
    }
    out
}
