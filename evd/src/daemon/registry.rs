//! The stores a daemon holds. Each open store gets one actor: a thread that owns the [`OpenStore`]
//! (its lock, its cache, its watches) and runs every request for that store one at a time, so
//! any number of clients produce one linear chain. OpenStore I/O never blocks the async runtime.
//!
//! What a daemon holds stays bounded whatever clients do:
//! - a request naming a directory without a store opens nothing (see [`Target::Absent`]);
//! - a store nobody used for [`Limits::idle`] is released (lock, watches, memory) and opens
//!   again on its next request;
//! - at most [`Limits::max_open`] stores are open: opening one more releases the least recently
//!   used idle one first.
//!
//! A store is never released while a request or a subscription holds a [`Lease`] on it, and a
//! store opened again waits until its previous actor has let go of the lock.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use proto::rpc::{codes, Context, Refusal, StoreStatus, WatchEvent};
use tokio::sync::{broadcast, oneshot};

use crate::daemon::watcher::{self, Changes};
use crate::open::OpenStore;

type Job = Box<dyn FnOnce(&mut OpenStore) + Send>;

/// What a store's actor thread receives.
enum Msg {
    /// A request to run, and what it is (for `status` while it runs).
    Job(&'static str, Job),
    /// The watcher saw these changes.
    Changes(Changes),
    /// Release the store and end the thread.
    Stop,
}

/// How many pushed events a slow subscriber may fall behind before it is told to resync.
const EVENT_BUFFER: usize = 4096;

/// How long a store whose watch could not be made waits before trying again.
const WATCH_RETRY: Duration = Duration::from_secs(30);

/// How long open stores may sit unused, how many may be open at once, and how long one
/// request may hold a store's thread.
#[derive(Debug, Clone)]
pub struct Limits {
    pub idle: Duration,
    pub max_open: usize,
    /// Past this, a request still waiting for its store gets an error, and a store whose
    /// thread is at one request longer than this refuses new ones at once (it is stuck).
    /// Every request evd serves is short (tests run in the client): a cold evaluation of a
    /// large store takes seconds, never this long.
    pub deadline: Duration,
    /// The build identity under which each store's images are kept for the next daemon (see
    /// [`crate::open::image`]); `None`: no images are written or taken back.
    pub images: Option<Arc<str>>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            idle: Duration::from_secs(600),
            max_open: 32,
            deadline: Duration::from_secs(20),
            images: None,
        }
    }
}

/// What a store's thread is at right now.
#[derive(Debug, Clone)]
struct Running {
    what: &'static str,
    since: Instant,
}

/// The thread's current work, shared with the requests that wait on it.
type Current = Arc<Mutex<Option<Running>>>;

/// Requests that may rightly hold a store longer than the deadline (a backfill of many records
/// reports its progress as it goes): never refused for their length, and never taken for stuck.
const UNBOUNDED: [&str; 1] = ["ev.migrate.backfill"];

/// Shown in `status` once a request has held the store this long.
const SHOW_BUSY_AFTER: Duration = Duration::from_secs(1);

/// What `status` reports about a store, refreshed after every request.
#[derive(Debug, Clone, Default)]
struct Snapshot {
    /// Whether this daemon owns the store (holds its lock).
    held: bool,
    ticks: usize,
    head: String,
    writes: u64,
    watch: String,
    /// `.evolving`'s (device, inode) once the store exists: how a renamed repository is known.
    identity: Option<(u64, u64)>,
    warm_start: Option<proto::rpc::WarmStart>,
}

pub struct StoreActor {
    root: PathBuf,
    opened_at: String,
    jobs: mpsc::Sender<Msg>,
    snapshot: Arc<Mutex<Snapshot>>,
    events: broadcast::Sender<WatchEvent>,
    /// Leases out (requests running or queued, subscriptions).
    leases: AtomicUsize,
    /// Milliseconds since the registry's epoch at the last lease.
    last_used: AtomicU64,
    /// The actor's thread, joined by [`StoreActor::stop_and_wait`].
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// What that thread is at now.
    current: Current,
    deadline: Duration,
}

/// React to what the watcher saw: keep the state files and the verdict snapshot current. The
/// evaluation itself finds what changed (and re-evaluates only the ticks it concerns); a
/// watcher that lost events makes it start from scratch.
fn on_changes(store: &mut OpenStore, c: &Changes) {
    if !store.lock_is_valid() {
        return;
    }
    if c.rescan {
        store.memos.clear();
    }
    if let Err(e) = crate::verbs::check::refresh_verdicts(store) {
        tracing::debug!(error = %e.message, "re-evaluation after a change failed");
    }
}

