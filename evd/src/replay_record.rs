//! What a `check` records in the ledger so that a replay can reproduce its verdicts (see
//! [`crate::ledger::replay`]): before its `check_run`, the receipts the evaluation read that
//! the ledger does not hold yet (`receipts_observed`) and the live ticks and git answers that
//! moved since the last `check_run` (`basis_changed`); in the `check_run`, the rest of its
//! basis. Only what changed is written: the store keeps a compact fold of what the ledger
//! holds ([`replay::Known`]), read from the ledger once per session.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::check_memo::Evaluation;
use crate::ledger::replay::{
    self, chunks, digest_of, ground_key, receipt_value, tick_number, BASIS_CHANGED,
    RECEIPTS_OBSERVED,
};
use crate::store::Store;
use crate::verbs::check::Evaluated;

/// Journal what `e` rests on that the ledger does not hold yet; returns the `check_run`'s
/// `basis`.
pub fn record(store: &mut Store, e: &Evaluated) -> Map<String, Value> {
    store.load_known();
    observe_receipts(store, &e.eval);
    basis_changed(store, &e.eval);
    let b = &e.basis;
    let mut out = Map::new();
    out.insert("now".into(), crate::clock::format(e.now).into());
    out.insert("policy".into(), b.policy.clone().into());
    out.insert("reference".into(), b.reference.clone().into());
    out.insert("staleness_days".into(), b.staleness_days.into());
    out.insert(
        "attest".into(),
        b.attest.clone().map_or(Value::Null, Value::from),
    );
    out.insert("offline".into(), b.offline.into());
    out.insert("head".into(), b.head.clone().into());
    let said = store.known().and_then(|k| k.selected.clone());
    if said.as_ref() != Some(&b.selected) {
        out.insert(
            "selected".into(),
            replay::selected_value(b.selected.as_ref()),
        );
    }
    out
}

/// `receipts_observed` for every receipt file the evaluation read whose receipts are not the
/// ones the ledger holds: the new ones after those it holds, or all of them when the file was
/// rewritten. Only files that changed since the last `check_run` are compared.
fn observe_receipts(store: &mut Store, eval: &Evaluation) {
    let generation = store.receipts.generation();
    let Some(known) = store.known() else {
        return;
    };
    if known.receipts_generation == Some(generation) {
        return;
    }
    let changed: Option<HashSet<String>> = known.receipts_generation.and_then(|g| {
        store
            .receipts
            .changed_since(g)
            .map(|s| s.into_iter().map(str::to_string).collect())
    });
    let mut looked = HashSet::new();
    let mut files: Vec<((String, Value), usize)> = Vec::new();
    for part in &eval.parts {
        for (_, selector, _) in part.tick.test_bindings() {
            let key = proto::id::receipt_key(selector);
            if changed.as_ref().is_some_and(|c| !c.contains(&key)) || !looked.insert(key.clone()) {
                continue;
            }
            let recs = store.receipts.get_keyed(&key, selector);
            let Some(number) = crate::check_memo::receipt_key_number(&key) else {
                continue;
            };
            let (count, digest) = store
                .known()
                .and_then(|k| k.receipts.get(&number).copied())
                .unwrap_or((0, 0));
            let count = count as usize;
            if count == recs.len() && digest == digest_of(recs.iter()) {
                continue;
            }
            // Appended to: only the new ones. Anything else: the whole file again.
            let from = if count < recs.len() && digest == digest_of(recs[..count].iter()) {
                count
            } else {
                0
            };
            let list: Vec<(Value, usize)> = recs[from..]
                .iter()
                .map(|r| {
                    let v = receipt_value(r);
                    let w = proto::json::compact(&v).len() + 1;
                    (v, w)
                })
                .collect();
            let runs = chunks(list);
            if runs.is_empty() {
                // Emptied (or unreadable, which reads as empty).
                files.push(((key, serde_json::json!({"from": 0, "receipts": []})), 32));
                continue;
            }
            // A file too big for one event is taken apart: the first part replaces (or
            // appends), the rest append.
            let mut at = from;
            for (run, weight) in runs {
                let n = run.len();
                files.push((
                    (
                        key.clone(),
                        serde_json::json!({"from": at, "receipts": run}),
                    ),
                    weight,
                ));
                at += n;
            }
        }
    }
    for (run, _) in chunks(files) {
        // One file at most once per event (the parts of a large one follow one another).
        let mut events = vec![Map::new()];
        for (key, f) in run {
            if events.last().is_some_and(|e| e.contains_key(&key)) {
                events.push(Map::new());
            }
            if let Some(e) = events.last_mut() {
                e.insert(key, f);
            }
        }
        for files in events.into_iter().filter(|f| !f.is_empty()) {
            let mut p = Map::new();
            p.insert("files".into(), Value::Object(files));
            store.journal(RECEIPTS_OBSERVED, p);
        }
    }
    if let Some(k) = store.known_mut() {
        k.receipts_generation = Some(generation);
    }
}

