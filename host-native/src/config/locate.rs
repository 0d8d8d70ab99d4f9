//! Where the config file is, and the environment it reads: `--config FILE`, else
//! `CLAUDE_BRIDGE_CONFIG`, else `./claude-bridge.toml`, else
//! `$XDG_CONFIG_HOME/claude-bridge/config.toml` (`~/.config/claude-bridge/config.toml` when
//! `XDG_CONFIG_HOME` is unset). The environment comes in as an [`Env`], so tests never touch the
//! process's.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming the config file.
pub const CONFIG_VAR: &str = "CLAUDE_BRIDGE_CONFIG";
/// The file looked for in the working directory.
pub const LOCAL_FILE: &str = "claude-bridge.toml";

/// Environment variables and the working directory, as config loading sees them.
pub struct Env {
    vars: Vars,
    cwd: PathBuf,
}

enum Vars {
    Process,
    Fixed(BTreeMap<String, String>),
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Values may be keys: names only.
        let vars: Vec<&str> = match &self.vars {
            Vars::Process => vec!["(the process environment)"],
            Vars::Fixed(map) => map.keys().map(String::as_str).collect(),
        };
        f.debug_struct("Env")
            .field("cwd", &self.cwd)
            .field("vars", &vars)
            .finish()
    }
}

impl Env {
    /// The process's environment and working directory.
    ///
    /// # Errors
    /// The working directory cannot be read.
    pub fn process() -> std::io::Result<Self> {
        Ok(Self {
            vars: Vars::Process,
            cwd: std::env::current_dir()?,
        })
    }

    /// No variables, and `cwd` as the working directory (add variables with [`Env::with_var`]).
    #[must_use]
    pub fn fixed(cwd: impl Into<PathBuf>) -> Self {
        Self {
            vars: Vars::Fixed(BTreeMap::new()),
            cwd: cwd.into(),
        }
    }

    /// This environment with `name` set to `value` (a fixed environment only; the process's is
    /// read as it is).
    #[must_use]
    pub fn with_var(mut self, name: &str, value: &str) -> Self {
        if let Vars::Fixed(map) = &mut self.vars {
            map.insert(name.to_owned(), value.to_owned());
        }
        self
    }

    /// A variable's value (`None` when unset or not UTF-8).
    #[must_use]
    pub fn var(&self, name: &str) -> Option<String> {
        match &self.vars {
            Vars::Process => crate::environment::var(name),
            Vars::Fixed(map) => map.get(name).cloned(),
        }
    }

    /// The working directory.
    #[must_use]
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// `path` against the working directory.
    #[must_use]
    pub fn absolute(&self, path: &Path) -> PathBuf {
        self.cwd.join(path)
    }

    fn non_empty(&self, name: &str) -> Option<String> {
        self.var(name).filter(|v| !v.is_empty())
    }
}

/// How a config file was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `--config FILE`.
    Flag,
    /// `CLAUDE_BRIDGE_CONFIG`.
    EnvVar,
    /// `./claude-bridge.toml`.
    WorkingDir,
    /// `$XDG_CONFIG_HOME/claude-bridge/config.toml` or `~/.config/claude-bridge/config.toml`.
    UserConfig,
}

/// A config file to load, and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The file (absolute).
    pub path: PathBuf,
    /// How it was found.
    pub origin: Origin,
}

/// The config file to load, if any: an explicit `--config` or `CLAUDE_BRIDGE_CONFIG` is returned
/// whether or not it exists (loading it then says it cannot be read); the two default places
/// only when they hold a file.
#[must_use]
pub fn find(explicit: Option<&Path>, env: &Env) -> Option<Located> {
    locate(explicit, env, Path::is_file)
}

/// [`find`] with the file-existence test given.
#[must_use]
pub fn locate(
    explicit: Option<&Path>,
    env: &Env,
    exists: impl Fn(&Path) -> bool,
) -> Option<Located> {
    let named = |path: PathBuf, origin| Located {
        path: env.absolute(&path),
        origin,
    };
    if let Some(path) = explicit {
        return Some(named(path.to_path_buf(), Origin::Flag));
    }
    if let Some(path) = env.non_empty(CONFIG_VAR) {
        return Some(named(PathBuf::from(path), Origin::EnvVar));
    }
    let local = env.absolute(Path::new(LOCAL_FILE));
    if exists(&local) {
        return Some(Located {
            path: local,
            origin: Origin::WorkingDir,
        });
    }
    // The XDG base directory spec: a relative XDG_CONFIG_HOME is invalid and ignored.
    let config_home = env
        .non_empty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            env.non_empty("HOME")
                .map(|home| PathBuf::from(home).join(".config"))
        })?;
    let user = config_home.join("claude-bridge").join("config.toml");
    exists(&user).then_some(Located {
        path: user,
        origin: Origin::UserConfig,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(explicit: Option<&str>, env: &Env, files: &[&str]) -> Option<(String, Origin)> {
        locate(explicit.map(Path::new), env, |p| {
            files.iter().any(|f| Path::new(f) == p)
        })
        .map(|l| (l.path.display().to_string(), l.origin))
    }

    #[test]
    fn the_flag_wins_then_the_variable_then_the_working_directory_then_the_user_config() {
        let all = [
            "/work/claude-bridge.toml",
            "/xdg/claude-bridge/config.toml",
            "/home/u/.config/claude-bridge/config.toml",
        ];
        let env = Env::fixed("/work")
            .with_var(CONFIG_VAR, "from-env.toml")
            .with_var("XDG_CONFIG_HOME", "/xdg")
            .with_var("HOME", "/home/u");
        assert_eq!(
            found(Some("/etc/b.toml"), &env, &all),
            Some(("/etc/b.toml".into(), Origin::Flag))
        );
        assert_eq!(
            found(Some("rel.toml"), &env, &[]),
            Some(("/work/rel.toml".into(), Origin::Flag)),
            "explicit files are returned even when missing, relative to the working directory"
        );
        assert_eq!(
            found(None, &env, &all),
            Some(("/work/from-env.toml".into(), Origin::EnvVar))
        );
        let env = env.with_var(CONFIG_VAR, "");
        assert_eq!(
            found(None, &env, &all),
            Some(("/work/claude-bridge.toml".into(), Origin::WorkingDir))
        );
        assert_eq!(
            found(None, &env, &all[1..]),
            Some(("/xdg/claude-bridge/config.toml".into(), Origin::UserConfig))
        );
        assert_eq!(
            found(None, &env, &all[2..]),
            None,
            "XDG set: ~/.config is not read"
        );
    }

    #[test]
    fn without_xdg_config_home_the_user_config_is_under_home() {
        let files = ["/home/u/.config/claude-bridge/config.toml"];
        let env = Env::fixed("/w").with_var("HOME", "/home/u");
        assert_eq!(
            found(None, &env, &files),
            Some((files[0].into(), Origin::UserConfig))
        );
        let relative_xdg = Env::fixed("/w")
            .with_var("HOME", "/home/u")
            .with_var("XDG_CONFIG_HOME", "rel");
        assert_eq!(
            found(None, &relative_xdg, &files).map(|f| f.1),
            Some(Origin::UserConfig)
        );
        assert_eq!(found(None, &Env::fixed("/w"), &files), None);
    }

    #[test]
    fn debug_shows_variable_names_not_values() {
        let env = Env::fixed("/w").with_var("OPENAI_API_KEY", "sk-secret");
        let shown = format!("{env:?}");
        assert!(
            shown.contains("OPENAI_API_KEY") && !shown.contains("sk-secret"),
            "{shown}"
        );
    }
}
