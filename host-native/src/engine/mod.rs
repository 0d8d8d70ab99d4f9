//! The translation engine: the pure core, run natively or as a WASI component in wasmtime.
//!
//! Everything the host asks of the core goes through [`Engine`], so the two builds are
//! interchangeable at run time (`--engine native|wasm`, `--core plugin.wasm`) and can be
//! compared byte for byte (`tests/tests/conformance.rs`).
//!
//! - [`native()`]: calls [`bridge_core::api`] directly.
//! - [`wasm()`]: the same core built for `wasm32-wasip2` (embedded at build time by `build.rs`),
//!   or a user plug-in implementing `wit/bridge-core.wit`, run in wasmtime (the embedded core's
//!   instances shared by streams and reused by calls, a plug-in's one per operation or stream).

mod epoch_clock;
mod guest_io;
mod native;
mod wasm;
mod wasm_pool;

use std::path::Path;
use std::sync::Arc;

pub use bridge_core::anthropic::events::ErrorKind;
pub use bridge_core::api::{
    ChatmlOptions, ChatmlPrompt, ConvertOptions, ConvertedRequest, Dialect, Finished, StreamEnd,
    StreamOptions,
};

pub use self::native::NativeEngine;
pub use self::wasm::WasmEngine;

/// One build of the translation core: the facade of [`bridge_core::api`], keyed by [`Dialect`]
/// (one `prepare`, one translator), so a new upstream API needs no change here.
pub trait Engine: Send + Sync + 'static {
    /// `"wasm"` or `"native"`.
    fn name(&self) -> &'static str;

    /// Anthropic Messages request → the upstream request of `dialect`; `options_json` is that
    /// dialect's options object.
    ///
    /// # Errors
    /// [`EngineError::Request`] when the request cannot be translated (the client's fault unless
    /// the kind says otherwise), [`EngineError::Trap`] when the engine itself failed.
    fn prepare(
        &self,
        dialect: Dialect,
        request: &[u8],
        options_json: &str,
    ) -> Result<ConvertedRequest, EngineError>;

    /// Estimated input tokens of an Anthropic request.
    ///
    /// # Errors
    /// As [`Engine::prepare`].
    fn count_tokens(&self, request: &[u8]) -> Result<u32, EngineError>;

    /// A Fabstir session init (`SessionInitPlain` as JSON text) → the exact plaintext a host accepts.
    ///
    /// # Errors
    /// As [`Engine::prepare`] (a field of the wrong type is `api_error`: the bridge built it).
    fn fabstir_session_init(&self, init_json: &str) -> Result<String, EngineError>;

    /// A translator for one upstream reply, of the dialect `options.dialect`.
    ///
    /// # Errors
    /// [`EngineError::Busy`] when the engine could not start one (the instance pool is
    /// exhausted); [`EngineError::Request`] when a plug-in rejects the options.
    fn translator(&self, options: &StreamOptions) -> Result<Box<dyn StreamSession>, EngineError>;

    /// [`Engine::prepare`] for OpenAI Chat Completions, with typed options.
    ///
    /// # Errors
    /// As [`Engine::prepare`].
    fn convert_request(
        &self,
        request: &[u8],
        options: &ConvertOptions,
    ) -> Result<ConvertedRequest, EngineError> {
        self.prepare(Dialect::OpenaiChat, request, &encode_options(options)?)
    }

    /// [`Engine::prepare`] for a raw-text host: the ChatML prompt and what goes with it.
    ///
    /// # Errors
    /// As [`Engine::prepare`]; [`EngineError::Trap`] when the prepared body is not a prompt.
    fn render_chatml(
        &self,
        request: &[u8],
        options: &ChatmlOptions,
    ) -> Result<ChatmlPrompt, EngineError> {
        let prepared = self.prepare(Dialect::Chatml, request, &encode_options(options)?)?;
        serde_json::from_str(&prepared.body).map_err(|e| {
            EngineError::Trap(format!(
                "the core prepared a ChatML prompt that does not parse: {e}"
            ))
        })
    }
}

/// Inputs at least this large are translated off the async runtime's turn ([`off_the_runtime`]).
pub const LARGE_INPUT_BYTES: usize = 1 << 20;

