//! The hub's vocabulary: the changes a drain or a listener is told, why a directory could not be
//! watched, the hub's figures and the limits it keeps. No watching of its own (that is
//! [`super::notify_hub`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// What changed since the last drain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// Nothing at all.
    Quiet,
    /// These entries of the directory changed (created, written, removed, renamed, re-moded).
    Names(BTreeSet<String>),
    /// Events were lost or the directory itself went away: rescan everything.
    Rescan,
}

/// Called on the hub's thread with a live consumer's changes. It must not block for long.
pub type Listener = Arc<dyn Fn(Changes) + Send + Sync>;

/// Why a directory could not be watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchError(pub String);

impl std::fmt::Display for WatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Names a consumer may hold before it is told to rescan instead: a consumer nobody drains
/// (an idle store) costs bounded memory however busy its directory is.
pub(super) const MAX_PENDING_NAMES: usize = 8192;

/// How long live changes settle before they are delivered.
pub const DEBOUNCE: Duration = Duration::from_millis(40);

/// What the hub's `stats` reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HubStats {
    /// Watcher instances (on Linux, inotify instances) this process holds through the hub (0
    /// or 1).
    pub instances: usize,
    /// Watched directories.
    pub watches: usize,
    /// Handles on them.
    pub consumers: usize,
}