/// The (device, inode) of `<root>/.evolving`, if it exists.
fn identity_of(root: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(root.join(".evolving"))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// The requests that may be served before the work an earlier request left for after its
/// answer (its `events.jsonl` lines, its ledger record): they read nothing that work writes.
/// Anything else (a write, a ledger or events read, `verify`) finds that work done first.
const OVERTAKES: [&str; 8] = [
    "ev.check",
    "ev.show",
    "ev.list",
    "ev.log",
    "ev.pending",
    "ev.guards",
    "ev.brief",
    "ev.why",
];
/// How long work left for after an answer may wait behind reads that overtake it.
const DEFER_AT_MOST: Duration = Duration::from_millis(250);

/// How often a look at state files under way (see [`OpenStore::look_at_state_files`]) is
/// looked at while the store is idle.
const STATE_LOOK_POLL: Duration = Duration::from_millis(20);

/// What an actor's thread shares with its handle: the store's snapshot for `status`, the
/// channel of pushed verdict changes, and what the thread is at.
struct Shared {
    snap: Arc<Mutex<Snapshot>>,
    push: broadcast::Sender<WatchEvent>,
    current: Current,
}

/// Give the store's work-tree and evidence watches the sink that re-evaluates on a change
/// (guarded files of the work tree, for `dirty`; files current decisions cite as evidence;
/// each watched once an evaluation knows which they are), unless they have one: giving it again
/// drops the watches an evaluation made.
fn live_sinks(store: &mut OpenStore, to_self: &mpsc::Sender<Msg>) {
    if !store.worktree.has_sink() {
        let tx = to_self.clone();
        store.worktree.set_sink(Some(Arc::new(move || {
            let _ = tx.send(Msg::Changes(Changes {
                worktree: true,
                ..Changes::default()
            }));
        })));
    }
    if !store.evidence.has_sink() {
        let tx = to_self.clone();
        store.evidence.set_sink(Some(Arc::new(move || {
            let _ = tx.send(Msg::Changes(Changes {
                evidence: true,
                ..Changes::default()
            }));
        })));
    }
}

/// The actor's thread: run jobs and watcher batches one at a time until told to stop.
fn actor_loop(
    root: PathBuf,
    (rx, to_self): (mpsc::Receiver<Msg>, mpsc::Sender<Msg>),
    shared: Shared,
    predecessor: Option<Arc<StoreActor>>,
    images: Option<Arc<str>>,
) {
    let Shared {
        snap,
        push,
        current,
    } = shared;
    let at = |what: Option<&'static str>| {
        if let Ok(mut c) = current.lock() {
            *c = what.map(|what| Running {
                what,
                since: Instant::now(),
            });
        }
    };
    // The same store's previous actor (released, or serving it under its old path) lets go of
    // the lock before this one takes it.
    if let Some(p) = predecessor {
        p.stop_and_wait();
    }
    // Where the repository keeps git's directories (two git processes), found while the store
    // is being opened rather than after: the watch below needs it before the first request runs.
    let mut layout_ahead = {
        let root = root.clone();
        std::thread::Builder::new()
            .name("evd-layout".into())
            .spawn(move || watcher::Layout::of(&root))
            .ok()
    };
    let mut store = OpenStore::new(root.clone());
    if let Some(build) = images {
        store.keep_images(build);
    }
    // Before the first request, so that its evaluation keeps the work tree's watches (and the
    // answer git gave while the store was opening) instead of the next one making them again.
    live_sinks(&mut store, &to_self);
    let mut watching: Option<watcher::StoreWatcher> = None;
    let mut watch_failed: Option<(Instant, String)> = None;
    let mut next: Option<Msg> = None;
    // Since when work left for after an answer waits behind reads (see `OVERTAKES`).
    let mut deferred_since: Option<Instant> = None;
    loop {
        if next.is_none() && deferred_since.take().is_some() {
            // No read waits any more: the work they overtook is done now.
            store.finish_answered();
        }
        let msg = match next.take() {
            Some(m) => Some(m),
            // Work left for later is done when due, whether or not requests keep coming.
            None => loop {
                // A look at state files under way is taken in when done, looked at shortly.
                crate::verbs::check::settle_state_files(&mut store, false);
                let look = store
                    .state_look_pending()
                    .then(|| Instant::now() + STATE_LOOK_POLL);
                match store.idle_work_at() {
                    Some(due) if due <= Instant::now() => {
                        at(Some("writing its journal to the ledger (and what it keeps for the next start)"));
                        let started = Instant::now();
                        store.on_idle();
                        tracing::debug!(
                            ms = started.elapsed().as_secs_f64() * 1e3,
                            "idle work done"
                        );
                        at(None);
                    }
                    work => match work.into_iter().chain(look).min() {
                        Some(due) => {
                            match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                                Ok(m) => break Some(m),
                                Err(mpsc::RecvTimeoutError::Timeout) => {}
                                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                            }
                        }
                        None => break rx.recv().ok(),
                    },
                }
            },
        };
        let Some(msg) = msg else {
            break;
        };
        match msg {
            Msg::Stop => break,
            Msg::Job(what, job) => {
                let _one_request = crate::sys::watch::RequestScope::begin();
                at(Some(what));
                job(&mut store);
                // The answer is on its way: what the request left for after it, before anything
                // else is served — unless a read that cannot see it waits already (its client
                // does not pay for this one's journal lines): the work stays queued, in order,
                // until nothing but such reads came for a while.
                // Looked at again between pieces of that work: a read that comes while it runs
                // waits for the piece under way only.
                let mut waiting = match next.take() {
                    Some(m) => Some(m),
                    None => rx.try_recv().ok(),
                };
                loop {
                    let overtakes =
                        matches!(&waiting, Some(Msg::Job(w, _)) if OVERTAKES.contains(w));
                    if overtakes && deferred_since.is_none_or(|t| t.elapsed() < DEFER_AT_MOST) {
                        deferred_since.get_or_insert_with(Instant::now);
                        break;
                    }
                    if !store.finish_next_answered() {
                        deferred_since = None;
                        break;
                    }
                    if waiting.is_none() {
                        waiting = rx.try_recv().ok();
                    }
                }
                next = waiting;
                crate::verbs::check::settle_state_files(&mut store, false);
                at(None);
            }
            Msg::Changes(mut c) => {
                let _one_request = crate::sys::watch::RequestScope::begin();
                at(Some("re-evaluation after a change"));
                // Everything the watcher already sent is one batch.
                loop {
                    match rx.try_recv() {
                        Ok(Msg::Changes(more)) => c.merge(more),
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                if c.rescan {
                    // A watched directory may have gone: watch everything again.
                    watching = None;
                    store.worktree.set_sink(None);
                    store.evidence.set_sink(None);
                } else if c.ref_dirs {
                    if let Some(w) = watching.as_mut() {
                        w.sync_refs();
                    }
                }
                on_changes(&mut store, &c);
                store.finish_answered();
                at(None);
                if c.rescan {
                    let _ = push.send(WatchEvent::Resync {
                        reason: "the watcher rescanned the store".into(),
                    });
                }
            }
        }
        for change in store.take_unsent() {
            let _ = push.send(WatchEvent::Changed(change));
        }
        // Once this daemon owns the store, watch it (not while `results/` is missing: the watch
        // needs it, and evd never recreates a store someone is removing).
        let retry = watch_failed
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= WATCH_RETRY);
        if watching.is_none() && retry && store.is_locked() && store.results_dir().is_dir() {
            let tx = to_self.clone();
            let sink: watcher::Sink = Arc::new(move |c| {
                let _ = tx.send(Msg::Changes(c));
            });
            let layout = layout_ahead
                .take()
                .and_then(|h| h.join().ok())
                .unwrap_or_else(|| watcher::Layout::of(&root));
            match watcher::watch(layout, sink) {
                Ok(w) => {
                    watching = Some(w);
                    watch_failed = None;
                    // What changed between the last evaluation and this watch's first event
                    // reached no listener: one catch-up evaluation (its drains find it) before
                    // anything else, so a receipt written in that gap is pushed too.
                    let _ = to_self.send(Msg::Changes(Changes::default()));
                    // Again after a rescan dropped them (the first ones were given before the
                    // first request).
                    live_sinks(&mut store, &to_self);
                }
                Err(e) => {
                    tracing::warn!(error = %e, store = %root.display(), "cannot watch the store; it is served degraded (validated against the disk on every request) and its verdicts are not pushed");
                    watch_failed = Some((Instant::now(), e.0));
                }
            }
        }
        // One stat when nothing changed; keeps the tick count honest for `status`.
        let _ = store.refresh();
        let watch = match (&watching, store.degraded(), &watch_failed) {
            (_, Some(why), _) => format!("degraded: {why}"),
            (None, None, Some((_, why))) => format!("degraded: {why}"),
            (None, None, None) => "not watched yet".to_string(),
            (Some(_), None, _) => "watched".to_string(),
        };
        if let Ok(mut s) = snap.lock() {
            s.held = store.is_locked();
            s.ticks = store.tick_count();
            s.head = store.head().unwrap_or_default();
            s.writes = store.writes;
            s.watch = watch;
            s.warm_start = store.warm_start();
            if s.identity.is_none() && s.held {
                s.identity = identity_of(&root);
            }
        }
    }
    // Stopped: the watcher, then the store (and its lock) drop here.
    drop(watching);
    drop(store);
    crate::sys::resources::release_free_memory();
}

