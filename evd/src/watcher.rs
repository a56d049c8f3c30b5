//! What changed around a store, debounced: receipts appended by any process, the selected-list,
//! the ticks, the config, and the git refs a verdict depends on (HEAD, branches, packed-refs,
//! the upstream tracking ref). Changes only say *where* to look again; the truth is always
//! re-read from disk. A lost event (inotify overflow) or a watch error asks for a full rescan,
//! never a silently stale answer.
//!
//! notify watches the store's own directory, `results/` and git. `ticks/` and
//! `results/receipts/` hold thousands of files that every reader opens (a verify, upstream ev,
//! a check reading receipts), and notify's inotify watches always include opens: a verify of
//! 10,000 ticks would queue 10,000 events for nothing. Those two directories are watched with
//! [`DirWatch`] instead (writes, creations, removals, renames only) on a thread of their own.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use crate::dirwatch::{self, DirWatch};

use notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult, Debouncer, RecommendedCache};

/// How long events settle before they are delivered.
pub const DEBOUNCE: Duration = Duration::from_millis(40);

/// One batch of changes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Receipt file keys (`<key>.jsonl` stems) that changed.
    pub receipts: BTreeSet<String>,
    pub selected: bool,
    pub ticks: bool,
    pub config: bool,
    /// HEAD, a branch, packed-refs or a remote-tracking ref moved.
    pub git: bool,
    /// Events were lost or a watch failed: re-evaluate everything.
    pub rescan: bool,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}

/// The paths one store's watcher classifies events by.
#[derive(Debug, Clone)]
pub struct Layout {
    pub ev: PathBuf,
    pub receipts: PathBuf,
    pub ticks: PathBuf,
    /// `git rev-parse --absolute-git-dir` (HEAD lives here) and the common dir (refs live there).
    pub git_dir: Option<PathBuf>,
    pub git_common: Option<PathBuf>,
}

impl Layout {
    /// The layout of the store under `root`, asking git where its directories are.
    pub fn of(root: &Path) -> Layout {
        let ev = root.join(".evolving");
        let git =
            |arg: &str| crate::verdict_inputs::git(root, &["rev-parse", arg]).map(|s| root.join(s));
        Layout {
            receipts: ev.join("results").join("receipts"),
            ticks: ev.join("ticks"),
            git_dir: git("--absolute-git-dir"),
            git_common: git("--git-common-dir"),
            ev,
        }
    }

    /// Fold one event path into `c`.
    fn classify(&self, path: &Path, c: &mut Changes) {
        if let Ok(rest) = path.strip_prefix(&self.receipts) {
            if let Some(key) = rest
                .to_str()
                .and_then(|n| n.strip_suffix(".jsonl"))
                .filter(|k| !k.contains('/'))
            {
                c.receipts.insert(key.to_string());
            } else if rest.as_os_str().is_empty() {
                c.rescan = true; // the directory itself came or went
            }
        } else if path.starts_with(&self.ticks) || path == self.ev.join("HEAD") {
            c.ticks = true;
        } else if path == self.ev.join("results").join("selected.json") {
            c.selected = true;
        } else if path == self.ev.join("config") {
            c.config = true;
        } else if path == self.ev.join("results") {
            c.rescan = true;
        } else if self
            .git_dir
            .iter()
            .chain(self.git_common.iter())
            .any(|g| path.starts_with(g))
        {
            // Lock files and the object store never decide a verdict.
            let noise = path.extension().is_some_and(|e| e == "lock")
                || path.components().any(|p| p.as_os_str() == "objects");
            if !noise {
                c.git = true;
            }
        }
    }
}

/// Keeps the watches alive; dropping it stops them.
pub struct StoreWatcher {
    _debouncer: Debouncer<notify::RecommendedWatcher, RecommendedCache>,
    stop: Arc<AtomicBool>,
}

