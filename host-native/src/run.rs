//! Wiring: build the engine, the upstream client and the server from the command line.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tracing::info;

use crate::cli::{EngineChoice, LogFormat, ServeArgs};
use crate::engine::{self, Engine};
use crate::server::{self, AppState};

/// Set up logging: to stderr, or appended to `--log-file`. Secrets never reach it: the configured
/// ones are registered with [`crate::redact`] first, and every line is written through its
/// masking writer.
///
/// # Errors
/// The log file cannot be created.
pub fn init_tracing(args: &ServeArgs) -> Result<(), String> {
    init_tracing_to(args, args.log_file.as_deref())
}

/// [`init_tracing`] to `file` (`None` or `-`: stderr), creating its directory.
///
/// # Errors
/// The log file cannot be created.
pub fn init_tracing_to(args: &ServeArgs, file: Option<&std::path::Path>) -> Result<(), String> {
    crate::redact::register_secrets(args);
    let filter = crate::environment::non_empty("RUST_LOG")
        .ok_or(())
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).map_err(|_| ()))
        .or_else(|()| tracing_subscriber::EnvFilter::try_new(&args.log))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let file = file.filter(|f| f.as_os_str() != "-");
    let (writer, ansi) = match file {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            let opened = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("--log-file {}: {e}", path.display()))?;
            (crate::redact::RedactingWriter::to_file(opened), false)
        }
        None => (
            crate::redact::RedactingWriter::default(),
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
        ),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(ansi);
    let _ = match args.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
    Ok(())
}

/// Where `claude-bridge claude` (and `codex`, `tool` naming which) logs unless `--log-file` says
/// otherwise: a file per run under `$XDG_STATE_HOME/claude-bridge/` (else
/// `~/.local/state/claude-bridge/`), so the log never draws over the tool's screen. `None` when
/// neither directory is known (then stderr).
#[must_use]
pub fn launcher_log_file(tool: &str, now_unix_secs: u64, pid: u32) -> Option<std::path::PathBuf> {
    Some(crate::environment::state_dir()?.join(format!("{tool}-{now_unix_secs}-{pid}.log")))
}

/// Launcher log files kept per tool: older ones are removed when a launcher starts.
pub const LAUNCHER_LOGS_KEPT: usize = 10;

/// Remove all but the newest `keep` launcher logs of `tool` (`TOOL-<secs>-<pid>.log`) in `dir`,
/// newest by the time in the name, never `current` (this run's, whatever the clock says);
/// returns how many were removed. Other files are left alone.
#[must_use]
pub fn prune_launcher_logs(
    dir: &std::path::Path,
    tool: &str,
    keep: usize,
    current: &std::path::Path,
) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let prefix = format!("{tool}-");
    let mut logs: Vec<(u64, u32, std::path::PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let stem = name.strip_prefix(&prefix)?.strip_suffix(".log")?;
            let (secs, pid) = stem.split_once('-')?;
            Some((secs.parse().ok()?, pid.parse().ok()?, entry.path()))
        })
        .collect();
    logs.sort_unstable_by_key(|(secs, pid, _)| std::cmp::Reverse((*secs, *pid)));
    logs.iter()
        .skip(keep)
        .filter(|(_, _, path)| path != current && std::fs::remove_file(path).is_ok())
        .count()
}

/// The engine the arguments ask for.
///
/// # Errors
/// The wasm engine could not be set up.
pub fn build_engine(args: &ServeArgs) -> Result<Arc<dyn Engine>, String> {
    match (args.engine, &args.core) {
        (_, Some(plugin)) => {
            engine::wasm(Some(plugin)).map_err(|e| format!("--core {}: {e}", plugin.display()))
        }
        (EngineChoice::Wasm, None) => engine::wasm(None).map_err(|e| e.to_string()),
        (EngineChoice::Native, None) => Ok(engine::native()),
    }
}

