//! The runner of the worked examples in docs/*.md, so the docs cannot drift from the tools.
//!
//! In a page, every fenced block whose info string is `console` is an example. A line starting
//! with `$ ` is a command, run by bash (stderr merged into stdout) in a fresh git repository
//! made for that page, with the workspace's `evd` and `evctl` first on `PATH` and a private
//! runtime directory (so a daemon of the page's own); files and the daemon carry across the
//! blocks of one page, shell variables do not (each command is its own `bash -c`).
//!
//! A command line ending in `\` continues on the next line, as in bash. A command ending in a
//! heredoc (`<<'EOF'` or `<<EOF`) takes the following lines up to the terminator as its body.
//! The lines after a command, up to the next command or the end of the block, are its exact
//! expected output, except that a line `...` stands for any number of lines, and `[..]` inside
//! a line stands for any text within that line (a pid, a time, a content id).

use std::path::{Path, PathBuf};

use crate::{target_dir, Repo, World};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    pub command: String,
    pub expected: Vec<String>,
    /// The 1-based line of the page the command starts on.
    pub line: usize,
}

/// The heredoc terminator a command line ends with, if any.
fn heredoc_terminator(line: &str) -> Option<String> {
    line.rsplit_once("<<")
        .map(|(_, t)| t.trim().trim_matches(|c| c == '\'' || c == '"').to_string())
        .filter(|t| !t.is_empty() && !t.contains(char::is_whitespace))
}

/// The examples of a page, in order.
pub fn examples(page: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut in_block = false;
    let mut heredoc: Option<String> = None;
    let mut continued = false;
    for (n, line) in page.lines().enumerate() {
        if !in_block {
            in_block = line.trim() == "```console";
            continue;
        }
        if let Some(term) = &heredoc {
            let ex = out.last_mut().expect("a heredoc follows its command");
            ex.command.push('\n');
            ex.command.push_str(line);
            if line.trim() == term {
                heredoc = None;
            }
            continue;
        }
        if continued {
            let ex = out.last_mut().expect("a continuation follows its command");
            ex.command.push('\n');
            ex.command.push_str(line);
            continued = line.ends_with('\\');
            heredoc = heredoc_terminator(line);
            continue;
        }
        if line.trim_start().starts_with("```") {
            in_block = false;
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            continued = cmd.ends_with('\\');
            heredoc = heredoc_terminator(cmd);
            out.push(Example {
                command: cmd.to_string(),
                expected: Vec::new(),
                line: n + 1,
            });
        } else if let Some(ex) = out.last_mut() {
            ex.expected.push(line.to_string());
        }
    }
    out
}

/// Does the output line `got` match the expected line `want`, where `[..]` in `want` matches
/// any run of characters?
pub fn line_matches(want: &str, got: &str) -> bool {
    let mut parts = want.split("[..]");
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = got.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Does `got` match `want`, where a `...` line in `want` matches any run of lines?
pub fn matches(want: &[String], got: &[&str]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((w, rest)) if w == "..." => (0..=got.len()).any(|k| matches(rest, &got[k..])),
        Some((w, rest)) => {
            got.first().is_some_and(|g| line_matches(w, g)) && matches(rest, &got[1..])
        }
    }
}

/// Run every example of the page at `path` in a fresh world and repository, panicking at the
/// first whose output differs. Returns how many ran.
pub fn run_page(path: &Path) -> usize {
    let page = std::fs::read_to_string(path).expect("read page");
    let exs = examples(&page);
    if exs.is_empty() {
        return 0;
    }
    let w = World::new();
    let repo = Repo::new();
    let bin_dir: PathBuf = target_dir();
    let path_var = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for ex in &exs {
        let out = w
            .command("bash")
            .arg("-c")
            .arg(format!("{{\n{}\n}} 2>&1", ex.command))
            .current_dir(repo.path())
            .env("PATH", &path_var)
            .env("NO_COLOR", "1")
            .output()
            .expect("bash");
        let text = String::from_utf8_lossy(&out.stdout);
        let got: Vec<&str> = text.lines().collect();
        assert!(
            matches(&ex.expected, &got),
            "{}:{}: `{}`\n--- expected\n{}\n--- got\n{}",
            path.display(),
            ex.line,
            ex.command,
            ex.expected.join("\n"),
            got.join("\n")
        );
    }
    exs.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_format_is_read_as_documented() {
        let page = "x\n```console\n$ echo a\na\n...\n$ cat > f <<'EOF'\nline\nEOF\n```\n";
        let exs = examples(page);
        assert_eq!(exs.len(), 2);
        assert_eq!(exs[0].expected, vec!["a", "..."]);
        assert_eq!(exs[1].command, "cat > f <<'EOF'\nline\nEOF");
        assert!(matches(&exs[0].expected, &["a", "b", "c"]));
        assert!(matches(&exs[0].expected, &["a"]));
        assert!(!matches(&exs[0].expected, &["b"]));
    }

    #[test]
    fn a_trailing_backslash_continues_the_command() {
        let page = "```console\n$ printf '%s\\n' \\\n  one \\\n  two\none\ntwo\n$ cat <<EOF\n$HOME\nEOF\n```\n";
        let exs = examples(page);
        assert_eq!(exs.len(), 2);
        assert_eq!(exs[0].command, "printf '%s\\n' \\\n  one \\\n  two");
        assert_eq!(exs[0].expected, vec!["one", "two"]);
        assert_eq!(exs[1].command, "cat <<EOF\n$HOME\nEOF");
        assert!(exs[1].expected.is_empty());
        // A heredoc may start on a continuation line.
        let exs = examples("```console\n$ cat \\\n  <<'EOF'\nbody\nEOF\nbody\n```\n");
        assert_eq!(exs[0].command, "cat \\\n  <<'EOF'\nbody\nEOF");
        assert_eq!(exs[0].expected, vec!["body"]);
    }

    #[test]
    fn a_wildcard_matches_any_text_within_a_line() {
        assert!(line_matches(
            r#"{"pid":[..],"ok":true}"#,
            r#"{"pid":42,"ok":true}"#
        ));
        assert!(line_matches("[..]", ""));
        assert!(line_matches("a[..]", "a"));
        assert!(line_matches("[..]b[..]b", "abxb"));
        assert!(!line_matches("[..]b[..]b", "ab"));
        assert!(!line_matches(
            r#"{"pid":[..],"ok":true}"#,
            r#"{"pid":42,"ok":false}"#
        ));
        assert!(!line_matches("exact", "exact but longer"));
        assert!(line_matches("exact", "exact"));
    }
}
