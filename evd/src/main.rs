//! `evd`: the per-user daemon. Usually started by evctl on first use or by systemd's socket
//! unit; run it by hand with `evd serve` to watch its log.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use evd::daemon::{server, systemd};
use evd::store::lock;
use evd::sys::paths;

/// evd — the decision-memory daemon behind evctl.
///
/// One evd serves every .evolving/ store of its user: it owns each store it opens (a lock, one
/// writer, parsed ticks kept hot) and answers JSON-RPC 2.0 on a private Unix socket
/// ($XDG_RUNTIME_DIR/evd/evd.sock). evctl starts it on demand; you rarely run it yourself.
#[derive(Parser)]
#[command(name = "evd", version, about, long_about)]
struct Cli {
    /// Runtime directory for the socket, locks and log (default: $EVD_RUNTIME_DIR, else
    /// $XDG_RUNTIME_DIR/evd, else $TMPDIR/evd-<uid>).
    #[arg(long, global = true, value_name = "DIR")]
    runtime_dir: Option<PathBuf>,
    /// Release a store (its lock, watches and memory) after this many seconds without a request
    /// or subscriber; it opens again on its next request (default: $EVD_STORE_IDLE_SECS, else
    /// 600).
    #[arg(long, global = true, value_name = "SECS")]
    store_idle_secs: Option<u64>,
    /// Keep at most this many stores open; opening one more releases the least recently used
    /// idle one (default: $EVD_MAX_OPEN_STORES, else 32).
    #[arg(long, global = true, value_name = "N")]
    max_open_stores: Option<usize>,
    /// How long one request may hold a store before the store is called stuck: a request
    /// waiting longer gets an error, and while one runs past it, requests to that store are
    /// refused at once (others are unaffected) and `evctl status` names it (default:
    /// $EVD_STORE_DEADLINE_MS in milliseconds, else 20 s).
    #[arg(long, global = true, value_name = "SECS")]
    store_deadline_secs: Option<u64>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve in the foreground until SIGTERM/SIGINT or `evctl shutdown` (the default).
    Serve,
    /// Print the socket path this evd would use, then exit.
    Where,
}

fn main() -> ExitCode {
    // Before any thread exists (the allocator's arenas are made per thread).
    evd::sys::resources::tune_allocator();
    let cli = Cli::parse();
    // Socket activation must be read before any thread exists.
    let activated = systemd::activated_listener();
    let filter = tracing_subscriber::EnvFilter::try_from_env("EVD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only for a person watching a terminal: evd.log is a file.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
    // A test build reads `FAILPOINTS` (see the `failpoints` feature); what ships has none.
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    let rt_dir = cli.runtime_dir.clone().unwrap_or_else(paths::runtime_dir);
    let limits = limits(&cli);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Where => {
            println!("{}", paths::socket_path(&rt_dir).display());
            ExitCode::SUCCESS
        }
        Command::Serve => match run(&rt_dir, activated, limits) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("evd: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Bind the socket under a strict umask so it is never reachable by others, even briefly.
fn bind_private(sock: &Path) -> std::io::Result<UnixListener> {
    // SAFETY: umask only swaps the process mask; no other thread exists yet.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(sock);
    unsafe { libc::umask(old) };
    let l = bound?;
    std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

/// The store limits from the command line, else the environment, else the defaults.
fn limits(cli: &Cli) -> evd::daemon::registry::Limits {
    let env = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let mut l = evd::daemon::registry::Limits::default();
    if let Some(secs) = cli.store_idle_secs.or_else(|| env("EVD_STORE_IDLE_SECS")) {
        l.idle = std::time::Duration::from_secs(secs.max(1));
    }
    if let Some(n) = cli
        .max_open_stores
        .or_else(|| env("EVD_MAX_OPEN_STORES").and_then(|n| usize::try_from(n).ok()))
    {
        l.max_open = n.max(1);
    }
    if let Some(secs) = cli.store_deadline_secs {
        l.deadline = std::time::Duration::from_secs(secs.max(1));
    } else if let Some(ms) = env("EVD_STORE_DEADLINE_MS") {
        l.deadline = std::time::Duration::from_millis(ms.max(100));
    }
    l
}

/// Raise the soft limit on open files to the hard one: every client connection is a descriptor,
/// and running out makes accept fail for everyone.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
                tracing::warn!("cannot raise the open-file limit to its hard limit");
            }
        }
    }
}

