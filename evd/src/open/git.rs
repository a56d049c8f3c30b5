//! The git side of an open store: `rev-list` answers kept per tip (and carried to a new HEAD),
//! the work tree's uncommitted changes, and the paths the live test grounds guard.

use std::sync::Arc;

use proto::rpc::Refusal;

use super::OpenStore;

impl OpenStore {
    /// Take the git answers known for `tip` (see [`crate::git::ranges::Memo::take`]); the first
    /// use takes back what a previous daemon kept in `results/`. Hand them back with
    /// [`OpenStore::keep_ranges`].
    pub fn take_ranges(&mut self, tip: &str) -> crate::git::ranges::Answers {
        let root = self.store.root().to_path_buf();
        if self.ranges.is_none() {
            self.ranges = Some(self.restored_ranges());
        }
        self.ranges
            .get_or_insert_with(Default::default)
            .take(&root, tip)
    }

    /// When the store is about to be opened: take back the git answers the previous daemon left
    /// (which asks git who the repository is: two git processes) on a thread of their own, so
    /// that the first check finds them taken.
    pub(super) fn git_answers_ahead(&mut self) {
        if self.ranges.is_some() || self.ranges_ahead.is_some() {
            return;
        }
        let (root, results) = (self.store.root().to_path_buf(), self.results_dir());
        self.ranges_ahead = std::thread::Builder::new()
            .name("evd-git-answers".into())
            .spawn(move || {
                let memo = crate::git::ranges::restore(&root, &results);
                (memo, crate::sys::child::take_timeouts())
            })
            .ok();
    }

    /// The git answers the previous daemon left: as taken back ahead, else read now. The git
    /// commands that overran while they were taken back count for the request under way.
    fn restored_ranges(&mut self) -> crate::git::ranges::Memo {
        match self.ranges_ahead.take().map(std::thread::JoinHandle::join) {
            Some(Ok((memo, timeouts))) => {
                crate::sys::child::note_timeouts(timeouts);
                memo
            }
            _ => crate::git::ranges::restore(self.store.root(), &self.results_dir()),
        }
    }

    /// The work tree's uncommitted changes (see [`crate::git::worktree::Worktree::uncommitted`]),
    /// while — in parallel, when HEAD moved — the git answers known for the last HEAD are
    /// carried over to `head`: both cost git processes right after a commit.
    pub fn uncommitted_and_ranges(
        &mut self,
        head: Option<&str>,
        guarded: &[String],
    ) -> Option<Arc<crate::git::worktree::Uncommitted>> {
        let root = self.store.root().to_path_buf();
        let ready = matches!(&self.ranges, Some(r) if head.is_none_or(|h| r.has(h)));
        if ready {
            return self.worktree.uncommitted(&root, head, guarded);
        }
        // The answers the previous daemon left (taking them back asks git who the repository
        // is), carried over to `head`: beside `git status`, not after it.
        let pending = self.ranges.take();
        let restored = pending.is_none();
        let ahead = self.ranges_ahead.take();
        let results = self.results_dir();
        let worktree = &mut self.worktree;
        let (answer, ranges) = std::thread::scope(|s| {
            let carried = s.spawn(|| {
                let mut ranges = match (pending, ahead.map(std::thread::JoinHandle::join)) {
                    (Some(memo), _) => memo,
                    (None, Some(Ok((memo, timeouts)))) => {
                        crate::sys::child::note_timeouts(timeouts);
                        memo
                    }
                    (None, _) => crate::git::ranges::restore(&root, &results),
                };
                let moved = head.filter(|h| !ranges.has(h));
                if let Some(h) = moved {
                    ranges.advance(&root, h);
                }
                // Carried from what the previous daemon left: kept for the next start, which
                // then finds its tip instead of carrying (and asking git) again.
                let keep = restored && moved.is_some_and(|h| ranges.has(h));
                (ranges, keep, crate::sys::child::take_timeouts())
            });
            let answer = worktree.uncommitted(&root, head, guarded);
            // A carry that panicked leaves nothing: the answers are taken back or asked again.
            let ranges = carried.join().ok().map(|(ranges, keep, timeouts)| {
                crate::sys::child::note_timeouts(timeouts);
                (ranges, keep)
            });
            (answer, ranges)
        });
        let (ranges, keep) = ranges.map_or((None, false), |(r, keep)| (Some(r), keep));
        self.ranges = ranges;
        if keep {
            // Written a little later, not while a client waits (see [`OpenStore::idle_work_at`]).
            self.ranges_unsaved
                .get_or_insert_with(std::time::Instant::now);
        }
        answer
    }

