//! Uncommitted changes to tracked files, for upstream 0.1.32's `dirty` verdict: a green whose
//! tracked `triggered_by` paths differ from HEAD (staged or not) reads `dirty`.
//!
//! Upstream asks `git status --porcelain --untracked-files=no -- <paths>` once per green ground.
//! evd asks once per evaluation for the whole work tree ([`status`]) and matches each ground's
//! triggers against the answer with the same pathspec rules staleness uses; a ground whose
//! triggers use pathspec magic or reach above the store's root is asked upstream's way
//! ([`status_of`]).
//!
//! In the daemon the answer is kept while nothing it rests on moved ([`Worktree`]): the
//! directories holding tracked files some trigger covers are watched (their guarded names only),
//! with git's own directory (the index, HEAD). Those watches are drained at the start of every
//! evaluation, so a save that finished before a request is always seen; a live listener on the
//! same directories re-evaluates within the debounce, so the state files, `evctl watch` and the
//! editor hear of it without anyone asking. Where the watches cannot be made (too many
//! directories, no inotify, no live sink), git is asked on every evaluation.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sys::watch::{self as dirwatch, hub, Changes, DirWatch, Listener};

/// At most this many directories are watched per store; past that, git is asked every time.
pub const MAX_DIRS: usize = 512;
/// A `git ls-files` or `git status` answer larger than this is not used.
const MAX_OUTPUT: usize = 64 << 20;

/// The tracked files with uncommitted changes, relative to the store's root (both sides of a
/// staged rename), sorted. Files outside the root are left out: no plain trigger covers them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uncommitted {
    pub paths: Vec<String>,
}

impl Uncommitted {
    /// Whether any of `triggers` covers a changed file (upstream: `git status -- <triggers>`
    /// prints something). An empty list never does.
    pub fn touches(&self, triggers: &[String]) -> bool {
        !triggers.is_empty()
            && self
                .paths
                .iter()
                .any(|p| triggers.iter().any(|t| proto::pathspec::covers(t, p)))
    }

    /// The paths in one of `self` and `other` but not both.
    pub fn difference<'a>(&'a self, other: &'a Uncommitted) -> Vec<&'a str> {
        let a: BTreeSet<&str> = self.paths.iter().map(String::as_str).collect();
        let b: BTreeSet<&str> = other.paths.iter().map(String::as_str).collect();
        a.symmetric_difference(&b).copied().collect()
    }
}

/// `git -C root <args>`, repository-only (never the caller's git environment): raw stdout when
/// git succeeded and the answer was not oversized.
fn git_raw(root: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let mut cmd = crate::git::run::repository_git(root, args);
    let out = crate::sys::child::output(&mut cmd, crate::sys::child::git_timeout()).ok()?;
    (out.status.success() && out.stdout.len() <= MAX_OUTPUT).then_some(out.stdout)
}

/// Where the store's root sits in its repository: git's own directory, and the root's path
/// from the top of the work tree (`""` or ending in `/`).
fn locate(root: &Path) -> Option<(PathBuf, String)> {
    if let Some(plain) = locate_plainly(root) {
        return Some(plain);
    }
    let out = git_raw(root, &["rev-parse", "--absolute-git-dir", "--show-prefix"])?;
    let text = String::from_utf8(out).ok()?;
    let mut lines = text.split('\n');
    let gitdir = PathBuf::from(lines.next()?);
    let prefix = lines.next().unwrap_or("").to_string();
    Some((gitdir, prefix))
}

/// git's directory for a store whose `root` is the top of a plain repository (see
/// [`locate_plainly`]): there, git's directory and its common directory are both `root/.git`.
/// `None`: ask git.
pub fn plain_git_dir(root: &Path) -> Option<PathBuf> {
    locate_plainly(root).map(|(gitdir, _)| gitdir)
}

/// [`locate`] without spawning git, where the answer is plain: `root` holds `.git` as a real
/// directory that git takes for a repository (`HEAD`, `objects/`, `refs/`), so git's discovery
/// stops there and `root` is the top of the work tree; and that repository's config names
/// nothing that could move the work tree or bring in other config (`core.worktree`,
/// `core.bare`, `include`). `None`: ask git.
fn locate_plainly(root: &Path) -> Option<(PathBuf, String)> {
    use std::fs::symlink_metadata as lstat;
    let root = std::fs::canonicalize(root).ok()?;
    let gitdir = root.join(".git");
    let is_dir = |p: &Path| lstat(p).is_ok_and(|m| m.is_dir());
    if !is_dir(&gitdir)
        || !is_dir(&gitdir.join("objects"))
        || !is_dir(&gitdir.join("refs"))
        || !lstat(gitdir.join("HEAD")).is_ok_and(|m| m.is_file())
        || lstat(gitdir.join("commondir")).is_ok()
    {
        return None;
    }
    const CONFIG_LIMIT: u64 = 1 << 20;
    let config = crate::sys::fsio::read_limited(&gitdir.join("config"), CONFIG_LIMIT).ok()?;
    let moves_or_includes = String::from_utf8_lossy(&config).lines().any(|line| {
        let line: String = line
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        let bare = line
            .strip_prefix("bare")
            .is_some_and(|v| !matches!(v, "=false" | "=no" | "=off" | "=0"));
        bare || line.starts_with("worktree") || line.starts_with("[include")
    });
    (!moves_or_includes).then(|| (gitdir, String::new()))
}

