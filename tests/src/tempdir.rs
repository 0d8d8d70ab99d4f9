//! Throw-away directories, removed on drop (set `E2E_KEEP_TMP=1` to keep them for debugging).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh directory under the system temp dir.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Create `<tmp>/claude-bridge-e2e-<prefix>-<pid>-<n>-<nanos>`.
    pub fn new(prefix: &str) -> crate::Result<Self> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!(
            "claude-bridge-e2e-{prefix}-{}-{n}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("E2E_KEEP_TMP").is_none() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
