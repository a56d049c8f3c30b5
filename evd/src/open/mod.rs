//! A store as evd holds it open: the store on disk ([`crate::store::Store`], which this derefs
//! to) plus everything kept hot about it between requests — git's answers and the work tree,
//! the check and verify memos, the receipt cache, the state-file watch, the verdict snapshot
//! that live pushes come from, the ledger with evd's own events waiting for it, and the
//! evidence states. The verbs take one of these; the daemon's registry keeps one per store.
//!
//! It composes the layers below it and owns no rule of its own: a feature that must act on
//! every append registers with the store ([`crate::store::Store::check_ticks_with`]). Its
//! methods are split by concern: [`git`] (ranges, uncommitted changes, guarded paths),
//! [`journal`] (evd's own events for the ledger), [`verdicts`] (the snapshot and its changes),
//! [`replay_record`] (what a check rested on, for replay).

pub mod git;
pub mod image;
pub mod journal;
pub mod replay_record;
pub mod verdicts;

use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::sync::Arc;

use proto::rpc::Refusal;

use crate::store::Store;

/// How long learnt git answers wait before they are written for the next start.
const SAVE_ANSWERS_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
/// How long evd's own events wait to be written to the ledger together.
const WRITE_JOURNAL_AFTER: std::time::Duration = std::time::Duration::from_millis(200);

/// tick id → its part of the last plain evaluation folded in (its tick, and a row with the
/// label of each test ground), for ticks with a test ground. The parts are the evaluations'
/// own: the snapshot holds no text of its own.
pub type VerdictSnapshot = std::collections::HashMap<Box<str>, Arc<crate::memo::check::TickPart>>;

/// What one writing of a store's images left (see [`image`]): the tick image's checksum on
/// disk, and the generations an evaluation image written beside its place waits to be checked
/// against.
type Written = (Option<u64>, Option<(u64, u64)>);

/// The stamp of a file as an image keeps it: (ctime ns, mtime ns, length, inode).
type FileStamp = (i64, i64, u64, u64);

/// The origins file's length, change time and inode, as [`OpenStore::origins`] was read at.
type OriginsKey = (u64, i64, i64);

/// Who published each receipt line that came through git, and the tests those lines are of
/// (so that a check asks about a row's run only when its test has any).
#[derive(Debug, Default)]
pub struct Origins {
    pub lines: std::collections::HashMap<String, proto::rpc::ReceiptOrigin>,
    pub tests: std::collections::HashSet<String>,
}

/// Every receipt file with its stamp, by name, as [`image`] takes them.
type ReceiptStamps = Vec<(String, FileStamp)>;

/// The evaluation image read ahead (see [`OpenStore::check_image_ahead`]): what it says it
/// was made from, and its parts being decoded.
#[derive(Debug)]
struct CheckAhead {
    guarded: Option<Vec<String>>,
    receipts: ReceiptStamps,
    cited: Vec<(String, u64)>,
    in_ledger: Option<(u64, String)>,
    decoding: Option<std::thread::JoinHandle<Option<Decoded>>>,
}

/// An evaluation image's facts, parts and state-file stamps, decoded.
type Decoded = (
    crate::memo::check::image::Facts,
    Vec<Arc<crate::memo::check::TickPart>>,
    Vec<FileStamp>,
);

/// A look at the state files an imaged evaluation left, under way on a thread of its own (see
/// [`OpenStore::settle_state_files`]): what each says when all are as it left them, else
/// nothing; and the basis to evaluate afresh on in that case.
#[derive(Debug)]
struct StateLook {
    looking: std::thread::JoinHandle<Option<crate::store::state_files::StateWritten>>,
    basis: crate::memo::check::Basis,
}

