//! Which server tools a request asks the bridge to run, and the request the upstream gets
//! instead: each server tool offered as a function of the same name, the conversation's earlier
//! server tool calls written as ordinary tool calls and results, and always a stream (the loop
//! reads the rounds as events).
//!
//! ```
//! use bridge_core::server_tools::plan::plan;
//! let body = br#"{"model":"m","max_tokens":99,"messages":[{"role":"user","content":"hi"}],
//!   "tools":[{"type":"web_search_20250305","name":"web_search","max_uses":2}]}"#;
//! let plan = plan(body).unwrap().expect("a server tool");
//! assert!(!plan.client_stream);
//! let sent: serde_json::Value = serde_json::from_str(&plan.first_request()).unwrap();
//! assert_eq!(sent["stream"], true);
//! assert_eq!(sent["tools"][0]["input_schema"]["required"][0], "query");
//! assert_eq!(plan.tools[0].max_uses, Some(2));
//! ```

use serde_json::{Map, Value, json};

use super::fetch::SeenUrls;

/// What a server tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerToolKind {
    /// `web_search_…`: search the web for `{query}`.
    WebSearch,
    /// `web_fetch_…`: fetch the page at `{url}`.
    WebFetch,
}

/// A server tool of the request, as the client declared it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTool {
    /// The name the model calls it by (`web_search`).
    pub name: String,
    /// What it does.
    pub kind: ServerToolKind,
    /// How many calls one answer may make (`None`: no limit of the client's).
    pub max_uses: Option<u32>,
    /// Only results from these domains (empty: any).
    pub allowed_domains: Vec<String>,
    /// Never results from these domains.
    pub blocked_domains: Vec<String>,
    /// Where the user is (`{"type":"approximate","country":"GB",…}`), passed to backends that
    /// take a country.
    pub country: Option<String>,
    /// Web fetch: the most of a page the model and client get (`max_content_tokens`).
    pub max_content_tokens: Option<u32>,
    /// Web fetch: the client asked for citations on the fetched document.
    pub citations: bool,
}

/// A request whose server tools the bridge runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The server tools, in the request's order.
    pub tools: Vec<ServerTool>,
    /// Whether the client asked for a stream (the upstream always gets one).
    pub client_stream: bool,
    /// The upstream's request: a JSON object.
    request: Map<String, Value>,
    /// The addresses the conversation holds: the only ones a fetch may open.
    pub(super) seen: SeenUrls,
}

/// Why a request's server tools cannot be planned (the client's fault: a 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The body is not a JSON object.
    #[error("the request body is not a JSON object: {0}")]
    NotAnObject(String),
    /// A server tool has no name, or two tools share one.
    #[error("tools: {0}")]
    BadTool(String),
}

/// The server tool types the bridge runs when the upstream has no such tool of its own.
fn kind_of(tool_type: &str) -> Option<ServerToolKind> {
    if super::hosted::is_web_search(tool_type) {
        Some(ServerToolKind::WebSearch)
    } else if tool_type.starts_with("web_fetch_") {
        Some(ServerToolKind::WebFetch)
    } else {
        None
    }
}

/// The request's server tools the bridge runs, or `None` when it has none (the request then
/// goes as it is).
///
/// # Errors
/// The body is not a JSON object, or a server tool has no name or shares one.
pub fn plan(body: &[u8]) -> Result<Option<Plan>, PlanError> {
    // Most requests carry no server tool: a look at the bytes spares them the parse.
    if memchr::memmem::find(body, b"web_search_").is_none()
        && memchr::memmem::find(body, b"web_fetch_").is_none()
    {
        return Ok(None);
    }
    let Value::Object(mut request) =
        serde_json::from_slice(body).map_err(|e| PlanError::NotAnObject(e.to_string()))?
    else {
        return Err(PlanError::NotAnObject(String::from("it is not an object")));
    };
    let mut tools = Vec::new();
    if let Some(Value::Array(declared)) = request.get_mut("tools") {
        for tool in declared.iter_mut() {
            let Some(kind) = tool.get("type").and_then(Value::as_str).and_then(kind_of) else {
                continue;
            };
            let server = server_tool(tool, kind)?;
            *tool = function_for(&server);
            tools.push(server);
        }
        let mut names: Vec<&str> = declared
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .collect();
        names.sort_unstable();
        if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(PlanError::BadTool(format!(
                "two tools are named {:?}; tool names must be unique",
                twice[0]
            )));
        }
    }
    if tools.is_empty() {
        return Ok(None);
    }
    let client_stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    request.insert(String::from("stream"), Value::Bool(true));
    let mut seen = SeenUrls::default();
    if let Some(system) = request.get("system") {
        seen.add_value(system);
    }
    if let Some(Value::Array(messages)) = request.get_mut("messages") {
        for message in messages.iter() {
            see_urls(&mut seen, message);
        }
        *messages = history_as_tool_calls(std::mem::take(messages));
    }
    Ok(Some(Plan {
        tools,
        client_stream,
        request,
        seen,
    }))
}

