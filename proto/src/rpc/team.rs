//! Beyond one machine: receipts published as git notes and brought back by a fetch
//! (`ev.receipts.publish`, `ev.receipts.status`, `ev.receipts.trust`). The network is the
//! client's (it runs `git fetch` and `git push` with the user's credentials); evd reads and
//! writes the repository's notes ref and the store.

use super::context::{Context, Warning};
use serde::{Deserialize, Serialize};

/// `ev.receipts.publish`: gather this host's receipts at commits of the repository into the
/// local notes ref, united with what the remote's copy holds, ready to push.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PublishReceiptsRequest {
    pub context: Context,
    /// The remote whose copy of the notes (`refs/evolving/remote-notes/<remote>/receipts`, just
    /// fetched by the caller) the new notes commit descends from.
    #[serde(default)]
    pub remote: Option<String>,
    /// The publishing host's id (`EV_HOST_ID` or its host name, as the caller resolved it).
    pub host: String,
    /// Who publishes (an email address), for the notes commit's author.
    pub by: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PublishReceiptsResult {
    pub notes_ref: String,
    /// The notes ref's commit now (`None`: there is nothing to publish and never was).
    pub commit: Option<String>,
    /// Receipts this publish added to the notes.
    pub added: usize,
    /// Receipts in the notes now, and the commits they were run at.
    pub receipts: usize,
    pub commits: usize,
    /// Whether the remote lacks something the local notes ref has (a push is due).
    pub push: bool,
    /// This host's receipts left out: at commits the repository does not have, or imported
    /// from another publisher (they are that publisher's to publish).
    pub skipped: usize,
    pub warnings: Vec<Warning>,
}

/// Where a receipt that came through git came from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReceiptOrigin {
    /// The publishing host (`?` for a note written by other means than `evctl receipts publish`).
    pub host: String,
    /// The publisher's email, as the notes commit's author says.
    pub by: String,
    /// The notes commit that first added the receipt.
    pub notes_commit: String,
}

/// A receipt that came through git, with where it came from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PublishedReceipt {
    pub test: String,
    pub platform: String,
    pub commit: String,
    pub ran_at: String,
    pub result: String,
    pub origin: ReceiptOrigin,
}

/// A notes ref that was rewritten rather than extended since it was last read, or extended by
/// a commit that took receipts away.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NotesRewrite {
    /// `true`: the new commit descends from the one seen but its notes hold fewer receipts (a
    /// commit on top that removed some); `false`: it does not descend from it (force-pushed).
    #[serde(default)]
    pub extended: bool,
    /// The ref (`refs/notes/evolving-receipts` or a remote's copy).
    pub notes_ref: String,
    /// The commit last read, and the one there now (which does not descend from it).
    pub seen: String,
    pub now: String,
    /// Receipts the last read held that the rewritten notes no longer hold (they stay imported).
    pub dropped: Vec<PublishedReceipt>,
    /// When it was found (RFC 3339).
    pub found_at: String,
}

/// `ev.receipts.status`: what came through git and what was kept out.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReceiptsStatus {
    /// The hosts whose receipts may turn a verdict; `None`: every publisher's (empty: none,
    /// as when the config's list cannot be read).
    pub trusted: Option<Vec<String>>,
    /// The signatures asked of hosts' notes commits, `HOST=KEY` each (`trusted_signers`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signers: Vec<String>,
    /// Each notes ref read, with its commit.
    pub sources: Vec<NotesSource>,
    /// Receipts written into `results/receipts/` from the notes, in all.
    pub imported: usize,
    /// Receipts at commits not (yet) in HEAD's history: they come in once HEAD reaches them.
    pub waiting: usize,
    /// Receipts from publishers not trusted: shown, never written where verdicts read.
    pub untrusted: Vec<PublishedReceipt>,
    /// Notes lines that are not receipts of the commit they are attached to.
    pub refused: usize,
    /// Notes refs found rewritten, newest last.
    pub rewrites: Vec<NotesRewrite>,
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NotesSource {
    pub notes_ref: String,
    pub commit: String,
}

/// `ev.receipts.trust`: trust (or stop trusting) a publishing host. The list lives in the
/// store's config (`trusted_hosts`), committed with the decisions, so a team shares it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TrustRequest {
    pub context: Context,
    pub host: String,
    /// `true`: add it; `false`: remove it (and every signer asked of it).
    pub trust: bool,
    /// With `trust`: its notes commits must also carry a good signature by this key (a key
    /// fingerprint, primary key fingerprint, key id or signer, as git reports them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TrustResult {
    /// The trusted hosts now; `None`: every publisher's receipts count.
    pub trusted: Option<Vec<String>>,
    pub changed: bool,
    /// The signatures asked for now, `HOST=KEY` each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signers: Vec<String>,
}

/// `ev.ledger.publish`: this host's event ledger as `refs/evolving/ledger/<host>` (a commit
/// whose tree holds `events.jsonl`, a child of the last one published), for the caller to push.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LedgerPublishRequest {
    pub context: Context,
    /// The publishing host's id, as for receipts.
    pub host: String,
    /// Who publishes (an email address), for the commit's author.
    pub by: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LedgerPublishResult {
    pub ledger_ref: String,
    pub commit: String,
    /// Events in the published ledger.
    pub events: u64,
    /// The ref already held exactly this ledger.
    pub unchanged: bool,
}

/// `ev.ledger.hosts`'s request.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LedgerHostsRequest {
    pub context: Context,
    /// This host's id: its own ledger fetched back, and what other hosts witnessed of it, are
    /// checked against the file here rather than accepted as another host's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
}

/// `ev.ledger.hosts`: every other host's ledger a fetch brought, judged against the copy last
/// accepted from it and verified; accepted copies become the ones later fetches are judged by.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HostsLedgers {
    pub hosts: Vec<HostLedger>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HostLedger {
    pub remote: String,
    pub host: String,
    /// The fetched copy's commit.
    pub commit: String,
    /// Events in the fetched copy.
    pub events: u64,
    /// `ok` (accepted: the first copy seen, the same, or one that extends the last accepted),
    /// `rewritten` (refused: it does not extend the copy last accepted; that copy is kept) or
    /// `broken` (refused: its chain or a rule is broken).
    pub state: String,
    /// For `rewritten` and `broken`: the first line at fault (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    pub message: String,
    /// For a copy refused on another host's word: the host that witnessed it otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub witness: String,
}