/// What is known of the images of one open store (see [`image`]).
#[derive(Debug, Default)]
pub struct Images {
    /// The evd build the images are written for and taken back by; `None`: none are.
    build: Option<Arc<str>>,
    /// The tick generation and evaluation serial last imaged, and since when newer ones wait.
    imaged: (u64, u64, Option<std::time::Instant>),
    /// The checksum of the tick image on disk, when this daemon wrote or took it.
    tick_sum: Option<u64>,
    /// Whether the evaluation image was looked for since the store was opened.
    taken: bool,
    /// Whether the first check was answered from it.
    answered: bool,
    /// The images being written, off the store's thread; the tick image's checksum when done.
    writing: Option<std::thread::JoinHandle<Written>>,
    /// The receipt files' stamps, taken on a thread of their own while the store is opened
    /// (see [`OpenStore::look_ahead`]), with the receipts' generation once they were watched.
    receipts_ahead: Option<(u64, std::thread::JoinHandle<Option<ReceiptStamps>>)>,
    /// The evaluation image, read ahead and its parts being decoded (see
    /// [`OpenStore::check_image_ahead`]).
    ahead: Option<CheckAhead>,
    /// The look at the state files the evaluation taken back left, while under way.
    state_look: Option<StateLook>,
    /// The evaluation image on disk holds no ledger mark (see [`image`]), so every next start
    /// would read every receipt again for its first check's record: it is written again, with
    /// one, once the ledger holds every receipt (tried once per evaluation and receipts).
    unmarked: bool,
    /// The evaluation and receipts generation that last tried to write a marked image.
    mark_tried: Option<(u64, u64)>,
    /// Whether the evaluation image being written holds a mark.
    writing_marked: Option<bool>,
}

/// Bookkeeping a request leaves for right after its answer has gone (see
/// [`OpenStore::after_answer`]).
#[derive(Default)]
pub struct AfterAnswer(Vec<Work>);

/// One piece of work left for after an answer.
type Work = Box<dyn FnOnce(&mut OpenStore) + Send>;

impl std::fmt::Debug for AfterAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AfterAnswer({} waiting)", self.0.len())
    }
}

