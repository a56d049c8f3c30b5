//! Every directory evd watches, through one `notify` watcher for the whole daemon, on every
//! platform.
//!
//! On Linux the watcher is one inotify instance, whose per-user limit is small (128 by default)
//! and shared with every other program of the user, so evd never creates more than one,
//! whatever the number of stores: each watched directory is one watch on the [`Hub`]'s watcher,
//! shared by everyone who watches that directory, and given back when the last of them lets go.
//! Elsewhere it is the platform's own mechanism (FSEvents on macOS, kqueue on the BSDs).
//!
//! Two kinds of consumer read it:
//! - A synchronous one ([`DirWatch::drain`], as the tick cache, the receipt cache and the
//!   state-file watch do) takes what changed at the start of a request, and "nothing changed"
//!   must be trustworthy about every write that finished before the drain began. notify hands
//!   events over on its own thread, so a drain first sends a *fence*: it writes to a private,
//!   unlinked file watched by the same instance and waits (bounded) until that write's event
//!   has been handed over. inotify delivers one instance's events in order, so everything
//!   queued before the fence has then been routed to its consumer. A fence that does not come
//!   back in time makes the drain say [`Changes::Rescan`], never a false `Quiet`. Where events
//!   are not delivered in order (FSEvents, kqueue), no synchronous watch is given at all: its
//!   owner validates against the disk instead (see docs/platforms.md).
//! - A live one (a [`Listener`], as the store watcher uses) is called from the hub's own thread,
//!   debounced, with what changed, so verdicts are pushed without any request.
//!
//! A consumer whose watch cannot be made (the watch limit, a missing directory, watching turned
//! off with `EVD_NO_WATCH`, a platform without ordered events) gets a [`WatchError`] with the
//! reason; its owner then validates against the disk on every use instead (slower, never
//! stale), and says so in `status`.
//!
//! This module must never call into notify while holding the hub's state lock: notify's own
//! thread takes that lock to route events, and notify's `watch`/`unwatch` wait for that thread.
//!
//! It is one file (some 800 lines of code, its tests after) because it is one concern that
//! reads best whole: the shared watches, the fence and the routing of events all hold the same
//! two locks in one order, and the invariants above are only checkable with all of it in view.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use notify::event::ModifyKind;
use notify::{Config, Event, EventKind, EventKindMask, RecommendedWatcher, Watcher as _};

use super::common::{Changes, HubStats, Listener, WatchError, DEBOUNCE, MAX_PENDING_NAMES};

/// Writes, creations, removals, renames and attribute changes, and a close after writing; never
/// opens or reads (every reader of a store would queue one event per file it opens). notify
/// turns this into the kernel's watch mask, so what is left out is never even queued.
fn kinds() -> EventKindMask {
    EventKindMask::CORE | EventKindMask::ACCESS_CLOSE
}

/// Whether this platform's watcher hands over one watcher's events in the order they happened,
/// which a fence needs. Only inotify promises it; FSEvents coalesces and reorders within its
/// latency, and notify's kqueue backend watches each entry on its own.
const ORDERED: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// How long after a failed watcher creation the hub tries again.
const INIT_RETRY: Duration = Duration::from_secs(5);

/// How long a drain waits for its fence before it gives up and says `Rescan`. The watcher's
/// thread may first have a long queue to hand over (a burst of writes), so this is generous;
/// it is only ever reached when that thread is stuck.
const FENCE_WAIT: Duration = Duration::from_secs(5);

