//! The check memo itself: the [`Basis`] an evaluation's verdicts rest on (all but the clock),
//! the last few evaluations each kept with its exact basis ([`Memos`]), answered again only on
//! that very basis and before the clock overtakes it, or built on when only ticks, receipts or
//! state files moved; and [`Evaluated`], an evaluation with what it rests on, as the verbs
//! that read verdicts take it.
//!
//! It must not establish a basis itself (the request does: inotify drains, `selected.json`,
//! git facts) nor evaluate or render anything: [`super::evaluation`] renders, and the parts
//! are made by the `check` verb.

use std::sync::Arc;

use time::OffsetDateTime;

use super::evaluation::Evaluation;
use crate::engine::verdict::Selected;

/// Everything an evaluation's verdicts depend on, apart from the clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Basis {
    pub offline: bool,
    pub attest: Option<Vec<String>>,
    pub policy: String,
    pub staleness_days: u64,
    /// The staleness reference sha, as resolved for this request.
    pub reference: Option<String>,
    pub selected: Option<Selected>,
    /// The repository's HEAD (trigger liveness is answered against it).
    pub head: Option<String>,
    /// The work tree's uncommitted tracked changes (`dirty`); `None` when git could not say.
    pub uncommitted: Option<Arc<crate::git::worktree::Uncommitted>>,
    pub ticks: u64,
    pub receipts: u64,
    pub state: u64,
    /// The generation of what the current decisions' cited evidence reads
    /// ([`crate::ledger::evidence::sync`]).
    pub evidence: u64,
}

impl Basis {
    /// Equal in everything but the generations of ticks, receipts and state files, the work
    /// tree's changes and HEAD (whose moves change only trigger answers, which each part
    /// records).
    pub fn same_facts(&self, other: &Basis) -> bool {
        self.offline == other.offline
            && self.attest == other.attest
            && self.policy == other.policy
            && self.staleness_days == other.staleness_days
            && self.reference == other.reference
            && self.selected == other.selected
    }
}

/// A check's evaluation and what it rests on: what every verb that reads verdicts starts from.
pub struct Evaluated {
    pub eval: Arc<Evaluation>,
    /// The staleness policy (config `staleness_ref`).
    pub policy: String,
    pub warnings: Vec<proto::rpc::Warning>,
    /// What the verdicts rest on (the staleness reference they were read against, HEAD, …),
    /// and the clock they were read at: what a replay needs.
    pub basis: Basis,
    pub now: OffsetDateTime,
}

/// The last few evaluations, most recently used last.
#[derive(Debug, Default)]
pub struct Memos {
    entries: Vec<(Basis, Arc<Evaluation>)>,
}

/// How many flag sets (attest lists, offline) are remembered at once.
const KEEP: usize = 4;

impl Memos {
    /// The evaluation made on exactly this basis, if the clock has not overtaken it. `complete`:
    /// only one that wrote every state file will do.
    pub fn get(
        &mut self,
        basis: &Basis,
        now: OffsetDateTime,
        complete: bool,
        state_epoch: u64,
    ) -> Option<Arc<Evaluation>> {
        let i = self.entries.iter().position(|(b, _)| b == basis)?;
        let e = &self.entries[i].1;
        if e.state_epoch != state_epoch {
            return None; // still good to build on: its parts check their own state files
        }
        if e.valid_until.is_some_and(|t| now >= t) {
            self.entries.remove(i);
            return None;
        }
        if complete && !e.state_complete {
            return None; // still good to build on
        }
        let hit = self.entries.remove(i);
        let e = Arc::clone(&hit.1);
        self.entries.push(hit);
        Some(e)
    }

    /// The latest evaluation for the same flags and facts whose only differences are in the
    /// ticks, the receipts or the state files, and which the clock has not overtaken: a new
    /// evaluation can keep every tick part those differences did not touch.
    pub fn prior(&self, basis: &Basis, now: OffsetDateTime) -> Option<Arc<Evaluation>> {
        self.entries
            .iter()
            .rev()
            .find(|(b, e)| b.same_facts(basis) && e.valid_until.is_none_or(|t| now < t))
            .map(|(_, e)| Arc::clone(e))
    }

    pub fn put(&mut self, basis: Basis, e: Arc<Evaluation>) {
        self.entries
            .retain(|(b, _)| !(b.offline == basis.offline && b.attest == basis.attest));
        if self.entries.len() >= KEEP {
            self.entries.remove(0);
        }
        self.entries.push((basis, e));
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// The plain evaluation (no `offline`, no `attest`) remembered, if any.
    pub fn plain(&self) -> Option<(&Basis, &Arc<Evaluation>)> {
        self.entries
            .iter()
            .rev()
            .find(|(b, _)| !b.offline && b.attest.is_none())
            .map(|(b, e)| (b, e))
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rows::testing::tick;
    use crate::engine::rows::{Rows, TestPart, TickPart};

    #[test]
    fn a_memo_answers_only_its_own_basis_and_only_until_it_expires() {
        let basis = Basis {
            offline: false,
            attest: None,
            policy: "none".into(),
            staleness_days: 30,
            reference: None,
            selected: None,
            head: None,
            uncommitted: None,
            ticks: 1,
            receipts: 1,
            state: 1,
            evidence: 0,
        };
        let now = crate::engine::clock::parse("2026-03-01T00:00:00Z").expect("now");
        let later = now + time::Duration::hours(1);
        let mut m = Memos::default();
        let part = TickPart {
            file: "bbbbbbbbbbbb".into(),
            tick: Arc::new(crate::engine::packed::PackedTick::pack(&tick())),
            state_digest: 0,
            tests: Some(Box::new(TestPart {
                rows: Rows::default(),
                check_event: None,
                keys: Box::default(),
                expires: Some(later),
                volatile: false,
                triggered: Box::default(),
            })),
        };
        let e = Evaluation::new(vec![Arc::new(part)], true, 1, None, None);
        assert_eq!(e.valid_until, Some(later));
        m.put(basis.clone(), Arc::new(e));
        assert!(m.prior(&basis, now).is_some());
        assert!(m.get(&basis, now, true, 0).is_some());
        let mut moved = basis.clone();
        moved.receipts = 2;
        assert!(m.get(&moved, now, true, 0).is_none());
        assert!(m.get(&basis, later, true, 0).is_none(), "expired");
        assert!(m.get(&basis, now, true, 0).is_none(), "and forgotten");
        let partial = Evaluation::new(Vec::new(), false, 1, None, None);
        m.put(basis.clone(), Arc::new(partial));
        assert!(m.get(&basis, now, false, 0).is_some());
        assert!(m.get(&basis, now, true, 0).is_none());
    }
}
