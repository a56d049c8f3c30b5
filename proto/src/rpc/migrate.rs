//! `migrate`'s wire types: backfill (with its progress stream), reconcile, bind-check.

use super::context::{Context, Warning};
use super::errors::Refusal;
use serde::{Deserialize, Serialize};

/// One `--source` (or `--against`) spec. evctl splits the spec at its first `:` and sends the
/// path made absolute against its own working directory (`file`), which evd reads as the same
/// uid: a request stays small whatever the size of the history. A client may instead send the
/// contents (`text`) or the I/O error it met (`read_error`); a spec without a colon carries none.
/// evd performs the ordered checks, naming the path as the caller spelled it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SourceInput {
    pub spec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_error: Option<String>,
}

/// The `--jurisdiction-map` file: `path` as the caller spelled it, plus the absolute `file` to
/// read (or the contents, or the caller's read error), as for [`SourceInput`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MapInput {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_error: Option<String>,
}

/// `migrate --source …`: backfill history into the store.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    pub context: Context,
    pub sources: Vec<SourceInput>,
    #[serde(default)]
    pub jurisdiction_map: Option<MapInput>,
    /// The fallback author for records that carry none (never git config).
    #[serde(default)]
    pub blame: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// One tag that differs between a stored tick and the record that re-imports it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TagDiff {
    pub tag: String,
    pub stored: Option<String>,
    pub incoming: Option<String>,
}

/// A re-imported record whose resolved tags differ from the stored tick (reported, never applied).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Discrepancy {
    pub source_key: String,
    pub tick_id: String,
    pub diffs: Vec<TagDiff>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct BackfillResult {
    pub dry_run: bool,
    pub imported: usize,
    pub skipped: usize,
    pub relinked: usize,
    pub source_only_gaps: usize,
    pub discrepancies: Vec<Discrepancy>,
    /// The ids written, in chain order (empty on a dry run).
    pub written_ids: Vec<String>,
    /// The stderr lines, in order: R3 warnings of written records and `discrepancy:` lines.
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

/// How far a backfill has got: `phase` is `parse` (sources read), `plan` (records resolved),
/// `stage` (ticks written aside) or `write` (ticks published; the last item is `write` n/n).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MigrateProgress {
    pub phase: String,
    pub done: u64,
    pub total: u64,
}

/// A refusal carried inside the backfill stream (the call itself was accepted).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MigrateRefusal {
    pub code: i32,
    pub reason: String,
    pub message: String,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

impl From<Refusal> for MigrateRefusal {
    fn from(r: Refusal) -> Self {
        MigrateRefusal {
            code: r.code,
            reason: r.reason,
            message: r.message,
            warnings: r.warnings,
        }
    }
}

impl From<MigrateRefusal> for Refusal {
    fn from(r: MigrateRefusal) -> Self {
        Refusal {
            code: r.code,
            reason: r.reason,
            message: r.message,
            warnings: r.warnings,
        }
    }
}

/// The items of the `ev.migrate.backfill` subscription: any number of `progress`, then exactly
/// one `done` or `refused`, after which the daemon closes the subscription.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum MigrateEvent {
    Progress(MigrateProgress),
    Done(BackfillResult),
    Refused(MigrateRefusal),
}

/// `migrate --reconcile --against …`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReconcileRequest {
    pub context: Context,
    pub against: SourceInput,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReconcileResult {
    pub in_both: usize,
    pub source_only: usize,
    pub store_only: usize,
    pub un_keyable: usize,
    /// The source keys the store lacks (the capture gap), sorted.
    pub source_only_keys: Vec<String>,
}

/// `migrate --bind-check …`: the harvested check shape (needs no store).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BindCheckRequest {
    pub context: Context,
    pub selector: String,
    #[serde(default)]
    pub platforms: Vec<String>,
    #[serde(default)]
    pub triggered_by: Vec<String>,
    #[serde(default)]
    pub surfaces: Vec<String>,
    #[serde(default)]
    pub verified_at_sha: Option<String>,
}

/// Liveness lists in the order given (not canonicalised: this is a report, not a tick).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LivenessLists {
    pub platforms: Vec<String>,
    pub triggered_by: Vec<String>,
    pub surfaces: Vec<String>,
}

/// A test check without a counter-test.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HarvestedCheck {
    pub by: String,
    #[serde(rename = "ref")]
    pub reference: String,
    pub verified_at_sha: String,
    pub liveness: LivenessLists,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct BindCheckResult {
    pub check: HarvestedCheck,
}
