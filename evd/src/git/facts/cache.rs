//! The cache of git's answers ([`FactCache`]): an answer is taken from it while every stamp
//! recorded with it holds, else git is asked (or HEAD read from its files) and the answer kept
//! when nothing it depends on moved meanwhile. It counts spawns, misses and hits, and loads and
//! saves the answers through [`super::persisted`].
//!
//! Which files an answer depends on is [`super::deps`]'s, what a stamp is [`super::stamp`]'s,
//! when the environment allows caching [`super::env`]'s: this file must not decide any of those
//! itself. Every git process it starts goes through [`crate::git::run`] or
//! [`crate::sys::child`], under a deadline.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::deps::{self, loose_ref, valid_ref, Query};
use super::env::{Env, Mode, REDIRECTING, SYSTEM_CONFIG};
use super::persisted::{read_persisted, write_persisted, Entry};
use super::stamp::{Dep, RACY_WINDOW};

/// At most this many answers are kept; the oldest recorded go first.
pub const MAX_ENTRIES: usize = 32;

/// The cache of git's answers; see the documentation of [`crate::git::facts`].
#[derive(Debug)]
pub struct FactCache {
    mode: Mode,
    env: Env,
    entries: Vec<Entry>,
    changed: bool,
    spawns: u64,
    /// Answers read from git's files on a miss, with no process.
    read_from_files: u64,
    hits: u64,
    pub(super) racy_window: Duration,
    pub(super) system_config: PathBuf,
    /// Environment set on [`Mode::Caller`] spawns (tests run git with their own `HOME`).
    overrides: Vec<(&'static str, Option<OsString>)>,
}

impl FactCache {
    fn new(mode: Mode, env: Env) -> FactCache {
        FactCache {
            mode,
            env,
            entries: Vec::new(),
            changed: false,
            spawns: 0,
            read_from_files: 0,
            hits: 0,
            racy_window: RACY_WINDOW,
            system_config: PathBuf::from(SYSTEM_CONFIG),
            overrides: Vec::new(),
        }
    }

    /// An empty cache answering as the caller's git, with this process's environment.
    pub fn for_caller() -> FactCache {
        FactCache::new(
            Mode::Caller,
            Env::from_vars(Mode::Caller, std::env::vars_os()),
        )
    }

    /// An empty cache answering as evd's repository-only queries, with this process's
    /// environment.
    pub fn for_repository() -> FactCache {
        FactCache::new(
            Mode::Repository,
            Env::from_vars(Mode::Repository, std::env::vars_os()),
        )
    }

    /// An empty cache deciding by the environment `vars` instead of the process's. In
    /// [`Mode::Caller`] git is also spawned with them: its `HOME`, `XDG_CONFIG_HOME` and every
    /// variable that changes which config git reads are taken from `vars` (or removed), never
    /// from this process.
    pub fn with_env<I: IntoIterator<Item = (OsString, OsString)>>(
        mode: Mode,
        vars: I,
    ) -> FactCache {
        let vars: Vec<(OsString, OsString)> = vars.into_iter().collect();
        let env = Env::from_vars(mode, vars.iter().cloned());
        let mut c = FactCache::new(mode, env.clone());
        let from_vars = |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        c.overrides = vec![
            ("HOME", env.home.map(OsString::from)),
            ("XDG_CONFIG_HOME", env.xdg.map(OsString::from)),
            ("GIT_CONFIG_NOSYSTEM", from_vars("GIT_CONFIG_NOSYSTEM")),
        ];
        for name in REDIRECTING {
            c.overrides.push((name, from_vars(name)));
        }
        c
    }

    /// [`FactCache::for_caller`] with the answers persisted at `path`. A missing, unreadable or
    /// malformed file is an empty cache; with a `GIT_*` environment the file is not read.
    pub fn load(path: &Path) -> FactCache {
        FactCache::for_caller().read_from(path)
    }

    /// This cache with the answers persisted at `path` (see [`FactCache::load`]).
    pub fn read_from(mut self, path: &Path) -> FactCache {
        if self.env.cacheable {
            self.entries = read_persisted(path).unwrap_or_default();
            let excess = self.entries.len().saturating_sub(MAX_ENTRIES);
            self.entries.drain(..excess);
        }
        self
    }

    /// Write the answers to `path` if they changed since loading (a temp file in the same
    /// directory, mode 0600, renamed over it; no fsync, it is a cache).
    pub fn save(&mut self, path: &Path) -> io::Result<()> {
        if !self.changed {
            return Ok(());
        }
        write_persisted(path, self.entries.clone())?;
        self.changed = false;
        Ok(())
    }

    /// Whether this cache may keep answers at all (its environment allows it); when not,
    /// every [`FactCache::answer`] is a spawn.
    pub fn caches(&self) -> bool {
        self.env.cacheable
    }

    /// Whether answers were added or dropped since loading (or the last save).
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// How many git processes this cache has spawned.
    pub fn spawns(&self) -> u64 {
        self.spawns
    }

    /// Answers not taken from the cache: spawned, or read from git's files.
    pub fn misses(&self) -> u64 {
        self.spawns + self.read_from_files
    }

    /// How many answers were served from the cache.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// How many answers are held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// git's answer to `q` in `root`: trimmed stdout, `None` when git failed or printed
    /// nothing. From the cache when every file it depends on is unchanged, else from git.
    pub fn answer(&mut self, root: &Path, q: Query) -> Option<String> {
        if !self.env.cacheable {
            return self.ask(root, q);
        }
        let Some(canon) = canonical(root) else {
            return self.ask(root, q);
        };
        if let Some(i) = self.position(&canon, q) {
            if self.entries[i].deps.iter().all(Dep::holds) {
                self.hits += 1;
                return self.entries[i].answer.clone();
            }
            self.entries.remove(i);
            self.changed = true;
        }
        self.miss(root, &canon, q)
    }

