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
        let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let mut triggers: Vec<(String, Vec<(usize, u8)>)> = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            for (t, worst) in named(p) {
                let slot = *at.entry(t.to_string()).or_insert_with(|| {
                    triggers.push((t.to_string(), Vec::new()));
                    triggers.len() - 1
                });
                triggers[slot].1.push((i, worst));
            }
        }
        TriggerIndex { triggers }
    }

    /// The index of `parts`, made from `prior`'s, the index of an evaluation of the same ticks
    /// in the same order in which only the parts at `fresh` (ascending) were evaluated again: a
    /// verdict moved, the triggers did not. `None` when a fresh part's triggers are not the ones
    /// `prior` has for it (then [`TriggerIndex::of`] makes it whole).
    pub fn carried(prior: &TriggerIndex, parts: &[Arc<TickPart>], fresh: &[usize]) -> Option<Self> {
        let mut index = TriggerIndex {
            triggers: prior.triggers.clone(),
        };
        if fresh.is_empty() {
            return Some(index);
        }
        let slot: std::collections::HashMap<&str, usize> = prior
            .triggers
            .iter()
            .enumerate()
            .map(|(i, (t, _))| (t.as_str(), i))
            .collect();
        for &i in fresh {
            let named = named(parts.get(i)?);
            // Where the prior index has this part, trigger by trigger.
            let before = prior
                .triggers
                .iter()
                .filter(|(_, list)| list.binary_search_by_key(&i, |e| e.0).is_ok())
                .count();
            if before != named.len() {
                return None;
            }
            for (t, worst) in named {
                let list = &mut index.triggers[*slot.get(t)?].1;
                let at = list.binary_search_by_key(&i, |e| e.0).ok()?;
                list[at].1 = worst;
            }
        }
        Some(index)
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

/// The distinct triggers part `p`'s test grounds name, in order of first mention, each with the
/// worst severity among its grounds naming it.
fn named(p: &TickPart) -> Vec<(&str, u8)> {
    let mut out: Vec<(&str, u8)> = Vec::new();
    for (index, _, triggered_by) in p.tick.test_bindings() {
        let severity = p
            .kept_rows()
            .iter()
            .find(|r| r.ground_index == index)
            .map_or(0, |r| proto::rpc::severity(&r.label, r.gating));
        for t in triggered_by.iter() {
            match out.iter_mut().find(|(n, _)| *n == t) {
                Some((_, worst)) => *worst = (*worst).max(severity),
                None => out.push((t, severity)),
            }
        }
    }
    out
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

    /// A part of a tick whose test grounds name `triggers` (one list per ground), its rows
    /// reading `labels` (label, gating) in the same order.
    fn part(id: &str, triggers: &[&[&str]], labels: &[(&str, bool)]) -> Arc<TickPart> {
        let grounds: Vec<serde_json::Value> = triggers
            .iter()
            .enumerate()
            .map(|(i, t)| {
                serde_json::json!({"check": {"by": "test", "ref": format!("t{i}"),
                    "liveness": {"platforms": ["local"], "surfaces": ["s"], "triggered_by": t},
                    "verified_at_sha": "0000000000000000000000000000000000000000"},
                    "claim": format!("c{i}"), "supports": "chosen"})
            })
            .collect();
        let text = serde_json::json!({"blame": "x", "decision": "d", "grounds": grounds,
            "held_since": "2026-01-01T00:00:00Z", "id": id, "observe": "",
            "parent_id": "aaaaaaaaaaaa", "status": "live"})
        .to_string();
        let tick = proto::Tick::parse(&text).expect("a valid tick");
        let rows: Vec<(bool, &str)> = labels.iter().map(|(l, _)| (false, *l)).collect();
        let check = crate::engine::rows::CheckEvent::new("green", None, None);
        let mut p = crate::engine::rows::testing::part_of(&tick, &rows, Some(check));
        if let Some(tests) = p.tests.as_mut() {
            let mut made: Vec<proto::rpc::CheckRow> = p_rows(&tick, labels);
            made.iter_mut()
                .enumerate()
                .for_each(|(i, r)| r.ground_index = i);
            tests.rows = made.into();
        }
        Arc::new(p)
    }

    fn p_rows(tick: &proto::Tick, labels: &[(&str, bool)]) -> Vec<proto::rpc::CheckRow> {
        labels
            .iter()
            .map(|(l, gating)| proto::rpc::CheckRow {
                label: l.to_string(),
                tick_id: tick.id.clone(),
                file: tick.id.clone(),
                decision: tick.decision.clone(),
                claim: String::new(),
                supports: String::new(),
                ground_index: 0,
                detail: String::new(),
                harvested: false,
                class: "attention".into(),
                gating: *gating,
                memo_reason: None,
                event_label: l.to_string(),
            })
            .collect()
    }

    #[test]
    fn an_index_carried_over_a_re_evaluation_is_the_one_made_afresh() {
        let a: &[&[&str]] = &[&["db", "api"], &["db"]];
        let b: &[&[&str]] = &[&["api/x"]];
        let c: &[&[&str]] = &[&["db"], &["docs"]];
        let before = vec![
            part("aaaaaaaaaaa1", a, &[("green", false), ("green", false)]),
            part("aaaaaaaaaaa2", b, &[("stale", true)]),
            part("aaaaaaaaaaa3", c, &[("green", false), ("not-run", true)]),
        ];
        let prior = TriggerIndex::of(&before);
        // The first and the last were evaluated again: a verdict moved each way.
        let after = vec![
            part("aaaaaaaaaaa1", a, &[("dirty", false), ("red", true)]),
            Arc::clone(&before[1]),
            part("aaaaaaaaaaa3", c, &[("green", false), ("green", false)]),
        ];
        let carried = TriggerIndex::carried(&prior, &after, &[0, 2]).expect("carried");
        assert_eq!(carried.triggers, TriggerIndex::of(&after).triggers);
        assert_ne!(carried.triggers, prior.triggers);
        // Nothing evaluated again: the same index.
        let same = TriggerIndex::carried(&prior, &before, &[]).expect("carried");
        assert_eq!(same.triggers, prior.triggers);
        // A fresh part naming other triggers than before: made afresh instead.
        let moved = vec![
            part("aaaaaaaaaaa1", &[&["db"]], &[("green", false)]),
            Arc::clone(&before[1]),
            Arc::clone(&before[2]),
        ];
        assert!(TriggerIndex::carried(&prior, &moved, &[0]).is_none());
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
