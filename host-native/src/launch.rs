//! The `claude` and `translate` subcommands.

use std::path::Path;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::cli::ServeArgs;
use crate::run;
use crate::server;

/// Serve on `listen` (`--listen`, when given), else on a free loopback port, and run Claude Code
/// against it; returns its exit code.
///
/// # Errors
/// Set-up failed, the address cannot be bound, or Claude Code could not be started.
pub async fn claude(
    args: &ServeArgs,
    listen: Option<std::net::SocketAddr>,
    claude_bin: &str,
    claude_args: &[String],
) -> Result<u8, String> {
    let state = run::build_state(args).await?;
    let (listener, local) = match listen {
        // The same checks as `serve` (a reachable address needs a client key).
        Some(_) => run::bind_listen(args).await?,
        None => {
            let listener = TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|e| e.to_string())?;
            let local = listener.local_addr().map_err(|e| e.to_string())?;
            (listener, local)
        }
    };
    run::announce(args, &state, local);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server::serve(
        listener,
        state,
        async {
            let _ = stop_rx.await;
        },
        Duration::from_secs(2),
    ));
    let mut command = tokio::process::Command::new(claude_bin);
    command
        .args(claude_args)
        .envs(crate::environment::file_only())
        .env("ANTHROPIC_BASE_URL", format!("http://{local}"))
        .kill_on_drop(true);
    if crate::environment::var("ANTHROPIC_API_KEY").is_none()
        && crate::environment::var("ANTHROPIC_AUTH_TOKEN").is_none()
    {
        command.env(
            "ANTHROPIC_API_KEY",
            args.client_key.as_deref().unwrap_or("claude-bridge"),
        );
    }
    let status = command.status().await.map_err(|e| {
        format!("cannot run {claude_bin:?}: {e} (install Claude Code or pass --claude-bin)")
    })?;
    let _ = stop_tx.send(());
    let _ = server.await;
    Ok(status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(1))
}

/// Print the upstream request `--provider`'s dialect makes of `request`, then (with `capture`,
/// the upstream's reply) the Anthropic events it becomes, or the folded message.
///
/// # Errors
/// Files cannot be read or the engine rejects them.
pub fn translate(
    args: &ServeArgs,
    request: &Path,
    capture: Option<&Path>,
    no_stream: bool,
) -> Result<u8, String> {
    let engine = run::build_engine(args)?;
    let body = std::fs::read(request).map_err(|e| format!("{}: {e}", request.display()))?;
    let (dialect, options) = args.dialect_options()?;
    let prepared = engine
        .prepare(dialect, &body, &options)
        .map_err(|e| e.to_string())?;
    for warning in &prepared.warnings {
        eprintln!("warning: {warning}");
    }
    let Some(capture) = capture else {
        println!("{}", prepared.body);
        return Ok(0);
    };
    // A raw-text host's prompt carries the tools its reply's inline calls are typed by.
    let tools = match dialect {
        bridge_core::api::Dialect::Chatml => {
            serde_json::from_str::<bridge_core::api::ChatmlPrompt>(&prepared.body)
                .map(|p| p.tools)
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let bytes = std::fs::read(capture).map_err(|e| format!("{}: {e}", capture.display()))?;
    let mut session = engine
        .translator(&bridge_core::api::StreamOptions {
            stream: !no_stream,
            model: prepared.client_model,
            input_tokens_estimate: prepared.input_tokens_estimate,
            id_seed: crate::ids::seed(),
            dialect,
            tools,
        })
        .map_err(|e| e.to_string())?;
    let head = session.feed(&bytes).map_err(|e| e.to_string())?;
    let finished = session
        .finish(&bridge_core::api::StreamEnd::default())
        .map_err(|e| e.to_string())?;
    print!("{head}{}", finished.body);
    if no_stream {
        println!();
    }
    Ok(if finished.status == 200 { 0 } else { 1 })
}
