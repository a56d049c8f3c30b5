//! The RPC server: the `ev.*` methods over jsonrpsee, served on each accepted Unix connection
//! after a peer-uid check, with a clean stop on SIGTERM/SIGINT or `ev.shutdown`.

use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonrpsee::core::{async_trait, RpcResult, SubscriptionResult};
use jsonrpsee::server::{serve_with_graceful_shutdown, stop_channel, ServerConfig};
use jsonrpsee::PendingSubscriptionSink;
use proto::rpc::{
    codes, AppendReceiptsRequest, AppendReceiptsResult, BackfillRequest, BindCheckRequest,
    BindCheckResult, CheckPlan, CheckRequest, CheckResult, DaemonStatus, DecideRequest,
    DecideResult, DoctorRequest, DoctorResult, EvApiServer, GuardRequest, GuardResult, Hello,
    HelloRequest, IdRequest, InitResult, ListRequest, ListResult, LogResult, MigrateEvent,
    MigrateProgress, PendingRequest, PendingResult, ProposeRequest, ProposeResult, RatifyRequest,
    RatifyResult, ReconcileRequest, ReconcileResult, Refusal, ReverifyRequest, ReverifyResult,
    ShowResult, ShutdownAck, StoreRequest, SupersedeRequest, SupersedeResult, VerifyRequest,
    VerifyResult, WatchEvent, PROTOCOL_VERSION,
};
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use super::exactly_once::{exactly_once, write_key, RECORD_ALWAYS};
use crate::api;
use crate::daemon::registry::{Limits, Registry, Target};
use crate::open::OpenStore;

/// The daemon's shared state.
pub struct Daemon {
    pub build_id: String,
    pub started_at: String,
    pub started: Instant,
    pub socket: PathBuf,
    pub registry: Registry,
    pub stop: CancellationToken,
    /// Set as soon as a stop is decided: from then on requests are refused with STOPPING (and
    /// not run), so a client can safely retry them against the next daemon.
    pub stopping: AtomicBool,
    /// Client connections being served.
    pub connections: Arc<crate::daemon::connections::Connections>,
}

impl Daemon {
    pub fn new(build_id: String, socket: PathBuf) -> Daemon {
        Daemon::with_limits(build_id, socket, Limits::default())
    }

    pub fn with_limits(build_id: String, socket: PathBuf, mut limits: Limits) -> Daemon {
        if limits.images.is_none() {
            limits.images = Some(build_id.as_str().into());
        }
        Daemon {
            build_id,
            started_at: crate::engine::clock::now_rfc3339(),
            started: Instant::now(),
            socket,
            registry: Registry::new(limits),
            stop: CancellationToken::new(),
            stopping: AtomicBool::new(false),
            connections: Arc::default(),
        }
    }

    /// Start opening the store under `root` (lock, images, first scan) on its actor, as a
    /// request for it would: what `evctl` does when it starts a daemon for a request about that
    /// store (`EVD_OPEN_FIRST`), so the daemon's start and the client's connecting overlap the
    /// store's opening. Nothing is created; a directory without a store is left alone.
    pub fn open_first(self: &Arc<Self>, root: PathBuf) {
        let ctx = proto::rpc::Context {
            store: root.display().to_string(),
            ..Default::default()
        };
        let Ok(crate::daemon::registry::Target::Open(lease)) = self.registry.open(&ctx, false)
        else {
            return;
        };
        tokio::spawn(async move {
            let opened = run_owned(&lease, "opening the store", |_| Ok(())).await;
            if let Err(e) = opened {
                tracing::debug!(store = %root.display(), error = %e.message, "store not opened first");
            }
        });
    }

    /// Refuse new work from now on, and close the listener after `grace` (time for requests
    /// already running to answer).
    pub fn begin_stop(self: &Arc<Self>, grace: Duration) {
        self.stopping.store(true, Ordering::SeqCst);
        let stop = self.stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            stop.cancel();
        });
    }

    fn admit(&self) -> Result<(), Refusal> {
        if self.stopping.load(Ordering::SeqCst) {
            return Err(Refusal::new(
                codes::STOPPING,
                "stopping",
                "evd is stopping; the request was not run (retry against the next daemon)",
            ));
        }
        Ok(())
    }
}

