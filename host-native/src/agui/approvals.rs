//! Tool approval: Claude Code asks (`can_use_tool`) before it runs a tool that is not allowed
//! already; the request waits here until someone answers through the management API
//! (`POST /approvals/{requestId}`), unless an auto-approve rule answers at once.
//!
//! An answer is Claude Code's own shape: `{"behavior":"allow","updatedInput":{…}}` (the input is
//! mandatory: send it back unchanged to approve as asked) or
//! `{"behavior":"deny","message":"…"}`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bridge_core::agui::session::{ApprovalRequest, HookRequest, McpRequest};
use serde::Serialize;
use serde_json::{Value, json};

/// Something Claude Code asked that waits for the app, with its thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending<T> {
    /// The AG-UI thread (Claude Code session) it belongs to.
    pub thread_id: String,
    /// What Claude Code asked.
    #[serde(flatten)]
    pub request: T,
}

/// A tool call waiting for approval (`GET /approvals`).
pub type PendingApproval = Pending<ApprovalRequest>;
/// A hook call waiting for the app (`GET /hooks`).
pub type PendingHook = Pending<HookRequest>;
/// A request for an MCP server the app hosts (`GET /mcp-requests`).
pub type PendingMcp = Pending<McpRequest>;

/// What waits for the app, by Claude Code's request id.
#[derive(Debug)]
pub struct Waiting<T> {
    items: Mutex<BTreeMap<String, Pending<T>>>,
}

impl<T> Default for Waiting<T> {
    fn default() -> Self {
        Self {
            items: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<T: Clone> Waiting<T> {
    /// `request` of `thread_id` now waits under `request_id`.
    pub fn add(&self, thread_id: &str, request_id: &str, request: T) {
        if let Ok(mut items) = self.items.lock() {
            let thread_id = thread_id.to_owned();
            items.insert(request_id.to_owned(), Pending { thread_id, request });
        }
    }

    /// Everything waiting, by request id.
    #[must_use]
    pub fn list(&self) -> Vec<Pending<T>> {
        self.items
            .lock()
            .map(|i| i.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The thread `request_id` belongs to, while it waits.
    #[must_use]
    pub fn thread_of(&self, request_id: &str) -> Option<String> {
        let items = self.items.lock().ok()?;
        items.get(request_id).map(|p| p.thread_id.clone())
    }

    /// Take one to answer it.
    pub fn take(&self, request_id: &str) -> Option<Pending<T>> {
        self.items.lock().ok()?.remove(request_id)
    }

    fn forget_thread(&self, thread_id: &str) {
        if let Ok(mut items) = self.items.lock() {
            items.retain(|_, p| p.thread_id != thread_id);
        }
    }
}

/// What an auto-approve rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Behavior {
    /// Run the tool with its input as asked.
    Allow,
    /// Refuse the call.
    Deny,
}

/// `Bash` (exact) or `mcp__github__*` (prefix), with what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// The tool name, or a prefix ending in `*`.
    pub tool: String,
    /// Allow or deny.
    pub behavior: Behavior,
}

impl Rule {
    /// Parse `TOOL`, `TOOL:allow` or `TOOL:deny`.
    ///
    /// # Errors
    /// An empty tool or an unknown behavior.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (tool, behavior) = match text.trim().rsplit_once(':') {
            Some((tool, "allow")) => (tool, Behavior::Allow),
            Some((tool, "deny")) => (tool, Behavior::Deny),
            Some((_, other)) => {
                return Err(format!(
                    "auto-approve rule `{text}`: `{other}` is not allow or deny"
                ));
            }
            None => (text.trim(), Behavior::Allow),
        };
        if tool.is_empty() {
            return Err(format!("auto-approve rule `{text}` names no tool"));
        }
        Ok(Self {
            tool: tool.to_owned(),
            behavior,
        })
    }

    fn matches(&self, tool_name: &str) -> bool {
        match self.tool.strip_suffix('*') {
            Some(prefix) => tool_name.starts_with(prefix),
            None => self.tool == tool_name,
        }
    }
}

/// The pending approvals of every session, and the auto-approve rules.
#[derive(Debug, Default)]
pub struct Approvals {
    /// Tool calls waiting for approval.
    pub tools: Waiting<ApprovalRequest>,
    /// Hook calls waiting for the app.
    pub hooks: Waiting<HookRequest>,
    /// Requests for the app's own MCP servers.
    pub mcp: Waiting<McpRequest>,
    rules: Mutex<Vec<Rule>>,
}

impl Approvals {
    /// A registry with these rules.
    #[must_use]
    pub fn new(rules: Vec<Rule>) -> Self {
        Self {
            tools: Waiting::default(),
            hooks: Waiting::default(),
            mcp: Waiting::default(),
            rules: Mutex::new(rules),
        }
    }

