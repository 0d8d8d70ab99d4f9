//! Streaming parser for the raw text a model writes when it is asked for tool calls in plain text
//! (Fabstir hosts stream raw tokens, not OpenAI `tool_calls`).
//!
//! It splits the text into [`Piece`]s: reasoning, text and complete tool calls. Partial input is
//! normal: a tag split across tokens anywhere (`<to` + `ol_call>`) is held back until it is
//! decided, and a false start (`<tool`, `x < y`) is flushed as text. Nothing is ever dropped: a
//! call that cannot be parsed comes out as its original text, tags included.
//!
//! Recognised, in any mix:
//! - a leading `<think>…</think>` → [`Piece::Thinking`] (leading whitespace allowed before it);
//! - `<tool_call>{"name": "...", "arguments": {...}}</tool_call>` (JSON body; `parameters` is
//!   accepted for `arguments`, and `arguments` may be a JSON string holding the object);
//! - `<tool_call>Name<arg_key>k</arg_key><arg_value>v</arg_value>…</tool_call>` (GLM);
//! - `<tool_call><function=Name><parameter=k>v</parameter>…</function></tool_call>` (Qwen3-Coder).
//!
//! In the two XML-ish dialects every value arrives as text: a parameter whose schema type is
//! `string` ([`ToolHint::string_params`]) stays text, any other value is read as JSON when it
//! parses (`42`, `true`, `["a"]`) and kept as text otherwise.
//!
//! Whitespace at the edges of a text or reasoning segment (between tool calls, around
//! `<think>…</think>`, at the end) is dropped, so a reply renders as the blocks a model meant, not
//! as stray newlines; whitespace inside a segment is kept.
//!
//! ```text
//!   Start ──"<think>"──► Thinking ──"</think>"──► Text ◄──"</tool_call>"── Call
//!     └──── anything else ───────────────────────► Text ──"<tool_call>"──► Call
//! ```
//!
//! ```
//! use bridge_core::chatml::tool_calls::{Piece, ToolCallParser, ToolHint};
//! // The request offered Bash (with no tools offered, `<tool_call>` is plain text).
//! let mut p = ToolCallParser::new(vec![ToolHint::from_schema("Bash", None)]);
//! let mut pieces = Vec::new();
//! for token in ["<think>plan</think>\n\nOK.", "\n<tool", "_call>{\"name\":\"Bash\",", "\"arguments\":{\"command\":\"ls\"}}</tool_call>"] {
//!     pieces.extend(p.feed(token));
//! }
//! pieces.extend(p.finish());
//! assert_eq!(pieces[0], Piece::Thinking("plan".into()));
//! assert_eq!(pieces[1], Piece::Text("OK.".into()));
//! assert_eq!(pieces[2], Piece::ToolCall { name: "Bash".into(), input: serde_json::json!({"command": "ls"}) });
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";
const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";

/// What the parser knows about one tool, to type the values of the XML-ish dialects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolHint {
    /// The tool's name.
    pub name: String,
    /// Parameters whose schema type is `string`: their values are never read as JSON.
    #[serde(default)]
    pub string_params: Vec<String>,
}

impl ToolHint {
    /// The hint for a tool with this input schema.
    #[must_use]
    pub fn from_schema(name: &str, schema: Option<&Value>) -> Self {
        let string_params = schema
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .filter(|(_, p)| p.get("type").and_then(Value::as_str) == Some("string"))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        Self {
            name: name.to_owned(),
            string_params,
        }
    }
}

/// One decided part of the model's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Reasoning text (inside the leading `<think>`).
    Thinking(String),
    /// Answer text.
    Text(String),
    /// A complete, parsed tool call.
    ToolCall {
        /// The tool's name.
        name: String,
        /// Its arguments (always a JSON object).
        input: Value,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Nothing decided yet: a `<think>` may still open.
    Start,
    Thinking,
    Text,
    /// Inside `<tool_call>`: the body is collected until `</tool_call>`.
    Call,
}

/// The parser's state between tokens.
#[derive(Debug)]
pub struct ToolCallParser {
    mode: Mode,
    /// Undecided input: a possible tag prefix, or a call body.
    buf: String,
    /// In a call, how much of `buf` is known not to hold `</tool_call>` (a long body is searched
    /// once, not again on every token).
    call_scanned: usize,
    /// Whitespace held back until non-whitespace text follows it.
    pending_ws: String,
    /// Whether the current text segment has emitted anything (leading whitespace is dropped).
    segment_started: bool,
    hints: Vec<ToolHint>,
}

