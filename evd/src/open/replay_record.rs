//! What a `check` records in the ledger so that a replay can reproduce its verdicts (see
//! [`crate::ledger::replay`]): before its `check_run`, the receipts the evaluation read that
//! the ledger does not hold yet (`receipts_observed`) and the live ticks and git answers that
//! moved since the last `check_run` (`basis_changed`); in the `check_run`, the rest of its
//! basis. Only what changed is written: the store keeps a compact fold of what the ledger
//! holds ([`replay::Known`]), read from the ledger once per session.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::engine::receipts::Receipt;
use crate::ledger::replay::PendingCheck;
use crate::ledger::replay::{
    self, digest_of, ground_key, receipt_value, tick_number, BASIS_CHANGED, CHECK_RUN, CHUNK,
    RECEIPTS_OBSERVED,
};
use crate::memo::check::Evaluated;
use crate::memo::check::Evaluation;
use crate::open::OpenStore;

/// Past this many bytes, the events of one journal write go to the ledger in a batch of their
/// own (a large store's first check records every receipt and every current tick: they never
/// sit in memory whole).
const DIRECT: usize = 1 << 20;

/// Take what check `e` rested on, with its `check_run` payload (`basis` is added here).
pub fn capture(
    store: &mut OpenStore,
    e: &Evaluated,
    mut payload: Map<String, Value>,
) -> PendingCheck {
    // The receipt files that may differ from what the last capture took: those that changed
    // since (all of them at a session's first check, or after a rescan).
    let generation = store.receipts.generation();
    let changed: Option<Option<HashSet<String>>> = match store.captured_receipts {
        Some(g) if g == generation => None,
        Some(g) => Some(
            store
                .receipts
                .changed_since(g)
                .map(|s| s.into_iter().map(str::to_string).collect()),
        ),
        None => Some(None),
    };
    let mut receipts = Vec::new();
    if let Some(changed) = changed {
        let mut looked = HashSet::new();
        for part in &e.eval.parts {
            for (_, selector, _) in part.tick.test_bindings() {
                let key = proto::id::receipt_key(selector);
                if changed.as_ref().is_some_and(|c| !c.contains(&key))
                    || !looked.insert(key.clone())
                {
                    continue;
                }
                let recs = store.receipts.get_keyed(&key, selector);
                receipts.push((key, recs));
            }
        }
        store.captured_receipts = Some(generation);
    }
    let b = &e.basis;
    let mut basis = Map::new();
    basis.insert("now".into(), crate::engine::clock::format(e.now).into());
    basis.insert("policy".into(), b.policy.clone().into());
    basis.insert("reference".into(), b.reference.clone().into());
    basis.insert("staleness_days".into(), b.staleness_days.into());
    basis.insert(
        "attest".into(),
        b.attest.clone().map_or(Value::Null, Value::from),
    );
    basis.insert("offline".into(), b.offline.into());
    basis.insert("head".into(), b.head.clone().into());
    payload.insert("basis".into(), Value::Object(basis));
    PendingCheck {
        eval: Arc::clone(&e.eval),
        receipts,
        selected: b.selected.clone(),
        payload,
    }
}

/// Write `c` into `out`: the `receipts_observed` and `basis_changed` events for what the ledger
/// does not hold yet, then the `check_run` (with the selected-list when it changed).
pub fn expand(out: &mut Batch<'_>, c: PendingCheck) {
    out.load_known();
    observe_receipts(out, &c.receipts);
    basis_changed(out, &c.eval);
    let mut payload = c.payload;
    let said = out.store.known().and_then(|k| k.selected.clone());
    if said.as_ref() != Some(&c.selected) {
        if let Some(Value::Object(b)) = payload.get_mut("basis") {
            b.insert(
                "selected".into(),
                replay::selected_value(c.selected.as_ref()),
            );
        }
    }
    out.push(CHECK_RUN, payload, 1024);
}

/// The events of one journal write as they are made, folded into what the store knows the
/// ledger holds, and written in batches of [`DIRECT`] bytes.
pub struct Batch<'s> {
    pub store: &'s mut OpenStore,
    events: Vec<crate::ledger::OwnEvent>,
    weight: usize,
    failed: bool,
}

impl<'s> Batch<'s> {
    pub fn new(store: &'s mut OpenStore) -> Batch<'s> {
        Batch {
            store,
            events: Vec::new(),
            weight: 0,
            failed: false,
        }
    }

    /// Read what the ledger holds, the events of this batch not written yet included, unless
    /// known already.
    fn load_known(&mut self) {
        self.store.load_known(&self.events);
    }

    pub fn push(&mut self, event_type: &'static str, payload: Map<String, Value>, weight: usize) {
        if let Some(k) = self.store.known_mut() {
            k.fold(event_type, &payload);
        }
        self.events.push((event_type, payload));
        self.weight += weight;
        if self.weight > DIRECT && !self.failed {
            // Written as a batch of its own; on failure, kept to be written with the rest.
            if self.store.append_own(&self.events).is_ok() {
                self.events.clear();
            } else {
                self.failed = true;
            }
            self.weight = 0;
        }
    }

    /// Write what is left: `Err` with the events not written (every one of them folded).
    pub fn finish(self) -> Result<(), Vec<crate::ledger::OwnEvent>> {
        if self.events.is_empty() {
            return Ok(());
        }
        if !self.failed && self.store.append_own(&self.events).is_ok() {
            return Ok(());
        }
        Err(self.events)
    }
}

/// A basis event's payload as it fills up, flushed to the outbox at [`CHUNK`] bytes.
struct Filling {
    event_type: &'static str,
    payload: Map<String, Value>,
    weight: usize,
}

impl Filling {
    fn new(event_type: &'static str) -> Filling {
        Filling {
            event_type,
            payload: Map::new(),
            weight: 0,
        }
    }

