//! What changed around a store, debounced: receipts appended by any process, the selected-list,
//! the ticks, the config, and the git refs a verdict depends on (HEAD, branches, packed-refs,
//! the upstream tracking ref). Changes only say *where* to look again; the truth is always
//! re-read from disk. A lost event (inotify overflow) or a vanished directory asks for a full
//! rescan, never a silently stale answer.
//!
//! Every directory is watched through the daemon's one inotify instance ([`crate::sys::watch`]):
//! a store costs watch descriptors (its own directories, git's and one per directory under
//! `refs/`), never an instance or a thread of its own. Changes arrive on the hub's thread and
//! are handed to the store's actor through a [`Sink`].

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sys::watch::{self as dirwatch, hub, DirWatch, Listener, WatchError};

pub use crate::sys::watch::DEBOUNCE;

/// One batch of changes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Receipt file keys (`<key>.jsonl` stems) that changed.
    pub receipts: BTreeSet<String>,
    pub selected: bool,
    pub ticks: bool,
    pub config: bool,
    /// HEAD, a branch, packed-refs, git's config or a remote-tracking ref moved.
    pub git: bool,
    /// A directory under `refs/` came or went: the set of watched ref directories is redone.
    pub ref_dirs: bool,
    /// A guarded file of the work tree, or git's index, changed (`dirty`).
    pub worktree: bool,
    /// A file some current decision cites as evidence changed.
    pub evidence: bool,
    /// Events were lost or a watched directory went away: re-evaluate everything.
    pub rescan: bool,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }

    /// Fold `other` into this batch.
    pub fn merge(&mut self, other: Changes) {
        self.receipts.extend(other.receipts);
        self.selected |= other.selected;
        self.ticks |= other.ticks;
        self.config |= other.config;
        self.git |= other.git;
        self.ref_dirs |= other.ref_dirs;
        self.worktree |= other.worktree;
        self.evidence |= other.evidence;
        self.rescan |= other.rescan;
    }
}

/// Where a store's watcher delivers its batches (the store's actor).
pub type Sink = Arc<dyn Fn(Changes) + Send + Sync>;

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

/// Directories under `refs/` watched per store at most; past that, ref moves in the deepest
/// namespaces are found by the stamp checks every check makes anyway.
const MAX_REF_DIRS: usize = 256;

/// Names in git's own directory that can change a verdict (HEAD, the refs packed there, and the
/// config that names a branch's upstream). The index, logs and lock files never do.
const GIT_DIR_NAMES: &[&str] = &["HEAD", "packed-refs", "config", "commondir"];

impl Layout {
    /// The layout of the store under `root`, asking git where its directories are (unless it
    /// is the top of a plain repository).
    pub fn of(root: &Path) -> Layout {
        let ev = root.join(".evolving");
        let (git_dir, git_common) = match crate::git::worktree::plain_git_dir(root) {
            // A plain repository at the store's root: no git process to learn where.
            Some(gitdir) => (Some(gitdir.clone()), Some(gitdir)),
            None => {
                let git = |arg: &str| {
                    crate::git::run::git(root, &["rev-parse", arg]).map(|s| root.join(s))
                };
                (git("--absolute-git-dir"), git("--git-common-dir"))
            }
        };
        Layout {
            receipts: ev.join("results").join("receipts"),
            ticks: ev.join("ticks"),
            git_dir,
            git_common,
            ev,
        }
    }

    fn refs(&self) -> Option<PathBuf> {
        self.git_common.as_ref().map(|c| c.join("refs"))
    }

    /// Fold one changed entry `name` of the watched directory `dir` into `c`.
    fn classify(&self, dir: &Path, name: &str, c: &mut Changes) {
        if dir == self.receipts {
            if let Some(key) = name.strip_suffix(".jsonl") {
                c.receipts.insert(key.to_string());
            }
        } else if dir == self.ticks {
            c.ticks = true;
        } else if dir == self.ev {
            match name {
                "HEAD" | "ticks" => c.ticks = true,
                "config" => c.config = true,
                "results" => c.rescan = true, // the directory itself came or went
                _ => {}
            }
        } else if dir == self.ev.join("results") {
            match name {
                "selected.json" => c.selected = true,
                "receipts" => c.rescan = true,
                _ => {}
            }
        } else if self.refs().is_some_and(|r| dir.starts_with(r)) {
            if !name.ends_with(".lock") {
                c.git = true;
                if std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.is_dir()) {
                    c.ref_dirs = true;
                }
            }
        } else if GIT_DIR_NAMES.contains(&name) {
            c.git = true;
        } else if name == "refs" {
            c.git = true;
            c.ref_dirs = true;
        }
    }

    /// The listener for one watched directory: classify, then hand the batch to `sink`.
    fn listener(&self, dir: &Path, sink: &Sink) -> Listener {
        let layout = self.clone();
        let dir = dir.to_path_buf();
        let sink = Arc::clone(sink);
        Arc::new(move |changes: dirwatch::Changes| {
            let mut c = Changes::default();
            match changes {
                dirwatch::Changes::Quiet => {}
                dirwatch::Changes::Rescan => {
                    c.rescan = true;
                    if layout.refs().is_some_and(|r| dir.starts_with(r)) {
                        c.ref_dirs = true;
                    }
                }
                dirwatch::Changes::Names(names) => {
                    for n in &names {
                        layout.classify(&dir, n, &mut c);
                    }
                }
            }
            if !c.is_empty() {
                sink(c);
            }
        })
    }
}

/// Keeps a store's watches; dropping it gives them back.
pub struct StoreWatcher {
    layout: Layout,
    sink: Sink,
    _fixed: Vec<DirWatch>,
    refs: HashMap<PathBuf, DirWatch>,
}

