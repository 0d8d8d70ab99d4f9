//! Configured secrets never leave the bridge: not in a log line, not in an error a client sees.
//!
//! Keys are registered once at start ([`register`]: the upstream key, the client key, a
//! password in `--base-url`'s userinfo, a Fabstir wallet key). Everything the bridge writes to
//! its log goes through [`RedactingWriter`], and every error message built from what an
//! upstream said goes through [`redact`], so an upstream that echoes the key back ("Incorrect
//! API key provided: sk-…") cannot leak it to a client or a log file.
//!
//! ```
//! use claude_bridge::redact;
//! redact::register("sk-test-0123456789");
//! assert_eq!(
//!     redact::redact("Incorrect API key provided: sk-test-0123456789."),
//!     "Incorrect API key provided: [redacted]."
//! );
//! ```

use std::borrow::Cow;
use std::io;
use std::sync::{PoisonError, RwLock};

/// What a secret is replaced with.
pub const MASK: &str = "[redacted]";

/// Shorter strings are not treated as secrets (masking every `pw` in a log would garble it and
/// protect nothing).
const MIN_SECRET_LEN: usize = 4;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Treat `secret` as secret from now on (blank and very short strings are ignored).
pub fn register(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let mut secrets = SECRETS.write().unwrap_or_else(PoisonError::into_inner);
    if !secrets.iter().any(|s| s == secret) {
        secrets.push(secret.to_owned());
        // Longest first: a secret that contains another is masked whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// `text` with every registered secret masked.
#[must_use]
pub fn redact(text: &str) -> Cow<'_, str> {
    let secrets = SECRETS.read().unwrap_or_else(PoisonError::into_inner);
    let mut out = Cow::Borrowed(text);
    for secret in secrets.iter() {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), MASK));
        }
    }
    out
}

/// A URL with its userinfo (`user:password@`) taken out, and that userinfo.
#[must_use]
pub fn split_userinfo(url: &str) -> (String, Option<(String, String)>) {
    let Some((scheme, rest)) = url.split_once("://") else {
        return (url.to_owned(), None);
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            (
                format!("{scheme}://{host}{tail}"),
                Some((user.to_owned(), password.to_owned())),
            )
        }
        None => (url.to_owned(), None),
    }
}

/// `%XX` escapes decoded (a URL's userinfo or path segment); anything else kept as it is.
#[must_use]
pub fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A log writer that masks registered secrets in everything written through it: to stderr, or
/// (`to_file`) appended to a file.
#[derive(Debug, Clone, Default)]
pub struct RedactingWriter {
    file: Option<std::sync::Arc<std::sync::Mutex<std::fs::File>>>,
}

impl RedactingWriter {
    /// Lines go to `file` instead of stderr.
    #[must_use]
    pub fn to_file(file: std::fs::File) -> Self {
        Self {
            file: Some(std::sync::Arc::new(std::sync::Mutex::new(file))),
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactingWriter {
    type Writer = RedactingLine;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingLine(Vec::new(), self.file.clone())
    }
}

/// One log event, buffered so a secret is never split between two writes, then written masked.
#[derive(Debug)]
pub struct RedactingLine(
    Vec<u8>,
    Option<std::sync::Arc<std::sync::Mutex<std::fs::File>>>,
);

impl io::Write for RedactingLine {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactingLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let masked = redact(&text);
        match &self.1 {
            Some(file) => {
                let mut file = file
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let _ = io::Write::write_all(&mut *file, masked.as_bytes());
            }
            None => {
                let _ = io::Write::write_all(&mut io::stderr().lock(), masked.as_bytes());
            }
        }
    }
}

/// Register every secret the arguments carry with [`crate::redact`]: the upstream and client
/// keys, the userinfo of `--base-url`, a Fabstir wallet key given in the environment.
pub fn register_secrets(args: &crate::cli::ServeArgs) {
    for key in [&args.api_key, &args.client_key, &args.search_api_key]
        .into_iter()
        .flatten()
    {
        register(key);
    }
    if let (_, Some((user, password))) = split_userinfo(args.base_url()) {
        register(&password);
        register(&percent_decode(&password));
        if password.is_empty() {
            register(&user);
        }
    }
    if let Some(key) = crate::environment::var("CLAUDE_BRIDGE_PRIVATE_KEY") {
        register(&key);
        register(key.trim_start_matches("0x"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_are_masked_longest_first() {
        register("abcd-secret-key-1");
        register("abcd-secret-key-1-longer");
        register("pw");
        assert_eq!(
            redact("a abcd-secret-key-1-longer b abcd-secret-key-1 pw"),
            "a [redacted] b [redacted] pw"
        );
        assert!(matches!(redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn userinfo_is_split_off() {
        assert_eq!(
            split_userinfo("http://user:p%40ss@host:8000/v1?x=1"),
            (
                "http://host:8000/v1?x=1".to_owned(),
                Some(("user".to_owned(), "p%40ss".to_owned()))
            )
        );
        assert_eq!(
            split_userinfo("https://api.example.com/v1"),
            ("https://api.example.com/v1".to_owned(), None)
        );
        // An '@' after the authority is not userinfo.
        assert_eq!(split_userinfo("http://host/v1/models/a@b").1, None);
    }
}
