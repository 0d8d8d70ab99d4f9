//! Command line: flags > `CLAUDE_BRIDGE_*` environment > `--env-file` (DESIGN §5).
//!
//! The stable contract other tools rely on:
//! `claude-bridge serve --listen 127.0.0.1:3456 --provider openai --base-url URL --model M [--api-key K]`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// claude-bridge: run Claude Code and any Anthropic Messages API client on other model backends.
#[derive(Debug, Parser)]
#[command(
    name = "claude-bridge",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Serve options when no subcommand is given.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Anthropic Messages API (the default).
    Serve(ServeArgs),
    /// Start a bridge on a free local port and run Claude Code (`claude`) wired to it
    /// (`ANTHROPIC_BASE_URL`, and the bridge's key as `ANTHROPIC_AUTH_TOKEN`).
    Claude {
        /// Bridge options.
        #[command(flatten)]
        serve: ServeArgs,
        /// The key Claude Code sends the bridge: one of its gateway's keys ([[keys]], or made
        /// with `keys create`). Default: `--client-key`; with a gateway that needs a key,
        /// `ANTHROPIC_AUTH_TOKEN`, else `ANTHROPIC_API_KEY`.
        #[arg(long, env = "CLAUDE_BRIDGE_KEY", hide_env_values = true)]
        key: Option<String>,
        /// The Claude Code executable.
        #[arg(long, env = "CLAUDE_BRIDGE_CLAUDE_BIN", default_value = "claude")]
        claude_bin: String,
        /// Arguments passed to Claude Code (after `--`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Start a bridge on a free local port and run the OpenAI Codex CLI (`codex`) on it, with a
    /// CODEX_HOME of the bridge's own (kept under ~/.local/state/claude-bridge/codex-home, so
    /// `-- resume` works) whose config points Codex at the bridge (your ~/.codex is left
    /// alone): Codex then runs on the bridge's provider or routes.
    Codex {
        /// Bridge options.
        #[command(flatten)]
        serve: ServeArgs,
        /// The key Codex sends the bridge: one of its gateway's keys ([[keys]], or made with
        /// `keys create`). Default: `--client-key`.
        #[arg(long, env = "CLAUDE_BRIDGE_KEY", hide_env_values = true)]
        key: Option<String>,
        /// The Codex executable.
        #[arg(long, env = "CLAUDE_BRIDGE_CODEX_BIN", default_value = "codex")]
        codex_bin: String,
        /// Arguments passed to Codex (after `--`), e.g. `-- exec "fix the tests"`.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Serve AG-UI (CopilotKit's runtime transport) in front of Claude Code child processes:
    /// `--listen` is the AG-UI address; `--upstream self` also serves this bridge's Anthropic
    /// front on a free loopback port for the children (the provider flags configure it).
    #[cfg(feature = "agui")]
    Agui {
        /// Provider and server options (as for `serve`).
        #[command(flatten)]
        serve: ServeArgs,
        /// The agent options.
        #[command(flatten)]
        agent: AguiArgs,
    },
    /// Check a configuration: the config file (or the flags' provider), each provider reachable
    /// with its key, its models listed, a base_url without /v1; non-zero exit on a problem.
    Doctor {
        /// The same options as `serve` (`--config`, or the provider flags).
        #[command(flatten)]
        serve: ServeArgs,
    },
    /// List the Fabstir hosts that serve a model: address, URL, price, stake, score.
    Hosts {
        /// Chain options (`--model`, `--rpc-url`, `--chain-id`, `--payment`, `--selection`, contracts).
        #[command(flatten)]
        serve: ServeArgs,
    },
    /// Gateway keys: create, list, revoke, rotate (on the config's store, or `--store`).
    Keys {
        /// What to do.
        #[command(subcommand)]
        action: KeysAction,
        /// Where the store is.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// What each key, model, target, day or session used and cost (the gateway's ledger).
    Usage(UsageArgs),
    /// One line for Claude Code's `statusLine` setting: reads the JSON Claude Code passes on
    /// stdin and prints the target that answered last, the session's tokens and cost, and the
    /// key's budget left, from the bridge (`claude-bridge claude` sets it up when you have no
    /// status line of your own).
    Statusline(DashboardClientArgs),
    /// The dashboard's Now and Live views in the terminal (for a headless server).
    Top(DashboardClientArgs),
    /// The gateway's store: `migrate` or `status`.
    Store {
        /// What to do.
        #[command(subcommand)]
        action: StoreAction,
        /// Where the store is.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Run the translator of `--provider` over files (a debugging aid): print the upstream
    /// request, and with `--capture` the Anthropic events (or the folded message with
    /// `--no-stream`).
    Translate {
        /// Anthropic Messages request (JSON file).
        #[arg(long)]
        request: PathBuf,
        /// The upstream's reply, captured: an SSE file in `--provider`'s dialect (for `fabstir`,
        /// the model's raw text).
        #[arg(long)]
        capture: Option<PathBuf>,
        /// Fold the answer into one message instead of SSE.
        #[arg(long)]
        no_stream: bool,
        /// Engine options.
        #[command(flatten)]
        serve: ServeArgs,
    },
}

/// Where `keys`, `usage` and `store` find the store: `--store`, else the config file's
/// `[store] url`, else the SQLite file under the state directory.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// The config file (its `[store]` and `[[keys]]`); the same search as `serve` without it.
    #[arg(long, global = true, env = "CLAUDE_BRIDGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// The store's URL (`sqlite://PATH`, `postgres://USER@HOST/DB`), over the config's.
    #[arg(long, global = true, env = "CLAUDE_BRIDGE_STORE")]
    pub store: Option<String>,
}

/// `claude-bridge keys …`.
#[derive(Debug, Clone, Subcommand)]
pub enum KeysAction {
    /// Make a key; its secret is printed once (only its SHA-256 is stored).
    Create {
        /// Its name (letters, digits, '-', '_', '.', '@').
        name: String,
        /// Targets it may use: globs on `provider,model`, comma-separated (default: all).
        #[arg(long, value_delimiter = ',')]
        targets: Vec<String>,
        /// Requests per minute, whole deployment.
        #[arg(long)]
        rpm: Option<u64>,
        /// Tokens (input + output) per minute, whole deployment.
        #[arg(long)]
        tpm: Option<u64>,
        /// Requests in flight at once, whole deployment.
        #[arg(long)]
        max_parallel: Option<u64>,
        /// US dollars per budget period.
        #[arg(long)]
        budget_usd: Option<f64>,
        /// Tokens per budget period.
        #[arg(long)]
        budget_tokens: Option<u64>,
        /// `5h`, `day`, `week`, `month` or `total`.
        #[arg(long, default_value = "day")]
        budget_period: String,
        /// When it stops working (`2027-01-01` or RFC 3339).
        #[arg(long)]
        expires: Option<String>,
    },
    /// List every key (config and store), never a secret.
    List,
    /// Revoke a key made at run time (every replica refuses it within 5 s).
    Revoke {
        /// Its name.
        name: String,
    },
    /// Give a key made at run time a new secret (printed once); the old one stops working.
    Rotate {
        /// Its name.
        name: String,
    },
}

/// `claude-bridge store …`.
#[derive(Debug, Clone, Copy, Subcommand)]
pub enum StoreAction {
    /// Bring the store's schema up to date (`serve` does it at start too).
    Migrate,
    /// Applied and pending migrations, records and keys.
    Status,
}

/// Which bridge `statusline` and `top` read, and with which key.
#[derive(Debug, Clone, Args)]
pub struct DashboardClientArgs {
    /// The bridge's address (default: `ANTHROPIC_BASE_URL`, as Claude Code has it, else
    /// http://127.0.0.1:3456).
    #[arg(long, env = "CLAUDE_BRIDGE_URL")]
    pub url: Option<String>,
    /// The key to read with (default: `ANTHROPIC_AUTH_TOKEN`, else `ANTHROPIC_API_KEY`): an
    /// admin key sees everything, another key its own.
    #[arg(long, env = "CLAUDE_BRIDGE_KEY", hide_env_values = true)]
    pub key: Option<String>,
}

/// `claude-bridge usage`.
#[derive(Debug, Clone, Args)]
pub struct UsageArgs {
    /// Group by any of key, model, target, day, session (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub by: Vec<String>,
    /// From this time (`2026-11-01` or RFC 3339; default 30 days ago).
    #[arg(long)]
    pub since: Option<String>,
    /// Until this time (default: now).
    #[arg(long)]
    pub until: Option<String>,
    /// Only this key.
    #[arg(long)]
    pub key: Option<String>,
    /// CSV instead of a table.
    #[arg(long)]
    pub csv: bool,
    /// Where the store is.
    #[command(flatten)]
    pub store: StoreArgs,
}

impl UsageArgs {
    /// The same query string `GET /v1/usage` takes.
    #[must_use]
    pub fn query(&self) -> String {
        let mut parts = Vec::new();
        if !self.by.is_empty() {
            parts.push(format!("group_by={}", self.by.join(",")));
        }
        for (name, value) in [
            ("from", &self.since),
            ("to", &self.until),
            ("key", &self.key),
        ] {
            if let Some(value) = value {
                parts.push(format!(
                    "{name}={}",
                    value.replace('&', "%26").replace('+', "%2B")
                ));
            }
        }
        if self.csv {
            parts.push(String::from("format=csv"));
        }
        parts.join("&")
    }
}

/// Options of `claude-bridge agui`.
#[derive(Debug, Clone, Args)]
pub struct AguiArgs {
    /// The Claude Code executable the sessions run (the same flag as `claude-bridge claude`'s;
    /// `--claude-path` is its old name).
    #[arg(
        long,
        alias = "claude-path",
        env = "CLAUDE_BRIDGE_CLAUDE_BIN",
        default_value = "claude"
    )]
    pub claude_bin: String,
    /// The working directory of the Claude Code sessions (default: the bridge's).
    #[arg(long, env = "CLAUDE_BRIDGE_CWD")]
    pub cwd: Option<PathBuf>,
    /// Where the sessions' model requests go: `self` (this bridge's Anthropic front, so the agent
    /// runs on the configured provider) or `anthropic` (Claude Code's own configuration).
    #[arg(long, env = "CLAUDE_BRIDGE_UPSTREAM", value_enum, default_value_t = AgentUpstream::SelfFront)]
    pub upstream: AgentUpstream,
    /// Claude Code sessions kept alive at once (the least recently used idle one is stopped).
    #[arg(long, env = "CLAUDE_BRIDGE_MAX_SESSIONS", default_value_t = 8)]
    pub max_sessions: usize,
    /// Seconds a control request to Claude Code (interrupt, set_model, …) may take.
    #[arg(long, env = "CLAUDE_BRIDGE_CONTROL_TIMEOUT", default_value_t = 30)]
    pub control_timeout: u64,
    /// Append every line Claude Code writes to `DIR/<thread>.ndjson` (for debugging, and how the
    /// golden transcripts in `tests/fixtures/agui` were captured).
    #[arg(long, env = "CLAUDE_BRIDGE_TRANSCRIPT_DIR")]
    pub transcript_dir: Option<PathBuf>,
    /// Runs of a thread kept for `agent/connect` (older ones are dropped, and the replay says
    /// so).
    #[arg(long, env = "CLAUDE_BRIDGE_HISTORY_RUNS", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub history_runs: u64,
    /// Auto-approve rules: `TOOL` or `TOOL:allow` / `TOOL:deny`, `*` ending a prefix
    /// (e.g. `Read`, `mcp__github__*:allow`, `Bash:deny`); repeat or separate with commas.
    #[arg(long, env = "CLAUDE_BRIDGE_AUTO_APPROVE", value_delimiter = ',')]
    pub auto_approve: Vec<String>,
}

