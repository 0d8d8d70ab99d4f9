//! Fabstir model ids: the `bytes32` the contracts know a model by.
//!
//! A user names a model as `org/repo:file.gguf` (the Hugging Face repository and the file); its
//! id is `keccak256(utf8(repo + "/" + file))`, as ModelRegistry's `getModelId(repo, fileName)`
//! computes it. A `0x` + 64 hex digits string is already an id and is used as it is.
//!
//! ```
//! use bridge_core::fabstir::model_id::ModelId;
//! let id = ModelId::parse("0x0000000000000000000000000000000000000000000000000000000000000001").unwrap();
//! assert_eq!(id.bytes()[31], 1);
//! let named = ModelId::parse(" org/repo : model.gguf ").unwrap();
//! assert_eq!(named, ModelId::parse("org/repo:model.gguf").unwrap());
//! assert!(ModelId::parse("no-colon").is_err());
//! ```

use sha3::{Digest, Keccak256};

/// A model id (32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ModelId([u8; 32]);

/// Why a model name is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "model {given:?} is not a Fabstir model: give it as org/repo:file.gguf (the repository and \
     the file) or as a 0x-prefixed 32-byte model id"
)]
pub struct ModelIdError {
    /// What was given.
    pub given: String,
}

impl ModelId {
    /// Parse `org/repo:file.gguf` or a `0x…` id (whitespace around the parts is ignored).
    ///
    /// # Errors
    /// [`ModelIdError`] when it is neither.
    pub fn parse(model: &str) -> Result<Self, ModelIdError> {
        let trimmed = model.trim();
        let error = || ModelIdError {
            given: model.to_owned(),
        };
        if let Some(digits) = trimmed.strip_prefix("0x")
            && digits.len() == 64
        {
            let bytes = crate::hex::decode(digits).ok_or_else(error)?;
            return Ok(Self(bytes.try_into().map_err(|_| error())?));
        }
        let (repo, file) = trimmed.split_once(':').ok_or_else(error)?;
        let (repo, file) = (repo.trim(), file.trim());
        if repo.is_empty() || file.is_empty() {
            return Err(error());
        }
        Ok(Self::of(repo, file))
    }

    /// The id of `file` in `repo`: `keccak256(repo + "/" + file)`.
    #[must_use]
    pub fn of(repo: &str, file: &str) -> Self {
        let mut hasher = Keccak256::new();
        hasher.update(repo.as_bytes());
        hasher.update(b"/");
        hasher.update(file.as_bytes());
        Self(hasher.finalize().into())
    }

    /// The 32 bytes.
    #[must_use]
    pub fn bytes(&self) -> [u8; 32] {
        self.0
    }

    /// `0x` + 64 lowercase hex digits.
    #[must_use]
    pub fn to_hex(&self) -> String {
        format!("0x{}", crate::hex::encode(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keccak_hex(data: &[u8]) -> String {
        let digest: [u8; 32] = Keccak256::digest(data).into();
        ModelId(digest).to_hex()
    }

    #[test]
    fn keccak256_known_answers() {
        // Ethereum's keccak256 (not NIST SHA3-256) of "" and "abc".
        assert_eq!(
            keccak_hex(b""),
            "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
        );
        assert_eq!(
            keccak_hex(b"abc"),
            "0x4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"
        );
    }

    #[test]
    fn a_named_model_hashes_repo_slash_file() {
        let id = ModelId::parse("TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF:tinyllama-1b.Q4_K_M.gguf")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            id.to_hex(),
            keccak_hex(b"TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF/tinyllama-1b.Q4_K_M.gguf")
        );
        // Only the first colon splits.
        assert_eq!(ModelId::parse("a:b:c"), Ok(ModelId::of("a", "b:c")));
    }

    #[test]
    fn hex_ids_round_trip_and_bad_names_say_what_to_give() {
        let hex = "0x00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        assert_eq!(
            ModelId::parse(hex).map(|id| id.to_hex()),
            Ok(hex.to_owned())
        );
        for bad in ["", "qwen3-coder", ":file.gguf", "org/repo:", "0x12"] {
            let error = ModelId::parse(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad:?} parsed"));
            assert!(error.to_string().contains("org/repo:file.gguf"), "{error}");
        }
        assert!(ModelId::parse(&format!("0x{}", "zz".repeat(32))).is_err());
    }
}