impl Drop for StoreWatcher {
    fn drop(&mut self) {
        // The busy-directory thread notices within one poll interval.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How often the busy-directory thread looks at its stop flag (and retries a lost watch).
const POLL_MS: i32 = 200;

/// Watch `ticks/` and `results/receipts/` with [`DirWatch`] (no opens, no reads) until `stop`,
/// sending what changed to `tx`, debounced like notify's batches.
fn watch_busy_dirs(
    layout: Layout,
    watches: (Option<DirWatch>, Option<DirWatch>),
    tx: mpsc::Sender<Changes>,
    stop: Arc<AtomicBool>,
) {
    let (mut ticks, mut receipts) = watches;
    while !stop.load(Ordering::Relaxed) {
        let live: Vec<&DirWatch> = ticks.iter().chain(receipts.iter()).collect();
        if live.is_empty() {
            std::thread::sleep(Duration::from_millis(POLL_MS as u64));
        } else if !DirWatch::wait_any(&live, POLL_MS) {
            continue;
        }
        let mut c = Changes::default();
        if ticks.is_none() || receipts.is_none() {
            // A directory we could not watch (removed, or not there yet): look again, and
            // since anything may have happened meanwhile, have everything re-read.
            let (had_ticks, had_receipts) = (ticks.is_some(), receipts.is_some());
            ticks = ticks.or_else(|| DirWatch::new(&layout.ticks).ok());
            receipts = receipts.or_else(|| DirWatch::new(&layout.receipts).ok());
            c.rescan = (!had_ticks && ticks.is_some()) || (!had_receipts && receipts.is_some());
        }
        std::thread::sleep(DEBOUNCE);
        match ticks.as_mut().map(DirWatch::drain) {
            Some(dirwatch::Changes::Names(_)) => c.ticks = true,
            Some(dirwatch::Changes::Rescan) => {
                c.rescan = true;
                ticks = None;
            }
            _ => {}
        }
        match receipts.as_mut().map(DirWatch::drain) {
            Some(dirwatch::Changes::Names(names)) => {
                c.receipts.extend(
                    names
                        .iter()
                        .filter_map(|n| n.strip_suffix(".jsonl"))
                        .map(str::to_string),
                );
            }
            Some(dirwatch::Changes::Rescan) => {
                c.rescan = true;
                receipts = None;
            }
            _ => {}
        }
        if !c.is_empty() && tx.send(c).is_err() {
            return; // nobody listens any more
        }
    }
}

/// Watch the store under `root`, sending each non-empty batch of changes to `tx`.
/// `results/receipts/` is created if missing (writers create it on demand anyway), but never
/// `results/` or `.evolving` themselves: a store being removed stays removed.
pub fn watch(layout: Layout, tx: mpsc::Sender<Changes>) -> notify::Result<StoreWatcher> {
    let _ = std::fs::create_dir(&layout.receipts);
    let busy_tx = tx.clone();
    let classify = layout.clone();
    let mut debouncer = new_debouncer(DEBOUNCE, None, move |res: DebounceEventResult| {
        let mut c = Changes::default();
        match res {
            Ok(events) => {
                for e in events {
                    if e.need_rescan() {
                        c.rescan = true;
                        continue;
                    }
                    if matches!(e.kind, EventKind::Access(_)) {
                        continue;
                    }
                    for p in &e.paths {
                        classify.classify(p, &mut c);
                    }
                }
            }
            Err(errors) => {
                for e in errors {
                    tracing::warn!(error = %e, "watch error: rescanning");
                }
                c.rescan = true;
            }
        }
        if !c.is_empty() {
            let _ = tx.send(c);
        }
    })?;
    debouncer.watch(&layout.ev, RecursiveMode::NonRecursive)?;
    debouncer.watch(layout.ev.join("results"), RecursiveMode::NonRecursive)?;
    if let Some(g) = &layout.git_dir {
        debouncer.watch(g, RecursiveMode::NonRecursive)?;
    }
    if let Some(common) = &layout.git_common {
        let refs = common.join("refs");
        if refs.is_dir() {
            debouncer.watch(&refs, RecursiveMode::Recursive)?;
        }
        if Some(common) != layout.git_dir.as_ref() {
            debouncer.watch(common, RecursiveMode::NonRecursive)?;
        }
    }
    // Last, so that a failed notify watch leaves no thread behind; the watches themselves are
    // made here, so that nothing after this call returns goes unseen.
    let busy = (
        DirWatch::new(&layout.ticks).ok(),
        DirWatch::new(&layout.receipts).ok(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let thread_stop = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("evd-watch".into())
        .spawn(move || watch_busy_dirs(layout, busy, busy_tx, thread_stop))
        .map_err(|e| notify::Error::generic(&e.to_string()))?;
    Ok(StoreWatcher {
        _debouncer: debouncer,
        stop,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("git")
            .success();
        assert!(ok, "git {args:?}");
    }

    /// Wait (bounded) until the accumulated changes satisfy `want`.
    fn until(rx: &mpsc::Receiver<Changes>, want: impl Fn(&Changes) -> bool) -> Changes {
        let mut seen = Changes::default();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Ok(c) = rx.recv_timeout(Duration::from_millis(100)) {
                seen.receipts.extend(c.receipts);
                seen.selected |= c.selected;
                seen.ticks |= c.ticks;
                seen.config |= c.config;
                seen.git |= c.git;
                seen.rescan |= c.rescan;
                if want(&seen) {
                    return seen;
                }
            }
        }
        panic!("the change never arrived; saw {seen:?}");
    }

    #[test]
    fn receipts_selected_ticks_and_git_moves_are_each_reported() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        git(root, &["init", "-q", "-b", "main"]);
        git(root, &["config", "user.name", "W"]);
        git(root, &["config", "user.email", "w@example.invalid"]);
        std::fs::write(root.join("f"), "1").expect("write");
        git(root, &["add", "f"]);
        git(root, &["commit", "-q", "-m", "one"]);
        let mut store = crate::store::Store::new(root.to_path_buf());
        store.init().expect("init");

        let (tx, rx) = mpsc::channel();
        let _w = watch(Layout::of(root), tx).expect("watch");

        let receipts = root.join(".evolving/results/receipts/b5bea41b6c62.jsonl");
        crate::fsio::append(&receipts, b"{\"torn").expect("append");
        let c = until(&rx, |c| c.receipts.contains("b5bea41b6c62"));
        assert!(!c.git);

        std::fs::write(root.join(".evolving/results/selected.json"), "{}").expect("write");
        until(&rx, |c| c.selected);

        std::fs::write(root.join(".evolving/ticks/aaaaaaaaaaaa"), "{}").expect("write");
        until(&rx, |c| c.ticks);

        std::fs::write(root.join("f"), "2").expect("write");
        git(root, &["commit", "-q", "-am", "two"]);
        until(&rx, |c| c.git);
    }
}