/// The store on disk and what evd keeps hot about it.
#[derive(Debug)]
pub struct OpenStore {
    /// The store on disk: layout, lock, tick cache, appends, request log.
    pub store: Store,
    /// [`Store::lock_losses`] when the state below was last known good.
    lock_losses: u64,
    /// Whether writes a dead daemon left unjournaled were looked for since the lock was taken.
    reconciled: bool,
    /// Answers of `git rev-list <base>..<tip> -- <paths>`, per tip; `None` until taken back
    /// from the previous daemon's `results/` on first use.
    ranges: Option<crate::git::ranges::Memo>,
    /// Since when answers in `ranges` wait to be written for the next start (see
    /// [`Store::idle_work_at`]).
    ranges_unsaved: Option<std::time::Instant>,
    /// The git answers the previous daemon left, being taken back on a thread of their own
    /// while the store is opened (see [`OpenStore::git_answers_ahead`]), with the git commands
    /// that overran meanwhile.
    ranges_ahead: Option<std::thread::JoinHandle<(crate::git::ranges::Memo, Vec<String>)>>,
    /// The uncommitted changes of the work tree, as `dirty` reads them.
    pub worktree: crate::git::worktree::Worktree,
    /// Every distinct plain `triggered_by` entry of the current view's test grounds, as of a
    /// tick generation.
    guarded: Option<(u64, Arc<Vec<String>>)>,
    /// git's answers about this repository (its HEAD), reused while nothing they depend on
    /// changed.
    pub git: crate::git::facts::FactCache,
    /// HEAD's tree, flattened, as a pre-commit gate last needed it (see
    /// [`crate::git::staged`]): replaced when HEAD moves.
    pub head_tree: Option<crate::git::staged::HeadTree>,
    /// HEAD's tree being read ahead, on a thread of its own, for the commit HEAD moved to (see
    /// [`OpenStore::read_head_tree_ahead`]).
    pub head_tree_ahead: Option<(
        String,
        std::thread::JoinHandle<Option<crate::git::staged::HeadTree>>,
    )>,
    /// git's common directory, once asked (`Some(None)`: not in a repository), for the notes
    /// refs receipts arrive through.
    pub notes_common: Option<Option<PathBuf>>,
    /// What the notes refs looked like when their receipts were last taken in (their stamp,
    /// the trust and, while receipts wait for HEAD, HEAD), and whether receipts wait.
    pub notes_memo: Option<(String, bool)>,
    /// What taking in published receipts had to say (a rewritten notes ref, an unreadable
    /// one), until the next `check` says it.
    pub import_warnings: Vec<proto::rpc::Warning>,
    /// Who published each receipt that came through git, as last read (keyed by the origins
    /// file's length and change time), for the answers that say where a run came from.
    pub origins: Option<(OriginsKey, Arc<Origins>)>,
    /// How many state files this store wrote (see [`crate::memo::check::Evaluation::state_epoch`]).
    pub state_epoch: u64,
    /// A digest of each state file's verdict content as last written (computed_at aside), so an
    /// unchanged verdict is not rewritten.
    pub state_written: crate::store::state_files::StateWritten,
    /// The event template of the last check (see [`crate::memo::check::EventTemplates`]).
    pub event_templates: crate::memo::check::EventTemplates,
    /// Whether the previous daemon's record of the state files was taken (see
    /// [`Store::take_state_record`]).
    state_record_taken: bool,
    /// State files read ahead for the evaluation under way (see `verbs::check`), by tick id:
    /// the digest of what each says but its `computed_at`. Emptied when the evaluation ends.
    pub state_read_ahead: std::collections::HashMap<String, Option<u64>>,
    /// Every test ground's label as a plain check last read it: `(tick, ground)` →
    /// `(decision, claim, label)`. `None` until the first evaluation.
    verdicts: Option<VerdictSnapshot>,
    /// The evaluation whose verdicts the snapshot holds (see [`Store::fold_verdicts_from`]).
    verdicts_from: u64,
    /// Evaluations numbered so far.
    evaluations: u64,
    /// Verdict changes not yet pushed to subscribers.
    unsent: Vec<proto::rpc::VerdictChange>,
    /// The flags of the last `check` (`offline`, `attest`): the state files hold what such a
    /// check reads, so a background re-evaluation uses the same ones.
    pub last_check: (bool, Option<Vec<String>>),
    /// Parsed receipt files, current as of the last sync.
    pub receipts: crate::store::receipt_cache::ReceiptCache,
    /// Who else touched `results/state/`.
    pub state_watch: crate::store::state_files::StateWatch,
    /// The last evaluations of `check`, with what each was computed from.
    pub memos: crate::memo::check::Memos,
    /// The trigger lists and commits the evaluations' parts share.
    pub shared_texts: crate::memo::check::SharedTexts,
    /// The store's event ledger (`results/ledger/events.jsonl`), as its writer holds it.
    pub ledger: crate::ledger::Ledger,
    /// The states of the current decisions' evidence citations, per cited file.
    pub evidence: crate::ledger::evidence::Cache,
    /// evd's own events (a tick recorded, a receipt appended, a verdict changed, a check run)
    /// not yet written to the ledger, and since when they wait: written together shortly
    /// after, off the request's path (see [`Store::idle_work_at`]), and when the store is
    /// released.
    journal: Vec<crate::ledger::OwnEvent>,
    /// Checks waiting with the journal, each at the journal position it was taken at (see
    /// [`crate::open::replay_record`]).
    checks: Vec<(usize, Box<crate::ledger::replay::PendingCheck>)>,
    /// The receipt cache's generation the last check's capture read.
    pub captured_receipts: Option<u64>,
    /// What the ledger holds of the verdict engine's inputs (see [`crate::open::replay_record`]),
    /// read from it once per session, when a check first records.
    replay_known: Option<crate::ledger::replay::Known>,
    /// The ledger's artifacts as last hashed by `ledger verify`, by path: (inode, size, mtime,
    /// sha256).
    pub artifacts_hashed: std::collections::HashMap<String, crate::ledger::file::ArtifactStamp>,
    journal_since: Option<std::time::Instant>,
    /// Whether this process has written its `daemon_started` to this store's ledger.
    journal_started: bool,
    /// The `git` envelope of evd's own events, and when it was read (asking git takes a
    /// `git status`: at most once per [`JOURNAL_GIT_FOR`] while events keep coming).
    journal_git: Option<(std::time::Instant, serde_json::Value)>,
    /// Verdict changes the last evaluation found, for its caller to take.
    pub pending_changes: Vec<proto::rpc::VerdictChange>,
    /// The last audit of `ticks/`, file by file.
    pub verify_memo: crate::memo::verify::VerifyMemo,
    /// The plain `list` answer file, with the tick generation it was written for.
    pub list_answer: Option<(u64, crate::sys::answers::AnswerFile)>,
    /// What this store keeps for the next daemon (see [`image`]).
    images: Images,
    /// What requests left for right after their answers.
    after: AfterAnswer,
}

