//! Reaching evd: connect over the private socket (WebSocket framing over the Unix stream), shake
//! hands, start a daemon when none answers (once, under a lock, however many clients race), and
//! replace a daemon of another build through the handshake — never by killing a bare pid.
//! [`batch`] is the one blocking exchange without WebSocket (the pre-commit gate's).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use evd::api::shared::{lock, paths};
use jsonrpsee::client_transport::ws::{Url, WsTransportClientBuilder};
use jsonrpsee::core::client::{Client, ClientBuilder};
use proto::rpc::{EvApiClient, Hello, HelloRequest, PROTOCOL_VERSION};
use tokio::net::UnixStream;

pub mod batch;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one call may take before evctl gives up on the daemon (`EVCTL_TIMEOUT_MS`).
pub fn call_timeout() -> Duration {
    std::env::var("EVCTL_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(60))
}

/// The evd binary evctl would start: `$EVD_BIN`, else `evd` beside this executable, else on PATH.
pub fn evd_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("EVD_BIN").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        let sibling = dir.join("evd");
        if sibling.is_file() {
            return Some(sibling);
        }
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("evd"))
            .find(|p| p.is_file())
    })
}

/// The build identity this evctl wants of its daemon: that of the evd it would start (`None`
/// when there is none to start, and then any build of our protocol will do).
pub fn wanted_build(rt: &Path) -> Option<String> {
    evd_binary()
        .as_deref()
        .and_then(|b| paths::build_identity(b, Some(rt)))
}

/// A connected, handshaken daemon.
pub struct Conn {
    pub client: std::sync::Arc<Client>,
    pub hello: Hello,
}

impl Conn {
    fn new(client: Client, hello: Hello) -> Conn {
        Conn {
            client: std::sync::Arc::new(client),
            hello,
        }
    }
}

/// Connect to the socket and open a JSON-RPC client over it.
pub async fn connect(sock: &Path) -> Result<Client, String> {
    paths::check_socket_owner(sock).map_err(|e| e.to_string())?;
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, UnixStream::connect(sock))
        .await
        .map_err(|_| format!("connecting to {} timed out", sock.display()))?
        .map_err(|e| format!("cannot connect to {}: {e}", sock.display()))?;
    let url = Url::parse("ws://localhost/").map_err(|e| e.to_string())?;
    let (tx, rx) = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        WsTransportClientBuilder::default()
            .max_request_size(proto::rpc::MAX_REQUEST_BYTES)
            .max_response_size(256 * 1024 * 1024)
            .build_with_stream(url, stream),
    )
    .await
    .map_err(|_| "the daemon did not answer the handshake in time".to_string())?
    .map_err(|e| format!("handshake with evd failed: {e}"))?;
    Ok(ClientBuilder::default()
        .request_timeout(call_timeout())
        .build_with_tokio(tx, rx))
}

/// What evctl says in its hello, asking for a daemon of build `build_id` (empty: any).
fn hello_request(build_id: &str) -> HelloRequest {
    HelloRequest {
        protocol: PROTOCOL_VERSION,
        build_id: build_id.to_string(),
        client: format!("evctl {}", env!("CARGO_PKG_VERSION")),
    }
}

async fn hello(client: &Client, build_id: &str) -> Result<Hello, String> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, client.hello(hello_request(build_id)))
        .await
        .map_err(|_| "the daemon did not answer hello in time".to_string())?
        .map_err(|e| format!("hello failed: {e}"))
}