impl StoreActor {
    fn spawn(
        root: PathBuf,
        predecessor: Option<Arc<StoreActor>>,
        deadline: Duration,
        images: Option<Arc<str>>,
    ) -> std::io::Result<StoreActor> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let snapshot = Arc::new(Mutex::new(Snapshot::default()));
        let snap = Arc::clone(&snapshot);
        let thread_root = root.clone();
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let push = events.clone();
        let to_self = tx.clone();
        let current: Current = Arc::default();
        let busy = Arc::clone(&current);
        let thread = std::thread::Builder::new()
            .name("evd-store".into())
            .spawn(move || {
                let shared = Shared {
                    snap,
                    push,
                    current: busy,
                };
                actor_loop(thread_root, (rx, to_self), shared, predecessor, images)
            })?;
        Ok(StoreActor {
            root,
            opened_at: crate::engine::clock::now_rfc3339(),
            jobs: tx,
            snapshot,
            events,
            leases: AtomicUsize::new(0),
            last_used: AtomicU64::new(0),
            thread: Mutex::new(Some(thread)),
            current,
            deadline,
        })
    }

    /// Whether the thread has been at one request past the deadline (one allowed to take long
    /// is never stuck).
    fn stuck(&self) -> bool {
        self.running()
            .is_some_and(|(what, for_)| for_ >= self.deadline && !UNBOUNDED.contains(&what))
    }

    /// What the thread is at, and for how long, if anything.
    fn running(&self) -> Option<(&'static str, Duration)> {
        let c = self.current.lock().ok()?;
        c.as_ref().map(|r| (r.what, r.since.elapsed()))
    }

    /// The refusal of a request that found this store stuck, or waited for it in vain.
    fn busy_refusal(&self, began: bool) -> Refusal {
        let deadline = self.deadline.as_secs_f64();
        let holding = match self.running() {
            Some((what, for_)) => format!("`{what}` has held it for {:.1} s", for_.as_secs_f64()),
            None => "it is busy".to_string(),
        };
        let message = if began {
            format!(
                "store {} did not answer within {deadline:.1} s ({holding}); this request is \
                 still running: a write may still be applied, and retrying it with the same \
                 request id tells its outcome",
                self.root.display()
            )
        } else if self.stuck() {
            format!(
                "store {} is stuck: {holding}, past its {deadline:.1} s deadline; this request \
                 was not run and nothing was written (other stores are unaffected; `evctl \
                 status` shows what it is stuck on, and restarting evd frees it)",
                self.root.display()
            )
        } else {
            format!(
                "store {} is busy: {holding}; this request waited {deadline:.1} s and was not \
                 run, nothing was written (try again once it is done)",
                self.root.display()
            )
        };
        Refusal::new(codes::STORE_BUSY, "store_busy", message)
    }

    /// Stop the actor and wait until its store (and with it the store's lock) is released:
    /// a daemon that says it is gone must not still own a store.
    fn stop_and_wait(&self) {
        let _ = self.jobs.send(Msg::Stop);
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    fn stop(&self) {
        let _ = self.jobs.send(Msg::Stop);
    }

    fn identity(&self) -> Option<(u64, u64)> {
        self.snapshot.lock().ok().and_then(|s| s.identity)
    }

    fn finished(&self) -> bool {
        self.thread
            .lock()
            .map(|t| t.as_ref().is_none_or(|h| h.is_finished()))
            .unwrap_or(true)
    }

    /// Whether a request or a subscription holds the store, or someone is subscribed to it.
    fn busy(&self) -> bool {
        self.leases.load(Ordering::SeqCst) > 0 || self.events.receiver_count() > 0
    }

    /// Subscribe to this store's pushed verdict changes.
    pub fn subscribe(&self) -> broadcast::Receiver<WatchEvent> {
        self.events.subscribe()
    }

    /// Run `f` (the request `what`) on the store's own thread and wait for its answer, at most
    /// the store's deadline. A store stuck past its deadline refuses at once; a request that
    /// waited that long in vain is refused, and, when it had not begun, never runs. A panic
    /// inside `f` becomes an internal error for this request; the actor keeps serving.
    async fn run<R, F>(&self, what: &'static str, f: F) -> Result<R, Refusal>
    where
        F: FnOnce(&mut OpenStore) -> Result<R, Refusal> + Send + 'static,
        R: Send + 'static,
    {
        if self.stuck() {
            return Err(self.busy_refusal(false));
        }
        let (tx, rx) = oneshot::channel();
        // Whether the job began, and whether its caller gave up: one of the two always sees
        // the other (both sequentially consistent), so a job whose caller was told "not run"
        // never runs.
        let began = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let abandoned = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (b, a) = (Arc::clone(&began), Arc::clone(&abandoned));
        let queued = Instant::now();
        let job: Job = Box::new(move |store| {
            b.store(true, Ordering::SeqCst);
            if a.load(Ordering::SeqCst) {
                return;
            }
            let began_at = Instant::now();
            // The fault campaign wedges a store here (`FAILPOINTS='ev.check=sleep(60000)'`).
            fail::fail_point!(what);
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(store)))
                .unwrap_or_else(|_| {
                    Err(Refusal::new(
                        codes::INTERNAL,
                        "internal",
                        "internal error while serving this request (evd logged it)",
                    ))
                });
            tracing::debug!(
                what,
                queued_ms = (began_at - queued).as_secs_f64() * 1e3,
                run_ms = began_at.elapsed().as_secs_f64() * 1e3,
                "request served"
            );
            let _ = tx.send(out);
        });
        self.jobs.send(Msg::Job(what, job)).map_err(|_| gone())?;
        if UNBOUNDED.contains(&what) {
            return rx.await.map_err(|_| gone())?;
        }
        match tokio::time::timeout(self.deadline, rx).await {
            Ok(answer) => answer.map_err(|_| gone())?,
            Err(_) => {
                abandoned.store(true, Ordering::SeqCst);
                let began = began.load(Ordering::SeqCst);
                tracing::warn!(store = %self.root.display(), what, began, "a request waited past the store's deadline");
                Err(self.busy_refusal(began))
            }
        }
    }

    /// What `status` says about this store; `None` when this daemon does not own it (a
    /// request named it, but another process holds it).
    fn status(&self, now_ms: u64) -> Option<StoreStatus> {
        let s = self.snapshot.lock().map(|s| s.clone()).unwrap_or_default();
        if !s.held {
            return None;
        }
        let idle_ms = if self.leases.load(Ordering::SeqCst) > 0 {
            0
        } else {
            now_ms.saturating_sub(self.last_used.load(Ordering::SeqCst))
        };
        Some(StoreStatus {
            root: self.root.display().to_string(),
            ticks: s.ticks,
            head: s.head,
            opened_at: self.opened_at.clone(),
            writes: s.writes,
            watch: s.watch,
            idle_ms,
            busy: self
                .running()
                .filter(|(_, for_)| *for_ >= SHOW_BUSY_AFTER)
                .map(|(what, for_)| proto::rpc::StoreBusy {
                    what: what.to_string(),
                    running_ms: u64::try_from(for_.as_millis()).unwrap_or(u64::MAX),
                    stuck: self.stuck(),
                }),
            warm_start: s.warm_start,
            notes: self.notes(),
        })
    }

    /// The notes `status` shows for this store (see [`StoreStatus::notes`]).
    fn notes(&self) -> Vec<String> {
        let said = self
            .root
            .join(".evolving/results")
            .join(crate::verbs::check::NO_UPSTREAM_SAID);
        if std::fs::symlink_metadata(said).is_ok_and(|m| m.is_file()) {
            vec!["the live-origin staleness reference cannot be resolved (no upstream): sha-staleness skipped (said once by `check`)".into()]
        } else {
            Vec::new()
        }
    }
}