/// Where the agent's model requests go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentUpstream {
    /// This bridge's own Anthropic front (in the same process), on the configured provider.
    #[value(name = "self")]
    SelfFront,
    /// Whatever Claude Code is configured with (the Anthropic API by default).
    Anthropic,
}

/// Upstream protocol (`--provider`, and `kind` in a config file's provider table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// OpenAI Chat Completions (`/v1/chat/completions`): OpenAI, OpenRouter, Ollama, vLLM,
    /// llama.cpp, LM Studio, DeepSeek, Groq, …
    Openai,
    /// The OpenAI Responses API (`{base}/responses`): OpenAI's reasoning and codex models, with
    /// their reasoning carried across turns (encrypted, stateless: `store: false`).
    Responses,
    /// The Anthropic Messages API (`{base}/v1/messages`), passed through: real Claude with an
    /// API key (`--api-key`) or, without one, the client's own credentials (a Claude
    /// subscription's OAuth token included).
    Anthropic,
    /// A Fabstir host node: an end-to-end encrypted WebSocket session paid on-chain. Chain mode
    /// discovers hosts for `--model` and pays jobs (`--rpc-url`, `--deposit`, `--max-spend`);
    /// direct mode uses one host (`--host-url`, `--host-pubkey`) and an existing job (`--job-id`).
    Fabstir,
}

