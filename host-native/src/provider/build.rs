//! Building providers: from the serve flags ([`build_provider`]), or one per target of a config
//! file (each provider table as the flags it stands for: [`provider_args`]). One home that the
//! server's routes, `doctor` and the launchers use, so those modules only look down.

use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use crate::cli::{Provider, ServeArgs};
use crate::engine::{Dialect, Engine};
use crate::provider::upstream::Upstream;

/// The provider the arguments describe; all but the Anthropic pass-through run server tools
/// (web search and fetch through `runners`).
///
/// # Errors
/// Bad upstream configuration.
pub async fn build_provider(
    args: &ServeArgs,
    engine: &Arc<dyn Engine>,
    runners: &Arc<crate::provider::server_tools::Runners>,
    free_at: Option<Arc<crate::provider::rate_limit::FreeAt>>,
) -> Result<Arc<dyn crate::provider::Provider>, String> {
    let upstream = |endpoint: &str, bearer: bool| {
        let mut upstream = Upstream::new(
            args.base_url(),
            endpoint,
            args.api_key.as_deref().filter(|_| bearer),
            args.ca_cert.as_deref(),
            Duration::from_secs(args.connect_timeout),
            Duration::from_secs(args.first_byte_timeout),
        )?;
        for (name, value) in &args.upstream_headers {
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("{name:?} is not a header name"))?;
            upstream = upstream.with_header(name, value)?;
        }
        Ok::<_, String>(upstream.noting_rate_limits(free_at.clone()))
    };
    let tokenizer = args
        .tokenizer
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(crate::provider::tokenizer::TokenizerSpec::parse)
        .transpose()?;
    if args.provider == Provider::Openai {
        // The serving line that follows names the upstream (without its userinfo).
        info!(
            documents = ?args.documents_mode(),
            configured = args.documents.is_some(),
            "what a PDF document becomes upstream (--documents)"
        );
    }
    if matches!(args.provider, Provider::Openai | Provider::Responses) {
        info!(
            web_search = ?args.web_search_mode(),
            configured = args.web_search.is_some(),
            "who runs a request's web search (--web-search)"
        );
    }
    let inner: Arc<dyn crate::provider::Provider> = match args.provider {
        Provider::Openai => Arc::new(
            crate::provider::openai::OpenAi::new(
                Arc::clone(engine),
                upstream("chat/completions", true)?,
                Dialect::OpenaiChat,
                serde_json::to_value(args.convert_options()).map_err(|e| e.to_string())?,
            )
            .with_tokenizer(tokenizer),
        ),
        Provider::Responses => Arc::new(
            crate::provider::openai::OpenAi::new(
                Arc::clone(engine),
                upstream("responses", true)?,
                Dialect::OpenaiResponses,
                serde_json::to_value(args.responses_options()).map_err(|e| e.to_string())?,
            )
            .with_tokenizer(tokenizer),
        ),
        Provider::Anthropic => Arc::new(crate::provider::anthropic::AnthropicPassThrough::new(
            Arc::clone(engine),
            upstream("v1/messages", false)?,
            args.api_key.as_deref(),
            args.model.clone(),
        )?),
        Provider::Fabstir => {
            Arc::new(crate::provider::fabstir::setup::backend(args, engine).await?)
        }
    };
    // The Messages API runs server tools itself; for the others the bridge does.
    if args.provider == Provider::Anthropic {
        return Ok(inner);
    }
    // OpenAI's and OpenRouter's own web search, where they run it.
    let upstream_searches = matches!(args.provider, Provider::Openai | Provider::Responses)
        && args.web_search_mode() == crate::cli::WebSearchChoice::Upstream;
    Ok(Arc::new(crate::provider::server_tools::ServerTools::new(
        inner,
        Arc::clone(runners),
        upstream_searches,
    )))
}

/// What runs server tools — the web search backend of `--search` (or `[search]`) and the web
/// fetcher — built once and shared by every provider the bridge runs server tools for.
///
/// # Errors
/// The search backend's address or key is missing or wrong, or an HTTP client cannot be built.
pub fn server_tool_runners(
    args: &ServeArgs,
) -> Result<Arc<crate::provider::server_tools::Runners>, String> {
    let search = args
        .search
        .map(|kind| {
            crate::provider::search::SearchBackend::new(
                kind,
                args.search_url.as_deref(),
                args.search_api_key.as_deref(),
                args.ca_cert.as_deref(),
            )
        })
        .transpose()?;
    let fetch =
        crate::provider::fetch::WebFetcher::new(args.fetch_allow_private, args.ca_cert.as_deref())?;
    Ok(Arc::new(crate::provider::server_tools::Runners {
        search,
        fetch,
    }))
}

