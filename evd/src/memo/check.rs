//! What makes a repeated `check` cheap: the last evaluations, each with the exact basis it was
//! computed from, reused only while that basis provably holds.
//!
//! A check's verdicts are a function of the current view (the tick cache's generation), the
//! receipts (the receipt cache's generation), the selected-list, the staleness reference and
//! policy, the attest set, HEAD (trigger liveness) and the clock (age-staleness). Every one of
//! those is re-established synchronously at the start of each request — inotify drains, a read
//! of `selected.json`, git facts — so a memo is never behind a change that finished before the
//! request arrived. The clock is handled by an expiry: the earliest instant any receipt could
//! cross the staleness window. Event lines are kept as templates and stamped with the time of
//! each check; state files are only rewritten when their verdicts change, and a state file
//! changed by anyone else is noticed (inotify on `results/state/`) and rewritten.

use std::collections::HashSet;

use std::sync::{Arc, OnceLock};

use proto::rpc::{CheckRow, PlainRows, RowTable, Tally};
use time::OffsetDateTime;

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
/// [`Evaluation::fingerprint`]).
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

/// One evaluation of a store, ready to answer again.
#[derive(Debug)]
pub struct Evaluation {
    /// The current live ticks, in view order.
    pub parts: Vec<Arc<TickPart>>,
    pub tally: Tally,
    pub gating: bool,
    pub harvested: usize,
    pub total: usize,
    /// The first instant at which the clock alone could change a verdict.
    pub valid_until: Option<OffsetDateTime>,
    /// Every current tick's state file was written (a background pass only rewrites existing
    /// ones, so a check cannot reuse its evaluation until the files are all there).
    pub state_complete: bool,
    /// The store's count of its own state-file writes when this evaluation was made: once an
    /// evaluation with other flags rewrote some, this one no longer describes them.
    pub state_epoch: u64,
    /// The generation of `results/state/` (changes by anyone else) this evaluation read.
    pub state: u64,
    /// The receipt cache's generation this evaluation read.
    pub receipts: u64,
    /// The evidence generation this evaluation's state files record.
    pub evidence: u64,
    /// This store's number for this evaluation (see [`crate::store::Store::fold_verdicts_from`]).
    pub serial: u64,
    /// The tick cache's generation of the view it read (its parts are that view's live ticks,
    /// in order).
    pub ticks: u64,
    /// The work tree's changes this evaluation read.
    pub uncommitted: Option<Arc<crate::git::worktree::Uncommitted>>,
    /// The HEAD its trigger answers were read at.
    pub head: Option<String>,
    renderings: Arc<Renderings>,
    /// An earlier evaluation's plain lines this one's are made from, where parts are the same.
    plain_base: std::sync::Mutex<Option<PlainBase>>,
}

/// What an evaluation's answers are made of, each made on first use. They depend on the parts
/// alone, so an evaluation holding the very same parts in the same order shares its prior's.
#[derive(Debug)]
struct Renderings {
    table: OnceLock<Option<RowTable>>,
    plain: OnceLock<Option<PlainRows>>,
    plain_file: std::sync::Mutex<Option<Arc<PlainFile>>>,
    triggers: OnceLock<TriggerIndex>,
    fingerprint: OnceLock<String>,
    /// Which renderings these are (see [`EventTemplates`]).
    id: u64,
}

