//! Stamps: what `stat` says of each file an answer depends on (device, inode, mtime, ctime,
//! length, or "absent"; a directory by identity), and whether a recorded stamp still holds.
//! An answer is reused only while all of its stamps hold; a file changed within
//! [`RACY_WINDOW`] of being stamped is not trusted.
//!
//! It only looks at metadata: which files to stamp is [`super::deps`]'s, and it never reads
//! a file's contents nor runs git.

use std::fs::{self, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A file whose mtime or ctime is this recent when its answer is recorded is not trusted.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// What `symlink_metadata` says about a file, enough to tell a replaced or rewritten file.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub struct Meta {
    pub dev: u64,
    pub ino: u64,
    pub mtime: i64,
    pub mtime_ns: i64,
    pub ctime: i64,
    pub ctime_ns: i64,
    pub len: u64,
}

impl Meta {
    pub(super) fn of(m: &Metadata) -> Meta {
        Meta {
            dev: m.dev(),
            ino: m.ino(),
            mtime: m.mtime(),
            mtime_ns: m.mtime_nsec(),
            ctime: m.ctime(),
            ctime_ns: m.ctime_nsec(),
            len: m.len(),
        }
    }

    /// Whether its mtime or ctime is at or after `since` (nanoseconds since the epoch).
    fn changed_since(&self, since: i128) -> bool {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        ns(self.mtime, self.mtime_ns) >= since || ns(self.ctime, self.ctime_ns) >= since
    }
}

/// The state of one path an answer depends on.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
pub enum Stamp {
    /// Nothing there (or a path component is not a directory).
    Absent,
    /// A file or directory, by its full metadata.
    File(Meta),
    /// A symlink (a config file kept in a dotfiles directory): the link itself and, when it
    /// resolves, what it points to, so an edit of the target is seen.
    Link { link: Meta, target: Option<Meta> },
    /// A directory by identity only (its entries may come and go): a directory on the way up
    /// to `.git`, `.git` itself, `objects/`, `refs/`. The owner is part of it because git
    /// refuses a repository someone else owns.
    Node { dev: u64, ino: u64, uid: u32 },
}

/// `symlink_metadata`, with "not there" (`ENOENT`, `ENOTDIR`) as `None`.
pub(super) fn probe(path: &Path) -> io::Result<Option<Metadata>> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

fn gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

impl Stamp {
    /// The full stamp of `path`, following a final symlink for its target's stamp too.
    pub fn of(path: &Path) -> io::Result<Stamp> {
        Ok(match probe(path)? {
            None => Stamp::Absent,
            Some(m) if m.file_type().is_symlink() => Stamp::Link {
                link: Meta::of(&m),
                target: match fs::metadata(path) {
                    Ok(t) => Some(Meta::of(&t)),
                    Err(e) if gone(&e) => None,
                    Err(e) => return Err(e),
                },
            },
            Some(m) => Stamp::File(Meta::of(&m)),
        })
    }

    /// The identity stamp of `path` (see [`Stamp::Node`]).
    fn node(path: &Path) -> io::Result<Stamp> {
        Ok(match probe(path)? {
            None => Stamp::Absent,
            Some(m) => Stamp::Node {
                dev: m.dev(),
                ino: m.ino(),
                uid: m.uid(),
            },
        })
    }

    /// Whether anything stamped here changed at or after `since` (ns since the epoch).
    pub(super) fn racy(&self, since: i128) -> bool {
        match self {
            Stamp::Absent | Stamp::Node { .. } => false,
            Stamp::File(m) => m.changed_since(since),
            Stamp::Link { link, target } => {
                link.changed_since(since) || target.is_some_and(|t| t.changed_since(since))
            }
        }
    }
}

/// One path and its stamp when the answer was computed.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Dep {
    pub path: String,
    pub stamp: Stamp,
}

impl Dep {
    /// `None` for a path that is not UTF-8 (it could not be persisted faithfully).
    pub(super) fn new(path: &Path, stamp: Stamp) -> Option<Dep> {
        Some(Dep {
            path: path.to_str()?.to_string(),
            stamp,
        })
    }

    /// Whether the path still has the recorded stamp (an error reading it is a change).
    pub(super) fn holds(&self) -> bool {
        let path = Path::new(&self.path);
        let now = match self.stamp {
            Stamp::Node { .. } => Stamp::node(path),
            _ => Stamp::of(path),
        };
        now.is_ok_and(|s| s == self.stamp)
    }
}

/// The identity stamp of a directory already `stat`ed (see [`Stamp::Node`]).
pub(super) fn node_of(m: &Metadata) -> Stamp {
    Stamp::Node {
        dev: m.dev(),
        ino: m.ino(),
        uid: m.uid(),
    }
}
