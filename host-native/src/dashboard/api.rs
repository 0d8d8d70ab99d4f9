//! The dashboard's HTTP side: the page and its assets ([`super::page`], no key needed: they
//! hold no data) and the JSON and event stream it reads, each behind the same key check as
//! the API and scoped to what the caller may see ([`super::Scope`]).
//!
//! | path | what |
//! |---|---|
//! | `GET /ui`, `/ui/app.js`, `/ui/app.css` | the page |
//! | `GET /ui/api/now` | the last hour (rates, errors, TTFT p50/p99, minute by minute), every target's circuit, in-flight, queue and latency; for the admin, the running config (secrets masked) and the last reload |
//! | `GET /ui/api/live` | an event stream: the recent requests, then each as it ends (`event: request`) |
//! | `GET /ui/api/me` | who the key is, and each budget's spend, remainder and reset (`{"needs_key": true}` without a key where one is needed) |
//! | `GET /ui/api/session/{id}` | one Claude Code session's totals and its key's budgets (the status line) |
//!
//! The *Spend* and *Keys* views read `GET /v1/usage` and `/admin/keys` themselves.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::{Board, Scope};
use crate::error::BridgeError;
use crate::gateway::Caller;
use crate::gateway::keys::target_allowed;
use crate::gateway::store::now_ms;
use crate::gateway::usage::UsageQuery;
use crate::server::AppState;
use crate::server::body::ResponseBody;

/// How often the live stream says it is alive (a comment line) when nothing ends.
const LIVE_PING: Duration = Duration::from_secs(15);

/// `/ui…`: the page, its assets, or its API.
///
/// # Errors
/// An unknown path (404), a key refused (401), a store that failed.
pub async fn serve(
    state: &AppState,
    req: Request<Incoming>,
    path: &str,
) -> Result<Response<ResponseBody>, BridgeError> {
    let not_found = || BridgeError::NotFound {
        method: req.method().to_string(),
        path: path.to_owned(),
    };
    let Some(api) = path.strip_prefix("/ui/api/") else {
        return super::page::asset(path, req.method() == Method::HEAD).ok_or_else(not_found);
    };
    let caller = match crate::server::authenticate(state, req.headers()).await {
        Ok(caller) => caller,
        // The page asks who it is before it has a key: "sign in" is an answer, not an error
        // (a 401 would be one on the browser's console).
        Err(e)
            if api == "me"
                && e.status() == StatusCode::UNAUTHORIZED
                && crate::gateway::presented_key(req.headers()).is_none() =>
        {
            return Ok(json(&json!({ "role": null, "needs_key": true })));
        }
        Err(e) => return Err(e),
    };
    let scope = Scope::of(&caller, state.gateway.is_some());
    let now = now_ms();
    match api {
        "now" => Ok(json(&now_view(state, &caller, &scope, now))),
        "live" => Ok(live(scope)),
        "me" => Ok(json(&me(state, &caller, &scope, now).await?)),
        session if session.starts_with("session/") => {
            let id = &session["session/".len()..];
            let totals = Board::global()
                .session(id)
                .filter(|s| match &scope {
                    Scope::All => true,
                    Scope::Key(key) => s.key.as_deref() == Some(key),
                })
                .ok_or_else(|| BridgeError::NoSuchSession { id: id.to_owned() })?;
            let budgets = match (&state.gateway, &totals.key) {
                (Some(gateway), Some(key)) => budgets(gateway, key, now).await?,
                _ => Vec::new(),
            };
            Ok(json(&json!({
                "session": id,
                "totals": totals,
                "budgets": budgets,
            })))
        }
        _ => Err(not_found()),
    }
}

fn json(value: &Value) -> Response<ResponseBody> {
    let mut response = crate::server::json_response(StatusCode::OK, value.to_string());
    response.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}

/// The *Now* view's numbers.
fn now_view(state: &AppState, caller: &Caller, scope: &Scope, now: i64) -> Value {
    let routes = state.routes();
    // A key sees the targets it may use; the admin sees all.
    let patterns: Option<Vec<String>> = match caller {
        Caller::Key(entry) if !entry.spec.targets.is_empty() => Some(entry.spec.targets.clone()),
        _ => None,
    };
    let targets = crate::server::target_reports(&routes, |target| {
        patterns.as_ref().is_none_or(|p| target_allowed(p, target))
    });
    let mut view = json!({
        "at_ms": now,
        "role": role(scope),
        "key": key_name(caller),
        "gateway": state.gateway.is_some(),
        "version": env!("CARGO_PKG_VERSION"),
        "engine": state.engine.name(),
        "hour": Board::global().hour(scope, now),
        "targets": targets,
    });
    if *scope == Scope::All {
        let reload = state
            .last_reload
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        view["config"] = json!({
            "file": routes.file.as_ref().map(|f| f.display().to_string()),
            "text": routes.shown,
        });
        view["reload"] = reload.unwrap_or(Value::Null);
    }
    view
}

