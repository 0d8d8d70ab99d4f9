//! One client answer made of several upstream rounds: the sans-IO loop that runs server tools
//! for an upstream without them.
//!
//! The host feeds each round's Anthropic events in ([`ServerToolLoop::push`]) and gets the
//! client's events out: one `message_start`, every block re-indexed into one message, and a
//! call of a server tool shown as the `server_tool_use` it stands for. At the round's end
//! ([`ServerToolLoop::end_round`]) the loop says which searches and fetches to run; the host
//! runs them and hands each outcome to [`ServerToolLoop::deliver`] (a `web_search_tool_result`
//! or `web_fetch_tool_result` block goes out), then asks [`ServerToolLoop::next_request`] for
//! the next round's request — or the answer ends there, with one `message_delta` whose usage
//! sums every round.
//!
//! ```text
//!             push(events of round n)            end_round
//!   ┌──► Streaming ───────────────────────► Running(calls) ───deliver(each)───┐
//!   │        │ no server call, a client tool call,       │                    │
//!   │        │ an error, or the round cap                 ▼                    │
//!   │        └──────────────────────────────────────►  Done ◄── next_request ─┤
//!   └──────────────────────── next_request = Some(body) ───────────────────────┘
//! ```
//!
//! ```
//! use bridge_core::anthropic::events::*;
//! use bridge_core::server_tools::{plan::plan, turn::{ServerCall, ServerToolLoop, Round}};
//! let body = br#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"}],
//!   "tools":[{"type":"web_search_20250305","name":"web_search"}]}"#;
//! let mut turn = ServerToolLoop::new(plan(body).unwrap().unwrap(), 7);
//! let mut out = String::new();
//! turn.push(StreamEvent::MessageStart { message: Box::new(MessageShell::new("msg_1".into(), "m".into(), 5)) }, &mut out);
//! turn.push(StreamEvent::ContentBlockStart { index: 0, content_block: BlockStart::ToolUse {
//!     id: "call_1".into(), name: "web_search".into(), input: serde_json::json!({}) } }, &mut out);
//! turn.push(StreamEvent::ContentBlockDelta { index: 0, delta: Delta::InputJsonDelta {
//!     partial_json: r#"{"query":"rust"}"#.into() } }, &mut out);
//! turn.push(StreamEvent::ContentBlockStop { index: 0 }, &mut out);
//! turn.push(StreamEvent::MessageStop, &mut out);
//! assert!(out.contains(r#""type":"server_tool_use""#));
//! let Round::Run(calls) = turn.end_round(&mut out) else { panic!() };
//! let ServerCall::Search(search) = &calls[0] else { panic!() };
//! assert_eq!(search.query, "rust");
//! ```

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::fetch::{FetchedPage, PageBody, check_url};
use super::plan::{Plan, ServerTool, ServerToolKind};
use super::search::{SearchHit, results_for_model};
use crate::anthropic::accumulate::Accumulator;
use crate::anthropic::encode::encode_event;
use crate::anthropic::events::{
    ApiError, BlockStart, ContentBlock, ErrorKind, MessageDeltaBody, ServerToolUsage, StopReason,
    StreamEvent, Usage,
};
use crate::ids::IdSource;

/// Most rounds one answer runs server tools in; the answer then stops with `pause_turn`, and
/// the client sending it back goes on (as with Anthropic's own long server-tool turns).
pub const MAX_ROUNDS: u32 = 10;

/// Longest query sent to a backend (characters); a longer one is `query_too_long`.
pub const MAX_QUERY_CHARS: usize = 2000;

/// A search the host is to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchCall {
    /// The `srvtoolu_…` id its result answers.
    pub id: String,
    /// The tool, with the client's domain limits and location.
    pub tool: ServerTool,
    /// What to search for.
    pub query: String,
}

/// A page the host is to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchCall {
    /// The `srvtoolu_…` id its result answers.
    pub id: String,
    /// The tool, with the client's domain limits.
    pub tool: ServerTool,
    /// The address (checked against the tool's domains and the conversation already; the
    /// host checks where it leads).
    pub url: String,
}

/// A server tool call the host is to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerCall {
    /// A web search.
    Search(SearchCall),
    /// A web fetch.
    Fetch(FetchCall),
}

impl ServerCall {
    /// The `srvtoolu_…` id its result answers.
    #[must_use]
    pub fn id(&self) -> &str {
        match self {
            Self::Search(call) => &call.id,
            Self::Fetch(call) => &call.id,
        }
    }
}

/// What a call found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A search's results.
    Hits(Vec<SearchHit>),
    /// A fetched page.
    Page(FetchedPage),
}

