//! The facts a verdict depends on that live outside the ticks, read from disk and git: a
//! selector's receipts, the selected-list, the cached origin sha, and whether a triggering change
//! landed since a run. `check`, `reopen` and the watcher's re-evaluation all read them here; the
//! engine itself (`verdict.rs`) stays pure.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::fsio;
use crate::receipts::{self, Receipt};
use crate::verdict::Selected;

/// The receipts of one selector; a missing, unreadable or poisoned file reads as none.
pub fn read_receipts(results: &Path, selector: &str) -> Vec<Receipt> {
    let path = results
        .join("receipts")
        .join(format!("{}.jsonl", proto::id::receipt_key(selector)));
    match fsio::read_text_opt(&path) {
        Ok(Some(text)) => receipts::parse_file(&text).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// `results/selected.json`: `None` when missing or invalid (closed key set, string arrays).
pub fn read_selected(results: &Path) -> Option<Selected> {
    parse_selected(&fsio::read_text(&results.join("selected.json")).ok()?)
}

/// An object with keys only from {commit, changed, selected}, the two lists arrays of strings.
/// Anything else is invalid, which reads as absent.
pub fn parse_selected(text: &str) -> Option<Selected> {
    let v: Value = serde_json::from_str(text).ok()?;
    let o = v.as_object()?;
    if o.keys()
        .any(|k| !matches!(k.as_str(), "commit" | "changed" | "selected"))
    {
        return None;
    }
    let list = |k: &str| -> Option<Vec<String>> {
        match o.get(k) {
            None => Some(Vec::new()),
            Some(Value::Array(a)) => a.iter().map(|x| x.as_str().map(str::to_string)).collect(),
            Some(_) => None,
        }
    };
    Some(Selected {
        changed: list("changed")?,
        selected: list("selected")?,
    })
}

/// The cached staleness reference `results/origin-sha`, trimmed; empty reads as absent.
pub fn cached_origin(results: &Path) -> Option<String> {
    fsio::read_text(&results.join("origin-sha"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// A repository-only git query in `root` (never the caller's or evd's own git environment): its
/// trimmed output when git succeeded and printed something.
pub fn git<S: AsRef<std::ffi::OsStr>>(root: &Path, args: &[S]) -> Option<String> {
    crate::child::git_stdout(
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE"),
    )
}

/// Whether `git rev-list <commit>..HEAD -- <paths>` in `root` prints anything. A git failure, an
/// empty commit or one that would read as a git option is "not triggered".
pub fn triggered_since(root: &Path, commit: &str, paths: &[String]) -> bool {
    // A receipt is trusted as written, but never as a git option.
    if commit.is_empty() || commit.starts_with('-') {
        return false;
    }
    let mut args = vec![
        "rev-list".to_string(),
        format!("{commit}..HEAD"),
        "--".into(),
    ];
    args.extend(paths.iter().cloned());
    git(root, &args).is_some()
}

/// At most this many new commits are carried over by [`carry_triggers`]; more ask git afresh.
const CARRY_MAX_COMMITS: usize = 64;
/// At most this many commits of the old HEAD's history are listed to know a receipt's commit.
const CARRY_MAX_HISTORY: usize = 200_000;

/// Carry trigger answers known at HEAD `old` over to HEAD `new`, when `new` extends `old` by a few
/// single-parent commits (the usual commit, or a fast-forward): three git questions instead of
/// one `rev-list` per receipt commit and trigger set.
///
/// For a receipt commit `C` that `old` reaches, `C..new` is `C..old` plus the new commits (none
/// of which `C` reaches), so an answer that was yes stays yes, and one that was no becomes yes
/// exactly when a new commit changed a path the triggers cover (a single-parent commit is in
/// `git rev-list -- <paths>` exactly when its own diff touches one, renames counted on both
/// sides). Receipt commits `old` does not reach (another branch, an abbreviation), and trigger
/// sets using pathspec magic (`:(…)`), are left out: they are asked again, as is everything when
/// `None` comes back (a merge, a rewind, a reset elsewhere, too many commits, a git failure).
pub fn carry_triggers(
    root: &Path,
    old: &str,
    new: &str,
    memo: crate::store::TriggerAnswers,
) -> Option<crate::store::TriggerAnswers> {
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(old) || !hex(new) || old == new {
        return None;
    }
    // The new commits: a chain of single-parent commits growing from `old`.
    let chain = git(
        root,
        &[
            "rev-list",
            "--parents",
            &format!("--max-count={}", CARRY_MAX_COMMITS + 1),
            &format!("{old}..{new}"),
        ],
    )?;
    let mut commits = std::collections::HashSet::new();
    let mut parents = Vec::new();
    for line in chain.lines() {
        let mut ids = line.split_whitespace();
        let (Some(c), Some(p), None) = (ids.next(), ids.next(), ids.next()) else {
            return None;
        };
        commits.insert(c.to_string());
        parents.push(p.to_string());
    }
    if commits.is_empty() || commits.len() > CARRY_MAX_COMMITS {
        return None;
    }
    if !parents.iter().all(|p| p == old || commits.contains(p)) {
        return None;
    }
    // What each changed, both sides of a rename included.
    let log = git(
        root,
        &[
            "log",
            "-z",
            "--no-renames",
            "--name-only",
            "--format=%x01%H",
            &format!("{old}..{new}"),
        ],
    )
    .unwrap_or_default();
    let mut changed: Vec<Vec<String>> = Vec::new();
    // Each commit reads `\x01<id>\0\n<file>\0<file>\0…`.
    for chunk in log.split('\u{1}').skip(1) {
        let mut parts = chunk.split('\0');
        if !parts.next().is_some_and(|id| commits.contains(id.trim())) {
            return None;
        }
        let files: Vec<String> = parts
            .enumerate()
            .map(|(i, f)| {
                if i == 0 {
                    f.strip_prefix('\n').unwrap_or(f)
                } else {
                    f
                }
            })
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect();
        if files.iter().any(|f| f.contains('\u{FFFD}')) {
            return None;
        }
        changed.push(files);
    }
    if changed.len() != commits.len() {
        return None;
    }
    let history = git(
        root,
        &["rev-list", &format!("--max-count={CARRY_MAX_HISTORY}"), old],
    )?;
    let reached: std::collections::HashSet<&str> = history.lines().collect();
    let touches = |paths: &[String]| {
        if paths.is_empty() {
            return true; // `rev-list C..HEAD --` lists every new commit
        }
        changed.iter().any(|files| {
            files
                .iter()
                .any(|f| paths.iter().any(|t| proto::pathspec::covers(t, f)))
        })
    };
    let mut out = crate::store::TriggerAnswers::new();
    for (commit, answers) in memo {
        if !reached.contains(commit.as_str()) {
            continue;
        }
        let carried: std::collections::HashMap<Vec<String>, bool> = answers
            .into_iter()
            .filter(|(paths, _)| !paths.iter().any(|t| t.starts_with(':')))
            .map(|(paths, was)| {
                let now = was || touches(&paths);
                (paths, now)
            })
            .collect();
        if !carried.is_empty() {
            out.insert(commit, carried);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selected_json_is_closed_and_typed() {
        let s = parse_selected(r#"{"commit":1,"changed":["a"],"selected":["t"]}"#).expect("ok");
        assert_eq!(s.changed, vec!["a".to_string()]);
        assert_eq!(s.selected, vec!["t".to_string()]);
        assert_eq!(parse_selected("{}"), Some(Selected::default()));
        assert_eq!(parse_selected(r#"{"changed":["a"],"x":1}"#), None);
        assert!(parse_selected(r#"{"extra":[]}"#).is_none());
        assert!(parse_selected(r#"{"changed":"a"}"#).is_none());
        assert!(parse_selected(r#"{"selected":[1]}"#).is_none());
        assert!(parse_selected("[]").is_none());
        assert!(parse_selected("not json").is_none());
    }

    #[test]
    fn a_bad_commit_or_no_repository_is_never_triggered() {
        let nowhere = Path::new("/nonexistent");
        assert!(!triggered_since(nowhere, "", &[]));
        assert!(!triggered_since(nowhere, "--output=/nonexistent/x", &[]));
        assert!(!triggered_since(nowhere, &"f".repeat(40), &["src".into()]));
    }

    /// A repository and a commit helper: `commit(files)` writes each file and commits.
    fn repo() -> (tempfile::TempDir, impl Fn(&[&str]) -> String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        let run = {
            let root = root.clone();
            move |args: &[&str]| -> String {
                let out = Command::new("git")
                    .arg("-C")
                    .arg(&root)
                    .args(args)
                    .env("GIT_CONFIG_NOSYSTEM", "1")
                    .env("GIT_CONFIG_GLOBAL", "/dev/null")
                    .output()
                    .expect("git");
                assert!(out.status.success(), "git {args:?}");
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            }
        };
        run(&["init", "-q", "-b", "main"]);
        run(&["config", "user.name", "t"]);
        run(&["config", "user.email", "t@example.invalid"]);
        let commit = move |files: &[&str]| -> String {
            for f in files {
                let p = root.join(f);
                std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                let n = std::fs::read_to_string(&p).unwrap_or_default();
                std::fs::write(&p, format!("{n}x")).expect("write");
            }
            run(&["add", "-A"]);
            run(&["commit", "-q", "--allow-empty", "-m", "c"]);
            run(&["rev-parse", "HEAD"])
        };
        (dir, commit)
    }

    #[test]
    fn carried_trigger_answers_equal_what_git_says() {
        let (dir, commit) = repo();
        let root = dir.path();
        let c1 = commit(&["db/schema.sql", "api/routes.rs"]);
        let c2 = commit(&["README"]);
        let old = commit(&["api/routes.rs"]);
        let triggers: Vec<Vec<String>> = [
            vec!["db/schema.sql"],
            vec!["api"],
            vec!["*.sql"],
            vec!["README", "docs"],
            vec!["nothing/here"],
            vec![],
        ]
        .iter()
        .map(|v| v.iter().map(|s| s.to_string()).collect())
        .collect();
        let ask = |c: &str, p: &[String]| triggered_since(root, c, p);
        let mut memo = crate::store::TriggerAnswers::new();
        for c in [&c1, &c2, &old] {
            for p in &triggers {
                memo.entry(c.clone())
                    .or_default()
                    .insert(p.clone(), ask(c, p));
            }
        }
        memo.entry("abc123".into())
            .or_default()
            .insert(vec!["x".into()], false);
        let new = {
            commit(&["db/schema.sql"]);
            commit(&["docs/guide.md"])
        };
        let carried = carry_triggers(root, &old, &new, memo.clone()).expect("carried");
        for c in [&c1, &c2, &old] {
            for p in &triggers {
                assert_eq!(
                    carried[c.as_str()][p],
                    ask(c, p),
                    "receipt at {c}, triggers {p:?}"
                );
            }
        }
        assert!(
            !carried.contains_key("abc123"),
            "an unknown commit is asked again"
        );
        // Not a fast-forward of single-parent commits: nothing is carried.
        assert!(carry_triggers(root, &new, &old, memo.clone()).is_none());
        assert!(carry_triggers(root, &old, &old, memo).is_none());
    }
}
