//! `evbench team`: receipts through git (issue 22's speed targets for receipts).
//!
//! 1. **publish 10,000 receipts**: a CI clone whose `results/receipts/` holds 10,000 receipts
//!    (100 selectors run at each of 100 commits) publishes them to a bare remote with
//!    `evctl receipts publish`, the whole process timed (fetch, gathering the notes, one
//!    `git fast-import`, the push); the notes are removed from both sides between rounds. Then
//!    100 more receipts, published on top (the everyday case after one CI run).
//! 3. **the fleet's ledgers**: five hosts (clones of one bare remote, each its own store) each
//!    fill a ledger of 100,000 events through evd and `evctl ledger publish` it; a sixth clone
//!    fetches them all, then `evctl ledger verify --all-hosts` is timed the first time (every
//!    copy read, verified and witnessed) and again (nothing new: the refs listed, nothing
//!    read), and `evctl ledger query calibration --all-hosts` over the six ledgers.
//! 2. **fetch → verdict at 10k ticks**: the generated 10k store is the developer's clone (a
//!    warm evd, `evctl watch --json` running, the picked ground green); a CI clone of the same
//!    history publishes a red (then a green) receipt at HEAD for every platform of the ground;
//!    the developer runs a plain `git fetch`, and the time from `git fetch` returning to the
//!    change on the watch and in the state file is measured, with no command run.

use std::path::Path;
use std::time::{Duration, Instant};

use super::bench_follow::{self, Watch};
use super::{fmt_dur, size_fixtures, stats, Report, Res, World};

/// Whether `evbench team` was asked for.
pub fn selected() -> bool {
    std::env::args().skip(1).any(|a| a == "team")
}

const ROUNDS: usize = 5;

fn git(w: &World, root: &Path, args: &[&str]) -> Res<String> {
    bench_follow::git(w, root, args)
}

/// `evctl receipts publish` as host `host`, timed.
fn publish(w: &World, root: &Path, host: &str) -> Res<(Duration, String)> {
    timed_evctl(w, root, host, &["receipts", "publish"]).map(|(t, out)| (t, out.trim().to_string()))
}

fn receipt_line(test: &str, platform: &str, commit: &str, ran_at: String, result: &str) -> String {
    let r = evd::engine::receipts::Receipt {
        test: test.to_string(),
        platform: platform.to_string(),
        commit: commit.to_string(),
        ran_at,
        result: if result == "red" {
            evd::engine::receipts::RunResult::Red
        } else {
            evd::engine::receipts::RunResult::Green
        },
        falsifiable: Some(true),
    };
    r.line()
}

/// A distinct, fixed timestamp for the `n`th generated receipt.
fn ran_at(n: usize) -> String {
    format!("2026-11-01T00:00:00.{n:09}Z")
}

