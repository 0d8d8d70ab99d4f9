//! How the real host node (`fabstir-llm-node` 8.38, `src/api/server.rs` and
//! `src/crypto/session_init.rs`) reads what a client sends, mirrored check for check so that a
//! client drifting from it fails here as it would there. The node's own types live here, never
//! the bridge's: a test node that parsed with the bridge's types would accept whatever the bridge
//! writes (that is how a float `pricePerToken`, which the real node refuses, went unnoticed).
//!
//! What each check mirrors:
//!
//! | check | the real node |
//! |---|---|
//! | a frame that is not JSON, or of an unknown `type`, is ignored (no answer) | `if let Ok(json_msg) = serde_json::from_str::<Value>` with no else; unknown types fall through |
//! | JSON `{"type":"ping"}` is ignored | only WebSocket-level pings are answered |
//! | init: `payload` must be an object | `MISSING_PAYLOAD` "encrypted_session_init must include payload object" |
//! | init: `ephPubHex`, `ciphertextHex`, `signatureHex`, `nonceHex`, `aadHex` must be JSON strings (`aadHex` may be `""`) | `INVALID_PAYLOAD` "Missing required fields …" |
//! | hex: an optional lowercase `0x`, either letter case, even length | `INVALID_HEX_ENCODING` "Failed to decode hex fields …" |
//! | nonce exactly 24 bytes | `INVALID_NONCE_SIZE` "Invalid nonce size: expected 24 bytes, got N" |
//! | signature exactly 65 bytes, recovery id 0–3 or 27–28 | `DECRYPTION_FAILED` "… Invalid signature size …" / "… Invalid recovery ID …" |
//! | the plaintext is `SessionDataJson`: `jobId` a string, `modelName` a string, `sessionKey` a string, `pricePerToken` a `u64` (so `1.0`, `"1"` and `-1` are refused), unknown fields ignored | `DECRYPTION_FAILED` "Failed to decrypt session init payload: Failed to parse session data JSON: <serde's words>" |
//! | `sessionKey`: hex (optional `0x`) of exactly 32 bytes | "Failed to decode session key hex" / "Invalid session key length: expected 32 bytes, got N" |
//! | init `session_id` must be a JSON string, else the key is not stored (and the ack says `"unknown"`) | `json_msg["session_id"].as_str()` |
//! | init `chain_id` a JSON unsigned integer, else 84532 | `as_u64().or(Some(84532))` |
//! | `jobId` parsed as a decimal `u64`; the ack's `job_id` is that or `null` | `parse::<u64>().ok()` |
//! | message: `session_id` a string (or the socket's), whose key was stored | `MISSING_SESSION_ID` / `SESSION_KEY_NOT_FOUND` |
//! | message: `payload` an object with string `ciphertextHex`, `nonceHex`, `aadHex` | `MISSING_PAYLOAD` / `MISSING_PAYLOAD_FIELDS` |
//! | message plaintext: UTF-8, then JSON or else the whole text is the prompt; `prompt` a string, `model` a string (default `tiny-vicuna`), `max_tokens` an unsigned integer (a float or string falls back to 4000; above `u32::MAX` the node never answers), `temperature` a number (default 0.7), `stream` a bool (default true), `thinking` a string, `images` `[{data, format = "png"}]` | `INVALID_UTF8`, then `as_str`/`as_u64`/`as_f64`/`as_bool` with defaults |
//! | validation: non-empty prompt and model, `max_tokens` ≥ 1, `temperature` in 0–2, `thinking` one of enabled/disabled/low/medium/high | `{"type":"error","error":"Validation error for <field>: …"}` then `stream_end` `reason: "error"` |
//! | while a reply streams, every frame but `stream_cancel` is dropped | `continue; // non-cancel message, keep streaming` |
//!
//! The init signature: the node recovers a signer and compares it with nothing (the newest node
//! hashes a context string, older ones the ciphertext; our node recovers over sha256(ciphertext),
//! which is what the bridge signs, and records the address).