/// A server tool call that did not run or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// Anthropic's `error_code`: `unavailable`, `too_many_requests`, `invalid_tool_input`,
    /// `url_not_accessible`, ….
    pub code: &'static str,
    /// What happened and what to do about it, for the model (and so the user).
    pub message: String,
}

/// What the host does when a round is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Round {
    /// Run these calls, [`ServerToolLoop::deliver`] each, then ask for the next request.
    Run(Vec<ServerCall>),
    /// The answer is complete (its last events are out).
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Streaming,
    Running,
    Done,
}

/// A call of the round waiting for its outcome.
#[derive(Debug)]
struct Waiting {
    id: String,
    tool: ServerTool,
    /// The query or the address.
    asked: String,
}

/// The loop of one client answer (see the module docs).
#[derive(Debug)]
pub struct ServerToolLoop {
    plan: Plan,
    ids: IdSource,
    state: State,
    /// The client's message has started.
    started: bool,
    /// The next block index of the client's message.
    next_index: u32,
    /// Open blocks: the upstream's index → the client's.
    open: BTreeMap<u32, u32>,
    /// This round's events, folded (server calls as `tool_use` with their `srvtoolu_` id).
    round: Accumulator,
    /// The round's message ended (`message_stop`).
    round_stopped: bool,
    /// A client tool was called: the answer ends once the server calls are answered.
    client_tool_called: bool,
    /// Rounds that ran server tools.
    rounds: u32,
    /// Calls so far per tool name.
    uses: BTreeMap<String, u32>,
    /// Searches run (for `usage.server_tool_use`).
    searches: u32,
    /// Pages fetched (for `usage.server_tool_use`).
    fetches: u32,
    /// The finished rounds' usage, summed.
    usage: Usage,
    /// The latest round's stop.
    stop: MessageDeltaBody,
    /// Results of this round, for the next request.
    results: Vec<Value>,
    /// Calls of this round waiting for their outcome, in call order.
    waiting: Vec<Waiting>,
}

impl ServerToolLoop {
    /// The loop for `plan`; `seed` makes the `srvtoolu_` ids.
    #[must_use]
    pub fn new(plan: Plan, seed: u64) -> Self {
        Self {
            plan,
            ids: IdSource::new(seed),
            state: State::Streaming,
            started: false,
            next_index: 0,
            open: BTreeMap::new(),
            round: Accumulator::default(),
            round_stopped: false,
            client_tool_called: false,
            rounds: 0,
            uses: BTreeMap::new(),
            searches: 0,
            fetches: 0,
            usage: Usage::zero(),
            stop: MessageDeltaBody {
                stop_reason: None,
                stop_sequence: None,
            },
            results: Vec::new(),
            waiting: Vec::new(),
        }
    }

    /// The first round's request body.
    #[must_use]
    pub fn first_request(&self) -> String {
        self.plan.first_request()
    }

    /// Whether the client asked for a stream.
    #[must_use]
    pub fn client_stream(&self) -> bool {
        self.plan.client_stream
    }

