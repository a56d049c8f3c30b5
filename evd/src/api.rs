//! The one door into the engine. Every front end answers through here: the daemon's RPC server
//! ([`crate::daemon::server`]) runs these functions on a store's actor, and evctl runs the very
//! same ones in its own process when no daemon can be reached ([`read`], [`write`]), so a verb
//! cannot answer differently in the two. One function per `ev.*` method a store answers, named
//! after it, taking its request as the wire carries it (the daemon's own methods, `hello`,
//! `status`, `shutdown` and the `watch` subscription, are the server's alone).
//!
//! Besides the requests, a client needs a few things it shares with the daemon: the runtime
//! directory, child processes with deadlines (and the process groups a client starts),
//! crash-safe files, the clock's timestamp shape, the config's reading, the daemon lock's
//! holder record and git's cached facts (the context a request carries is built client-side). They are re-exported under [`shared`], so that evctl
//! names this module and nothing else of evd.
//!
//! It owns no rule: each function hands its request to the verb that answers it
//! ([`crate::verbs`]). It must not hold state of its own.

use std::path::PathBuf;

use proto::rpc::{
    AppendReceiptsRequest, AppendReceiptsResult, BackfillRequest, BindCheckRequest,
    BindCheckResult, BriefRequest, BriefResult, CheckPlan, CheckRequest, CheckResult, Context,
    DecideRequest, DecideResult, DoctorRequest, DoctorResult, EvidenceResult, GuardRequest,
    GuardResult, GuardsRequest, GuardsResult, IdRequest, InitResult, LedgerAppendRequest,
    LedgerAppendResult, LedgerQueryRequest, LedgerReplayResult, LedgerVerifyResult, ListRequest,
    ListResult, LogResult, MigrateProgress, PendingRequest, PendingResult, ProposeRequest,
    ProposeResult, RatifyRequest, RatifyResult, ReconcileRequest, ReconcileResult, Refusal,
    ReopenResult, ReverifyRequest, ReverifyResult, ShowResult, StoreRequest, SupersedeRequest,
    SupersedeResult, VerifyRequest, VerifyResult, WhyRequest, WhyResult,
};

pub use crate::open::OpenStore;
use crate::verbs;

/// What a client shares with the daemon besides the requests (see the module's opening).
pub mod shared {
    pub use crate::engine::clock;
    pub use crate::git::facts as gitfacts;
    /// The most bytes one evidence citation may span.
    pub use crate::ledger::evidence::MAX_SPAN;
    /// This process's run id, as the ledger records it.
    pub use crate::ledger::run_id;
    pub use crate::store::{config, lock};
    pub use crate::sys::{beneath, child, fsio, paths, process, users};
    /// The file under `results/` saying the store's live-origin reference could not be
    /// resolved (and that `check` said so once).
    pub use crate::verbs::check::{NO_UPSTREAM_SAID, NO_UPSTREAM_WARNING};
    /// The most paths one `ev.guards` request may name.
    pub use crate::verbs::guards::MAX_PATHS as MAX_GUARDED_PATHS;
    /// Lines a client prints for `migrate`'s answers, the same whoever answered.
    pub use crate::verbs::migrate::{bind_check_line, reconcile_line, summary_line};
    /// The refusal of a `propose` without a binding, decided before any request is sent.
    pub use crate::verbs::propose::unbound_refusal;
    /// A notes ref found rewritten, in the words `check` says it.
    pub use crate::verbs::receipts::import::rewrite_said as notes_rewrite_said;
}

/// The root of the store `ctx` names, the way the daemon resolves it (absolute, canonical).
pub fn resolve_root(ctx: &Context) -> Result<PathBuf, Refusal> {
    crate::store::resolve_root(ctx)
}

/// Open the store `ctx` names, unlocked: nothing is read yet.
pub fn open(ctx: &Context) -> Result<OpenStore, Refusal> {
    Ok(OpenStore::new(resolve_root(ctx)?))
}

/// A read in this process, on a store opened for it alone.
pub fn read<R>(
    ctx: &Context,
    op: impl FnOnce(&mut OpenStore) -> Result<R, Refusal>,
) -> Result<R, Refusal> {
    op(&mut open(ctx)?)
}

