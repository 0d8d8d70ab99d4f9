//! The Fabstir end-to-end encryption, both sides (`reference/fabstir-protocol.md` §2): the bridge
//! seals prompts to a host, and the local test host node opens them.
//!
//! - Key agreement: secp256k1 ECDH between a fresh ephemeral key and the host's static key; the
//!   shared secret is the 32-byte x coordinate.
//! - KDF: HKDF-SHA256 with a zero salt and empty info → 32 bytes.
//! - Cipher: XChaCha20-Poly1305, 24-byte random nonce, the tag appended to the ciphertext.
//! - The init envelope is signed by the client's wallet key (65 bytes r‖s‖v) over
//!   `sha256(ciphertext)` — what the live host recovers the client's address from, so the
//!   `client_address` it acknowledges is really ours.
//!
//! Randomness comes in as arguments ([`Randomness`]), so tests are deterministic and the
//! known-answer vectors produced by the live host's own code (`tests/fixtures/fabstir/
//! crypto-vectors.json`, a copy of the team's shared fixture) are reproduced exactly.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use k256::ecdsa::{RecoveryId, Signature, SigningKey, VerifyingKey};
use k256::elliptic_curve::sec1::ToSec1Point;
use k256::{PublicKey, SecretKey};
use sha2::{Digest, Sha256};
use sha3::Keccak256;

/// A 32-byte symmetric key (the init key or a session key).
pub type Key = [u8; 32];
/// A 24-byte XChaCha20 nonce.
pub type Nonce = [u8; 24];

/// Why a crypto operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// A key is not a valid secp256k1 key.
    #[error("invalid {what}: {reason}")]
    InvalidKey {
        /// Which key.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// The ciphertext does not authenticate under this key, nonce and additional data.
    #[error("decryption failed: the ciphertext, nonce, additional data or key do not match")]
    Decrypt,
    /// Hex that does not decode, or of the wrong length.
    #[error("invalid hex for {what}")]
    Hex {
        /// Which field.
        what: &'static str,
    },
    /// A signature that does not recover a key.
    #[error("invalid signature: {0}")]
    Signature(String),
}

/// Random bytes, supplied by the caller (the OS in production, fixed bytes in tests).
pub trait Randomness {
    /// Fill `out` with random bytes.
    fn fill(&mut self, out: &mut [u8]);
}

/// A secp256k1 secret key from 32 bytes.
///
/// # Errors
/// [`CryptoError::InvalidKey`] when the bytes are zero or not below the curve order.
pub fn secret_key(bytes: &[u8], what: &'static str) -> Result<SecretKey, CryptoError> {
    SecretKey::from_slice(bytes).map_err(|e| CryptoError::InvalidKey {
        what,
        reason: e.to_string(),
    })
}

/// A secp256k1 public key from SEC1 bytes (33 compressed or 65 uncompressed).
///
/// # Errors
/// [`CryptoError::InvalidKey`] when the bytes are not a point on the curve.
pub fn public_key(bytes: &[u8], what: &'static str) -> Result<PublicKey, CryptoError> {
    PublicKey::from_sec1_bytes(bytes).map_err(|e| CryptoError::InvalidKey {
        what,
        reason: e.to_string(),
    })
}

/// The compressed (33-byte) encoding of a public key.
#[must_use]
pub fn compressed(key: &PublicKey) -> Vec<u8> {
    key.to_sec1_point(true).as_bytes().to_vec()
}

/// ECDH: the x coordinate of `secret · public`.
#[must_use]
pub fn shared_x(secret: &SecretKey, public: &PublicKey) -> [u8; 32] {
    let shared = k256::ecdh::diffie_hellman(secret.to_nonzero_scalar(), public.as_affine());
    let mut out = [0u8; 32];
    out.copy_from_slice(shared.raw_secret_bytes());
    out
}

/// HKDF-SHA256 of the shared x coordinate (zero salt, empty info) → the envelope key.
#[must_use]
pub fn derive_key(shared_x: &[u8; 32]) -> Key {
    let hkdf = Hkdf::<Sha256>::new(None, shared_x);
    let mut key = [0u8; 32];
    // 32 bytes is far below HKDF-SHA256's limit of 255 * 32.
    if hkdf.expand(&[], &mut key).is_err() {
        key = [0u8; 32];
    }
    key
}

/// XChaCha20-Poly1305 encryption; the 16-byte tag is appended.
#[must_use]
pub fn seal(key: &Key, nonce: &Nonce, aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
    let cipher = XChaCha20Poly1305::new(&(*key).into());
    cipher
        .encrypt(
            &XNonce::from(*nonce),
            Payload {
                msg: plaintext,
                aad,
            },
        )
        .unwrap_or_default()
}

