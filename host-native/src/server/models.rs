//! `GET /v1/models` in Anthropic's shape. Ids begin with `claude` (Claude Code's gateway model
//! discovery only keeps those); with `--model` every one of them maps to that upstream model.

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
    let target = state.provider.model().unwrap_or(id);
    serde_json::json!({
        "type": "model",
        "id": id,
        "display_name": format!("{display} → {target} ({})", state.provider.kind()),
        "created_at": "2025-01-01T00:00:00Z",
    })
}

pub(super) fn list(state: &AppState) -> Response<ResponseBody> {
    let data: Vec<_> = MODELS
        .iter()
        .map(|(id, name)| info(state, id, name))
        .collect();
    let body = serde_json::json!({
        "data": data,
        "has_more": false,
        "first_id": MODELS.first().map(|m| m.0),
        "last_id": MODELS.last().map(|m| m.0),
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
        None => Err(BridgeError::NotFound {
            method: String::from("GET"),
            path: format!("/v1/models/{id}"),
        }),
    }
}
