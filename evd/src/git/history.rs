//! A file as git last knew it: the copy in the index, else the one each commit that added it
//! holds (newest first, on any ref), for `evctl doctor` to put back a tick file that went
//! missing from `ticks/`. Reads only, each git process under the git deadline, each blob
//! size-checked before it is read.
//!
//! It must not decide whether a copy is good (the caller's `accept` does) nor write anything.

use std::path::Path;

use super::run::{git_ok, repository_git};

/// How many commits that added the path are tried.
const MOST_COMMITS: &str = "16";

/// What `accept` makes of the first of the copies of `rel` (relative to `root`, in git's `/`
/// form) it takes: the index's, then those of the newest commits that added it. At most `max`
/// bytes each; `None` when git has none it takes (or `root` is no repository).
pub fn recover<T>(
    root: &Path,
    rel: &str,
    max: u64,
    accept: impl Fn(Vec<u8>) -> Option<T>,
) -> Option<T> {
    let spec = |rev: &str| format!("{rev}:./{rel}");
    let mut revs = vec![String::new()];
    if let Some(commits) = git_ok(
        root,
        &[
            "log",
            "--all",
            "--diff-filter=A",
            "--format=%H",
            "-n",
            MOST_COMMITS,
            "--",
            &format!("./{rel}"),
        ],
    ) {
        revs.extend(commits.lines().map(str::to_string));
    }
    revs.into_iter().find_map(|rev| {
        let object = spec(&rev);
        let size: u64 = git_ok(root, &["cat-file", "-s", &object])?
            .trim()
            .parse()
            .ok()?;
        if size > max {
            return None;
        }
        let out = crate::sys::child::output(
            &mut repository_git(root, &["cat-file", "blob", &object]),
            crate::sys::child::git_timeout(),
        )
        .ok()?;
        out.status.success().then_some(out.stdout).and_then(&accept)
    })
}
