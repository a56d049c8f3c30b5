//! The daemon's own methods: the handshake (`ev.hello`), `ev.status` and `ev.shutdown`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HelloRequest {
    pub protocol: u32,
    pub build_id: String,
    #[serde(default)]
    pub client: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hello {
    pub protocol: u32,
    pub build_id: String,
    pub version: String,
    pub pid: u32,
    pub started_at: String,
    /// Whether the caller's protocol and build match this daemon.
    pub compatible: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoreStatus {
    /// The canonical directory holding `.evolving/`.
    pub root: String,
    pub ticks: usize,
    pub head: String,
    pub opened_at: String,
    pub writes: u64,
    /// `watched`, or `degraded: <why>` when a watch could not be made: every answer for this
    /// store is then validated against the disk first (slower, never stale).
    #[serde(default)]
    pub watch: String,
    /// How long since a request last used the store.
    #[serde(default)]
    pub idle_ms: u64,
    /// What the store's thread is doing, when it has been at one request for a while (more
    /// than a second); `stuck` once that is past the store's deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<StoreBusy>,
    /// What this daemon took back of the store from the images the previous daemon kept,
    /// instead of reading and evaluating it again; absent when it took nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_start: Option<WarmStart>,
    /// What the store's user should know that `check` said once (the live-origin reference
    /// that cannot be resolved); absent when nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What a daemon took back of a store from the images its predecessor kept (docs/daemon.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WarmStart {
    /// Parsed ticks taken from the tick image (each file found unchanged, not read again).
    pub ticks: usize,
    /// Whether the first check was answered from the evaluation image.
    pub evaluation: bool,
}

/// One request holding a store's thread.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoreBusy {
    /// The request: its method (`ev.check`), or `re-evaluation` for what the watcher started.
    pub what: String,
    pub running_ms: u64,
    /// Past the deadline: requests to this store are refused at once until it is done.
    pub stuck: bool,
}

/// What the daemon process holds right now.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Resources {
    pub threads: u64,
    pub open_fds: u64,
    pub rss_bytes: u64,
    /// inotify instances held (at most one, whatever the number of stores).
    pub inotify_instances: u64,
    /// Directories watched through it.
    pub inotify_watches: u64,
    /// Stores with a worker (held, or opened and waiting to be released).
    pub open_stores: u64,
    /// Client connections being served.
    pub connections: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DaemonStatus {
    pub pid: u32,
    pub version: String,
    pub build_id: String,
    pub protocol: u32,
    pub started_at: String,
    pub uptime_ms: u64,
    pub socket: String,
    pub stores: Vec<StoreStatus>,
    #[serde(default)]
    pub resources: Resources,
    /// This host's id as a publisher of receipts and ledgers.
    #[serde(default)]
    pub host: HostIdentity,
}

/// A host's id as a publisher: `EV_HOST_ID` when set, else the host name made fit for a ref.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostIdentity {
    /// The id; `None` when `EV_HOST_ID` is set to something that cannot be one.
    pub id: Option<String>,
    /// `EV_HOST_ID` or `hostname`.
    pub from: String,
    /// Why `EV_HOST_ID` is refused, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShutdownAck {
    pub pid: u32,
}
