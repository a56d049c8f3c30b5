//! evbench: latency and memory numbers for evd/evctl, printed (not asserted).
//!
//! Run after a release build of the whole workspace:
//!
//! ```text
//! cargo build --release --workspace && cargo run --release -p evd-e2e --bin evbench
//! ```
//!
//! `evbench migrate` runs only the migrate section (10,000 canonical records per `evctl migrate`).
//!
//! It uses the `evd` and `evctl` that sit next to its own executable (target/release/), a private
//! runtime directory (its own daemon, never the user's), and stores made by the repository's own
//! generator (`evd_e2e::store_gen`, also runnable as `cargo run -p evd-e2e --bin gen_store`).
//! Everything it creates lives in temp directories and the daemon is shut down at the end.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use evd::store::Store;
use evd::verbs as ops;
use jsonrpsee::client_transport::ws::{Url, WsTransportClientBuilder};
use jsonrpsee::core::client::{Client, ClientBuilder};
use proto::rpc::{
    Context, DecideRequest, EvApiClient, HelloRequest, IdRequest, StoreRequest, VerifyRequest,
    PROTOCOL_VERSION,
};
use tempfile::TempDir;
use tokio::net::UnixStream;

type Res<T> = Result<T, String>;

/// The release binaries this bench drives.
struct Bins {
    evd: PathBuf,
    evctl: PathBuf,
}

/// `evd` and `evctl` beside this executable, or a clear message saying how to build them.
fn locate_bins() -> Res<Bins> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find evbench itself: {e}"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| format!("{} has no parent directory", exe.display()))?;
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
        evd::paths::socket_path(&self.rt_dir())
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
            .env_remove("EVCTL_DEBUG")
            .env_remove("EV_AGENT_ID")
            .stdin(Stdio::null());
        c
    }

    /// Run `evctl <args>` in `cwd`, wait for it, and fail with its stderr unless it exits 0.
    fn evctl<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> Res<String> {
        let out = self
            .command(&self.bins.evctl)
            .current_dir(cwd)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.bins.evctl.display()))?;
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
        let out = self
            .command(&self.bins.evctl)
            .current_dir(cwd)
            .args(args)
            .stdout(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.bins.evctl.display()))?;
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

    /// Start our own evd in the private runtime dir and wait until its socket answers.
    fn start_daemon(&self) -> Res<Daemon<'_>> {
        evd::paths::ensure_private_dir(&self.rt_dir())
            .map_err(|e| format!("runtime dir {}: {e}", self.rt_dir().display()))?;
        let log = fs::File::create(self.xdg.path().join("evbench-evd.log"))
            .map_err(|e| format!("daemon log: {e}"))?;
        let child = self
            .command(&self.bins.evd)
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
            let req = StoreRequest {
                context: ctx.clone(),
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
            let s = Store::new(root.clone());
            audit = Some(ops::verify(&s, false).map_err(|r| r.message)?);
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
            let s = Store::new(root.clone());
            ops::verify(&s, false).map_err(|r| r.message)?;
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
                let mut store = evd::store::Store::new(root.clone());
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
    let Some((tick, selector, platforms)) = first_test_binding(root) else {
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
            let r = evd::receipts::Receipt {
                test: selector.clone(),
                platform: p.clone(),
                commit: fx.head_sha.clone(),
                ran_at: evd::clock::now_rfc3339(),
                result: if result == "red" {
                    evd::receipts::RunResult::Red
                } else {
                    evd::receipts::RunResult::Green
                },
                falsifiable: Some(true),
            };
            lines.push_str(&r.line());
        }
        let t = Instant::now();
        evd::fsio::append(&receipts, lines.as_bytes())
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
fn first_test_binding(root: &Path) -> Option<(String, String, Vec<String>)> {
    let mut store = evd::store::Store::new(root.to_path_buf());
    let current = store.current().ok()?;
    current.into_iter().find_map(|(_, t)| {
        t.grounds.iter().find_map(|g| match &g.check {
            Some(proto::model::Check::Test {
                reference,
                liveness,
                counter_test: Some(_),
                ..
            }) if !t.is_detect_only() && !t.is_agent_proposed() => {
                Some((t.id.clone(), reference.clone(), liveness.platforms.clone()))
            }
            _ => None,
        })
    })
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

    let w = World::new(bins)?;
    println!(
        "private XDG_RUNTIME_DIR: {} (fs {})",
        w.xdg.path().display(),
        fs_type(w.xdg.path()).unwrap_or_else(|| "?".into())
    );

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

    // `evbench check`: only the check section, on 1k, 10k and 100k-tick stores.
    if std::env::args().skip(1).any(|a| a == "check") {
        let mut fixtures = vec![
            make_fixture("1k", 1_000, 1)?,
            make_fixture("10k", 10_000, 2)?,
        ];
        if !std::env::args().skip(1).any(|a| a == "--no-100k") {
            fixtures.push(make_fixture("100k", 100_000, 3)?);
        }
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
            build_id: evd::paths::exe_fingerprint(&w.bins.evd).unwrap_or_default(),
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
