//! The OpenAI providers: Chat Completions (`{base}/chat/completions`: OpenAI, OpenRouter,
//! Ollama, vLLM, llama.cpp, LM Studio, DeepSeek, Groq…) and the Responses API
//! (`{base}/responses`: OpenAI's gpt-5-codex-class models). One provider keyed by the core's
//! [`Dialect`]: the request goes through the core (`Engine::prepare`), the upstream's bytes
//! through the core's stream translator of that dialect, one upstream chunk at a time. An
//! upstream that rejects `tool_choice` / `parallel_tool_calls` (pitfall 11) gets the request once
//! more without them, so the model chooses freely; the degradation is logged. One that refuses a
//! `max_tokens` above the model's output limit and says the limit (DeepSeek's 8192 against the
//! default cap of 32768) gets it once more within that limit, and the limit is remembered for
//! that model for the life of the process (logged once), so later requests fit at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use hyper::body::Incoming;
use tracing::{debug, warn};

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
    /// The options for a request that may leave `max_tokens` out (an OpenAI client's: the
    /// upstream then gets none and uses the model's own limit).
    options_max_tokens_optional: serde_json::Value,
    /// Output limits upstream models stated when they refused a larger `max_tokens`.
    output_limits: Mutex<HashMap<String, u64>>,
    /// Counts the prompt for `message_start` (`--tokenizer`); `None`: the core's estimate.
    tokenizer: Option<super::tokenizer::TokenizerSpec>,
    /// Chat with `documents = "text"`: PDFs become their text before the core sees them.
    pdf_as_text: bool,
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
        let mut options_max_tokens_optional = options.clone();
        options_max_tokens_optional["require_max_tokens"] = serde_json::Value::Bool(false);
        Self {
            pdf_as_text: dialect == Dialect::OpenaiChat && options["documents"] == "text",
            options_json: options.to_string(),
            options_max_tokens_optional,
            engine,
            upstream,
            dialect,
            options,
            output_limits: Mutex::default(),
            tokenizer: None,
        }
    }

    /// The same provider, counting prompts with `tokenizer`.
    #[must_use]
    pub fn with_tokenizer(self, tokenizer: Option<super::tokenizer::TokenizerSpec>) -> Self {
        Self { tokenizer, ..self }
    }

    /// Count the prompt of `body` (the upstream request) with the tokenizer for `model`, on a
    /// blocking thread, while the request is on its way.
    fn count_prompt(
        &self,
        model: &str,
        body: &str,
    ) -> Option<tokio::task::JoinHandle<Option<u32>>> {
        let tokenizer = match self.tokenizer.as_ref()?.tokenizer(model) {
            Ok(tokenizer) => tokenizer?,
            Err(e) => {
                warn!(error = %e, "the tokenizer is not available; message_start keeps the estimate");
                return None;
            }
        };
        let body = bytes::Bytes::copy_from_slice(body.as_bytes());
        Some(tokio::task::spawn_blocking(move || {
            tokenizer.prompt_tokens(&body)
        }))
    }

    /// The output limit `model` stated earlier in this process, if it did.
    fn learned_limit(&self, model: &str) -> Option<u64> {
        let limits = self
            .output_limits
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        limits.get(model).copied()
    }

    /// Remember `model`'s output limit (logged when it is news).
    fn learn_limit(&self, model: &str, limit: u64) {
        let mut limits = self
            .output_limits
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if limits.insert(model.to_owned(), limit) != Some(limit) {
            warn!(
                upstream_model = model,
                limit,
                "the upstream writes at most {limit} output tokens with this model: requests to it now ask for at most that (--max-tokens-cap {limit} says so from the start)"
            );
        }
    }

    /// The options with `max_tokens` capped at `limit` (a lower cap stays).
    fn capped(options: &serde_json::Value, limit: u64) -> serde_json::Value {
        let mut options = options.clone();
        let cap = options["max_tokens_cap"]
            .as_u64()
            .filter(|c| *c > 0)
            .map_or(limit, |c| c.min(limit));
        options["max_tokens_cap"] = serde_json::Value::from(cap);
        options
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
            // Not upstream APIs: no provider is built with them.
            Dialect::FrontOpenaiChat | Dialect::FrontOpenaiResponses => "openai-front",
        }
    }

    fn endpoint(&self) -> String {
        self.upstream.url().to_owned()
    }

    fn model(&self) -> Option<&str> {
        self.target_model()
    }

    fn open(&self, mut call: Call) -> BoxFuture<'_, Result<Answer, BridgeError>> {
        Box::pin(async move {
            if self.pdf_as_text {
                call.body = super::pdf_text::inline_pdf_text(call.body).await;
            }
            // A limit learned for the target model applies before the first attempt; for a
            // forwarded client model it is known only once the request is read.
            // Without one the options are the provider's own, encoded once: nothing is copied.
            let (base, mut options) = if call.max_tokens_optional {
                let base = &self.options_max_tokens_optional;
                (base, Some(base.clone()))
            } else {
                (&self.options, None)
            };
            if let Some(limit) = self.target_model().and_then(|m| self.learned_limit(m)) {
                options = Some(Self::capped(base, limit));
            }
            let mut converted = self.prepare(&call.body, options.as_ref())?;
            let learned_late = options.as_ref().is_none_or(|o| o == base);
            if learned_late && let Some(limit) = self.learned_limit(&converted.upstream_model) {
                let capped = Self::capped(base, limit);
                converted = self.prepare(&call.body, Some(&capped))?;
                options = Some(capped);
            }
            log_warnings(&converted.warnings);
            let counting = self.count_prompt(&converted.upstream_model, &converted.body);
            // Before the first token: at debug (the request's `request done` line names the target).
            debug!(
                model = %converted.client_model,
                upstream_model = %converted.upstream_model,
                stream = converted.client_stream,
                input_tokens_estimate = converted.input_tokens_estimate,
                "forwarding"
            );
            let response = self
                .send(
                    &call.body,
                    converted.body,
                    &converted.upstream_model,
                    options,
                )
                .await?;
            let input_tokens_estimate = match counting {
                Some(counting) => counting
                    .await
                    .ok()
                    .flatten()
                    .unwrap_or(converted.input_tokens_estimate),
                None => converted.input_tokens_estimate,
            };
            let session = self.engine.translator(&StreamOptions {
                stream: true,
                model: converted.client_model,
                input_tokens_estimate,
                id_seed: crate::ids::seed(),
                dialect: self.dialect,
                tool_names: converted.tool_names,
                usage_on_first_chunk: self.options["continuous_usage_stats"] == true,
                ..StreamOptions::default()
            })?;
            Ok(Answer::Stream {
                client_stream: converted.client_stream,
                source: Box::new(TranslatedSource::new(session, response.into_body())),
            })
        })
    }
}