/// Connect to a running daemon and send `call` right behind the hello, without waiting for it:
/// one round trip fewer for the reads git hooks and editors make all day. `Ok(None)` when no
/// daemon listens, or when the hello says it is not one this evctl may use (another protocol
/// or build): the answer is dropped then, and the caller takes the usual way, which starts or
/// replaces the daemon and asks again (so this is only for reads: an unusable daemon may have
/// answered one). `Err` when a daemon is there and does not answer: asking again cannot help.
pub async fn connect_and_call<R, Fut>(
    rt: &Path,
    call: impl FnOnce(std::sync::Arc<Client>) -> Fut,
) -> Result<Option<(Conn, R)>, String>
where
    Fut: std::future::Future<Output = R>,
{
    let sock = paths::socket_path(rt);
    let want = wanted_build(rt);
    // Connected (or hello sent) and no answer: a daemon alive behind that is stuck or stopped;
    // none alive, the usual way starts one.
    let silent = || match live_daemon(rt) {
        Some(h) => Err(not_answering(&h, rt)),
        None => Ok(None),
    };
    let client = match connect(&sock).await {
        Ok(c) => std::sync::Arc::new(c),
        Err(e) if e.contains("in time") || e.contains("timed out") => return silent(),
        Err(_) => return Ok(None),
    };
    let mut answer = std::pin::pin!(call(std::sync::Arc::clone(&client)));
    let greeter = std::sync::Arc::clone(&client);
    let mut greeted = std::pin::pin!(hello(&greeter, want.as_deref().unwrap_or("")));
    // Both go out now; the hello decides whether the answer is waited for at all.
    let mut early = None;
    let h = loop {
        tokio::select! {
            h = &mut greeted => break h,
            r = &mut answer, if early.is_none() => early = Some(r),
        }
    };
    let Ok(h) = h else {
        return silent();
    };
    if h.protocol != PROTOCOL_VERSION || (want.is_some() && !h.compatible) {
        return Ok(None);
    }
    let answer = match early {
        Some(r) => r,
        None => answer.await,
    };
    Ok(Some((Conn { client, hello: h }, answer)))
}

/// Connect to a running daemon without starting one (for `status` and `shutdown`).
pub async fn connect_existing(rt: &Path) -> Result<Conn, String> {
    let client = connect(&paths::socket_path(rt)).await?;
    let hello = hello(&client, "").await?;
    Ok(Conn::new(client, hello))
}

/// Connect to a running daemon that speaks our protocol, never starting or replacing one (a
/// long-lived client coming back after its daemon went away).
pub async fn connect_running(rt: &Path) -> Result<Conn, String> {
    let want = wanted_build(rt);
    let client = connect(&paths::socket_path(rt)).await?;
    let h = hello(&client, want.as_deref().unwrap_or("")).await?;
    if h.protocol != PROTOCOL_VERSION {
        return Err(format!(
            "evd (pid {}) speaks protocol {}, evctl speaks {}",
            h.pid, h.protocol, PROTOCOL_VERSION
        ));
    }
    Ok(Conn::new(client, h))
}