impl Default for Renderings {
    fn default() -> Renderings {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Renderings {
            table: OnceLock::new(),
            plain: OnceLock::new(),
            plain_file: std::sync::Mutex::new(None),
            triggers: OnceLock::new(),
            fingerprint: OnceLock::new(),
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }
}

/// A store's event template, for the renderings it was made from: one at a time (at 100,000
/// ticks it is megabytes, and only the current evaluation's is of use).
#[derive(Debug, Default)]
pub struct EventTemplates(Option<(u64, Arc<EventTemplate>)>);

/// A check's event lines but for their `ts` value (the same in every line of one check): what
/// comes between one `ts` and the next, as written while no line's `age` bucket moves.
#[derive(Debug)]
pub struct EventTemplate {
    text: String,
    /// Where each `ts` value goes in `text`, ascending.
    holes: Vec<usize>,
    /// The span of time (nanoseconds since the epoch) in which every `age` bucket reads as
    /// written: from when it was made until the first bucket moves.
    from_ns: i128,
    until_ns: i128,
}

/// Event lines are handed to the writer in pieces of about this size.
const EVENT_CHUNK: usize = 64 << 10;

/// An evaluation's plain lines in an answer file, and where each part's lines end in it.
#[derive(Debug)]
struct PlainFile {
    file: crate::sys::answers::AnswerFile,
    ends: Box<[u32]>,
}

/// Plain lines to copy from: for each part, the index of the very same part in `from`, or
/// [`PlainBase::NONE`] for a part rendered afresh.
#[derive(Debug)]
struct PlainBase {
    from: Arc<PlainFile>,
    parts: Box<[u32]>,
}

impl PlainBase {
    const NONE: u32 = u32::MAX;
}

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
    fn of(parts: &[Arc<TickPart>]) -> TriggerIndex {
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

impl Evaluation {
    pub fn new(
        parts: Vec<Arc<TickPart>>,
        state_complete: bool,
        receipts: u64,
        uncommitted: Option<Arc<crate::git::worktree::Uncommitted>>,
        head: Option<String>,
    ) -> Evaluation {
        let mut tally = Tally::default();
        let (mut gating, mut harvested, mut total) = (false, 0, 0);
        let mut valid_until: Option<OffsetDateTime> = None;
        for p in &parts {
            for r in p.kept_rows().iter() {
                // Grouped by gating (0.1.32): a `dirty` row is in the attention style yet never
                // gates.
                if r.gating {
                    tally.gating += 1;
                } else if &*r.label == "green" {
                    tally.green += 1;
                } else {
                    tally.non_gating += 1;
                }
                gating |= r.gating;
                harvested += usize::from(r.harvested);
                total += 1;
            }
            if let Some(at) = p.expires() {
                valid_until = Some(valid_until.map_or(at, |u| u.min(at)));
            }
        }
        Evaluation {
            parts,
            tally,
            gating,
            harvested,
            total,
            valid_until,
            state_complete,
            state_epoch: 0,
            state: 0,
            evidence: 0,
            receipts,
            ticks: 0,
            serial: 0,
            uncommitted,
            head,
            renderings: Arc::default(),
            plain_base: std::sync::Mutex::new(None),
        }
    }

    /// Let this evaluation's plain lines be copied from `prior`'s where they hold the same
    /// parts: the same view, every part at the same place, those at `fresh` evaluated again.
    /// Nothing is read or rendered now; `prior`'s own lines, or what they were to be copied
    /// from, are remembered.
    pub fn copy_plain_lines_from(&mut self, prior: &Evaluation, fresh: &[usize]) {
        if prior.parts.len() != self.parts.len() {
            return;
        }
        let written = prior
            .renderings
            .plain_file
            .lock()
            .ok()
            .and_then(|f| f.clone());
        let mut base = match written {
            Some(from) => PlainBase {
                from,
                parts: (0..self.parts.len())
                    .map(|i| u32::try_from(i).unwrap_or(PlainBase::NONE))
                    .collect(),
            },
            None => match prior.plain_base.lock().ok().and_then(|b| {
                b.as_ref().map(|b| PlainBase {
                    from: Arc::clone(&b.from),
                    parts: b.parts.clone(),
                })
            }) {
                Some(b) => b,
                None => return,
            },
        };
        for &i in fresh {
            if let Some(p) = base.parts.get_mut(i) {
                *p = PlainBase::NONE;
            }
        }
        if let Ok(mut b) = self.plain_base.lock() {
            *b = Some(base);
        }
    }

    /// Whether this evaluation holds the very same parts as `other`, in the same order.
    fn same_parts(&self, other: &Evaluation) -> bool {
        self.parts.len() == other.parts.len()
            && self
                .parts
                .iter()
                .zip(&other.parts)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }

    /// When this evaluation holds the very same parts as `prior`, in the same order (no verdict
    /// moved), take over its renderings (the table, plain lines, answer file and trigger index
    /// made so far: they would come out the same) and say so.
    pub fn share_renderings(&mut self, prior: &Evaluation) -> bool {
        let same = self.same_parts(prior);
        if same {
            self.renderings = Arc::clone(&prior.renderings);
        }
        same
    }

    /// The trigger index of this evaluation, built on first use.
    pub fn trigger_index(&self) -> &TriggerIndex {
        self.renderings
            .triggers
            .get_or_init(|| TriggerIndex::of(&self.parts))
    }

    /// Every row, in order, rebuilt whole.
    pub fn rows(&self) -> impl Iterator<Item = CheckRow> + '_ {
        self.parts.iter().flat_map(|p| p.rows())
    }

    /// Current live ticks (the `check-run` event's `decisions`).
    pub fn decisions(&self) -> usize {
        self.parts.len()
    }

    /// The verdicts' fingerprint: the sha256 (hex) of one line `<tick id> <ground> <label>\n`
    /// per test ground, in check order. Equal verdicts, equal fingerprints: what the ledger's
    /// `check_run` events record, and what a replay must reproduce.
    pub fn fingerprint(&self) -> &str {
        self.renderings.fingerprint.get_or_init(|| {
            fingerprint_of(self.parts.iter().flat_map(|p| {
                let id = p.tick.id();
                p.kept_rows()
                    .iter()
                    .map(move |r| (id, r.ground_index, &*r.label))
            }))
        })
    }

    /// The rows as a compact table, encoded once per evaluation.
    pub fn table(&self) -> Option<RowTable> {
        self.renderings
            .table
            .get_or_init(|| RowTable::encode(&self.rows().collect::<Vec<_>>()).ok())
            .clone()
    }

    /// The plain lines (made when asked: they live on in the answer file, not in memory), and
    /// where each part's lines end. Lines of parts an earlier evaluation rendered are copied
    /// from its answer file when it is still whole.
    fn plain_text(&self) -> (String, Option<Box<[u32]>>) {
        let base = self.plain_base.lock().ok().and_then(|mut b| b.take());
        let copied = base.and_then(|b| {
            let f = &b.from.file;
            let old = String::from_utf8(std::fs::read(&f.path).ok()?).ok()?;
            let whole = old.len() as u64 == f.len
                && b.from.ends.len() == b.parts.len()
                && b.from.ends.last().map_or(0, |&e| e as usize) == old.len();
            whole.then_some((old, b))
        });
        // Where part `j`'s lines start and end in the old text.
        let span = |ends: &[u32], j: usize| {
            let end = *ends.get(j)? as usize;
            let start = if j == 0 {
                0
            } else {
                *ends.get(j - 1)? as usize
            };
            Some((start, end))
        };
        let n = self.parts.len();
        let mut text = String::new();
        let mut ends: Vec<u32> = Vec::with_capacity(n);
        let mut i = 0;
        while i < n {
            // A run of parts whose lines sit together in the old text: one copy.
            let run = copied.as_ref().and_then(|(old, b)| {
                let j = *b.parts.get(i)?;
                if j == PlainBase::NONE {
                    return None;
                }
                let mut k = i + 1;
                while k < n && b.parts.get(k) == Some(&(j + (k - i) as u32)) {
                    k += 1;
                }
                let (j, last) = (j as usize, j as usize + (k - i) - 1);
                let (start, _) = span(&b.from.ends, j)?;
                let (_, end) = span(&b.from.ends, last)?;
                Some((old.get(start..end)?, &b.from.ends[j..=last], start, k))
            });
            match run {
                Some((lines, old_ends, start, k)) => {
                    let at = text.len();
                    text.push_str(lines);
                    ends.extend(old_ends.iter().map(|&e| (at + e as usize - start) as u32));
                    i = k;
                }
                None => {
                    let p = &self.parts[i];
                    for r in p.kept_rows().iter() {
                        let claim = p.tick.ground_text(r.ground_index).0;
                        proto::rpc::push_plain_row(&mut text, &r.label, &p.file, claim, &r.detail);
                        text.push('\n');
                    }
                    ends.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
                    i += 1;
                }
            }
        }
        // Lines too long to place (over 4 GiB) are never copied from.
        let ends = (u32::try_from(text.len()).is_ok()).then(|| ends.into_boxed_slice());
        (text, ends)
    }

    /// The rows as plain lines, encoded once per evaluation.
    pub fn plain(&self) -> Option<PlainRows> {
        self.renderings
            .plain
            .get_or_init(|| PlainRows::serialize_text(&self.plain_text().0).ok())
            .clone()
    }

    /// The plain lines in an answer file, written once per evaluation (again if someone removed
    /// it); `None` when answers are not handed over as files.
    pub fn plain_file(&self) -> Option<proto::rpc::AnswerRef> {
        let mut file = self.renderings.plain_file.lock().ok()?;
        let present = file.as_ref().is_some_and(|f| {
            std::fs::symlink_metadata(&f.file.path)
                .is_ok_and(|m| m.is_file() && m.len() == f.file.len)
        });
        if !present {
            let (text, ends) = self.plain_text();
            *file = crate::sys::answers::AnswerFile::write(text.as_bytes()).map(|f| {
                Arc::new(PlainFile {
                    file: f,
                    // Lines too long to place (over 4 GiB) are never copied from.
                    ends: ends.unwrap_or_default(),
                })
            });
        }
        file.as_ref().map(|f| proto::rpc::AnswerRef {
            path: f.file.path.display().to_string(),
            len: f.file.len,
        })
    }

    /// Every event line for a check at `now`, newline-terminated, handed to `sink` in pieces
    /// that end at a line's end. Made from a template kept while no `age` bucket moves: only
    /// the `ts` values are written anew.
    pub fn write_event_lines(
        &self,
        now: OffsetDateTime,
        templates: &mut EventTemplates,
        sink: &mut dyn FnMut(&str),
    ) {
        let ts = crate::engine::clock::format(now);
        let t = self.event_template(now.unix_timestamp_nanos(), templates);
        let mut out = String::with_capacity(EVENT_CHUNK + 1024);
        let mut at = 0usize;
        for &hole in &t.holes {
            out.push_str(t.text.get(at..hole).unwrap_or_default());
            out.push_str(&ts);
            at = hole;
            // A hole is inside a line: its end is the next newline after it.
            if out.len() >= EVENT_CHUNK {
                if let Some(nl) = t.text.get(at..).and_then(|rest| rest.find('\n')) {
                    out.push_str(t.text.get(at..=at + nl).unwrap_or_default());
                    at += nl + 1;
                    sink(&out);
                    out.clear();
                }
            }
        }
        out.push_str(t.text.get(at..).unwrap_or_default());
        if !out.is_empty() {
            sink(&out);
        }
    }

    /// The event template for a check at `now_ns`: the one in `templates` when it was made
    /// from these renderings and no `age` bucket moved since, else a new one (kept there).
    fn event_template(&self, now_ns: i128, templates: &mut EventTemplates) -> Arc<EventTemplate> {
        if let Some((id, t)) = templates.0.as_ref() {
            if *id == self.renderings.id && t.from_ns <= now_ns && now_ns < t.until_ns {
                return Arc::clone(t);
            }
        }
        // The old one goes before the new one is made.
        templates.0 = None;
        let mut text = String::new();
        let mut holes = Vec::new();
        let mut until_ns = i128::MAX;
        for p in &self.parts {
            p.write_events(&mut text, &mut holes, now_ns, &mut until_ns);
        }
        let t = Arc::new(EventTemplate {
            text,
            holes,
            from_ns: now_ns,
            until_ns,
        });
        templates.0 = Some((self.renderings.id, Arc::clone(&t)));
        t
    }
}

impl TickPart {
    /// Its event lines for a check at `now_ns` (its `harvested` events, then its `check`
    /// event), each with an empty `ts` value whose place is pushed to `holes`. `until_ns` is
    /// lowered to when an `age` written here would read differently.
    fn write_events(
        &self,
        out: &mut String,
        holes: &mut Vec<usize>,
        now_ns: i128,
        until_ns: &mut i128,
    ) {
        let Some(check) = self.tests.as_ref().and_then(|t| t.check_event.as_ref()) else {
            return;
        };
        let held =
            crate::engine::clock::parse(self.tick.held_since()).map(|t| t.unix_timestamp_nanos());
        if let Some(then) = held {
            *until_ns = (*until_ns).min(crate::engine::events::age_bucket_ends(then, now_ns));
        }
        let line =
            TickEventLine::of(
                &self.tick,
                held.map(|then| {
                    // Whole seconds, truncated toward zero, as `Duration::whole_seconds`.
                    let secs = (now_ns - then) / 1_000_000_000;
                    crate::engine::events::age_bucket_of(
                        i64::try_from(secs).unwrap_or(if secs < 0 { i64::MIN } else { i64::MAX }),
                    )
                }),
            );
        for r in self.kept_rows().iter().filter(|r| r.harvested) {
            line.write(out, holes, "harvested", &[("verdict", &r.event_label)]);
        }
        let mut extra = [("verdict", &*check.verdict), ("", ""), ("", "")];
        let mut n = 1;
        for (key, value) in [
            ("masked_stale", &check.masked_stale),
            ("suppressed_from", &check.suppressed_from),
        ] {
            if let Some(v) = value {
                extra[n] = (key, v);
                n += 1;
            }
        }
        line.write(out, holes, "check", extra.get(..n).unwrap_or_default());
    }
}

/// The fields a tick gives each of its event lines (what [`crate::engine::events::tick_event_fields`]
/// takes from a tick), read from the packed tick, to write lines in sorted-key order without
/// building a JSON map.
struct TickEventLine<'t> {
    fields: [(&'static str, &'t str); 6],
    len: usize,
    /// The rare `source_ref` key, made once for all the tick's lines.
    source_ref: Option<String>,
}

