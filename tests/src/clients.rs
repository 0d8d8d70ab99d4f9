//! Real clients: the Claude Code CLI and the official Anthropic SDKs (Python and TypeScript).
//!
//! They are installed by `scripts/setup-e2e.sh` (`make setup`) into `tests/e2e/`. A missing client is
//! an error that says so — the tests never skip silently.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::err;
use crate::tempdir::TempDir;

/// What to run when something is not installed.
pub const SETUP_HINT: &str =
    "run `make setup` (or `scripts/setup-e2e.sh`) to install the end-to-end clients";

/// `tests/e2e/`.
pub fn e2e_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e")
}

/// The Claude Code native binary: `CLAUDE_CODE_BIN`, else the npm platform package's binary.
pub fn claude_code_bin() -> crate::Result<PathBuf> {
    if let Some(p) = std::env::var_os("CLAUDE_CODE_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(err(format!(
                "CLAUDE_CODE_BIN={} is not a file: {SETUP_HINT}",
                p.display()
            )))
        };
    }
    let candidates = [
        e2e_dir().join("node_modules/@anthropic-ai/claude-code-linux-x64/claude"),
        e2e_dir().join("node_modules/@anthropic-ai/claude-code-linux-x64-musl/claude"),
        e2e_dir().join("node_modules/@anthropic-ai/claude-code-linux-arm64/claude"),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            err(format!(
                "Claude Code CLI not found (looked for {}): {SETUP_HINT}",
                candidates[0].display()
            ))
        })
}

/// The venv Python with `anthropic` installed.
pub fn python_bin() -> crate::Result<PathBuf> {
    let p = e2e_dir().join(".venv/bin/python");
    if p.is_file() {
        Ok(p)
    } else {
        Err(err(format!(
            "Python venv with the anthropic SDK not found at {}: {SETUP_HINT}",
            p.display()
        )))
    }
}

/// Check that the TypeScript SDK is installed.
pub fn require_ts_sdk() -> crate::Result<()> {
    let p = e2e_dir().join("node_modules/@anthropic-ai/sdk/package.json");
    if p.is_file() {
        Ok(())
    } else {
        Err(err(format!(
            "@anthropic-ai/sdk not found at {}: {SETUP_HINT}",
            p.display()
        )))
    }
}

/// A finished child process.
#[derive(Debug, Clone)]
pub struct ProcOutput {
    /// Exit code (None if killed by a signal).
    pub code: Option<i32>,
    /// Stdout.
    pub stdout: String,
    /// Stderr.
    pub stderr: String,
}

/// Run a command, killing it if it outlives `timeout`.
pub async fn run(mut cmd: Command, timeout: Duration, what: &str) -> crate::Result<ProcOutput> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|e| err(format!("cannot start {what}: {e}")))?;
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(out) => {
            let out = out?;
            Ok(ProcOutput {
                code: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
        }
        Err(_) => Err(err(format!(
            "{what} did not finish within {timeout:?} (hang); it was killed"
        ))),
    }
}

/// Which SDK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// Python `anthropic`.
    Python,
    /// TypeScript `@anthropic-ai/sdk`.
    TypeScript,
}

impl Sdk {
    /// Both.
    pub const ALL: [Self; 2] = [Self::Python, Self::TypeScript];

    /// Name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::TypeScript => "typescript",
        }
    }
}

/// Run an SDK driver (`tests/e2e/sdk_stream.{py,mjs}`) and parse its JSON report.
///
/// `scenario` is `text`, `tools` or `thinking`; `mode` is `both`, `stream` or `create`.
pub async fn run_sdk(
    sdk: Sdk,
    base_url: &str,
    scenario: &str,
    mode: &str,
    timeout: Duration,
) -> crate::Result<Value> {
    run_sdk_with(sdk, base_url, scenario, mode, &[], timeout).await
}

/// [`run_sdk`] with extra environment for the driver (`E2E_FETCH_URL` for `web_fetch`).
pub async fn run_sdk_with(
    sdk: Sdk,
    base_url: &str,
    scenario: &str,
    mode: &str,
    env: &[(&str, &str)],
    timeout: Duration,
) -> crate::Result<Value> {
    let dir = e2e_dir();
    let mut cmd = match sdk {
        Sdk::Python => {
            let mut c = Command::new(python_bin()?);
            c.arg(dir.join("sdk_stream.py"));
            c
        }
        Sdk::TypeScript => {
            require_ts_sdk()?;
            let mut c = Command::new("node");
            c.arg(dir.join("sdk_stream.mjs"));
            c
        }
    };
    let client_timeout_ms = timeout.as_millis().saturating_sub(2_000).max(1_000);
    cmd.args([base_url, scenario, mode])
        .current_dir(&dir)
        .env("E2E_CLIENT_TIMEOUT_MS", client_timeout_ms.to_string())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .envs(env.iter().copied());
    run_driver(cmd, timeout, &format!("{} SDK driver", sdk.name())).await
}

