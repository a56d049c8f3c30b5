//! What a daemon keeps of a store for the next one, so that the first check after a restart (a
//! crash, an upgrade, an idle release) answers without reading and evaluating everything again:
//! the image of the parsed ticks ([`crate::store::TickCache::image`]) and the image of the last
//! plain evaluation ([`crate::memo::check::image`]) with the stamps of the files it read,
//! written a few seconds after they last changed, off any request's path, and when the store
//! is let go.
//!
//! An image is a cache, never a source of truth. The evaluation image is taken back only when
//! every input is provably the one it was made from: the same evd build; every tick file found
//! with the stamp the tick image recorded (and that very tick image); the same receipt files
//! with the same stamps; every state file as that evaluation left it; the same evidence states; the same
//! HEAD, work-tree changes, staleness reference, selected-list and policy, established afresh;
//! and the clock before its expiry. Anything else, or an image that does not read, and the
//! check evaluates as it always did. Only the daemon keeps images (an in-process run would pay
//! for writing one on every call).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::codec::{Reader, Writer};
use crate::memo::check::{image as check_image, Basis, TickPart};

use super::OpenStore;

/// Where the image of the last plain evaluation is kept (host-local, like the rest of
/// `results/`).
pub const CHECK_IMAGE: &str = "evd-check.image";
const MAGIC: &str = "evd check image 2";
/// An evaluation image larger than this is not read.
const LIMIT: u64 = 1 << 30;
/// How long a change waits before the images are written (a burst of requests is imaged once).
pub(super) const SAVE_AFTER: Duration = Duration::from_secs(3);
/// A receipt file changed this recently may change again within its stamp's resolution: the
/// evaluation is imaged later.
const RACY_NS: i64 = 2_000_000_000;

/// The stamp of a file as an image keeps it: (ctime ns, mtime ns, length, inode).
type FileStamp = (i64, i64, u64, u64);

/// The stamp of a regular file as a directory handle's `stat` saw it.
fn stamp_of(st: &crate::sys::beneath::Stat) -> Option<FileStamp> {
    (st.kind == crate::sys::beneath::Kind::File).then(|| {
        let ns = |t: i128| i64::try_from(t).unwrap_or(i64::MAX);
        (ns(st.ctime_ns), ns(st.mtime_ns), st.len, st.ino)
    })
}

/// The stamps of `names` in the directory `dir`, looked at through one handle on a few
/// threads; `None` for a name that is not a regular file (or is gone).
fn stamps_in(dir: &Path, names: &[String]) -> Vec<Option<FileStamp>> {
    let Ok(handle) = crate::sys::beneath::root_of(dir).dir(dir) else {
        return vec![None; names.len()];
    };
    crate::sys::par::map(names, 2048, |name| {
        handle
            .stat(std::ffi::OsStr::new(name))
            .ok()
            .flatten()
            .and_then(|st| stamp_of(&st))
    })
}

/// Every `results/receipts/*.jsonl` with its stamp, by name; `None` when any of them is not a
/// regular file or changed too recently to trust its stamp (`now_ns`), or `receipts/` is no
/// plain directory.
fn receipt_stamps(results: &Path, now_ns: Option<i64>) -> Option<Vec<(String, FileStamp)>> {
    let dir = results.join("receipts");
    let handle = match crate::sys::beneath::root_of(&dir).dir(&dir) {
        Ok(h) => h,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(Vec::new()),
        Err(_) => return None,
    };
    let mut names: Vec<String> = handle
        .names()
        .ok()?
        .into_iter()
        .filter_map(|n| n.into_string().ok())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    let stamps = stamps_in(&dir, &names);
    names
        .into_iter()
        .zip(stamps)
        .map(|(name, stamp)| {
            let stamp = stamp?;
            let racy = now_ns.is_some_and(|now| now.saturating_sub(stamp.0) < RACY_NS);
            (!racy).then_some((name, stamp))
        })
        .collect()
}

fn write_stamp(w: &mut Writer, (ctime, mtime, len, ino): FileStamp) {
    w.i64(ctime);
    w.i64(mtime);
    w.u64(len);
    w.u64(ino);
}

