//! The RPC contract between evctl (and editors) and evd: one `#[rpc]` trait, its wire types, and
//! the error envelope. Methods are named `ev.<verb>`; every call takes exactly one object.
//!
//! Everything that depends on the caller (which store, its working directory, git identity and
//! HEAD, the agent id) travels in [`Context`]; evd never reads them from its own environment.

use jsonrpsee::core::{RpcResult, SubscriptionResult};
use jsonrpsee::proc_macros::rpc;
use jsonrpsee::types::ErrorObjectOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bumped whenever a method's params or result change shape incompatibly.
pub const PROTOCOL_VERSION: u32 = 1;

/// The largest request evd reads (anything larger is refused unread). A `migrate` names its
/// source files by path rather than carrying them, so no request needs more.
pub const MAX_REQUEST_BYTES: u32 = 1024 * 1024;

/// What the caller resolved about itself.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// Absolute path of the directory that holds (or will hold) `.evolving/`.
    pub store: String,
    /// The caller's working directory (absolute): base for the caller's relative paths.
    #[serde(default)]
    pub cwd: String,
    /// `EV_AGENT_ID`, empty means absent.
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub git: GitFacts,
    /// A write's id, made by the client: a retry with the same id gets the first answer and is
    /// never applied twice. Reads ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// How long the client waits for the answer, in milliseconds. A write still queued when
    /// that has passed is not applied (the client has given up on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// Facts from the caller's git, each `None` when the lookup failed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GitFacts {
    /// `git config user.name`, trimmed, empty → None.
    #[serde(default)]
    pub user_name: Option<String>,
    /// `git rev-parse HEAD`, trimmed.
    #[serde(default)]
    pub head: Option<String>,
    /// `git rev-parse @{upstream}`, trimmed.
    #[serde(default)]
    pub upstream: Option<String>,
}

/// A non-fatal line the CLI prints to stderr, exactly as upstream would.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Warning {
    pub kind: String,
    pub message: String,
}

// ---------------------------------------------------------------------------------------------
// Errors

/// JSON-RPC error codes of refusals (the params-shape code -32602 is jsonrpsee's own). They sit
/// in the implementation-defined server range and clear of the codes jsonrpsee itself answers
/// with (-32000 to -32011: oversized requests and responses, busy, batch limits), so a client can
/// always tell which said what.
pub mod codes {
    pub const NO_STORE: i32 = -32040;
    pub const NOT_FOUND: i32 = -32041;
    pub const REFUSED: i32 = -32042;
    pub const IO: i32 = -32043;
    /// The store is owned by another daemon (or another user's).
    pub const LOCKED: i32 = -32044;
    /// The store path itself is unusable (a symlink, not a directory, …).
    pub const BAD_STORE: i32 = -32045;
    /// The daemon is stopping and did not run the request: reconnect (to a new one) and retry.
    pub const STOPPING: i32 = -32046;
    /// A write waited past the time its client waits for an answer, and was not applied.
    pub const EXPIRED: i32 = -32047;
    /// A retried write was applied before (its tick is in the store), but its answer was lost.
    pub const ALREADY_APPLIED: i32 = -32048;
    pub const INTERNAL: i32 = -32603;
}

/// The `data` of every refusal: a stable slug, upstream's exact message (what follows
/// `error: `; where upstream names itself, `ev <verb>`, this names `evctl <verb>`, the program
/// the user runs), and the warnings emitted before the refusal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RefusalData {
    pub reason: String,
    pub message: String,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

/// A refusal as evd raises it and evctl renders it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: i32,
    pub reason: String,
    pub message: String,
    pub warnings: Vec<Warning>,
}

