//! Anthropic's server tools on upstreams without them: a [`Provider`] around another that runs
//! `web_search` and `web_fetch` itself (the loop is the core's `bridge_core::server_tools`).
//!
//! A request without a server tool goes to the inner provider as it is. One with a
//! `web_search_…` or `web_fetch_…` tool goes with a function of the same name instead; each
//! round's answer is read through the loop, which shows the client a `server_tool_use` where
//! the model called the function; searches run against the [`SearchBackend`] and fetches
//! through the [`WebFetcher`], their results go to the client (`web_search_tool_result`,
//! `web_fetch_tool_result`) and, in the next round's request, to the model — one client
//! message however many rounds it takes. No search backend configured: every search is
//! answered with the `unavailable` error and a message saying how to configure one.
//!
//! ```text
//!   open ──► inner.open(round 1) ──► Round(source) ──End──► Running(calls)
//!                                        ▲                        │ deliver each
//!                                        └── Opening(inner.open) ◄┘ next_request
//! ```

use std::sync::Arc;

use bridge_core::anthropic::events::{ErrorKind, StreamEvent};
use bridge_core::server_tools::plan::plan;
use bridge_core::server_tools::turn::{Found, Round, ServerCall, ServerToolLoop, ToolFailure};
use bridge_core::sse::decoder::SseDecoder;
use tracing::{info, warn};

use super::fetch::WebFetcher;
use super::search::{NOT_CONFIGURED, SearchBackend};
use super::{Answer, BoxFuture, Call, EventSource, Next, Provider};
use crate::engine::EngineError;
use crate::error::BridgeError;

/// What runs the server tools: one per process, shared by every provider.
#[derive(Debug)]
pub struct Runners {
    /// The web search backend (`None`: searches fail as unavailable).
    pub search: Option<SearchBackend>,
    /// The web fetcher.
    pub fetch: WebFetcher,
}

/// A provider whose requests may carry server tools the bridge runs.
pub struct ServerTools {
    inner: Arc<dyn Provider>,
    runners: Arc<Runners>,
    /// The upstream searches itself (`--web-search upstream`): a request whose only server
    /// tools are web searches goes to it as it is.
    upstream_searches: bool,
}

impl std::fmt::Debug for ServerTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTools")
            .field("inner", &self.inner.kind())
            .field("runners", &self.runners)
            .field("upstream_searches", &self.upstream_searches)
            .finish()
    }
}

impl ServerTools {
    /// `inner`, with its server tools run by `runners` — but for web searches alone when the
    /// upstream `searches` itself.
    #[must_use]
    pub fn new(inner: Arc<dyn Provider>, runners: Arc<Runners>, searches: bool) -> Self {
        Self {
            inner,
            runners,
            upstream_searches: searches,
        }
    }
}

impl Provider for ServerTools {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn requires_max_tokens(&self) -> bool {
        self.inner.requires_max_tokens()
    }

    fn endpoint(&self) -> String {
        self.inner.endpoint()
    }

    fn model(&self) -> Option<&str> {
        self.inner.model()
    }

    fn open(&self, call: Call) -> BoxFuture<'_, Result<Answer, BridgeError>> {
        Box::pin(async move {
            let planned = plan(&call.body).map_err(|e| {
                BridgeError::Engine(EngineError::Request {
                    kind: ErrorKind::InvalidRequest,
                    message: e.to_string(),
                })
            })?;
            let Some(planned) = planned else {
                return self.inner.open(call).await;
            };
            let searches = |t: &bridge_core::server_tools::plan::ServerTool| {
                t.kind == bridge_core::server_tools::plan::ServerToolKind::WebSearch
            };
            if self.upstream_searches && planned.tools.iter().all(searches) {
                info!("the upstream runs the request's web search (--web-search upstream)");
                return self.inner.open(call).await;
            }
            let tools: Vec<&str> = planned.tools.iter().map(|t| t.name.as_str()).collect();
            let searches = planned.tools.iter().any(searches);
            match &self.runners.search {
                None if searches => {
                    warn!(tools = ?tools, "the request offers web search but no search backend is configured: searches will be answered as unavailable ([search] in the config, or --search)")
                }
                search => {
                    info!(tools = ?tools, search = ?search.as_ref().map(SearchBackend::describe), "the bridge runs the request's server tools")
                }
            }
            let turn = ServerToolLoop::new(planned, crate::ids::seed());
            let first = Call {
                body: bytes::Bytes::from(turn.first_request()),
                ..call.clone()
            };
            let source = match self.inner.open(first).await? {
                Answer::Stream { source, .. } => source,
                complete @ Answer::Complete { .. } => return Ok(complete),
            };
            Ok(Answer::Stream {
                client_stream: turn.client_stream(),
                source: Box::new(LoopSource {
                    inner: Arc::clone(&self.inner),
                    runners: Arc::clone(&self.runners),
                    // Each round has its own body: the client's is not kept.
                    call: Call {
                        body: bytes::Bytes::new(),
                        ..call
                    },
                    turn,
                    decoder: SseDecoder::new(),
                    stage: Stage::Round(source),
                }),
            })
        })
    }

    fn count_tokens(&self, call: Call) -> BoxFuture<'_, Option<Result<Answer, BridgeError>>> {
        self.inner.count_tokens(call)
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        self.inner.shutdown()
    }
}

