//! The one `#[rpc]` trait: every `ev.*` method, its request and its answer. jsonrpsee derives
//! the server side evd implements and the client side evctl calls from it.

use super::check::{
    AppendReceiptsRequest, AppendReceiptsResult, CheckPlan, CheckRequest, CheckResult,
};
use super::daemon::{DaemonStatus, Hello, HelloRequest, ShutdownAck};
use super::evidence::EvidenceResult;
use super::guards::{GuardsRequest, GuardsResult};
use super::ledger::{
    LedgerAppendRequest, LedgerAppendResult, LedgerQueryRequest, LedgerRepairResult,
    LedgerReplayResult, LedgerVerifyResult,
};
use super::migrate::{
    BackfillRequest, BindCheckRequest, BindCheckResult, MigrateEvent, ReconcileRequest,
    ReconcileResult,
};
use super::recall::{BriefRequest, BriefResult, ReopenResult, WhyRequest, WhyResult};
use super::team::{
    HostsLedgers, LedgerHostsRequest, LedgerPublishRequest, LedgerPublishResult,
    PublishReceiptsRequest, PublishReceiptsResult, ReceiptsStatus, TrustRequest, TrustResult,
};
use super::verbs::{
    DecideRequest, DecideResult, DoctorRequest, DoctorResult, IdRequest, InitResult, ListRequest,
    ListResult, LogResult, ShowResult, StoreRequest, VerifyRequest, VerifyResult,
};
use super::watch::WatchEvent;
use super::writers::{
    GuardRequest, GuardResult, PendingRequest, PendingResult, ProposeRequest, ProposeResult,
    RatifyRequest, RatifyResult, ReverifyRequest, ReverifyResult, SupersedeRequest,
    SupersedeResult,
};
use jsonrpsee::core::{RpcResult, SubscriptionResult};
use jsonrpsee::proc_macros::rpc;
use serde_json::Value;

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

    /// Find, and with `fix` repair, what a hand-resolved or broken store holds.
    #[method(name = "doctor")]
    async fn doctor(&self, req: DoctorRequest) -> RpcResult<DoctorResult>;

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

    /// Record that decisions still hold at HEAD after commits changed what they guard.
    #[method(name = "reverify")]
    async fn reverify(&self, req: ReverifyRequest) -> RpcResult<ReverifyResult>;

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

    /// Gather this host's receipts into the repository's receipts notes ref, united with the
    /// remote's copy the caller just fetched; the caller pushes it.
    #[method(name = "receipts.publish")]
    async fn receipts_publish(
        &self,
        req: PublishReceiptsRequest,
    ) -> RpcResult<PublishReceiptsResult>;

    /// What came in through the receipts notes: imported, waiting, untrusted, rewritten refs.
    #[method(name = "receipts.status")]
    async fn receipts_status(&self, req: StoreRequest) -> RpcResult<ReceiptsStatus>;

    /// Trust, or stop trusting, a publishing host (the store config's `trusted_hosts`).
    #[method(name = "receipts.trust")]
    async fn receipts_trust(&self, req: TrustRequest) -> RpcResult<TrustResult>;

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

    /// This host's ledger as `refs/evolving/ledger/<host>`, for the caller to push.
    #[method(name = "ledger.publish")]
    async fn ledger_publish(&self, req: LedgerPublishRequest) -> RpcResult<LedgerPublishResult>;

    /// Every other host's fetched ledger, judged against the copy last accepted and verified.
    #[method(name = "ledger.hosts")]
    async fn ledger_hosts(&self, req: LedgerHostsRequest) -> RpcResult<HostsLedgers>;

    /// Make the ledger appendable again after a torn last line (moved aside under `runs/`) or
    /// lines removed from its end (their seqs declared skipped); each repair is journaled as a
    /// `ledger_correction`. Nothing else is ever changed.
    #[method(name = "ledger.repair")]
    async fn ledger_repair(&self, req: StoreRequest) -> RpcResult<LedgerRepairResult>;

    /// Replay the ledger: fold its receipts, ticks and git answers through the verdict engine
    /// and compare each `check_run`'s fingerprint; the first that differs is the fault.
    #[method(name = "ledger.replay")]
    async fn ledger_replay(&self, req: StoreRequest) -> RpcResult<LedgerReplayResult>;

    /// Live verdict changes of one store, pushed as they happen (the watcher keeps evaluating).
    #[subscription(name = "watch" => "watch.event", unsubscribe = "unwatch", item = WatchEvent)]
    async fn watch(&self, req: StoreRequest) -> SubscriptionResult;
}
