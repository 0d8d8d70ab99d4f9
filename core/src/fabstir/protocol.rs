//! The frames of a Fabstir host's WebSocket session (`/v1/ws`), as the live host code speaks them
//! (`reference/fabstir-protocol.md` §1): what the client sends ([`ClientFrame`]), what the host
//! sends ([`HostFrame`], read tolerantly: unknown frames and fields never fail), the plaintexts
//! inside the encrypted envelopes, and how a host error becomes an Anthropic error.
//!
//! Encryption is the host's job (it holds keys and randomness); these types carry its hex.
//!
//! ```
//! use bridge_core::fabstir::protocol::{HostFrame, parse_host_frame};
//! let frame = parse_host_frame(r#"{"type":"stream_end","reason":"complete","tokens_used":42,"usage":{"prompt_tokens":900}}"#).unwrap();
//! let HostFrame::StreamEnd(end) = frame else { panic!() };
//! assert_eq!(end.tokens_used, Some(42));
//! assert_eq!(parse_host_frame(r#"{"type":"brand_new"}"#).unwrap(), HostFrame::Unknown);
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::anthropic::events::{ApiError, ErrorKind};
use crate::chatml::render::PromptImage;

/// An envelope encrypted with XChaCha20-Poly1305 (lowercase hex, no `0x`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// Ciphertext with the 16-byte tag.
    #[serde(rename = "ciphertextHex")]
    pub ciphertext_hex: String,
    /// The 24-byte nonce.
    #[serde(rename = "nonceHex")]
    pub nonce_hex: String,
    /// The additional data (`message_<n>`, `chunk_<i>`, `encrypted_response_final`), as hex.
    #[serde(rename = "aadHex", default)]
    pub aad_hex: String,
    /// The chunk index (host chunks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
}

/// The `encrypted_session_init` payload: an envelope sealed to the host's static key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitPayload {
    /// The client's ephemeral public key, compressed (33 bytes).
    pub eph_pub_hex: String,
    /// HKDF salt as sent (the host derives with 32 zero bytes).
    pub salt_hex: String,
    /// The 24-byte nonce.
    pub nonce_hex: String,
    /// The sealed [`SessionInitPlain`].
    pub ciphertext_hex: String,
    /// 65 bytes r‖s‖v by the client's wallet key.
    pub signature_hex: String,
    /// The recovery id (0–3).
    pub recid: u8,
    /// `secp256k1-ecdh(ephemeral→static)+hkdf(sha256)+xchacha20-poly1305`.
    pub alg: String,
    /// HKDF info (empty).
    pub info: String,
    /// The additional data, as hex (may be empty).
    pub aad_hex: String,
}

/// The algorithm name the init payload carries.
pub const INIT_ALG: &str = "secp256k1-ecdh(ephemeral→static)+hkdf(sha256)+xchacha20-poly1305";

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientFrame {
    /// Starts (or restarts) the encrypted session; sent before every prompt.
    EncryptedSessionInit {
        /// The sealed session key and job.
        payload: InitPayload,
        /// The chain the job lives on (84532 for Base Sepolia).
        chain_id: u64,
        /// The session id (the job id, in decimal).
        session_id: String,
        /// The job id, in decimal.
        job_id: String,
    },
    /// One prompt, sealed with the session key.
    EncryptedMessage {
        /// The session id.
        session_id: String,
        /// `<ms>-<random>`: correlates the host's chunks.
        id: String,
        /// The sealed [`PromptPlain`].
        payload: Sealed,
        /// Always false (the bridge does not ask hosts to search).
        web_search: bool,
        /// Always 0.
        max_searches: u32,
        /// Always null.
        search_queries: Option<Value>,
    },
    /// Stop the running reply (the host answers `stream_end` with `reason: "cancelled"`).
    StreamCancel {
        /// The session id.
        session_id: String,
        /// Why (`user_cancelled`).
        reason: String,
    },
    /// Keep-alive.
    Ping,
}

