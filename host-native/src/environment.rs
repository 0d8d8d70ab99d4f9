//! The environment the bridge reads: the process's variables, with `--env-file` beneath them.
//!
//! Precedence (DESIGN §5): flags > `CLAUDE_BRIDGE_*` environment > `--env-file` > config file.
//! The env file is parsed by [`dotenvy`] (quotes, escapes, `export`, comments) into a map that is
//! never written into the process environment (`set_var` is unsound once threads exist, and
//! `unsafe` in Rust 2024); instead it is a layer:
//!
//! - clap sees it as each flag's default ([`with_file_defaults`]), so a flag or a real
//!   environment variable still wins;
//! - everything else that reads a variable (`env:NAME` keys in the config file, the Fabstir
//!   wallet key, `XDG_*`, `RUST_LOG`) calls [`var`], which looks at the process first, then the
//!   file;
//! - child processes (Claude Code, started by `claude` and `agui`) get the file's variables the
//!   process lacks ([`file_only`]), as they would have had with the file `source`d.
//!
//! Every read of the process environment in this crate goes through here (clippy's
//! `disallowed-methods`, `host-native/clippy.toml`).
//!
//! ```
//! use claude_bridge::environment::Layers;
//! let layers = Layers::from_pairs([("CLAUDE_BRIDGE_MODEL", "qwen3")]);
//! // A variable the process does not set comes from the file.
//! assert_eq!(layers.var("CLAUDE_BRIDGE_MODEL").as_deref(), Some("qwen3"));
//! ```

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::OnceLock;

/// The process environment with an env file beneath it.
#[derive(Default)]
pub struct Layers {
    file: BTreeMap<String, String>,
}

