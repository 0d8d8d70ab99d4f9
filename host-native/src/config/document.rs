//! The parsed TOML document with its spans: byte ranges ↔ dotted keys, so every error can say
//! both where it is and which key it is about.

use std::ops::Range;
use std::path::Path;

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::{ConfigError, Position};

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A key of a table.
    Key(String),
    /// An element of an array (`[[router.rules]]` entries, `fallback` items).
    Index(usize),
}

impl From<&str> for Segment {
    fn from(key: &str) -> Self {
        Self::Key(key.to_owned())
    }
}

impl From<usize> for Segment {
    fn from(index: usize) -> Self {
        Self::Index(index)
    }
}

/// `providers.local.kind`, `router.rules[0].to`; keys that are not bare TOML keys are quoted.
#[must_use]
pub fn dotted(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                let bare = !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                if bare {
                    out.push_str(key);
                } else {
                    out.push_str(&format!("{key:?}"));
                }
            }
        }
    }
    out
}

/// A config file's text, its name for messages, and its parsed tree.
pub struct Document<'a> {
    text: &'a str,
    file: &'a Path,
    root: Spanned<DeTable<'a>>,
}

impl std::fmt::Debug for Document<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The text may hold literal keys: name the file only.
        f.debug_struct("Document")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl<'a> Document<'a> {
    /// Parse `text`; a syntax error names its line and column.
    ///
    /// # Errors
    /// The text is not TOML.
    pub fn parse(text: &'a str, file: &'a Path) -> Result<Self, ConfigError> {
        let root = DeTable::parse(text).map_err(|e| ConfigError {
            file: file.to_path_buf(),
            position: e.span().map(|s| Position::at(text, s.start)),
            key: None,
            message: format!("not valid TOML: {}", e.message()),
        })?;
        Ok(Self { text, file, root })
    }

    /// The document (`path` empty) or the value at `path` as a `T`, through serde; an error
    /// names its place and the key there.
    ///
    /// # Errors
    /// A value of the wrong type, an unknown or missing key.
    pub fn deserialize<T: DeserializeOwned>(&self, path: &[Segment]) -> Result<T, ConfigError> {
        let read = if path.is_empty() {
            T::deserialize(toml::de::Deserializer::from(self.root.clone()))
        } else {
            let Some(value) = self.value(path) else {
                return Err(self.error_at_key(path, "missing"));
            };
            T::deserialize(toml::de::ValueDeserializer::from(value.clone()))
        };
        read.map_err(|e| match e.span() {
            Some(span) => {
                let key = self.path_at(span.start);
                self.error(span, &key, e.message())
            }
            None => ConfigError {
                file: self.file.to_path_buf(),
                position: None,
                key: (!path.is_empty()).then(|| dotted(path)),
                message: e.message().to_owned(),
            },
        })
    }

    /// An error at `span` about the key at `path`.
    #[must_use]
    pub fn error(&self, span: Range<usize>, path: &[Segment], message: &str) -> ConfigError {
        ConfigError {
            file: self.file.to_path_buf(),
            position: Some(Position::at(self.text, span.start)),
            key: (!path.is_empty()).then(|| dotted(path)),
            message: message.to_owned(),
        }
    }

    /// An error about the key at `path`, placed at its value (or, when the file does not have
    /// it, nowhere in particular).
    #[must_use]
    pub fn error_at_key(&self, path: &[Segment], message: &str) -> ConfigError {
        match self.value(path) {
            Some(value) => self.error(value.span(), path, message),
            None => ConfigError {
                file: self.file.to_path_buf(),
                position: None,
                key: (!path.is_empty()).then(|| dotted(path)),
                message: message.to_owned(),
            },
        }
    }

    /// The value at `path`, if the file has one.
    #[must_use]
    pub fn value(&self, path: &[Segment]) -> Option<&Spanned<DeValue<'a>>> {
        let (first, rest) = path.split_first()?;
        let Segment::Key(first) = first else {
            return None;
        };
        let mut value = entry(self.root.get_ref(), first)?.1;
        for segment in rest {
            value = match (segment, value.get_ref()) {
                (Segment::Key(key), DeValue::Table(table)) => entry(table, key)?.1,
                (Segment::Index(i), DeValue::Array(array)) => array.get(*i)?,
                _ => return None,
            };
        }
        Some(value)
    }

    /// The keys of the table at `path`, with their spans, in the file's order of keys.
    #[must_use]
    pub fn keys(&self, path: &[Segment]) -> Vec<(String, Range<usize>)> {
        let table = if path.is_empty() {
            Some(self.root.get_ref())
        } else {
            match self.value(path).map(Spanned::get_ref) {
                Some(DeValue::Table(table)) => Some(table),
                _ => None,
            }
        };
        table
            .map(|t| {
                t.iter()
                    .map(|(k, _)| (k.get_ref().to_string(), k.span()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The deepest key whose name or value holds byte `offset` (a table defined by a `[header]`
    /// holds its header).
    #[must_use]
    pub fn path_at(&self, offset: usize) -> Vec<Segment> {
        let mut best = Vec::new();
        deepest_in_table(self.root.get_ref(), offset, &mut Vec::new(), &mut best);
        best
    }
}

fn entry<'t, 'a>(
    table: &'t DeTable<'a>,
    key: &str,
) -> Option<(
    &'t Spanned<std::borrow::Cow<'a, str>>,
    &'t Spanned<DeValue<'a>>,
)> {
    table.iter().find(|(k, _)| k.get_ref() == key)
}

fn holds(span: &Range<usize>, offset: usize) -> bool {
    span.contains(&offset) || (span.is_empty() && span.start == offset)
}

fn deepest_in_table(
    table: &DeTable<'_>,
    offset: usize,
    path: &mut Vec<Segment>,
    best: &mut Vec<Segment>,
) {
    for (key, value) in table {
        path.push(Segment::Key(key.get_ref().to_string()));
        let here = holds(&key.span(), offset) || holds(&value.span(), offset);
        if here && path.len() > best.len() {
            best.clone_from(path);
        }
        deepest_in_value(value.get_ref(), offset, path, best);
        path.pop();
    }
}

fn deepest_in_value(
    value: &DeValue<'_>,
    offset: usize,
    path: &mut Vec<Segment>,
    best: &mut Vec<Segment>,
) {
    match value {
        DeValue::Table(table) => deepest_in_table(table, offset, path, best),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Segment::Index(i));
                if holds(&item.span(), offset) && path.len() > best.len() {
                    best.clone_from(path);
                }
                deepest_in_value(item.get_ref(), offset, path, best);
                path.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "top = 1\n[providers.\"my.local\"]\nkind = \"openai\"\nheaders = { x-a = \"1\" }\n\n[[router.rules]]\nmodel = \"a\"\n\n[[router.rules]]\nto = \"b\"\n";

    fn doc() -> Document<'static> {
        Document::parse(TEXT, Path::new("t.toml")).unwrap()
    }

    fn at(needle: &str) -> String {
        dotted(&doc().path_at(TEXT.find(needle).unwrap()))
    }

    #[test]
    fn finds_the_key_at_a_place() {
        assert_eq!(at("top"), "top");
        assert_eq!(at("\"openai\""), "providers.\"my.local\".kind");
        assert_eq!(at("x-a"), "providers.\"my.local\".headers.x-a");
        assert_eq!(at("[providers"), "providers.\"my.local\"");
        assert_eq!(at("\"b\""), "router.rules[1].to");
        assert_eq!(at("model"), "router.rules[0].model");
    }

    #[test]
    fn finds_the_place_of_a_key() {
        let d = doc();
        let to = d
            .value(&["router".into(), "rules".into(), 1.into(), "to".into()])
            .unwrap();
        assert_eq!(&TEXT[to.span()], "\"b\"");
        assert!(
            d.value(&["router".into(), "rules".into(), 2.into()])
                .is_none()
        );
        assert!(d.value(&["top".into(), "x".into()]).is_none());
        let keys: Vec<String> = d
            .keys(&["providers".into(), "my.local".into()])
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, ["headers", "kind"]);
        let err = d.error_at_key(
            &["router".into(), "rules".into(), 1.into(), "to".into()],
            "no",
        );
        assert_eq!(err.to_string(), "t.toml:10:6: router.rules[1].to: no");
    }

    #[test]
    fn a_syntax_error_names_its_line() {
        let err = Document::parse("a = 1\nb = [\n", Path::new("x.toml")).unwrap_err();
        assert_eq!(err.position.map(|p| p.line), Some(2));
        assert!(err.to_string().starts_with("x.toml:2:"), "{err}");
        assert!(err.message.starts_with("not valid TOML: "), "{err}");
    }
}
