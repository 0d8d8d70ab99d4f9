//! What a config error says: the file, the line and column, the key, and what is allowed.

use std::fmt;
use std::path::PathBuf;

/// A place in the file: line and column, both counted from 1 (the column in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1, in characters.
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` of `text` (clamped to the text).
    #[must_use]
    pub fn at(text: &str, offset: usize) -> Self {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Self {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

/// Why a config file cannot be used. Displayed as
/// `FILE:LINE:COLUMN: KEY: MESSAGE` (position and key when known), e.g.
/// ``claude-bridge.toml:7:8: providers.local.kind: unknown kind `olama`; allowed: openai, responses, anthropic, fabstir``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as it was named.
    pub file: PathBuf,
    /// Where in the file, when the error has a place.
    pub position: Option<Position>,
    /// The dotted key at fault (`providers.local.kind`, `router.rules[0].to`), when there is one.
    pub key: Option<String>,
    /// What is wrong, and what is allowed.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(Position { line, column }) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters_from_one() {
        let text = "a = 1\nkéy = \"x\"\n";
        assert_eq!(Position::at(text, 0), Position { line: 1, column: 1 });
        assert_eq!(Position::at(text, 6), Position { line: 2, column: 1 });
        let quote = text.find('"').unwrap();
        assert_eq!(Position::at(text, quote), Position { line: 2, column: 7 });
        assert_eq!(Position::at(text, 999), Position { line: 3, column: 1 });
    }

    #[test]
    fn displays_what_it_knows() {
        let mut e = ConfigError {
            file: PathBuf::from("c.toml"),
            position: Some(Position { line: 7, column: 8 }),
            key: Some("providers.local.kind".into()),
            message: "bad".into(),
        };
        assert_eq!(e.to_string(), "c.toml:7:8: providers.local.kind: bad");
        e.position = None;
        e.key = None;
        assert_eq!(e.to_string(), "c.toml: bad");
    }
}