/// A write in this process: the store lock is taken for its duration (as `holder`), as the
/// daemon holds it while it serves the store; a store held by someone else is refused
/// ([`proto::rpc::codes::LOCKED`]) before anything is written.
pub fn write<R>(
    ctx: &Context,
    holder: &str,
    op: impl FnOnce(&mut OpenStore) -> Result<R, Refusal>,
) -> Result<R, Refusal> {
    let mut store = open(ctx)?;
    if store.exists()? {
        store.acquire(holder)?;
    }
    op(&mut store)
}

/// `ev.init`.
pub fn init(s: &mut OpenStore) -> Result<InitResult, Refusal> {
    verbs::init(s)
}

/// `ev.decide`.
pub fn decide(s: &mut OpenStore, req: &DecideRequest) -> Result<DecideResult, Refusal> {
    verbs::decide(s, req)
}

/// `ev.propose`.
pub fn propose(s: &mut OpenStore, req: &ProposeRequest) -> Result<ProposeResult, Refusal> {
    verbs::propose(s, req)
}

/// `ev.ratify`.
pub fn ratify(s: &mut OpenStore, req: &RatifyRequest) -> Result<RatifyResult, Refusal> {
    verbs::ratify(s, req)
}

/// `ev.supersede`.
pub fn supersede(s: &mut OpenStore, req: &SupersedeRequest) -> Result<SupersedeResult, Refusal> {
    verbs::supersede(s, req)
}

/// `ev.guard`.
pub fn guard(s: &mut OpenStore, req: &GuardRequest) -> Result<GuardResult, Refusal> {
    verbs::guard(s, req)
}

/// `ev.receipts.publish`.
pub fn receipts_publish(
    s: &mut OpenStore,
    req: &proto::rpc::PublishReceiptsRequest,
) -> Result<proto::rpc::PublishReceiptsResult, Refusal> {
    verbs::receipts::publish(s, req)
}

/// `ev.receipts.status`.
pub fn receipts_status(s: &mut OpenStore) -> Result<proto::rpc::ReceiptsStatus, Refusal> {
    verbs::receipts::status(s)
}

/// `ev.receipts.trust`.
pub fn receipts_trust(
    s: &mut OpenStore,
    req: &proto::rpc::TrustRequest,
) -> Result<proto::rpc::TrustResult, Refusal> {
    verbs::receipts::trust(s, req)
}

/// `ev.reverify`.
pub fn reverify(s: &mut OpenStore, req: &ReverifyRequest) -> Result<ReverifyResult, Refusal> {
    verbs::reverify(s, req)
}

/// `ev.show`.
pub fn show(s: &mut OpenStore, req: &IdRequest) -> Result<ShowResult, Refusal> {
    verbs::show(s, &req.id)
}

/// `ev.list`, in the form asked for (a plain listing comes as an answer file where the
/// process hands answers over as files, as entries otherwise).
pub fn list(s: &mut OpenStore, req: &ListRequest) -> Result<ListResult, Refusal> {
    verbs::list::list_answer(s, req)
}

/// `ev.log`.
pub fn log(s: &mut OpenStore, _req: &StoreRequest) -> Result<LogResult, Refusal> {
    verbs::log(s)
}

/// `ev.pending`.
pub fn pending(s: &mut OpenStore, req: &PendingRequest) -> Result<PendingResult, Refusal> {
    verbs::pending(s, req)
}

/// `ev.verify` (`self_test` needs no store: see [`self_test`]).
pub fn verify(s: &mut OpenStore, _req: &VerifyRequest) -> Result<VerifyResult, Refusal> {
    let r = verbs::verify(s, false);
    // The audit reads and parses every file on several threads; hand the transient memory
    // back so a long-lived process does not keep the peak.
    crate::sys::resources::release_free_memory();
    r
}

/// `ev.doctor`.
pub fn doctor(s: &mut OpenStore, req: &DoctorRequest) -> Result<DoctorResult, Refusal> {
    verbs::doctor(s, req)
}

/// `ev.verify` with `self_test`: the golden vectors, no store.
pub fn self_test() -> VerifyResult {
    verbs::self_test()
}

