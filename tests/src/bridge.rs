//! Start the real `claude-bridge` binary against an upstream, wait until it is healthy, kill it on drop.
//!
//! The binary is `CLAUDE_BRIDGE_BIN` if set, else `target/<profile>/claude-bridge` next to the test
//! executable (which lives in `target/<profile>/deps/`). Cargo does not build another package's binary
//! for `cargo test -p bridge-tests`, so build it first: `cargo build -p claude-bridge` (the Makefile and
//! `tests/README.md` do). The bridge's stdout and stderr go to `target/e2e-logs/<name>.log`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::{err, http};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// How long a bridge may take to answer `GET /health` after start.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Options of a bridge run.
#[derive(Debug, Clone)]
pub struct BridgeOptions {
    /// The subcommand (default `serve`; `agui` serves AG-UI on the port instead).
    pub subcommand: String,
    /// `--provider` (default `openai`).
    pub provider: String,
    /// `--engine` value; `None` uses `E2E_ENGINE` if set, else the binary's default.
    pub engine: Option<String>,
    /// `--model` (default `test-model`); `None` leaves the flag out.
    pub model: Option<String>,
    /// `--api-key` (the upstream key).
    pub api_key: Option<String>,
    /// More arguments after the standard ones.
    pub extra_args: Vec<String>,
    /// Let the bridge check its upstream at start (off by default in tests: see `try_start`).
    pub upstream_check: bool,
    /// More environment variables.
    pub env: Vec<(String, String)>,
    /// Run under this open-files limit, soft and hard (`ulimit -n` in `sh` before `exec`), so
    /// the bridge cannot raise it.
    pub open_files: Option<u64>,
    /// Only the subcommand, `--listen` and the extra arguments (a config file says the rest),
    /// as a deployment starts it.
    pub bare: bool,
}

impl Default for BridgeOptions {
    fn default() -> Self {
        Self {
            subcommand: "serve".into(),
            provider: "openai".into(),
            engine: None,
            model: Some("test-model".into()),
            api_key: Some("sk-upstream-test".into()),
            extra_args: Vec::new(),
            upstream_check: false,
            env: Vec::new(),
            open_files: None,
            bare: false,
        }
    }
}

impl BridgeOptions {
    /// Use this engine (`native` or `wasm`).
    #[must_use]
    pub fn engine(mut self, engine: &str) -> Self {
        self.engine = Some(engine.into());
        self
    }

    /// `--provider fabstir` for `model`, paying with `wallet` (given as `CLAUDE_BRIDGE_PRIVATE_KEY`).
    #[must_use]
    pub fn fabstir(model: &str, wallet: &[u8; 32]) -> Self {
        Self {
            provider: "fabstir".into(),
            model: Some(model.into()),
            api_key: None,
            env: vec![(
                "CLAUDE_BRIDGE_PRIVATE_KEY".into(),
                format!("0x{}", claude_bridge::fabstir::crypto::to_hex(wallet)),
            )],
            ..Self::default()
        }
    }

    /// Append arguments (e.g. `["--ca-cert", path]`).
    #[must_use]
    pub fn args<S: AsRef<str>>(mut self, args: &[S]) -> Self {
        self.extra_args
            .extend(args.iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Run under an open-files limit of `limit` (soft and hard).
    #[must_use]
    pub fn open_files(mut self, limit: u64) -> Self {
        self.open_files = Some(limit);
        self
    }
}

/// A running bridge; killed on drop.
#[derive(Debug)]
pub struct Bridge {
    child: Child,
    port: u16,
    log_path: PathBuf,
    args: Vec<String>,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `target/<profile>` directory the tests run from.
pub fn profile_dir() -> crate::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let deps = exe
        .parent()
        .ok_or_else(|| err("test executable has no parent directory"))?;
    let dir = if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().unwrap_or(deps)
    } else {
        deps
    };
    Ok(dir.to_path_buf())
}

/// Where the bridge binary is (see the module docs).
pub fn binary_path() -> crate::Result<PathBuf> {
    if let Some(p) = std::env::var_os("CLAUDE_BRIDGE_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(err(format!(
                "CLAUDE_BRIDGE_BIN={} is not a file",
                p.display()
            )))
        };
    }
    let p = profile_dir()?.join("claude-bridge");
    if !p.is_file() {
        return Err(err(format!(
            "claude-bridge binary not found at {}: build it first with `cargo build -p claude-bridge` \
             (same profile as the tests) or set CLAUDE_BRIDGE_BIN",
            p.display()
        )));
    }
    warn_if_stale(&p);
    Ok(p)
}

fn newest_mtime(dir: &Path, newest: &mut SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            newest_mtime(&path, newest);
        } else if let Ok(m) = e.metadata().and_then(|m| m.modified())
            && m > *newest
        {
            *newest = m;
        }
    }
}

fn warn_if_stale(bin: &Path) {
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    let mut newest = SystemTime::UNIX_EPOCH;
    for d in ["host-native/src", "core/src", "core/component/src", "wit"] {
        newest_mtime(&root.join(d), &mut newest);
    }
    if newest > built {
        eprintln!(
            "warning: {} is older than the bridge sources; run `cargo build -p claude-bridge` to test the current code",
            bin.display()
        );
    }
}

/// A free loopback port (for a server a test starts).
pub fn free_port() -> crate::Result<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(l.local_addr()?.port())
}

