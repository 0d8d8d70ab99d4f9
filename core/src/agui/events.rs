//! AG-UI events and their wire encoding.
//!
//! Each variant has exactly the fields of the AG-UI event of that `type` (`@ag-ui/core` 0.0.5x
//! and 1.0): the `type` is SCREAMING_SNAKE_CASE, field names are camelCase and an optional field
//! that is `None` is left out. Only the intersection of 0.0.x and 1.0 is modelled: there are no
//! `THINKING_*` events (removed in 1.0; reasoning is `REASONING_*`) and no `SUBAGENT_*` events
//! (not in 0.0.x). The common base fields are not emitted: `timestamp` would need a clock, which
//! the core does not have.
//!
//! On the wire each event is exactly `data: <json>\n\n` ([`encode_sse`]); there is no `event:`
//! line and no end marker (the response ends when the stream closes).
//!
//! ```
//! use bridge_core::agui::events::{encode_sse, AguiEvent};
//! let event = AguiEvent::TextMessageContent { message_id: "m1".into(), delta: "Hi".into() };
//! assert_eq!(
//!     encode_sse(&event),
//!     "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"Hi\"}\n\n"
//! );
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// `developer`.
    Developer,
    /// `system`.
    System,
    /// `assistant`.
    Assistant,
    /// `user`.
    User,
    /// `tool` (`TOOL_CALL_RESULT`).
    Tool,
    /// `reasoning` (`REASONING_MESSAGE_START`).
    Reasoning,
}

/// What an encrypted value belongs to (`REASONING_ENCRYPTED_VALUE.subtype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EncryptedSubtype {
    /// `tool-call`.
    ToolCall,
    /// `message`.
    Message,
}

/// Token usage of a run (`RUN_FINISHED.usage`, `RUN_ERROR.usage`). Counts are non-negative.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// `anthropic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// All prompt tokens, cached ones included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// `inputTokens + outputTokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Reasoning tokens, when reported apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// The part of `inputTokens` read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
}

