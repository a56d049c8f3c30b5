//! `brief`, `why` and `reopen`: reading decisions back.

use super::context::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BriefRequest {
    pub context: Context,
    /// `--limit`; `None` takes config `brief_limit`. 0 means no cap.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// A rejected road: `option` is the text after `rejected:`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BriefRoad {
    pub claim: String,
    pub option: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BriefDecision {
    /// Whether some ground carries a test check (whatever it supports, so a rejected road's
    /// tripwire counts): a violation can be caught. Otherwise the ruling is advisory.
    #[serde(default)]
    pub bound: bool,
    pub decision: String,
    pub id: String,
    pub load_bearing: bool,
    pub rejected_roads: Vec<BriefRoad>,
    /// The source_ref's dedup key, only when the tick has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<String>,
}

/// The frozen `ev-brief` contract, field for field.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BriefResult {
    /// How many of the `total` rulings are advisory (not bound), counted before the cap.
    #[serde(default)]
    pub advisory: u64,
    pub decisions: Vec<BriefDecision>,
    pub elided: u64,
    pub elided_load_bearing: u64,
    pub kind: String,
    pub shown: u64,
    pub total: u64,
}

impl BriefResult {
    /// The contract's one line: compact JSON, keys sorted at every level, then `\n`.
    pub fn contract_line(&self) -> String {
        let v = serde_json::to_value(self).unwrap_or(Value::Null);
        let mut s = crate::json::compact(&v);
        s.push('\n');
        s
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct WhyRequest {
    pub context: Context,
    pub selector: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WhyMatch {
    pub file: String,
    pub decision: String,
    pub claim: String,
    pub supports: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WhyResult {
    pub selector: String,
    /// By file name, then ground index; empty means the selector guards nothing.
    pub matches: Vec<WhyMatch>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReopenGround {
    pub supports: String,
    pub claim: String,
    /// `test`, `person` or `none`.
    pub check: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_at_sha: Option<String>,
    /// The verdict label (test grounds only; no memo lock applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReopenResult {
    pub id: String,
    pub decision: String,
    pub observe: String,
    pub agent_proposed: bool,
    pub authority: Option<String>,
    pub jurisdiction: Option<String>,
    /// The source_ref's dedup key.
    pub source_ref: Option<String>,
    pub supersedes: Option<String>,
    pub ratifies: Option<String>,
    pub superseded_by: Option<String>,
    pub grounds: Vec<ReopenGround>,
}