/// The shared state of a server.
///
/// # Errors
/// Bad upstream configuration or engine set-up failure.
pub async fn build_state(args: &ServeArgs) -> Result<Arc<AppState>, String> {
    let engine = build_engine(args)?;
    let config = crate::config::load_config(args)?;
    let routes = match &config {
        Some(config) => server::routes::Routes::from_config(config, args, &engine, None).await?,
        None => server::routes::Routes::from_args(args, &engine).await?,
    };
    let client_key = args.client_key.clone().filter(|k| !k.is_empty());
    let gateway = match &config {
        Some(config) if config.gateway.enabled(config.store_table) => Some(
            crate::gateway::Gateway::start(config.gateway.clone(), client_key.as_deref()).await?,
        ),
        _ => None,
    };
    // Keys guard the bridge as a client key does.
    let guard = crate::guard::Guard::new(
        &args.allowed_origin,
        client_key.is_some() || gateway.as_ref().is_some_and(|g| g.requires_key()),
    )?;
    Ok(Arc::new(AppState {
        engine,
        routes: std::sync::RwLock::new(Arc::new(routes)),
        client_key,
        max_body_bytes: args.max_body_bytes,
        body_budget: server::conn::BodyBudget::new(args.body_budget_bytes),
        limits: args.conn_limits(),
        guard,
        upstream_models: std::sync::RwLock::default(),
        responses: Arc::new(server::responses_store::ResponseStore::new(
            args.responses_store_bytes,
            Duration::from_secs(args.responses_store_ttl),
        )),
        relay: server::relay::Relay {
            ping_interval: Duration::from_secs(args.ping_interval.max(1)),
            idle_timeout: Duration::from_secs(args.idle_timeout.max(1)),
            stream_timeout: (args.stream_timeout > 0)
                .then(|| Duration::from_secs(args.stream_timeout)),
        },
        gateway,
        last_reload: std::sync::Mutex::default(),
    }))
}

/// Bind and serve until SIGINT/SIGTERM.
///
/// # Errors
/// The address cannot be bound, or set-up failed.
pub async fn serve(args: &ServeArgs) -> Result<(), String> {
    let args = &with_config_defaults(args)?;
    let state = build_state(args).await?;
    let keys_required = state.gateway.as_ref().is_some_and(|g| g.requires_key());
    let (listener, local) = bind_listen_guarded(args, keys_required).await?;
    announce(args, &state, local);
    if !args.no_upstream_check {
        tokio::spawn(crate::doctor::log_at_start(
            args.clone(),
            Arc::clone(&state),
        ));
    }
    watch_config(&state, args, Hangup::Default);
    let gateway = state.gateway.clone();
    let served = server::serve(listener, state, shutdown_signal(), Duration::from_secs(10))
        .await
        .map_err(|e| e.to_string());
    if let Some(gateway) = gateway {
        gateway.close().await;
    }
    served
}

/// What SIGHUP does to a process with no config file to re-read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hangup {
    /// `serve`: the default action (the process ends), as for any daemon with nothing to reload.
    Default,
    /// The launchers: SIGHUP is taken (and logged) even without a file, so a `kill -HUP` meant
    /// as "reload" never ends the tool that runs on the bridge.
    Taken,
}

/// Re-read the config file (when there is one) on change and on SIGHUP, in the background;
/// `hangup` says whether SIGHUP is taken when there is no file.
///
/// SIGHUP is taken here, before this returns (not in the task it starts), so a SIGHUP sent the
/// moment after — by a tool the launcher has just started — is a reload, never the default
/// action that ends the process.
pub fn watch_config(state: &Arc<AppState>, args: &ServeArgs, hangup: Hangup) {
    let file = state.routes().file.clone();
    if file.is_none() && hangup == Hangup::Default {
        return;
    }
    #[cfg(unix)]
    let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|error| tracing::warn!(%error, "cannot take SIGHUP"))
        .ok();
    #[cfg(not(unix))]
    let hup = None;
    match file {
        Some(file) => {
            tokio::spawn(reload_on_change(Arc::clone(state), args.clone(), file, hup));
        }
        None => {
            tokio::spawn(hangups_without_a_file(hup));
        }
    }
}

/// What SIGHUP arrives on (nothing where there are no signals).
#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = Option<std::convert::Infallible>;

/// The next SIGHUP (never, without a signal stream).
async fn next_hangup(hup: &mut Hangups) {
    #[cfg(unix)]
    if let Some(hup) = hup.as_mut() {
        hup.recv().await;
        return;
    }
    let _ = hup;
    std::future::pending::<()>().await;
}

