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
        .env("ANTHROPIC_BASE_URL", format!("http://{local}"))
        .kill_on_drop(true);
    if std::env::var_os("ANTHROPIC_API_KEY").is_none()
        && std::env::var_os("ANTHROPIC_AUTH_TOKEN").is_none()
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

/// Print the upstream request for `request`, then (with `upstream`) the translated answer.
///
/// # Errors
/// Files cannot be read or the engine rejects them.
pub fn translate(
    args: &ServeArgs,
    request: &Path,
    upstream: Option<&Path>,
    no_stream: bool,
) -> Result<u8, String> {
    let engine = run::build_engine(args)?;
    let body = std::fs::read(request).map_err(|e| format!("{}: {e}", request.display()))?;
    let converted = engine
        .convert_request(&body, &args.convert_options())
        .map_err(|e| e.to_string())?;
    for warning in &converted.warnings {
        eprintln!("warning: {warning}");
    }
    let Some(upstream) = upstream else {
        println!("{}", converted.body);
        return Ok(0);
    };
    let bytes = std::fs::read(upstream).map_err(|e| format!("{}: {e}", upstream.display()))?;
    let mut session = engine
        .translator(&bridge_core::api::StreamOptions {
            stream: !no_stream,
            model: converted.client_model,
            input_tokens_estimate: converted.input_tokens_estimate,
            id_seed: crate::ids::seed(),
            ..bridge_core::api::StreamOptions::default()
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