    fn position(&self, canon: &str, q: Query) -> Option<usize> {
        self.entries.iter().position(|e| {
            e.root == canon
                && e.query == q
                && e.home == self.env.home
                && e.xdg == self.env.xdg
                && e.nosystem == self.env.nosystem
        })
    }

    /// Ask git, recording the answer when it provably depended only on stamped files.
    fn miss(&mut self, root: &Path, canon: &str, q: Query) -> Option<String> {
        let Some(mut plan) = deps::plan(Path::new(canon), q, &self.env, &self.system_config) else {
            return self.ask(root, q);
        };
        // For the upstream: whether one is configured, and if so its loose file, stamped before
        // the answer is asked for.
        let mut expect_none = false;
        if q == Query::Upstream {
            match plan.head_ref.clone() {
                // Detached: git has no upstream to give.
                None => expect_none = true,
                Some(branch) => match self.upstream_dep(root, &plan.gitdir, &branch) {
                    None => return self.ask(root, q),
                    Some(None) => expect_none = true,
                    Some(Some(dep)) => plan.deps.push(dep),
                },
            }
        }
        // HEAD needs no git process when its files say it plainly; they were stamped above,
        // and are checked again below, before the answer is kept.
        let answer = match (q, plan.head_from_files()) {
            (Query::Head, Some(id)) => {
                self.read_from_files += 1;
                Some(id)
            }
            _ => self.ask(root, q),
        };
        if expect_none && answer.is_some() {
            // git knows of an upstream we did not find: we cannot say what it depends on.
            return answer;
        }
        let window = i128::try_from(self.racy_window.as_nanos()).unwrap_or(i128::MAX);
        let since = now_ns().saturating_sub(window);
        let unchanged = canonical(root).as_deref() == Some(canon)
            && plan.deps.iter().all(Dep::holds)
            && !plan.deps.iter().any(|d| d.stamp.racy(since));
        if unchanged {
            self.insert(Entry {
                root: canon.to_string(),
                query: q,
                home: self.env.home.clone(),
                xdg: self.env.xdg.clone(),
                nosystem: self.env.nosystem.clone(),
                answer: answer.clone(),
                deps: plan.deps,
            });
        }
        answer
    }

    /// Record an answer, replacing any for the same key and dropping the oldest beyond
    /// [`MAX_ENTRIES`].
    fn insert(&mut self, e: Entry) {
        if let Some(i) = self.position(&e.root, e.query) {
            self.entries.remove(i);
        }
        self.entries.push(e);
        let excess = self.entries.len().saturating_sub(MAX_ENTRIES);
        self.entries.drain(..excess);
        self.changed = true;
    }

    /// The upstream of `branch` as git configures it (`git for-each-ref --format=%(upstream)`,
    /// which names it even before it is fetched) and its loose file's stamp: `Some(None)` when
    /// none is configured, `None` when we cannot tell (do not cache).
    fn upstream_dep(&mut self, root: &Path, gitdir: &Path, branch: &str) -> Option<Option<Dep>> {
        let out = self.run(
            root,
            &["for-each-ref", "--format=%(refname) %(upstream)", branch],
        )?;
        // An unborn branch is not listed, though git may still resolve its upstream.
        let line = out.lines().find(|l| l.split(' ').next() == Some(branch))?;
        match line.split_once(' ').map(|(_, u)| u.trim()) {
            None | Some("") => Some(None),
            Some(upstream) => {
                valid_ref(upstream)?;
                loose_ref(gitdir, upstream).map(Some)
            }
        }
    }

    /// git's answer, spawned: the question as this mode asks it.
    pub(super) fn ask(&mut self, root: &Path, q: Query) -> Option<String> {
        let args: &[&str] = match (self.mode, q) {
            (Mode::Repository, Query::Head) => &["rev-parse", "--verify", "-q", "HEAD"],
            (Mode::Caller, Query::Head) => &["rev-parse", "HEAD"],
            (_, Query::Upstream) => &["rev-parse", "@{upstream}"],
        };
        self.run(root, args)
    }

    /// `git -C root args…` as this mode spawns it: trimmed stdout, `None` on failure or when
    /// empty.
    fn run(&mut self, root: &Path, args: &[&str]) -> Option<String> {
        self.spawns += 1;
        match self.mode {
            Mode::Repository => crate::git::run::git(root, args),
            Mode::Caller => {
                let mut c = Command::new("git");
                c.arg("-C").arg(root).args(args);
                for (k, v) in &self.overrides {
                    match v {
                        Some(v) => c.env(k, v),
                        None => c.env_remove(k),
                    };
                }
                crate::sys::child::git_stdout(&mut c)
            }
        }
    }
}

/// The canonical (symlink-free) form of `root`, as git sees it after `chdir`; `None` when it
/// cannot be resolved or is not UTF-8.
fn canonical(root: &Path) -> Option<String> {
    fs::canonicalize(root)
        .ok()?
        .into_os_string()
        .into_string()
        .ok()
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_answers_go_first() {
        let mut c = FactCache::with_env(Mode::Caller, []);
        for i in 0..MAX_ENTRIES + 3 {
            c.insert(Entry {
                root: format!("/r{i}"),
                query: Query::Head,
                home: None,
                xdg: None,
                nosystem: None,
                answer: None,
                deps: Vec::new(),
            });
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        assert_eq!(c.entries[0].root, "/r3");
        assert!(c.position("/r2", Query::Head).is_none());
        assert!(c
            .position(&format!("/r{}", MAX_ENTRIES + 2), Query::Head)
            .is_some());
    }
}
