//! A stamp-validated cache of git's own answers to `rev-parse HEAD` and `rev-parse @{upstream}`.
//!
//! Spawning git costs a millisecond or two, which dominates a `check`. Git stays the oracle: on
//! a miss it is spawned exactly as before and its answer is recorded together with a *stamp*
//! (device, inode, mtime, ctime, length, or "absent") of every file that answer can depend on.
//! The answer is reused only while every one of those stamps is unchanged; anything we cannot
//! reason about (a `.git` file, reftable, a nested symref, config includes, a `GIT_*`
//! variable that can redirect git, files changed within the last moments) is simply never
//! cached. Transport, identity, editor, pager and tracing variables are inert (as are the index,
//! prefix and exec path git exports to a hook), and
//! `GIT_CONFIG_NOSYSTEM` is part of an answer's key.
//!
//! What an answer depends on, in a repository whose `.git` is a real directory:
//!
//! - **Discovery.** Every directory from the (canonical) root up to the one holding `.git`, by
//!   identity (a mount or a replaced directory is a change), and the absence of `.git` and
//!   `HEAD` in each below it (git would stop at either). The walk must stay on one device, and
//!   the repository must be ours (else git consults `safe.directory`).
//! - **Head.** `<gitdir>/HEAD`, `<gitdir>/packed-refs`, `<gitdir>/config` (the repository
//!   format), the loose file of the branch HEAD names, the identity of `objects/` and `refs/`,
//!   and the absence of `reftable/` and `commondir`.
//! - **Upstream.** All of Head's, plus `<gitdir>/config.worktree`, the user and system config
//!   files, and the loose file of the upstream ref (its name found with `git for-each-ref
//!   --format=%(upstream)` before the answer is asked for, so that its stamp predates git's read).
//!   Any of these config files (or the repository's) mentioning `include` is not cached.
//!
//! On a network or FUSE filesystem (NFS, SMB, sshfs, …) a `stat` may come from a client-side
//! attribute cache, so nothing there is cached.
//!
//! Stamps are taken before git is spawned and compared again after it exits; an answer during
//! which anything moved is not kept. A file modified within [`RACY_WINDOW`] of being stamped is
//! not trusted (a second change in the same timestamp tick could leave an identical stamp).
//!
//! Two variants: [`Mode::Caller`] answers as the caller's own `git` would (evctl's facts,
//! persisted between runs with [`FactCache::load`] / [`FactCache::save`]), and
//! [`Mode::Repository`] answers as evd's repository-only queries do
//! ([`crate::git::run::git`], which clears `GIT_DIR`, `GIT_WORK_TREE` and
//! `GIT_INDEX_FILE`), kept in memory for the daemon's life.

use std::ffi::{OsStr, OsString};
use std::fs::{self, Metadata};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// At most this many answers are kept; the oldest recorded go first.
pub const MAX_ENTRIES: usize = 32;

/// A file whose mtime or ctime is this recent when its answer is recorded is not trusted.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// git's system-wide config file (where a Debian/Ubuntu-style git with prefix `/usr` reads it).
pub const SYSTEM_CONFIG: &str = "/etc/gitconfig";

/// The persisted file's format; any other reads as an empty cache.
const FORMAT: u32 = 1;

/// A persisted cache larger than this is not read; a config file larger than this is not
/// searched for includes (and so not trusted).
const MAX_READ: u64 = 1 << 20;

/// Environment variables that change which files git reads. Even in [`Mode::Repository`] (whose
/// spawn clears `GIT_DIR`, `GIT_WORK_TREE` and `GIT_INDEX_FILE`), their presence in our own
/// environment means the dependency set below would not be the one git used.
const REDIRECTING: &[&str] = &[
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_NAMESPACE",
];

/// The git question asked.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Query {
    /// `git rev-parse HEAD` (in [`Mode::Repository`]: `git rev-parse --verify -q HEAD`).
    Head,
    /// `git rev-parse @{upstream}`.
    Upstream,
}

/// Whose git is asked.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// The caller's own: `git -C <root> rev-parse …` with the process environment (evctl). Any
    /// `GIT_*` variable in the environment disables caching.
    Caller,
    /// evd's repository-only query ([`crate::git::run::git`]). Only the variables in
    /// [`REDIRECTING`] disable caching: the three it clears do not matter, and the daemon's
    /// environment does not change during its life.
    Repository,
}

/// What `symlink_metadata` says about a file, enough to tell a replaced or rewritten file.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub struct Meta {
    pub dev: u64,
    pub ino: u64,
    pub mtime: i64,
    pub mtime_ns: i64,
    pub ctime: i64,
    pub ctime_ns: i64,
    pub len: u64,
}

impl Meta {
    fn of(m: &Metadata) -> Meta {
        Meta {
            dev: m.dev(),
            ino: m.ino(),
            mtime: m.mtime(),
            mtime_ns: m.mtime_nsec(),
            ctime: m.ctime(),
            ctime_ns: m.ctime_nsec(),
            len: m.len(),
        }
    }

    /// Whether its mtime or ctime is at or after `since` (nanoseconds since the epoch).
    fn changed_since(&self, since: i128) -> bool {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        ns(self.mtime, self.mtime_ns) >= since || ns(self.ctime, self.ctime_ns) >= since
    }
}

/// The state of one path an answer depends on.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
pub enum Stamp {
    /// Nothing there (or a path component is not a directory).
    Absent,
    /// A file or directory, by its full metadata.
    File(Meta),
    /// A symlink (a config file kept in a dotfiles directory): the link itself and, when it
    /// resolves, what it points to, so an edit of the target is seen.
    Link { link: Meta, target: Option<Meta> },
    /// A directory by identity only (its entries may come and go): a directory on the way up
    /// to `.git`, `.git` itself, `objects/`, `refs/`. The owner is part of it because git
    /// refuses a repository someone else owns.
    Node { dev: u64, ino: u64, uid: u32 },
}