/// Inside `encrypted_session_init` (camelCase, as the host reads it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInitPlain {
    /// The 32-byte session key, hex.
    pub session_key: String,
    /// The job id, as a decimal string (the host requires a string).
    pub job_id: String,
    /// The model's name.
    pub model_name: String,
    /// The job's price per token: the on-chain integer (the host reads a `u64` and refuses
    /// `1.0` with `DECRYPTION_FAILED`).
    pub price_per_token: u64,
    /// A compressed public key for recovery, `0x…` (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_public_key: Option<String>,
}

/// Inside `encrypted_message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptPlain {
    /// The ChatML prompt.
    pub prompt: String,
    /// The model's name.
    pub model: String,
    /// Output token limit (the host's default is 4000: always send it).
    pub max_tokens: u64,
    /// Sampling temperature (the host's default is 0.7: always send it).
    pub temperature: f64,
    /// Always true.
    pub stream: bool,
    /// Images for vision models.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<PromptImage>,
}

/// The host's token accounting in `stream_end`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostUsage {
    /// Prompt tokens.
    pub prompt_tokens: Option<u64>,
    /// Generated tokens.
    pub completion_tokens: Option<u64>,
    /// Both.
    pub total_tokens: Option<u64>,
    /// The model's context window.
    pub context_window_size: Option<u64>,
}

/// `stream_end`: the reply is over.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamEndFrame {
    /// `complete`, `cancelled` or `error`.
    pub reason: Option<String>,
    /// Tokens billed for the reply.
    pub tokens_used: Option<u64>,
    /// Vision tokens billed.
    pub vlm_tokens: Option<u64>,
    /// The model's finish reason.
    pub finish_reason: Option<String>,
    /// Token accounting.
    pub usage: Option<HostUsage>,
    /// The prompt's id.
    pub id: Option<String>,
}

/// `error`: with a `code` for protocol and limit errors, or only `error` for inference failures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostErrorFrame {
    /// E.g. `DECRYPTION_FAILED`, `TOKEN_LIMIT_EXCEEDED`.
    pub code: Option<String>,
    /// The host's message.
    pub message: Option<String>,
    /// An inference failure's text (no code).
    pub error: Option<String>,
    /// With `TOKEN_LIMIT_EXCEEDED`: the prompt's size.
    pub prompt_tokens: Option<u64>,
    /// With `TOKEN_LIMIT_EXCEEDED`: the model's context window.
    pub context_window_size: Option<u64>,
}

/// What the host sends. Unknown `type`s are [`HostFrame::Unknown`], never an error.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HostFrame {
    /// Right after the socket opens.
    Connected {
        /// A greeting.
        #[serde(default)]
        message: Option<String>,
    },
    /// The session init was accepted (or not: `status`).
    SessionInitAck {
        /// `success` when accepted.
        #[serde(default)]
        status: Option<String>,
        /// The host's view of the job id.
        #[serde(default)]
        job_id: Option<Value>,
        /// The signer the host recovered (not reliable: see the reference).
        #[serde(default)]
        client_address: Option<String>,
    },
    /// One piece of the reply, sealed with the session key.
    EncryptedChunk {
        /// Tokens in this chunk.
        #[serde(default)]
        tokens: Option<u64>,
        /// The sealed token text.
        payload: Sealed,
        /// The prompt's id.
        #[serde(default)]
        id: Option<String>,
        /// Set on the last chunk.
        #[serde(default, rename = "final")]
        last: bool,
    },
    /// The sealed finish reason.
    EncryptedResponse {
        /// The sealed finish reason text.
        payload: Sealed,
    },
    /// The reply is over.
    StreamEnd(StreamEndFrame),
    /// Something failed.
    Error(HostErrorFrame),
    /// The host's answer to a `ping` (some hosts send one).
    Pong,
    /// A frame this client does not know.
    #[serde(other)]
    Unknown,
}

/// A host frame that is not JSON or misses a field its type requires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the host sent a frame this bridge cannot read ({reason}): {excerpt}")]
pub struct FrameError {
    /// What is wrong.
    pub reason: String,
    /// The start of the frame.
    pub excerpt: String,
}

