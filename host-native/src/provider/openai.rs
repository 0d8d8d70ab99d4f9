//! The OpenAI providers: Chat Completions (`{base}/chat/completions`: OpenAI, OpenRouter,
//! Ollama, vLLM, llama.cpp, LM Studio, DeepSeek, Groq…) and the Responses API
//! (`{base}/responses`: OpenAI's gpt-5-codex-class models). One provider keyed by the core's
//! [`Dialect`]: the request goes through the core (`Engine::prepare`), the upstream's bytes
//! through the core's stream translator of that dialect, one upstream chunk at a time. An
//! upstream that rejects `tool_choice` / `parallel_tool_calls` (pitfall 11) gets the request once
//! more without them, so the model chooses freely; the degradation is logged.

use std::sync::Arc;

use hyper::body::Incoming;
use tracing::{info, warn};

use bridge_core::api::{Dialect, StreamOptions};

use super::translated::{TranslatedSource, log_warnings};
use super::upstream::Upstream;
use super::{Answer, BoxFuture, Call, Provider};
use crate::engine::Engine;
use crate::error::BridgeError;

/// An OpenAI-compatible server speaking `dialect`.
pub struct OpenAi {
    /// The translation engine.
    pub engine: Arc<dyn Engine>,
    /// The HTTP client and URL.
    pub upstream: Upstream,
    /// Chat Completions or Responses.
    pub dialect: Dialect,
    /// How requests are converted: the dialect's options object (`ConvertOptions` or
    /// `ResponsesOptions`).
    options: serde_json::Value,
    /// The same, encoded once (every request passes it to the engine).
    options_json: String,
}

impl OpenAi {
    /// A provider of `dialect` at `upstream`, converting with `options` (the dialect's options).
    #[must_use]
    pub fn new(
        engine: Arc<dyn Engine>,
        upstream: Upstream,
        dialect: Dialect,
        options: serde_json::Value,
    ) -> Self {
        Self {
            options_json: options.to_string(),
            engine,
            upstream,
            dialect,
            options,
        }
    }

    /// The upstream model of every request, if the options name one.
    fn target_model(&self) -> Option<&str> {
        self.options
            .get("model")
            .and_then(serde_json::Value::as_str)
    }
}

impl std::fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAi")
            .field("dialect", &self.dialect)
            .field("engine", &self.engine.name())
            .field("upstream", &self.upstream.url())
            .finish_non_exhaustive()
    }
}

impl Provider for OpenAi {
    fn kind(&self) -> &'static str {
        match self.dialect {
            Dialect::OpenaiChat => "openai",
            Dialect::OpenaiResponses => "responses",
            Dialect::Chatml => "chatml",
            Dialect::Anthropic => "anthropic",
        }
    }

    fn endpoint(&self) -> String {
        self.upstream.url().to_owned()
    }

    fn model(&self) -> Option<&str> {
        self.target_model()
    }

    fn open(&self, call: Call) -> BoxFuture<'_, Result<Answer, BridgeError>> {
        Box::pin(async move {
            let converted = self
                .engine
                .prepare(self.dialect, &call.body, &self.options_json)?;
            log_warnings(&converted.warnings);
            info!(
                model = %converted.client_model,
                upstream_model = %converted.upstream_model,
                stream = converted.client_stream,
                input_tokens_estimate = converted.input_tokens_estimate,
                "forwarding"
            );
            let response = self.send(&call.body, converted.body).await?;
            let session = self.engine.translator(&StreamOptions {
                stream: true,
                model: converted.client_model,
                input_tokens_estimate: converted.input_tokens_estimate,
                id_seed: crate::ids::seed(),
                dialect: self.dialect,
                tools: Vec::new(),
            })?;
            Ok(Answer::Stream {
                client_stream: converted.client_stream,
                source: Box::new(TranslatedSource::new(session, response.into_body())),
            })
        })
    }
}

impl OpenAi {
    /// Send the converted request; once more without `tool_choice` when the upstream rejects it.
    async fn send(
        &self,
        client_body: &[u8],
        upstream_body: String,
    ) -> Result<hyper::Response<Incoming>, BridgeError> {
        let has_choice = upstream_body.contains("\"tool_choice\":")
            || upstream_body.contains("\"parallel_tool_calls\":");
        match self.upstream.post_json(upstream_body).await {
            Err(BridgeError::UpstreamStatus {
                status: 400 | 422,
                message,
                ..
            }) if has_choice && rejects_tool_choice(&message) => {
                warn!(%message, "upstream rejected tool_choice; retrying once with the model choosing (auto)");
                let mut options = self.options.clone();
                options["drop_tool_choice"] = serde_json::Value::Bool(true);
                let converted =
                    self.engine
                        .prepare(self.dialect, client_body, &options.to_string())?;
                self.upstream.post_json(converted.body).await
            }
            other => other,
        }
    }
}

fn rejects_tool_choice(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("tool_choice")
        || lower.contains("tool choice")
        || lower.contains("parallel_tool_calls")
}
