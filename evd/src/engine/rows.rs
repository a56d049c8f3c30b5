//! A check's verdicts as they are kept between checks: each current tick's part ([`TickPart`]:
//! its rows without what the tick already says, its `check` event's roll-up, the receipt keys
//! and trigger answers it rests on, when the clock alone would change it), the one copy of each
//! small text they share, receipt keys as the numbers they spell, and the verdicts'
//! fingerprint. These are the check memo's pure parts ([`crate::memo::check`] keeps them).
//!
//! Pure data: it must not read a disk, git or the clock, nor decide a verdict (that is
//! [`crate::engine::verdict`]'s); it only keeps rows and rebuilds them whole.

use std::collections::HashSet;
use std::sync::Arc;

use proto::rpc::CheckRow;
use time::OffsetDateTime;

use crate::engine::codec::{Reader, Writer};

/// What one current tick contributed to an evaluation. Shared between evaluations: a tick
/// nothing touched keeps its part. A part is kept for every current tick, and most ticks have
/// no test ground: what only those have is boxed apart ([`TestPart`]).
#[derive(Debug)]
pub struct TickPart {
    /// Its file name: the tick cache's own handle (no copy).
    pub file: Arc<str>,
    /// The tick as the cache holds it (the very same handle while the file is unchanged).
    pub tick: Arc<crate::engine::packed::PackedTick>,
    /// The digest of the state file it wrote (see `write_state`).
    pub state_digest: u64,
    /// Its test grounds' verdicts; `None` when it has none.
    pub tests: Option<Box<TestPart>>,
}

/// What a part of a tick with test grounds holds besides the tick.
#[derive(Debug)]
pub struct TestPart {
    /// One row per test ground, kept without what the tick and `file` already say
    /// ([`TickPart::rows`] rebuilds them whole).
    pub rows: Rows,
    /// What its `check` event says besides the tick. Its `harvested` events are its harvested
    /// rows': the event lines are written from these and the tick when they are needed, not
    /// kept.
    pub check_event: Option<CheckEvent>,
    /// The receipt keys of its test grounds (12 hex digits, kept as the number they spell):
    /// what can change it, besides the tick itself and the basis.
    pub keys: Box<[u64]>,
    /// When the clock alone would change one of its verdicts.
    pub expires: Option<OffsetDateTime>,
    /// A verdict of it asked git about the work tree directly (pathspec magic): it is evaluated
    /// again every time.
    pub volatile: bool,
    /// Each trigger question its verdicts rest on: `(triggered_by, receipt commit, touched)`.
    /// After HEAD moves, the part is kept only if every answer is still the same.
    pub triggered: Box<[Triggered]>,
}

/// One trigger question a part's verdict rests on: `(triggered_by, receipt commit, touched)`,
/// the list and the commit the store's shared copies ([`SharedTexts`]).
pub type Triggered = (Arc<[String]>, Arc<str>, bool);

/// A receipt key (`proto::id::receipt_key`: 12 hex digits) as the number it spells.
pub fn receipt_key_number(key: &str) -> Option<u64> {
    u64::from_str_radix(key, 16)
        .ok()
        .filter(|_| key.len() == 12)
}

/// The `triggered_by` lists and receipt commits a store's check parts rest on, each held once:
/// a store has few distinct ones (a trigger list per area, a commit per CI run) and thousands
/// of grounds naming them. Copies no part holds any more are let go as the set grows.
#[derive(Debug, Default)]
pub struct SharedTexts {
    lists: HashSet<Arc<[String]>>,
    texts: HashSet<Arc<str>>,
    prune_at: usize,
}

impl SharedTexts {
    const PRUNE_AT: usize = 1024;

    pub fn list(&mut self, items: &[String]) -> Arc<[String]> {
        if let Some(l) = self.lists.get(items) {
            return Arc::clone(l);
        }
        self.prune_if_grown();
        let l: Arc<[String]> = items.into();
        self.lists.insert(Arc::clone(&l));
        l
    }

    pub fn text(&mut self, s: &str) -> Arc<str> {
        if let Some(t) = self.texts.get(s) {
            return Arc::clone(t);
        }
        self.prune_if_grown();
        let t: Arc<str> = s.into();
        self.texts.insert(Arc::clone(&t));
        t
    }

    fn prune_if_grown(&mut self) {
        if self.lists.len() + self.texts.len() < self.prune_at.max(Self::PRUNE_AT) {
            return;
        }
        self.lists.retain(|l| Arc::strong_count(l) > 1);
        self.texts.retain(|t| Arc::strong_count(t) > 1);
        self.prune_at = 2 * (self.lists.len() + self.texts.len());
    }

    /// How many copies it holds.
    pub fn held(&self) -> usize {
        self.lists.len() + self.texts.len()
    }
}

