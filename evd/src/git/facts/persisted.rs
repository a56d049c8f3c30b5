//! The answers as recorded, and the file they persist in between evctl's runs
//! (`<runtime dir>/git-facts.json`): its format, a strict read (no symlink, bounded, any
//! other format or a malformed file reads as nothing) and a private replacing write.
//!
//! It keeps no answers itself and never judges whether one still holds: that is
//! [`super::cache`]'s, with [`super::stamp`].

use std::io::{self, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::deps::{Query, MAX_READ};
use super::stamp::Dep;

/// The persisted file's format; any other reads as an empty cache.
const FORMAT: u32 = 1;

/// One recorded answer.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(super) struct Entry {
    /// The canonical repository root git was asked in.
    pub(super) root: String,
    pub(super) query: Query,
    pub(super) home: Option<String>,
    pub(super) xdg: Option<String>,
    #[serde(default)]
    pub(super) nosystem: Option<String>,
    pub(super) answer: Option<String>,
    pub(super) deps: Vec<Dep>,
}

/// The persisted file.
#[derive(Serialize, Deserialize)]
struct Persisted {
    format: u32,
    entries: Vec<Entry>,
}

/// The entries of a persisted cache; `None` for a missing, unreadable or malformed file.
pub(super) fn read_persisted(path: &Path) -> Option<Vec<Entry>> {
    let f = crate::sys::fsio::open_regular(path).ok()?;
    let len = f.metadata().ok()?.len();
    if len > MAX_READ {
        return None;
    }
    // Sized up front: read in one go rather than in doubling pieces (every evctl that needs
    // HEAD reads this file).
    let mut s = String::with_capacity(usize::try_from(len).ok()? + 1);
    f.take(MAX_READ).read_to_string(&mut s).ok()?;
    let p: Persisted = serde_json::from_str(&s).ok()?;
    (p.format == FORMAT).then_some(p.entries)
}

/// Write `entries` to `path` (a temp file in the same directory, mode 0600, renamed over it;
/// no fsync, it is a cache).
pub(super) fn write_persisted(path: &Path, entries: Vec<Entry>) -> io::Result<()> {
    let body = serde_json::to_vec(&Persisted {
        format: FORMAT,
        entries,
    })
    .map_err(io::Error::other)?;
    crate::sys::fsio::replace_private(path, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::facts::{FactCache, Mode};
    use std::fs;

    #[test]
    fn a_corrupt_or_foreign_cache_file_reads_as_empty() {
        let rt = tempfile::tempdir().expect("rt");
        let file = rt.path().join("git-facts.json");
        let load = || FactCache::with_env(Mode::Caller, []).read_from(&file);
        assert!(load().is_empty());
        for body in [
            "not json",
            "",
            "{\"format\":1}",
            "{\"format\":2,\"entries\":[]}",
            "{\"format\":1,\"entries\":[{\"root\":1}]}",
        ] {
            fs::write(&file, body).expect("write");
            assert!(load().is_empty(), "{body}");
        }
        fs::remove_file(&file).expect("rm");
        fs::create_dir(&file).expect("mkdir");
        assert!(load().is_empty());
        // A symlink is not followed.
        let real = rt.path().join("real.json");
        fs::write(&real, "{\"format\":1,\"entries\":[]}").expect("write");
        let link = rt.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert!(read_persisted(&link).is_none());
        assert_eq!(read_persisted(&real).map(|e| e.len()), Some(0));
    }
}
