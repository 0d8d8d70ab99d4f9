//! `GET /v1/models` in Anthropic's shape: the Claude ids (Claude Code's gateway model discovery
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

fn info(state: &AppState, id: &str, display: &str) -> serde_json::Value {
    let routes = state.routes();
    let (target, kind) = routes
        .primary()
        .map_or((id, "none"), |p| (p.provider.model().unwrap_or(id), p.kind));
    serde_json::json!({
        "type": "model",
        "id": id,
        "display_name": format!("{display} → {target} ({kind})"),
        "created_at": "2025-01-01T00:00:00Z",
    })
}

fn configured(id: &str, provider: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "model",
        "id": id,
        "display_name": format!("{id} ({provider})"),
        "created_at": "2025-01-01T00:00:00Z",
    })
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
            .map(|id| configured(id, "the upstream's own")),
    );
    let body = serde_json::json!({
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
            configured(id, "the upstream's own").to_string(),
        )),
        None => Err(BridgeError::NotFound {
            method: String::from("GET"),
            path: format!("/v1/models/{id}"),
        }),
    }
}