#[derive(Clone)]
pub struct Rpc(pub Arc<Daemon>);

/// Take ownership of the store (if it exists yet), then run `op` on its actor.
async fn on_store<R, F>(
    d: &Daemon,
    what: &'static str,
    ctx: &proto::rpc::Context,
    op: F,
) -> RpcResult<R>
where
    F: FnOnce(&mut OpenStore) -> Result<R, Refusal> + Send + 'static,
    R: Send + 'static,
{
    d.admit()?;
    Ok(run_on(d, what, ctx, false, op).await?)
}

/// [`on_store`] for a write: applied at most once per request id (see [`exactly_once`]).
async fn on_store_write<R, F>(
    d: &Daemon,
    what: &'static str,
    ctx: &proto::rpc::Context,
    key: Option<String>,
    op: F,
) -> RpcResult<R>
where
    F: FnOnce(&mut OpenStore) -> Result<R, Refusal> + Send + 'static,
    R: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
{
    let once = ctx.clone();
    let arrived = Instant::now();
    on_store(d, what, ctx, move |store| {
        exactly_once(store, &once, key, arrived, op)
    })
    .await
}

/// Run `op` on the store `ctx` names: on its actor, after taking ownership of it (if it exists
/// yet). A directory without a store opens nothing (unless `create`): `op` then runs once on a
/// throwaway handle, where it refuses as it would on the actor.
async fn run_on<R, F>(
    d: &Daemon,
    what: &'static str,
    ctx: &proto::rpc::Context,
    create: bool,
    op: F,
) -> Result<R, Refusal>
where
    F: FnOnce(&mut OpenStore) -> Result<R, Refusal> + Send + 'static,
    R: Send + 'static,
{
    let op = match d.registry.open(ctx, create)? {
        Target::Absent(root) => {
            let ran = tokio::task::spawn_blocking(move || {
                let mut store = OpenStore::new(root);
                match store.exists() {
                    // It appeared meanwhile: it gets its actor after all.
                    Ok(true) => Err(op),
                    _ => Ok(op(&mut store)),
                }
            })
            .await
            .map_err(|_| {
                Refusal::new(
                    codes::INTERNAL,
                    "internal",
                    "internal error while serving this request (evd logged it)",
                )
            })?;
            match ran {
                Ok(out) => return out,
                Err(op) => op,
            }
        }
        Target::Open(lease) => return run_owned(&lease, what, op).await,
    };
    match d.registry.open(ctx, true)? {
        Target::Open(lease) => run_owned(&lease, what, op).await,
        Target::Absent(_) => Err(Refusal::no_store()),
    }
}

async fn run_owned<R, F>(
    lease: &crate::daemon::registry::Lease,
    what: &'static str,
    op: F,
) -> Result<R, Refusal>
where
    F: FnOnce(&mut OpenStore) -> Result<R, Refusal> + Send + 'static,
    R: Send + 'static,
{
    lease
        .run(what, move |store| {
            if store.exists()? {
                store.acquire("evd")?;
            }
            op(store)
        })
        .await
}

#[async_trait]
impl EvApiServer for Rpc {
    async fn hello(&self, req: HelloRequest) -> RpcResult<Hello> {
        Ok(Hello {
            protocol: PROTOCOL_VERSION,
            build_id: self.0.build_id.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            started_at: self.0.started_at.clone(),
            // A stopping daemon is never the one to keep talking to.
            compatible: req.protocol == PROTOCOL_VERSION
                && req.build_id == self.0.build_id
                && !self.0.stopping.load(Ordering::SeqCst),
        })
    }

