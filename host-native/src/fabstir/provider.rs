//! `POST /v1/messages` on a Fabstir host: the request becomes one ChatML prompt (the core, through
//! the configured engine: wasmtime by default), the prompt goes through the session driver
//! ([`super::driver`]) over the encrypted WebSocket, and the host's decrypted tokens become
//! Anthropic events (the core's token stream: inline tool calls become `tool_use` blocks).
//!
//! The response waits for the host's first answer, so a prompt that cannot run (spending cap,
//! unreachable host, settled job) is an HTTP error with the right status rather than a stream
//! that fails at once. After that, tokens are relayed as they arrive, with `ping` events while the
//! host is silent; a client that disconnects cancels the prompt (`stream_cancel`).

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use tokio::sync::mpsc;
use tracing::{Instrument, debug, info, warn};

use bridge_core::anthropic::events::ErrorKind;
use bridge_core::api::{ChatmlOptions, Finished, StreamEnd, TokenStreamOptions};
use bridge_core::fabstir::protocol::PromptPlain;

use super::driver::{Fabstir, PromptHandle, Reply};
use crate::engine::{Engine, TokenSession};
use crate::error::BridgeError;
use crate::server::body::ResponseBody;

/// Exact bytes of a keep-alive event.
const PING: &[u8] = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";

/// The Fabstir backend of a server.
#[derive(Debug)]
pub struct FabstirBackend {
    /// The session driver.
    pub client: Fabstir,
    /// How requests are rendered (model, `max_tokens` cap, tool-call format).
    pub options: ChatmlOptions,
    /// The model name the host knows.
    pub model: String,
    /// Host silence before a `ping`.
    pub ping_interval: Duration,
}

/// Answer one Messages request through the Fabstir host.
///
/// # Errors
/// The request does not render, or the prompt failed before the host answered anything.
pub async fn create(
    backend: &FabstirBackend,
    engine: &dyn Engine,
    body: &[u8],
) -> Result<Response<ResponseBody>, BridgeError> {
    let rendered = engine.render_chatml(body, &backend.options)?;
    for warning in &rendered.warnings {
        debug!(%warning, "dropped in rendering");
    }
    info!(
        model = %rendered.client_model,
        host_model = %backend.model,
        stream = rendered.client_stream,
        prompt_bytes = rendered.prompt.len(),
        images = rendered.images.len(),
        "prompting the Fabstir host"
    );
    let plain = PromptPlain {
        prompt: rendered.prompt,
        model: backend.model.clone(),
        // The host's own defaults (4000, 0.7) are not the client's: always send both.
        // The host reads it as a u32 and never answers a larger one.
        max_tokens: rendered.max_tokens.unwrap_or(4096).min(u64::from(u32::MAX)),
        temperature: rendered.temperature.unwrap_or(1.0),
        stream: true,
        images: rendered.images,
    };
    let mut reply = engine.token_stream(&TokenStreamOptions {
        stream: rendered.client_stream,
        model: rendered.client_model,
        input_tokens_estimate: rendered.input_tokens_estimate,
        id_seed: crate::ids::seed(),
        tools: rendered.tools,
    })?;
    let mut handle = backend.client.prompt(plain);

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

    if !rendered.client_stream {
        let mut item = Some(first);
        loop {
            if let (_, Some(finished)) = apply(&mut *reply, &mut handle, item) {
                return Ok(json(finished.status, finished.body));
            }
            item = handle.replies.recv().await;
        }
    }

    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let ping_interval = backend.ping_interval;
    let span = tracing::Span::current();
    tokio::spawn(
        async move {
            relay(reply, handle, first, tx, ping_interval).await;
        }
        .instrument(span),
    );
    let response = crate::server::sse_response(rx);
    Ok(response)
}

/// Relay the host's replies to a streaming client until the reply ends or the client leaves
/// (dropping the handle then cancels the prompt).
async fn relay(
    mut reply: Box<dyn TokenSession>,
    mut handle: PromptHandle,
    first: Reply,
    tx: mpsc::Sender<Bytes>,
    ping_interval: Duration,
) {
    let mut next = Some(first);
    loop {
        let item = match next.take() {
            Some(item) => Some(item),
            None => match tokio::time::timeout(ping_interval, handle.replies.recv()).await {
                Ok(item) => item,
                Err(_) => {
                    if tx.send(Bytes::from_static(PING)).await.is_err() {
                        info!("client disconnected; cancelling the Fabstir prompt");
                        return;
                    }
                    continue;
                }
            },
        };
        let (mut out, finished) = apply(&mut *reply, &mut handle, item);
        if let Some(finished) = &finished {
            out.push_str(&finished.body);
        }
        if !out.is_empty() && tx.send(Bytes::from(out)).await.is_err() {
            info!("client disconnected; cancelling the Fabstir prompt");
            return;
        }
        if finished.is_some() {
            return;
        }
    }
}

/// One reply from the driver through the translator: the SSE text to write now, and the final
/// answer once the reply is over (`None` from the driver means it stopped). An engine failure
/// ends the answer with an error the host writes itself (dropping the handle cancels the prompt).
fn apply(
    reply: &mut dyn TokenSession,
    handle: &mut PromptHandle,
    item: Option<Reply>,
) -> (String, Option<Finished>) {
    let engine_failed = |error: &crate::engine::EngineError| {
        warn!(%error, "translation engine failed on a Fabstir reply");
        let (event, finished) = crate::server::messages::engine_failure(error);
        (event, Some(finished))
    };
    let (kind, message) = match item {
        Some(Reply::Text(text)) => {
            return match reply.feed(&text) {
                Ok(out) => (out, None),
                Err(e) => engine_failed(&e),
            };
        }
        Some(Reply::End(end)) => {
            handle.mark_finished();
            debug!(?end, "the Fabstir reply is complete");
            return match reply.finish(&end) {
                Ok(finished) => (String::new(), Some(finished)),
                Err(e) => engine_failed(&e),
            };
        }
        Some(Reply::Failed(error)) => {
            handle.mark_finished();
            warn!(message = %error.message, "the Fabstir prompt failed mid-reply");
            (error.kind, error.message)
        }
        None => (
            ErrorKind::Api,
            String::from("the Fabstir session driver stopped"),
        ),
    };
    match reply
        .fail(kind, &message)
        .and_then(|out| Ok((out, reply.finish(&StreamEnd::default())?)))
    {
        Ok((out, finished)) => (out, Some(finished)),
        Err(e) => engine_failed(&e),
    }
}

fn json(status: u16, body: String) -> Response<ResponseBody> {
    crate::server::json_response(
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
        body,
    )
}