use claude_bridge::fabstir::crypto::{self, Key};
use serde::Deserialize;
use serde_json::{Value, json};

/// An error frame's `code` and `message`, as the real node words them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeError {
    /// E.g. `DECRYPTION_FAILED`.
    pub code: &'static str,
    /// The node's message.
    pub message: String,
}

impl NodeError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The error frame for an init (it carries the session id, `"unknown"` without one).
    #[must_use]
    pub fn init_frame(&self, frame: &Value) -> Value {
        let mut out = json!({"type": "error", "code": self.code, "message": self.message,
            "session_id": frame["session_id"].as_str().unwrap_or("unknown")});
        if !frame["id"].is_null() {
            out["id"] = frame["id"].clone();
        }
        out
    }

    /// The error frame for a message (only `id`, no session id).
    #[must_use]
    pub fn message_frame(&self, frame: &Value) -> Value {
        let mut out = json!({"type": "error", "code": self.code, "message": self.message});
        if !frame["id"].is_null() {
            out["id"] = frame["id"].clone();
        }
        out
    }
}

/// The decrypted init, as the real node's `SessionDataJson` (`src/crypto/session_init.rs`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionDataJson {
    /// The job, in decimal.
    pub job_id: String,
    /// The model.
    pub model_name: String,
    /// The session key, hex.
    pub session_key: String,
    /// The price per token: an integer.
    pub price_per_token: u64,
    /// Retrieval: the vector database to use.
    pub vector_database: Option<VectorDatabaseInfo>,
    /// A key for recovery.
    pub recovery_public_key: Option<String>,
}

/// `vectorDatabase` in the init.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorDatabaseInfo {
    /// Where the manifest is.
    pub manifest_path: String,
    /// Whose it is.
    pub user_address: String,
}

/// An opened init.
#[derive(Debug, Clone)]
pub struct OpenedInit {
    /// The decrypted plaintext.
    pub data: SessionDataJson,
    /// The session key.
    pub key: Key,
    /// The job id as the node reads it (`None` when `jobId` is not a decimal `u64`).
    pub job_id: Option<u64>,
    /// The signer's address recovered from the signature, `0x…`.
    pub signer: String,
    /// The frame's `session_id`, if it is a string (the real node stores the key under it).
    pub session_id: Option<String>,
    /// The frame's `chain_id` (84532 when absent or not an unsigned integer).
    pub chain_id: u64,
}

/// A prompt as the real node reads a decrypted `encrypted_message` (what it would run).
#[derive(Debug, Clone, PartialEq)]
pub struct NodePrompt {
    /// The prompt text.
    pub prompt: String,
    /// The model.
    pub model: String,
    /// Output limit.
    pub max_tokens: u64,
    /// Sampling temperature.
    pub temperature: f64,
    /// Streamed.
    pub stream: bool,
    /// The thinking mode.
    pub thinking: Option<String>,
    /// Images: (base64 data, format).
    pub images: Vec<(String, String)>,
}

/// What a decrypted message leads to.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageOutcome {
    /// The node runs it.
    Run(NodePrompt),
    /// The node answers `{"type":"error","error":…}` then `stream_end` with `reason: "error"`.
    Invalid(String),
    /// The node never answers (its request type does not take the values).
    Silent,
}

/// Why a payload's hex fields could not be read.
enum HexFields {
    /// One of them is absent or not a JSON string.
    Missing,
    /// One of them is not hex.
    NotHex,
}

/// The named string fields of `payload`, hex-decoded (an optional lowercase `0x`, either case).
fn hex_fields<const N: usize>(
    payload: &Value,
    names: [&str; N],
) -> Result<[Vec<u8>; N], HexFields> {
    let texts = names.map(|name| payload[name].as_str());
    if texts.iter().any(Option::is_none) {
        return Err(HexFields::Missing);
    }
    let decoded = texts.map(|text| text.and_then(bridge_core::hex::decode));
    if decoded.iter().any(Option::is_none) {
        return Err(HexFields::NotHex);
    }
    Ok(decoded.map(Option::unwrap_or_default))
}

