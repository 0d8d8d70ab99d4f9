//! `GET /v1/models` in one body both client families read: Anthropic's
//! (`{data:[{type:"model", id, display_name, created_at}], has_more, first_id, last_id}`) and
//! OpenAI's (`{object:"list", data:[{id, object:"model", created, owned_by}]}`) fields side by
//! side — each SDK ignores the other's. The list: the Claude ids (Claude Code's gateway model discovery
//! only keeps ids that begin with `claude`; each maps to the default target), then the models the
//! config file (or `--model`) lists, by the id a client sends — or, with flags and no `--model`,
//! the upstream's own ids as its model list gave them at start (a client's model name goes
//! upstream unchanged then, so those are the names it can send).

use http::{Response, StatusCode};

use super::body::ResponseBody;
use super::{AppState, json_response};
use crate::error::BridgeError;

const MODELS: &[(&str, &str)] = &[
    ("claude-opus-4-8", "Claude Opus 4.8"),
    ("claude-sonnet-4-6", "Claude Sonnet 4.6"),
    ("claude-haiku-4-5", "Claude Haiku 4.5"),
];

/// 2025-01-01T00:00:00Z, the time every entry reports (the bridge does not know when a model
/// was made).
const CREATED_AT: &str = "2025-01-01T00:00:00Z";
const CREATED_UNIX: u64 = 1_735_689_600;

/// One entry, with both families' fields.
fn entry(id: &str, display_name: String, owned_by: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "model",
        "id": id,
        "display_name": display_name,
        "created_at": CREATED_AT,
        "object": "model",
        "created": CREATED_UNIX,
        "owned_by": owned_by,
    })
}

fn info(state: &AppState, id: &str, display: &str) -> serde_json::Value {
    let routes = state.routes();
    let (target, kind) = routes
        .primary()
        .map_or((id, "none"), |p| (p.provider.model().unwrap_or(id), p.kind));
    entry(id, format!("{display} → {target} ({kind})"), kind)
}

fn configured(id: &str, provider: &str) -> serde_json::Value {
    entry(id, format!("{id} ({provider})"), provider)
}

pub(super) fn list(state: &AppState) -> Response<ResponseBody> {
    let mut data: Vec<_> = MODELS
        .iter()
        .map(|(id, name)| info(state, id, name))
        .collect();
    data.extend(
        state
            .routes()
            .models()
            .iter()
            .map(|(id, provider)| configured(id, provider)),
    );
    data.extend(
        state
            .upstream_models()
            .iter()
            .map(|id| configured(id, "upstream")),
    );
    let body = serde_json::json!({
        "object": "list",
        "first_id": data.first().map(|m| m["id"].clone()),
        "last_id": data.last().map(|m| m["id"].clone()),
        "data": data,
        "has_more": false,
    });
    json_response(StatusCode::OK, body.to_string())
}

pub(super) fn get(state: &AppState, id: &str) -> Result<Response<ResponseBody>, BridgeError> {
    match MODELS.iter().find(|(known, _)| *known == id) {
        Some((id, name)) => Ok(json_response(
            StatusCode::OK,
            info(state, id, name).to_string(),
        )),
        None if id.starts_with("claude") => Ok(json_response(
            StatusCode::OK,
            info(state, id, id).to_string(),
        )),
        None if state.routes().models().iter().any(|(m, _)| m == id) => {
            let routes = state.routes();
            let provider = routes
                .models()
                .iter()
                .find(|(m, _)| m == id)
                .map_or("", |(_, p)| p.as_str());
            Ok(json_response(
                StatusCode::OK,
                configured(id, provider).to_string(),
            ))
        }
        None if state.upstream_models().iter().any(|m| m == id) => Ok(json_response(
            StatusCode::OK,
            configured(id, "upstream").to_string(),
        )),
        None => Err(BridgeError::NotFound {
            method: String::from("GET"),
            path: format!("/v1/models/{id}"),
        }),
    }
}
