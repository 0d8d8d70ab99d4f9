//! The [`Verifier`]: the ordering rules an AG-UI client enforces on the events it receives
//! (`@ag-ui/client` `verify.ts`), so the bridge can check its own output before a browser does.
//! The messages follow `verify.ts`'s wording.
//!
//! ```text
//!            RUN_STARTED                       RUN_FINISHED (nothing open)
//!   Idle ───────────────────► Active ─────────────────────────────────► Finished
//!    │                        ▲   │                                        │  │
//!    │ RUN_ERROR              │   │ RUN_ERROR                  RUN_STARTED │  │ RUN_ERROR
//!    ▼                        │   ▼                            (new run)   │  ▼
//!   Errored ◄─────────────────┼── Errored                                  │ Errored
//!                             └────────────────────────────────────────────┘
//! ```
//! In `Active`, text messages, tool calls, reasoning spans, reasoning messages and steps open
//! and close by id; several may be open at once. Content and end events need an open entity of
//! their id, a start needs the id not to be open, and `RUN_FINISHED` needs everything closed.
//! Nothing follows `RUN_ERROR`. Like the client, the verifier accepts a `RUN_ERROR` as the very
//! first event, and a `RUN_ERROR` after `RUN_FINISHED`.
//!
//! ```
//! use bridge_core::agui::events::AguiEvent;
//! use bridge_core::agui::verify::Verifier;
//! let start = AguiEvent::RunStarted { thread_id: "t".into(), run_id: "r".into(), parent_run_id: None, input: None };
//! let open = AguiEvent::TextMessageStart { message_id: "m".into(), role: None, name: None };
//! let finish = AguiEvent::RunFinished { thread_id: "t".into(), run_id: "r".into(), result: None, outcome: None, usage: None };
//! let err = Verifier::check(&[start, open, finish]).unwrap_err();
//! assert_eq!(err.rule, "Cannot send 'RUN_FINISHED' while text messages are still active: m");
//! ```

use std::collections::BTreeSet;

use crate::agui::events::AguiEvent;

/// A broken rule, with the position of the offending event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("event #{position} ({event}): {rule}")]
pub struct Violation {
    /// Zero-based position of the event in the sequence.
    pub position: usize,
    /// The event's `type`.
    pub event: String,
    /// The rule it broke, worded like the AG-UI client's error.
    pub rule: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunState {
    /// No event yet.
    Idle,
    Active,
    Finished,
    Errored,
}

/// Ids of what is open in the current run.
#[derive(Debug, Default)]
struct Open {
    text_messages: BTreeSet<String>,
    tool_calls: BTreeSet<String>,
    reasoning_spans: BTreeSet<String>,
    reasoning_messages: BTreeSet<String>,
    steps: BTreeSet<String>,
}

/// Checks AG-UI events one by one.
#[derive(Debug)]
pub struct Verifier {
    state: RunState,
    position: usize,
    open: Open,
}

impl Default for Verifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Verifier {
    /// A verifier expecting the first event of a stream.
    #[must_use]
    pub fn new() -> Self {
        Self {
            state: RunState::Idle,
            position: 0,
            open: Open::default(),
        }
    }

    /// Check a whole sequence.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn check(events: &[AguiEvent]) -> Result<(), Violation> {
        let mut verifier = Self::new();
        events.iter().try_for_each(|e| verifier.push(e))
    }

    /// Whether the last run ended (`RUN_FINISHED` or `RUN_ERROR`).
    #[must_use]
    pub fn run_ended(&self) -> bool {
        matches!(self.state, RunState::Finished | RunState::Errored)
    }

