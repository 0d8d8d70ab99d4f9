//! The OpenAI fronts: `POST /v1/chat/completions` (the OpenAI SDKs, editors and scripts built
//! on Chat Completions) and `POST /v1/responses` (the Codex CLI, which speaks only Responses).
//!
//! The engine's front dialects (`front_openai_chat`, `front_openai_responses`: the core's
//! [`bridge_core::front`], native or in wasmtime) convert the client's request into an
//! Anthropic request; from there
//! it takes the same way as an Anthropic client's — the router, fallbacks, any provider — and
//! the answer comes back through the core's front in the client's shape
//! ([`super::shape::ClientShape::OpenAi`]). The upstream is always asked for a stream, so a
//! non-streaming client's object is folded from the same events a streaming client gets.
//! A request the front cannot take is a 400 in OpenAI's envelope naming the field (`param`).

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde::Deserialize;
use serde_json::value::RawValue;
use tracing::info;

use bridge_core::api::{Front, FrontOptions, StreamOptions};

use super::body::ResponseBody;
use super::error_response::{Envelope, error_response_in};
use super::observe::Sender;
use super::responses_store::Pending;
use super::shape::{ClientShape, OpenAiClient};
use super::{AppState, json_response, messages};
use crate::engine::EngineError;
use crate::error::BridgeError;
use crate::gateway::Admission;
use crate::provider::Call;
use std::sync::Arc;

/// `POST /v1/chat/completions`.
pub(super) async fn chat_completions(
    state: &AppState,
    call: Call,
    sender: &Arc<Sender>,
    admission: Option<Arc<Admission>>,
) -> Response<ResponseBody> {
    serve(state, call, sender, Front::Chat, admission).await
}

/// `POST /v1/responses`.
pub(super) async fn responses(
    state: &AppState,
    call: Call,
    sender: &Arc<Sender>,
    admission: Option<Arc<Admission>>,
) -> Response<ResponseBody> {
    serve(state, call, sender, Front::Responses, admission).await
}

/// What the engine's `prepare` gives for a front dialect (`bridge_core::front::facade`): the
/// Anthropic request (kept as its bytes) and the answer's options, or the refusal.
#[derive(Deserialize)]
struct Prepared<'a> {
    #[serde(borrow)]
    request: Option<&'a RawValue>,
    #[serde(default)]
    answer: FrontOptions,
    refusal: Option<Refusal>,
}

/// A request the front refused: the status and OpenAI's `error` object.
#[derive(Deserialize)]
struct Refusal {
    status: u16,
    error: serde_json::Value,
}