    async fn status(&self) -> RpcResult<DaemonStatus> {
        let d = &self.0;
        Ok(DaemonStatus {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            build_id: d.build_id.clone(),
            protocol: PROTOCOL_VERSION,
            started_at: d.started_at.clone(),
            uptime_ms: u64::try_from(d.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            socket: d.socket.display().to_string(),
            stores: d.registry.statuses(),
            resources: crate::sys::resources::snapshot(
                d.registry.open_count(),
                d.connections.count(),
            ),
            host: match crate::sys::users::host_id() {
                Ok((id, from)) => proto::rpc::HostIdentity {
                    id: Some(id),
                    from: from.into(),
                    error: None,
                },
                Err(e) => proto::rpc::HostIdentity {
                    id: None,
                    from: "EV_HOST_ID".into(),
                    error: Some(e),
                },
            },
        })
    }

    async fn shutdown(&self) -> RpcResult<ShutdownAck> {
        tracing::info!("shutdown requested over RPC");
        // Let this answer (and any request already running) reach its client first.
        self.0.begin_stop(Duration::from_millis(50));
        Ok(ShutdownAck {
            pid: std::process::id(),
        })
    }

    async fn init(&self, req: StoreRequest) -> RpcResult<InitResult> {
        self.0.admit()?;
        let lease = match self.0.registry.open(&req.context, true)? {
            Target::Open(lease) => lease,
            Target::Absent(_) => return Err(Refusal::no_store().into()),
        };
        let out = lease
            .run("ev.init", |store| {
                let r = api::init(store)?;
                store.acquire("evd")?;
                Ok(r)
            })
            .await;
        Ok(out?)
    }

    async fn decide(&self, req: DecideRequest) -> RpcResult<DecideResult> {
        let ctx = req.context.clone();
        let key = write_key("decide", &req);
        on_store_write(&self.0, "ev.decide", &ctx, key, move |s| {
            api::decide(s, &req)
        })
        .await
    }

    async fn show(&self, req: IdRequest) -> RpcResult<ShowResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.show", &ctx, move |s| api::show(s, &req)).await
    }

