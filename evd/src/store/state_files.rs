//! `results/state/` as the store's writer sees it: a digest of what it last wrote to each
//! state file ([`StateWritten`]), and a watch that tells its own writes from anyone else's
//! ([`StateWatch`]), so a state file someone else changed is noticed and written again. It
//! does not decide what a state file says (that is the check's evaluation).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::sys::watch::{Changes, DirWatch};

/// What the store last wrote to each state file, by tick id: the digest of the body.
///
/// Only a tick id (12 lowercase hex digits) ever names a state file, so each is kept as the
/// number it spells: a store of 100,000 ticks holds no string per entry. Any other id is never
/// recorded (reads as unwritten).
#[derive(Debug, Default)]
pub struct StateWritten(rustc_hash::FxHashMap<u64, u64>);

impl StateWritten {
    fn key(id: &str) -> Option<u64> {
        if !proto::vocab::is_tick_id(id) {
            return None;
        }
        u64::from_str_radix(id, 16).ok()
    }

    pub fn get(&self, id: &str) -> Option<&u64> {
        self.0.get(&Self::key(id)?)
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.get(id).is_some()
    }

    /// Record `digest` for `id` (nothing for an id that is not a tick id).
    pub fn insert(&mut self, id: &str, digest: u64) {
        if let Some(k) = Self::key(id) {
            self.0.insert(k, digest);
        }
    }

    /// Every entry of `other` too (`other`'s digest where both have one).
    pub fn extend(&mut self, other: StateWritten) {
        if self.0.is_empty() {
            self.0 = other.0;
        } else {
            self.0.extend(other.0);
        }
    }

    /// Room for `more` entries.
    pub fn reserve(&mut self, more: usize) {
        self.0.reserve(more);
    }

    pub fn remove(&mut self, id: &str) {
        if let Some(k) = Self::key(id) {
            self.0.remove(&k);
        }
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every `(tick id, digest)`.
    pub fn iter(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.0.iter().map(|(k, d)| (format!("{k:012x}"), *d))
    }
}

/// inotify on `results/state/`, telling this store's own writes from anyone else's.
#[derive(Debug)]
pub struct StateWatch {
    dir: PathBuf,
    watch: Option<DirWatch>,
    /// Why the directory could not be watched although it exists.
    watch_error: Option<String>,
    /// File names this store wrote since the last sync.
    ours: HashSet<String>,
    generation: u64,
    /// The watch being made on a thread of its own (see [`StateWatch::ensure_ahead`]).
    ahead: Option<std::thread::JoinHandle<Result<DirWatch, String>>>,
}

impl StateWatch {
    pub fn new(results: &Path) -> StateWatch {
        StateWatch {
            dir: results.join("state"),
            watch: None,
            watch_error: None,
            ours: HashSet::new(),
            generation: 0,
            ahead: None,
        }
    }

    /// Start making the watch on a thread of its own, for [`StateWatch::ensure`] to take: a
    /// store being opened for a check (the kernel visits every file of a large directory when a
    /// watch is added to it).
    pub fn ensure_ahead(&mut self) {
        if self.watch.is_some() || self.ahead.is_some() || !self.dir.is_dir() {
            return;
        }
        let dir = self.dir.clone();
        self.ahead = std::thread::Builder::new()
            .name("evd-state-watch".into())
            .spawn(move || DirWatch::new(&dir).map_err(|e| e.0))
            .ok();
    }

    /// Start watching if the directory exists and nothing watches it yet. Whatever was written
    /// while nobody watched is unknown, so the record of written files is dropped then.
    pub fn ensure(&mut self, written: &mut StateWritten) {
        if self.watch.is_none() {
            let made = match self.ahead.take().map(std::thread::JoinHandle::join) {
                Some(Ok(made)) => made,
                _ => DirWatch::new(&self.dir).map_err(|e| e.0),
            };
            match made {
                Ok(w) => {
                    self.watch = Some(w);
                    self.watch_error = None;
                    written.clear();
                    self.generation += 1;
                }
                Err(e) => {
                    self.watch_error = self.dir.is_dir().then_some(e);
                }
            }
        }
    }