impl OpenAi {
    /// The client's request in this provider's dialect, with `options` (`None`: the provider's
    /// own, encoded once).
    fn prepare(
        &self,
        client_body: &[u8],
        options: Option<&serde_json::Value>,
    ) -> Result<bridge_core::api::ConvertedRequest, BridgeError> {
        let prepared = match options {
            Some(options) => self
                .engine
                .prepare(self.dialect, client_body, &options.to_string()),
            None => self
                .engine
                .prepare(self.dialect, client_body, &self.options_json),
        };
        Ok(prepared?)
    }

    /// Send the converted request (made with `options`, `None`: the provider's own). Once more
    /// within the model's output limit when the upstream refuses `max_tokens` and says its
    /// limit; once more without `tool_choice` when it rejects that. Each at most once.
    async fn send(
        &self,
        client_body: &[u8],
        mut upstream_body: String,
        model: &str,
        options: Option<serde_json::Value>,
    ) -> Result<hyper::Response<Incoming>, BridgeError> {
        // Copied from the provider's only when a retry changes them.
        let mut options = options;
        let (mut dropped_choice, mut limited) = (false, false);
        loop {
            let body = bytes::Bytes::from(upstream_body);
            let result = self
                .upstream
                .post(body.clone(), None, &http::HeaderMap::new())
                .await;
            let Err(BridgeError::UpstreamStatus {
                status: 400 | 422,
                message,
                ..
            }) = &result
            else {
                return result;
            };
            // Looked for only now: the body can be a few hundred kilobytes.
            let has = |key: &[u8]| body.windows(key.len()).any(|w| w == key);
            let has_choice = has(b"\"tool_choice\":") || has(b"\"parallel_tool_calls\":");
            let limit = bridge_core::anthropic::overflow::max_tokens_limit(message);
            let current = options.as_ref().unwrap_or(&self.options);
            let cap = current["max_tokens_cap"].as_u64().filter(|c| *c > 0);
            let retried = if let Some(limit) = limit
                && !limited
                && cap.is_none_or(|c| c > limit)
            {
                limited = true;
                self.learn_limit(model, limit);
                Self::capped(current, limit)
            } else if !dropped_choice && has_choice && rejects_tool_choice(message) {
                dropped_choice = true;
                warn!(%message, "upstream rejected tool_choice; retrying once with the model choosing (auto)");
                let mut dropped = current.clone();
                dropped["drop_tool_choice"] = serde_json::Value::Bool(true);
                dropped
            } else {
                return result;
            };
            upstream_body = self.prepare(client_body, Some(&retried))?.body;
            options = Some(retried);
        }
    }
}

fn rejects_tool_choice(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("tool_choice")
        || lower.contains("tool choice")
        || lower.contains("parallel_tool_calls")
}
