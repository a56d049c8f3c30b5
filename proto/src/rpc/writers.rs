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

/// `reverify`: record, as a child of each decision, that it still holds at HEAD after commits
/// changed the paths it guards (its test grounds' `verified_at_sha` set to HEAD, superseding
/// it), once every bound test has a green, falsifiable run at HEAD on each platform it names.
/// The caller runs what is missing first (tests run in the caller, never in evd).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReverifyRequest {
    /// `git.head` is the commit the decisions are re-verified at (required).
    pub context: Context,
    /// The decisions to re-verify; none: every current one that reads stale because a commit
    /// since `verified_at_sha` touched the paths it guards.
    #[serde(default)]
    pub ids: Vec<String>,
    /// Say what would be recorded and which runs at HEAD are missing; write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// What `reverify` did (or, on a dry run, would do) for each decision.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReverifyResult {
    /// The commit the decisions were re-verified at.
    pub head: String,
    pub outcomes: Vec<ReverifyOutcome>,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

/// One decision's outcome.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReverifyOutcome {
    pub id: String,
    pub decision: String,
    pub status: ReverifyStatus,
    /// The child recorded (none on a dry run or a refusal).
    #[serde(default)]
    pub child_id: Option<String>,
    /// Why it was refused, or what it waits for.
    #[serde(default)]
    pub reason: Option<String>,
    /// The runs at HEAD it lacks.
    #[serde(default)]
    pub missing: Vec<MissingRun>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ReverifyStatus {
    /// Recorded (or, on a dry run, ready to be).
    Reverified,
    /// Already verified at HEAD: nothing to record.
    Current,
    /// A bound test lacks a run at HEAD on one of its platforms.
    NeedsRun,
    /// A test is red, a counter-test passes, a guarded path has uncommitted changes, or the
    /// decision cannot take a re-verification.
    Refused,
}

/// A bound test without a run at HEAD on one platform.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MissingRun {
    pub selector: String,
    pub platform: String,
}