/// What a client driver may spend starting, on top of the timeout its requests get: importing
/// the Python `anthropic` SDK alone took 13–18 s of CPU on a quiet 2-core machine (its ~1,600
/// type modules build pydantic models at import), and more while a test run loads both cores.
/// The requests themselves are held to the caller's timeout by the client
/// (`E2E_CLIENT_TIMEOUT_MS`), so a bridge that stalls still fails the test as the client's own
/// timeout; this only keeps a slow start from being called a hang.
pub const DRIVER_START_UP: Duration = Duration::from_secs(60);

/// Run a client driver (`tests/e2e/*.mjs`, `*.py`) that reports one JSON object as its last
/// `{`-line on stdout and exits 0 (errors are in the report, not the exit code): the report.
/// `timeout` is for its requests; the process gets [`DRIVER_START_UP`] more.
///
/// # Errors
/// The driver did not start, timed out, exited non-zero or printed no JSON.
pub async fn run_driver(cmd: Command, timeout: Duration, what: &str) -> crate::Result<Value> {
    let out = run(cmd, timeout + DRIVER_START_UP, what).await?;
    if out.code != Some(0) {
        return Err(err(format!(
            "{what} exited with {:?}\nstdout: {}\nstderr: {}",
            out.code, out.stdout, out.stderr
        )));
    }
    let line = out
        .stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_default();
    serde_json::from_str(line).map_err(|e| {
        err(format!(
            "{what} printed no JSON ({e})\nstdout: {}\nstderr: {}",
            out.stdout, out.stderr
        ))
    })
}

/// One Claude Code `-p` run.
#[derive(Debug)]
pub struct ClaudeRun {
    /// Process output.
    pub output: ProcOutput,
    /// The `--output-format json` result object, when stdout held one.
    pub result: Option<Value>,
    /// The working directory the CLI ran in (kept until this is dropped).
    pub cwd: TempDir,
    /// The temp `HOME`.
    pub home: TempDir,
}

impl ClaudeRun {
    /// A readable summary for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "claude exit code {:?}\nstdout: {}\nstderr: {}",
            self.output.code,
            self.output.stdout,
            self.output.stderr.chars().take(4000).collect::<String>()
        )
    }

    /// The `result` text of the JSON output.
    pub fn result_text(&self) -> Option<&str> {
        self.result
            .as_ref()
            .and_then(|r| r.get("result"))
            .and_then(Value::as_str)
    }
}

/// Run `claude -p PROMPT --output-format json [extra_args]` against `base_url` in a fresh temp cwd
/// with a fresh temp `HOME` and a clean environment.
pub async fn run_claude_code(
    base_url: &str,
    prompt: &str,
    extra_args: &[&str],
    timeout: Duration,
) -> crate::Result<ClaudeRun> {
    run_claude_code_with(base_url, prompt, extra_args, &[], timeout).await
}

/// [`run_claude_code`] with extra environment variables (set last: they override the defaults; an
/// empty value removes the variable).
pub async fn run_claude_code_with(
    base_url: &str,
    prompt: &str,
    extra_args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> crate::Result<ClaudeRun> {
    let bin = claude_code_bin()?;
    let home = TempDir::new("home")?;
    let cwd = TempDir::new("cwd")?;
    let mut cmd = Command::new(&bin);
    cmd.arg("-p")
        .arg(prompt)
        .args(["--output-format", "json"])
        .args(extra_args);
    cmd.current_dir(cwd.path())
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
        )
        .env("HOME", home.path())
        .env("SHELL", "/bin/bash")
        .env("TMPDIR", std::env::temp_dir())
        .env("LANG", "C.UTF-8")
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("DISABLE_AUTOUPDATER", "1");
    for (k, v) in env {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    let output = run(cmd, timeout, "Claude Code CLI").await?;
    let result = output.stdout.lines().rev().find_map(|l| {
        serde_json::from_str::<Value>(l.trim())
            .ok()
            .filter(|v| v.get("type").is_some())
    });
    Ok(ClaudeRun {
        output,
        result,
        cwd,
        home,
    })
}
