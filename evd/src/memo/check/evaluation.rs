//! One evaluation of a store ([`Evaluation`]): its parts in view order, the tally, when the
//! clock alone could change a verdict, and the generations it read; and its renderings, each
//! made once and shared with a later evaluation holding the very same parts: the row table,
//! the plain lines (copied from an earlier answer file where parts are unchanged), the answer
//! file, the trigger index, the fingerprint and the event lines.
//!
//! It must not evaluate anything (the parts come made, from [`crate::verbs::check`]) nor decide
//! when an evaluation may be reused ([`super::memos`] does, by its basis).

use std::sync::{Arc, OnceLock};

use proto::rpc::{CheckRow, PlainRows, RowTable, Tally};
use time::OffsetDateTime;

use crate::engine::check_events::EventTemplates;
use crate::engine::rows::{fingerprint_of, TickPart};
use crate::engine::triggers::TriggerIndex;

/// One evaluation of a store, ready to answer again.
#[derive(Debug)]
pub struct Evaluation {
    /// The current live ticks, in view order.
    pub parts: Vec<Arc<TickPart>>,
    pub tally: Tally,
    pub gating: bool,
    /// The first [`proto::rpc::GATING_ROWS`] gating rows, in view order (what a gate shows).
    pub gating_rows: Vec<CheckRow>,
    /// The failing tests (`red`, `gray->red` that gate): how many, and the first
    /// [`proto::rpc::GATING_ROWS`] of them. Kept here so that a gate's request does not walk
    /// every part again.
    pub red_total: usize,
    pub red_rows: Vec<CheckRow>,
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
        let (mut gating_rows, mut red_rows, mut red_total) = (Vec::new(), Vec::new(), 0);
        for p in &parts {
            for r in p.kept_rows().iter() {
                if r.gating {
                    if gating_rows.len() < proto::rpc::GATING_ROWS {
                        gating_rows.push(p.row(r));
                    }
                    if matches!(&*r.label, "red" | "gray->red") {
                        red_total += 1;
                        if red_rows.len() < proto::rpc::GATING_ROWS {
                            red_rows.push(p.row(r));
                        }
                    }
                }
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
            gating_rows,
            red_total,
            red_rows,
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

    /// When `prior` (an evaluation of the same ticks in the same order) has its trigger index,
    /// make this one's from it: only the parts at `fresh` were evaluated again. A gate or an
    /// editor asking right after a re-evaluation then does not wait for a whole index.
    pub fn carry_trigger_index_from(&self, prior: &Evaluation, fresh: &[usize]) {
        if prior.parts.len() != self.parts.len() {
            return;
        }
        // Every other part the very same one, at the same place.
        let mut fresh_it = fresh.iter().peekable();
        for (i, (a, b)) in self.parts.iter().zip(&prior.parts).enumerate() {
            if fresh_it.next_if(|&&f| f == i).is_none() && !Arc::ptr_eq(a, b) {
                return;
            }
        }
        let Some(before) = prior.renderings.triggers.get() else {
            return;
        };
        if let Some(index) = TriggerIndex::carried(before, &self.parts, fresh) {
            let _ = self.renderings.triggers.set(index);
        }
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
            let old = crate::sys::fsio::read_text(&f.path).ok()?;
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
        let t = templates.get(self.renderings.id, &self.parts, now.unix_timestamp_nanos());
        t.write(&ts, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rows::testing::{part_of, tick, written_by_the_event_writer};
    use crate::engine::rows::CheckEvent;
    use proto::Tick;

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
}
