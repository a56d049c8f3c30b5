//! The thread that keeps the editor's view current: it holds an evd session (the same `Session`
//! every verb uses), subscribes to `ev.watch`, and asks `ev.guards` again whenever a verdict
//! moved, handing the answer to the loop. No request from the editor is needed.
//!
//! - **Pushed.** While evd watches the store, every pushed change (bursts coalesced into one
//!   question) and a resync are followed by a fresh answer; once a minute one is asked anyway, so
//!   that receipt ages stay true.
//! - **Polled.** When no daemon can be reached (or `EVD_NO_DAEMON` is set), answers come
//!   in-process and the store is polled every second: a cheap stamp of the files a verdict
//!   depends on (HEAD, config, ticks, receipts, the selected-list, git's HEAD and branch), and a
//!   full answer when it moved or 30 s passed. The same when evd serves the store degraded (it
//!   cannot watch it, so it pushes nothing). Each change of mode is said in `window/logMessage`.
//! - **Reconnected.** When the watch stream ends (evd stopped or was replaced), the server polls
//!   and subscribes again as soon as a daemon is running. It starts one itself only when it
//!   starts: a daemon someone stopped stays stopped.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use jsonrpsee::core::client::Subscription;
use lsp_types::MessageType;
use proto::rpc::{GuardedDecision, GuardsRequest, GuardsResult, StoreRequest, WatchEvent};
use tokio::sync::mpsc;

use super::events::Event;
use crate::context::Needs;
use crate::grammar::Globals;
use crate::session::{call_error, Session};
use crate::verbs;

const POLL: Duration = Duration::from_secs(1);
const POLL_FULL: Duration = Duration::from_secs(30);
const PUSHED_FULL: Duration = Duration::from_secs(60);

/// Start the thread; it ends when `wake`'s sender is dropped or the loop stops listening.
pub fn spawn(
    root: PathBuf,
    events: Sender<Event>,
    wake: mpsc::Receiver<()>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("lsp-watch".into())
        .spawn(move || {
            let Some(rt) = super::events::thread_runtime(&events, "cannot watch the store") else {
                return;
            };
            let mut w = Watcher {
                root,
                events,
                wake,
                said: String::new(),
                last: None,
            };
            rt.block_on(w.run());
        })?;
    Ok(())
}

struct Watcher {
    root: PathBuf,
    events: Sender<Event>,
    wake: mpsc::Receiver<()>,
    /// The last mode message, so each is said once.
    said: String,
    /// The last whole answer handed over, kept to merge partial ones into.
    last: Option<Arc<GuardsResult>>,
}

/// `last` with the decisions in `moved` replaced by `fresh`'s (the ones `fresh` lacks have left
/// the view), and the store-wide facts (gating, tally, reference) taken from `fresh`.
fn merged(last: &GuardsResult, moved: &HashSet<String>, fresh: GuardsResult) -> GuardsResult {
    let mut decisions: Vec<GuardedDecision> = last
        .decisions
        .iter()
        .filter(|d| !moved.contains(&d.tick_id))
        .cloned()
        .collect();
    decisions.extend(fresh.decisions);
    decisions.sort_by(|a, b| a.file.cmp(&b.file));
    GuardsResult {
        matched_total: decisions.len(),
        decisions,
        ..fresh
    }
}

/// Why a mode ended.
enum End {
    /// The server is stopping.
    Exit,
    /// Look for the daemon again.
    Retry,
}

/// Note which decision a pushed item moved; a resync asks about everything.
fn note(moved: &mut Option<HashSet<String>>, ev: WatchEvent) {
    match ev {
        WatchEvent::Changed(c) => {
            if let Some(m) = moved {
                m.insert(c.tick_id);
            }
        }
        WatchEvent::Resync { .. } => *moved = None,
    }
}

fn forced_local() -> bool {
    std::env::var("EVD_NO_DAEMON").is_ok_and(|v| !v.is_empty() && v != "0")
}

impl Watcher {
    fn session(&self) -> Session {
        let g = Globals {
            store: Some(self.root.display().to_string()),
            ..Globals::default()
        };
        let mut s = Session::new(&g);
        s.cwd = self.root.clone();
        s
    }

    fn say(&mut self, kind: MessageType, text: String) {
        if text != self.said {
            self.said = text.clone();
            let _ = self.events.send(Event::Log(kind, text));
        }
    }

    /// The files the last answer's decisions cite as evidence.
    fn cited(&self) -> Vec<String> {
        self.last
            .as_deref()
            .map(|g| super::diagnostics::cited_paths(g).into_iter().collect())
            .unwrap_or_default()
    }

    /// Ask `ev.guards` and hand the answer over. `false`: nobody listens any more.
    async fn refresh(&mut self, s: &mut Session) -> bool {
        let req = GuardsRequest {
            context: verbs::verdict_context(s, false),
            all_evidence: true,
            ..Default::default()
        };
        let r = verbs::ask_guards(s, req).await.map(Arc::new);
        self.last = r.as_ref().ok().map(Arc::clone);
        self.events
            .send(Event::Guards(r.map_err(|e| e.message)))
            .is_ok()
    }

