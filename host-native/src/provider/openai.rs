//! The OpenAI providers: Chat Completions (`{base}/chat/completions`: OpenAI, OpenRouter,
//! Ollama, vLLM, llama.cpp, LM Studio, DeepSeek, Groq…) and the Responses API
//! (`{base}/responses`: OpenAI's gpt-5-codex-class models). One provider keyed by the core's
//! [`Dialect`]: the request goes through the core (`Engine::prepare`), the upstream's bytes
//! through the core's stream translator of that dialect, one upstream chunk at a time. An
//! upstream that rejects `tool_choice` / `parallel_tool_calls` (pitfall 11) gets the request once
//! more without them, so the model chooses freely; the degradation is logged.

use std::sync::Arc;

use hyper::body::Incoming;
use tracing::{debug, info, warn};

use bridge_core::anthropic::events::ErrorKind;
use bridge_core::api::{Dialect, StreamOptions};
use http_body_util::BodyExt;

use super::upstream::Upstream;
use super::{Answer, BoxFuture, Call, EventSource, Next, Provider};
use crate::engine::{Engine, EngineError, StreamSession};
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
            let session = self.engine.chat_stream(&StreamOptions {
                stream: true,
                model: converted.client_model,
                input_tokens_estimate: converted.input_tokens_estimate,
                id_seed: crate::ids::seed(),
                dialect: self.dialect,
            })?;
            Ok(Answer::Stream {
                client_stream: converted.client_stream,
                source: Box::new(ChatSource {
                    session,
                    body: response.into_body(),
                    started: false,
                    done: false,
                }),
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

/// What a conversion dropped (debug), and the histories it repaired (warn).
pub fn log_warnings(warnings: &[String]) {
    for warning in warnings {
        match warning.strip_prefix(bridge_core::translate::chat_request::REPAIRED) {
            Some(repair) => warn!(%repair, "repaired the conversation history"),
            None => debug!(%warning, "dropped in translation"),
        }
    }
}

fn rejects_tool_choice(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("tool_choice")
        || lower.contains("tool choice")
        || lower.contains("parallel_tool_calls")
}

/// The upstream's body through the Chat stream translator.
struct ChatSource {
    session: Box<dyn StreamSession>,
    body: Incoming,
    /// `message_start` was asked for (it goes out as soon as the upstream answered).
    started: bool,
    done: bool,
}

impl ChatSource {
    /// The engine failed: the stream ends with an error event the host writes itself.
    fn engine_failed(&mut self, error: &EngineError) -> Next {
        self.done = true;
        warn!(%error, "translation engine failed mid-stream");
        Next::Sse(engine_failure_event(error))
    }

    fn output(&mut self, result: Result<String, EngineError>) -> Option<Next> {
        match result {
            Ok(out) if out.is_empty() => None,
            Ok(out) => Some(Next::Sse(out)),
            Err(e) => Some(self.engine_failed(&e)),
        }
    }
}

impl EventSource for ChatSource {
    fn next(&mut self) -> BoxFuture<'_, Next> {
        Box::pin(async move {
            if self.done {
                return Next::End;
            }
            if !self.started {
                self.started = true;
                let first = self.session.feed(b"");
                if let Some(next) = self.output(first) {
                    return next;
                }
            }
            loop {
                match self.body.frame().await {
                    Some(Ok(frame)) => {
                        let Ok(data) = frame.into_data() else {
                            continue;
                        };
                        let fed = self.session.feed(&data);
                        if let Some(next) = self.output(fed) {
                            return next;
                        }
                    }
                    Some(Err(e)) => {
                        warn!(error = %e, "upstream stream failed");
                        let message = format!("the upstream connection failed mid-stream: {e}");
                        return Next::Sse(self.fail(ErrorKind::Api, &message));
                    }
                    None => {
                        self.done = true;
                        let last = self.session.finish().map(|f| f.body);
                        return self.output(last).unwrap_or(Next::End);
                    }
                }
            }
        })
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> String {
        self.done = true;
        let ended = self
            .session
            .fail(kind, message)
            .and_then(|out| Ok(out + &self.session.finish()?.body));
        ended.unwrap_or_else(|e| {
            warn!(error = %e, "translation engine failed while ending the stream");
            engine_failure_event(&e)
        })
    }
}

/// The engine failed mid-response: the `error` event the host writes itself (the engine's
/// session is unusable).
#[must_use]
pub fn engine_failure_event(error: &EngineError) -> String {
    let api = bridge_core::anthropic::events::ApiError::new(ErrorKind::Api, error.to_string());
    format!("event: error\ndata: {}\n\n", api.envelope())
}