thread_local! {
    /// When the request this thread serves began (see [`RequestScope`]).
    static REQUEST_START: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// One request served on this thread: while it lives, the drains made on the thread share a
/// fence written after it began (a drain's promise is about changes that finished before the
/// request arrived), instead of each writing its own. Without one, every drain fences.
pub struct RequestScope {
    outer: Option<Instant>,
}

impl RequestScope {
    pub fn begin() -> RequestScope {
        RequestScope {
            outer: REQUEST_START.with(|c| c.replace(Some(Instant::now()))),
        }
    }
}

impl Drop for RequestScope {
    fn drop(&mut self) {
        REQUEST_START.with(|c| c.set(self.outer));
    }
}

/// The one watcher and who watches what through it.
pub struct Hub {
    /// The watcher itself, locked around every call into it (and never while `inner` is held).
    watcher: Mutex<Watcher>,
    inner: Mutex<Inner>,
    /// Signalled when a fence's event was handed over (or the fence broke).
    fenced: Condvar,
    /// Set (and signalled) when a live consumer has something pending.
    live_pending: Mutex<bool>,
    live_wake: Condvar,
    pump: OnceLock<()>,
    /// Why watching is turned off altogether (`EVD_NO_WATCH`), if it is.
    refuse: Option<String>,
}

struct Watcher {
    watcher: Option<RecommendedWatcher>,
    init_failed: Option<(Instant, String)>,
}

struct Inner {
    /// Whether the watcher exists (mirrors `Watcher::watcher`, for the stats).
    running: bool,
    /// Watched directories by the path they were watched under (notify names events by it).
    dirs: HashMap<PathBuf, Dir>,
    /// The paths of each directory by (device, inode): two spellings of one directory share one
    /// kernel watch, and notify names its events by only one of them.
    aliases: HashMap<(u64, u64), Vec<PathBuf>>,
    consumers: HashMap<u64, Consumer>,
    next_id: u64,
    fence: Option<Fence>,
    /// When making the fence last failed (it is tried again after [`INIT_RETRY`]).
    fence_failed: Option<Instant>,
    /// Paths whose directory went away while watched: notify may still hold a watch under
    /// that name (a moved directory keeps its watch), given back before the path is watched
    /// again so that the new directory there is the one watched.
    stale: Vec<PathBuf>,
}

struct Dir {
    key: (u64, u64),
    consumers: Vec<u64>,
    live: usize,
}

struct Consumer {
    /// The watched path; `None` once the directory went away (the consumer must rescan and
    /// watch again).
    path: Option<PathBuf>,
    names: BTreeSet<String>,
    rescan: bool,
    listener: Option<Listener>,
}

/// The private file a drain writes to, and how far its writes have come back.
struct Fence {
    file: File,
    path: PathBuf,
    /// Writes made, and writes whose event was handed over; at most one is in flight, so two
    /// writes' events never merge in the kernel's queue.
    issued: u64,
    seen: u64,
    /// When the newest write was made.
    issued_at: Option<Instant>,
}

impl Consumer {
    fn pending(&self) -> bool {
        self.rescan || !self.names.is_empty()
    }

    fn take(&mut self) -> Changes {
        let names = std::mem::take(&mut self.names);
        if std::mem::take(&mut self.rescan) || self.path.is_none() {
            Changes::Rescan
        } else if names.is_empty() {
            Changes::Quiet
        } else {
            Changes::Names(names)
        }
    }

    fn note(&mut self, name: &str) {
        if !self.rescan {
            self.names.insert(name.to_string());
            if self.names.len() > MAX_PENDING_NAMES {
                self.names.clear();
                self.rescan = true;
            }
        }
    }

    fn lose(&mut self) {
        self.rescan = true;
        self.names.clear();
        self.path = None;
    }
}

/// The daemon's hub, created on first use. `EVD_NO_WATCH` (any non-empty value) turns
/// watching off: every store is then served degraded, validated against the disk.
pub fn hub() -> &'static Hub {
    static HUB: OnceLock<Hub> = OnceLock::new();
    HUB.get_or_init(|| {
        let refuse = std::env::var_os("EVD_NO_WATCH")
            .filter(|v| !v.is_empty())
            .map(|_| "watching is turned off (EVD_NO_WATCH is set)".to_string());
        Hub::new(refuse)
    })
}

