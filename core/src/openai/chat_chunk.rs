//! One streamed Chat Completions chunk, read in place.
//!
//! Every upstream chunk of an OpenAI-compatible stream is read here, so the reader is built for
//! that rate: [`ChatChunk::read`] fills a chunk the translator keeps from call to call, member
//! by member, where serde's derived readers build each nested value and move it into its
//! parent (the chunk's one choice and its delta were copied several times per chunk: `memmove`
//! was a quarter of the native core's time on a small text chunk). The choices of the last
//! chunk are emptied and filled again, so a chunk allocates nothing but its strings, and what
//! most chunks lack (usage, an error, annotations, tool calls) is boxed.
//!
//! Reading is tolerant, as servers differ: every member is optional, unknown members are
//! skipped, `null` stands for an absent choice list, choice or delta, and a repeated member
//! keeps its last value.
//!
//! ```
//! use bridge_core::openai::chat::ChatChunk;
//! let mut chunk = ChatChunk::default();
//! chunk.read(r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#).unwrap();
//! let choice = chunk.choices.iter_mut().next().unwrap();
//! assert_eq!(choice.delta.content.as_deref(), Some("Hi"));
//! // The next read starts from an empty chunk.
//! chunk.read(r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#).unwrap();
//! assert!(chunk.choices.is_empty());
//! assert_eq!(chunk.usage.as_ref().and_then(|u| u.completion_tokens), Some(1));
//! ```

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::chat::{ChatUsage, ToolCallDelta};

/// One streamed chunk. Every member is optional: servers differ.
#[derive(Debug, Clone, Default)]
pub struct ChatChunk {
    /// Choices (empty on the trailing usage chunk).
    pub choices: Choices,
    /// Usage (on the last chunk with `include_usage`; some servers put it on every chunk).
    pub usage: Option<Box<ChatUsage>>,
    /// A mid-stream error object.
    pub error: Option<Box<Value>>,
}

/// The most choices kept from one read for the next (a chunk has one; a server asked for `n`
/// sends that many).
const KEPT_CHOICES: usize = 4;

/// A chunk's choices. Kept with the chunk from read to read: the choices of an earlier chunk
/// are emptied in place and filled again, so reading allocates nothing for them.
#[derive(Debug, Clone, Default)]
pub struct Choices {
    items: Vec<ChunkChoice>,
    /// How many of `items` this chunk has.
    used: usize,
}

/// One choice of a chunk.
#[derive(Debug, Clone, Default)]
pub struct ChunkChoice {
    /// Choice index (the bridge reads choice 0).
    pub index: u32,
    /// The new content (`message` on non-streaming responses).
    pub delta: ChunkDelta,
    /// Why generation stopped.
    pub finish_reason: Option<String>,
    /// Citations some servers put on the choice instead of the delta (read as
    /// `delta.annotations`).
    pub annotations: Option<Box<[Value]>>,
}

/// What a chunk adds.
#[derive(Debug, Clone, Default)]
pub struct ChunkDelta {
    /// Text.
    pub content: Option<String>,
    /// Reasoning (DeepSeek, vLLM ≤ 0.19.0, llama.cpp, SGLang, LM Studio).
    pub reasoning_content: Option<String>,
    /// Reasoning (OpenRouter, Ollama, vLLM ≥ 0.19.1).
    pub reasoning: Option<String>,
    /// Refusal text.
    pub refusal: Option<String>,
    /// Tool call fragments.
    pub tool_calls: Option<Box<[ToolCallDelta]>>,
    /// What a web search found and the text cites (OpenRouter):
    /// `[{type:"url_citation", url_citation:{url, title, content, start_index, end_index}}]`,
    /// kept as JSON (a malformed one must not cost the chunk's text).
    pub annotations: Option<Box<[Value]>>,
}

impl ChatChunk {
    /// Read one chunk's JSON into `self`, which is emptied first. On an error `self` holds
    /// what was read before it.
    ///
    /// # Errors
    /// The text is not JSON, or a member has the wrong type.
    pub fn read(&mut self, json: &str) -> Result<(), serde_json::Error> {
        self.fill(&mut serde_json::Deserializer::from_str(json))
    }

    /// [`Self::read`] from bytes (a whole body that is not SSE).
    ///
    /// # Errors
    /// The bytes are not JSON, or a member has the wrong type.
    pub fn read_slice(&mut self, json: &[u8]) -> Result<(), serde_json::Error> {
        self.fill(&mut serde_json::Deserializer::from_slice(json))
    }

    fn fill<'de, R: serde_json::de::Read<'de>>(
        &mut self,
        de: &mut serde_json::Deserializer<R>,
    ) -> Result<(), serde_json::Error> {
        self.usage = None;
        self.error = None;
        self.choices.used = 0;
        if self.choices.items.len() > KEPT_CHOICES {
            // A chunk of many choices is not kept from read to read.
            self.choices.items.truncate(KEPT_CHOICES);
            self.choices.items.shrink_to_fit();
        }
        Fill(self).deserialize(&mut *de)?;
        de.end()
    }
}

