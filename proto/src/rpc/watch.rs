//! Live verdicts: what `ev.watch` pushes to its subscribers.

use serde::{Deserialize, Serialize};

/// One ground's verdict moved (as a plain `check` reads it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VerdictChange {
    pub tick_id: String,
    pub ground_index: usize,
    pub decision: String,
    pub claim: String,
    /// `None`: the ground was not in view before.
    pub old: Option<String>,
    /// `None`: the ground left the view (its tick was superseded or replaced).
    pub new: Option<String>,
}

/// What `ev.watch` pushes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum WatchEvent {
    /// One verdict changed.
    Changed(VerdictChange),
    /// Changes may have been missed (a slow subscriber, a rescan): ask `ev.check` afresh.
    Resync { reason: String },
}