impl Refusal {
    pub fn new(code: i32, reason: &str, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            reason: reason.into(),
            message: message.into(),
            warnings: Vec::new(),
        }
    }
    pub fn refused(reason: &str, message: impl Into<String>) -> Refusal {
        Refusal::new(codes::REFUSED, reason, message)
    }
    pub fn io(message: impl Into<String>) -> Refusal {
        Refusal::new(codes::IO, "io", message)
    }
    pub fn no_store() -> Refusal {
        Refusal::new(codes::NO_STORE, "no_store", NO_STORE_MESSAGE)
    }
    pub fn with_warnings(mut self, w: Vec<Warning>) -> Refusal {
        self.warnings = w;
        self
    }
    /// Recover a refusal from a JSON-RPC error object.
    pub fn from_error_object(e: &ErrorObjectOwned) -> Refusal {
        let data = e
            .data()
            .and_then(|raw| serde_json::from_str::<RefusalData>(raw.get()).ok());
        match data {
            Some(d) => Refusal {
                code: e.code(),
                reason: d.reason,
                message: d.message,
                warnings: d.warnings,
            },
            None => Refusal::new(e.code(), "rpc", e.message().to_string()),
        }
    }
}

impl From<Refusal> for ErrorObjectOwned {
    fn from(r: Refusal) -> Self {
        let data = RefusalData {
            reason: r.reason,
            message: r.message.clone(),
            warnings: r.warnings,
        };
        ErrorObjectOwned::owned(r.code, r.message, Some(data))
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The refusal text for a missing store (the inner backticks are literal).
pub const NO_STORE_MESSAGE: &str = "no .evolving/ store here — run `evctl init` first";

// ---------------------------------------------------------------------------------------------
// Daemon lifecycle

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HelloRequest {
    pub protocol: u32,
    pub build_id: String,
    #[serde(default)]
    pub client: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hello {
    pub protocol: u32,
    pub build_id: String,
    pub version: String,
    pub pid: u32,
    pub started_at: String,
    /// Whether the caller's protocol and build match this daemon.
    pub compatible: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoreStatus {
    /// The canonical directory holding `.evolving/`.
    pub root: String,
    pub ticks: usize,
    pub head: String,
    pub opened_at: String,
    pub writes: u64,
    /// `watched`, or `degraded: <why>` when a watch could not be made: every answer for this
    /// store is then validated against the disk first (slower, never stale).
    #[serde(default)]
    pub watch: String,
    /// How long since a request last used the store.
    #[serde(default)]
    pub idle_ms: u64,
}

/// What the daemon process holds right now.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Resources {
    pub threads: u64,
    pub open_fds: u64,
    pub rss_bytes: u64,
    /// inotify instances held (at most one, whatever the number of stores).
    pub inotify_instances: u64,
    /// Directories watched through it.
    pub inotify_watches: u64,
    /// Stores with a worker (held, or opened and waiting to be released).
    pub open_stores: u64,
    /// Client connections being served.
    pub connections: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DaemonStatus {
    pub pid: u32,
    pub version: String,
    pub build_id: String,
    pub protocol: u32,
    pub started_at: String,
    pub uptime_ms: u64,
    pub socket: String,
    pub stores: Vec<StoreStatus>,
    #[serde(default)]
    pub resources: Resources,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShutdownAck {
    pub pid: u32,
}

// ---------------------------------------------------------------------------------------------
// Verbs

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

// ---------------------------------------------------------------------------------------------
// The agent lane and the after-the-fact writers

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

// ---------------------------------------------------------------------------------------------
// migrate

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

// ---------------------------------------------------------------------------------------------
// check

/// `ev.check`: evaluate every current live test binding (the tests themselves, for `--run`, are
/// executed by the caller beforehand; see [`CheckPlan`] and [`AppendReceiptsRequest`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    pub context: Context,
    /// Staleness reference from the cache only.
    #[serde(default)]
    pub offline: bool,
    /// The attested platforms; `None` (or empty) attests every declared platform.
    #[serde(default)]
    pub attest: Option<Vec<String>>,
    /// Whether the caller ran the tests first (`--run`); only echoed and used for the note.
    #[serde(default)]
    pub ran: bool,
    /// How the rows come back: objects (the default, what `--json` shows), a compact
    /// [`RowTable`], or the finished plain lines.
    #[serde(default)]
    pub form: RowForm,
}

/// The shape of `ev.check`'s rows in the answer.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RowForm {
    /// [`CheckResult::rows`]: one object per row.
    #[default]
    Objects,
    /// [`CheckResult::table`]: what a renderer needs, about half the bytes.
    Table,
    /// [`CheckResult::plain`]: the rows exactly as the plain (unstyled) listing prints them.
    Plain,
    /// [`CheckResult::plain_file`]: the same lines in a file in the daemon's private runtime
    /// directory (falling back to [`CheckResult::plain`] when there is none).
    #[serde(rename = "plain-file")]
    PlainFile,
}

/// A file holding an answer's bytes, in the daemon's private runtime directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AnswerRef {
    pub path: String,
    /// Its length in bytes (a reader checks it read all of it).
    pub len: u64,
}

/// One printed row: a test ground of a current live tick.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckRow {
    /// The display label after the memo locks.
    pub label: String,
    pub tick_id: String,
    /// The tick's file name (what the plain row prints).
    pub file: String,
    pub decision: String,
    pub claim: String,
    pub supports: String,
    pub ground_index: usize,
    /// The detail text, harvested prefix included.
    pub detail: String,
    pub harvested: bool,
    /// `attention`, `clear` or `informational`.
    pub class: String,
    pub gating: bool,
    /// Why a memo row would have gated, when a lock replaced its verdict.
    pub memo_reason: Option<String>,
    /// The label with a stale's kind (`stale:sha` …).
    pub event_label: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StalenessRef {
    pub policy: String,
    pub sha: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tally {
    pub gating: usize,
    pub green: usize,
    pub non_gating: usize,
}

/// The rows of a check as a compact JSON table: one array per row,
/// `[label, class, file, tick_id, decision, claim, detail, memo_reason|null]`. evd keeps it
/// serialized and sends it as is; a client reads it back borrowing from the response.
#[derive(Debug, Clone)]
pub struct RowTable(Box<serde_json::value::RawValue>);

impl PartialEq for RowTable {
    fn eq(&self, other: &RowTable) -> bool {
        self.0.get() == other.0.get()
    }
}
impl Eq for RowTable {}

impl Serialize for RowTable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for RowTable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RowTable, D::Error> {
        Box::<serde_json::value::RawValue>::deserialize(d).map(RowTable)
    }
}

/// What rendering one check row needs, borrowed where the source allows.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RowView<'a>(
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Option<Text<'a>>,
);

impl RowView<'_> {
    pub fn label(&self) -> &str {
        &self.0 .0
    }
    pub fn class(&self) -> &str {
        &self.1 .0
    }
    pub fn file(&self) -> &str {
        &self.2 .0
    }
    pub fn tick_id(&self) -> &str {
        &self.3 .0
    }
    pub fn decision(&self) -> &str {
        &self.4 .0
    }
    pub fn claim(&self) -> &str {
        &self.5 .0
    }
    pub fn detail(&self) -> &str {
        &self.6 .0
    }
    pub fn memo_reason(&self) -> Option<&str> {
        self.7.as_ref().map(|t| t.0.as_ref())
    }
}