/// Parse `git status --porcelain -z` output: every path named, both sides of a rename or copy.
fn parse_porcelain(out: &[u8]) -> Option<Vec<String>> {
    let mut paths = Vec::new();
    let mut fields = out.split(|&b| b == 0).filter(|f| !f.is_empty());
    while let Some(entry) = fields.next() {
        if entry.len() < 4 || entry[2] != b' ' {
            return None;
        }
        let (x, y) = (entry[0], entry[1]);
        paths.push(String::from_utf8(entry[3..].to_vec()).ok()?);
        if matches!(x, b'R' | b'C') || matches!(y, b'R' | b'C') {
            paths.push(String::from_utf8(fields.next()?.to_vec()).ok()?);
        }
    }
    Some(paths)
}

/// What one `git status --porcelain=v2 --branch` says of the repository around a store: HEAD's
/// commit (empty when unborn), the branch HEAD names (`None` when detached or unborn), and
/// whether a tracked file under the store's root differs from HEAD (staged or not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub head: String,
    pub branch: Option<String>,
    pub dirty: bool,
}

/// `git status` with HEAD and the branch, machine-readable (read by [`parse_v2`]).
const STATUS_V2: &[&str] = &[
    "--no-optional-locks",
    "status",
    "--porcelain=v2",
    "-z",
    "--branch",
    "--no-ahead-behind",
    "--untracked-files=no",
];

/// [`Envelope`] in one git process (plus one to locate the root when `.git` is not plain):
/// what `rev-parse HEAD`, `symbolic-ref --short HEAD` and [`status`] say together. `None` when
/// git cannot say (not a repository, a failure, an answer it cannot read).
pub fn envelope(root: &Path) -> Option<Envelope> {
    let (_, prefix) = locate(root)?;
    let out = git_raw(root, STATUS_V2)?;
    parse_envelope(&out, &prefix)
}

/// Read `git status --porcelain=v2 -z --branch` output; `prefix` is the store's root from the
/// top of the work tree (`""` or ending in `/`).
fn parse_envelope(out: &[u8], prefix: &str) -> Option<Envelope> {
    let v2 = parse_v2(out)?;
    let under = |p: &[u8]| p.starts_with(prefix.as_bytes());
    Some(Envelope {
        dirty: v2.paths.iter().any(|p| under(p)),
        head: v2.head,
        branch: v2.branch,
    })
}

/// What `git status --porcelain=v2 -z --branch` says: HEAD's commit (empty when unborn), the
/// branch HEAD names, and every path an entry names (both sides of a rename or copy).
struct StatusV2<'a> {
    head: String,
    branch: Option<String>,
    paths: Vec<&'a [u8]>,
}

fn parse_v2(out: &[u8]) -> Option<StatusV2<'_>> {
    let mut v2 = StatusV2 {
        head: String::new(),
        branch: None,
        paths: Vec::new(),
    };
    let mut fields = out.split(|&b| b == 0).filter(|f| !f.is_empty());
    while let Some(f) = fields.next() {
        if let Some(h) = f.strip_prefix(b"# ") {
            let h = std::str::from_utf8(h).ok()?;
            if let Some(oid) = h.strip_prefix("branch.oid ") {
                if oid != "(initial)" {
                    v2.head = oid.to_string();
                }
            } else if let Some(name) = h.strip_prefix("branch.head ") {
                if name != "(detached)" {
                    v2.branch = Some(name.to_string());
                }
            }
            continue;
        }
        // The path is the last of a fixed number of space-separated fields; a rename or copy
        // names its source in the next field.
        let (n, renamed) = match f.first()? {
            b'1' => (9, false),
            b'2' => (10, true),
            b'u' => (11, false),
            b'?' | b'!' => (2, false),
            _ => return None,
        };
        v2.paths.push(f.splitn(n, |&b| b == b' ').nth(n - 1)?);
        if renamed {
            v2.paths.push(fields.next()?);
        }
    }
    Some(v2)
}

