//! The soak: mixed traffic over many stores for minutes, with evd killed (SIGKILL) at random
//! moments, then an account of every write. `evbench soak --minutes M` runs it long;
//! `tests/tests/soak.rs` runs a short one in the suite.
//!
//! Traffic, from two client threads at once: decides (each with a unique text), checks,
//! receipts appended by another process (as CI does, straight into `results/receipts/`),
//! commits touching a trigger through the installed pre-commit gate, ledger appends (each with
//! a unique intent id) and language-server sessions. A third thread kills the daemon now and
//! then; the next evctl brings a new one up.
//!
//! At the end, with no more kills: every decide and ledger append evctl reported done is there
//! exactly once, nothing is there twice, every store's ledger verifies, the daemon's `check`
//! equals an in-process one on every store, and what evd held (RSS, threads, descriptors) is
//! sampled throughout.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{chain, Repo, Run, World};

/// How a soak runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub duration: Duration,
    pub stores: usize,
    /// Mean time between two kills of evd (`None`: never).
    pub kill_every: Option<Duration>,
}

/// What evd held at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub at: Duration,
    pub pid: u32,
    pub rss_kib: u64,
    pub threads: u64,
    pub fds: u64,
}

/// What a soak did and found.
#[derive(Debug, Default)]
pub struct Report {
    pub ops: HashMap<&'static str, u64>,
    pub kills: u64,
    pub decides_done: u64,
    pub decides_failed: u64,
    pub appends_done: u64,
    /// Acknowledged writes not found, and writes found twice (both must be empty).
    pub lost: Vec<String>,
    pub duplicated: Vec<String>,
    /// Stores whose daemon `check` differs from the in-process one, or whose ledger does not
    /// verify (both must be empty).
    pub disagreeing: Vec<String>,
    pub unverified: Vec<String>,
    pub samples: Vec<Sample>,
}

impl Report {
    pub fn clean(&self) -> bool {
        self.lost.is_empty()
            && self.duplicated.is_empty()
            && self.disagreeing.is_empty()
            && self.unverified.is_empty()
    }
}

/// A tiny deterministic generator (xorshift), seeded per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Everything the clients were told was done, by store.
#[derive(Default)]
struct Acked {
    decides: Vec<(usize, String)>,
    appends: Vec<(usize, String)>,
}

const LIMIT: Duration = Duration::from_secs(60);

fn evctl(w: &World, cwd: &Path, args: &[&str]) -> Run {
    w.evctl_within(cwd, args, LIMIT).unwrap_or(Run {
        code: -1,
        stdout: String::new(),
        stderr: format!("hung: evctl {args:?}"),
    })
}

/// Done, or told it was done before its answer was lost.
fn done(r: &Run) -> bool {
    r.code == 0 || r.stderr.contains("before its answer was lost")
}

fn setup_store(w: &World) -> Result<Repo, String> {
    let r = Repo::new();
    let ok = |run: Run, what: &str| {
        if run.code == 0 {
            Ok(())
        } else {
            Err(format!("{what}: {run:?}"))
        }
    };
    ok(evctl(w, r.path(), &["init"]), "init")?;
    ok(
        evctl(
            w,
            r.path(),
            &[
                "decide",
                "keep the readme short",
                "--assume",
                "it is read",
                "--assume-test",
                "test -f README",
                "--counter-test",
                "test -f NOPE",
                "--on-platform",
                "local",
                "--triggered-by",
                "README",
                "--surface",
                "docs",
                "--blame",
                "soak",
            ],
        ),
        "decide",
    )?;
    ok(evctl(w, r.path(), &["hooks", "install"]), "hooks install")?;
    Ok(r)
}