/// One AG-UI event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AguiEvent {
    /// The run began; always first.
    #[serde(rename_all = "camelCase")]
    RunStarted {
        /// The conversation.
        thread_id: String,
        /// This run.
        run_id: String,
        /// The run that started this one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_run_id: Option<String>,
        /// The `RunAgentInput` the run answers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
    },
    /// The run ended normally; nothing but a new `RUN_STARTED` may follow.
    #[serde(rename_all = "camelCase")]
    RunFinished {
        /// The conversation.
        thread_id: String,
        /// This run.
        run_id: String,
        /// The run's result.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// `{type:"success"}` or `{type:"interrupt", interrupts}`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Value>,
        /// Token usage, per model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<TokenUsage>>,
    },
    /// The run failed; nothing may follow.
    #[serde(rename_all = "camelCase")]
    RunError {
        /// What went wrong.
        message: String,
        /// A machine-readable code.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        /// Token usage, per model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<TokenUsage>>,
    },
    /// A named step began.
    #[serde(rename_all = "camelCase")]
    StepStarted {
        /// The step.
        step_name: String,
    },
    /// A named step ended.
    #[serde(rename_all = "camelCase")]
    StepFinished {
        /// The step.
        step_name: String,
    },
    /// A text message opens.
    #[serde(rename_all = "camelCase")]
    TextMessageStart {
        /// The message.
        message_id: String,
        /// Its author (the client assumes `assistant` when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<Role>,
        /// The author's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A piece of an open text message (never empty).
    #[serde(rename_all = "camelCase")]
    TextMessageContent {
        /// The message.
        message_id: String,
        /// The text.
        delta: String,
    },
    /// A text message is complete.
    #[serde(rename_all = "camelCase")]
    TextMessageEnd {
        /// The message.
        message_id: String,
    },
    /// Start, content and end in one (the client expands it).
    #[serde(rename_all = "camelCase")]
    TextMessageChunk {
        /// The message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// Its author.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<Role>,
        /// The text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
        /// The author's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A tool call opens.
    #[serde(rename_all = "camelCase")]
    ToolCallStart {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_call_name: String,
        /// The assistant message the call belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
    },
    /// A piece of an open call's arguments (JSON text).
    #[serde(rename_all = "camelCase")]
    ToolCallArgs {
        /// The call.
        tool_call_id: String,
        /// The piece.
        delta: String,
    },
    /// A tool call's arguments are complete.
    #[serde(rename_all = "camelCase")]
    ToolCallEnd {
        /// The call.
        tool_call_id: String,
    },
    /// Start, arguments and end in one (the client expands it).
    #[serde(rename_all = "camelCase")]
    ToolCallChunk {
        /// The call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// The tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_name: Option<String>,
        /// The assistant message the call belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
        /// A piece of the arguments.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
    },
    /// A tool call's result, as a `tool` message.
    #[serde(rename_all = "camelCase")]
    ToolCallResult {
        /// The tool message.
        message_id: String,
        /// The call it answers.
        tool_call_id: String,
        /// The result text.
        content: String,
        /// `tool`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<Role>,
    },
    /// A reasoning span opens.
    #[serde(rename_all = "camelCase")]
    ReasoningStart {
        /// The span (and the reasoning message inside it).
        message_id: String,
    },
    /// A reasoning message opens.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageStart {
        /// The message.
        message_id: String,
        /// `reasoning`.
        role: Role,
    },
    /// A piece of an open reasoning message.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageContent {
        /// The message.
        message_id: String,
        /// The text.
        delta: String,
    },
    /// A reasoning message is complete.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageEnd {
        /// The message.
        message_id: String,
    },
    /// Start, content and end of a reasoning message in one.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageChunk {
        /// The message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// The text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
    },
    /// A reasoning span is complete.
    #[serde(rename_all = "camelCase")]
    ReasoningEnd {
        /// The span.
        message_id: String,
    },
    /// An opaque value to send back with the entity on the next run (a thinking signature).
    #[serde(rename_all = "camelCase")]
    ReasoningEncryptedValue {
        /// What `entityId` names.
        subtype: EncryptedSubtype,
        /// The message or tool call.
        entity_id: String,
        /// The value.
        encrypted_value: String,
    },
    /// The agent's whole state.
    #[serde(rename_all = "camelCase")]
    StateSnapshot {
        /// The state.
        snapshot: Value,
    },
    /// A JSON Patch (RFC 6902) on the agent's state.
    #[serde(rename_all = "camelCase")]
    StateDelta {
        /// The patch operations.
        delta: Vec<Value>,
    },
    /// The whole message list.
    #[serde(rename_all = "camelCase")]
    MessagesSnapshot {
        /// The messages.
        messages: Vec<Value>,
    },
    /// An activity message's whole content.
    #[serde(rename_all = "camelCase")]
    ActivitySnapshot {
        /// The activity message.
        message_id: String,
        /// The kind of activity.
        activity_type: String,
        /// Its content.
        content: Value,
        /// Replace an existing message with this id (default true).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replace: Option<bool>,
    },
    /// A JSON Patch on an activity message's content.
    #[serde(rename_all = "camelCase")]
    ActivityDelta {
        /// The activity message.
        message_id: String,
        /// The kind of activity.
        activity_type: String,
        /// The patch operations.
        patch: Vec<Value>,
    },
    /// An event of the underlying system, passed through.
    #[serde(rename_all = "camelCase")]
    Raw {
        /// The event.
        event: Value,
        /// Where it came from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    /// An application-defined event.
    #[serde(rename_all = "camelCase")]
    Custom {
        /// Its name.
        name: String,
        /// Its value.
        value: Value,
    },
}

impl AguiEvent {
    /// The wire `type` (`RUN_STARTED`, `TEXT_MESSAGE_CONTENT`, …).
    #[must_use]
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::RunStarted { .. } => "RUN_STARTED",
            Self::RunFinished { .. } => "RUN_FINISHED",
            Self::RunError { .. } => "RUN_ERROR",
            Self::StepStarted { .. } => "STEP_STARTED",
            Self::StepFinished { .. } => "STEP_FINISHED",
            Self::TextMessageStart { .. } => "TEXT_MESSAGE_START",
            Self::TextMessageContent { .. } => "TEXT_MESSAGE_CONTENT",
            Self::TextMessageEnd { .. } => "TEXT_MESSAGE_END",
            Self::TextMessageChunk { .. } => "TEXT_MESSAGE_CHUNK",
            Self::ToolCallStart { .. } => "TOOL_CALL_START",
            Self::ToolCallArgs { .. } => "TOOL_CALL_ARGS",
            Self::ToolCallEnd { .. } => "TOOL_CALL_END",
            Self::ToolCallChunk { .. } => "TOOL_CALL_CHUNK",
            Self::ToolCallResult { .. } => "TOOL_CALL_RESULT",
            Self::ReasoningStart { .. } => "REASONING_START",
            Self::ReasoningMessageStart { .. } => "REASONING_MESSAGE_START",
            Self::ReasoningMessageContent { .. } => "REASONING_MESSAGE_CONTENT",
            Self::ReasoningMessageEnd { .. } => "REASONING_MESSAGE_END",
            Self::ReasoningMessageChunk { .. } => "REASONING_MESSAGE_CHUNK",
            Self::ReasoningEnd { .. } => "REASONING_END",
            Self::ReasoningEncryptedValue { .. } => "REASONING_ENCRYPTED_VALUE",
            Self::StateSnapshot { .. } => "STATE_SNAPSHOT",
            Self::StateDelta { .. } => "STATE_DELTA",
            Self::MessagesSnapshot { .. } => "MESSAGES_SNAPSHOT",
            Self::ActivitySnapshot { .. } => "ACTIVITY_SNAPSHOT",
            Self::ActivityDelta { .. } => "ACTIVITY_DELTA",
            Self::Raw { .. } => "RAW",
            Self::Custom { .. } => "CUSTOM",
        }
    }
}