impl Deref for OpenStore {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

impl DerefMut for OpenStore {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.store
    }
}

impl Drop for OpenStore {
    fn drop(&mut self) {
        self.finish_answered();
        self.settle_state_files_here();
        // Still holding the lock here: the store (and its lock) drops after this.
        if self.journal_started || !self.journal.is_empty() || !self.checks.is_empty() {
            self.journal("daemon_stopped", serde_json::Map::new());
        }
        self.on_idle();
        self.save_images(true);
        if !self.state_written.is_empty() && self.lock_is_valid() {
            // Whatever someone else did to a state file and the watch saw is taken in first.
            self.state_watch.sync(&mut self.state_written);
            crate::store::state_record::save(&self.results_dir(), &self.state_written);
        }
    }
}

impl OpenStore {
    /// A handle on the store under `root` (the directory that holds `.evolving`). Nothing is
    /// read or locked yet.
    pub fn new(root: PathBuf) -> OpenStore {
        let results = root.join(".evolving").join("results");
        let mut store = Store::new(root.clone());
        store.check_ticks_with(crate::ledger::evidence::check_tick);
        OpenStore {
            store,
            lock_losses: 0,
            reconciled: false,
            ranges: None,
            ranges_unsaved: None,
            ranges_ahead: None,
            state_epoch: 0,
            worktree: crate::git::worktree::Worktree::default(),
            guarded: None,
            git: crate::git::facts::FactCache::for_repository(),
            head_tree: None,
            head_tree_ahead: None,
            notes_common: None,
            notes_memo: None,
            import_warnings: Vec::new(),
            origins: None,
            state_written: Default::default(),
            state_read_ahead: Default::default(),
            state_record_taken: false,
            event_templates: Default::default(),
            verdicts: None,
            verdicts_from: 0,
            evaluations: 0,
            unsent: Vec::new(),
            last_check: (false, None),
            receipts: crate::store::receipt_cache::ReceiptCache::new(&results),
            state_watch: crate::store::state_files::StateWatch::new(&results),
            memos: crate::memo::check::Memos::default(),
            shared_texts: Default::default(),
            ledger: crate::ledger::Ledger::new(&root, &results),
            evidence: Default::default(),
            journal: Vec::new(),
            checks: Vec::new(),
            captured_receipts: None,
            replay_known: None,
            artifacts_hashed: Default::default(),
            journal_since: None,
            journal_started: false,
            journal_git: None,
            pending_changes: Vec::new(),
            verify_memo: Default::default(),
            list_answer: None,
            images: Default::default(),
            after: Default::default(),
        }
    }

    /// Leave `work` for right after the answer of the request under way: the store's thread
    /// runs it ([`OpenStore::finish_answered`]) once that answer has been handed over and
    /// before it serves anything else; an in-process run, before the store is let go. Only for
    /// bookkeeping that cannot change the answer.
    pub fn after_answer(&mut self, work: impl FnOnce(&mut OpenStore) + Send + 'static) {
        self.after.0.push(Box::new(work));
    }

    /// Run the work requests left for after their answers, in the order it was left.
    pub fn finish_answered(&mut self) {
        while self.finish_next_answered() {}
    }