/// SIGHUP with no config file: nothing to reload; say so.
async fn hangups_without_a_file(mut hup: Hangups) {
    loop {
        next_hangup(&mut hup).await;
        info!("SIGHUP: no config file to re-read (the flags describe the provider)");
    }
}

/// The arguments with the config file's `listen`, `client_key`, `[search]` and `[fetch]` where the flags
/// left them at their defaults (flags and environment win).
///
/// # Errors
/// The config file does not parse or validate.
pub fn with_config_defaults(args: &ServeArgs) -> Result<ServeArgs, String> {
    use secrecy::ExposeSecret;
    let mut out = args.clone();
    if let Some(config) = crate::config::load_config(args)? {
        if let Some(listen) = config.listen
            && args.listen == crate::cli::DEFAULT_LISTEN
        {
            out.listen = listen;
        }
        if out.client_key.is_none() {
            out.client_key = config.client_key.map(|k| k.expose_secret().to_owned());
        }
        // `[search]` applies when no search flag is given (flags describe one backend whole).
        if let Some(search) = config.search
            && out.search.is_none()
            && out.search_url.is_none()
            && out.search_api_key.is_none()
        {
            out.search = Some(search.kind);
            out.search_url = search.base_url;
            out.search_api_key = search.api_key.map(|k| k.expose_secret().to_owned());
        }
        out.fetch_allow_private |= config.fetch.allow_private;
    }
    Ok(out)
}

/// Re-read the config file on SIGHUP and when it changes; a file that does not load keeps the
/// running config (and says why). Requests in flight finish on the routes they started with.
async fn reload_on_change(
    state: Arc<AppState>,
    args: ServeArgs,
    file: std::path::PathBuf,
    mut hup: Hangups,
) {
    // Held for as long as the task runs: dropping it stops the watch.
    let (_watcher, mut changed) = match crate::config::watch::watch(&file) {
        Ok((watcher, changed)) => (Some(watcher), Some(changed)),
        Err(error) => {
            tracing::warn!(file = %file.display(), %error, "cannot watch the config file; it is re-read on SIGHUP only");
            (None, None)
        }
    };
    loop {
        let why = tokio::select! {
            () = next_hangup(&mut hup) => "SIGHUP",
            () = crate::config::watch::next_change(changed.as_mut()) => "the file changed",
        };
        let mut reload_args = args.clone();
        reload_args.config = Some(file.clone());
        let reloaded = match crate::config::load_config(&reload_args) {
            Ok(Some(config)) => {
                if let Some(gateway) = &state.gateway {
                    gateway.reconfigure(config.gateway.clone()).await;
                }
                let running = state.routes();
                server::routes::Routes::from_config(
                    &config,
                    &reload_args,
                    &state.engine,
                    Some(&running),
                )
                .await
            }
            Ok(None) => Err(String::from("the file is gone")),
            Err(e) => Err(e),
        };
        let at_ms = crate::gateway::store::now_ms();
        let outcome = match reloaded {
            Ok(routes) => {
                let targets: Vec<String> = routes.entries().map(|e| e.target.to_string()).collect();
                state.set_routes(routes);
                info!(file = %file.display(), %why, ?targets, "config reloaded");
                serde_json::json!({"at_ms": at_ms, "why": why, "ok": true, "targets": targets})
            }
            Err(error) => {
                tracing::warn!(file = %file.display(), %why, %error, "config not reloaded; the running config stays");
                let error = crate::redact::redact(&error).into_owned();
                serde_json::json!({"at_ms": at_ms, "why": why, "ok": false, "error": error})
            }
        };
        *state
            .last_reload
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(outcome);
    }
}

/// Bind `--listen`; the error says what to try. A server that anyone on the network could reach
/// (a non-loopback address) must have a client key: it spends the upstream key, Fabstir
/// deposits, or (`agui`) runs commands on this machine. An empty key is refused too, rather than
/// silently turning authentication off.
///
/// # Errors
/// The address cannot be bound, or it is not loopback and there is no client key.
pub async fn bind_listen(args: &ServeArgs) -> Result<(TcpListener, std::net::SocketAddr), String> {
    bind_listen_guarded(args, false).await
}