    async fn list(&self, req: ListRequest) -> RpcResult<ListResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.list", &ctx, move |s| api::list(s, &req)).await
    }

    async fn log(&self, req: StoreRequest) -> RpcResult<LogResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.log", &ctx, move |s| api::log(s, &req)).await
    }

    async fn watch(
        &self,
        pending: PendingSubscriptionSink,
        req: StoreRequest,
    ) -> SubscriptionResult {
        if let Err(e) = self.0.admit() {
            pending.reject(e).await;
            return Ok(());
        }
        let actor = match self.0.registry.open(&req.context, false) {
            Ok(Target::Open(lease)) => lease,
            Ok(Target::Absent(_)) => {
                pending.reject(Refusal::no_store()).await;
                return Ok(());
            }
            Err(e) => {
                pending.reject(e).await;
                return Ok(());
            }
        };
        // Subscribe before the baseline is set, so no change after it can be missed.
        let mut rx = actor.subscribe();
        let ready = actor
            .run("ev.watch", |store| {
                store.require()?;
                store.acquire("evd")?;
                if !store.has_verdict_baseline() {
                    crate::verbs::check::refresh_verdicts(store)?;
                }
                Ok(())
            })
            .await;
        if let Err(e) = ready {
            pending.reject(e).await;
            return Ok(());
        }
        let sink = pending.accept().await?;
        loop {
            tokio::select! {
                () = sink.closed() => break,
                () = self.0.stop.cancelled() => break,
                got = rx.recv() => {
                    let item = match got {
                        Ok(ev) => ev,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => WatchEvent::Resync {
                            reason: format!("{n} change(s) were dropped for this slow subscriber"),
                        },
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                    };
                    match serde_json::value::to_raw_value(&item) {
                        Ok(raw) => {
                            if sink.send(raw).await.is_err() {
                                break;
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "cannot encode a watch item"),
                    }
                }
            }
        }
        Ok(())
    }

    async fn migrate_backfill(
        &self,
        pending: PendingSubscriptionSink,
        req: BackfillRequest,
    ) -> SubscriptionResult {
        // Refusals before any work reject the call itself (so "stopping" is retried like any
        // other request); everything after is an item of the stream.
        if let Err(e) = self.0.admit() {
            pending.reject(e).await;
            return Ok(());
        }
        let sink = pending.accept().await?;
        let (tx, mut rx) = tokio::sync::watch::channel(None::<MigrateProgress>);
        let ctx = req.context.clone();
        let once = req.context.clone();
        let key = write_key("migrate_backfill", &req);
        let arrived = Instant::now();
        let run = run_on(&self.0, "ev.migrate.backfill", &ctx, false, move |store| {
            exactly_once(store, &once, key, arrived, |store| {
                api::migrate_backfill(store, &req, &mut |p| {
                    let _ = tx.send(Some(p));
                })
            })
        });
        tokio::pin!(run);
        let mut sent: Option<MigrateProgress> = None;
        let outcome = loop {
            tokio::select! {
                biased;
                out = &mut run => break out,
                changed = rx.changed() => {
                    if changed.is_err() {
                        break (&mut run).await;
                    }
                    let p = rx.borrow_and_update().clone();
                    if let Some(p) = p {
                        send_item(&sink, &MigrateEvent::Progress(p.clone())).await;
                        sent = Some(p);
                    }
                }
            }
        };
        // The last word on progress always reaches the client before the answer, however fast
        // the run was.
        let last = rx.borrow().clone();
        if let Some(p) = last.filter(|p| sent.as_ref() != Some(p)) {
            send_item(&sink, &MigrateEvent::Progress(p)).await;
        }
        let item = match outcome {
            Ok(r) => MigrateEvent::Done(r),
            Err(e) => MigrateEvent::Refused(e.into()),
        };
        send_item(&sink, &item).await;
        Ok(())
    }

    async fn migrate_reconcile(&self, req: ReconcileRequest) -> RpcResult<ReconcileResult> {
        let ctx = req.context.clone();
        let key = write_key("reconcile", &req);
        on_store_write(&self.0, "ev.migrate.reconcile", &ctx, key, move |s| {
            api::migrate_reconcile(s, &req)
        })
        .await
    }

    async fn migrate_bind_check(&self, req: BindCheckRequest) -> RpcResult<BindCheckResult> {
        self.0.admit()?;
        Ok(api::migrate_bind_check(&req)?)
    }

    async fn verify(&self, req: VerifyRequest) -> RpcResult<VerifyResult> {
        if req.self_test {
            return Ok(api::self_test());
        }
        let ctx = req.context.clone();
        on_store(&self.0, "ev.verify", &ctx, move |s| api::verify(s, &req)).await
    }

    async fn doctor(&self, req: DoctorRequest) -> RpcResult<DoctorResult> {
        let ctx = req.context.clone();
        if !req.fix {
            return on_store(&self.0, "ev.doctor", &ctx, move |s| api::doctor(s, &req)).await;
        }
        let key = write_key("doctor", &req);
        on_store_write(&self.0, "ev.doctor", &ctx, key, move |s| {
            api::doctor(s, &req)
        })
        .await
    }

    async fn propose(&self, req: ProposeRequest) -> RpcResult<ProposeResult> {
        let ctx = req.context.clone();
        let key = write_key("propose", &req);
        on_store_write(&self.0, "ev.propose", &ctx, key, move |s| {
            api::propose(s, &req)
        })
        .await
    }

    async fn ratify(&self, req: RatifyRequest) -> RpcResult<RatifyResult> {
        let ctx = req.context.clone();
        let key = write_key("ratify", &req);
        on_store_write(&self.0, "ev.ratify", &ctx, key, move |s| {
            api::ratify(s, &req)
        })
        .await
    }

    async fn pending(&self, req: PendingRequest) -> RpcResult<PendingResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.pending", &ctx, move |s| api::pending(s, &req)).await
    }

    async fn guard(&self, req: GuardRequest) -> RpcResult<GuardResult> {
        let ctx = req.context.clone();
        let key = write_key("guard", &req);
        on_store_write(&self.0, "ev.guard", &ctx, key, move |s| api::guard(s, &req)).await
    }

    async fn supersede(&self, req: SupersedeRequest) -> RpcResult<SupersedeResult> {
        let ctx = req.context.clone();
        let key = write_key("supersede", &req);
        on_store_write(&self.0, "ev.supersede", &ctx, key, move |s| {
            api::supersede(s, &req)
        })
        .await
    }

    async fn reverify(&self, req: ReverifyRequest) -> RpcResult<ReverifyResult> {
        let ctx = req.context.clone();
        let key = write_key("reverify", &req);
        on_store_write(&self.0, "ev.reverify", &ctx, key, move |s| {
            api::reverify(s, &req)
        })
        .await
    }

    async fn check(&self, req: CheckRequest) -> RpcResult<CheckResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.check", &ctx, move |s| api::check(s, &req)).await
    }

    async fn check_plan(&self, req: StoreRequest) -> RpcResult<CheckPlan> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.check.plan", &ctx, move |s| {
            api::check_plan(s, &req)
        })
        .await
    }

    async fn receipts_publish(
        &self,
        req: proto::rpc::PublishReceiptsRequest,
    ) -> RpcResult<proto::rpc::PublishReceiptsResult> {
        let ctx = req.context.clone();
        on_store_write(&self.0, "ev.receipts.publish", &ctx, None, move |s| {
            api::receipts_publish(s, &req)
        })
        .await
    }

    async fn receipts_status(&self, req: StoreRequest) -> RpcResult<proto::rpc::ReceiptsStatus> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.receipts.status", &ctx, move |s| {
            api::receipts_status(s)
        })
        .await
    }

    async fn receipts_trust(
        &self,
        req: proto::rpc::TrustRequest,
    ) -> RpcResult<proto::rpc::TrustResult> {
        let ctx = req.context.clone();
        let key = write_key("receipts_trust", &req);
        on_store_write(&self.0, "ev.receipts.trust", &ctx, key, move |s| {
            api::receipts_trust(s, &req)
        })
        .await
    }

    async fn receipts_append(&self, req: AppendReceiptsRequest) -> RpcResult<AppendReceiptsResult> {
        let ctx = req.context.clone();
        let key = write_key("receipts_append", &req).map(|k| format!("{RECORD_ALWAYS}{k}"));
        on_store_write(&self.0, "ev.receipts.append", &ctx, key, move |s| {
            api::receipts_append(s, &req)
        })
        .await
    }

    async fn ledger_append(
        &self,
        req: proto::rpc::LedgerAppendRequest,
    ) -> RpcResult<proto::rpc::LedgerAppendResult> {
        let ctx = req.context.clone();
        // Its answer is kept whatever it wrote (it appends no tick).
        let key = write_key("ledger_append", &req).map(|k| format!("{RECORD_ALWAYS}{k}"));
        on_store_write(&self.0, "ev.ledger.append", &ctx, key, move |s| {
            api::ledger_append(s, &req)
        })
        .await
    }

    async fn ledger_repair(&self, req: StoreRequest) -> RpcResult<proto::rpc::LedgerRepairResult> {
        let ctx = req.context.clone();
        let key = write_key("ledger_repair", &req).map(|k| format!("{RECORD_ALWAYS}{k}"));
        on_store_write(&self.0, "ev.ledger.repair", &ctx, key, move |s| {
            api::ledger_repair(s, &req)
        })
        .await
    }

    async fn evidence(&self, req: StoreRequest) -> RpcResult<proto::rpc::EvidenceResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.evidence", &ctx, move |s| {
            api::evidence(s, &req)
        })
        .await
    }

    async fn ledger_query(
        &self,
        req: proto::rpc::LedgerQueryRequest,
    ) -> RpcResult<serde_json::Value> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.ledger.query", &ctx, move |s| {
            api::ledger_query(s, &req)
        })
        .await
    }

    async fn ledger_publish(
        &self,
        req: proto::rpc::LedgerPublishRequest,
    ) -> RpcResult<proto::rpc::LedgerPublishResult> {
        let ctx = req.context.clone();
        on_store_write(&self.0, "ev.ledger.publish", &ctx, None, move |s| {
            api::ledger_publish(s, &req)
        })
        .await
    }

    async fn ledger_hosts(
        &self,
        req: proto::rpc::LedgerHostsRequest,
    ) -> RpcResult<proto::rpc::HostsLedgers> {
        let ctx = req.context.clone();
        on_store_write(&self.0, "ev.ledger.hosts", &ctx, None, move |s| {
            api::ledger_hosts(s, &req)
        })
        .await
    }

    async fn ledger_verify(&self, req: StoreRequest) -> RpcResult<proto::rpc::LedgerVerifyResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.ledger.verify", &ctx, move |s| {
            api::ledger_verify(s, &req)
        })
        .await
    }

    async fn ledger_replay(&self, req: StoreRequest) -> RpcResult<proto::rpc::LedgerReplayResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.ledger.replay", &ctx, move |s| {
            api::ledger_replay(s, &req)
        })
        .await
    }

    async fn brief(&self, req: proto::rpc::BriefRequest) -> RpcResult<proto::rpc::BriefResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.brief", &ctx, move |s| api::brief(s, &req)).await
    }

    async fn why(&self, req: proto::rpc::WhyRequest) -> RpcResult<proto::rpc::WhyResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.why", &ctx, move |s| api::why(s, &req)).await
    }

    async fn reopen(&self, req: IdRequest) -> RpcResult<proto::rpc::ReopenResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.reopen", &ctx, move |s| api::reopen(s, &req)).await
    }

    async fn guards(&self, req: proto::rpc::GuardsRequest) -> RpcResult<proto::rpc::GuardsResult> {
        let ctx = req.context.clone();
        on_store(&self.0, "ev.guards", &ctx, move |s| api::guards(s, &req)).await
    }
}

