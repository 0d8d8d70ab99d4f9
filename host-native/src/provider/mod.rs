//! Providers: the upstream APIs the Anthropic front can answer from, behind one trait.
//!
//! A [`Provider`] takes the client's request ([`Call`]) and resolves **once the upstream has
//! answered** (its headers, or a Fabstir host's first reply) to an [`Answer`]: a stream of
//! Anthropic SSE text ([`EventSource`]) or, for a pass-through of a non-streaming request, the
//! upstream's finished JSON. Failing before that is a [`BridgeError`] that says whether another
//! target may be tried ([`BridgeError::retryable`]). No provider writes HTTP responses: the front
//! owns the only relay (`server::relay`): pings, the idle timeout, client disconnect (dropping
//! the source cancels the upstream), folding for non-streaming clients, the mid-stream `error`.
//!
//! - [`openai`]: OpenAI Chat Completions (`{base}/chat/completions`) and the OpenAI Responses
//!   API (`{base}/responses`): one provider, keyed by the core's `Dialect`.
//! - [`anthropic`]: the Anthropic Messages API, passed through (`{base}/v1/messages`).
//! - [`fabstir`]: Fabstir host nodes (encrypted WebSocket sessions, paid on-chain).
//! - [`upstream`]: the pooled HTTP(S) client they share, and upstream errors as Anthropic errors.
//!
//! ```text
//!   front ──Call──► Provider::open ──(upstream answered)──► Answer::Stream(EventSource)
//!                        │                                        │ next() … End
//!                        └──► BridgeError (retryable or not)      └──► relay ──► client
//! ```

pub mod anthropic;
pub mod build;
pub mod fabstir;
pub mod fetch;
pub mod openai;
pub mod pdf_text;
pub mod probe;
pub mod rate_limit;
pub mod search;
pub mod server_tools;
pub mod tokenizer;
pub mod translated;
pub mod upstream;

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::HeaderMap;

use bridge_core::anthropic::events::ErrorKind;

use crate::error::BridgeError;

/// A boxed future (providers are used as trait objects).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One client request, as the front received it.
#[derive(Debug, Clone)]
pub struct Call {
    /// The request body (Anthropic Messages JSON).
    pub body: Bytes,
    /// The client's headers (a pass-through forwards some of them).
    pub headers: HeaderMap,
    /// The query string, if any (`beta=true` from Claude Code).
    pub query: Option<String>,
    /// The client's API lets it leave `max_tokens` out (an OpenAI client): a request without
    /// one is sent without one where the upstream allows that, and with the target's default
    /// where it needs one. An Anthropic client must give it, as the Messages API requires.
    pub max_tokens_optional: bool,
    /// Where a provider that pays per request (Fabstir) puts what this one paid, for the
    /// gateway's ledger (`None` without the gateway).
    pub spend: Option<std::sync::Arc<crate::gateway::Spend>>,
}

/// What the upstream answered.
pub enum Answer {
    /// Anthropic events as SSE text, as they come.
    Stream {
        /// Whether the client asked for a stream (otherwise the front folds it).
        client_stream: bool,
        /// The events.
        source: Box<dyn EventSource>,
    },
    /// A complete JSON answer (a non-streaming pass-through), relayed as it is.
    Complete {
        /// The upstream's status.
        status: u16,
        /// The upstream's body.
        body: Bytes,
    },
}

/// What [`EventSource::next`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// SSE text for the client (never empty).
    Sse(String),
    /// The answer is over: nothing more will come (the last SSE was already returned).
    End,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stream { client_stream, .. } => f
                .debug_struct("Stream")
                .field("client_stream", client_stream)
                .finish_non_exhaustive(),
            Self::Complete { status, body } => f
                .debug_struct("Complete")
                .field("status", status)
                .field("bytes", &body.len())
                .finish(),
        }
    }
}

/// A translated answer in progress. Dropping it cancels the upstream request.
pub trait EventSource: Send {
    /// The next SSE text for the client. Cancel-safe: the relay may drop the future (to send a
    /// ping) and call again; nothing is lost. Upstream bytes that make no output are consumed
    /// inside, so the relay's clocks follow what the client received.
    fn next(&mut self) -> BoxFuture<'_, Next>;

    /// The relay gives up (idle timeout): the SSE text that ends the answer with an `error` of
    /// this kind, well-formed whatever was open.
    fn fail(&mut self, kind: ErrorKind, message: &str) -> String;
}

/// An upstream API.
pub trait Provider: Send + Sync + 'static {
    /// `openai`, `responses`, `anthropic` or `fabstir`.
    fn kind(&self) -> &'static str;

    /// Whether the upstream refuses a request without `max_tokens` (Anthropic, a Fabstir
    /// host): a client that may leave it out then gets the target's default.
    fn requires_max_tokens(&self) -> bool {
        false
    }

    /// Where it sends requests (for `/health` and logs; never a secret).
    fn endpoint(&self) -> String;

    /// The upstream model every request goes to (`--model`), or `None` when the client's
    /// model name is forwarded.
    fn model(&self) -> Option<&str>;

    /// Send the request; resolves once the upstream answered.
    ///
    /// # Errors
    /// The request does not translate (the client's fault), or the upstream refused or failed
    /// before answering (see [`BridgeError::retryable`]).
    fn open(&self, call: Call) -> BoxFuture<'_, Result<Answer, BridgeError>>;

    /// `POST /v1/messages/count_tokens` answered by the upstream itself, or `None` when it
    /// cannot count (the front then estimates).
    fn count_tokens(&self, _call: Call) -> BoxFuture<'_, Option<Result<Answer, BridgeError>>> {
        Box::pin(async { None })
    }

    /// The bridge is stopping (in-flight requests are done): end what the provider keeps open
    /// (a Fabstir session is closed so its host settles the job, and the ledger says so).
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}
