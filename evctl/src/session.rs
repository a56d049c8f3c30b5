//! Where a verb is answered: by the daemon (connected, started or replaced on first use), or by
//! the same engine in-process when no daemon can be reached (`EVD_NO_DAEMON=1` forces that).

use std::path::PathBuf;
use std::sync::Arc;

use evd::api::{self, shared::paths, OpenStore};
use jsonrpsee::core::client::{Client, Error as ClientError};
use proto::rpc::{codes, Context, Refusal};

use crate::client;
use crate::context;
use crate::grammar::Globals;
use crate::render::{self, Out};

/// Build the closure a [`Session`] call takes: clone `req` into one RPC method call.
#[macro_export]
macro_rules! rpc {
    ($req:expr, $method:ident) => {
        |c: std::sync::Arc<jsonrpsee::core::client::Client>| {
            let req = $req.clone();
            async move { proto::rpc::EvApiClient::$method(&*c, req).await }
        }
    };
}

pub struct Session {
    pub cwd: PathBuf,
    pub explicit_store: Option<String>,
    pub json: bool,
    no_daemon: bool,
    pub rt_dir: PathBuf,
    /// Connect only to a daemon that is already running: never start or replace one.
    pub attach_only: bool,
    conn: Option<client::Conn>,
    unreachable: Option<String>,
}

/// Whether evctl refused the runtime directory or a file in it (someone else may have been at
/// it): no daemon is started there, and looking again cannot help.
fn refused(unreachable: &str) -> bool {
    unreachable.contains("refusing ")
}

/// Whether the daemon is out of reach for this whole run: one that connected and stayed
/// silent (waiting for it again costs the whole handshake timeout), or a runtime directory
/// evctl refuses to use.
fn out_of_reach(unreachable: Option<&str>) -> bool {
    unreachable.is_some_and(|u| client::is_silent_daemon(u) || refused(u))
}

/// A transport failure (as opposed to the daemon's refusal).
fn unavailable(e: &ClientError) -> bool {
    !matches!(e, ClientError::Call(_))
}

pub fn call_error(e: ClientError) -> Refusal {
    match e {
        ClientError::Call(obj) => Refusal::from_error_object(&obj),
        other => Refusal::new(
            codes::IO,
            "daemon_unreachable",
            format!("evd did not answer: {}", transport_said(&other)),
        ),
    }
}

/// A transport failure in evctl's own words (the client library's are about its internals).
pub fn transport_said(e: &ClientError) -> String {
    match e {
        ClientError::RestartNeeded(_) => {
            "the connection to evd was lost (evd stopped, was killed, or was restarted)".into()
        }
        ClientError::RequestTimeout => format!(
            "no answer within {} s (EVCTL_TIMEOUT_MS sets how long evctl waits)",
            client::call_timeout().as_secs()
        ),
        ClientError::Transport(t) => format!("the connection to evd failed ({t})"),
        ClientError::ParseError(p) => format!("its answer could not be read ({p})"),
        ClientError::Call(obj) => obj.message().to_string(),
        other => format!("the connection to evd failed ({other})"),
    }
}

impl Session {
    pub fn new(g: &Globals) -> Session {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Session {
            cwd,
            explicit_store: g.store.clone(),
            json: g.json,
            no_daemon: std::env::var("EVD_NO_DAEMON").is_ok_and(|v| !v.is_empty() && v != "0"),
            rt_dir: paths::runtime_dir(),
            attach_only: false,
            conn: None,
            unreachable: None,
        }
    }

    /// The store root: `--store`, else (when `walk_up`) the nearest store above the working
    /// directory, else the working directory.
    pub fn root(&self, walk_up: bool) -> PathBuf {
        context::store_root(self.explicit_store.as_deref(), &self.cwd, walk_up)
    }

    pub fn context(&self, walk_up: bool, needs: context::Needs) -> Context {
        context::build(&self.root(walk_up), &self.cwd, needs)
    }

    /// Drop the connection and forget why the daemon could not be reached, so that the next
    /// call looks for one afresh (a long-lived client, after its daemon went away).
    pub fn forget_daemon(&mut self) {
        self.conn = None;
        self.unreachable = None;
    }

    /// Answer in-process from now on, without looking for a daemon (nor starting one), until
    /// [`Session::forget_daemon`].
    pub fn give_up_daemon(&mut self, why: String) {
        self.conn = None;
        self.unreachable = Some(why);
    }

    /// Why the daemon could not be reached, once [`Session::daemon`] gave up.
    pub fn unreachable_reason(&self) -> Option<&str> {
        if self.no_daemon {
            return Some("EVD_NO_DAEMON is set");
        }
        self.unreachable.as_deref()
    }

