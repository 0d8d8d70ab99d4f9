//! The `CODEX_HOME` of `claude-bridge codex`: a directory of the bridge's own, kept across runs
//! under the state directory (`$XDG_STATE_HOME/claude-bridge/codex-home`, else
//! `~/.local/state/claude-bridge/codex-home`), whose `config.toml` makes the OpenAI Codex CLI
//! use this bridge as its model provider (`wire_api = "responses"`, `base_url` = the bridge's
//! `/v1`). The user's own `~/.codex` is neither read nor changed.
//!
//! Kept, so that what Codex keeps there works as it does in `~/.codex`: `codex resume <id>`
//! (its `sessions/`), the folders the user trusted, its prompt history. Each launch rewrites only
//! the keys the bridge owns ([`OWNED`]) and keeps every other key Codex or the user wrote
//! (comments are not kept):
//! - the provider, pointed at this run's port, with its key from [`KEY_VAR`] (set by the
//!   launcher: the bridge's `--client-key`, or any string when there is none);
//! - the model slug, pinned to [`MODEL_SLUG`] (one Codex knows, with its classic tool set),
//!   and that slug's model-migration prompt marked as seen, so no "try the new model" screen
//!   switches it to a model whose tools arrive another way;
//! - Codex's calls to remote services off (analytics, plugin and app look-ups, update checks),
//!   and its background daemons (`app-server`, an updater) not started, so nothing leaves the
//!   machine but what the bridge's provider sends and nothing runs after Codex exits.
//!
//! Without a state directory (no `HOME`) the home is a throwaway one under the temporary
//! directory, removed when Codex exits.
//!
//! ```
//! let toml = claude_bridge::codex_home::config_toml("", "http://127.0.0.1:4100/v1").unwrap();
//! assert!(toml.contains("base_url = \"http://127.0.0.1:4100/v1\""));
//! assert!(toml.contains("wire_api = \"responses\""));
//! ```

use std::path::{Path, PathBuf};

use toml::{Table, Value};

/// The variable Codex reads the provider's key from (`env_key`).
pub const KEY_VAR: &str = "CLAUDE_BRIDGE_CODEX_KEY";

/// The model slug Codex is given: one it knows (an unknown slug gets fallback settings and a
/// different tool set, without `apply_patch`). The bridge's routes decide which model answers;
/// `claude-bridge codex -- -m SLUG` picks another slug.
pub const MODEL_SLUG: &str = "gpt-5.5";

/// The model Codex 0.169 offers to migrate [`MODEL_SLUG`] to, on a screen whose default answer
/// switches the model (and with it the way tools are sent).
const MIGRATION_TARGET: &str = "gpt-6-sol";

/// The provider's name in the config.
pub const PROVIDER: &str = "claude-bridge";

/// The top-level keys a launch rewrites (within `features`, `analytics`, `notice` and
/// `model_providers` only the entries named in [`config_toml`]).
pub const OWNED: &[&str] = &["model", "model_provider", "check_for_update_on_startup"];

/// `existing` (a `config.toml`'s text, or empty) with the bridge's keys set for a bridge at
/// `base_url` (`http://HOST:PORT/v1`); everything else in it is kept.
///
/// # Errors
/// `existing` is not TOML (the message says which file to fix or remove).
pub fn config_toml(existing: &str, base_url: &str) -> Result<String, String> {
    let mut config: Table = existing
        .parse()
        .map_err(|e| format!("is not valid TOML ({e}); fix it or remove it"))?;
    let set = |table: &mut Table, key: &str, value: Value| {
        table.insert(key.to_owned(), value);
    };
    set(&mut config, "model", MODEL_SLUG.into());
    set(&mut config, "model_provider", PROVIDER.into());
    set(&mut config, "check_for_update_on_startup", false.into());
    with_table(&mut config, "analytics", |t| {
        set(t, "enabled", false.into())
    });
    with_table(&mut config, "features", |features| {
        for feature in [
            "plugins",
            "remote_plugin",
            "apps",
            "shell_snapshot",
            "daemon_auto_start",
        ] {
            set(features, feature, false.into());
        }
    });
    with_table(&mut config, "notice", |notice| {
        with_table(notice, "model_migrations", |m| {
            set(m, MODEL_SLUG, MIGRATION_TARGET.into());
        });
    });
    with_table(&mut config, "model_providers", |providers| {
        let mut provider = Table::new();
        set(&mut provider, "name", "claude-bridge".into());
        set(&mut provider, "base_url", base_url.into());
        set(&mut provider, "wire_api", "responses".into());
        set(&mut provider, "env_key", KEY_VAR.into());
        set(providers, PROVIDER, Value::Table(provider));
    });
    let text = toml::to_string(&config).map_err(|e| e.to_string())?;
    Ok(format!(
        "# claude-bridge codex rewrites model, model_provider, the [model_providers.{PROVIDER}]\n\
         # table and the remote-service switches on every launch; other keys are kept.\n{text}"
    ))
}

/// Change the table at `key` of `parent` with `change` (a missing one, or a value that is not
/// a table, starts empty).
fn with_table(parent: &mut Table, key: &str, change: impl FnOnce(&mut Table)) {
    let mut table = match parent.remove(key) {
        Some(Value::Table(table)) => table,
        _ => Table::new(),
    };
    change(&mut table);
    parent.insert(key.to_owned(), Value::Table(table));
}