impl Hub {
    pub(super) fn new(refuse: Option<String>) -> Hub {
        Hub {
            watcher: Mutex::new(Watcher {
                watcher: None,
                init_failed: None,
            }),
            inner: Mutex::new(Inner {
                running: false,
                dirs: HashMap::new(),
                aliases: HashMap::new(),
                consumers: HashMap::new(),
                next_id: 0,
                fence: None,
                fence_failed: None,
                stale: Vec::new(),
            }),
            fenced: Condvar::new(),
            live_pending: Mutex::new(false),
            live_wake: Condvar::new(),
            pump: OnceLock::new(),
            refuse,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent-enough maps: keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_watcher(&self) -> MutexGuard<'_, Watcher> {
        self.watcher.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The watcher, created on first use (and retried a while after a failure).
    fn ensure_watcher<'a>(
        &'static self,
        w: &'a mut Watcher,
    ) -> Result<&'a mut RecommendedWatcher, WatchError> {
        if w.watcher.is_none() {
            if let Some((at, why)) = &w.init_failed {
                if at.elapsed() < INIT_RETRY {
                    return Err(WatchError(why.clone()));
                }
            }
            let config = Config::default().with_event_kinds(kinds());
            match RecommendedWatcher::new(move |ev| self.on_event(ev), config) {
                Ok(n) => {
                    w.watcher = Some(n);
                    w.init_failed = None;
                    self.lock().running = true;
                }
                Err(e) => {
                    let why = init_error(&e);
                    w.init_failed = Some((Instant::now(), why.clone()));
                    return Err(WatchError(why));
                }
            }
        }
        w.watcher
            .as_mut()
            .ok_or_else(|| WatchError("no watcher".into()))
    }

    /// Watch `dir` (not following a symlink). With a `listener`, changes are also delivered to
    /// it from the hub's thread; a drain then still works as usual (where events are ordered).
    pub fn watch(
        &'static self,
        dir: &Path,
        listener: Option<Listener>,
    ) -> Result<DirWatch, WatchError> {
        if let Some(why) = &self.refuse {
            return Err(WatchError(why.clone()));
        }
        if listener.is_none() && !ORDERED {
            return Err(WatchError(format!(
                "this platform's watcher ({}) does not deliver events in order, so a change \
                 cannot be ruled out without reading the disk",
                std::env::consts::OS
            )));
        }
        let meta = std::fs::symlink_metadata(dir)
            .map_err(|e| WatchError(format!("cannot watch {}: {e}", dir.display())))?;
        if !meta.is_dir() {
            return Err(WatchError(format!(
                "cannot watch {}: not a directory",
                dir.display()
            )));
        }
        let key = (meta.dev(), meta.ino());
        let live = listener.is_some();
        let mut w = self.lock_watcher();
        // Registered first, so that no event of the new watch finds nobody to route it to.
        let (id, fresh, stale) = {
            let mut inner = self.lock();
            inner.next_id += 1;
            let id = inner.next_id;
            let fresh = !inner.dirs.contains_key(dir);
            inner.add(dir, key, id, listener);
            (id, fresh, std::mem::take(&mut inner.stale))
        };
        if let Some(n) = w.watcher.as_mut() {
            for p in &stale {
                // Fails when notify already let go of it (the directory was removed).
                let _ = n.unwatch(p);
            }
        }
        if fresh {
            let added = self.ensure_watcher(&mut w).and_then(|n| {
                let config = notify::WatchPathConfig::new(notify::RecursiveMode::NonRecursive)
                    .with_dereference_symlinks(false);
                n.watch_with(dir, config)
                    .map_err(|e| WatchError(add_error(dir, &e)))
            });
            if let Err(e) = added {
                self.lock().remove(id);
                return Err(e);
            }
        }
        drop(w);
        if live {
            self.start_pump();
        }
        Ok(DirWatch { hub: self, id })
    }

    /// How many instances, watches and handles the hub holds right now.
    pub fn stats(&self) -> HubStats {
        let inner = self.lock();
        HubStats {
            instances: usize::from(inner.running),
            watches: inner.dirs.len(),
            consumers: inner.consumers.len(),
        }
    }