/// A string that borrows from the JSON it was read from unless it had escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text<'a>(pub std::borrow::Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Text<'a>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Owned(v.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl CheckRow {
    /// This row as a renderer reads it.
    pub fn view(&self) -> RowView<'_> {
        let t = |s: &str| Text(std::borrow::Cow::Owned(s.to_string()));
        RowView(
            t(&self.label),
            t(&self.class),
            t(&self.file),
            t(&self.tick_id),
            t(&self.decision),
            t(&self.claim),
            t(&self.detail),
            self.memo_reason.as_deref().map(t),
        )
    }
}

impl RowTable {
    /// The table of these rows.
    pub fn encode<'r>(
        rows: impl IntoIterator<Item = &'r CheckRow>,
    ) -> Result<RowTable, serde_json::Error> {
        let cells: Vec<[Option<&str>; 8]> = rows
            .into_iter()
            .map(|r| {
                [
                    Some(r.label.as_str()),
                    Some(r.class.as_str()),
                    Some(r.file.as_str()),
                    Some(r.tick_id.as_str()),
                    Some(r.decision.as_str()),
                    Some(r.claim.as_str()),
                    Some(r.detail.as_str()),
                    r.memo_reason.as_deref(),
                ]
            })
            .collect();
        serde_json::value::RawValue::from_string(serde_json::to_string(&cells)?).map(RowTable)
    }

    /// The rows, borrowing from the table.
    pub fn rows(&self) -> Result<Vec<RowView<'_>>, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// The serialized size, in bytes.
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.get() == "[]"
    }
}