/// Codex's home for a launch.
#[derive(Debug)]
pub struct CodexHome {
    path: PathBuf,
    /// Removed when Codex exits (no state directory to keep it in).
    throwaway: bool,
}

impl CodexHome {
    /// The kept home under `state_dir` (`…/claude-bridge`), created (readable by this user
    /// only) when missing; with no state directory, a throwaway one named with `nonce`.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(state_dir: Option<&Path>, nonce: u64) -> Result<Self, String> {
        let (path, throwaway) = match state_dir {
            Some(dir) => (dir.join("codex-home"), false),
            None => (
                std::env::temp_dir().join(format!(
                    "claude-bridge-codex-{}-{nonce:016x}",
                    std::process::id()
                )),
                true,
            ),
        };
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&path)
            .map_err(|e| format!("cannot create a CODEX_HOME at {}: {e}", path.display()))?;
        Ok(Self { path, throwaway })
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write `config.toml` for a bridge at `base_url`, keeping what else it holds.
    ///
    /// # Errors
    /// The file cannot be read, parsed or written.
    pub fn write_config(&self, base_url: &str) -> Result<(), String> {
        let file = self.path.join("config.toml");
        let existing = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
        };
        let text =
            config_toml(&existing, base_url).map_err(|e| format!("{}: {e}", file.display()))?;
        // Whole or not at all: a Codex starting meanwhile (another launch) never reads half a
        // file.
        let part = self
            .path
            .join(format!("config.toml.{}.part", std::process::id()));
        std::fs::write(&part, text)
            .and_then(|()| std::fs::rename(&part, &file))
            .map_err(|e| format!("cannot write {}: {e}", file.display()))
    }

    /// Codex has exited: a throwaway home is removed (with what Codex wrote into it).
    pub fn close(self) {
        if !self.throwaway {
            return;
        }
        if let Err(error) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(dir = %self.path.display(), %error, "could not remove the throwaway CODEX_HOME");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_points_codex_at_the_bridge_and_keeps_what_else_is_there() {
        let before = "model = \"gpt-6-sol\"\n\
            [projects.\"/work/app\"]\ntrust_level = \"trusted\"\n\
            [features]\nplugins = true\nunified_exec = true\n\
            [notice.model_migrations]\n\"gpt-5\" = \"gpt-5.5\"\n\
            [model_providers.claude-bridge]\nbase_url = \"http://127.0.0.1:1/v1\"\nstale = 1\n\
            [model_providers.mine]\nbase_url = \"http://example.invalid/v1\"\n";
        let text = config_toml(before, "http://127.0.0.1:4100/v1").unwrap();
        let value: Table = text.parse().unwrap();
        assert_eq!(value["model"].as_str(), Some(MODEL_SLUG));
        assert_eq!(value["model_provider"].as_str(), Some(PROVIDER));
        let provider = value["model_providers"][PROVIDER].as_table().unwrap();
        assert_eq!(
            provider["base_url"].as_str(),
            Some("http://127.0.0.1:4100/v1")
        );
        assert_eq!(provider["wire_api"].as_str(), Some("responses"));
        assert_eq!(provider["env_key"].as_str(), Some(KEY_VAR));
        assert!(!provider.contains_key("stale"), "{text}");
        assert_eq!(value["analytics"]["enabled"].as_bool(), Some(false));
        for off in ["plugins", "daemon_auto_start", "shell_snapshot"] {
            assert_eq!(
                value["features"][off].as_bool(),
                Some(false),
                "{off}: {text}"
            );
        }
        let migrations = &value["notice"]["model_migrations"];
        assert_eq!(migrations[MODEL_SLUG].as_str(), Some(MIGRATION_TARGET));
        // What Codex and the user wrote stays.
        assert_eq!(migrations["gpt-5"].as_str(), Some("gpt-5.5"));
        assert_eq!(value["features"]["unified_exec"].as_bool(), Some(true));
        assert_eq!(
            value["projects"]["/work/app"]["trust_level"].as_str(),
            Some("trusted")
        );
        assert_eq!(
            value["model_providers"]["mine"]["base_url"].as_str(),
            Some("http://example.invalid/v1")
        );
        // Writing it again changes nothing.
        assert_eq!(
            config_toml(&text, "http://127.0.0.1:4100/v1").unwrap(),
            text
        );
    }

    #[test]
    fn a_broken_config_is_named_not_overwritten() {
        let error = config_toml("model = ", "http://127.0.0.1:1/v1").unwrap_err();
        assert!(error.contains("fix it or remove it"), "{error}");
    }

    #[test]
    fn the_home_is_private_and_kept_or_thrown_away() {
        let state = std::env::temp_dir().join(format!(
            "claude-bridge-state-test-{}-{}",
            std::process::id(),
            crate::ids::seed()
        ));
        let kept = CodexHome::open(Some(&state), 7).unwrap();
        kept.write_config("http://127.0.0.1:1/v1").unwrap();
        let path = kept.path().to_path_buf();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        kept.close();
        assert!(path.join("config.toml").is_file());
        std::fs::remove_dir_all(&state).unwrap();

        let throwaway = CodexHome::open(None, 8).unwrap();
        throwaway.write_config("http://127.0.0.1:1/v1").unwrap();
        let path = throwaway.path().to_path_buf();
        throwaway.close();
        assert!(!path.exists());
    }
}