impl ToolCallParser {
    /// Bytes held back, undecided (a call body not closed yet, whitespace).
    #[must_use]
    pub fn held(&self) -> usize {
        self.buf.len() + self.pending_ws.len()
    }

    /// A parser at the start of a reply, with the tools the request offered. With none,
    /// `<tool_call>` is plain text.
    #[must_use]
    pub fn new(hints: Vec<ToolHint>) -> Self {
        Self {
            mode: Mode::Start,
            buf: String::new(),
            call_scanned: 0,
            pending_ws: String::new(),
            segment_started: false,
            hints,
        }
    }

    /// Feed the next piece of model text; returns what it decides.
    pub fn feed(&mut self, text: &str) -> Vec<Piece> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        while self.step(&mut out) {}
        out
    }

    /// The reply ended: everything still held is decided (an unclosed call whose body is
    /// visibly complete is a call; anything else is text).
    pub fn finish(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.buf);
        match self.mode {
            Mode::Start | Mode::Text => self.text(&rest, &mut out),
            Mode::Thinking => self.segment(true, &rest, &mut out),
            Mode::Call => match self.parse_unclosed_call(&rest) {
                Some(call) => self.call(call, &mut out),
                None => self.text(&format!("{CALL_OPEN}{rest}"), &mut out),
            },
        }
        self.mode = Mode::Text;
        self.pending_ws.clear();
        out
    }

    /// Decide what can be decided in `buf`; `true` when it changed mode (run again).
    fn step(&mut self, out: &mut Vec<Piece>) -> bool {
        match self.mode {
            Mode::Start => {
                let trimmed = self.buf.trim_start();
                if let Some(rest) = trimmed.strip_prefix(THINK_OPEN) {
                    self.buf = rest.to_owned();
                    self.mode = Mode::Thinking;
                    true
                } else if THINK_OPEN.starts_with(trimmed) {
                    false // only whitespace, or a prefix of `<think>`: wait
                } else {
                    self.mode = Mode::Text;
                    true
                }
            }
            Mode::Thinking => {
                if let Some(at) = self.buf.find(THINK_CLOSE) {
                    let thinking: String = self.buf.drain(..at + THINK_CLOSE.len()).collect();
                    self.segment(true, &thinking[..at], out);
                    self.pending_ws.clear();
                    self.segment_started = false;
                    self.mode = Mode::Text;
                    true
                } else {
                    let keep = partial_tag_len(&self.buf, THINK_CLOSE);
                    let ready: String = self.buf.drain(..self.buf.len() - keep).collect();
                    self.segment(true, &ready, out);
                    false
                }
            }
            Mode::Text if self.hints.is_empty() => {
                // No tools were offered (a title or summary request): a `<tool_call>` the
                // model writes anyway is text, never a call the client cannot answer.
                let ready = std::mem::take(&mut self.buf);
                self.text(&ready, out);
                false
            }
            Mode::Text => {
                if let Some(at) = self.buf.find(CALL_OPEN) {
                    let before: String = self.buf.drain(..at + CALL_OPEN.len()).collect();
                    self.text(&before[..at], out);
                    self.mode = Mode::Call;
                    self.call_scanned = 0;
                    true
                } else {
                    let keep = partial_tag_len(&self.buf, CALL_OPEN);
                    let ready: String = self.buf.drain(..self.buf.len() - keep).collect();
                    self.text(&ready, out);
                    false
                }
            }
            Mode::Call => {
                // The tag may straddle the end of what was scanned: step back by its length.
                let mut from = self.call_scanned.saturating_sub(CALL_CLOSE.len() - 1);
                while !self.buf.is_char_boundary(from) {
                    from -= 1;
                }
                let Some(at) = self.buf[from..].find(CALL_CLOSE).map(|at| from + at) else {
                    self.call_scanned = self.buf.len();
                    return false;
                };
                let body: String = self.buf.drain(..at + CALL_CLOSE.len()).collect();
                let body = &body[..at];
                match self.parse_call(body) {
                    Some(call) => self.call(call, out),
                    // Malformed: the model's text, exactly as written, in the running text.
                    None => self.text(&format!("{CALL_OPEN}{body}{CALL_CLOSE}"), out),
                }
                self.mode = Mode::Text;
                true
            }
        }
    }

    /// A call ends the text segment: whitespace held before it is dropped.
    fn call(&mut self, call: Piece, out: &mut Vec<Piece>) {
        self.pending_ws.clear();
        self.segment_started = false;
        out.push(call);
    }

    /// Emit answer text (see [`Self::segment`]).
    fn text(&mut self, text: &str, out: &mut Vec<Piece>) {
        self.segment(false, text, out);
    }

    /// Emit text or reasoning, holding trailing whitespace and dropping a segment's leading
    /// whitespace.
    fn segment(&mut self, thinking: bool, text: &str, out: &mut Vec<Piece>) {
        if text.is_empty() {
            return;
        }
        let mut combined = std::mem::take(&mut self.pending_ws);
        combined.push_str(text);
        let body = if self.segment_started {
            combined.as_str()
        } else {
            combined.trim_start()
        };
        let trimmed = body.trim_end();
        if trimmed.is_empty() {
            if self.segment_started {
                self.pending_ws = body.to_owned();
            }
            return;
        }
        self.pending_ws = body[trimmed.len()..].to_owned();
        self.segment_started = true;
        match (out.last_mut(), thinking) {
            (Some(Piece::Text(last)), false) | (Some(Piece::Thinking(last)), true) => {
                last.push_str(trimmed);
            }
            (_, false) => out.push(Piece::Text(trimmed.to_owned())),
            (_, true) => out.push(Piece::Thinking(trimmed.to_owned())),
        }
    }

    /// A call cut off by the end of the reply (models often stop right before `</tool_call>`):
    /// a call only when its body is visibly complete — a whole JSON object, or a Qwen3-Coder body
    /// ending with `</function>`. A GLM body cannot show that it is complete.
    fn parse_unclosed_call(&self, body: &str) -> Option<Piece> {
        let trimmed = body.trim();
        let complete = trimmed.starts_with('{')
            || (trimmed.starts_with("<function=") && trimmed.ends_with("</function>"));
        if complete {
            self.parse_call(body)
        } else {
            None
        }
    }

    fn parse_call(&self, body: &str) -> Option<Piece> {
        let body = body.trim();
        let (name, input) = if body.starts_with('{') {
            json_call(body)?
        } else if let Some(rest) = body.strip_prefix("<function=") {
            self.qwen_call(rest)?
        } else {
            self.glm_call(body)?
        };
        let name = name.trim();
        if name.is_empty() || name.contains(['<', '>', '\n', '{']) {
            return None;
        }
        Some(Piece::ToolCall {
            name: name.to_owned(),
            input: Value::Object(input),
        })
    }

    /// `Name<arg_key>k</arg_key><arg_value>v</arg_value>…`
    fn glm_call(&self, body: &str) -> Option<(String, Map<String, Value>)> {
        let (name, mut rest) = match body.find("<arg_key>") {
            Some(at) => (&body[..at], &body[at..]),
            None => (body, ""),
        };
        let mut args = Map::new();
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let key;
            (key, rest) = between(rest, "<arg_key>", "</arg_key>")?;
            rest = rest.trim_start();
            let value;
            (value, rest) = between(rest, "<arg_value>", "</arg_value>")?;
            let key = key.trim();
            args.insert(key.to_owned(), self.typed_value(name.trim(), key, value));
        }
        Some((name.to_owned(), args))
    }

    /// `Name>\n<parameter=k>\nv\n</parameter>…</function>` (after `<function=`).
    fn qwen_call(&self, rest: &str) -> Option<(String, Map<String, Value>)> {
        let (name, mut rest) = rest.split_once('>')?;
        let mut args = Map::new();
        loop {
            rest = rest.trim_start();
            if rest.is_empty() || rest == "</function>" {
                break;
            }
            let tail = rest.strip_prefix("<parameter=")?;
            let (key, after) = tail.split_once('>')?;
            let (value, after) = after.split_once("</parameter>")?;
            // The template puts the value on its own lines.
            let value = value.strip_prefix('\n').unwrap_or(value);
            let value = value.strip_suffix('\n').unwrap_or(value);
            args.insert(
                key.trim().to_owned(),
                self.typed_value(name.trim(), key.trim(), value),
            );
            rest = after;
        }
        Some((name.to_owned(), args))
    }

    fn typed_value(&self, tool: &str, key: &str, value: &str) -> Value {
        let is_string = self
            .hints
            .iter()
            .find(|h| h.name == tool)
            .is_some_and(|h| h.string_params.iter().any(|p| p == key));
        if !is_string && let Ok(parsed) = serde_json::from_str::<Value>(value.trim()) {
            return parsed;
        }
        Value::String(value.to_owned())
    }
}