    /// Everything handed over for consumer `id` since its last drain, after a fence: every
    /// event queued before this call has been routed.
    fn drain(&'static self, id: u64, strict: bool) -> Changes {
        let fenced = ORDERED && self.fence(strict);
        let mut inner = self.lock();
        match inner.consumers.get_mut(&id) {
            Some(c) if fenced => c.take(),
            Some(c) => {
                c.rescan = true;
                c.take()
            }
            None => Changes::Rescan,
        }
    }

    /// Send a fence through the watcher and wait until it comes back. `false` when it cannot
    /// be sent or did not come back within [`FENCE_WAIT`].
    fn fence(&'static self, strict: bool) -> bool {
        let deadline = Instant::now() + FENCE_WAIT;
        let mut inner = self.lock();
        if inner.fence.is_none() {
            if inner
                .fence_failed
                .is_some_and(|at| at.elapsed() < INIT_RETRY)
            {
                return false;
            }
            drop(inner);
            if let Err(e) = self.make_fence() {
                tracing::warn!(error = %e, "cannot make the watch fence; drains rescan");
                self.lock().fence_failed = Some(Instant::now());
                return false;
            }
            inner = self.lock();
        }
        let Some(f) = inner.fence.as_ref() else {
            return false;
        };
        // A write made from now on: one already in flight may have been queued before a change
        // that finished before this call. Within a request (see [`RequestScope`]), a write made
        // since the request began is enough: every change that finished before the request
        // began was queued before it, which is all a drain promises. The drains of one request
        // (ticks, receipts, state files, the work tree…) then share one fence.
        let since = if strict {
            None
        } else {
            REQUEST_START.with(std::cell::Cell::get)
        };
        let target = match since {
            Some(s) if f.issued_at.is_some_and(|at| at >= s) => f.issued,
            _ => f.issued + 1,
        };
        let path = f.path.clone();
        loop {
            let Some(f) = inner.fence.as_mut().filter(|f| f.path == path) else {
                return false; // broken and replaced meanwhile
            };
            if f.seen >= target {
                return true;
            }
            if f.seen == f.issued {
                f.issued += 1;
                f.issued_at = Some(Instant::now());
                if let Err(e) = f.file.write_at(b"f", 0) {
                    tracing::warn!(error = %e, "cannot write the watch fence; drains rescan");
                    inner.fence = None;
                    self.fenced.notify_all();
                    return false;
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!("the watch fence did not come back; drains rescan");
                // Its late event must not be taken for a later write's: a new fence next time.
                inner.fence = None;
                self.fenced.notify_all();
                return false;
            }
            inner = match self.fenced.wait_timeout(inner, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// Create the fence file, watch it, and unlink it: the open file stays watched, and nothing
    /// is left behind however the process ends.
    fn make_fence(&'static self) -> Result<(), String> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut w = self.lock_watcher();
        if self.lock().fence.is_some() {
            return Ok(());
        }
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(".evd-fence-{}-{n}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let watched = self.ensure_watcher(&mut w).map_err(|e| e.0).and_then(|n| {
            let config = notify::WatchPathConfig::new(notify::RecursiveMode::NonRecursive)
                .with_dereference_symlinks(false);
            n.watch_with(&path, config).map_err(|e| e.to_string())
        });
        let _ = std::fs::remove_file(&path);
        watched?;
        // Set while the watcher lock is still held: no one else makes a second fence meanwhile.
        self.lock().fence = Some(Fence {
            file,
            path,
            issued: 0,
            seen: 0,
            issued_at: None,
        });
        drop(w);
        Ok(())
    }

    /// Everything live consumers have pending, taken.
    fn collect_live(&self) -> Vec<(Listener, Changes)> {
        let mut inner = self.lock();
        inner
            .consumers
            .values_mut()
            .filter(|c| c.pending())
            .filter_map(|c| {
                let l = c.listener.clone()?;
                Some((l, c.take()))
            })
            .collect()
    }

    fn release(&self, id: u64) {
        // The watcher lock first: nobody watches the path again before it is given back.
        let mut w = self.lock_watcher();
        let last = self.lock().remove(id);
        if let (Some(path), Some(n)) = (last, w.watcher.as_mut()) {
            // Fails only when the watch is already gone (the directory was removed).
            let _ = n.unwatch(&path);
        }
    }

    /// Called on notify's thread with each event, in order.
    fn on_event(&self, ev: notify::Result<Event>) {
        let mut inner = self.lock();
        let (live, fenced) = match ev {
            Err(e) => {
                tracing::warn!(error = %e, "the watcher reported an error; everything rescans");
                (inner.everyone_rescans(), false)
            }
            Ok(ev) if ev.need_rescan() => (inner.everyone_rescans(), false),
            Ok(ev) => inner.route(&ev),
        };
        drop(inner);
        if fenced {
            self.fenced.notify_all();
        }
        if live {
            let mut p = self.live_pending.lock().unwrap_or_else(|e| e.into_inner());
            *p = true;
            self.live_wake.notify_one();
        }
    }

    /// The thread that delivers live changes: it wakes when a live consumer has something
    /// pending, lets changes settle, then calls listeners.
    fn start_pump(&'static self) {
        self.pump.get_or_init(|| {
            let spawned = std::thread::Builder::new()
                .name("evd-watch".into())
                .spawn(move || self.pump());
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start the watch thread; live pushes stop");
            }
        });
    }

    fn pump(&'static self) {
        loop {
            {
                let mut p = self.live_pending.lock().unwrap_or_else(|e| e.into_inner());
                while !*p {
                    p = self.live_wake.wait(p).unwrap_or_else(|e| e.into_inner());
                }
                *p = false;
            }
            std::thread::sleep(DEBOUNCE);
            for (listener, changes) in self.collect_live() {
                listener(changes);
            }
        }
    }
}

impl Inner {
    fn add(&mut self, dir: &Path, key: (u64, u64), id: u64, listener: Option<Listener>) {
        let d = self.dirs.entry(dir.to_path_buf()).or_insert_with(|| Dir {
            key,
            consumers: Vec::new(),
            live: 0,
        });
        d.consumers.push(id);
        d.live += usize::from(listener.is_some());
        let paths = self.aliases.entry(d.key).or_default();
        if !paths.iter().any(|p| p == dir) {
            paths.push(dir.to_path_buf());
        }
        self.consumers.insert(
            id,
            Consumer {
                path: Some(dir.to_path_buf()),
                names: BTreeSet::new(),
                rescan: false,
                listener,
            },
        );
    }

    /// Forget consumer `id`; returns the path whose last consumer it was.
    fn remove(&mut self, id: u64) -> Option<PathBuf> {
        let c = self.consumers.remove(&id)?;
        let path = c.path?;
        let d = self.dirs.get_mut(&path)?;
        d.consumers.retain(|x| *x != id);
        d.live -= usize::from(c.listener.is_some());
        if !d.consumers.is_empty() {
            return None;
        }
        let key = d.key;
        self.dirs.remove(&path);
        self.forget_alias(key, &path);
        Some(path)
    }

    fn forget_alias(&mut self, key: (u64, u64), path: &Path) {
        if let Some(paths) = self.aliases.get_mut(&key) {
            paths.retain(|p| p != path);
            if paths.is_empty() {
                self.aliases.remove(&key);
            }
        }
    }

    /// Every watched path naming the same directory as `path` (itself included).
    fn spellings(&self, path: &Path) -> Vec<PathBuf> {
        match self.dirs.get(path) {
            Some(d) => self
                .aliases
                .get(&d.key)
                .cloned()
                .unwrap_or_else(|| vec![path.to_path_buf()]),
            None => Vec::new(),
        }
    }

    fn everyone_rescans(&mut self) -> bool {
        for c in self.consumers.values_mut() {
            c.names.clear();
            c.rescan = true;
        }
        self.consumers.values().any(|c| c.listener.is_some())
    }

    /// Hand one event to the consumers it concerns. Returns whether a live consumer now has
    /// something pending, and whether it was the fence's.
    fn route(&mut self, ev: &Event) -> (bool, bool) {
        let mut live = false;
        let mut fenced = false;
        for p in &ev.paths {
            if let Some(f) = self.fence.as_mut().filter(|f| &f.path == p) {
                if matches!(ev.kind, EventKind::Modify(ModifyKind::Data(_))) && f.seen < f.issued {
                    f.seen += 1;
                    fenced = true;
                }
                continue;
            }
            // The directory itself removed, moved or unmounted: its watch is gone.
            let lost = matches!(
                ev.kind,
                EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
            );
            if lost && self.dirs.contains_key(p) {
                for dir in self.spellings(p) {
                    if let Some(d) = self.dirs.remove(&dir) {
                        live |= d.live > 0;
                        self.forget_alias(d.key, &dir);
                        for id in &d.consumers {
                            if let Some(c) = self.consumers.get_mut(id) {
                                c.lose();
                            }
                        }
                        self.stale.push(dir);
                    }
                }
            }
            let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
                continue;
            };
            let Some(d) = self.dirs.get(parent) else {
                continue;
            };
            let name = name.to_string_lossy();
            let shared = self.aliases.get(&d.key).is_some_and(|a| a.len() > 1);
            if !shared {
                live |= d.live > 0;
                for id in &d.consumers {
                    if let Some(c) = self.consumers.get_mut(id) {
                        c.note(&name);
                    }
                }
                continue;
            }
            for dir in self.spellings(parent) {
                let Some(d) = self.dirs.get(&dir) else {
                    continue;
                };
                live |= d.live > 0;
                for id in &d.consumers {
                    if let Some(c) = self.consumers.get_mut(id) {
                        c.note(&name);
                    }
                }
            }
        }
        (live, fenced)
    }
}

fn init_error(e: &notify::Error) -> String {
    match &e.kind {
        notify::ErrorKind::Io(io) if io.raw_os_error() == Some(libc::EMFILE) => {
            match instance_limit() {
                Some(hint) => format!(
                    "no watch instance is left for this user ({hint}); other programs hold them all"
                ),
                None => format!("cannot create a watcher: {e}"),
            }
        }
        _ => format!("cannot create a watcher: {e}"),
    }
}

fn add_error(dir: &Path, e: &notify::Error) -> String {
    match &e.kind {
        notify::ErrorKind::MaxFilesWatch => match watch_limit() {
            Some(hint) => hint,
            None => format!("the watch limit is reached: cannot watch {}", dir.display()),
        },
        notify::ErrorKind::PathNotFound => {
            format!("cannot watch {}: no such directory", dir.display())
        }
        notify::ErrorKind::Io(io) => format!("cannot watch {}: {io}", dir.display()),
        _ => format!("cannot watch {}: {e}", dir.display()),
    }
}

/// The inotify instance limit, as the user can see and raise it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn instance_limit() -> Option<String> {
    let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    Some(format!("fs.inotify.max_user_instances = {limit}"))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn instance_limit() -> Option<String> {
    None
}

/// What to say when the kernel's watch limit is reached.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn watch_limit() -> Option<String> {
    let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    Some(format!(
        "the inotify watch limit is reached (fs.inotify.max_user_watches = {limit}); raise it \
         with `sysctl fs.inotify.max_user_watches=524288`"
    ))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn watch_limit() -> Option<String> {
    None
}

/// One handle on a watched directory; dropping it lets go of the watch (the last handle on a
/// directory removes its watch).
pub struct DirWatch {
    hub: &'static Hub,
    id: u64,
}

impl std::fmt::Debug for DirWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWatch").field("id", &self.id).finish()
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        self.hub.release(self.id);
    }
}

