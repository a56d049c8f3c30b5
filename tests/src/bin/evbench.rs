//! evbench: latency and memory numbers for evd/evctl, printed (not asserted).
//!
//! The sections that run at 1k, 10k and 100k ticks take `--only 1k|10k|100k` for one size, and
//! `evbench follow --no-upstream` leaves out upstream's own checks (both for a quick look while
//! working; a closing note's figures come from a full run).
//!
//! Run after a release build of the whole workspace:
//!
//! ```text
//! cargo build --release --workspace && cargo run --release -p evd-e2e --bin evbench
//! ```
//!
//! `evbench migrate` runs only the migrate section (10,000 canonical records per `evctl migrate`).
//! `evbench check` runs only the check section (1k, 10k and 100k ticks; `--no-100k` skips the
//! last). `evbench pressure` runs only the pressure section: evd's threads, inotify instances and
//! memory with 1, 40 and 300 stores, after 5,000 requests from directories without a store, the
//! latency of `evctl list` among 2,000 idle connections, and a degraded (`EVD_NO_WATCH`) warm
//! check against a watched one at 10,000 ticks. `evbench lsp` runs only the language server
//! section: how long `evctl lsp` takes to update a file's diagnostics after a commit touching a
//! trigger or a receipt appended by another process, at 10,000 ticks (`evd_e2e::bench_lsp`).
//! `evbench follow` runs only the follow section: a check right after a commit, commit to state
//! file and watch, the first check after a restart, and an editor save to `dirty`, at 1k, 10k and
//! 100k ticks beside upstream ev's own check (`--no-100k` skips the last; `tests/src/bench_follow.rs`).
//! `evbench team` runs only the team section: publishing 10,000 receipts as git notes, and the
//! time from a developer's `git fetch` to CI's verdict on the watch and in the state file at
//! 10k ticks, and five hosts' 100,000-event ledgers verified and queried together
//! (`tests/src/bench_team.rs`; `--only 10k` is implied for the fixture; `--only-fleet` runs
//! the ledgers alone).
//! `evbench report` runs only the report section: `evctl report` on each generated store with a
//! 100,000-event ledger, timed, and the page's size (`tests/src/bench_report.rs`).
//! `evbench store` runs only the store section: evd's RSS holding a 1k, 10k and 100k-tick store
//! with its verdicts, `verify` cold and repeated, `list` and a warm `check`, each next to
//! upstream `ev` 0.1.32 on the same store (capped; see `tests/src/bench_store.rs`).
//! `evbench ledger` runs only the ledger section: append throughput through evd (fsync'd), `ledger
//! verify` and a query at 100,000 events, and evidence re-hashing at 10,000 citations
//! (`tests/src/bench_ledger.rs`).
//! `evbench fuzz [--cases N] [--only TARGET]` runs the fault campaign's property tests
//! (`evd_e2e::fuzz`: every parser at a door, no panic and a refusal or an exact round trip) for
//! N cases each (10,000 by default; the targets that run a program per input take a tenth).
//! `evbench soak [--minutes M] [--stores N] [--kill-every SECS]` drives mixed traffic over N
//! stores (50) for M minutes (30) with evd SIGKILLed every SECS (20) on average, then accounts
//! for every write (`evd_e2e::soak`).
//! `evbench hooks` runs only the hooks section: what
//! evctl's pre-commit gate adds to a `git commit` at 1k, 10k and 100k ticks (`--no-100k` skips the
//! last; see `tests/src/bench_hooks.rs`).
//!
//! It uses the `evd` and `evctl` that sit next to its own executable (target/release/), a private
//! runtime directory (its own daemon, never the user's), and stores made by the repository's own
//! generator (`evd_e2e::store_gen`, also runnable as `cargo run -p evd-e2e --bin gen_store`).
//! Everything it creates lives in temp directories and the daemon is shut down at the end.

use std::ffi::OsStr;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use evd::api::OpenStore as Store;
use evd::verbs as ops;
use jsonrpsee::client_transport::ws::{Url, WsTransportClientBuilder};
use jsonrpsee::core::client::{Client, ClientBuilder};
use proto::rpc::{
    Context, DaemonStatus, DecideRequest, EvApiClient, HelloRequest, IdRequest, VerifyRequest,
    PROTOCOL_VERSION,
};
use tempfile::TempDir;
use tokio::net::UnixStream;

#[path = "../bench_follow.rs"]
mod bench_follow;
#[path = "../bench_hooks.rs"]
mod bench_hooks;
#[path = "../bench_ledger.rs"]
mod bench_ledger;
#[path = "../bench_report.rs"]
mod bench_report;
#[path = "../bench_store.rs"]
mod bench_store;
#[path = "../bench_team.rs"]
mod bench_team;

type Res<T> = Result<T, String>;

/// The release binaries this bench drives.
struct Bins {
    evd: PathBuf,
    evctl: PathBuf,
}

/// `evd` and `evctl` beside this executable, or a clear message saying how to build them.
fn locate_bins() -> Res<Bins> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find evbench itself: {e}"))?;
    let beside = exe
        .parent()
        .ok_or_else(|| format!("{} has no parent directory", exe.display()))?
        .to_path_buf();
    // `EVBENCH_BIN_DIR`: another build's evd and evctl (a before/after in one harness).
    let dir = std::env::var_os("EVBENCH_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or(beside);
    let bins = Bins {
        evd: dir.join("evd"),
        evctl: dir.join("evctl"),
    };
    let missing: Vec<String> = [&bins.evd, &bins.evctl]
        .iter()
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "missing {}: build them first with `cargo build --release --workspace`",
            missing.join(" and ")
        ));
    }
    Ok(bins)
}

// ---------------------------------------------------------------------------------------------
// Statistics

#[derive(Debug, Clone, Copy)]
struct Stats {
    n: usize,
    p50: Duration,
    p99: Duration,
    mean: Duration,
    min: Duration,
    max: Duration,
    /// Fewer runs than asked for, to stay within the series time budget.
    capped: bool,
}

/// Nearest-rank percentile of sorted samples.
/// `cmd` (a git command, its directory and environment set) run with `args`: its stdout when it
/// worked, else an error naming the command and what git said.
fn git_output(cmd: &mut Command, args: &[&str]) -> Res<String> {
    let out = cmd
        .args(args)
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

fn stats(mut v: Vec<Duration>) -> Stats {
    assert!(!v.is_empty(), "no samples");
    v.sort();
    let total: Duration = v.iter().sum();
    Stats {
        n: v.len(),
        p50: percentile(&v, 50.0),
        p99: percentile(&v, 99.0),
        mean: total / u32::try_from(v.len()).unwrap_or(u32::MAX),
        min: v[0],
        max: v[v.len() - 1],
        capped: false,
    }
}

fn fmt_dur(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.1} µs")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1_000.0)
    } else {
        format!("{:.3} s", us / 1_000_000.0)
    }
}

/// One measured series, kept for the summary table.
struct Row {
    what: String,
    store: String,
    via: String,
    stats: Stats,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    /// Throughput figures and other one-line results, printed under the table.
    notes: Vec<String>,
}

impl Report {
    fn add(&mut self, what: &str, store: &str, via: &str, s: Stats) -> Stats {
        println!(
            "  {:<8} {:<7} {:<26} n={:<4} p50 {:>10}  p99 {:>10}  mean {:>10}  (min {}, max {}){}",
            what,
            store,
            via,
            s.n,
            fmt_dur(s.p50),
            fmt_dur(s.p99),
            fmt_dur(s.mean),
            fmt_dur(s.min),
            fmt_dur(s.max),
            if s.capped {
                "  [runs capped by the time budget]"
            } else {
                ""
            }
        );
        self.rows.push(Row {
            what: what.into(),
            store: store.into(),
            via: via.into(),
            stats: s,
        });
        s
    }

    fn note(&mut self, line: String) {
        self.notes.push(line);
    }

    fn table(&self) {
        let line = "-".repeat(86);
        println!("{line}");
        println!(
            "{:<8} {:<7} {:<26} {:>5} {:>11} {:>11} {:>11}",
            "verb", "store", "via", "n", "p50", "p99", "mean"
        );
        println!("{line}");
        for r in &self.rows {
            println!(
                "{:<8} {:<7} {:<26} {:>5} {:>11} {:>11} {:>11}",
                r.what,
                r.store,
                r.via,
                format!("{}{}", r.stats.n, if r.stats.capped { "*" } else { "" }),
                fmt_dur(r.stats.p50),
                fmt_dur(r.stats.p99),
                fmt_dur(r.stats.mean)
            );
        }
        println!("{line}");
        for n in &self.notes {
            println!("{n}");
        }
        if self.rows.iter().any(|r| r.stats.capped) {
            println!(
                "* fewer runs than planned: the series would have exceeded its {} s budget",
                SERIES_BUDGET.as_secs()
            );
        }
    }
}

/// How long one series may take. A series whose single run already exceeds it is reported from
/// that one run (so a pathological path cannot blow the whole bench's time).
const SERIES_BUDGET: Duration = Duration::from_secs(6);