impl Choices {
    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Each choice in order, to take from.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut ChunkChoice> {
        self.items.iter_mut().take(self.used)
    }

    /// An empty choice at the end, to fill: an earlier chunk's, emptied, or a new one.
    fn push(&mut self) -> &mut ChunkChoice {
        if self.used == self.items.len() {
            self.items.push(ChunkChoice::default());
        }
        self.used += 1;
        let choice = &mut self.items[self.used - 1];
        choice.clear();
        choice
    }
}

impl ChunkChoice {
    /// Empties it in place (assigning `Self::default()` copied the whole struct: 3% of a chunk).
    fn clear(&mut self) {
        self.index = 0;
        self.delta.clear();
        self.finish_reason = None;
        self.annotations = None;
    }
}

impl ChunkDelta {
    fn clear(&mut self) {
        self.content = None;
        self.reasoning_content = None;
        self.reasoning = None;
        self.refusal = None;
        self.tool_calls = None;
        self.annotations = None;
    }
}

/// The members of each object, as serde matches them (anything else is `Other`, skipped).
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ChunkMember {
    Choices,
    Usage,
    Error,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ChoiceMember {
    Index,
    #[serde(alias = "message")]
    Delta,
    FinishReason,
    Annotations,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum DeltaMember {
    Content,
    ReasoningContent,
    Reasoning,
    Refusal,
    ToolCalls,
    Annotations,
    #[serde(other)]
    Other,
}

/// Reads a JSON value into the (empty) place it holds; `null` leaves the place empty.
struct Fill<'a, T>(&'a mut T);

/// `Fill` of a type: a seed that reads any JSON value, `null` as nothing, and what the given
/// `visit_*` methods take (anything else is an error naming `$expecting`).
macro_rules! fill {
    ($place:ty, $expecting:literal, $($visit:item)+) => {
        impl<'de> DeserializeSeed<'de> for Fill<'_, $place> {
            type Value = ();
            fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
                deserializer.deserialize_any(self)
            }
        }

        impl<'de> Visitor<'de> for Fill<'_, $place> {
            type Value = ();
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($expecting)
            }
            fn visit_unit<E>(self) -> Result<(), E> {
                Ok(())
            }
            $($visit)+
        }
    };
}

fill!(
    ChatChunk,
    "an object or null",
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(member) = map.next_key()? {
            match member {
                ChunkMember::Choices => map.next_value_seed(Fill(&mut self.0.choices))?,
                ChunkMember::Usage => self.0.usage = map.next_value()?,
                ChunkMember::Error => self.0.error = map.next_value()?,
                ChunkMember::Other => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(())
    }
);

fill!(
    Choices,
    "an array of choices or null",
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // A repeated `choices` member replaces the first.
        self.0.used = 0;
        loop {
            if seq.next_element_seed(Fill(self.0.push()))?.is_none() {
                self.0.used -= 1;
                return Ok(());
            }
        }
    }
);