/// XChaCha20-Poly1305 decryption of `ciphertext` (tag appended).
///
/// # Errors
/// [`CryptoError::Decrypt`] when it does not authenticate.
pub fn open(
    key: &Key,
    nonce: &Nonce,
    aad: &[u8],
    ciphertext: &[u8],
) -> Result<Vec<u8>, CryptoError> {
    let cipher = XChaCha20Poly1305::new(&(*key).into());
    cipher
        .decrypt(
            &XNonce::from(*nonce),
            Payload {
                msg: ciphertext,
                aad,
            },
        )
        .map_err(|_| CryptoError::Decrypt)
}

/// Sign `sha256(message)` with `key`: 65 bytes r‖s‖v (v = recovery id 0–3, low s).
#[must_use]
pub fn sign_sha256(key: &SecretKey, message: &[u8]) -> [u8; 65] {
    let digest = Sha256::digest(message);
    let signing = SigningKey::from(key);
    let (signature, recid) = signing.sign_prehash_recoverable(&digest);
    let mut out = [0u8; 65];
    out[..64].copy_from_slice(&signature.to_bytes());
    out[64] = recid.to_byte();
    out
}

/// The Ethereum address of the key that made `signature` (65 bytes r‖s‖v, v 0–3 or 27/28) over
/// `sha256(message)`.
///
/// # Errors
/// [`CryptoError::Signature`] when it does not recover a key.
pub fn recover_sha256_signer(message: &[u8], signature: &[u8]) -> Result<[u8; 20], CryptoError> {
    if signature.len() != 65 {
        return Err(CryptoError::Signature(format!(
            "expected 65 bytes, got {}",
            signature.len()
        )));
    }
    let v = signature[64];
    let recid = RecoveryId::from_byte(if v >= 27 { v - 27 } else { v })
        .ok_or_else(|| CryptoError::Signature(format!("recovery id {v} is not 0-3 or 27/28")))?;
    let sig = Signature::from_slice(&signature[..64])
        .map_err(|e| CryptoError::Signature(e.to_string()))?;
    let digest = Sha256::digest(message);
    let key = VerifyingKey::recover_from_prehash(&digest, &sig, recid)
        .map_err(|e| CryptoError::Signature(e.to_string()))?;
    Ok(address(&PublicKey::from(&key)))
}

/// The Ethereum address of a public key: the last 20 bytes of keccak256 of its uncompressed
/// coordinates.
#[must_use]
pub fn address(key: &PublicKey) -> [u8; 20] {
    let point = key.to_sec1_point(false);
    let digest = Keccak256::digest(&point.as_bytes()[1..]);
    let mut out = [0u8; 20];
    out.copy_from_slice(&digest[12..]);
    out
}

/// Lowercase hex without `0x`.
#[must_use]
pub fn to_hex(bytes: &[u8]) -> String {
    bridge_core::hex::encode(bytes)
}

/// Hex (with or without `0x`, any case) → bytes.
///
/// # Errors
/// [`CryptoError::Hex`] when it is not hex.
pub fn from_hex(text: &str, what: &'static str) -> Result<Vec<u8>, CryptoError> {
    bridge_core::hex::decode(text).ok_or(CryptoError::Hex { what })
}

/// Hex → exactly `N` bytes.
///
/// # Errors
/// [`CryptoError::Hex`] when it is not hex or not `N` bytes.
pub fn from_hex_array<const N: usize>(
    text: &str,
    what: &'static str,
) -> Result<[u8; N], CryptoError> {
    from_hex(text, what)?
        .try_into()
        .map_err(|_| CryptoError::Hex { what })
}

/// A fresh random nonce.
pub fn nonce(rng: &mut dyn Randomness) -> Nonce {
    let mut n = [0u8; 24];
    rng.fill(&mut n);
    n
}

/// A fresh random key (session keys).
pub fn random_key(rng: &mut dyn Randomness) -> Key {
    let mut k = [0u8; 32];
    rng.fill(&mut k);
    k
}

