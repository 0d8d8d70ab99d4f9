//! The official MCP SDK's server (`tests/e2e/mcp_server.mjs`, Streamable HTTP): a `docs` server
//! with a `lookup_fact` tool, and optionally a second tool with a long name (for upstreams that
//! limit tool names). It logs every call; [`DocsServer::calls`] reads them.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::clients::e2e_dir;
use crate::err;

/// A running MCP server: its URL and the tool calls it logged.
#[derive(Debug)]
pub struct DocsServer {
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    calls: Arc<Mutex<Vec<Value>>>,
    _child: tokio::process::Child,
}

impl DocsServer {
    /// Start it (with a second tool called `long_tool`, when given).
    ///
    /// # Errors
    /// Node or the server could not start, or it did not say its port within 30 s.
    pub async fn start(long_tool: Option<&str>) -> crate::Result<Self> {
        let mut command = tokio::process::Command::new("node");
        command.arg(e2e_dir().join("mcp_server.mjs"));
        if let Some(name) = long_tool {
            command.args(["--long-tool", name]);
        }
        let mut child = command
            .current_dir(e2e_dir())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| err("the MCP server has no stdout"))?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .map_err(|_| err("the MCP server did not start within 30 s"))??
            .ok_or_else(|| err("the MCP server exited before it listened"))?;
        let port = serde_json::from_str::<Value>(&first)?["port"]
            .as_u64()
            .ok_or_else(|| err(format!("the MCP server said {first:?}, not its port")))?;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&calls);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    sink.lock().unwrap_or_else(PoisonError::into_inner).push(v);
                }
            }
        });
        Ok(Self {
            url: format!("http://127.0.0.1:{port}/mcp"),
            calls,
            _child: child,
        })
    }

    /// The tool calls logged so far (`{"called": NAME, "arguments": …}` each).
    #[must_use]
    pub fn calls(&self) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