impl Provider {
    /// The base URL used when `--base-url` is not given: Ollama's local server for Chat
    /// Completions, OpenAI's API for Responses, Anthropic's API for the pass-through (Fabstir
    /// does not use one).
    #[must_use]
    pub const fn default_base_url(self) -> &'static str {
        match self {
            Self::Openai | Self::Fabstir => "http://127.0.0.1:11434/v1",
            Self::Responses => crate::config::OPENAI_API_URL,
            Self::Anthropic => crate::config::ANTHROPIC_API_URL,
        }
    }
}

/// The web search backend the bridge runs `web_search` through (`--search`, and `kind` in a
/// config file's `[search]` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchKind {
    /// A SearXNG instance's JSON API (`--search-url`; its settings must allow `json`).
    Searxng,
    /// Brave's Web Search API (`--search-api-key`).
    Brave,
    /// Tavily's search API (`--search-api-key`).
    Tavily,
}

impl SearchKind {
    /// The name as written in flags and config.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Searxng => "searxng",
            Self::Brave => "brave",
            Self::Tavily => "tavily",
        }
    }
}

/// How Fabstir jobs are paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PaymentChoice {
    /// The chain's native coin (ETH on Base).
    Eth,
    /// USDC (ERC-20).
    Usdc,
}

/// How Fabstir hosts are weighed (stake, price, uptime, latency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SelectionChoice {
    /// Balanced (.35/.30/.20/.15).
    Auto,
    /// Price first.
    Cheapest,
    /// Stake and uptime first.
    Reliable,
    /// Latency first.
    Fastest,
}

/// The tool-call format a raw-text model is asked for (every format is parsed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolFormatChoice {
    /// `<tool_call>{"name": …, "arguments": {…}}</tool_call>`
    Json,
    /// `<tool_call>Name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>`
    Glm,
}

/// What an OpenAI-compatible upstream gets for a PDF (`--documents`, `documents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DocumentsChoice {
    /// OpenAI's `file` content part, the PDF as a data URL (OpenAI, OpenRouter).
    File,
    /// The PDF's text, extracted by the bridge, under the document's title.
    Text,
    /// A note saying the document was left out.
    Omit,
}

/// The upstreams the bridge knows by their address (a default that depends on what the
/// server accepts is chosen by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KnownUpstream {
    OpenAi,
    OpenRouter,
    Other,
}

impl KnownUpstream {
    fn of(base_url: &str) -> Self {
        let host = base_url
            .parse::<http::Uri>()
            .ok()
            .and_then(|uri| uri.host().map(str::to_ascii_lowercase))
            .unwrap_or_default();
        if host == "api.openai.com" {
            Self::OpenAi
        } else if host == "openrouter.ai" || host.ends_with(".openrouter.ai") {
            Self::OpenRouter
        } else {
            Self::Other
        }
    }
}

impl DocumentsChoice {
    /// What the upstream at `base_url` is known to take: files for OpenAI and OpenRouter, text
    /// for every other server (Ollama, vLLM, llama.cpp, DeepSeek refuse `file` parts).
    #[must_use]
    pub fn for_upstream(base_url: &str) -> Self {
        match KnownUpstream::of(base_url) {
            KnownUpstream::OpenAi | KnownUpstream::OpenRouter => Self::File,
            KnownUpstream::Other => Self::Text,
        }
    }

    /// The core's mode.
    #[must_use]
    pub fn core(self) -> bridge_core::api::DocumentMode {
        match self {
            Self::File => bridge_core::api::DocumentMode::File,
            Self::Text => bridge_core::api::DocumentMode::Text,
            Self::Omit => bridge_core::api::DocumentMode::Omit,
        }
    }
}

/// Who runs a request's web search (`--web-search`, `web_search`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebSearchChoice {
    /// The upstream's own search: OpenAI Responses' hosted `web_search`, OpenRouter's
    /// `openrouter:web_search`.
    Upstream,
    /// The bridge, through the `--search` backend.
    Bridge,
}

impl WebSearchChoice {
    /// Who searches for `provider` at `base_url` unless told: the upstream where it is known to
    /// search (the Responses API at OpenAI or OpenRouter, Chat Completions at OpenRouter), the
    /// bridge everywhere else.
    #[must_use]
    pub fn for_upstream(provider: Provider, base_url: &str) -> Self {
        match (provider, KnownUpstream::of(base_url)) {
            (Provider::Responses, KnownUpstream::OpenAi | KnownUpstream::OpenRouter)
            | (Provider::Openai, KnownUpstream::OpenRouter) => Self::Upstream,
            _ => Self::Bridge,
        }
    }
}

/// Which build of the translation core runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineChoice {
    /// The core as a WASI component in wasmtime (default).
    Wasm,
    /// The core compiled into the binary.
    Native,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable.
    Pretty,
    /// One JSON object per line.
    Json,
}

/// `--listen`'s default.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 3456);

