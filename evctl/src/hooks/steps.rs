//! One change to the filesystem that installing or uninstalling a hook takes (or the reason not
//! to make it), and carrying a list of them out in order, each whole: crash-safe writes and
//! renames only.
//!
//! It must not decide what to change (that is `install.rs`'s plan): `apply` does what the steps
//! say and nothing else, so that `evctl setup --dry-run` can print the same steps instead.

use std::fs;
use std::path::{Path, PathBuf};

use super::found::same_file;
use super::hook::Hook;

/// One change to the filesystem, or a reason not to make one.
#[derive(Debug, Clone)]
pub enum Step {
    /// Nothing to do; the message says why.
    Keep { hook: Hook, message: String },
    /// Write `text` to `path` (a crash-safe replace) with exactly `mode`.
    Write {
        hook: Hook,
        path: PathBuf,
        text: String,
        mode: u32,
        message: String,
    },
    /// Make `path` a symlink to `to` (evctl's direct hook), replacing what is there whole.
    Link {
        hook: Hook,
        path: PathBuf,
        to: String,
        message: String,
    },
    /// Give the foreign hook at `from` the name `to` (a hard link, then `from` is replaced by the
    /// next step's write; a rename where hard links are not supported).
    MoveAside {
        hook: Hook,
        from: PathBuf,
        to: PathBuf,
        message: String,
    },
    /// Rename `from` over `to` (the chained hook back into place).
    Restore {
        hook: Hook,
        from: PathBuf,
        to: PathBuf,
        message: String,
    },
    /// Delete evctl's file at `path`.
    Remove {
        hook: Hook,
        path: PathBuf,
        message: String,
    },
    /// Not done: `message` says why and what to do by hand.
    Refuse { hook: Hook, message: String },
}

impl Step {
    pub fn hook(&self) -> Hook {
        match self {
            Step::Keep { hook, .. }
            | Step::Write { hook, .. }
            | Step::Link { hook, .. }
            | Step::MoveAside { hook, .. }
            | Step::Restore { hook, .. }
            | Step::Remove { hook, .. }
            | Step::Refuse { hook, .. } => *hook,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Step::Keep { message, .. }
            | Step::Write { message, .. }
            | Step::Link { message, .. }
            | Step::MoveAside { message, .. }
            | Step::Restore { message, .. }
            | Step::Remove { message, .. }
            | Step::Refuse { message, .. } => message,
        }
    }

    /// Whether this step changes the filesystem.
    pub fn changes(&self) -> bool {
        !matches!(self, Step::Keep { .. } | Step::Refuse { .. })
    }

    /// Whether this step could not be done.
    pub fn refused(&self) -> bool {
        matches!(self, Step::Refuse { .. })
    }

    pub(super) fn slug(&self) -> &'static str {
        match self {
            Step::Keep { .. } => "keep",
            Step::Write { .. } => "write",
            Step::Link { .. } => "link",
            Step::MoveAside { .. } => "move-aside",
            Step::Restore { .. } => "restore",
            Step::Remove { .. } => "remove",
            Step::Refuse { .. } => "refused",
        }
    }
}

/// Carry out `steps` in order, stopping at the first failure (every step before it stays done,
/// and each is whole: crash-safe writes and renames only).
pub fn apply(steps: &[Step]) -> Result<(), String> {
    for s in steps {
        match s {
            Step::Keep { .. } | Step::Refuse { .. } => {}
            Step::Write {
                path, text, mode, ..
            } => {
                let dir = path
                    .parent()
                    .ok_or_else(|| format!("{} has no directory", path.display()))?;
                fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
                evd::api::shared::fsio::replace_atomically_mode(
                    dir,
                    path,
                    text.as_bytes(),
                    Some(*mode),
                )
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            }
            Step::Link { path, to, .. } => link_atomically(path, to)?,
            Step::MoveAside { from, to, .. } => {
                if !same_file(from, to) {
                    // A second name first: the hook stays in place until evctl's replaces it.
                    if fs::hard_link(from, to).is_err() {
                        fs::rename(from, to).map_err(|e| {
                            format!("moving {} to {}: {e}", from.display(), to.display())
                        })?;
                    }
                }
            }
            Step::Restore { from, to, .. } => {
                fs::rename(from, to).map_err(|e| {
                    format!("moving {} back to {}: {e}", from.display(), to.display())
                })?;
                if let Some(d) = to.parent() {
                    let _ = evd::api::shared::fsio::sync_dir(d);
                }
            }
            Step::Remove { path, .. } => {
                fs::remove_file(path).map_err(|e| format!("removing {}: {e}", path.display()))?;
                if let Some(d) = path.parent() {
                    let _ = evd::api::shared::fsio::sync_dir(d);
                }
            }
        }
    }
    Ok(())
}

/// Make `path` a symlink to `to` in one step: the link is made under a temporary name beside it,
/// then renamed over `path` (a file or link there is replaced whole, never left half-made).
fn link_atomically(path: &Path, to: &str) -> Result<(), String> {
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no directory", path.display()))?;
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{} has no name", path.display()))?;
    let tmp = dir.join(format!(".{name}.evctl-link.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(to, &tmp)
        .map_err(|e| format!("linking {} to {to}: {e}", tmp.display()))?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(format!("linking {} to {to}: {e}", path.display()));
    }
    let _ = evd::api::shared::fsio::sync_dir(dir);
    Ok(())
}