    /// Check the next event.
    ///
    /// # Errors
    /// The rule the event breaks. A rejected event changes nothing but the position count.
    pub fn push(&mut self, event: &AguiEvent) -> Result<(), Violation> {
        let position = self.position;
        self.position += 1;
        let kind = event.type_name();
        let fail = |rule: String| Violation {
            position,
            event: kind.to_owned(),
            rule,
        };
        match (self.state, event) {
            (RunState::Errored, _) => {
                return Err(fail(format!(
                    "Cannot send event type '{kind}': The run has already errored with 'RUN_ERROR'. No further events can be sent."
                )));
            }
            (_, AguiEvent::RunError { .. }) => {
                self.state = RunState::Errored;
                return Ok(());
            }
            (RunState::Idle | RunState::Finished, AguiEvent::RunStarted { .. }) => {
                self.state = RunState::Active;
                self.open = Open::default();
                return Ok(());
            }
            (RunState::Idle, _) => {
                return Err(fail("First event must be 'RUN_STARTED'".to_owned()));
            }
            (RunState::Finished, _) => {
                return Err(fail(format!(
                    "Cannot send event type '{kind}': The run has already finished with 'RUN_FINISHED'. Start a new run with 'RUN_STARTED'."
                )));
            }
            (RunState::Active, AguiEvent::RunStarted { .. }) => {
                return Err(fail("Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished with 'RUN_FINISHED' before starting a new run.".to_owned()));
            }
            (RunState::Active, _) => {}
        }
        self.active(event).map_err(fail)
    }