/// `basis_changed` when the live ticks or git's answers are not what the ledger holds.
fn basis_changed(store: &mut Store, eval: &Evaluation) {
    let Some(known) = store.known() else {
        return;
    };
    if known.serial == Some(eval.serial) {
        return;
    }
    let mut add = Vec::new();
    let mut live = HashSet::with_capacity(eval.parts.len());
    let mut git: Vec<(String, u8)> = Vec::new();
    let mut current_git = HashSet::new();
    for p in &eval.parts {
        let id = p.tick.id();
        let n = tick_number(id);
        live.insert(n);
        if !known.live.contains(&n) {
            add.push(id.to_string());
        }
        for r in p.kept_rows().iter() {
            let g = u32::try_from(r.ground_index).unwrap_or(u32::MAX);
            let was = known.git.get(&(n, g)).copied().unwrap_or(0);
            if r.git != 0 {
                current_git.insert((n, g));
            }
            if r.git != was {
                git.push((ground_key(id, r.ground_index), r.git));
            }
        }
    }
    // Ticks that left the view: their ids are not at hand as text, so the ledger's own fold
    // knows them only by number; the evaluation that recorded them did by id.
    let drop: Vec<String> = known
        .live
        .iter()
        .filter(|n| !live.contains(n))
        .map(|n| format!("{n:012x}"))
        .collect();
    // Git answers of grounds no longer evaluated (their tick left) go back to none.
    for (n, g) in known.git.keys() {
        if !current_git.contains(&(*n, *g)) && !live.contains(n) {
            git.push((format!("{n:012x}/{g}"), 0));
        }
    }
    let mut items: Vec<((&str, Value), usize)> = Vec::new();
    items.extend(drop.into_iter().map(|id| (("drop", Value::from(id)), 16)));
    items.extend(add.into_iter().map(|id| (("add", Value::from(id)), 16)));
    items.extend(
        git.into_iter()
            .map(|(k, b)| (("git", serde_json::json!([k, b])), 24)),
    );
    for (run, _) in chunks(items) {
        let (mut adds, mut drops, mut bits) = (Vec::new(), Vec::new(), Map::new());
        for (which, v) in run {
            match which {
                "add" => adds.push(v),
                "drop" => drops.push(v),
                _ => {
                    if let (Some(k), Some(b)) = (v[0].as_str(), v[1].as_u64()) {
                        bits.insert(k.to_string(), b.into());
                    }
                }
            }
        }
        let mut p = Map::new();
        let mut l = Map::new();
        if !adds.is_empty() {
            l.insert("add".into(), adds.into());
        }
        if !drops.is_empty() {
            l.insert("drop".into(), drops.into());
        }
        if !l.is_empty() {
            p.insert("live".into(), Value::Object(l));
        }
        if !bits.is_empty() {
            p.insert("git".into(), Value::Object(bits));
        }
        store.journal(BASIS_CHANGED, p);
    }
    if let Some(k) = store.known_mut() {
        k.serial = Some(eval.serial);
    }
}