/// `symlink_metadata`, with "not there" (`ENOENT`, `ENOTDIR`) as `None`.
fn probe(path: &Path) -> io::Result<Option<Metadata>> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

fn gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

impl Stamp {
    /// The full stamp of `path`, following a final symlink for its target's stamp too.
    pub fn of(path: &Path) -> io::Result<Stamp> {
        Ok(match probe(path)? {
            None => Stamp::Absent,
            Some(m) if m.file_type().is_symlink() => Stamp::Link {
                link: Meta::of(&m),
                target: match fs::metadata(path) {
                    Ok(t) => Some(Meta::of(&t)),
                    Err(e) if gone(&e) => None,
                    Err(e) => return Err(e),
                },
            },
            Some(m) => Stamp::File(Meta::of(&m)),
        })
    }

    /// The identity stamp of `path` (see [`Stamp::Node`]).
    fn node(path: &Path) -> io::Result<Stamp> {
        Ok(match probe(path)? {
            None => Stamp::Absent,
            Some(m) => Stamp::Node {
                dev: m.dev(),
                ino: m.ino(),
                uid: m.uid(),
            },
        })
    }

    /// Whether anything stamped here changed at or after `since` (ns since the epoch).
    fn racy(&self, since: i128) -> bool {
        match self {
            Stamp::Absent | Stamp::Node { .. } => false,
            Stamp::File(m) => m.changed_since(since),
            Stamp::Link { link, target } => {
                link.changed_since(since) || target.is_some_and(|t| t.changed_since(since))
            }
        }
    }
}

/// One path and its stamp when the answer was computed.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Dep {
    pub path: String,
    pub stamp: Stamp,
}

impl Dep {
    /// `None` for a path that is not UTF-8 (it could not be persisted faithfully).
    fn new(path: &Path, stamp: Stamp) -> Option<Dep> {
        Some(Dep {
            path: path.to_str()?.to_string(),
            stamp,
        })
    }

    /// Whether the path still has the recorded stamp (an error reading it is a change).
    fn holds(&self) -> bool {
        let path = Path::new(&self.path);
        let now = match self.stamp {
            Stamp::Node { .. } => Stamp::node(path),
            _ => Stamp::of(path),
        };
        now.is_ok_and(|s| s == self.stamp)
    }
}

/// `GIT_*` variables that cannot change what `rev-parse HEAD` or `@{upstream}` answers: they
/// steer transports, identities, editors, pagers and tracing (prefixes end in `_`), plus the
/// three git exports to every hook it runs (the index a commit is staging, the hook's
/// subdirectory, where git's helper programs live), so that a hook's evctl keeps the cache.
const INERT: &[&str] = &[
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_EXEC_PATH",
    "GIT_SSL_",
    "GIT_HTTP_",
    "GIT_CURL_VERBOSE",
    "GIT_PROXY_",
    "GIT_SSH",
    "GIT_ASKPASS",
    "GIT_TERMINAL_PROMPT",
    "GIT_AUTHOR_",
    "GIT_COMMITTER_",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_PAGER",
    "GIT_TRACE",
    "GIT_FLUSH",
    "GIT_PROGRESS_DELAY",
    "GIT_MERGE_VERBOSITY",
];

fn inert(name: &[u8]) -> bool {
    INERT.iter().any(|p| {
        let p = p.as_bytes();
        if p.ends_with(b"_") {
            name.starts_with(p)
        } else {
            name == p || (name.starts_with(p) && name.get(p.len()) == Some(&b'_'))
        }
    })
}

/// Whether answers may be cached for a process with environment variables named `names`.
/// [`Mode::Caller`]: not if any is named `GIT_*` (each can change what the caller's git says),
/// except the [`INERT`] ones. [`Mode::Repository`]: not if any is in [`REDIRECTING`].
pub fn env_allows_caching<I, K>(mode: Mode, names: I) -> bool
where
    I: IntoIterator<Item = K>,
    K: AsRef<OsStr>,
{
    names.into_iter().all(|k| {
        let k = k.as_ref().as_bytes();
        match mode {
            // GIT_CONFIG_NOSYSTEM changes what git reads, but answers are keyed by it.
            Mode::Caller => !k.starts_with(b"GIT_") || inert(k) || k == b"GIT_CONFIG_NOSYSTEM",
            Mode::Repository => !REDIRECTING.iter().any(|r| r.as_bytes() == k),
        }
    })
}

/// The environment facts an answer is keyed by and the user config files git reads.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Env {
    cacheable: bool,
    home: Option<String>,
    xdg: Option<String>,
    /// `GIT_CONFIG_NOSYSTEM` as set (answers with and without it are kept apart).
    nosystem: Option<String>,
}

impl Env {
    fn from_vars<I: IntoIterator<Item = (OsString, OsString)>>(mode: Mode, vars: I) -> Env {
        let vars: Vec<(OsString, OsString)> = vars.into_iter().collect();
        let get = |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let mut cacheable = env_allows_caching(mode, vars.iter().map(|(k, _)| k));
        // Values we could not key or turn into the paths git uses: do not cache.
        let mut text = |v: Option<OsString>| -> Option<String> {
            let v = v?;
            match v.into_string() {
                Ok(s) => Some(s),
                Err(_) => {
                    cacheable = false;
                    None
                }
            }
        };
        let home = text(get("HOME"));
        let xdg = text(get("XDG_CONFIG_HOME"));
        let nosystem = text(get("GIT_CONFIG_NOSYSTEM"));
        if home.as_deref().is_some_and(|h| !h.starts_with('/'))
            || xdg
                .as_deref()
                .is_some_and(|x| !x.is_empty() && !x.starts_with('/'))
        {
            cacheable = false;
        }
        Env {
            cacheable,
            home,
            xdg,
            nosystem,
        }
    }

