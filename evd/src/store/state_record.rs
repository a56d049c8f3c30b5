//! What a store's daemon last wrote to each state file, kept across restarts.
//!
//! A fresh daemon knows nothing of `results/state/`: before rewriting a state file it reads it
//! back and compares, so that a verdict that did not move keeps its bytes and `computed_at`. At
//! 10,000 ticks that is 10,000 reads and JSON parses on the first check. Instead, when a store
//! is let go, each state file the daemon wrote is recorded with the digest of what it says and
//! the file's stamp (inode, size, mtime, ctime). On the next start a file whose stamp is the
//! same was not touched since (ctime cannot be set back), so its digest stands without a read;
//! any other file is read as before.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::store::state_files::StateWritten;

/// The record, beside the state files it describes (host-local, like the rest of `results/`).
pub const FILE: &str = "evd-state-written.txt";
const HEADER: &str = "evd-state-written 1";
/// A record larger than this is not read (a million state files' worth).
const MAX_BYTES: u64 = 128 << 20;

/// Enough of a state file's metadata to know it was not touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    /// The stamp of the regular file at `path`, without following links.
    pub fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::symlink_metadata(path).ok()?;
        m.is_file().then(|| Stamp {
            ino: m.ino(),
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        })
    }
}

/// Record `written` (tick id → digest) for the next start, with each file's stamp now. Files
/// that are gone are left out. Best effort: a record that cannot be written is no record.
pub fn save(results: &Path, written: &StateWritten) {
    let dir = results.join("state");
    let mut lines = String::new();
    let mut n = 0usize;
    for (id, digest) in written.iter() {
        if let Some(s) = Stamp::of(&dir.join(format!("{id}.json"))) {
            lines.push_str(&format!(
                "{id} {digest:016x} {} {} {} {}\n",
                s.ino, s.len, s.mtime_ns, s.ctime_ns
            ));
            n += 1;
        }
    }
    // The count names the lines that follow: a torn record reads as none.
    let text = format!("{HEADER} {n}\n{lines}");
    if !results.is_dir() {
        return; // never recreate a `results/` someone removed
    }
    if let Err(e) = crate::sys::fsio::replace_unsynced(&results.join(FILE), text.as_bytes()) {
        tracing::debug!(error = %e, "cannot record the state files for the next start");
    }
}

/// The record a previous daemon left, by tick id; empty when there is none or it is not whole.
/// It is removed once read: it describes the files as they were when that daemon stopped.
pub fn restore(results: &Path) -> HashMap<String, (u64, Stamp)> {
    let path = results.join(FILE);
    let Ok(text) = read_small(&path) else {
        return HashMap::new();
    };
    let _ = std::fs::remove_file(&path);
    parse(&text).unwrap_or_default()
}

/// Remove the record unread: the state files were confirmed another way (by the evaluation
/// image's own stamps), and a record left behind would only be read later, against files this
/// daemon may have rewritten since.
pub fn discard(results: &Path) {
    let path = results.join(FILE);
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
        let _ = std::fs::remove_file(&path);
    }
}

fn read_small(path: &Path) -> std::io::Result<String> {
    let m = std::fs::symlink_metadata(path)?;
    if !m.is_file() || m.len() > MAX_BYTES {
        return Err(std::io::Error::other("not a record"));
    }
    crate::sys::fsio::read_text(path)
}

fn parse(text: &str) -> Option<HashMap<String, (u64, Stamp)>> {
    // Every line ends in a newline: one cut short is no line.
    if !text.ends_with('\n') {
        return None;
    }
    let mut lines = text.lines();
    let count: usize = lines.next()?.strip_prefix(HEADER)?.trim().parse().ok()?;
    let mut out = HashMap::with_capacity(count);
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        let [id, digest, ino, len, mtime, ctime] = f.as_slice() else {
            return None;
        };
        if !proto::vocab::is_tick_id(id) {
            return None;
        }
        let stamp = Stamp {
            ino: ino.parse().ok()?,
            len: len.parse().ok()?,
            mtime_ns: mtime.parse().ok()?,
            ctime_ns: ctime.parse().ok()?,
        };
        out.insert(
            id.to_string(),
            (u64::from_str_radix(digest, 16).ok()?, stamp),
        );
    }
    (out.len() == count).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_comes_back_whole_for_untouched_files_and_never_twice() {
        let dir = tempfile::tempdir().expect("tempdir");
        let results = dir.path();
        std::fs::create_dir(results.join("state")).expect("state");
        let (a, b, gone) = ("aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc");
        for id in [a, b] {
            std::fs::write(results.join(format!("state/{id}.json")), "{}").expect("write");
        }
        let mut written = StateWritten::default();
        written.insert(a, 1);
        written.insert(b, u64::MAX);
        written.insert(gone, 3);
        save(results, &written);
        let back = restore(results);
        assert_eq!(back.len(), 2, "the file that is gone is left out");
        assert_eq!(back[a].0, 1);
        assert_eq!(back[b].0, u64::MAX);
        assert_eq!(
            Some(back[a].1),
            Stamp::of(&results.join(format!("state/{a}.json")))
        );
        assert!(restore(results).is_empty(), "read once");
    }

    #[test]
    fn a_torn_or_edited_record_reads_as_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let results = dir.path();
        std::fs::create_dir(results.join("state")).expect("state");
        let mut written = StateWritten::default();
        for (i, id) in ["aaaaaaaaaaaa", "bbbbbbbbbbbb"].into_iter().enumerate() {
            std::fs::write(results.join(format!("state/{id}.json")), "{}").expect("write");
            written.insert(id, i as u64);
        }
        save(results, &written);
        let text = std::fs::read_to_string(results.join(FILE)).expect("record");
        let torn = &text[..text.len() - 10];
        std::fs::write(results.join(FILE), torn).expect("write");
        assert!(restore(results).is_empty());
        std::fs::write(
            results.join(FILE),
            text.replace("aaaaaaaaaaaa", "../../etc/x"),
        )
        .expect("w");
        assert!(restore(results).is_empty());
    }

    #[test]
    fn a_file_touched_after_the_record_has_another_stamp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.json");
        std::fs::write(&path, "{\"a\":1}").expect("write");
        let before = Stamp::of(&path);
        let mtime = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("mtime");
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Same length, and the mtime set back: the ctime still moved.
        std::fs::write(&path, "{\"a\":2}").expect("write");
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(mtime))
            .expect("set mtime");
        assert_ne!(before, Stamp::of(&path));
    }
}
