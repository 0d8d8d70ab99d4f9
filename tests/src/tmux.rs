//! A real terminal for the interactive clients: a tmux session of its own (its own server
//! socket, so tests never touch a user's tmux), keys typed with `send-keys`, the screen read
//! with `capture-pane`. Interactive Claude Code and Codex draw a TUI that only a terminal shows;
//! what a person would see is what these tests read.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::err;

/// One tmux session running one command.
#[derive(Debug)]
pub struct Tmux {
    socket: PathBuf,
    name: String,
}

impl Tmux {
    /// Start `command` (run by `sh -c`) in `dir` with exactly `env` (plus `TERM`), in a
    /// 200×50 window; the session stays open after the command exits (so its last screen can be
    /// read).
    ///
    /// # Errors
    /// tmux is missing or could not start.
    pub fn start(
        socket_dir: &Path,
        name: &str,
        dir: &Path,
        env: &[(&str, String)],
        command: &str,
    ) -> crate::Result<Self> {
        let socket = socket_dir.join(format!("tmux-{name}.sock"));
        // What these terminals run is the bridge's launchers: they share the run's compiled core.
        let (cache_var, cache_dir) = crate::bridge::compiled_core_cache_env();
        let mut exports = format!("{cache_var}={} ", shell_quote(&cache_dir));
        for (key, value) in env {
            exports.push_str(&format!("{key}={} ", shell_quote(value)));
        }
        let script = format!(
            "cd {} && env -i TERM=xterm-256color {exports}{command}; echo \"[exited $?]\"; sleep 600",
            shell_quote(&dir.to_string_lossy())
        );
        let status = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["new-session", "-d", "-s", name, "-x", "200", "-y", "50"])
            // As separate arguments tmux runs it as it is, not through the user's shell.
            .args(["sh", "-c", &script])
            .status()
            .map_err(|e| {
                err(format!(
                    "cannot run tmux (scripts/setup-e2e.sh installs it): {e}"
                ))
            })?;
        if !status.success() {
            return Err(err(format!("tmux new-session failed: {status}")));
        }
        Ok(Self {
            socket,
            name: name.to_owned(),
        })
    }

    fn tmux(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new("tmux");
        cmd.arg("-S").arg(&self.socket);
        cmd
    }

    /// The screen as text (the visible pane, and the history above it).
    #[must_use]
    pub fn screen(&self) -> String {
        self.tmux()
            .args(["capture-pane", "-p", "-J", "-S", "-200", "-t", &self.name])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// The visible pane only (what a person sees now; no history above it).
    #[must_use]
    pub fn visible(&self) -> String {
        self.tmux()
            .args(["capture-pane", "-p", "-J", "-t", &self.name])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Wait until the visible pane is no longer `before` (a key took effect); at most
    /// `timeout`, then go on.
    pub async fn wait_for_change(&self, before: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline && self.visible() == before {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The visible pane once it has not changed for half a second (at most `timeout`).
    pub async fn settled(&self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let mut last = self.visible();
        let mut since = Instant::now();
        while Instant::now() < deadline && since.elapsed() < Duration::from_millis(500) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = self.visible();
            if now != last {
                last = now;
                since = Instant::now();
            }
        }
        last
    }

    /// Type `text` literally (no key names), then nothing else.
    ///
    /// # Errors
    /// tmux failed.
    pub fn type_text(&self, text: &str) -> crate::Result<()> {
        self.keys(&["-l", text])
    }

    /// Press keys by tmux name (`Enter`, `Escape`, `C-c`, `Down`).
    ///
    /// # Errors
    /// tmux failed.
    pub fn press(&self, keys: &[&str]) -> crate::Result<()> {
        self.keys(keys)
    }

    fn keys(&self, keys: &[&str]) -> crate::Result<()> {
        let status = self
            .tmux()
            .args(["send-keys", "-t", &self.name])
            .args(keys)
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(err(format!("tmux send-keys {keys:?} failed")))
        }
    }

    /// Wait until the screen (with its history) shows any of `texts`; the screen then. On
    /// time-out: an error with the last screen.
    ///
    /// # Errors
    /// None of `texts` appeared within `timeout`.
    pub async fn wait_for(&self, texts: &[&str], timeout: Duration) -> crate::Result<String> {
        self.wait_until(texts, timeout, Self::screen).await
    }

    /// [`Tmux::wait_for`] on the visible pane only (for deciding what to press on a screen).
    ///
    /// # Errors
    /// None of `texts` appeared within `timeout`.
    pub async fn wait_for_visible(
        &self,
        texts: &[&str],
        timeout: Duration,
    ) -> crate::Result<String> {
        self.wait_until(texts, timeout, Self::visible).await
    }

    async fn wait_until(
        &self,
        texts: &[&str],
        timeout: Duration,
        read: fn(&Self) -> String,
    ) -> crate::Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let screen = read(self);
            if texts.iter().any(|t| screen.contains(t)) {
                return Ok(screen);
            }
            if Instant::now() >= deadline {
                return Err(err(format!(
                    "the screen did not show any of {texts:?} within {timeout:?}:\n{screen}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// `value` in single quotes for `sh`.
#[must_use]
pub fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
}
