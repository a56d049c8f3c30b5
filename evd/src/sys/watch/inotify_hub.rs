//! Every directory evd watches on Linux, through one inotify instance for the whole daemon.
//!
//! The per-user limit on inotify instances is small (128 by default) and shared with every
//! other program of the user, so evd never creates more than one, whatever the number of
//! stores: each watched directory is one watch descriptor on the [`Hub`]'s instance, shared by
//! everyone who watches that directory, and given back when the last of them lets go.
//!
//! Two kinds of consumer read it:
//! - A synchronous one ([`DirWatch::drain`], as the tick cache, the receipt cache and the
//!   state-file watch do) takes what changed at the start of a request. The kernel queues an
//!   event inside the write that causes it, and a drain reads the instance's whole queue first,
//!   so it sees every change that finished before the request arrived: "nothing changed" can
//!   be trusted completely.
//! - A live one (a [`Listener`], as the store watcher uses) is called from the hub's own thread,
//!   debounced, with what changed, so verdicts are pushed without any request.
//!
//! A consumer whose watch cannot be made (the watch limit, a missing directory, watching turned
//! off with `EVD_NO_WATCH`) gets a [`WatchError`] with the reason; its owner then validates
//! against the disk on every use instead (slower, never stale), and says so in `status`.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

use super::common::{Changes, HubStats, Listener, WatchError, DEBOUNCE, MAX_PENDING_NAMES};

/// One request served on this thread. Here every drain reads the kernel's queue itself, so
/// there is nothing for the drains of one request to share: the scope only marks the request.
pub struct RequestScope;

impl RequestScope {
    pub fn begin() -> RequestScope {
        RequestScope
    }
}

/// Writes, creations, removals, renames and attribute changes; never opens or reads (every
/// reader of a store would queue one event per file it opens).
fn mask() -> WatchMask {
    WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB
        | WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::DONT_FOLLOW
        | WatchMask::ONLYDIR
}

/// How long after a failed `inotify_init1` the hub tries again.
const INIT_RETRY: Duration = Duration::from_secs(5);

/// The one inotify instance and who watches what through it.
pub struct Hub {
    inner: Mutex<Inner>,
    /// Set when a synchronous drain took events some live consumer is waiting for.
    wake: tokio::sync::Notify,
    pump: OnceLock<()>,
    /// Why watching is turned off altogether (`EVD_NO_WATCH`), if it is.
    refuse: Option<String>,
}

struct Inner {
    inotify: Option<Inotify>,
    init_failed: Option<(Instant, String)>,
    /// Watched directories by watch descriptor number.
    dirs: HashMap<i32, Dir>,
    consumers: HashMap<u64, Consumer>,
    next_id: u64,
    buf: Vec<u8>,
}

struct Dir {
    path: PathBuf,
    wd: WatchDescriptor,
    consumers: Vec<u64>,
}

struct Consumer {
    /// The watch descriptor number; `None` once the kernel dropped the watch (the directory
    /// went away): the consumer must rescan and watch again.
    wd: Option<i32>,
    names: BTreeSet<String>,
    rescan: bool,
    listener: Option<Listener>,
}

impl Consumer {
    fn pending(&self) -> bool {
        self.rescan || !self.names.is_empty()
    }