/// Read one text frame from the host.
///
/// # Errors
/// [`FrameError`] when it is not JSON or a known frame lacks a required field.
pub fn parse_host_frame(text: &str) -> Result<HostFrame, FrameError> {
    serde_json::from_str(text).map_err(|e| FrameError {
        reason: e.to_string(),
        excerpt: text.chars().take(120).collect(),
    })
}

impl SessionInitPlain {
    /// The exact plaintext sealed into `encrypted_session_init` (the host parses it with
    /// `jobId` a string and `pricePerToken` an integer).
    #[must_use]
    pub fn to_plaintext(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Read an init as JSON, as strictly as the host does: `jobId` a string, `pricePerToken` an
    /// integer (a fraction such as `1.0` is refused, naming the field).
    ///
    /// # Errors
    /// A message naming the field that is missing or of the wrong type.
    pub fn from_json(json: &str) -> Result<Self, String> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| format!("the session init is not JSON: {e}"))?;
        for (field, ok, wants) in [
            (
                "sessionKey",
                Value::is_string as fn(&Value) -> bool,
                "a hex string",
            ),
            ("jobId", Value::is_string, "a decimal string"),
            ("modelName", Value::is_string, "a string"),
            (
                "pricePerToken",
                Value::is_u64,
                "a whole number (the on-chain price per token)",
            ),
        ] {
            match value.get(field) {
                None => return Err(format!("the session init lacks `{field}`")),
                Some(v) if !ok(v) => {
                    return Err(format!("`{field}` must be {wants}, not {v}"));
                }
                Some(_) => {}
            }
        }
        serde_json::from_value(value).map_err(|e| format!("the session init does not parse: {e}"))
    }
}