fill!(
    ChunkChoice,
    "an object or null",
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let choice = self.0;
        // The choice came empty; only a second delta has to empty it again.
        let mut had_delta = false;
        while let Some(member) = map.next_key()? {
            match member {
                ChoiceMember::Index => {
                    choice.index = map.next_value::<Option<u32>>()?.unwrap_or_default();
                }
                ChoiceMember::Delta => {
                    if had_delta {
                        choice.delta.clear();
                    }
                    had_delta = true;
                    map.next_value_seed(Fill(&mut choice.delta))?;
                }
                ChoiceMember::FinishReason => choice.finish_reason = map.next_value()?,
                ChoiceMember::Annotations => choice.annotations = map.next_value()?,
                ChoiceMember::Other => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(())
    }
);

fill!(
    ChunkDelta,
    "an object or null",
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let delta = self.0;
        while let Some(member) = map.next_key()? {
            match member {
                DeltaMember::Content => delta.content = map.next_value()?,
                DeltaMember::ReasoningContent => delta.reasoning_content = map.next_value()?,
                DeltaMember::Reasoning => delta.reasoning = map.next_value()?,
                DeltaMember::Refusal => delta.refusal = map.next_value()?,
                DeltaMember::ToolCalls => delta.tool_calls = map.next_value()?,
                DeltaMember::Annotations => delta.annotations = map.next_value()?,
                DeltaMember::Other => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(())
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(chunk: &mut ChatChunk) -> Vec<(u32, Option<String>, Option<String>)> {
        chunk
            .choices
            .iter_mut()
            .map(|c| (c.index, c.delta.content.clone(), c.finish_reason.clone()))
            .collect()
    }

    #[test]
    fn a_read_starts_from_nothing_of_the_last_chunk() {
        let mut chunk = ChatChunk::default();
        chunk
            .read(r#"{"choices":[{"index":0,"delta":{"content":"a","reasoning":"r"},"finish_reason":"stop","annotations":[{}]},{"index":1,"delta":{"content":"b"}}],"usage":{"prompt_tokens":1},"error":{"message":"x"}}"#)
            .unwrap();
        assert_eq!(
            texts(&mut chunk),
            [
                (0, Some("a".into()), Some("stop".into())),
                (1, Some("b".into()), None)
            ]
        );
        assert!(chunk.usage.is_some() && chunk.error.is_some());
        chunk
            .read(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#)
            .unwrap();
        let choice = chunk.choices.iter_mut().next().unwrap();
        assert_eq!(
            (
                choice.index,
                &choice.delta.content,
                &choice.delta.reasoning,
                &choice.finish_reason
            ),
            (0, &None, &None, &None)
        );
        assert!(choice.annotations.is_none());
        assert_eq!(choice.delta.tool_calls.as_ref().map(|c| c.len()), Some(1));
        assert_eq!(chunk.choices.iter_mut().count(), 1);
        assert!(chunk.usage.is_none() && chunk.error.is_none());
    }

    #[test]
    fn every_member_is_optional_and_null_is_absent() {
        let mut chunk = ChatChunk::default();
        for json in [
            "{}",
            r#"{"choices":null}"#,
            r#"{"choices":[],"usage":null,"error":null}"#,
            "null",
        ] {
            chunk.read(json).unwrap();
            assert!(chunk.choices.is_empty(), "{json}");
            assert!(chunk.usage.is_none() && chunk.error.is_none(), "{json}");
        }
        chunk
            .read(r#"{"choices":[null,{"delta":null,"index":null,"finish_reason":null}]}"#)
            .unwrap();
        assert_eq!(texts(&mut chunk), [(0, None, None), (0, None, None)]);
    }

    #[test]
    fn unknown_members_are_skipped_and_message_reads_as_delta() {
        let mut chunk = ChatChunk::default();
        chunk
            .read(r#"{"id":"c","object":"chat.completion","created":1,"model":"m","system_fingerprint":null,"choices":[{"index":0,"logprobs":{"content":[{"token":"x"}]},"message":{"role":"assistant","content":"Hello \"you\"\n","refusal":null,"extra":[1,{"a":2}]},"finish_reason":"length"}]}"#)
            .unwrap();
        assert_eq!(
            texts(&mut chunk),
            [(0, Some("Hello \"you\"\n".into()), Some("length".into()))]
        );
    }

    #[test]
    fn a_repeated_member_keeps_its_last_value() {
        let mut chunk = ChatChunk::default();
        chunk
            .read(r#"{"choices":[{"delta":{"content":"a"}},{"index":1}],"choices":[{"delta":{"content":"b"},"delta":{"refusal":"no"}}]}"#)
            .unwrap();
        let choices: Vec<_> = chunk.choices.iter_mut().collect();
        assert_eq!(choices.len(), 1);
        assert_eq!(choices[0].delta.content, None);
        assert_eq!(choices[0].delta.refusal.as_deref(), Some("no"));
    }

    #[test]
    fn a_chunk_of_many_choices_is_not_kept_for_the_next_read() {
        let mut chunk = ChatChunk::default();
        let many = format!(r#"{{"choices":[{}]}}"#, vec!["{}"; 1000].join(","));
        chunk.read(&many).unwrap();
        assert_eq!(chunk.choices.iter_mut().count(), 1000);
        chunk
            .read(r#"{"choices":[{"delta":{"content":"a"}}]}"#)
            .unwrap();
        assert_eq!(texts(&mut chunk), [(0, Some("a".into()), None)]);
        assert!(chunk.choices.items.capacity() <= KEPT_CHOICES);
    }

    #[test]
    fn wrong_types_and_broken_json_are_errors() {
        let mut chunk = ChatChunk::default();
        for json in [
            r#"{"choices":{}}"#,
            r#"{"choices":[{"delta":"text"}]}"#,
            r#"{"choices":[{"delta":{"content":5}}]}"#,
            r#"{"choices":[{"index":-1}]}"#,
            r#"{"choices":[]"#,
            r#"{"choices":[]} x"#,
            "[]",
            "\"text\"",
        ] {
            assert!(chunk.read(json).is_err(), "{json}");
            assert!(chunk.read_slice(json.as_bytes()).is_err(), "{json}");
        }
        // A read after an error starts clean.
        chunk.read(r#"{"choices":[]}"#).unwrap();
        assert!(chunk.choices.is_empty());
    }
}