    /// Run the oldest piece of work left for after an answer (work it leaves in turn queues
    /// behind the rest), and say whether any is left: the store's thread can then let a read
    /// that came meanwhile go first. It runs on a thread of lower priority while the store's
    /// thread waits for it: the answer's own way to its client (encoding it, the client reading
    /// it) goes first on a busy machine.
    pub fn finish_next_answered(&mut self) -> bool {
        if self.after.0.is_empty() {
            return false;
        }
        let mut work = Some(self.after.0.remove(0));
        let started = std::time::Instant::now();
        let done = std::thread::scope(|s| {
            let (store, work) = (&mut *self, &mut work);
            std::thread::Builder::new()
                .name("evd-after-answer".into())
                .spawn_scoped(s, move || {
                    crate::sys::process::lower_this_thread(5);
                    if let Some(w) = work.take() {
                        w(store);
                    }
                })
                .ok()
                .map(|h| h.join().is_ok())
        });
        // No thread to be had: it runs here (work that panicked is not run twice).
        if done.is_none() {
            if let Some(w) = work.take() {
                w(self);
            }
        }
        tracing::debug!(
            ms = started.elapsed().as_secs_f64() * 1e3,
            left = self.after.0.len(),
            "work left for after an answer done"
        );
        !self.after.0.is_empty()
    }

    /// [`Store::acquire`], and when it found the lock gone and opened the store afresh, what
    /// was kept about the old one is dropped with it.
    pub fn acquire(&mut self, kind: &str) -> Result<(), Refusal> {
        if !self.store.is_locked() {
            self.look_ahead();
            self.git_answers_ahead();
            self.worktree_ahead();
            self.state_watch.ensure_ahead();
        }
        let r = self.acquire_store(kind);
        if self.store.lock_losses() != self.lock_losses {
            self.lock_losses = self.store.lock_losses();
            self.ranges_ahead = None;
            self.state_written.clear();
            self.verdicts = None;
            self.verify_memo.clear();
            self.reconciled = false;
        }
        if r.is_ok() && !self.reconciled {
            self.reconciled = true;
            self.journal_crashed_writes();
        }
        r
    }

    /// Why this store is served degraded (some directory of it could not be watched, so every
    /// answer is validated against the disk first), or `None` when it is fully watched.
    pub fn degraded(&self) -> Option<String> {
        self.store
            .degraded()
            .or_else(|| self.receipts.watch_error().map(str::to_string))
            .or_else(|| self.state_watch.watch_error().map(str::to_string))
    }

    /// What the previous daemon recorded of the state files it wrote, once (see
    /// [`crate::store::state_record`]); empty afterwards, or when it left none.
    pub fn take_state_record(
        &mut self,
    ) -> std::collections::HashMap<String, (u64, crate::store::state_record::Stamp)> {
        if std::mem::replace(&mut self.state_record_taken, true) || !self.store.is_locked() {
            return Default::default();
        }
        crate::store::state_record::restore(&self.results_dir())
    }

    /// Do without the record of state files the previous daemon left (see
    /// [`OpenStore::take_state_record`]): an evaluation taken back from the images confirms
    /// the state files by stamps of its own. The record is removed, and never read after.
    pub fn forget_state_record(&mut self) {
        if std::mem::replace(&mut self.state_record_taken, true) || !self.store.is_locked() {
            return;
        }
        crate::store::state_record::discard(&self.results_dir());
    }

    /// When work left for a quiet moment is due: the git answers learnt since they were last
    /// written, kept for the next start, a second after they were learnt (a burst of requests,
    /// like the checks right after a restart, is not kept waiting behind the write).
    pub fn idle_work_at(&mut self) -> Option<std::time::Instant> {
        let answers = self.ranges_unsaved.map(|since| since + SAVE_ANSWERS_AFTER);
        let journal = self.journal_since.map(|since| since + WRITE_JOURNAL_AFTER);
        let images = self.images_due();
        [answers, journal, images].into_iter().flatten().min()
    }

    /// Whether a look at the state files an imaged evaluation left is under way (see
    /// [`OpenStore::look_at_state_files`]).
    pub fn state_look_pending(&self) -> bool {
        self.images.state_look.is_some()
    }

    /// Do the work [`OpenStore::idle_work_at`] announced. Also run when the store is dropped.
    pub fn on_idle(&mut self) {
        if self.journal_since.is_some() {
            self.write_journal();
        }
        self.save_images(false);
        // Not into a store someone is removing (its lock file goes with it).
        if self.ranges_unsaved.take().is_some() && self.lock_is_valid() {
            if let Some(memo) = &self.ranges {
                crate::git::ranges::persist(self.store.root(), &self.results_dir(), memo);
            }
        }
    }
}