/// Run `f` `warmup` times untimed (the first of them is timed as a probe), then up to `max_n`
/// times timed — fewer when the probe says `max_n` runs would not fit in [`SERIES_BUDGET`].
fn measure(max_n: usize, warmup: usize, mut f: impl FnMut() -> Res<()>) -> Res<Stats> {
    let t = Instant::now();
    f()?;
    let probe = t.elapsed();
    if probe >= SERIES_BUDGET {
        let mut s = stats(vec![probe]);
        s.capped = true;
        return Ok(s);
    }
    for _ in 1..warmup {
        f()?;
    }
    let fit = (SERIES_BUDGET.as_secs_f64() / probe.as_secs_f64().max(1e-9)) as usize;
    let n = max_n.min(fit.max(3));
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed());
    }
    let mut s = stats(v);
    s.capped = n < max_n;
    Ok(s)
}

// ---------------------------------------------------------------------------------------------
// The private world: runtime dir, HOME, evctl commands, the daemon

struct World {
    bins: Bins,
    /// `XDG_RUNTIME_DIR` for everything this bench starts (mode 0700).
    xdg: TempDir,
    home: TempDir,
}

impl World {
    fn new(bins: Bins) -> Res<World> {
        let xdg = tempfile::Builder::new()
            .prefix("evbench-rt")
            .tempdir()
            .map_err(|e| format!("runtime tempdir: {e}"))?;
        fs::set_permissions(xdg.path(), fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("chmod 0700 {}: {e}", xdg.path().display()))?;
        let home = tempfile::Builder::new()
            .prefix("evbench-home")
            .tempdir()
            .map_err(|e| format!("home tempdir: {e}"))?;
        Ok(World { bins, xdg, home })
    }

    /// evd's runtime directory under our private `XDG_RUNTIME_DIR`.
    fn rt_dir(&self) -> PathBuf {
        self.xdg.path().join("evd")
    }

    fn socket(&self) -> PathBuf {
        evd::sys::paths::socket_path(&self.rt_dir())
    }