/// Options of the server.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (keep it on loopback unless you set --client-key).
    #[arg(help_heading = "Common", long, env = "CLAUDE_BRIDGE_LISTEN", default_value = "127.0.0.1:3456", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// Upstream protocol.
    #[arg(help_heading = "Common", long, env = "CLAUDE_BRIDGE_PROVIDER", value_enum, default_value_t = Provider::Openai)]
    pub provider: Provider,
    /// Upstream base URL. Default per provider: openai `http://127.0.0.1:11434/v1` (Ollama),
    /// responses `https://api.openai.com/v1`, anthropic `https://api.anthropic.com`.
    #[arg(help_heading = "Common", long, env = "CLAUDE_BRIDGE_BASE_URL")]
    pub base_url: Option<String>,
    /// Upstream model for every request; without it the client's model name is forwarded.
    #[arg(help_heading = "Common", long, env = "CLAUDE_BRIDGE_MODEL")]
    pub model: Option<String>,
    /// Upstream API key (sent as `Authorization: Bearer`).
    #[arg(
        help_heading = "Common",
        long,
        env = "CLAUDE_BRIDGE_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,
    /// Extra trusted CA certificates (PEM) for an https upstream or wss Fabstir host with a private
    /// or self-signed certificate.
    #[arg(help_heading = "Common", long, env = "CLAUDE_BRIDGE_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// The web search backend for upstreams without a search of their own: the bridge runs
    /// Claude Code's WebSearch (the `web_search` server tool) through it. Without one, a
    /// search gets the `unavailable` error saying how to configure it.
    #[arg(
        help_heading = "Web search",
        long = "search",
        env = "CLAUDE_BRIDGE_SEARCH"
    )]
    pub search: Option<SearchKind>,
    /// The search backend's address: a SearXNG instance (`http://127.0.0.1:8888`); Brave and
    /// Tavily default to their public APIs.
    #[arg(help_heading = "Web search", long, env = "CLAUDE_BRIDGE_SEARCH_URL")]
    pub search_url: Option<String>,
    /// The search backend's API key (Brave, Tavily).
    #[arg(
        help_heading = "Web search",
        long,
        env = "CLAUDE_BRIDGE_SEARCH_API_KEY",
        hide_env_values = true
    )]
    pub search_api_key: Option<String>,
    /// Let the bridge's web fetch (the `web_fetch` server tool) open loopback and private
    /// addresses (an intranet); refused by default, so a model cannot reach this machine's or
    /// this network's services.
    #[arg(
        help_heading = "Web search",
        long,
        env = "CLAUDE_BRIDGE_FETCH_ALLOW_PRIVATE"
    )]
    pub fetch_allow_private: bool,
    /// Key clients must send (`x-api-key` or `Authorization: Bearer`); none when unset.
    #[arg(
        help_heading = "Common",
        long,
        env = "CLAUDE_BRIDGE_CLIENT_KEY",
        hide_env_values = true
    )]
    pub client_key: Option<String>,
    /// Translation engine.
    #[arg(help_heading = "Translation (OpenAI-compatible upstreams)", long, env = "CLAUDE_BRIDGE_ENGINE", value_enum, default_value_t = EngineChoice::Wasm)]
    pub engine: EngineChoice,
    /// A translation plug-in: a WASI component implementing `wit/bridge-core.wit` (implies --engine wasm).
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        env = "CLAUDE_BRIDGE_CORE"
    )]
    pub core: Option<PathBuf>,
    /// Upper bound for `max_tokens` sent upstream (Claude Code asks for 32k–128k); 0 = no cap.
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        env = "CLAUDE_BRIDGE_MAX_TOKENS_CAP",
        default_value_t = 32_768
    )]
    pub max_tokens_cap: u64,
    /// Send `max_completion_tokens` instead of `max_tokens` (OpenAI o-series and gpt-5 models).
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        env = "CLAUDE_BRIDGE_MAX_COMPLETION_TOKENS"
    )]
    pub max_completion_tokens: bool,
    /// Clean tool schemas for strict validators (Gemini-style upstreams).
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        env = "CLAUDE_BRIDGE_STRICT_SCHEMAS"
    )]
    pub strict_schemas: bool,
    /// Map Claude Code's thinking/effort settings to `reasoning_effort`.
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        env = "CLAUDE_BRIDGE_REASONING_EFFORT"
    )]
    pub reasoning_effort: bool,
    /// Do not send earlier thinking back as `reasoning_content`.
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        env = "CLAUDE_BRIDGE_NO_REASONING_PASSBACK"
    )]
    pub no_reasoning_passback: bool,
    /// Keep Claude Code's mid-conversation system messages in place instead of folding them into
    /// the adjacent user message (for upstreams whose chat templates accept a system message anywhere).
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        env = "CLAUDE_BRIDGE_KEEP_MID_CONVERSATION_SYSTEM"
    )]
    pub keep_mid_conversation_system: bool,
    /// Ask the upstream for usage on every chunk (`stream_options.continuous_usage_stats`:
    /// vLLM, SGLang), so `message_start` tells clients the real input and cached tokens at once
    /// instead of an estimate. Other servers may refuse the field.
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        env = "CLAUDE_BRIDGE_CONTINUOUS_USAGE_STATS"
    )]
    pub continuous_usage_stats: bool,
    /// What a PDF document becomes: `file` (OpenAI's file part: OpenAI, OpenRouter), `text`
    /// (its text, extracted by the bridge) or `omit` (a note). Default: `file` for
    /// api.openai.com and openrouter.ai, `text` for every other server; the start-up line says
    /// which. Text documents are always sent as text.
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        value_enum,
        env = "CLAUDE_BRIDGE_DOCUMENTS"
    )]
    pub documents: Option<DocumentsChoice>,
    /// Who runs a request's web search: `upstream` (OpenAI Responses' hosted `web_search`,
    /// OpenRouter's `openrouter:web_search`; their searches and citations come back as
    /// Anthropic's blocks) or `bridge` (through `--search`). Default: `upstream` for the
    /// Responses API at api.openai.com or openrouter.ai and for Chat Completions at
    /// openrouter.ai, `bridge` for every other server. A request that also asks for web fetch
    /// has both run by the bridge.
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        value_enum,
        env = "CLAUDE_BRIDGE_WEB_SEARCH"
    )]
    pub web_search: Option<WebSearchChoice>,
    /// Count the prompt with the upstream model's tokenizer, so `message_start` tells clients
    /// the input tokens before the upstream's own count arrives: `auto` (OpenAI's encoding for
    /// OpenAI models), an encoding (`o200k_base`, `cl100k_base`, …) or a Hugging Face
    /// `tokenizer.json` path. Off: an estimate (about four characters a token).
    #[arg(
        help_heading = "Translation (OpenAI-compatible upstreams)",
        long,
        env = "CLAUDE_BRIDGE_TOKENIZER"
    )]
    pub tokenizer: Option<String>,
    /// Browser origins (besides loopback pages such as `http://localhost:3000`) allowed to call
    /// the bridge, e.g. `https://app.example.com`; `*` allows any (only with --client-key).
    #[arg(
        help_heading = "Common",
        long,
        env = "CLAUDE_BRIDGE_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origin: Vec<String>,
    /// Do not check the upstreams at start (by default each one is asked for its model list in
    /// the background, and one that is down, refuses the key or has a `base_url` without `/v1`
    /// is a warning in the log; serving starts either way).
    #[arg(help_heading = "Common", long, env = "CLAUDE_BRIDGE_NO_UPSTREAM_CHECK")]
    pub no_upstream_check: bool,
    /// Largest accepted request body, in bytes.
    #[arg(help_heading = "Timeouts and limits", long, env = "CLAUDE_BRIDGE_MAX_BODY_BYTES", default_value_t = 32 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Bytes of request bodies held at once, across requests: a large body past it waits,
    /// unread, for the ones before it (up to --client-timeout, then 529), so concurrent uploads
    /// cannot each take their parse's memory at once (about 7 times a body's size while it is
    /// read and converted); a body larger than the whole budget is read alone.
    #[arg(help_heading = "Timeouts and limits", long, env = "CLAUDE_BRIDGE_BODY_BUDGET_BYTES", default_value_t = 32 * 1024 * 1024)]
    pub body_budget_bytes: usize,
    /// Bytes of `/v1/responses` answers kept in memory so a later request's
    /// `previous_response_id` and `item_reference` items resolve and `GET /v1/responses/{id}`
    /// finds them (requests with `store: false` are not kept); the oldest go first. `0` keeps
    /// nothing.
    #[arg(help_heading = "Timeouts and limits", long, env = "CLAUDE_BRIDGE_RESPONSES_STORE_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub responses_store_bytes: usize,
    /// Seconds a kept `/v1/responses` answer stays resolvable.
    #[arg(
        help_heading = "Timeouts and limits",
        long,
        env = "CLAUDE_BRIDGE_RESPONSES_STORE_TTL",
        default_value_t = 86_400
    )]
    pub responses_store_ttl: u64,
    /// Client connections served at once (lowered to what the open-files limit can hold). Past
    /// it, /health and /metrics are still answered, and a request waits up to --cap-wait for a
    /// free slot, then gets 529 (503 for OpenAI clients) with retry-after.
    #[arg(
        help_heading = "Timeouts and limits",
        long,
        env = "CLAUDE_BRIDGE_MAX_CONNECTIONS",
        default_value_t = 512
    )]
    pub max_connections: usize,
    /// Seconds a client may take to send a request's headers or the next piece of its body, and
    /// that an idle keep-alive connection stays open.
    #[arg(
        help_heading = "Timeouts and limits",
        long,
        env = "CLAUDE_BRIDGE_CLIENT_TIMEOUT",
        default_value_t = 30
    )]
    pub client_timeout: u64,
    /// Seconds a request that came past --max-connections waits for a free slot before it is
    /// answered 529 (503 for OpenAI clients) with retry-after.
    #[arg(
        help_heading = "Timeouts and limits",
        long,
        env = "CLAUDE_BRIDGE_CAP_WAIT",
        default_value_t = 5
    )]
    pub cap_wait: u64,
    /// Seconds to wait for a TCP/TLS connection to the upstream.
    #[arg(
        help_heading = "Timeouts and limits",
        long,
        env = "CLAUDE_BRIDGE_CONNECT_TIMEOUT",
        default_value_t = 10
    )]
    pub connect_timeout: u64,
    /// Seconds to wait for the upstream's response headers.
    #[arg(
        help_heading = "Timeouts and limits",
        long,
        env = "CLAUDE_BRIDGE_FIRST_BYTE_TIMEOUT",
        default_value_t = 300
    )]
    pub first_byte_timeout: u64,
    /// Seconds an upstream stream may stay silent before the response ends with a timeout error.
    #[arg(
        help_heading = "Timeouts and limits",
        long,
        env = "CLAUDE_BRIDGE_IDLE_TIMEOUT",
        default_value_t = 300
    )]
    pub idle_timeout: u64,
    /// Seconds an answer may take in all before it ends with a timeout error (an upstream that
    /// trickles forever); 0 = no limit.
    #[arg(
        help_heading = "Timeouts and limits",
        long,
        env = "CLAUDE_BRIDGE_STREAM_TIMEOUT",
        default_value_t = 0
    )]
    pub stream_timeout: u64,
    /// Seconds of upstream silence after which a `ping` event is sent to the client.
    #[arg(
        help_heading = "Timeouts and limits",
        long,
        env = "CLAUDE_BRIDGE_PING_INTERVAL",
        default_value_t = 10
    )]
    pub ping_interval: u64,
    /// Fabstir (direct mode): the host's URL (`http://HOST:PORT` → `ws://…/v1/ws`, `https://` → `wss://`).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_HOST_URL")]
    pub host_url: Option<String>,
    /// Fabstir (direct mode): the host's public key, compressed hex (from its NodeRegistry metadata).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_HOST_PUBKEY")]
    pub host_pubkey: Option<String>,
    /// Fabstir: the existing session job to use (selects direct mode: no chain calls).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_JOB_ID")]
    pub job_id: Option<u64>,
    /// Fabstir: the chain id (Base Sepolia); in chain mode the RPC must serve it.
    #[arg(
        help_heading = "Fabstir",
        long,
        env = "CLAUDE_BRIDGE_CHAIN_ID",
        default_value_t = 84532
    )]
    pub chain_id: u64,
    /// Fabstir (direct mode): the job's price per token, a whole number as sent in the session
    /// init (chain mode uses the host's on-chain price).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_PRICE_PER_TOKEN", default_value_t = 1, value_parser = parse_price_per_token)]
    pub price_per_token: u64,
    /// Fabstir: a file holding the wallet's private key (hex). Or set
    /// CLAUDE_BRIDGE_PRIVATE_KEY; the key is never accepted as a plain flag and never logged.
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_PRIVATE_KEY_FILE")]
    pub private_key_file: Option<PathBuf>,
    /// Fabstir (chain mode): the JSON-RPC endpoint of the chain (default for 84532:
    /// https://sepolia.base.org).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_RPC_URL")]
    pub rpc_url: Option<String>,
    /// Fabstir (chain mode): only use this host (its operator address).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_HOST")]
    pub host: Option<String>,
    /// Fabstir (chain mode): pay jobs in the native coin or in USDC (ERC-20, approved first).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_PAYMENT", value_enum, default_value_t = PaymentChoice::Eth)]
    pub payment: PaymentChoice,
    /// Fabstir (chain mode): each job's deposit in ETH or USDC (default 0.0002 ETH or 1 USDC; the
    /// contract's minimum is 0.0001 ETH or 0.5 USDC). What the host does not use is refunded.
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_DEPOSIT")]
    pub deposit: Option<String>,
    /// Fabstir (chain mode): the most this ledger may spend, in ETH or USDC: what earlier runs
    /// were charged plus this run's deposits (default: five deposits).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_MAX_SPEND")]
    pub max_spend: Option<String>,
    /// Fabstir (chain mode): how hosts are weighed.
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_SELECTION", value_enum, default_value_t = SelectionChoice::Auto)]
    pub selection: SelectionChoice,
    /// Fabstir (chain mode): the job ledger file (default
    /// `$XDG_STATE_HOME/claude-bridge/fabstir-ledger.json`).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_LEDGER")]
    pub ledger: Option<PathBuf>,
    /// The gateway's store when the config turns the gateway on: the Fabstir job ledger lives
    /// there (the `--ledger` file is imported once). Set from the config, never a flag.
    #[arg(skip)]
    pub ledger_store: Option<String>,
    /// Fabstir (chain mode): blocks to wait for before a new job is used.
    #[arg(
        help_heading = "Fabstir",
        long,
        env = "CLAUDE_BRIDGE_CONFIRMATIONS",
        default_value_t = 1
    )]
    pub confirmations: u64,
    /// Fabstir (chain mode): the host name that replaces a discovered host's loopback address
    /// (`localhost`, `127.0.0.1`, `[::1]`) — e.g. `host.docker.internal` for a bridge in a
    /// container whose hosts run on the machine.
    #[arg(
        help_heading = "Fabstir",
        long,
        env = "CLAUDE_BRIDGE_LOCALHOST_OVERRIDE"
    )]
    pub localhost_override: Option<String>,
    /// Fabstir (chain mode): the JobMarketplace contract (default: the Base Sepolia deployment).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_JOB_MARKETPLACE")]
    pub job_marketplace: Option<String>,
    /// Fabstir (chain mode): the NodeRegistry contract (default: the Base Sepolia deployment).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_NODE_REGISTRY")]
    pub node_registry: Option<String>,
    /// Fabstir (chain mode): the USDC token (default: Base Sepolia's USDC).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_USDC")]
    pub usdc: Option<String>,
    /// Fabstir: the tool-call format the model is asked for (`json`, or `glm` for GLM models).
    #[arg(help_heading = "Fabstir", long, env = "CLAUDE_BRIDGE_TOOL_FORMAT", value_enum, default_value_t = ToolFormatChoice::Json)]
    pub tool_format: ToolFormatChoice,
    /// Log format.
    #[arg(help_heading = "Logging", long, env = "CLAUDE_BRIDGE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty)]
    pub log_format: LogFormat,
    /// Append the log to this file instead of writing it to stderr (`-`: stderr). For
    /// `claude-bridge claude` the default is a file under `$XDG_STATE_HOME/claude-bridge/`, so
    /// the log stays off Claude Code's screen; it says where at start.
    #[arg(help_heading = "Logging", long, env = "CLAUDE_BRIDGE_LOG_FILE")]
    pub log_file: Option<std::path::PathBuf>,
    /// Log filter (`info`, `debug`, `claude_bridge=trace`, …).
    #[arg(
        help_heading = "Logging",
        long,
        env = "CLAUDE_BRIDGE_LOG",
        default_value = "info"
    )]
    pub log: String,
    /// A config file of providers and routes (docs/configuration.md); else
    /// `CLAUDE_BRIDGE_CONFIG`, else `./claude-bridge.toml`, else
    /// `$XDG_CONFIG_HOME/claude-bridge/config.toml`. Without one, the flags describe a single
    /// provider named `default`.
    #[arg(help_heading = "Common", long)]
    pub config: Option<PathBuf>,
    /// Extra upstream headers (a config file's `headers = {…}`).
    #[arg(skip)]
    pub upstream_headers: Vec<(String, String)>,
    /// A Responses provider's `reasoning_effort` from a config file.
    #[arg(skip)]
    pub responses_reasoning_effort: Option<String>,
    /// `KEY=VALUE` lines (dotenv syntax) beneath the environment: a flag or a variable already
    /// set wins; `env:NAME` keys and Claude Code children see them too.
    #[arg(help_heading = "Common", long, env = "CLAUDE_BRIDGE_ENV_FILE")]
    pub env_file: Option<PathBuf>,
}