impl<'t> TickEventLine<'t> {
    fn of(tick: &'t crate::engine::packed::PackedTick, age: Option<&'static str>) -> Self {
        let mut line = TickEventLine {
            fields: [("", ""); 6],
            len: 0,
            source_ref: tick.source_ref_key(),
        };
        let mut put = |k: &'static str, v: &'t str| {
            line.fields[line.len] = (k, v);
            line.len += 1;
        };
        put("tick_id", tick.id());
        if !tick.parent_id().is_empty() {
            put("parent_id", tick.parent_id());
        }
        if let Some(a) = age {
            put("age", a);
        }
        if let Some(s) = tick.supersedes() {
            put("supersedes", s);
        }
        if let Some(r) = tick.ratifies() {
            put("ratifies", r);
        }
        line
    }

    /// One line: these fields, `op`, `extra` and an empty `ts` (its place pushed to `holes`),
    /// as compact JSON with sorted keys, newline-terminated.
    fn write(&self, out: &mut String, holes: &mut Vec<usize>, op: &str, extra: &[(&str, &str)]) {
        let mut all: [(&str, &str); 12] = [("", ""); 12];
        let mut n = 0;
        let fixed = self.fields.get(..self.len).unwrap_or_default();
        let rare = self.source_ref.as_deref().map(|k| ("source_ref", k));
        for (k, v) in fixed
            .iter()
            .copied()
            .chain(rare)
            .chain([("op", op), ("ts", "")])
            .chain(extra.iter().copied())
        {
            if let Some(slot) = all.get_mut(n) {
                *slot = (k, v);
                n += 1;
            }
        }
        let all = all.get_mut(..n).unwrap_or_default();
        all.sort_unstable_by_key(|(k, _)| *k);
        out.push('{');
        for (i, (k, v)) in all.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_str(out, k);
            out.push(':');
            if *k == "ts" {
                out.push('"');
                holes.push(out.len());
                out.push('"');
            } else {
                push_json_str(out, v);
            }
        }
        out.push_str("}\n");
    }
}

