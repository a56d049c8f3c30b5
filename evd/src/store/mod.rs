//! One `.evolving/` store on disk: its layout, its lock and HEAD, the events log, the request
//! log of exactly-once writes, with the cache of parsed ticks ([`tick_cache`]) and the
//! crash-safe appends ([`append`]: tick durable first, then HEAD) beside it. It knows no
//! feature built on a store (ledger, evidence, memos, verbs): a rule every append must pass is
//! registered with [`Store::check_ticks_with`].

pub mod append;
pub mod config;
pub mod lock;
pub mod receipt_cache;
pub mod repair;
pub mod requests;
pub mod results;
pub mod state_files;
pub mod state_record;
pub mod tick_cache;

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proto::rpc::{codes, Refusal};
use proto::Tick;

use self::lock::{Holder, LockFile};
pub use self::tick_cache::{CurrentView, Entry, TickCache, TickImage};
use crate::engine::packed::PackedTick;
use crate::store::config::{Config, DEFAULT_CONFIG};
use crate::sys::fsio;

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

/// Where the image of a store's parsed ticks is kept for the next daemon (host-local, like the
/// rest of `results/`; see [`TickCache::image`]).
pub const TICK_IMAGE: &str = "evd-ticks.image";
/// An image larger than this is not read (some million ticks' worth).
const IMAGE_LIMIT: u64 = 2 << 30;

