//! What `evctl report` draws, as the engine answered it: the store's log, its verdicts
//! (`ev.guards`), its citations, and each ledger query's answer. Plain data: no behaviour.

use std::collections::BTreeMap;

use proto::rpc::{EvidenceResult, GuardsResult, LogResult};
use serde_json::Value;

/// What the page shows, as the engine answered.
pub struct Data {
    pub store: String,
    pub now: String,
    pub since: Option<String>,
    pub log: LogResult,
    pub guards: GuardsResult,
    pub evidence: EvidenceResult,
    /// Each ledger query's answer, by name.
    pub queries: BTreeMap<String, Value>,
}
