//! The git side of one evaluation: which triggers changed since a run, whether a commit since
//! `verified_at_sha` touched a binding's paths, and whether guarded files are uncommitted, asked
//! of git once per distinct question and remembered across checks ([`crate::git::ranges`]).

use std::sync::Arc;

use proto::model::is_40_lower_hex;

use crate::engine::verdict::{self};
use crate::git::ranges::{self as git_ranges, Answers, Range};
use crate::git::worktree::Uncommitted;
use crate::ledger::replay;
use crate::memo::check::{Basis, TickPart};
use crate::open::OpenStore;

/// What git says during one evaluation: the range answers against HEAD (trigger liveness) and
/// against the staleness reference (diff-aware staleness) — one map when they are the same
/// commit — and the work tree's changes.
pub(super) struct GitFacts {
    pub(super) root: std::path::PathBuf,
    pub(super) head: Option<String>,
    pub(super) reference: Option<String>,
    pub(super) at_head: Answers,
    /// `None` when the reference is HEAD (or there is none): `at_head` answers for both.
    pub(super) at_reference: Option<Answers>,
    pub(super) uncommitted: Option<Arc<Uncommitted>>,
    /// Grounds asked upstream's way (`git status -- <paths>`), by their paths.
    pub(super) direct: std::collections::HashMap<Vec<String>, bool>,
    pub(super) learnt: bool,
}

impl GitFacts {
    pub(super) fn take(store: &mut OpenStore, basis: &Basis, root: std::path::PathBuf) -> GitFacts {
        let head = basis.head.clone();
        let reference = basis.reference.clone().filter(|r| is_40_lower_hex(r));
        let at_head = head
            .as_deref()
            .map(|h| store.take_ranges(h))
            .unwrap_or_default();
        let at_reference = reference
            .as_deref()
            .filter(|r| head.as_deref() != Some(*r))
            .map(|r| store.take_ranges(r));
        GitFacts {
            root,
            head,
            reference: basis.reference.clone(),
            at_head,
            at_reference,
            uncommitted: basis.uncommitted.clone(),
            direct: std::collections::HashMap::new(),
            learnt: false,
        }
    }

    /// Hand the answers back to the store; `persist` (a real check, never a background pass)
    /// writes them for the next start.
    pub(super) fn give_back(self, store: &mut OpenStore, persist: bool) {
        if let (Some(r), Some(answers)) = (self.reference, self.at_reference) {
            // Written once, with HEAD's below.
            store.keep_ranges(r, answers, self.learnt, false);
        }
        if let Some(h) = self.head {
            store.keep_ranges(h, self.at_head, self.learnt, persist);
        }
    }

    /// The memo and tip for questions against HEAD (`reference == false`) or the reference.
    pub(super) fn memo(&mut self, reference: bool) -> (Option<&str>, &mut Answers) {
        if reference {
            match self.at_reference.as_mut() {
                Some(m) => (self.reference.as_deref(), m),
                None => (self.reference.as_deref(), &mut self.at_head),
            }
        } else {
            (self.head.as_deref(), &mut self.at_head)
        }
    }

    /// `git rev-list <base>..<tip> -- <paths>`, remembered; the tip is HEAD, or the reference.
    /// With no HEAD (not a repository, an unborn branch), git is asked about `HEAD` itself, as
    /// upstream does.
    pub(super) fn range(&mut self, reference: bool, base: &str, paths: &[String]) -> Range {
        let (tip, memo) = self.memo(reference);
        let Some(tip) = tip else {
            return git_ranges::ask(&self.root, base, "HEAD", paths);
        };
        if let Some(&r) = memo.get(base).and_then(|m| m.get(paths)) {
            return r;
        }
        let tip = tip.to_string();
        let r = git_ranges::ask(&self.root, base, &tip, paths);
        self.memo(reference)
            .1
            .entry(base.to_string())
            .or_default()
            .insert(paths.to_vec(), r);
        self.learnt = true;
        r
    }

