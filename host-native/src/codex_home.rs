//! The throwaway `CODEX_HOME` of `claude-bridge codex`: a directory holding only a
//! `config.toml` that makes the OpenAI Codex CLI use this bridge as its model provider
//! (`wire_api = "responses"`, `base_url` = the bridge's `/v1`), with Codex's calls to remote
//! services (analytics, plugin and app look-ups, update checks) off, so nothing leaves the
//! machine but what the bridge's provider sends. Its key comes from [`KEY_VAR`], set by the
//! launcher (the bridge's `--client-key`, or any string when there is none).
//!
//! ```
//! let toml = claude_bridge::codex_home::config_toml("http://127.0.0.1:4100/v1");
//! assert!(toml.contains("base_url = \"http://127.0.0.1:4100/v1\""));
//! assert!(toml.contains("wire_api = \"responses\""));
//! ```

use std::path::{Path, PathBuf};

/// The variable Codex reads the provider's key from (`env_key`).
pub const KEY_VAR: &str = "CLAUDE_BRIDGE_CODEX_KEY";

/// The model slug Codex is given: one it knows (an unknown slug gets fallback settings and a
/// different tool set, without `apply_patch`). The bridge's routes decide which model answers;
/// `claude-bridge codex -- -m SLUG` picks another slug.
pub const MODEL_SLUG: &str = "gpt-5.5";

/// The provider's name in the config.
pub const PROVIDER: &str = "claude-bridge";

/// The `config.toml` for a bridge at `base_url` (`http://HOST:PORT/v1`).
#[must_use]
pub fn config_toml(base_url: &str) -> String {
    // A TOML basic string: the URL is ours (`http://` + a socket address + `/v1`), but quote
    // what must be quoted anyway.
    let url = base_url.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        "# Written by claude-bridge codex for this run only; removed when Codex exits.\n\
         model = \"{MODEL_SLUG}\"\n\
         model_provider = \"{PROVIDER}\"\n\
         check_for_update_on_startup = false\n\
         \n\
         [analytics]\n\
         enabled = false\n\
         \n\
         [features]\n\
         plugins = false\n\
         remote_plugin = false\n\
         apps = false\n\
         \n\
         [model_providers.{PROVIDER}]\n\
         name = \"claude-bridge\"\n\
         base_url = \"{url}\"\n\
         wire_api = \"responses\"\n\
         env_key = \"{KEY_VAR}\"\n"
    )
}

/// A `CODEX_HOME` directory under the system's temporary directory.
#[derive(Debug)]
pub struct CodexHome {
    path: PathBuf,
}

impl CodexHome {
    /// Create an empty directory named with `nonce` (readable by this user only).
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn create(nonce: u64) -> Result<Self, String> {
        let path = std::env::temp_dir().join(format!(
            "claude-bridge-codex-{}-{nonce:016x}",
            std::process::id()
        ));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&path)
            .map_err(|e| format!("cannot create a CODEX_HOME at {}: {e}", path.display()))?;
        Ok(Self { path })
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write `config.toml` for a bridge at `base_url`.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write_config(&self, base_url: &str) -> Result<(), String> {
        let file = self.path.join("config.toml");
        std::fs::write(&file, config_toml(base_url))
            .map_err(|e| format!("cannot write {}: {e}", file.display()))
    }

    /// Remove the directory and what Codex wrote into it (sessions, logs).
    pub fn remove(self) {
        if let Err(error) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(dir = %self.path.display(), %error, "could not remove the throwaway CODEX_HOME");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_parses_and_points_codex_at_the_bridge() {
        let text = config_toml("http://127.0.0.1:4100/v1");
        let value: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(value["model_provider"].as_str(), Some(PROVIDER));
        let provider = &value["model_providers"][PROVIDER];
        assert_eq!(
            provider["base_url"].as_str(),
            Some("http://127.0.0.1:4100/v1")
        );
        assert_eq!(provider["wire_api"].as_str(), Some("responses"));
        assert_eq!(provider["env_key"].as_str(), Some(KEY_VAR));
        assert_eq!(value["analytics"]["enabled"].as_bool(), Some(false));
    }

    #[test]
    fn the_home_is_private_and_removed() {
        let home = CodexHome::create(7).unwrap();
        home.write_config("http://127.0.0.1:1/v1").unwrap();
        let path = home.path().to_path_buf();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        assert!(path.join("config.toml").is_file());
        home.remove();
        assert!(!path.exists());
    }
}