/// One client's loop until `stop`.
fn client(
    w: &World,
    repos: &[Repo],
    seed: u64,
    stop: &AtomicBool,
    acked: &Mutex<Acked>,
    ops: &Mutex<HashMap<&'static str, u64>>,
    failed: &AtomicU64,
) {
    let mut rng = Rng(seed | 1);
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let i = rng.below(repos.len() as u64) as usize;
        let p = repos[i].path();
        let op = match rng.below(100) {
            0..=34 => "decide",
            35..=59 => "check",
            60..=69 => "receipt",
            70..=79 => "commit",
            80..=94 => "ledger",
            _ => "lsp",
        };
        match op {
            "decide" => {
                let text = format!("soak {seed}-{n}");
                let r = evctl(w, p, &["decide", &text, "--assume", "x", "--blame", "soak"]);
                let mut a = acked.lock().unwrap_or_else(|e| e.into_inner());
                if done(&r) {
                    a.decides.push((i, text));
                } else {
                    failed.fetch_add(1, Ordering::SeqCst);
                }
            }
            "check" => {
                let _ = evctl(w, p, &["check"]);
            }
            "receipt" => {
                // CI's receipt, written by another process straight into the store.
                let head = std::process::Command::new("git")
                    .current_dir(p)
                    .args(["rev-parse", "HEAD"])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                    .unwrap_or_default();
                let line = format!(
                    "{{\"commit\":\"{head}\",\"platform\":\"local\",\"ran_at\":\"2026-01-01T00:00:00Z\",\"result\":\"green\",\"test\":\"test -f README\"}}\n"
                );
                let dir = repos[i].ev_dir().join("results/receipts");
                let _ = std::fs::create_dir_all(&dir);
                let key = proto::id::receipt_key("test -f README");
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(dir.join(format!("{key}.jsonl")))
                {
                    let _ = std::io::Write::write_all(&mut f, line.as_bytes());
                }
            }
            "commit" => {
                let _ = std::fs::write(p.join("README"), format!("soak {seed}-{n}\n"));
                let _ = w.git(p, &["add", "README"]);
                let _ = w.git(p, &["commit", "-q", "-m", &format!("soak {seed}-{n}")]);
            }
            "ledger" => {
                let id = format!("I-{seed}-{n}");
                let file = p.join(format!(".soak-{seed}.jsonl"));
                let ev = format!(
                    "{{\"schema_version\":\"1.1\",\"event_type\":\"intent_created\",\"run_id\":\"R-soak\",\"agent_id\":\"soak\",\"payload\":{{\"intent_id\":\"{id}\",\"parent_intent_id\":null,\"goal\":\"g\",\"constraints\":{{}},\"scope\":{{}}}}}}\n"
                );
                if std::fs::write(&file, ev).is_ok() {
                    let r = evctl(w, p, &["ledger", "append", &file.to_string_lossy()]);
                    if done(&r) {
                        acked
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .appends
                            .push((i, id));
                    }
                }
            }
            _ => {
                let mut cmd = w.command(crate::bin("evctl"));
                cmd.arg("lsp")
                    .current_dir(p)
                    .stderr(std::process::Stdio::null());
                if let Ok(mut c) = crate::lsp_client::LspClient::spawn(cmd) {
                    let _ = c.initialize(p, serde_json::json!({}), serde_json::json!({}));
                    let _ = c.finish(Duration::from_secs(10));
                }
            }
        }
        *ops.lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(op)
            .or_default() += 1;
    }
}

/// What `pid` holds now.
fn sample(pid: u32, at: Duration) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Sample {
        at,
        pid,
        rss_kib: field("VmRSS:")?,
        threads: field("Threads:")?,
        fds,
    })
}

