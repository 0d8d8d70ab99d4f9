//! Tool names an OpenAI-style upstream takes, and the client's names back.
//!
//! Claude Code names MCP tools `mcp__<server>__<tool>` (a plugin's `mcp__plugin_<plugin>_<server>__<tool>`),
//! often longer than 64 characters and sometimes with `.` or other characters. OpenAI, vLLM's
//! adapter and others refuse any function name that does not match `^[a-zA-Z0-9_-]{1,64}$`, so
//! one such tool would make every turn fail. [`ToolNames`] gives each name that does not match a
//! short one that does — deterministic, readable (its head and tail kept) and marked by a hash of
//! the whole name — and keeps the pairs, so the request's tools, `tool_choice` and history go up
//! under the short names and the calls that come back are named the client's way again. A name
//! that matches is sent as it is.
//!
//! ```
//! use bridge_core::translate::tool_names::{ToolNames, acceptable};
//! let long = "mcp__plugin_acme-observability_grafana-cloud__query_prometheus_range_with_labels.v2";
//! let names = ToolNames::for_names([long, "Bash"]);
//! let sent = names.upstream(long);
//! assert!(acceptable(sent) && sent.starts_with("mcp__plugin_acme"));
//! assert_eq!(names.client(sent), long);
//! assert_eq!(names.upstream("Bash"), "Bash");
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha3::{Digest, Keccak256};

use crate::anthropic::request::{Block, Content, KnownBlock, MessagesRequest};

/// The longest name such upstreams take.
pub const MAX_LEN: usize = 64;

