//! What a Responses client's tools are called on the way back.
//!
//! An upstream model sees one flat list of tools, each with one name. A Responses client may
//! give its tools in shapes that list does not have, and expects its calls back in the same
//! shape:
//! - a `custom` tool (Codex's `apply_patch`, the lite models' `exec`) takes raw text: its call goes
//!   back as a `custom_tool_call` item, not a `function_call`;
//! - a tool inside a `namespace` tool (Codex's `additional_tools` input item groups its tools
//!   as `functions`, `clock`, `collaboration`, …) is offered upstream under its own name — or,
//!   when two namespaces hold the same name, as `{namespace}_{name}` — and its call goes back
//!   with the client's `name` and `namespace`.
//!
//! [`ResponsesTools`] carries both facts from the request converter to the stream encoder; its
//! JSON fields (`custom_tools`, `namespaced_tools`) sit flat in the facade's front options.
//!
//! ```
//! use bridge_core::front::client_tools::{NamespacedTool, ResponsesTools};
//! let tools = ResponsesTools {
//!     custom_tools: vec!["exec".into()],
//!     namespaced_tools: vec![NamespacedTool {
//!         sent: "exec".into(), namespace: "functions".into(), name: "exec".into() }],
//! };
//! assert!(tools.is_custom("exec"));
//! assert_eq!(tools.client_name("exec"), (Some("functions"), "exec"));
//! assert_eq!(tools.client_name("shell"), (None, "shell"));
//! ```

use serde::{Deserialize, Serialize};

use crate::front::facade::null_as_default;

/// A tool the client gave inside a namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespacedTool {
    /// The name the upstream model was offered (and calls it by).
    pub sent: String,
    /// The client's namespace.
    pub namespace: String,
    /// The tool's name within its namespace.
    pub name: String,
}

/// How the Responses encoder gives a call back: see the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponsesTools {
    /// Names (as offered upstream) of `custom` tools: their calls go back as `custom_tool_call`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub custom_tools: Vec<String>,
    /// Tools that came inside a namespace.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub namespaced_tools: Vec<NamespacedTool>,
}

impl ResponsesTools {
    /// Whether the tool offered as `sent` is a `custom` tool.
    #[must_use]
    pub fn is_custom(&self, sent: &str) -> bool {
        self.custom_tools.iter().any(|c| c == sent)
    }

    /// The client's namespace (if any) and name for the tool offered as `sent`.
    #[must_use]
    pub fn client_name<'a>(&'a self, sent: &'a str) -> (Option<&'a str>, &'a str) {
        self.namespaced_tools
            .iter()
            .find(|t| t.sent == sent)
            .map_or((None, sent), |t| {
                (Some(t.namespace.as_str()), t.name.as_str())
            })
    }

    /// The name a call of the client's `name` in `namespace` was offered under (a history item
    /// names its tool the client's way).
    #[must_use]
    pub fn sent_name<'a>(&'a self, namespace: Option<&str>, name: &'a str) -> &'a str {
        match namespace {
            Some(ns) => self
                .namespaced_tools
                .iter()
                .find(|t| t.namespace == ns && t.name == name)
                .map_or(name, |t| t.sent.as_str()),
            None => name,
        }
    }
}
