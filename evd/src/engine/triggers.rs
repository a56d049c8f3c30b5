//! "Who guards these files": the index from each `triggered_by` entry of an evaluation's test
//! grounds to the parts naming it, with how much they ask for attention there, and the choice
//! of the parts to show (all marked ones, or the most pressing few).
//!
//! Pure: it must not read a disk or ask git; whether a trigger matches a path is its caller's
//! to say (the `hit` it is handed).

use std::sync::Arc;

use crate::engine::rows::TickPart;

/// Which parts of an evaluation name each `triggered_by` entry (on a test ground), and how much
/// the grounds naming it ask for attention there, so that "who guards these files" looks at the
/// few distinct triggers a store has rather than at every tick.
#[derive(Debug, Default)]
pub struct TriggerIndex {
    /// Each distinct trigger, with the parts naming it (ascending) and, for each, the worst
    /// [`proto::rpc::severity`] among that part's grounds naming it.
    pub triggers: Vec<(String, Vec<(usize, u8)>)>,
}

impl TriggerIndex {
    /// The index of `parts` (an evaluation's, in order).
    pub fn of(parts: &[Arc<TickPart>]) -> TriggerIndex {
        let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        let mut triggers: Vec<(String, Vec<(usize, u8)>)> = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            for (index, _, triggered_by) in p.tick.test_bindings() {
                let severity = p
                    .kept_rows()
                    .iter()
                    .find(|r| r.ground_index == index)
                    .map_or(0, |r| proto::rpc::severity(&r.label, r.gating));
                for t in triggered_by.iter() {
                    let slot = *at.entry(t).or_insert_with(|| {
                        triggers.push((t.to_string(), Vec::new()));
                        triggers.len() - 1
                    });
                    let list = &mut triggers[slot].1;
                    match list.last_mut() {
                        Some((part, worst)) if *part == i => *worst = (*worst).max(severity),
                        _ => list.push((i, severity)),
                    }
                }
            }
        }
        TriggerIndex { triggers }
    }

    /// One mark per part (`n` of them): 0 when no trigger for which `hit` holds names it, else
    /// 1 + the worst severity among its grounds naming such a trigger.
    pub fn marks(&self, n: usize, mut hit: impl FnMut(&str) -> bool) -> Vec<u8> {
        let mut marks = vec![0u8; n];
        for (t, parts) in &self.triggers {
            if !hit(t) {
                continue;
            }
            for &(part, severity) in parts {
                if let Some(m) = marks.get_mut(part) {
                    *m = (*m).max(severity.saturating_add(1));
                }
            }
        }
        marks
    }
}

/// The marked parts (see [`TriggerIndex::marks`]): all of them in order, or the `limit` with
/// the highest marks (the lowest index first among equals), highest first.
pub fn chosen(marks: &[u8], limit: Option<usize>) -> Vec<usize> {
    let Some(limit) = limit else {
        return (0..marks.len()).filter(|&i| marks[i] > 0).collect();
    };
    // Counting rather than sorting: marks take few values, and a store may have 100,000 parts.
    let mut count = [0usize; 256];
    for &m in marks {
        count[usize::from(m)] += 1;
    }
    let mut out = Vec::with_capacity(limit);
    for m in (1..=u8::MAX).rev() {
        if out.len() >= limit {
            break;
        }
        if count[usize::from(m)] == 0 {
            continue;
        }
        out.extend(
            (0..marks.len())
                .filter(|&i| marks[i] == m)
                .take(limit - out.len()),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_marks_are_chosen_first_in_order_among_equals() {
        let marks = [0, 3, 1, 3, 0, 11, 1];
        assert_eq!(chosen(&marks, None), vec![1, 2, 3, 5, 6]);
        assert_eq!(chosen(&marks, Some(3)), vec![5, 1, 3]);
        assert_eq!(chosen(&marks, Some(4)), vec![5, 1, 3, 2]);
        assert_eq!(chosen(&marks, Some(99)), vec![5, 1, 3, 2, 6]);
        assert_eq!(chosen(&marks, Some(0)), Vec::<usize>::new());
        assert_eq!(chosen(&[0, 0], Some(2)), Vec::<usize>::new());
    }

    #[test]
    fn marks_keep_the_worst_severity_of_the_triggers_asked_about() {
        let index = TriggerIndex {
            triggers: vec![
                ("db".into(), vec![(0, 0), (2, 16)]),
                ("api".into(), vec![(0, 6), (1, 0)]),
            ],
        };
        assert_eq!(index.marks(3, |t| t == "db"), vec![1, 0, 17]);
        assert_eq!(index.marks(3, |_| true), vec![7, 1, 17]);
        assert_eq!(index.marks(3, |_| false), vec![0, 0, 0]);
    }
}