impl HostErrorFrame {
    /// The Anthropic error a client should see, naming the host (`host`: its URL or address).
    /// A context overflow says "prompt is too long" (Claude Code compacts the conversation on
    /// that text); everything else the host reports is an `api_error` (the host's fault: the
    /// bridge answers 502) with the host's own words (never an empty "Request failed").
    #[must_use]
    pub fn to_api_error(&self, host: &str) -> ApiError {
        let code = self.code.as_deref().unwrap_or("");
        let said = self
            .message
            .as_deref()
            .or(self.error.as_deref())
            .filter(|m| !m.trim().is_empty())
            .unwrap_or("the host reported an error without a message");
        match code {
            "TOKEN_LIMIT_EXCEEDED" => {
                let detail = match (self.prompt_tokens, self.context_window_size) {
                    (Some(p), Some(w)) => format!(": {p} tokens > {w} maximum"),
                    _ => String::new(),
                };
                ApiError::new(
                    ErrorKind::InvalidRequest,
                    format!(
                        "prompt is too long{detail} (the context window of the model on the Fabstir host {host})"
                    ),
                )
            }
            "" => ApiError::new(
                ErrorKind::Api,
                format!("the model on the Fabstir host {host} failed: {said}"),
            ),
            _ => ApiError::new(
                ErrorKind::Api,
                format!("the Fabstir host {host} rejected the encrypted session ({code}): {said}"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: &Value) -> HostFrame {
        parse_host_frame(&value.to_string()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn host_frames_as_the_live_host_sends_them() {
        assert_eq!(
            parse(&json!({"type": "connected", "message": "WebSocket connected successfully"})),
            HostFrame::Connected {
                message: Some("WebSocket connected successfully".into())
            }
        );
        let ack = parse(
            &json!({"type": "session_init_ack", "status": "success", "session_id": "42", "job_id": 42,
            "chain_id": 84532, "client_address": "0xabc", "message": "Encrypted session initialized successfully"}),
        );
        assert!(matches!(ack, HostFrame::SessionInitAck { status: Some(s), .. } if s == "success"));
        let chunk = parse(
            &json!({"type": "encrypted_chunk", "tokens": 1, "id": "1-a", "session_id": "42", "final": true,
            "payload": {"ciphertextHex": "ab", "nonceHex": "cd", "aadHex": "6368756e6b5f30", "index": 0}}),
        );
        let HostFrame::EncryptedChunk { payload, last, .. } = chunk else {
            panic!("{chunk:?}")
        };
        assert!(last);
        assert_eq!(payload.index, Some(0));
        let end = parse(
            &json!({"type": "stream_end", "reason": "complete", "tokens_used": 12, "id": "1-a", "session_id": "42",
            "finish_reason": "stop", "usage": {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112, "context_window_size": 8192}}),
        );
        let HostFrame::StreamEnd(end) = end else {
            panic!()
        };
        assert_eq!(end.usage.and_then(|u| u.prompt_tokens), Some(100));
        assert_eq!(parse(&json!({"type": "pong"})), HostFrame::Pong);
        assert_eq!(
            parse(&json!({"type": "proof_submitted", "x": 1})),
            HostFrame::Unknown
        );
        assert!(parse_host_frame("not json").is_err());
        assert!(parse_host_frame(r#"{"type":"encrypted_chunk"}"#).is_err());
    }

    #[test]
    fn client_frames_have_the_wire_shape() {
        let frame = ClientFrame::EncryptedMessage {
            session_id: "42".into(),
            id: "1700000000000-x".into(),
            payload: Sealed {
                ciphertext_hex: "00".into(),
                nonce_hex: "11".into(),
                aad_hex: "6d6573736167655f30".into(),
                index: None,
            },
            web_search: false,
            max_searches: 0,
            search_queries: None,
        };
        assert_eq!(
            serde_json::to_value(&frame).unwrap_or_default(),
            json!({"type": "encrypted_message", "session_id": "42", "id": "1700000000000-x",
                "payload": {"ciphertextHex": "00", "nonceHex": "11", "aadHex": "6d6573736167655f30"},
                "web_search": false, "max_searches": 0, "search_queries": null})
        );
        let cancel = ClientFrame::StreamCancel {
            session_id: "42".into(),
            reason: "user_cancelled".into(),
        };
        assert_eq!(
            serde_json::to_string(&cancel).unwrap_or_default(),
            r#"{"type":"stream_cancel","session_id":"42","reason":"user_cancelled"}"#
        );
        let init = SessionInitPlain {
            session_key: "42".repeat(32),
            job_id: "42".into(),
            model_name: "m".into(),
            price_per_token: 2000,
            recovery_public_key: None,
        };
        assert_eq!(
            init.to_plaintext(),
            format!(
                r#"{{"sessionKey":"{}","jobId":"42","modelName":"m","pricePerToken":2000}}"#,
                "42".repeat(32)
            )
        );
        let float = r#"{"sessionKey":"00","jobId":"1","modelName":"m","pricePerToken":1.0}"#;
        assert!(SessionInitPlain::from_json(float).is_err_and(|e| e.contains("pricePerToken")));
    }

    #[test]
    fn host_errors_become_anthropic_errors_that_say_something() {
        let overflow = HostErrorFrame {
            code: Some("TOKEN_LIMIT_EXCEEDED".into()),
            message: Some("too long".into()),
            prompt_tokens: Some(9000),
            context_window_size: Some(8192),
            ..HostErrorFrame::default()
        }
        .to_api_error("http://h:8080");
        assert_eq!(overflow.kind, ErrorKind::InvalidRequest);
        assert!(
            overflow
                .message
                .starts_with("prompt is too long: 9000 tokens > 8192 maximum")
        );
        let inference = HostErrorFrame {
            error: Some("CUDA out of memory".into()),
            ..HostErrorFrame::default()
        }
        .to_api_error("http://h:8080");
        assert_eq!(inference.kind, ErrorKind::Api);
        assert!(inference.message.contains("CUDA out of memory"));
        let silent = HostErrorFrame::default().to_api_error("http://h:8080");
        assert!(silent.message.contains("without a message"));
        let crypto = HostErrorFrame {
            code: Some("DECRYPTION_FAILED".into()),
            message: Some("bad tag".into()),
            ..HostErrorFrame::default()
        }
        .to_api_error("http://h:8080");
        assert!(crypto.message.contains("DECRYPTION_FAILED"));
        assert!(
            crypto.message.contains("http://h:8080"),
            "{}",
            crypto.message
        );
        assert!(inference.message.contains("http://h:8080"));
    }
}