/// The uncommitted tracked changes under `prefix` (as [`status_at`]) with the HEAD they were
/// read against (empty when unborn), from one git process.
fn status_with_head(root: &Path, prefix: &str) -> Option<(String, Uncommitted)> {
    let out = git_raw(root, STATUS_V2)?;
    let v2 = parse_v2(&out)?;
    let mut paths: Vec<String> = v2
        .paths
        .iter()
        .filter_map(|p| p.strip_prefix(prefix.as_bytes()))
        .map(|p| String::from_utf8(p.to_vec()).ok())
        .collect::<Option<_>>()?;
    paths.sort();
    paths.dedup();
    Some((v2.head, Uncommitted { paths }))
}

/// The whole work tree's uncommitted tracked changes, one git process (plus one to locate the
/// root). `None` when git cannot say (not a repository, a failure): nothing reads dirty then, as
/// upstream's failing `git status` makes nothing dirty.
pub fn status(root: &Path) -> Option<Uncommitted> {
    let (_, prefix) = locate(root)?;
    status_at(root, &prefix)
}

fn status_at(root: &Path, prefix: &str) -> Option<Uncommitted> {
    let out = git_raw(
        root,
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "-z",
            "--untracked-files=no",
        ],
    )?;
    let mut paths: Vec<String> = parse_porcelain(&out)?
        .into_iter()
        .filter_map(|p| p.strip_prefix(prefix).map(str::to_string))
        .collect();
    paths.sort();
    paths.dedup();
    Some(Uncommitted { paths })
}

/// Upstream's own question for one ground: does `git status --porcelain --untracked-files=no
/// -- <paths>` print anything? A failure or an empty list is no.
pub fn status_of(root: &Path, paths: &[String]) -> bool {
    if paths.is_empty() {
        return false;
    }
    let mut args = vec![
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
    ];
    args.extend(paths.iter().map(String::as_str));
    git_raw(root, &args).is_some_and(|out| !out.iter().all(u8::is_ascii_whitespace))
}

/// Called (on the watch hub's thread) when a guarded file or git's index changed.
pub type Sink = Arc<dyn Fn() + Send + Sync>;

/// What the watches saw since the last look.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Nothing,
    /// A guarded file changed: ask git again.
    Files,
    /// The index or HEAD changed, or events were lost: find the guarded files again too.
    Index,
}

/// One watched directory: its drained handle, its live one, and the guarded names in it
/// (`None`: any).
type WatchedDir = (DirWatch, Option<DirWatch>, Option<Arc<HashSet<String>>>);

/// The watches on one store's guarded files.
struct Watched {
    /// The triggers they were made for.
    triggers: Vec<String>,
    prefix: String,
    /// Made from git's list of tracked files (glob triggers), so a change of the index may
    /// change what must be watched; otherwise they follow from the triggers alone.
    from_index: bool,
    /// Git's own directory (drained for `index`, `HEAD`), and its live listener.
    gitdir: (DirWatch, Option<DirWatch>),
    /// Each watched directory: drained, live, and the guarded names in it (`None`: any).
    dirs: Vec<WatchedDir>,
}

impl Watched {
    fn look(&mut self) -> Seen {
        let mut seen = Seen::Nothing;
        match self.gitdir.0.drain() {
            Changes::Quiet => {}
            Changes::Rescan => return Seen::Index,
            Changes::Names(n) => {
                if n.iter().any(|n| n == "index" || n == "HEAD") {
                    seen = Seen::Index;
                }
            }
        }
        for (w, _, names) in &mut self.dirs {
            match w.drain() {
                Changes::Quiet => {}
                Changes::Rescan => seen = Seen::Index,
                Changes::Names(n) => {
                    let guarded = match names {
                        Some(names) => n.iter().any(|n| names.contains(n)),
                        None => true,
                    };
                    if seen == Seen::Nothing && guarded {
                        seen = Seen::Files;
                    }
                }
            }
        }
        seen
    }
}

/// A store's view of its work tree: the last answer and what keeps it honest.
#[derive(Default)]
pub struct Worktree {
    /// The last whole-tree answer, with the HEAD it was read at.
    known: Option<(Option<String>, Option<Arc<Uncommitted>>)>,
    watched: Option<Watched>,
    /// Why the guarded files are not watched, when they are not, and for which triggers (they
    /// are not tried again until those change).
    unwatched: Option<String>,
    failed_for: Option<Vec<String>>,
    /// Git's directory and the root's prefix, found once while watching.
    located: Option<(PathBuf, String)>,
    sink: Option<Sink>,
    /// The work tree looked at ahead of the first evaluation (see [`Worktree::look_ahead`]).
    ahead: Option<std::thread::JoinHandle<Ahead>>,
    /// git processes spawned, for the bench and tests.
    pub asked: u64,
}

