//! The real OpenAI Codex CLI (npm `@openai/codex`, pinned in `tests/e2e/package.json`), started
//! by `claude-bridge codex` with its own CODEX_HOME (kept under the state directory), running one task: reasoning and two
//! parallel `exec_command` calls, a file written with its free-form `apply_patch` tool, then an
//! answer. The scripted model side answers by [`CodexTurn::after`] (how many tool results it has
//! seen).

use std::path::PathBuf;
use std::time::Duration;

use tokio::process::Command;

use crate::clients::{SETUP_HINT, e2e_dir, run};
use crate::err;
use crate::tempdir::TempDir;

/// The command the model runs first.
pub const EXEC_CMD: &str = "echo from-exec > ran.txt";

/// The command the model runs beside it, in the same turn.
pub const EXEC_CMD_2: &str = "echo from-exec-2 > ran2.txt";

/// What the model thinks before its first calls.
pub const REASONING: &str = "Two files by command first, then one by patch.";

/// The patch the model writes second (Codex's apply_patch format).
pub const PATCH: &str =
    "*** Begin Patch\n*** Add File: patched.txt\n+written by apply_patch\n*** End Patch\n";

/// The answer the model gives last.
pub const ANSWER: &str = "All done.";

/// What the model does on each turn of the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodexTurn {
    /// Reason, then call `exec_command` twice at once: [`EXEC_CMD`] and [`EXEC_CMD_2`].
    Exec,
    /// Call `apply_patch` with the raw [`PATCH`].
    Patch,
    /// Answer [`ANSWER`].
    Answer,
}

impl CodexTurn {
    /// The turn after this many tool results.
    #[must_use]
    pub fn after(tool_results: usize) -> Self {
        match tool_results {
            0 => Self::Exec,
            1 | 2 => Self::Patch,
            _ => Self::Answer,
        }
    }
}

/// The Codex binary (the platform package's, called directly).
///
/// # Errors
/// It is not installed.
pub fn codex_bin() -> crate::Result<PathBuf> {
    let bin = e2e_dir()
        .join("node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(err(format!("the Codex CLI is missing: {SETUP_HINT}")))
    }
}

/// Run the task with `claude-bridge codex BRIDGE_ARGS -- exec …` (and `env` for the bridge) in a
/// fresh work directory (its own state directory); check that both tools really ran, the answer
/// came back, and the session was kept in the bridge's CODEX_HOME (so `codex resume` works).
/// `describe` adds the upstream's side to a failure.
///
/// # Errors
/// What went wrong, with Codex's output and the bridge's log.
pub async fn run_task(
    bridge_args: &[String],
    env: &[(String, String)],
    describe: &dyn Fn() -> String,
) -> crate::Result<()> {
    let codex = codex_bin()?;
    let work = TempDir::new("codex-work")?;
    let last = work.path().join("last-message.txt");
    let tmp = work.path().join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let mut cmd = Command::new(crate::bridge::binary_path()?);
    cmd.arg("codex")
        .arg("--codex-bin")
        .arg(&codex)
        .args(bridge_args)
        .args(["--no-upstream-check", "--log-file"])
        .arg(work.path().join("bridge.log"))
        .args(["--", "exec", "--skip-git-repo-check"])
        .args(["--dangerously-bypass-approvals-and-sandbox", "--json", "-o"])
        .arg(&last)
        .args(["-c", "model_providers.claude-bridge.request_max_retries=0"])
        .args(["-c", "model_providers.claude-bridge.stream_max_retries=0"])
        .args([
            "-c",
            "web_search=\"disabled\"",
            "-c",
            "features.shell_snapshot=false",
        ])
        .arg("Make ran.txt, then patched.txt.")
        .current_dir(work.path())
        // The CODEX_HOME is kept under the state directory, never under the temporary one.
        .env("TMPDIR", &tmp)
        .env("XDG_STATE_HOME", work.path().join("state"))
        .env_remove("CODEX_HOME")
        .env_remove("OPENAI_API_KEY");
    for (key, value) in env {
        cmd.env(key, value);
    }
    let out = run(cmd, Duration::from_secs(120), "claude-bridge codex").await?;
    let log = std::fs::read_to_string(work.path().join("bridge.log")).unwrap_or_default();
    let read = |name: &str| std::fs::read_to_string(work.path().join(name)).ok();
    let leftovers: Vec<String> = std::fs::read_dir(&tmp)?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("claude-bridge-codex-"))
        .collect();
    let sessions = work.path().join("state/claude-bridge/codex-home/sessions");
    let problem = if out.code != Some(0) {
        Some(String::from("codex exited with an error"))
    } else if read("ran.txt").as_deref() != Some("from-exec\n") {
        Some(String::from("exec_command did not run"))
    } else if read("ran2.txt").as_deref() != Some("from-exec-2\n") {
        Some(String::from("the parallel exec_command did not run"))
    } else if read("patched.txt").as_deref() != Some("written by apply_patch\n") {
        Some(String::from("apply_patch's raw text did not reach Codex"))
    } else if std::fs::read_to_string(&last)
        .ok()
        .as_deref()
        .map(str::trim)
        != Some(ANSWER)
    {
        Some(String::from("the last message is not the answer"))
    } else if !leftovers.is_empty() {
        Some(format!("a CODEX_HOME was made under TMPDIR: {leftovers:?}"))
    } else if !sessions.is_dir() {
        Some(format!(
            "the session was not kept in {}",
            sessions.display()
        ))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(err(format!(
            "{problem}: exit {:?}\nstdout:\n{}\nstderr:\n{}\n--- bridge log:\n{log}\n{}",
            out.code,
            out.stdout,
            out.stderr,
            describe()
        ))),
    }
}