impl DirWatch {
    /// Watch `dir` through the daemon's hub, for draining.
    pub fn new(dir: &Path) -> Result<DirWatch, WatchError> {
        hub().watch(dir, None)
    }

    /// Everything that changed since the last call: blocks only for the fence's round trip.
    /// Within a request ([`RequestScope`]) it is certain about every change that finished
    /// before the request began, sharing the request's fence; see [`DirWatch::drain_all`].
    pub fn drain(&mut self) -> Changes {
        self.hub.drain(self.id, false)
    }

    /// [`DirWatch::drain`], certain about every write that finished before this call even
    /// within a request (never sharing a fence written earlier): for a consumer that tells its
    /// own writes, made during the request, from anyone else's.
    pub fn drain_all(&mut self) -> Changes {
        self.hub.drain(self.id, true)
    }

    /// The directory this handle watches (as first watched), if the watch still exists.
    pub fn path(&self) -> Option<PathBuf> {
        let inner = self.hub.lock();
        inner.consumers.get(&self.id)?.path.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str) -> Changes {
        Changes::Names(std::iter::once(name.to_string()).collect())
    }

    /// Whether `c` tells of `name`: named, or everything to be looked at again. A name an
    /// earlier drain already gave may come again (an event of that write the kernel queued
    /// late): saying too much is safe, never saying is not.
    fn names(c: &Changes, name: &str) -> bool {
        match c {
            Changes::Names(n) => n.contains(name),
            Changes::Rescan => true,
            Changes::Quiet => false,
        }
    }

