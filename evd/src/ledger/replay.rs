//! Replay (seed 003, rule 3): the ledger records what every `check` rested on, and folding it
//! through the verdict engine again must give the fingerprints it recorded.
//!
//! What the engine reads besides the ticks, and where the ledger has it:
//!
//! - **receipts**: `receipt_appended` (evd wrote one), `receipts_observed` (receipts someone
//!   else wrote to `results/receipts/` — CI, a script, upstream ev — found by the check that
//!   first read them: `{"files": {<key>: {"from": n, "receipts": […]}}}`, the receipts after the
//!   first `n` the ledger holds for that file; `from: 0` replaces what it held);
//! - **the current live ticks and what git said**: `basis_changed`, written before a `check_run`
//!   whenever they moved since the last one (`{"live": {"add": […], "drop": […]}, "git":
//!   {"<tick>/<ground>": bits}}`). Ticks are named by their content ids and read from the
//!   store; the git bits are the answers the evaluation got (1: a triggering change landed
//!   after the last run, 2: no commit since `verified_at_sha` touched the triggers, 4: a
//!   guarded path has uncommitted changes), 0 meaning none of those;
//! - **everything else**: the `check_run` event's `basis` (the clock the evaluation read, the
//!   staleness reference and window, `--attest`, `--offline`, HEAD, and the selected-list when
//!   it changed).
//!
//! Replay needs no clock, locale or network: the time is the recorded one, and git's answers
//! are the recorded bits. [`Known`] is the writer's compact copy of the same fold (what the
//! ledger already holds), so that each `check_run` records only what changed.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use proto::rpc::Tally;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::engine::receipts::{self, Receipt};
use crate::engine::verdict::{self, Inputs, Selected};

pub const RECEIPT_APPENDED: &str = "receipt_appended";
pub const RECEIPTS_OBSERVED: &str = "receipts_observed";
pub const BASIS_CHANGED: &str = "basis_changed";
pub const CHECK_RUN: &str = "check_run";

/// Git said a triggering change landed after the latest run.
pub const TRIGGERED: u8 = 1;
/// Git said no commit since `verified_at_sha` touched the triggers (asked of a `stale` on the
/// reference sha alone).
pub const UNTOUCHED: u8 = 2;
/// Git said a guarded path has uncommitted changes (asked of a `green`).
pub const DIRTY: u8 = 4;

/// The most a basis event's lists may weigh before the rest goes into the next one (a ledger
/// line stays well under [`super::file::MAX_LINE`]).
pub const CHUNK: usize = 96 * 1024;

/// A receipt as a ledger payload holds it: the receipt line's object.
pub fn receipt_value(r: &Receipt) -> Value {
    serde_json::from_str(r.line().trim_end()).unwrap_or(Value::Null)
}

fn receipt_of(v: &Value) -> Option<Receipt> {
    receipts::from_object(v.as_object()?).ok()
}

/// A ground's key in `basis_changed`: `<tick id>/<ground index>`.
pub fn ground_key(tick: &str, ground: usize) -> String {
    format!("{tick}/{ground}")
}

/// The digest the writer keeps of the receipts the ledger holds for one file, one receipt after
/// another (the same list, the same digest).
fn digest_after(digest: u64, r: &Receipt) -> u64 {
    let fields = [
        &*r.test,
        &*r.platform,
        &*r.commit,
        &*r.ran_at,
        r.result.as_str(),
    ];
    digest_fields(digest, fields, r.falsifiable)
}

fn digest_fields(digest: u64, fields: [&str; 5], falsifiable: Option<bool>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    digest.hash(&mut h);
    fields.hash(&mut h);
    falsifiable.hash(&mut h);
    h.finish()
}

/// A `receipts_observed` line as [`Known::load`] reads it: typed, its strings borrowed where
/// they can be (a large store's first check wrote every receipt in such lines).
#[derive(serde::Deserialize)]
struct ObservedLine<'a> {
    #[serde(borrow)]
    payload: ObservedPayload<'a>,
}

#[derive(serde::Deserialize)]
struct ObservedPayload<'a> {
    #[serde(borrow)]
    files: HashMap<std::borrow::Cow<'a, str>, ObservedFile<'a>>,
}

#[derive(serde::Deserialize)]
struct ObservedFile<'a> {
    from: u64,
    #[serde(borrow)]
    receipts: Vec<RawReceipt<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReceipt<'a> {
    #[serde(borrow)]
    test: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    platform: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    commit: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    ran_at: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    result: std::borrow::Cow<'a, str>,
    falsifiable: Option<bool>,
}