/// One row of the plain listing: `<label>\t<file>\tQ(claim)\t(<detail>)`.
pub fn plain_row(label: &str, file: &str, claim: &str, detail: &str) -> String {
    let mut row = String::new();
    push_plain_row(&mut row, label, file, claim, detail);
    row
}

/// [`plain_row`], appended to `out` (without a newline).
pub fn push_plain_row(out: &mut String, label: &str, file: &str, claim: &str, detail: &str) {
    use std::fmt::Write;
    out.push_str(label);
    out.push('\t');
    out.push_str(file);
    out.push('\t');
    // `Q` (see [`crate::json::q`]): printable ASCII other than `"` and `\` stands for itself.
    if claim
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(claim);
        out.push('"');
    } else {
        // Writing into a String cannot fail.
        let _ = write!(out, "{claim:?}");
    }
    out.push_str("\t(");
    out.push_str(detail);
    out.push(')');
}

/// The plain listing's rows, each ending in a newline.
pub fn plain_lines<'r>(rows: impl IntoIterator<Item = &'r CheckRow>) -> String {
    let mut text = String::new();
    for r in rows {
        push_plain_row(&mut text, &r.label, &r.file, &r.claim, &r.detail);
        text.push('\n');
    }
    text
}

/// The plain listing's rows, newline-terminated. The sender keeps them serialized (a JSON
/// string, sent as is); the receiver reads them straight into text.
#[derive(Debug, Clone)]
pub enum PlainRows {
    Serialized(Box<serde_json::value::RawValue>),
    Text(String),
}

impl PartialEq for PlainRows {
    fn eq(&self, other: &PlainRows) -> bool {
        matches!((self.text(), other.text()), (Ok(a), Ok(b)) if a == b)
    }
}
impl Eq for PlainRows {}

impl Serialize for PlainRows {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PlainRows::Serialized(raw) => raw.serialize(s),
            PlainRows::Text(text) => text.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for PlainRows {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PlainRows, D::Error> {
        String::deserialize(d).map(PlainRows::Text)
    }
}

impl PlainRows {
    /// The lines of these rows, serialized once.
    pub fn encode(rows: &[CheckRow]) -> Result<PlainRows, serde_json::Error> {
        PlainRows::serialize_text(&plain_lines(rows))
    }

    /// These lines, serialized once.
    pub fn serialize_text(text: &str) -> Result<PlainRows, serde_json::Error> {
        serde_json::value::to_raw_value(text).map(PlainRows::Serialized)
    }

    /// The lines, each ending in a newline.
    pub fn text(&self) -> Result<std::borrow::Cow<'_, str>, serde_json::Error> {
        match self {
            PlainRows::Serialized(raw) => serde_json::from_str::<String>(raw.get()).map(Into::into),
            PlainRows::Text(text) => Ok(text.as_str().into()),
        }
    }