/// Send one item of a subscription; a client that went away is not an error (the work it asked
/// for still completes, and the store is consistent either way).
async fn send_item(sink: &jsonrpsee::SubscriptionSink, item: &MigrateEvent) {
    match serde_json::value::to_raw_value(item) {
        Ok(raw) => {
            let _ = sink.send(raw).await;
        }
        Err(e) => tracing::warn!(error = %e, "cannot encode a migrate item"),
    }
}

/// Limits every connection is served under.
fn server_config() -> ServerConfig {
    ServerConfig::builder()
        .max_request_body_size(proto::rpc::MAX_REQUEST_BYTES)
        .max_response_body_size(64 * 1024 * 1024)
        // evd's own connection tracking (crate::daemon::connections) decides who is served; this is
        // only a backstop above it.
        .max_connections(crate::daemon::connections::HARD_CAP as u32 + 64)
        .max_subscriptions_per_connection(32)
        .set_message_buffer_capacity(256)
        .build()
}

/// Pauses after failed accepts (out of descriptors, say), growing while they keep failing, and
/// a log that says so at most every ten seconds instead of a line per failure.
#[derive(Default)]
struct AcceptBackoff {
    pause: Option<Duration>,
    failures: u64,
    refused: u64,
    logged: Option<Instant>,
}