/// The digest of a whole list (see [`digest_after`]).
pub fn digest_of<'r>(list: impl IntoIterator<Item = &'r Receipt>) -> u64 {
    list.into_iter().fold(0, digest_after)
}

/// A tick id as a number (12 hex digits), for the writer's compact sets.
pub fn tick_number(id: &str) -> u64 {
    match u64::from_str_radix(id, 16) {
        Ok(n) if id.len() == 12 => n,
        _ => {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            id.hash(&mut h);
            h.finish() | (1 << 63)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The writer's side

/// What the ledger already holds of the engine's inputs, compactly: per receipt file the count
/// and digest of its receipts, the live ticks, the non-zero git bits, the selected-list.
#[derive(Debug, Default)]
pub struct Known {
    /// By receipt key (as a number, see [`crate::memo::check::receipt_key_number`]).
    pub receipts: HashMap<u64, (u32, u64)>,
    pub live: HashSet<u64>,
    pub git: HashMap<(u64, u32), u8>,
    /// `None` until a `check_run` recorded one (`Some(None)`: recorded as absent).
    pub selected: Option<Option<Selected>>,
    /// The evaluation (its serial) the last `check_run` recorded.
    pub serial: Option<u64>,
}

impl Known {
    /// Fold a whole ledger's text, then the events still waiting to be written.
    pub fn load<'a>(
        text: &str,
        waiting: impl Iterator<Item = &'a crate::ledger::OwnEvent>,
    ) -> Known {
        let mut k = Known::default();
        for line in text.lines() {
            if line.contains("\"event_type\":\"receipts_observed\"") && k.observed(line) {
                continue;
            }
            // Only the lines that can matter are parsed.
            if !(line.contains("\"event_type\":\"receipt")
                || line.contains("\"event_type\":\"basis_changed\"")
                || line.contains("\"event_type\":\"check_run\""))
            {
                continue;
            }
            let Ok(Value::Object(ev)) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let t = ev.get("event_type").and_then(Value::as_str).unwrap_or("");
            if let Some(Value::Object(p)) = ev.get("payload") {
                k.fold(t, p);
            }
        }
        for (t, p) in waiting {
            k.fold(t, p);
        }
        k
    }

    /// Take in a `receipts_observed` line the quick way; `false` when it does not read as one
    /// (the general way then decides).
    fn observed(&mut self, line: &str) -> bool {
        let Ok(l) = serde_json::from_str::<ObservedLine>(line) else {
            return false;
        };
        for (key, f) in &l.payload.files {
            let Some(key) = crate::memo::check::receipt_key_number(key) else {
                continue;
            };
            let e = self.receipts.entry(key).or_default();
            if f.from == 0 {
                *e = (0, 0);
            }
            for r in &f.receipts {
                if !matches!(&*r.result, "green" | "red" | "gray") {
                    continue;
                }
                let fields = [&*r.test, &*r.platform, &*r.commit, &*r.ran_at, &*r.result];
                *e = (e.0 + 1, digest_fields(e.1, fields, r.falsifiable));
            }
        }
        true
    }

    /// Take in one event of the ledger.
    pub fn fold(&mut self, event_type: &str, p: &Map<String, Value>) {
        match event_type {
            RECEIPT_APPENDED => {
                let key = p.get("key").and_then(Value::as_str);
                let r = p.get("receipt").and_then(receipt_of);
                let key = key.and_then(crate::memo::check::receipt_key_number);
                if let (Some(key), Some(r)) = (key, r) {
                    let e = self.receipts.entry(key).or_default();
                    *e = (e.0 + 1, digest_after(e.1, &r));
                }
            }
            RECEIPTS_OBSERVED => {
                let Some(Value::Object(files)) = p.get("files") else {
                    return;
                };
                for (key, f) in files {
                    let Some(key) = crate::memo::check::receipt_key_number(key) else {
                        continue;
                    };
                    let from = f.get("from").and_then(Value::as_u64).unwrap_or(0);
                    let e = self.receipts.entry(key).or_default();
                    if from == 0 {
                        *e = (0, 0);
                    }
                    for r in f
                        .get("receipts")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(receipt_of)
                    {
                        *e = (e.0 + 1, digest_after(e.1, &r));
                    }
                }
            }
            BASIS_CHANGED => {
                for id in live_ids(p, "drop") {
                    self.live.remove(&tick_number(id));
                }
                self.live.extend(live_ids(p, "add").map(tick_number));
                if let Some(Value::Object(git)) = p.get("git") {
                    for (k, bits) in git {
                        let Some((t, g)) = k.rsplit_once('/') else {
                            continue;
                        };
                        let (Ok(g), Some(bits)) = (g.parse::<u32>(), bits.as_u64()) else {
                            continue;
                        };
                        let key = (tick_number(t), g);
                        match u8::try_from(bits) {
                            Ok(0) | Err(_) => {
                                self.git.remove(&key);
                            }
                            Ok(b) => {
                                self.git.insert(key, b);
                            }
                        }
                    }
                }
            }
            CHECK_RUN => {
                if let Some(s) = p.get("basis").and_then(|b| b.get("selected")) {
                    self.selected = Some(selected_of(s));
                }
            }
            _ => {}
        }
    }
}

/// The tick ids a `basis_changed` payload adds or drops (`which`).
fn live_ids<'p>(p: &'p Map<String, Value>, which: &str) -> impl Iterator<Item = &'p str> {
    p.get("live")
        .and_then(|l| l.get(which))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// Split `items` (each with its weight in bytes) into runs of at most [`CHUNK`] bytes (an item
/// heavier than that alone), each with its weight.
pub fn chunks<T>(items: Vec<(T, usize)>) -> Vec<(Vec<T>, usize)> {
    let mut out: Vec<(Vec<T>, usize)> = Vec::new();
    for (item, w) in items {
        match out.last_mut() {
            Some((run, weight)) if *weight + w <= CHUNK => {
                run.push(item);
                *weight += w;
            }
            _ => out.push((vec![item], w)),
        }
    }
    out
}

/// The selected-list as a basis records it (`null`: none, or invalid).
pub fn selected_value(s: Option<&Selected>) -> Value {
    match s {
        None => Value::Null,
        Some(s) => serde_json::json!({"changed": s.changed, "selected": s.selected}),
    }
}

fn selected_of(v: &Value) -> Option<Selected> {
    let list = |k: &str| -> Vec<String> {
        v.get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    v.is_object().then(|| Selected {
        changed: list("changed"),
        selected: list("selected"),
    })
}

// ---------------------------------------------------------------------------------------------
// The replay

/// What a `check_run` replays to.
struct Replayed {
    fingerprint: String,
    tally: Tally,
}

/// Where a replay parted from the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parted {
    /// 1-based line of the event.
    pub line: u64,
    pub seq: u64,
    pub message: String,
}

/// One current tick's verdicts as the replay last computed them, and what they rest on.
struct Memo {
    /// `(ground, label, whether it gates)` per test ground.
    labels: Vec<(usize, &'static str, bool)>,
    keys: Vec<String>,
    /// The receipt counter when computed, and the global inputs' version.
    at: u64,
    global: u64,
    expires: Option<OffsetDateTime>,
}

/// The global inputs of a `check_run`, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Global {
    reference: Option<String>,
    attest: Option<Vec<String>>,
    staleness_days: u64,
}

/// The fold of a ledger through the verdict engine.
pub struct Replay {
    receipts: HashMap<String, Vec<Receipt>>,
    /// The receipt counter when each file last changed.
    changed_at: HashMap<String, u64>,
    counter: u64,
    /// The live ticks in check order (newest `held_since` first, then by id, descending), with
    /// each one's `held_since` by id.
    order: BTreeSet<(Reverse<String>, Reverse<String>)>,
    held_since: HashMap<String, String>,
    git: HashMap<String, u8>,
    selected: Option<Selected>,
    global: Option<Global>,
    version: u64,
    memos: HashMap<String, Memo>,
    /// How many `check_run` events were reproduced, and ticks read from the store.
    pub replayed: u64,
    pub ticks_read: u64,
}

/// Reads a tick by its content id (from the store), `None` when the store has none.
pub type TickSource<'a> = dyn FnMut(&str) -> Option<Arc<proto::Tick>> + 'a;

impl Default for Replay {
    fn default() -> Replay {
        Replay::new()
    }
}

/// The recorded git answers of one ground.
struct Said(u8);

impl verdict::GitSays for Said {
    fn touched_since_verified(&mut self) -> bool {
        self.0 & UNTOUCHED == 0
    }
    fn uncommitted(&mut self) -> bool {
        self.0 & DIRTY != 0
    }
}

impl Replay {
    pub fn new() -> Replay {
        Replay {
            receipts: HashMap::new(),
            changed_at: HashMap::new(),
            counter: 0,
            order: BTreeSet::new(),
            held_since: HashMap::new(),
            git: HashMap::new(),
            selected: None,
            global: None,
            version: 0,
            memos: HashMap::new(),
            replayed: 0,
            ticks_read: 0,
        }
    }

    fn receipts_changed(&mut self, key: &str) {
        self.counter += 1;
        self.changed_at.insert(key.to_string(), self.counter);
    }

    /// Fold one event (line `line` of the ledger); a `check_run` whose fingerprint this replay
    /// does not reproduce is where it parts.
    pub fn event(
        &mut self,
        line: u64,
        ev: &Map<String, Value>,
        ticks: &mut TickSource<'_>,
    ) -> Result<(), Parted> {
        let seq = ev.get("seq").and_then(Value::as_u64).unwrap_or(0);
        let parted = |message: String| Parted { line, seq, message };
        let t = ev.get("event_type").and_then(Value::as_str).unwrap_or("");
        let Some(Value::Object(p)) = ev.get("payload") else {
            return Ok(());
        };
        match t {
            RECEIPT_APPENDED => {
                let (Some(key), Some(r)) = (
                    p.get("key").and_then(Value::as_str),
                    p.get("receipt").and_then(receipt_of),
                ) else {
                    return Err(parted(
                        "a receipt_appended event without a key and a receipt".into(),
                    ));
                };
                self.receipts.entry(key.to_string()).or_default().push(r);
                self.receipts_changed(key);
            }
            RECEIPTS_OBSERVED => {
                let Some(Value::Object(files)) = p.get("files") else {
                    return Err(parted("a receipts_observed event without files".into()));
                };
                for (key, f) in files {
                    let from = f.get("from").and_then(Value::as_u64).unwrap_or(0);
                    let list = self.receipts.entry(key.clone()).or_default();
                    if from as usize != list.len() && from != 0 {
                        return Err(parted(format!(
                            "receipts_observed says the ledger holds {from} receipt(s) of {key}, but it holds {}",
                            list.len()
                        )));
                    }
                    if from == 0 {
                        list.clear();
                    }
                    for r in f
                        .get("receipts")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        match receipt_of(r) {
                            Some(r) => list.push(r),
                            None => {
                                return Err(parted(format!(
                                    "receipts_observed holds a receipt of {key} that does not parse"
                                )))
                            }
                        }
                    }
                    self.receipts_changed(key);
                }
            }
            BASIS_CHANGED => self.basis_changed(p, ticks).map_err(parted)?,
            CHECK_RUN => {
                let Some(Value::Object(b)) = p.get("basis") else {
                    return Err(parted(
                        "a check_run without its basis cannot be replayed".into(),
                    ));
                };
                let recorded = p.get("fingerprint").and_then(Value::as_str).unwrap_or("");
                let got = self.check_run(b, ticks).map_err(parted)?;
                let fp = &got.fingerprint;
                if fp != recorded {
                    return Err(parted(format!(
                        "the verdicts replay to fingerprint {}, but the check recorded {} (its receipts, ticks or git answers are not what the ledger says they were)",
                        &fp[..12.min(fp.len())],
                        &recorded[..12.min(recorded.len())]
                    )));
                }
                // The counts and the gate the check reported must follow from those verdicts.
                if let Some(t) = p.get("tally") {
                    let said: Option<Tally> = serde_json::from_value(t.clone()).ok();
                    if said.as_ref() != Some(&got.tally) {
                        return Err(parted(format!(
                            "the verdicts replay to a tally of {} gating, {} green, {} other, but the check recorded {t}",
                            got.tally.gating, got.tally.green, got.tally.non_gating
                        )));
                    }
                }
                if let Some(g) = p.get("gating").and_then(Value::as_bool) {
                    if g != (got.tally.gating > 0) {
                        return Err(parted(format!(
                            "the verdicts replay to gating {}, but the check recorded gating {g}",
                            got.tally.gating > 0
                        )));
                    }
                }
                self.replayed += 1;
            }
            _ => {}
        }
        Ok(())
    }

    fn basis_changed(
        &mut self,
        p: &Map<String, Value>,
        ticks: &mut TickSource<'_>,
    ) -> Result<(), String> {
        for id in live_ids(p, "drop") {
            if let Some(h) = self.held_since.remove(id) {
                self.order.remove(&(Reverse(h), Reverse(id.to_string())));
            }
            self.memos.remove(id);
        }
        for id in live_ids(p, "add") {
            if self.held_since.contains_key(id) {
                continue;
            }
            let Some(t) = ticks(id) else {
                return Err(format!("tick {id} is not in the store"));
            };
            self.ticks_read += 1;
            self.order
                .insert((Reverse(t.held_since.clone()), Reverse(id.to_string())));
            self.held_since.insert(id.to_string(), t.held_since.clone());
        }
        if let Some(Value::Object(git)) = p.get("git") {
            for (k, bits) in git {
                let bits = bits
                    .as_u64()
                    .and_then(|b| u8::try_from(b).ok())
                    .unwrap_or(0);
                if bits == 0 {
                    self.git.remove(k);
                } else {
                    self.git.insert(k.clone(), bits);
                }
                if let Some((t, _)) = k.rsplit_once('/') {
                    self.memos.remove(t);
                }
            }
        }
        Ok(())
    }

    /// The verdicts on `b`'s basis: their fingerprint and tally.
    fn check_run(
        &mut self,
        b: &Map<String, Value>,
        ticks: &mut TickSource<'_>,
    ) -> Result<Replayed, String> {
        let now = b
            .get("now")
            .and_then(Value::as_str)
            .and_then(crate::engine::clock::parse)
            .ok_or("the basis has no readable clock (now)")?;
        if let Some(s) = b.get("selected") {
            let s = selected_of(s);
            if s != self.selected {
                self.selected = s;
                self.version += 1;
            }
        }
        let global = Global {
            reference: b
                .get("reference")
                .and_then(Value::as_str)
                .map(str::to_string),
            attest: b.get("attest").and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            }),
            staleness_days: b
                .get("staleness_days")
                .and_then(Value::as_u64)
                .ok_or("the basis has no staleness_days")?,
        };
        if self.global.as_ref() != Some(&global) {
            self.global = Some(global.clone());
            self.version += 1;
        }
        let inputs = Inputs {
            reference_sha: global.reference.as_deref(),
            attest: global.attest.as_deref(),
            selected: self.selected.as_ref(),
            now,
            staleness_days: global.staleness_days,
        };
        // Every tick whose memo no longer answers is evaluated again; then the fingerprint is
        // read off the memos in check order.
        let (version, counter) = (self.version, self.counter);
        for (_, Reverse(id)) in &self.order {
            let fresh = self.memos.get(id).is_none_or(|m| {
                m.global != version
                    || m.expires.is_some_and(|e| now >= e)
                    || m.keys
                        .iter()
                        .any(|k| self.changed_at.get(k).is_some_and(|&c| c > m.at))
            });
            if fresh {
                let t = ticks(id).ok_or_else(|| format!("tick {id} is not in the store"))?;
                self.ticks_read += 1;
                let memo = evaluate(&t, &inputs, &self.receipts, &self.git, counter, version);
                self.memos.insert(id.clone(), memo);
            }
        }
        let memos = &self.memos;
        let rows = || {
            self.order.iter().flat_map(|(_, Reverse(id))| {
                memos
                    .get(id)
                    .into_iter()
                    .flat_map(move |m| m.labels.iter().map(move |r| (id.as_str(), *r)))
            })
        };
        // The tally as `check` counts it: gating rows, then green ones, then the rest.
        let mut tally = Tally::default();
        for (_, (_, label, gates)) in rows() {
            match (gates, label) {
                (true, _) => tally.gating += 1,
                (false, "green") => tally.green += 1,
                _ => tally.non_gating += 1,
            }
        }
        Ok(Replayed {
            fingerprint: crate::memo::check::fingerprint_of(
                rows().map(|(id, (g, l, _))| (id, g, l)),
            ),
            tally,
        })
    }
}