/// Open an `encrypted_session_init` frame with the node's static key, checking what the real
/// node checks, in its order.
///
/// # Errors
/// The [`NodeError`] the real node would send.
pub fn open_init(node: &k256::SecretKey, frame: &Value) -> Result<OpenedInit, NodeError> {
    let payload = &frame["payload"];
    if !payload.is_object() {
        return Err(NodeError::new(
            "MISSING_PAYLOAD",
            "encrypted_session_init must include payload object",
        ));
    }
    let names = [
        "ephPubHex",
        "ciphertextHex",
        "signatureHex",
        "nonceHex",
        "aadHex",
    ];
    let [eph, ciphertext, signature, nonce, aad] = match hex_fields(payload, names) {
        Ok(fields) => fields,
        Err(HexFields::Missing) => {
            return Err(NodeError::new(
                "INVALID_PAYLOAD",
                "Missing required fields in encrypted session init payload (ephPubHex, ciphertextHex, signatureHex, nonceHex, aadHex)",
            ));
        }
        Err(HexFields::NotHex) => {
            return Err(NodeError::new(
                "INVALID_HEX_ENCODING",
                "Failed to decode hex fields in encrypted session init payload",
            ));
        }
    };
    if nonce.len() != 24 {
        return Err(NodeError::new(
            "INVALID_NONCE_SIZE",
            format!("Invalid nonce size: expected 24 bytes, got {}", nonce.len()),
        ));
    }
    let failed = |e: String| {
        NodeError::new(
            "DECRYPTION_FAILED",
            format!("Failed to decrypt session init payload: {e}"),
        )
    };
    if eph.is_empty() {
        return Err(failed("Ephemeral public key is empty".into()));
    }
    if ciphertext.is_empty() {
        return Err(failed("Ciphertext is empty".into()));
    }
    if signature.len() != 65 {
        return Err(failed(format!(
            "Invalid signature size: expected 65 bytes, got {}",
            signature.len()
        )));
    }
    let eph = crypto::public_key(&eph, "ephPubHex")
        .map_err(|e| failed(format!("ECDH key derivation failed: {e}")))?;
    let envelope_key = crypto::derive_key(&crypto::shared_x(node, &eph));
    let nonce: crypto::Nonce = nonce.try_into().map_err(|_| failed("nonce".into()))?;
    let plain = crypto::open(&envelope_key, &nonce, &aad, &ciphertext)
        .map_err(|e| failed(format!("Decryption failed: {e}")))?;
    let text = String::from_utf8(plain)
        .map_err(|e| failed(format!("Decrypted data is not valid UTF-8: {e}")))?;
    let data: SessionDataJson = serde_json::from_str(&text)
        .map_err(|e| failed(format!("Failed to parse session data JSON: {e}")))?;
    let key_bytes = bridge_core::hex::decode(&data.session_key)
        .ok_or_else(|| failed("Failed to decode session key hex: Invalid character".into()))?;
    let key: Key = key_bytes.as_slice().try_into().map_err(|_| {
        failed(format!(
            "Invalid session key length: expected 32 bytes, got {}",
            key_bytes.len()
        ))
    })?;
    let mut signature = signature;
    if signature[64] >= 27 {
        signature[64] -= 27;
    }
    if signature[64] > 3 {
        return Err(failed(format!(
            "Invalid recovery ID: expected 0-3, got {}",
            signature[64]
        )));
    }
    let signer = crypto::recover_sha256_signer(&ciphertext, &signature)
        .map_err(|e| failed(format!("Signature verification failed: {e}")))?;
    Ok(OpenedInit {
        job_id: data.job_id.parse::<u64>().ok(),
        data,
        key,
        signer: format!("0x{}", crypto::to_hex(&signer)),
        session_id: frame["session_id"]
            .as_str()
            .or_else(|| frame["sessionId"].as_str())
            .map(String::from),
        chain_id: frame["chain_id"]
            .as_u64()
            .or_else(|| frame["chainId"].as_u64())
            .unwrap_or(84532),
    })
}