    /// The rules inside an active run.
    fn active(&mut self, event: &AguiEvent) -> Result<(), String> {
        let open = &mut self.open;
        match event {
            AguiEvent::TextMessageStart { message_id, .. } => {
                start(&mut open.text_messages, message_id, || {
                    format!(
                        "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID '{message_id}' is already in progress. Complete it with 'TEXT_MESSAGE_END' first."
                    )
                })
            }
            AguiEvent::TextMessageContent { message_id, .. } => {
                need(&open.text_messages, message_id, || {
                    format!(
                        "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID '{message_id}'. Start a text message with 'TEXT_MESSAGE_START' first."
                    )
                })
            }
            AguiEvent::TextMessageEnd { message_id } => {
                end(&mut open.text_messages, message_id, || {
                    format!(
                        "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID '{message_id}'. A 'TEXT_MESSAGE_START' event must be sent first."
                    )
                })
            }
            AguiEvent::ToolCallStart { tool_call_id, .. } => {
                start(&mut open.tool_calls, tool_call_id, || {
                    format!(
                        "Cannot send 'TOOL_CALL_START' event: A tool call with ID '{tool_call_id}' is already in progress. Complete it with 'TOOL_CALL_END' first."
                    )
                })
            }
            AguiEvent::ToolCallArgs { tool_call_id, .. } => {
                need(&open.tool_calls, tool_call_id, || {
                    format!(
                        "Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID '{tool_call_id}'. Start a tool call with 'TOOL_CALL_START' first."
                    )
                })
            }
            AguiEvent::ToolCallEnd { tool_call_id } => {
                end(&mut open.tool_calls, tool_call_id, || {
                    format!(
                        "Cannot send 'TOOL_CALL_END' event: No active tool call found with ID '{tool_call_id}'. A 'TOOL_CALL_START' event must be sent first."
                    )
                })
            }
            AguiEvent::ReasoningStart { message_id } => {
                start(&mut open.reasoning_spans, message_id, || {
                    format!(
                        "Cannot send 'REASONING_START' event: A reasoning span with ID '{message_id}' is already in progress. Complete it with 'REASONING_END' first."
                    )
                })
            }
            AguiEvent::ReasoningEnd { message_id } => {
                end(&mut open.reasoning_spans, message_id, || {
                    format!(
                        "Cannot send 'REASONING_END' event: No active reasoning span found with ID '{message_id}'. A 'REASONING_START' event must be sent first."
                    )
                })
            }
            AguiEvent::ReasoningMessageStart { message_id, .. } => {
                start(&mut open.reasoning_messages, message_id, || {
                    format!(
                        "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID '{message_id}' is already in progress. Complete it with 'REASONING_MESSAGE_END' first."
                    )
                })
            }
            AguiEvent::ReasoningMessageContent { message_id, .. } => {
                need(&open.reasoning_messages, message_id, || {
                    format!(
                        "Cannot send 'REASONING_MESSAGE_CONTENT' event: No active reasoning message found with ID '{message_id}'. Start a reasoning message with 'REASONING_MESSAGE_START' first."
                    )
                })
            }
            AguiEvent::ReasoningMessageEnd { message_id } => {
                end(&mut open.reasoning_messages, message_id, || {
                    format!(
                        "Cannot send 'REASONING_MESSAGE_END' event: No active reasoning message found with ID '{message_id}'. Start a reasoning message with 'REASONING_MESSAGE_START' first."
                    )
                })
            }
            AguiEvent::StepStarted { step_name } => start(&mut open.steps, step_name, || {
                format!("Step \"{step_name}\" is already active for 'STEP_STARTED'")
            }),
            AguiEvent::StepFinished { step_name } => end(&mut open.steps, step_name, || {
                format!("Cannot send 'STEP_FINISHED' for step \"{step_name}\" that was not started")
            }),
            AguiEvent::RunFinished { .. } => {
                let still_open = [
                    ("steps", &open.steps),
                    ("text messages", &open.text_messages),
                    ("tool calls", &open.tool_calls),
                    ("reasoning messages", &open.reasoning_messages),
                    ("reasoning spans", &open.reasoning_spans),
                ];
                for (what, ids) in still_open {
                    if !ids.is_empty() {
                        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                        return Err(format!(
                            "Cannot send 'RUN_FINISHED' while {what} are still active: {}",
                            ids.join(", ")
                        ));
                    }
                }
                self.state = RunState::Finished;
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Open `id` unless it is already open.
fn start(
    open: &mut BTreeSet<String>,
    id: &str,
    error: impl FnOnce() -> String,
) -> Result<(), String> {
    if open.insert(id.to_owned()) {
        Ok(())
    } else {
        Err(error())
    }
}

/// `id` must be open.
fn need(open: &BTreeSet<String>, id: &str, error: impl FnOnce() -> String) -> Result<(), String> {
    if open.contains(id) {
        Ok(())
    } else {
        Err(error())
    }
}

/// Close `id`, which must be open.
fn end(
    open: &mut BTreeSet<String>,
    id: &str,
    error: impl FnOnce() -> String,
) -> Result<(), String> {
    if open.remove(id) {
        Ok(())
    } else {
        Err(error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agui::events::Role;

    fn run_started() -> AguiEvent {
        AguiEvent::RunStarted {
            thread_id: "t".into(),
            run_id: "r".into(),
            parent_run_id: None,
            input: None,
        }
    }

    fn run_finished() -> AguiEvent {
        AguiEvent::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            result: None,
            outcome: None,
            usage: None,
        }
    }

    fn run_error() -> AguiEvent {
        AguiEvent::RunError {
            message: "boom".into(),
            code: None,
            usage: None,
        }
    }

    fn text_start(id: &str) -> AguiEvent {
        AguiEvent::TextMessageStart {
            message_id: id.into(),
            role: Some(Role::Assistant),
            name: None,
        }
    }

    fn text_content(id: &str) -> AguiEvent {
        AguiEvent::TextMessageContent {
            message_id: id.into(),
            delta: "x".into(),
        }
    }

    fn text_end(id: &str) -> AguiEvent {
        AguiEvent::TextMessageEnd {
            message_id: id.into(),
        }
    }

    fn tool_start(id: &str) -> AguiEvent {
        AguiEvent::ToolCallStart {
            tool_call_id: id.into(),
            tool_call_name: "Bash".into(),
            parent_message_id: None,
        }
    }

    fn rule(events: &[AguiEvent]) -> (usize, String) {
        let v = Verifier::check(events).unwrap_err();
        (v.position, v.rule)
    }

    #[test]
    fn accepts_interleaved_messages_and_a_second_run() {
        let events = [
            run_started(),
            text_start("a"),
            tool_start("t"),
            text_start("b"),
            text_content("a"),
            AguiEvent::ToolCallArgs {
                tool_call_id: "t".into(),
                delta: "{}".into(),
            },
            text_end("b"),
            AguiEvent::ToolCallEnd {
                tool_call_id: "t".into(),
            },
            text_end("a"),
            run_finished(),
            run_started(),
            text_start("a"),
            text_end("a"),
            run_finished(),
        ];
        assert_eq!(Verifier::check(&events), Ok(()));
    }

    #[test]
    fn first_event_must_be_run_started() {
        assert_eq!(
            rule(&[text_start("a")]),
            (0, "First event must be 'RUN_STARTED'".to_owned())
        );
        // Like the client: a stream may consist of a lone RUN_ERROR.
        assert_eq!(Verifier::check(&[run_error()]), Ok(()));
    }

    #[test]
    fn rejects_run_started_during_a_run() {
        let (position, rule) = rule(&[run_started(), run_started()]);
        assert_eq!(position, 1);
        assert!(rule.starts_with("Cannot send 'RUN_STARTED' while a run is still active."));
    }

    #[test]
    fn rejects_run_finished_with_an_open_text_message() {
        assert_eq!(
            rule(&[run_started(), text_start("m1"), run_finished()]),
            (
                2,
                "Cannot send 'RUN_FINISHED' while text messages are still active: m1".to_owned()
            )
        );
    }

    #[test]
    fn rejects_run_finished_with_anything_open() {
        let step = AguiEvent::StepStarted {
            step_name: "s".into(),
        };
        let reasoning = AguiEvent::ReasoningStart {
            message_id: "r".into(),
        };
        let reasoning_message = AguiEvent::ReasoningMessageStart {
            message_id: "r".into(),
            role: Role::Reasoning,
        };
        for (opener, what) in [
            (step, "steps"),
            (tool_start("t"), "tool calls"),
            (reasoning, "reasoning spans"),
            (reasoning_message, "reasoning messages"),
        ] {
            let (_, rule) = rule(&[run_started(), opener, run_finished()]);
            assert!(rule.contains(what), "{rule}");
        }
    }

    #[test]
    fn rejects_anything_after_run_error() {
        assert_eq!(
            rule(&[run_started(), run_error(), text_start("m")]),
            (
                2,
                "Cannot send event type 'TEXT_MESSAGE_START': The run has already errored with 'RUN_ERROR'. No further events can be sent.".to_owned()
            )
        );
        let (_, again) = rule(&[run_started(), run_error(), run_started()]);
        assert!(again.contains("already errored"));
    }

    #[test]
    fn after_run_finished_only_a_new_run_or_an_error() {
        let (position, rule) = rule(&[run_started(), run_finished(), text_start("m")]);
        assert_eq!(position, 2);
        assert!(rule.contains("already finished with 'RUN_FINISHED'"));
        assert_eq!(
            Verifier::check(&[run_started(), run_finished(), run_error()]),
            Ok(())
        );
    }

    #[test]
    fn rejects_duplicate_tool_call_start() {
        assert_eq!(
            rule(&[run_started(), tool_start("t1"), tool_start("t1")]),
            (
                2,
                "Cannot send 'TOOL_CALL_START' event: A tool call with ID 't1' is already in progress. Complete it with 'TOOL_CALL_END' first.".to_owned()
            )
        );
    }

    #[test]
    fn content_and_end_need_an_open_id() {
        let (_, r) = rule(&[run_started(), text_start("a"), text_content("b")]);
        assert!(r.contains("No active text message found with ID 'b'"));
        let (_, r) = rule(&[run_started(), text_start("a"), text_end("a"), text_end("a")]);
        assert!(r.starts_with("Cannot send 'TEXT_MESSAGE_END'"));
        let args = AguiEvent::ToolCallArgs {
            tool_call_id: "x".into(),
            delta: "{".into(),
        };
        let (_, r) = rule(&[run_started(), args]);
        assert!(r.contains("No active tool call found with ID 'x'"));
        let content = AguiEvent::ReasoningMessageContent {
            message_id: "r".into(),
            delta: "hm".into(),
        };
        let (_, r) = rule(&[run_started(), content]);
        assert!(r.contains("No active reasoning message found with ID 'r'"));
        let end = AguiEvent::ReasoningEnd {
            message_id: "r".into(),
        };
        let (_, r) = rule(&[run_started(), end]);
        assert!(r.contains("No active reasoning span found with ID 'r'"));
    }

    #[test]
    fn steps_must_be_started_before_finished() {
        let finished = AguiEvent::StepFinished {
            step_name: "plan".into(),
        };
        assert_eq!(
            rule(&[run_started(), finished]),
            (
                1,
                "Cannot send 'STEP_FINISHED' for step \"plan\" that was not started".to_owned()
            )
        );
    }

    #[test]
    fn run_ended_reports_the_end() {
        let mut v = Verifier::new();
        v.push(&run_started()).unwrap();
        assert!(!v.run_ended());
        v.push(&run_finished()).unwrap();
        assert!(v.run_ended());
    }
}