    /// Ask `ev.guards` about the decisions whose verdicts `ev.watch` said moved, and hand over
    /// the last answer with those replaced: a commit touching a much-guarded file moves a
    /// fraction of a large store's decisions, a receipt one. Without a last answer, or with
    /// nothing named, everything is asked again.
    async fn refresh_moved(&mut self, s: &mut Session, moved: HashSet<String>) -> bool {
        let Some(last) = self.last.clone() else {
            return self.refresh(s).await;
        };
        if moved.is_empty() {
            return self.refresh(s).await;
        }
        let req = GuardsRequest {
            context: verbs::verdict_context(s, false),
            ticks: Some(moved.iter().cloned().collect()),
            all_evidence: true,
            ..Default::default()
        };
        let r = verbs::ask_guards(s, req)
            .await
            .map(|fresh| Arc::new(merged(&last, &moved, fresh)));
        self.last = r.as_ref().ok().map(Arc::clone);
        self.events
            .send(Event::Guards(r.map_err(|e| e.message)))
            .is_ok()
    }

    async fn run(&mut self) {
        let mut s = self.session();
        let mut may_start = true;
        // How long to wait before trying a running daemon again after it refused or failed us.
        let mut backoff = POLL;
        loop {
            let tried = !forced_local() && (may_start || daemon_running());
            // Only the first attempt may start a daemon: one someone stopped stays stopped.
            s.attach_only = !may_start;
            let sub = if tried {
                subscribe(&mut s).await
            } else {
                Err(if forced_local() {
                    "EVD_NO_DAEMON is set".to_string()
                } else {
                    "evd is not running".to_string()
                })
            };
            may_start = false;
            let end = match sub {
                Ok(sub) => {
                    backoff = POLL;
                    let degraded = degraded(&mut s, &self.root).await;
                    match &degraded {
                        None => self.say(
                            MessageType::INFO,
                            "evctl lsp: evd pushes this store's verdict changes".into(),
                        ),
                        Some(why) => self.say(
                            MessageType::WARNING,
                            format!(
                                "evctl lsp: evd serves this store degraded ({why}) and pushes \
                                 nothing: polling it every second"
                            ),
                        ),
                    }
                    if !self.refresh(&mut s).await {
                        return;
                    }
                    self.pushed(&mut s, sub, degraded.is_some()).await
                }
                Err(why) => {
                    s.give_up_daemon(why.clone());
                    self.say(
                        MessageType::WARNING,
                        format!(
                            "evctl lsp: no verdicts pushed by evd ({why}): answering in-process \
                             and polling the store every second"
                        ),
                    );
                    if !self.refresh(&mut s).await {
                        return;
                    }
                    let wait = backoff;
                    if tried {
                        backoff = (backoff * 2).min(Duration::from_secs(8));
                    }
                    self.polled(&mut s, wait).await
                }
            };
            match end {
                End::Exit => return,
                End::Retry => s.forget_daemon(),
            }
        }
    }

    /// Follow the subscription until it ends. `poll`: the store is not watched by evd, so look at
    /// it every second as well.
    async fn pushed(
        &mut self,
        s: &mut Session,
        mut sub: Subscription<WatchEvent>,
        poll: bool,
    ) -> End {
        let mut last = Instant::now();
        let mut stamp = fingerprint(&self.root, self.cited());
        loop {
            let tick = if poll { POLL } else { PUSHED_FULL };
            let mut lost: Option<String> = None;
            // The decisions whose verdicts moved; `None`: ask about everything.
            let mut moved: Option<HashSet<String>> = Some(HashSet::new());
            tokio::select! {
                item = sub.next() => {
                    match item {
                        Some(Ok(first)) => {
                            note(&mut moved, first);
                            // Take whatever else is already queued: one answer for the burst.
                            loop {
                                match tokio::time::timeout(Duration::ZERO, sub.next()).await {
                                    Ok(Some(Ok(ev))) => {
                                        note(&mut moved, ev);
                                        continue;
                                    }
                                    Ok(Some(Err(e))) => lost = Some(e.to_string()),
                                    Ok(None) => lost = Some("the stream ended".into()),
                                    Err(_) => {}
                                }
                                break;
                            }
                        }
                        Some(Err(e)) => lost = Some(e.to_string()),
                        None => lost = Some("the stream ended".into()),
                    }
                }
                w = self.wake.recv() => {
                    if w.is_none() {
                        return End::Exit;
                    }
                    moved = None;
                }
                () = tokio::time::sleep(tick) => {
                    let now = fingerprint(&self.root, self.cited());
                    let due = if poll { last.elapsed() >= POLL_FULL } else { last.elapsed() >= PUSHED_FULL };
                    if now == stamp && !due {
                        continue;
                    }
                    stamp = now;
                    moved = None;
                }
            }
            if let Some(why) = lost {
                self.say(
                    MessageType::WARNING,
                    format!("evctl lsp: the evd watch stream ended ({why}); looking for evd again"),
                );
                // The daemon may be gone: answer in-process meanwhile.
                s.give_up_daemon(why);
                return if self.refresh(s).await {
                    End::Retry
                } else {
                    End::Exit
                };
            }
            let answered = match moved {
                Some(ticks) => self.refresh_moved(s, ticks).await,
                None => {
                    last = Instant::now();
                    self.refresh(s).await
                }
            };
            if !answered {
                return End::Exit;
            }
        }
    }