/// `ev.check`.
pub fn check(s: &mut OpenStore, req: &CheckRequest) -> Result<CheckResult, Refusal> {
    verbs::check(s, req)
}

/// `ev.check_plan`: what `check --run` would run.
pub fn check_plan(s: &mut OpenStore, _req: &StoreRequest) -> Result<CheckPlan, Refusal> {
    verbs::check::plan(s)
}

/// `ev.receipts_append`.
pub fn receipts_append(
    s: &mut OpenStore,
    req: &AppendReceiptsRequest,
) -> Result<AppendReceiptsResult, Refusal> {
    verbs::check::append_receipts(s, req)
}

/// `ev.brief`.
pub fn brief(s: &mut OpenStore, req: &BriefRequest) -> Result<BriefResult, Refusal> {
    verbs::brief(s, req)
}

/// `ev.why`.
pub fn why(s: &mut OpenStore, req: &WhyRequest) -> Result<WhyResult, Refusal> {
    verbs::why(s, req)
}

/// `ev.reopen`.
pub fn reopen(s: &mut OpenStore, req: &IdRequest) -> Result<ReopenResult, Refusal> {
    verbs::reopen(s, &req.id)
}

/// `ev.guards`.
pub fn guards(s: &mut OpenStore, req: &GuardsRequest) -> Result<GuardsResult, Refusal> {
    verbs::guards(s, req)
}

/// `ev.evidence`.
pub fn evidence(s: &mut OpenStore, _req: &StoreRequest) -> Result<EvidenceResult, Refusal> {
    verbs::evidence::evidence(s)
}

/// `ev.ledger.append`.
pub fn ledger_append(
    s: &mut OpenStore,
    req: &LedgerAppendRequest,
) -> Result<LedgerAppendResult, Refusal> {
    verbs::ledger::append(s, req)
}

/// `ev.ledger.publish`.
pub fn ledger_publish(
    s: &mut OpenStore,
    req: &proto::rpc::LedgerPublishRequest,
) -> Result<proto::rpc::LedgerPublishResult, Refusal> {
    verbs::ledger_share::publish(s, req)
}

/// `ev.ledger.hosts`.
pub fn ledger_hosts(
    s: &mut OpenStore,
    req: &proto::rpc::LedgerHostsRequest,
) -> Result<proto::rpc::HostsLedgers, Refusal> {
    verbs::ledger_share::hosts(s, req)
}

/// `ev.ledger.verify`.
pub fn ledger_verify(
    s: &mut OpenStore,
    _req: &StoreRequest,
) -> Result<LedgerVerifyResult, Refusal> {
    verbs::ledger::verify(s)
}

/// `ev.ledger.query`.
pub fn ledger_query(
    s: &mut OpenStore,
    req: &LedgerQueryRequest,
) -> Result<serde_json::Value, Refusal> {
    verbs::ledger::query(s, req)
}

/// `ev.ledger.replay`.
pub fn ledger_replay(
    s: &mut OpenStore,
    _req: &StoreRequest,
) -> Result<LedgerReplayResult, Refusal> {
    verbs::ledger::replay(s)
}

/// `ev.ledger.repair`.
pub fn ledger_repair(
    s: &mut OpenStore,
    _req: &StoreRequest,
) -> Result<proto::rpc::LedgerRepairResult, Refusal> {
    verbs::ledger::repair(s)
}

/// `ev.migrate.bind_check`: whether a binding would be accepted (no store).
pub fn migrate_bind_check(req: &BindCheckRequest) -> Result<BindCheckResult, Refusal> {
    verbs::migrate::bind_check(req)
}

/// `ev.migrate.reconcile`.
pub fn migrate_reconcile(
    s: &mut OpenStore,
    req: &ReconcileRequest,
) -> Result<ReconcileResult, Refusal> {
    verbs::migrate::reconcile(s, req)
}

/// `ev.migrate.backfill`, telling `progress` as it goes.
pub fn migrate_backfill(
    s: &mut OpenStore,
    req: &BackfillRequest,
    progress: &mut dyn FnMut(MigrateProgress),
) -> Result<proto::rpc::BackfillResult, Refusal> {
    verbs::migrate::backfill(s, req, progress)
}