    #[test]
    fn the_fence_never_reports_quiet_after_a_write() {
        // Each write finishes before the drain begins, so each drain must name it, however
        // quickly it follows; drains from other threads at the same time share fences.
        let d = tempfile::tempdir().expect("tempdir");
        let others: Vec<_> = (0..3)
            .map(|t| {
                let dir = d.path().join(format!("t{t}"));
                std::fs::create_dir(&dir).expect("mkdir");
                std::thread::spawn(move || {
                    let mut w = DirWatch::new(&dir).expect("watch");
                    for i in 0..300 {
                        std::fs::write(dir.join(format!("{i}")), "x").expect("write");
                        let got = w.drain();
                        assert!(
                            names(&got, &i.to_string()),
                            "thread {t}, write {i}: {got:?}"
                        );
                    }
                })
            })
            .collect();
        let mut w = DirWatch::new(d.path()).expect("watch");
        let started = Instant::now();
        for i in 0..1000 {
            std::fs::write(d.path().join("f"), i.to_string()).expect("write");
            let got = w.drain();
            assert!(names(&got, "f"), "write {i}: {got:?}");
        }
        let each = started.elapsed() / 1000;
        for t in others {
            t.join().expect("thread");
        }
        eprintln!("a write and a fenced drain: {each:?}");
    }

