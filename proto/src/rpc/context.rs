//! What every request carries about its caller ([`Context`], its git facts), the warnings an
//! answer may carry, and the protocol's version and size limit.

use serde::{Deserialize, Serialize};

/// Bumped whenever a method's params or result change shape incompatibly.
pub const PROTOCOL_VERSION: u32 = 1;

/// The largest request evd reads (anything larger is refused unread). A `migrate` names its
/// source files by path rather than carrying them, so no request needs more.
pub const MAX_REQUEST_BYTES: u32 = 1024 * 1024;

/// What the caller resolved about itself.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// Absolute path of the directory that holds (or will hold) `.evolving/`.
    pub store: String,
    /// The caller's working directory (absolute): base for the caller's relative paths.
    #[serde(default)]
    pub cwd: String,
    /// `EV_AGENT_ID`, empty means absent.
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub git: GitFacts,
    /// A write's id, made by the client: a retry with the same id gets the first answer and is
    /// never applied twice. Reads ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// How long the client waits for the answer, in milliseconds. A write still queued when
    /// that has passed is not applied (the client has given up on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// Facts from the caller's git, each `None` when the lookup failed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GitFacts {
    /// `git config user.name`, trimmed, empty → None.
    #[serde(default)]
    pub user_name: Option<String>,
    /// `git rev-parse HEAD`, trimmed.
    #[serde(default)]
    pub head: Option<String>,
    /// `git rev-parse @{upstream}`, trimmed.
    #[serde(default)]
    pub upstream: Option<String>,
}

/// A non-fatal line the CLI prints to stderr, exactly as upstream would.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Warning {
    pub kind: String,
    pub message: String,
}