/// Decrypt an `encrypted_message` payload with the session key.
///
/// # Errors
/// The [`NodeError`] the real node would send.
pub fn open_message(key: &Key, frame: &Value) -> Result<String, NodeError> {
    let payload = &frame["payload"];
    if !payload.is_object() {
        return Err(NodeError::new(
            "MISSING_PAYLOAD",
            "encrypted_message must include payload object",
        ));
    }
    let [ciphertext, nonce, aad] =
        match hex_fields(payload, ["ciphertextHex", "nonceHex", "aadHex"]) {
            Ok(fields) => fields,
            Err(HexFields::Missing) => {
                return Err(NodeError::new(
                    "MISSING_PAYLOAD_FIELDS",
                    "Payload must contain ciphertextHex, nonceHex, and aadHex",
                ));
            }
            Err(HexFields::NotHex) => {
                return Err(NodeError::new(
                    "INVALID_HEX_ENCODING",
                    "Failed to decode hex fields in payload",
                ));
            }
        };
    let nonce: crypto::Nonce = nonce.as_slice().try_into().map_err(|_| {
        NodeError::new(
            "INVALID_NONCE_SIZE",
            format!("Invalid nonce size: expected 24 bytes, got {}", nonce.len()),
        )
    })?;
    let plain = crypto::open(key, &nonce, &aad, &ciphertext).map_err(|e| {
        NodeError::new(
            "DECRYPTION_FAILED",
            format!("Failed to decrypt message: {e}"),
        )
    })?;
    String::from_utf8(plain)
        .map_err(|_| NodeError::new("INVALID_UTF8", "Decrypted plaintext is not valid UTF-8"))
}

/// Read a decrypted message as the real node does (each field from the plaintext, then the
/// outer frame, then the default), and validate it.
#[must_use]
pub fn read_prompt(plaintext: &str, frame: &Value) -> MessageOutcome {
    let inner: Value =
        serde_json::from_str(plaintext).unwrap_or_else(|_| json!({ "prompt": plaintext }));
    let field = |name: &str| {
        let own = &inner[name];
        if own.is_null() { &frame[name] } else { own }
    };
    let max_tokens = field("max_tokens").as_u64().unwrap_or(4000);
    if max_tokens > u64::from(u32::MAX) {
        return MessageOutcome::Silent;
    }
    let prompt = NodePrompt {
        prompt: inner["prompt"].as_str().unwrap_or(plaintext).to_owned(),
        model: field("model").as_str().unwrap_or("tiny-vicuna").to_owned(),
        max_tokens,
        temperature: field("temperature").as_f64().unwrap_or(0.7),
        stream: field("stream").as_bool().unwrap_or(true),
        thinking: field("thinking").as_str().map(String::from),
        images: inner["images"]
            .as_array()
            .map(|images| {
                images
                    .iter()
                    .filter_map(|image| {
                        let data = image["data"].as_str().filter(|d| !d.is_empty())?;
                        Some((
                            data.to_owned(),
                            image["format"].as_str().unwrap_or("png").to_owned(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default(),
    };
    let invalid = |field: &str, why: &str| {
        MessageOutcome::Invalid(format!("Validation error for {field}: {why}"))
    };
    if prompt.model.is_empty() {
        return invalid("model", "must not be empty");
    }
    if prompt.prompt.is_empty() {
        return invalid("prompt", "must not be empty");
    }
    if prompt.max_tokens == 0 {
        return invalid("max_tokens", "must be greater than 0");
    }
    if !(0.0..=2.0).contains(&prompt.temperature) {
        return invalid("temperature", "must be between 0.0 and 2.0");
    }
    if let Some(mode) = &prompt.thinking
        && !["enabled", "disabled", "low", "medium", "high"].contains(&mode.as_str())
    {
        return invalid(
            "thinking",
            "must be one of enabled, disabled, low, medium, high",
        );
    }
    MessageOutcome::Run(prompt)
}