/// Connect to the daemon, starting or replacing it as needed. A daemon started here begins
/// by opening the store at `open_first` (the one this client is about to ask about), while
/// this client connects.
pub async fn connect_or_start(rt: &Path, open_first: Option<&Path>) -> Result<Conn, String> {
    let sock = paths::socket_path(rt);
    let binary = evd_binary();
    let want = binary
        .as_deref()
        .and_then(|b| paths::build_identity(b, Some(rt)));
    let first = connect(&sock).await;
    if let Err(e) = &first {
        // Connected but unanswered by a daemon that is alive: starting another cannot help.
        if e.contains("in time") || e.contains("timed out") {
            if let Some(h) = live_daemon(rt) {
                return Err(not_answering(&h, rt));
            }
        }
    }
    if let Ok(client) = first {
        let h = match hello(&client, want.as_deref().unwrap_or("")).await {
            Ok(h) => h,
            Err(e) => {
                return Err(match live_daemon(rt) {
                    Some(h) => not_answering(&h, rt),
                    None => e,
                })
            }
        };
        if h.protocol == PROTOCOL_VERSION && (want.is_none() || h.compatible) {
            return Ok(Conn::new(client, h));
        }
        if binary.is_none() {
            return Err(format!(
                "evd (pid {}) speaks protocol {}, evctl speaks {}; no evd binary to replace it with",
                h.pid, h.protocol, PROTOCOL_VERSION
            ));
        }
        // Another build: ask it to stop, then start ours below.
        let _ = client.shutdown().await;
        drop(client);
    }
    let binary = binary.ok_or_else(|| {
        "no evd is running and no evd binary was found (set EVD_BIN or put evd on PATH)".to_string()
    })?;
    paths::ensure_private_dir(rt).map_err(|e| e.to_string())?;
    let _start = take_start_lock(rt).await?;
    // Someone may have started (or replaced) it while we waited for the lock.
    if let Ok(client) = connect(&sock).await {
        if let Ok(h) = hello(&client, want.as_deref().unwrap_or("")).await {
            if h.protocol == PROTOCOL_VERSION && h.compatible {
                return Ok(Conn::new(client, h));
            }
            let _ = client.shutdown().await;
        }
    }
    wait_daemon_gone(rt).await;
    // A daemon that holds its lock but does not answer (stopped, overloaded, stuck) is not
    // replaced by a second one, which could only fail to start: say what is going on instead.
    if let Some(h) = live_daemon(rt) {
        return Err(not_answering(&h, rt));
    }
    let mut child = spawn_daemon(&binary, rt, open_first)?;
    let deadline = Instant::now() + START_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    loop {
        if let Ok(client) = connect(&sock).await {
            let h = hello(&client, want.as_deref().unwrap_or("")).await?;
            return Ok(Conn::new(client, h));
        }
        if let Ok(Some(status)) = child.try_wait() {
            // It lost the race for the daemon lock to another one: talk to that one instead.
            if let Some(h) = live_daemon(rt) {
                if let Ok(client) = connect(&sock).await {
                    let h = hello(&client, want.as_deref().unwrap_or("")).await?;
                    return Ok(Conn::new(client, h));
                }
                return Err(not_answering(&h, rt));
            }
            return Err(format!(
                "evd exited during startup ({status}); see {}",
                paths::log_path(rt).display()
            ));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "evd did not come up within {}s; see {}",
                START_TIMEOUT.as_secs(),
                paths::log_path(rt).display()
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// The daemon that holds the daemon lock of `rt`, when that process is alive and is an evd.
pub fn live_daemon(rt: &Path) -> Option<lock::Holder> {
    let h = lock::read_holder(&paths::daemon_lock_path(rt))?;
    evd::api::shared::process::is_live(h.pid, "evd").then_some(h)
}

/// Whether the process `pid` is stopped (SIGSTOP, a debugger).
fn stopped(pid: u32) -> bool {
    evd::api::shared::process::is_stopped(pid)
}

/// Whether a connection error says a live daemon did not answer (as opposed to none running).
pub fn is_silent_daemon(error: &str) -> bool {
    error.starts_with("evd pid ") && error.contains("did not answer within")
}

/// What to say about a daemon that is alive but did not answer.
pub fn not_answering(h: &lock::Holder, rt: &Path) -> String {
    let why = if stopped(h.pid) {
        "it is stopped (SIGSTOP or a debugger): `kill -CONT {pid}` resumes it"
            .replace("{pid}", &h.pid.to_string())
    } else {
        format!(
            "it may be overloaded or stuck: see {}, or stop it with `kill {}`",
            paths::log_path(rt).display(),
            h.pid
        )
    };
    format!(
        "evd pid {} (running since {}) did not answer within {} s; {why}",
        h.pid,
        h.since,
        (CONNECT_TIMEOUT + HANDSHAKE_TIMEOUT).as_secs()
    )
}

async fn take_start_lock(rt: &Path) -> Result<lock::LockFile, String> {
    let path = paths::start_lock_path(rt);
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match lock::try_lock_private(&path, &lock::Holder::me("evctl")) {
            Ok(l) => return Ok(l),
            Err(lock::LockError::Held { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => return Err(e.describe("the daemon start lock")),
        }
    }
}

/// After asking a daemon to stop, wait (bounded) until its daemon lock is free.
pub async fn wait_daemon_gone(rt: &Path) {
    let path = paths::daemon_lock_path(rt);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match lock::try_lock_private(&path, &lock::Holder::me("evctl")) {
            Ok(l) => {
                drop(l);
                return;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// After asking daemon `pid` to stop, wait (bounded) until its daemon lock is free and the
/// process is gone. `false` when it is still there after that.
pub async fn wait_process_gone(rt: &Path, pid: u32) -> bool {
    let path = paths::daemon_lock_path(rt);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let free = match lock::try_lock_private(&path, &lock::Holder::me("evctl")) {
            Ok(l) => {
                drop(l);
                true
            }
            Err(_) => false,
        };
        if free && !evd::api::shared::process::is_live(pid, "evd") {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

fn spawn_daemon(
    binary: &Path,
    rt: &Path,
    open_first: Option<&Path>,
) -> Result<std::process::Child, String> {
    use std::os::unix::process::CommandExt;
    let log = paths::open_private_append(&paths::log_path(rt))
        .map_err(|e| format!("cannot open the daemon log: {e}"))?;
    let mut cmd = Command::new(binary);
    if let Some(root) = open_first {
        cmd.env("EVD_OPEN_FIRST", root);
    }
    cmd.arg("serve")
        .env("EVD_RUNTIME_DIR", rt)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
    // SAFETY: setsid is async-signal-safe; it detaches the daemon from our session and terminal.
    unsafe {
        cmd.pre_exec(|| {
            evd::api::shared::process::detach_session();
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))
}
