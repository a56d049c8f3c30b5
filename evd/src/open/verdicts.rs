//! The verdict snapshot of an open store: every test ground's label as the last plain check
//! read it, the changes each evaluation makes to it (journaled, and queued for `ev.watch`).

use std::sync::Arc;

use super::OpenStore;

/// The label a part's row gives ground `gi`, if it has a row for it.
fn label_of(part: &crate::memo::check::TickPart, gi: usize) -> Option<&str> {
    part.kept_rows()
        .iter()
        .find(|r| r.ground_index == gi)
        .map(|r| &*r.label)
}

impl OpenStore {
    /// A number for a new evaluation, never given before by this store.
    pub fn next_evaluation_serial(&mut self) -> u64 {
        self.evaluations += 1;
        self.evaluations
    }

    /// Whether the verdict snapshot holds what evaluation `serial` found (it was the last folded
    /// in).
    pub fn verdicts_folded_from(&self, serial: u64) -> bool {
        self.verdicts.is_some() && self.verdicts_from == serial
    }

    /// Note that the snapshot now holds what evaluation `serial` found.
    pub fn fold_verdicts_from(&mut self, serial: u64) {
        self.verdicts_from = serial;
    }

    /// Fold a plain evaluation's parts into the snapshot and say which test grounds' labels
    /// changed (grounds no longer seen have left the view). With `only`, `folded` holds the
    /// parts of the ticks evaluated again alone, and nothing else in the snapshot moved. The
    /// first evaluation only sets the baseline. Costs no allocation for a part whose labels did
    /// not move.
    pub fn update_verdicts(
        &mut self,
        folded: &[&Arc<crate::memo::check::TickPart>],
        only: bool,
    ) -> Vec<proto::rpc::VerdictChange> {
        use proto::rpc::VerdictChange;
        let baseline = self.verdicts.is_none();
        let snap = self.verdicts.get_or_insert_with(Default::default);
        if baseline {
            // The first evaluation only sets the baseline: nothing to compare, nothing to say.
            snap.extend(
                folded
                    .iter()
                    .filter(|p| !p.kept_rows().is_empty())
                    .map(|&p| (Box::from(p.tick.id()), Arc::clone(p))),
            );
            return Vec::new();
        }
        let mut changes = Vec::new();
        let change = |part: &crate::memo::check::TickPart, gi: usize, old: Option<&str>, new| {
            VerdictChange {
                tick_id: part.tick.id().to_string(),
                ground_index: gi,
                decision: part.tick.decision().to_string(),
                claim: part.tick.ground_text(gi).0.to_string(),
                old: old.map(str::to_string),
                new,
            }
        };
        for &part in folded {
            let id = part.tick.id();
            let old = snap.get(id);
            if old.is_some_and(|o| Arc::ptr_eq(o, part)) {
                continue;
            }
            for r in part.kept_rows().iter() {
                let was = old.and_then(|o| label_of(o, r.ground_index));
                if was != Some(&*r.label) {
                    changes.push(change(part, r.ground_index, was, Some(r.label.to_string())));
                }
            }
            if let Some(o) = old {
                for r in o.kept_rows().iter() {
                    if label_of(part, r.ground_index).is_none() {
                        changes.push(change(o, r.ground_index, Some(&r.label), None));
                    }
                }
            }
            if part.kept_rows().is_empty() {
                snap.remove(id);
            } else if old.is_some() {
                if let Some(slot) = snap.get_mut(id) {
                    *slot = Arc::clone(part);
                }
            } else {
                snap.insert(id.into(), Arc::clone(part));
            }
        }
        if !only {
            // Ticks no longer in view leave the snapshot, with every ground they had.
            let in_view: std::collections::HashSet<&str> =
                folded.iter().map(|p| p.tick.id()).collect();
            snap.retain(|id, o| {
                if in_view.contains(&**id) {
                    return true;
                }
                for r in o.kept_rows().iter() {
                    changes.push(change(o, r.ground_index, Some(&r.label), None));
                }
                false
            });
        }
        self.note_changes(changes.clone());
        changes
    }

    /// Verdict changes (and changes of what cited evidence reads, see
    /// [`crate::ledger::evidence::sync`]): journaled, and queued for the subscribers.
    pub fn note_changes(&mut self, changes: Vec<proto::rpc::VerdictChange>) {
        for c in &changes {
            let mut p = serde_json::Map::new();
            p.insert("tick_id".into(), c.tick_id.clone().into());
            p.insert("ground_index".into(), c.ground_index.into());
            p.insert("old".into(), c.old.clone().into());
            p.insert("new".into(), c.new.clone().into());
            self.journal("verdict_changed", p);
        }
        self.unsent.extend(changes);
    }

    /// Whether a full plain evaluation has set the verdict baseline.
    pub fn has_verdict_baseline(&self) -> bool {
        self.verdicts.is_some()
    }

    /// The verdict changes found since the last call, for the subscribers.
    pub fn take_unsent(&mut self) -> Vec<proto::rpc::VerdictChange> {
        std::mem::take(&mut self.unsent)
    }
}
