//! Secret values: a literal, or `env:NAME` to read the environment variable `NAME`. Resolved
//! values are [`SecretString`]s, which `Debug` prints as `[REDACTED]`; only
//! [`secrecy::ExposeSecret::expose_secret`] gives the text, so a key reaches a log only on purpose.

use secrecy::SecretString;

use super::locate::Env;

/// The prefix that makes a secret field read an environment variable.
pub const ENV_PREFIX: &str = "env:";

/// Resolve a secret field's value: `env:NAME` reads `NAME` from `env`, anything else is the
/// secret itself. Refuses an empty secret (an empty key would silently turn authentication
/// off, or be sent as an empty credential).
///
/// # Errors
/// The variable is not set or empty, the name is missing, or the literal is empty; the message
/// says what to do.
pub fn resolve(value: &str, env: &Env) -> Result<SecretString, String> {
    let Some(name) = value.strip_prefix(ENV_PREFIX) else {
        if value.is_empty() {
            return Err(String::from(
                "empty: write the value, or \"env:NAME\" to read it from the environment, or leave the key out",
            ));
        }
        return Ok(SecretString::from(value));
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(String::from(
            "\"env:\" names no variable: write e.g. \"env:OPENAI_API_KEY\"",
        ));
    }
    match env.var(name) {
        Some(found) if !found.is_empty() => Ok(SecretString::from(found)),
        Some(_) => Err(format!(
            "the environment variable {name} is empty; set it, or write the value itself"
        )),
        None => Err(format!(
            "the environment variable {name} is not set; set it, or write the value itself"
        )),
    }
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    #[test]
    fn reads_literals_and_environment_variables() {
        let env = Env::fixed("/")
            .with_var("KEY", "sk-123")
            .with_var("BLANK", "");
        assert_eq!(resolve("sk-lit", &env).unwrap().expose_secret(), "sk-lit");
        assert_eq!(resolve("env:KEY", &env).unwrap().expose_secret(), "sk-123");
        assert_eq!(
            resolve("env: KEY ", &env).unwrap().expose_secret(),
            "sk-123"
        );
        assert!(resolve("env:NOPE", &env).is_err_and(|e| e.contains("NOPE is not set")));
        assert!(resolve("env:BLANK", &env).is_err_and(|e| e.contains("BLANK is empty")));
        assert!(resolve("env:", &env).is_err_and(|e| e.contains("names no variable")));
        assert!(resolve("", &env).is_err_and(|e| e.starts_with("empty")));
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let env = Env::fixed("/").with_var("KEY", "sk-very-secret");
        let secret = resolve("env:KEY", &env).unwrap();
        let shown = format!("{secret:?}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(shown.contains("REDACTED"), "{shown}");
    }
}