/// The roll-up a part's `check` event reports: the worst label of its test grounds, the stale
/// label it masks, and the worst label a memo replaced. Each text is the shared copy.
#[derive(Debug, Clone)]
pub struct CheckEvent {
    pub verdict: Arc<str>,
    pub masked_stale: Option<Arc<str>>,
    pub suppressed_from: Option<Arc<str>>,
}

impl CheckEvent {
    pub fn new(verdict: &str, masked_stale: Option<&str>, suppressed_from: Option<&str>) -> Self {
        CheckEvent {
            verdict: shared(verdict),
            masked_stale: masked_stale.map(shared),
            suppressed_from: suppressed_from.map(shared),
        }
    }
}

/// A part's check rows as an evaluation keeps them.
#[derive(Debug, Default)]
pub struct Rows(Box<[Row]>);

/// One check row without its tick's id, file, decision, claim and supports (the part's tick
/// has them), its small fixed texts shared between all rows.
#[derive(Debug)]
pub struct Row {
    pub label: Arc<str>,
    pub class: Arc<str>,
    pub event_label: Arc<str>,
    pub detail: Box<str>,
    pub memo_reason: Option<Box<str>>,
    pub ground_index: usize,
    pub harvested: bool,
    pub gating: bool,
    /// What git answered for this ground (the bits of [`crate::ledger::replay`]: a triggering
    /// change after the run, no commit touching the triggers since `verified_at_sha`, an
    /// uncommitted guarded path), for the ledger to record.
    pub git: u8,
}

impl From<Vec<CheckRow>> for Rows {
    fn from(rows: Vec<CheckRow>) -> Rows {
        Rows(
            rows.into_iter()
                .map(|r| {
                    // Every field named: one added to CheckRow must be kept here too.
                    let CheckRow {
                        label,
                        tick_id: _,
                        file: _,
                        decision: _,
                        claim: _,
                        supports: _,
                        ground_index,
                        detail,
                        harvested,
                        class,
                        gating,
                        memo_reason,
                        event_label,
                    } = r;
                    Row {
                        label: shared(&label),
                        class: shared(&class),
                        event_label: shared(&event_label),
                        detail: detail.into(),
                        memo_reason: memo_reason.map(String::into_boxed_str),
                        ground_index,
                        harvested,
                        gating,
                        git: 0,
                    }
                })
                .collect(),
        )
    }
}