/// One event as Server-Sent Events bytes: exactly `data: <json>\n\n`.
///
/// JSON text never contains a raw line break (serde escapes them), so one `data:` line is always
/// enough.
#[must_use]
pub fn encode_sse(event: &AguiEvent) -> String {
    // Serializing these types cannot fail: every map key is a string.
    let json = serde_json::to_string(event).unwrap_or_default();
    format!("data: {json}\n\n")
}

/// Several events as SSE bytes, in order.
#[must_use]
pub fn encode_sse_all(events: &[AguiEvent]) -> String {
    events.iter().map(encode_sse).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn wire_fields_are_camel_case_and_omit_none() {
        let start = AguiEvent::ToolCallStart {
            tool_call_id: "t1".into(),
            tool_call_name: "Bash".into(),
            parent_message_id: None,
        };
        assert_eq!(
            serde_json::to_value(&start).unwrap(),
            json!({"type":"TOOL_CALL_START","toolCallId":"t1","toolCallName":"Bash"})
        );
        let finished = AguiEvent::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            result: None,
            outcome: None,
            usage: Some(vec![TokenUsage {
                provider: Some("anthropic".into()),
                cached_input_tokens: Some(3),
                ..TokenUsage::default()
            }]),
        };
        assert_eq!(
            serde_json::to_string(&finished).unwrap(),
            r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r","usage":[{"provider":"anthropic","cachedInputTokens":3}]}"#
        );
    }

    #[test]
    fn reasoning_events_use_the_1_0_names() {
        let events = [
            AguiEvent::ReasoningMessageStart {
                message_id: "m".into(),
                role: Role::Reasoning,
            },
            AguiEvent::ReasoningEncryptedValue {
                subtype: EncryptedSubtype::ToolCall,
                entity_id: "t".into(),
                encrypted_value: "sig".into(),
            },
        ];
        assert_eq!(
            encode_sse_all(&events),
            "data: {\"type\":\"REASONING_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"reasoning\"}\n\n\
             data: {\"type\":\"REASONING_ENCRYPTED_VALUE\",\"subtype\":\"tool-call\",\"entityId\":\"t\",\"encryptedValue\":\"sig\"}\n\n"
        );
    }

    #[test]
    fn type_name_matches_the_serialized_type() {
        let events = [
            AguiEvent::StepStarted {
                step_name: "s".into(),
            },
            AguiEvent::TextMessageChunk {
                message_id: None,
                role: None,
                delta: None,
                name: None,
            },
            AguiEvent::ToolCallResult {
                message_id: "m".into(),
                tool_call_id: "t".into(),
                content: "c".into(),
                role: Some(Role::Tool),
            },
            AguiEvent::ReasoningMessageChunk {
                message_id: None,
                delta: None,
            },
            AguiEvent::StateDelta { delta: vec![] },
            AguiEvent::MessagesSnapshot { messages: vec![] },
            AguiEvent::ActivityDelta {
                message_id: "m".into(),
                activity_type: "a".into(),
                patch: vec![],
            },
            AguiEvent::Raw {
                event: json!({}),
                source: Some("claude-code".into()),
            },
        ];
        for event in events {
            let value = serde_json::to_value(&event).unwrap();
            assert_eq!(value["type"], event.type_name());
            let back: AguiEvent = serde_json::from_value(value).unwrap();
            assert_eq!(back, event);
        }
    }

    #[test]
    fn line_breaks_stay_inside_one_data_line() {
        let sse = encode_sse(&AguiEvent::TextMessageContent {
            message_id: "m".into(),
            delta: "a\nb\r\n".into(),
        });
        assert_eq!(sse.matches('\n').count(), 2);
        assert!(sse.starts_with("data: {") && sse.ends_with("}\n\n"));
    }
}
