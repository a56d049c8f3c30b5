//! `evbench follow`: how closely evd follows a repository's life — commits, editor saves and
//! restarts — measured as a user (or a hook, or an editor) meets it, side by side with upstream
//! `ev` 0.1.32 on the same store.
//!
//! In one generated repository per size (1k, 10k and 100k ticks; `--no-100k` skips the last),
//! with a warm evd of the release build on the bench's private runtime directory:
//!
//! 1. **check right after a commit**: a commit of a file no trigger covers (`notes.txt`), then at
//!    once a timed `evctl check`; then the same after a commit touching a guarded path (one of
//!    the chosen ground's `triggered_by` files, the ground green just before, so the commit
//!    flips it to stale).
//! 2. **commit to state**: with `evctl watch --json` running and no command run, the time from
//!    `git commit` returning to the `changed` line (green → stale) on the watch, and to
//!    `results/state/<tick>.json` saying `stale` (polled every millisecond). Each round is reset
//!    by a fresh green receipt at the new HEAD for every platform of the ground.
//! 3. **first check after restart**: `evctl shutdown`, then the first `evctl check` (it starts evd
//!    again), and a second one right after.
//! 4. **dirty latency**: with the watch running, an editor-style save (temp file + rename) of the
//!    guarded file: the time until `dirty` arrives on the watch and in the state file; then the
//!    revert, and the time back to `green`.
//!
//! Upstream has no daemon: its number for a row is its own `ev check` in that situation (a plain
//! check, after an unrelated commit, after a guarded commit, with the guarded file saved), run
//! after evd is shut down so that the two never compete for the store or the CPU: twice per
//! situation at 1k, once at 10k (about 20 s a run), and at 100k only after the two commits, under
//! a time limit (`> 60 s` when over it; the other rows then show the nearest situation's, `≈`).
//!
//! The generated receipts are older than the store's staleness window, so no ground starts
//! green: the bench picks one current test ground (verified at the upstream sha, so only
//! triggering commits can make it stale) and appends green receipts at HEAD for all of its
//! platforms, as CI would.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use proto::rpc::WatchEvent;
use serde_json::Value;

use super::{
    fmt_dur, git_output, load_average, percentile, size_fixtures, stats, Daemon, Fixture, Report,
    Res, World,
};

/// Whether `evbench follow` was asked for.
pub fn selected() -> bool {
    std::env::args().skip(1).any(|a| a == "follow")
}

/// A file no trigger covers: the unrelated commits change it.
const UNGUARDED: &str = "notes.txt";
/// How long a verdict may take to arrive before the round counts as missed.
const LIMIT: Duration = Duration::from_secs(10);
/// Upstream's `ev check` at 100k ticks is given this long.
const UPSTREAM_LIMIT_BIG: Duration = Duration::from_secs(60);
/// Below 100k, a limit that only guards against a hang.
const UPSTREAM_LIMIT: Duration = Duration::from_secs(120);

const TARGET_CHECK: Duration = Duration::from_millis(20);
const TARGET_STATE: Duration = Duration::from_millis(200);
/// The first check after an evd restart (issue 20): 50 ms up to 10k ticks, 400 ms at 100k.
fn target_restart(ticks: usize) -> Duration {
    Duration::from_millis(if ticks > 10_000 { 400 } else { 50 })
}
const TARGET_DIRTY: Duration = Duration::from_millis(300);

/// Rounds per measurement at one size.
struct Plan {
    checks: usize,
    flips: usize,
    restarts: usize,
    dirty: usize,
    upstream: usize,
}

