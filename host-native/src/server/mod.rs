//! The Anthropic front: an HTTP/1.1 server (hyper) that speaks the Messages API.
//!
//! Routes: `POST /v1/messages` (query string ignored: Claude Code sends `?beta=true`),
//! `POST /v1/messages/count_tokens`, the OpenAI fronts `POST /v1/chat/completions` and
//! `POST /v1/responses` ([`openai_front`]), `GET /v1/models[/{id}]` (one body both client
//! families read), `HEAD /`, `HEAD /api/hello`, `GET /health`, `GET /metrics`, and CORS
//! preflights. Every response carries a `request-id`.

pub mod body;
pub mod conn;
mod error_response;
pub mod health_checks;
pub(crate) mod messages;
mod models;
pub mod observe;
mod openai_front;
pub mod relay;
pub mod responses_store;
pub mod routes;
pub mod shape;
pub mod upstreams;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tracing::{Instrument, debug, info, warn};

use self::body::{ResponseBody, empty, full};
use crate::engine::Engine;
use crate::error::BridgeError;

/// Everything a request handler needs, shared by all connections.
pub struct AppState {
    /// The translation engine (token estimates; providers hold their own handle).
    pub engine: Arc<dyn Engine>,
    /// Where requests go (replaced as a whole on a config reload).
    pub routes: std::sync::RwLock<Arc<routes::Routes>>,
    /// Key clients must present.
    pub client_key: Option<String>,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// The bytes of request bodies held at once (`--body-budget-bytes`).
    pub body_budget: conn::BodyBudget,
    /// Connection cap and client timeouts.
    pub limits: conn::ConnLimits,
    /// How answers are relayed (pings, idle timeout).
    pub relay: relay::Relay,
    /// What browsers and rebinding pages may not send.
    pub guard: crate::guard::Guard,
    /// The upstream's own model ids, as its model list said at start (flags without `--model`
    /// only: then a client's model name goes upstream unchanged, so these are names it can send).
    pub upstream_models: std::sync::RwLock<Vec<String>>,
    /// What `/v1/responses` answered, for later references (`--responses-store-bytes`).
    pub responses: Arc<responses_store::ResponseStore>,
    /// The team gateway (keys, ledger, limits), when the config turns it on.
    pub gateway: Option<Arc<crate::gateway::Gateway>>,
    /// The last config reload: when, why, whether it took, and its error (the dashboard).
    pub last_reload: std::sync::Mutex<Option<serde_json::Value>>,
}

