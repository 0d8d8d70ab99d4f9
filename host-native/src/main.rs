//! The `claude-bridge` binary.

use std::process::ExitCode;

use claude_bridge::cli::{self, Command};
use claude_bridge::run;

/// jemalloc, not the platform's malloc: after a burst of large requests (32 MB bodies: their
/// bytes, parsed forms and converted copies) glibc's malloc kept hundreds of MB for good, while
/// jemalloc gives freed pages back. `make soak-burst` measures it.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts (`_RJEM_MALLOC_CONF` in the environment overrides
/// them): a background thread purges freed pages ~1 s after they were freed (the default 10 s
/// kept a burst's memory for longer than it needs and raised the next burst's peak), so an idle
/// bridge returns to its idle size without any request running.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[expect(
    unsafe_code,
    reason = "jemalloc reads its options from this exported C string; it is never written"
)]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8; 60] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// Run a launcher (`claude`, `codex`): its log goes to a file unless `--log-file` says otherwise
/// (the tool owns the terminal), and it serves on `--listen` only when that was given.
fn launched<F: std::future::Future<Output = Result<u8, String>>>(
    runtime: &tokio::runtime::Runtime,
    serve: &cli::ServeArgs,
    tool: &str,
    listen_given: bool,
    launch: impl FnOnce(Option<std::net::SocketAddr>) -> F,
) -> Result<u8, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let log_file = serve
        .log_file
        .clone()
        .or_else(|| run::launcher_log_file(tool, now, std::process::id()));
    run::init_tracing_to(serve, log_file.as_deref())?;
    // A log file per run, so old ones go: the newest few stay for looking back.
    if serve.log_file.is_none()
        && let Some(current) = log_file.as_deref()
        && let Some(dir) = current.parent()
    {
        let _ = run::prune_launcher_logs(dir, tool, run::LAUNCHER_LOGS_KEPT, current);
    }
    if let Some(file) = log_file.filter(|f| f.as_os_str() != "-") {
        eprintln!(
            "claude-bridge: logging to {} (--log-file - for the terminal)",
            file.display()
        );
    }
    runtime.block_on(launch(listen_given.then_some(serve.listen)))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if let Some(path) = cli::env_file_from_args(&argv)
        && let Err(e) = claude_bridge::environment::install(&path)
    {
        eprintln!("claude-bridge: cannot read --env-file {e}");
        return ExitCode::from(2);
    }
    // `claude --listen ADDR` serves there; without it the launcher takes a free port (so it never
    // clashes with a `serve` already on the default address). Only the bridge's own arguments
    // count, not Claude Code's after `--`.
    let listen_given = argv
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--listen" || a.starts_with("--listen="))
        || claude_bridge::environment::non_empty("CLAUDE_BRIDGE_LISTEN").is_some();
    let cli = cli::parse_from(&argv);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("claude-bridge: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        None => run::init_tracing(&cli.serve)
            .and_then(|()| runtime.block_on(run::serve(&cli.serve)).map(|()| 0)),
        Some(Command::Serve(args)) => {
            run::init_tracing(&args).and_then(|()| runtime.block_on(run::serve(&args)).map(|()| 0))
        }
        Some(Command::Claude {
            serve,
            key,
            claude_bin,
            args,
        }) => launched(&runtime, &serve, "claude", listen_given, |listen| {
            claude_bridge::launch::claude(&serve, listen, key.as_deref(), &claude_bin, &args)
        }),
        Some(Command::Codex {
            serve,
            key,
            codex_bin,
            args,
        }) => launched(&runtime, &serve, "codex", listen_given, |listen| {
            claude_bridge::launch::codex(&serve, listen, key.as_deref(), &codex_bin, &args)
        }),
        #[cfg(feature = "agui")]
        Some(Command::Agui { serve, agent }) => run::init_tracing(&serve).and_then(|()| {
            runtime
                .block_on(claude_bridge::agui::serve(&serve, &agent))
                .map(|()| 0)
        }),
        Some(Command::Doctor { serve }) => runtime.block_on(async {
            let (report, ok) = claude_bridge::doctor::run(&serve).await?;
            print!("{report}");
            Ok(if ok { 0 } else { 1 })
        }),
        Some(Command::Hosts { serve }) => run::init_tracing(&serve).and_then(|()| {
            runtime
                .block_on(claude_bridge::fabstir::setup::hosts(&serve))
                .map(|table| {
                    print!("{table}");
                    0
                })
        }),
        Some(Command::Keys { action, store }) => {
            runtime.block_on(claude_bridge::gateway::admin::cli::keys(&store, action))
        }
        Some(Command::Usage(usage)) => {
            runtime.block_on(claude_bridge::gateway::admin::cli::usage(&usage))
        }
        Some(Command::Statusline(client)) => {
            runtime.block_on(claude_bridge::dashboard::statusline::run(&client))
        }
        Some(Command::Top(client)) => runtime.block_on(claude_bridge::dashboard::top::run(&client)),
        Some(Command::Store { action, store }) => {
            runtime.block_on(claude_bridge::gateway::admin::cli::store(&store, action))
        }
        Some(Command::Translate {
            request,
            capture,
            no_stream,
            serve,
        }) => claude_bridge::launch::translate(&serve, &request, capture.as_deref(), no_stream),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("claude-bridge: {}", claude_bridge::redact::redact(&e));
            ExitCode::FAILURE
        }
    }
}
