//! Evidence citations on the wire: each cited span with the state it reads now.

use super::plain::plain_row;
use serde::{Deserialize, Serialize};

/// One citation of a current decision's ground, and what its file says now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CitedEvidence {
    pub tick_id: String,
    pub file: String,
    pub decision: String,
    pub ground_index: usize,
    pub path: String,
    pub start: u64,
    pub end: u64,
    pub sha256: String,
    /// `holds`, `drifted`, `out-of-bounds` or `unreadable`.
    pub state: String,
    /// What is wrong, in words (empty when it holds).
    pub detail: String,
}

/// A current decision whose cited evidence no longer holds: it resurfaces in `check` with a row
/// of its own, and gates like a red when it is user-ruled.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EvidenceRow {
    /// `drifted`, `out-of-bounds`, `unreadable` or `malformed` (`holds` where holding ones are
    /// asked for).
    pub label: String,
    pub tick_id: String,
    pub file: String,
    pub decision: String,
    pub claim: String,
    pub ground_index: usize,
    pub path: String,
    pub start: u64,
    pub end: u64,
    /// What is wrong, in words.
    pub detail: String,
    /// When the file last changed (its mtime), when it can be told.
    pub since: Option<String>,
    pub gating: bool,
}

impl EvidenceRow {
    /// The row as `check` prints it, in the shape of a verdict row.
    pub fn plain(&self) -> String {
        let since = self
            .since
            .as_deref()
            .map(|s| format!(", since {s}"))
            .unwrap_or_default();
        plain_row(
            &self.label,
            &self.file,
            &self.claim,
            &format!(
                "evidence {} bytes {}-{}: {}{since}",
                self.path, self.start, self.end, self.detail
            ),
        )
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct EvidenceResult {
    /// Every citation of the current decisions, in view order.
    pub citations: Vec<CitedEvidence>,
    /// How many hold.
    pub holding: usize,
}