/// A fresh ephemeral secp256k1 key (retries the negligible chance of an invalid scalar).
pub fn ephemeral_key(rng: &mut dyn Randomness) -> SecretKey {
    loop {
        let mut bytes = [0u8; 32];
        rng.fill(&mut bytes);
        if let Ok(key) = SecretKey::from_slice(&bytes) {
            return key;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn vectors() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/fabstir/crypto-vectors.json"
        );
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn hex(v: &Value, key: &str) -> Vec<u8> {
        from_hex(
            v[key].as_str().unwrap_or_else(|| panic!("no {key}")),
            "vector",
        )
        .unwrap_or_else(|e| panic!("{key}: {e}"))
    }

    #[test]
    fn reproduces_every_value_of_the_live_hosts_vectors() {
        let v = vectors();
        let eph = secret_key(&hex(&v, "client_eph_priv"), "eph").unwrap_or_else(|e| panic!("{e}"));
        let node = secret_key(&hex(&v, "node_priv"), "node").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            compressed(&eph.public_key()),
            hex(&v, "client_eph_pub_compressed")
        );
        assert_eq!(
            eph.public_key().to_sec1_point(false).as_bytes(),
            &hex(&v, "client_eph_pub_uncompressed")[..]
        );
        assert_eq!(
            compressed(&node.public_key()),
            hex(&v, "node_pub_compressed")
        );

        // Both sides agree on the shared x and the derived key.
        let node_pub = public_key(&hex(&v, "node_pub_compressed"), "node pub")
            .unwrap_or_else(|e| panic!("{e}"));
        let eph_pub = public_key(&hex(&v, "client_eph_pub_compressed"), "eph pub")
            .unwrap_or_else(|e| panic!("{e}"));
        let x = shared_x(&eph, &node_pub);
        assert_eq!(x.to_vec(), hex(&v, "ecdh_raw_x"));
        assert_eq!(shared_x(&node, &eph_pub), x);
        let init_key = derive_key(&x);
        assert_eq!(init_key.to_vec(), hex(&v, "init_key"));

        // The init envelope: sealed with the init key, signed by the wallet over sha256(ct).
        let init = &v["session_init"];
        let nonce: Nonce = hex(init, "nonce")
            .try_into()
            .unwrap_or_else(|_| panic!("nonce"));
        let plaintext = init["plaintext"].as_str().unwrap_or_default().as_bytes();
        let ciphertext = seal(&init_key, &nonce, &hex(init, "aad"), plaintext);
        assert_eq!(ciphertext, hex(init, "ciphertext_with_tag"));
        assert_eq!(
            open(&init_key, &nonce, &hex(init, "aad"), &ciphertext).unwrap_or_default(),
            plaintext
        );
        assert_eq!(
            Sha256::digest(&ciphertext).to_vec(),
            hex(init, "sha256_ciphertext")
        );
        let wallet = secret_key(&hex(init, "client_wallet_priv"), "wallet")
            .unwrap_or_else(|e| panic!("{e}"));
        let signature = sign_sha256(&wallet, &ciphertext);
        assert_eq!(signature.to_vec(), hex(init, "signature_65"));
        let signer =
            recover_sha256_signer(&ciphertext, &signature).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            format!("0x{}", to_hex(&signer)),
            init["recovered_client_address"]
                .as_str()
                .unwrap_or_default()
        );
        assert_eq!(signer, address(&wallet.public_key()));

        // Session traffic: the prompt, a chunk, the final response.
        let session_key: Key = hex(&v, "session_key")
            .try_into()
            .unwrap_or_else(|_| panic!("key"));
        for part in ["message", "chunk", "final"] {
            let p = &v[part];
            let nonce: Nonce = hex(p, "nonce")
                .try_into()
                .unwrap_or_else(|_| panic!("nonce"));
            let plaintext = p["plaintext"].as_str().unwrap_or_default().as_bytes();
            let sealed = seal(&session_key, &nonce, &hex(p, "aad"), plaintext);
            assert_eq!(sealed, hex(p, "ciphertext_with_tag"), "{part}");
            assert_eq!(
                open(&session_key, &nonce, &hex(p, "aad"), &sealed).unwrap_or_default(),
                plaintext
            );
        }
    }

    #[test]
    fn tampering_is_detected_and_hex_is_checked() {
        let key = [7u8; 32];
        let nonce = [9u8; 24];
        let mut sealed = seal(&key, &nonce, b"message_0", b"hello");
        assert_eq!(
            open(&key, &nonce, b"message_1", &sealed),
            Err(CryptoError::Decrypt)
        );
        sealed[0] ^= 1;
        assert_eq!(
            open(&key, &nonce, b"message_0", &sealed),
            Err(CryptoError::Decrypt)
        );
        assert_eq!(from_hex("0xAbCd", "x"), Ok(vec![0xab, 0xcd]));
        assert!(from_hex("abc", "x").is_err());
        assert!(from_hex("zz", "x").is_err());
        assert!(from_hex_array::<2>("abcdef", "x").is_err());
        assert!(recover_sha256_signer(b"m", &[0u8; 64]).is_err());
        assert!(secret_key(&[0u8; 32], "zero").is_err());
    }
}