    /// Why `results/state/` is not watched although it exists.
    pub fn watch_error(&self) -> Option<&str> {
        self.watch_error.as_deref()
    }

    /// Note a file this store is about to write. The queue is taken in every so often during
    /// a long pass, so that this store's own writes never overflow it.
    pub fn ours(&mut self, name: String, written: &mut StateWritten) {
        if self.ours.len() >= ABSORB_EVERY {
            // Every write named so far has finished (its events are queued): take them in
            // before naming the next.
            self.absorb(written);
        }
        self.ours.insert(name);
    }

    /// Take in the changes since the last sync: a state file anyone else wrote, removed or
    /// replaced is forgotten from `written` (so the next evaluation rewrites it) and moves the
    /// generation. Without a watch the generation always moves: nothing can be trusted.
    pub fn sync(&mut self, written: &mut StateWritten) -> u64 {
        self.absorb(written);
        self.generation
    }

    fn absorb(&mut self, written: &mut StateWritten) {
        // Every own write named so far must be in this drain, or it would read as someone
        // else's next time: then no fence shared with the request's earlier drains. With none
        // named since the last drain (a read, such as the pre-commit gate's), the request's
        // shared fence is enough: it promises every change that finished before the request
        // began, as every other drain of the request does — and spares a round trip through
        // the watcher's thread.
        let changes = match self.watch.as_mut() {
            Some(w) if self.ours.is_empty() => w.drain(),
            Some(w) => w.drain_all(),
            None => Changes::Rescan,
        };
        match changes {
            Changes::Quiet => {}
            Changes::Names(names) => {
                let mut foreign = false;
                for n in names {
                    if self.ours.contains(&n) || n.starts_with(crate::sys::fsio::TEMP_PREFIX) {
                        continue;
                    }
                    foreign = true;
                    if let Some(id) = n.strip_suffix(".json") {
                        written.remove(id);
                    }
                }
                if foreign {
                    self.generation += 1;
                }
            }
            Changes::Rescan => {
                self.watch = None;
                written.clear();
                self.generation += 1;
                self.ensure(written);
            }
        }
        self.ours.clear();
    }
}

/// Own writes between two drains of the state directory's queue (each write queues five
/// events; the kernel's default queue holds 16,384).
const ABSORB_EVERY: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_someone_elses_state_file_changes_move_the_generation() {
        let d = tempfile::tempdir().expect("tempdir");
        let state = d.path().join("state");
        std::fs::create_dir(&state).expect("mkdir");
        let mut written = StateWritten::default();
        let mut w = StateWatch::new(d.path());
        w.ensure(&mut written);
        let g = w.sync(&mut written);
        written.insert("aaaaaaaaaaaa", 1);
        written.insert("bbbbbbbbbbbb", 2);
        w.ours("aaaaaaaaaaaa.json".into(), &mut written);
        crate::sys::fsio::replace_unsynced(&state.join("aaaaaaaaaaaa.json"), b"{}").expect("write");
        assert_eq!(w.sync(&mut written), g, "our own write");
        std::fs::write(state.join("bbbbbbbbbbbb.json"), "{}").expect("write");
        assert!(w.sync(&mut written) > g, "someone else's");
        assert!(!written.contains_key("bbbbbbbbbbbb"));
        assert!(written.contains_key("aaaaaaaaaaaa"));
        // A long pass of our own writes never overflows the queue into a rescan.
        let g = w.sync(&mut written);
        for i in 0..3 * ABSORB_EVERY {
            let name = format!("{i:012x}.json");
            w.ours(name.clone(), &mut written);
            crate::sys::fsio::replace_unsynced(&state.join(&name), b"{}").expect("write");
        }
        assert_eq!(w.sync(&mut written), g);
        assert!(written.contains_key("aaaaaaaaaaaa"), "no rescan forgot it");
    }
}