fn run(
    rt_dir: &Path,
    activated: Option<UnixListener>,
    limits: evd::daemon::registry::Limits,
) -> Result<(), String> {
    raise_fd_limit();
    paths::ensure_private_dir(rt_dir).map_err(|e| e.to_string())?;
    let sock = paths::socket_path(rt_dir);
    let _daemon_lock =
        lock::try_lock_private(&paths::daemon_lock_path(rt_dir), &lock::Holder::me("evd"))
            .map_err(|e| {
                e.describe(&format!(
                    "another evd already serves {}: the daemon lock",
                    sock.display()
                ))
            })?;
    let (listener, bound_ino) = match activated {
        Some(l) => {
            tracing::info!("using the socket systemd passed");
            (l, None)
        }
        None => {
            // We hold the daemon lock, so any socket file left here belongs to a dead daemon.
            if let Ok(m) = std::fs::symlink_metadata(&sock) {
                if m.file_type().is_socket() {
                    tracing::info!(socket = %sock.display(), "replacing a stale socket");
                }
                std::fs::remove_file(&sock)
                    .map_err(|e| format!("cannot remove stale {}: {e}", sock.display()))?;
            }
            let l =
                bind_private(&sock).map_err(|e| format!("cannot bind {}: {e}", sock.display()))?;
            let ino = std::fs::symlink_metadata(&sock).ok().map(|m| m.ino());
            (l, ino)
        }
    };
    let build_id = paths::own_build_identity(Some(rt_dir))
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
    if let Err(e) = evd::sys::answers::init(rt_dir) {
        tracing::warn!(error = %e, "cannot prepare the answers directory; large answers go inline");
    }
    let daemon = Arc::new(server::Daemon::with_limits(build_id, sock.clone(), limits));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // Blocking work (requests for directories without a store, releasing stores) is short;
        // a few threads bound what any burst of clients can make the daemon hold.
        .max_blocking_threads(8)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let result = runtime.block_on(async {
        let stopper = Arc::clone(&daemon);
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) =
                (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
            else {
                return;
            };
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: stopping"),
                _ = int.recv() => tracing::info!("SIGINT: stopping"),
            }
            stopper.begin_stop(std::time::Duration::from_millis(50));
        });
        // Started by evctl for a request about a store: open it while the client connects.
        if let Some(root) = std::env::var_os("EVD_OPEN_FIRST").map(std::path::PathBuf::from) {
            if root.is_absolute() {
                daemon.open_first(root);
            }
        }
        tracing::info!(socket = %sock.display(), pid = std::process::id(), build = %daemon.build_id, "evd ready");
        systemd::notify("READY=1\nSTATUS=serving\n");
        // Served from a worker rather than this thread: the worker that sees a connection
        // arrive accepts it and runs it, instead of waking this thread to accept and then
        // another to serve (each wake-up of an idle CPU costs a client a fraction of a ms).
        let r = match tokio::spawn(server::serve(listener, Arc::clone(&daemon))).await {
            Ok(r) => r,
            Err(e) => Err(std::io::Error::other(format!("the server task failed: {e}"))),
        };
        systemd::notify("STOPPING=1\n");
        r
    });
    // Remove our socket, but only if it is still the one we bound.
    if let Some(ino) = bound_ino {
        if std::fs::symlink_metadata(&sock).map(|m| m.ino()).ok() == Some(ino) {
            let _ = std::fs::remove_file(&sock);
        }
    }
    runtime.shutdown_timeout(std::time::Duration::from_millis(300));
    tracing::info!("evd stopped");
    result.map_err(|e| format!("serving failed: {e}"))
}
