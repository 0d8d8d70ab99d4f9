//! `bridge-core` as a WASI 0.2 component: the world in `wit/bridge-core.wit`.
//!
//! This crate only maps the core's facade ([`bridge_core::api`]) to the component types; every
//! rule lives in the core. Options and results cross as JSON strings, so the output is
//! byte-identical to the native build's (the conformance test in `tests/` checks it).
//!
//! Built by `host-native/build.rs` with
//! `cargo build -p bridge-core-component --target wasm32-wasip2 --profile component`.

use std::cell::RefCell;

// Only in wasm: the arena assumes one thread (a native test build has several).
#[cfg(target_family = "wasm")]
#[expect(
    unsafe_code,
    reason = "a global allocator is unsafe to implement; the SAFETY comments say why it holds"
)]
mod arena;

#[cfg(target_family = "wasm")]
#[global_allocator]
static ALLOCATOR: arena::CallArena = arena::CallArena;

/// Natively the component's code runs with the host's allocator: a scope is just the call.
#[cfg(not(target_family = "wasm"))]
mod arena {
    pub(crate) fn scope<R>(call: impl FnOnce() -> R) -> R {
        call()
    }
}

use bridge_core::anthropic::events::ErrorKind;
use bridge_core::api::{self, StreamEnd, StreamOptions};
use bridge_core::error::RequestError;

#[expect(
    unsafe_code,
    reason = "the canonical-ABI glue wit-bindgen generates is unsafe"
)]
mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "bridge-core",
    });

    use super::Component;
    export!(Component with_types_in self);
}

use bindings::exports::fabstir::bridge_core::translate::{
    self as wit, Converted, CoreError, Finished,
};

struct Component;

fn request_error(error: &RequestError) -> CoreError {
    CoreError {
        kind: error.kind().as_str().to_owned(),
        message: error.to_string(),
    }
}

fn options_error(what: &str, error: &serde_json::Error) -> CoreError {
    CoreError {
        kind: ErrorKind::Api.as_str().to_owned(),
        message: format!("invalid {what} JSON: {error}"),
    }
}

impl wit::Guest for Component {
    type Translator = Translator;

    fn prepare(
        dialect: String,
        request: Vec<u8>,
        options_json: String,
    ) -> Result<Converted, CoreError> {
        arena::scope(|| {
            let dialect = api::Dialect::parse(&dialect).map_err(|e| request_error(&e))?;
            api::prepare(dialect, &request, &options_json)
                .map(converted_record)
                .map_err(|e| request_error(&e))
        })
    }

    fn count_tokens(request: Vec<u8>) -> Result<u32, CoreError> {
        arena::scope(|| api::count_tokens(&request).map_err(|e| request_error(&e)))
    }

    fn fabstir_session_init(init_json: String) -> Result<String, CoreError> {
        api::fabstir_session_init(&init_json).map_err(|e| request_error(&e))
    }
}

fn converted_record(converted: api::ConvertedRequest) -> Converted {
    Converted {
        body: converted.body,
        upstream_model: converted.upstream_model,
        client_model: converted.client_model,
        client_stream: converted.client_stream,
        input_tokens_estimate: converted.input_tokens_estimate,
        warnings: converted.warnings,
        tool_names: serde_json::to_string(&converted.tool_names)
            .unwrap_or_else(|_| String::from("[]")),
    }
}

/// One upstream reply being translated. Resource methods take `&self`, hence the cell; a
/// component instance is single-threaded and never re-entered, so the borrow cannot clash.
struct Translator(RefCell<api::Translator>);

impl wit::GuestTranslator for Translator {
    fn create(options_json: String) -> Result<wit::Translator, CoreError> {
        let options: StreamOptions =
            serde_json::from_str(&options_json).map_err(|e| options_error("stream options", &e))?;
        Ok(wit::Translator::new(Self(RefCell::new(
            api::Translator::new(options),
        ))))
    }

    fn feed(&self, chunk: Vec<u8>) -> String {
        #[cfg(feature = "fault-injection")]
        faults::inject(&chunk);
        self.0.borrow_mut().feed_owned(chunk)
    }

    fn fail(&self, kind: String, message: String) -> String {
        self.0
            .borrow_mut()
            .fail(ErrorKind::from_type_str(&kind), &message)
    }

    fn finish(&self, end_json: String) -> Result<Finished, CoreError> {
        let end: StreamEnd =
            serde_json::from_str(&end_json).map_err(|e| options_error("stream end", &e))?;
        let finished = self.0.borrow_mut().finish(&end);
        Ok(Finished {
            status: finished.status,
            body: finished.body,
        })
    }
}

/// Test-only misbehaviour, triggered by markers in an upstream chunk (feature `fault-injection`;
/// never in the embedded core).
#[cfg(feature = "fault-injection")]
mod faults {
    /// Writes a line to stderr and goes on.
    const STDERR: &[u8] = b"claude-bridge-fault:stderr";
    /// Writes 1 MiB to stderr and goes on.
    const FLOOD: &[u8] = b"claude-bridge-fault:flood";
    /// Panics (a trap, after the panic message went to stderr).
    const PANIC: &[u8] = b"claude-bridge-fault:panic";
    /// Never returns.
    const LOOP: &[u8] = b"claude-bridge-fault:loop";

    fn has(chunk: &[u8], marker: &[u8]) -> bool {
        chunk.windows(marker.len()).any(|w| w == marker)
    }

    #[expect(
        clippy::panic,
        reason = "fault injection: a guest that panics, on purpose"
    )]
    pub(super) fn inject(chunk: &[u8]) {
        if has(chunk, STDERR) {
            eprintln!("fault injection: a line on stderr");
        }
        if has(chunk, FLOOD) {
            let line = "x".repeat(1023);
            for _ in 0..1024 {
                eprintln!("{line}");
            }
        }
        if has(chunk, PANIC) {
            panic!("fault injection: the guest panics");
        }
        if has(chunk, LOOP) {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
    }
}
