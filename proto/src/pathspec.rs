//! Whether a ground's `triggered_by` entry covers a file, the way git reads it as a pathspec in
//! `git rev-list <since>..HEAD -- <trigger>` (the question staleness asks). Both sides are paths
//! relative to the store's root, `/`-separated. Pure.
//!
//! - A trigger without wildcards covers the file itself and everything beneath it when it names
//!   a directory (`src` and `src/` both cover `src/db/schema.sql`).
//! - A trigger with `*`, `?` or `[…]` is a glob over the whole path, where `*` also crosses `/`
//!   (git's default pathspec matching, not shell globbing). A glob also covers everything
//!   beneath a directory it matches.
//! - `.` (or an empty trigger) covers the whole tree; a leading `./` is ignored.

/// Does `trigger` cover `path`?
pub fn covers(trigger: &str, path: &str) -> bool {
    let t = normalise(trigger);
    let p = normalise(path);
    if t.is_empty() {
        return true;
    }
    if p.is_empty() {
        return false;
    }
    if !has_wildcard(t) {
        return p == t || p.strip_prefix(t).is_some_and(|rest| rest.starts_with('/'));
    }
    // The file itself, or any directory above it.
    if glob(t.as_bytes(), p.as_bytes()) {
        return true;
    }
    p.match_indices('/')
        .any(|(i, _)| glob(t.as_bytes(), &p.as_bytes()[..i]))
}

/// The triggers among `triggers` that cover `path`.
pub fn covering<'t>(triggers: &'t [String], path: &str) -> Vec<&'t str> {
    triggers
        .iter()
        .filter(|t| covers(t, path))
        .map(String::as_str)
        .collect()
}

fn normalise(s: &str) -> &str {
    let mut s = s.trim_end_matches('/');
    while let Some(rest) = s.strip_prefix("./") {
        s = rest.trim_start_matches('/');
    }
    if s == "." {
        ""
    } else {
        s
    }
}

fn has_wildcard(s: &str) -> bool {
    s.bytes().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// fnmatch without FNM_PATHNAME: `*` matches any run (slashes included), `?` one byte, `[…]` a
/// class (`!` or `^` negates, `a-z` ranges), `\x` a literal `x`. Iterative, with one backtrack
/// point, so it is linear-ish whatever the input.
fn glob(pat: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = match pat.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some(b'?') => Some(p + 1),
            Some(b'[') => match class(pat, p, text[t]) {
                Some((true, next)) => Some(next),
                Some((false, _)) => None,
                // An unclosed `[` is a literal.
                None => (text[t] == b'[').then_some(p + 1),
            },
            Some(b'\\') if p + 1 < pat.len() => (pat[p + 1] == text[t]).then_some(p + 2),
            Some(&c) => (c == text[t]).then_some(p + 1),
            None => None,
        };
        match step {
            Some(next) => {
                p = next;
                t += 1;
            }
            None => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// Match `c` against the class starting at `pat[open] == b'['`: whether it matched, and where the
/// pattern goes on; `None` when the class is not closed.
fn class(pat: &[u8], open: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = open + 1;
    let negate = matches!(pat.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    loop {
        let b = *pat.get(i)?;
        if b == b']' && !first {
            return Some((hit != negate, i + 1));
        }
        first = false;
        if pat.get(i + 1) == Some(&b'-') && pat.get(i + 2).is_some_and(|&e| e != b']') {
            let e = pat[i + 2];
            hit |= b <= c && c <= e;
            i += 3;
        } else {
            hit |= b == c;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_trigger_covers_itself_and_what_is_beneath_it() {
        assert!(covers("schema.sql", "schema.sql"));
        assert!(covers("./schema.sql", "schema.sql"));
        assert!(covers("db", "db/schema.sql"));
        assert!(covers("db/", "db/migrations/001.sql"));
        assert!(!covers("db", "dbx/schema.sql"));
        assert!(!covers("db/schema.sql", "db"));
        assert!(!covers("schema.sql", "other/schema.sql"));
        assert!(covers(".", "anything/at/all"));
        assert!(covers("", "x"));
    }

    #[test]
    fn a_glob_crosses_slashes_like_a_git_pathspec() {
        assert!(covers("*.sql", "schema.sql"));
        assert!(covers("*.sql", "db/deep/schema.sql"));
        assert!(covers("src/*.rs", "src/a/b.rs"));
        assert!(!covers("src/*.rs", "tests/a.rs"));
        assert!(covers("db/?.sql", "db/1.sql"));
        assert!(!covers("db/?.sql", "db/12.sql"));
        assert!(covers("db/[0-9]*.sql", "db/001_init.sql"));
        assert!(!covers("db/[!0-9]*.sql", "db/001_init.sql"));
        assert!(
            covers("d*", "db/schema.sql"),
            "a glob matching a directory covers its files"
        );
        assert!(covers("a\\*b", "a*b"));
        assert!(!covers("a\\*b", "axb"));
        assert!(covers("x[", "x["), "an unclosed class is literal");
    }

    #[test]
    fn covering_lists_the_triggers_that_apply() {
        let t = vec!["db".to_string(), "*.md".to_string(), "api".to_string()];
        assert_eq!(covering(&t, "db/README.md"), vec!["db", "*.md"]);
        assert!(covering(&t, "src/main.rs").is_empty());
    }

    #[test]
    fn pathological_globs_stay_fast() {
        let pat = "*a*a*a*a*a*a*a*a*b";
        let text = "a".repeat(5000);
        assert!(!covers(pat, &text));
    }
}
