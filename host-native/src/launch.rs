//! The `claude`, `codex` and `translate` subcommands.

use std::path::Path;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::cli::ServeArgs;
use crate::run;
use crate::server;

/// Serve on `listen` (`--listen`, when given), else on a free loopback port, and run Claude Code
/// against it; returns its exit code.
///
/// Claude Code gets the bridge's credential as `ANTHROPIC_AUTH_TOKEN` ([`claude_credentials`]):
/// `key` (`--key`) when given, and a key of the gateway's when it needs one ([`launch_key`]).
///
/// # Errors
/// Set-up failed, the gateway needs a key and none (or a refused one) was given, the address
/// cannot be bound, or Claude Code could not be started.
pub async fn claude(
    args: &ServeArgs,
    listen: Option<std::net::SocketAddr>,
    key: Option<&str>,
    claude_bin: &str,
    claude_args: &[String],
) -> Result<u8, String> {
    let cannot_run =
        format!("cannot run {claude_bin:?} (install Claude Code or pass --claude-bin)");
    let tool = Tool {
        program: claude_bin,
        name: "Claude Code",
        key,
        users_keys: &["ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"],
    };
    beside(
        args,
        listen,
        &tool,
        &cannot_run,
        |command, local, args, key| {
            if let Some(settings) = status_line_settings(claude_args) {
                command.arg("--settings").arg(settings);
            }
            command
                .args(claude_args)
                .env("ANTHROPIC_BASE_URL", format!("http://{local}"));
            match claude_credentials(args, key)? {
                Credentials::Bridge(token) => {
                    command
                        .env("ANTHROPIC_AUTH_TOKEN", token)
                        .env_remove("ANTHROPIC_API_KEY");
                }
                Credentials::Users => {}
            }
            Ok(())
        },
    )
    .await
}

/// `--settings` for Claude Code that make `claude-bridge statusline` its status line — unless
/// the user has a status line of their own (in `~/.claude/settings.json`, the project's
/// `.claude/settings.json` or `.claude/settings.local.json`, or a managed settings file) or
/// passes `--settings` themselves (one would override the other).
fn status_line_settings(claude_args: &[String]) -> Option<String> {
    if claude_args
        .iter()
        .any(|a| a == "--settings" || a.starts_with("--settings="))
    {
        return None;
    }
    let config_dir = crate::environment::non_empty("CLAUDE_CONFIG_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| crate::environment::non_empty("HOME").map(|h| Path::new(&h).join(".claude")));
    let mut files: Vec<std::path::PathBuf> = config_dir
        .map(|d| d.join("settings.json"))
        .into_iter()
        .collect();
    files.extend([
        std::path::PathBuf::from(".claude/settings.json"),
        std::path::PathBuf::from(".claude/settings.local.json"),
        std::path::PathBuf::from("/etc/claude-code/managed-settings.json"),
    ]);
    let theirs = files.iter().any(|file| {
        std::fs::read_to_string(file)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|settings| settings.get("statusLine").is_some())
    });
    if theirs {
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    // Claude Code runs the command through a shell: the path is quoted for it.
    let quoted = format!("'{}'", exe.display().to_string().replace('\'', r"'\''"));
    Some(
        serde_json::json!({
            "statusLine": {"type": "command", "command": format!("{quoted} statusline"), "padding": 0}
        })
        .to_string(),
    )
}

/// What Claude Code sends the bridge.
#[derive(Debug, PartialEq, Eq)]
enum Credentials {
    /// This token, as `ANTHROPIC_AUTH_TOKEN` (and no `ANTHROPIC_API_KEY`).
    Bridge(String),
    /// The user's own (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN` or the Claude login): an
    /// Anthropic pass-through without a key of its own forwards them upstream.
    Users,
}

/// The credential Claude Code is started with, `key` the one [`launch_key`] settled on.
///
/// Interactive Claude Code asks about an `ANTHROPIC_API_KEY` it has not seen ("Detected a custom
/// API key … Do you want to use it?", default No); a No is stored in `~/.claude.json` and every
/// later launch is "Not logged in". With a new key it also first checks that it can reach
/// api.anthropic.com, which fails offline. `ANTHROPIC_AUTH_TOKEN` (sent as `Authorization:
/// Bearer`) raises neither, and works for a user who once answered No (measured with Claude
/// Code 2.1.330). So the bridge's credential — the key settled on, or any string when none is
/// needed — goes there, and an `ANTHROPIC_API_KEY` of the user's is kept out of Claude Code's
/// sight; unless a route forwards the client's credentials upstream (an Anthropic
/// pass-through without its own key) and no key was settled on, where the user's own are what
/// must arrive.
fn claude_credentials(args: &ServeArgs, key: Option<&str>) -> Result<Credentials, String> {
    if let Some(key) = key {
        return Ok(Credentials::Bridge(key.to_owned()));
    }
    if forwards_client_credentials(args)? {
        return Ok(Credentials::Users);
    }
    Ok(Credentials::Bridge(ANY_KEY.to_owned()))
}

/// What a launched tool sends when the bridge needs no key.
const ANY_KEY: &str = "claude-bridge";

/// A tool the launcher runs, and where the key it sends the bridge may come from.
struct Tool<'a> {
    /// Its executable.
    program: &'a str,
    /// Its name, for messages.
    name: &'static str,
    /// `--key` (or `CLAUDE_BRIDGE_KEY`).
    key: Option<&'a str>,
    /// The user's own variables the tool would send a gateway's key from, in order.
    users_keys: &'static [&'static str],
}

