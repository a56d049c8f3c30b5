//! The one line evctl adds to a project's own hook file when git's hooks directory is inside the
//! work tree (husky's `.husky/pre-commit`, a committed `.githooks/`): the line, where it goes
//! (last, or before a final `exit`/`exec`), finding it, bringing it up to date, and removing it so
//! that the file is left byte for byte as it was.
//!
//! Pure text: it must not touch the filesystem. evctl's own script is `script.rs`'s.

use super::hook::{Hook, LINE_MARK};
use super::script::invocation;

/// What a hook file evctl creates inside the work tree starts with.
const CREATED_HEAD: &str = "#!/bin/sh\n";

/// What the line evctl added to a project's hook file remembers about the file before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineFlags {
    /// evctl created the file (uninstall deletes it when nothing else was added since).
    pub created: bool,
    /// The file did not end with a newline; evctl added one before its line.
    pub newline_added: bool,
}

/// The one line evctl adds to a project's hook file (without its newline).
pub fn tree_line(hook: Hook, store: Option<&str>, strict: bool, flags: LineFlags) -> String {
    let name = hook.name();
    let mut mark = LINE_MARK.to_string();
    if flags.created {
        mark.push_str(", file created");
    }
    if flags.newline_added {
        mark.push_str(", newline added");
    }
    format!(
        "if command -v evctl >/dev/null 2>&1; then evctl {}{name} \"$@\" || exit $?; else echo \"evctl-hooks: evctl is not on PATH: the {name} gate was skipped\" >&2; fi  {mark} (evctl hooks uninstall removes it)",
        invocation(hook, store, strict)
    )
}

/// evctl's line in `text`, if any: its byte range (newline included) and its flags.
pub fn find_line(text: &str) -> Option<(std::ops::Range<usize>, LineFlags)> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if let Some(i) = line.find(LINE_MARK) {
            let rest = &line[i + LINE_MARK.len()..];
            let flags_text = rest.split(" (").next().unwrap_or("");
            let flags = LineFlags {
                created: flags_text.contains("file created"),
                newline_added: flags_text.contains("newline added"),
            };
            return Some((at..at + line.len(), flags));
        }
        at += line.len();
    }
    None
}

/// Whether `line` ends the script before anything after it could run.
fn ends_script(line: &str) -> bool {
    let t = line.trim_start();
    let word = |w: &str| {
        t.strip_prefix(w)
            .is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t', ';']))
    };
    word("exit") || word("exec")
}

/// `text` with evctl's `hook` line added: after everything the file runs (so the project's own
/// commands run first, and a pre-push's input reaches them first), or just before a final
/// `exit`/`exec` that would keep it from running. Returns the new text; `text` must not hold the
/// line yet.
pub fn add_line(text: &str, hook: Hook, store: Option<&str>, strict: bool) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let last = lines.iter().rposition(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#')
    });
    if let Some(i) = last.filter(|&i| ends_script(lines[i])) {
        let mut out: String = lines[..i].concat();
        out.push_str(&tree_line(hook, store, strict, LineFlags::default()));
        out.push('\n');
        out.push_str(&lines[i..].concat());
        return out;
    }
    let mut out = text.to_string();
    let flags = LineFlags {
        created: false,
        newline_added: !text.is_empty() && !text.ends_with('\n'),
    };
    if flags.newline_added {
        out.push('\n');
    }
    out.push_str(&tree_line(hook, store, strict, flags));
    out.push('\n');
    out
}

/// The file evctl creates in the work tree when the project has no `hook` file yet.
pub fn created_file(hook: Hook, store: Option<&str>, strict: bool) -> String {
    let flags = LineFlags {
        created: true,
        newline_added: false,
    };
    format!("{CREATED_HEAD}{}\n", tree_line(hook, store, strict, flags))
}