    /// Answer in-process, polling the disk, until a daemon is running again (looked for after
    /// `wait`, then every second).
    async fn polled(&mut self, s: &mut Session, wait: Duration) -> End {
        let mut last = Instant::now();
        let mut stamp = fingerprint(&self.root, self.cited());
        let next_look = Instant::now() + wait;
        loop {
            tokio::select! {
                w = self.wake.recv() => {
                    if w.is_none() {
                        return End::Exit;
                    }
                }
                () = tokio::time::sleep(POLL) => {
                    if !forced_local() && Instant::now() >= next_look && daemon_running() {
                        return End::Retry;
                    }
                    let now = fingerprint(&self.root, self.cited());
                    if now == stamp && last.elapsed() < POLL_FULL {
                        continue;
                    }
                    stamp = now;
                }
            }
            last = Instant::now();
            if !self.refresh(s).await {
                return End::Exit;
            }
        }
    }
}

/// Whether an evd holds this user's runtime directory (one is running, or starting).
fn daemon_running() -> bool {
    crate::client::live_daemon(&evd::api::shared::paths::runtime_dir()).is_some()
}

async fn subscribe(s: &mut Session) -> Result<Subscription<WatchEvent>, String> {
    let ctx = s.context(true, Needs::default());
    let Some(c) = s.daemon().await else {
        return Err(s.unreachable_reason().unwrap_or("no daemon").to_string());
    };
    proto::rpc::EvApiClient::watch(&*c, StoreRequest { context: ctx })
        .await
        .map_err(|e| call_error(e).message)
}

/// Why evd serves the store at `root` degraded, if it does.
async fn degraded(s: &mut Session, root: &Path) -> Option<String> {
    let c = s.daemon().await?;
    let st = proto::rpc::EvApiClient::status(&*c).await.ok()?;
    let canon = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    st.stores
        .iter()
        .find(|x| Path::new(&x.root) == canon)
        .and_then(|x| x.watch.strip_prefix("degraded: ").map(str::to_string))
}

/// Receipts files looked at, at most, in one stamp.
const MAX_STAMPED: usize = 100_000;

/// A cheap stamp of what a verdict depends on: it changes when any of those files does, or any
/// file of `cited` (store-relative: the evidence current decisions cite).
pub fn fingerprint(root: &Path, cited: Vec<String>) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut h = DefaultHasher::new();
    let mut add = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) => (m.ino(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime_nsec()).hash(&mut h),
        Err(_) => 0u8.hash(&mut h),
    };
    let ev = root.join(".evolving");
    for f in [
        "HEAD",
        "config",
        "ticks",
        "results/selected.json",
        "results/receipts",
    ] {
        add(&ev.join(f));
    }
    if let Ok(rd) = std::fs::read_dir(ev.join("results/receipts")) {
        let mut names: Vec<PathBuf> = rd.flatten().map(|e| e.path()).take(MAX_STAMPED).collect();
        names.sort();
        for p in &names {
            add(p);
        }
    }
    for c in &cited {
        add(&root.join(c));
    }
    let git = root.join(".git");
    for f in ["", "HEAD", "packed-refs"] {
        add(&git.join(f));
    }
    if let Ok(head) = evd::api::shared::fsio::read_text(&git.join("HEAD")) {
        if let Some(r) = head.trim().strip_prefix("ref: ") {
            if !r.split('/').any(|c| c == "..") {
                add(&git.join(r));
            }
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsp::diagnostics::tests::{answer, decision, ground};

    #[test]
    fn a_partial_answer_replaces_the_moved_decisions_and_drops_the_ones_gone() {
        let g = |label: &str| vec![ground(0, label, label == "red", &["db/schema.sql"], None)];
        let last = answer(vec![
            decision("aaaaaaaaaaaa", "kept", g("green")),
            decision("bbbbbbbbbbbb", "moved", g("green")),
            decision("cccccccccccc", "superseded", g("green")),
        ]);
        let moved: HashSet<String> = ["bbbbbbbbbbbb", "cccccccccccc", "000000000000"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut fresh = answer(vec![
            decision("bbbbbbbbbbbb", "moved", g("red")),
            decision("000000000000", "new", g("not-run")),
        ]);
        fresh.gating = true;
        let m = merged(&last, &moved, fresh);
        let got: Vec<(&str, &str)> = m
            .decisions
            .iter()
            .map(|d| (d.tick_id.as_str(), d.grounds[0].label.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("000000000000", "not-run"),
                ("aaaaaaaaaaaa", "green"),
                ("bbbbbbbbbbbb", "red")
            ]
        );
        assert!(m.gating, "store-wide facts come from the fresh answer");
        assert_eq!(m.matched_total, 3);
    }
}
