//! What evctl resolves about its caller before asking evd: which store (walking up from the
//! working directory like git), and the git facts a verb needs (user.name, HEAD, upstream).

use std::path::{Path, PathBuf};
use std::process::Command;

use evd::api::shared::gitfacts::{FactCache, Query};
use proto::rpc::{Context, GitFacts};

/// The nearest directory at or above `start` that holds `.evolving` (as anything: evd refuses a
/// symlinked one with a clear error rather than us skipping it silently).
pub fn find_store(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|d| std::fs::symlink_metadata(d.join(".evolving")).is_ok())
        .map(Path::to_path_buf)
}

/// The store root a command works on: `--store DIR` (a repo root, or its `.evolving`), else the
/// nearest store above the working directory, else the working directory itself (so that `init`
/// creates it there and other verbs report that no store exists).
pub fn store_root(explicit: Option<&str>, cwd: &Path, walk_up: bool) -> PathBuf {
    if let Some(s) = explicit {
        let p = cwd.join(s);
        if p.file_name().is_some_and(|n| n == ".evolving") {
            if let Some(parent) = p.parent() {
                return parent.to_path_buf();
            }
        }
        return p;
    }
    if walk_up {
        if let Some(found) = find_store(cwd) {
            return found;
        }
    }
    cwd.to_path_buf()
}

/// Run `git -C dir args…` and return its trimmed stdout when it succeeded and is non-empty.
pub fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out =
        evd::api::shared::child::git_stdout(Command::new("git").arg("-C").arg(dir).args(args));
    warn_git_timeouts();
    out
}

/// Say (once per command) that a git evctl ran overran its limit: the fact it was asked for is
/// then unknown, and the verb's own message may not say why.
pub fn warn_git_timeouts() {
    for cmd in evd::api::shared::child::take_timeouts() {
        eprintln!(
            "warning: evctl: `{cmd}` did not finish within {} s and was stopped (a hung filesystem, a FIFO or a stale lock in the repository?)",
            evd::api::shared::child::git_timeout().as_secs_f32()
        );
    }
}

/// Which git facts a request needs; each lookup may be a process spawn, so only ask for what is
/// used.
#[derive(Debug, Default, Clone, Copy)]
pub struct Needs {
    pub user_name: bool,
    pub head: bool,
    pub upstream: bool,
}

pub fn build(store: &Path, cwd: &Path, needs: Needs) -> Context {
    let agent_id = std::env::var("EV_AGENT_ID").ok().filter(|s| !s.is_empty());
    // HEAD and the upstream are on every check's path: answered through the persisted cache
    // of git's answers (git is still asked whenever anything they depend on changed).
    let mut facts = if needs.head || needs.upstream {
        PersistedFacts::open()
    } else {
        None
    };
    let mut ask = |q: Query, args: &[&str]| match facts.as_mut() {
        Some(f) => f.cache.answer(store, q),
        None => git(store, args),
    };
    let head = needs
        .head
        .then(|| ask(Query::Head, &["rev-parse", "HEAD"]))
        .flatten();
    let upstream = needs
        .upstream
        .then(|| ask(Query::Upstream, &["rev-parse", "@{upstream}"]))
        .flatten();
    if let Some(f) = facts.as_mut() {
        // A cache: failing to keep it costs the next run a spawn, nothing more.
        let _ = f.cache.save(&f.path);
    }
    Context {
        store: store.display().to_string(),
        cwd: cwd.display().to_string(),
        agent_id,
        git: GitFacts {
            user_name: if needs.user_name {
                git(store, &["config", "user.name"])
            } else {
                None
            },
            head,
            upstream,
        },
        request_id: Some(new_request_id()),
        wait_ms: u64::try_from(crate::client::call_timeout().as_millis()).ok(),
    }
}

/// A fresh id for this invocation's write (128 random bits, hex). Retries of the same write
/// reuse it, so the daemon applies it at most once.
pub fn new_request_id() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        // No urandom: the pid, the clock and the address of a stack value, hashed.
        use sha2::Digest;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let seed = format!("{}:{now}:{:p}", std::process::id(), &bytes);
        bytes.copy_from_slice(&sha2::Sha256::digest(seed.as_bytes())[..16]);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cache of git's answers kept between runs in `<runtime dir>/git-facts.json`.
struct PersistedFacts {
    cache: FactCache,
    path: PathBuf,
}

impl PersistedFacts {
    /// `None` when our environment rules caching out (a `GIT_*` variable) or the runtime
    /// directory cannot be made private: then git is simply asked.
    fn open() -> Option<PersistedFacts> {
        let cache = FactCache::for_caller();
        if !cache.caches() {
            return None;
        }
        let rt = evd::api::shared::paths::runtime_dir();
        evd::api::shared::paths::ensure_private_dir(&rt).ok()?;
        let path = rt.join(GIT_FACTS_FILE);
        Some(PersistedFacts {
            cache: cache.read_from(&path),
            path,
        })
    }
}

/// The name of the persisted cache of git's answers, in the runtime directory.
pub const GIT_FACTS_FILE: &str = "git-facts.json";

/// Read a commit for `--from-git`: subject, author and body, or `None` if git cannot.
pub fn commit_envelope(store: &Path, rev: &str) -> Option<proto::rpc::CommitEnvelope> {
    if rev.starts_with('-') {
        return None;
    }
    let field = |fmt: &str| -> Option<String> {
        let out = evd::api::shared::child::output(
            Command::new("git").arg("-C").arg(store).args([
                "show",
                "-s",
                &format!("--format={fmt}"),
                "--end-of-options",
                rev,
            ]),
            evd::api::shared::child::git_timeout(),
        );
        warn_git_timeouts();
        let out = out.ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    Some(proto::rpc::CommitEnvelope {
        subject: field("%s")?,
        author: field("%an")?,
        body: field("%b")?,
    })
}

/// `path` (relative to `cwd`, or absolute) as a `/`-separated path relative to the store root,
/// lexically: the file need not exist (a staged deletion, a file not yet saved).
pub fn store_relative(root: &Path, cwd: &Path, path: &str) -> Result<String, String> {
    use std::path::Component;
    let joined = cwd.join(path);
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in joined.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => parts.clear(),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop();
            }
            Component::Normal(n) => parts.push(n),
        }
    }
    let abs: PathBuf = std::iter::once(std::ffi::OsStr::new("/"))
        .chain(parts)
        .collect();
    let rel = abs.strip_prefix(root).map_err(|_| {
        format!(
            "{path} is outside the store at {} (paths are read relative to the working directory)",
            root.display()
        )
    })?;
    rel.to_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{path} is not valid UTF-8"))
}