    #[test]
    fn the_drains_of_one_request_share_a_fence_and_miss_nothing_from_before_it() {
        let d = tempfile::tempdir().expect("tempdir");
        let dirs: Vec<_> = (0..4)
            .map(|i| {
                let dir = d.path().join(format!("d{i}"));
                std::fs::create_dir(&dir).expect("mkdir");
                dir
            })
            .collect();
        let mut watches: Vec<_> = dirs
            .iter()
            .map(|dir| DirWatch::new(dir).expect("watch"))
            .collect();
        for round in 0..200 {
            // Every change finishes before the request begins: each drain of the request must
            // name its own, whichever drain wrote the request's fence.
            for dir in &dirs {
                std::fs::write(dir.join("f"), round.to_string()).expect("write");
            }
            let _request = RequestScope::begin();
            for (i, w) in watches.iter_mut().enumerate() {
                assert_eq!(w.drain(), one("f"), "round {round}, directory {i}");
            }
        }
    }

    #[test]
    fn two_spellings_of_one_directory_both_hear_its_changes() {
        let d = tempfile::tempdir().expect("tempdir");
        let real = d.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        std::os::unix::fs::symlink(d.path(), d.path().join("link")).expect("symlink");
        let other = d.path().join("link").join("real");
        let mut a = DirWatch::new(&real).expect("watch");
        let mut b = DirWatch::new(&other).expect("watch");
        std::fs::write(real.join("x"), "1").expect("write");
        assert_eq!(a.drain(), one("x"));
        assert_eq!(b.drain(), one("x"));
        drop(b);
        std::fs::write(real.join("y"), "1").expect("write");
        assert_eq!(a.drain(), one("y"));
    }
}