/// The key a launched tool sends the bridge, if it must send one: `--key` (`CLAUDE_BRIDGE_KEY`),
/// else the bridge's `--client-key`, else — when the gateway needs a key (it has `[[keys]]`, an
/// `admin_key` or keys made at run time) — the first of the tool's own variables that is set
/// (`ANTHROPIC_AUTH_TOKEN`, `ANTHROPIC_API_KEY` for Claude Code). The gateway checks it now, so
/// a missing, unknown, revoked or expired key is said before the tool starts, not as a 401 in
/// its window.
async fn launch_key(
    args: &ServeArgs,
    state: &server::AppState,
    tool: &Tool<'_>,
) -> Result<Option<String>, String> {
    let needed = state
        .gateway
        .as_deref()
        .is_some_and(crate::gateway::Gateway::requires_key);
    let given = |value: Option<&str>, from: &'static str| {
        value
            .filter(|k| !k.is_empty())
            .map(|k| (k.to_owned(), from))
    };
    let chosen = given(tool.key, "--key (CLAUDE_BRIDGE_KEY)")
        .or_else(|| given(args.client_key.as_deref(), "the bridge's client key"))
        .or_else(|| {
            tool.users_keys
                .iter()
                .filter(|_| needed)
                .find_map(|name| crate::environment::non_empty(name).map(|k| (k, *name)))
        });
    let Some((key, from)) = chosen else {
        if needed {
            let also = tool
                .users_keys
                .iter()
                .map(|name| format!(" or {name}"))
                .collect::<String>();
            return Err(format!(
                "this bridge needs a key (its config has [[keys]] or admin_key, or keys were made \
                 with `claude-bridge keys create`) and {} would send none: pass --key with one of \
                 its keys (or set CLAUDE_BRIDGE_KEY{also})",
                tool.name
            ));
        }
        return Ok(None);
    };
    // Asked as a request would be: of the gateway when it is on, else of `--client-key`.
    let mut headers = http::HeaderMap::new();
    let value = http::HeaderValue::from_str(&key)
        .map_err(|_| format!("the key from {from} has characters a header cannot carry"))?;
    headers.insert("x-api-key", value);
    server::authenticate(state, &headers)
        .await
        .map_err(|refused| {
            format!(
                "the key from {from} cannot call this bridge: {refused}; pass --key with one of \
                 its keys"
            )
        })?;
    Ok(Some(key))
}

/// Whether a provider the arguments (or their config file's routes) use is an Anthropic
/// pass-through without a key of its own, which forwards the client's credentials.
fn forwards_client_credentials(args: &ServeArgs) -> Result<bool, String> {
    Ok(match crate::config::load_config(args)? {
        // Only providers a route or fallback names: an unused table forwards nothing.
        Some(config) => config.router.targets().any(|(_, target)| {
            config.providers.get(&target.provider).is_some_and(|p| {
                matches!(&p.kind, crate::config::ProviderKind::Anthropic { upstream } if upstream.api_key.is_none())
            })
        }),
        None => args.provider == crate::cli::Provider::Anthropic && args.api_key.is_none(),
    })
}

/// Like [`claude`], for the OpenAI Codex CLI: Codex runs with a `CODEX_HOME` of the bridge's
/// own, kept under the state directory, whose `config.toml` ([`crate::codex_home`]) points its
/// model provider at this bridge's `/v1/responses`; the user's own `~/.codex` is neither read
/// nor changed.
///
/// # Errors
/// Set-up failed, the gateway needs a key and none (or a refused one) was given, the address
/// cannot be bound, the directory cannot be written, or Codex could not be started.
pub async fn codex(
    args: &ServeArgs,
    listen: Option<std::net::SocketAddr>,
    key: Option<&str>,
    codex_bin: &str,
    codex_args: &[String],
) -> Result<u8, String> {
    let home = crate::codex_home::CodexHome::open(
        crate::environment::state_dir().as_deref(),
        crate::ids::seed(),
    )?;
    let cannot_run = format!(
        "cannot run {codex_bin:?} (install the Codex CLI, npm install -g @openai/codex, or pass \
         --codex-bin)"
    );
    let tool = Tool {
        program: codex_bin,
        name: "Codex",
        key,
        users_keys: &[],
    };
    let result = beside(
        args,
        listen,
        &tool,
        &cannot_run,
        |command, local, _, key| {
            home.write_config(&format!("http://{local}/v1"))?;
            command
                .args(codex_args)
                .env("CODEX_HOME", home.path())
                .env(crate::codex_home::KEY_VAR, key.unwrap_or(ANY_KEY));
            Ok(())
        },
    )
    .await;
    home.close();
    result
}