impl Refusal {
    /// What its error says.
    fn message(&self) -> String {
        self.error["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

async fn serve(
    state: &AppState,
    mut call: Call,
    sender: &Arc<Sender>,
    front: Front,
    admission: Option<Arc<Admission>>,
) -> Response<ResponseBody> {
    let request_id = sender.request_id.as_str();
    // A request the front refuses before routing still ends the gateway's record, and shows
    // on the dashboard.
    let early = |response: Response<ResponseBody>, message: &str| {
        let status = response.status().as_u16();
        if let Some(admission) = &admission {
            admission.finish_refused(status);
        }
        crate::dashboard::refused(sender, status, message);
        response
    };
    let engine_failed = |e: EngineError| {
        let error = BridgeError::Engine(e);
        let message = error.to_string();
        early(
            error_response_in(Envelope::OpenAi, error, request_id),
            &message,
        )
    };
    // Responses: what the request refers to is put in place, and its answer kept.
    let pending = match front {
        Front::Responses => match Pending::open(std::mem::take(&mut call.body), &state.responses) {
            Ok(pending) => Some(pending),
            Err(error) => {
                let refusal = Refusal {
                    status: error.status(),
                    error: error.error_object(),
                };
                let message = refusal.message();
                return early(refused(refusal), &message);
            }
        },
        Front::Chat => None,
    };
    let body = pending.as_ref().map_or(&call.body, |p| &p.body);
    let session = openai_session(&call.headers, body);
    let converted = match state.engine.prepare(front.dialect(), body, "{}") {
        Ok(converted) => converted,
        Err(EngineError::Request { kind, message }) => {
            // The embedded core always has the fronts; a `--core` plug-in may not.
            let e = EngineError::Request {
                kind,
                message: format!(
                    "this bridge's translation core cannot serve OpenAI clients: {message}"
                ),
            };
            return engine_failed(e);
        }
        Err(e) => return engine_failed(e),
    };
    let prepared = match serde_json::from_str::<Prepared<'_>>(&converted.body) {
        Ok(prepared) => prepared,
        Err(e) => {
            let e = EngineError::Trap(format!("the front's prepared request is not readable: {e}"));
            return engine_failed(e);
        }
    };
    let request = match (prepared.request, prepared.refusal) {
        (_, Some(refusal)) => {
            let message = refusal.message();
            return early(refused(refusal), &message);
        }
        (Some(request), None) => Bytes::copy_from_slice(request.get().as_bytes()),
        (None, None) => {
            let e = EngineError::Trap(String::from(
                "the front prepared neither a request nor a refusal",
            ));
            return engine_failed(e);
        }
    };
    log_warnings(&converted.warnings);
    let mut answer = prepared.answer;
    let keep = pending.and_then(|pending| {
        pending.echo(&mut answer.echo);
        pending.keep
    });
    if keep.is_some() {
        // A kept reasoning item must come back with its signature, asked for or not.
        answer.include_encrypted_reasoning = true;
    }
    let options = StreamOptions {
        stream: converted.client_stream,
        model: converted.client_model,
        input_tokens_estimate: converted.input_tokens_estimate,
        front: FrontOptions {
            // The request id's random part: unique, and the same id the log line has.
            id: request_id.trim_start_matches("req_").to_owned(),
            created: crate::ids::unix_seconds(),
            ..answer
        },
        ..StreamOptions::default()
    };
    let client =
        OpenAiClient::new(std::sync::Arc::clone(&state.engine), front, options).keeping(keep);
    // The client's headers are OpenAI's: its `Authorization` is for this bridge, not a
    // credential for an upstream (the Anthropic provider adds the version it needs).
    let call = Call {
        body: request,
        headers: http::HeaderMap::new(),
        query: None,
        max_tokens_optional: true,
        spend: None,
    };
    messages::dispatch(
        state,
        call,
        sender,
        &ClientShape::OpenAi(Box::new(client)),
        admission,
        session,
    )
    .await
}

/// The conversation an OpenAI request belongs to, for pool affinity: the Codex CLI's
/// `session_id` header, else the body's `prompt_cache_key` (what OpenAI keys its own prompt
/// cache on), else its `user`.
fn openai_session(headers: &http::HeaderMap, body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Keys {
        prompt_cache_key: Option<String>,
        user: Option<String>,
    }
    if let Some(id) = headers
        .get("session_id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
    {
        return Some(id.to_owned());
    }
    let keys = serde_json::from_slice::<Keys>(body).ok()?;
    keys.prompt_cache_key
        .filter(|k| !k.is_empty())
        .or(keys.user.filter(|u| !u.is_empty()))
}

/// `GET` / `DELETE /v1/responses/{id}`: a kept response, or OpenAI's 404.
pub(super) fn kept_response(
    state: &AppState,
    method: &http::Method,
    id: &str,
) -> Response<ResponseBody> {
    let found = if method == http::Method::DELETE {
        state.responses.delete(id).then(|| {
            serde_json::json!({"id": id, "object": "response", "deleted": true}).to_string()
        })
    } else {
        state.responses.get(id).map(|response| response.to_string())
    };
    match found {
        Some(body) => json_response(StatusCode::OK, body),
        None => {
            let error = serde_json::json!({"error": {
                "message": format!(
                    "Response with id '{id}' not found. This bridge keeps responses made with store \
                     not false in its memory for a limited time and size (--responses-store-ttl, \
                     --responses-store-bytes)."
                ),
                "type": "invalid_request_error",
                "param": null,
                "code": null,
            }});
            json_response(StatusCode::NOT_FOUND, error.to_string())
        }
    }
}

fn log_warnings(warnings: &[String]) {
    for warning in warnings {
        info!(%warning, "part of the OpenAI request has no Anthropic equivalent");
    }
}

/// A request the front cannot take: its status (400), OpenAI's envelope naming the field, not
/// worth retrying.
fn refused(refusal: Refusal) -> Response<ResponseBody> {
    tracing::warn!(error = %refusal.error["message"], "OpenAI request refused");
    let body = serde_json::json!({ "error": refusal.error }).to_string();
    let mut response = json_response(
        StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::BAD_REQUEST),
        body,
    );
    response
        .headers_mut()
        .insert("x-should-retry", HeaderValue::from_static("false"));
    response
}