impl AcceptBackoff {
    fn reset(&mut self) {
        self.pause = None;
    }

    fn failed(&mut self, e: &std::io::Error) -> Duration {
        self.failures += 1;
        if self
            .logged
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            tracing::warn!(error = %e, failures = self.failures, "accepting connections fails; backing off");
            self.logged = Some(Instant::now());
            self.failures = 0;
        }
        let next = self.pause.map_or(Duration::from_millis(10), |p| {
            (p * 2).min(Duration::from_secs(1))
        });
        self.pause = Some(next);
        next
    }

    fn refused(&mut self) {
        self.refused += 1;
        if self
            .logged
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            tracing::warn!(
                refused = self.refused,
                cap = crate::daemon::connections::HARD_CAP,
                "too many connections, none idle: refusing new ones"
            );
            self.logged = Some(Instant::now());
            self.refused = 0;
        }
    }
}

/// The JSON-RPC methods evd serves, bound to `daemon`: exactly what every connection gets.
pub fn rpc_module(daemon: Arc<Daemon>) -> jsonrpsee::RpcModule<Rpc> {
    Rpc(daemon).into_rpc()
}

/// The name of every method a client can call (subscribe and unsubscribe calls included),
/// sorted: read from the module [`serve`] serves, so it never drifts from it.
pub fn method_names() -> Vec<&'static str> {
    let daemon = Arc::new(Daemon::new(String::new(), PathBuf::new()));
    let mut names: Vec<&'static str> = rpc_module(daemon).method_names().collect();
    names.sort_unstable();
    names
}