fn read_stamp(r: &mut Reader<'_>) -> Option<FileStamp> {
    Some((r.i64()?, r.i64()?, r.u64()?, r.u64()?))
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// A digest of what a tick's evidence citations read as.
fn evidence_digest(cited: &[crate::ledger::evidence::Cited]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for c in cited {
        proto::json::compact(&c.to_json()).hash(&mut h);
    }
    h.finish()
}

impl OpenStore {
    /// Keep images of this store for the next daemon of the same `build` (see the module docs).
    pub fn keep_images(&mut self, build: Arc<str>) {
        self.store.image_build = Some(Arc::clone(&build));
        self.images.build = Some(build);
    }

    /// When the images are due: [`SAVE_AFTER`] after the ticks or the last plain evaluation
    /// first moved past what was last imaged.
    pub(super) fn images_due(&mut self) -> Option<Instant> {
        self.images.build.as_ref()?;
        let ticks = self.store.ticks_generation();
        if self.store.tick_image_generation() == Some(ticks) && self.store.tick_image_whole() {
            self.images.imaged.0 = ticks;
            self.images.tick_sum = self.images.tick_sum.or(self.store.tick_image_sum());
        }
        let serial = self.memos.plain().map_or(0, |(_, e)| e.serial);
        let (t, s, since) = &mut self.images.imaged;
        if !self.store.tick_cache_loaded() || (*t == ticks && *s == serial) {
            *since = None;
            return None;
        }
        Some(*since.get_or_insert_with(Instant::now) + SAVE_AFTER)
    }

    /// Write what [`OpenStore::images_due`] announced, if it is due (`now`: whatever waits).
    pub(super) fn save_images(&mut self, now: bool) {
        let Some(due) = self.images_due() else {
            return;
        };
        if !now && Instant::now() < due {
            return;
        }
        let started = Instant::now();
        let ticks = self.store.ticks_generation();
        let serial = self.memos.plain().map_or(0, |(_, e)| e.serial);
        if self.images.imaged.0 != ticks || self.images.tick_sum.is_none() {
            self.images.tick_sum = self.store.save_tick_image();
        }
        let wrote_check = self.save_check_image();
        tracing::debug!(
            store = %self.root().display(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            evaluation = wrote_check,
            "images written"
        );
        // Written or not, not tried again before something moves.
        self.images.imaged = (ticks, serial, None);
    }

    /// Write the image of the last plain evaluation, when it describes the store as it is now
    /// (nothing it read moved since), with the stamps of the receipt and state files.
    fn save_check_image(&mut self) -> bool {
        let (Some(build), Some(tick_sum)) = (self.images.build.clone(), self.images.tick_sum)
        else {
            return false;
        };
        let state = self.state_watch.sync(&mut self.state_written);
        let Some((basis, e)) = self.memos.plain() else {
            return false;
        };
        let current = e.ticks == self.store.ticks_generation()
            && e.receipts == self.receipts.generation()
            && e.state_epoch == self.state_epoch
            && e.state_complete
            && e.state == state
            && e.evidence == self.evidence.generation()
            && e.valid_until
                .is_none_or(|t| crate::engine::clock::now() < t);
        if !current || !self.lock_is_valid() {
            return false;
        }
        let results = self.results_dir();
        let Some(receipts) = receipt_stamps(&results, Some(now_ns())) else {
            return false;
        };
        let (basis, e) = (basis.clone(), Arc::clone(e));
        let mut w = Writer::new();
        w.str(MAGIC);
        w.str(&build);
        w.u64(tick_sum);
        w.u32(u32::try_from(receipts.len()).unwrap_or(u32::MAX));
        for (name, stamp) in &receipts {
            w.str(name);
            write_stamp(&mut w, *stamp);
        }
        let cited: Vec<(&str, u64)> = e
            .parts
            .iter()
            .filter(|p| p.tick.cites_evidence())
            .map(|p| {
                let id = p.tick.id();
                (id, self.evidence.of(id).map_or(0, |c| evidence_digest(&c)))
            })
            .collect();
        w.u32(u32::try_from(cited.len()).unwrap_or(u32::MAX));
        for (id, digest) in cited {
            w.str(id);
            w.u64(digest);
        }
        // Every receipt is in the ledger already (the last capture took them all and its
        // journal is written): the next daemon's first check need not read them to know.
        let in_ledger = self.captured_receipts == Some(self.receipts.generation())
            && self.journal.is_empty()
            && self.checks.is_empty();
        let mark = in_ledger.then(|| self.ledger.tail_mark()).flatten();
        w.bool(mark.is_some());
        if let Some((offset, hash)) = &mark {
            w.u64(*offset);
            w.str(hash);
        }
        check_image::encode(&mut w, &basis, &e);
        // Each part's state file as this evaluation left it.
        let names: Vec<String> = e
            .parts
            .iter()
            .map(|p| format!("{}.json", p.tick.id()))
            .collect();
        for stamp in stamps_in(&results.join("state"), &names) {
            let Some(stamp) = stamp else {
                return false;
            };
            write_stamp(&mut w, stamp);
        }
        crate::sys::fsio::replace_unsynced(&results.join(CHECK_IMAGE), &w.finish()).is_ok()
    }

    /// The parts of the evaluation image, once per opened store, when everything it was made
    /// from is provably unchanged and its facts answer `basis` at `now` (see the module docs);
    /// the state files it relies on are then known written. `None` otherwise.
    pub fn take_check_image(
        &mut self,
        basis: &Basis,
        now: time::OffsetDateTime,
    ) -> Option<Vec<Arc<TickPart>>> {
        if std::mem::replace(&mut self.images.taken, true) {
            return None;
        }
        let build = self.images.build.clone()?;
        let ticks = self.store.ticks_generation();
        if basis.attest.is_some()
            || basis.offline
            || self.store.tick_image_generation() != Some(ticks)
        {
            return None;
        }
        let results = self.results_dir();
        let bytes = crate::sys::fsio::read_limited(&results.join(CHECK_IMAGE), LIMIT).ok()?;
        let mut r = Reader::checked(&bytes)?;
        if r.str()? != MAGIC || r.str()? != &*build || Some(r.u64()?) != self.store.tick_image_sum()
        {
            return None;
        }
        let n = r.count(36)?;
        let mut receipts = Vec::with_capacity(n);
        for _ in 0..n {
            receipts.push((r.str()?.to_string(), read_stamp(&mut r)?));
        }
        if receipt_stamps(&results, None)? != receipts {
            return None;
        }
        let n = r.count(12)?;
        for _ in 0..n {
            let (id, digest) = (r.str()?, r.u64()?);
            if self.evidence.of(id).map_or(0, |c| evidence_digest(&c)) != digest {
                return None;
            }
        }
        let in_ledger = if r.bool()? {
            Some((r.u64()?, r.str()?.to_string()))
        } else {
            None
        };
        let view = self.store.current_shared().ok()?;
        let (facts, parts) = check_image::decode(&mut r, &view)?;
        if !facts.answer(basis, now) {
            return None;
        }
        // Every state file as the evaluation left it (the digests of what they say are the
        // parts' own), looked at now.
        let left: Vec<FileStamp> = (0..parts.len())
            .map(|_| read_stamp(&mut r))
            .collect::<Option<_>>()?;
        if !r.at_end() {
            return None;
        }
        let names: Vec<String> = parts
            .iter()
            .map(|p| format!("{}.json", p.tick.id()))
            .collect();
        let now_stamps = stamps_in(&results.join("state"), &names);
        if left.iter().zip(&now_stamps).any(|(l, n)| Some(*l) != *n) {
            return None;
        }
        for p in &parts {
            self.state_written.insert(p.tick.id(), p.state_digest);
        }
        // The ledger still holds, unchanged, what it held when every receipt was in it: the
        // first check's record need not read them again.
        if in_ledger.is_some_and(|(offset, hash)| self.ledger.holds_mark(offset, &hash)) {
            self.captured_receipts = Some(self.receipts.generation());
        }
        Some(parts)
    }

    /// The evaluation numbered `serial` was taken back from the images: they hold it already.
    pub fn imaged_evaluation(&mut self, serial: u64) {
        self.images.imaged.1 = serial;
        self.images.answered = true;
    }

    /// What was taken back from the images when this store was opened, if anything.
    pub fn warm_start(&self) -> Option<proto::rpc::WarmStart> {
        (self.store.ticks_from_image > 0 || self.images.answered).then_some(proto::rpc::WarmStart {
            ticks: self.store.ticks_from_image,
            evaluation: self.images.answered,
        })
    }
}
