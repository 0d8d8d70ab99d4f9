//! A web site for the bridge's web fetch to read: Python's own `http.server` serving files from
//! a temporary directory on a loopback port — a real HTTP server, with its own content types
//! (`text/html` for `.html`, `application/pdf` for `.pdf`), 404s and redirects of directories.
//! Every request it logs is kept ([`Website::paths`]), so a test can tell what reached it.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::tempdir::TempDir;
use crate::{clients, err};

/// A running site.
#[derive(Debug)]
pub struct Website {
    child: Child,
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
    _root: TempDir,
}

impl Website {
    /// Serve `files` (name, bytes) from a fresh directory.
    ///
    /// # Errors
    /// The directory cannot be written or the server does not start within 20 s.
    pub async fn start(files: &[(&str, &[u8])]) -> crate::Result<Self> {
        let root = TempDir::new("website")?;
        for (name, bytes) in files {
            std::fs::write(root.path().join(name), bytes)?;
        }
        let mut child = Command::new(clients::python_bin()?)
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| err("no stdout"))?;
        let stderr = child.stderr.take().ok_or_else(|| err("no stderr"))?;
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let mut lines = BufReader::new(stdout).lines();
        let port = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(port) = line
                    .split(" port ")
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next())
                    .and_then(|p| p.parse::<u16>().ok())
                {
                    return Ok(port);
                }
            }
            Err(err("http.server ended before it said its port"))
        })
        .await
        .map_err(|_| err("http.server did not start within 20 s"))??;
        // Its access log: `127.0.0.1 - - [date] "GET /page.html HTTP/1.1" 200 -`.
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&requests);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(path) = line
                    .split('"')
                    .nth(1)
                    .and_then(|request| request.split_whitespace().nth(1))
                    && let Ok(mut seen) = log.lock()
                {
                    seen.push(path.to_owned());
                }
            }
        });
        Ok(Self {
            child,
            port,
            requests,
            _root: root,
        })
    }

    /// `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The paths asked for so far (with their query), in order.
    #[must_use]
    pub fn paths(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Whether the server is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}
