//! `ev.guards`: which current decisions guard which files, for hooks and editors.

use super::check::{CheckRow, StalenessRef, Tally};
use super::context::{Context, Warning};
use super::evidence::EvidenceRow;
use super::recall::BriefRoad;
use serde::{Deserialize, Serialize};

/// `ev.guards`: the current decisions whose test grounds name `triggered_by` paths, with their
/// verdicts as a plain `check` reads them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GuardsRequest {
    pub context: Context,
    /// Paths relative to the store's root (`/`-separated). Only the decisions with a trigger
    /// covering one of them are answered (see [`crate::pathspec::covers`]); `None` answers every
    /// decision that has a trigger at all.
    #[serde(default)]
    pub paths: Option<Vec<String>>,
    /// Answer at most this many decisions: the ones asking for the most attention first (the
    /// [`GuardedGround::severity`] of their worst ground over the requested paths), then by file
    /// name. `None` answers every one, by file name. A git hook asks for a handful: a commit
    /// touching a much-guarded file may match thousands.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only these decisions (tick ids), when given: an editor that learnt from `ev.watch` which
    /// verdicts moved asks for just those. At most as many as `paths`.
    #[serde(default)]
    pub ticks: Option<Vec<String>>,
    /// Answer every citation of the current live decisions in `evidence`, the ones that hold
    /// too (an editor shows each at its span); otherwise only those that do not hold.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_evidence: bool,
    /// `paths` are what a commit is staging (a pre-commit gate): uncommitted by definition, so
    /// a green ground whose triggers cover one reads `dirty` without the work tree being looked
    /// at. evd then answers from the evaluation it holds when nothing but the work tree may have
    /// moved since it was made (HEAD, ticks, receipts, state files and evidence are checked as
    /// always): the labels of grounds covering none of `paths`, and the tally's split between
    /// `green` and `dirty`, are as of its last look at the work tree. Nothing that gates
    /// depends on the work tree.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub staged: bool,
    /// Instead of `paths`: the paths a commit stages in this git index, which evd works out
    /// itself (what `git diff --cached --name-only --no-renames` lists) and answers in
    /// [`GuardsResult::staged_paths`]; a gate then runs no git of its own. An index evd cannot
    /// read that way is refused with reason `staged_unknown`: the caller then asks git and
    /// sends `paths`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged_index: Option<StagedIndex>,
}

/// A git index whose staged change a pre-commit gate asks about.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StagedIndex {
    /// The index file: absolute (git's `GIT_INDEX_FILE` in a hook, else the repository's own).
    pub index: String,
    /// The store's root relative to the top of the work tree, `/`-terminated (empty when the
    /// store is at the top): staged paths are named from the top, triggers from the store.
    #[serde(default)]
    pub prefix: String,
}

/// How many of a store's gating verdicts [`GuardsResult::gating_rows`] carries at most.
pub const GATING_ROWS: usize = 8;

/// The newest receipt of a ground's test.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LastRun {
    /// `green`, `red` or `gray`.
    pub result: String,
    pub commit: String,
    pub ran_at: String,
    pub platform: String,
    /// Where it came from, when it came through git (`evctl receipts publish` on another host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<super::team::ReceiptOrigin>,
}

/// One test ground of a guarding decision.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GuardedGround {
    /// The ground's index in its tick.
    pub index: usize,
    pub claim: String,
    /// `chosen` or `rejected:<option>`.
    pub supports: String,
    /// The test selector, as bound.
    pub selector: String,
    /// `None`: a harvested binding.
    pub counter_test: Option<String>,
    pub triggered_by: Vec<String>,
    pub platforms: Vec<String>,
    /// The verdict label, exactly as `check` prints it.
    pub label: String,
    /// `attention`, `clear` or `informational`.
    pub class: String,
    /// Whether this verdict gates (`check --exit-on-red` exits 1 on it).
    pub gating: bool,
    /// `check`'s detail text for the row.
    pub detail: String,
    pub last_run: Option<LastRun>,
}

/// A current decision with at least one trigger (covering a requested path, when paths were
/// given).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GuardedDecision {
    pub tick_id: String,
    pub file: String,
    pub decision: String,
    pub blame: String,
    pub authority: Option<String>,
    pub jurisdiction: Option<String>,
    /// The roads not taken.
    pub rejected: Vec<BriefRoad>,
    /// The requested paths this decision's triggers cover, in request order (every distinct
    /// trigger when no paths were given).
    pub matched: Vec<String>,
    /// Its test grounds, in tick order.
    pub grounds: Vec<GuardedGround>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GuardsResult {
    /// The commit the verdicts were read at (`None` outside git).
    pub head: Option<String>,
    pub staleness_ref: StalenessRef,
    /// Whether any current verdict of the store gates: what `check --exit-on-red` exits 1 on,
    /// whether or not it guards a requested path.
    pub gating: bool,
    pub tally: Tally,
    /// By file name (with a request `limit`: the most attention-asking first).
    pub decisions: Vec<GuardedDecision>,
    /// How many decisions matched before the request's `limit` was applied.
    #[serde(default)]
    pub matched_total: usize,
    /// When the store gates: its first gating verdicts in check order (at most [`GATING_ROWS`];
    /// `tally.gating` counts them all), whether or not they guard a requested path. What a
    /// pre-commit gate names when it blocks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gating_rows: Vec<CheckRow>,
    /// The store's gating verdicts of failing tests (`red`, `gray->red`): the first ones in
    /// check order (at most [`GATING_ROWS`]), and how many there are in all. A failing test
    /// blocks a commit whatever it changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub red_rows: Vec<CheckRow>,
    #[serde(default)]
    pub red_total: usize,
    #[serde(default)]
    pub warnings: Vec<Warning>,
    /// Current decisions whose cited evidence no longer holds (as `check` reads them); with
    /// [`GuardsRequest::all_evidence`], every citation, labelled `holds` where it does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<EvidenceRow>,
    /// With [`GuardsRequest::staged_index`]: the staged paths, from the top of the work tree,
    /// in git's order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged_paths: Option<Vec<String>>,
}

/// How much a verdict asks for attention: a gating verdict first, then red over stale over
/// not-run over unproven, then the informational labels, green last.
pub fn severity(label: &str, gating: bool) -> u8 {
    let base = match label {
        "red" | "gray->red" => 6,
        "silently-unbound" => 5,
        l if l.starts_with("stale") => 4,
        "not-run" => 3,
        "unproven" => 2,
        "memo" | "dirty" => 1,
        _ => 0,
    };
    base + if gating { 10 } else { 0 }
}

impl GuardedGround {
    /// How much this ground asks for attention (see [`severity`]).
    pub fn severity(&self) -> u8 {
        severity(&self.label, self.gating)
    }

    /// Whether one of this ground's triggers covers `path`.
    pub fn guards_path(&self, path: &str) -> bool {
        self.triggered_by
            .iter()
            .any(|t| crate::pathspec::covers(t, path))
    }
}

impl GuardedDecision {
    /// The ground that speaks for this decision about `path` (about any of its triggers when
    /// `None`): the one asking for the most attention, the first in tick order among equals.
    pub fn worst_ground(&self, path: Option<&str>) -> Option<&GuardedGround> {
        self.grounds
            .iter()
            .filter(|g| !g.triggered_by.is_empty())
            .filter(|g| path.is_none_or(|p| g.guards_path(p)))
            .fold(None, |worst: Option<&GuardedGround>, g| match worst {
                Some(w) if w.severity() >= g.severity() => Some(w),
                _ => Some(g),
            })
    }
}