fn plan(ticks: usize) -> Plan {
    match ticks {
        0..=1_000 => Plan {
            checks: 10,
            flips: 8,
            restarts: 3,
            dirty: 5,
            upstream: 2,
        },
        // Nine restarts: the median of three moved by 10 ms from run to run on a busy machine.
        1_001..=10_000 => Plan {
            checks: 10,
            flips: 8,
            restarts: 9,
            dirty: 5,
            upstream: 1,
        },
        _ => Plan {
            checks: 10,
            flips: 5,
            restarts: 2,
            dirty: 3,
            upstream: 1,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// The chosen ground

/// One current test ground the bench flips: its tick, where its verdict is written, and the
/// guarded file its commits and saves touch.
pub(super) struct Ground {
    tick: String,
    index: usize,
    pub(super) selector: String,
    claim: String,
    pub(super) platforms: Vec<String>,
    /// A tracked file among the ground's `triggered_by`.
    path: String,
    state: PathBuf,
    receipts: PathBuf,
}

/// The newest current, gating-capable test ground with a counter-test, verified at the upstream
/// sha (`origin`), alone among its tick's test grounds, bound to a selector no other current
/// ground shares, and guarding a plain tracked file.
pub(super) fn pick_ground(fx: &Fixture, origin: &str) -> Res<Ground> {
    let mut store = evd::store::Store::new(fx.root.clone());
    let current: Vec<(String, proto::Tick)> = store
        .current()
        .map_err(|e| format!("reading the {} store: {}", fx.label, e.message))?
        .into_iter()
        .map(|(f, t)| (f.to_string(), t.tick()))
        .collect();
    let mut uses = std::collections::HashMap::<&str, usize>::new();
    for (_, t) in &current {
        for g in &t.grounds {
            if let Some(proto::model::Check::Test { reference, .. }) = &g.check {
                *uses.entry(reference.as_str()).or_default() += 1;
            }
        }
    }
    let found = current.iter().rev().find_map(|(_, t)| {
        if t.status != "live" || t.is_detect_only() || t.is_agent_proposed() {
            return None;
        }
        let tests: Vec<(usize, &proto::model::Ground)> = t
            .grounds
            .iter()
            .enumerate()
            .filter(|(_, g)| matches!(g.check, Some(proto::model::Check::Test { .. })))
            .collect();
        let [(index, g)] = tests.as_slice() else {
            return None;
        };
        let Some(proto::model::Check::Test {
            reference,
            verified_at_sha,
            counter_test: Some(_),
            liveness,
        }) = &g.check
        else {
            return None;
        };
        if g.supports != "chosen"
            || verified_at_sha != origin
            || uses.get(reference.as_str()) != Some(&1)
            || liveness.platforms.is_empty()
        {
            return None;
        }
        let path = liveness
            .triggered_by
            .iter()
            .find(|p| !p.contains(['*', '?', '[', ':']) && fx.root.join(p).is_file())?;
        let ev = fx.root.join(".evolving/results");
        Some(Ground {
            tick: t.id.clone(),
            index: *index,
            selector: reference.clone(),
            claim: g.claim.clone(),
            platforms: liveness.platforms.clone(),
            path: path.clone(),
            state: ev.join("state").join(format!("{}.json", t.id)),
            receipts: ev
                .join("receipts")
                .join(format!("{}.jsonl", proto::id::receipt_key(reference))),
        })
    });
    found.ok_or_else(|| {
        format!(
            "the {} store has no current test ground verified at {origin} that guards a tracked file",
            fx.label
        )
    })
}

/// The chosen ground's verdict in its state file, if the file is there and whole.
pub(super) fn state_verdict(g: &Ground) -> Option<String> {
    let text = fs::read_to_string(&g.state).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let grounds = v.get("grounds")?.as_array()?;
    let mine = |x: &&Value| {
        x.get("ref").and_then(Value::as_str) == Some(g.selector.as_str())
            && x.get("claim").and_then(Value::as_str) == Some(g.claim.as_str())
    };
    let row = grounds
        .get(g.index)
        .filter(mine)
        .or_else(|| grounds.iter().find(mine))?;
    row.get("verdict")?.as_str().map(str::to_string)
}

/// Poll the state file every millisecond until it says `want`; the time since `t0`.
fn wait_state(g: &Ground, want: &str, t0: Instant) -> Option<Duration> {
    loop {
        if state_verdict(g).as_deref() == Some(want) {
            return Some(t0.elapsed());
        }
        if t0.elapsed() > LIMIT {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------------------------------
// Git, receipts, saves

/// `git <args>` in `root`, the bench's environment and a fixed identity; stdout when it worked.
pub(super) fn git(w: &World, root: &Path, args: &[&str]) -> Res<String> {
    let mut cmd = w.command(Path::new("git"));
    cmd.current_dir(root).args([
        "-c",
        "user.name=evbench",
        "-c",
        "user.email=evbench@example.invalid",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "core.hooksPath=/dev/null",
    ]);
    git_output(&mut cmd, args).map(|out| out.trim().to_string())
}

/// Append a line to `rel`, stage it and commit; the instant `git commit` returned.
fn commit(w: &World, root: &Path, rel: &str, n: usize) -> Res<Instant> {
    let path = root.join(rel);
    let mut f = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    writeln!(f, "# evbench follow change {n}").map_err(|e| format!("{}: {e}", path.display()))?;
    drop(f);
    git(w, root, &["add", "--", rel])?;
    git(
        w,
        root,
        &["commit", "-q", "--no-verify", "-m", &format!("evbench {n}")],
    )?;
    Ok(Instant::now())
}

/// Save `text` as `rel` the way an editor does: a temp file beside it, then a rename over it.
fn save(root: &Path, rel: &str, text: &str) -> Res<Instant> {
    let path = root.join(rel);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.evbench~"));
    fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Instant::now())
}

/// Green receipts at HEAD for every platform of the ground (what CI appends after a run), and
/// the time until the state file says `green`.
pub(super) fn make_green(w: &World, root: &Path, g: &Ground) -> Res<Duration> {
    let head = git(w, root, &["rev-parse", "HEAD"])?;
    let mut lines = String::new();
    for p in &g.platforms {
        let r = evd::engine::receipts::Receipt {
            test: g.selector.clone(),
            platform: p.clone(),
            commit: head.clone(),
            ran_at: evd::engine::clock::now_rfc3339(),
            result: evd::engine::receipts::RunResult::Green,
            falsifiable: Some(true),
        };
        lines.push_str(&r.line());
    }
    let t = Instant::now();
    evd::sys::fsio::append(&g.receipts, lines.as_bytes())
        .map_err(|e| format!("appending to {}: {e}", g.receipts.display()))?;
    wait_state(g, "green", t).ok_or_else(|| {
        format!(
            "the ground did not turn green within {} s of fresh green receipts at HEAD (state file says {:?})",
            LIMIT.as_secs(),
            state_verdict(g)
        )
    })
}

// ---------------------------------------------------------------------------------------------
// evctl: checks, the watch, restarts

/// One `evctl check` (exit 0 or 1: gating is an answer); how long the whole process took.
fn timed_check(w: &World, root: &Path) -> Res<Duration> {
    let t = Instant::now();
    let out = w.evctl_output(root, &["check"])?;
    let took = t.elapsed();
    match out.status.code() {
        Some(0 | 1) => Ok(took),
        _ => Err(format!(
            "evctl check failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// A running `evctl watch --json`, its lines timestamped as they arrive by a reader thread.
pub(super) struct Watch {
    child: Child,
    lines: Receiver<(Instant, String)>,
}

impl Watch {
    pub(super) fn start(w: &World, root: &Path) -> Res<Watch> {
        let mut child = w
            .command(&w.bins.evctl)
            .current_dir(root)
            .args(["watch", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start evctl watch: {e}"))?;
        let stdout = child.stdout.take().ok_or("evctl watch has no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Ok(Watch { child, lines: rx })
    }

    /// Forget every line received so far.
    pub(super) fn drain(&self) {
        while self.lines.try_recv().is_ok() {}
    }

    /// When the line saying the ground now reads `want` arrived, if it has (other lines are
    /// dropped); `Err` when the watch ended.
    fn seen(&self, g: &Ground, want: &str) -> Res<Option<Instant>> {
        Ok(self
            .seen_change(|c| {
                c.tick_id == g.tick && c.ground_index == g.index && c.new.as_deref() == Some(want)
            })?
            .map(|(at, _)| at))
    }

    /// When the first pushed change `wanted` accepts arrived, and the change, if it has (other
    /// lines are dropped); `Err` when the watch ended.
    pub(super) fn seen_change(
        &self,
        wanted: impl Fn(&proto::rpc::VerdictChange) -> bool,
    ) -> Res<Option<(Instant, proto::rpc::VerdictChange)>> {
        loop {
            match self.lines.try_recv() {
                Ok((at, line)) => {
                    if let Ok(WatchEvent::Changed(c)) = serde_json::from_str::<WatchEvent>(&line) {
                        if wanted(&c) {
                            return Ok(Some((at, c)));
                        }
                    }
                }
                Err(mpsc::TryRecvError::Empty) => return Ok(None),
                Err(mpsc::TryRecvError::Disconnected) => return Err("evctl watch stopped".into()),
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Our own child, stopped by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait for the ground to read `want` both on the watch and in its state file; each latency
/// from `t0` (`None`: not within [`LIMIT`]). Polls every millisecond, runs no command.
pub(super) fn follow(
    watch: &Watch,
    g: &Ground,
    want: &str,
    t0: Instant,
) -> Res<(Option<Duration>, Option<Duration>)> {
    let (mut on_watch, mut in_state) = (None, None);
    while (on_watch.is_none() || in_state.is_none()) && t0.elapsed() < LIMIT {
        if on_watch.is_none() {
            on_watch = watch
                .seen(g, want)?
                .map(|at| at.saturating_duration_since(t0));
        }
        if in_state.is_none() && state_verdict(g).as_deref() == Some(want) {
            in_state = Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok((on_watch, in_state))
}

/// Stop the evd serving the bench: our own child through its handle, an autostarted one with
/// `evctl shutdown` (which answers once it is gone).
fn stop_daemon(w: &World, daemon: &mut Daemon) -> Res<()> {
    if daemon.child.is_some() {
        daemon.shutdown();
        return Ok(());
    }
    let out = w.evctl_output(w.home.path(), &["shutdown", "--json"])?;
    let pid = serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v.get("pid").and_then(Value::as_u64));
    if let Some(pid) = pid {
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(pid) {
            if Instant::now() > deadline {
                return Err(format!("evd pid {pid} still runs 5 s after evctl shutdown"));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    Ok(())
}

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: u64) -> bool {
    fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        !s.lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'))
    })
}

// ---------------------------------------------------------------------------------------------
// Upstream

/// Upstream's `ev check` times in one situation, or how long it ran before it was stopped.
#[derive(Default, Clone)]
struct Up {
    samples: Vec<Duration>,
    over: Option<Duration>,
    /// Measured in a neighbouring situation (the 100k shortcut).
    approx: bool,
}

impl Up {
    fn show(&self) -> String {
        let mark = if self.approx { "≈ " } else { "" };
        if let Some(limit) = self.over {
            return format!("{mark}> {} s", limit.as_secs());
        }
        if self.samples.is_empty() {
            return "—".into();
        }
        let mut v = self.samples.clone();
        v.sort();
        format!("{mark}{}", fmt_dur(percentile(&v, 50.0)))
    }
}

/// One upstream `ev check` in `root`, stopped after `limit` (`None` then).
fn upstream_check(w: &World, ev: &Path, root: &Path, limit: Duration) -> Res<Option<Duration>> {
    let t = Instant::now();
    let mut child = w
        .command(ev)
        .current_dir(root)
        .arg("check")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run upstream ev: {e}"))?;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                let took = t.elapsed();
                return match st.code() {
                    Some(0 | 1) => Ok(Some(took)),
                    _ => Err(format!("upstream ev check failed ({st})")),
                };
            }
            Ok(None) if t.elapsed() < limit => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => {
                // Our own child, stopped by its handle.
                let _ = child.kill();
                let _ = child.wait();
                return Ok(None);
            }
            Err(e) => return Err(format!("waiting for upstream ev: {e}")),
        }
    }
}

/// Upstream's number for each situation, with no evd running: a plain check, after an unrelated
/// commit, after a guarded commit, and with the guarded file saved but not committed.
#[derive(Default)]
struct Upstream {
    plain: Up,
    unguarded: Up,
    guarded: Up,
    dirty: Up,
}

fn bench_upstream(
    w: &World,
    fx: &Fixture,
    g: &Ground,
    runs: usize,
    n: &mut usize,
) -> Res<Upstream> {
    let ev = evd_e2e::upstream_ev();
    let root = &fx.root;
    let big = fx.ticks > 10_000;
    let limit = if big {
        UPSTREAM_LIMIT_BIG
    } else {
        UPSTREAM_LIMIT
    };
    let mut series = |before: &mut dyn FnMut(&mut usize) -> Res<()>| -> Res<Up> {
        let mut up = Up::default();
        for _ in 0..runs {
            before(n)?;
            match upstream_check(w, &ev, root, limit)? {
                Some(d) => up.samples.push(d),
                None => {
                    up.over = Some(limit);
                    break;
                }
            }
        }
        Ok(up)
    };
    let unguarded = series(&mut |n| {
        *n += 1;
        commit(w, root, UNGUARDED, *n).map(|_| ())
    })?;
    if big {
        // Once or twice at most: a plain check is the unrelated commit's, the others the guarded
        // commit's (or over the limit like it).
        let guarded = if unguarded.over.is_some() {
            unguarded.clone()
        } else {
            series(&mut |n| {
                *n += 1;
                commit(w, root, &g.path, *n).map(|_| ())
            })?
        };
        let approx = |u: &Up| Up {
            approx: true,
            ..u.clone()
        };
        return Ok(Upstream {
            plain: approx(&unguarded),
            dirty: approx(&guarded),
            unguarded,
            guarded,
        });
    }
    let plain = series(&mut |_| Ok(()))?;
    let guarded = series(&mut |n| {
        *n += 1;
        commit(w, root, &g.path, *n).map(|_| ())
    })?;
    let original = fs::read_to_string(root.join(&g.path))
        .map_err(|e| format!("{}: {e}", root.join(&g.path).display()))?;
    let dirty = series(&mut |n| {
        *n += 1;
        save(root, &g.path, &format!("{original}# unsaved edit {n}\n")).map(|_| ())
    })?;
    save(root, &g.path, &original)?;
    Ok(Upstream {
        plain,
        unguarded,
        guarded,
        dirty,
    })
}

// ---------------------------------------------------------------------------------------------
// One size

/// A measured series: latencies, and how many rounds never arrived.
#[derive(Default)]
struct Series {
    v: Vec<Duration>,
    missed: usize,
}

impl Series {
    fn push(&mut self, d: Option<Duration>) {
        match d {
            Some(d) => self.v.push(d),
            None => self.missed += 1,
        }
    }

    fn sorted(&self) -> Vec<Duration> {
        let mut v = self.v.clone();
        v.sort();
        v
    }

    fn p50(&self) -> Option<Duration> {
        let v = self.sorted();
        (!v.is_empty()).then(|| percentile(&v, 50.0))
    }

    fn show(&self) -> String {
        let v = self.sorted();
        let missed = if self.missed > 0 {
            format!(" ({} missed)", self.missed)
        } else {
            String::new()
        };
        if v.is_empty() {
            return format!("none arrived{missed}");
        }
        format!(
            "{} / {} / {}{missed}",
            fmt_dur(percentile(&v, 50.0)),
            fmt_dur(percentile(&v, 90.0)),
            fmt_dur(v[v.len() - 1])
        )
    }
}

/// One line of a size's table.
struct Line {
    what: &'static str,
    ours: Series,
    upstream: Up,
    target: Option<Duration>,
}

struct SizeResult {
    label: &'static str,
    ticks: usize,
    ground: String,
    lines: Vec<Line>,
    notes: Vec<String>,
}

fn add(report: &mut Report, label: &str, what: &str, via: &str, s: &Series) {
    if !s.v.is_empty() {
        report.add(what, label, via, stats(s.v.clone()));
    }
    if s.missed > 0 {
        println!("    {} round(s) of `{what} {via}` never arrived", s.missed);
    }
}

fn one(w: &World, fx: &Fixture, report: &mut Report) -> Res<SizeResult> {
    println!("\n-- {} ticks ({}) --", fx.ticks, fx.label);
    let root = &fx.root;
    let p = plan(fx.ticks);
    let mut notes = Vec::new();
    let g = pick_ground(fx, &fx.head_sha)?;
    println!(
        "  ground: tick {} #{} ({} platform(s): {}), guarded file {}",
        g.tick,
        g.index,
        g.platforms.len(),
        g.platforms.join(", "),
        g.path
    );
    let mut daemon = w.start_daemon()?;
    let t = Instant::now();
    timed_check(w, root)?;
    let first = t.elapsed();
    println!(
        "  first `evctl check` (evd opens the store, evaluates, writes every state file): {}",
        fmt_dur(first)
    );
    notes.push(format!("first check on a fresh evd: {}", fmt_dur(first)));
    let warm = make_green(w, root, &g)?;
    println!(
        "  fresh green receipts -> state file green: {}",
        fmt_dur(warm)
    );
    let mut n = 0;

    // 1. check right after a commit.
    let mut unguarded = Series::default();
    for _ in 0..p.checks {
        n += 1;
        commit(w, root, UNGUARDED, n)?;
        unguarded.push(Some(timed_check(w, root)?));
        std::thread::sleep(Duration::from_millis(150));
    }
    add(
        report,
        fx.label,
        "check",
        "after unrelated commit",
        &unguarded,
    );
    if state_verdict(&g).as_deref() != Some("green") {
        notes.push(format!(
            "after the unrelated commits the ground reads {:?}, not green",
            state_verdict(&g)
        ));
    }
    let mut guarded = Series::default();
    let mut not_stale = 0;
    for _ in 0..p.checks {
        make_green(w, root, &g)?;
        n += 1;
        commit(w, root, &g.path, n)?;
        guarded.push(Some(timed_check(w, root)?));
        if state_verdict(&g).as_deref() != Some("stale") {
            not_stale += 1;
        }
    }
    add(report, fx.label, "check", "after guarded commit", &guarded);
    if not_stale > 0 {
        notes.push(format!(
            "{not_stale} of {} checks after a guarded commit left the ground's state file not stale",
            p.checks
        ));
    }

    // 2. commit to state, with the watch running and no command run.
    let watch = Watch::start(w, root)?;
    // Let the subscription settle, then prove it live with a flip.
    std::thread::sleep(Duration::from_millis(300));
    n += 1;
    commit(w, root, &g.path, n)?;
    wait_state(&g, "stale", Instant::now()).ok_or("the ground never turned stale")?;
    watch.drain();
    let t = Instant::now();
    make_green(w, root, &g)?;
    let (live, _) = follow(&watch, &g, "green", t)?;
    if live.is_none() {
        return Err("evctl watch said nothing of a green flip within 10 s".into());
    }
    let (mut to_watch, mut to_state, mut receipt) =
        (Series::default(), Series::default(), Vec::new());
    for _ in 0..p.flips {
        watch.drain();
        n += 1;
        let t0 = commit(w, root, &g.path, n)?;
        let (a, b) = follow(&watch, &g, "stale", t0)?;
        to_watch.push(a);
        to_state.push(b);
        // Reset: green again, untimed for the table (the receipt path is noted).
        receipt.push(make_green(w, root, &g)?);
        std::thread::sleep(Duration::from_millis(100));
    }
    add(report, fx.label, "commit", "-> watch `changed`", &to_watch);
    add(report, fx.label, "commit", "-> state file", &to_state);
    let rs = stats(receipt);
    notes.push(format!(
        "receipt append -> state file green: p50 {}, max {}",
        fmt_dur(rs.p50),
        fmt_dur(rs.max)
    ));

    // 4. dirty latency: an editor's save of the guarded file, then its revert.
    let original =
        fs::read_to_string(root.join(&g.path)).map_err(|e| format!("{}: {e}", g.path))?;
    let mut dirty_w = Series::default();
    let mut dirty_s = Series::default();
    let mut clean_w = Series::default();
    let mut clean_s = Series::default();
    for i in 0..p.dirty {
        std::thread::sleep(Duration::from_millis(100));
        watch.drain();
        let t0 = save(root, &g.path, &format!("{original}# editor save {i}\n"))?;
        let (a, b) = follow(&watch, &g, "dirty", t0)?;
        dirty_w.push(a);
        dirty_s.push(b);
        std::thread::sleep(Duration::from_millis(100));
        watch.drain();
        let t0 = save(root, &g.path, &original)?;
        let (a, b) = follow(&watch, &g, "green", t0)?;
        clean_w.push(a);
        clean_s.push(b);
        if b.is_none() {
            // Back to a known state before the next round.
            make_green(w, root, &g)?;
        }
    }
    drop(watch);
    add(report, fx.label, "save", "-> dirty on watch", &dirty_w);
    add(report, fx.label, "save", "-> dirty in state file", &dirty_s);
    add(report, fx.label, "revert", "-> green on watch", &clean_w);
    add(
        report,
        fx.label,
        "revert",
        "-> green in state file",
        &clean_s,
    );

    // 3. first check after a restart, and the one after it.
    let (mut first, mut second) = (Series::default(), Series::default());
    for _ in 0..p.restarts {
        stop_daemon(w, &mut daemon)?;
        first.push(Some(timed_check(w, root)?));
        second.push(Some(timed_check(w, root)?));
    }
    add(report, fx.label, "check", "first after restart", &first);
    add(report, fx.label, "check", "second after restart", &second);
    stop_daemon(w, &mut daemon)?;

    // Upstream, with no evd running.
    let up = if std::env::args().skip(1).any(|a| a == "--no-upstream") {
        Upstream::default()
    } else {
        println!("  upstream ev 0.1.32 `ev check` on the same store (no evd running):");
        let t = Instant::now();
        let up = bench_upstream(w, fx, &g, p.upstream, &mut n)?;
        println!(
            "    plain {}, after unrelated commit {}, after guarded commit {}, guarded file saved {} ({} for upstream)",
            up.plain.show(),
            up.unguarded.show(),
            up.guarded.show(),
            up.dirty.show(),
            fmt_dur(t.elapsed())
        );
        up
    };

    let lines = vec![
        Line {
            what: "1a check right after an unrelated commit",
            ours: unguarded,
            upstream: up.unguarded.clone(),
            target: Some(TARGET_CHECK),
        },
        Line {
            what: "1b check right after a guarded commit",
            ours: guarded,
            upstream: up.guarded.clone(),
            target: Some(TARGET_CHECK),
        },
        Line {
            what: "2a commit -> `changed` on watch",
            ours: to_watch,
            upstream: up.guarded.clone(),
            target: Some(TARGET_STATE),
        },
        Line {
            what: "2b commit -> state file",
            ours: to_state,
            upstream: up.guarded.clone(),
            target: Some(TARGET_STATE),
        },
        Line {
            what: "3a first check after restart",
            ours: first,
            upstream: up.plain.clone(),
            target: Some(target_restart(fx.ticks)),
        },
        Line {
            what: "3b second check after restart",
            ours: second,
            upstream: up.plain.clone(),
            target: None,
        },
        Line {
            what: "4a save guarded file -> dirty on watch",
            ours: dirty_w,
            upstream: up.dirty.clone(),
            target: Some(TARGET_DIRTY),
        },
        Line {
            what: "4b save guarded file -> dirty in state",
            ours: dirty_s,
            upstream: up.dirty.clone(),
            target: Some(TARGET_DIRTY),
        },
        Line {
            what: "4c revert -> green on watch",
            ours: clean_w,
            upstream: up.plain.clone(),
            target: Some(TARGET_DIRTY),
        },
        Line {
            what: "4d revert -> green in state",
            ours: clean_s,
            upstream: up.plain,
            target: Some(TARGET_DIRTY),
        },
    ];
    Ok(SizeResult {
        label: fx.label,
        ticks: fx.ticks,
        ground: format!("tick {} ground #{} guarding {}", g.tick, g.index, g.path),
        lines,
        notes,
    })
}

fn print_table(r: &SizeResult) {
    let rule = "-".repeat(116);
    println!("\n{} ticks ({}; {}):", r.ticks, r.label, r.ground);
    println!("{rule}");
    println!(
        "{:<42} {:<36} {:>14} {:>10}",
        "row", "evctl/evd p50 / p90 / max", "ev 0.1.32", "target"
    );
    println!("{rule}");
    for l in &r.lines {
        let (target, verdict) = match (l.target, l.ours.p50()) {
            (None, _) => ("—".to_string(), String::new()),
            (Some(t), p50) => {
                let met = p50.is_some_and(|p| p < t) && l.ours.missed == 0;
                let word = match (r.ticks > 10_000, met) {
                    (false, true) => "pass",
                    (false, false) => "FAIL",
                    (true, true) => "(under)",
                    (true, false) => "(over)",
                };
                (format!("< {} ms", t.as_millis()), word.to_string())
            }
        };
        let line = format!(
            "{:<42} {:<36} {:>14} {:>10}  {}",
            l.what,
            l.ours.show(),
            l.upstream.show(),
            target,
            verdict
        );
        println!("{}", line.trim_end());
    }
    println!("{rule}");
    for n in &r.notes {
        println!("  {n}");
    }
}

/// The whole section.
pub fn run(w: &World, report: &mut Report, started: Instant) -> Res<()> {
    println!(
        "\nfollow: how closely evd follows commits, saves and restarts (warm evd, release build)"
    );
    let fixtures = size_fixtures()?;
    let mut results = Vec::new();
    for fx in &fixtures {
        let r = one(w, fx, report);
        // Whatever happened, leave no daemon behind (an autostarted one is not our child).
        let _ = w.evctl_output(w.home.path(), &["shutdown"]);
        results.push(r?);
    }
    println!(
        "\nfollow summary ({} total; load average now {}):",
        fmt_dur(started.elapsed()),
        load_average()
    );
    for r in &results {
        print_table(r);
    }
    println!(
        "targets are set at 10k ticks (pass/FAIL judged on p50, every round arrived); at 100k they are shown for information"
    );
    println!(
        "upstream has no daemon: its number is its own `ev check` in that situation (≈: the neighbouring situation's, at 100k)"
    );
    Ok(())
}
