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

use crate::engine::receipts::{Receipt, RunResult};
use crate::store::results::read_receipts;
use crate::sys::watch::{Changes, DirWatch};

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
    texts: Texts,
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
            texts: Texts::default(),
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
                self.texts = Texts::default();
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
            return Arc::new(kept.iter().map(|k| k.receipt(&self.texts)).collect());
        }
        let read = read_receipts(&self.results, selector);
        if self.watch.is_some() {
            // Before this file's receipts take numbers: a prune renumbers.
            if self.texts.len() >= self.prune_at {
                self.prune();
            }
            let kept = read.iter().map(|r| self.keep(r)).collect();
            self.files.insert(name, kept);
        }
        Arc::new(read)
    }

    fn keep(&mut self, r: &Receipt) -> Kept {
        Kept {
            test: self.texts.number(&r.test),
            platform: self.texts.number(&r.platform),
            commit: self.texts.number(&r.commit),
            ran_at: RanAt::new(&r.ran_at),
            result: r.result,
            falsifiable: r.falsifiable,
        }
    }

    /// Let go of the texts no kept receipt uses any more, renumbering the rest.
    fn prune(&mut self) {
        let mut fresh = Texts::default();
        let old = std::mem::take(&mut self.texts);
        for kept in self.files.values_mut() {
            for k in kept.iter_mut() {
                for n in [&mut k.test, &mut k.platform, &mut k.commit] {
                    *n = fresh.number(old.text(*n));
                }
            }
        }
        self.texts = fresh;
        self.prune_at = (self.texts.len() * 2).max(PRUNE_AT);
    }
}

/// The fewest texts at which unused ones are looked for.
const PRUNE_AT: usize = 4096;

/// Distinct texts, each numbered (a receipt keeps three numbers rather than three handles).
#[derive(Debug, Default)]
struct Texts {
    all: Vec<Arc<str>>,
    numbers: HashMap<Arc<str>, u32>,
}

impl Texts {
    fn number(&mut self, s: &str) -> u32 {
        if let Some(&n) = self.numbers.get(s) {
            return n;
        }
        let n = u32::try_from(self.all.len()).unwrap_or(u32::MAX);
        let t: Arc<str> = s.into();
        self.all.push(Arc::clone(&t));
        self.numbers.insert(t, n);
        n
    }

    fn text(&self, n: u32) -> &str {
        self.all.get(n as usize).map_or("", |t| t)
    }

    fn len(&self) -> usize {
        self.all.len()
    }
}

/// A receipt's `ran_at`, inline when it is as short as the timestamps `ev` and evctl write
/// (30 bytes with nanoseconds): a store of 100,000 receipts then holds no string per receipt.
#[derive(Debug)]
enum RanAt {
    Short { len: u8, bytes: [u8; SHORT] },
    Long(Box<str>),
}

const SHORT: usize = 30;

impl RanAt {
    fn new(s: &str) -> RanAt {
        let mut bytes = [0u8; SHORT];
        match bytes.get_mut(..s.len()) {
            Some(head) => {
                head.copy_from_slice(s.as_bytes());
                RanAt::Short {
                    len: s.len() as u8,
                    bytes,
                }
            }
            None => RanAt::Long(s.into()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Whole `str`s only are stored inline, so this is always valid.
            RanAt::Short { len, bytes } => bytes
                .get(..usize::from(*len))
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or_default(),
            RanAt::Long(s) => s,
        }
    }
}

/// One receipt as the cache keeps it.
#[derive(Debug)]
struct Kept {
    test: u32,
    platform: u32,
    commit: u32,
    ran_at: RanAt,
    result: RunResult,
    falsifiable: Option<bool>,
}

impl Kept {
    fn receipt(&self, texts: &Texts) -> Receipt {
        Receipt {
            test: texts.text(self.test).to_string(),
            platform: texts.text(self.platform).to_string(),
            commit: texts.text(self.commit).to_string(),
            ran_at: self.ran_at.as_str().to_string(),
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
        crate::sys::fsio::append(&file, line("t", "red").as_bytes()).expect("append");
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
        assert_eq!(r[1].result, crate::engine::receipts::RunResult::Red);
        std::fs::remove_dir_all(&dir).expect("rm");
        let g = cache.generation();
        // The file's removal may be drained before the hub has seen its directory go (the
        // hub reads the kernel's queue on its own thread): then the directory's comes next.
        let mut synced = cache.sync();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while synced.is_some() && std::time::Instant::now() < deadline {
            assert!(
                synced
                    .as_deref()
                    .is_some_and(|k| k.is_empty() || k == [key.clone()]),
                "{synced:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
            synced = cache.sync();
        }
        assert_eq!(synced, None);
        assert!(
            cache.changed_since(g).is_none(),
            "a rescan may have changed anything"
        );
        assert!(cache.get("t").is_empty());
    }

    #[test]
    fn kept_receipts_read_back_exactly_across_prunes_and_any_ran_at() {
        let d = tempfile::tempdir().expect("tempdir");
        let results = d.path().join("results");
        let dir = results.join("receipts");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let mut cache = ReceiptCache::new(&results);
        assert_eq!(cache.sync(), None);
        // More selectors than a prune waits for, each with its own commit, and a ran_at of
        // every length around the inline limit (and beyond it, and not ASCII).
        let n = PRUNE_AT + 500;
        let ran_at = |i: usize| match i % 4 {
            0 => "2026-10-27T03:56:02.319560978Z".to_string(),
            1 => "2026-10-27T03:56:02.3195609781Z".to_string(),
            2 => format!("{}Z", "é".repeat(i % 40)),
            _ => String::new(),
        };
        let line = |i: usize| {
            format!(
                "{{\"commit\":\"c{i}\",\"platform\":\"p{}\",\"ran_at\":{},\"result\":\"red\",\"test\":\"t{i}\"}}\n",
                i % 3,
                serde_json::to_string(&ran_at(i)).expect("json")
            )
        };
        for i in 0..n {
            let file = dir.join(format!(
                "{}.jsonl",
                proto::id::receipt_key(&format!("t{i}"))
            ));
            std::fs::write(&file, line(i)).expect("write");
        }
        cache.sync();
        let first: Vec<Arc<Vec<Receipt>>> = (0..n).map(|i| cache.get(&format!("t{i}"))).collect();
        // Drop half the files from the cache (as a change would), so a prune has texts to let
        // go, then read more.
        for i in (0..n).step_by(2) {
            let file = dir.join(format!(
                "{}.jsonl",
                proto::id::receipt_key(&format!("t{i}"))
            ));
            crate::sys::fsio::append(&file, line(i).as_bytes()).expect("append");
        }
        cache.sync();
        for i in (0..n).step_by(2) {
            assert_eq!(cache.get(&format!("t{i}")).len(), 2);
        }
        for (i, want) in first.iter().enumerate() {
            let got = cache.get(&format!("t{i}"));
            let got = got.last().expect("a receipt");
            let want = want.first().expect("a receipt");
            assert_eq!(got, want, "receipt {i}");
            assert_eq!(got.ran_at, ran_at(i));
        }
        assert!(cache.texts.len() < 3 * n, "pruned: {}", cache.texts.len());
    }
}