    /// The daemon, connected (and started) on first use; `None` when it cannot be reached.
    pub async fn daemon(&mut self) -> Option<Arc<Client>> {
        if self.no_daemon || self.unreachable.is_some() {
            return None;
        }
        // evd closes connections that sit idle (while tests ran, say); nothing was sent on this
        // one since, so connecting again is safe.
        if self.conn.as_ref().is_some_and(|c| !c.client.is_connected()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let conn = if self.attach_only {
                client::connect_running(&self.rt_dir).await
            } else {
                // The store this client is about to ask about, for a daemon it starts to open
                // first (only where there is one).
                let root = self.root(true);
                let open_first = std::fs::symlink_metadata(root.join(".evolving"))
                    .is_ok_and(|m| m.is_dir())
                    .then_some(root);
                client::connect_or_start(&self.rt_dir, open_first.as_deref()).await
            };
            match conn {
                Ok(c) => self.conn = Some(c),
                Err(e) => {
                    self.give_up(e);
                    return None;
                }
            }
        }
        self.conn.as_ref().map(|c| Arc::clone(&c.client))
    }

    /// The daemon cannot be reached for this run (`why`): answer in-process from now on.
    fn give_up(&mut self, why: String) {
        // A runtime directory (or a file in it) that is not safe to use is worth saying every
        // time: someone else may have been at it.
        if std::env::var_os("EVCTL_DEBUG").is_some() || refused(&why) {
            eprintln!("evctl: evd unreachable ({why}); answering in-process");
        }
        self.unreachable = Some(why);
    }

    /// Call the daemon. `None`: no daemon could be reached. A daemon that answers "stopping"
    /// did not run the request, so it is retried once against the next daemon.
    async fn rpc<R, Fut>(
        &mut self,
        call: &impl Fn(Arc<Client>) -> Fut,
    ) -> Option<Result<R, ClientError>>
    where
        Fut: std::future::Future<Output = Result<R, ClientError>>,
    {
        for attempt in 0..2 {
            let c = self.daemon().await?;
            let r = self.waiting(&c, call(Arc::clone(&c))).await;
            let stopping = matches!(&r, Err(ClientError::Call(e)) if e.code() == codes::STOPPING);
            if stopping && attempt == 0 {
                self.conn = None;
                client::wait_daemon_gone(&self.rt_dir).await;
                continue;
            }
            return Some(r);
        }
        None
    }

    /// Wait for `answer`; on a terminal, when it is slow to come because the store's thread is
    /// at something long (a cold start journaling every receipt into a new ledger, a large
    /// migration), say so on stderr every few seconds, from what `status` says of the store.
    async fn waiting<R>(
        &self,
        c: &Arc<Client>,
        answer: impl std::future::Future<Output = Result<R, ClientError>>,
    ) -> Result<R, ClientError> {
        use std::io::IsTerminal;
        const FIRST: std::time::Duration = std::time::Duration::from_millis(1500);
        const EVERY: std::time::Duration = std::time::Duration::from_secs(5);
        if !std::io::stderr().is_terminal() {
            return answer.await;
        }
        tokio::pin!(answer);
        let mut next = FIRST;
        loop {
            tokio::select! {
                r = &mut answer => return r,
                () = tokio::time::sleep(next) => {
                    next = EVERY;
                    if let Some(line) = self.busy_line(c).await {
                        eprintln!("{line}");
                    }
                }
            }
        }
    }

