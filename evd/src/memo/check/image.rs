//! An image of a store's last plain evaluation (no `--offline`, no `--attest`) with the facts it
//! rests on, so that a fresh daemon can answer its first check without evaluating again: the
//! staleness policy and reference, the selected-list, HEAD, the work tree's changes, when the
//! clock alone would change a verdict, and every part in view order.
//!
//! It only writes and reads the image (see [`crate::engine::codec`]) and says whether what it
//! holds matches a basis established afresh; it reads no file. Whether the ticks, receipts,
//! state files and evidence are still those the evaluation read is established by its caller
//! ([`crate::open`]), from the stamps kept beside this.

use std::sync::Arc;

use time::OffsetDateTime;

use super::{Basis, Evaluation, SharedTexts, TickPart};
use crate::engine::codec::{Reader, Writer};
use crate::engine::verdict::Selected;
use crate::store::CurrentView;

/// What an evaluation image says besides its parts.
#[derive(Debug, PartialEq, Eq)]
pub struct Facts {
    pub policy: String,
    pub staleness_days: u64,
    pub reference: Option<String>,
    pub selected: Option<Selected>,
    pub head: Option<String>,
    pub uncommitted: Option<Vec<String>>,
    /// When the clock alone could change a verdict.
    pub valid_until: Option<OffsetDateTime>,
}

fn list(w: &mut Writer, items: &[String]) {
    w.u32(u32::try_from(items.len()).unwrap_or(u32::MAX));
    for i in items {
        w.str(i);
    }
}

fn read_list(r: &mut Reader<'_>) -> Option<Vec<String>> {
    let n = r.count(4)?;
    (0..n).map(|_| r.str().map(str::to_string)).collect()
}

/// Write `e`, a plain evaluation made on `basis`, into an image.
pub fn encode(w: &mut Writer, basis: &Basis, e: &Evaluation) {
    w.str(&basis.policy);
    w.u64(basis.staleness_days);
    w.opt_str(basis.reference.as_deref());
    w.bool(basis.selected.is_some());
    if let Some(s) = &basis.selected {
        list(w, &s.changed);
        list(w, &s.selected);
    }
    w.opt_str(basis.head.as_deref());
    w.bool(basis.uncommitted.is_some());
    if let Some(u) = &basis.uncommitted {
        list(w, &u.paths);
    }
    w.bool(e.valid_until.is_some());
    if let Some(t) = e.valid_until {
        w.i64(t.unix_timestamp());
        w.u32(t.nanosecond());
    }
    w.u32(u32::try_from(e.parts.len()).unwrap_or(u32::MAX));
    // In chunks, so that a daemon taking the image back decodes them on a few threads.
    for chunk in e.parts.chunks(CHUNK) {
        let mut c = Writer::new();
        for p in chunk {
            p.encode(&mut c);
        }
        w.bytes(&c.into_body());
    }
}

/// Parts per chunk of an image.
const CHUNK: usize = 4096;

/// Read an image written by [`encode`] against `view`, the current view: its parts must be
/// exactly the view's live ticks, in order, each the very tick it was made for. `None` when
/// anything does not read or does not match.
pub fn decode(r: &mut Reader<'_>, view: &CurrentView) -> Option<(Facts, Vec<Arc<TickPart>>)> {
    let policy = r.str()?.to_string();
    let staleness_days = r.u64()?;
    let reference = r.opt_str()?.map(str::to_string);
    let selected = if r.bool()? {
        Some(Selected {
            changed: read_list(r)?,
            selected: read_list(r)?,
        })
    } else {
        None
    };
    let head = r.opt_str()?.map(str::to_string);
    let uncommitted = if r.bool()? { Some(read_list(r)?) } else { None };
    let valid_until = if r.bool()? {
        let secs = r.i64()?;
        let nanos = r.u32()?;
        Some(
            OffsetDateTime::from_unix_timestamp(secs)
                .ok()?
                .replace_nanosecond(nanos)
                .ok()?,
        )
    } else {
        None
    };
    let n = r.count(32)?;
    let live: Vec<_> = view.iter().filter(|(_, t)| t.status() == "live").collect();
    if live.len() != n {
        return None;
    }
    let chunks: Vec<(&[_], &[u8])> = live
        .chunks(CHUNK)
        .map(|ticks| Some((ticks, r.bytes()?)))
        .collect::<Option<_>>()?;
    // Each chunk on its own thread, with its own copies of the shared texts (a handful).
    let decoded = crate::sys::par::map(&chunks, 1, |(ticks, bytes)| {
        let mut r = Reader::part(bytes);
        let mut texts = SharedTexts::default();
        let parts = ticks
            .iter()
            .map(|(file, tick)| TickPart::decode(&mut r, file, tick, &mut texts).map(Arc::new))
            .collect::<Option<Vec<_>>>()?;
        r.at_end().then_some(parts)
    });
    let mut parts = Vec::with_capacity(n);
    for chunk in decoded {
        parts.extend(chunk?);
    }

    Some((
        Facts {
            policy,
            staleness_days,
            reference,
            selected,
            head,
            uncommitted,
            valid_until,
        },
        parts,
    ))
}

impl Facts {
    /// Whether an evaluation with these facts answers a plain check on `basis` at `now`: the
    /// same policy, reference, selected-list, HEAD and work-tree changes, and the clock not past
    /// the evaluation's expiry.
    pub fn answer(&self, basis: &Basis, now: OffsetDateTime) -> bool {
        basis.attest.is_none()
            && !basis.offline
            && self.policy == basis.policy
            && self.staleness_days == basis.staleness_days
            && self.reference == basis.reference
            && self.selected == basis.selected
            && self.head == basis.head
            && self.uncommitted.as_ref() == basis.uncommitted.as_ref().map(|u| &u.paths)
            && self.valid_until.is_none_or(|t| now < t)
    }
}
