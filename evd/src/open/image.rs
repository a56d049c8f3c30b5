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
//! with the same stamps; the same evidence states; the same HEAD, work-tree changes, staleness
//! reference, selected-list and policy, established afresh; and the clock before its expiry.
//! Anything else, or an image that does not read, and the check evaluates as it always did.
//! The state files that evaluation wrote are its output, not its input: they are compared with
//! their recorded stamps once the first answer has gone ([`OpenStore::look_at_state_files`]), and
//! any difference has the store evaluate afresh, which puts them back. Only the daemon keeps
//! images (an in-process run would pay for writing one on every call).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::codec::{Reader, Writer};
use crate::memo::check::{image as check_image, Basis, TickPart};

use super::{CheckAhead, FileStamp, OpenStore, ReceiptStamps, Written};

/// Where the image of the last plain evaluation is kept (host-local, like the rest of
/// `results/`).
pub const CHECK_IMAGE: &str = "evd-check.image";
/// Where it is written first, until the store's thread has checked it (see
/// [`OpenStore::commit_images`]).
const CHECK_IMAGE_PENDING: &str = "evd-check.image.new";
const MAGIC: &str = "evd check image 3";
/// An evaluation image larger than this is not read.
const LIMIT: u64 = 1 << 30;
/// How long a change waits before the images are written (a burst of requests is imaged once).
pub(super) const SAVE_AFTER: Duration = Duration::from_secs(3);
/// How often a writing under way is looked at.
const POLL_WRITING: Duration = Duration::from_millis(50);

/// The stamps of the state files an imaged evaluation left, in part order (see
/// [`OpenStore::look_at_state_files`]).
#[derive(Debug)]
pub struct StateStamps(Vec<FileStamp>);

/// The guarded paths an evaluation image holds: `Some(None)` when it holds none, `None` when
/// it does not read.
fn read_guarded(r: &mut Reader<'_>) -> Option<Option<Vec<String>>> {
    if !r.bool()? {
        return Some(None);
    }
    let n = r.count(4)?;
    let paths = (0..n)
        .map(|_| r.str().map(str::to_string))
        .collect::<Option<Vec<_>>>()?;
    Some(Some(paths))
}

/// The guarded paths held by the evaluation image in `results`, when it reads whole and was made
/// by `build`: what the first evaluation will most likely guard, a guess to look at the work
/// tree ahead with (see [`crate::git::worktree::Worktree::look_ahead`]), never trusted as such.
fn guarded_in_image(results: &Path, build: &str) -> Option<Vec<String>> {
    let bytes = crate::sys::fsio::read_limited(&results.join(CHECK_IMAGE), LIMIT).ok()?;
    let mut r = Reader::checked(&bytes)?;
    if r.str()? != MAGIC || r.str()? != build {
        return None;
    }
    r.u64()?;
    read_guarded(&mut r)?
}

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
    handle
        .stat_each(names)
        .into_iter()
        .map(|st| st.and_then(|st| stamp_of(&st)))
        .collect()
}

/// Every `results/receipts/*.jsonl` with its stamp, by name; `None` when any of them is not a
/// regular file or changed too recently to trust its stamp (`now_ns`), or `receipts/` is no
/// plain directory.
fn receipt_stamps(results: &Path, now_ns: Option<i64>) -> Option<ReceiptStamps> {
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
    // A receipt file changed more recently than its filesystem's timestamps can tell apart may
    // change again unseen: the evaluation is imaged later.
    let window = crate::sys::fsio::racy_window_ns(&dir);
    let stamps = stamps_in(&dir, &names);
    names
        .into_iter()
        .zip(stamps)
        .map(|(name, stamp)| {
            let stamp = stamp?;
            let racy = now_ns.is_some_and(|now| now.saturating_sub(stamp.0) < window);
            (!racy).then_some((name, stamp))
        })
        .collect()
}

