//! One `.evolving/` store on disk: its layout, its lock, a cache of parsed ticks, and the
//! crash-safe append (tick durable first, then HEAD).

pub mod config;
pub mod lock;
pub mod receipt_cache;
pub mod requests;
pub mod state_record;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proto::model::TickParseError;
use proto::rpc::{codes, Refusal};
use proto::Tick;

use self::lock::{Holder, LockFile};
use crate::engine::packed::PackedTick;
use crate::store::config::{Config, DEFAULT_CONFIG};
use crate::sys::fsio;
use crate::sys::watch::{Changes, DirWatch};

/// What one file of `ticks/` holds, as last read.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A valid tick, packed ([`PackedTick::tick`] rebuilds it).
    Tick(Arc<PackedTick>),
    /// JSON, but not a valid tick: the reader's message.
    Invalid(Box<String>),
    /// Not JSON: poisons whole-store reads (`reading store: <file>: <error>`).
    NotJson(Box<String>),
    /// Not readable as text (bad UTF-8, a symlink): poisons whole-store reads
    /// (`reading store: <error>`).
    Unreadable(Box<String>),
}
// The messages are boxed (rare) so that an entry of the cache stays two words.

/// Enough of a file's metadata to notice it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    mtime_ns: i64,
    len: u64,
    /// Never 0 (no file has inode 0), so an absent stamp costs no extra word.
    ino: std::num::NonZeroU64,
}

impl Stamp {
    /// `None` for an inode number of 0, which no real file has: such a file is simply never
    /// trusted by its stamp.
    fn of(m: &fs::Metadata) -> Option<Stamp> {
        Some(Stamp {
            mtime_ns: m
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.mtime_nsec()),
            len: m.len(),
            ino: std::num::NonZeroU64::new(m.ino())?,
        })
    }
}

#[derive(Debug, Clone)]
struct Cached {
    stamp: Option<Stamp>,
    entry: Entry,
    /// New at every read (see [`Store::tick_serial`]).
    serial: u64,
    /// What `verify` found in this file, while the cache has not read it again.
    audit: Option<crate::memo::verify::AuditSlot>,
}

/// Where [`Cached`] serials come from.
static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Cached {
    /// A file that is not a valid tick.
    fn new(stamp: Option<Stamp>, entry: Entry) -> Cached {
        Cached::with(stamp, entry)
    }

    /// A valid tick, packed (with its identity).
    fn tick(stamp: Option<Stamp>, tick: &Tick) -> Cached {
        Cached::with(stamp, Entry::Tick(Arc::new(PackedTick::pack(tick))))
    }

    fn with(stamp: Option<Stamp>, entry: Entry) -> Cached {
        Cached {
            stamp,
            entry,
            serial: SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            audit: None,
        }
    }
}

/// The store at `<root>/.evolving`.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    ev: PathBuf,
    lock: Option<LockFile>,
    /// By file name; the name's handle is shared with the view and the check memo.
    files: BTreeMap<Arc<str>, Cached>,
    /// `ticks/`'s stamp when `files` was last brought up to date.
    ticks_stamp: Option<Stamp>,
    /// inotify on `ticks/`: when present, the exact list of what changed since the last refresh.
    watch: Option<DirWatch>,
    /// Why `ticks/` could not be watched, when it could not: every refresh then re-stats it all.
    watch_error: Option<String>,
    pub writes: u64,
    pub opened_at: String,
    /// Answers of `git rev-list <base>..<tip> -- <paths>`, per tip; `None` until taken back
    /// from the previous daemon's `results/` on first use.
    ranges: Option<crate::git::ranges::Memo>,
    /// Since when answers in `ranges` wait to be written for the next start (see
    /// [`Store::idle_work_at`]).
    ranges_unsaved: Option<std::time::Instant>,
    /// The uncommitted changes of the work tree, as `dirty` reads them.
    pub worktree: crate::git::worktree::Worktree,
    /// Every distinct plain `triggered_by` entry of the current view's test grounds, as of a
    /// tick generation.
    guarded: Option<(u64, Arc<Vec<String>>)>,
    /// git's answers about this repository (its HEAD), reused while nothing they depend on
    /// changed.
    pub git: crate::git::facts::FactCache,
    /// How many state files this store wrote (see [`crate::memo::check::Evaluation::state_epoch`]).
    pub state_epoch: u64,
    /// A digest of each state file's verdict content as last written (computed_at aside), so an
    /// unchanged verdict is not rewritten.
    pub state_written: crate::memo::check::StateWritten,
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
    /// Moves whenever the tick cache took in a change.
    ticks_generation: u64,
    /// The current view as of a tick generation.
    view: Option<(u64, Arc<CurrentView>)>,
    /// Parsed receipt files, current as of the last sync.
    pub receipts: crate::store::receipt_cache::ReceiptCache,
    /// Who else touched `results/state/`.
    pub state_watch: crate::memo::check::StateWatch,
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
    /// [`crate::ledger::replay_record`]).
    checks: Vec<(usize, Box<crate::ledger::replay_record::PendingCheck>)>,
    /// The receipt cache's generation the last check's capture read.
    pub captured_receipts: Option<u64>,
    /// What the ledger holds of the verdict engine's inputs (see [`crate::ledger::replay_record`]),
    /// read from it once per session, when a check first records.
    replay_known: Option<crate::ledger::replay::Known>,
    /// The ledger's artifacts as last hashed by `ledger verify`, by path: (inode, size, mtime,
    /// sha256).
    pub artifacts_hashed: std::collections::HashMap<String, (u64, u64, i128, String)>,
    journal_since: Option<std::time::Instant>,
    /// Whether this process has written its `daemon_started` to this store's ledger.
    journal_started: bool,
    /// The `git` envelope of evd's own events, and when it was read (asking git takes a
    /// `git status`: at most once per [`JOURNAL_GIT_FOR`] while events keep coming).
    journal_git: Option<(std::time::Instant, serde_json::Value)>,
    /// The caller of the write being served, for the events it causes.
    pub current_agent: Option<String>,
    /// Verdict changes the last evaluation found, for its caller to take.
    pub pending_changes: Vec<proto::rpc::VerdictChange>,
    /// The write requests this store applied, by client request id (exactly-once writes).
    pub requests: crate::store::requests::RequestLog,
    /// The id of the write request being served, if it has one: an append records its intent
    /// under it first.
    pub current_request: Option<String>,
    /// The last audit of `ticks/`, file by file.
    pub verify_memo: crate::memo::verify::VerifyMemo,
    /// The plain `list` answer file, with the tick generation it was written for.
    pub list_answer: Option<(u64, crate::sys::answers::AnswerFile)>,
}

/// The current view: `(file name, tick)`, newest first.
pub type CurrentView = Vec<(Arc<str>, Arc<PackedTick>)>;

/// tick id → its part of the last plain evaluation folded in (its tick, and a row with the
/// label of each test ground), for ticks with a test ground. The parts are the evaluations'
/// own: the snapshot holds no text of its own.
pub type VerdictSnapshot = std::collections::HashMap<Box<str>, Arc<crate::memo::check::TickPart>>;

/// The label a part's row gives ground `gi`, if it has a row for it.
fn label_of(part: &crate::memo::check::TickPart, gi: usize) -> Option<&str> {
    part.kept_rows()
        .iter()
        .find(|r| r.ground_index == gi)
        .map(|r| &*r.label)
}