    /// Make room for `weight` more bytes (and, with `fresh`, for something this payload must
    /// not already hold).
    fn room(&mut self, out: &mut Batch<'_>, weight: usize, fresh: bool) {
        if !self.payload.is_empty() && (self.weight + weight > CHUNK || fresh) {
            self.flush(out);
        }
        self.weight += weight;
    }

    fn flush(&mut self, out: &mut Batch<'_>) {
        if !self.payload.is_empty() {
            let p = std::mem::take(&mut self.payload);
            out.push(self.event_type, p, self.weight);
        }
        self.weight = 0;
    }
}

/// `receipts_observed` for every receipt file the check read (of those captured) whose
/// receipts are not the ones the ledger holds: the new ones after those it holds, or all of
/// them when the file was rewritten (a file too big for one event is taken apart: its first
/// part replaces or appends, the rest append).
fn observe_receipts(out: &mut Batch<'_>, captured: &[(String, Arc<Vec<Receipt>>)]) {
    let mut event = Filling::new(RECEIPTS_OBSERVED);
    for (key, recs) in captured {
        let key = key.as_str();
        let Some(number) = crate::memo::check::receipt_key_number(key) else {
            continue;
        };
        let (count, digest) = out
            .store
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
        let mut at = from;
        let mut part: Vec<Value> = Vec::new();
        let mut weight = 0;
        let put = |event: &mut Filling, out: &mut Batch<'_>, list: Vec<Value>, at, w| {
            let again = event
                .payload
                .get("files")
                .is_some_and(|f| f.get(key).is_some());
            event.room(out, w + 32, again);
            let files = event
                .payload
                .entry("files")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(f) = files {
                let at: usize = at;
                f.insert(
                    key.to_string(),
                    serde_json::json!({"from": at, "receipts": list}),
                );
            }
        };
        for r in &recs[from..] {
            let v = receipt_value(r);
            let w = proto::json::compact(&v).len() + 1;
            if weight + w > CHUNK && !part.is_empty() {
                let n = part.len();
                put(&mut event, out, std::mem::take(&mut part), at, weight);
                at += n;
                weight = 0;
            }
            part.push(v);
            weight += w;
        }
        // The last part (or, for a file now empty or unreadable, none: it replaces).
        if !part.is_empty() || recs.len() == from {
            put(&mut event, out, part, at, weight);
        }
    }
    event.flush(out);
}

/// `basis_changed` when the live ticks or git's answers are not what the ledger holds.
fn basis_changed(out: &mut Batch<'_>, eval: &Evaluation) {
    let Some(known) = out.store.known() else {
        return;
    };
    if known.serial == Some(eval.serial) {
        return;
    }
    let mut add = Vec::new();
    let mut live = HashSet::with_capacity(eval.parts.len());
    let mut git: Vec<(String, u8)> = Vec::new();
    for p in &eval.parts {
        let id = p.tick.id();
        let n = tick_number(id);
        live.insert(n);
        if !known.live.contains(&n) {
            add.push(id.to_string());
        }
        for r in p.kept_rows().iter() {
            let g = u32::try_from(r.ground_index).unwrap_or(u32::MAX);
            if r.git != known.git.get(&(n, g)).copied().unwrap_or(0) {
                git.push((ground_key(id, r.ground_index), r.git));
            }
        }
    }
    // Ticks that left the view (the fold knows them by number: 12 hex digits spell it).
    let drop: Vec<String> = known
        .live
        .iter()
        .filter(|n| !live.contains(n))
        .map(|n| format!("{n:012x}"))
        .collect();
    // Their grounds' git answers go back to none.
    git.extend(
        known
            .git
            .keys()
            .filter(|(n, _)| !live.contains(n))
            .map(|(n, g)| (format!("{n:012x}/{g}"), 0)),
    );
    let mut event = Filling::new(BASIS_CHANGED);
    let list = |event: &mut Filling, which: &str| -> Option<Vec<Value>> {
        match event.payload.get_mut("live").and_then(|l| l.get_mut(which)) {
            Some(Value::Array(a)) => Some(std::mem::take(a)),
            _ => None,
        }
    };
    for (which, ids) in [("drop", drop), ("add", add)] {
        for id in ids {
            event.room(out, id.len() + 3, false);
            let mut l = list(&mut event, which).unwrap_or_default();
            l.push(id.into());
            let live = event
                .payload
                .entry("live")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(o) = live {
                o.insert(which.into(), l.into());
            }
        }
    }
    for (k, bits) in git {
        event.room(out, k.len() + 6, false);
        let g = event
            .payload
            .entry("git")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(o) = g {
            o.insert(k, bits.into());
        }
    }
    event.flush(out);
    if let Some(k) = out.store.known_mut() {
        k.serial = Some(eval.serial);
    }
}