    /// The lines, taken.
    pub fn into_text(self) -> Result<String, serde_json::Error> {
        match self {
            PlainRows::Serialized(raw) => serde_json::from_str(raw.get()),
            PlainRows::Text(text) => Ok(text),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckResult {
    /// The rows as objects (empty when the request asked for a [`RowTable`]).
    pub rows: Vec<CheckRow>,
    /// The rows as a compact table, when the request asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<RowTable>,
    /// The rows as plain lines, when the request asked for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain: Option<PlainRows>,
    /// The plain lines in a file, when the request asked for one and the daemon could write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain_file: Option<AnswerRef>,
    pub total_test_bindings: usize,
    pub harvested_unproven: usize,
    pub ran: bool,
    pub staleness_ref: StalenessRef,
    pub tally: Tally,
    /// Any post-lock verdict gates (`--exit-on-red` exits 1), or a user-ruled decision's
    /// evidence drifted.
    pub gating: bool,
    #[serde(default)]
    pub warnings: Vec<Warning>,
    /// Current decisions whose cited evidence no longer holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<EvidenceRow>,
}

/// One test binding `check --run` may execute.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PlannedRun {
    pub tick_id: String,
    pub ground_index: usize,
    pub reference: String,
    /// `None`: a harvested binding (no counter-test, no `falsifiable`).
    pub counter_test: Option<String>,
    pub platforms: Vec<String>,
}

/// `ev.check.plan`: every test binding of the current live view, in check order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckPlan {
    pub green_exit_code: i32,
    pub runs: Vec<PlannedRun>,
}

/// A receipt the caller produced by running a test; evd stamps `ran_at` with its clock.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NewReceipt {
    pub test: String,
    pub platform: String,
    pub commit: String,
    /// `green` or `red` (`gray` is accepted too: external writers use it).
    pub result: String,
    #[serde(default)]
    pub falsifiable: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AppendReceiptsRequest {
    pub context: Context,
    pub receipts: Vec<NewReceipt>,
    /// The caller's run (`[A-Za-z0-9._-]`, at most 64): the ledger's artifacts of `runs` are
    /// kept under `results/runs/<run_id>/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The test runs these receipts come from, each recorded in the ledger as a `tool_call`
    /// with its output kept as artifacts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<ToolRun>,
}

/// One test command `check --run` executed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ToolRun {
    pub command: String,
    /// `check` or `counter-test`.
    pub role: String,
    /// `None`: killed by a signal, stopped at its time limit, or never started.
    pub exit_code: Option<i32>,
    /// What it printed (at most 64 KiB of each stream; not UTF-8 bytes replaced).
    pub stdout: String,
    pub stderr: String,
    pub duration_ms: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct AppendReceiptsResult {
    /// The lines written, each exactly as appended (with its `\n`).
    pub written: Vec<String>,
    /// One `could not write receipt` line per receipt that failed.
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

// ---------------------------------------------------------------------------------------------
// Evidence

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

// ---------------------------------------------------------------------------------------------
// The event ledger

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

// ---------------------------------------------------------------------------------------------
// Live verdicts

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

/// The RPC surface of evd.
#[rpc(server, client, namespace = "ev", namespace_separator = ".")]
pub trait EvApi {
    /// Handshake: protocol version and build id of both sides.
    #[method(name = "hello")]
    async fn hello(&self, req: HelloRequest) -> RpcResult<Hello>;

    /// Daemon pid, version, uptime and the stores it holds.
    #[method(name = "status")]
    async fn status(&self) -> RpcResult<DaemonStatus>;

    /// Stop the daemon cleanly (socket removed, every store released).
    #[method(name = "shutdown")]
    async fn shutdown(&self) -> RpcResult<ShutdownAck>;

    #[method(name = "init")]
    async fn init(&self, req: StoreRequest) -> RpcResult<InitResult>;

    #[method(name = "decide")]
    async fn decide(&self, req: DecideRequest) -> RpcResult<DecideResult>;

    #[method(name = "show")]
    async fn show(&self, req: IdRequest) -> RpcResult<ShowResult>;

    #[method(name = "list")]
    async fn list(&self, req: ListRequest) -> RpcResult<ListResult>;

    #[method(name = "log")]
    async fn log(&self, req: StoreRequest) -> RpcResult<LogResult>;

    #[method(name = "verify")]
    async fn verify(&self, req: VerifyRequest) -> RpcResult<VerifyResult>;

    #[method(name = "propose")]
    async fn propose(&self, req: ProposeRequest) -> RpcResult<ProposeResult>;

    #[method(name = "ratify")]
    async fn ratify(&self, req: RatifyRequest) -> RpcResult<RatifyResult>;

    #[method(name = "pending")]
    async fn pending(&self, req: PendingRequest) -> RpcResult<PendingResult>;

    #[method(name = "guard")]
    async fn guard(&self, req: GuardRequest) -> RpcResult<GuardResult>;

    #[method(name = "supersede")]
    async fn supersede(&self, req: SupersedeRequest) -> RpcResult<SupersedeResult>;

    /// Backfill history, as one call whose progress streams: any number of `progress` items, then
    /// one `done` or `refused`. Only a stopping daemon rejects the call itself; every other
    /// refusal, a bad store path included, is the stream's `refused` item.
    #[subscription(name = "migrate.backfill" => "migrate.progress", unsubscribe = "migrate.unsubscribe", item = MigrateEvent)]
    async fn migrate_backfill(&self, req: BackfillRequest) -> SubscriptionResult;

    /// Join a source against the store: in-both / source-only / store-only / un-keyable.
    #[method(name = "migrate.reconcile")]
    async fn migrate_reconcile(&self, req: ReconcileRequest) -> RpcResult<ReconcileResult>;

    /// The harvested check a `--bind-check` describes (pure; needs no store).
    #[method(name = "migrate.bind_check")]
    async fn migrate_bind_check(&self, req: BindCheckRequest) -> RpcResult<BindCheckResult>;

    /// Evaluate every current live test binding; writes state files, origin-sha and events.
    #[method(name = "check")]
    async fn check(&self, req: CheckRequest) -> RpcResult<CheckResult>;

    /// The test bindings `check --run` executes (in the caller's process, never in evd).
    #[method(name = "check.plan")]
    async fn check_plan(&self, req: StoreRequest) -> RpcResult<CheckPlan>;

    /// Append receipts (one line each, O_APPEND) to `results/receipts/<key>.jsonl`.
    #[method(name = "receipts.append")]
    async fn receipts_append(&self, req: AppendReceiptsRequest) -> RpcResult<AppendReceiptsResult>;

    /// The user-ruled decisions an agent should read first (the `ev-brief` contract).
    #[method(name = "brief")]
    async fn brief(&self, req: BriefRequest) -> RpcResult<BriefResult>;

    /// Every live tick whose test ground is bound to a selector.
    #[method(name = "why")]
    async fn why(&self, req: WhyRequest) -> RpcResult<WhyResult>;

    /// One tick with what each of its test grounds reads now.
    #[method(name = "reopen")]
    async fn reopen(&self, req: IdRequest) -> RpcResult<ReopenResult>;
    /// The current decisions guarding paths: their triggers, verdicts, grounds and roads not
    /// taken (what a hook names before a commit, what an editor shows on a file).
    #[method(name = "guards")]
    async fn guards(&self, req: GuardsRequest) -> RpcResult<GuardsResult>;

    /// Every evidence citation of the current decisions, re-hashed against its file now.
    #[method(name = "evidence")]
    async fn evidence(&self, req: StoreRequest) -> RpcResult<EvidenceResult>;

    /// Append events to the store's ledger: validated at the door (envelope, schema version,
    /// the consistency rules), chained, written durably; refused whole, naming the rule.
    #[method(name = "ledger.append")]
    async fn ledger_append(&self, req: LedgerAppendRequest) -> RpcResult<LedgerAppendResult>;

    /// Answer one of seed 002's questions over the ledger: `{"query", "rows": [...]}`.
    #[method(name = "ledger.query")]
    async fn ledger_query(&self, req: LedgerQueryRequest) -> RpcResult<Value>;

    /// Verify the whole ledger (order, chain, envelope, rules); a fault is reported by
    /// appending a `ledger_validation_error` event, never by changing a line.
    #[method(name = "ledger.verify")]
    async fn ledger_verify(&self, req: StoreRequest) -> RpcResult<LedgerVerifyResult>;

    /// Replay the ledger: fold its receipts, ticks and git answers through the verdict engine
    /// and compare each `check_run`'s fingerprint; the first that differs is the fault.
    #[method(name = "ledger.replay")]
    async fn ledger_replay(&self, req: StoreRequest) -> RpcResult<LedgerReplayResult>;

    /// Live verdict changes of one store, pushed as they happen (the watcher keeps evaluating).
    #[subscription(name = "watch" => "watch.event", unsubscribe = "unwatch", item = WatchEvent)]
    async fn watch(&self, req: StoreRequest) -> SubscriptionResult;
}

// ---------------------------------------------------------------------------------------------
// brief, why, reopen

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

// ---------------------------------------------------------------------------------------------
// guards: which current decisions guard which files (for hooks and editors)

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
    #[serde(default)]
    pub warnings: Vec<Warning>,
    /// Current decisions whose cited evidence no longer holds (as `check` reads them); with
    /// [`GuardsRequest::all_evidence`], every citation, labelled `holds` where it does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<EvidenceRow>,
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
