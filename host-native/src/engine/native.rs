//! The core called directly: no boundary, no copies beyond the core's own.

use bridge_core::api::{self, Translator};
use bridge_core::error::RequestError;

use super::{
    ConvertedRequest, Dialect, Engine, EngineError, ErrorKind, Finished, StreamEnd, StreamOptions,
    StreamSession,
};

/// [`Engine`] over the core compiled into this binary.
#[derive(Debug, Clone, Copy, Default)]
pub struct NativeEngine;

fn request_error(error: &RequestError) -> EngineError {
    EngineError::Request {
        kind: error.kind(),
        message: error.to_string(),
    }
}

impl Engine for NativeEngine {
    fn name(&self) -> &'static str {
        "native"
    }

    fn prepare(
        &self,
        dialect: Dialect,
        request: &[u8],
        options_json: &str,
    ) -> Result<ConvertedRequest, EngineError> {
        super::off_the_runtime(request.len(), || {
            api::prepare(dialect, request, options_json).map_err(|e| request_error(&e))
        })
    }

    fn count_tokens(&self, request: &[u8]) -> Result<u32, EngineError> {
        super::off_the_runtime(request.len(), || {
            api::count_tokens(request).map_err(|e| request_error(&e))
        })
    }

    fn fabstir_session_init(&self, init_json: &str) -> Result<String, EngineError> {
        api::fabstir_session_init(init_json).map_err(|e| request_error(&e))
    }

    fn translator(&self, options: &StreamOptions) -> Result<Box<dyn StreamSession>, EngineError> {
        Ok(Box::new(NativeSession(Translator::new(options.clone()))))
    }
}

#[derive(Debug)]
struct NativeSession(Translator);

impl StreamSession for NativeSession {
    fn feed(&mut self, chunk: &[u8]) -> Result<String, EngineError> {
        Ok(self.0.feed(chunk))
    }

    fn feed_owned(&mut self, chunk: Vec<u8>) -> Result<String, EngineError> {
        Ok(self.0.feed_owned(chunk))
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> Result<String, EngineError> {
        Ok(self.0.fail(kind, message))
    }

    fn finish(&mut self, end: &StreamEnd) -> Result<Finished, EngineError> {
        Ok(self.0.finish(end))
    }
}