/// `{"name": …, "arguments"|"parameters": {…} or "<json object>"}`
fn json_call(body: &str) -> Option<(String, Map<String, Value>)> {
    let Value::Object(mut call) = serde_json::from_str::<Value>(body).ok()? else {
        return None;
    };
    let name = match call.remove("name")? {
        Value::String(name) => name,
        _ => return None,
    };
    let args = call
        .remove("arguments")
        .or_else(|| call.remove("parameters"))
        .unwrap_or_else(|| Value::Object(Map::new()));
    let args = match args {
        Value::Object(map) => map,
        Value::String(text) if text.trim().is_empty() => Map::new(),
        Value::String(text) => match serde_json::from_str::<Value>(&text).ok()? {
            Value::Object(map) => map,
            _ => return None,
        },
        Value::Null => Map::new(),
        _ => return None,
    };
    Some((name, args))
}

/// The text between `open` and `close` at the start of `s`, and what follows `close`.
fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<(&'a str, &'a str)> {
    let rest = s.strip_prefix(open)?;
    let at = rest.find(close)?;
    Some((&rest[..at], &rest[at + close.len()..]))
}

/// Length of the longest suffix of `buf` that is a proper prefix of `tag` (held back: the next
/// token may complete the tag).
fn partial_tag_len(buf: &str, tag: &str) -> usize {
    let max = buf.len().min(tag.len() - 1);
    (1..=max)
        .rev()
        .find(|&n| buf.is_char_boundary(buf.len() - n) && tag.starts_with(&buf[buf.len() - n..]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A request that offered a tool (its name unused by these replies).
    fn offered() -> Vec<ToolHint> {
        vec![ToolHint {
            name: "Other".into(),
            string_params: Vec::new(),
        }]
    }

    fn run(tokens: &[&str], hints: Vec<ToolHint>) -> Vec<Piece> {
        let mut p = ToolCallParser::new(hints);
        let mut out: Vec<Piece> = Vec::<Piece>::new();
        for t in tokens {
            merge(&mut out, p.feed(t));
        }
        merge(&mut out, p.finish());
        out
    }

    /// Consecutive text or thinking pieces joined (how a reader sees them).
    fn merge(out: &mut Vec<Piece>, more: Vec<Piece>) {
        for piece in more {
            match (out.last_mut(), piece) {
                (Some(Piece::Text(a)), Piece::Text(b)) => a.push_str(&b),
                (Some(Piece::Thinking(a)), Piece::Thinking(b)) => a.push_str(&b),
                (_, piece) => out.push(piece),
            }
        }
    }

    fn bash(cmd: &str) -> Piece {
        Piece::ToolCall {
            name: "Bash".into(),
            input: json!({ "command": cmd }),
        }
    }

    #[test]
    fn without_offered_tools_a_tool_call_is_text() {
        let reply = "Title: <tool_call>{\"name\":\"Bash\",\"arguments\":{}}</tool_call>";
        for split in [reply.len(), 10, 20] {
            assert_eq!(
                run(&[&reply[..split], &reply[split..]], Vec::new()),
                vec![Piece::Text(reply.into())],
                "split at {split}"
            );
        }
        assert_eq!(
            run(&["<think>t</think> ", "<tool_call>x"], Vec::new()),
            vec![
                Piece::Thinking("t".into()),
                Piece::Text("<tool_call>x".into())
            ]
        );
    }

    #[test]
    fn every_split_point_gives_the_same_pieces() {
        let inputs = [
            "  <think>step 1\nstep 2</think>\n\nI will list.\n<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>\n<tool_call>Bash<arg_key>command</arg_key><arg_value>pwd</arg_value></tool_call>",
            "a < b and <tool but not a call; <tool_call><function=Bash>\n<parameter=command>\necho é\n</parameter>\n</function>\n</tool_call> done",
        ];
        for input in inputs {
            let whole = run(&[input], offered());
            for (i, _) in input.char_indices() {
                assert_eq!(
                    run(&[&input[..i], &input[i..]], offered()),
                    whole,
                    "split at {i}"
                );
            }
            let chars: Vec<String> = input.chars().map(String::from).collect();
            let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
            assert_eq!(run(&refs, offered()), whole, "char by char");
        }
    }

    #[test]
    fn three_dialects_and_thinking() {
        let got = run(
            &[
                "  <think>step 1\nstep 2</think>\n\nI will list.\n<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>\n",
                "<tool_call>Bash<arg_key>command</arg_key><arg_value>pwd</arg_value></tool_call>",
                "\n<tool_call>\n<function=Bash>\n<parameter=command>\necho hi\n</parameter>\n</function>\n</tool_call>\n",
            ],
            offered(),
        );
        assert_eq!(
            got,
            vec![
                Piece::Thinking("step 1\nstep 2".into()),
                Piece::Text("I will list.".into()),
                bash("ls"),
                bash("pwd"),
                bash("echo hi"),
            ]
        );
    }

    #[test]
    fn false_starts_are_text() {
        assert_eq!(
            run(
                &["if x <", " y then <tool", " stays text <tool_cal"],
                offered()
            ),
            vec![Piece::Text(
                "if x < y then <tool stays text <tool_cal".into()
            )]
        );
        assert_eq!(
            run(&["<thin", "g> is not thinking"], offered()),
            vec![Piece::Text("<thing> is not thinking".into())]
        );
    }

    #[test]
    fn malformed_calls_are_kept_as_text() {
        let broken =
            "Try: <tool_call>{\"name\": \"Bash\", \"arguments\": {\"command\": }</tool_call> ok";
        assert_eq!(run(&[broken], offered()), vec![Piece::Text(broken.into())]);
        let unclosed = "<tool_call>{\"name\": \"Bash\", \"argu";
        assert_eq!(
            run(&[unclosed], offered()),
            vec![Piece::Text(unclosed.into())]
        );
        let no_name = "<tool_call>{\"arguments\": {}}</tool_call>";
        assert_eq!(
            run(&[no_name], offered()),
            vec![Piece::Text(no_name.into())]
        );
    }

    #[test]
    fn an_unclosed_glm_call_is_text() {
        assert_eq!(
            run(
                &["x<tool_call>Bash<arg_key>command</arg_key><arg_value>ls</arg_value>"],
                offered()
            ),
            vec![Piece::Text(
                "x<tool_call>Bash<arg_key>command</arg_key><arg_value>ls</arg_value>".into()
            )]
        );
        assert_eq!(
            run(
                &["<tool_call><function=Bash><parameter=command>ls</parameter></function>"],
                offered()
            ),
            vec![bash("ls")]
        );
    }

    #[test]
    fn an_unclosed_call_that_parses_is_a_call() {
        assert_eq!(
            run(
                &["<tool_call>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}"],
                offered()
            ),
            vec![bash("ls")]
        );
    }

    #[test]
    fn arguments_as_a_string_and_parameters() {
        assert_eq!(
            run(
                &[
                    "<tool_call>{\"name\":\"Bash\",\"arguments\":\"{\\\"command\\\":\\\"ls\\\"}\"}</tool_call>"
                ],
                offered()
            ),
            vec![bash("ls")]
        );
        assert_eq!(
            run(
                &["<tool_call>{\"name\":\"Bash\",\"parameters\":{\"command\":\"ls\"}}</tool_call>"],
                offered()
            ),
            vec![bash("ls")]
        );
    }

    #[test]
    fn values_are_typed_by_the_schema() {
        let hint = ToolHint::from_schema(
            "Read",
            Some(
                &json!({"properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}}),
            ),
        );
        assert_eq!(hint.string_params, vec!["path".to_owned()]);
        let got = run(
            &[
                "<tool_call>Read<arg_key>path</arg_key><arg_value>42</arg_value><arg_key>limit</arg_key><arg_value>10</arg_value><arg_key>other</arg_key><arg_value>[1, 2]</arg_value></tool_call>",
            ],
            vec![hint],
        );
        assert_eq!(
            got,
            vec![Piece::ToolCall {
                name: "Read".into(),
                input: json!({"path": "42", "limit": 10, "other": [1, 2]}),
            }]
        );
    }

    #[test]
    fn whitespace_only_text_around_calls_is_dropped_but_inner_spacing_kept() {
        let got = run(
            &[
                "\n\nLine one\n\nline two  ",
                "\n<tool_call>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}</tool_call>\n\n",
            ],
            offered(),
        );
        assert_eq!(
            got,
            vec![Piece::Text("Line one\n\nline two".into()), bash("ls")]
        );
        assert_eq!(run(&["  \n "], offered()), Vec::<Piece>::new());
    }

    #[test]
    fn a_long_call_fed_token_by_token_is_one_call() {
        let content = "line of a file\n".repeat(2000);
        let call =
            serde_json::to_string(&json!({"name": "Write", "arguments": {"content": content}}))
                .unwrap_or_default();
        let text = format!("Writing.<tool_call>{call}</tool_call>");
        let chars: Vec<char> = text.chars().collect();
        let tokens: Vec<String> = chars.chunks(3).map(|c| c.iter().collect()).collect();
        let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
        assert_eq!(
            run(&refs, offered()),
            vec![
                Piece::Text("Writing.".into()),
                Piece::ToolCall {
                    name: "Write".into(),
                    input: json!({ "content": content })
                }
            ]
        );
    }

    #[test]
    fn thinking_that_never_closes_is_thinking() {
        assert_eq!(
            run(&["<think>still going</thi"], offered()),
            vec![Piece::Thinking("still going</thi".into())]
        );
    }
}