    /// The user config files, as git chooses them: `$XDG_CONFIG_HOME/git/config` (or
    /// `$HOME/.config/git/config`) and `$HOME/.gitconfig`.
    fn user_configs(&self) -> Vec<PathBuf> {
        let mut v = Vec::new();
        match (self.xdg.as_deref().filter(|x| !x.is_empty()), &self.home) {
            (Some(x), _) => v.push(Path::new(x).join("git").join("config")),
            (None, Some(h)) => v.push(Path::new(h).join(".config").join("git").join("config")),
            (None, None) => {}
        }
        if let Some(h) = &self.home {
            v.push(Path::new(h).join(".gitconfig"));
        }
        v
    }
}

/// One recorded answer.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct Entry {
    /// The canonical repository root git was asked in.
    root: String,
    query: Query,
    home: Option<String>,
    xdg: Option<String>,
    #[serde(default)]
    nosystem: Option<String>,
    answer: Option<String>,
    deps: Vec<Dep>,
}

/// The persisted file.
#[derive(Serialize, Deserialize)]
struct Persisted {
    format: u32,
    entries: Vec<Entry>,
}

/// What is known before git is asked: the dependencies stamped so far, and the branch HEAD
/// names (`None` when detached).
struct Plan {
    gitdir: PathBuf,
    head_ref: Option<String>,
    /// The object id in a detached HEAD file.
    detached_at: Option<String>,
    deps: Vec<Dep>,
}

impl Plan {
    /// HEAD's commit as git would resolve it, read from the files this plan stamped, when that
    /// is plain: a detached HEAD, or a branch whose loose ref holds a 40-hex id. `None` sends
    /// the question to git (a packed or unborn branch, anything unusual).
    fn head_from_files(&self) -> Option<String> {
        let id = match (&self.detached_at, &self.head_ref) {
            (Some(id), _) => id.clone(),
            (None, Some(branch)) => {
                let text = read_small(&self.gitdir.join(valid_ref(branch)?))?;
                text.strip_suffix('\n').unwrap_or(&text).to_string()
            }
            _ => return None,
        };
        proto::model::is_40_lower_hex(&id).then_some(id)
    }
}

