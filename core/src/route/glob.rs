//! Model-name patterns: `*` is any run of characters (`/` and `:` included, or none), `?` exactly
//! one character; everything else matches itself, case included (model ids are case-sensitive).

/// Whether `text` matches `pattern` as a whole.
///
/// ```
/// use bridge_core::route::glob_match;
/// assert!(glob_match("claude-opus-*", "claude-opus-4-1-20250805"));
/// assert!(glob_match("*haiku*", "claude-3-5-haiku-latest"));
/// assert!(glob_match("gpt-?", "gpt-5"));
/// assert!(!glob_match("claude-opus-*", "Claude-Opus-4"));
/// ```
#[must_use]
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // The last `*` seen, and the text position its run currently ends at: on a mismatch the
    // star takes one more character and matching resumes after it (linear backtracking).
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn literals_match_only_themselves() {
        assert!(glob_match("gpt-5", "gpt-5"));
        assert!(!glob_match("gpt-5", "gpt-5-mini"));
        assert!(!glob_match("gpt-5", "gpt-"));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "a"));
    }

    #[test]
    fn star_takes_any_run_including_none_and_slashes() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "org/repo:file.gguf"));
        assert!(glob_match("claude-*", "claude-"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(glob_match("*-4-*", "claude-opus-4-1"));
        assert!(!glob_match("a*b", "aXbY"));
        assert!(glob_match("**a", "bba"));
    }

    #[test]
    fn question_mark_takes_exactly_one_character() {
        assert!(glob_match("o?-mini", "o4-mini"));
        assert!(!glob_match("o?-mini", "o-mini"));
        assert!(!glob_match("o?-mini", "o44-mini"));
        assert!(glob_match("?", "é"));
        assert!(glob_match("?*", "x"));
        assert!(!glob_match("?*", ""));
    }

    #[test]
    fn case_matters() {
        assert!(!glob_match("claude-*", "CLAUDE-x"));
        assert!(!glob_match("*Haiku*", "claude-haiku-4-5"));
    }
}
