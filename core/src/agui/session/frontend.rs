//! Frontend tools: the client's own tools, offered to Claude Code through the host's MCP server.
//!
//! A call has two halves that meet here. The model's `tool_use` streams to the client as a
//! `TOOL_CALL_START` ([`Binding::streamed`]); Claude Code then calls the tool over MCP
//! ([`Binding::called`]), and the client's result comes in its next run
//! ([`Binding::result`]). They are matched by tool name, oldest first; a result may come before
//! Claude Code's MCP call (several calls in one message are called one after another).
//!
//! ```
//! use bridge_core::agui::session::frontend::{Binding, Called, Routed, ToolOutcome};
//! let mut b = Binding::default();
//! b.streamed("toolu_1", "show_card");
//! assert_eq!(b.called(7, "show_card"), Called::Waiting { tool_use_id: "toolu_1".into() });
//! let outcome = ToolOutcome { content: "shown".into(), is_error: false };
//! assert_eq!(b.result("toolu_1", outcome.clone()), Routed::Answered(7));
//! assert!(!b.waits_for_client());
//! ```

use std::collections::{BTreeMap, VecDeque};

/// The host's token for a waiting caller (an HTTP request, an MCP call).
pub type Caller = u64;

/// What a frontend tool call comes back with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// The result text.
    pub content: String,
    /// The tool failed.
    pub is_error: bool,
}

/// What became of an MCP call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Called {
    /// The client answered already: answer the call with this.
    Answered(ToolOutcome),
    /// The call waits for the client's result (the run should end so the client runs it).
    Waiting {
        /// The streamed call it was bound to.
        tool_use_id: String,
    },
    /// No streamed call of this tool to bind it to.
    Unbound,
}

/// Where a client's tool result goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routed {
    /// To this waiting MCP call.
    Answered(Caller),
    /// Kept for the MCP call Claude Code has not made yet.
    Kept,
    /// Nowhere: Claude Code gave up that call.
    Dropped,
    /// Not a frontend call the bridge routes (it goes to Claude Code as a plain `tool_result`).
    NotOurs,
}

/// The pairing of streamed tool calls, MCP calls and client results.
#[derive(Debug, Clone, Default)]
pub struct Binding {
    /// Streamed (tool_use id, tool name), not yet called through MCP.
    unbound: VecDeque<(String, String)>,
    /// MCP calls waiting for the client's result, by tool_use id.
    pending: BTreeMap<String, Caller>,
    /// Results the client sent before Claude Code called the tool, by tool_use id.
    ready: BTreeMap<String, ToolOutcome>,
    /// Calls Claude Code gave up (its MCP request went away), by tool_use id.
    gone: Vec<String>,
}

impl Binding {
    /// The model called frontend tool `name` (the client saw `TOOL_CALL_START`).
    pub fn streamed(&mut self, tool_use_id: &str, name: &str) {
        self.unbound
            .push_back((tool_use_id.to_owned(), name.to_owned()));
    }

    /// Claude Code called `name` through MCP.
    pub fn called(&mut self, caller: Caller, name: &str) -> Called {
        let position = self.unbound.iter().position(|(_, tool)| tool == name);
        let Some((tool_use_id, _)) = position.and_then(|i| self.unbound.remove(i)) else {
            return Called::Unbound;
        };
        if let Some(outcome) = self.ready.remove(&tool_use_id) {
            return Called::Answered(outcome);
        }
        self.pending.insert(tool_use_id.clone(), caller);
        Called::Waiting { tool_use_id }
    }

    /// The client's result for `tool_use_id`.
    pub fn result(&mut self, tool_use_id: &str, outcome: ToolOutcome) -> Routed {
        if let Some(caller) = self.pending.remove(tool_use_id) {
            return Routed::Answered(caller);
        }
        if let Some(i) = self.gone.iter().position(|id| id == tool_use_id) {
            self.gone.remove(i);
            return Routed::Dropped;
        }
        if self.unbound.iter().any(|(id, _)| id == tool_use_id) {
            self.ready.insert(tool_use_id.to_owned(), outcome);
            return Routed::Kept;
        }
        Routed::NotOurs
    }

    /// Claude Code gave up the MCP call `caller` (its request went away).
    pub fn gone(&mut self, caller: Caller) {
        let found = self
            .pending
            .iter()
            .find(|(_, c)| **c == caller)
            .map(|(id, _)| id.clone());
        if let Some(id) = found {
            self.pending.remove(&id);
            // Bounded: only calls that were pending can be here.
            if self.gone.len() >= 64 {
                self.gone.remove(0);
            }
            self.gone.push(id);
        }
    }

    /// Whether an MCP call waits for the client (the session must not be evicted).
    #[must_use]
    pub fn waits_for_client(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Forget everything (the process ended); returns the MCP calls that were waiting.
    pub fn clear(&mut self) -> Vec<Caller> {
        self.unbound.clear();
        self.ready.clear();
        self.gone.clear();
        std::mem::take(&mut self.pending).into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> ToolOutcome {
        ToolOutcome {
            content: text.into(),
            is_error: false,
        }
    }

    #[test]
    fn a_result_before_the_mcp_call_answers_it_at_once() {
        let mut b = Binding::default();
        b.streamed("t1", "a");
        b.streamed("t2", "a");
        assert_eq!(b.result("t2", ok("two")), Routed::Kept);
        assert_eq!(
            b.called(1, "a"),
            Called::Waiting {
                tool_use_id: "t1".into()
            }
        );
        assert_eq!(b.called(2, "a"), Called::Answered(ok("two")));
        assert!(b.waits_for_client());
        assert_eq!(b.result("t1", ok("one")), Routed::Answered(1));
        assert!(!b.waits_for_client());
    }

    #[test]
    fn unknown_calls_and_results_are_not_bound() {
        let mut b = Binding::default();
        assert_eq!(b.called(1, "a"), Called::Unbound);
        assert_eq!(b.result("nope", ok("x")), Routed::NotOurs);
        b.streamed("t1", "a");
        assert_eq!(b.called(1, "b"), Called::Unbound);
        assert!(matches!(b.called(3, "a"), Called::Waiting { .. }));
        assert_eq!(b.clear(), vec![3]);
        assert!(!b.waits_for_client());
    }

    #[test]
    fn a_result_for_a_call_claude_code_gave_up_is_dropped() {
        let mut b = Binding::default();
        b.streamed("t1", "a");
        assert!(matches!(b.called(5, "a"), Called::Waiting { .. }));
        b.gone(5);
        assert!(!b.waits_for_client());
        assert_eq!(b.result("t1", ok("late")), Routed::Dropped);
        assert_eq!(b.result("t1", ok("again")), Routed::NotOurs);
    }
}