/// Run `work` — a translation of `input_len` bytes — so that a large one does not hold up the
/// runtime's other tasks: on the multi-threaded runtime the worker hands its queued tasks to
/// the others while `work` runs (`block_in_place`), so `/health`, `/metrics` and small
/// requests keep being answered while a few 30 MB bodies are converted. Small inputs, and
/// callers outside such a runtime, run `work` as it is.
pub fn off_the_runtime<T>(input_len: usize, work: impl FnOnce() -> T) -> T {
    let multi_threaded = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if input_len >= LARGE_INPUT_BYTES && multi_threaded {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

/// Options as the JSON the core's facade takes.
///
/// # Errors
/// [`EngineError::Trap`] when they do not encode (they always do: plain data).
pub fn encode_options<T: serde::Serialize>(options: &T) -> Result<String, EngineError> {
    serde_json::to_string(options)
        .map_err(|e| EngineError::Trap(format!("cannot encode the core options: {e}")))
}

/// One upstream reply being translated (see [`bridge_core::api::Translator`]).
pub trait StreamSession: Send {
    /// Feed upstream bytes (any chunking); returns the SSE bytes to write now.
    ///
    /// # Errors
    /// [`EngineError::Trap`] when the engine failed; the session is unusable afterwards.
    fn feed(&mut self, chunk: &[u8]) -> Result<String, EngineError>;

    /// [`StreamSession::feed`] with bytes given away, so a front translator can take a long
    /// event's data from them rather than copy it. The engines that cannot (wasm: the bytes
    /// are copied into the guest anyway) read them as `feed` does.
    ///
    /// # Errors
    /// As [`StreamSession::feed`].
    fn feed_owned(&mut self, chunk: Vec<u8>) -> Result<String, EngineError> {
        self.feed(&chunk)
    }

    /// The upstream failed: end the response with an error of this kind.
    ///
    /// # Errors
    /// As [`StreamSession::feed`].
    fn fail(&mut self, kind: ErrorKind, message: &str) -> Result<String, EngineError>;

    /// The reply ended: the last SSE bytes, or the folded message. `end` is what the upstream
    /// reported outside its stream (a raw-text host's `stream_end`); SSE dialects pass
    /// [`StreamEnd::default()`].
    ///
    /// # Errors
    /// As [`StreamSession::feed`].
    fn finish(&mut self, end: &StreamEnd) -> Result<Finished, EngineError>;
}

/// Why an engine operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The core rejected the input; `kind` is the Anthropic error type it becomes.
    #[error("{message}")]
    Request {
        /// The Anthropic error type (and so the HTTP status).
        kind: ErrorKind,
        /// Human-readable reason, passed to the client.
        message: String,
    },
    /// The engine itself failed: a wasm trap, a guest panic, an exhausted instance pool, a
    /// plug-in that does not implement the world. Always the bridge's fault (`api_error`).
    #[error("translation engine failed: {0}")]
    Trap(String),
    /// Every engine instance is in use: overload, not a failure (`overloaded_error`, 529, with
    /// `retry-after`).
    #[error("the bridge is overloaded: {0}")]
    Busy(String),
}

impl EngineError {
    /// The Anthropic error type this becomes.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Request { kind, .. } => *kind,
            Self::Trap(_) => ErrorKind::Api,
            Self::Busy(_) => ErrorKind::Overloaded,
        }
    }
}

/// The core compiled into this binary, called directly.
#[must_use]
pub fn native() -> Arc<dyn Engine> {
    Arc::new(NativeEngine)
}

/// The core as a WASI component in wasmtime: the one embedded at build time (`plugin: None`,
/// shared by every caller in the process) or a plug-in implementing `wit/bridge-core.wit`.
///
/// The compiled code is cached on disk (see [`WasmEngine`]), so only the first start compiles.
///
/// # Errors
/// [`EngineError::Trap`] when wasmtime cannot be set up or the component cannot be loaded,
/// compiled or linked (a plug-in that is not a component of this world).
pub fn wasm(plugin: Option<&Path>) -> Result<Arc<dyn Engine>, EngineError> {
    match plugin {
        None => Ok(WasmEngine::embedded()?),
        Some(path) => Ok(Arc::new(WasmEngine::plugin(path)?)),
    }
}
