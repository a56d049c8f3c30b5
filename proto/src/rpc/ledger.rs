//! The event ledger's methods: append, verify, query and replay.

use super::context::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Events to append to the store's ledger (`results/ledger/events.jsonl`), in order: each an
/// object with seed 002's envelope (`schema_version`, `event_type`, `run_id`, `agent_id`,
/// `payload`; `host` and `git` are filled in by evd when absent), never `seq`, `ts` or `prev`,
/// which are the writer's. The batch is admitted whole or not at all.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LedgerAppendRequest {
    pub context: Context,
    pub events: Vec<Value>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LedgerAppendResult {
    /// The lines written, each exactly as appended (without its newline).
    pub lines: Vec<String>,
    /// The seq of the first line written.
    pub first_seq: u64,
}

/// The first line of the ledger that breaks a rule.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LedgerFault {
    /// 1-based line number.
    pub line: u64,
    /// `json`, `size`, `seq`, `chain`, `order`, `envelope`, `schema_version`, `event_type`,
    /// `payload`, or a consistency rule `R1`…`R9`.
    pub rule: String,
    pub message: String,
}

/// One of the ledger's queries (`calibration`, `routing`, `failures`, `entropy`, `conflicts`,
/// `decisions`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LedgerQueryRequest {
    pub context: Context,
    pub query: String,
    /// `calibration`: how many of each group's latest executions (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<usize>,
    /// Fold in every other host's ledger accepted from a fetch (the copies `ev.ledger.hosts`
    /// last accepted), with this one's: the fleet's answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_hosts: bool,
    /// With `all_hosts`: this host's id (its own copies fetched back are not counted twice).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// Several questions answered in one read of this host's ledger (`query` is then not
    /// read): the answer is `{"answers": {name: answer, …}}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queries: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LedgerVerifyResult {
    pub path: String,
    /// Lines in the file.
    pub lines: u64,
    /// The first violation; `None` when every line keeps every rule.
    pub fault: Option<LedgerFault>,
    /// The seq of the `ledger_validation_error` event this verification appended to report
    /// the fault (none when the same fault was already the last one reported).
    pub reported_seq: Option<u64>,
}

/// `ev.ledger.repair`: what was repaired (each a `ledger_correction` payload, in the order
/// written), and where the first correction landed; nothing repaired when the ledger needed
/// none.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LedgerRepairResult {
    pub path: String,
    pub repaired: Vec<Value>,
    pub first_seq: Option<u64>,
}

/// `ev.ledger.replay`: the ledger folded through the verdict engine again (seed 003, rule 3).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LedgerReplayResult {
    pub path: String,
    /// Lines in the file.
    pub lines: u64,
    /// `check_run` events whose fingerprints were reproduced (all of them when `fault` is none).
    pub replayed: u64,
    /// Ticks read from the store (by content id) to evaluate them.
    pub ticks_read: u64,
    /// Where the replay parted from the ledger, or the line that does not verify (replay starts
    /// only on a ledger that verifies); `None` when every fingerprint was reproduced.
    pub fault: Option<LedgerFault>,
}