/// What [`Worktree::look_ahead`] found: for the triggers it guessed, the watches made before
/// git was asked (without live listeners: the store has no sink yet), and git's answer with
/// the HEAD it was read against.
struct Ahead {
    triggers: Vec<String>,
    located: Option<(PathBuf, String)>,
    watched: Option<(Watched, Vec<PathBuf>)>,
    answer: Option<(String, Uncommitted)>,
    asked: u64,
    timeouts: Vec<String>,
}

impl std::fmt::Debug for Worktree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worktree")
            .field("known", &self.known)
            .field("watched", &self.watched.as_ref().map(|w| w.dirs.len()))
            .field("unwatched", &self.unwatched)
            .finish()
    }
}

/// Which names of a watched directory matter to its listener.
#[derive(Clone)]
enum Heed {
    /// git's own directory: the index and HEAD.
    GitDir,
    /// These names, or (`None`) any.
    Names(Option<Arc<HashSet<String>>>),
}

fn live(dir: &Path, heed: Heed, sink: &Sink) -> Option<DirWatch> {
    let sink = Arc::clone(sink);
    let listener: Listener = Arc::new(move |c: dirwatch::Changes| {
        let relevant = match (&c, &heed) {
            (Changes::Quiet, _) => false,
            (Changes::Rescan, _) => true,
            (Changes::Names(_), Heed::Names(None)) => true,
            (Changes::Names(n), Heed::Names(Some(names))) => n.iter().any(|n| names.contains(n)),
            (Changes::Names(n), Heed::GitDir) => n.iter().any(|n| n == "index" || n == "HEAD"),
        };
        if relevant {
            sink();
        }
    });
    hub().watch(dir, Some(listener)).ok()
}

/// The directories to watch for `triggers` under `root`, each with the names that matter in it
/// (`None`: any), and whether they were read from git's index. Plain triggers need no git: a
/// file's directory (heeding its name), or a directory and every directory below it. A glob, a
/// trigger naming the whole tree, or one whose directory does not exist yet is answered from
/// `git ls-files` (and so looked at again when the index moves).
#[allow(clippy::type_complexity)]
fn guarded_dirs(
    root: &Path,
    triggers: &[String],
    asked: &mut u64,
) -> Result<(HashMap<PathBuf, Option<HashSet<String>>>, bool), String> {
    let too_many = || format!("guarded files span more than {MAX_DIRS} directories");
    let mut by_dir: HashMap<PathBuf, Option<HashSet<String>>> = HashMap::new();
    let wildcard = |t: &str| t.bytes().any(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'));
    let plain = |t: &str| {
        let t = t.trim_end_matches('/');
        let t = t.strip_prefix("./").unwrap_or(t);
        (!t.is_empty() && t != "." && !wildcard(t)).then(|| t.to_string())
    };
    let mut from_index = false;
    let mut rewatch = false;
    for t in triggers {
        let Some(t) = plain(t) else {
            from_index = true;
            continue;
        };
        let path = root.join(&t);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {
                // The directory and everything below it (not following links, not into git's);
                // a directory made later is watched once the index moves.
                rewatch = true;
                let mut todo = vec![path];
                while let Some(d) = todo.pop() {
                    if by_dir.len() >= MAX_DIRS {
                        return Err(too_many());
                    }
                    if let Ok(rd) = std::fs::read_dir(&d) {
                        for e in rd.flatten() {
                            if e.file_type().is_ok_and(|k| k.is_dir()) && e.file_name() != ".git" {
                                todo.push(e.path());
                            }
                        }
                    }
                    by_dir.insert(d, None);
                }
            }
            _ => {
                let (dir, name) = match t.rsplit_once('/') {
                    Some((d, n)) => (root.join(d), n.to_string()),
                    None => (root.to_path_buf(), t.clone()),
                };
                if !dir.is_dir() {
                    from_index = true;
                    continue;
                }
                // (`None`: the whole directory is heeded already.)
                if let Some(names) = by_dir.entry(dir).or_insert_with(|| Some(HashSet::new())) {
                    names.insert(name);
                }
            }
        }
        if by_dir.len() > MAX_DIRS {
            return Err(too_many());
        }
    }
    if from_index {
        let listed = git_raw(root, &["ls-files", "-z"]).ok_or("git ls-files failed")?;
        *asked += 1;
        for f in listed.split(|&b| b == 0).filter(|f| !f.is_empty()) {
            let Ok(f) = std::str::from_utf8(f) else {
                continue;
            };
            if !triggers.iter().any(|t| proto::pathspec::covers(t, f)) {
                continue;
            }
            let (dir, name) = match f.rsplit_once('/') {
                Some((d, n)) => (root.join(d), n),
                None => (root.to_path_buf(), f),
            };
            if let Some(names) = by_dir.entry(dir).or_insert_with(|| Some(HashSet::new())) {
                names.insert(name.to_string());
            }
            if by_dir.len() > MAX_DIRS {
                return Err(too_many());
            }
        }
    }
    Ok((by_dir, from_index || rewatch))
}