fn publish_10k(w: &World, report: &mut Report, summary: &mut Vec<String>) -> Res<()> {
    println!("\n-- publish 10,000 receipts --");
    let dir = tempfile::Builder::new()
        .prefix("evbench-team-")
        .tempdir()
        .map_err(|e| format!("tempdir: {e}"))?;
    // EVBENCH_KEEP=1 leaves the repositories behind, to look at.
    let (_holder, base) = if std::env::var_os("EVBENCH_KEEP").is_some() {
        let p = dir.keep();
        (None, p)
    } else {
        let p = dir.path().to_path_buf();
        (Some(dir), p)
    };
    let base = base.as_path();
    git(
        w,
        base,
        &["init", "-q", "--bare", "-b", "main", "remote.git"],
    )?;
    git(w, base, &["clone", "-q", "remote.git", "ci"])?;
    let ci = base.join("ci");
    w.evctl(&ci, &["init"])?;
    let mut commits = Vec::new();
    for n in 0..100 {
        std::fs::write(ci.join("code.txt"), format!("{n}\n")).map_err(|e| e.to_string())?;
        git(w, &ci, &["add", "code.txt"])?;
        git(
            w,
            &ci,
            &["commit", "-q", "--no-verify", "-m", &format!("c{n}")],
        )?;
        commits.push(git(w, &ci, &["rev-parse", "HEAD"])?);
    }
    git(w, &ci, &["push", "-q", "origin", "main"])?;
    let receipts = ci.join(".evolving/results/receipts");
    std::fs::create_dir_all(&receipts).map_err(|e| e.to_string())?;
    let mut n = 0;
    for s in 0..100 {
        let test = format!("cargo test case_{s}");
        let mut text = String::new();
        for c in &commits {
            n += 1;
            text.push_str(&receipt_line(&test, "linux-ci", c, ran_at(n), "green"));
        }
        std::fs::write(
            receipts.join(format!("{}.jsonl", proto::id::receipt_key(&test))),
            text,
        )
        .map_err(|e| e.to_string())?;
    }
    let mut full = Vec::new();
    for round in 0..3 {
        if round > 0 {
            for (repo, name) in [
                (&ci, "refs/notes/evolving-receipts"),
                (&ci, "refs/evolving/remote-notes/origin/receipts"),
                (&base.join("remote.git"), "refs/notes/evolving-receipts"),
            ] {
                let _ = git(w, repo, &["update-ref", "-d", name]);
            }
        }
        let (took, said) = publish(w, &ci, "bench-ci")?;
        if !said.starts_with("published 10000 receipts") {
            let dbg = w.evctl_output(&ci, &["--json", "receipts", "publish"])?;
            return Err(format!(
                "unexpected publish answer in {}: {said}\n{}",
                ci.display(),
                String::from_utf8_lossy(&dbg.stdout)
            ));
        }
        full.push(took);
    }
    let s = report.add("publish", "10k", "receipts publish (all)", stats(full));
    summary.push(format!(
        "team: publish of 10,000 receipts (fetch, notes, push): {} median (target ≤ 1 s)",
        fmt_dur(s.p50)
    ));
    let mut more = Vec::new();
    for round in 0..3 {
        let head = commits.last().cloned().unwrap_or_default();
        let test = format!("cargo test extra_{round}");
        let mut text = String::new();
        for k in 0..100 {
            n += 1;
            text.push_str(&receipt_line(
                &test,
                &format!("p{k}"),
                &head,
                ran_at(n),
                "green",
            ));
        }
        std::fs::write(
            receipts.join(format!("{}.jsonl", proto::id::receipt_key(&test))),
            text,
        )
        .map_err(|e| e.to_string())?;
        let (took, said) = publish(w, &ci, "bench-ci")?;
        if !said.starts_with("published 100 receipts") {
            return Err(format!("unexpected publish answer: {said}"));
        }
        more.push(took);
    }
    let s = report.add("publish", "10k", "receipts publish (+100)", stats(more));
    summary.push(format!(
        "team: publishing 100 more on top of 10,000: {} median",
        fmt_dur(s.p50)
    ));
    Ok(())
}