    /// What `status` says the store this session asks about is busy with, as one line.
    async fn busy_line(&self, c: &Client) -> Option<String> {
        let status = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            proto::rpc::EvApiClient::status(c),
        )
        .await
        .ok()?
        .ok()?;
        let root = std::fs::canonicalize(self.root(true)).ok()?;
        let store = status
            .stores
            .iter()
            .find(|s| std::path::Path::new(&s.root) == root)?;
        let busy = store.busy.as_ref()?;
        Some(format!(
            "evctl: waiting for evd: the store's thread has been at {} for {:.0} s{}",
            busy.what,
            busy.running_ms as f64 / 1000.0,
            if busy.stuck {
                " (past its deadline: it is stuck)"
            } else {
                ""
            }
        ))
    }

    /// A read: the daemon's answer, or the same engine in-process when it cannot be reached.
    pub async fn read<R, Fut>(
        &mut self,
        call: impl Fn(Arc<Client>) -> Fut,
        local: impl FnOnce() -> Result<R, Refusal>,
    ) -> Result<R, Refusal>
    where
        Fut: std::future::Future<Output = Result<R, ClientError>>,
    {
        let answer = match self.first_read(&call).await {
            Some(r) => Some(r),
            None => self.rpc(&call).await,
        };
        match answer {
            Some(Err(e)) if unavailable(&e) => local(),
            Some(r) => r.map_err(call_error),
            None => local(),
        }
    }

    /// A read that opens this session's connection: sent with the hello rather than after it
    /// ([`client::connect_and_call`]). `None`: take the usual way ([`Session::rpc`]).
    async fn first_read<R, Fut>(
        &mut self,
        call: &impl Fn(Arc<Client>) -> Fut,
    ) -> Option<Result<R, ClientError>>
    where
        Fut: std::future::Future<Output = Result<R, ClientError>>,
    {
        if self.conn.is_some() || self.no_daemon || self.unreachable.is_some() || self.attach_only {
            return None;
        }
        let (conn, r) =
            match client::connect_and_call(&self.rt_dir, |c| self.waiting_owned(c, call)).await {
                Ok(answered) => answered?,
                Err(e) => {
                    self.give_up(e);
                    return None;
                }
            };
        if matches!(&r, Err(ClientError::Call(e)) if e.code() == codes::STOPPING) {
            // It did not run the request: the usual way waits for it to go and asks the next.
            client::wait_daemon_gone(&self.rt_dir).await;
            return None;
        }
        self.conn = Some(conn);
        Some(r)
    }

    /// [`Session::waiting`] for a call made on `c`.
    async fn waiting_owned<R, Fut>(
        &self,
        c: Arc<Client>,
        call: &impl Fn(Arc<Client>) -> Fut,
    ) -> Result<R, ClientError>
    where
        Fut: std::future::Future<Output = Result<R, ClientError>>,
    {
        self.waiting(&c, call(Arc::clone(&c))).await
    }

    /// A write: the daemon's answer; in-process (under the store lock) only when no daemon
    /// could be reached at all. A write whose answer was lost (the connection cut, the daemon
    /// killed, no answer in time) is asked again with the same request id, on a fresh
    /// connection (a new daemon, if need be): the daemon applies a request id at most once, so
    /// the retry gets the first answer rather than a second write.
    pub async fn write<R, Fut>(
        &mut self,
        call: impl Fn(Arc<Client>) -> Fut,
        mut local: impl FnMut() -> Result<R, Refusal>,
    ) -> Result<R, Refusal>
    where
        Fut: std::future::Future<Output = Result<R, ClientError>>,
    {
        const RETRIES: usize = 2;
        // How long a write keeps looking for the daemon that holds its store (one being
        // started, or the successor of one just killed) before it gives up.
        const FIND_HOLDER: std::time::Duration = std::time::Duration::from_secs(15);
        let started = std::time::Instant::now();
        let mut attempt = 0;
        let mut reconnects = 0;
        loop {
            match self.rpc(&call).await {
                // A daemon that could not be reached may be one starting up, or one just
                // killed whose successor is starting: look again before writing in-process.
                None if attempt == 0
                    && !self.no_daemon
                    && reconnects < 2
                    && !out_of_reach(self.unreachable.as_deref()) =>
                {
                    reconnects += 1;
                    self.unreachable = None;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                None if attempt == 0 => match local() {
                    // The store is held by a daemon this client could not reach: one starting,
                    // or one killed a moment ago whose lock is about to go. Nothing was written;
                    // look for it again (unless it is out of reach for good).
                    Err(e)
                        if e.code == codes::LOCKED
                            && !self.no_daemon
                            && started.elapsed() < FIND_HOLDER
                            && !out_of_reach(self.unreachable.as_deref()) =>
                    {
                        self.unreachable = None;
                        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
                    }
                    r => return r,
                },
                None => {
                    return Err(Refusal::new(
                        codes::IO,
                        "daemon_unreachable",
                        format!(
                            "evd did not answer this write, and no daemon could be reached to ask \
                             again ({}) — it may have been recorded: look with `evctl log` before \
                             running it again",
                            self.unreachable.as_deref().unwrap_or("no daemon")
                        ),
                    ))
                }
                Some(Err(e)) if unavailable(&e) && attempt < RETRIES => {
                    attempt += 1;
                    eprintln!(
                        "evctl: evd did not answer this write ({}); asking again with the same \
                         request id, so it is applied at most once",
                        transport_said(&e)
                    );
                    self.conn = None;
                }
                Some(Err(e)) if unavailable(&e) => {
                    return Err(Refusal::new(
                        codes::IO,
                        "daemon_unreachable",
                        format!(
                            "evd did not answer this write after {} tries ({}) — it may have been \
                             recorded: look with `evctl log` (or `evctl status`) before running it \
                             again",
                            RETRIES + 1,
                            transport_said(&e)
                        ),
                    ))
                }
                Some(r) => return r.map_err(call_error),
            }
        }
    }

    /// Render an answer, or its refusal.
    pub fn finish<T>(&self, r: Result<T, Refusal>, render: impl FnOnce(&T) -> Out) -> Out {
        match r {
            Ok(v) => render(&v),
            Err(e) => render::refusal(&e, self.json),
        }
    }
}

/// A read in this process, through the same engine door the daemon answers through.
pub fn local_read<R>(
    ctx: &Context,
    op: impl FnOnce(&mut OpenStore) -> Result<R, Refusal>,
) -> Result<R, Refusal> {
    api::read(ctx, op)
}

/// A write without the daemon: the store lock is taken for the duration, like the daemon would.
pub fn local_write<R>(
    ctx: &Context,
    op: impl FnOnce(&mut OpenStore) -> Result<R, Refusal>,
) -> Result<R, Refusal> {
    api::write(ctx, "evctl", op).map_err(|mut r| {
        if r.code == codes::LOCKED {
            let forced = std::env::var("EVD_NO_DAEMON").is_ok_and(|v| !v.is_empty() && v != "0");
            r.message.push_str(if forced {
                " — write through it (unset EVD_NO_DAEMON), or stop it with `evctl shutdown`"
            } else {
                " — and that daemon did not answer evctl (stopped, overloaded or starting?): \
                 nothing was written; retry, or look at it with `evctl status`"
            });
        }
        r
    })
}
