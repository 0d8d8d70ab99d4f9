//! Wiring: build the engine, the upstream client and the server from the command line.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tracing::{info, warn};

use bridge_core::api::{ChatmlOptions, ToolFormat};

use crate::cli::{EngineChoice, LogFormat, Provider, ServeArgs, ToolFormatChoice};
use crate::engine::{self, Engine};
use crate::fabstir::driver::{DirectConfig, Fabstir};
use crate::fabstir::provider::FabstirBackend;
use crate::server::{self, AppState};
use crate::upstream::Upstream;

/// Set up logging (stderr). Secrets never reach it: keys are not logged anywhere.
pub fn init_tracing(args: &ServeArgs) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&args.log))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let _ = match args.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
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
pub fn build_state(args: &ServeArgs) -> Result<Arc<AppState>, String> {
    let engine = build_engine(args)?;
    let upstream = Upstream::new(
        &args.base_url,
        args.api_key.as_deref(),
        args.ca_cert.as_deref(),
        Duration::from_secs(args.connect_timeout),
        Duration::from_secs(args.first_byte_timeout),
    )?;
    Ok(Arc::new(AppState {
        engine,
        upstream,
        convert: args.convert_options(),
        client_key: args.client_key.clone().filter(|k| !k.is_empty()),
        max_body_bytes: args.max_body_bytes,
        ping_interval: Duration::from_secs(args.ping_interval.max(1)),
        idle_timeout: Duration::from_secs(args.idle_timeout.max(1)),
        provider: match args.provider {
            Provider::Openai => "openai",
            Provider::Fabstir => "fabstir",
        },
        fabstir: match args.provider {
            Provider::Openai => None,
            Provider::Fabstir => Some(Arc::new(fabstir_backend(args)?)),
        },
    }))
}

/// The Fabstir backend in direct mode, from the flags (the key from the environment or a file).
fn fabstir_backend(args: &ServeArgs) -> Result<FabstirBackend, String> {
    use crate::fabstir::crypto;
    let missing = |flag: &str| {
        format!(
            "--provider fabstir needs {flag} (direct mode: --host-url, --host-pubkey, --job-id, \
             --model org/repo:file.gguf, and the wallet key in CLAUDE_BRIDGE_PRIVATE_KEY or \
             --private-key-file)"
        )
    };
    let host_url = args.host_url.clone().ok_or_else(|| missing("--host-url"))?;
    let pubkey_hex = args
        .host_pubkey
        .as_deref()
        .ok_or_else(|| missing("--host-pubkey"))?;
    let job_id = args.job_id.ok_or_else(|| missing("--job-id"))?;
    let model = args.model.clone().ok_or_else(|| missing("--model"))?;
    bridge_core::fabstir::model_id::ModelId::parse(&model).map_err(|e| format!("--model: {e}"))?;
    let host_pubkey = crypto::from_hex(pubkey_hex, "--host-pubkey")
        .and_then(|bytes| crypto::public_key(&bytes, "--host-pubkey"))
        .map_err(|e| {
            format!("--host-pubkey: {e} (give the host's compressed secp256k1 key as hex)")
        })?;
    let key_text = match (
        &args.private_key_file,
        std::env::var("CLAUDE_BRIDGE_PRIVATE_KEY"),
    ) {
        (Some(path), _) => std::fs::read_to_string(path)
            .map_err(|e| format!("--private-key-file {}: {e}", path.display()))?,
        (None, Ok(key)) => key,
        (None, Err(_)) => return Err(missing("a wallet key")),
    };
    let wallet = crypto::from_hex(key_text.trim(), "private key")
        .and_then(|bytes| crypto::secret_key(&bytes, "private key"))
        .map_err(|_| String::from("the wallet private key is not 32 bytes of hex"))?;
    info!(
        host = %host_url,
        job_id,
        chain_id = args.chain_id,
        model = %model,
        wallet = %format!("0x{}", crypto::to_hex(&crypto::address(&wallet.public_key()))),
        "Fabstir direct mode"
    );
    let config = DirectConfig {
        host_url,
        host_pubkey,
        job_id,
        chain_id: args.chain_id,
        wallet,
        model: model.clone(),
        price_per_token: args.price_per_token,
        connect_timeout: Duration::from_secs(args.connect_timeout.max(1)),
        tls: Arc::new(crate::upstream::tls_config(args.ca_cert.as_deref())?),
    };
    Ok(FabstirBackend {
        client: Fabstir::start_direct(config, Box::new(crate::fabstir::OsRandomness)),
        options: ChatmlOptions {
            model: Some(model.clone()),
            max_tokens_cap: (args.max_tokens_cap > 0).then_some(args.max_tokens_cap),
            tool_format: match args.tool_format {
                ToolFormatChoice::Json => ToolFormat::Json,
                ToolFormatChoice::Glm => ToolFormat::Glm,
            },
            require_max_tokens: true,
        },
        model,
        ping_interval: Duration::from_secs(args.ping_interval.max(1)),
    })
}

/// Bind and serve until SIGINT/SIGTERM.
///
/// # Errors
/// The address cannot be bound, or set-up failed.
pub async fn serve(args: &ServeArgs) -> Result<(), String> {
    let state = build_state(args)?;
    let listener = TcpListener::bind(args.listen).await.map_err(|e| {
        format!(
            "cannot listen on {}: {e} (is another bridge running? try --listen 127.0.0.1:0)",
            args.listen
        )
    })?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    announce(args, &state, local);
    server::serve(listener, state, shutdown_signal(), Duration::from_secs(10))
        .await
        .map_err(|e| e.to_string())
}

/// Log what is being served, where, and how to point Claude Code at it.
pub fn announce(args: &ServeArgs, state: &AppState, local: std::net::SocketAddr) {
    info!(
        listen = %local,
        provider = state.provider,
        upstream = %state.upstream.url(),
        model = args.model.as_deref().unwrap_or("(client's model name)"),
        engine = state.engine.name(),
        client_key = if state.client_key.is_some() { "required" } else { "none" },
        "claude-bridge serving the Anthropic Messages API"
    );
    if !local.ip().is_loopback() && state.client_key.is_none() {
        warn!(
            "listening on a non-loopback address without --client-key: anyone who can reach it can use your upstream"
        );
    }
    info!(
        "point Claude Code at it: ANTHROPIC_BASE_URL=http://{local} ANTHROPIC_API_KEY=any claude"
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