impl ServeArgs {
    /// The Responses request options these flags describe (reasoning follows the client's
    /// `thinking` / `output_config.effort`).
    #[must_use]
    pub fn responses_options(&self) -> bridge_core::api::ResponsesOptions {
        bridge_core::api::ResponsesOptions {
            model: self.model.clone(),
            max_tokens_cap: (self.max_tokens_cap > 0).then_some(self.max_tokens_cap),
            strict_schemas: self.strict_schemas,
            reasoning_effort: self.responses_reasoning_effort.clone(),
            hosted_web_search: self.web_search_mode() == WebSearchChoice::Upstream,
            ..bridge_core::api::ResponsesOptions::default()
        }
    }

    /// `--web-search`, else who is known to search for this provider and upstream.
    #[must_use]
    pub fn web_search_mode(&self) -> WebSearchChoice {
        self.web_search
            .unwrap_or_else(|| WebSearchChoice::for_upstream(self.provider, self.base_url()))
    }

    /// The connection cap and client timeouts, the cap lowered to what the open-files limit
    /// holds (raised to the hard limit first); a lowered cap is logged.
    #[must_use]
    pub fn conn_limits(&self) -> crate::server::conn::ConnLimits {
        let limits = crate::server::conn::ConnLimits {
            max_connections: self.max_connections.max(1),
            client_timeout: std::time::Duration::from_secs(self.client_timeout.max(1)),
            cap_wait: std::time::Duration::from_secs(self.cap_wait),
        };
        let Some(open_files) = crate::server::conn::raise_fd_limit() else {
            return limits;
        };
        let fitted = limits.fitted_to(open_files);
        if fitted.max_connections < limits.max_connections {
            tracing::warn!(
                open_files,
                max_connections = fitted.max_connections,
                asked = limits.max_connections,
                "the open-files limit holds fewer client connections than --max-connections; \
                 serving at most max_connections at once (raise the hard limit, ulimit -Hn, for more)"
            );
        }
        fitted
    }

