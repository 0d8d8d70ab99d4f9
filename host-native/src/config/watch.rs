//! Notice when the config file changes: a [`notify`] watcher (inotify on Linux) on the file's
//! directory — not on the file, because editors and `kubectl` replace a file by renaming a new
//! one over it, which a watch on the old file never sees — and, when the path is a symlink, on
//! the directory of the file it points to. Events for other files in those directories, and
//! reads (the bridge's own included), are ignored.
//!
//! A burst of events (a truncate, then writes, then a close) is one change: [`next_change`]
//! returns once the directory has been quiet for [`SETTLE`], so a half-written file is not read.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// Quiet time after an event before the file is read.
pub const SETTLE: Duration = Duration::from_millis(150);

/// Start watching `file`. The watcher must be kept: dropping it ends the watch.
///
/// # Errors
/// The file's directory cannot be watched (e.g. the inotify watch limit is reached).
pub fn watch(file: &Path) -> Result<(notify::RecommendedWatcher, mpsc::Receiver<()>), String> {
    let mut watched: Vec<PathBuf> = vec![file.to_path_buf()];
    if let Ok(target) = std::fs::canonicalize(file)
        && target != file
    {
        watched.push(target);
    }
    let names = watched.clone();
    // One slot: a change already signalled and not yet read covers the next ones.
    let (tx, rx) = mpsc::channel(1);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if matches!(event.kind, EventKind::Access(_) | EventKind::Other) {
            return;
        }
        if event
            .paths
            .iter()
            .any(|p| names.iter().any(|n| same_entry(p, n)))
        {
            let _ = tx.try_send(());
        }
    })
    .map_err(|e| e.to_string())?;
    for path in &watched {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or_else(|| Path::new("."));
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok((watcher, rx))
}

/// The same directory entry: the same name in the same directory (the event's path is the
/// watched directory joined with the entry's name).
fn same_entry(event: &Path, watched: &Path) -> bool {
    event.file_name() == watched.file_name()
        && match (event.parent(), watched.parent()) {
            (Some(a), Some(b)) => a == b || a.canonicalize().ok() == b.canonicalize().ok(),
            _ => false,
        }
}

/// Wait for the next change, then for [`SETTLE`] of quiet. Never returns when there is no
/// watcher (`None`) or the watcher stopped.
pub async fn next_change(changes: Option<&mut mpsc::Receiver<()>>) {
    let Some(changes) = changes else {
        return std::future::pending().await;
    };
    if changes.recv().await.is_none() {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(SETTLE).await;
        if changes.try_recv().is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn changed_within(rx: &mut mpsc::Receiver<()>, wait: Duration) -> bool {
        tokio::time::timeout(wait, next_change(Some(rx)))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_write_and_a_rename_over_the_file_are_changes_and_a_neighbour_is_not() {
        let dir = std::env::temp_dir().join(format!("cb-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bridge.toml");
        std::fs::write(&file, "a = 1\n").unwrap();
        let (_watcher, mut rx) = watch(&file).unwrap();
        let wait = Duration::from_secs(3);

        std::fs::write(&file, "a = 2\n").unwrap();
        assert!(changed_within(&mut rx, wait).await, "a write");

        let _ = std::fs::read_to_string(&file).unwrap();
        std::fs::write(dir.join("other.toml"), "b = 1\n").unwrap();
        assert!(
            !changed_within(&mut rx, Duration::from_millis(600)).await,
            "a read or another file is not a change"
        );

        let new = dir.join("bridge.toml.tmp");
        std::fs::write(&new, "a = 3\n").unwrap();
        std::fs::rename(&new, &file).unwrap();
        assert!(changed_within(&mut rx, wait).await, "a rename over it");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