impl Worktree {
    /// Watch guarded files from now on, telling `sink` when one changes. Without a sink nothing
    /// is watched and git is asked on every evaluation.
    pub fn set_sink(&mut self, sink: Option<Sink>) {
        self.sink = sink;
        self.reset();
    }

    /// Whether a sink was given (see [`Worktree::set_sink`]).
    pub fn has_sink(&self) -> bool {
        self.sink.is_some()
    }

    /// Forget everything (the store's watches were lost).
    pub fn reset(&mut self) {
        self.watched = None;
        self.known = None;
        self.failed_for = None;
        self.located = None;
    }

    /// The last answer git gave at `head` for `triggers`, without looking at what the watches
    /// saw since: for a request that needs no more of the work tree than it names itself (a
    /// pre-commit gate). `None` when there is none to give (nothing watched, another HEAD,
    /// other triggers), and the caller then asks [`Worktree::uncommitted`].
    pub fn last_known(
        &self,
        head: Option<&str>,
        triggers: &[String],
    ) -> Option<Option<Arc<Uncommitted>>> {
        let w = self.watched.as_ref()?;
        let (at, answer) = self.known.as_ref()?;
        (w.triggers == triggers && at.as_deref() == head).then(|| answer.clone())
    }

    /// The uncommitted tracked changes under the store's `root` now, HEAD being `head`, for
    /// grounds whose (plain) triggers are `triggers`: the last answer while the watches say
    /// nothing it rests on moved, else git's. `None` when git cannot say.
    pub fn uncommitted(
        &mut self,
        root: &Path,
        head: Option<&str>,
        triggers: &[String],
    ) -> Option<Arc<Uncommitted>> {
        if triggers.is_empty() {
            self.watched = None;
            self.known = None;
            self.ahead = None;
            return Some(Arc::new(Uncommitted::default()));
        }
        if self.ahead.is_some() {
            if let Some(answer) = self.take_ahead(root, head, triggers) {
                return answer;
            }
        }
        let seen = match &mut self.watched {
            Some(w) if w.triggers == triggers => w.look(),
            _ => Seen::Index,
        };
        if seen == Seen::Nothing {
            if let Some((at, answer)) = &self.known {
                if at.as_deref() == head {
                    return answer.clone();
                }
            }
        }
        // The index moved: what is committed or staged changed, so git is asked again; what
        // to watch changes only when it was read from the index.
        let rebuild = match &self.watched {
            Some(w) => w.triggers != triggers || (seen == Seen::Index && w.from_index),
            None => self.failed_for.as_deref() != Some(triggers),
        };
        if rebuild {
            self.watched = None;
            self.watch(root, triggers);
        }
        let answer = match &self.watched {
            Some(w) => {
                let prefix = w.prefix.clone();
                status_at(root, &prefix)
            }
            None => {
                self.asked += 1;
                status(root)
            }
        }
        .map(Arc::new);
        self.asked += 1;
        if self.watched.is_some() {
            self.known = Some((head.map(str::to_string), answer.clone()));
        } else {
            self.known = None;
        }
        answer
    }

    /// Watch git's directory and every directory holding a tracked file one of `triggers`
    /// covers, before git is asked (so nothing that changes after the answer goes unseen).
    fn watch(&mut self, root: &Path, triggers: &[String]) {
        let Some(sink) = self.sink.clone() else {
            self.unwatched = Some("not watched by a daemon".into());
            return;
        };
        let located = match self.located.clone() {
            Some(l) => Some(l),
            None => {
                self.asked += 1;
                locate(root)
            }
        };
        self.located = located.clone();
        let made = make_watched(root, triggers, located, Some(&sink), &mut self.asked);
        self.took_watches(root, triggers, made.map(|(w, _)| w));
    }