impl std::fmt::Debug for Layers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values may be keys: names only.
        f.debug_struct("Layers")
            .field("file", &self.file.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Layers {
    /// The variables of an env file (parsed by dotenvy).
    ///
    /// # Errors
    /// The file cannot be read or a line does not parse (the message names the file).
    pub fn read(path: &Path) -> Result<Self, String> {
        let lines =
            dotenvy::from_path_iter(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut file = BTreeMap::new();
        for line in lines {
            let (key, value) = line.map_err(|e| format!("{}: {e}", path.display()))?;
            file.insert(key, value);
        }
        Ok(Self { file })
    }

    /// Layers with these file variables (for tests and examples).
    #[must_use]
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self {
            file: pairs
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        }
    }

    /// A variable: the process's value, else the file's (`None` when neither has it or the
    /// process's value is not UTF-8).
    #[must_use]
    pub fn var(&self, name: &str) -> Option<String> {
        match process_var(name) {
            Some(value) => value.into_string().ok(),
            None => self.file.get(name).cloned(),
        }
    }

    /// The file's variables the process does not set.
    #[must_use]
    pub fn file_only(&self) -> Vec<(String, String)> {
        self.file
            .iter()
            .filter(|(k, _)| process_var(k).is_none())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the one place that reads the process environment"
)]
fn process_var(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

static LAYERS: OnceLock<Layers> = OnceLock::new();

/// Install the env file's layer (once, before the command line is parsed). A second call is
/// refused: the layer never changes while the bridge runs.
///
/// # Errors
/// The file cannot be read or parsed, or a layer is already installed.
pub fn install(path: &Path) -> Result<(), String> {
    let layers = Layers::read(path)?;
    LAYERS
        .set(layers)
        .map_err(|_| String::from("an env file is already loaded"))
}

fn layers() -> &'static Layers {
    LAYERS.get_or_init(Layers::default)
}

/// A variable from the process, else from `--env-file`.
#[must_use]
pub fn var(name: &str) -> Option<String> {
    layers().var(name)
}

/// [`var`], an empty value counting as unset.
#[must_use]
pub fn non_empty(name: &str) -> Option<String> {
    var(name).filter(|v| !v.is_empty())
}

/// A variable from the process only (`--env-file` is not consulted): for what must be known
/// before the file is read (`CLAUDE_BRIDGE_ENV_FILE` itself).
#[must_use]
pub fn process_only(name: &str) -> Option<OsString> {
    process_var(name)
}

/// The `--env-file` variables the process lacks, for a child process's environment.
#[must_use]
pub fn file_only() -> Vec<(String, String)> {
    layers().file_only()
}

/// `command` (and its subcommands) with each flag's default taken from the env file where the
/// file sets the flag's variable and the process does not: clap then ranks it below the flag
/// and the real variable, and parses it as it parses the variable. A default that is a secret
/// (`hide_env_values`) is not shown in `--help`.
#[must_use]
pub fn with_file_defaults(command: clap::Command) -> clap::Command {
    with_defaults_from(command, layers())
}

fn with_defaults_from(command: clap::Command, layers: &Layers) -> clap::Command {
    let command = command.mut_args(|arg| {
        let Some(name) = arg.get_env().and_then(|n| n.to_str()) else {
            return arg;
        };
        if process_var(name).is_some() {
            return arg;
        }
        let Some(value) = layers.file.get(name) else {
            return arg;
        };
        let secret = arg.is_hide_env_values_set();
        let value = value.clone();
        arg.default_value(value).hide_default_value(secret)
    });
    command.mut_subcommands(|sub| with_defaults_from(sub, layers))
}

/// The bridge's own state directory: `$XDG_STATE_HOME/claude-bridge`, else
/// `~/.local/state/claude-bridge`; `None` when neither is known.
#[must_use]
pub fn state_dir() -> Option<std::path::PathBuf> {
    let from_env = |name: &str| non_empty(name).map(std::path::PathBuf::from);
    Some(
        from_env("XDG_STATE_HOME")
            .or_else(|| from_env("HOME").map(|home| home.join(".local").join("state")))?
            .join("claude-bridge"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches, Parser};

    #[derive(Debug, Parser)]
    struct Args {
        #[arg(long, env = "CB_TEST_MODEL", default_value = "builtin")]
        model: String,
        #[arg(long, env = "CB_TEST_KEY", hide_env_values = true)]
        key: Option<String>,
        #[arg(long, env = "CB_TEST_FLAG")]
        flag: bool,
        #[arg(long, env = "CB_TEST_PORT", default_value_t = 1)]
        port: u16,
    }

    fn parse(layers: &Layers, argv: &[&str]) -> Result<Args, clap::Error> {
        let matches = with_defaults_from(Args::command(), layers).try_get_matches_from(argv)?;
        Args::from_arg_matches(&matches)
    }

    #[test]
    fn the_file_is_beneath_the_flags_and_above_the_builtin_defaults() {
        let file = Layers::from_pairs([
            ("CB_TEST_MODEL", "from-file"),
            ("CB_TEST_FLAG", "true"),
            ("CB_TEST_KEY", "sk-file"),
        ]);
        let args = parse(&file, &["t"]).unwrap();
        assert_eq!(args.model, "from-file");
        assert!(args.flag);
        assert_eq!(args.key.as_deref(), Some("sk-file"));
        assert_eq!(args.port, 1, "a variable the file lacks keeps the default");
        let args = parse(&file, &["t", "--model", "from-flag"]).unwrap();
        assert_eq!(args.model, "from-flag");
        assert_eq!(parse(&Layers::default(), &["t"]).unwrap().model, "builtin");
    }

    #[test]
    fn a_bad_file_value_is_refused_like_a_bad_variable() {
        let file = Layers::from_pairs([("CB_TEST_PORT", "eighty")]);
        let error = parse(&file, &["t"]).unwrap_err().to_string();
        assert!(error.contains("eighty"), "{error}");
    }

    #[test]
    fn help_never_shows_a_secret_from_the_file() {
        let file = Layers::from_pairs([("CB_TEST_KEY", "sk-file-secret"), ("CB_TEST_MODEL", "m1")]);
        let help = with_defaults_from(Args::command(), &file)
            .render_long_help()
            .to_string();
        assert!(!help.contains("sk-file-secret"), "{help}");
        assert!(help.contains("m1"), "{help}");
    }

    #[test]
    fn the_file_parses_with_dotenv_rules_and_names_itself_on_error() {
        let dir = std::env::temp_dir().join(format!("cb-envfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bridge.env");
        std::fs::write(
            &path,
            "# comment\nexport CB_A=1\nCB_B=\"two words\"\nCB_C='single'\nCB_D=x # trailing\n",
        )
        .unwrap();
        let layers = Layers::read(&path).unwrap();
        assert_eq!(layers.var("CB_A").as_deref(), Some("1"));
        assert_eq!(layers.var("CB_B").as_deref(), Some("two words"));
        assert_eq!(layers.var("CB_C").as_deref(), Some("single"));
        assert_eq!(layers.var("CB_D").as_deref(), Some("x"));
        assert!(layers.var("CB_NOT_THERE").is_none());
        std::fs::write(&path, "CB_E=\"unclosed\n").unwrap();
        let error = Layers::read(&path).unwrap_err();
        assert!(error.contains("bridge.env"), "{error}");
        let error = Layers::read(&dir.join("missing.env")).unwrap_err();
        assert!(error.contains("missing.env"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_process_wins_over_the_file() {
        // PATH is set in every test process.
        let layers = Layers::from_pairs([("PATH", "/from/file"), ("CB_ONLY_FILE", "f")]);
        assert_ne!(layers.var("PATH").as_deref(), Some("/from/file"));
        assert_eq!(
            layers.file_only(),
            vec![(String::from("CB_ONLY_FILE"), String::from("f"))]
        );
    }
}