/// One tick's test verdicts on the recorded inputs, exactly as `check` evaluates them.
fn evaluate(
    tick: &proto::Tick,
    inputs: &Inputs,
    receipts: &HashMap<String, Vec<Receipt>>,
    git: &HashMap<String, u8>,
    at: u64,
    global: u64,
) -> Memo {
    use proto::model::Check;
    let empty = Vec::new();
    let mut memo = Memo {
        labels: Vec::new(),
        keys: Vec::new(),
        at,
        global,
        expires: None,
    };
    for (gi, g) in tick.grounds.iter().enumerate() {
        let Some(Check::Test { reference, .. }) = &g.check else {
            continue;
        };
        let key = proto::id::receipt_key(reference);
        let recs = receipts.get(&key).unwrap_or(&empty);
        let bits = git.get(&ground_key(&tick.id, gi)).copied().unwrap_or(0);
        let triggered = verdict::latest(recs.iter()).is_some() && bits & TRIGGERED != 0;
        let v =
            verdict::evaluate_with_git(g.check.as_ref(), recs, triggered, inputs, &mut Said(bits));
        if let Some(at) = v.expires {
            memo.expires = Some(memo.expires.map_or(at, |e| e.min(at)));
        }
        let (label, _) = verdict::lock(tick, v.label);
        memo.labels.push((gi, label.as_str(), label.gates()));
        memo.keys.push(key);
    }
    memo
}