    /// Whether the answer is complete (or failed): nothing more goes out.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// One upstream event of the current round; the client's events go to `out`.
    pub fn push(&mut self, event: StreamEvent, out: &mut String) {
        if self.state != State::Streaming {
            return;
        }
        match event {
            StreamEvent::MessageStart { message } => {
                self.round.push(&StreamEvent::MessageStart {
                    message: message.clone(),
                });
                if !self.started {
                    self.started = true;
                    encode_event(out, &StreamEvent::MessageStart { message });
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let client_index = self.next_index;
                self.next_index += 1;
                let (client_block, folded) = match content_block {
                    BlockStart::ToolUse { name, input, .. } if self.plan.tool(&name).is_some() => {
                        let id = self.ids.next_id("srvtoolu_");
                        let client = BlockStart::ServerToolUse {
                            id: id.clone(),
                            name: name.clone(),
                            input: input.clone(),
                        };
                        (client, BlockStart::ToolUse { id, name, input })
                    }
                    block => {
                        if matches!(block, BlockStart::ToolUse { .. }) {
                            self.client_tool_called = true;
                        }
                        (block.clone(), block)
                    }
                };
                self.open.insert(index, client_index);
                self.round.push(&StreamEvent::ContentBlockStart {
                    index: client_index,
                    content_block: folded,
                });
                encode_event(
                    out,
                    &StreamEvent::ContentBlockStart {
                        index: client_index,
                        content_block: client_block,
                    },
                );
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                let Some(&client_index) = self.open.get(&index) else {
                    return;
                };
                let event = StreamEvent::ContentBlockDelta {
                    index: client_index,
                    delta,
                };
                self.round.push(&event);
                encode_event(out, &event);
            }
            StreamEvent::ContentBlockStop { index } => {
                let Some(client_index) = self.open.remove(&index) else {
                    return;
                };
                let event = StreamEvent::ContentBlockStop {
                    index: client_index,
                };
                self.round.push(&event);
                encode_event(out, &event);
            }
            StreamEvent::MessageDelta { delta, usage } => {
                self.round.push(&StreamEvent::MessageDelta {
                    delta: delta.clone(),
                    usage,
                });
                self.stop = delta;
            }
            StreamEvent::MessageStop => {
                self.round.push(&StreamEvent::MessageStop);
                self.round_stopped = true;
            }
            StreamEvent::Ping => encode_event(out, &StreamEvent::Ping),
            error @ StreamEvent::Error { .. } => {
                encode_event(out, &error);
                self.state = State::Done;
            }
        }
    }

    /// The round's upstream stream is over: the searches to run, or the answer's end.
    pub fn end_round(&mut self, out: &mut String) -> Round {
        if self.state != State::Streaming {
            return Round::Finished;
        }
        if !self.round_stopped {
            self.fail(
                ErrorKind::Api,
                "the upstream's answer ended before its message was complete",
                out,
            );
            return Round::Finished;
        }
        let Some(message) = self.round.message() else {
            self.fail(ErrorKind::Api, "the upstream sent no message", out);
            return Round::Finished;
        };
        add_usage(&mut self.usage, &message.usage);
        let calls: Vec<(String, ServerTool, Value)> = message
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, name, input } => {
                    Some((id.clone(), self.plan.tool(name)?.clone(), input.clone()))
                }
                _ => None,
            })
            .collect();
        if calls.is_empty() {
            self.finish(out);
            return Round::Finished;
        }
        self.rounds += 1;
        self.state = State::Running;
        let mut runs = Vec::new();
        for (id, tool, input) in calls {
            let (key, missing) = match tool.kind {
                ServerToolKind::WebSearch => ("query", "{\"query\": \"…\"}"),
                ServerToolKind::WebFetch => ("url", "{\"url\": \"https://…\"}"),
            };
            let asked = input
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .unwrap_or_default()
                .to_owned();
            let used = self.uses.entry(tool.name.clone()).or_insert(0);
            let failure = if asked.is_empty() {
                Some(ToolFailure {
                    code: "invalid_tool_input",
                    message: format!("the call has no \"{key}\" string; call it with {missing}"),
                })
            } else if tool.max_uses.is_some_and(|max| *used >= max) {
                Some(ToolFailure {
                    code: "max_uses_exceeded",
                    message: format!(
                        "this answer may call {} at most {} times; answer from what you have",
                        tool.name,
                        tool.max_uses.unwrap_or_default()
                    ),
                })
            } else {
                match tool.kind {
                    ServerToolKind::WebSearch => {
                        (asked.chars().count() > MAX_QUERY_CHARS).then(|| ToolFailure {
                            code: "query_too_long",
                            message: format!(
                                "the query is longer than {MAX_QUERY_CHARS} characters; shorten it"
                            ),
                        })
                    }
                    ServerToolKind::WebFetch => check_url(
                        &asked,
                        &tool.allowed_domains,
                        &tool.blocked_domains,
                        &self.plan.seen,
                    )
                    .err(),
                }
            };
            self.waiting.push(Waiting {
                id: id.clone(),
                tool: tool.clone(),
                asked: asked.clone(),
            });
            match failure {
                Some(failure) => self.deliver(&id, Err(failure), out),
                None => {
                    *used += 1;
                    runs.push(match tool.kind {
                        ServerToolKind::WebSearch => ServerCall::Search(SearchCall {
                            id,
                            tool,
                            query: asked,
                        }),
                        ServerToolKind::WebFetch => ServerCall::Fetch(FetchCall {
                            id,
                            tool,
                            url: asked,
                        }),
                    });
                }
            }
        }
        Round::Run(runs)
    }

    /// The outcome of the call (or refusal) `id`: its result block goes out.
    pub fn deliver(&mut self, id: &str, outcome: Result<Found, ToolFailure>, out: &mut String) {
        if self.state != State::Running {
            return;
        }
        let Some(at) = self.waiting.iter().position(|w| w.id == id) else {
            return;
        };
        let Waiting { tool, asked, .. } = self.waiting.remove(at);
        let (content, for_model, is_error) = match outcome {
            Ok(Found::Hits(hits)) => {
                self.searches += 1;
                for hit in &hits {
                    self.plan.seen.add(&hit.url);
                }
                (
                    super::search::result_block_content(&hits),
                    results_for_model(&asked, &hits),
                    false,
                )
            }
            Ok(Found::Page(page)) => {
                self.fetches += 1;
                self.plan.seen.add(&page.url);
                if let PageBody::Text(text)
                | PageBody::Pdf {
                    text: Some(text), ..
                } = &page.body
                {
                    self.plan.seen.add_text(text);
                }
                (
                    super::fetch::result_block_content(
                        &page,
                        tool.max_content_tokens,
                        tool.citations,
                    ),
                    super::fetch::page_for_model(&page, tool.max_content_tokens),
                    false,
                )
            }
            Err(failure) => {
                let (content, what) = match tool.kind {
                    ServerToolKind::WebSearch => (
                        super::search::error_block_content(failure.code),
                        "web search",
                    ),
                    ServerToolKind::WebFetch => {
                        (super::fetch::error_block_content(failure.code), "web fetch")
                    }
                };
                (
                    content,
                    format!("The {what} failed ({}): {}", failure.code, failure.message),
                    true,
                )
            }
        };
        let index = self.next_index;
        self.next_index += 1;
        let tool_use_id = id.to_owned();
        let content_block = match tool.kind {
            ServerToolKind::WebSearch => BlockStart::WebSearchToolResult {
                tool_use_id,
                content,
            },
            ServerToolKind::WebFetch => BlockStart::WebFetchToolResult {
                tool_use_id,
                content,
            },
        };
        encode_event(
            out,
            &StreamEvent::ContentBlockStart {
                index,
                content_block,
            },
        );
        encode_event(out, &StreamEvent::ContentBlockStop { index });
        let mut result = json!({"type": "tool_result", "tool_use_id": id, "content": for_model});
        if is_error {
            result["is_error"] = Value::Bool(true);
        }
        self.results.push(result);
    }

    /// Every outcome is delivered: the next round's request, or `None` when the answer ends
    /// here (its last events go to `out`): a client tool was called (`tool_use`), or the round
    /// cap is reached (`pause_turn`).
    pub fn next_request(&mut self, out: &mut String) -> Option<String> {
        if self.state != State::Running {
            return None;
        }
        let left: Vec<String> = self.waiting.iter().map(|w| w.id.clone()).collect();
        for id in left {
            let failure = ToolFailure {
                code: "unavailable",
                message: String::from("the call did not run"),
            };
            self.deliver(&id, Err(failure), out);
        }
        if self.client_tool_called {
            self.stop.stop_reason = Some(StopReason::ToolUse);
            self.finish(out);
            return None;
        }
        if self.rounds >= MAX_ROUNDS {
            self.stop.stop_reason = Some(StopReason::PauseTurn);
            self.finish(out);
            return None;
        }
        let assistant = self
            .round
            .message()
            .map(|m| {
                m.content
                    .iter()
                    .filter_map(|b| serde_json::to_value(b).ok())
                    .collect()
            })
            .unwrap_or_default();
        let results = std::mem::take(&mut self.results);
        self.round = Accumulator::default();
        self.round_stopped = false;
        self.open.clear();
        self.state = State::Streaming;
        Some(self.plan.next_request(assistant, results))
    }

    /// The answer fails here: an `error` event (blocks already closed or not, the client's
    /// message ends with it).
    pub fn fail(&mut self, kind: ErrorKind, message: &str, out: &mut String) {
        if self.state == State::Done {
            return;
        }
        self.state = State::Done;
        encode_event(
            out,
            &StreamEvent::Error {
                error: ApiError::new(kind, message),
            },
        );
    }

    /// The answer's last events: the latest round's stop, the usage of every round.
    fn finish(&mut self, out: &mut String) {
        self.state = State::Done;
        let mut usage = self.usage.clone();
        if self.searches > 0 || self.fetches > 0 || self.rounds > 0 {
            usage.server_tool_use = Some(ServerToolUsage {
                web_search_requests: self.searches,
                web_fetch_requests: self.fetches,
            });
        }
        encode_event(
            out,
            &StreamEvent::MessageDelta {
                delta: self.stop.clone(),
                usage,
            },
        );
        encode_event(out, &StreamEvent::MessageStop);
    }
}

/// Add a round's final usage to the answer's.
fn add_usage(total: &mut Usage, round: &Usage) {
    total.input_tokens += round.input_tokens;
    total.output_tokens += round.output_tokens;
    let add = |a: Option<u32>, b: Option<u32>| Some(a.unwrap_or(0) + b.unwrap_or(0));
    total.cache_read_input_tokens =
        add(total.cache_read_input_tokens, round.cache_read_input_tokens);
    total.cache_creation_input_tokens = add(
        total.cache_creation_input_tokens,
        round.cache_creation_input_tokens,
    );
}

#[cfg(test)]
mod tests;
