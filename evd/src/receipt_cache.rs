//! Parsed receipt files, kept for as long as inotify says they did not change.
//!
//! A check reads one receipts file per bound selector: thousands of small files on a large store.
//! Like the tick cache, this one drains an inotify queue on `results/receipts/` at the start of
//! every use: the kernel queues the event inside the write that causes it, so an append that
//! finished before the request arrived is always seen, whoever made it (CI, a script, upstream
//! ev). Without a watch (no inotify, or the directory does not exist yet) nothing is kept and
//! every read goes to the disk.
//!
//! What is kept is compact: a receipt's selector, platform and commit repeat across a store's
//! receipts, so each distinct text is held once (a 100,000-tick store has 100,000 receipts and a
//! few hundred distinct commits); [`ReceiptCache::get`] hands out ordinary [`Receipt`]s.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::dirwatch::{Changes, DirWatch};
use crate::receipts::{Receipt, RunResult};
use crate::verdict_inputs::read_receipts;

#[derive(Debug)]
pub struct ReceiptCache {
    dir: PathBuf,
    results: PathBuf,
    watch: Option<DirWatch>,
    /// Why the directory could not be watched although it exists.
    watch_error: Option<String>,
    /// The directory did not exist at the last sync (so there was nothing to watch or read).
    absent: bool,
    /// Receipts by file name (`<key>.jsonl`), as parsed when last read.
    files: HashMap<String, Box<[Kept]>>,
    /// Each distinct selector, platform and commit text of the kept receipts, once.
    texts: std::collections::HashSet<Arc<str>>,
    /// When `texts` is this long, the texts no kept receipt uses any more are let go.
    prune_at: usize,
    /// Moves whenever what this cache could answer may have changed.
    generation: u64,
    /// The generation at which each receipt file last changed by name.
    changed_at: HashMap<String, u64>,
    /// The generation of the last change that named no file (a rescan).
    rescanned_at: u64,
}

impl ReceiptCache {
    /// A cache over `<results>/receipts`; nothing is read or watched yet.
    pub fn new(results: &Path) -> ReceiptCache {
        ReceiptCache {
            dir: results.join("receipts"),
            results: results.to_path_buf(),
            watch: None,
            watch_error: None,
            absent: false,
            files: HashMap::new(),
            texts: std::collections::HashSet::new(),
            prune_at: PRUNE_AT,
            generation: 0,
            changed_at: HashMap::new(),
            rescanned_at: 0,
        }
    }

    /// Take in every change made since the last call. Returns the receipt keys that changed, or
    /// `None` when anything may have (a rescan, or no watch to tell).
    pub fn sync(&mut self) -> Option<Vec<String>> {
        let changes = match self.watch.as_mut() {
            Some(w) => w.drain(),
            // Still no directory: still no receipts.
            None if self.absent && std::fs::symlink_metadata(&self.dir).is_err() => Changes::Quiet,
            None => Changes::Rescan,
        };
        match changes {
            Changes::Quiet => Some(Vec::new()),
            Changes::Names(names) => {
                self.generation += 1;
                let mut keys = Vec::with_capacity(names.len());
                for n in names {
                    self.files.remove(&n);
                    if let Some(k) = n.strip_suffix(".jsonl") {
                        self.changed_at.insert(k.to_string(), self.generation);
                        keys.push(k.to_string());
                    }
                }
                Some(keys)
            }
            Changes::Rescan => {
                self.generation += 1;
                self.rescanned_at = self.generation;
                self.changed_at.clear();
                self.files.clear();
                self.texts.clear();
                // Watch first, then read: a change made after this point is queued, never lost.
                // A directory that does not exist (or is a link) gets no watch: every read then
                // goes to the disk, and the next sync tries again.
                let watched = DirWatch::new(&self.dir);
                self.absent = watched.is_err()
                    && std::fs::symlink_metadata(&self.dir)
                        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
                self.watch_error = match &watched {
                    Err(e) if !self.absent => Some(e.0.clone()),
                    _ => None,
                };
                self.watch = watched.ok();
                None
            }
        }
    }

    /// The receipt keys that changed after generation `since`, or `None` when anything may have.
    pub fn changed_since(&self, since: u64) -> Option<std::collections::HashSet<&str>> {
        if self.rescanned_at > since {
            return None;
        }
        Some(
            self.changed_at
                .iter()
                .filter(|(_, g)| **g > since)
                .map(|(k, _)| k.as_str())
                .collect(),
        )
    }

    /// Why `results/receipts/` is not watched although it exists (every read then goes to the
    /// disk).
    pub fn watch_error(&self) -> Option<&str> {
        self.watch_error.as_deref()
    }