    fn take(&mut self) -> Changes {
        let names = std::mem::take(&mut self.names);
        if std::mem::take(&mut self.rescan) || self.wd.is_none() {
            Changes::Rescan
        } else if names.is_empty() {
            Changes::Quiet
        } else {
            Changes::Names(names)
        }
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
            inner: Mutex::new(Inner {
                inotify: None,
                init_failed: None,
                dirs: HashMap::new(),
                consumers: HashMap::new(),
                next_id: 0,
                buf: vec![0; 64 * 1024],
            }),
            wake: tokio::sync::Notify::new(),
            pump: OnceLock::new(),
            refuse,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent-enough maps: keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watch `dir` (not following a symlink). With a `listener`, changes are also delivered to
    /// it from the hub's thread; a drain then still works as usual.
    pub fn watch(
        &'static self,
        dir: &Path,
        listener: Option<Listener>,
    ) -> Result<DirWatch, WatchError> {
        if let Some(why) = &self.refuse {
            return Err(WatchError(why.clone()));
        }
        let live = listener.is_some();
        let (id, fd) = {
            let mut inner = self.lock();
            let inner = &mut *inner;
            if inner.inotify.is_none() {
                if let Some((at, why)) = &inner.init_failed {
                    if at.elapsed() < INIT_RETRY {
                        return Err(WatchError(why.clone()));
                    }
                }
                match Inotify::init() {
                    Ok(i) => {
                        inner.inotify = Some(i);
                        inner.init_failed = None;
                    }
                    Err(e) => {
                        let why = init_error(&e);
                        inner.init_failed = Some((Instant::now(), why.clone()));
                        return Err(WatchError(why));
                    }
                }
            }
            let Some(inotify) = inner.inotify.as_mut() else {
                return Err(WatchError("no inotify instance".into()));
            };
            let wd = inotify
                .watches()
                .add(dir, mask())
                .map_err(|e| WatchError(add_error(dir, &e)))?;
            // The pump polls its own duplicate of the instance's descriptor.
            let fd = if live && self.pump.get().is_none() {
                inotify.as_fd().try_clone_to_owned().ok()
            } else {
                None
            };
            let n = wd.get_watch_descriptor_id();
            inner.next_id += 1;
            let id = inner.next_id;
            inner
                .dirs
                .entry(n)
                .or_insert_with(|| Dir {
                    path: dir.to_path_buf(),
                    wd,
                    consumers: Vec::new(),
                })
                .consumers
                .push(id);
            inner.consumers.insert(
                id,
                Consumer {
                    wd: Some(n),
                    names: BTreeSet::new(),
                    rescan: false,
                    listener,
                },
            );
            (id, fd)
        };
        if let Some(fd) = fd {
            self.start_pump(fd);
        }
        Ok(DirWatch { hub: self, id })
    }

    /// How many instances, watches and handles the hub holds right now.
    pub fn stats(&self) -> HubStats {
        let inner = self.lock();
        HubStats {
            instances: usize::from(inner.inotify.is_some()),
            watches: inner.dirs.len(),
            consumers: inner.consumers.len(),
        }
    }

    /// Everything queued for consumer `id` since its last drain.
    fn drain(&self, id: u64) -> Changes {
        let mut inner = self.lock();
        let live_waiting = read_all(&mut inner);
        let out = match inner.consumers.get_mut(&id) {
            Some(c) => c.take(),
            None => Changes::Rescan,
        };
        drop(inner);
        if live_waiting {
            self.wake.notify_one();
        }
        out
    }

    /// Read the queue and hand every live consumer what it has pending.
    fn collect_live(&self) -> Vec<(Listener, Changes)> {
        let mut inner = self.lock();
        read_all(&mut inner);
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
        let mut inner = self.lock();
        let Some(c) = inner.consumers.remove(&id) else {
            return;
        };
        let Some(n) = c.wd else {
            return;
        };
        let last = match inner.dirs.get_mut(&n) {
            Some(d) => {
                d.consumers.retain(|x| *x != id);
                d.consumers.is_empty()
            }
            None => false,
        };
        if last {
            if let Some(d) = inner.dirs.remove(&n) {
                if let Some(i) = inner.inotify.as_mut() {
                    // Fails only when the kernel already dropped it (the directory is gone).
                    let _ = i.watches().remove(d.wd);
                }
            }
        }
    }

    /// The thread that delivers live changes: it wakes when the queue has something (or a
    /// drain took something a listener waits for), lets changes settle, then calls listeners.
    fn start_pump(&'static self, fd: OwnedFd) {
        self.pump.get_or_init(|| {
            let spawned = std::thread::Builder::new()
                .name("evd-inotify".into())
                .spawn(move || self.pump(fd));
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start the watch thread; live pushes stop");
            }
        });
    }