/// The entries of `ticks/`, as listed fresh for the audit.
pub struct TicksListing {
    /// Every regular file and symlink: `(name, is a symlink)`, in directory order.
    pub files: Vec<(String, bool)>,
    /// Every other entry, by name, with what it is ("a directory"), sorted by name.
    pub odd: Vec<(String, &'static str)>,
}

/// The name of the lock file, under `results/` (the per-host part nobody commits).
pub const LOCK_FILE: &str = "evd.lock";

/// How long learnt git answers wait before they are written for the next start.
const SAVE_ANSWERS_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
/// How long evd's own events wait to be written to the ledger together.
const WRITE_JOURNAL_AFTER: std::time::Duration = std::time::Duration::from_millis(200);
/// How long the `git` envelope of evd's own events is reused.
const JOURNAL_GIT_FOR: std::time::Duration = std::time::Duration::from_secs(2);
/// The most own events that wait (a ledger that cannot be written must not grow memory).
const MAX_JOURNAL: usize = 100_000;

impl Drop for Store {
    fn drop(&mut self) {
        // Still holding the lock here: the fields drop after this.
        if self.journal_started || !self.journal.is_empty() || !self.checks.is_empty() {
            self.journal("daemon_stopped", serde_json::Map::new());
        }
        self.on_idle();
        if !self.state_written.is_empty() && self.lock_is_valid() {
            // Whatever someone else did to a state file and the watch saw is taken in first.
            self.state_watch.sync(&mut self.state_written);
            crate::store::state_record::save(&self.results_dir(), &self.state_written);
        }
    }
}

impl Store {
    /// A handle on the store under `root` (the directory that holds `.evolving`). Nothing is
    /// read or locked yet.
    pub fn new(root: PathBuf) -> Store {
        let ev = root.join(".evolving");
        let results = ev.join("results");
        Store {
            root,
            ev,
            lock: None,
            files: BTreeMap::new(),
            ticks_stamp: None,
            watch: None,
            watch_error: None,
            writes: 0,
            opened_at: crate::engine::clock::now_rfc3339(),
            ranges: None,
            ranges_unsaved: None,
            state_epoch: 0,
            worktree: crate::git::worktree::Worktree::default(),
            guarded: None,
            git: crate::git::facts::FactCache::for_repository(),
            state_written: Default::default(),
            state_read_ahead: Default::default(),
            state_record_taken: false,
            event_templates: Default::default(),
            verdicts: None,
            verdicts_from: 0,
            evaluations: 0,
            unsent: Vec::new(),
            last_check: (false, None),
            ticks_generation: 0,
            view: None,
            receipts: crate::store::receipt_cache::ReceiptCache::new(&results),
            state_watch: crate::memo::check::StateWatch::new(&results),
            memos: crate::memo::check::Memos::default(),
            shared_texts: Default::default(),
            ledger: crate::ledger::Ledger::new(&results),
            evidence: Default::default(),
            journal: Vec::new(),
            checks: Vec::new(),
            captured_receipts: None,
            replay_known: None,
            artifacts_hashed: Default::default(),
            journal_since: None,
            journal_started: false,
            journal_git: None,
            current_agent: None,
            pending_changes: Vec::new(),
            requests: crate::store::requests::RequestLog::new(&results),
            current_request: None,
            verify_memo: Default::default(),
            list_answer: None,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn ev_dir(&self) -> &Path {
        &self.ev
    }
    pub fn ticks_dir(&self) -> PathBuf {
        self.ev.join("ticks")
    }
    pub fn results_dir(&self) -> PathBuf {
        self.ev.join("results")
    }
    pub fn is_locked(&self) -> bool {
        self.lock.is_some()
    }

    /// Whether this store's lock is held and still guards the lock file on disk.
    pub fn lock_is_valid(&self) -> bool {
        self.lock.as_ref().is_some_and(|l| l.still_valid())
    }

    /// Whether `.evolving` exists. A symlink or a non-directory is a refusal: evd never follows
    /// links inside a store.
    pub fn exists(&self) -> Result<bool, Refusal> {
        match fs::symlink_metadata(&self.ev) {
            Ok(m) if m.file_type().is_symlink() => Err(Refusal::new(
                codes::BAD_STORE,
                "store_symlink",
                format!(
                    "refusing store {}: .evolving is a symlink (evd never follows links inside a store)",
                    self.root.display()
                ),
            )),
            Ok(m) if !m.is_dir() => Err(Refusal::new(
                codes::BAD_STORE,
                "store_not_dir",
                format!(
                    "refusing store {}: .evolving is not a directory",
                    self.root.display()
                ),
            )),
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Refusal::io(format!("{}: {e}", self.ev.display()))),
        }
    }

    /// Refuse with the no-store message unless the store exists.
    pub fn require(&self) -> Result<(), Refusal> {
        if self.exists()? {
            Ok(())
        } else {
            Err(Refusal::no_store())
        }
    }

    /// Become the store's only writer. Refused, naming the holder, when another process owns it.
    /// Also finishes an append a crash interrupted (see [`Store::recover_head`]).
    pub fn acquire(&mut self, kind: &str) -> Result<(), Refusal> {
        self.check_layout()?;
        match &self.lock {
            Some(l) if l.still_valid() => return Ok(()),
            Some(_) => {
                // The store was removed (or its results/) under us: start afresh.
                tracing::info!(store = %self.root.display(), "the store's lock file went away; re-opening");
                self.lock = None;
                self.files.clear();
                self.ticks_stamp = None;
                self.watch = None;
                self.state_written.clear();
                self.verdicts = None;
                self.requests.reset();
                self.verify_memo.clear();
            }
            None => {}
        }
        self.require()?;
        let results = self.results_dir();
        fsio::ensure_dir(&results).map_err(|e| Refusal::io(format!("results/: {e}")))?;
        let path = results.join(LOCK_FILE);
        let held = lock::try_lock(&path, &Holder::me(kind)).map_err(|e| {
            Refusal::new(
                codes::LOCKED,
                "store_locked",
                e.describe(&format!("store {}", self.root.display())),
            )
        })?;
        self.lock = Some(held);
        self.clean_temp();
        self.recover_head()?;
        Ok(())
    }

    /// What every owned request checks first (three `lstat`s): `.evolving` belongs to the user
    /// evd runs as, and neither `ticks/` nor `results/` is a symlink or anything but a directory.
    /// A link would carry writes into another store, past that store's lock; a store of another
    /// user would get files owned by us (git refuses such a repository as of dubious ownership).
    pub fn check_layout(&self) -> Result<(), Refusal> {
        let bad =
            |reason: &str, message: String| Err(Refusal::new(codes::BAD_STORE, reason, message));
        let me = crate::sys::users::euid();
        if let Ok(m) = fs::symlink_metadata(&self.ev) {
            if m.uid() != me {
                return bad(
                    "store_dubious_owner",
                    format!(
                        "refusing store {}: .evolving is owned by {} (uid {}), not by {} (uid {me}) \
                         that evd runs as — a store of another user is never opened (as git refuses \
                         a repository of dubious ownership); run evctl as its owner",
                        self.root.display(),
                        crate::sys::users::name_of(m.uid()),
                        m.uid(),
                        crate::sys::users::name_of(me),
                    ),
                );
            }
        }
        for sub in ["ticks", "results"] {
            match fs::symlink_metadata(self.ev.join(sub)) {
                Ok(m) if m.file_type().is_symlink() => {
                    return bad(
                        "store_symlink",
                        format!(
                            "refusing store {}: .evolving/{sub} is a symlink (evd never follows \
                             links inside a store: a write through it would land in another \
                             directory)",
                            self.root.display()
                        ),
                    )
                }
                Ok(m) if !m.is_dir() => {
                    return bad(
                        "store_not_dir",
                        format!(
                            "refusing store {}: .evolving/{sub} is not a directory",
                            self.root.display()
                        ),
                    )
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// HEAD as the parent of a new tick: empty (the first tick), or the 12-hex id of a regular
    /// file in `ticks/`. Anything else (garbage, a path, a directory where the tick was) is
    /// refused before anything is written.
    pub fn head_for_write(&self) -> Result<String, Refusal> {
        let head = self.head()?;
        match self.head_problem(&head) {
            None => Ok(head),
            Some(problem) => Err(Refusal::new(
                codes::REFUSED,
                "bad_head",
                format!(
                    "refusing to write to store {}: {problem}; nothing was written (HEAD must \
                     name the newest tick: `evctl verify` reports what is wrong)",
                    self.root.display()
                ),
            )),
        }
    }

    /// What is wrong with `head` (HEAD's trimmed text), if anything.
    pub fn head_problem(&self, head: &str) -> Option<String> {
        if head.is_empty() {
            return None;
        }
        if !proto::vocab::is_tick_id(head) {
            let mut shown: String = head.chars().take(40).collect();
            if shown.len() < head.len() {
                shown.push('…');
            }
            return Some(format!(
                "HEAD holds {shown:?} ({} bytes), which is not a tick id (12 lowercase hex)",
                head.len()
            ));
        }
        match fs::symlink_metadata(self.ticks_dir().join(head)) {
            Ok(m) if m.is_file() => None,
            Ok(m) => Some(format!(
                "HEAD names {head}, but ticks/{head} is {}, not a tick file",
                crate::sys::fsio::kind_of(&m)
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Some(format!("HEAD names {head}, but there is no ticks/{head}"))
            }
            Err(e) => Some(format!(
                "HEAD names {head}, and ticks/{head} cannot be read: {e}"
            )),
        }
    }

    pub fn tmp_dir(&self) -> Result<PathBuf, Refusal> {
        let tmp = self.results_dir().join("tmp");
        fsio::ensure_dir(&tmp).map_err(|e| Refusal::io(format!("results/tmp: {e}")))?;
        Ok(tmp)
    }

    /// Remove temp files a crashed writer left behind (only ever in `results/tmp/`).
    fn clean_temp(&self) {
        if let Ok(rd) = fs::read_dir(self.results_dir().join("tmp")) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(".evd-tmp-") {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
    }

    /// `init`: create the layout unless `.evolving` exists as anything. The tree is built under a
    /// temporary name and renamed into place, so a crash never leaves half a store and two
    /// concurrent inits make one.
    pub fn init(&mut self) -> Result<bool, Refusal> {
        if fs::symlink_metadata(&self.ev).is_ok() {
            return Ok(false);
        }
        let fail = |e: io::Error| Refusal::io(format!("could not create .evolving/: {e}"));
        let staging = self
            .root
            .join(format!(".evolving.init-{}", std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        let build = || -> io::Result<()> {
            fs::create_dir(&staging)?;
            fs::create_dir(staging.join("ticks"))?;
            fs::create_dir_all(staging.join("results").join("receipts"))?;
            fs::create_dir(staging.join("results").join("state"))?;
            let tmp = staging.join("results");
            fsio::replace_atomically(&tmp, &staging.join("HEAD"), b"")?;
            fsio::replace_atomically(&tmp, &staging.join("config"), DEFAULT_CONFIG.as_bytes())?;
            fsio::sync_dir(&staging.join("results"))?;
            fsio::sync_dir(&staging)?;
            Ok(())
        };
        if let Err(e) = build() {
            let _ = fs::remove_dir_all(&staging);
            return Err(fail(e));
        }
        // rename(2) onto an existing non-empty directory fails, so a concurrent init wins cleanly.
        if let Err(e) = fs::rename(&staging, &self.ev) {
            let _ = fs::remove_dir_all(&staging);
            if fs::symlink_metadata(&self.ev).is_ok() {
                return Ok(false);
            }
            return Err(fail(e));
        }
        fsio::sync_dir(&self.root).map_err(fail)?;
        Ok(true)
    }

    pub fn config(&self) -> Config {
        Config::parse(fsio::read_text(&self.ev.join("config")).ok().as_deref())
    }

    /// HEAD, trimmed; a missing file reads as empty.
    pub fn head(&self) -> Result<String, Refusal> {
        fsio::read_text_opt(&self.ev.join("HEAD"))
            .map(|h| h.unwrap_or_default().trim().to_string())
            .map_err(|e| Refusal::io(format!("reading HEAD: {e}")))
    }

    /// Bring the tick cache up to date with `ticks/`. With the inotify watch (the normal case)
    /// this costs one stat and one non-blocking read when nothing changed, and re-reads exactly
    /// the files that did. Without it, changes are found through the directory's stamp plus a
    /// re-check of suspect files.
    pub fn refresh(&mut self) -> Result<(), Refusal> {
        let dir = self.ticks_dir();
        let meta =
            fs::symlink_metadata(&dir).map_err(|e| Refusal::io(format!("reading store: {e}")))?;
        if meta.file_type().is_symlink() || !meta.is_dir() {
            return Err(Refusal::io(format!(
                "reading store: {}: ticks/ is not a directory (evd never follows links inside a store)",
                dir.display()
            )));
        }
        let stamp = Stamp::of(&meta);
        if self.ticks_stamp.is_some() {
            match self.watch.as_mut().map(DirWatch::drain) {
                Some(Changes::Quiet) => return Ok(()),
                Some(Changes::Names(names)) => {
                    self.ticks_generation += 1;
                    for name in names {
                        self.reload_one(&dir, name);
                    }
                    self.ticks_stamp = stamp;
                    return Ok(());
                }
                Some(Changes::Rescan) => {
                    // Events were lost: whatever was built on this generation is suspect, even
                    // if the scan below finds every file as it was.
                    self.watch = None;
                    self.ticks_generation += 1;
                }
                // No watch: nothing short of looking at every file can tell that a tick was
                // edited in place, so the scan below re-stats them all.
                None => {}
            }
        }
        // Watch first, then scan: a change during the scan is queued, never missed.
        if self.watch.is_none() {
            match DirWatch::new(&dir) {
                Ok(w) => {
                    self.watch = Some(w);
                    self.watch_error = None;
                }
                Err(e) => self.watch_error = Some(e.0),
            }
        }
        let mut next = BTreeMap::new();
        // Whether anything differs from the cache (a first scan always does).
        let mut changed = self.ticks_stamp.is_none();
        let mut to_load = Vec::new();
        let rd = fs::read_dir(&dir).map_err(|e| Refusal::io(format!("reading store: {e}")))?;
        for ent in rd {
            let ent = ent.map_err(|e| Refusal::io(format!("reading store: {e}")))?;
            let name = ent.file_name().to_string_lossy().into_owned();
            let path = ent.path();
            let known = self.files.remove(name.as_str());
            // A file the cache never saw is read at once (its stamp from the open file's
            // `fstat`): a first scan looks at each path once.
            if known.is_none() && ent.file_type().is_ok_and(|t| t.is_file()) {
                to_load.push((name, path, None));
                continue;
            }
            let Ok(m) = fs::symlink_metadata(&path) else {
                continue; // vanished between readdir and stat
            };
            if m.is_dir() {
                continue;
            }
            match known {
                Some(c)
                    if c.stamp.is_some() && c.stamp == stamp_of_regular(&m) && !is_suspect(&c) =>
                {
                    next.insert(name.into(), c);
                }
                _ => to_load.push((name, path, Some(m))),
            }
        }
        let loaded = to_load.len();
        changed |= loaded > 0;
        next.extend(load_all(to_load));
        if loaded >= 1024 {
            // Parsing left the heap full of holes between the packed ticks kept: give the free
            // pages back, so a daemon holding a large store holds what it keeps.
            crate::sys::resources::release_free_memory();
        }
        // What is left in the cache is gone from the directory.
        changed |= !self.files.is_empty();
        if changed {
            self.ticks_generation += 1;
        }
        self.files = next;
        self.ticks_stamp = stamp;
        Ok(())
    }

    /// Re-read one entry inotify named (whatever its stamp says: it changed).
    fn reload_one(&mut self, dir: &Path, name: String) {
        match fs::symlink_metadata(dir.join(&name)) {
            Ok(m) if !m.is_dir() => {
                let fresh = load(&dir.join(&name), &name, &m);
                self.files.insert(name.into(), fresh);
            }
            _ => {
                self.files.remove(name.as_str());
            }
        }
    }

    /// Every file of `ticks/`, refreshed. Fails like upstream's whole-store read when any file is
    /// not JSON: `reading store: <file>: <error>`.
    pub fn entries(&mut self) -> Result<Vec<(&str, &Entry)>, Refusal> {
        self.readable()?;
        Ok(self.files.iter().map(|(n, c)| (&**n, &c.entry)).collect())
    }

    /// Refresh, and fail like upstream's whole-store read when any file is not JSON (see
    /// [`Store::entries`]), without listing anything.
    pub fn readable(&mut self) -> Result<(), Refusal> {
        self.refresh()?;
        let poisoned = self.files.iter().find_map(|(name, c)| match &c.entry {
            Entry::Unreadable(e) => Some(e.to_string()),
            Entry::NotJson(e) => Some(format!("{name}: {e}")),
            _ => None,
        });
        match poisoned {
            Some(e) => Err(Refusal::io(format!("reading store: {e}"))),
            None => Ok(()),
        }
    }

    /// Every parseable tick, refreshed (whole-store read rules apply).
    pub fn ticks(&mut self) -> Result<Vec<(&str, &PackedTick)>, Refusal> {
        Ok(self
            .entries()?
            .into_iter()
            .filter_map(|(n, e)| match e {
                Entry::Tick(t) => Some((n, t.as_ref())),
                _ => None,
            })
            .collect())
    }

    /// [`Store::current`], each tick rebuilt whole (for the few verbs that need every field of
    /// every current tick).
    pub fn current_ticks(&mut self) -> Result<Vec<(&str, Tick)>, Refusal> {
        Ok(self
            .current()?
            .into_iter()
            .map(|(f, t)| (f, t.tick()))
            .collect())
    }

    /// The current view (see [`crate::engine::view`]), newest first, from the cached identities.
    /// Whole-store read rules apply.
    pub fn current(&mut self) -> Result<Vec<(&str, &PackedTick)>, Refusal> {
        self.entries()?;
        let inputs: Vec<(&str, &PackedTick, crate::engine::view::Identity)> = self
            .files
            .iter()
            .filter_map(|(n, c)| match &c.entry {
                Entry::Tick(t) => Some((&**n, t.as_ref(), t.identity())),
                _ => None,
            })
            .collect();
        Ok(crate::engine::view::current(&inputs))
    }

    /// [`Store::current`], as shared handles (no copy of any tick), for callers that go on to
    /// use the store mutably. Computed once per change of the tick cache.
    pub fn current_shared(&mut self) -> Result<Arc<CurrentView>, Refusal> {
        self.refresh()?;
        // A view is only ever made from a store with no poisoned file, and it stands for as
        // long as the tick cache did not move.
        if let Some((generation, view)) = &self.view {
            if *generation == self.ticks_generation {
                return Ok(Arc::clone(view));
            }
        }
        self.entries()?;
        let inputs: Vec<(&Arc<str>, &Arc<PackedTick>, crate::engine::view::Identity)> = self
            .files
            .iter()
            .filter_map(|(n, c)| match &c.entry {
                Entry::Tick(t) => Some((n, t, t.identity())),
                _ => None,
            })
            .collect();
        let plain: Vec<(&str, &PackedTick, crate::engine::view::Identity)> = inputs
            .iter()
            .map(|(n, t, id)| (&***n, t.as_ref(), *id))
            .collect();
        // The view keeps the inputs' order of identity; map each chosen tick back to its
        // handles (the cache's own name and tick).
        let by_name: std::collections::HashMap<&str, (&Arc<str>, &Arc<PackedTick>)> =
            inputs.iter().map(|(n, t, _)| (&***n, (*n, *t))).collect();
        let mut view: CurrentView = crate::engine::view::current(&plain)
            .into_iter()
            .filter_map(|(f, _)| by_name.get(f).map(|(n, t)| (Arc::clone(n), Arc::clone(t))))
            .collect();
        // Collected in place, it would keep the capacity of every tick the collapse looked at.
        view.shrink_to_fit();
        let view = Arc::new(view);
        self.view = Some((self.ticks_generation, Arc::clone(&view)));
        Ok(view)
    }

    /// Why this store is served degraded (some directory of it could not be watched, so every
    /// answer is validated against the disk first), or `None` when it is fully watched.
    pub fn degraded(&self) -> Option<String> {
        self.watch_error
            .as_deref()
            .or(self.receipts.watch_error())
            .or(self.state_watch.watch_error())
            .map(str::to_string)
    }

    /// A number that moves whenever the tick cache took in a change (call after a refresh).
    pub fn ticks_generation(&self) -> u64 {
        self.ticks_generation
    }

    /// The cached entry for one file name as last refreshed (no look at the disk).
    pub fn cached_entry(&self, name: &str) -> Option<Entry> {
        self.files.get(name).map(|c| c.entry.clone())
    }

    /// The cached entry for one file name (after a refresh), without the whole-store rule.
    pub fn entry(&mut self, name: &str) -> Result<Option<Entry>, Refusal> {
        self.refresh()?;
        Ok(self.files.get(name).map(|c| c.entry.clone()))
    }

    /// Take the git answers known for `tip` (see [`crate::git::ranges::Memo::take`]); the first
    /// use takes back what a previous daemon kept in `results/`. Hand them back with
    /// [`Store::keep_ranges`].
    pub fn take_ranges(&mut self, tip: &str) -> crate::git::ranges::Answers {
        let root = self.root.clone();
        let results = self.results_dir();
        self.ranges
            .get_or_insert_with(|| crate::git::ranges::restore(&root, &results))
            .take(&root, tip)
    }

    /// The work tree's uncommitted changes (see [`crate::git::worktree::Worktree::uncommitted`]),
    /// while — in parallel, when HEAD moved — the git answers known for the last HEAD are
    /// carried over to `head`: both cost git processes right after a commit.
    pub fn uncommitted_and_ranges(
        &mut self,
        head: Option<&str>,
        guarded: &[String],
    ) -> Option<Arc<crate::git::worktree::Uncommitted>> {
        let root = self.root.clone();
        let results = self.results_dir();
        let ranges = self
            .ranges
            .get_or_insert_with(|| crate::git::ranges::restore(&root, &results));
        let worktree = &mut self.worktree;
        match head {
            Some(h) if !ranges.has(h) => std::thread::scope(|s| {
                let carried = s.spawn(|| {
                    ranges.advance(&root, h);
                    crate::sys::child::take_timeouts()
                });
                let answer = worktree.uncommitted(&root, head, guarded);
                // A carry that panicked leaves nothing carried: those are asked again.
                if let Ok(timeouts) = carried.join() {
                    crate::sys::child::note_timeouts(timeouts);
                }
                answer
            }),
            _ => worktree.uncommitted(&root, head, guarded),
        }
    }

    /// Keep the answers for `tip`; with `persist`, when any were learnt since the last write,
    /// have them written for the next start.
    pub fn keep_ranges(
        &mut self,
        tip: String,
        answers: crate::git::ranges::Answers,
        learnt: bool,
        persist: bool,
    ) {
        let memo = self.ranges.get_or_insert_with(Default::default);
        memo.keep(tip, answers, learnt);
        if persist && memo.take_dirty() {
            // Written a little later, not while a client waits (see [`Store::idle_work_at`]).
            self.ranges_unsaved
                .get_or_insert_with(std::time::Instant::now);
        }
    }

    /// What the previous daemon recorded of the state files it wrote, once (see
    /// [`crate::store::state_record`]); empty afterwards, or when it left none.
    pub fn take_state_record(
        &mut self,
    ) -> std::collections::HashMap<String, (u64, crate::store::state_record::Stamp)> {
        if std::mem::replace(&mut self.state_record_taken, true) || self.lock.is_none() {
            return Default::default();
        }
        crate::store::state_record::restore(&self.results_dir())
    }

    /// When work left for a quiet moment is due: the git answers learnt since they were last
    /// written, kept for the next start, a second after they were learnt (a burst of requests,
    /// like the checks right after a restart, is not kept waiting behind the write).
    pub fn idle_work_at(&self) -> Option<std::time::Instant> {
        let answers = self.ranges_unsaved.map(|since| since + SAVE_ANSWERS_AFTER);
        let journal = self.journal_since.map(|since| since + WRITE_JOURNAL_AFTER);
        match (answers, journal) {
            (Some(a), Some(j)) => Some(a.min(j)),
            (a, j) => a.or(j),
        }
    }

    /// Journal a tick this store just recorded: by which verb, for which caller.
    pub fn journal_tick(&mut self, verb: &str, tick: &Tick) {
        let mut p = serde_json::Map::new();
        p.insert("tick_id".into(), tick.id.clone().into());
        p.insert("parent_id".into(), tick.parent_id.clone().into());
        p.insert("verb".into(), verb.into());
        p.insert("blame".into(), tick.blame.clone().into());
        if let Some(a) = &self.current_agent {
            p.insert("caller_agent_id".into(), a.clone().into());
        }
        if let Some(r) = &tick.ratifies {
            p.insert("ratifies".into(), r.clone().into());
        }
        if let Some(s) = &tick.supersedes {
            p.insert("supersedes".into(), s.clone().into());
        }
        self.journal("tick_recorded", p);
        if let Some(r) = &tick.ratifies {
            let mut p = serde_json::Map::new();
            p.insert("proposal_id".into(), r.clone().into());
            p.insert("tick_id".into(), tick.id.clone().into());
            p.insert("blame".into(), tick.blame.clone().into());
            self.journal("proposal_ratified", p);
        }
    }

    /// Note one of evd's own events for the ledger (written shortly after, with the others
    /// waiting: see [`Store::write_journal`]).
    pub fn journal(
        &mut self,
        event_type: &'static str,
        payload: serde_json::Map<String, serde_json::Value>,
    ) {
        self.make_room();
        self.journal.push((event_type, payload));
        self.journal_since
            .get_or_insert_with(std::time::Instant::now);
    }

    /// Note a check for the ledger: its `check_run`, and what it rested on that the ledger does
    /// not hold yet, are written with the journal.
    pub fn journal_check(&mut self, c: crate::ledger::replay_record::PendingCheck) {
        self.make_room();
        self.checks.push((self.journal.len(), Box::new(c)));
        self.journal_since
            .get_or_insert_with(std::time::Instant::now);
    }

    fn make_room(&mut self) {
        if self.journal.len() + self.checks.len() >= MAX_JOURNAL {
            // Far behind (a ledger that cannot be written): the oldest are let go, said once.
            tracing::warn!(store = %self.root.display(), "ledger journal full; dropping its oldest events");
            let n = self.journal.len().min(MAX_JOURNAL / 2);
            self.journal.drain(..n);
            self.checks.retain(|(at, _)| *at >= n);
            for (at, _) in &mut self.checks {
                *at -= n;
            }
            if self.checks.len() >= MAX_JOURNAL / 2 {
                self.checks.drain(..self.checks.len() / 2);
            }
        }
    }

    /// Read what the ledger (and `waiting`, events of evd's own not written yet) holds of the
    /// verdict engine's inputs, unless known already.
    pub fn load_known(&mut self, waiting: &[crate::ledger::OwnEvent]) {
        if self.replay_known.is_some() {
            return;
        }
        let text = match std::fs::read(self.ledger.path()) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(_) => String::new(),
        };
        self.replay_known = Some(crate::ledger::replay::Known::load(&text, waiting.iter()));
    }

    pub fn known(&self) -> Option<&crate::ledger::replay::Known> {
        self.replay_known.as_ref()
    }

    pub fn known_mut(&mut self) -> Option<&mut crate::ledger::replay::Known> {
        self.replay_known.as_mut()
    }

    /// Write the events waiting in the journal, after this run's `daemon_started` if it is the
    /// first. Best effort (never into a store being removed): a failure is logged and they wait
    /// for the next try.
    pub fn write_journal(&mut self) {
        if self.journal.is_empty() && self.checks.is_empty() {
            self.journal_since = None;
            return;
        }
        if !self.lock_is_valid() || !self.results_dir().is_dir() {
            self.journal.clear();
            self.checks.clear();
            self.journal_since = None;
            return;
        }
        let events = std::mem::take(&mut self.journal);
        let mut checks = std::mem::take(&mut self.checks).into_iter().peekable();
        let mut batch = crate::ledger::replay_record::Batch::new(self);
        for (i, (t, p)) in events.into_iter().enumerate() {
            while let Some((_, c)) = checks.next_if(|(at, _)| *at <= i) {
                crate::ledger::replay_record::expand(&mut batch, *c);
            }
            batch.push(t, p, 256);
        }
        for (_, c) in checks {
            crate::ledger::replay_record::expand(&mut batch, *c);
        }
        match batch.finish() {
            Ok(()) => {
                self.journal_started = true;
                self.journal_since = None;
            }
            Err(rest) => {
                tracing::warn!(store = %self.root.display(), "cannot write the ledger; its events wait for the next try");
                // Already made and folded: they wait as they are, before anything newer.
                let newer = std::mem::replace(&mut self.journal, rest);
                self.journal.extend(newer);
                self.journal_since = Some(std::time::Instant::now());
            }
        }
    }

    /// Append evd's own `events` to the ledger, each with its envelope (the git facts asked at
    /// most every [`JOURNAL_GIT_FOR`]), after this run's `daemon_started` if they are its first.
    pub fn append_own(&mut self, events: &[crate::ledger::OwnEvent]) -> std::io::Result<()> {
        let mut started = None;
        if !self.journal_started {
            let mut p = serde_json::Map::new();
            p.insert("pid".into(), std::process::id().into());
            p.insert("version".into(), env!("CARGO_PKG_VERSION").into());
            started = Some(("daemon_started", p));
        }
        let git = match &self.journal_git {
            Some((at, g)) if at.elapsed() < JOURNAL_GIT_FOR => g.clone(),
            _ => {
                let g = crate::verbs::ledger::git_now(self);
                self.journal_git = Some((std::time::Instant::now(), g.clone()));
                g
            }
        };
        let host = crate::ledger::host(&self.root);
        let agent = crate::verbs::ledger::own_agent();
        let events = started
            .iter()
            .chain(events)
            .map(|(t, p)| crate::ledger::own_event(t, agent, &host, &git, p.clone()))
            .collect();
        self.ledger
            .append_own(events, &crate::engine::clock::now_rfc3339())?;
        self.journal_started = true;
        Ok(())
    }

    /// Do the work [`Store::idle_work_at`] announced. Also run when the store is dropped.
    pub fn on_idle(&mut self) {
        if self.journal_since.is_some() {
            self.write_journal();
        }
        // Not into a store someone is removing (its lock file goes with it).
        if self.ranges_unsaved.take().is_some() && self.lock_is_valid() {
            if let Some(memo) = &self.ranges {
                crate::git::ranges::persist(&self.root, &self.results_dir(), memo);
            }
        }
    }

    /// Forget every git answer (a git child overran: nothing it said is trusted).
    pub fn forget_ranges(&mut self) {
        if let Some(m) = self.ranges.as_mut() {
            m.clear();
        }
    }

    /// Every distinct `triggered_by` entry that [`crate::git::ranges::plain_paths`] accepts, over
    /// the current view's live test grounds, sorted.
    pub fn guarded_paths(&mut self) -> Result<Arc<Vec<String>>, Refusal> {
        let view = self.current_shared()?;
        let generation = self.ticks_generation;
        if let Some((g, paths)) = &self.guarded {
            if *g == generation {
                return Ok(Arc::clone(paths));
            }
        }
        let mut set = std::collections::BTreeSet::new();
        for (_, t) in view.iter().filter(|(_, t)| t.status() == "live") {
            for (_, _, triggers) in t.test_bindings() {
                let triggers: Vec<&str> = triggers.iter().collect();
                if triggers.iter().all(|t| crate::git::ranges::plain_path(t)) {
                    set.extend(triggers.into_iter().map(str::to_string));
                }
            }
        }
        let paths = Arc::new(set.into_iter().collect::<Vec<_>>());
        self.guarded = Some((generation, Arc::clone(&paths)));
        Ok(paths)
    }

    /// A number for a new evaluation, never given before by this store.
    pub fn next_evaluation_serial(&mut self) -> u64 {
        self.evaluations += 1;
        self.evaluations
    }

    /// Whether the verdict snapshot holds what evaluation `serial` found (it was the last folded
    /// in).
    pub fn verdicts_folded_from(&self, serial: u64) -> bool {
        self.verdicts.is_some() && self.verdicts_from == serial
    }

    /// Note that the snapshot now holds what evaluation `serial` found.
    pub fn fold_verdicts_from(&mut self, serial: u64) {
        self.verdicts_from = serial;
    }

    /// Fold a plain evaluation's parts into the snapshot and say which test grounds' labels
    /// changed (grounds no longer seen have left the view). With `only`, `folded` holds the
    /// parts of the ticks evaluated again alone, and nothing else in the snapshot moved. The
    /// first evaluation only sets the baseline. Costs no allocation for a part whose labels did
    /// not move.
    pub fn update_verdicts(
        &mut self,
        folded: &[&Arc<crate::memo::check::TickPart>],
        only: bool,
    ) -> Vec<proto::rpc::VerdictChange> {
        use proto::rpc::VerdictChange;
        let baseline = self.verdicts.is_none();
        let snap = self.verdicts.get_or_insert_with(Default::default);
        let mut changes = Vec::new();
        let change = |part: &crate::memo::check::TickPart, gi: usize, old: Option<&str>, new| {
            VerdictChange {
                tick_id: part.tick.id().to_string(),
                ground_index: gi,
                decision: part.tick.decision().to_string(),
                claim: part.tick.ground_text(gi).0.to_string(),
                old: old.map(str::to_string),
                new,
            }
        };
        for &part in folded {
            let id = part.tick.id();
            let old = snap.get(id);
            if old.is_some_and(|o| Arc::ptr_eq(o, part)) {
                continue;
            }
            for r in part.kept_rows().iter() {
                let was = old.and_then(|o| label_of(o, r.ground_index));
                if was != Some(&*r.label) {
                    changes.push(change(part, r.ground_index, was, Some(r.label.to_string())));
                }
            }
            if let Some(o) = old {
                for r in o.kept_rows().iter() {
                    if label_of(part, r.ground_index).is_none() {
                        changes.push(change(o, r.ground_index, Some(&r.label), None));
                    }
                }
            }
            if part.kept_rows().is_empty() {
                snap.remove(id);
            } else if old.is_some() {
                if let Some(slot) = snap.get_mut(id) {
                    *slot = Arc::clone(part);
                }
            } else {
                snap.insert(id.into(), Arc::clone(part));
            }
        }
        if !only {
            // Ticks no longer in view leave the snapshot, with every ground they had.
            let in_view: std::collections::HashSet<&str> =
                folded.iter().map(|p| p.tick.id()).collect();
            snap.retain(|id, o| {
                if in_view.contains(&**id) {
                    return true;
                }
                for r in o.kept_rows().iter() {
                    changes.push(change(o, r.ground_index, Some(&r.label), None));
                }
                false
            });
        }
        if baseline {
            Vec::new()
        } else {
            self.note_changes(changes.clone());
            changes
        }
    }

    /// Verdict changes (and changes of what cited evidence reads, see
    /// [`crate::ledger::evidence::sync`]): journaled, and queued for the subscribers.
    pub fn note_changes(&mut self, changes: Vec<proto::rpc::VerdictChange>) {
        for c in &changes {
            let mut p = serde_json::Map::new();
            p.insert("tick_id".into(), c.tick_id.clone().into());
            p.insert("ground_index".into(), c.ground_index.into());
            p.insert("old".into(), c.old.clone().into());
            p.insert("new".into(), c.new.clone().into());
            self.journal("verdict_changed", p);
        }
        self.unsent.extend(changes);
    }

    /// Whether a full plain evaluation has set the verdict baseline.
    pub fn has_verdict_baseline(&self) -> bool {
        self.verdicts.is_some()
    }

    /// The verdict changes found since the last call, for the subscribers.
    pub fn take_unsent(&mut self) -> Vec<proto::rpc::VerdictChange> {
        std::mem::take(&mut self.unsent)
    }

    pub fn tick_count(&self) -> usize {
        self.files.len()
    }

    /// Read one tick file's bytes by id. Ids that are not 12 lowercase hex never touch the disk.
    pub fn read_tick_file(&self, id: &str) -> Result<Option<String>, io::Error> {
        if !proto::vocab::is_tick_id(id) {
            return Ok(None);
        }
        fsio::read_text_opt(&self.ticks_dir().join(id))
    }

    /// What `ticks/` holds right now, read fresh from the directory (for the audit): every
    /// regular file and symlink by name (`true` for a symlink, which the audit reports), and
    /// every other entry (directories, FIFOs, sockets, devices) by name with what it is, sorted
    /// by name. Nothing is read but the directory: `d_type` tells the kinds apart.
    pub fn list_ticks_dir(&self) -> Result<TicksListing, Refusal> {
        let dir = self.ticks_dir();
        let rd = fs::read_dir(&dir).map_err(|e| Refusal::io(format!("reading store: {e}")))?;
        let mut files = Vec::new();
        let mut odd = Vec::new();
        for ent in rd {
            let ent = ent.map_err(|e| Refusal::io(format!("reading store: {e}")))?;
            let Ok(ft) = ent.file_type() else { continue };
            if !ft.is_file() && !ft.is_symlink() {
                let name = ent.file_name().to_string_lossy().into_owned();
                let kind = fs::symlink_metadata(ent.path())
                    .map(|m| fsio::kind_of(&m))
                    .unwrap_or("not a regular file");
                odd.push((name, kind));
                continue;
            }
            files.push((
                ent.file_name().to_string_lossy().into_owned(),
                ft.is_symlink(),
            ));
        }
        odd.sort();
        Ok(TicksListing { files, odd })
    }

    /// One file of `ticks/` read fresh for the audit: its text, or the whole-store error it
    /// causes as upstream words it.
    pub fn read_for_audit(&self, name: &str, symlink: bool) -> Result<String, String> {
        if symlink {
            return Err(format!(
                "{name} is a symlink (evd never follows links inside a store)"
            ));
        }
        fsio::read_text(&self.ticks_dir().join(name)).map_err(|e| e.to_string())
    }

    /// Whether `ticks/` is watched (inotify), so that [`Store::ticks_generation`] moving is the
    /// only way its content can have changed.
    pub fn ticks_watched(&self) -> bool {
        self.watch.is_some()
    }

    /// Whether the tick cache has read `ticks/` at least once.
    pub fn ticks_loaded(&self) -> bool {
        self.ticks_stamp.is_some()
    }

    /// The serial of the cached read of one file of `ticks/` (after a refresh): a number that
    /// is new every time the cache reads the file again, so equal serials mean the file was
    /// not seen to change in between.
    pub fn tick_serial(&self, name: &str) -> Option<u64> {
        self.files.get(name).map(|c| c.serial)
    }

    /// The audit `verify` kept for one file of `ticks/` (see [`crate::memo::verify`]), with the
    /// cached tick, while the cache has not read the file again.
    pub fn kept_audit(
        &self,
        name: &str,
    ) -> Option<(&crate::memo::verify::AuditSlot, Option<&PackedTick>)> {
        let c = self.files.get(name)?;
        let tick = match &c.entry {
            Entry::Tick(t) => Some(t.as_ref()),
            _ => None,
        };
        c.audit.as_ref().map(|a| (a, tick))
    }

    /// Keep `verify`'s audit of one file, read while the cache's serial for it was `serial`
    /// (nothing is kept if the cache has read the file again since). `slot` is made from the
    /// cached tick, if the file is one.
    pub fn keep_audit(
        &mut self,
        name: &str,
        serial: u64,
        slot: impl FnOnce(Option<&PackedTick>) -> crate::memo::verify::AuditSlot,
    ) {
        if let Some(c) = self.files.get_mut(name).filter(|c| c.serial == serial) {
            let tick = match &c.entry {
                Entry::Tick(t) => Some(t.as_ref()),
                _ => None,
            };
            c.audit = Some(slot(tick));
        }
    }

    /// The shared append: write `ticks/<id>` durably, then move HEAD. Only a lock holder may
    /// call this; the caller has already built and validated `tick`.
    pub fn append(&mut self, tick: Tick) -> Result<(), Refusal> {
        if self.lock.is_none() {
            return Err(Refusal::new(
                codes::INTERNAL,
                "not_owner",
                "internal: append without holding the store lock",
            ));
        }
        // The layout was checked when this request took the store (`acquire`).
        crate::engine::limits::check_tick(&tick)?;
        crate::ledger::evidence::check_tick(&self.root, &tick)?;
        if self.head_for_write()? != tick.parent_id {
            return Err(Refusal::new(
                codes::INTERNAL,
                "head_moved",
                "internal: HEAD moved between reading it and appending; nothing was written",
            ));
        }
        let tmp = self.tmp_dir()?;
        let ticks = self.ticks_dir();
        let dir_stamp = || {
            fs::symlink_metadata(&ticks)
                .ok()
                .and_then(|m| Stamp::of(&m))
        };
        let in_sync = self.ticks_stamp.is_some() && dir_stamp() == self.ticks_stamp;
        let dest = ticks.join(&tick.id);
        self.record_intent(&tick.id)?;
        fsio::replace_atomically(&tmp, &dest, tick.file_bytes().as_bytes())
            .map_err(|e| Refusal::io(format!("writing tick: {e}")))?;
        let head = self.ev.join("HEAD");
        if let Err(e) = fsio::replace_atomically(&tmp, &head, tick.id.as_bytes()) {
            // Not recorded: take the tick back out before saying so, so that a write reported
            // as failed never lands (the roll-forward at open would otherwise adopt it).
            return Err(self.undo_append(&tick.id, &tick.parent_id, &e));
        }
        self.writes += 1;
        // Keep the cache in step without a rescan when nobody else touched ticks/ meanwhile.
        let file_stamp = fs::symlink_metadata(&dest).ok().and_then(|m| Stamp::of(&m));
        if in_sync {
            self.ticks_stamp = dir_stamp();
        }
        self.files
            .insert(tick.id.as_str().into(), Cached::tick(file_stamp, &tick));
        // Whatever was computed from the ticks before this append is out of date, whether or
        // not a watch will also report the new file.
        self.ticks_generation += 1;
        Ok(())
    }

    /// Before an append under a request id: record, durably, which tick will be HEAD if it
    /// lands (see [`crate::store::requests`]).
    fn record_intent(&mut self, tip: &str) -> Result<(), Refusal> {
        let Some(id) = self.current_request.clone() else {
            return Ok(());
        };
        self.requests
            .intent(&id, tip)
            .map_err(|e| Refusal::io(format!("writing tick: recording the request: {e}")))
    }

    /// An append whose HEAD update failed: put HEAD back if it moved, remove the tick file, and
    /// say what happened (and, if the tick could not be taken back, that it may still land).
    fn undo_append(&mut self, id: &str, parent: &str, e: &io::Error) -> Refusal {
        let ticks = self.ticks_dir();
        let head = self.ev.join("HEAD");
        let undo = || -> io::Result<()> {
            if self.head().ok().as_deref() == Some(id) {
                let tmp = self.tmp_dir().map_err(|r| io::Error::other(r.message))?;
                fsio::replace_atomically(&tmp, &head, parent.as_bytes())?;
            }
            match fs::remove_file(ticks.join(id)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            fsio::sync_dir(&ticks)
        };
        match undo() {
            Ok(()) => Refusal::io(format!(
                "writing tick: {e} — nothing was recorded (the tick file was removed again)"
            )),
            Err(u) => Refusal::io(format!(
                "writing tick: {e}; taking tick {id} back out failed too ({u}): it may become HEAD \
                 the next time the store is opened — run `evctl verify` and `evctl log` then"
            )),
        }
    }

    /// Append a whole chain of ticks (each the parent of the next, the first a child of HEAD) and
    /// move HEAD once, to the last. `progress(phase, done, total)` hears `stage` (temp files
    /// written) and `write` (ticks published), ending with `write` total/total. Every tick is written to a temp file, all of them are made
    /// durable together (one syncfs), then each is renamed into `ticks/`, `ticks/` is synced, and
    /// only then does HEAD move. So a file in `ticks/` is always complete, and a crash leaves HEAD
    /// on the old tip with a durable linear chain below it that [`Store::recover_head`] finishes.
    /// A failure before HEAD moves removes what it had put into `ticks/`.
    pub fn append_batch(
        &mut self,
        ticks: &[Tick],
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<(), Refusal> {
        let Some(last) = ticks.last() else {
            return Ok(());
        };
        if self.lock.is_none() {
            return Err(Refusal::new(
                codes::INTERNAL,
                "not_owner",
                "internal: append without holding the store lock",
            ));
        }
        let head = self.head_for_write()?;
        let linked = ticks
            .iter()
            .scan(head.as_str(), |parent, t| {
                let ok = t.parent_id == *parent;
                *parent = t.id.as_str();
                Some(ok)
            })
            .all(|ok| ok);
        if !linked {
            return Err(Refusal::new(
                codes::INTERNAL,
                "not_a_chain",
                "internal: a batch must be a chain descending from HEAD (HEAD moved?); nothing was written",
            ));
        }
        for t in ticks {
            crate::engine::limits::check_tick(t)?;
            crate::ledger::evidence::check_tick(&self.root, t)?;
        }
        let total = ticks.len() as u64;
        self.record_intent(&last.id)?;
        let tmp = self.tmp_dir()?;
        let dir = self.ticks_dir();
        let dir_stamp = || fs::symlink_metadata(&dir).ok().and_then(|m| Stamp::of(&m));
        let in_sync = self.ticks_stamp.is_some() && dir_stamp() == self.ticks_stamp;
        let fail = |e: io::Error| Refusal::io(format!("writing tick: {e}"));

        // 1. Stage every tick outside ticks/, unsynced.
        let mut staged: Vec<PathBuf> = Vec::with_capacity(ticks.len());
        let discard = |staged: &[PathBuf]| {
            for p in staged {
                let _ = fs::remove_file(p);
            }
        };
        for (i, t) in ticks.iter().enumerate() {
            let p = tmp.join(fsio::temp_name());
            if let Err(e) = fsio::write_new_unsynced(&p, t.file_bytes().as_bytes()) {
                discard(&staged);
                return Err(fail(e));
            }
            staged.push(p);
            if i % 256 == 255 {
                progress("stage", i as u64 + 1, total);
            }
        }
        // 2. Durable together.
        if let Err(e) = fsio::sync_filesystem(&tmp, &staged) {
            discard(&staged);
            return Err(fail(e));
        }
        // 3. Publish into ticks/, then make the names durable.
        let mut published: Vec<PathBuf> = Vec::with_capacity(ticks.len());
        let unpublish = |published: &[PathBuf]| {
            for p in published {
                let _ = fs::remove_file(p);
            }
            let _ = fsio::sync_dir(&dir);
        };
        for (i, (t, p)) in ticks.iter().zip(&staged).enumerate() {
            let dest = dir.join(&t.id);
            let existed = fs::symlink_metadata(&dest).is_ok();
            let moved = match fs::rename(p, &dest) {
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                    let _ = fs::remove_file(p);
                    fsio::replace_atomically(&tmp, &dest, t.file_bytes().as_bytes())
                }
                other => other,
            };
            if let Err(e) = moved {
                discard(&staged[i..]);
                unpublish(&published);
                return Err(fail(e));
            }
            // A file that was already there (same payload, same parent) is not ours to remove.
            if !existed {
                published.push(dest);
            }
            if i % 256 == 255 {
                progress("write", i as u64 + 1, total);
            }
        }
        if let Err(e) = fsio::sync_dir(&dir) {
            unpublish(&published);
            return Err(fail(e));
        }
        // 4. HEAD moves once, to the tip.
        if let Err(e) = fsio::replace_atomically(&tmp, &self.ev.join("HEAD"), last.id.as_bytes()) {
            // HEAD may have moved before the error (its directory sync failed): put it back.
            if self.head().ok().as_deref() == Some(last.id.as_str()) {
                let _ = fsio::replace_atomically(
                    &tmp,
                    &self.ev.join("HEAD"),
                    ticks[0].parent_id.as_bytes(),
                );
            }
            unpublish(&published);
            return Err(fail(e));
        }
        progress("write", total, total);
        self.writes += total;
        if in_sync {
            self.ticks_stamp = dir_stamp();
        }
        for t in ticks {
            let file_stamp = fs::symlink_metadata(dir.join(&t.id))
                .ok()
                .and_then(|m| Stamp::of(&m));
            self.files
                .insert(t.id.as_str().into(), Cached::tick(file_stamp, t));
        }
        self.ticks_generation += 1;
        Ok(())
    }

    /// The JSON of one file of `ticks/`, read fresh (for files the tick reader refused, whose raw
    /// fields some verbs still use). `None` when it cannot be read or is not JSON.
    pub fn raw_value(&self, name: &str) -> Option<serde_json::Value> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return None;
        }
        let text = fsio::read_text(&self.ticks_dir().join(name)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// A crash between "ticks durable" and "HEAD moved" leaves a chain of complete ticks below
    /// HEAD that HEAD does not name: one tick from a single append, several from a batch. Finish
    /// that append: when HEAD has exactly one child, that child exactly one, and so on to a tick
    /// with none, HEAD moves to the end. Anything branching is left alone.
    fn recover_head(&mut self) -> Result<(), Refusal> {
        let Ok(head) = self.head() else { return Ok(()) };
        let Ok(ticks) = self.ticks() else {
            return Ok(());
        };
        let mut children: std::collections::HashMap<&str, Vec<&str>> =
            std::collections::HashMap::new();
        for (name, t) in &ticks {
            if t.parent_id() != *name {
                children.entry(t.parent_id()).or_default().push(name);
            }
        }
        let mut tip = head.as_str();
        let mut seen = BTreeSet::new();
        loop {
            match children.get(tip).map(Vec::as_slice) {
                None | Some([]) => break,
                Some([only]) => {
                    if !seen.insert(*only) {
                        return Ok(()); // a cycle cannot come from content ids; leave it alone
                    }
                    tip = only;
                }
                Some(_) => return Ok(()),
            }
        }
        if tip == head {
            return Ok(());
        }
        let (tip, rolled) = (tip.to_string(), seen.len());
        drop(seen);
        drop(children);
        drop(ticks);
        tracing::warn!(store = %self.root.display(), head = %head, tick = %tip, ticks = rolled,
            "finishing an interrupted append: moving HEAD to the end of the durable chain it did not name");
        let tmp = self.tmp_dir()?;
        fsio::replace_atomically(&tmp, &self.ev.join("HEAD"), tip.as_bytes())
            .map_err(|e| Refusal::io(format!("writing HEAD: {e}")))
    }

    /// Append one line to `results/events.jsonl`. Best-effort: failures are ignored.
    pub fn append_event(&self, line: &str) {
        let mut l = line.to_string();
        l.push('\n');
        self.append_events(&l);
    }

    /// Append newline-terminated lines to `results/events.jsonl` as `write` hands them over,
    /// each piece in one write (pieces end at a line's end). Best-effort: after a failed write
    /// nothing more is written.
    pub fn append_events_with(&self, write: impl FnOnce(&mut dyn FnMut(&str))) {
        let results = self.results_dir();
        if fsio::ensure_dir(&results).is_err() {
            return;
        }
        let Ok(mut f) = fsio::open_append(&results.join("events.jsonl")) else {
            return;
        };
        let mut ok = true;
        write(&mut |piece: &str| {
            ok = ok && std::io::Write::write_all(&mut f, piece.as_bytes()).is_ok();
        });
    }

    /// Append newline-terminated lines to `results/events.jsonl` in one write. Best-effort.
    pub fn append_events(&self, lines: &str) {
        let results = self.results_dir();
        if !lines.is_empty() && fsio::ensure_dir(&results).is_ok() {
            let _ = fsio::append(&results.join("events.jsonl"), lines.as_bytes());
        }
    }
}

/// How recent a modification must be for its stamp not to be trusted yet (a same-size rewrite
/// within the filesystem's timestamp granularity would otherwise go unseen).
const RACY_NS: i64 = 2_000_000_000;

fn stamp_of_regular(m: &fs::Metadata) -> Option<Stamp> {
    m.file_type().is_file().then(|| Stamp::of(m)).flatten()
}

/// Read one directory entry of `ticks/` into the cache.
fn load(path: &Path, name: &str, m: &fs::Metadata) -> Cached {
    if m.file_type().is_symlink() {
        return Cached::new(
            None,
            Entry::Unreadable(Box::new(format!(
                "{name} is a symlink (evd never follows links inside a store)"
            ))),
        );
    }
    let stamp = stamp_of_regular(m);
    match read_entry(path) {
        Ok(t) => Cached::tick(stamp, &t),
        Err(e) => Cached::new(stamp, e),
    }
}

/// A file of `ticks/` to read: its name, its path, and its metadata when it was looked at.
type ToLoad = (String, PathBuf, Option<fs::Metadata>);

/// [`load`] each of `files`: on a few threads when there are many (the first scan of a large
/// store reads and parses every tick). A file that vanished meanwhile is left out.
fn load_all(files: Vec<ToLoad>) -> Vec<(Arc<str>, Cached)> {
    let loaded = crate::sys::par::map(&files, 512, |(n, p, m)| match m {
        Some(m) => Some(load(p, n, m)),
        None => load_unseen(p, n),
    });
    files
        .into_iter()
        .map(|(n, ..)| n)
        .zip(loaded)
        .filter_map(|(n, c)| Some((n.into(), c?)))
        .collect()
}

/// Read a file of `ticks/` that readdir called regular and nothing has looked at yet: opened
/// without following links, its stamp from the open file. Anything unusual (it is no longer
/// regular, it cannot be read) goes the long way, through [`load`]; `None` when it vanished.
fn load_unseen(path: &Path, name: &str) -> Option<Cached> {
    if let Ok((m, text)) = fsio::read_regular(path) {
        return Some(match Tick::parse(&text) {
            Ok(t) => Cached::tick(stamp_of_regular(&m), &t),
            Err(e) => Cached::new(stamp_of_regular(&m), parse_error(e)),
        });
    }
    let m = fs::symlink_metadata(path).ok()?;
    (!m.is_dir()).then(|| load(path, name, &m))
}

fn is_suspect(c: &Cached) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    match (&c.entry, c.stamp) {
        (Entry::Tick(_), Some(s)) => now.saturating_sub(s.mtime_ns) < RACY_NS,
        (Entry::Unreadable(_), None) => false, // a symlink stays a symlink until ticks/ changes
        _ => true,
    }
}

/// Read and parse one tick file: the tick, or the entry that says why it is none.
fn read_entry(path: &Path) -> Result<Tick, Entry> {
    match fsio::read_text(path) {
        Err(e) => Err(Entry::Unreadable(Box::new(e.to_string()))),
        Ok(text) => Tick::parse(&text).map_err(parse_error),
    }
}

/// The entry that says why a tick file's text is no tick.
fn parse_error(e: TickParseError) -> Entry {
    match e {
        TickParseError::NotJson(e) => Entry::NotJson(Box::new(e)),
        TickParseError::Invalid(e) => Entry::Invalid(Box::new(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().expect("tempdir");
        let mut s = Store::new(d.path().to_path_buf());
        assert!(s.init().expect("init"));
        (d, s)
    }

    #[test]
    fn a_file_written_in_place_after_it_was_first_seen_empty_is_picked_up() {
        let (_d, mut s) = store();
        let path = s.ticks_dir().join("aaaaaaaaaaaa");
        // Upstream creates the file, then writes it: a reader may see it empty in between.
        fs::write(&path, "").expect("create");
        assert!(s.entries().is_err(), "an empty tick file poisons the read");
        let t = proto::Tick::parse(
            r#"{"blame":"b","decision":"d","grounds":[],"held_since":"","id":"aaaaaaaaaaaa","observe":"","parent_id":"","status":"live"}"#,
        )
        .expect("tick");
        fs::write(&path, t.file_bytes()).expect("fill in place");
        let ticks = s.ticks().expect("readable now");
        assert_eq!(ticks.len(), 1);
        assert_eq!(ticks[0].1.decision(), "d");
    }

    #[test]
    fn appends_are_durable_files_and_move_head() {
        let (_d, mut s) = store();
        s.acquire("test").expect("lock");
        let mut t = proto::Tick::parse(
            r#"{"blame":"b","decision":"d","grounds":[],"held_since":"","id":"","observe":"","parent_id":"","status":"live"}"#,
        )
        .expect("tick");
        t.id = proto::id::tick_id(&t.decision, &t.observe, &t.grounds, &t.parent_id);
        s.append(t.clone()).expect("append");
        assert_eq!(s.head().expect("head"), t.id);
        let on_disk = fs::read_to_string(s.ticks_dir().join(&t.id)).expect("read");
        assert_eq!(on_disk, t.file_bytes());
        assert_eq!(s.ticks().expect("ticks").len(), 1);
        // Nothing but ticks in ticks/.
        assert_eq!(fs::read_dir(s.ticks_dir()).expect("ls").count(), 1);
    }

    fn chain_of(n: usize, parent: &str) -> Vec<Tick> {
        let mut out = Vec::new();
        let mut parent = parent.to_string();
        for i in 0..n {
            let mut t = proto::Tick::parse(
                r#"{"blame":"b","decision":"d","grounds":[],"held_since":"","id":"","observe":"","parent_id":"","status":"live"}"#,
            )
            .expect("tick");
            t.decision = format!("batch {i}");
            t.parent_id = parent.clone();
            t.id = proto::id::tick_id(&t.decision, &t.observe, &t.grounds, &t.parent_id);
            parent = t.id.clone();
            out.push(t);
        }
        out
    }

    #[test]
    fn a_batch_lands_whole_and_moves_head_once() {
        let (_d, mut s) = store();
        s.acquire("test").expect("lock");
        let batch = chain_of(600, "");
        let mut calls = 0;
        s.append_batch(&batch, &mut |_, _, _| calls += 1)
            .expect("batch");
        assert!(calls >= 1);
        assert_eq!(s.head().expect("head"), batch[599].id);
        assert_eq!(s.ticks().expect("ticks").len(), 600);
        for t in [&batch[0], &batch[599]] {
            let on_disk = fs::read_to_string(s.ticks_dir().join(&t.id)).expect("read");
            assert_eq!(on_disk, t.file_bytes());
        }
        assert_eq!(
            fs::read_dir(s.tmp_dir().expect("tmp")).expect("ls").count(),
            0
        );
        // A batch that does not descend from HEAD is refused before anything is written.
        let stray = chain_of(2, "");
        let e = s
            .append_batch(&stray, &mut |_, _, _| {})
            .expect_err("refused");
        assert_eq!(e.reason, "not_a_chain");
        assert_eq!(fs::read_dir(s.ticks_dir()).expect("ls").count(), 600);
        s.append_batch(&[], &mut |_, _, _| {})
            .expect("an empty batch is a no-op");
        assert_eq!(s.head().expect("head"), batch[599].id);
    }

    #[test]
    fn a_crash_mid_batch_is_rolled_forward_to_the_end_of_the_chain() {
        let (d, mut s) = store();
        s.acquire("test").expect("lock");
        let first = chain_of(1, "");
        s.append_batch(&first, &mut |_, _, _| {}).expect("first");
        // The batch's ticks are durable, HEAD never moved: the state a crash leaves.
        let rest = chain_of(5, &first[0].id);
        for t in &rest {
            fs::write(s.ticks_dir().join(&t.id), t.file_bytes()).expect("write");
        }
        drop(s);
        let mut s = Store::new(d.path().to_path_buf());
        crate::store::lock::released_soon(|| s.acquire("test")).expect("reopen");
        assert_eq!(s.head().expect("head"), rest[4].id);
    }

    #[test]
    fn a_branching_tail_is_left_alone() {
        let (d, mut s) = store();
        s.acquire("test").expect("lock");
        let first = chain_of(1, "");
        s.append_batch(&first, &mut |_, _, _| {}).expect("first");
        let mut a = chain_of(3, &first[0].id);
        let b = chain_of(1, &a[0].id);
        let mut other = b[0].clone();
        other.decision = "a sibling".into();
        other.id = proto::id::tick_id(
            &other.decision,
            &other.observe,
            &other.grounds,
            &other.parent_id,
        );
        a.push(other);
        for t in &a {
            fs::write(s.ticks_dir().join(&t.id), t.file_bytes()).expect("write");
        }
        drop(s);
        let mut s = Store::new(d.path().to_path_buf());
        crate::store::lock::released_soon(|| s.acquire("test")).expect("reopen");
        assert_eq!(
            s.head().expect("head"),
            first[0].id,
            "ambiguous: HEAD stays"
        );
    }

    #[test]
    fn a_second_owner_is_refused_naming_the_first() {
        let (d, mut s) = store();
        s.acquire("evd").expect("lock");
        let mut other = Store::new(d.path().to_path_buf());
        let e = other.acquire("evctl").expect_err("refused");
        assert_eq!(e.code, codes::LOCKED);
        assert!(
            e.message
                .contains(&format!("evd pid {}", std::process::id())),
            "{}",
            e.message
        );
    }
}
