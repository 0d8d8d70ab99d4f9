//! The Fabstir provider: a request becomes one ChatML prompt (the core, through the configured
//! engine: wasmtime by default), the prompt goes through the session driver ([`super::driver`])
//! over the encrypted WebSocket, and the host's decrypted tokens become Anthropic events (the
//! core's token stream: inline tool calls become `tool_use` blocks).
//!
//! [`Provider::open`] resolves at the host's first answer, so a prompt that cannot run (spending
//! cap, unreachable host, settled job, a refused session) is an error with the right status
//! (`BridgeError::Host`) rather than a stream that fails at once. Dropping the source (a client
//! that left) cancels the prompt (`stream_cancel`).

use std::sync::Arc;

use tracing::{debug, info, warn};

use bridge_core::anthropic::events::ErrorKind;
use bridge_core::api::{ChatmlOptions, Dialect, StreamEnd, StreamOptions};
use bridge_core::fabstir::protocol::PromptPlain;

use super::driver::{Fabstir, PromptHandle, Reply};
use crate::engine::{Engine, EngineError, StreamSession};
use crate::error::BridgeError;
use crate::provider::translated::{engine_failure_event, log_warnings};
use crate::provider::{Answer, BoxFuture, Call, EventSource, Next, Provider};

/// Fabstir host nodes, through one session driver.
pub struct FabstirProvider {
    /// The session driver.
    pub client: Fabstir,
    /// How requests are rendered (model, `max_tokens` cap, tool-call format).
    pub options: ChatmlOptions,
    /// The model name the host knows.
    pub model: String,
    /// The translation engine.
    pub engine: Arc<dyn Engine>,
    /// Where prompts go, in words (`/health`): the host URL or "chain 84532".
    pub endpoint: String,
}

impl std::fmt::Debug for FabstirProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FabstirProvider")
            .field("model", &self.model)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Provider for FabstirProvider {
    fn requires_max_tokens(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "fabstir"
    }

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    fn model(&self) -> Option<&str> {
        Some(&self.model)
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.client.shutdown())
    }

    fn open(&self, call: Call) -> BoxFuture<'_, Result<Answer, BridgeError>> {
        Box::pin(async move {
            // The host's models read text only: a PDF goes as its text.
            let body = crate::provider::pdf_text::inline_pdf_text(call.body).await;
            let rendered = self.engine.render_chatml(&body, &self.options)?;
            log_warnings(&rendered.warnings);
            info!(
                model = %rendered.client_model,
                host_model = %self.model,
                stream = rendered.client_stream,
                prompt_bytes = rendered.prompt.len(),
                images = rendered.images.len(),
                "prompting the Fabstir host"
            );
            let plain = PromptPlain {
                prompt: rendered.prompt,
                model: self.model.clone(),
                // The host's own defaults (4000, 0.7) are not the client's: always send both.
                // The host reads max_tokens as a u32 and never answers a larger one.
                max_tokens: rendered.max_tokens.unwrap_or(4096).min(u64::from(u32::MAX)),
                temperature: rendered.temperature.unwrap_or(1.0),
                stream: true,
                images: rendered.images,
            };
            let reply = self.engine.translator(&StreamOptions {
                stream: true,
                model: rendered.client_model,
                input_tokens_estimate: rendered.input_tokens_estimate,
                id_seed: crate::ids::seed(),
                dialect: Dialect::Chatml,
                tools: rendered.tools,
                ..StreamOptions::default()
            })?;
            let mut handle = self.client.prompt(plain);
            let first = match handle.replies.recv().await {
                Some(Reply::Failed(error)) => {
                    handle.mark_finished();
                    warn!(message = %error.message, "the Fabstir prompt failed before any answer");
                    return Err(BridgeError::Host {
                        kind: error.kind,
                        message: error.message,
                    });
                }
                Some(first) => first,
                None => {
                    return Err(BridgeError::Internal(String::from(
                        "the Fabstir session driver stopped",
                    )));
                }
            };
            Ok(Answer::Stream {
                client_stream: rendered.client_stream,
                source: Box::new(FabstirSource {
                    reply,
                    handle,
                    pending: Some(first),
                    done: false,
                    spend: call.spend.clone(),
                }),
            })
        })
    }
}

/// One prompt's replies through the core's translator (dialect `chatml`).
struct FabstirSource {
    reply: Box<dyn StreamSession>,
    handle: PromptHandle,
    /// The first reply (it resolved `open`).
    pending: Option<Reply>,
    done: bool,
    /// Where what the prompt paid goes (the gateway's record).
    spend: Option<std::sync::Arc<crate::gateway::Spend>>,
}

impl FabstirSource {
    /// One reply from the driver through the translator (`None` from the driver means it
    /// stopped): the SSE text to write now, empty when the reply made none.
    fn apply(&mut self, item: Option<Reply>) -> String {
        let (kind, message) = match item {
            Some(Reply::Text(text)) => {
                return self
                    .reply
                    .feed(text.as_bytes())
                    .unwrap_or_else(|e| self.engine_failed(&e));
            }
            Some(Reply::End(end, paid)) => {
                self.handle.mark_finished();
                self.done = true;
                if let (Some(spend), Some(paid)) = (&self.spend, paid) {
                    spend.add(paid);
                }
                debug!(?end, "the Fabstir reply is complete");
                return match self.reply.finish(&end) {
                    Ok(finished) => finished.body,
                    Err(e) => self.engine_failed(&e),
                };
            }
            Some(Reply::Failed(error)) => {
                self.handle.mark_finished();
                warn!(message = %error.message, "the Fabstir prompt failed mid-reply");
                (error.kind, error.message)
            }
            None => (
                ErrorKind::Api,
                String::from("the Fabstir session driver stopped"),
            ),
        };
        self.fail(kind, &message)
    }

    fn engine_failed(&mut self, error: &EngineError) -> String {
        self.done = true;
        warn!(%error, "translation engine failed on a Fabstir reply");
        engine_failure_event(error)
    }
}

impl EventSource for FabstirSource {
    fn next(&mut self) -> BoxFuture<'_, Next> {
        Box::pin(async move {
            loop {
                if self.done {
                    return Next::End;
                }
                let item = match self.pending.take() {
                    Some(item) => Some(item),
                    None => self.handle.replies.recv().await,
                };
                let out = self.apply(item);
                if !out.is_empty() {
                    return Next::Sse(out);
                }
            }
        })
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> String {
        self.done = true;
        let ended = self
            .reply
            .fail(kind, message)
            .and_then(|out| Ok(out + &self.reply.finish(&StreamEnd::default())?.body));
        ended.unwrap_or_else(|e| self.engine_failed(&e))
    }
}
