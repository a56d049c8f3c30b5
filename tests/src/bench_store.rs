//! `evbench store`: what holding a large store costs, next to upstream `ev` 0.1.32.
//!
//! For each size (1k, 10k and 100k ticks; `--no-100k` skips the last, `--only <size>` keeps
//! one) a store is generated and a fresh evd of its own serves it, so that its memory is this
//! one store's:
//!
//! - **RSS**: evd's VmRSS holding the store with its verdicts (after a check, a list and two
//!   verifies), and its peak (VmHWM);
//! - **verify cold**: the first `evctl verify` of that daemon (its tick cache is loaded by the
//!   check before); **verify repeated**: `evctl verify` again, nothing changed;
//! - **list**: `evctl list` (plain, into a pipe), warm;
//! - **check warm**: `evctl check` (plain), with nothing changed since the last, back to back
//!   (each started as soon as the last ended) and **spaced** (a quarter second apart, so that
//!   whatever a check leaves for later is done before the next): a read must pay for neither;
//! - **check after restart**: evd stopped and started again (ready, the store not yet open),
//!   then the first `evctl check` (what a git hook pays after a crash or an upgrade) and the
//!   second; the first one's answer must be the very one the warm daemon gave.
//!
//! Each is a whole evctl process, as a user runs it. Upstream `ev` has no daemon: every run is
//! cold. Each of its verbs is run on the same store in the same run, once, with a time cap
//! (`> N s` when it ran out; `EVBENCH_UPSTREAM_CAP_SECS` changes the cap), after evd's numbers
//! are taken (its check writes state files evd would then have to take in); its peak RSS is
//! the child's `ru_maxrss`.
//!
//! `EVBENCH_NO_UPSTREAM=1` leaves upstream out. `EVBENCH_BIN_DIR=<dir>` runs the evd/evctl found there instead of the ones beside evbench
//! (e.g. a build of an older commit, for a before/after in the same harness).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{
    fmt_dur, fmt_kb, make_fixture, measure, proc_status_kb, sizes, stats, Fixture, Report, Res,
    World,
};

/// A size in kB as MiB, short enough for the summary table.
fn mib(kb: Option<u64>) -> String {
    kb.map_or("?".into(), |kb| format!("{:.1} MiB", kb as f64 / 1024.0))
}

/// Whether `evbench store` was asked for.
pub fn selected() -> bool {
    std::env::args().skip(1).any(|a| a == "store")
}

/// One size's results.
struct Line {
    label: &'static str,
    rss_kb: Option<u64>,
    hwm_kb: Option<u64>,
    verify_cold: Duration,
    verify_repeat: Duration,
    list: Duration,
    check_warm: Duration,
    check_spaced: Duration,
    first_after_restart: Duration,
    second_after_restart: Duration,
    upstream: Upstream,
}

#[derive(Default)]
struct Upstream {
    verify: Option<Capped>,
    list: Option<Capped>,
    check: Option<Capped>,
}

/// One upstream run: how long, and its peak RSS; `timed_out` when the cap stopped it.
#[derive(Clone, Copy)]
struct Capped {
    took: Duration,
    maxrss_kb: u64,
    timed_out: bool,
}

impl Capped {
    fn show(c: Option<Capped>) -> String {
        match c {
            None => "-".into(),
            Some(c) if c.timed_out => format!("> {:.0} s", c.took.as_secs_f64()),
            Some(c) => fmt_dur(c.took),
        }
    }
}