fn logs_dir() -> crate::Result<PathBuf> {
    let dir = profile_dir()?
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("e2e-logs");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

impl Bridge {
    /// Start against an OpenAI-compatible base URL (e.g. [`crate::upstream::Upstream::base_url`]).
    pub async fn start(upstream_base_url: &str, name: &str) -> crate::Result<Self> {
        Self::start_with(upstream_base_url, name, BridgeOptions::default()).await
    }

    /// Start with options. Retries with another port if the chosen one was taken meanwhile.
    pub async fn start_with(
        upstream_base_url: &str,
        name: &str,
        opts: BridgeOptions,
    ) -> crate::Result<Self> {
        let mut last_err = err("no attempt");
        for _ in 0..3 {
            match Self::try_start(upstream_base_url, name, &opts).await {
                Ok(b) => return Ok(b),
                Err(e) => {
                    let retry = e.to_string().to_ascii_lowercase().contains("address");
                    last_err = e;
                    if !retry {
                        break;
                    }
                }
            }
        }
        Err(last_err)
    }

    async fn try_start(
        upstream_base_url: &str,
        name: &str,
        opts: &BridgeOptions,
    ) -> crate::Result<Self> {
        let bin = binary_path()?;
        let port = free_port()?;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let log_path = logs_dir()?.join(format!("{name}-{}-{n}.log", std::process::id()));
        let log = File::create(&log_path)?;
        let mut args: Vec<String> = vec![
            opts.subcommand.clone(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
        ];
        if !opts.bare {
            args.extend([
                "--provider".into(),
                opts.provider.clone(),
                "--base-url".into(),
                upstream_base_url.into(),
            ]);
        }
        if let Some(m) = opts.model.as_ref().filter(|_| !opts.bare) {
            args.extend(["--model".into(), m.clone()]);
        }
        if let Some(k) = opts.api_key.as_ref().filter(|_| !opts.bare) {
            args.extend(["--api-key".into(), k.clone()]);
        }
        let engine = opts
            .engine
            .clone()
            .or_else(|| std::env::var("E2E_ENGINE").ok().filter(|e| !e.is_empty()));
        if let Some(e) = engine {
            args.extend(["--engine".into(), e]);
        }
        args.extend(opts.extra_args.iter().cloned());
        let mut cmd = match opts.open_files {
            None => Command::new(&bin),
            Some(limit) => {
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
                    .arg(&bin);
                sh
            }
        };
        cmd.args(&args)
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        // No configuration from the developer's shell leaks in.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("CLAUDE_BRIDGE_") {
                cmd.env_remove(&k);
            }
        }
        let rust_log =
            std::env::var("E2E_BRIDGE_LOG").unwrap_or_else(|_| "info,claude_bridge=debug".into());
        cmd.env("CLAUDE_BRIDGE_LOG", &rust_log)
            .env("RUST_LOG", &rust_log);
        // The start-up check of the upstream (a GET of its model list) would be one more request
        // and connection in the scripted upstream's counts; tests of it turn it back on.
        if !opts.upstream_check {
            cmd.env("CLAUDE_BRIDGE_NO_UPSTREAM_CHECK", "true");
        }
        // Every bridge of the run shares one compiled-core cache, also those given a fresh HOME
        // (the AG-UI and launcher tests): each would otherwise compile the component again.
        let (cache_var, cache_dir) = compiled_core_cache_env();
        cmd.env(cache_var, cache_dir);
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .map_err(|e| err(format!("cannot start {}: {e}", bin.display())))?;
        let mut bridge = Self {
            child,
            port,
            log_path,
            args,
        };
        bridge.wait_healthy().await?;
        Ok(bridge)
    }

    async fn wait_healthy(&mut self) -> crate::Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let url = format!("{}/health", self.base_url());
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(err(format!(
                    "claude-bridge {:?} exited during startup with {status}; log {}:\n{}",
                    self.args,
                    self.log_path.display(),
                    self.log()
                )));
            }
            if let Ok(r) = http::send("GET", &url, &[], None, Duration::from_secs(2)).await
                && r.status == 200
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(err(format!(
                    "claude-bridge {:?} did not answer GET /health with 200 within {STARTUP_TIMEOUT:?}; log {}:\n{}",
                    self.args,
                    self.log_path.display(),
                    self.log()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `http://127.0.0.1:PORT` (what `ANTHROPIC_BASE_URL` should be).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Where its output goes.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Its output so far (last 20 000 characters).
    pub fn log(&self) -> String {
        let s = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let skip = s.chars().count().saturating_sub(20_000);
        s.chars().skip(skip).collect()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send a signal (`TERM`, `INT`, …) to the process with `kill -s`.
    pub fn signal(&self, name: &str) -> crate::Result<()> {
        let status = Command::new("kill")
            .args(["-s", name, &self.pid().to_string()])
            .stdin(Stdio::null())
            .status()
            .map_err(|e| err(format!("cannot run kill: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(err(format!(
                "kill -s {name} {} failed: {status}",
                self.pid()
            )))
        }
    }

    /// Wait (polling, without blocking the runtime) until the process exits; `None` if it is still
    /// running after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> crate::Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// `CLAUDE_BRIDGE_CACHE_DIR` for the bridges a test starts: one directory for the whole run, so
/// the wasm engine's compiled core is compiled once, not once per bridge with a fresh `HOME`.
pub fn compiled_core_cache_env() -> (&'static str, String) {
    let dir = std::env::temp_dir().join("claude-bridge-e2e-compiled-core");
    (
        "CLAUDE_BRIDGE_CACHE_DIR",
        dir.to_string_lossy().into_owned(),
    )
}
