//! `claude-bridge agui`: AG-UI / CopilotKit front ends drive Claude Code.
//!
//! A web app built with CopilotKit (or any AG-UI client, such as `@ag-ui/client`'s `HttpAgent`)
//! points its runtime URL here. Every AG-UI thread gets a Claude Code child process
//! ([`session`]) driven over stdin/stdout stream-json; its output becomes AG-UI events through the
//! core's translator (`bridge_core::agui`). Tool calls Claude Code wants to run wait for approval
//! through a small management API ([`approvals`], [`http`]); tools the front end registers are
//! offered to Claude Code by an MCP server ([`mcp`]). With `--upstream self` (the default) the
//! same process also serves the bridge's Anthropic front on a free loopback port and points the
//! children at it, so the agent runs on whatever provider the flags configure.

pub mod approvals;
pub mod http;
pub mod mcp;
pub mod session;
pub mod supervisor;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tracing::info;

use crate::cli::{AgentUpstream, AguiArgs, ServeArgs};
use approvals::{Approvals, Rule};
use session::AgentConfig;
use supervisor::Supervisor;

/// Serve AG-UI until SIGINT/SIGTERM, then stop every Claude Code session.
///
/// # Errors
/// Bad flags, an address that cannot be bound, or a provider that cannot be set up.
pub async fn serve(args: &ServeArgs, agent: &AguiArgs) -> Result<(), String> {
    let rules = agent
        .auto_approve
        .iter()
        .filter(|r| !r.trim().is_empty())
        .map(|r| Rule::parse(r))
        .collect::<Result<Vec<_>, _>>()?;
    let (listener, local) = crate::run::bind_listen(args).await?;

    let (stop_front, front_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut env = Vec::new();
    let front = match agent.upstream {
        AgentUpstream::SelfFront => {
            let state = crate::run::build_state(args).await?;
            let front = TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|e| format!("cannot bind the Anthropic front: {e}"))?;
            let front_addr = front.local_addr().map_err(|e| e.to_string())?;
            crate::run::announce_front(args, &state, front_addr);
            env.push((
                String::from("ANTHROPIC_BASE_URL"),
                format!("http://{front_addr}"),
            ));
            env.push((
                String::from("ANTHROPIC_API_KEY"),
                args.client_key
                    .clone()
                    .unwrap_or_else(|| String::from("claude-bridge")),
            ));
            Some(tokio::spawn(crate::server::serve(
                front,
                state,
                async {
                    let _ = front_stopped.await;
                },
                Duration::from_secs(5),
            )))
        }
        AgentUpstream::Anthropic => None,
    };
    let config = AgentConfig {
        claude_path: agent.claude_bin.clone(),
        cwd: agent.cwd.clone(),
        env,
        mcp_base: format!("http://{local}"),
        control_timeout: Duration::from_secs(agent.control_timeout.max(1)),
        transcript_dir: agent.transcript_dir.clone(),
        history_runs: usize::try_from(agent.history_runs).unwrap_or(usize::MAX),
    };
    let state = Arc::new(http::AguiState {
        supervisor: Supervisor::new(config, Arc::new(Approvals::new(rules)), agent.max_sessions),
        client_key: args.client_key.clone().filter(|k| !k.is_empty()),
        max_body_bytes: args.max_body_bytes,
        limits: args.conn_limits(),
        guard: crate::guard::Guard::new(
            &args.allowed_origin,
            args.client_key.as_deref().is_some_and(|k| !k.is_empty()),
        )?,
    });
    info!(
        listen = %local,
        claude = %agent.claude_bin,
        upstream = match agent.upstream {
            AgentUpstream::SelfFront => "self (the Anthropic front above)",
            AgentUpstream::Anthropic => "anthropic (Claude Code's own configuration)",
        },
        "claude-bridge serving AG-UI: point CopilotKit's runtimeUrl (or an AG-UI HttpAgent at /agent/default/run) here"
    );
    let handler_state = Arc::clone(&state);
    let stopping = Arc::clone(&state);
    let served = crate::server::serve_with(
        listener,
        move |peer, req| http::handle(Arc::clone(&handler_state), peer, req),
        // The sessions stop first: their own connections (the MCP notification stream, runs
        // that stream) end with them instead of holding the drain open.
        async move {
            crate::run::shutdown_signal().await;
            stopping.supervisor.stop_all().await;
        },
        Duration::from_secs(5),
        state.limits,
    )
    .await;
    state.supervisor.stop_all().await;
    let _ = stop_front.send(());
    if let Some(front) = front {
        let _ = front.await;
    }
    served.map_err(|e| e.to_string())
}
