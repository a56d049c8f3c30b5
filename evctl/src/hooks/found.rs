//! What is at a hook's path now, looked at without following a symlink there (missing, text,
//! a symlink, or something evctl does not edit), the name a foreign hook is moved aside to, and
//! whether two names are the same file.
//!
//! It only looks: it must not change anything on disk.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::hook::{Hook, CHAINED_SUFFIX};

/// Files larger than this are never read to look for a marker (they are not evctl's).
const MAX_HOOK_BYTES: u64 = 1 << 20;

/// A hook file as found (never read through a symlink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Missing,
    /// A regular file's text, and its permission bits.
    Text(String, u32),
    /// A symlink, and where it points.
    Symlink(String),
    /// Something evctl does not edit: a directory, a binary, a huge file, an unreadable one.
    Other(String),
}

/// Look at `path` without following a symlink there.
pub fn look(path: &Path) -> Found {
    let m = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Found::Missing,
        Err(e) => return Found::Other(format!("cannot be examined: {e}")),
    };
    if m.file_type().is_symlink() {
        let to = fs::read_link(path)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        return Found::Symlink(to);
    }
    if !m.is_file() {
        return Found::Other(format!("is {}", evd::api::shared::fsio::kind_of(&m)));
    }
    if m.len() > MAX_HOOK_BYTES {
        return Found::Other("is too large to be a script evctl wrote".into());
    }
    match evd::api::shared::fsio::read_text(path) {
        Ok(t) => Found::Text(t, m.permissions().mode() & 0o7777),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Found::Other("is not text".into()),
        Err(e) => Found::Other(format!("cannot be read: {e}")),
    }
}

/// The path a foreign `hook` is moved aside to.
pub fn chained_path(dir: &Path, hook: Hook) -> PathBuf {
    dir.join(format!("{}{CHAINED_SUFFIX}", hook.name()))
}

/// Whether two paths are the same file (a hard link left by an interrupted install).
pub(super) fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::symlink_metadata(a), fs::symlink_metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}