    /// The upstream's base URL: `--base-url`, else the provider's usual one
    /// ([`Provider::default_base_url`]).
    #[must_use]
    pub fn base_url(&self) -> &str {
        self.base_url
            .as_deref()
            .filter(|url| !url.trim().is_empty())
            .unwrap_or_else(|| self.provider.default_base_url())
    }

    /// The core's dialect for `--provider`, and its options as the JSON the core takes.
    ///
    /// # Errors
    /// The options cannot be encoded (they always can: plain data).
    pub fn dialect_options(&self) -> Result<(bridge_core::api::Dialect, String), String> {
        use bridge_core::api::{AnthropicOptions, Dialect};
        let encoded = match self.provider {
            Provider::Openai => (
                Dialect::OpenaiChat,
                serde_json::to_string(&self.convert_options()),
            ),
            Provider::Responses => (
                Dialect::OpenaiResponses,
                serde_json::to_string(&self.responses_options()),
            ),
            Provider::Anthropic => (
                Dialect::Anthropic,
                serde_json::to_string(&AnthropicOptions {
                    model: self.model.clone(),
                }),
            ),
            Provider::Fabstir => (
                Dialect::Chatml,
                serde_json::to_string(&self.chatml_options()),
            ),
        };
        let (dialect, json) = encoded;
        Ok((dialect, json.map_err(|e| e.to_string())?))
    }