/// A `check_run` on its way to the ledger. What the check rested on is taken when it runs
/// (cheaply: the evaluation, and the receipt lists it read that may have changed since the
/// last check); what of it the ledger does not hold yet is worked out when the journal is
/// written, off the path of the request ([`crate::open::replay_record::expand`]).
#[derive(Debug)]
pub struct PendingCheck {
    pub eval: std::sync::Arc<crate::memo::check::Evaluation>,
    pub receipts: Vec<(String, std::sync::Arc<Vec<Receipt>>)>,
    pub selected: Option<Selected>,
    pub payload: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_keep_each_run_under_the_limit_and_lose_nothing() {
        let items: Vec<(usize, usize)> = (0..1000).map(|i| (i, 300)).collect();
        let c = chunks(items);
        assert!(c.len() > 1);
        assert!(c
            .iter()
            .all(|(run, w)| run.len() * 300 == *w && *w <= CHUNK));
        let back: Vec<usize> = c.into_iter().flat_map(|(run, _)| run).collect();
        assert_eq!(back, (0..1000).collect::<Vec<_>>());
        assert!(chunks::<u8>(Vec::new()).is_empty());
    }

    #[test]
    fn the_writer_s_fold_follows_appends_observations_and_basis_changes() {
        let r = |ran: &str| Receipt {
            test: "t".into(),
            platform: "linux".into(),
            commit: "c".into(),
            ran_at: ran.into(),
            result: receipts::RunResult::Green,
            falsifiable: None,
        };
        let mut k = Known::default();
        let key = proto::id::receipt_key("t");
        let obj = |v: Value| v.as_object().cloned().unwrap_or_default();
        k.fold(
            RECEIPT_APPENDED,
            &obj(serde_json::json!({"key": key, "receipt": receipt_value(&r("1"))})),
        );
        k.fold(
            RECEIPTS_OBSERVED,
            &obj(serde_json::json!({"files": {key.clone(): {"from": 1, "receipts": [receipt_value(&r("2"))]}}})),
        );
        let n = crate::memo::check::receipt_key_number(&key).expect("a key");
        assert_eq!(k.receipts[&n], (2, digest_of(&[r("1"), r("2")])));
        k.fold(
            RECEIPTS_OBSERVED,
            &obj(serde_json::json!({"files": {key.clone(): {"from": 0, "receipts": [receipt_value(&r("3"))]}}})),
        );
        assert_eq!(k.receipts[&n], (1, digest_of(&[r("3")])));
        k.fold(
            BASIS_CHANGED,
            &obj(
                serde_json::json!({"live": {"add": ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]},
                                    "git": {"aaaaaaaaaaaa/0": 5, "bbbbbbbbbbbb/1": 1}}),
            ),
        );
        k.fold(
            BASIS_CHANGED,
            &obj(serde_json::json!({"live": {"drop": ["bbbbbbbbbbbb"]}, "git": {"bbbbbbbbbbbb/1": 0}})),
        );
        assert_eq!(k.live, [tick_number("aaaaaaaaaaaa")].into_iter().collect());
        // Loading a ledger's text reads the same as folding its events (the quick way for
        // receipts_observed lines included).
        let lines: String = [
            serde_json::json!({"event_type": RECEIPT_APPENDED, "payload": {"key": key, "receipt": receipt_value(&r("1"))}}),
            serde_json::json!({"event_type": RECEIPTS_OBSERVED, "payload": {"files": {key.clone(): {"from": 1, "receipts": [receipt_value(&r("2"))]}}}}),
        ]
        .iter()
        .map(|v| format!("{}\n", proto::json::compact(v)))
        .collect();
        let loaded = Known::load(&lines, std::iter::empty());
        assert_eq!(loaded.receipts[&n], (2, digest_of(&[r("1"), r("2")])));
        assert_eq!(k.git.len(), 1);
        assert_eq!(k.git[&(tick_number("aaaaaaaaaaaa"), 0)], 5);
        assert_ne!(tick_number("not hex"), tick_number("also not"));
    }
}