    /// Keep the answers for `tip`; with `persist`, when any were learnt since the last write,
    /// have them written for the next start.
    pub fn keep_ranges(
        &mut self,
        tip: String,
        answers: crate::git::ranges::Answers,
        learnt: bool,
        persist: bool,
    ) {
        let memo = self.ranges.get_or_insert_with(Default::default);
        memo.keep(tip, answers, learnt);
        if persist && memo.take_dirty() {
            // Written a little later, not while a client waits (see [`OpenStore::idle_work_at`]).
            self.ranges_unsaved
                .get_or_insert_with(std::time::Instant::now);
        }
    }

    /// Forget every git answer (a git child overran: nothing it said is trusted).
    pub fn forget_ranges(&mut self) {
        if let Some(m) = self.ranges.as_mut() {
            m.clear();
        }
    }

    /// The guarded paths known for tick generation `generation`, if any.
    pub(super) fn guarded_as_of(&self, generation: u64) -> Option<Arc<Vec<String>>> {
        match &self.guarded {
            Some((g, paths)) if *g == generation => Some(Arc::clone(paths)),
            _ => None,
        }
    }

    /// Every distinct `triggered_by` entry that [`crate::git::ranges::plain_paths`] accepts, over
    /// the current view's live test grounds, sorted (taken from the evaluation image while the
    /// ticks are exactly those it was made with).
    pub fn guarded_paths(&mut self) -> Result<Arc<Vec<String>>, Refusal> {
        let view = self.current_shared()?;
        let generation = self.store.ticks_generation();
        if let Some((g, paths)) = &self.guarded {
            if *g == generation {
                return Ok(Arc::clone(paths));
            }
        }
        if let Some(paths) = self.imaged_guarded() {
            let paths = Arc::new(paths);
            self.guarded = Some((generation, Arc::clone(&paths)));
            return Ok(paths);
        }
        // Collected on a few threads, hashed (most ticks name the same few paths), and sorted
        // once at the end.
        let chunks: Vec<&[(Arc<str>, Arc<crate::engine::packed::PackedTick>)]> =
            view.chunks(8192).collect();
        let found = crate::sys::par::map(&chunks, 2, |ticks| {
            let mut set: rustc_hash::FxHashSet<&str> = Default::default();
            for (_, t) in ticks.iter().filter(|(_, t)| t.status() == "live") {
                for (_, _, triggers) in t.test_bindings() {
                    if triggers.iter().all(crate::git::ranges::plain_path) {
                        set.extend(triggers.iter());
                    }
                }
            }
            set
        });
        let set: rustc_hash::FxHashSet<&str> = found.into_iter().flatten().collect();
        let mut paths: Vec<String> = set.into_iter().map(str::to_string).collect();
        paths.sort_unstable();
        let paths = Arc::new(paths);
        self.guarded = Some((generation, Arc::clone(&paths)));
        Ok(paths)
    }

    /// Make [`OpenStore::head_tree`] the tree of `head`: taken from the read ahead when it is
    /// for that commit (waiting for it to finish), else asked of git now. `None` when git
    /// cannot say.
    pub fn head_tree_for(&mut self, head: &str) -> Option<()> {
        if self.head_tree.as_ref().is_some_and(|t| t.commit == head) {
            return Some(());
        }
        if let Some((commit, reading)) = self.head_tree_ahead.take() {
            if commit == head {
                if let Ok(Some(tree)) = reading.join() {
                    self.head_tree = Some(tree);
                    return Some(());
                }
            }
        }
        let root = self.store.root().to_path_buf();
        self.head_tree = Some(crate::git::staged::HeadTree::of(&root, head)?);
        Some(())
    }

    /// HEAD moved to `head` while a pre-commit gate is in use here (a tree is kept): read the
    /// new HEAD's tree now, off the store's thread, so that the next commit's gate finds it
    /// (every commit moves HEAD, and `ls-tree` of a repository of 10,000 committed ticks takes
    /// some 20 ms).
    pub fn read_head_tree_ahead(&mut self, head: &str) {
        let wanted = self.head_tree.as_ref().is_some_and(|t| t.commit != head)
            && self.head_tree_ahead.as_ref().is_none_or(|(c, _)| c != head);
        if !wanted {
            return;
        }
        let root = self.store.root().to_path_buf();
        let commit = head.to_string();
        let reading = std::thread::Builder::new()
            .name("evd-head-tree".into())
            .spawn(move || crate::git::staged::HeadTree::of(&root, &commit));
        if let Ok(reading) = reading {
            self.head_tree_ahead = Some((head.to_string(), reading));
        }
    }
}
