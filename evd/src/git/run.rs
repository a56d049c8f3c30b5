//! How evd runs git: `git -C <root>` about the repository only, never with the caller's or
//! evd's own git environment, always under a deadline ([`crate::sys::child`]). Every git
//! process of the git layer starts here.

use std::path::Path;
use std::process::Command;

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

/// [`repository_git`] fed `input` on its stdin, under the git deadline and at most `max` bytes
/// of answer: its stdout, or what git said when it failed.
pub fn git_fed(root: &Path, args: &[&str], input: Vec<u8>, max: usize) -> Result<Vec<u8>, String> {
    let out = crate::sys::child::output_with_input(
        &mut repository_git(root, args),
        input,
        crate::sys::child::git_timeout(),
        max,
    )
    .map_err(|e| e.to_string())?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(format!(
        "`git {}` failed: {}",
        args.join(" "),
        if said.is_empty() {
            out.status.to_string()
        } else {
            said
        }
    ))
}