fn fetch_to_verdict(w: &World, report: &mut Report, summary: &mut Vec<String>) -> Res<()> {
    let fixtures = size_fixtures()?;
    let Some(fx) = fixtures.iter().find(|f| f.label == "10k") else {
        return Ok(());
    };
    println!("\n-- fetch -> verdict, {} ticks --", fx.ticks);
    let dev = &fx.root;
    let g = bench_follow::pick_ground(fx, &fx.head_sha)?;
    let remote = fx.dir.path().join("remote.git");
    let remote_s = remote.to_string_lossy().into_owned();
    // The fixture lives inside its temp dir: the remote and CI's clone go beside it there.
    git(w, dev, &["clone", "-q", "--bare", ".", &remote_s])?;
    // The generated repository has an `origin` of its own (its live-origin reference).
    git(w, dev, &["remote", "add", "team", &remote_s])?;
    w.evctl(dev, &["remote", "setup", "team"])?;
    let ci = fx.dir.path().join("ci");
    git(w, dev, &["clone", "-q", &remote_s, &ci.to_string_lossy()])?;
    w.evctl(&ci, &["init"])?;
    let head = git(w, dev, &["rev-parse", "HEAD"])?;
    w.evctl_output(dev, &["check"])?;
    bench_follow::make_green(w, dev, &g)?;
    let watch = Watch::start(w, dev)?;
    std::thread::sleep(Duration::from_millis(500));
    let ci_receipts = ci
        .join(".evolving/results/receipts")
        .join(format!("{}.jsonl", proto::id::receipt_key(&g.selector)));
    std::fs::create_dir_all(ci_receipts.parent().unwrap_or(&ci)).map_err(|e| e.to_string())?;
    let (mut on_watch, mut in_state) = (Vec::new(), Vec::new());
    let mut missed = 0;
    for round in 0..ROUNDS {
        let want = if round % 2 == 0 { "red" } else { "green" };
        let mut text = String::new();
        for p in &g.platforms {
            let now = evd::engine::clock::now_rfc3339();
            text.push_str(&receipt_line(&g.selector, p, &head, now, want));
        }
        evd::sys::fsio::append(&ci_receipts, text.as_bytes()).map_err(|e| e.to_string())?;
        publish(w, &ci, "bench-ci")?;
        watch.drain();
        git(w, dev, &["fetch", "-q", "team"])?;
        let t0 = Instant::now();
        let (seen, state) = bench_follow::follow(&watch, &g, want, t0)?;
        match (seen, state) {
            (Some(a), Some(b)) => {
                on_watch.push(a);
                in_state.push(b);
            }
            _ => missed += 1,
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(watch);
    if on_watch.is_empty() {
        return Err("no fetched receipt ever reached the watch".into());
    }
    let a = report.add("fetch", "10k", "git fetch -> watch", stats(on_watch));
    let b = report.add("fetch", "10k", "git fetch -> state file", stats(in_state));
    summary.push(format!(
        "team: at 10k ticks, `git fetch` returning -> the verdict on `evctl watch` {} and in the state file {} (medians, {ROUNDS} rounds, {missed} missed; target ≤ 1 s)",
        fmt_dur(a.p50),
        fmt_dur(b.p50)
    ));
    let _ = w.evctl_output(w.home.path(), &["shutdown"]);
    Ok(())
}

const FLEET_HOSTS: usize = 5;
const FLEET_EVENTS: usize = 100_000;

/// An `evctl` run timed, as host `host`, failing unless it exits 0; returns its stdout.
fn timed_evctl(w: &World, root: &Path, host: &str, args: &[&str]) -> Res<(Duration, String)> {
    let t = Instant::now();
    let out = w
        .command(&w.bins.evctl)
        .current_dir(root)
        .args(args)
        .env("EV_HOST_ID", host)
        .output()
        .map_err(|e| format!("evctl {args:?}: {e}"))?;
    let took = t.elapsed();
    if !out.status.success() {
        return Err(format!(
            "evctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((took, String::from_utf8_lossy(&out.stdout).into_owned()))
}

fn fleet_ledgers(w: &World, report: &mut Report, summary: &mut Vec<String>) -> Res<()> {
    use serde_json::{json, Value};
    println!("\n-- the fleet's ledgers: {FLEET_HOSTS} hosts x {FLEET_EVENTS} events --");
    let dir = tempfile::Builder::new()
        .prefix("evfleet")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let root = dir.path();
    git(
        w,
        root,
        &["init", "-q", "--bare", "-b", "main", "remote.git"],
    )?;
    let seed = root.join("seed");
    git(w, root, &["clone", "-q", "remote.git", "seed"])?;
    for (k, v) in [
        ("user.name", "Bench"),
        ("user.email", "bench@example.invalid"),
    ] {
        git(w, &seed, &["config", k, v])?;
    }
    w.evctl(&seed, &["init"])?;
    std::fs::write(seed.join(".gitignore"), ".evolving/results/\n").map_err(|e| e.to_string())?;
    git(w, &seed, &["add", "-A"])?;
    git(w, &seed, &["commit", "-q", "-m", "store"])?;
    git(w, &seed, &["push", "-q", "origin", "main"])?;
    let clone = |name: &str| -> Res<std::path::PathBuf> {
        git(w, root, &["clone", "-q", "remote.git", name])?;
        let d = root.join(name);
        for (k, v) in [("user.name", name), ("user.email", "bench@example.invalid")] {
            git(w, &d, &["config", k, v])?;
        }
        w.evctl(&d, &["remote", "setup"])?;
        Ok(d)
    };
    let t = Instant::now();
    for h in 0..FLEET_HOSTS {
        let host = format!("bench-host-{h}");
        let d = clone(&host)?;
        let ctx = json!({"store": std::fs::canonicalize(&d).map_err(|e| e.to_string())?.display().to_string()});
        super::bench_ledger::fill(w, &ctx, FLEET_EVENTS, h * 10_000_000)?;
        timed_evctl(w, &d, &host, &["ledger", "publish"])?;
    }
    println!(
        "  {FLEET_HOSTS} ledgers filled and published in {}",
        fmt_dur(t.elapsed())
    );
    let fleet = clone("fleet")?;
    git(w, &fleet, &["fetch", "-q"])?;
    let (first, out) = timed_evctl(w, &fleet, "fleet", &["ledger", "verify", "--all-hosts"])?;
    let accepted = out
        .lines()
        .filter(|l| l.starts_with("host ") && l.contains(" ok: "))
        .count();
    if accepted != FLEET_HOSTS {
        return Err(format!(
            "ledger verify --all-hosts accepted {accepted} hosts:\n{out}"
        ));
    }
    println!(
        "  first `ledger verify --all-hosts` (every copy read, verified, witnessed): {}",
        fmt_dur(first)
    );
    let mut again = Vec::new();
    for _ in 0..ROUNDS * 2 {
        again.push(timed_evctl(w, &fleet, "fleet", &["ledger", "verify", "--all-hosts"])?.0);
    }
    let again = report.add(
        "fleet",
        "5x100k",
        "ledger verify --all-hosts, again",
        stats(again),
    );
    let mut query = Vec::new();
    let mut rows = String::new();
    for _ in 0..ROUNDS {
        let (took, out) = timed_evctl(
            w,
            &fleet,
            "fleet",
            &["ledger", "query", "calibration", "--all-hosts", "--json"],
        )?;
        query.push(took);
        rows = out;
    }
    let v: Value = serde_json::from_str(&rows).map_err(|e| format!("query: {e}: {rows}"))?;
    let executions: u64 = v["rows"]
        .as_array()
        .map(|r| r.iter().filter_map(|x| x["executions"].as_u64()).sum())
        .unwrap_or(0);
    let hosts = v["hosts"].as_array().map_or(0, Vec::len);
    if hosts != FLEET_HOSTS + 1 {
        return Err(format!("the fleet's query read {hosts} hosts: {rows}"));
    }
    let query = report.add(
        "fleet",
        "5x100k",
        "ledger query calibration --all-hosts",
        stats(query),
    );
    summary.push(format!(
        "team: {FLEET_HOSTS} hosts x {FLEET_EVENTS} events: `ledger query calibration --all-hosts` {} over {hosts} ledgers ({executions} executions in its rows; target ≤ 2 s); `ledger verify --all-hosts` again {} (target ≤ 100 ms), the first time {}",
        fmt_dur(query.p50),
        fmt_dur(again.p50),
        fmt_dur(first)
    ));
    Ok(())
}

pub fn run(w: &World, report: &mut Report, started: Instant) -> Res<()> {
    println!("\nteam: receipts through git notes (release build)");
    let mut summary = Vec::new();
    if std::env::args().any(|a| a == "--only-fleet") {
        fleet_ledgers(w, report, &mut summary)?;
    } else {
        publish_10k(w, report, &mut summary)?;
        fetch_to_verdict(w, report, &mut summary)?;
        fleet_ledgers(w, report, &mut summary)?;
    }
    println!("\nteam summary ({} total):", fmt_dur(started.elapsed()));
    for s in summary {
        println!("{s}");
    }
    Ok(())
}