/// The stamp of each part's state file, in part order.
fn state_stamps(results: &Path, parts: &[Arc<TickPart>]) -> Vec<Option<FileStamp>> {
    let names: Vec<String> = parts
        .iter()
        .map(|p| format!("{}.json", p.tick.id()))
        .collect();
    stamps_in(&results.join("state"), &names)
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

/// The evaluation image's content, taken on the store's thread but for the stamps of the
/// receipt and state files, which the writing thread takes (and the store's thread then checks
/// nobody wrote those files meanwhile, see [`OpenStore::commit_images`]).
struct CheckImage {
    basis: Basis,
    eval: Arc<crate::memo::check::Evaluation>,
    cited: Vec<(String, u64)>,
    mark: Option<(u64, String)>,
    /// The receipt and state-file generations the evaluation read.
    generations: (u64, u64),
    /// The paths the view's test grounds guard (see [`OpenStore::guarded_paths`]), when known
    /// for the view the evaluation read.
    guarded: Option<Arc<Vec<String>>>,
}

/// One writing of a store's images, everything in it taken already: it reads nothing of the
/// store, so it can run on a thread of its own.
pub(super) struct ImagesJob {
    build: Arc<str>,
    results: std::path::PathBuf,
    /// `results/tmp`, where the images are made before they are renamed into place.
    tmp: std::path::PathBuf,
    /// The parsed ticks, when their image is to be written again.
    tick_image: Option<crate::store::TickImage>,
    /// The checksum of the tick image on disk, when it is not.
    tick_sum: Option<u64>,
    check: Option<CheckImage>,
}

impl ImagesJob {
    /// Write the images: the tick image in its place, the evaluation image beside its place
    /// (see [`Written`]).
    fn run(self) -> Written {
        let started = Instant::now();
        let mut tick_sum = self.tick_sum;
        if let Some(t) = &self.tick_image {
            let image = t.encode(Some(&self.build));
            let path = self.results.join(crate::store::TICK_IMAGE);
            tick_sum = crate::sys::fsio::replace_via_unsynced(&self.tmp, &path, &image)
                .ok()
                .and_then(|()| crate::engine::codec::image_sum(&image));
        }
        let wrote_check = match (&self.check, tick_sum) {
            (Some(c), Some(sum)) => c.encode(&self.build, sum, &self.results).and_then(|image| {
                let pending = self.results.join(CHECK_IMAGE_PENDING);
                crate::sys::fsio::replace_via_unsynced(&self.tmp, &pending, &image)
                    .ok()
                    .map(|()| c.generations)
            }),
            _ => None,
        };
        tracing::debug!(
            results = %self.results.display(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            ticks = self.tick_image.is_some(),
            evaluation = wrote_check.is_some(),
            "images written"
        );
        (tick_sum, wrote_check)
    }
}

impl CheckImage {
    /// The image, with the receipt and state files' stamps taken now; `None` when one of them
    /// cannot be trusted (see [`receipt_stamps`]).
    fn encode(&self, build: &str, tick_sum: u64, results: &Path) -> Option<Vec<u8>> {
        let receipts = receipt_stamps(results, Some(now_ns()))?;
        // Each part's state file as this evaluation left it.
        let states = state_stamps(results, &self.eval.parts)
            .into_iter()
            .collect::<Option<Vec<_>>>()?;
        let mut w = Writer::new();
        w.str(MAGIC);
        w.str(build);
        w.u64(tick_sum);
        // What the view guards, first: a restart asks git about them before anything else.
        w.bool(self.guarded.is_some());
        if let Some(paths) = &self.guarded {
            w.u32(u32::try_from(paths.len()).unwrap_or(u32::MAX));
            for p in paths.iter() {
                w.str(p);
            }
        }
        w.u32(u32::try_from(receipts.len()).unwrap_or(u32::MAX));
        for (name, stamp) in &receipts {
            w.str(name);
            write_stamp(&mut w, *stamp);
        }
        w.u32(u32::try_from(self.cited.len()).unwrap_or(u32::MAX));
        for (id, digest) in &self.cited {
            w.str(id);
            w.u64(*digest);
        }
        w.bool(self.mark.is_some());
        if let Some((offset, hash)) = &self.mark {
            w.u64(*offset);
            w.str(hash);
        }
        check_image::encode(&mut w, &self.basis, &self.eval);
        for stamp in states {
            write_stamp(&mut w, stamp);
        }
        Some(w.finish())
    }
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
        if let Some(writing) = &self.images.writing {
            // Taken in as soon as it is done: due now once it is (the store's thread then takes
            // it in and, nothing else being due, sleeps until the next request), else looked
            // at again shortly. Always "shortly" would keep an idle daemon waking for ever.
            let now = Instant::now();
            return Some(if writing.is_finished() {
                now
            } else {
                now + POLL_WRITING
            });
        }
        let ticks = self.store.ticks_generation();
        if self.store.tick_image_generation() == Some(ticks) && self.store.tick_image_whole() {
            self.images.imaged.0 = ticks;
            self.images.tick_sum = self.images.tick_sum.or(self.store.tick_image_sum());
        }
        let serial = self.memos.plain().map_or(0, |(_, e)| e.serial);
        let markable = self.markable(serial);
        let (t, s, since) = &mut self.images.imaged;
        if !self.store.tick_cache_loaded() || (*t == ticks && *s == serial && !markable) {
            *since = None;
            return None;
        }
        Some(*since.get_or_insert_with(Instant::now) + SAVE_AFTER)
    }

    /// Whether the evaluation image on disk lacks the ledger mark one written now would hold:
    /// every receipt is in the ledger (see [`OpenStore::check_image_input`]), and no image was
    /// tried for this evaluation and these receipts yet.
    fn markable(&self, serial: u64) -> bool {
        self.images.unmarked
            && self.images.mark_tried != Some((serial, self.receipts.generation()))
            && self.captured_receipts == Some(self.receipts.generation())
            && self.journal.is_empty()
            && self.checks.is_empty()
    }

    /// Write what [`OpenStore::images_due`] announced, if it is due. What goes in is taken
    /// here, on the store's thread; encoding and writing it (hundreds of milliseconds at 100,000
    /// ticks) happen on a thread of their own, one at a time, so no request waits for them.
    /// With `now` (the store is let go) whatever waits is written before this returns.
    pub(super) fn save_images(&mut self, now: bool) {
        // A writing that is done (or, when the store is let go, waited for) is taken in first.
        if let Some(writing) = self.images.writing.take() {
            if now || writing.is_finished() {
                let written = writing.join().unwrap_or_default();
                self.commit_images(written);
            } else {
                self.images.writing = Some(writing);
                return;
            }
        }
        let Some(due) = self.images_due() else {
            return;
        };
        if !now && Instant::now() < due {
            return;
        }
        let ticks = self.store.ticks_generation();
        let serial = self.memos.plain().map_or(0, |(_, e)| e.serial);
        let job = self.images_job(ticks);
        // Written or not, not tried again before something moves.
        self.images.imaged = (ticks, serial, None);
        self.images.mark_tried = Some((serial, self.receipts.generation()));
        let Some(job) = job else {
            return;
        };
        self.images.writing_marked = job.check.as_ref().map(|c| c.mark.is_some());
        if now {
            let written = job.run();
            self.commit_images(written);
            return;
        }
        match std::thread::Builder::new()
            .name("evd-images".into())
            .spawn(move || job.run())
        {
            Ok(handle) => self.images.writing = Some(handle),
            Err(e) => tracing::debug!(error = %e, "cannot start writing the images"),
        }
    }

    /// What writing the images takes: the tick image when the ticks moved since the last one
    /// (or its checksum is unknown), and the evaluation image when the last plain evaluation
    /// describes the store as it is now (nothing it read moved since), with the stamps of the
    /// receipt and state files it read.
    fn images_job(&mut self, ticks: u64) -> Option<ImagesJob> {
        let build = self.images.build.clone()?;
        if !self.lock_is_valid() {
            return None;
        }
        let tick_image = (self.images.imaged.0 != ticks || self.images.tick_sum.is_none())
            .then(|| self.store.tick_image())
            .flatten();
        let check = self.check_image_input();
        let tmp = self.store.tmp_dir().ok()?;
        (tick_image.is_some() || check.is_some()).then(|| ImagesJob {
            build,
            tmp,
            results: self.results_dir(),
            tick_image,
            tick_sum: self.images.tick_sum,
            check,
        })
    }

    /// What the evaluation image says, when the last plain evaluation describes the store as it
    /// is now (see [`OpenStore::images_job`]).
    fn check_image_input(&mut self) -> Option<CheckImage> {
        self.settle_state_files_here();
        let state = self.state_watch.sync(&mut self.state_written);
        let (basis, e) = self.memos.plain()?;
        let current = e.ticks == self.store.ticks_generation()
            && e.receipts == self.receipts.generation()
            && e.state_epoch == self.state_epoch
            && e.state_complete
            && e.state == state
            && e.evidence == self.evidence.generation()
            && e.valid_until
                .is_none_or(|t| crate::engine::clock::now() < t);
        if !current {
            return None;
        }
        let (basis, e) = (basis.clone(), Arc::clone(e));
        let cited: Vec<(String, u64)> = e
            .parts
            .iter()
            .filter(|p| p.tick.cites_evidence())
            .map(|p| {
                let id = p.tick.id();
                let digest = self.evidence.of(id).map_or(0, |c| evidence_digest(&c));
                (id.to_string(), digest)
            })
            .collect();
        // Every receipt is in the ledger already (the last capture took them all and its
        // journal is written): the next daemon's first check need not read them to know.
        let in_ledger = self.captured_receipts == Some(self.receipts.generation())
            && self.journal.is_empty()
            && self.checks.is_empty();
        let mark = in_ledger.then(|| self.ledger.tail_mark()).flatten();
        let guarded = self.guarded_as_of(e.ticks);
        Some(CheckImage {
            guarded,
            generations: (e.receipts, state),
            basis,
            eval: e,
            cited,
            mark,
        })
    }

    /// Take in a finished writing of the images: the evaluation image written beside its place
    /// goes in its place only if nobody wrote a receipt or state file since the evaluation (the
    /// watches would say): the stamps it holds are then those the evaluation read.
    fn commit_images(&mut self, written: Written) {
        let (tick_sum, pending) = written;
        self.images.tick_sum = tick_sum;
        let Some((receipts, state)) = pending else {
            return;
        };
        let results = self.results_dir();
        let pending = results.join(CHECK_IMAGE_PENDING);
        self.receipts.sync();
        let unchanged = self.receipts.generation() == receipts
            && self.state_watch.sync(&mut self.state_written) == state
            && self.lock_is_valid();
        let marked = self.images.writing_marked.take();
        if !(unchanged && std::fs::rename(&pending, results.join(CHECK_IMAGE)).is_ok()) {
            let _ = std::fs::remove_file(&pending);
            return;
        }
        if let Some(marked) = marked {
            self.images.unmarked = !marked;
        }
    }

    /// When the store is about to be opened with an evaluation image to take back: watch
    /// `results/receipts/`, then stamp every receipt file on a thread of its own while the
    /// tick image is decoded. Watched first: a receipt written after its file was stamped is
    /// seen by the next request, never missed.
    pub(super) fn look_ahead(&mut self) {
        if self.images.build.is_none() || self.images.taken || self.images.receipts_ahead.is_some()
        {
            return;
        }
        let results = self.results_dir();
        if !std::fs::symlink_metadata(results.join(CHECK_IMAGE)).is_ok_and(|m| m.is_file()) {
            return;
        }
        self.receipts.sync();
        let generation = self.receipts.generation();
        self.images.receipts_ahead = std::thread::Builder::new()
            .name("evd-receipts-ahead".into())
            .spawn(move || receipt_stamps(&results, None))
            .ok()
            .map(|h| (generation, h));
    }

    /// [`crate::store::Store::acquire`], with the evaluation image read and decoded (on a
    /// thread of its own) as soon as the tick image is taken back, while the first scan
    /// confirms that image: a check takes it (see [`read_check_ahead`]).
    pub(super) fn acquire_store(&mut self, kind: &str) -> Result<(), proto::rpc::Refusal> {
        let images = &mut self.images;
        self.store
            .acquire_then(kind, |store| read_check_ahead(images, store))
    }

    /// When the store is about to be opened with an evaluation image to take back: look at the
    /// work tree ahead, for the paths that image guarded, while the ticks are read back (see
    /// [`crate::git::worktree::Worktree::look_ahead`]; its answer is used only when provably
    /// current).
    pub(super) fn worktree_ahead(&mut self) {
        let Some(build) = self.images.build.clone() else {
            return;
        };
        if self.images.taken {
            return;
        }
        let results = self.results_dir();
        if !std::fs::symlink_metadata(results.join(CHECK_IMAGE)).is_ok_and(|m| m.is_file()) {
            return;
        }
        let root = self.store.root().to_path_buf();
        self.worktree
            .look_ahead(&root, move || guarded_in_image(&results, &build));
    }

    /// The paths the current view's test grounds guard, as the evaluation image holds them:
    /// only while the tick cache is exactly the tick image that image was made with (same build,
    /// same checksum, every tick file unchanged), whose view they were derived from.
    pub(super) fn imaged_guarded(&mut self) -> Option<Vec<String>> {
        if self.store.tick_image_generation() != Some(self.store.ticks_generation()) {
            return None;
        }
        self.images.ahead.as_mut()?.guarded.take()
    }

    /// Read the evaluation image, once, while the tick cache is exactly the tick image it was
    /// made with, and decode its parts on a thread of their own while the check establishes
    /// its basis (git's answers take a while): [`OpenStore::take_check_image`] finds them
    /// decoded. Nothing read here is trusted before that function has compared it. While the
    /// store is opened (see [`read_check_ahead`]), and before a plain check's basis (the first
    /// plain check takes whatever was read ahead).
    pub fn check_image_ahead(&mut self) {
        read_check_ahead(&mut self.images, &mut self.store);
    }

    /// The parts of the evaluation image, once per opened store, when everything it was made
    /// from is provably unchanged and its facts answer `basis` at `now` (see the module docs),
    /// with the stamps its state files had (looked at after the answer: see
    /// [`OpenStore::look_at_state_files`]). `None` otherwise.
    pub fn take_check_image(
        &mut self,
        basis: &Basis,
        now: time::OffsetDateTime,
    ) -> Option<(Vec<Arc<TickPart>>, StateStamps)> {
        self.check_image_ahead();
        let ahead = self.images.ahead.take();
        if std::mem::replace(&mut self.images.taken, true) {
            return None;
        }
        let ahead = ahead?;
        let ticks = self.store.ticks_generation();
        if basis.attest.is_some()
            || basis.offline
            || self.store.tick_image_generation() != Some(ticks)
        {
            return None;
        }
        let results = self.results_dir();
        // Stamped ahead, and no receipt changed since they were watched: those stamps are
        // the files' now.
        let now_receipts = match self.images.receipts_ahead.take() {
            Some((generation, h)) if generation == self.receipts.generation() => {
                h.join().ok().flatten()
            }
            _ => receipt_stamps(&results, None),
        };
        if now_receipts? != ahead.receipts {
            return None;
        }
        for (id, digest) in &ahead.cited {
            if self.evidence.of(id).map_or(0, |c| evidence_digest(&c)) != *digest {
                return None;
            }
        }
        let (facts, parts, left) = ahead.decoding?.join().ok()??;
        // Decoded for the view the tick cache held then, which must still be the current one.
        if self.store.ticks_generation() != ticks || !facts.answer(basis, now) {
            return None;
        }
        // The ledger still holds, unchanged, what it held when every receipt was in it: the
        // first check's record need not read them again.
        if ahead
            .in_ledger
            .is_some_and(|(offset, hash)| self.ledger.holds_mark(offset, &hash))
        {
            self.captured_receipts = Some(self.receipts.generation());
        } else {
            self.images.unmarked = true;
        }
        Some((parts, StateStamps(left)))
    }

    /// Look, on a thread of its own, at whether every state file of `eval`'s parts (an
    /// evaluation taken back from the image) is still as that evaluation left it, by the
    /// stamps the image recorded. State files are what a check writes, never what it reads:
    /// nothing waits for this look but what reads or writes them next (see
    /// [`OpenStore::settle_state_files`]); if any differs, the store evaluates afresh on `basis`,
    /// which rewrites whichever are not what the verdicts say.
    pub fn look_at_state_files(
        &mut self,
        eval: Arc<crate::memo::check::Evaluation>,
        left: StateStamps,
        basis: Basis,
    ) {
        let results = self.results_dir();
        let look = move || {
            let now = state_stamps(&results, &eval.parts);
            if left.0.iter().zip(&now).any(|(l, n)| Some(*l) != *n) {
                return None;
            }
            let mut written = crate::store::state_files::StateWritten::default();
            written.reserve(eval.parts.len());
            for p in &eval.parts {
                written.insert(p.tick.id(), p.state_digest);
            }
            Some(written)
        };
        let looking = std::thread::Builder::new()
            .name("evd-state-files".into())
            .spawn(look)
            // No thread to be had: a look that says nothing, so the store evaluates afresh.
            .or_else(|_| std::thread::Builder::new().spawn(|| None));
        match looking {
            Ok(looking) => self.images.state_look = Some(super::StateLook { looking, basis }),
            Err(_) => self.memos.clear(),
        }
    }

    /// Take in the look at the state files under way, if any: with `wait`, whatever it takes;
    /// otherwise only when it is done. When every file is as the evaluation left it, this
    /// store knows what each says. Otherwise the basis to evaluate afresh on is returned, and
    /// the caller must (see [`OpenStore::look_at_state_files`]).
    pub fn settle_state_files(&mut self, wait: bool) -> Option<Basis> {
        let look = self.images.state_look.take()?;
        if !wait && !look.looking.is_finished() {
            self.images.state_look = Some(look);
            return None;
        }
        match look.looking.join() {
            Ok(Some(written)) => {
                self.state_written.extend(written);
                None
            }
            _ => Some(look.basis),
        }
    }

    /// [`OpenStore::settle_state_files`] where no evaluation can be made (images, the store let
    /// go): when the files differ, nothing remembered of that evaluation is trusted or imaged.
    pub(super) fn settle_state_files_here(&mut self) {
        if self.settle_state_files(true).is_some() {
            self.memos.clear();
        }
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

/// [`OpenStore::check_image_ahead`], also while the store is being opened: right after the tick
/// image was taken back, on the view it holds (decoded for nothing if the first scan then finds
/// `ticks/` otherwise: [`OpenStore::take_check_image`] compares the generations).
fn read_check_ahead(images: &mut super::Images, store: &mut crate::store::Store) {
    if images.ahead.is_some() || images.taken {
        return;
    }
    let Some(build) = images.build.clone() else {
        return;
    };
    let Ok(bytes) = crate::sys::fsio::read_limited(&store.results_dir().join(CHECK_IMAGE), LIMIT)
    else {
        return;
    };
    // The view the cache holds while it is exactly the tick image; before the first scan,
    // the one the image holds.
    let view = if store.tick_image_generation() == Some(store.ticks_generation()) {
        store.current_shared().ok()
    } else {
        store.tick_image_view_unconfirmed()
    };
    let Some(view) = view else {
        return;
    };
    let sum = store.tick_image_sum();
    let header = (|| {
        let mut r = Reader::checked(&bytes)?;
        if r.str()? != MAGIC || r.str()? != &*build || Some(r.u64()?) != sum {
            return None;
        }
        let guarded = read_guarded(&mut r)?;
        let n = r.count(36)?;
        let mut receipts = Vec::with_capacity(n);
        for _ in 0..n {
            receipts.push((r.str()?.to_string(), read_stamp(&mut r)?));
        }
        let n = r.count(12)?;
        let mut cited = Vec::with_capacity(n);
        for _ in 0..n {
            cited.push((r.str()?.to_string(), r.u64()?));
        }
        let in_ledger = if r.bool()? {
            Some((r.u64()?, r.str()?.to_string()))
        } else {
            None
        };
        Some((guarded, receipts, cited, in_ledger, r.offset()))
    })();
    let Some((guarded, receipts, cited, in_ledger, offset)) = header else {
        return;
    };
    let decoding = std::thread::Builder::new()
        .name("evd-check-image".into())
        .spawn(move || {
            let body = bytes.get(..bytes.len().checked_sub(8)?)?.get(offset..)?;
            let mut r = Reader::part(body);
            let (facts, parts) = check_image::decode(&mut r, &view)?;
            // The stamp of every state file as the evaluation left it (the digests of what
            // they say are the parts' own).
            let left: Vec<FileStamp> = (0..parts.len())
                .map(|_| read_stamp(&mut r))
                .collect::<Option<_>>()?;
            r.at_end().then_some((facts, parts, left))
        })
        .ok();
    images.ahead = Some(CheckAhead {
        guarded,
        receipts,
        cited,
        in_ledger,
        decoding,
    });
}