/// The serve arguments one provider of the file stands for: the flags, with what the provider's
/// table sets, and `model` as its `--model`.
pub fn provider_args(
    args: &ServeArgs,
    provider: &crate::config::Provider,
    model: Option<String>,
) -> ServeArgs {
    use secrecy::ExposeSecret;
    let mut out = args.clone();
    out.model = model;
    out.ca_cert = provider.ca_cert.clone().or(out.ca_cert);
    if let Some(s) = provider.timeouts.connect {
        out.connect_timeout = s;
    }
    if let Some(s) = provider.timeouts.first_byte {
        out.first_byte_timeout = s;
    }
    let http = |out: &mut ServeArgs, upstream: &crate::config::HttpUpstream| {
        out.base_url = Some(upstream.base_url.clone());
        out.api_key = upstream
            .api_key
            .as_ref()
            .map(|k| k.expose_secret().to_owned());
        out.upstream_headers = upstream
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.expose_secret().to_owned()))
            .collect();
    };
    match &provider.kind {
        crate::config::ProviderKind::Openai { upstream, options } => {
            out.provider = Provider::Openai;
            http(&mut out, upstream);
            if let Some(v) = options.max_tokens_cap {
                out.max_tokens_cap = v;
            }
            out.max_completion_tokens = options
                .max_completion_tokens
                .unwrap_or(out.max_completion_tokens);
            out.strict_schemas = options.strict_schemas.unwrap_or(out.strict_schemas);
            out.reasoning_effort = options.reasoning_effort.unwrap_or(out.reasoning_effort);
            out.no_reasoning_passback = options
                .no_reasoning_passback
                .unwrap_or(out.no_reasoning_passback);
            out.keep_mid_conversation_system = options
                .keep_mid_conversation_system
                .unwrap_or(out.keep_mid_conversation_system);
            out.continuous_usage_stats = options
                .continuous_usage_stats
                .unwrap_or(out.continuous_usage_stats);
            out.documents = options.documents.or(out.documents);
            out.web_search = options.web_search.or(out.web_search);
            out.tokenizer = options.tokenizer.clone().or(out.tokenizer);
        }
        crate::config::ProviderKind::Responses { upstream, options } => {
            out.provider = Provider::Responses;
            http(&mut out, upstream);
            if let Some(v) = options.max_tokens_cap {
                out.max_tokens_cap = v;
            }
            out.strict_schemas = options.strict_schemas.unwrap_or(out.strict_schemas);
            out.responses_reasoning_effort = options.reasoning_effort.clone();
            out.web_search = options.web_search.or(out.web_search);
            out.tokenizer = options.tokenizer.clone().or(out.tokenizer);
        }
        crate::config::ProviderKind::Anthropic { upstream } => {
            out.provider = Provider::Anthropic;
            http(&mut out, upstream);
        }
        crate::config::ProviderKind::Fabstir(f) => {
            out.provider = Provider::Fabstir;
            out.host_url = f.host_url.clone().or(out.host_url);
            out.host_pubkey = f.host_pubkey.clone().or(out.host_pubkey);
            out.job_id = f.job_id.or(out.job_id);
            out.chain_id = f.chain_id.unwrap_or(out.chain_id);
            out.price_per_token = f.price_per_token.unwrap_or(out.price_per_token);
            out.private_key_file = f.private_key_file.clone().or(out.private_key_file);
            out.rpc_url = f.rpc_url.clone().or(out.rpc_url);
            out.host = f.host.clone().or(out.host);
            out.payment = f.payment.unwrap_or(out.payment);
            out.deposit = f.deposit.clone().or(out.deposit);
            out.max_spend = f.max_spend.clone().or(out.max_spend);
            out.selection = f.selection.unwrap_or(out.selection);
            out.ledger = f.ledger.clone().or(out.ledger);
            out.confirmations = f.confirmations.unwrap_or(out.confirmations);
            out.localhost_override = f.localhost_override.clone().or(out.localhost_override);
            out.job_marketplace = f.job_marketplace.clone().or(out.job_marketplace);
            out.node_registry = f.node_registry.clone().or(out.node_registry);
            out.usdc = f.usdc.clone().or(out.usdc);
            out.tool_format = f.tool_format.unwrap_or(out.tool_format);
            if let Some(v) = f.max_tokens_cap {
                out.max_tokens_cap = v;
            }
        }
    }
    out
}
