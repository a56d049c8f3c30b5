//! The environment rules: whose git is asked ([`Mode`]), which variables make an answer
//! uncacheable (any `GIT_*` for the caller's git but the inert ones; those that redirect git's
//! reads for evd's own), what an answer is keyed by (`HOME`, `XDG_CONFIG_HOME`,
//! `GIT_CONFIG_NOSYSTEM`) and which user and system config files git reads.
//!
//! It decides from variable names and values alone: it never reads the process environment
//! itself (its callers hand it in), touches no file and runs no git.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// git's system-wide config file (where a Debian/Ubuntu-style git with prefix `/usr` reads it).
pub const SYSTEM_CONFIG: &str = "/etc/gitconfig";

/// Environment variables that change which files git reads. Even in [`Mode::Repository`] (whose
/// spawn clears `GIT_DIR`, `GIT_WORK_TREE` and `GIT_INDEX_FILE`), their presence in our own
/// environment means the dependency set [`super::deps`] stamps would not be the one git used.
pub(super) const REDIRECTING: &[&str] = &[
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
pub(super) struct Env {
    pub(super) cacheable: bool,
    pub(super) home: Option<String>,
    pub(super) xdg: Option<String>,
    /// `GIT_CONFIG_NOSYSTEM` as set (answers with and without it are kept apart).
    pub(super) nosystem: Option<String>,
}

impl Env {
    pub(super) fn from_vars<I: IntoIterator<Item = (OsString, OsString)>>(
        mode: Mode,
        vars: I,
    ) -> Env {
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
    pub(super) fn user_configs(&self) -> Vec<PathBuf> {
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