/// The outcomes of one round's calls, by call id.
type Outcomes = Vec<(String, Result<Found, ToolFailure>)>;

/// Where the answer is.
enum Stage {
    /// Reading a round's events.
    Round(Box<dyn EventSource>),
    /// Running a round's calls (kept here, so a `next` the relay drops loses nothing).
    Running(BoxFuture<'static, Outcomes>),
    /// Sending the next round's request.
    Opening(BoxFuture<'static, Result<Answer, BridgeError>>),
    /// Nothing more comes.
    Done,
}

/// One client answer over as many upstream rounds as its server tool calls take.
struct LoopSource {
    inner: Arc<dyn Provider>,
    runners: Arc<Runners>,
    /// The client's call without its body (its headers go with every round).
    call: Call,
    turn: ServerToolLoop,
    /// The current round's SSE.
    decoder: SseDecoder,
    stage: Stage,
}

impl LoopSource {
    /// A round's SSE text through the loop.
    fn feed(&mut self, sse: &str) -> String {
        let mut out = String::new();
        for frame in self.decoder.feed(sse.as_bytes()) {
            match serde_json::from_str::<StreamEvent>(&frame.data) {
                Ok(event) => self.turn.push(event, &mut out),
                Err(e) => {
                    warn!(error = %e, "a translated event does not parse");
                    self.turn.fail(
                        ErrorKind::Api,
                        &format!("the bridge could not read its own translation: {e}"),
                        &mut out,
                    );
                }
            }
        }
        if self.turn.is_done() {
            // An error event ended the answer: the round's upstream is dropped (cancelled).
            self.stage = Stage::Done;
        }
        out
    }

    /// The calls of a round, run at once.
    fn run(&self, calls: Vec<ServerCall>) -> BoxFuture<'static, Outcomes> {
        let runners = Arc::clone(&self.runners);
        Box::pin(async move {
            let now = crate::ids::unix_seconds();
            let runs = calls.into_iter().map(|call| {
                let runners = Arc::clone(&runners);
                async move {
                    let outcome = match &call {
                        ServerCall::Search(search) => match &runners.search {
                            Some(backend) => backend.search(search).await.map(Found::Hits),
                            None => Err(ToolFailure {
                                code: "unavailable",
                                message: String::from(NOT_CONFIGURED),
                            }),
                        },
                        ServerCall::Fetch(fetch) => {
                            runners.fetch.fetch(fetch, now).await.map(Found::Page)
                        }
                    };
                    (call.id().to_owned(), outcome)
                }
            });
            futures_util::future::join_all(runs).await
        })
    }

    fn open_next(&self, body: String) -> BoxFuture<'static, Result<Answer, BridgeError>> {
        let inner = Arc::clone(&self.inner);
        let call = Call {
            body: bytes::Bytes::from(body),
            ..self.call.clone()
        };
        Box::pin(async move { inner.open(call).await })
    }
}

impl EventSource for LoopSource {
    fn next(&mut self) -> BoxFuture<'_, Next> {
        Box::pin(async move {
            loop {
                let mut out = String::new();
                match &mut self.stage {
                    Stage::Done => return Next::End,
                    Stage::Round(source) => match source.next().await {
                        Next::Sse(sse) => out = self.feed(&sse),
                        Next::End => match self.turn.end_round(&mut out) {
                            Round::Finished => self.stage = Stage::Done,
                            Round::Run(calls) => self.stage = Stage::Running(self.run(calls)),
                        },
                    },
                    Stage::Running(calls) => {
                        let outcomes = calls.await;
                        for (id, outcome) in outcomes {
                            self.turn.deliver(&id, outcome, &mut out);
                        }
                        self.stage = match self.turn.next_request(&mut out) {
                            Some(body) => Stage::Opening(self.open_next(body)),
                            None => Stage::Done,
                        };
                    }
                    Stage::Opening(opening) => match opening.await {
                        Ok(Answer::Stream { source, .. }) => {
                            self.decoder = SseDecoder::new();
                            self.stage = Stage::Round(source);
                        }
                        Ok(Answer::Complete { status, .. }) => {
                            self.turn.fail(
                                ErrorKind::Api,
                                &format!("the upstream answered the next round with a complete body ({status}) instead of a stream"),
                                &mut out,
                            );
                            self.stage = Stage::Done;
                        }
                        Err(e) => {
                            warn!(error = %e, "the upstream refused a server-tool round");
                            self.turn.fail(
                                e.kind(),
                                &format!("the round after the server tool calls failed: {e}"),
                                &mut out,
                            );
                            self.stage = Stage::Done;
                        }
                    },
                }
                if !out.is_empty() {
                    return Next::Sse(out);
                }
            }
        })
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> String {
        let stage = std::mem::replace(&mut self.stage, Stage::Done);
        let mut out = match stage {
            Stage::Round(mut source) => {
                let ended = source.fail(kind, message);
                self.feed(&ended)
            }
            _ => String::new(),
        };
        self.turn.fail(kind, message, &mut out);
        out
    }
}