    /// The answer a rule gives at once for this call, if one matches (the first that does).
    #[must_use]
    pub fn auto_answer(&self, tool_name: &str, input: &Value) -> Option<Value> {
        let rules = self.rules.lock().ok()?;
        let rule = rules.iter().find(|r| r.matches(tool_name))?;
        Some(match rule.behavior {
            Behavior::Allow => json!({"behavior": "allow", "updatedInput": input}),
            Behavior::Deny => json!({
                "behavior": "deny",
                "message": format!("{tool_name} is denied by an auto-approve rule of the bridge"),
            }),
        })
    }

    /// Add a rule (it is checked after the earlier ones).
    pub fn add_rule(&self, rule: Rule) {
        if let Ok(mut rules) = self.rules.lock() {
            rules.push(rule);
        }
    }

    /// The rules, in order.
    #[must_use]
    pub fn rules(&self) -> Vec<Rule> {
        self.rules.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Forget a thread's waiting calls (its Claude Code exited).
    pub fn forget_thread(&self, thread_id: &str) {
        self.tools.forget_thread(thread_id);
        self.hooks.forget_thread(thread_id);
        self.mcp.forget_thread(thread_id);
    }

    /// Something of a thread no longer waits (answered elsewhere, withdrawn).
    pub fn forget(&self, request_id: &str) {
        self.tools.take(request_id);
        self.hooks.take(request_id);
        self.mcp.take(request_id);
    }
}

/// Check an answer from the management API and put it in Claude Code's shape.
///
/// # Errors
/// A message that says what to fix.
pub fn answer(body: &Value) -> Result<Value, String> {
    match body.get("behavior").and_then(Value::as_str) {
        Some("allow") => match body.get("updatedInput") {
            Some(input) if input.is_object() => {
                let mut answer = json!({"behavior": "allow", "updatedInput": input});
                if let Some(permissions) = body.get("updatedPermissions") {
                    answer["updatedPermissions"] = permissions.clone();
                }
                Ok(answer)
            }
            _ => Err(String::from(
                "`updatedInput` (an object) is required to allow a tool call: send the tool's \
                 input back, changed or not",
            )),
        },
        Some("deny") => {
            let message = body
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty())
                .unwrap_or("The user denied this tool call");
            let mut answer = json!({"behavior": "deny", "message": message});
            if let Some(interrupt) = body.get("interrupt").and_then(Value::as_bool) {
                answer["interrupt"] = Value::Bool(interrupt);
            }
            Ok(answer)
        }
        _ => Err(String::from(
            "`behavior` must be \"allow\" (with `updatedInput`) or \"deny\" (with a `message`)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_match_in_order() {
        let approvals = Approvals::new(vec![
            Rule::parse("Bash:deny").unwrap(),
            Rule::parse("mcp__frontend__*").unwrap(),
        ]);
        let input = json!({"command": "ls"});
        assert_eq!(
            approvals.auto_answer("Bash", &input).unwrap()["behavior"],
            "deny"
        );
        assert_eq!(
            approvals
                .auto_answer("mcp__frontend__show", &input)
                .unwrap(),
            json!({"behavior": "allow", "updatedInput": {"command": "ls"}})
        );
        assert!(approvals.auto_answer("Write", &input).is_none());
        assert!(Rule::parse("Bash:maybe").is_err());
        assert!(Rule::parse(":allow").is_err());
    }

    #[test]
    fn answers_are_checked() {
        assert!(
            answer(&json!({"behavior": "allow"}))
                .unwrap_err()
                .contains("updatedInput")
        );
        assert_eq!(
            answer(&json!({"behavior": "allow", "updatedInput": {"a": 1}})).unwrap(),
            json!({"behavior": "allow", "updatedInput": {"a": 1}})
        );
        assert_eq!(
            answer(&json!({"behavior": "deny"})).unwrap()["message"],
            "The user denied this tool call"
        );
        assert!(answer(&json!({"behavior": "maybe"})).is_err());
    }

    #[test]
    fn pending_calls_are_listed_taken_and_forgotten() {
        let approvals = Approvals::default();
        let call = |id: &str| ApprovalRequest {
            request_id: id.into(),
            tool_name: "Bash".into(),
            tool_use_id: None,
            input: json!({}),
            description: None,
        };
        approvals.tools.add("t1", "a", call("a"));
        approvals.tools.add("t2", "b", call("b"));
        assert_eq!(approvals.tools.list().len(), 2);
        assert_eq!(approvals.tools.take("a").unwrap().thread_id, "t1");
        assert!(approvals.tools.take("a").is_none());
        approvals.forget_thread("t2");
        assert!(approvals.tools.list().is_empty());
    }
}