/// [`bind_listen`] for a server whose gateway already requires keys (`keys_required`): then
/// any address may be served without `--client-key`.
///
/// # Errors
/// The address cannot be bound, or it is not loopback and nothing requires a key.
pub async fn bind_listen_guarded(
    args: &ServeArgs,
    keys_required: bool,
) -> Result<(TcpListener, std::net::SocketAddr), String> {
    let addr = args.listen;
    match args.client_key.as_deref() {
        Some(key) if key.trim().is_empty() => {
            return Err(String::from(
                "--client-key is empty: give the key clients must send, or leave the flag (and CLAUDE_BRIDGE_CLIENT_KEY) out",
            ));
        }
        None if !addr.ip().is_loopback() && !keys_required => {
            return Err(format!(
                "refusing to listen on {addr} without --client-key: anyone who can reach it could use \
                 your upstream (and, with `agui`, run commands on this machine); set --client-key (or \
                 keys: [[keys]] or admin_key in the config), or listen on 127.0.0.1"
            ));
        }
        _ => {}
    }
    let listener = TcpListener::bind(addr).await.map_err(|e| {
        format!(
            "cannot listen on {addr}: {e} (is another bridge running? try --listen 127.0.0.1:0)"
        )
    })?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    Ok((listener, local))
}

/// Log what is being served, where, and how to point Claude Code at it.
pub fn announce(args: &ServeArgs, state: &AppState, local: std::net::SocketAddr) {
    announce_front(args, state, local);
    info!(
        "point Claude Code at it: ANTHROPIC_BASE_URL=http://{local} ANTHROPIC_AUTH_TOKEN=any claude"
    );
}

/// Log what the Anthropic front serves and where.
pub fn announce_front(args: &ServeArgs, state: &AppState, local: std::net::SocketAddr) {
    let routes = state.routes();
    let primary = routes.primary();
    info!(
        listen = %local,
        provider = primary.map_or("none", |p| p.kind),
        upstream = %primary.map(|p| p.provider.endpoint()).unwrap_or_default(),
        config = %routes.file.as_ref().map(|f| f.display().to_string()).unwrap_or_else(|| String::from("(flags)")),
        targets = routes.entries().count(),
        model = args.model.as_deref().unwrap_or("(client's model name)"),
        engine = state.engine.name(),
        client_key = if state.client_key.is_some() { "required" } else { "none" },
        "claude-bridge serving the Anthropic Messages API"
    );
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => info!("SIGINT received"),
        () = term => info!("SIGTERM received"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_address_others_can_reach_needs_a_client_key_or_gateway_keys() {
        let argv: Vec<String> = ["claude-bridge", "serve"].map(String::from).to_vec();
        let Some(crate::cli::Command::Serve(mut args)) = crate::cli::parse_from(&argv).command
        else {
            unreachable!("`serve` parses as Serve")
        };
        args.listen = "0.0.0.0:0".parse().unwrap();
        let refused = bind_listen_guarded(&args, false).await.unwrap_err();
        assert!(refused.contains("[[keys]]"), "{refused}");
        assert!(bind_listen_guarded(&args, true).await.is_ok());
    }

    #[test]
    fn old_launcher_logs_are_pruned_newest_kept_others_untouched() {
        let dir = std::env::temp_dir().join(format!(
            "claude-bridge-prune-{}-{}",
            std::process::id(),
            crate::ids::seed()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        for (secs, pid) in [(100, 1), (300, 2), (200, 3), (300, 1), (50, 9)] {
            std::fs::write(dir.join(format!("claude-{secs}-{pid}.log")), "x").unwrap();
        }
        for other in ["codex-10-1.log", "claude-notes.txt", "claude-x-1.log"] {
            std::fs::write(dir.join(other), "x").unwrap();
        }
        // The oldest by name is this run's (a clock set back): it stays.
        let current = dir.join("claude-50-9.log");
        assert_eq!(prune_launcher_logs(&dir, "claude", 3, &current), 1);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "claude-200-3.log",
                "claude-300-1.log",
                "claude-300-2.log",
                "claude-50-9.log",
                "claude-notes.txt",
                "claude-x-1.log",
                "codex-10-1.log"
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