impl Rows {
    /// These rows with git's answers for each (in row order).
    pub fn with_git(mut self, bits: &[u8]) -> Rows {
        for (r, b) in self.0.iter_mut().zip(bits) {
            r.git = *b;
        }
        self
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Row> {
        self.0.iter()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The one copy of a label, class or event label (a handful of distinct texts).
fn shared(text: &str) -> Arc<str> {
    static TEXTS: std::sync::Mutex<Option<HashSet<Arc<str>>>> = std::sync::Mutex::new(None);
    let Ok(mut texts) = TEXTS.lock() else {
        return text.into();
    };
    let texts = texts.get_or_insert_with(HashSet::new);
    if let Some(t) = texts.get(text) {
        return Arc::clone(t);
    }
    let t: Arc<str> = text.into();
    // Bounded: these texts come from the verdict engine's fixed vocabulary.
    if texts.len() < 1024 {
        texts.insert(Arc::clone(&t));
    }
    t
}

/// The fingerprint of verdicts given as `(tick id, ground index, label)` in check order (see
/// [`crate::memo::check::Evaluation::fingerprint`]).
pub fn fingerprint_of<'a>(rows: impl Iterator<Item = (&'a str, usize, &'a str)>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (id, ground, label) in rows {
        h.update(format!("{id} {ground} {label}\n").as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl TickPart {
    /// This part's check rows, whole.
    pub fn rows(&self) -> impl Iterator<Item = CheckRow> + '_ {
        self.kept_rows().iter().map(|r| self.row(r))
    }

    /// This part's check rows as kept (none for a tick without test grounds).
    pub fn kept_rows(&self) -> &[Row] {
        self.tests.as_ref().map_or(&[], |t| &t.rows.0)
    }

    /// When the clock alone would change one of its verdicts.
    pub fn expires(&self) -> Option<OffsetDateTime> {
        self.tests.as_ref().and_then(|t| t.expires)
    }

    /// Whether it must be evaluated again every time (see [`TestPart::volatile`]).
    pub fn volatile(&self) -> bool {
        self.tests.as_ref().is_some_and(|t| t.volatile)
    }

    /// The receipt keys of its test grounds.
    pub fn keys(&self) -> &[u64] {
        self.tests.as_ref().map_or(&[], |t| &t.keys)
    }

    /// The trigger questions its verdicts rest on.
    pub fn triggered(&self) -> &[Triggered] {
        self.tests.as_ref().map_or(&[], |t| &t.triggered)
    }

    /// One of this part's rows, whole.
    pub fn row(&self, r: &Row) -> CheckRow {
        let (claim, supports) = self.tick.ground_text(r.ground_index);
        CheckRow {
            label: r.label.to_string(),
            tick_id: self.tick.id().to_string(),
            file: self.file.to_string(),
            decision: self.tick.decision().to_string(),
            claim: claim.to_string(),
            supports: supports.to_string(),
            ground_index: r.ground_index,
            detail: r.detail.to_string(),
            harvested: r.harvested,
            class: r.class.to_string(),
            gating: r.gating,
            memo_reason: r.memo_reason.as_deref().map(str::to_string),
            event_label: r.event_label.to_string(),
        }
    }
}

/// A time as it is kept in an image: seconds and nanoseconds since the epoch.
fn encode_time(w: &mut Writer, t: Option<OffsetDateTime>) {
    w.bool(t.is_some());
    if let Some(t) = t {
        w.i64(t.unix_timestamp());
        w.u32(t.nanosecond());
    }
}

fn decode_time(r: &mut Reader<'_>) -> Option<Option<OffsetDateTime>> {
    if !r.bool()? {
        return Some(None);
    }
    let secs = r.i64()?;
    let nanos = r.u32()?;
    let t = OffsetDateTime::from_unix_timestamp(secs).ok()?;
    Some(Some(t.replace_nanosecond(nanos).ok()?))
}

impl TickPart {
    /// Write this part into an image (see [`crate::engine::codec`]): all but its tick, which the
    /// image's reader finds by file ([`TickPart::decode`]).
    pub fn encode(&self, w: &mut Writer) {
        w.str(&self.file);
        w.str(self.tick.id());
        w.bytes(&self.tick.identity());
        w.u64(self.state_digest);
        let Some(t) = &self.tests else {
            w.bool(false);
            return;
        };
        w.bool(true);
        w.u32(u32::try_from(t.rows.len()).unwrap_or(u32::MAX));
        for r in t.rows.iter() {
            w.str(&r.label);
            w.str(&r.class);
            w.str(&r.event_label);
            w.str(&r.detail);
            w.opt_str(r.memo_reason.as_deref());
            w.u64(r.ground_index as u64);
            w.bool(r.harvested);
            w.bool(r.gating);
            w.u8(r.git);
        }
        w.bool(t.check_event.is_some());
        if let Some(c) = &t.check_event {
            w.str(&c.verdict);
            w.opt_str(c.masked_stale.as_deref());
            w.opt_str(c.suppressed_from.as_deref());
        }
        w.u32(u32::try_from(t.keys.len()).unwrap_or(u32::MAX));
        for k in t.keys.iter() {
            w.u64(*k);
        }
        encode_time(w, t.expires);
        w.bool(t.volatile);
        w.u32(u32::try_from(t.triggered.len()).unwrap_or(u32::MAX));
        for (list, commit, touched) in t.triggered.iter() {
            w.u32(u32::try_from(list.len()).unwrap_or(u32::MAX));
            for p in list.iter() {
                w.str(p);
            }
            w.str(commit);
            w.bool(*touched);
        }
    }

    /// Read a part written by [`TickPart::encode`] for the tick `tick` held in `file`: `None`
    /// when the image does not read, or was made for another file or another tick than this one.
    pub fn decode(
        r: &mut Reader<'_>,
        file: &Arc<str>,
        tick: &Arc<crate::engine::packed::PackedTick>,
        texts: &mut SharedTexts,
    ) -> Option<TickPart> {
        if r.str()? != &**file || r.str()? != tick.id() || r.bytes()? != tick.identity() {
            return None;
        }
        let state_digest = r.u64()?;
        let tests = if r.bool()? {
            let n = r.count(16)?;
            let mut rows = Vec::with_capacity(n);
            for _ in 0..n {
                rows.push(Row {
                    label: texts.text(r.str()?),
                    class: texts.text(r.str()?),
                    event_label: texts.text(r.str()?),
                    detail: r.str()?.into(),
                    memo_reason: r.opt_str()?.map(Box::from),
                    ground_index: usize::try_from(r.u64()?).ok()?,
                    harvested: r.bool()?,
                    gating: r.bool()?,
                    git: r.u8()?,
                });
            }
            let check_event = if r.bool()? {
                Some(CheckEvent {
                    verdict: texts.text(r.str()?),
                    masked_stale: r.opt_str()?.map(|t| texts.text(t)),
                    suppressed_from: r.opt_str()?.map(|t| texts.text(t)),
                })
            } else {
                None
            };
            let n = r.count(8)?;
            let keys = (0..n).map(|_| r.u64()).collect::<Option<_>>()?;
            let expires = decode_time(r)?;
            let volatile = r.bool()?;
            let n = r.count(9)?;
            let mut triggered = Vec::with_capacity(n);
            for _ in 0..n {
                let m = r.count(4)?;
                let list: Vec<String> = (0..m)
                    .map(|_| r.str().map(str::to_string))
                    .collect::<Option<_>>()?;
                let commit = r.str()?;
                triggered.push((texts.list(&list), texts.text(commit), r.bool()?));
            }
            Some(Box::new(TestPart {
                rows: Rows(rows.into()),
                check_event,
                keys,
                expires,
                volatile,
                triggered: triggered.into(),
            }))
        } else {
            None
        };
        Some(TickPart {
            file: Arc::clone(file),
            tick: Arc::clone(tick),
            state_digest,
            tests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_texts_are_one_copy_each_and_unheld_ones_are_let_go() {
        let mut s = SharedTexts::default();
        let a = s.text("abc");
        assert!(Arc::ptr_eq(&a, &s.text("abc")));
        let l = s.list(&["db/".to_string(), "api/".to_string()]);
        assert!(Arc::ptr_eq(
            &l,
            &s.list(&["db/".to_string(), "api/".to_string()])
        ));
        assert!(!Arc::ptr_eq(&l, &s.list(&["db/".to_string()])));
        for i in 0..5_000 {
            s.text(&format!("commit {i}"));
        }
        assert!(
            s.held() < 2 * SharedTexts::PRUNE_AT + 2,
            "bounded: {}",
            s.held()
        );
        assert!(Arc::ptr_eq(&a, &s.text("abc")), "a held copy is kept");
        assert!(Arc::ptr_eq(
            &l,
            &s.list(&["db/".to_string(), "api/".to_string()])
        ));
        assert_eq!(receipt_key_number("00000000000f"), Some(15));
        assert_eq!(
            receipt_key_number(&proto::id::receipt_key("t")).map(|n| format!("{n:012x}")),
            Some(proto::id::receipt_key("t"))
        );
        assert_eq!(receipt_key_number("f"), None);
        assert_eq!(receipt_key_number("not a key at"), None);
    }
}

/// Fixtures for the tests of a check's parts, here and in the memo: a tick, a part of it with
/// rows and a `check` event, and the event lines the event writer says for such a part.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use proto::Tick;
    use serde_json::Value;

    pub(crate) fn tick() -> Tick {
        let text = r#"{"blame":"x","decision":"d","grounds":[],"held_since":"2026-01-01T00:00:00Z","id":"bbbbbbbbbbbb","observe":"","parent_id":"aaaaaaaaaaaa","status":"live"}"#;
        Tick::parse(text).expect("a valid tick")
    }

    /// A part of `t` with one row per `(harvested, event label)` and, when `check` is given,
    /// that `check` event.
    pub(crate) fn part_of(t: &Tick, rows: &[(bool, &str)], check: Option<CheckEvent>) -> TickPart {
        let rows = Rows(
            rows.iter()
                .enumerate()
                .map(|(i, (harvested, label))| Row {
                    label: shared("green"),
                    class: shared("clear"),
                    event_label: shared(label),
                    detail: "".into(),
                    memo_reason: None,
                    ground_index: i,
                    harvested: *harvested,
                    gating: false,
                    git: 0,
                })
                .collect(),
        );
        TickPart {
            file: t.id.as_str().into(),
            tick: Arc::new(crate::engine::packed::PackedTick::pack(t)),
            state_digest: 0,
            tests: check.map(|check| {
                Box::new(TestPart {
                    rows,
                    check_event: Some(check),
                    keys: Box::default(),
                    expires: None,
                    volatile: false,
                    triggered: Box::default(),
                })
            }),
        }
    }

    /// What the event writer (`events::tick_event_fields`) says for `part` of `t` at `now`:
    /// a `harvested` line per harvested row, then its `check` line.
    pub(crate) fn written_by_the_event_writer(
        part: &TickPart,
        t: &Tick,
        now: OffsetDateTime,
    ) -> String {
        let line = |op: &str, extra: &[(&str, &str)]| {
            let mut o = crate::engine::events::tick_event_fields(op, t, now);
            for (k, v) in extra {
                o.insert((*k).into(), (*v).into());
            }
            format!("{}\n", proto::json::compact(&Value::Object(o)))
        };
        let Some(check) = part.tests.as_ref().and_then(|t| t.check_event.as_ref()) else {
            return String::new();
        };
        let mut out = String::new();
        for r in part.kept_rows().iter().filter(|r| r.harvested) {
            out.push_str(&line("harvested", &[("verdict", &r.event_label)]));
        }
        let mut extra = vec![("verdict", &*check.verdict)];
        if let Some(m) = &check.masked_stale {
            extra.push(("masked_stale", m));
        }
        if let Some(s) = &check.suppressed_from {
            extra.push(("suppressed_from", s));
        }
        out.push_str(&line("check", &extra));
        out
    }
}
