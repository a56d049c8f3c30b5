//! The facts a verdict depends on that live outside the ticks, read from disk and git: a
//! selector's receipts, the selected-list, the cached origin sha, and whether a triggering change
//! landed since a run. `check`, `reopen` and the watcher's re-evaluation all read them here; the
//! engine itself (`verdict.rs`) stays pure.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::engine::receipts::{self, Receipt};
use crate::engine::verdict::Selected;
use crate::sys::fsio;

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
    crate::sys::child::git_stdout(&mut repository_git(root, args))
}

/// `git -C <root> <args>` as evd runs it: about the repository only, never with the caller's or
/// evd's own `GIT_DIR`, `GIT_WORK_TREE` or `GIT_INDEX_FILE`.
pub fn repository_git<S: AsRef<std::ffi::OsStr>>(root: &Path, args: &[S]) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(root)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
    c
}

/// Like [`git`], but an empty output is an answer too: `None` only when git failed.
pub fn git_ok<S: AsRef<std::ffi::OsStr>>(root: &Path, args: &[S]) -> Option<String> {
    let out = crate::sys::child::output(
        &mut repository_git(root, args),
        crate::sys::child::git_timeout(),
    )
    .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether `git rev-list <commit>..HEAD -- <paths>` in `root` prints anything (trigger
/// liveness). A git failure, an empty commit or one that would read as a git option is "not
/// triggered".
pub fn triggered_since(root: &Path, commit: &str, paths: &[String]) -> bool {
    crate::git::ranges::ask(root, commit, "HEAD", paths) == crate::git::ranges::Range::Touched
}

/// Whether a commit since `verified_at_sha` up to `reference` touched `paths`, for 0.1.29's
/// diff-aware staleness: a git failure (an unknown commit) counts as touched.
pub fn touched_since_verified(
    root: &Path,
    verified: &str,
    reference: &str,
    paths: &[String],
) -> bool {
    crate::git::ranges::ask(root, verified, reference, paths)
        != crate::git::ranges::Range::Untouched
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
}