    /// A number that moves whenever a receipt may have changed since it was last read.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The receipts of one selector (all lines of its file; the engine filters by `test`).
    pub fn get(&mut self, selector: &str) -> Arc<Vec<Receipt>> {
        self.get_keyed(&proto::id::receipt_key(selector), selector)
    }

    /// [`ReceiptCache::get`] for a caller that already has the selector's receipt key.
    pub fn get_keyed(&mut self, key: &str, selector: &str) -> Arc<Vec<Receipt>> {
        let name = format!("{key}.jsonl");
        if let Some(kept) = self.files.get(&name) {
            return Arc::new(kept.iter().map(Kept::receipt).collect());
        }
        let read = read_receipts(&self.results, selector);
        if self.watch.is_some() {
            let kept = read.iter().map(|r| self.keep(r)).collect();
            self.files.insert(name, kept);
        }
        Arc::new(read)
    }

    fn keep(&mut self, r: &Receipt) -> Kept {
        Kept {
            test: self.text(&r.test),
            platform: self.text(&r.platform),
            commit: self.text(&r.commit),
            ran_at: r.ran_at.as_str().into(),
            result: r.result,
            falsifiable: r.falsifiable,
        }
    }

    fn text(&mut self, s: &str) -> Arc<str> {
        if let Some(t) = self.texts.get(s) {
            return Arc::clone(t);
        }
        if self.texts.len() >= self.prune_at {
            self.texts.retain(|t| Arc::strong_count(t) > 1);
            self.prune_at = (self.texts.len() * 2).max(PRUNE_AT);
        }
        let t: Arc<str> = s.into();
        self.texts.insert(Arc::clone(&t));
        t
    }
}

/// The fewest texts at which unused ones are looked for.
const PRUNE_AT: usize = 4096;

/// One receipt as the cache keeps it.
#[derive(Debug)]
struct Kept {
    test: Arc<str>,
    platform: Arc<str>,
    commit: Arc<str>,
    ran_at: Box<str>,
    result: RunResult,
    falsifiable: Option<bool>,
}

impl Kept {
    fn receipt(&self) -> Receipt {
        Receipt {
            test: self.test.to_string(),
            platform: self.platform.to_string(),
            commit: self.commit.to_string(),
            ran_at: self.ran_at.to_string(),
            result: self.result,
            falsifiable: self.falsifiable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(test: &str, result: &str) -> String {
        format!(
            "{{\"commit\":\"c\",\"platform\":\"local\",\"ran_at\":\"2026-01-01T00:00:00Z\",\"result\":\"{result}\",\"test\":\"{test}\"}}\n"
        )
    }

    #[test]
    fn an_append_by_anyone_is_seen_by_the_next_read_and_a_quiet_directory_is_not_reread() {
        let d = tempfile::tempdir().expect("tempdir");
        let results = d.path().join("results");
        let dir = results.join("receipts");
        let mut cache = ReceiptCache::new(&results);
        // No directory yet: nothing to read, no watch, and nothing changes while it stays away.
        assert_eq!(cache.sync(), None);
        assert!(cache.get("t").is_empty());
        let g = cache.generation();
        assert_eq!(cache.sync(), Some(Vec::new()));
        assert_eq!(cache.generation(), g);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join(format!("{}.jsonl", proto::id::receipt_key("t")));
        std::fs::write(&file, line("t", "green")).expect("write");
        assert_eq!(cache.sync(), None, "the directory appeared: start over");
        assert_eq!(cache.get("t").len(), 1);
        let g = cache.generation();
        assert_eq!(cache.sync(), Some(Vec::new()));
        assert_eq!(cache.generation(), g, "nothing changed");
        crate::fsio::append(&file, line("t", "red").as_bytes()).expect("append");
        let key = proto::id::receipt_key("t");
        assert_eq!(cache.sync(), Some(vec![key.clone()]));
        assert!(cache.generation() > g);
        let changed = cache.changed_since(g).expect("known");
        assert!(changed.contains(key.as_str()) && changed.len() == 1);
        assert!(cache
            .changed_since(cache.generation())
            .expect("known")
            .is_empty());
        let r = cache.get("t");
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].result, crate::receipts::RunResult::Red);
        std::fs::remove_dir_all(&dir).expect("rm");
        let g = cache.generation();
        assert_eq!(cache.sync(), None);
        assert!(
            cache.changed_since(g).is_none(),
            "a rescan may have changed anything"
        );
        assert!(cache.get("t").is_empty());
    }
}
