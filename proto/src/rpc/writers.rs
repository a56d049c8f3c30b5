//! The agent lane and the after-the-fact writers: `propose`, `ratify`, `pending`, `guard`,
//! `supersede`.

use super::context::{Context, Warning};
use super::verbs::{DraftGround, FromGit};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `propose`: decide's grammar, always agent-proposed and unbound. A check field in a ground,
/// `authority` or `verified_at_sha` is refused, naming the flag.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProposeRequest {
    pub context: Context,
    #[serde(default)]
    pub decision: Option<String>,
    #[serde(default)]
    pub from_git: Option<FromGit>,
    #[serde(default)]
    pub observe: Option<String>,
    /// Explicit blame; absent means the caller's agent id (`context.agent_id`), else `agent`.
    #[serde(default)]
    pub blame: Option<String>,
    #[serde(default)]
    pub jurisdiction: Option<String>,
    #[serde(default)]
    pub source_ref: Option<String>,
    #[serde(default)]
    pub grounds: Vec<DraftGround>,
    /// Never allowed here; present only so a raw client gets upstream's refusal.
    #[serde(default)]
    pub authority: Option<String>,
    /// Never allowed here; present only so a raw client gets upstream's refusal.
    #[serde(default)]
    pub verified_at_sha: Option<String>,
}

/// The one-line `--json` answer of `propose` (upstream's `ev-proposed` envelope).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProposedEnvelope {
    pub authority: String,
    pub blame: String,
    pub decision: String,
    pub id: String,
    pub kind: String,
    pub provenance: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProposeResult {
    pub id: String,
    pub ground_count: usize,
    /// True when an agent proposal with the same source_ref already existed (nothing written).
    pub deduped: bool,
    pub envelope: ProposedEnvelope,
    pub tick: Value,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RatifyRequest {
    pub context: Context,
    pub id: String,
    pub blame: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RatifyResult {
    pub proposal_id: String,
    pub child_id: String,
    pub tick: Value,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PendingRequest {
    pub context: Context,
    #[serde(default)]
    pub source_ref: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Proposal {
    pub id: String,
    pub status: String,
    pub decision: String,
    pub blame: String,
    /// The source_ref's dedup key.
    pub source_ref: Option<String>,
    pub held_since: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PendingResult {
    pub filter: Option<String>,
    /// Newest first.
    pub proposals: Vec<Proposal>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GuardRequest {
    pub context: Context,
    pub selector: String,
    pub id: String,
    /// A ground's claim, or its zero-based index among all grounds.
    #[serde(default)]
    pub target: Option<String>,
    pub counter_test: String,
    #[serde(default)]
    pub platforms: Vec<String>,
    #[serde(default)]
    pub triggered_by: Vec<String>,
    #[serde(default)]
    pub surfaces: Vec<String>,
    #[serde(default)]
    pub verified_at_sha: Option<String>,
    #[serde(default)]
    pub blame: Option<String>,
    #[serde(default)]
    pub authority: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GuardResult {
    pub child_id: String,
    pub parent_id: String,
    pub ground_index: usize,
    pub tick: Value,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

/// The two forms of `supersede`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SupersedeMode {
    /// Copy the payload verbatim and fix a standing tag.
    Retag,
    /// A fresh ruling with its own grounds.
    Overturn,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RetagTags {
    #[serde(default)]
    pub authority: Option<String>,
    #[serde(default)]
    pub jurisdiction: Option<String>,
    #[serde(default)]
    pub provenance: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Overturn {
    pub decision: String,
    #[serde(default)]
    pub observe: Option<String>,
    #[serde(default)]
    pub verified_at_sha: Option<String>,
    #[serde(default)]
    pub authority: Option<String>,
    #[serde(default)]
    pub jurisdiction: Option<String>,
    #[serde(default)]
    pub source_ref: Option<String>,
    /// `--from-git` in the stream (always refused: the ruling is positional).
    #[serde(default)]
    pub from_git: Option<FromGit>,
    #[serde(default)]
    pub grounds: Vec<DraftGround>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SupersedeRequest {
    pub context: Context,
    pub id: String,
    pub mode: SupersedeMode,
    #[serde(default)]
    pub blame: Option<String>,
    #[serde(default)]
    pub retag: Option<RetagTags>,
    #[serde(default)]
    pub overturn: Option<Overturn>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SupersedeResult {
    pub mode: SupersedeMode,
    pub child_id: String,
    pub superseded_id: String,
    /// Only for an overturn.
    pub ground_count: Option<usize>,
    pub tick: Value,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}
