//! One `.evolving/` store on disk: its layout, its lock, a cache of parsed ticks, and the
//! crash-safe append (tick durable first, then HEAD).

pub mod config;
pub mod lock;
pub mod receipt_cache;
pub mod requests;
pub mod results;
pub mod state_files;
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
    audit: Option<crate::engine::audit::AuditSlot>,
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

/// The canonical root a request names. Relative or missing paths are refused clearly.
pub fn resolve_root(ctx: &proto::rpc::Context) -> Result<PathBuf, Refusal> {
    let p = Path::new(&ctx.store);
    if ctx.store.is_empty() || !p.is_absolute() {
        return Err(Refusal::new(
            proto::rpc::codes::BAD_STORE,
            "store_path",
            format!(
                "store path must be absolute (got {})",
                proto::json::q(&ctx.store)
            ),
        ));
    }
    std::fs::canonicalize(p).map_err(|e| {
        Refusal::new(
            proto::rpc::codes::BAD_STORE,
            "store_path",
            format!("cannot open store directory {}: {e}", p.display()),
        )
    })
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
    /// Moves whenever the tick cache took in a change.
    ticks_generation: u64,
    /// The current view as of a tick generation.
    view: Option<(u64, Arc<CurrentView>)>,
    /// The caller of the write being served, for the events it causes.
    pub current_agent: Option<String>,
    /// The write requests this store applied, by client request id (exactly-once writes).
    pub requests: crate::store::requests::RequestLog,
    /// The id of the write request being served, if it has one: an append records its intent
    /// under it first.
    pub current_request: Option<String>,
    /// How many times the lock was found gone and the store opened afresh (see
    /// [`Store::lock_losses`]).
    lock_losses: u64,
    /// What every appended tick must pass besides the write limits, registered by the
    /// features that know (see [`Store::check_ticks_with`]).
    tick_checks: Vec<TickCheck>,
}

/// A rule a tick must pass before it is appended: given the store's root and the tick.
pub type TickCheck = fn(&Path, &Tick) -> Result<(), Refusal>;

/// The current view: `(file name, tick)`, newest first.
pub type CurrentView = Vec<(Arc<str>, Arc<PackedTick>)>;

/// The entries of `ticks/`, as listed fresh for the audit.
pub struct TicksListing {
    /// Every regular file and symlink: `(name, is a symlink)`, in directory order.
    pub files: Vec<(String, bool)>,
    /// Every other entry, by name, with what it is ("a directory"), sorted by name.
    pub odd: Vec<(String, &'static str)>,
}

/// The name of the lock file, under `results/` (the per-host part nobody commits).
pub const LOCK_FILE: &str = "evd.lock";

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
            lock_losses: 0,
            files: BTreeMap::new(),
            ticks_stamp: None,
            watch: None,
            watch_error: None,
            writes: 0,
            opened_at: crate::engine::clock::now_rfc3339(),
            ticks_generation: 0,
            view: None,
            current_agent: None,
            requests: crate::store::requests::RequestLog::new(&results),
            current_request: None,
            tick_checks: Vec::new(),
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
    /// Add a rule every tick must pass before it is appended (a feature above the store, such
    /// as evidence citations, registers its own).
    pub fn check_ticks_with(&mut self, check: TickCheck) {
        self.tick_checks.push(check);
    }

    /// The write limits, then every registered rule.
    fn check_tick(&self, tick: &Tick) -> Result<(), Refusal> {
        crate::engine::limits::check_tick(tick)?;
        self.tick_checks
            .iter()
            .try_for_each(|c| c(&self.root, tick))
    }

    /// How many times [`Store::acquire`] found the lock gone and opened the store afresh: what
    /// was kept about the store before is stale when this moves.
    pub fn lock_losses(&self) -> u64 {
        self.lock_losses
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
                self.lock_losses += 1;
                self.requests.reset();
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

    /// Why `ticks/` is served degraded (it could not be watched, so every answer is validated
    /// against the disk first), or `None` when it is watched.
    pub fn degraded(&self) -> Option<String> {
        self.watch_error.clone()
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
    ) -> Option<(&crate::engine::audit::AuditSlot, Option<&PackedTick>)> {
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
        slot: impl FnOnce(Option<&PackedTick>) -> crate::engine::audit::AuditSlot,
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
        self.check_tick(&tick)?;
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
            self.check_tick(t)?;
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
