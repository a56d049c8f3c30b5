//! For the git layer's unit tests only: git in a scratch repository, with a fixed identity and
//! none of the caller's git environment (CI runs with no global git config at all).

use std::path::Path;
use std::process::Command;

/// `git <args>` in `dir`, not yet run.
pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "T")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "T")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE");
    c
}

/// Run it; its stdout as printed. Panics unless git succeeds.
pub fn git_raw(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = command(dir, args).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    out.stdout
}

/// [`git_raw`], trimmed text.
pub fn git(dir: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&git_raw(dir, args))
        .trim()
        .to_string()
}