/// The addresses `message` puts in the conversation: anything the user wrote, and what
/// earlier server tools returned — not what the model wrote itself.
fn see_urls(seen: &mut SeenUrls, message: &Value) {
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        seen.add_value(message.get("content").unwrap_or(&Value::Null));
        return;
    }
    let Some(Value::Array(blocks)) = message.get("content") else {
        return;
    };
    for block in blocks {
        let is_result = block
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.ends_with("_tool_result"));
        if is_result {
            seen.add_value(block);
        }
    }
}

fn server_tool(tool: &Value, kind: ServerToolKind) -> Result<ServerTool, PlanError> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            let usual = match kind {
                ServerToolKind::WebSearch => "web_search",
                ServerToolKind::WebFetch => "web_fetch",
            };
            PlanError::BadTool(format!(
                "a {usual} tool needs a \"name\" (Claude Code and the API docs use \"{usual}\")"
            ))
        })?;
    let no_fields = Map::new();
    let fields = tool.as_object().unwrap_or(&no_fields);
    Ok(ServerTool {
        name: name.to_owned(),
        kind,
        max_uses: count(fields, "max_uses"),
        allowed_domains: strings(fields, "allowed_domains"),
        blocked_domains: strings(fields, "blocked_domains"),
        country: tool
            .pointer("/user_location/country")
            .and_then(Value::as_str)
            .map(str::to_owned),
        max_content_tokens: count(fields, "max_content_tokens"),
        citations: tool.pointer("/citations/enabled").and_then(Value::as_bool) == Some(true),
    })
}

/// A server tool's list of strings (`allowed_domains`, …); empty when absent.
pub(super) fn strings(tool: &Map<String, Value>, key: &str) -> Vec<String> {
    tool.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// A server tool's count (`max_uses`, …), capped at `u32::MAX`.
pub(super) fn count(tool: &Map<String, Value>, key: &str) -> Option<u32> {
    tool.get(key)
        .and_then(Value::as_u64)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The function the model is offered in place of `tool`.
fn function_for(tool: &ServerTool) -> Value {
    let (description, only, never, parameter, about) = match tool.kind {
        ServerToolKind::WebSearch => (
            "Search the web for current information. Returns the pages found (title, URL and an \
             extract); cite the ones you use by their URL.",
            "Only results from these domains are returned",
            "Results from these domains are never returned",
            "query",
            "The search query",
        ),
        ServerToolKind::WebFetch => (
            "Fetch the full text of a web page or PDF by its URL. Only a URL that is already in \
             the conversation can be fetched: one the user gave, or one a search or an earlier \
             fetch returned; never make one up.",
            "Only pages from these domains can be fetched",
            "Pages from these domains are never fetched",
            "url",
            "The URL to fetch (http:// or https://)",
        ),
    };
    let mut description = String::from(description);
    for (sentence, domains) in [
        (only, &tool.allowed_domains),
        (never, &tool.blocked_domains),
    ] {
        if !domains.is_empty() {
            description.push_str(&format!(" {sentence}: {}.", domains.join(", ")));
        }
    }
    json!({
        "name": tool.name,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": {parameter: {"type": "string", "description": about}},
            "required": [parameter],
        },
    })
}

/// Earlier server tool calls of the conversation as ordinary tool calls: an assistant turn
/// `[text, server_tool_use, web_search_tool_result, text]` becomes
/// `assistant [text, tool_use]`, `user [tool_result]`, `assistant [text]`, and a user turn
/// that follows a result joins the result's turn (its `tool_result` first).
fn history_as_tool_calls(messages: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    for message in messages {
        let is_assistant = message.get("role").and_then(Value::as_str) == Some("assistant");
        let has_server_blocks = message
            .get("content")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(is_server_block));
        if !(is_assistant && has_server_blocks) {
            push_merged(&mut out, message);
            continue;
        }
        let Value::Object(mut fields) = message else {
            continue;
        };
        let Some(Value::Array(content)) = fields.remove("content") else {
            continue;
        };
        let mut turn = Vec::new();
        for block in content {
            match block.get("type").and_then(Value::as_str) {
                Some("server_tool_use") => {
                    let mut call = block;
                    call["type"] = Value::from("tool_use");
                    turn.push(call);
                }
                Some(kind) if kind.ends_with("_tool_result") => {
                    let content = block.get("content").unwrap_or(&Value::Null);
                    let for_model = if kind == "web_fetch_tool_result" {
                        super::fetch::history_result_for_model(content)
                    } else {
                        super::search::history_result_for_model(content)
                    };
                    let result = json!({
                        "type": "tool_result",
                        "tool_use_id": block.get("tool_use_id").cloned().unwrap_or(Value::Null),
                        "content": for_model,
                    });
                    if !turn.is_empty() {
                        push_merged(
                            &mut out,
                            json!({"role": "assistant", "content": std::mem::take(&mut turn)}),
                        );
                    }
                    push_merged(&mut out, json!({"role": "user", "content": [result]}));
                }
                _ => turn.push(block),
            }
        }
        if !turn.is_empty() {
            push_merged(&mut out, json!({"role": "assistant", "content": turn}));
        }
    }
    out
}

