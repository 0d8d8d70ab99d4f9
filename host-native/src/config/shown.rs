//! The config file as the dashboard shows it: every secret replaced, everything else as
//! written (comments and layout aside: the text is parsed and printed again).
//!
//! A value is a secret when its key is `key`, `api_key`, `admin_key`, `client_key`,
//! `private_key`, `password`, `secret` or `token`, or ends in `_key`, `_secret`, `_token` or
//! `_password`; every value of a `headers` table is one too (they carry credentials); a URL's
//! password (`postgres://user:pw@host/db`) is one. An `env:NAME` reference stays: it names a
//! variable, it is not the secret.
//!
//! ```
//! use claude_bridge::config::shown::masked;
//! let text = "admin_key = \"sk-admin-1\"\n[providers.a]\napi_key = \"env:A_KEY\"\n[store]\nurl = \"postgres://u:pw@db/x\"\n";
//! let shown = masked(text);
//! assert!(!shown.contains("sk-admin-1") && !shown.contains(":pw@"));
//! assert!(shown.contains("env:A_KEY") && shown.contains("postgres://u:•••@db/x"));
//! ```

use toml::{Table, Value};

/// What a masked value reads as.
pub const MASK: &str = "•••";

fn secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    matches!(
        key.as_str(),
        "key"
            | "api_key"
            | "admin_key"
            | "client_key"
            | "private_key"
            | "password"
            | "secret"
            | "token"
    ) || ["_key", "_secret", "_token", "_password"]
        .iter()
        .any(|end| key.ends_with(end))
}

fn mask_value(value: &mut Value) {
    match value {
        Value::String(s) if !s.starts_with("env:") => MASK.clone_into(s),
        Value::Array(items) => items.iter_mut().for_each(mask_value),
        Value::Table(table) => table.iter_mut().for_each(|(_, v)| mask_value(v)),
        _ => {}
    }
}

/// A URL with its password masked (`None`: it has none).
fn masked_url(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let (userinfo, host) = authority.rsplit_once('@')?;
    let (user, _password) = userinfo.split_once(':')?;
    let slash = if rest.contains('/') { "/" } else { "" };
    Some(format!("{scheme}://{user}:{MASK}@{host}{slash}{path}"))
}

fn mask_table(table: &mut Table) {
    for (key, value) in table.iter_mut() {
        if secret_key(key) || key == "headers" {
            mask_value(value);
            continue;
        }
        match value {
            Value::String(s) => {
                if let Some(url) = masked_url(s) {
                    *s = url;
                }
            }
            Value::Table(inner) => mask_table(inner),
            Value::Array(items) => {
                for item in items {
                    if let Value::Table(inner) = item {
                        mask_table(inner);
                    }
                }
            }
            _ => {}
        }
    }
}

/// `text` (a config file that loaded) with its secrets masked; a text that does not parse
/// gives an empty string (it cannot have loaded).
#[must_use]
pub fn masked(text: &str) -> String {
    let Ok(mut table) = text.parse::<Table>() else {
        return String::new();
    };
    mask_table(&mut table);
    toml::to_string(&table).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_headers_and_url_passwords_are_masked_and_references_stay() {
        let text = r#"
client_key = "ck-1"
[providers.up]
kind = "openai"
base_url = "http://127.0.0.1:1/v1"
api_key = "sk-up"
headers = { "X-Token" = "hdr-secret" }
[providers.fab]
kind = "fabstir"
private_key_file = "k.txt"
private_key = "0xabc"
[search]
api_key = "env:SEARCH_KEY"
[[keys]]
name = "alice"
key = "sk-alice"
budget_usd = 5.0
"#;
        let shown = masked(text);
        for secret in ["ck-1", "sk-up", "hdr-secret", "0xabc", "sk-alice"] {
            assert!(!shown.contains(secret), "{secret} in\n{shown}");
        }
        for kept in [
            "env:SEARCH_KEY",
            "http://127.0.0.1:1/v1",
            "alice",
            "budget_usd = 5.0",
        ] {
            assert!(shown.contains(kept), "{kept} not in\n{shown}");
        }
        // A key that merely ends in `_file` names a path, not a secret.
        assert!(shown.contains("private_key_file = \"k.txt\""), "{shown}");
    }

    #[test]
    fn a_url_without_a_password_is_left_alone() {
        assert_eq!(masked_url("postgres://db/x"), None);
        assert_eq!(masked_url("postgres://u@db/x"), None);
        assert_eq!(
            masked_url("postgres://u:p@ss@db").as_deref(),
            Some("postgres://u:•••@db")
        );
    }
}