    fn pump(&'static self, fd: OwnedFd) {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the watch thread's runtime");
                return;
            }
        };
        rt.block_on(async move {
            // SAFETY: the AsyncFd owns `fd` (a duplicate nobody else holds), so it stays open and
            // names the same open file description for the AsyncFd's whole life.
            let registered = unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
            };
            let afd = match registered {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot poll the inotify queue; live pushes stop");
                    return;
                }
            };
            loop {
                let guard = tokio::select! {
                    r = afd.readable() => match r {
                        Ok(g) => Some(g),
                        Err(e) => {
                            tracing::warn!(error = %e, "polling the inotify queue failed");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            None
                        }
                    },
                    _ = self.wake.notified() => None,
                };
                tokio::time::sleep(DEBOUNCE).await;
                let batch = self.collect_live();
                if let Some(mut g) = guard {
                    // The queue was read to its end just now; a later event sets readiness
                    // again (tokio keeps one that arrived after this guard was taken).
                    g.clear_ready();
                }
                for (listener, changes) in batch {
                    listener(changes);
                }
            }
        });
    }
}

/// Read everything queued and hand it to the consumers. Returns whether a live consumer now has
/// something pending.
fn read_all(inner: &mut Inner) -> bool {
    let Inner {
        inotify,
        dirs,
        consumers,
        buf,
        ..
    } = inner;
    let Some(inotify) = inotify.as_mut() else {
        return false;
    };
    let mut everyone_rescans = false;
    loop {
        let events = match inotify.read_events(buf) {
            Ok(ev) => ev,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => {
                tracing::warn!(error = %e, "reading the inotify queue failed; everything rescans");
                everyone_rescans = true;
                break;
            }
        };
        for ev in events {
            if ev.mask.contains(EventMask::Q_OVERFLOW) {
                everyone_rescans = true;
                continue;
            }
            let n = ev.wd.get_watch_descriptor_id();
            let Some(dir) = dirs.get(&n) else {
                continue; // a watch already given back
            };
            let gone = ev.mask.contains(EventMask::IGNORED);
            let lost = gone
                || ev
                    .mask
                    .intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::UNMOUNT);
            for id in &dir.consumers {
                let Some(c) = consumers.get_mut(id) else {
                    continue;
                };
                if lost {
                    c.rescan = true;
                    c.names.clear();
                    if gone {
                        c.wd = None;
                    }
                } else if let Some(name) = ev.name {
                    if !c.rescan {
                        c.names.insert(name.to_string_lossy().into_owned());
                        if c.names.len() > MAX_PENDING_NAMES {
                            c.names.clear();
                            c.rescan = true;
                        }
                    }
                }
            }
            if gone {
                // The kernel dropped the watch (the directory was removed or unmounted).
                dirs.remove(&n);
            }
        }
    }
    if everyone_rescans {
        for c in consumers.values_mut() {
            c.names.clear();
            c.rescan = true;
        }
    }
    consumers
        .values()
        .any(|c| c.listener.is_some() && c.pending())
}

fn init_error(e: &io::Error) -> String {
    if e.raw_os_error() == Some(libc::EMFILE) {
        let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into());
        format!(
            "no inotify instance is left for this user (fs.inotify.max_user_instances = {limit}); \
             other programs hold them all"
        )
    } else {
        format!("cannot create an inotify instance: {e}")
    }
}

fn add_error(dir: &Path, e: &io::Error) -> String {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into());
        format!(
            "the inotify watch limit is reached (fs.inotify.max_user_watches = {limit}); raise it \
             with `sysctl fs.inotify.max_user_watches=524288`"
        )
    } else {
        format!("cannot watch {}: {e}", dir.display())
    }
}

/// One handle on a watched directory; dropping it lets go of the watch (the last handle on a
/// directory removes its watch descriptor).
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

    /// Everything queued since the last call, without blocking.
    /// [`DirWatch::drain`]: a drain here reads the instance's whole queue itself, so it is
    /// always certain about every write that finished before it.
    pub fn drain_all(&mut self) -> Changes {
        self.drain()
    }

    pub fn drain(&mut self) -> Changes {
        self.hub.drain(self.id)
    }

    /// The directory this handle watches (as first watched), if the watch still exists.
    pub fn path(&self) -> Option<PathBuf> {
        let inner = self.hub.lock();
        let n = inner.consumers.get(&self.id)?.wd?;
        inner.dirs.get(&n).map(|d| d.path.clone())
    }
}