fn is_server_block(block: &Value) -> bool {
    block
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t == "server_tool_use" || t.ends_with("_tool_result"))
}

/// Append `message`, joining it to the last one when both are the same role.
fn push_merged(out: &mut Vec<Value>, message: Value) {
    let role = message.get("role").cloned();
    if let Some(last) = out.last_mut()
        && last.get("role") == role.as_ref()
    {
        let joined = [content_blocks(last), content_blocks(&message)].concat();
        last["content"] = Value::Array(joined);
        return;
    }
    out.push(message);
}

/// A message's content as blocks (a string is one text block).
fn content_blocks(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::Array(blocks)) => blocks.clone(),
        Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

impl Plan {
    /// The first round's request body.
    #[must_use]
    pub fn first_request(&self) -> String {
        self.request_body()
    }

    /// The upstream request as JSON text (serialised from the map, not copied into a value;
    /// a map of JSON values with string keys always serialises).
    fn request_body(&self) -> String {
        serde_json::to_string(&self.request).unwrap_or_default()
    }

    /// The request going on after a round: the round's assistant content, then one user turn
    /// with its tool results. A `tool_choice` that forced a server tool is dropped, so the
    /// model may answer once it has results.
    #[must_use]
    pub fn next_request(&mut self, assistant: Vec<Value>, results: Vec<Value>) -> String {
        if let Some(Value::Array(messages)) = self.request.get_mut("messages") {
            if !assistant.is_empty() {
                push_merged(messages, json!({"role": "assistant", "content": assistant}));
            }
            push_merged(messages, json!({"role": "user", "content": results}));
        }
        let forced = self
            .request
            .get("tool_choice")
            .filter(|c| c.get("type").and_then(Value::as_str) == Some("tool"))
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            .is_some_and(|name| self.tools.iter().any(|t| t.name == name));
        if forced {
            self.request.remove("tool_choice");
        }
        self.request_body()
    }

    /// The server tool called `name`, if there is one.
    #[must_use]
    pub fn tool(&self, name: &str) -> Option<&ServerTool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(body: &Value) -> (Plan, Value) {
        let plan = plan(body.to_string().as_bytes()).unwrap().unwrap();
        let sent = serde_json::from_str(&plan.first_request()).unwrap();
        (plan, sent)
    }

    #[test]
    fn requests_without_server_tools_go_as_they_are() {
        let body = json!({"model":"m","messages":[],"tools":[{"name":"Bash","input_schema":{"type":"object"}}]});
        assert!(plan(body.to_string().as_bytes()).unwrap().is_none());
        // The type's prefix inside some text is no server tool.
        let text =
            json!({"model":"m","messages":[{"role":"user","content":"web_search_20250305"}]});
        assert!(plan(text.to_string().as_bytes()).unwrap().is_none());
    }

    #[test]
    fn the_server_tool_becomes_a_function_with_the_clients_limits() {
        let (plan, sent) = planned(&json!({
            "model":"m","stream":true,"messages":[{"role":"user","content":"q"}],
            "tools":[{"name":"Bash","input_schema":{"type":"object"}},
                     {"type":"web_search_20250305","name":"web_search","max_uses":8,
                      "allowed_domains":["docs.rs"],"user_location":{"type":"approximate","country":"GB"}}],
            "tool_choice":{"type":"tool","name":"web_search"}}));
        assert!(plan.client_stream);
        assert_eq!(plan.tools[0].max_uses, Some(8));
        assert_eq!(plan.tools[0].country.as_deref(), Some("GB"));
        assert_eq!(sent["tools"][0]["name"], "Bash");
        let search = &sent["tools"][1];
        assert_eq!(search["name"], "web_search");
        assert!(search.get("type").is_none());
        assert!(search["description"].as_str().unwrap().contains("docs.rs"));
        assert_eq!(
            sent["tool_choice"]["name"], "web_search",
            "the first round keeps the client's choice"
        );
    }