/// The store at `<root>/.evolving`.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    ev: PathBuf,
    lock: Option<LockFile>,
    /// The parsed ticks of `ticks/`.
    cache: TickCache,
    /// How many parsed ticks were taken back from the tick image when the store was opened.
    pub ticks_from_image: usize,
    /// The evd build images are kept for (see [`crate::open::image`]); `None`: none are.
    pub image_build: Option<Arc<str>>,
    pub writes: u64,
    pub opened_at: String,
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
        let cache = TickCache::new(ev.join("ticks"));
        Store {
            root,
            ev,
            lock: None,
            lock_losses: 0,
            cache,
            ticks_from_image: 0,
            image_build: None,
            writes: 0,
            opened_at: crate::engine::clock::now_rfc3339(),
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

    /// Refuse with the no-store message unless the store exists, and refuse a store whose HEAD
    /// a merge left with git's conflict markers (naming the repair) rather than read or write
    /// it as if HEAD named a tick.
    pub fn require(&self) -> Result<(), Refusal> {
        self.require_present()?;
        self.refuse_conflicted_head()
    }

    /// Refuse a store whose HEAD holds git's conflict markers, naming the repair.
    pub fn refuse_conflicted_head(&self) -> Result<(), Refusal> {
        // On every request: one stat. HEAD naming a tick is 12 bytes (14 with a CRLF); git's
        // three marker lines alone take 24.
        match fs::symlink_metadata(self.ev.join("HEAD")) {
            Ok(m) if m.is_file() && m.len() > 16 => {}
            _ => return Ok(()),
        }
        if proto::head::has_conflict_markers(&self.head_raw()?) {
            return Err(Refusal::new(
                codes::BAD_STORE,
                "conflicted_head",
                format!(
                    "store {}: .evolving/HEAD holds git's conflict markers (a merge left it \
                     unresolved); `evctl doctor --fix` resolves it (`evctl doctor` first shows \
                     what it would do)",
                    self.root.display()
                ),
            ));
        }
        Ok(())
    }

    /// Refuse with the no-store message unless the store exists (whatever HEAD holds).
    pub fn require_present(&self) -> Result<(), Refusal> {
        if self.exists()? {
            Ok(())
        } else {
            Err(Refusal::no_store())
        }
    }

    /// Become the store's only writer. Refused, naming the holder, when another process owns it.
    /// Also finishes an append a crash interrupted (see [`Store::recover_head`]).
    pub fn acquire(&mut self, kind: &str) -> Result<(), Refusal> {
        self.acquire_then(kind, |_| {})
    }

    /// [`Store::acquire`], running `after_image` as soon as the image of the parsed ticks was
    /// taken back (before the first scan confirms it: see [`Store::tick_image_view_unconfirmed`])
    /// when this call opens the store.
    pub fn acquire_then(
        &mut self,
        kind: &str,
        after_image: impl FnOnce(&mut Store),
    ) -> Result<(), Refusal> {
        self.check_layout()?;
        match &self.lock {
            Some(l) if l.still_valid() => return Ok(()),
            Some(_) => {
                // The store was removed (or its results/) under us: start afresh.
                tracing::info!(store = %self.root.display(), "the store's lock file went away; re-opening");
                self.lock = None;
                self.cache.reset();
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
        // git keeps no empty directory: a store committed before its first decision has no
        // `ticks/` in a clone, a new worktree, or after switching branches. Missing is empty:
        // made here, so that the first write lands and the directory is watched from the start.
        match fs::create_dir(self.ticks_dir()) {
            Ok(()) => {
                tracing::info!(store = %self.root.display(), "ticks/ was missing (git keeps no empty directory): created")
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                tracing::warn!(store = %self.root.display(), error = %e, "ticks/ is missing and cannot be created")
            }
        }
        self.clean_temp();
        self.take_tick_image();
        after_image(self);
        self.recover_head()?;
        Ok(())
    }

    /// Before the first scan of `ticks/`, take back the image of the parsed ticks the last
    /// daemon left (see [`TickCache::take_image`]): each tick whose file is found unchanged is
    /// not read and parsed again. A missing, damaged or foreign image is simply not used.
    fn take_tick_image(&mut self) {
        if self.cache.loaded() {
            return;
        }
        let path = self.results_dir().join(TICK_IMAGE);
        if fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            self.cache.look_ahead();
        }
        let started = std::time::Instant::now();
        match fsio::read_limited(&path, IMAGE_LIMIT) {
            Ok(bytes) => {
                let read = started.elapsed();
                let bytes = Arc::new(bytes);
                let taken = self.cache.take_image(&bytes, self.image_build.as_deref());
                self.ticks_from_image = taken;
                tracing::debug!(
                    store = %self.root.display(),
                    taken,
                    bytes = bytes.len(),
                    read_ms = read.as_secs_f64() * 1e3,
                    decode_ms = (started.elapsed() - read).as_secs_f64() * 1e3,
                    "tick image taken back"
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::debug!(store = %self.root.display(), error = %e, "tick image not used")
            }
        }
    }

    /// What an image of the parsed ticks for the next daemon holds (see [`TickCache::image`]),
    /// with the view computed if the cache moved since it last was; `None` when the cache has
    /// not read `ticks/` or this daemon no longer holds the store.
    pub fn tick_image(&mut self) -> Option<tick_cache::TickImage> {
        if !self.cache.loaded() || !self.lock_is_valid() {
            return None;
        }
        let _ = self.cache.current_shared();
        Some(self.cache.image())
    }

    /// Whether the tick image taken back was whole (see [`TickCache::image_whole`]).
    pub fn tick_image_whole(&self) -> bool {
        self.cache.image_whole()
    }

    /// The checksum of the tick image the cache took back (see [`TickCache::image_sum`]).
    pub fn tick_image_sum(&self) -> Option<u64> {
        self.cache.image_sum()
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
            if proto::head::has_conflict_markers(head) {
                return Some(
                    "HEAD holds git's conflict markers (a merge left it unresolved; `evctl doctor --fix` resolves it)"
                        .into(),
                );
            }
            return Some(format!(
                "HEAD holds {shown:?} ({} bytes), which is not a tick id (12 lowercase hex; `evctl doctor --fix` repairs it)",
                head.len()
            ));
        }
        match fs::symlink_metadata(self.ticks_dir().join(head)) {
            Ok(m) if m.is_file() => None,
            Ok(m) => Some(format!(
                "HEAD names {head}, but ticks/{head} is {}, not a tick file",
                crate::sys::fsio::kind_of(&m)
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Some(format!(
                "HEAD names {head}, but there is no ticks/{head} (`evctl doctor --fix` repairs it)"
            )),
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
        self.head_raw().map(|h| h.trim().to_string())
    }

    /// HEAD's text as the file holds it; a missing file reads as empty.
    pub fn head_raw(&self) -> Result<String, Refusal> {
        fsio::read_text_opt(&self.ev.join("HEAD"))
            .map(Option::unwrap_or_default)
            .map_err(|e| Refusal::io(format!("reading HEAD: {e}")))
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

    /// `ticks/`, walked to once (no link below the repository's root followed), to read many
    /// of its files through; `None` when it cannot be (each read then walks on its own).
    pub fn ticks_handle(&self) -> Option<crate::sys::beneath::Dir> {
        crate::sys::beneath::Root::new(&self.root)
            .dir(&self.ticks_dir())
            .ok()
    }

    /// One file of `ticks/` read fresh for the audit (through `dir`, [`Store::ticks_handle`],
    /// when given): its text, or the whole-store error it causes as upstream words it.
    pub fn read_for_audit(
        &self,
        dir: Option<&crate::sys::beneath::Dir>,
        name: &str,
        symlink: bool,
    ) -> Result<String, String> {
        if symlink {
            return Err(format!(
                "{name} is a symlink (evd never follows links inside a store)"
            ));
        }
        match dir {
            Some(d) => d
                .read(std::ffi::OsStr::new(name))
                .map_err(|e| e.to_string())
                .and_then(|(_, b)| {
                    String::from_utf8(b).map_err(|_| "stream did not contain valid UTF-8".into())
                }),
            None => fsio::read_text(&self.ticks_dir().join(name)).map_err(|e| e.to_string()),
        }
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
    /// Bring the tick cache up to date with `ticks/` (see [`TickCache::refresh`]).
    pub fn refresh(&mut self) -> Result<(), Refusal> {
        self.cache.refresh()
    }

    /// Every file of `ticks/`, refreshed (see [`TickCache::entries`]).
    pub fn entries(&mut self) -> Result<Vec<(&str, &Entry)>, Refusal> {
        self.cache.entries()
    }

    /// Refresh, and fail like upstream's whole-store read when any file is not JSON.
    pub fn readable(&mut self) -> Result<(), Refusal> {
        self.cache.readable()
    }

    /// Every parseable tick, refreshed (whole-store read rules apply).
    pub fn ticks(&mut self) -> Result<Vec<(&str, &PackedTick)>, Refusal> {
        self.cache.ticks()
    }

    /// The current view, each tick rebuilt whole (see [`TickCache::current_ticks`]).
    pub fn current_ticks(&mut self) -> Result<Vec<(&str, Tick)>, Refusal> {
        self.cache.current_ticks()
    }

    /// The current view, newest first (see [`TickCache::current`]).
    pub fn current(&mut self) -> Result<Vec<(&str, &PackedTick)>, Refusal> {
        self.cache.current()
    }

    /// The current view as shared handles (see [`TickCache::current_shared`]).
    pub fn current_shared(&mut self) -> Result<Arc<CurrentView>, Refusal> {
        self.cache.current_shared()
    }

    /// Why `ticks/` is served degraded (it could not be watched, so every answer is validated
    /// against the disk first), or `None` when it is watched.
    pub fn degraded(&self) -> Option<String> {
        self.cache.watch_error()
    }

    /// A number that moves whenever the tick cache took in a change (call after a refresh).
    pub fn ticks_generation(&self) -> u64 {
        self.cache.generation()
    }

    /// The cached entry for one file name as last refreshed (no look at the disk).
    pub fn cached_entry(&self, name: &str) -> Option<Entry> {
        self.cache.cached_entry(name)
    }

    /// The cached entry for one file name (after a refresh), without the whole-store rule.
    pub fn entry(&mut self, name: &str) -> Result<Option<Entry>, Refusal> {
        self.cache.entry(name)
    }

    /// Whether the tick cache has read `ticks/` at least once.
    pub fn tick_cache_loaded(&self) -> bool {
        self.cache.loaded()
    }

    /// The view the tick image taken back holds, before the first scan confirmed it (see
    /// [`TickCache::image_view_unconfirmed`]).
    pub fn tick_image_view_unconfirmed(&mut self) -> Option<Arc<tick_cache::CurrentView>> {
        self.cache.image_view_unconfirmed()
    }

    /// The tick generation at which the cache held exactly the image it took back (see
    /// [`TickCache::image_generation`]).
    pub fn tick_image_generation(&self) -> Option<u64> {
        self.cache.image_generation()
    }

    /// How many files of `ticks/` the cache holds.
    pub fn tick_count(&self) -> usize {
        self.cache.len()
    }

    /// Whether `ticks/` is watched (see [`TickCache::watched`]).
    pub fn ticks_watched(&self) -> bool {
        self.cache.watched()
    }

    /// Whether the tick cache has read `ticks/` at least once.
    pub fn ticks_loaded(&self) -> bool {
        self.cache.loaded()
    }

    /// The serial of the cached read of one file (see [`TickCache::serial`]).
    pub fn tick_serial(&self, name: &str) -> Option<u64> {
        self.cache.serial(name)
    }

    /// The audit `verify` kept for one file (see [`TickCache::kept_audit`]).
    pub fn kept_audit(
        &self,
        name: &str,
    ) -> Option<(&crate::engine::audit::AuditSlot, Option<&PackedTick>)> {
        self.cache.kept_audit(name)
    }

    /// Keep `verify`'s audit of one file (see [`TickCache::keep_audit`]).
    pub fn keep_audit(
        &mut self,
        name: &str,
        serial: u64,
        slot: impl FnOnce(Option<&PackedTick>) -> crate::engine::audit::AuditSlot,
    ) {
        self.cache.keep_audit(name, serial, slot)
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