/// `s` as a JSON string, exactly as serde_json writes it.
fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).unwrap_or_default());
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::Tick;
    use serde_json::Value;

    fn tick() -> Tick {
        let text = r#"{"blame":"x","decision":"d","grounds":[],"held_since":"2026-01-01T00:00:00Z","id":"bbbbbbbbbbbb","observe":"","parent_id":"aaaaaaaaaaaa","status":"live"}"#;
        Tick::parse(text).expect("a valid tick")
    }

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

    /// A part of `t` with one row per `(harvested, event label)` and, when `check` is given,
    /// that `check` event.
    fn part_of(t: &Tick, rows: &[(bool, &str)], check: Option<CheckEvent>) -> TickPart {
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
    fn written_by_the_event_writer(part: &TickPart, t: &Tick, now: OffsetDateTime) -> String {
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

    /// `part`'s lines as the template writes them, with `now`'s `ts` put in each hole.
    fn written_by_the_template(part: &TickPart, now: OffsetDateTime) -> String {
        let (mut text, mut holes, mut until) = (String::new(), Vec::new(), i128::MAX);
        part.write_events(
            &mut text,
            &mut holes,
            now.unix_timestamp_nanos(),
            &mut until,
        );
        let ts = crate::engine::clock::format(now);
        let mut out = String::new();
        let mut at = 0;
        for h in holes {
            out.push_str(&text[at..h]);
            out.push_str(&ts);
            at = h;
        }
        out.push_str(&text[at..]);
        out
    }

    #[test]
    fn an_event_template_writes_the_same_lines_as_the_event_writer() {
        let now = crate::engine::clock::parse("2026-03-01T12:00:00.5Z").expect("now");
        let mut t = tick();
        let check = CheckEvent::new("red", Some("stale:age"), Some("red"));
        let part = part_of(
            &t,
            &[(true, "green"), (false, "red"), (true, "stale:sha")],
            Some(check),
        );
        let want = written_by_the_event_writer(&part, &t, now);
        assert_eq!(want.lines().count(), 3, "two harvested lines and a check");
        assert_eq!(written_by_the_template(&part, now), want);

        // Without a parent, with every optional key, a held_since that does not parse, and
        // texts JSON must escape.
        t.parent_id = String::new();
        t.held_since = "whenever".into();
        t.supersedes = Some("cccccccccccc".into());
        t.ratifies = Some("dddddddddddd".into());
        t.source_ref = Some(proto::model::SourceRef::Text("R\"42\u{1}".into()));
        let part = part_of(
            &t,
            &[(true, "gr\"een")],
            Some(CheckEvent::new("green", None, None)),
        );
        let want = written_by_the_event_writer(&part, &t, now);
        assert!(want.contains("source_ref") && !want.contains("\"age\""));
        assert_eq!(written_by_the_template(&part, now), want);

        // A part without test grounds writes nothing.
        let part = part_of(&t, &[], None);
        assert_eq!(written_by_the_template(&part, now), "");
    }

    #[test]
    fn templated_event_lines_are_the_writer_s_at_every_moment_and_in_whole_lines() {
        // Ticks held since moments around every age boundary of the checks below, many enough
        // for several pieces.
        let base = crate::engine::clock::parse("2026-03-01T12:00:00Z").expect("base");
        let ticks: Vec<Tick> = (0..4000)
            .map(|i| {
                let mut t = tick();
                t.held_since =
                    crate::engine::clock::format(base - time::Duration::seconds(i * 97 + 250));
                if i % 7 == 0 {
                    t.held_since = "whenever".into();
                }
                t
            })
            .collect();
        let parts: Vec<Arc<TickPart>> = ticks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let check = (i % 5 != 0).then(|| CheckEvent::new("red", None, None));
                Arc::new(part_of(t, &[(true, "green"), (false, "red")], check))
            })
            .collect();
        let e = Evaluation::new(parts, true, 1, None, None);
        let mut templates = EventTemplates::default();
        for secs in [0, 1, 49, 50, 51, 3_000, 90_000, 86_400 * 40, 3] {
            let now = base + time::Duration::seconds(secs) + time::Duration::milliseconds(secs);
            let want: String = e
                .parts
                .iter()
                .zip(&ticks)
                .map(|(p, t)| written_by_the_event_writer(p, t, now))
                .collect();
            let mut pieces = Vec::new();
            e.write_event_lines(now, &mut templates, &mut |p| pieces.push(p.to_string()));
            assert!(pieces.len() > 1, "in pieces");
            assert!(pieces.iter().all(|p| p.ends_with('\n')), "each ends a line");
            assert_eq!(pieces.concat(), want, "at +{secs} s");
        }
    }

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