    fn took_watches(&mut self, root: &Path, triggers: &[String], made: Result<Watched, String>) {
        match made {
            Ok(w) => {
                self.watched = Some(w);
                self.unwatched = None;
                self.failed_for = None;
            }
            Err(why) => {
                self.failed_for = Some(triggers.to_vec());
                tracing::debug!(reason = %why, root = %root.display(), "guarded files not watched; the work tree is asked on every evaluation");
                self.unwatched = Some(why);
            }
        }
    }

    /// Before the store's first evaluation, while its ticks are still being read back: on a
    /// thread of its own, locate the repository, watch what `guess` (the guarded paths the
    /// last evaluation had) needs watched, then ask git for the work tree's changes. The first
    /// evaluation takes that answer only if its guarded paths are the guessed ones and the
    /// watches, made before git was asked, saw nothing since (see [`Worktree::uncommitted`]);
    /// otherwise it asks as it always does. `guess` runs on that thread; `None` or an empty
    /// list: nothing is looked at.
    pub fn look_ahead(
        &mut self,
        root: &Path,
        guess: impl FnOnce() -> Option<Vec<String>> + Send + 'static,
    ) {
        if self.ahead.is_some() || self.watched.is_some() || self.known.is_some() {
            return;
        }
        let root = root.to_path_buf();
        let located = self.located.clone();
        self.ahead = std::thread::Builder::new()
            .name("evd-worktree-ahead".into())
            .spawn(move || {
                let triggers = guess().unwrap_or_default();
                let mut asked = 0;
                let located = match (located, triggers.is_empty()) {
                    (l, true) => l,
                    (Some(l), false) => Some(l),
                    (None, false) => {
                        asked += 1;
                        locate(&root)
                    }
                };
                let watched = (!triggers.is_empty())
                    .then(|| make_watched(&root, &triggers, located.clone(), None, &mut asked).ok())
                    .flatten();
                let answer = watched.as_ref().and_then(|(w, _)| {
                    asked += 1;
                    status_with_head(&root, &w.prefix)
                });
                Ahead {
                    triggers,
                    located,
                    watched,
                    answer,
                    asked,
                    timeouts: crate::sys::child::take_timeouts(),
                }
            })
            .ok();
    }

    /// Take what [`Worktree::look_ahead`] found, once: its watches (given live listeners now)
    /// and its answer, when made for `triggers` and nothing they watch moved since git was
    /// asked at `head`. `Some` is the answer to give.
    fn take_ahead(
        &mut self,
        root: &Path,
        head: Option<&str>,
        triggers: &[String],
    ) -> Option<Option<Arc<Uncommitted>>> {
        let ahead = self.ahead.take()?.join().ok()?;
        crate::sys::child::note_timeouts(ahead.timeouts);
        self.asked += ahead.asked;
        if self.located.is_none() {
            self.located = ahead.located;
        }
        let sink = self.sink.clone()?;
        if self.watched.is_some() || ahead.triggers != triggers {
            return None;
        }
        let (mut w, paths) = ahead.watched?;
        let (at, answer) = ahead.answer?;
        if w.look() != Seen::Nothing || at != head.unwrap_or("") {
            return None;
        }
        if let Some((gitdir, _)) = &self.located {
            w.gitdir.1 = live(gitdir, Heed::GitDir, &sink);
        }
        for ((_, l, names), dir) in w.dirs.iter_mut().zip(&paths) {
            *l = live(dir, Heed::Names(names.clone()), &sink);
        }
        // Anything that moved while the listeners were being made is in the drained watches:
        // the next evaluation's look finds it.
        self.took_watches(root, triggers, Ok(w));
        let answer = Some(Arc::new(answer));
        self.known = Some((head.map(str::to_string), answer.clone()));
        Some(answer)
    }
}