fn gone() -> Refusal {
    Refusal::new(
        codes::INTERNAL,
        "internal",
        "the store's worker has stopped",
    )
}

/// A hold on an open store: while any lease is out, the store is not released.
pub struct Lease {
    actor: Arc<StoreActor>,
    epoch: Instant,
}

impl Lease {
    /// Run `f` (the request `what`) on the store's own thread and wait for its answer, at
    /// most the store's deadline (see [`Limits::deadline`]).
    pub async fn run<R, F>(&self, what: &'static str, f: F) -> Result<R, Refusal>
    where
        F: FnOnce(&mut OpenStore) -> Result<R, Refusal> + Send + 'static,
        R: Send + 'static,
    {
        self.actor.run(what, f).await
    }

    /// Subscribe to this store's pushed verdict changes.
    pub fn subscribe(&self) -> broadcast::Receiver<WatchEvent> {
        self.actor.subscribe()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.actor
            .last_used
            .store(millis_since(self.epoch), Ordering::SeqCst);
        self.actor.leases.fetch_sub(1, Ordering::SeqCst);
    }
}

fn millis_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Where a request goes.
pub enum Target {
    /// The store's actor.
    Open(Lease),
    /// The directory holds no store (and the request does not create one): nothing is opened
    /// for it; the request runs once on a throwaway handle, which refuses as the verb would.
    Absent(PathBuf),
}

/// Map from canonical store root to its actor.
pub struct Registry {
    limits: Limits,
    epoch: Instant,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    stores: HashMap<PathBuf, Arc<StoreActor>>,
    /// Released actors whose threads may still be letting go of their store.
    closing: HashMap<PathBuf, Arc<StoreActor>>,
}

impl Default for Registry {
    fn default() -> Registry {
        Registry::new(Limits::default())
    }
}

impl Registry {
    pub fn new(limits: Limits) -> Registry {
        Registry {
            limits,
            epoch: Instant::now(),
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits.clone()
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>, Refusal> {
        self.inner
            .lock()
            .map_err(|_| Refusal::new(codes::INTERNAL, "internal", "store registry poisoned"))
    }

    /// Where the request naming `ctx` goes. With `create` (init), the store's actor is started
    /// even when there is no store yet.
    pub fn open(&self, ctx: &Context, create: bool) -> Result<Target, Refusal> {
        let root = crate::store::resolve_root(ctx)?;
        let mut inner = self.lock()?;
        if let Some(a) = inner.stores.get(&root) {
            return Ok(Target::Open(self.lease(a)));
        }
        let identity = identity_of(&root);
        if identity.is_none() && !create {
            return Ok(Target::Absent(root));
        }
        // The same store under another path (its repository was renamed or moved): that actor
        // releases it, and this one opens it where it is now.
        let moved = identity.and_then(|id| {
            inner
                .stores
                .iter()
                .find(|(r, a)| a.identity() == Some(id) && identity_of(r) != Some(id))
                .map(|(r, _)| r.clone())
        });
        let mut predecessor = None;
        if let Some(old) = moved {
            tracing::info!(from = %old.display(), to = %root.display(), "a served store moved; reopening it where it is now");
            if let Some(a) = inner.stores.remove(&old) {
                a.stop();
                predecessor = Some(a);
            }
        }
        if predecessor.is_none() {
            predecessor = inner.closing.remove(&root);
        }
        if inner.stores.len() >= self.limits.max_open {
            self.release_lru(&mut inner);
        }
        let actor = Arc::new(
            StoreActor::spawn(
                root.clone(),
                predecessor,
                self.limits.deadline,
                self.limits.images.clone(),
            )
            .map_err(|e| {
                Refusal::new(
                    codes::INTERNAL,
                    "internal",
                    format!("cannot start store worker: {e}"),
                )
            })?,
        );
        tracing::info!(store = %root.display(), "store opened");
        let lease = self.lease(&actor);
        inner.stores.insert(root, actor);
        Ok(Target::Open(lease))
    }

    fn lease(&self, a: &Arc<StoreActor>) -> Lease {
        a.leases.fetch_add(1, Ordering::SeqCst);
        a.last_used
            .store(millis_since(self.epoch), Ordering::SeqCst);
        Lease {
            actor: Arc::clone(a),
            epoch: self.epoch,
        }
    }

    /// Release the least recently used store nobody holds, to make room for one more.
    fn release_lru(&self, inner: &mut Inner) {
        let victim = inner
            .stores
            .iter()
            .filter(|(_, a)| !a.busy())
            .min_by_key(|(_, a)| a.last_used.load(Ordering::SeqCst))
            .map(|(r, _)| r.clone());
        if let Some(root) = victim {
            tracing::info!(store = %root.display(), open = inner.stores.len(), "releasing the least recently used store (open-store limit)");
            self.release(inner, &root);
        }
    }

    fn release(&self, inner: &mut Inner, root: &Path) {
        if let Some(a) = inner.stores.remove(root) {
            a.stop();
            inner.closing.insert(root.to_path_buf(), a);
        }
    }

    /// Release every store unused for longer than the idle limit, and forget released actors
    /// whose threads have ended. Called periodically by the server.
    pub fn sweep(&self) {
        let Ok(mut inner) = self.lock() else {
            return;
        };
        let now = millis_since(self.epoch);
        let idle_ms = u64::try_from(self.limits.idle.as_millis()).unwrap_or(u64::MAX);
        let idle: Vec<PathBuf> = inner
            .stores
            .iter()
            .filter(|(_, a)| {
                !a.busy() && now.saturating_sub(a.last_used.load(Ordering::SeqCst)) >= idle_ms
            })
            .map(|(r, _)| r.clone())
            .collect();
        for root in idle {
            tracing::info!(store = %root.display(), "releasing an idle store");
            self.release(&mut inner, &root);
        }
        drop(inner);
        self.reap();
    }

    /// Forget released actors whose threads have ended, joining them: until it is joined, an
    /// ended thread keeps its stack, and the heap it freed stays with the process. Cheap (one
    /// lock, nothing to wait for); the server calls it every half second, so a daemon that
    /// goes through hundreds of stores does not hold one stack per store it ever served.
    pub fn reap(&self) {
        let done: Vec<Arc<StoreActor>> = {
            let Ok(mut inner) = self.lock() else {
                return;
            };
            let ended: Vec<PathBuf> = inner
                .closing
                .iter()
                .filter(|(_, a)| a.finished())
                .map(|(r, _)| r.clone())
                .collect();
            ended
                .iter()
                .filter_map(|r| inner.closing.remove(r))
                .collect()
        };
        if done.is_empty() {
            return;
        }
        for a in &done {
            a.stop_and_wait(); // already ended: joins at once
        }
        drop(done);
        crate::sys::resources::release_free_memory();
    }

    /// How often [`Registry::sweep`] should run.
    pub fn sweep_every(&self) -> Duration {
        (self.limits.idle / 2).clamp(Duration::from_millis(100), Duration::from_secs(30))
    }

    /// Open stores (released ones still stopping included).
    pub fn open_count(&self) -> usize {
        self.inner
            .lock()
            .map(|i| i.stores.len() + i.closing.values().filter(|a| !a.finished()).count())
            .unwrap_or(0)
    }

    pub fn statuses(&self) -> Vec<StoreStatus> {
        let now = millis_since(self.epoch);
        let mut v: Vec<StoreStatus> = self
            .inner
            .lock()
            .map(|i| i.stores.values().filter_map(|a| a.status(now)).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| a.root.cmp(&b.root));
        v
    }

    /// Stop every store actor and wait until each has released its store, at most `limit`: a
    /// store stuck on a request past that is left to the process's exit (the kernel releases
    /// its lock then). Returns the stores still busy.
    pub fn close_all(&self, limit: Duration) -> Vec<PathBuf> {
        let actors: Vec<Arc<StoreActor>> = match self.inner.lock() {
            Ok(mut i) => {
                let mut all: Vec<Arc<StoreActor>> =
                    std::mem::take(&mut i.stores).into_values().collect();
                all.extend(std::mem::take(&mut i.closing).into_values());
                all
            }
            Err(_) => return Vec::new(),
        };
        for a in &actors {
            a.stop();
        }
        let until = Instant::now() + limit;
        while Instant::now() < until && !actors.iter().all(|a| a.finished()) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut stuck = Vec::new();
        for a in actors {
            if a.finished() {
                a.stop_and_wait();
            } else {
                let what = a.running().map_or("?", |(w, _)| w);
                tracing::warn!(store = %a.root.display(), what, "a store is still busy; stopping without it");
                stuck.push(a.root.clone());
            }
        }
        stuck
    }
}