/// Watch the store of `layout`, handing each non-empty batch of changes to `sink`.
/// `results/receipts/` is created if missing (writers create it on demand anyway), but never
/// `results/` or `.evolving` themselves: a store being removed stays removed. Fails, naming
/// why, when any of the store's own directories or git's cannot be watched.
pub fn watch(layout: Layout, sink: Sink) -> Result<StoreWatcher, WatchError> {
    let _ = std::fs::create_dir(&layout.receipts);
    let mut dirs = vec![
        layout.ev.clone(),
        layout.ev.join("results"),
        layout.ticks.clone(),
        layout.receipts.clone(),
    ];
    dirs.extend(layout.git_dir.iter().cloned());
    if let Some(common) = &layout.git_common {
        if Some(common) != layout.git_dir.as_ref() {
            dirs.push(common.clone());
        }
    }
    let mut fixed = Vec::with_capacity(dirs.len());
    for d in &dirs {
        fixed.push(hub().watch(d, Some(layout.listener(d, &sink)))?);
    }
    let mut w = StoreWatcher {
        layout,
        sink,
        _fixed: fixed,
        refs: HashMap::new(),
    };
    w.sync_refs();
    Ok(w)
}

impl StoreWatcher {
    /// Watch every directory under `refs/` (up to [`MAX_REF_DIRS`]), and stop watching the ones
    /// that went away.
    pub fn sync_refs(&mut self) {
        let Some(refs) = self.layout.refs() else {
            return;
        };
        let mut want = Vec::new();
        let mut todo = vec![refs];
        while let Some(d) = todo.pop() {
            if want.len() >= MAX_REF_DIRS {
                break;
            }
            if let Ok(rd) = std::fs::read_dir(&d) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        todo.push(e.path());
                    }
                }
                want.push(d);
            }
        }
        self.refs.retain(|p, _| want.contains(p));
        for d in want {
            if !self.refs.contains_key(&d) {
                match hub().watch(&d, Some(self.layout.listener(&d, &self.sink))) {
                    Ok(w) => {
                        self.refs.insert(d, w);
                    }
                    Err(e) => {
                        tracing::debug!(dir = %d.display(), error = %e, "cannot watch a ref directory");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::sync::mpsc;
    use std::time::Duration;

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
                seen.merge(c);
                if want(&seen) {
                    return seen;
                }
            }
        }
        panic!("the change never arrived; saw {seen:?}");
    }

    #[test]
    fn a_plain_repository_is_laid_out_without_git_as_git_would_say() {
        let d = tempfile::tempdir().expect("tempdir");
        let top = d.path();
        git(top, &["init", "-q", "-b", "main"]);
        git(
            top,
            &[
                "-c",
                "user.name=W",
                "-c",
                "user.email=w@e.invalid",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "one",
            ],
        );
        let sub = top.join("sub");
        std::fs::create_dir(&sub).expect("mkdir");
        let linked = d.path().join("linked");
        git(
            top,
            &[
                "worktree",
                "add",
                "-q",
                linked.to_str().expect("utf-8"),
                "-b",
                "side",
            ],
        );
        let canonical = |p: Option<PathBuf>| p.and_then(|p| std::fs::canonicalize(p).ok());
        for (root, plain) in [(top.to_path_buf(), true), (sub, false), (linked, false)] {
            assert_eq!(
                crate::git::worktree::plain_git_dir(&root).is_some(),
                plain,
                "{root:?}"
            );
            let ours = Layout::of(&root);
            let ask =
                |arg: &str| crate::git::run::git(&root, &["rev-parse", arg]).map(|s| root.join(s));
            assert_eq!(
                canonical(ours.git_dir),
                canonical(ask("--absolute-git-dir")),
                "{root:?}"
            );
            assert_eq!(
                canonical(ours.git_common),
                canonical(ask("--git-common-dir")),
                "{root:?}"
            );
        }
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
        let mut store = crate::open::OpenStore::new(root.to_path_buf());
        store.init().expect("init");

        let (tx, rx) = mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let sink: Sink = Arc::new(move |c| {
            if let Ok(t) = tx.lock() {
                let _ = t.send(c);
            }
        });
        let mut w = watch(Layout::of(root), sink).expect("watch");

        let receipts = root.join(".evolving/results/receipts/b5bea41b6c62.jsonl");
        crate::sys::fsio::append(&receipts, b"{\"torn").expect("append");
        let c = until(&rx, |c| c.receipts.contains("b5bea41b6c62"));
        assert!(!c.git);

        std::fs::write(root.join(".evolving/results/selected.json"), "{}").expect("write");
        until(&rx, |c| c.selected);

        std::fs::write(root.join(".evolving/ticks/aaaaaaaaaaaa"), "{}").expect("write");
        until(&rx, |c| c.ticks);

        std::fs::write(root.join("f"), "2").expect("write");
        git(root, &["commit", "-q", "-am", "two"]);
        until(&rx, |c| c.git);

        // A branch in a new namespace: the directory is noticed, and once the ref directories
        // are redone, a move of that branch is seen too.
        git(root, &["branch", "team/x"]);
        until(&rx, |c| c.ref_dirs);
        w.sync_refs();
        std::fs::write(root.join("f"), "3").expect("write");
        git(root, &["commit", "-q", "-am", "three"]);
        while rx.recv_timeout(Duration::from_millis(300)).is_ok() {}
        git(root, &["update-ref", "refs/heads/team/x", "HEAD"]);
        until(&rx, |c| c.git);
    }
}