/// Serve beside a child process, exactly as `serve` serves (the config file's defaults, the
/// start-up upstream check, reload on change and on SIGHUP, the same log): bind, start serving,
/// run the tool as `configure` sets it up for the bound address and the key it sends
/// ([`launch_key`]) (on top of `--env-file`'s variables), stop serving when it exits and end whatever it left running
/// ([`crate::process_tree`]); its exit code.
async fn beside(
    args: &ServeArgs,
    listen: Option<std::net::SocketAddr>,
    tool: &Tool<'_>,
    cannot_run: &str,
    configure: impl FnOnce(
        &mut tokio::process::Command,
        std::net::SocketAddr,
        &ServeArgs,
        Option<&str>,
    ) -> Result<(), String>,
) -> Result<u8, String> {
    let program = tool.program;
    let args = &run::with_config_defaults(args)?;
    let state = run::build_state(args).await?;
    let key = launch_key(args, &state, tool).await?;
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
    if !args.no_upstream_check {
        warn_before_start(args, &state, program).await;
    }
    run::watch_config(&state, args, run::Hangup::Taken);
    // Ctrl-C is the child's to handle while it runs, as a shell leaves it: the terminal sends
    // SIGINT to the whole process group, and the bridge must outlive the child (to answer its
    // last requests and clean up after it). Tokio's handler, once installed, stays for the
    // process's life, so SIGINT no longer ends it.
    #[cfg(unix)]
    let _sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| format!("cannot take SIGINT: {e}"))?;
    // SIGTERM (`kill`, `timeout`, a service manager) is passed on to the tool, and the launcher
    // cleans up after it as after any exit; a second SIGTERM kills the tool.
    #[cfg(unix)]
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot take SIGTERM: {e}"))?;
    let adopted = crate::process_tree::adopt_orphans();
    let mut command = tokio::process::Command::new(program);
    command.envs(crate::environment::file_only());
    configure(&mut command, local, args, key.as_deref())?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server::serve(
        listener,
        state,
        async {
            let _ = stop_rx.await;
        },
        Duration::from_secs(2),
    ));
    let status = match command.kill_on_drop(true).spawn() {
        Ok(mut child) => {
            let pid = child.id();
            let mut terminated = false;
            loop {
                #[cfg(unix)]
                let term = sigterm.recv();
                #[cfg(not(unix))]
                let term = std::future::pending::<Option<()>>();
                tokio::select! {
                    status = child.wait() => break status.map_err(|e| format!("{cannot_run}: {e}")),
                    () = tokio::time::sleep(REAP_EVERY) => {
                        let _ = crate::process_tree::reap_orphans(pid);
                    }
                    _ = term => {
                        tracing::info!("SIGTERM received; passing it on to {program}");
                        match pid {
                            Some(pid) if !terminated => crate::process_tree::terminate(pid),
                            _ => {
                                let _ = child.start_kill();
                            }
                        }
                        terminated = true;
                    }
                }
            }
        }
        Err(e) => Err(format!("{cannot_run}: {e}")),
    };
    if adopted {
        let ended =
            tokio::task::spawn_blocking(|| crate::process_tree::end_descendants(LEFT_BEHIND_GRACE))
                .await
                .unwrap_or_default();
        if ended.asked > 0 {
            tracing::info!(
                stopped = ended.asked,
                killed = ended.killed,
                "ended the processes {program} left running"
            );
        }
    }
    let _ = stop_tx.send(());
    let _ = server.await;
    Ok(status?
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(1))
}

/// How often orphans the tool left (re-parented to the launcher) are collected while it runs.
const REAP_EVERY: Duration = Duration::from_secs(5);

/// How long processes the tool left running get to stop on SIGTERM before SIGKILL.
const LEFT_BEHIND_GRACE: Duration = Duration::from_secs(2);

/// How long the launcher waits for the start-up upstream check before starting the tool (a
/// refused connection answers at once; a slow upstream is checked on in the background).
const START_CHECK_WAIT: Duration = Duration::from_secs(3);

/// Run the start-up upstream check (as `serve` does) and print what it finds on the terminal,
/// in plain words, before the tool takes it over.
async fn warn_before_start(args: &ServeArgs, state: &std::sync::Arc<server::AppState>, tool: &str) {
    let check = tokio::spawn({
        let args = args.clone();
        let state = std::sync::Arc::clone(state);
        async move { crate::doctor::check_at_start(&args, &state).await }
    });
    let Ok(Ok(problems)) = tokio::time::timeout(START_CHECK_WAIT, check).await else {
        return;
    };
    for problem in &problems {
        eprintln!("claude-bridge: warning: {}", problem.line);
    }
    if !problems.iter().any(|p| p.failing) {
        return;
    }
    let tool = Path::new(tool)
        .file_name()
        .map_or_else(|| tool.to_owned(), |n| n.to_string_lossy().into_owned());
    eprintln!(
        "claude-bridge: starting {tool} anyway: its requests fail until this is fixed \
         (`claude-bridge doctor` checks again)"
    );
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
            tool_names: prepared.tool_names,
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