/// The watches for `triggers` (see [`Worktree::watch`]), with live listeners telling `sink`
/// when there is one, and the directories watched (in the order of [`Watched::dirs`]).
fn make_watched(
    root: &Path,
    triggers: &[String],
    located: Option<(PathBuf, String)>,
    sink: Option<&Sink>,
    asked: &mut u64,
) -> Result<(Watched, Vec<PathBuf>), String> {
    let (gitdir, prefix) = located.ok_or("not a git work tree")?;
    let drained = DirWatch::new(&gitdir).map_err(|e| e.0)?;
    let gitdir_live = sink.and_then(|s| live(&gitdir, Heed::GitDir, s));
    let (by_dir, from_index) = guarded_dirs(root, triggers, asked)?;
    let mut dirs = Vec::with_capacity(by_dir.len());
    let mut paths = Vec::with_capacity(by_dir.len());
    for (dir, names) in by_dir {
        let names = names.map(Arc::new);
        let drained = DirWatch::new(&dir).map_err(|e| e.0)?;
        let l = sink.and_then(|s| live(&dir, Heed::Names(names.clone()), s));
        dirs.push((drained, l, names));
        paths.push(dir);
    }
    Ok((
        Watched {
            triggers: triggers.to_vec(),
            prefix,
            from_index,
            gitdir: (drained, gitdir_live),
            dirs,
        },
        paths,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_names_both_sides_of_a_rename() {
        let out = b" M sub/a/f\0R  top2\0top\0MM x y\0";
        assert_eq!(
            parse_porcelain(out).expect("parsed"),
            vec!["sub/a/f", "top2", "top", "x y"]
        );
        assert!(parse_porcelain(b"garbage").is_none());
        assert_eq!(parse_porcelain(b"").expect("empty"), Vec::<String>::new());
    }

    /// The three questions [`envelope`] answers at once, asked one by one as before.
    fn asked_one_by_one(root: &Path) -> Envelope {
        let git = |args: &[&str]| crate::git::run::git(root, args).filter(|s| !s.is_empty());
        Envelope {
            head: git(&["rev-parse", "--verify", "-q", "HEAD"]).unwrap_or_default(),
            branch: git(&["symbolic-ref", "--short", "-q", "HEAD"]),
            dirty: status(root).is_some_and(|u| !u.paths.is_empty()),
        }
    }

    /// `git args…` in `dir` (as a test's author), which must succeed.
    fn git_in(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_DIR")
            .status()
            .expect("git")
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn one_status_says_what_head_branch_and_status_say() {
        let d = tempfile::tempdir().expect("tempdir");
        let top = d.path();
        let run = |args: &[&str]| git_in(top, args);
        run(&["init", "-q", "-b", "main"]);
        let store = top.join("sub");
        std::fs::create_dir_all(&store).expect("mkdir");
        let same = |what: &str, head_set: bool| {
            for root in [top, store.as_path()] {
                let e = envelope(root).expect("read");
                assert_eq!(e, asked_one_by_one(root), "{what} at {}", root.display());
                assert_eq!(!e.head.is_empty(), head_set, "{what}");
            }
        };
        same("unborn", false);
        std::fs::write(top.join("a b.txt"), "1").expect("write");
        std::fs::write(store.join("s.txt"), "1").expect("write");
        run(&["add", "."]);
        same("staged before the first commit", false);
        run(&["commit", "-qm", "one"]);
        same("clean", true);
        std::fs::write(top.join("a b.txt"), "2").expect("write");
        same("dirty above the store only", true);
        assert!(envelope(top).expect("read").dirty);
        assert!(!envelope(&store).expect("read").dirty);
        run(&["commit", "-qam", "two"]);
        run(&["mv", "sub/s.txt", "moved.txt"]);
        same("renamed out of the store", true);
        assert!(envelope(&store).expect("read").dirty);
        run(&["commit", "-qm", "three"]);
        run(&["checkout", "-q", "--detach"]);
        same("detached", true);
        assert_eq!(envelope(top).expect("read").branch, None);
        assert!(parse_envelope(b"garbage\0", "").is_none());
    }

    /// A repository with `db/schema.sql` and `notes.txt` committed (the store's root is its top).
    fn repo_with_guarded_file() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        let top = d.path();
        let run = |args: &[&str]| git_in(top, args);
        run(&["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(top.join("db")).expect("mkdir");
        std::fs::write(top.join("db/schema.sql"), "1").expect("write");
        std::fs::write(top.join("notes.txt"), "1").expect("write");
        run(&["add", "."]);
        run(&["commit", "-qm", "one"]);
        d
    }

    fn watching() -> Worktree {
        let mut w = Worktree::default();
        w.set_sink(Some(Arc::new(|| {})));
        w
    }

    /// Wait for the look-ahead's thread, so that what a test does next comes after its answer.
    fn settle(w: &Worktree) {
        while w.ahead.as_ref().is_some_and(|h| !h.is_finished()) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    #[test]
    fn a_look_ahead_answers_only_while_nothing_it_watched_moved() {
        let d = repo_with_guarded_file();
        let root = d.path();
        let head = crate::git::run::git(root, &["rev-parse", "HEAD"]);
        let t = vec!["db/schema.sql".to_string()];

        // Nothing guarded moved: the first evaluation takes the answer git gave ahead (an
        // unguarded file changed since is not in it, as it is in no kept answer).
        std::fs::write(root.join("db/schema.sql"), "2").expect("write");
        let mut w = watching();
        let guess = t.clone();
        w.look_ahead(root, move || Some(guess));
        settle(&w);
        std::fs::write(root.join("notes.txt"), "2").expect("write");
        let a = w.uncommitted(root, head.as_deref(), &t).expect("answer");
        assert_eq!(a.paths, vec!["db/schema.sql"], "the answer given ahead");
        let asked = w.asked;
        assert_eq!(w.uncommitted(root, head.as_deref(), &t), Some(a));
        assert_eq!(w.asked, asked, "kept while the watches see nothing");
        // Its watches are the store's from then on: a later save is seen.
        std::fs::write(root.join("db/schema.sql"), "1").expect("write");
        let a = w.uncommitted(root, head.as_deref(), &t).expect("answer");
        assert_eq!(a.paths, vec!["notes.txt"]);
        std::fs::write(root.join("notes.txt"), "1").expect("write");

        // A guarded file saved after git answered ahead: that answer is not used.
        let mut w = watching();
        let guess = t.clone();
        w.look_ahead(root, move || Some(guess));
        settle(&w);
        std::fs::write(root.join("db/schema.sql"), "3").expect("write");
        let a = w.uncommitted(root, head.as_deref(), &t).expect("answer");
        assert_eq!(a.paths, vec!["db/schema.sql"]);
        std::fs::write(root.join("db/schema.sql"), "1").expect("write");

        // Guessed other triggers: asked afresh for the real ones.
        let mut w = watching();
        w.look_ahead(root, || Some(vec!["notes.txt".to_string()]));
        settle(&w);
        std::fs::write(root.join("notes.txt"), "2").expect("write");
        let a = w.uncommitted(root, head.as_deref(), &t).expect("answer");
        assert_eq!(a.paths, vec!["notes.txt"], "the whole tree, asked now");

        // Another HEAD than the one git answered at: not used.
        let mut w = watching();
        let guess = t.clone();
        w.look_ahead(root, move || Some(guess));
        settle(&w);
        let other = "0".repeat(40);
        let a = w.uncommitted(root, Some(&other), &t).expect("answer");
        assert_eq!(a.paths, vec!["notes.txt"]);
        assert!(w
            .known
            .as_ref()
            .is_some_and(|(h, _)| h.as_deref() == Some(other.as_str())));

        // No daemon's sink: nothing is taken from ahead (nothing could be watched live).
        let mut w = Worktree::default();
        let guess = t.clone();
        w.look_ahead(root, move || Some(guess));
        settle(&w);
        assert!(w.uncommitted(root, head.as_deref(), &t).is_some());
        assert!(w.watched.is_none());
    }

    #[test]
    fn plain_triggers_are_watched_without_git_and_globs_through_the_index() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        for f in [
            "deps.txt",
            "db/schema.sql",
            "db/migrations/001.sql",
            "src/a.rs",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, "x").expect("write");
        }
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut asked = 0;
        let (dirs, from_index) =
            guarded_dirs(root, &t(&["deps.txt", "./src/a.rs"]), &mut asked).expect("dirs");
        assert!(!from_index);
        assert_eq!(asked, 0, "no git for plain file triggers");
        let names = dirs[root].as_ref().expect("names");
        assert!(names.contains("deps.txt") && names.len() == 1);
        assert!(dirs[&root.join("src")]
            .as_ref()
            .expect("names")
            .contains("a.rs"));
        // A directory: it and every directory below, any name; looked at again when the index
        // moves (a new directory may come with new tracked files).
        let (dirs, again) = guarded_dirs(root, &t(&["db/"]), &mut asked).expect("dirs");
        assert!(again);
        assert!(dirs[&root.join("db")].is_none());
        assert!(dirs[&root.join("db/migrations")].is_none());
        assert_eq!(dirs.len(), 2);
        // A trigger in a directory not made yet needs the index (not a repository here).
        assert!(guarded_dirs(root, &t(&["gen/out.txt"]), &mut asked).is_err());
        assert!(guarded_dirs(root, &t(&["*.sql"]), &mut asked).is_err());
    }

    #[test]
    fn triggers_touch_the_changed_paths_they_cover() {
        let u = Uncommitted {
            paths: vec!["db/schema.sql".into(), "src/lib.rs".into()],
        };
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(u.touches(&t(&["db"])));
        assert!(u.touches(&t(&["*.rs"])));
        assert!(!u.touches(&t(&["docs", "db/other.sql"])));
        assert!(!u.touches(&[]), "an empty trigger list is never dirty");
        let v = Uncommitted {
            paths: vec!["db/schema.sql".into(), "x".into()],
        };
        assert_eq!(u.difference(&v), vec!["src/lib.rs", "x"]);
    }
}