    /// Ask, in parallel, every range question evaluating `ticks` will ask that the memos cannot
    /// answer yet: a store's first check asks thousands, each a `git rev-list` process.
    pub(super) fn ask_ahead<'t>(
        &mut self,
        store: &mut OpenStore,
        ticks: impl Iterator<Item = &'t crate::engine::packed::PackedTick>,
        basis: &Basis,
    ) {
        let mut todo: [Vec<(String, Vec<String>)>; 2] = [Vec::new(), Vec::new()];
        let mut seen = std::collections::HashSet::new();
        for tick in ticks {
            for g in tick.grounds() {
                let crate::engine::packed::CheckRef::Test {
                    reference,
                    verified_at_sha,
                    triggered_by,
                    ..
                } = g.check
                else {
                    continue;
                };
                let paths: Vec<String> = triggered_by.iter().map(str::to_string).collect();
                let paths = paths.as_slice();
                let mut want = |which: usize, base: &str, this: &mut GitFacts| {
                    let (tip, memo) = this.memo(which == 1);
                    if tip.is_none() || memo.get(base).is_some_and(|m| m.contains_key(paths)) {
                        return;
                    }
                    let tip = tip.map(str::to_string);
                    if seen.insert((tip, base.to_string(), paths.to_vec())) {
                        todo[which].push((base.to_string(), paths.to_vec()));
                    }
                };
                if basis
                    .reference
                    .as_deref()
                    .is_some_and(|r| r != verified_at_sha)
                {
                    want(1, verified_at_sha, self);
                }
                let recs = store.receipts.get(reference);
                if let Some(r) = verdict::latest(recs.iter()) {
                    want(0, &r.commit, self);
                }
            }
        }
        for (which, todo) in todo.into_iter().enumerate() {
            let root = self.root.clone();
            let (tip, memo) = self.memo(which == 1);
            let Some(tip) = tip.map(str::to_string) else {
                continue;
            };
            // A worker that panicked answers nothing: those questions are asked again, one by
            // one, when the ticks are evaluated.
            let Some(answers) = git_ranges::ask_all(&root, &tip, &todo) else {
                continue;
            };
            for ((base, paths), answer) in todo.into_iter().zip(answers) {
                memo.entry(base).or_default().insert(paths, answer);
            }
            self.learnt = true;
        }
    }

    /// Ask ahead, in parallel, the trigger questions `parts` recorded that the memo for the new
    /// HEAD cannot answer.
    pub(super) fn ask_recorded<'p>(&mut self, parts: impl Iterator<Item = &'p TickPart>) {
        let Some(head) = self.head.clone() else {
            return;
        };
        let mut todo = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for p in parts {
            for (paths, commit, _) in p.triggered() {
                let paths: &[String] = paths;
                let known = self
                    .at_head
                    .get(&**commit)
                    .is_some_and(|m| m.contains_key(paths));
                if !known && seen.insert((&**commit, paths)) {
                    todo.push((commit.to_string(), paths.to_vec()));
                }
            }
        }
        if todo.is_empty() {
            return;
        }
        if let Some(answers) = git_ranges::ask_all(&self.root, &head, &todo) {
            for ((base, paths), answer) in todo.into_iter().zip(answers) {
                self.at_head.entry(base).or_default().insert(paths, answer);
            }
            self.learnt = true;
        }
    }

    /// Whether every trigger answer `part` recorded is the same at the current HEAD.
    pub(super) fn same_triggers(&mut self, part: &TickPart) -> bool {
        part.triggered().iter().all(|(paths, commit, was)| {
            (self.range(false, commit, paths) == Range::Touched) == *was
        })
    }

    /// Whether the work tree has uncommitted changes under `paths` (upstream's `git status
    /// --porcelain --untracked-files=no -- <paths>`), and whether that was asked directly.
    pub(super) fn uncommitted(&mut self, paths: &[String]) -> (bool, bool) {
        if paths.is_empty() {
            return (false, false);
        }
        if git_ranges::plain_paths(paths) {
            return (
                self.uncommitted.as_ref().is_some_and(|u| u.touches(paths)),
                false,
            );
        }
        if let Some(&d) = self.direct.get(paths) {
            return (d, true);
        }
        let d = crate::git::worktree::status_of(&self.root, paths);
        self.direct.insert(paths.to_vec(), d);
        (d, true)
    }
}

/// One ground's view of [`GitFacts`], for the verdict engine.
pub(super) struct GroundGit<'g> {
    pub(super) git: &'g mut GitFacts,
    pub(super) verified: &'g str,
    pub(super) paths: &'g [String],
    /// The work tree was asked directly.
    pub(super) direct: bool,
    /// The answers that were not the default, as the ledger records them.
    pub(super) said: u8,
}

impl verdict::GitSays for GroundGit<'_> {
    fn touched_since_verified(&mut self) -> bool {
        let touched = self.git.range(true, self.verified, self.paths) != Range::Untouched;
        if !touched {
            self.said |= replay::UNTOUCHED;
        }
        touched
    }

    fn uncommitted(&mut self) -> bool {
        let (dirty, direct) = self.git.uncommitted(self.paths);
        self.direct |= direct;
        if dirty {
            self.said |= replay::DIRTY;
        }
        dirty
    }
}