fn cap_for(ticks: usize) -> Duration {
    let secs = std::env::var("EVBENCH_UPSTREAM_CAP_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if ticks >= 50_000 { 120 } else { 300 });
    Duration::from_secs(secs)
}

/// Run upstream `ev <args>` in `root` once, stopping it (our own child, by its pid) when `cap`
/// has passed.
fn upstream_run(w: &World, root: &Path, args: &[&str], cap: Duration) -> Res<Capped> {
    let ev = evd_e2e::upstream_ev();
    let t = Instant::now();
    let child = w
        .command(&ev)
        .current_dir(root)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("upstream ev {}: {e}", args.join(" ")))?;
    let pid = child.id() as libc::pid_t;
    let mut timed_out = false;
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits only for our own child, with valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            return Ok(Capped {
                took: t.elapsed(),
                maxrss_kb: u64::try_from(usage.ru_maxrss).unwrap_or(0),
                timed_out,
            });
        }
        if r < 0 {
            return Err(format!(
                "waiting for upstream ev {}: {}",
                args.join(" "),
                std::io::Error::last_os_error()
            ));
        }
        if !timed_out && t.elapsed() > cap {
            timed_out = true;
            // SAFETY: signals only the child this function started (not yet reaped).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(if timed_out { 1 } else { 20 }));
    }
}

fn timed(f: impl FnOnce() -> Res<()>) -> Res<Duration> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

