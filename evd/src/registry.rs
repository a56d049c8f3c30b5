//! The stores a daemon holds. Each store gets one actor: a thread that owns the [`Store`] (its
//! lock, its cache) and runs every request for that store one at a time, so any number of
//! clients produce one linear chain. Store I/O never blocks the async runtime.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use proto::rpc::{codes, Context, Refusal, StoreStatus, WatchEvent};
use tokio::sync::{broadcast, oneshot};

use crate::store::Store;
use crate::watcher::{self, Changes};

type Job = Box<dyn FnOnce(&mut Store) + Send>;

/// What a store's actor thread receives.
enum Msg {
    /// A request to run.
    Job(Job),
    /// The watcher saw these changes.
    Changes(Changes),
    /// The actor is being dropped: release the store.
    Stop,
}

/// How many pushed events a slow subscriber may fall behind before it is told to resync.
const EVENT_BUFFER: usize = 4096;

/// What `status` reports about a store, refreshed after every request.
#[derive(Debug, Clone, Default)]
struct Snapshot {
    /// Whether this daemon owns the store (holds its lock).
    held: bool,
    ticks: usize,
    head: String,
    writes: u64,
}

pub struct StoreActor {
    root: PathBuf,
    opened_at: String,
    jobs: Mutex<mpsc::Sender<Msg>>,
    snapshot: Arc<Mutex<Snapshot>>,
    events: broadcast::Sender<WatchEvent>,
    /// The actor's thread, joined by [`StoreActor::stop_and_wait`].
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for StoreActor {
    fn drop(&mut self) {
        if let Ok(j) = self.jobs.lock() {
            let _ = j.send(Msg::Stop);
        }
    }
}

/// React to what the watcher saw: keep the state files and the verdict snapshot current. The
/// evaluation itself finds what changed (and re-evaluates only the ticks it concerns); a
/// watcher that lost events makes it start from scratch.
fn on_changes(store: &mut Store, c: &Changes) {
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

impl StoreActor {
    fn spawn(root: PathBuf) -> std::io::Result<StoreActor> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let snapshot = Arc::new(Mutex::new(Snapshot::default()));
        let snap = Arc::clone(&snapshot);
        let thread_root = root.clone();
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let push = events.clone();
        let to_self = tx.clone();
        let thread = std::thread::Builder::new()
            .name("evd-store".into())
            .spawn(move || {
                let mut store = Store::new(thread_root.clone());
                let mut watching: Option<watcher::StoreWatcher> = None;
                let mut watch_failed = false;
                while let Ok(msg) = rx.recv() {
                    match msg {
                        Msg::Stop => break,
                        Msg::Job(job) => job(&mut store),
                        Msg::Changes(c) => {
                            on_changes(&mut store, &c);
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
                    // Once this daemon owns the store, watch it.
                    // (Not while `results/` is missing: the watch needs it, and evd never
                    // recreates a store someone is removing.)
                    if watching.is_none()
                        && !watch_failed
                        && store.is_locked()
                        && store.results_dir().is_dir()
                    {
                        let tx = to_self.clone();
                        let (ctx, crx) = mpsc::channel::<Changes>();
                        match watcher::watch(watcher::Layout::of(&thread_root), ctx) {
                            Ok(w) => {
                                watching = Some(w);
                                std::thread::spawn(move || {
                                    while let Ok(c) = crx.recv() {
                                        if tx.send(Msg::Changes(c)).is_err() {
                                            break;
                                        }
                                    }
                                });
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, store = %thread_root.display(), "cannot watch the store; verdicts refresh on requests only");
                                // Do not retry on every request.
                                watch_failed = true;
                            }
                        }
                    }
                    // One stat when nothing changed; keeps the tick count honest for `status`.
                    let _ = store.refresh();
                    if let Ok(mut s) = snap.lock() {
                        s.held = store.is_locked();
                        s.ticks = store.tick_count();
                        s.head = store.head().unwrap_or_default();
                        s.writes = store.writes;
                    }
                }
                // Stopped: the watcher, then the store (and its lock) drop here.
            })?;
        Ok(StoreActor {
            root,
            opened_at: crate::clock::now_rfc3339(),
            jobs: Mutex::new(tx),
            snapshot,
            events,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Stop the actor and wait until its store (and with it the store's lock) is released:
    /// a daemon that says it is gone must not still own a store.
    fn stop_and_wait(&self) {
        if let Ok(j) = self.jobs.lock() {
            let _ = j.send(Msg::Stop);
        }
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Subscribe to this store's pushed verdict changes.
    pub fn subscribe(&self) -> broadcast::Receiver<WatchEvent> {
        self.events.subscribe()
    }

    /// Run `f` on the store's own thread and wait for its answer. A panic inside `f` becomes an
    /// internal error for this request; the actor keeps serving.
    pub async fn run<R, F>(&self, f: F) -> Result<R, Refusal>
    where
        F: FnOnce(&mut Store) -> Result<R, Refusal> + Send + 'static,
        R: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |store| {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(store)))
                .unwrap_or_else(|_| {
                    Err(Refusal::new(
                        codes::INTERNAL,
                        "internal",
                        "internal error while serving this request (evd logged it)",
                    ))
                });
            let _ = tx.send(out);
        });
        let sent = self
            .jobs
            .lock()
            .map_err(|_| gone())
            .and_then(|j| j.send(Msg::Job(job)).map_err(|_| gone()));
        sent?;
        rx.await.map_err(|_| gone())?
    }

    /// What `status` says about this store; `None` when this daemon does not own it (a
    /// request named it, but it does not exist yet or another process holds it).
    pub fn status(&self) -> Option<StoreStatus> {
        let s = self.snapshot.lock().map(|s| s.clone()).unwrap_or_default();
        if !s.held {
            return None;
        }
        Some(StoreStatus {
            root: self.root.display().to_string(),
            ticks: s.ticks,
            head: s.head,
            opened_at: self.opened_at.clone(),
            writes: s.writes,
        })
    }
}

fn gone() -> Refusal {
    Refusal::new(
        codes::INTERNAL,
        "internal",
        "the store's worker has stopped",
    )
}

/// Map from canonical store root to its actor.
#[derive(Default)]
pub struct Registry {
    stores: Mutex<HashMap<PathBuf, Arc<StoreActor>>>,
}

/// The canonical root a request names. Relative or missing paths are refused clearly.
pub fn resolve_root(ctx: &Context) -> Result<PathBuf, Refusal> {
    let p = Path::new(&ctx.store);
    if ctx.store.is_empty() || !p.is_absolute() {
        return Err(Refusal::new(
            codes::BAD_STORE,
            "store_path",
            format!(
                "store path must be absolute (got {})",
                proto::json::q(&ctx.store)
            ),
        ));
    }
    std::fs::canonicalize(p).map_err(|e| {
        Refusal::new(
            codes::BAD_STORE,
            "store_path",
            format!("cannot open store directory {}: {e}", p.display()),
        )
    })
}

impl Registry {
    /// The actor of the store a request names, started on first use.
    pub fn actor(&self, ctx: &Context) -> Result<Arc<StoreActor>, Refusal> {
        let root = resolve_root(ctx)?;
        let mut map = self
            .stores
            .lock()
            .map_err(|_| Refusal::new(codes::INTERNAL, "internal", "store registry poisoned"))?;
        if let Some(a) = map.get(&root) {
            return Ok(Arc::clone(a));
        }
        let actor = Arc::new(StoreActor::spawn(root.clone()).map_err(|e| {
            Refusal::new(
                codes::INTERNAL,
                "internal",
                format!("cannot start store worker: {e}"),
            )
        })?);
        tracing::info!(store = %root.display(), "store opened");
        map.insert(root, Arc::clone(&actor));
        Ok(actor)
    }

    pub fn statuses(&self) -> Vec<StoreStatus> {
        let mut v: Vec<StoreStatus> = self
            .stores
            .lock()
            .map(|m| m.values().filter_map(|a| a.status()).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| a.root.cmp(&b.root));
        v
    }

    /// Drop every actor: their threads end and release the store locks.
    /// Stop every store actor and wait until each has released its store.
    pub fn close_all(&self) {
        let actors: Vec<Arc<StoreActor>> = match self.stores.lock() {
            Ok(mut m) => std::mem::take(&mut *m).into_values().collect(),
            Err(_) => return,
        };
        for a in actors {
            a.stop_and_wait();
        }
    }
}
