//! evd's own events for the ledger (a tick recorded, a verdict changed, a check run): noted on
//! the request's path, written together shortly after, off it, with the envelope of each.

use proto::Tick;

use super::OpenStore;

/// How long the `git` envelope of evd's own events is reused.
const JOURNAL_GIT_FOR: std::time::Duration = std::time::Duration::from_secs(2);
/// The most own events that wait (a ledger that cannot be written must not grow memory).
const MAX_JOURNAL: usize = 100_000;

/// Who writes evd's own events from this process: `evd`, or `evctl` answering in-process.
pub fn own_agent() -> &'static str {
    static AGENT: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    AGENT.get_or_init(|| {
        let exe = std::env::current_exe().ok();
        match exe
            .as_deref()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
        {
            Some(n) if n.starts_with("evctl") => "evctl",
            _ => "evd",
        }
    })
}

/// The `git` envelope of the store's repository now: branch (`HEAD` when detached), head sha
/// and whether tracked files have uncommitted changes (empty strings outside a repository).
pub fn git_now(root: &std::path::Path) -> serde_json::Value {
    // One git process when it reads plainly (a write's answer waits for this).
    if let Some(e) = crate::git::worktree::envelope(root) {
        let branch = match e.branch {
            Some(b) => b,
            None if e.head.is_empty() => String::new(),
            None => "HEAD".into(),
        };
        return crate::ledger::git(&branch, &e.head, e.dirty);
    }
    let head =
        crate::git::run::git(root, &["rev-parse", "--verify", "-q", "HEAD"]).unwrap_or_default();
    let branch = crate::git::run::git(root, &["symbolic-ref", "--short", "-q", "HEAD"])
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| {
            if head.is_empty() {
                String::new()
            } else {
                "HEAD".into()
            }
        });
    let dirty = crate::git::worktree::status(root).is_some_and(|u| !u.paths.is_empty());
    crate::ledger::git(&branch, &head, dirty)
}

impl OpenStore {
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

    /// Journal, as `recovered`, each tick a write landed without its `tick_recorded`: the daemon
    /// that wrote it died after the tick was durable and before its journal (its request log
    /// has the intent, never the answer) and nobody asked again. Costs nothing when every write
    /// finished (the ledger is read only when one did not).
    pub fn journal_crashed_writes(&mut self) {
        let landed: Vec<(String, String)> = self
            .store
            .requests
            .unfinished_ticks()
            .into_iter()
            .filter(|(_, t)| self.store.ticks_dir().join(t).is_file())
            .collect();
        if landed.is_empty() {
            return;
        }
        let text = self.ledger.read_bytes().unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let mut any = false;
        for (id, t) in landed {
            // Applied, its answer lost: a retry is told so (and this is not looked at again).
            if let Err(e) = self.store.requests.recovered(&id, &t) {
                tracing::warn!(error = %e, "cannot record a recovered write in the request log");
            }
            if crate::ledger::records_tick(&text, &t) {
                continue;
            }
            let tick = self
                .store
                .read_tick_file(&t)
                .ok()
                .flatten()
                .and_then(|s| proto::Tick::parse(&s).ok());
            if let Some(tick) = tick {
                tracing::info!(tick = %tick.id, "journaling a tick a dead daemon recorded without its event");
                self.journal_tick("recovered", &tick);
                any = true;
            }
        }
        if any {
            self.write_journal();
        }
    }

    /// Note one of evd's own events for the ledger (written shortly after, with the others
    /// waiting: see [`OpenStore::write_journal`]).
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
    pub fn journal_check(&mut self, c: crate::ledger::replay::PendingCheck) {
        self.make_room();
        self.checks.push((self.journal.len(), Box::new(c)));
        self.journal_since
            .get_or_insert_with(std::time::Instant::now);
    }

    fn make_room(&mut self) {
        if self.journal.len() + self.checks.len() >= MAX_JOURNAL {
            // Far behind (a ledger that cannot be written): the oldest are let go, said once.
            tracing::warn!(store = %self.store.root().display(), "ledger journal full; dropping its oldest events");
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
        let text = match self.ledger.read_bytes() {
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
        let mut batch = crate::open::replay_record::Batch::new(self);
        for (i, (t, p)) in events.into_iter().enumerate() {
            while let Some((_, c)) = checks.next_if(|(at, _)| *at <= i) {
                crate::open::replay_record::expand(&mut batch, *c);
            }
            batch.push(t, p, 256);
        }
        for (_, c) in checks {
            crate::open::replay_record::expand(&mut batch, *c);
        }
        match batch.finish() {
            Ok(()) => {
                self.journal_started = true;
                self.journal_since = None;
            }
            Err(rest) => {
                tracing::warn!(store = %self.store.root().display(), "cannot write the ledger; its events wait for the next try");
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
                let g = git_now(self.store.root());
                self.journal_git = Some((std::time::Instant::now(), g.clone()));
                g
            }
        };
        let host = crate::ledger::host(self.store.root());
        let agent = own_agent();
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
}
