//! The core called directly: no boundary, no copies beyond the core's own.

use bridge_core::api::{self, ChatStream, TokenStream};
use bridge_core::error::RequestError;

use super::{
    ChatmlOptions, ChatmlPrompt, ConvertOptions, ConvertedRequest, Dialect, Engine, EngineError,
    ErrorKind, Finished, StreamEnd, StreamOptions, StreamSession, TokenSession, TokenStreamOptions,
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

    fn convert_request(
        &self,
        request: &[u8],
        options: &ConvertOptions,
    ) -> Result<ConvertedRequest, EngineError> {
        api::convert_request(request, options).map_err(|e| request_error(&e))
    }

    fn prepare(
        &self,
        dialect: Dialect,
        request: &[u8],
        options_json: &str,
    ) -> Result<ConvertedRequest, EngineError> {
        api::prepare(dialect, request, options_json).map_err(|e| request_error(&e))
    }

    fn count_tokens(&self, request: &[u8]) -> Result<u32, EngineError> {
        api::count_tokens(request).map_err(|e| request_error(&e))
    }

    fn chat_stream(&self, options: &StreamOptions) -> Result<Box<dyn StreamSession>, EngineError> {
        Ok(Box::new(NativeSession(ChatStream::new(options.clone()))))
    }

    fn render_chatml(
        &self,
        request: &[u8],
        options: &ChatmlOptions,
    ) -> Result<ChatmlPrompt, EngineError> {
        api::render_chatml(request, options).map_err(|e| request_error(&e))
    }

    fn fabstir_session_init(&self, init_json: &str) -> Result<String, EngineError> {
        api::fabstir_session_init(init_json).map_err(|e| request_error(&e))
    }

    fn token_stream(
        &self,
        options: &TokenStreamOptions,
    ) -> Result<Box<dyn TokenSession>, EngineError> {
        Ok(Box::new(NativeTokens(TokenStream::new(options.clone()))))
    }
}

#[derive(Debug)]
struct NativeTokens(TokenStream);

impl TokenSession for NativeTokens {
    fn feed(&mut self, text: &str) -> Result<String, EngineError> {
        Ok(self.0.feed(text))
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> Result<String, EngineError> {
        Ok(self.0.fail(kind, message))
    }

    fn finish(&mut self, end: &StreamEnd) -> Result<Finished, EngineError> {
        Ok(self.0.finish(end))
    }
}

#[derive(Debug)]
struct NativeSession(ChatStream);

impl StreamSession for NativeSession {
    fn feed(&mut self, chunk: &[u8]) -> Result<String, EngineError> {
        Ok(self.0.feed(chunk))
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> Result<String, EngineError> {
        Ok(self.0.fail(kind, message))
    }

    fn finish(&mut self) -> Result<Finished, EngineError> {
        Ok(self.0.finish())
    }
}