    #[test]
    fn a_nameless_or_clashing_server_tool_is_refused() {
        let nameless = json!({"messages":[],"tools":[{"type":"web_search_20250305"}]});
        assert!(matches!(
            plan(nameless.to_string().as_bytes()),
            Err(PlanError::BadTool(_))
        ));
        let clash = json!({"messages":[],"tools":[{"name":"web_search","input_schema":{}},{"type":"web_search_20250305","name":"web_search"}]});
        let e = plan(clash.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("unique"), "{e}");
    }

    #[test]
    fn earlier_server_calls_become_tool_calls_and_results() {
        let (_, sent) = planned(&json!({
            "model":"m","messages":[
              {"role":"user","content":"find it"},
              {"role":"assistant","content":[
                {"type":"text","text":"Looking."},
                {"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"it"}},
                {"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[
                  {"type":"web_search_result","url":"https://a.example/","title":"A","encrypted_content":"the answer is 42","page_age":null}]},
                {"type":"text","text":"It is 42."}]},
              {"role":"user","content":"thanks"}],
            "tools":[{"type":"web_search_20250305","name":"web_search"}]}));
        let roles: Vec<&str> = sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
        assert_eq!(sent["messages"][1]["content"][1]["type"], "tool_use");
        let result = &sent["messages"][2]["content"][0];
        assert_eq!(result["type"], "tool_result");
        assert_eq!(result["tool_use_id"], "srvtoolu_1");
        assert!(
            result["content"]
                .as_str()
                .unwrap()
                .contains("the answer is 42")
        );
        assert_eq!(sent["messages"][3]["content"][0]["text"], "It is 42.");
        assert_eq!(sent["messages"][4]["content"], "thanks");
    }

    #[test]
    fn web_fetch_is_offered_with_a_url_and_earlier_fetches_are_read_back() {
        let (plan, sent) = planned(&json!({
            "model":"m","messages":[
              {"role":"user","content":"read https://a.example/doc"},
              {"role":"assistant","content":[
                {"type":"server_tool_use","id":"s1","name":"web_fetch","input":{"url":"https://a.example/doc"}},
                {"type":"web_fetch_tool_result","tool_use_id":"s1","content":{"type":"web_fetch_result",
                  "url":"https://a.example/doc","retrieved_at":"2026-11-27T00:00:00Z",
                  "content":{"type":"document","title":"Doc","source":{"type":"text","media_type":"text/plain","data":"see https://a.example/more"}}}},
                {"type":"text","text":"Also try https://made-up.example/"}]},
              {"role":"user","content":"and?"}],
            "tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_content_tokens":500}]}));
        assert_eq!(plan.tools[0].kind, ServerToolKind::WebFetch);
        assert_eq!(plan.tools[0].max_content_tokens, Some(500));
        assert_eq!(sent["tools"][0]["input_schema"]["required"][0], "url");
        let result = sent["messages"][2]["content"][0]["content"]
            .as_str()
            .unwrap();
        assert!(result.contains("Title: Doc") && result.contains("see https://a.example/more"));
        assert!(
            plan.seen.contains("https://a.example/more"),
            "a fetched page's link"
        );
        assert!(
            !plan.seen.contains("https://made-up.example/"),
            "what the model wrote itself"
        );
    }

    #[test]
    fn a_result_ending_the_turn_joins_the_next_user_turn_first() {
        let (_, sent) = planned(&json!({
            "model":"m","messages":[
              {"role":"user","content":"find it"},
              {"role":"assistant","content":[
                {"type":"server_tool_use","id":"s1","name":"web_search","input":{"query":"it"}},
                {"type":"web_search_tool_result","tool_use_id":"s1","content":{"type":"web_search_tool_result_error","error_code":"unavailable"}}]},
              {"role":"user","content":[{"type":"text","text":"go on"}]}],
            "tools":[{"type":"web_search_20250305","name":"web_search"}]}));
        let last = &sent["messages"][2];
        assert_eq!(last["content"][0]["type"], "tool_result");
        assert_eq!(last["content"][1]["text"], "go on");
        assert_eq!(sent["messages"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn the_next_round_carries_the_results_and_frees_the_choice() {
        let (mut plan, _) = planned(&json!({
            "model":"m","messages":[{"role":"user","content":"q"}],
            "tools":[{"type":"web_search_20250305","name":"web_search"}],
            "tool_choice":{"type":"tool","name":"web_search"}}));
        let next: Value = serde_json::from_str(&plan.next_request(
            vec![json!({"type":"tool_use","id":"s1","name":"web_search","input":{"query":"q"}})],
            vec![json!({"type":"tool_result","tool_use_id":"s1","content":"found"})],
        ))
        .unwrap();
        assert!(next.get("tool_choice").is_none());
        assert_eq!(next["messages"][1]["role"], "assistant");
        assert_eq!(next["messages"][2]["content"][0]["content"], "found");
    }
}