fn one_size(w: &World, fx: &Fixture, report: &mut Report) -> Res<Line> {
    let root = &fx.root;
    let label = fx.label;
    println!("\n-- {} ticks ({label}) --", fx.ticks);
    let daemon = w.start_daemon()?;
    let pid = daemon.pid;
    let t = Instant::now();
    w.evctl_gate(root, &["check"])?;
    println!(
        "  first `evctl check` (evd opens the store, evaluates every binding): {}",
        fmt_dur(t.elapsed())
    );
    let verify_cold = timed(|| w.evctl_gate(root, &["verify"]).map(|_| ()))?;
    println!(
        "  first `evctl verify` (every file read and audited): {}",
        fmt_dur(verify_cold)
    );
    let repeat = report.add(
        "verify",
        label,
        "evctl, nothing changed",
        measure(fx.runs_verify.max(10), 2, || {
            w.evctl_gate(root, &["verify"]).map(|_| ())
        })?,
    );
    let list = report.add(
        "list",
        label,
        "evctl, plain, warm evd",
        measure(fx.runs_list, 2, || w.evctl(root, &["list"]).map(|_| ()))?,
    );
    let check = report.add(
        "check",
        label,
        "evctl, plain, warm evd",
        measure(fx.runs_process, 3, || {
            w.evctl_gate(root, &["check"]).map(|_| ())
        })?,
    );
    let mut spaced = Vec::new();
    for _ in 0..fx.runs_process.clamp(3, 20) {
        std::thread::sleep(Duration::from_millis(250));
        spaced.push(timed(|| w.evctl_gate(root, &["check"]).map(|_| ()))?);
    }
    let spaced = report.add(
        "check",
        label,
        "evctl, warm evd, 250 ms apart",
        stats(spaced),
    );
    let warm_answer = w.evctl_output(root, &["check"])?.stdout;
    // Let the daemon settle (the watcher's debounce, the heap trimmed after the last pass).
    std::thread::sleep(Duration::from_millis(300));
    let rss_kb = proc_status_kb(pid, "VmRSS");
    let hwm_kb = proc_status_kb(pid, "VmHWM");
    println!(
        "  evd holding the store with its verdicts: RSS {} (peak {})",
        fmt_kb(rss_kb),
        fmt_kb(hwm_kb)
    );
    drop(daemon);
    // A restart: what was kept for the next start is all evd has. Nine up to 10k ticks: the
    // median of three moved by 10 ms from run to run on a busy machine.
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for _ in 0..if fx.ticks > 10_000 { 3 } else { 9 } {
        let daemon = w.start_daemon()?;
        let t = Instant::now();
        let out = w.evctl_output(root, &["check"])?;
        first.push(t.elapsed());
        if out.stdout != warm_answer {
            return Err(format!(
                "the first check after a restart answered otherwise than the warm daemon:\n{}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        second.push(timed(|| w.evctl_gate(root, &["check"]).map(|_| ()))?);
        drop(daemon);
    }
    let first = report.add("check", label, "first after evd restart", stats(first));
    let second = report.add("check", label, "second after evd restart", stats(second));

    let cap = cap_for(fx.ticks);
    let mut upstream = Upstream::default();
    let skip = std::env::var_os("EVBENCH_NO_UPSTREAM").is_some();
    for (verb, slot) in [
        ("verify", &mut upstream.verify),
        ("list", &mut upstream.list),
        ("check", &mut upstream.check),
    ] {
        if skip {
            continue;
        }
        let r = upstream_run(w, root, &[verb], cap)?;
        println!(
            "  upstream `ev {verb}`: {} (peak RSS {})",
            Capped::show(Some(r)),
            fmt_kb(Some(r.maxrss_kb))
        );
        *slot = Some(r);
    }
    Ok(Line {
        label,
        rss_kb,
        hwm_kb,
        verify_cold,
        verify_repeat: repeat.p50,
        list: list.p50,
        check_warm: check.p50,
        check_spaced: spaced.p50,
        first_after_restart: first.p50,
        second_after_restart: second.p50,
        upstream,
    })
}

pub fn run(w: &World, report: &mut Report, started: Instant) -> Res<()> {
    let mut lines = Vec::new();
    for (label, ticks, seed) in sizes()? {
        // One store at a time on disk: the 100k store is 400 MB of tick files.
        let fx = make_fixture(label, ticks, seed)?;
        lines.push(one_size(w, &fx, report)?);
    }
    println!("\nsummary ({} total):", fmt_dur(started.elapsed()));
    report.table();
    println!(
        "\nevd (this build) against upstream ev 0.1.32 on the same stores (p50 of whole evctl \
         processes; upstream runs once, capped):"
    );
    let head = format!(
        "{:<5} {:>12} {:>12} | {:>11} {:>11} {:>11} | {:>10} {:>10} | {:>11} {:>11} {:>11} {:>11}",
        "store",
        "evd RSS",
        "evd peak",
        "verify 1st",
        "verify 2nd",
        "ev verify",
        "list",
        "ev list",
        "check b2b",
        "spaced",
        "restart 1st",
        "ev check"
    );
    println!("{}", "-".repeat(head.chars().count()));
    println!("{head}");
    println!("{}", "-".repeat(head.chars().count()));
    for l in &lines {
        println!(
            "{:<5} {:>12} {:>12} | {:>11} {:>11} {:>11} | {:>10} {:>10} | {:>11} {:>11} {:>11} {:>11}",
            l.label,
            mib(l.rss_kb),
            mib(l.hwm_kb),
            fmt_dur(l.verify_cold),
            fmt_dur(l.verify_repeat),
            // Upstream has nothing to remember: every verify of it is a cold one.
            Capped::show(l.upstream.verify),
            fmt_dur(l.list),
            Capped::show(l.upstream.list),
            fmt_dur(l.check_warm),
            fmt_dur(l.check_spaced),
            fmt_dur(l.first_after_restart),
            Capped::show(l.upstream.check),
        );
    }
    println!("{}", "-".repeat(head.chars().count()));
    for l in &lines {
        let peak = |c: Option<Capped>| c.map_or("-".to_string(), |c| mib(Some(c.maxrss_kb)));
        println!(
            "upstream peak RSS at {}: verify {}, list {}, check {}",
            l.label,
            peak(l.upstream.verify),
            peak(l.upstream.list),
            peak(l.upstream.check)
        );
    }
    for l in &lines {
        println!(
            "second check after restart at {}: {}",
            l.label,
            fmt_dur(l.second_after_restart)
        );
    }
    println!("targets at 100k: evd RSS <= 150 MiB, list < 150 ms, warm check < 15 ms, first check after restart <= 400 ms; repeated verify at 10k < 10 ms");
    println!("targets at 10k: warm check <= 5 ms back to back and spaced, first check after restart <= 50 ms");
    Ok(())
}