fn role(scope: &Scope) -> &'static str {
    match scope {
        Scope::All => "admin",
        Scope::Key(_) => "key",
    }
}

fn key_name(caller: &Caller) -> Option<&str> {
    match caller {
        Caller::Open => None,
        other => Some(other.name()),
    }
}

/// `GET /ui/api/me`: the caller, and the budgets it may see (its own; the admin's: every key's).
async fn me(
    state: &AppState,
    caller: &Caller,
    scope: &Scope,
    now: i64,
) -> Result<Value, BridgeError> {
    let mut all = Vec::new();
    if let Some(gateway) = &state.gateway {
        let names: Vec<String> = match scope {
            Scope::All => gateway.keys().iter().map(|k| k.spec.name.clone()).collect(),
            Scope::Key(key) => vec![key.clone()],
        };
        for name in names {
            all.extend(budgets(gateway, &name, now).await?);
        }
    }
    Ok(json!({
        "role": role(scope),
        "key": key_name(caller),
        "gateway": state.gateway.is_some(),
        "budgets": all,
    }))
}

/// A key's budgets: each one's limit, what the ledger says was spent in its period, what is
/// left, and when the period starts again.
async fn budgets(
    gateway: &Arc<crate::gateway::Gateway>,
    key: &str,
    now: i64,
) -> Result<Vec<Value>, BridgeError> {
    let Some(entry) = gateway.keys().into_iter().find(|k| k.spec.name == key) else {
        return Ok(Vec::new());
    };
    let spec = &entry.spec;
    if spec.budget_usd.is_none() && spec.budget_tokens.is_none() {
        return Ok(Vec::new());
    }
    let window = spec.budget_period.window(now);
    let query = UsageQuery {
        group_by: Vec::new(),
        from_ms: window.start_ms,
        to_ms: now + 1,
        key: Some(key.to_owned()),
        csv: false,
    };
    let rows = gateway
        .usage(&query)
        .await
        .map_err(|e| BridgeError::Gateway(crate::gateway::GatewayError::Store(e.to_string())))?;
    let (cost, tokens) = rows.first().map_or((0.0, 0), |r| {
        (
            r.cost_usd,
            r.input_tokens + r.output_tokens + r.cache_read_tokens + r.cache_write_tokens,
        )
    });
    let resets = window.end_ms.map(crate::gateway::period::rfc3339);
    let mut out = Vec::new();
    if let Some(limit) = spec.budget_usd {
        out.push(json!({
            "key": key, "metric": "usd", "period": spec.budget_period.as_str(),
            "limit": limit, "spent": cost, "left": (limit - cost).max(0.0), "resets": resets,
        }));
    }
    if let Some(limit) = spec.budget_tokens {
        let spent = tokens.max(0) as u64;
        out.push(json!({
            "key": key, "metric": "tokens", "period": spec.budget_period.as_str(),
            "limit": limit, "spent": spent, "left": limit.saturating_sub(spent), "resets": resets,
        }));
    }
    Ok(out)
}

/// `GET /ui/api/live`: the recent requests the caller may see, then each as it ends.
fn live(scope: Scope) -> Response<ResponseBody> {
    let board = Board::global();
    // Subscribed before the backlog is read: nothing ends between the two unseen.
    let mut ended = board.subscribe();
    let backlog = board.recent(&scope);
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let event = |f: &super::Finished| {
            Bytes::from(format!(
                "event: request\ndata: {}\n\n",
                serde_json::to_string(f).unwrap_or_default()
            ))
        };
        if tx.send(Bytes::from_static(b": live\n\n")).await.is_err() {
            return;
        }
        for f in &backlog {
            if tx.send(event(f)).await.is_err() {
                return;
            }
        }
        loop {
            let next = tokio::select! {
                next = ended.recv() => next,
                () = tokio::time::sleep(LIVE_PING) => {
                    if tx.send(Bytes::from_static(b": ping\n\n")).await.is_err() {
                        return;
                    }
                    continue;
                }
                () = tx.closed() => return,
            };
            let bytes = match next {
                Ok(f) if scope.sees(&f) => event(&f),
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    Bytes::from(format!("event: lagged\ndata: {{\"missed\":{missed}}}\n\n"))
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if tx.send(bytes).await.is_err() {
                return;
            }
        }
    });
    crate::server::sse_response(rx)
}