    /// The core's options for raw-text (Fabstir) hosts.
    #[must_use]
    pub fn chatml_options(&self) -> bridge_core::api::ChatmlOptions {
        bridge_core::api::ChatmlOptions {
            model: self.model.clone(),
            max_tokens_cap: (self.max_tokens_cap > 0).then_some(self.max_tokens_cap),
            tool_format: match self.tool_format {
                ToolFormatChoice::Json => bridge_core::api::ToolFormat::Json,
                ToolFormatChoice::Glm => bridge_core::api::ToolFormat::Glm,
            },
            require_max_tokens: true,
        }
    }

    /// The core's options for Chat Completions upstreams.
    pub fn convert_options(&self) -> bridge_core::api::ConvertOptions {
        bridge_core::api::ConvertOptions {
            model: self.model.clone(),
            max_tokens_cap: (self.max_tokens_cap > 0).then_some(self.max_tokens_cap),
            use_max_completion_tokens: self.max_completion_tokens,
            strict_schemas: self.strict_schemas,
            reasoning_effort: self.reasoning_effort,
            reasoning_passback: !self.no_reasoning_passback,
            keep_mid_conversation_system: self.keep_mid_conversation_system,
            continuous_usage_stats: self.continuous_usage_stats,
            drop_tool_choice: false,
            require_max_tokens: true,
            documents: self.documents_mode().core(),
            hosted_web_search: self.web_search_mode() == WebSearchChoice::Upstream,
        }
    }

    /// `--documents`, else what the upstream is known to take.
    #[must_use]
    pub fn documents_mode(&self) -> DocumentsChoice {
        self.documents
            .unwrap_or_else(|| DocumentsChoice::for_upstream(self.base_url()))
    }
}

/// Find `--env-file PATH` / `--env-file=PATH` / `CLAUDE_BRIDGE_ENV_FILE` before clap parses
/// (the file's values become clap's defaults, so it must be read first).
#[must_use]
pub fn env_file_from_args(args: &[String]) -> Option<PathBuf> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            break;
        }
        if arg == "--env-file" {
            return iter.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--env-file=") {
            return Some(PathBuf::from(path));
        }
    }
    crate::environment::process_only("CLAUDE_BRIDGE_ENV_FILE").map(PathBuf::from)
}

/// The serve flags `hosts` takes (besides `--help`): the chain, the model, logging.
const HOSTS_FLAGS: &[&str] = &[
    "model",
    "ca_cert",
    "rpc_url",
    "chain_id",
    "payment",
    "selection",
    "localhost_override",
    "job_marketplace",
    "node_registry",
    "usdc",
    "log",
    "log_format",
    "log_file",
    "env_file",
];

/// The flags `translate` takes: its own, and what shapes the translation.
const TRANSLATE_FLAGS: &[&str] = &[
    "request",
    "capture",
    "no_stream",
    "provider",
    "model",
    "engine",
    "core",
    "max_tokens_cap",
    "max_completion_tokens",
    "strict_schemas",
    "reasoning_effort",
    "no_reasoning_passback",
    "keep_mid_conversation_system",
    "continuous_usage_stats",
    "documents",
    "web_search",
    "tool_format",
    "env_file",
];

/// The flags `doctor` takes: the config file, or the one provider the flags describe.
const DOCTOR_FLAGS: &[&str] = &[
    "config",
    "provider",
    "base_url",
    "model",
    "api_key",
    "ca_cert",
    "connect_timeout",
    "env_file",
];

/// The subcommands that take only some of the serve flags, and which.
pub const NARROW_SUBCOMMANDS: &[(&str, &[&str])] = &[
    ("hosts", HOSTS_FLAGS),
    ("translate", TRANSLATE_FLAGS),
    ("doctor", DOCTOR_FLAGS),
];

/// The command line as users see it: `--env-file` values as defaults
/// ([`crate::environment::with_file_defaults`]), and `hosts`, `translate` and `doctor` showing
/// and taking only their own flags.
#[must_use]
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut command = crate::environment::with_file_defaults(Cli::command());
    for (name, keep) in NARROW_SUBCOMMANDS {
        command = command.mut_subcommand(name, |sub| keep_only(&sub, keep));
    }
    command
}

/// `sub` with only the arguments named in `keep` (clap cannot remove an argument, so the
/// subcommand is rebuilt from its name, texts and the kept arguments).
fn keep_only(sub: &clap::Command, keep: &[&str]) -> clap::Command {
    let kept: Vec<clap::Arg> = sub
        .get_arguments()
        .filter(|arg| keep.contains(&arg.get_id().as_str()))
        .cloned()
        .collect();
    let mut rebuilt = clap::Command::new(sub.get_name().to_owned())
        .about(sub.get_about().cloned().unwrap_or_default())
        .args(kept);
    if let Some(long) = sub.get_long_about() {
        rebuilt = rebuilt.long_about(long.clone());
    }
    rebuilt
}

/// Parse the command line (exits with clap's message on an error, `--help` or `--version`).
/// The narrowed command ([`command`]) checks it; the full one fills every serve option, the
/// ones a narrowed subcommand does not take at their defaults.
#[must_use]
pub fn parse_from(argv: &[String]) -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    command().get_matches_from(argv);
    let mut full = crate::environment::with_file_defaults(Cli::command());
    let matches = full
        .try_get_matches_from_mut(argv)
        .unwrap_or_else(|e| e.exit());
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut full).exit())
}

/// `--price-per-token`: the on-chain price is an integer, and host nodes refuse a fraction.
fn parse_price_per_token(value: &str) -> Result<u64, String> {
    value.trim().parse::<u64>().map_err(|_| {
        format!(
            "`{value}` is not a whole number: the price per token is the job's on-chain integer \
             price (e.g. 2000), and host nodes refuse a fraction"
        )
    })
}