/// The cache of git's answers; see the module documentation.
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
    racy_window: Duration,
    system_config: PathBuf,
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
        let body = serde_json::to_vec(&Persisted {
            format: FORMAT,
            entries: self.entries.clone(),
        })
        .map_err(io::Error::other)?;
        crate::sys::fsio::replace_private(path, &body)?;
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
        let Some(mut plan) = self.plan(Path::new(canon), q) else {
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

    /// Stamp what an answer to `q` in the repository around `canon` depends on, before git is
    /// asked. `None` when the repository is not one whose answers we can vouch for.
    fn plan(&self, canon: &Path, q: Query) -> Option<Plan> {
        let mut deps = Vec::new();
        let gitdir = discover(canon, &mut deps)?;
        if remote_fs(&gitdir) != Some(false) {
            return None;
        }
        for (name, want) in [("objects", true), ("refs", true), ("commondir", false)] {
            let p = gitdir.join(name);
            let m = probe(&p).ok()?;
            if want {
                let m = m.filter(|m| m.is_dir())?;
                deps.push(Dep::new(&p, node_of(&m))?);
            } else if m.is_some() {
                return None;
            } else {
                deps.push(Dep::new(&p, Stamp::Absent)?);
            }
        }
        // A reftable repository keeps its refs where our stamps cannot follow.
        let reftable = gitdir.join("reftable");
        if probe(&reftable).ok()?.is_some() {
            return None;
        }
        deps.push(Dep::new(&reftable, Stamp::Absent)?);
        let head = gitdir.join("HEAD");
        let m = probe(&head).ok()?.filter(|m| m.is_file())?;
        deps.push(Dep::new(&head, Stamp::File(Meta::of(&m)))?);
        let head_text = read_small(&head)?;
        let (head_ref, detached_at) = match parse_head(&head_text)? {
            HeadIs::Detached => (None, Some(head_text.trim_end().to_string())),
            HeadIs::Branch(name) => {
                // Which branch HEAD names is all an upstream depends on (the HEAD file), not
                // where the branch points: a commit leaves `@{upstream}` cached.
                if q == Query::Head {
                    deps.push(loose_ref(&gitdir, &name)?);
                }
                (Some(name), None)
            }
        };
        let mut configs = vec![gitdir.join("config")];
        if q == Query::Upstream {
            configs.push(gitdir.join("config.worktree"));
            configs.extend(self.env.user_configs());
            configs.push(self.system_config.clone());
        }
        for p in [gitdir.join("packed-refs")].iter().chain(&configs) {
            deps.push(Dep::new(p, Stamp::of(p).ok()?)?);
        }
        // Includes pull in files we do not stamp. The repository format (all a HEAD needs of
        // the config) is read without them.
        if q == Query::Upstream && configs.iter().any(|p| includes_others(p) != Some(false)) {
            return None;
        }
        Some(Plan {
            gitdir,
            head_ref,
            detached_at,
            deps,
        })
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
    fn ask(&mut self, root: &Path, q: Query) -> Option<String> {
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

fn node_of(m: &Metadata) -> Stamp {
    Stamp::Node {
        dev: m.dev(),
        ino: m.ino(),
        uid: m.uid(),
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

/// Walk up from `canon` as git's discovery does, stamping each directory (by identity) and the
/// absence of `.git` and `HEAD` in it, to the first `.git`. Its path when it is a real
/// directory, on the same device, owned by us; `None` otherwise (a `.git` file or symlink, a
/// bare repository on the way, a mount crossed, no repository at all).
fn discover(canon: &Path, deps: &mut Vec<Dep>) -> Option<PathBuf> {
    let me = crate::sys::users::euid();
    let device = fs::symlink_metadata(canon).ok()?.dev();
    for dir in canon.ancestors() {
        let m = fs::symlink_metadata(dir).ok()?;
        if !m.is_dir() || m.dev() != device {
            return None;
        }
        deps.push(Dep::new(dir, node_of(&m))?);
        let dotgit = dir.join(".git");
        match probe(&dotgit).ok()? {
            None => deps.push(Dep::new(&dotgit, Stamp::Absent)?),
            Some(g) => {
                // A worktree's or submodule's `.git` file, a symlink: not ours to reason about.
                // A repository someone else owns: git consults safe.directory.
                if !g.file_type().is_dir() || g.dev() != device || g.uid() != me || m.uid() != me {
                    return None;
                }
                deps.push(Dep::new(&dotgit, node_of(&g))?);
                return Some(dotgit);
            }
        }
        // git would take a directory holding HEAD (and objects/, refs/) as a bare repository.
        let head = dir.join("HEAD");
        if probe(&head).ok()?.is_some() {
            return None;
        }
        deps.push(Dep::new(&head, Stamp::Absent)?);
    }
    None
}

/// Whether `path` is on a network or FUSE filesystem, where `stat` may answer from a client's
/// attribute cache and so prove nothing about another host's changes. `None` when unknown.
fn remote_fs(path: &Path) -> Option<bool> {
    crate::sys::filesystem::is_remote(path)
}

/// What a HEAD file says.
#[derive(Debug, PartialEq, Eq)]
enum HeadIs {
    Detached,
    Branch(String),
}

/// `ref: <name>` (a branch) or an object id (detached); `None` for anything else.
fn parse_head(text: &str) -> Option<HeadIs> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    if let Some(rest) = line.strip_prefix("ref:") {
        let name = rest.trim_start_matches([' ', '\t']);
        return Some(HeadIs::Branch(valid_ref(name)?.to_string()));
    }
    let hex = |s: &str| matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit());
    hex(line).then_some(HeadIs::Detached)
}

/// A ref name we are willing to turn into a path under the git directory: `refs/…`, no empty,
/// dot-led or `..` components, none of the characters git forbids, not a lock file.
fn valid_ref(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("refs/")?;
    let bad_char = |c: char| c.is_ascii_control() || " ~^:?*[\\".contains(c);
    let ok = !rest.is_empty()
        && !name.contains("..")
        && !name.contains("@{")
        && !name.ends_with(".lock")
        && !name.chars().any(bad_char)
        && name
            .split('/')
            .all(|c| !c.is_empty() && !c.starts_with('.'));
    ok.then_some(name)
}

/// The stamp of the loose file of ref `name`: absent (it may be packed) or a regular file that
/// is not itself a symbolic ref. `None` for anything else.
fn loose_ref(gitdir: &Path, name: &str) -> Option<Dep> {
    let p = gitdir.join(valid_ref(name)?);
    let m = match probe(&p).ok()? {
        None => return Dep::new(&p, Stamp::Absent),
        Some(m) => m,
    };
    if !m.is_file() {
        return None;
    }
    let dep = Dep::new(&p, Stamp::File(Meta::of(&m)))?;
    // A symbolic ref in a loose file (a nested symref) leads to files we did not stamp.
    if read_small(&p)?.starts_with("ref:") {
        return None;
    }
    Some(dep)
}

/// A small file's text (following symlinks); `None` when unreadable, too large or not UTF-8.
fn read_small(path: &Path) -> Option<String> {
    let f = fs::File::open(path).ok()?;
    let mut s = String::new();
    f.take(MAX_READ + 1).read_to_string(&mut s).ok()?;
    (s.len() as u64 <= MAX_READ).then_some(s)
}

/// Whether a config file may pull in others (`include` / `includeIf`, matched loosely:
/// anywhere, any case). `Some(false)` for a missing file; `None` when it cannot be read.
fn includes_others(path: &Path) -> Option<bool> {
    match probe(path).ok()? {
        None => Some(false),
        Some(_) => {
            let f = fs::File::open(path).ok()?;
            let mut bytes = Vec::new();
            f.take(MAX_READ + 1).read_to_end(&mut bytes).ok()?;
            if bytes.len() as u64 > MAX_READ {
                return None;
            }
            bytes.make_ascii_lowercase();
            Some(bytes.windows(7).any(|w| w == b"include"))
        }
    }
}

/// The entries of a persisted cache; `None` for a missing, unreadable or malformed file.
fn read_persisted(path: &Path) -> Option<Vec<Entry>> {
    let f = crate::sys::fsio::open_regular(path).ok()?;
    if f.metadata().ok()?.len() > MAX_READ {
        return None;
    }
    let mut s = String::new();
    f.take(MAX_READ).read_to_string(&mut s).ok()?;
    let p: Persisted = serde_json::from_str(&s).ok()?;
    (p.format == FORMAT).then_some(p.entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Instant;

    /// A repository `main` with two commits and an upstream `origin/main` (a remote-tracking
    /// ref set by hand, no network), and a private HOME for every git we run.
    struct Repo {
        dir: tempfile::TempDir,
        home: tempfile::TempDir,
    }

    impl Repo {
        fn new() -> Repo {
            let r = Repo::bare_start();
            r.git(&["init", "-q", "-b", "main", "."]);
            r.commit("one");
            r.commit("two");
            r.git(&["config", "remote.origin.url", "/nonexistent/origin"]);
            r.git(&[
                "config",
                "remote.origin.fetch",
                "+refs/heads/*:refs/remotes/origin/*",
            ]);
            r.git(&["update-ref", "refs/remotes/origin/main", "HEAD~1"]);
            r.git(&["branch", "-q", "--set-upstream-to=origin/main"]);
            r
        }

        fn bare_start() -> Repo {
            Repo {
                dir: tempfile::tempdir().expect("tempdir"),
                home: tempfile::tempdir().expect("home"),
            }
        }

        fn root(&self) -> &Path {
            self.dir.path()
        }

        /// git in `dir` with our HOME; its trimmed stdout when it succeeded and printed something.
        fn git_in(&self, dir: &Path, args: &[&str]) -> Option<String> {
            let out = Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(args)
                .env("HOME", self.home.path())
                .env_remove("XDG_CONFIG_HOME")
                .env_remove("GIT_CONFIG_GLOBAL")
                .env_remove("GIT_CONFIG_SYSTEM")
                .env_remove("GIT_CONFIG_NOSYSTEM")
                .env_remove("GIT_DIR")
                .env_remove("GIT_WORK_TREE")
                .env_remove("GIT_INDEX_FILE")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .expect("run git");
            let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
            (out.status.success() && !s.is_empty()).then_some(s)
        }

        fn git(&self, args: &[&str]) -> Option<String> {
            self.git_in(self.root(), args)
        }

        /// Must succeed.
        fn run(&self, args: &[&str]) {
            let st = Command::new("git")
                .arg("-C")
                .arg(self.root())
                .args(args)
                .env("HOME", self.home.path())
                .env_remove("GIT_CONFIG_GLOBAL")
                .env_remove("GIT_CONFIG_SYSTEM")
                .env_remove("GIT_CONFIG_NOSYSTEM")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .expect("run git");
            assert!(st.success(), "git {args:?} failed");
        }

        fn commit(&self, msg: &str) {
            self.run(&["commit", "-q", "--allow-empty", "-m", msg]);
        }

        /// What git itself says, asked directly.
        fn truth(&self, dir: &Path, q: Query) -> Option<String> {
            match q {
                Query::Head => self.git_in(dir, &["rev-parse", "HEAD"]),
                Query::Upstream => self.git_in(dir, &["rev-parse", "@{upstream}"]),
            }
        }

        /// A caller-mode cache with our HOME, no system config and no racy window (the files
        /// here are all seconds old at most).
        fn cache(&self) -> FactCache {
            self.cache_for(Mode::Caller)
        }

        fn cache_for(&self, mode: Mode) -> FactCache {
            let mut c = FactCache::with_env(
                mode,
                [("HOME".into(), self.home.path().as_os_str().to_owned())],
            );
            c.racy_window = Duration::ZERO;
            c.system_config = self.home.path().join("etc-gitconfig");
            c
        }

        /// Asked in `dir`, the cache must agree with git, and it must spawn nothing the second
        /// time.
        fn cached(&self, c: &mut FactCache, dir: &Path, q: Query) -> Option<String> {
            let a = c.answer(dir, q);
            assert_eq!(a, self.truth(dir, q), "{q:?} in {}", dir.display());
            let n = c.misses();
            assert_eq!(c.answer(dir, q), a, "{q:?} again");
            assert_eq!(
                c.misses(),
                n,
                "{q:?} asked twice must be answered from the cache"
            );
            a
        }

        /// Asked in `dir`, the cache must agree with git and spawn each time.
        fn uncached(&self, c: &mut FactCache, dir: &Path, q: Query) -> Option<String> {
            let a = c.answer(dir, q);
            assert_eq!(a, self.truth(dir, q), "{q:?} in {}", dir.display());
            let n = c.misses();
            assert_eq!(c.answer(dir, q), a, "{q:?} again");
            assert!(c.misses() > n, "{q:?} must not be answered from the cache");
            a
        }
    }

    #[test]
    fn an_unchanged_repository_is_answered_without_spawning() {
        let r = Repo::new();
        let mut c = r.cache();
        let head = r.cached(&mut c, r.root(), Query::Head);
        let up = r.cached(&mut c, r.root(), Query::Upstream);
        assert!(head.is_some() && up.is_some() && head != up);
        assert_eq!(c.len(), 2);
        // From a subdirectory (git walks up to the same .git).
        let sub = r.root().join("sub");
        fs::create_dir(&sub).expect("mkdir");
        assert_eq!(r.cached(&mut c, &sub, Query::Head), head);
    }

    #[test]
    fn a_new_commit_is_seen() {
        let r = Repo::new();
        let mut c = r.cache();
        let before = r.cached(&mut c, r.root(), Query::Head);
        let up = r.cached(&mut c, r.root(), Query::Upstream);
        r.commit("three");
        // The upstream stays cached across the commit; HEAD is read from the branch's loose
        // ref, with no git process.
        let (spawns, hits) = (c.spawns(), c.hits());
        assert_eq!(c.answer(r.root(), Query::Upstream), up);
        assert_eq!(c.hits(), hits + 1, "a commit leaves the upstream cached");
        let after = r.cached(&mut c, r.root(), Query::Head);
        assert_ne!(before, after);
        assert_eq!(c.spawns(), spawns, "HEAD came from the loose ref");
    }

    #[test]
    fn packed_refs_then_a_commit_is_seen() {
        let r = Repo::new();
        let mut c = r.cache();
        let head = r.cached(&mut c, r.root(), Query::Head);
        let up = r.cached(&mut c, r.root(), Query::Upstream);
        r.run(&["pack-refs", "--all"]);
        assert!(!r.root().join(".git/refs/heads/main").exists());
        assert_eq!(r.cached(&mut c, r.root(), Query::Head), head);
        assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), up);
        r.commit("three");
        assert_ne!(r.cached(&mut c, r.root(), Query::Head), head);
        // The upstream, packed too, moves in packed-refs only.
        r.run(&["pack-refs", "--all"]);
        r.cached(&mut c, r.root(), Query::Upstream);
        r.run(&["update-ref", "refs/remotes/origin/main", "HEAD"]);
        r.run(&["pack-refs", "--all"]);
        assert_eq!(
            r.cached(&mut c, r.root(), Query::Upstream),
            r.git(&["rev-parse", "HEAD"])
        );
    }

    #[test]
    fn a_checkout_is_seen() {
        let r = Repo::new();
        let mut c = r.cache();
        let main = r.cached(&mut c, r.root(), Query::Head);
        assert!(r.cached(&mut c, r.root(), Query::Upstream).is_some());
        r.run(&["checkout", "-q", "-b", "other", "HEAD~1"]);
        let other = r.cached(&mut c, r.root(), Query::Head);
        assert_ne!(main, other);
        // A branch with no upstream: git fails, and that answer is cached too.
        assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), None);
        // Detached.
        r.run(&["checkout", "-q", "--detach", "main"]);
        assert_eq!(r.cached(&mut c, r.root(), Query::Head), main);
        assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), None);
        r.run(&["checkout", "-q", "main"]);
        assert!(r.cached(&mut c, r.root(), Query::Upstream).is_some());
    }

    #[test]
    fn set_upstream_to_is_seen() {
        let r = Repo::new();
        let mut c = r.cache();
        let up = r.cached(&mut c, r.root(), Query::Upstream);
        r.run(&["update-ref", "refs/remotes/origin/dev", "HEAD"]);
        // Only the config changes.
        r.run(&["branch", "-q", "--set-upstream-to=origin/dev"]);
        let dev = r.cached(&mut c, r.root(), Query::Upstream);
        assert_ne!(up, dev);
        assert_eq!(dev, r.git(&["rev-parse", "HEAD"]));
        // A local branch as the upstream (remote "."), then that branch moving.
        r.run(&["branch", "-q", "base", "HEAD~1"]);
        r.run(&["branch", "-q", "--set-upstream-to=base"]);
        let base = r.cached(&mut c, r.root(), Query::Upstream);
        assert_eq!(base, r.git(&["rev-parse", "HEAD~1"]));
        r.run(&["branch", "-q", "-f", "base", "HEAD"]);
        assert_eq!(
            r.cached(&mut c, r.root(), Query::Upstream),
            r.git(&["rev-parse", "HEAD"])
        );
        r.run(&["branch", "-q", "--unset-upstream"]);
        assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), None);
    }

    #[test]
    fn updating_the_remote_tracking_ref_is_seen() {
        let r = Repo::new();
        let mut c = r.cache();
        let up = r.cached(&mut c, r.root(), Query::Upstream);
        let head = r.git(&["rev-parse", "HEAD"]);
        assert_ne!(up, head);
        let sha = head.clone().expect("head");
        r.run(&["update-ref", "refs/remotes/origin/main", &sha]);
        assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), head);
    }

    #[test]
    fn an_upstream_fetched_later_is_seen() {
        let r = Repo::new();
        r.run(&["config", "branch.main.merge", "refs/heads/later"]);
        let mut c = r.cache();
        // Configured but not fetched yet: git fails, and that is cached…
        assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), None);
        // …until the remote-tracking ref appears.
        r.run(&["update-ref", "refs/remotes/origin/later", "HEAD"]);
        assert_eq!(
            r.cached(&mut c, r.root(), Query::Upstream),
            r.git(&["rev-parse", "HEAD"])
        );
    }

    #[test]
    fn an_include_in_any_config_is_never_cached() {
        let r = Repo::new();
        let mut c = r.cache();
        r.cached(&mut c, r.root(), Query::Upstream);
        let extra = r.home.path().join("extra");
        fs::write(&extra, "[branch \"main\"]\n\tmerge = refs/heads/dev\n").expect("write");
        r.run(&["update-ref", "refs/remotes/origin/dev", "HEAD"]);
        r.run(&["config", "--unset", "branch.main.merge"]);
        let mut config = fs::OpenOptions::new()
            .append(true)
            .open(r.root().join(".git/config"))
            .expect("config");
        writeln!(config, "[include]\n\tpath = {}", extra.display()).expect("append");
        drop(config);
        // The include moves the upstream; git still says so, we only stop remembering.
        let dev = r.uncached(&mut c, r.root(), Query::Upstream);
        assert_eq!(dev, r.git(&["rev-parse", "HEAD"]));
        // A HEAD does not read includes.
        r.cached(&mut c, r.root(), Query::Head);

        // In the user's config, any spelling.
        let r = Repo::new();
        let mut c = r.cache();
        r.cached(&mut c, r.root(), Query::Upstream);
        fs::write(
            r.home.path().join(".gitconfig"),
            "[IncludeIf \"gitdir:/nowhere/\"]\n\tpath = x\n",
        )
        .expect("write");
        r.uncached(&mut c, r.root(), Query::Upstream);
        // And in the system config.
        fs::remove_file(r.home.path().join(".gitconfig")).expect("rm");
        r.cached(&mut c, r.root(), Query::Upstream);
        fs::write(r.home.path().join("etc-gitconfig"), "[include]\n").expect("write");
        r.uncached(&mut c, r.root(), Query::Upstream);
    }

    #[test]
    fn a_user_config_change_is_seen() {
        let r = Repo::new();
        let mut c = r.cache();
        let up = r.cached(&mut c, r.root(), Query::Upstream);
        r.run(&["update-ref", "refs/remotes/origin/dev", "HEAD"]);
        r.run(&["config", "--unset", "branch.main.merge"]);
        // The upstream now comes from the user's config alone.
        fs::write(
            r.home.path().join(".gitconfig"),
            "[branch \"main\"]\n\tmerge = refs/heads/dev\n",
        )
        .expect("write");
        let dev = r.cached(&mut c, r.root(), Query::Upstream);
        assert_ne!(dev, up);
        assert_eq!(dev, r.git(&["rev-parse", "HEAD"]));
        // A symlinked user config: an edit of its target is seen.
        let real = r.home.path().join("dotfiles-gitconfig");
        fs::write(&real, "[branch \"main\"]\n\tmerge = refs/heads/main\n").expect("write");
        fs::remove_file(r.home.path().join(".gitconfig")).expect("rm");
        std::os::unix::fs::symlink(&real, r.home.path().join(".gitconfig")).expect("symlink");
        assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), up);
        fs::write(&real, "[branch \"main\"]\n\tmerge = refs/heads/dev\n").expect("write");
        assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), dev);
    }

    #[test]
    fn a_worktree_is_never_cached_but_answered() {
        let r = Repo::new();
        let wt = r.home.path().join("wt");
        let wts = wt.to_str().expect("utf-8");
        r.run(&["worktree", "add", "-q", "-b", "side", wts, "HEAD~1"]);
        assert!(wt.join(".git").is_file());
        let mut c = r.cache();
        let head = r.uncached(&mut c, &wt, Query::Head);
        assert_ne!(head, r.git(&["rev-parse", "HEAD"]));
        r.uncached(&mut c, &wt, Query::Upstream);
        assert!(c.is_empty());
        // The main checkout is still cached.
        r.cached(&mut c, r.root(), Query::Head);
    }

    #[test]
    fn a_repository_appearing_below_is_seen() {
        let r = Repo::new();
        let sub = r.root().join("sub");
        fs::create_dir(&sub).expect("mkdir");
        let mut c = r.cache();
        let outer = r.cached(&mut c, &sub, Query::Head);
        r.git_in(&sub, &["init", "-q", "-b", "main", "."]);
        // An unborn branch: git fails, and that is an answer too.
        assert_eq!(r.cached(&mut c, &sub, Query::Head), None);
        assert!(outer.is_some());
    }

    #[test]
    fn a_nested_symref_is_never_cached() {
        let r = Repo::new();
        r.run(&["symbolic-ref", "refs/heads/alias", "refs/heads/main"]);
        r.run(&["symbolic-ref", "HEAD", "refs/heads/alias"]);
        let mut c = r.cache();
        assert!(r.uncached(&mut c, r.root(), Query::Head).is_some());
    }

    #[test]
    fn outside_any_repository_git_is_asked_every_time() {
        let r = Repo::bare_start();
        let mut c = r.cache();
        assert_eq!(r.uncached(&mut c, r.root(), Query::Head), None);
        assert_eq!(
            c.answer(Path::new("/nonexistent/repo"), Query::Upstream),
            None
        );
    }

    #[test]
    fn a_git_environment_is_never_cached() {
        assert!(env_allows_caching(
            Mode::Caller,
            ["HOME", "PATH", "XGIT_DIR"]
        ));
        assert!(!env_allows_caching(Mode::Caller, ["HOME", "GIT_DIR"]));
        assert!(!env_allows_caching(Mode::Caller, ["GIT_CONFIG_GLOBAL"]));
        // Keyed, so allowed.
        assert!(env_allows_caching(Mode::Caller, ["GIT_CONFIG_NOSYSTEM"]));
        assert!(!env_allows_caching(Mode::Caller, ["GIT_SSHX_DIR"]));
        // Transport, identity, editor and tracing variables cannot change these answers.
        assert!(env_allows_caching(
            Mode::Caller,
            [
                "GIT_SSL_CAINFO",
                "GIT_SSH_COMMAND",
                "GIT_AUTHOR_NAME",
                "GIT_PAGER",
                "GIT_TRACE"
            ]
        ));
        // What git exports to a hook (`git commit` running pre-commit) keeps the cache.
        assert!(env_allows_caching(
            Mode::Caller,
            [
                "GIT_INDEX_FILE",
                "GIT_PREFIX",
                "GIT_EXEC_PATH",
                "GIT_AUTHOR_DATE"
            ]
        ));
        assert!(!env_allows_caching(Mode::Caller, ["GIT_INDEX_FILES"]));
        // evd's spawn clears these three; the ones that redirect git's reads still count.
        assert!(env_allows_caching(
            Mode::Repository,
            [
                "GIT_DIR",
                "GIT_WORK_TREE",
                "GIT_INDEX_FILE",
                "GIT_SSL_CAINFO"
            ]
        ));
        assert!(!env_allows_caching(Mode::Repository, ["GIT_COMMON_DIR"]));
        assert!(!env_allows_caching(Mode::Repository, ["GIT_CONFIG_GLOBAL"]));

        let r = Repo::new();
        let mut c = FactCache::with_env(
            Mode::Caller,
            [
                ("HOME".into(), r.home.path().as_os_str().to_owned()),
                ("GIT_NAMESPACE".into(), "x".into()),
            ],
        );
        c.racy_window = Duration::ZERO;
        r.uncached(&mut c, r.root(), Query::Head);
        assert!(c.is_empty());
        // A relative HOME cannot be turned into the paths git reads.
        let c = FactCache::with_env(Mode::Caller, [("HOME".into(), "rel".into())]);
        assert!(!c.caches());
    }

    #[test]
    fn the_repository_mode_answers_as_evd_did() {
        let r = Repo::new();
        let mut c = r.cache_for(Mode::Repository);
        let evd = |dir: &Path| crate::git::run::git(dir, &["rev-parse", "--verify", "-q", "HEAD"]);
        let a = c.answer(r.root(), Query::Head);
        assert_eq!(a, evd(r.root()));
        let n = c.spawns();
        assert_eq!(c.answer(r.root(), Query::Head), a);
        assert_eq!(c.spawns(), n);
        r.commit("three");
        assert_eq!(c.answer(r.root(), Query::Head), evd(r.root()));
        // Unborn.
        let u = Repo::bare_start();
        u.run(&["init", "-q", "-b", "main", "."]);
        let mut c = u.cache_for(Mode::Repository);
        assert_eq!(c.answer(u.root(), Query::Head), None);
        assert_eq!(evd(u.root()), None);
    }

    #[test]
    fn a_file_changed_just_now_is_not_trusted() {
        let r = Repo::new();
        let mut c = FactCache::with_env(
            Mode::Caller,
            [("HOME".into(), r.home.path().as_os_str().to_owned())],
        );
        c.system_config = r.home.path().join("etc-gitconfig");
        // Everything was written within the last two seconds.
        r.uncached(&mut c, r.root(), Query::Head);
        assert!(c.is_empty());
    }

    #[test]
    fn answers_survive_a_save_and_load() {
        let r = Repo::new();
        let rt = tempfile::tempdir().expect("rt");
        let file = rt.path().join("git-facts.json");
        let mut c = r.cache();
        let head = r.cached(&mut c, r.root(), Query::Head);
        let up = r.cached(&mut c, r.root(), Query::Upstream);
        assert!(c.changed());
        c.save(&file).expect("save");
        assert!(!c.changed());
        let mode = fs::metadata(&file).expect("meta").mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Only the file is left behind, no temp.
        assert_eq!(fs::read_dir(rt.path()).expect("ls").count(), 1);

        let mut d = r.cache().read_from(&file);
        assert_eq!(d.len(), 2);
        assert_eq!(d.answer(r.root(), Query::Head), head);
        assert_eq!(d.answer(r.root(), Query::Upstream), up);
        assert_eq!((d.spawns(), d.hits()), (0, 2));
        assert!(!d.changed());
        // Nothing changed, so nothing is written.
        fs::remove_file(&file).expect("rm");
        d.save(&file).expect("save");
        assert!(!file.exists());
        // A change is written.
        r.commit("three");
        assert_ne!(d.answer(r.root(), Query::Head), head);
        assert!(d.changed());
        d.save(&file).expect("save");
        assert_eq!(r.cache().read_from(&file).len(), 2);
        // Another HOME is another key.
        let mut e = FactCache::with_env(Mode::Caller, [("HOME".into(), "/elsewhere".into())])
            .read_from(&file);
        e.racy_window = Duration::ZERO;
        assert_eq!(
            e.answer(r.root(), Query::Head),
            r.git(&["rev-parse", "HEAD"])
        );
        assert_eq!(e.misses(), 1);
    }

    #[test]
    fn a_corrupt_or_foreign_cache_file_reads_as_empty() {
        let rt = tempfile::tempdir().expect("rt");
        let file = rt.path().join("git-facts.json");
        let load = || FactCache::with_env(Mode::Caller, []).read_from(&file);
        assert!(load().is_empty());
        for body in [
            "not json",
            "",
            "{\"format\":1}",
            "{\"format\":2,\"entries\":[]}",
            "{\"format\":1,\"entries\":[{\"root\":1}]}",
        ] {
            fs::write(&file, body).expect("write");
            assert!(load().is_empty(), "{body}");
        }
        fs::remove_file(&file).expect("rm");
        fs::create_dir(&file).expect("mkdir");
        assert!(load().is_empty());
        // A symlink is not followed.
        let real = rt.path().join("real.json");
        fs::write(&real, "{\"format\":1,\"entries\":[]}").expect("write");
        let link = rt.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert!(read_persisted(&link).is_none());
        assert_eq!(read_persisted(&real).map(|e| e.len()), Some(0));
    }

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

    #[test]
    fn head_files_and_ref_names_are_read_strictly() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(parse_head(&format!("{sha}\n")), Some(HeadIs::Detached));
        assert_eq!(
            parse_head("ref: refs/heads/main\n"),
            Some(HeadIs::Branch("refs/heads/main".into()))
        );
        assert_eq!(
            parse_head("ref:refs/heads/a/b"),
            Some(HeadIs::Branch("refs/heads/a/b".into()))
        );
        for bad in [
            "",
            "ref: HEAD\n",
            "ref: refs/heads/../../x\n",
            "ref: refs/heads/.hidden\n",
            "ref: refs/heads/x.lock\n",
            "ref: refs/heads/a b\n",
            "ref: refs/heads//x\n",
            "ref: refs/\n",
            "ref: refs/heads/main\r\n",
            "xyz\n",
            &sha[..39],
        ] {
            assert_eq!(parse_head(bad), None, "{bad:?}");
        }
    }

    /// The cost of a cached answer against a spawn (run with `--nocapture` to see it).
    #[test]
    fn bench_a_hit_against_a_spawn() {
        let r = Repo::new();
        let mut c = r.cache();
        const N: u32 = 200;
        for q in [Query::Head, Query::Upstream] {
            let truth = c.answer(r.root(), q);
            let t = Instant::now();
            for _ in 0..N {
                assert_eq!(c.answer(r.root(), q), truth);
            }
            let hit = t.elapsed() / N;
            let t = Instant::now();
            for _ in 0..N {
                assert_eq!(c.ask(r.root(), q), truth);
            }
            let spawn = t.elapsed() / N;
            println!("{q:?}: cache hit {hit:?}, git spawn {spawn:?} (mean of {N})");
        }
    }
}