    /// A command with the private environment (none of the caller's evd settings).
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env("XDG_RUNTIME_DIR", self.xdg.path())
            .env("HOME", self.home.path())
            .env("EVD_BIN", &self.bins.evd)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("EVD_RUNTIME_DIR")
            .env_remove("EVD_NO_DAEMON")
            .env_remove("EVD_NO_WATCH")
            .env_remove("EVD_MAX_OPEN_STORES")
            .env_remove("EVD_STORE_IDLE_SECS")
            .env_remove("EVCTL_DEBUG")
            .env_remove("EV_AGENT_ID")
            // The first check of a freshly generated 100k store writes ~94,000 state files: on
            // a busy filesystem that took 10 to 25 s here, past the default store deadline
            // (20 s), and the bench measures what comes after it.
            .env("EVD_STORE_DEADLINE_MS", "120000")
            .stdin(Stdio::null());
        c
    }

    /// Run `evctl <args>` in `cwd` and wait for it, whatever its exit status.
    fn evctl_output<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> Res<Output> {
        self.command(&self.bins.evctl)
            .current_dir(cwd)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.bins.evctl.display()))
    }

    /// Run `evctl <args>` in `cwd`, wait for it, and fail with its stderr unless it exits 0.
    fn evctl<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> Res<String> {
        let out = self.evctl_output(cwd, args)?;
        if !out.status.success() {
            let shown: Vec<String> = args
                .iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect();
            return Err(format!(
                "evctl {} failed ({}):\n{}",
                shown.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Run `evctl <args>` where exit 1 means "gating" (`check --exit-on-red`): whether it gated.
    fn evctl_gate<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> Res<bool> {
        let out = self.evctl_output(cwd, args)?;
        match out.status.code() {
            Some(0) => Ok(false),
            Some(1) if out.stderr.is_empty() => Ok(true),
            _ => Err(format!(
                "evctl failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    }

    /// `evctl status --json`: what the running daemon holds.
    fn status(&self) -> Res<DaemonStatus> {
        let out = self.evctl(self.home.path(), &["status", "--json"])?;
        serde_json::from_str(&out).map_err(|e| format!("evctl status --json: {e}: {out}"))
    }

    /// Start our own evd in the private runtime dir and wait until its socket answers.
    fn start_daemon(&self) -> Res<Daemon<'_>> {
        self.start_daemon_with(&[])
    }

    /// [`World::start_daemon`], with `env` added to evd's environment (e.g. `EVD_NO_WATCH`).
    fn start_daemon_with(&self, env: &[(&str, &str)]) -> Res<Daemon<'_>> {
        evd::sys::paths::ensure_private_dir(&self.rt_dir())
            .map_err(|e| format!("runtime dir {}: {e}", self.rt_dir().display()))?;
        let log = fs::File::create(self.xdg.path().join("evbench-evd.log"))
            .map_err(|e| format!("daemon log: {e}"))?;
        let child = self
            .command(&self.bins.evd)
            .envs(env.iter().copied())
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.bins.evd.display()))?;
        let pid = child.id();
        let mut d = Daemon {
            world: self,
            child: Some(child),
            pid,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.socket().exists() {
            if let Some(c) = d.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    return Err(format!(
                        "evd exited during startup ({st}); see {}",
                        self.xdg.path().join("evbench-evd.log").display()
                    ));
                }
            }
            if Instant::now() > deadline {
                return Err("evd did not create its socket within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(d)
    }
}

/// The bench's own evd; shut down (and reaped) when dropped, even on an error path.
struct Daemon<'w> {
    world: &'w World,
    child: Option<Child>,
    pid: u32,
}

impl Daemon<'_> {
    /// `evctl shutdown`, then wait for the process to exit. Returns how the shutdown went.
    fn shutdown(&mut self) -> String {
        let Some(mut child) = self.child.take() else {
            return "already stopped".into();
        };
        let said = match self.world.evctl(self.world.home.path(), &["shutdown"]) {
            Ok(out) => out.trim().to_string(),
            Err(e) => format!("evctl shutdown failed: {e}"),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match child.try_wait() {
                Ok(Some(st)) => return format!("{said}; evd exited ({st})"),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => {
                    // It is our own child: stop it by its pid handle.
                    let _ = child.kill();
                    let _ = child.wait();
                    return format!("{said}; evd did not exit within 5 s and was killed");
                }
            }
        }
    }
}

impl Drop for Daemon<'_> {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.shutdown();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Memory, machine, filesystem

/// A `kB` field of /proc/<pid>/status, e.g. `VmRSS`.
fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

fn fmt_kb(kb: Option<u64>) -> String {
    match kb {
        Some(k) => format!("{:.1} MiB ({k} kB)", k as f64 / 1024.0),
        None => "n/a".into(),
    }
}

/// The 1/5/15-minute load averages: other work on the machine skews every number here.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn cpu_model() -> Option<String> {
    let text = fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// The filesystem type `path` lives on (longest mount-point prefix in /proc/mounts).
fn fs_type(path: &Path) -> Option<String> {
    let mounts = fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let _dev = it.next()?;
            let mnt = it.next()?;
            let ty = it.next()?;
            path.starts_with(mnt).then(|| (mnt.len(), ty.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, ty)| ty)
}

/// Ask the kernel to drop every tick file's pages from the page cache (best effort: clean pages
/// only, and a no-op on tmpfs). Returns how many files took the advice.
fn evict_from_page_cache(ticks: &Path) -> Res<usize> {
    let mut n = 0;
    let rd = fs::read_dir(ticks).map_err(|e| format!("{}: {e}", ticks.display()))?;
    for ent in rd.flatten() {
        let Ok(f) = fs::File::open(ent.path()) else {
            continue;
        };
        // SAFETY: the descriptor is open for the whole call; fadvise only hints the page cache.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc == 0 {
            n += 1;
        }
    }
    Ok(n)
}

// ---------------------------------------------------------------------------------------------
// The RPC client, connected exactly like evctl's

async fn connect(sock: &Path) -> Res<Client> {
    let stream = UnixStream::connect(sock)
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", sock.display()))?;
    let url = Url::parse("ws://localhost/").map_err(|e| e.to_string())?;
    let (tx, rx) = WsTransportClientBuilder::default()
        .max_request_size(16 * 1024 * 1024)
        .max_response_size(256 * 1024 * 1024)
        .build_with_stream(url, stream)
        .await
        .map_err(|e| format!("websocket handshake with evd failed: {e}"))?;
    Ok(ClientBuilder::default()
        .request_timeout(Duration::from_secs(60))
        .build_with_tokio(tx, rx))
}

fn context_for(root: &Path) -> Context {
    let s = root.display().to_string();
    Context {
        store: s.clone(),
        cwd: s,
        ..Context::default()
    }
}

fn rpc_err(what: &str) -> impl Fn(jsonrpsee::core::client::Error) -> String + '_ {
    move |e| format!("{what} over RPC failed: {e}")
}

// ---------------------------------------------------------------------------------------------
// The benchmarks

/// A generated store and how many runs each measurement gets at its size.
struct Fixture {
    label: &'static str,
    ticks: usize,
    dir: TempDir,
    root: PathBuf,
    head: String,
    /// `git rev-parse HEAD` of the generated repository.
    head_sha: String,
    runs_process: usize,
    runs_list: usize,
    runs_verify: usize,
}

/// The sizes asked for, as (label, ticks, seed): 1k, 10k and 100k; `--no-100k` leaves out the
/// last, `--only <label>` keeps one (for a quick look while working on it).
fn sizes() -> Res<Vec<(&'static str, usize, u64)>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let only = args
        .iter()
        .position(|a| a == "--only")
        .map(|i| args.get(i + 1).cloned().unwrap_or_default());
    let all = [("1k", 1_000, 1), ("10k", 10_000, 2), ("100k", 100_000, 3)];
    match only {
        Some(o) => all
            .into_iter()
            .find(|(label, ..)| *label == o)
            .map(|s| vec![s])
            .ok_or_else(|| format!("--only takes 1k, 10k or 100k, not {o:?}")),
        None => Ok(all
            .into_iter()
            .filter(|(label, ..)| *label != "100k" || !args.iter().any(|a| a == "--no-100k"))
            .collect()),
    }
}

/// The fixtures of [`sizes`].
fn size_fixtures() -> Res<Vec<Fixture>> {
    sizes()?
        .into_iter()
        .map(|(label, ticks, seed)| make_fixture(label, ticks, seed))
        .collect()
}

fn make_fixture(label: &'static str, ticks: usize, seed: u64) -> Res<Fixture> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("evbench-{label}-"))
        .tempdir()
        .map_err(|e| format!("store tempdir: {e}"))?;
    let t = Instant::now();
    // The harness's generator (tests/src/store_gen.rs): fixed seed and a pinned `now`.
    evd_e2e::gen_store(dir.path(), ticks, seed);
    let root = fs::canonicalize(dir.path()).map_err(|e| format!("canonicalize: {e}"))?;
    let head = fs::read_to_string(root.join(".evolving/HEAD"))
        .map_err(|e| format!("reading HEAD of the {label} store: {e}"))?
        .trim()
        .to_string();
    println!(
        "  generated {label} store ({ticks} ticks, seed {seed}) in {} at {}",
        fmt_dur(t.elapsed()),
        root.display()
    );
    let big = ticks >= 5_000;
    let head_sha = std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["rev-parse", "HEAD"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .map_err(|e| format!("git rev-parse: {e}"))?;
    Ok(Fixture {
        label,
        ticks,
        dir,
        root,
        head,
        head_sha,
        runs_process: if big { 50 } else { 100 },
        runs_list: if big { 30 } else { 100 },
        runs_verify: if big { 10 } else { 30 },
    })
}

fn bench_decide(
    w: &World,
    rt: &tokio::runtime::Runtime,
    client: &Client,
    report: &mut Report,
) -> Res<usize> {
    let repo = evd_e2e::Repo::new();
    let root = fs::canonicalize(repo.path()).map_err(|e| format!("canonicalize: {e}"))?;
    w.evctl(&root, &["init"])?;

    println!(
        "\n1. `evctl decide … --blame` — one whole evctl process (spawn, decide, wait), warm daemon"
    );
    let mut i = 0u32;
    let s = measure(200, 5, || {
        i += 1;
        let text = format!("bench decision {i} via evctl");
        w.evctl(&root, &["decide", &text, "--blame", "bench"])
            .map(|_| ())
    })?;
    report.add("decide", "small", "evctl process", s);

    println!(
        "\n2. `ev.decide` RPC alone — one connection (jsonrpsee over the Unix socket), call in a loop"
    );
    let ctx = context_for(&root);
    let mut i = 0u32;
    let s = measure(500, 20, || {
        i += 1;
        let req = DecideRequest {
            context: ctx.clone(),
            decision: Some(format!("bench decision {i} via rpc")),
            blame: Some("bench".into()),
            ..DecideRequest::default()
        };
        let r = rt.block_on(client.decide(req)).map_err(rpc_err("decide"))?;
        if r.id.is_empty() {
            return Err("decide answered an empty id".into());
        }
        Ok(())
    })?;
    report.add("decide", "small", "RPC only", s);
    let ticks = repo.tick_files().len();
    println!("  (\"small\": a fresh store that grows by one tick per decide; it now holds {ticks} ticks)");
    Ok(ticks)
}

fn bench_reads(
    w: &World,
    rt: &tokio::runtime::Runtime,
    client: &Client,
    fx: &Fixture,
    report: &mut Report,
) -> Res<()> {
    let root = &fx.root;
    let label = fx.label;
    let ctx = context_for(root);

    // (a) through evd: the whole evctl process against the warm daemon.
    println!("  (a) through evd — whole `evctl <verb>` process, warm daemon:");
    report.add(
        "show",
        label,
        "evctl process",
        measure(fx.runs_process, 3, || {
            w.evctl(root, &["show", &fx.head]).map(|_| ())
        })?,
    );
    report.add(
        "list",
        label,
        "evctl process",
        measure(fx.runs_list, 2, || w.evctl(root, &["list"]).map(|_| ()))?,
    );
    report.add(
        "verify",
        label,
        "evctl process",
        measure(fx.runs_verify, 1, || w.evctl(root, &["verify"]).map(|_| ()))?,
    );

    // The same verbs as bare RPCs, to split process and rendering cost from daemon work.
    println!("      the same verbs as bare RPCs on one connection (no process, no rendering):");
    report.add(
        "show",
        label,
        "RPC only",
        measure(fx.runs_process * 5, 10, || {
            let req = IdRequest {
                context: ctx.clone(),
                id: fx.head.clone(),
            };
            rt.block_on(client.show(req))
                .map(|_| ())
                .map_err(rpc_err("show"))
        })?,
    );
    report.add(
        "list",
        label,
        "RPC only",
        measure(fx.runs_list, 2, || {
            let req = proto::rpc::ListRequest {
                context: ctx.clone(),
                form: proto::rpc::ListForm::Entries,
            };
            rt.block_on(client.list(req))
                .map(|_| ())
                .map_err(rpc_err("list"))
        })?,
    );
    report.add(
        "verify",
        label,
        "RPC only",
        measure(fx.runs_verify, 1, || {
            let req = VerifyRequest {
                context: ctx.clone(),
                self_test: false,
            };
            rt.block_on(client.verify(req))
                .map(|_| ())
                .map_err(rpc_err("verify"))
        })?,
    );

    // (b) in-process: evd::ops on an evd::store::Store in this process.
    println!("  (b) in-process — evd::ops on an evd::store::Store in the bench process:");
    let store = Store::new(root.clone());
    report.add(
        "show",
        label,
        "in-process",
        measure(2_000, 20, || {
            ops::show(&store, &fx.head)
                .map(|_| ())
                .map_err(|r| r.message)
        })?,
    );
    report.add(
        "list",
        label,
        "in-process, cold Store",
        measure(fx.runs_list, 1, || {
            let mut s = Store::new(root.clone());
            ops::list(&mut s).map(|_| ()).map_err(|r| r.message)
        })?,
    );
    let mut warm = Store::new(root.clone());
    let mut listed = 0;
    report.add(
        "list",
        label,
        "in-process, warm Store",
        measure(fx.runs_list * 5, 2, || {
            listed = ops::list(&mut warm).map_err(|r| r.message)?.entries.len();
            Ok(())
        })?,
    );
    let mut audit = None;
    let verify_s = report.add(
        "verify",
        label,
        "in-process, fresh Store",
        measure(fx.runs_verify, 1, || {
            let mut s = Store::new(root.clone());
            audit = Some(ops::verify(&mut s, false).map_err(|r| r.message)?);
            Ok(())
        })?,
    );

    // What the store looks like, so the numbers can be read against it.
    let audit = audit.ok_or("verify never ran")?;
    let bytes: u64 = fs::read_dir(root.join(".evolving/ticks"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    println!(
        "  store {label}: {} tick files ({:.1} MiB), list shows {listed} entries, verify: {} violation(s), {} warning(s)",
        audit.files,
        bytes as f64 / (1024.0 * 1024.0),
        audit.violations.len(),
        audit.warnings.len()
    );
    for v in audit.violations.iter().take(3) {
        println!("    ✗ {v}");
    }

    if fx.ticks >= 10_000 {
        println!(
            "\n  COLD VERIFY at {} ticks (fresh Store + ops::verify, OS page cache warm): p50 {}, p99 {}, mean {} (n={}) — target < 100 ms: {} (upstream ev: 11.6 s)",
            fx.ticks,
            fmt_dur(verify_s.p50),
            fmt_dur(verify_s.p99),
            fmt_dur(verify_s.mean),
            verify_s.n,
            if verify_s.p50 < Duration::from_millis(100) {
                "MET"
            } else {
                "MISSED"
            }
        );
        // Evict before each run (untimed), then time only the fresh Store + verify.
        let ticks_dir = root.join(".evolving/ticks");
        let mut evicted = 0;
        let mut v = Vec::new();
        let started = Instant::now();
        while v.len() < 5 && (v.is_empty() || started.elapsed() < SERIES_BUDGET) {
            evicted = evict_from_page_cache(&ticks_dir)?;
            let t = Instant::now();
            let mut s = Store::new(root.clone());
            ops::verify(&mut s, false).map_err(|r| r.message)?;
            v.push(t.elapsed());
        }
        let mut s = stats(v);
        s.capped = s.n < 5;
        let s = report.add("verify", label, "in-process, evicted cache", s);
        println!(
            "  the same with every tick file evicted from the page cache first ({evicted} files took posix_fadvise DONTNEED; fs {}): p50 {}, p99 {}",
            fs_type(root).unwrap_or_else(|| "?".into()),
            fmt_dur(s.p50),
            fmt_dur(s.p99)
        );
    }
    Ok(())
}

/// Decide throughput with 4 concurrent clients: whole evctl processes, then bare RPCs on one
/// connection each. The store's single writer serializes them into one chain.
fn bench_concurrent_decide(w: &World, report: &mut Report) -> Res<()> {
    const CLIENTS: usize = 4;
    let repo = evd_e2e::Repo::new();
    let root = fs::canonicalize(repo.path()).map_err(|e| format!("canonicalize: {e}"))?;
    w.evctl(&root, &["init"])?;
    println!("\n2b. decide throughput with {CLIENTS} concurrent clients (one store)");

    let per_client = 50;
    let started = Instant::now();
    std::thread::scope(|scope| -> Res<()> {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let root = &root;
                scope.spawn(move || -> Res<()> {
                    for i in 0..per_client {
                        let text = format!("client {c} process decision {i}");
                        w.evctl(root, &["decide", &text, "--blame", "bench"])?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| "a client thread panicked".to_string())??;
        }
        Ok(())
    })?;
    let n = CLIENTS * per_client;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "  {n} evctl processes ({CLIENTS} at a time): {:.2} s, {:.0} decisions/s",
        secs,
        n as f64 / secs
    );
    report.note(format!(
        "decide x{CLIENTS} clients, evctl processes: {:.0} decisions/s",
        n as f64 / secs
    ));

    let per_client = 250;
    let sock = w.socket();
    let ctx = context_for(&root);
    let started = Instant::now();
    std::thread::scope(|scope| -> Res<()> {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (sock, ctx) = (&sock, &ctx);
                scope.spawn(move || -> Res<()> {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| format!("tokio runtime: {e}"))?;
                    let client = rt.block_on(connect(sock))?;
                    for i in 0..per_client {
                        let req = DecideRequest {
                            context: ctx.clone(),
                            decision: Some(format!("client {c} rpc decision {i}")),
                            blame: Some("bench".into()),
                            ..DecideRequest::default()
                        };
                        rt.block_on(client.decide(req)).map_err(rpc_err("decide"))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| "a client thread panicked".to_string())??;
        }
        Ok(())
    })?;
    let n = CLIENTS * per_client;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "  {n} decide RPCs ({CLIENTS} connections at once): {:.2} s, {:.0} decisions/s",
        secs,
        n as f64 / secs
    );
    report.note(format!(
        "decide x{CLIENTS} clients, RPC: {:.0} decisions/s",
        n as f64 / secs
    ));
    let ticks = repo.tick_files().len();
    let chain = evd_e2e::chain(&repo).len();
    if ticks != chain {
        return Err(format!(
            "{ticks} tick files but a chain of {chain}: the writes forked"
        ));
    }
    println!("  one linear chain of {chain} ticks");
    Ok(())
}

/// `n` canonical intake records, each with a chosen ground and a road not taken.
fn canonical_history(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let line = serde_json::json!({
            "kind": "ev-decision-intake",
            "decision": format!("decision number {i} from the old tracker"),
            "observe": format!("round R{i}"),
            "grounds": [
                {"claim": format!("the reason for decision {i}"), "supports": "chosen"},
                {"claim": "too heavy for what it buys", "supports": "rejected:the-other-way"}
            ],
            "blame": "Wang Yu",
            "source_ref": format!("R{i}"),
            "provenance": "imported"
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

/// Section 5: a 10,000-record backfill as one whole `evctl migrate` process against the warm
/// daemon (read the file, one streamed call, every tick durable, HEAD moved once), into a fresh
/// store each round; then the idempotent re-run. Returns the import rate (records/s at p50).
fn bench_migrate(w: &World, report: &mut Report) -> Res<Option<f64>> {
    const RECORDS: usize = 10_000;
    const ROUNDS: usize = 3;
    println!(
        "\n5. `evctl migrate --source canonical:…` — {RECORDS} records, one whole evctl process, warm daemon"
    );
    if cfg!(debug_assertions) {
        println!("  skipped: migrate throughput is measured only in a release build");
        return Ok(None);
    }
    let text = canonical_history(RECORDS);
    println!(
        "  source: {RECORDS} canonical lines, {:.1} MiB; a fresh store per round",
        text.len() as f64 / (1024.0 * 1024.0)
    );
    let (mut import, mut rerun) = (Vec::new(), Vec::new());
    let want_import = format!("imported {RECORDS}, skipped 0, re-linked 0, 0 source-only gap(s)\n");
    let want_rerun = format!("imported 0, skipped {RECORDS}, re-linked 0, 0 source-only gap(s)\n");
    for _ in 0..ROUNDS {
        let repo = evd_e2e::Repo::new();
        let root = fs::canonicalize(repo.path()).map_err(|e| format!("canonicalize: {e}"))?;
        w.evctl(&root, &["init"])?;
        fs::write(root.join("history.jsonl"), &text)
            .map_err(|e| format!("writing the source: {e}"))?;
        let args = ["migrate", "--source", "canonical:history.jsonl"];
        let t = Instant::now();
        let out = w.evctl(&root, &args)?;
        import.push(t.elapsed());
        if out != want_import {
            return Err(format!("migrate answered {out:?}"));
        }
        let t = Instant::now();
        let out = w.evctl(&root, &args)?;
        rerun.push(t.elapsed());
        if out != want_rerun {
            return Err(format!("the re-run answered {out:?}"));
        }
    }
    let s = report.add("migrate", "10k rec", "evctl process, import", stats(import));
    let r = report.add("migrate", "10k rec", "evctl process, re-run", stats(rerun));
    let rate = RECORDS as f64 / s.p50.as_secs_f64();
    println!(
        "  import: {rate:.0} records/s (p50; best {:.0}/s); idempotent re-run (all skipped): {:.0} records/s",
        RECORDS as f64 / s.min.as_secs_f64(),
        RECORDS as f64 / r.p50.as_secs_f64()
    );
    Ok(Some(rate))
}

/// `check` on a generated store, with the store's own configuration (the `live-origin`
/// staleness policy, resolved through the repository's upstream): the whole
/// `evctl check --exit-on-red` process against the warm daemon, side by side with a cold
/// evaluation (evd's engine on a fresh in-process Store, git queries included: what upstream
/// pays on every call), upstream ev's own check when asked for, and how long a receipt appended
/// by another process takes to reach its tick's state file with no command run.
fn bench_check(w: &World, fx: &Fixture, report: &mut Report, daemon_pid: u32) -> Res<()> {
    let root = &fx.root;
    let label = fx.label;
    println!("  check (the store's own policy: live-origin, a local upstream):");
    let args = ["check", "--exit-on-red"];
    let t = Instant::now();
    let gated = w.evctl_gate(root, &args)?;
    println!(
        "    first `evctl check --exit-on-red` (evd evaluates; trigger answers not yet known): {} (gating: {gated})",
        fmt_dur(t.elapsed())
    );
    let t = Instant::now();
    w.evctl_gate(root, &args)?;
    println!(
        "    second (answered from the evaluation kept in memory): {}",
        fmt_dur(t.elapsed())
    );
    let warm = report.add(
        "check",
        label,
        "evctl --exit-on-red, warm evd",
        measure(fx.runs_process, 3, || w.evctl_gate(root, &args).map(|_| ()))?,
    );
    println!(
        "    evd RSS after the checks: {} (peak {})",
        fmt_kb(proc_status_kb(daemon_pid, "VmRSS")),
        fmt_kb(proc_status_kb(daemon_pid, "VmHWM"))
    );
    let mut ctx = context_for(root);
    ctx.git.upstream = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "@{upstream}"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    let req = proto::rpc::CheckRequest {
        context: ctx,
        offline: false,
        attest: None,
        ran: false,
        form: proto::rpc::RowForm::Plain,
    };
    let cold = report.add(
        "check",
        label,
        "cold evaluation, in-process",
        measure(
            match fx.ticks {
                0..=5_000 => 10,
                5_001..=50_000 => 3,
                _ => 1,
            },
            0,
            || {
                let mut store = Store::new(root.clone());
                ops::check(&mut store, &req)
                    .map(|_| ())
                    .map_err(|e| e.message)
            },
        )?,
    );
    println!(
        "    warm evctl check is {:.0}x faster than a cold evaluation (p50)",
        cold.p50.as_secs_f64() / warm.p50.as_secs_f64().max(1e-9)
    );
    if std::env::var_os("EVBENCH_UPSTREAM").is_some() && fx.ticks <= 10_000 {
        let ev = evd_e2e::upstream_ev();
        let t = Instant::now();
        let out = w
            .command(&ev)
            .current_dir(root)
            .args(["check"])
            .output()
            .map_err(|e| format!("upstream ev: {e}"))?;
        println!(
            "    upstream `ev check` on the same store: {} (exit {})",
            fmt_dur(t.elapsed()),
            out.status.code().unwrap_or(-1)
        );
    }
    // The in-process checks rewrote state files behind evd's back: let it take them in.
    w.evctl_gate(root, &args)?;
    // Receipt -> state file: flip one bound selector between green and red.
    let Some((tick, selector, platforms)) = first_test_binding(root, &fx.head_sha) else {
        println!("    (no test binding to time a receipt with)");
        return Ok(());
    };
    let state = root
        .join(".evolving/results/state")
        .join(format!("{tick}.json"));
    let key = proto::id::receipt_key(&selector);
    let receipts = root
        .join(".evolving/results/receipts")
        .join(format!("{key}.jsonl"));
    let mut lat = Vec::new();
    for i in 0..10 {
        let result = if i % 2 == 0 { "red" } else { "green" };
        let before = fs::read_to_string(&state).unwrap_or_default();
        let mut lines = String::new();
        for p in &platforms {
            let r = evd::engine::receipts::Receipt {
                test: selector.clone(),
                platform: p.clone(),
                commit: fx.head_sha.clone(),
                ran_at: evd::engine::clock::now_rfc3339(),
                result: if result == "red" {
                    evd::engine::receipts::RunResult::Red
                } else {
                    evd::engine::receipts::RunResult::Green
                },
                falsifiable: Some(true),
            };
            lines.push_str(&r.line());
        }
        let t = Instant::now();
        evd::sys::fsio::append(&receipts, lines.as_bytes())
            .map_err(|e| format!("append receipt: {e}"))?;
        loop {
            let now = fs::read_to_string(&state).unwrap_or_default();
            if now != before {
                break;
            }
            if t.elapsed() > Duration::from_secs(30) {
                return Err("the state file did not change within 30 s of a receipt".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        lat.push(t.elapsed());
    }
    report.add("receipt", label, "-> state file (no command)", stats(lat));
    let t = Instant::now();
    w.evctl_gate(root, &args)?;
    println!(
        "    first check after those receipts: {}",
        fmt_dur(t.elapsed())
    );
    Ok(())
}

/// The first current test binding of a store: (tick id, selector, platforms).
/// The first gating-capable test binding verified at `verified_at` (the staleness reference):
/// since 0.1.29 one verified elsewhere whose triggers later commits touched reads stale whatever
/// its receipts say, and a receipt could not move it.
fn first_test_binding(root: &Path, verified_at: &str) -> Option<(String, String, Vec<String>)> {
    let mut store = evd::store::Store::new(root.to_path_buf());
    let current = store.current_ticks().ok()?;
    current.into_iter().find_map(|(_, t)| {
        t.grounds.iter().find_map(|g| match &g.check {
            Some(proto::model::Check::Test {
                reference,
                liveness,
                counter_test: Some(_),
                verified_at_sha,
            }) if !t.is_detect_only()
                && !t.is_agent_proposed()
                && verified_at_sha == verified_at =>
            {
                Some((t.id.clone(), reference.clone(), liveness.platforms.clone()))
            }
            _ => None,
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Pressure: what a long-lived evd holds under many stores, many directories without a store, a
// crowd of idle connections, and unwatched (degraded) stores

/// What evd holds at one moment: from /proc, and from `evctl status --json`.
struct Footprint {
    threads: Option<u64>,
    /// Descriptors whose link is `anon_inode:inotify`, and the distinct instances among them.
    inotify: (usize, usize),
    rss: Option<u64>,
    hwm: Option<u64>,
    /// Lines of /proc/<pid>/maps: memory mappings (thread stacks, heaps) still held.
    maps: usize,
    status: DaemonStatus,
}

impl Footprint {
    fn take(w: &World, pid: u32) -> Res<Footprint> {
        let status = w.status()?;
        Ok(Footprint {
            // Not a kB field, but the same "Name:\t<number>" line.
            threads: proc_status_kb(pid, "Threads"),
            inotify: inotify_instances(pid),
            rss: proc_status_kb(pid, "VmRSS"),
            hwm: proc_status_kb(pid, "VmHWM"),
            maps: fs::read_to_string(format!("/proc/{pid}/maps")).map_or(0, |m| m.lines().count()),
            status,
        })
    }

    fn threads(&self) -> u64 {
        self.threads.unwrap_or(0)
    }

    /// How many listed stores are watched, and the distinct other watch states.
    fn watch_states(&self) -> (usize, Vec<String>) {
        let stores = &self.status.stores;
        let watched = stores.iter().filter(|s| s.watch == "watched").count();
        let mut other: Vec<String> = stores
            .iter()
            .filter(|s| s.watch != "watched")
            .map(|s| s.watch.clone())
            .collect();
        other.sort();
        other.dedup();
        (watched, other)
    }

    fn print(&self, when: &str) {
        let r = &self.status.resources;
        let (watched, other) = self.watch_states();
        println!(
            "  {when}: threads {}, inotify {} instance(s) in {} fd(s) (status: {} instance(s), {} watch(es)), \
             stores listed {} ({watched} watched{}), open_stores {}, connections {}, RSS {}, peak {}, {} mappings",
            self.threads(),
            self.inotify.1,
            self.inotify.0,
            r.inotify_instances,
            r.inotify_watches,
            self.status.stores.len(),
            if other.is_empty() {
                String::new()
            } else {
                format!("; other: {}", other.join(" | "))
            },
            r.open_stores,
            r.connections,
            fmt_kb(self.rss),
            fmt_kb(self.hwm),
            self.maps
        );
    }
}

/// inotify descriptors the process `pid` holds, and how many distinct instances they are: a
/// descriptor duplicated (evd's event pump polls a dup of its one instance) is the same
/// instance, told apart with kcmp(2) (allowed on our own child; else every descriptor counts).
fn inotify_instances(pid: u32) -> (usize, usize) {
    let fds: Vec<i64> = fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == "anon_inode:inotify")
                })
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    const KCMP_FILE: libc::c_long = 0;
    let same = |a: i64, b: i64| {
        // SAFETY: kcmp only compares two descriptors of a process; it touches no memory of ours.
        unsafe { libc::syscall(libc::SYS_kcmp, pid, pid, KCMP_FILE, a, b) == 0 }
    };
    let distinct = fds
        .iter()
        .enumerate()
        .filter(|&(i, &fd)| !fds[..i].iter().any(|&earlier| same(earlier, fd)))
        .count();
    (fds.len(), distinct)
}

/// Raise this process's soft limit on open files to the hard one; returns the limit now in force.
fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim = want;
            }
        }
    }
    lim.rlim_cur
}

/// Run `f(0..n)` on `workers` threads (indices handed out in order); the results in index order.
fn parallel<T: Send>(n: usize, workers: usize, f: impl Fn(usize) -> Res<T> + Sync) -> Res<Vec<T>> {
    let next = AtomicUsize::new(0);
    let mut out: Vec<(usize, T)> = std::thread::scope(|scope| -> Res<Vec<(usize, T)>> {
        let handles: Vec<_> = (0..workers.max(1))
            .map(|_| {
                scope.spawn(|| -> Res<Vec<(usize, T)>> {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return Ok(mine);
                        }
                        mine.push((i, f(i)?));
                    }
                })
            })
            .collect();
        let mut all = Vec::with_capacity(n);
        for h in handles {
            all.extend(
                h.join()
                    .map_err(|_| "a worker thread panicked".to_string())??,
            );
        }
        Ok(all)
    })?;
    out.sort_by_key(|(i, _)| *i);
    Ok(out.into_iter().map(|(_, t)| t).collect())
}

/// Worker threads for the many short evctl processes (the machine may have only 2 cores).
const PRESSURE_WORKERS: usize = 3;

/// A small store in a fresh git repository: `init`, one decision, one `check` (so evd opens and
/// watches it).
fn small_store(w: &World, i: usize) -> Res<evd_e2e::Repo> {
    let repo = evd_e2e::Repo::new();
    w.evctl(repo.path(), &["init"])?;
    w.evctl(
        repo.path(),
        &["decide", &format!("pressure store {i}"), "--blame", "bench"],
    )?;
    w.evctl(repo.path(), &["check"])?;
    Ok(repo)
}

/// One line of the pressure summary: what was measured, the number, the target and whether it
/// was met (None: no target).
struct Verdict {
    what: String,
    value: String,
    target: String,
    met: Option<bool>,
}

#[derive(Default)]
struct PressureSummary {
    lines: Vec<Verdict>,
}

impl PressureSummary {
    fn add(&mut self, what: impl Into<String>, value: String, target: &str, met: Option<bool>) {
        self.lines.push(Verdict {
            what: what.into(),
            value,
            target: target.into(),
            met,
        });
    }

    fn print(&self) {
        let line = "-".repeat(100);
        println!("{line}");
        println!(
            "{:<44} {:<30} {:<14} verdict",
            "pressure", "value", "target"
        );
        println!("{line}");
        for v in &self.lines {
            let verdict = match v.met {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "",
            };
            println!("{:<44} {:<30} {:<14} {verdict}", v.what, v.value, v.target);
        }
        println!("{line}");
    }
}

const MAX_THREADS: u64 = 64;
const MAX_RSS_KB: u64 = 150 * 1024;

/// Threads and RSS of `fp` into the summary, against the issue's targets.
fn summarize_footprint(sum: &mut PressureSummary, when: &str, fp: &Footprint) {
    sum.add(
        format!("evd threads {when}"),
        fp.threads().to_string(),
        "<= 64",
        Some(fp.threads() <= MAX_THREADS),
    );
    sum.add(
        format!("evd RSS {when}"),
        format!("{} (peak {})", fmt_mib(fp.rss), fmt_mib(fp.hwm)),
        "<= 150 MiB",
        fp.rss.map(|k| k <= MAX_RSS_KB),
    );
}

fn fmt_mib(kb: Option<u64>) -> String {
    kb.map_or_else(|| "n/a".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

/// P1: threads and inotify instances with 1, 40 and 300 stores in use. Returns the stores.
fn pressure_many_stores(w: &World, sum: &mut PressureSummary) -> Res<Vec<evd_e2e::Repo>> {
    println!("\nP1. evd threads and inotify instances with 1, 40 and 300 stores in use (init, decide, check each)");
    let daemon = w.start_daemon()?;
    // evd's default cap on open stores (this bench's evd runs without EVD_MAX_OPEN_STORES).
    let cap = evd::daemon::registry::Limits::default().max_open;
    let mut stores = Vec::new();
    for n in [1, 40, 300] {
        let t = Instant::now();
        let first = stores.len();
        stores.extend(parallel(n - first, PRESSURE_WORKERS, |i| {
            small_store(w, first + i)
        })?);
        println!(
            "  {} more store(s) made in {}",
            n - first,
            fmt_dur(t.elapsed())
        );
        let fp = Footprint::take(w, daemon.pid)?;
        fp.print(&format!("{n:>3} stores"));
        let (watched, _) = fp.watch_states();
        let open = fp.status.resources.open_stores;
        sum.add(
            format!("{n} stores: inotify instances (fds)"),
            format!("{} ({})", fp.inotify.1, fp.inotify.0),
            "1",
            Some(fp.inotify.1 <= 1),
        );
        sum.add(
            format!("{n} stores: open / listed / watched"),
            format!("{open} / {} / {watched}", fp.status.stores.len()),
            &format!("<= {cap} (cap)"),
            Some(open <= cap as u64),
        );
        summarize_footprint(sum, &format!("with {n} stores"), &fp);
    }
    Ok(stores)
}

/// An answer with the directory it was asked in replaced by `<dir>`, so answers compare.
fn answer_in(w: &World, dir: &Path, args: &[&str]) -> Res<(Option<i32>, String, String)> {
    let out = w.evctl_output(dir, args)?;
    let shown = dir.display().to_string();
    let norm = |b: &[u8]| String::from_utf8_lossy(b).replace(&shown, "<dir>");
    Ok((out.status.code(), norm(&out.stdout), norm(&out.stderr)))
}

/// P2: 5,000 `evctl list` in distinct directories without a store, then 300 real stores in
/// turn (decide + list each), on a fresh evd; its footprint after each phase.
fn pressure_rss(w: &World, stores: &[evd_e2e::Repo], sum: &mut PressureSummary) -> Res<()> {
    const DIRS: usize = 5_000;
    println!("\nP2. evd footprint after {DIRS} `evctl list` in distinct directories without a store, then {} stores in turn", stores.len());
    let daemon = w.start_daemon()?;
    let parent = tempfile::Builder::new()
        .prefix("evbench-nostore-")
        .tempdir()
        .map_err(|e| format!("tempdir: {e}"))?;
    let dir = |i: usize| -> Res<PathBuf> {
        let d = parent.path().join(format!("d{i}"));
        fs::create_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        Ok(d)
    };
    let want = answer_in(w, &dir(DIRS)?, &["list"])?;
    println!(
        "  the answer without a store: exit {:?}, stdout {:?}, stderr {:?}",
        want.0, want.1, want.2
    );
    let t = Instant::now();
    let wrong = parallel(DIRS, PRESSURE_WORKERS, |i| {
        let d = dir(i)?;
        let got = answer_in(w, &d, &["list"])?;
        Ok((got != want).then(|| format!("{}: {got:?}", d.display())))
    })?;
    let wrong: Vec<String> = wrong.into_iter().flatten().collect();
    println!(
        "  {DIRS} lists in {} ({PRESSURE_WORKERS} at a time); {} answer(s) differed from it",
        fmt_dur(t.elapsed()),
        wrong.len()
    );
    for x in wrong.iter().take(3) {
        println!("    WRONG ANSWER {x}");
    }
    let fp = Footprint::take(w, daemon.pid)?;
    fp.print(&format!("after {DIRS} lists without a store"));
    summarize_footprint(sum, &format!("after {DIRS} no-store lists"), &fp);
    sum.add(
        format!("{DIRS} no-store lists: wrong answers"),
        wrong.len().to_string(),
        "0",
        Some(wrong.is_empty()),
    );

    // Each store already holds one decision (P1): after this decide, its list shows two.
    let t = Instant::now();
    let wrong = parallel(stores.len(), PRESSURE_WORKERS, |i| {
        let root = stores[i].path();
        let text = format!("pressure round two {i}");
        w.evctl(root, &["decide", &text, "--blame", "bench"])?;
        let out = w.evctl(root, &["list"])?;
        let ok = out.lines().count() == 2 && out.contains(&format!("\"{text}\""));
        Ok((!ok).then(|| format!("{}: {out:?}", root.display())))
    })?;
    let wrong: Vec<String> = wrong.into_iter().flatten().collect();
    println!(
        "  {} stores used in turn (decide + list) in {}; {} wrong list(s)",
        stores.len(),
        fmt_dur(t.elapsed()),
        wrong.len()
    );
    for x in wrong.iter().take(3) {
        println!("    WRONG ANSWER {x}");
    }
    let fp = Footprint::take(w, daemon.pid)?;
    fp.print(&format!("after {} stores in turn", stores.len()));
    summarize_footprint(sum, &format!("after {} stores too", stores.len()), &fp);
    sum.add(
        format!("{} stores: wrong lists", stores.len()),
        wrong.len().to_string(),
        "0",
        Some(wrong.is_empty()),
    );
    Ok(())
}

/// The start of an HTTP request whose body is never finished (trickled a byte at a time).
fn partial_http(sock: &Path) -> Option<std::os::unix::net::UnixStream> {
    let mut s = std::os::unix::net::UnixStream::connect(sock).ok()?;
    s.write_all(
        b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
          Content-Length: 4000\r\n\r\n{",
    )
    .ok()?;
    Some(s)
}

/// Whether evd still holds the other end: anything it sent is read away, then end-of-file or an
/// error means closed.
fn still_open(s: &std::os::unix::net::UnixStream) -> bool {
    if s.set_nonblocking(true).is_err() {
        return false;
    }
    let mut buf = [0u8; 4096];
    loop {
        match (&*s).read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}

/// P3: whole-process `evctl list` latency while 2,000 idle connections are open (500 silent,
/// 500 partial HTTP requests trickled a byte a second, 1,000 WebSockets with no subscription).
fn pressure_idle_connections(
    w: &World,
    store: &Path,
    report: &mut Report,
    sum: &mut PressureSummary,
) -> Res<()> {
    const GROUPS: usize = 500;
    const WINDOW: Duration = Duration::from_secs(10);
    println!("\nP3. `evctl list` latency (whole process) while 2,000 idle connections are open");
    let limit = raise_fd_limit();
    println!("  evbench's open-file limit: {limit}");
    let daemon = w.start_daemon()?;
    let list_ok = || -> Res<bool> { Ok(w.evctl(store, &["list"])?.lines().count() == 2) };
    report.add(
        "list",
        "small",
        "evctl, no crowd",
        measure(20, 2, || list_ok().map(|_| ()))?,
    );

    let sock = w.socket();
    let (mut silent, mut slow, mut sockets, mut failed) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let t = Instant::now();
    for _ in 0..GROUPS {
        match std::os::unix::net::UnixStream::connect(&sock) {
            Ok(s) => silent.push(s),
            Err(_) => failed += 1,
        }
        match partial_http(&sock) {
            Some(s) => slow.push(s),
            None => failed += 1,
        }
        for _ in 0..2 {
            match evd_e2e::idle_websocket(&sock) {
                Some(s) => sockets.push(s),
                None => failed += 1,
            }
        }
    }
    println!(
        "  opened {} silent, {} partial HTTP, {} WebSockets ({failed} failed) in {}",
        silent.len(),
        slow.len(),
        sockets.len(),
        fmt_dur(t.elapsed())
    );
    let open = |v: &[std::os::unix::net::UnixStream]| v.iter().filter(|s| still_open(s)).count();
    let count_open = || (open(&silent), open(&slow), open(&sockets));
    let at_start = count_open();
    let crowd = Footprint::take(w, daemon.pid)?;
    println!(
        "  right after: still open {} silent, {} partial HTTP, {} WebSockets; evd counts {} connection(s)",
        at_start.0, at_start.1, at_start.2, crowd.status.resources.connections
    );
    crowd.print("with the crowd just opened");

    let stop = AtomicBool::new(false);
    let (lat, wrong) = std::thread::scope(|scope| -> Res<(Vec<Duration>, usize)> {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                for s in &slow {
                    let _ = (&*s).write_all(b" ");
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        let measured = (|| {
            let (mut lat, mut wrong) = (Vec::new(), 0);
            let started = Instant::now();
            while started.elapsed() < WINDOW || lat.len() < 20 {
                let t = Instant::now();
                let ok = list_ok()?;
                lat.push(t.elapsed());
                wrong += usize::from(!ok);
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok((lat, wrong))
        })();
        stop.store(true, Ordering::Relaxed);
        measured
    })?;
    let s = report.add("list", "small", "evctl, 2,000 idle conns", stats(lat));
    let (o_silent, o_slow, o_ws) = count_open();
    let fp = Footprint::take(w, daemon.pid)?;
    println!(
        "  {} lists over {} s; {wrong} wrong; still open at the end: {o_silent} silent, {o_slow} partial HTTP, {o_ws} WebSockets (evd counts {} connection(s))",
        s.n,
        WINDOW.as_secs(),
        fp.status.resources.connections
    );
    fp.print("at the end of the window");
    sum.add(
        "list during 2,000 idle conns: p50/p99/max",
        format!(
            "{} / {} / {}",
            fmt_dur(s.p50),
            fmt_dur(s.p99),
            fmt_dur(s.max)
        ),
        "max < 1 s",
        Some(s.max < Duration::from_secs(1)),
    );
    sum.add(
        "list during 2,000 idle conns: wrong",
        format!("{wrong} of {}", s.n),
        "0",
        Some(wrong == 0),
    );
    sum.add(
        "idle conns open just after (evd's count)",
        format!(
            "{} ({})",
            at_start.0 + at_start.1 + at_start.2,
            crowd.status.resources.connections
        ),
        "",
        None,
    );
    sum.add(
        "idle conns still open at the end",
        format!(
            "{} of {} ({o_silent}/{o_slow}/{o_ws})",
            o_silent + o_slow + o_ws,
            silent.len() + slow.len() + sockets.len()
        ),
        "",
        None,
    );
    summarize_footprint(sum, "with 2,000 idle conns", &crowd);
    Ok(())
}

/// A warm check series on a fresh evd, the store's watch state as evd reported it, and the
/// answer of one more check (exit code and stdout) to compare with the other evd's.
struct CheckRun {
    stats: Stats,
    watch: String,
    answer: (Option<i32>, String),
}

/// `evctl check --exit-on-red`, warm, on `fx` with a fresh evd started with `env`.
fn warm_check(
    w: &World,
    fx: &Fixture,
    env: &[(&str, &str)],
    via: &str,
    report: &mut Report,
) -> Res<CheckRun> {
    let daemon = w.start_daemon_with(env)?;
    let args = ["check", "--exit-on-red"];
    let t = Instant::now();
    let gated = w.evctl_gate(&fx.root, &args)?;
    println!(
        "  {via}: first check {} (gating: {gated})",
        fmt_dur(t.elapsed())
    );
    let s = measure(fx.runs_process, 3, || {
        w.evctl_gate(&fx.root, &args).map(|_| ())
    })?;
    let stats = report.add("check", fx.label, via, s);
    let out = w.evctl_output(&fx.root, &args)?;
    let answer = (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    );
    let fp = Footprint::take(w, daemon.pid)?;
    let watch = fp
        .status
        .stores
        .first()
        .map(|s| s.watch.clone())
        .unwrap_or_default();
    println!("    watch state: {watch}; RSS {}", fmt_kb(fp.rss));
    Ok(CheckRun {
        stats,
        watch,
        answer,
    })
}

/// P4: a degraded (unwatched, `EVD_NO_WATCH=1`) warm check against a watched one, same store.
fn pressure_degraded_check(
    w: &World,
    fx: &Fixture,
    report: &mut Report,
    sum: &mut PressureSummary,
) -> Res<()> {
    println!(
        "\nP4. warm `evctl check --exit-on-red` at {} ticks: watched evd vs EVD_NO_WATCH=1 (degraded)",
        fx.ticks
    );
    let watched = warm_check(w, fx, &[], "evctl check, watched", report)?;
    let degraded = warm_check(
        w,
        fx,
        &[("EVD_NO_WATCH", "1")],
        "evctl check, EVD_NO_WATCH",
        report,
    )?;
    println!(
        "  degraded costs {:.1}x the watched check (p50)",
        degraded.stats.p50.as_secs_f64() / watched.stats.p50.as_secs_f64().max(1e-9)
    );
    let agree = watched.answer == degraded.answer;
    println!(
        "  answers: watched exit {:?}, {} line(s); degraded exit {:?}, {} line(s): {}",
        watched.answer.0,
        watched.answer.1.lines().count(),
        degraded.answer.0,
        degraded.answer.1.lines().count(),
        if agree {
            "identical"
        } else {
            "WRONG ANSWER: they differ"
        }
    );
    for (what, run) in [("watched", &watched), ("degraded", &degraded)] {
        println!("  {what}: evd reported the store as {:?}", run.watch);
        sum.add(
            format!("{} check, {what}: p50 / p99", fx.label),
            format!("{} / {}", fmt_dur(run.stats.p50), fmt_dur(run.stats.p99)),
            "",
            None,
        );
    }
    sum.add(
        format!("{} check: degraded answer = watched", fx.label),
        if agree { "yes" } else { "no" }.into(),
        "yes",
        Some(agree),
    );
    Ok(())
}

/// The pressure section: P1–P4, each on its own fresh evd, and a summary against the targets.
/// `big` is a 10k-tick store already generated, if the caller has one.
fn bench_pressure(w: &World, big: Option<&Fixture>, report: &mut Report) -> Res<()> {
    let started = Instant::now();
    let mut sum = PressureSummary::default();
    let stores = pressure_many_stores(w, &mut sum)?;
    pressure_rss(w, &stores, &mut sum)?;
    pressure_idle_connections(w, stores[0].path(), report, &mut sum)?;
    let generated;
    let big = match big {
        Some(fx) => fx,
        None => {
            generated = make_fixture("10k", 10_000, 2)?;
            &generated
        }
    };
    pressure_degraded_check(w, big, report, &mut sum)?;
    println!(
        "\npressure summary ({} for the section; load average now {}):",
        fmt_dur(started.elapsed()),
        load_average()
    );
    sum.print();
    Ok(())
}

fn run(report: &mut Report) -> Res<()> {
    let bins = locate_bins()?;
    let started = Instant::now();

    println!("evbench — evd/evctl latency and memory");
    let par = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| "?".into());
    // SAFETY: sysconf only reads a system constant.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    println!(
        "machine: {par} core(s) available to this process ({online} online), cpu: {}",
        cpu_model().unwrap_or_else(|| "?".into())
    );
    println!("load average at start: {}", load_average());
    if cfg!(debug_assertions) {
        println!("WARNING: evbench itself is a debug build: in-process numbers are not representative (use --release)");
    }
    println!("evd:   {}", bins.evd.display());
    println!("evctl: {}", bins.evctl.display());

    // `evbench fuzz [--cases N] [--only TARGET]`: the fault campaign's property tests, long.
    if std::env::args().skip(1).any(|a| a == "fuzz") {
        return fuzz_section();
    }
    // `evbench soak --minutes M [--stores N] [--kill-every SECS]`: traffic and kills, then the
    // account of every write.
    if std::env::args().skip(1).any(|a| a == "soak") {
        return soak_section();
    }

    let w = World::new(bins)?;
    println!(
        "private XDG_RUNTIME_DIR: {} (fs {})",
        w.xdg.path().display(),
        fs_type(w.xdg.path()).unwrap_or_else(|| "?".into())
    );

    // `evbench lsp`: only the language server's update latency (its own daemon and store).
    if std::env::args().skip(1).any(|a| a == "lsp") {
        return evd_e2e::bench_lsp::run(&w.bins.evd, &w.bins.evctl);
    }

    // `evbench migrate`: only the migrate section (no generated stores, no read benches).
    if std::env::args().skip(1).any(|a| a == "migrate") {
        let mut daemon = w.start_daemon()?;
        let rate = bench_migrate(&w, report)?;
        println!("\nshutdown: {}", daemon.shutdown());
        println!("\nsummary ({} total):", fmt_dur(started.elapsed()));
        report.table();
        if let Some(rate) = rate {
            println!(
                "migrate: {rate:.0} records/s (10,000 canonical records, whole evctl process)"
            );
        }
        return Ok(());
    }

    if bench_hooks::selected() {
        return bench_hooks::run(&w, report, started);
    }
    if bench_ledger::selected() {
        return bench_ledger::run(&w, report, started);
    }
    if bench_follow::selected() {
        return bench_follow::run(&w, report, started);
    }
    if bench_team::selected() {
        return bench_team::run(&w, report, started);
    }
    if bench_report::selected() {
        return bench_report::run(&w, report, started);
    }

    // `evbench store`: memory, verify, list and check against upstream, one store at a time.
    if bench_store::selected() {
        return bench_store::run(&w, report, started);
    }

    // `evbench pressure`: only the pressure section (its own daemons, its own stores).
    if std::env::args().skip(1).any(|a| a == "pressure") {
        bench_pressure(&w, None, report)?;
        println!("\nsummary ({} total):", fmt_dur(started.elapsed()));
        report.table();
        return Ok(());
    }

    // `evbench check`: only the check section, on 1k, 10k and 100k-tick stores.
    if std::env::args().skip(1).any(|a| a == "check") {
        let fixtures = size_fixtures()?;
        let mut daemon = w.start_daemon()?;
        let mut held = Vec::new();
        for fx in &fixtures {
            println!("\n-- {} ticks ({}) --", fx.ticks, fx.label);
            let t = Instant::now();
            w.evctl(&fx.root, &["list"])?;
            println!(
                "  first `evctl list` (evd opens the store): {}; evd RSS now {}",
                fmt_dur(t.elapsed()),
                fmt_kb(proc_status_kb(daemon.pid, "VmRSS"))
            );
            bench_check(&w, fx, report, daemon.pid)?;
            held.push((fx.label, proc_status_kb(daemon.pid, "VmRSS")));
        }
        let peak = proc_status_kb(daemon.pid, "VmHWM");
        println!("\nshutdown: {}", daemon.shutdown());
        println!(
            "\nsummary ({} total; load average now {}):",
            fmt_dur(started.elapsed()),
            load_average()
        );
        report.table();
        for (label, rss) in held {
            println!(
                "memory: evd RSS after checking the {label} store (all stores so far held): {}",
                fmt_kb(rss)
            );
        }
        println!("memory: evd peak (VmHWM): {}", fmt_kb(peak));
        return Ok(());
    }

    println!("\nsetup:");
    let small = make_fixture("1k", 1_000, 1)?;
    let big = make_fixture("10k", 10_000, 2)?;
    println!(
        "  stores on fs {}",
        fs_type(big.dir.path()).unwrap_or_else(|| "?".into())
    );

    let mut daemon = w.start_daemon()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let client = rt.block_on(connect(&w.socket()))?;
    let hello = rt
        .block_on(client.hello(HelloRequest {
            protocol: PROTOCOL_VERSION,
            build_id: evd::sys::paths::build_identity(&w.bins.evd, None).unwrap_or_default(),
            client: "evbench".into(),
        }))
        .map_err(rpc_err("hello"))?;
    if hello.pid != daemon.pid {
        return Err(format!(
            "the socket is answered by pid {}, not the evd this bench started (pid {})",
            hello.pid, daemon.pid
        ));
    }
    if !hello.compatible {
        return Err("evd says this build is not compatible with its own binary".into());
    }
    // Let the fresh daemon settle before reading its idle footprint.
    std::thread::sleep(Duration::from_millis(100));
    let rss_idle = proc_status_kb(daemon.pid, "VmRSS");
    println!(
        "  evd pid {} (version {}) — RSS with no store: {}",
        daemon.pid,
        hello.version,
        fmt_kb(rss_idle)
    );

    let decide_ticks = bench_decide(&w, &rt, &client, report)?;
    bench_concurrent_decide(&w, report)?;
    let rss_after_decide = proc_status_kb(daemon.pid, "VmRSS");

    println!("\n3. show / list / verify");
    let mut rss_held = Vec::new();
    for fx in [&small, &big] {
        println!("\n-- {} ticks ({}) --", fx.ticks, fx.label);
        let before = proc_status_kb(daemon.pid, "VmRSS");
        // Warm the daemon: one list loads the store's parsed ticks into its cache.
        let t = Instant::now();
        w.evctl(&fx.root, &["list"])?;
        println!(
            "  first `evctl list` (daemon opens the store and loads its cache): {}",
            fmt_dur(t.elapsed())
        );
        let after = proc_status_kb(daemon.pid, "VmRSS");
        rss_held.push((fx.label, before, after));
        bench_reads(&w, &rt, &client, fx, report)?;
        bench_check(&w, fx, report, daemon.pid)?;
    }
    let rss_end = proc_status_kb(daemon.pid, "VmRSS");
    let hwm_end = proc_status_kb(daemon.pid, "VmHWM");

    println!(
        "\n4. evd resident memory (VmRSS from /proc/{}/status)",
        daemon.pid
    );
    println!(
        "  no store (fresh daemon):                 {}",
        fmt_kb(rss_idle)
    );
    println!(
        "  after the decide benches ({decide_ticks} ticks):  {}",
        fmt_kb(rss_after_decide)
    );
    for (label, before, after) in &rss_held {
        let delta = match (before, after) {
            (Some(b), Some(a)) => format!("{:+.1} MiB", (*a as f64 - *b as f64) / 1024.0),
            _ => "n/a".into(),
        };
        println!(
            "  holding the {label:<3} store (after a list):   {}  (delta for this store {delta})",
            fmt_kb(*after)
        );
    }
    println!(
        "  at the end (after all verifies):         {}",
        fmt_kb(rss_end)
    );
    println!(
        "  peak (VmHWM):                            {}",
        fmt_kb(hwm_end)
    );

    let migrate_rate = bench_migrate(&w, report)?;

    drop(client);
    println!("\nshutdown: {}", daemon.shutdown());

    // Its own daemons, one at a time: after the shared one has gone.
    bench_pressure(&w, Some(&big), report)?;
    evd_e2e::bench_lsp::run(&w.bins.evd, &w.bins.evctl)?;

    println!(
        "\nsummary ({} total; load average now {}):",
        fmt_dur(started.elapsed()),
        load_average()
    );
    report.table();
    println!(
        "memory: evd RSS idle {}, holding 10k store {}, peak {}",
        fmt_kb(rss_idle),
        fmt_kb(rss_held.last().and_then(|(_, _, a)| *a)),
        fmt_kb(hwm_end)
    );
    match migrate_rate {
        Some(rate) => {
            println!("migrate: {rate:.0} records/s (10,000 canonical records, whole evctl process)")
        }
        None => println!("migrate: not measured (debug build)"),
    }
    Ok(())
}

/// `evbench fuzz`: every target of `evd_e2e::fuzz` for `--cases N` generated inputs (10,000 by
/// default; the targets that run a program per input take a tenth), or only `--only TARGET`.
fn fuzz_section() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let cases: u32 = match flag("--cases") {
        Some(n) => n
            .parse()
            .map_err(|_| format!("--cases {n}: not a number"))?,
        None => 10_000,
    };
    let only = flag("--only");
    println!(
        "
fuzz: the doors' parsers, {cases} cases each (program targets: a tenth)"
    );
    let mut failed = Vec::new();
    for t in evd_e2e::fuzz::TARGETS {
        if only.as_deref().is_some_and(|o| o != t) {
            continue;
        }
        let n = if matches!(t, "lsp" | "grammar" | "request_id") {
            (cases / 10).max(1)
        } else {
            cases
        };
        let started = Instant::now();
        let r = evd_e2e::fuzz::run(t, n);
        println!(
            "  {t:<11} {n:>8} cases  {:>10}  {}",
            fmt_dur(started.elapsed()),
            match &r {
                Ok(()) => "no finding".to_string(),
                Err(e) => format!("FINDING: {e}"),
            }
        );
        if r.is_err() {
            failed.push(t);
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("fuzz findings in {failed:?}"))
    }
}

/// `evbench soak`: `evd_e2e::soak` for `--minutes M` (30 by default) over `--stores N` (50)
/// with evd killed every `--kill-every SECS` (20) on average; the account, and what evd held.
fn soak_section() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str, default: f64| -> Res<f64> {
        match args
            .iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
        {
            Some(v) => v.parse().map_err(|_| format!("{name} {v}: not a number")),
            None => Ok(default),
        }
    };
    let minutes = flag("--minutes", 30.0)?;
    let cfg = evd_e2e::soak::Config {
        duration: Duration::from_secs_f64(minutes * 60.0),
        stores: flag("--stores", 50.0)? as usize,
        kill_every: Some(Duration::from_secs_f64(flag("--kill-every", 20.0)?)),
    };
    println!(
        "\nsoak: {minutes} min, {} stores, evd killed every ~{:?}",
        cfg.stores,
        cfg.kill_every.unwrap_or_default()
    );
    let w = evd_e2e::World::new();
    let r = evd_e2e::soak::run(&w, &cfg)?;
    w.stop_daemon();
    let mut ops: Vec<_> = r.ops.iter().collect();
    ops.sort();
    println!("  operations: {ops:?}");
    println!(
        "  kills {}; decides done {} (failed, told so: {}); ledger appends done {}",
        r.kills, r.decides_done, r.decides_failed, r.appends_done
    );
    println!(
        "  lost {} / duplicated {} / ledgers not verifying {} / checks disagreeing {}",
        r.lost.len(),
        r.duplicated.len(),
        r.unverified.len(),
        r.disagreeing.len()
    );
    for line in r
        .lost
        .iter()
        .chain(&r.duplicated)
        .chain(&r.unverified)
        .chain(&r.disagreeing)
    {
        println!("    {line}");
    }
    // What each daemon held: the first and the last sample of each, and the largest.
    let mut by_pid: Vec<(u32, Vec<evd_e2e::soak::Sample>)> = Vec::new();
    for s in &r.samples {
        match by_pid.last_mut() {
            Some((pid, v)) if *pid == s.pid => v.push(*s),
            _ => by_pid.push((s.pid, vec![*s])),
        }
    }
    println!("  evd, per daemon (pid: samples, RSS first → last (max), threads, fds):");
    for (pid, v) in &by_pid {
        let (Some(a), Some(b)) = (v.first(), v.last()) else {
            continue;
        };
        let max = |f: fn(&evd_e2e::soak::Sample) -> u64| v.iter().map(f).max().unwrap_or(0);
        println!(
            "    {pid}: {} sample(s) from {:.0} s, RSS {} → {} KiB (max {}), threads {} → {} (max {}), fds {} → {} (max {})",
            v.len(),
            a.at.as_secs_f64(),
            a.rss_kib,
            b.rss_kib,
            max(|s| s.rss_kib),
            a.threads,
            b.threads,
            max(|s| s.threads),
            a.fds,
            b.fds,
            max(|s| s.fds)
        );
    }
    if r.clean() {
        Ok(())
    } else {
        Err("the soak found lost, duplicated or disagreeing writes".into())
    }
}

fn main() -> std::process::ExitCode {
    let mut report = Report::default();
    match run(&mut report) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("evbench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