/// `text` with evctl's line brought up to date (same place, same flags); `None` when it already
/// is, or holds no line.
pub fn refresh_line(text: &str, hook: Hook, store: Option<&str>, strict: bool) -> Option<String> {
    let (range, flags) = find_line(text)?;
    let want = format!("{}\n", tree_line(hook, store, strict, flags));
    let have = &text[range.clone()];
    if have == want || have.trim_end_matches('\n') == want.trim_end_matches('\n') {
        return None;
    }
    let mut out = text[..range.start].to_string();
    out.push_str(&want);
    out.push_str(&text[range.end..]);
    Some(out)
}

/// What removing evctl's line leaves.
#[derive(Debug, PartialEq, Eq)]
pub enum Removed {
    /// The file's text without the line, as it was before evctl added it.
    Text(String),
    /// evctl created the file and nothing else was added since: delete it.
    Delete,
}

/// `text` without evctl's line; `None` when it holds none.
pub fn remove_line(text: &str) -> Option<Removed> {
    let (range, flags) = find_line(text)?;
    let mut out = text[..range.start].to_string();
    out.push_str(&text[range.end..]);
    if flags.created && (out.is_empty() || out == CREATED_HEAD) {
        return Some(Removed::Delete);
    }
    if flags.newline_added && range.end == text.len() && out.ends_with('\n') {
        out.pop();
    }
    Some(Removed::Text(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_goes_last_and_comes_out_leaving_identical_bytes() {
        for original in [
            "npx lint-staged\n",
            "#!/usr/bin/env sh\n. \"$(dirname -- \"$0\")/_/husky.sh\"\n\nnpm test\n",
            "npm test",
            "",
            "#!/bin/sh\nnpm test\n\n# trailing comment\n",
        ] {
            let with = add_line(original, Hook::PreCommit, None, false);
            assert!(find_line(&with).is_some(), "{with:?}");
            assert!(
                with.trim_end()
                    .ends_with("(evctl hooks uninstall removes it)"),
                "{with:?}"
            );
            assert_eq!(
                remove_line(&with),
                Some(Removed::Text(original.to_string())),
                "{original:?}"
            );
            assert_eq!(refresh_line(&with, Hook::PreCommit, None, false), None);
        }
    }

    #[test]
    fn the_line_goes_before_a_final_exit_or_exec() {
        let original = "#!/bin/sh\nnpm test\nexec git lfs pre-push \"$@\"\n";
        let with = add_line(original, Hook::PrePush, None, false);
        let lines: Vec<&str> = with.lines().collect();
        assert!(lines[2].contains("evctl hook pre-push"), "{with}");
        assert_eq!(lines[3], "exec git lfs pre-push \"$@\"");
        assert_eq!(remove_line(&with), Some(Removed::Text(original.into())));
        let exit = add_line("run\nexit 0\n", Hook::PreCommit, None, false);
        assert!(exit.ends_with("exit 0\n"), "{exit}");
        // A word that merely starts with "exit" is no exit.
        let not = add_line("exited_already\n", Hook::PreCommit, None, false);
        assert!(not.starts_with("exited_already\n"), "{not}");
    }

    #[test]
    fn a_created_file_is_deleted_only_while_nothing_else_was_added() {
        let created = created_file(Hook::PreCommit, Some("sub"), false);
        assert!(created.contains("evctl --store 'sub' hook pre-commit"));
        assert_eq!(remove_line(&created), Some(Removed::Delete));
        let edited = format!("{created}npm test\n");
        assert_eq!(
            remove_line(&edited),
            Some(Removed::Text("#!/bin/sh\nnpm test\n".into()))
        );
    }

    #[test]
    fn refreshing_keeps_the_place_and_the_flags() {
        let with = add_line("npm test", Hook::PreCommit, None, false);
        let moved = refresh_line(&with, Hook::PreCommit, Some("sub"), false).expect("changed");
        assert!(moved.contains("--store 'sub'"));
        assert!(moved.contains("newline added"));
        assert_eq!(remove_line(&moved), Some(Removed::Text("npm test".into())));
        assert_eq!(remove_line("npm test\n"), None);
    }
}