/// Serve until `daemon.stop` is cancelled. Connections from another uid are dropped unserved.
pub async fn serve(listener: StdUnixListener, daemon: Arc<Daemon>) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = UnixListener::from_std(listener)?;
    let methods = rpc_module(Arc::clone(&daemon));
    let (stop_handle, server_handle) = stop_channel();
    let svc_builder = jsonrpsee::server::Server::builder()
        .set_config(server_config())
        .set_http_middleware(
            tower::ServiceBuilder::new().layer(crate::daemon::http_guard::ValidIdsLayer),
        )
        .to_service_builder();
    let me = crate::sys::users::euid();
    {
        let d = Arc::clone(&daemon);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(d.registry.sweep_every());
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = d.stop.cancelled() => break,
                    _ = every.tick() => {
                        let r = Arc::clone(&d);
                        let _ = tokio::task::spawn_blocking(move || r.registry.sweep()).await;
                    }
                }
            }
        });
    }
    {
        let d = Arc::clone(&daemon);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(500));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The runtime directory is re-checked every few seconds: a mode someone loosened
            // is taken back, and what cannot be fixed is logged once per change.
            let rt = d.socket.parent().map(std::path::Path::to_path_buf);
            let mut rounds = 0u32;
            let mut said: Option<String> = None;
            loop {
                tokio::select! {
                    () = d.stop.cancelled() => break,
                    _ = every.tick() => {
                        d.connections.sweep();
                        let r = Arc::clone(&d);
                        let _ = tokio::task::spawn_blocking(move || r.registry.reap()).await;
                        rounds = rounds.wrapping_add(1);
                        if let (Some(rt), 0) = (&rt, rounds % 10) {
                            let now = crate::sys::paths::recheck_private_dir(rt, |problem| {
                                if said.as_deref() != Some(problem) {
                                    tracing::warn!(problem, "runtime directory");
                                }
                            });
                            said = now;
                        }
                    }
                }
            }
        });
    }
    let mut accept_errors = AcceptBackoff::default();
    loop {
        tokio::select! {
            () = daemon.stop.cancelled() => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((s, _)) => {
                        accept_errors.reset();
                        s
                    }
                    Err(e) => {
                        let pause = accept_errors.failed(&e);
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                };
                match crate::sys::peer::of(std::os::fd::AsFd::as_fd(&stream)) {
                    Ok(c) if c.uid == me => {}
                    Ok(c) => {
                        tracing::warn!(uid = c.uid, pid = ?c.pid, "rejected a connection from another user");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "rejected a connection whose peer is unknown");
                        continue;
                    }
                }
                let Some(admitted) = daemon.connections.admit() else {
                    accept_errors.refused();
                    continue;
                };
                let state = Arc::clone(&admitted.state);
                let svc = svc_builder
                    .clone()
                    .set_rpc_middleware(jsonrpsee::server::middleware::rpc::RpcServiceBuilder::new().layer_fn(
                        move |inner| crate::daemon::connections::CallTracking {
                            inner,
                            state: Arc::clone(&state),
                        },
                    ))
                    .build(methods.clone(), stop_handle.clone());
                let stopped = stop_handle.clone().shutdown();
                tokio::spawn(async move {
                    let io = crate::daemon::connections::Tracked::new(stream, admitted);
                    if let Err(e) = serve_with_graceful_shutdown(io, svc, stopped).await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
        }
    }
    let _ = server_handle.stop();
    // `stopped()` resolves once every StopHandle is gone; ours must go too, or it never does.
    drop(stop_handle);
    // Give in-flight answers a moment, never forever: the whole stop stays under 2 s.
    let _ = tokio::time::timeout(Duration::from_millis(800), server_handle.stopped()).await;
    // Stores stuck on a request are not waited for: the process's exit releases their locks.
    let stuck = daemon.registry.close_all(Duration::from_millis(700));
    if !stuck.is_empty() {
        tracing::warn!(stores = stuck.len(), "stopped with stores still busy");
    }
    Ok(())
}
