//! Server tools for upstreams that have none: the bridge runs Anthropic's `web_search` and
//! `web_fetch` itself. The request's server tool is offered to the model as a function of the same name
//! ([`plan`]); when the model calls it, the client sees a `server_tool_use` block, the host runs
//! the search (or fetches the page), the client gets the `web_search_tool_result` (or
//! `web_fetch_tool_result`) and the model the results as a tool result, and the answer goes
//! on in a new upstream round ([`turn`]) — one client message however many rounds it takes.
//! [`search`] reads the search backends' answers (SearXNG, Brave, Tavily) and writes results
//! for client and model; [`fetch`] decides which addresses a fetch may open and writes pages.
//! Upstreams with a web search of their own (OpenAI Responses, OpenRouter) run it instead:
//! [`hosted`] maps the tool's settings to theirs and their results back.
//!
//! Pure like the rest of the core: the host does the HTTP, passes the id seed in, and feeds
//! each round's Anthropic events through.

pub mod fetch;
pub mod hosted;
pub mod plan;
pub mod search;
pub mod turn;
