//! The store verbs' wire types: `init`, `decide`, `show`, `list` (and its plain lines), `log`,
//! `verify`.

use super::check::AnswerRef;
use super::context::{Context, Warning};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request that only names its store.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StoreRequest {
    pub context: Context,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct InitResult {
    pub created: bool,
    pub path: String,
}

/// One ground as the decide grammar built it, before validation, so evd can raise every
/// per-ground refusal itself.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DraftGround {
    /// `chosen` (`--assume`) or `rejected` (`--reject`).
    pub kind: DraftKind,
    /// The claim of a chosen ground.
    #[serde(default)]
    pub claim: Option<String>,
    /// The option of a rejected road (split and trimmed).
    #[serde(default)]
    pub option: Option<String>,
    /// The reason a rejected road was declined (split and trimmed).
    #[serde(default)]
    pub why: Option<String>,
    #[serde(default)]
    pub revisit: Option<String>,
    #[serde(default)]
    pub test_ref: Option<String>,
    #[serde(default)]
    pub counter_test: Option<String>,
    #[serde(default)]
    pub platforms: Vec<String>,
    #[serde(default)]
    pub triggered_by: Vec<String>,
    #[serde(default)]
    pub surfaces: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DraftKind {
    #[default]
    Chosen,
    Rejected,
}

/// A commit the caller read for `--from-git`; `envelope: None` means git could not read it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FromGit {
    pub rev: String,
    pub envelope: Option<CommitEnvelope>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CommitEnvelope {
    pub subject: String,
    pub author: String,
    pub body: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DecideRequest {
    pub context: Context,
    #[serde(default)]
    pub decision: Option<String>,
    #[serde(default)]
    pub from_git: Option<FromGit>,
    #[serde(default)]
    pub observe: Option<String>,
    #[serde(default)]
    pub blame: Option<String>,
    #[serde(default)]
    pub verified_at_sha: Option<String>,
    #[serde(default)]
    pub authority: Option<String>,
    #[serde(default)]
    pub jurisdiction: Option<String>,
    #[serde(default)]
    pub source_ref: Option<String>,
    #[serde(default)]
    pub grounds: Vec<DraftGround>,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DecideResult {
    pub id: String,
    pub ground_count: usize,
    pub dry_run: bool,
    /// The tick as stored (or as it would be stored), plus `file`.
    pub tick: Value,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IdRequest {
    pub context: Context,
    pub id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShowResult {
    pub id: String,
    /// The exact file bytes (always UTF-8; a non-UTF-8 file is a read error).
    pub raw: String,
    /// The parsed JSON, when the file is JSON.
    pub tick: Option<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ListEntry {
    pub file: String,
    pub parseable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jurisdiction: Option<String>,
    /// The rendered source_ref (its dedup key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ListResult {
    /// The current view plus unparseable files, sorted by file name. Empty when the answer is
    /// in [`ListResult::plain_file`].
    pub entries: Vec<ListEntry>,
    /// With [`ListForm::PlainFile`]: the plain listing ([`list_plain_lines`]) in a file in the
    /// daemon's private runtime directory. Absent when there is none to hand over (then
    /// `entries` holds the answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain_file: Option<AnswerRef>,
}

/// `ev.list`'s params.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {
    pub context: Context,
    /// How the answer comes back: entries (the default) or the finished plain lines in a file.
    #[serde(default)]
    pub form: ListForm,
}

/// The shape of `ev.list`'s answer.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ListForm {
    /// [`ListResult::entries`]: one object per entry.
    #[default]
    Entries,
    /// [`ListResult::plain_file`]: the lines the plain (unstyled) `list` prints, in a file.
    #[serde(rename = "plain-file")]
    PlainFile,
}

/// The plain `list` output for `entries`: one line per entry (`<file>\t<status>\tQ(decision)`
/// and a tab-separated `key=value` per present tag, or `<file>\t?\t"<unparseable>"`), sorted
/// by the whole line, each ending in a newline. Empty for no entries.
pub fn list_plain_lines(entries: &[ListEntry]) -> String {
    let mut rows: Vec<String> = entries
        .iter()
        .map(|e| {
            if !e.parseable {
                return format!("{}\t?\t\"<unparseable>\"", e.file);
            }
            let mut row = format!(
                "{}\t{}\t{}",
                e.file,
                e.status.as_deref().unwrap_or(""),
                crate::json::q(e.decision.as_deref().unwrap_or(""))
            );
            for (k, v) in [
                ("authority", &e.authority),
                ("jurisdiction", &e.jurisdiction),
                ("source_ref", &e.source_ref),
            ] {
                if let Some(v) = v {
                    row.push('\t');
                    row.push_str(k);
                    row.push('=');
                    row.push_str(v);
                }
            }
            row
        })
        .collect();
    rows.sort();
    let mut text = String::with_capacity(rows.iter().map(|r| r.len() + 1).sum());
    for r in rows {
        text.push_str(&r);
        text.push('\n');
    }
    text
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LogEntry {
    pub id: String,
    pub status: String,
    pub decision: String,
    pub blame: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratifies: Option<String>,
    /// The tick that supersedes this one (a re-tag or an overturn), anywhere in the store: the
    /// newest by `held_since`, ties to the greater id. None when nothing does, or when the store
    /// could not be read whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LogResult {
    /// HEAD first, then each parent.
    pub entries: Vec<LogEntry>,
    /// The id the walk could not find (broken lineage), if any.
    pub broken_at: Option<String>,
    /// A tick on the walk that could not be read: `(id, error)`; rows before it stay valid.
    pub unreadable: Option<(String, String)>,
    /// The other tips (branches merged, or writers that forked the chain), newest first, each
    /// walked back to where it joins the chain from HEAD (or the chain of a fork listed before
    /// it). Empty when every tick is on HEAD's chain, as upstream `ev log` assumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forks: Vec<LogFork>,
}

/// One tip off HEAD's chain, and its ticks back to where it joins.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LogFork {
    pub tip: String,
    /// The tick it joins (on HEAD's chain or an earlier fork's); `None`: it joins nothing (its
    /// walk ended at a genesis tick or a missing parent).
    pub joins: Option<String>,
    /// The tip first, then each parent, down to (not including) `joins`.
    pub entries: Vec<LogEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    pub context: Context,
    #[serde(default)]
    pub self_test: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VectorLine {
    pub name: String,
    pub got: String,
    pub want: String,
    pub pass: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VerifyResult {
    /// Each violation line without the `✗ ` prefix. Empty = clean.
    pub violations: Vec<String>,
    /// Only for `self_test`.
    pub vectors: Option<Vec<VectorLine>>,
    /// Tolerated-key and imported-R5 warnings (stderr lines, before the verdict).
    #[serde(default)]
    pub warnings: Vec<Warning>,
    /// How many tick files were audited.
    #[serde(default)]
    pub files: usize,
    /// How many of `files` were read and audited for this answer; the others' audits were
    /// reused, their files unchanged since the daemon's last audit. `None` for `self_test`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaudited: Option<usize>,
}

impl VerifyResult {
    pub fn ok(&self) -> bool {
        self.violations.is_empty() && self.vectors.iter().flatten().all(|v| v.pass)
    }
}

/// `doctor`: find what a hand-resolved or broken store holds (a HEAD with git's conflict
/// markers, HEAD naming no tick, a tick whose parent is missing, stray files in `ticks/`) and,
/// with `fix`, repair it. Without `fix` nothing is written.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DoctorRequest {
    pub context: Context,
    #[serde(default)]
    pub fix: bool,
}

/// What `doctor` found, and what it did (with `fix`) or would do about each.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DoctorResult {
    pub findings: Vec<DoctorFinding>,
    /// Tick files that read as ticks once repaired (or, without `fix`, would).
    pub ticks: usize,
    /// HEAD after the repairs (or, without `fix`, as it would be).
    pub head: String,
    /// Where files moved out of `ticks/` were put (relative to the store's root), if any were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<String>,
    /// Whether the repairs were written (`fix`).
    pub fixed: bool,
}

impl DoctorResult {
    /// Whether something is still wrong: a finding not repaired.
    pub fn unhealthy(&self) -> bool {
        self.findings.iter().any(|f| !f.repaired)
    }
}

/// One thing wrong with the store.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DoctorFinding {
    /// `conflicted-head`, `bad-head`, `missing-head-tick`, `missing-parent`, `bad-tick`,
    /// `misnamed-tick` or `stray`.
    pub kind: String,
    /// What it concerns: `HEAD`, or a path under `.evolving/`.
    pub subject: String,
    /// What is wrong, in a sentence.
    pub problem: String,
    /// The repair (what was done with `fix`, else what `--fix` would do); none when it cannot
    /// be repaired without losing a decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
    /// Whether the repair was made.
    pub repaired: bool,
}
