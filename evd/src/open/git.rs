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
        let results = self.results_dir();
        self.ranges
            .get_or_insert_with(|| crate::git::ranges::restore(&root, &results))
            .take(&root, tip)
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
        let results = self.results_dir();
        let ranges = self
            .ranges
            .get_or_insert_with(|| crate::git::ranges::restore(&root, &results));
        let worktree = &mut self.worktree;
        match head {
            Some(h) if !ranges.has(h) => std::thread::scope(|s| {
                let carried = s.spawn(|| {
                    ranges.advance(&root, h);
                    crate::sys::child::take_timeouts()
                });
                let answer = worktree.uncommitted(&root, head, guarded);
                // A carry that panicked leaves nothing carried: those are asked again.
                if let Ok(timeouts) = carried.join() {
                    crate::sys::child::note_timeouts(timeouts);
                }
                answer
            }),
            _ => worktree.uncommitted(&root, head, guarded),
        }
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

    /// Every distinct `triggered_by` entry that [`crate::git::ranges::plain_paths`] accepts, over
    /// the current view's live test grounds, sorted.
    pub fn guarded_paths(&mut self) -> Result<Arc<Vec<String>>, Refusal> {
        let view = self.current_shared()?;
        let generation = self.store.ticks_generation();
        if let Some((g, paths)) = &self.guarded {
            if *g == generation {
                return Ok(Arc::clone(paths));
            }
        }
        let mut set = std::collections::BTreeSet::new();
        for (_, t) in view.iter().filter(|(_, t)| t.status() == "live") {
            for (_, _, triggers) in t.test_bindings() {
                let triggers: Vec<&str> = triggers.iter().collect();
                if triggers.iter().all(|t| crate::git::ranges::plain_path(t)) {
                    set.extend(triggers.into_iter().map(str::to_string));
                }
            }
        }
        let paths = Arc::new(set.into_iter().collect::<Vec<_>>());
        self.guarded = Some((generation, Arc::clone(&paths)));
        Ok(paths)
    }
}