/// `--listen`: an address, or a host name with a port (`localhost:3456`), resolved (IPv4 first).
pub(crate) fn parse_listen(value: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = value.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let resolved: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(value)
        .map_err(|e| {
            format!("`{value}` is not ADDRESS:PORT or HOST:PORT ({e}); e.g. 127.0.0.1:3456")
        })?
        .collect();
    resolved
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| resolved.first())
        .copied()
        .ok_or_else(|| format!("`{value}` resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_takes_host_names_and_says_what_it_wants() {
        assert_eq!(
            parse_listen("localhost:3456").map(|a| (a.ip().is_loopback(), a.port())),
            Ok((true, 3456))
        );
        assert_eq!(parse_listen("[::1]:9").map(|a| a.port()), Ok(9));
        assert!(parse_listen("localhost").is_err_and(|e| e.contains("HOST:PORT")));
    }

    #[test]
    fn documents_default_to_what_the_upstream_takes() {
        for (url, want) in [
            ("https://api.openai.com/v1", DocumentsChoice::File),
            ("https://OpenRouter.ai/api/v1", DocumentsChoice::File),
            ("http://127.0.0.1:11434/v1", DocumentsChoice::Text),
            ("https://api.deepseek.com", DocumentsChoice::Text),
            ("https://api.openai.com.example/v1", DocumentsChoice::Text),
        ] {
            assert_eq!(DocumentsChoice::for_upstream(url), want, "{url}");
        }
    }

    #[test]
    fn web_search_defaults_to_the_upstreams_that_search() {
        for (provider, url, want) in [
            (
                Provider::Responses,
                "https://api.openai.com/v1",
                WebSearchChoice::Upstream,
            ),
            (
                Provider::Responses,
                "https://openrouter.ai/api/v1",
                WebSearchChoice::Upstream,
            ),
            (
                Provider::Openai,
                "https://openrouter.ai/api/v1",
                WebSearchChoice::Upstream,
            ),
            (
                Provider::Openai,
                "https://api.openai.com/v1",
                WebSearchChoice::Bridge,
            ),
            (
                Provider::Responses,
                "http://127.0.0.1:8000/v1",
                WebSearchChoice::Bridge,
            ),
            (
                Provider::Openai,
                "http://127.0.0.1:11434/v1",
                WebSearchChoice::Bridge,
            ),
        ] {
            assert_eq!(WebSearchChoice::for_upstream(provider, url), want, "{url}");
        }
    }

    fn help_of(subcommand: &str) -> String {
        command()
            .find_subcommand_mut(subcommand)
            .unwrap()
            .render_long_help()
            .to_string()
    }

    fn try_parse(argv: &[&str]) -> Result<clap::ArgMatches, clap::Error> {
        command().try_get_matches_from(argv)
    }

    #[test]
    fn hosts_translate_and_doctor_show_and_take_only_their_own_flags() {
        // A flag's own line reads `--name <VALUE>`; the texts may mention other flags.
        let hosts = help_of("hosts");
        assert!(
            hosts.contains("--rpc-url <") && hosts.contains("--model"),
            "{hosts}"
        );
        assert!(
            !hosts.contains("--listen <") && !hosts.contains("--max-connections <"),
            "{hosts}"
        );
        let translate = help_of("translate");
        assert!(translate.contains("--capture") && translate.contains("--strict-schemas"));
        assert!(!translate.contains("--rpc-url <") && !translate.contains("--client-key <"));
        let doctor = help_of("doctor");
        assert!(
            doctor.contains("--config") && doctor.contains("--base-url"),
            "{doctor}"
        );
        assert!(!doctor.contains("--deposit <") && !doctor.contains("--ping-interval <"));

        let refused = try_parse(&["cb", "hosts", "--model", "m", "--listen", "127.0.0.1:1"]);
        assert!(
            refused.is_err_and(|e| e.kind() == clap::error::ErrorKind::UnknownArgument),
            "hosts must refuse a serve-only flag"
        );
        assert!(try_parse(&["cb", "hosts", "--model", "m", "--rpc-url", "http://x"]).is_ok());
        // serve, claude and agui keep every flag.
        assert!(
            try_parse(&[
                "cb",
                "serve",
                "--rpc-url",
                "http://x",
                "--listen",
                "127.0.0.1:1"
            ])
            .is_ok()
        );
        assert!(try_parse(&["cb", "claude", "--max-connections", "3", "--", "-p", "hi"]).is_ok());
        assert!(try_parse(&["cb", "codex", "--model", "m", "--", "exec", "hi"]).is_ok());
    }

    #[test]
    fn every_flag_a_narrow_subcommand_names_exists() {
        use clap::CommandFactory;
        let full = Cli::command();
        for (name, keep) in NARROW_SUBCOMMANDS {
            let sub = full.find_subcommand(name).unwrap();
            for id in *keep {
                assert!(
                    sub.get_arguments().any(|a| a.get_id().as_str() == *id),
                    "{name} keeps `{id}`, which it does not have"
                );
            }
        }
    }

    #[test]
    fn a_narrow_subcommand_parses_to_the_serve_defaults() {
        let argv: Vec<String> = [
            "cb",
            "translate",
            "--request",
            "r.json",
            "--provider",
            "responses",
        ]
        .map(String::from)
        .to_vec();
        let Some(Command::Translate { serve, request, .. }) = parse_from(&argv).command else {
            panic!("not translate");
        };
        assert_eq!(request, PathBuf::from("r.json"));
        assert_eq!(serve.provider, Provider::Responses);
        assert_eq!(serve.max_connections, 512);
    }

    #[test]
    fn each_provider_has_its_usual_base_url_unless_one_is_given() {
        let serve = |extra: &[&str]| {
            let mut argv = vec!["cb", "serve"];
            argv.extend_from_slice(extra);
            let argv: Vec<String> = argv.into_iter().map(String::from).collect();
            let Some(Command::Serve(serve)) = parse_from(&argv).command else {
                panic!("not serve");
            };
            serve
        };
        assert_eq!(serve(&[]).base_url(), "http://127.0.0.1:11434/v1");
        assert_eq!(
            serve(&["--provider", "anthropic"]).base_url(),
            "https://api.anthropic.com"
        );
        assert_eq!(
            serve(&["--provider", "responses"]).base_url(),
            "https://api.openai.com/v1"
        );
        assert_eq!(
            serve(&[
                "--provider",
                "anthropic",
                "--base-url",
                "http://127.0.0.1:9/"
            ])
            .base_url(),
            "http://127.0.0.1:9/"
        );
    }

    #[test]
    fn a_fractional_price_is_refused_with_a_reason() {
        assert_eq!(parse_price_per_token("2000"), Ok(2000));
        assert!(parse_price_per_token("1.5").is_err_and(|e| e.contains("whole number")));
    }
}