/// Run a soak in `w` (its own runtime directory and daemon).
pub fn run(w: &World, cfg: &Config) -> Result<Report, String> {
    let repos: Vec<Repo> = (0..cfg.stores)
        .map(|_| setup_store(w))
        .collect::<Result<_, _>>()?;
    let stop = AtomicBool::new(false);
    let acked = Mutex::new(Acked::default());
    let ops = Mutex::new(HashMap::new());
    let failed = AtomicU64::new(0);
    let kills = AtomicU64::new(0);
    let samples = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    std::thread::scope(|s| {
        for seed in [11u64, 23] {
            let (stop, acked, ops, failed, repos) = (&stop, &acked, &ops, &failed, &repos);
            s.spawn(move || client(w, repos, seed, stop, acked, ops, failed));
        }
        // The killer and the sampler.
        s.spawn(|| {
            let mut rng = Rng(0x5eed);
            let mut next_kill = cfg
                .kill_every
                .map(|k| Instant::now() + k.mul_f64(0.5 + rng.below(100) as f64 / 100.0));
            let mut next_sample = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                if next_sample <= Instant::now() {
                    if let Some(s) = w.daemon_pid().and_then(|p| sample(p, started.elapsed())) {
                        samples.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                    }
                    next_sample = Instant::now() + Duration::from_secs(5);
                }
                if let (Some(at), Some(k)) = (next_kill, cfg.kill_every) {
                    if at <= Instant::now() {
                        if let Some(pid) = w.daemon_pid() {
                            // SAFETY: plain kill(2) of this soak's own daemon.
                            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                            kills.fetch_add(1, Ordering::SeqCst);
                        }
                        next_kill =
                            Some(Instant::now() + k.mul_f64(0.5 + rng.below(100) as f64 / 100.0));
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        while started.elapsed() < cfg.duration {
            std::thread::sleep(Duration::from_millis(200));
        }
        stop.store(true, Ordering::SeqCst);
    });

    // The account, with no more kills.
    let acked = acked.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut report = Report {
        ops: ops.into_inner().unwrap_or_else(|e| e.into_inner()),
        kills: kills.load(Ordering::SeqCst),
        decides_done: acked.decides.len() as u64,
        decides_failed: failed.load(Ordering::SeqCst),
        appends_done: acked.appends.len() as u64,
        samples: samples.lock().map(|s| s.clone()).unwrap_or_default(),
        ..Report::default()
    };
    for (i, repo) in repos.iter().enumerate() {
        evctl(w, repo.path(), &["list"]);
        let decisions: Vec<String> = chain(repo)
            .iter()
            .filter_map(|id| {
                let t = std::fs::read_to_string(repo.ev_dir().join("ticks").join(id)).ok()?;
                let v: serde_json::Value = serde_json::from_str(&t).ok()?;
                v["decision"].as_str().map(str::to_string)
            })
            .collect();
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for d in decisions.iter().filter(|d| d.starts_with("soak ")) {
            *seen.entry(d.as_str()).or_default() += 1;
        }
        for (d, n) in &seen {
            if *n > 1 {
                report
                    .duplicated
                    .push(format!("store {i}: decision {d:?} ×{n}"));
            }
        }
        for (_, d) in acked.decides.iter().filter(|(s, _)| *s == i) {
            if !seen.contains_key(d.as_str()) {
                report.lost.push(format!("store {i}: decision {d:?}"));
            }
        }
        let ledger = std::fs::read_to_string(repo.ev_dir().join("results/ledger/events.jsonl"))
            .unwrap_or_default();
        for (_, id) in acked.appends.iter().filter(|(s, _)| *s == i) {
            match ledger.matches(&format!("\"intent_id\":\"{id}\"")).count() {
                1 => {}
                0 => report.lost.push(format!("store {i}: ledger event {id}")),
                n => report
                    .duplicated
                    .push(format!("store {i}: ledger event {id} ×{n}")),
            }
        }
        let v = evctl(w, repo.path(), &["ledger", "verify"]);
        if v.code != 0 {
            report
                .unverified
                .push(format!("store {i}: {}", v.stderr.trim()));
        }
        let daemon = evctl(w, repo.path(), &["check"]);
        let local = w.evctl_env(repo.path(), &[("EVD_NO_DAEMON", "1")], &["check"]);
        if (daemon.code, &daemon.stdout) != (local.code, &local.stdout) {
            report.disagreeing.push(format!(
                "store {i}: daemon {} {:?} / in-process {} {:?}",
                daemon.code, daemon.stdout, local.code, local.stdout
            ));
        }
    }
    Ok(report)
}
