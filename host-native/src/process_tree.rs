//! Everything a launched tool starts ends with it.
//!
//! `claude-bridge claude` and `claude-bridge codex` run a tool that starts helpers of its own:
//! Codex's `app-server`, MCP servers, shells of a Bash tool. Some outlive the tool: when it exits
//! they are re-parented (on Linux, to pid 1) and keep running — with the bridge's key in their
//! environment, from a directory that may be gone. A process group does not catch them (a
//! helper may start its own session), and the tool must stay in the terminal's foreground
//! group to read its keys, so the launcher cannot move it into a group of its own either.
//!
//! So the launcher becomes a *child subreaper* (`prctl(PR_SET_CHILD_SUBREAPER)`) before it starts
//! the tool: an orphan anywhere below it is re-parented to the launcher instead of pid 1. While
//! the tool runs, [`reap_orphans`] collects those that exit (no zombies pile up); when the tool
//! has exited, [`end_descendants`] asks every process still below the launcher to stop
//! (SIGTERM), waits a grace period, kills what is left (SIGKILL) and reaps them. The tool's own
//! pid is never touched by either: tokio owns it.
//!
//! ```text
//!   launcher (subreaper) ── codex ── app-server ── pid-update-loop
//!   codex exits:  launcher ── app-server ── pid-update-loop      (re-parented to us, not pid 1)
//!   end_descendants: SIGTERM app-server → pid-update-loop re-parented → SIGTERM … → none left
//! ```
//!
//! Elsewhere than Linux these are no-ops.

use std::time::Duration;

/// Make this process the subreaper of everything it starts from now on. Returns whether it
/// took (false elsewhere than Linux, or if the kernel refused).
#[must_use]
pub fn adopt_orphans() -> bool {
    #[cfg(target_os = "linux")]
    {
        rustix::process::set_child_subreaper(Some(rustix::process::getpid())).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// The pids whose parent is this process, with whether each has exited (a zombie), read from
/// `/proc`; `except` (the tool tokio waits for) is left out.
#[cfg(target_os = "linux")]
fn children(except: Option<u32>) -> Vec<(i32, bool)> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            if Some(pid) == except || pid == me {
                return None;
            }
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let (state, ppid) = state_and_parent(&stat)?;
            (ppid == me).then(|| (i32::try_from(pid).ok(), state == 'Z'))
        })
        .filter_map(|(pid, zombie)| Some((pid?, zombie)))
        .collect()
}

/// A `/proc/PID/stat` line's state letter and parent pid. The command name (field 2, in
/// parentheses) may hold spaces and parentheses itself, so fields are counted after its last `)`.
#[cfg_attr(
    not(target_os = "linux"),
    expect(dead_code, reason = "read from /proc on Linux only")
)]
fn state_and_parent(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Collect (wait for) the children that have exited, except `tool`; returns how many.
#[must_use]
pub fn reap_orphans(tool: Option<u32>) -> usize {
    #[cfg(target_os = "linux")]
    {
        children(tool)
            .into_iter()
            .filter(|(_, zombie)| *zombie)
            .filter(|(pid, _)| reap(*pid))
            .count()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = tool;
        0
    }
}

#[cfg(target_os = "linux")]
fn reap(pid: i32) -> bool {
    rustix::process::Pid::from_raw(pid).is_some_and(|pid| {
        matches!(
            rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG),
            Ok(Some(_))
        )
    })
}

#[cfg(target_os = "linux")]
fn signal(pid: i32, signal: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Ask the process `pid` to stop (SIGTERM); elsewhere than Linux, nothing.
pub fn terminate(pid: u32) {
    #[cfg(target_os = "linux")]
    if let Ok(pid) = i32::try_from(pid) {
        signal(pid, rustix::process::Signal::TERM);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = pid;
}

/// What [`end_descendants`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Processes asked to stop (SIGTERM).
    pub asked: usize,
    /// Of those, the ones still running after the grace period (SIGKILL).
    pub killed: usize,
}

/// Stop every process below this one (the tool has exited): SIGTERM, then SIGKILL after
/// `grace`; each is reaped. Blocks (at most about `grace` + 1 s): call it off the async runtime.
#[must_use]
pub fn end_descendants(grace: Duration) -> Ended {
    #[cfg(target_os = "linux")]
    {
        use std::collections::BTreeSet;
        use std::time::Instant;
        let started = Instant::now();
        let mut asked = BTreeSet::new();
        let mut killed = BTreeSet::new();
        loop {
            let live: Vec<i32> = children(None)
                .into_iter()
                .filter(|(pid, zombie)| !(*zombie && reap(*pid)))
                .map(|(pid, _)| pid)
                .collect();
            if live.is_empty() {
                break;
            }
            let late = started.elapsed() >= grace;
            for pid in live {
                if late {
                    if killed.insert(pid) {
                        signal(pid, rustix::process::Signal::KILL);
                    }
                } else if asked.insert(pid) {
                    signal(pid, rustix::process::Signal::TERM);
                }
            }
            if started.elapsed() >= grace + Duration::from_secs(1) {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Ended {
            asked: asked.len(),
            killed: killed.len(),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = grace;
        Ended::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_are_read() {
        assert_eq!(
            state_and_parent("4242 (codex) S 4200 4242 4242 0 -1"),
            Some(('S', 4200))
        );
        assert_eq!(
            state_and_parent("77 (a) b) (c) Z 1 77 77 0 -1"),
            Some(('Z', 1))
        );
        assert_eq!(state_and_parent("77 (truncated"), None);
    }
}