impl AppState {
    /// The routes in force now (a request keeps the ones it started with).
    #[must_use]
    pub fn routes(&self) -> Arc<routes::Routes> {
        Arc::clone(
            &self
                .routes
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The upstream's own model ids (empty until the start-up check listed them).
    #[must_use]
    pub fn upstream_models(&self) -> Vec<String> {
        self.upstream_models
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Put new routes in force (a config reload).
    pub fn set_routes(&self, routes: routes::Routes) {
        *self
            .routes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(routes);
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("engine", &self.engine.name())
            .field("routes", &self.routes())
            .field("client_key", &self.client_key.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

/// Accept connections until `shutdown` resolves, then let in-flight requests finish (up to
/// `drain` long).
///
/// # Errors
/// Accepting failed irrecoverably.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()>,
    drain: Duration,
) -> std::io::Result<()> {
    let limits = state.limits;
    let handler_state = Arc::clone(&state);
    let served = serve_with(
        listener,
        move |peer, req| handle(handler_state.clone(), peer, req),
        shutdown,
        drain,
        limits,
    )
    .await;
    // Then every provider ends what it keeps open (Fabstir sessions), together, briefly.
    let routes = state.routes();
    let closing = futures_util::future::join_all(routes.entries().map(|e| e.provider.shutdown()));
    if tokio::time::timeout(PROVIDER_SHUTDOWN, closing)
        .await
        .is_err()
    {
        warn!(
            seconds = PROVIDER_SHUTDOWN.as_secs(),
            "providers did not close their sessions in time"
        );
    }
    served
}

/// How long the providers have to close their sessions at shutdown.
const PROVIDER_SHUTDOWN: Duration = Duration::from_secs(10);

/// Accept HTTP/1 connections for `handler` until `shutdown` resolves, then let in-flight
/// requests finish (up to `drain` long). Every server of the bridge runs on this; `limits` caps
/// the connections and times out slow clients ([`conn`]).
///
/// # Errors
/// Accepting failed irrecoverably.
pub async fn serve_with<H, F>(
    listener: TcpListener,
    handler: H,
    shutdown: impl std::future::Future<Output = ()>,
    drain: Duration,
    limits: conn::ConnLimits,
) -> std::io::Result<()>
where
    H: Fn(SocketAddr, Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Result<Response<ResponseBody>, Infallible>> + Send + 'static,
{
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let spare = Arc::new(tokio::sync::Semaphore::new(conn::OVER_CAP_CONNECTIONS));
    let mut accept_errors = conn::Throttled::default();
    let mut cap_reached = conn::Throttled::default();
    // When the loop last stopped at the cap, if that was logged.
    let mut at_cap_since: Option<Instant> = None;
    loop {
        // Past the cap a few more connections are answered at once (probes are served, the
        // rest told to come back); past those, accepting stops until a connection closes.
        let slot = match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => (permit, false),
            Err(_) => {
                let now = Instant::now();
                if at_cap_since.is_none()
                    && let Some(suppressed) = cap_reached.report(now)
                {
                    at_cap_since = Some(now);
                    warn!(
                        max_connections = limits.max_connections,
                        suppressed,
                        "connection cap reached; requests past it are answered 529 (retry-after: 1), /health and /metrics still served (--max-connections)"
                    );
                }
                match Arc::clone(&spare).try_acquire_owned() {
                    Ok(permit) => (permit, true),
                    Err(_) => tokio::select! {
                        permit = Arc::clone(&permits).acquire_owned() => match permit {
                            Ok(permit) => (permit, false),
                            Err(_) => break,
                        },
                        permit = Arc::clone(&spare).acquire_owned() => match permit {
                            Ok(permit) => (permit, true),
                            Err(_) => break,
                        },
                        () = &mut shutdown => break,
                    },
                }
            }
        };
        let (permit, over_cap) = slot;
        if !over_cap && let Some(since) = at_cap_since.take() {
            info!(
                ms = since.elapsed().as_millis() as u64,
                "below the connection cap again"
            );
        }
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    if let Some(suppressed) = accept_errors.report(Instant::now()) {
                        warn!(error = %e, suppressed, "accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        // The connection's marker: a slot it gets while waiting is held as long as it is open.
        let marker = over_cap.then(|| conn::OverCap::new(limits, Arc::clone(&permits)));
        let held = marker.clone();
        let service = service_fn(move |mut req: Request<Incoming>| {
            if let Some(marker) = &marker {
                req.extensions_mut().insert(marker.clone());
            }
            handler(peer, req)
        });
        let conn = hyper::server::conn::http1::Builder::new()
            // A connection past the cap answers one request and closes.
            .keep_alive(!over_cap)
            .timer(hyper_util::rt::TokioTimer::new())
            // Covers a request's headers and an idle keep-alive connection.
            .header_read_timeout(if over_cap {
                limits.client_timeout.min(conn::OVER_CAP_HEADER_TIMEOUT)
            } else {
                limits.client_timeout
            })
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(held);
            drop(permit);
        });
    }
    // Refuse new connections at once while in-flight requests drain.
    drop(listener);
    info!("shutting down: waiting for in-flight requests");
    tokio::select! {
        () = graceful.shutdown() => info!("all connections closed"),
        () = tokio::time::sleep(drain) => warn!("in-flight requests still open after {drain:?}; exiting"),
    }
    Ok(())
}

async fn handle(
    state: Arc<AppState>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<ResponseBody>, Infallible> {
    let request_id = crate::ids::request_id();
    let span = tracing::info_span!("request", id = %request_id);
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let origin = req.headers().get(http::header::ORIGIN).cloned();
    // Past the cap: probes at once, anything else once a slot frees (or the overload answer).
    let refused_at_cap = conn::OverCap::refused(&req, &["/health", "/metrics"]).await;
    let mut response = match state.guard.check(&req) {
        Ok(()) if let Some(max_connections) = refused_at_cap => {
            let error = BridgeError::AtCapacity { max_connections };
            error_response::error_response_in(
                error_response::Envelope::for_path(&path),
                error,
                &request_id,
            )
        }
        Ok(()) => {
            route(&state, req, &request_id)
                .instrument(span.clone())
                .await
        }
        Err(refusal) => {
            let error = BridgeError::Refused(refusal);
            span.in_scope(|| warn!(%error, %peer, "request refused"));
            error_response::error_response_in(
                error_response::Envelope::for_path(&path),
                error,
                &request_id,
            )
        }
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        headers.insert("request-id", value);
    }
    // CORS headers only for origins that may call (the browser then refuses the others).
    let allowed = origin
        .as_ref()
        .and_then(|o| o.to_str().ok())
        .is_none_or(|o| state.guard.origin_allowed(o));
    if allowed {
        cors(headers, origin.as_ref());
    }
    let status = response.status();
    span.in_scope(|| {
        let ms = started.elapsed().as_millis() as u64;
        // A model request that is being answered writes its one line when its answer ends
        // (`request done`); this one, written before the first token, is for the other routes
        // and for a model request turned away.
        let answered_model_request = status.is_success()
            && Endpoint::of(path.trim_end_matches('/')).is_some_and(|e| e.front().is_some());
        if answered_model_request {
            debug!(%method, %path, status = status.as_u16(), %peer, ms, "handled");
        } else if path != "/health" && method != Method::HEAD {
            info!(%method, %path, status = status.as_u16(), %peer, ms, "handled");
        }
    });
    Ok(response)
}

/// What a path names, before its method is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Root,
    Health,
    Metrics,
    Messages,
    CountTokens,
    ChatCompletions,
    Responses,
    /// `/v1/responses/{id}`: a kept response.
    Response,
    Models,
    Model,
    /// `/v1/usage`: the ledger, grouped.
    Usage,
    /// `/admin/keys`, `/admin/keys/{name}[/rotate]`.
    AdminKeys,
    /// `/ui`, its assets and `/ui/api/…`: the dashboard ([`crate::dashboard`]).
    Ui,
}

impl Endpoint {
    /// The endpoint `path` (no trailing slash) names.
    fn of(path: &str) -> Option<Self> {
        Some(match path {
            "" | "/api/hello" => Self::Root,
            "/health" => Self::Health,
            "/metrics" => Self::Metrics,
            "/v1/messages" => Self::Messages,
            "/v1/messages/count_tokens" => Self::CountTokens,
            "/v1/chat/completions" => Self::ChatCompletions,
            "/v1/responses" => Self::Responses,
            p if p
                .strip_prefix("/v1/responses/")
                .is_some_and(|id| !id.is_empty() && !id.contains('/')) =>
            {
                Self::Response
            }
            "/v1/models" => Self::Models,
            p if p.starts_with("/v1/models/") => Self::Model,
            "/v1/usage" => Self::Usage,
            p if p == "/admin/keys" || p.starts_with("/admin/keys/") => Self::AdminKeys,
            p if p == "/ui" || p.starts_with("/ui/") => Self::Ui,
            _ => return None,
        })
    }

    /// The methods it answers (CORS preflights aside), as an `allow` header says them.
    const fn allow(self) -> &'static str {
        match self {
            Self::Root | Self::Models | Self::Ui => "GET, HEAD",
            Self::Health | Self::Metrics | Self::Model | Self::Usage => "GET",
            Self::AdminKeys => "GET, POST, DELETE",
            Self::Response => "GET, DELETE",
            Self::Messages | Self::CountTokens | Self::ChatCompletions | Self::Responses => "POST",
        }
    }

    /// The front a model request comes in by (`None`: not a model request).
    const fn front(self) -> Option<&'static str> {
        match self {
            Self::Messages => Some("messages"),
            Self::ChatCompletions => Some("chat"),
            Self::Responses => Some("responses"),
            _ => None,
        }
    }

    fn answers(self, method: &Method) -> bool {
        self.allow().split(", ").any(|m| m == method.as_str())
    }
}

async fn route(
    state: &AppState,
    req: Request<Incoming>,
    request_id: &str,
) -> Response<ResponseBody> {
    let method = req.method().clone();
    let path = req.uri().path().trim_end_matches('/').to_owned();
    let envelope = error_response::Envelope::for_path(&path).for_client(req.headers());
    let endpoint = Endpoint::of(&path);
    let result = match endpoint {
        _ if method == Method::OPTIONS => Ok(status_only(StatusCode::NO_CONTENT)),
        None => Err(BridgeError::NotFound {
            method: method.to_string(),
            path: path.clone(),
        }),
        Some(endpoint) if !endpoint.answers(&method) => Err(BridgeError::MethodNotAllowed {
            method: method.to_string(),
            path: path.clone(),
            allow: endpoint.allow(),
        }),
        Some(Endpoint::Root) => Ok(status_only(StatusCode::OK)),
        Some(Endpoint::Health) => Ok(json_response(StatusCode::OK, health(state).to_string())),
        Some(Endpoint::Metrics) => Ok(metrics(state)),
        Some(Endpoint::Ui) => crate::dashboard::api::serve(state, req, &path).await,
        Some(endpoint) => match authenticate(state, req.headers()).await {
            Ok(caller) => serve_endpoint(state, endpoint, caller, req, request_id, &path).await,
            Err(e) => {
                // A model request turned away at the door shows on the dashboard too.
                if let Some(front) = endpoint.front() {
                    let sender = observe::Sender::of(request_id, None, req.headers(), front);
                    crate::dashboard::refused(&sender, e.status().as_u16(), &e.to_string());
                }
                Err(e)
            }
        },
    };
    match result {
        Ok(response) => response,
        Err(error) => {
            let fault = error.fault();
            if error.expected() {
                debug!(kind = error.kind().as_str(), ?fault, %error, "request answered with an error it expects");
            } else {
                warn!(kind = error.kind().as_str(), ?fault, %error, "request failed");
            }
            error_response::error_response_in(envelope, error, request_id)
        }
    }
}

/// An endpoint that needs a caller (every one but the probes and `/metrics`).
async fn serve_endpoint(
    state: &AppState,
    endpoint: Endpoint,
    caller: crate::gateway::Caller,
    req: Request<Incoming>,
    request_id: &str,
    path: &str,
) -> Result<Response<ResponseBody>, BridgeError> {
    match endpoint {
        Endpoint::Models => Ok(models::list(state)),
        Endpoint::Model => models::get(state, &path["/v1/models/".len()..]),
        Endpoint::Response => Ok(openai_front::kept_response(
            state,
            req.method(),
            &path["/v1/responses/".len()..],
        )),
        Endpoint::Usage | Endpoint::AdminKeys => {
            let Some(gateway) = &state.gateway else {
                return Err(BridgeError::NotFound {
                    method: req.method().to_string(),
                    path: format!(
                        "{path} (the gateway is off: add [[keys]], admin_key or [store] to the config)"
                    ),
                });
            };
            let query = req.uri().query().unwrap_or("").to_owned();
            let method = req.method().clone();
            let answer = if endpoint == Endpoint::Usage {
                crate::gateway::admin::usage_endpoint(gateway, &caller, &query).await
            } else {
                let name = path.strip_prefix("/admin/keys/").filter(|n| !n.is_empty());
                let body = if method == Method::POST {
                    read_body(state, req).await?.0
                } else {
                    Bytes::new()
                };
                crate::gateway::admin::keys_endpoint(gateway, &caller, &method, name, &body).await
            };
            let (status, content_type, body) = answer?;
            let mut response = Response::new(full(body));
            *response.status_mut() = status;
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static(content_type),
            );
            Ok(response)
        }
        post => {
            let front = post.front().unwrap_or("messages");
            let sender = Arc::new(observe::Sender::of(
                request_id,
                Some(&caller),
                req.headers(),
                front,
            ));
            let admitted = async {
                let admission = match &state.gateway {
                    Some(gateway) if post != Endpoint::CountTokens => Some(
                        gateway
                            .admit(&caller, &sender, crate::gateway::store::now_ms())
                            .await?,
                    ),
                    _ => None,
                };
                // The body's room in the budget is held until the answer is ready.
                Ok::<_, BridgeError>((admission, read_call(state, req).await?))
            };
            let (admission, (mut call, _reservation)) = match admitted.await {
                Ok(admitted) => admitted,
                Err(error) => {
                    if post.front().is_some() {
                        crate::dashboard::refused(
                            &sender,
                            error.status().as_u16(),
                            &error.to_string(),
                        );
                    }
                    return Err(error);
                }
            };
            if !matches!(caller, crate::gateway::Caller::Open) {
                // The key was this bridge's: it never reaches an upstream.
                call.headers.remove("x-api-key");
                call.headers.remove(http::header::AUTHORIZATION);
            }
            match post {
                Endpoint::CountTokens => messages::count_tokens(state, call).await,
                Endpoint::ChatCompletions => {
                    Ok(openai_front::chat_completions(state, call, &sender, admission).await)
                }
                Endpoint::Responses => {
                    Ok(openai_front::responses(state, call, &sender, admission).await)
                }
                _ => Ok(messages::create(state, call, &sender, admission).await),
            }
        }
    }
}

/// `GET /metrics`: Prometheus text format.
fn metrics(state: &AppState) -> Response<ResponseBody> {
    let now = Instant::now();
    let circuits: Vec<observe::TargetGauges> = state
        .routes()
        .entries()
        .map(|e| {
            let (in_flight, queued) = e.upstream.counts();
            observe::TargetGauges {
                target: e.target.to_string(),
                circuit_open: e.circuit.is_open(now),
                in_flight,
                queued,
                latency_ewma_ms: e.upstream.latency_ewma_ms(),
            }
        })
        .collect();
    let (kept_bytes, kept) = state.responses.usage();
    observe::Metrics::global().responses_kept(kept_bytes, kept);
    let mut response = Response::new(full(observe::Metrics::global().render(&circuits)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

/// `GET /health`: the default target's provider (as before), and every target's last known
/// state (its circuit, answers and failures, the last error).
fn health(state: &AppState) -> serde_json::Value {
    let routes = state.routes();
    let primary = routes.primary();
    let targets = target_reports(&routes, |_| true);
    serde_json::json!({
        "status": "ok",
        "provider": primary.map(|p| p.kind),
        "engine": state.engine.name(),
        "upstream": primary.map(|p| p.provider.endpoint()),
        "config": routes.file.as_ref().map(|f| f.display().to_string()),
        "targets": targets,
        "version": env!("CARGO_PKG_VERSION"),
    })
}

/// Each target's state, as `/health` and the dashboard show it: its circuit, answers and
/// failures, the last error, its provider's load. Only the targets `shown` passes.
pub(crate) fn target_reports(
    routes: &routes::Routes,
    shown: impl Fn(&str) -> bool,
) -> serde_json::Map<String, serde_json::Value> {
    let now = Instant::now();
    routes
        .entries()
        .filter(|entry| shown(&entry.target.to_string()))
        .map(|entry| {
            let mut report = entry.circuit.report(now);
            report["kind"] = serde_json::Value::from(entry.kind);
            report["upstream"] = serde_json::Value::from(entry.provider.endpoint());
            report["provider"] = serde_json::Value::from(entry.upstream.name());
            report["load"] = entry.upstream.report(now);
            (entry.target.to_string(), report)
        })
        .collect()
}

/// Who sent the request: through the gateway when it is on, else the one `client_key`.
pub(crate) async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<crate::gateway::Caller, BridgeError> {
    use crate::gateway::Caller;
    match (&state.gateway, &state.client_key) {
        (Some(gateway), _) => gateway
            .authenticate(headers, crate::gateway::store::now_ms())
            .await
            .map_err(|e| BridgeError::Gateway(e.into())),
        (None, Some(expected)) if !presents_key(headers, expected) => {
            Err(BridgeError::Unauthorized)
        }
        (None, Some(_)) => Ok(Caller::Shared),
        (None, None) => Ok(Caller::Open),
    }
}

/// Whether the request carries `expected` as `x-api-key` or `Authorization: Bearer` (compared in
/// constant time).
pub(crate) fn presents_key(headers: &HeaderMap, expected: &str) -> bool {
    let presented = crate::gateway::presented_key(headers).unwrap_or("");
    bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

/// The request as a provider takes it: body, headers, query string.
/// The request as a provider takes it, and its room in the body budget (held until the
/// request is answered).
async fn read_call(
    state: &AppState,
    req: Request<Incoming>,
) -> Result<(crate::provider::Call, conn::BodyReservation), BridgeError> {
    let headers = req.headers().clone();
    let query = req.uri().query().map(String::from);
    let (body, reservation) = read_body(state, req).await?;
    Ok((
        crate::provider::Call {
            body,
            headers,
            query,
            max_tokens_optional: false,
            spend: None,
        },
        reservation,
    ))
}

async fn read_body(
    state: &AppState,
    req: Request<Incoming>,
) -> Result<(Bytes, conn::BodyReservation), BridgeError> {
    let limit = state.max_body_bytes;
    if let Some(len) = req
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        && len > limit
    {
        return Err(BridgeError::TooLarge { limit });
    }
    let stall = state.limits.client_timeout;
    match conn::read_request_body(req.into_body(), limit, stall, Some(&state.body_budget)).await {
        Ok(read) => Ok(read),
        Err(conn::BodyError::Busy) => Err(BridgeError::BodiesBusy {
            budget: state.body_budget.total(),
        }),
        Err(conn::BodyError::TooLarge) => Err(BridgeError::TooLarge { limit }),
        Err(conn::BodyError::Stalled) => Err(BridgeError::ClientStalled {
            seconds: stall.as_secs(),
        }),
        Err(conn::BodyError::Failed(e)) => Err(BridgeError::ClientBody(e)),
    }
}

/// CORS headers for browser clients (every response carries them).
pub(crate) fn cors(headers: &mut HeaderMap, origin: Option<&HeaderValue>) {
    let allow_origin = origin
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("*"));
    headers.insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, allow_origin);
    headers.insert(
        http::header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, HEAD, OPTIONS"),
    );
    headers.insert(
        http::header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "content-type, x-api-key, authorization, anthropic-version, anthropic-beta, anthropic-dangerous-direct-browser-access, x-app, x-stainless-arch, x-stainless-lang, x-stainless-os, x-stainless-package-version, x-stainless-retry-count, x-stainless-runtime, x-stainless-runtime-version, x-stainless-timeout, x-claude-code-session-id",
        ),
    );
    headers.insert(
        http::header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("request-id, retry-after, x-should-retry, x-claude-bridge-target"),
    );
    headers.insert(
        http::header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    headers.insert(http::header::VARY, HeaderValue::from_static("origin"));
}

pub(crate) fn status_only(status: StatusCode) -> Response<ResponseBody> {
    let mut response = Response::new(empty());
    *response.status_mut() = status;
    response
}

/// A Server-Sent Events response whose body is whatever arrives on `rx`, written as it arrives.
pub(crate) fn sse_response(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::Channel(rx));
    sse_headers(response.headers_mut());
    response
}

/// The headers of an event stream (no caching, no proxy buffering).
pub(crate) fn sse_headers(headers: &mut HeaderMap) {
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
}

/// A JSON response.
pub(crate) fn json_response(status: StatusCode, body: String) -> Response<ResponseBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