/// Hex digits of the hash a short name ends with.
const HASH_HEX: usize = 10;

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`.
#[must_use]
pub fn acceptable(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A renamed tool: the name sent upstream and the client's own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolName {
    /// The name the upstream is offered (and calls the tool by).
    pub upstream: String,
    /// The client's name.
    pub client: String,
}

/// The renamed tools of one request (names that were acceptable are not listed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ToolNames {
    renamed: Vec<ToolName>,
}

impl ToolNames {
    /// Short names for those of `names` an upstream would refuse, none equal to another name
    /// of the set (given or made).
    pub fn for_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let names: Vec<&str> = names.into_iter().collect();
        let mut taken: Vec<String> = names
            .iter()
            .filter(|n| acceptable(n))
            .map(|n| (*n).to_owned())
            .collect();
        let mut renamed: Vec<ToolName> = Vec::new();
        for name in names {
            if acceptable(name) || renamed.iter().any(|r| r.client == name) {
                continue;
            }
            let mut salt = 0u32;
            let upstream = loop {
                let candidate = short_name(name, salt);
                if !taken.contains(&candidate) {
                    break candidate;
                }
                salt += 1;
            };
            taken.push(upstream.clone());
            renamed.push(ToolName {
                upstream,
                client: name.to_owned(),
            });
        }
        Self { renamed }
    }

    /// Whether no name was changed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.renamed.is_empty()
    }

    /// The renamed tools.
    #[must_use]
    pub fn renamed(&self) -> &[ToolName] {
        &self.renamed
    }

    /// The name to send upstream for the client's `name`.
    #[must_use]
    pub fn upstream<'a>(&'a self, name: &'a str) -> &'a str {
        self.renamed
            .iter()
            .find(|r| r.client == name)
            .map_or(name, |r| r.upstream.as_str())
    }

    /// The client's name for a name the upstream used.
    #[must_use]
    pub fn client<'a>(&'a self, upstream: &'a str) -> &'a str {
        self.renamed
            .iter()
            .find(|r| r.upstream == upstream)
            .map_or(upstream, |r| r.client.as_str())
    }
}

/// Rename, in place, every tool name of `request` an upstream would refuse — its tools, its
/// `tool_choice` and its history's `tool_use` blocks — and return the renames (for the answer's
/// translator, [`crate::api::StreamOptions::tool_names`]).
pub fn rename_request(request: &mut MessagesRequest) -> ToolNames {
    let mut names: Vec<&str> = Vec::new();
    for tool in request.tools.iter().flatten() {
        names.push(&tool.name);
    }
    if let Some(name) = request
        .tool_choice
        .as_ref()
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str)
    {
        names.push(name);
    }
    for message in &request.messages {
        if let Content::Blocks(blocks) = &message.content {
            for block in blocks {
                if let Block::Known(KnownBlock::ToolUse { name, .. }) = block {
                    names.push(name);
                }
            }
        }
    }
    // The usual case: every name is fine, nothing is built.
    if names.iter().all(|n| acceptable(n)) {
        return ToolNames::default();
    }
    let renames = ToolNames::for_names(names);
    if renames.is_empty() {
        return renames;
    }
    for tool in request.tools.iter_mut().flatten() {
        tool.name = renames.upstream(&tool.name).to_owned();
    }
    if let Some(Value::Object(choice)) = request.tool_choice.as_mut()
        && let Some(Value::String(name)) = choice.get_mut("name")
    {
        *name = renames.upstream(name).to_owned();
    }
    for message in &mut request.messages {
        if let Content::Blocks(blocks) = &mut message.content {
            for block in blocks {
                if let Block::Known(KnownBlock::ToolUse { name, .. }) = block {
                    *name = renames.upstream(name).to_owned();
                }
            }
        }
    }
    renames
}

/// `name` made acceptable: every other character as `_`, cut to its head and tail when long,
/// then `_` and the first hex digits of the Keccak-256 of `name` (and `salt`, when not 0).
fn short_name(name: &str, salt: u32) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let room = MAX_LEN - 1 - HASH_HEX;
    let text = if clean.len() <= room {
        clean
    } else {
        // The head says which server, the tail which tool.
        let head = room / 2;
        let tail = room - head - 2;
        format!("{}__{}", &clean[..head], &clean[clean.len() - tail..])
    };
    let mut hasher = Keccak256::new();
    hasher.update(name.as_bytes());
    if salt > 0 {
        hasher.update(salt.to_le_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest
        .iter()
        .take(HASH_HEX / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{text}_{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn long_and_dotted_names_get_readable_short_ones() {
        let long =
            "mcp__plugin_acme-observability_grafana-cloud__query_prometheus_range_with_labels";
        let dotted = "mcp__docs__search.v2";
        let names = ToolNames::for_names([long, dotted, "Read"]);
        let short = names.upstream(long);
        assert_eq!(short.len(), MAX_LEN);
        assert!(short.starts_with("mcp__plugin_acme-observabi"), "{short}");
        assert!(short.contains("range_with_labels_"), "{short}");
        let dot = names.upstream(dotted);
        assert!(dot.starts_with("mcp__docs__search_v2_"), "{dot}");
        assert_eq!(names.renamed().len(), 2);
        assert_eq!(names.client(short), long);
        assert_eq!(names.client(dot), dotted);
        // The same names give the same short names, in any request.
        assert_eq!(ToolNames::for_names([dotted, long]).upstream(long), short);
    }

    #[test]
    fn a_made_name_never_equals_another_tool() {
        let dotted = "a.b";
        let made = short_name(dotted, 0);
        // A client tool already called what the short name would be: the next salt.
        let names = ToolNames::for_names([made.as_str(), dotted]);
        assert_ne!(names.upstream(dotted), made);
        assert!(acceptable(names.upstream(dotted)));
        assert_eq!(names.upstream(&made), made);
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9_-]{1,64}",
            "[a-z_]{1,40}\\.[a-z0-9]{1,40}",
            "mcp__[a-z_-]{1,60}__[a-z_.]{1,60}",
            "\\PC{1,90}",
        ]
    }

    proptest! {
        #[test]
        fn every_name_round_trips_and_none_collide(names in proptest::collection::vec(name(), 1..12)) {
            let tools = ToolNames::for_names(names.iter().map(String::as_str));
            let mut sent = Vec::new();
            for n in &names {
                let up = tools.upstream(n);
                prop_assert!(acceptable(up), "{up:?} for {n:?}");
                prop_assert_eq!(tools.client(up), n.as_str());
                if !sent.contains(&up) {
                    sent.push(up);
                }
            }
            let mut distinct = names.clone();
            distinct.sort();
            distinct.dedup();
            prop_assert_eq!(sent.len(), distinct.len());
        }
    }
}
