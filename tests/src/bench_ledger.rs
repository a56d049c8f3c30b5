//! `evbench ledger`: the event ledger and evidence citations, measured through a real evd.
//!
//! - **append**: events/s through `ev.ledger.append` on the socket, every batch written and
//!   fsync'd before the answer: one event per call, and batches of 1,000;
//! - **verify**: `evctl ledger verify` of the resulting 100,000-event ledger, by a freshly
//!   started evd (every line read, parsed, chained and checked) and again (unchanged: from
//!   memory);
//! - **query**: `evctl ledger query calibration` over it;
//! - **evidence**: 10,000 decisions each citing one line of a file, imported through
//!   `migrate` (every citation checked at the door), then `ev.evidence` (the spans are hashed
//!   once and again only when the file changes), and `evctl check` with the cited file
//!   unchanged and rewritten (every span hashed again); then, with `evctl watch` running, an
//!   edit to a cited line until the change is on the watch and in the state file;
//! - **replay**: a generated 1,000-tick store checked 300 times while CI-style receipts are
//!   appended to its files, its ledger filled to 100,000 events with client events, then
//!   `evctl ledger replay` (every check's fingerprint reproduced).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{fmt_dur, measure, Report, Res, World};

/// Whether `evbench ledger` was asked for.
pub fn selected() -> bool {
    std::env::args().skip(1).any(|a| a == "ledger")
}

pub(crate) fn call(w: &World, method: &str, params: Value) -> Res<Value> {
    let v = evd_e2e::rpc_post(&w.socket(), method, params);
    match v.get("error") {
        Some(e) => Err(format!("{method}: {e}")),
        None => Ok(v["result"].clone()),
    }
}

/// The intent every bench plan belongs to, appended first.
pub(crate) fn start_intent(w: &World, ctx: &Value) -> Res<()> {
    call(
        w,
        "ev.ledger.append",
        json!([{"context": ctx, "events": [event(0, "intent_created",
        json!({"intent_id": "I-bench", "parent_intent_id": null, "goal": "bench"}))]}]),
    )
    .map(|_| ())
}

fn event(i: usize, t: &str, payload: Value) -> Value {
    json!({"schema_version": "1.1", "event_type": t, "run_id": format!("R-bench-{}", i / 1000),
           "agent_id": "bench-planner", "payload": payload,
           "host": {"hostname": "bench", "platform": "linux", "repo_root": "/bench"},
           "git": {"branch": "main", "head_sha": "", "dirty": false}})
}

/// Fill the ledger of the store `ctx` names with `events` client events: the bench intent, then
/// plans (four events each, numbered from `first_plan`), appended through evd 1,000 at a time.
pub(crate) fn fill(w: &World, ctx: &Value, events: usize, first_plan: usize) -> Res<usize> {
    start_intent(w, ctx)?;
    let mut n = 1;
    let mut b = 0;
    while n < events {
        let batch: Vec<Value> = (0..250)
            .flat_map(|k| plan_events(first_plan + b * 250 + k))
            .take(events - n)
            .collect();
        n += batch.len();
        b += 1;
        call(
            w,
            "ev.ledger.append",
            json!([{"context": ctx, "events": batch}]),
        )?;
    }
    Ok(n)
}

/// One plan's life, four events (after its intent exists).
pub(crate) fn plan_events(i: usize) -> Vec<Value> {
    let (intent, plan) = ("I-bench", format!("P-{i}"));
    vec![
        event(
            i,
            "plan_variant_created",
            json!({"intent_id": intent, "plan_id": plan, "variant_id": "v1",
            "model": {"provider": "p", "model_id": format!("m{}", i % 3), "tier": if i.is_multiple_of(2) { "flash" } else { "deep" }, "routing_reason": "r"},
            "predicted": {"p_success": 0.7, "entropy": 3.0, "estimator_versions": {"entropy": "entropy_v1"}}}),
        ),
        event(
            i,
            "plan_selected",
            json!({"intent_id": intent, "plan_id": plan, "variant_id": "v1"}),
        ),
        event(
            i,
            "execution_started",
            json!({"intent_id": intent, "plan_id": plan, "sandbox_id": "S"}),
        ),
        event(
            i,
            "execution_completed",
            json!({"intent_id": intent, "plan_id": plan, "sandbox_id": "S",
            "status": "success", "actual": {"p_success": 1.0, "entropy": 2.0, "cost": 1.0, "impact": 3.0}}),
        ),
    ]
}

pub fn run(w: &World, report: &mut Report, started: Instant) -> Res<()> {
    let repo = evd_e2e::Repo::new();
    let root = std::fs::canonicalize(repo.path()).map_err(|e| format!("repo: {e}"))?;
    let mut daemon = w.start_daemon()?;
    w.evctl(&root, &["init"])?;
    let ctx = json!({"store": root.display().to_string()});
    start_intent(w, &ctx)?;

    println!("\n-- ledger append through evd (fsync'd) --");
    let mut i = 0usize;
    let single = measure(1000, 5, || {
        i += 1;
        call(
            w,
            "ev.ledger.append",
            json!([{"context": ctx, "events": [plan_events(i)[0].clone()]}]),
        )
        .map(|_| ())
    })?;
    let single = report.add("ledger", "append", "1 event per call", single);
    let mut appended = i + 1;
    let batches = 100usize;
    let t = Instant::now();
    for b in 0..batches {
        let events: Vec<Value> = (0..250)
            .flat_map(|k| plan_events(1_000_000 + b * 250 + k))
            .collect();
        appended += events.len();
        call(
            w,
            "ev.ledger.append",
            json!([{"context": ctx, "events": events}]),
        )?;
    }
    let batched = t.elapsed();
    let per_sec_single = 1.0 / single.p50.as_secs_f64().max(1e-9);
    let per_sec_batched = (batches * 1000) as f64 / batched.as_secs_f64().max(1e-9);
    println!(
        "  one event per call: p50 {} → {per_sec_single:.0} events/s",
        fmt_dur(single.p50)
    );
    println!(
        "  batches of 1,000: {} for {} events → {per_sec_batched:.0} events/s",
        fmt_dur(batched),
        batches * 1000
    );

    println!("\n-- ledger verify and query at {appended} events --");
    daemon.shutdown();
    let mut daemon = w.start_daemon()?;
    let t = Instant::now();
    let out = w.evctl(&root, &["ledger", "verify"])?;
    let cold = t.elapsed();
    println!(
        "  first `evctl ledger verify` (fresh evd: every line read and checked): {} ({})",
        fmt_dur(cold),
        out.trim()
    );
    let warm = report.add(
        "ledger",
        "verify",
        "evctl, nothing changed",
        measure(20, 2, || w.evctl(&root, &["ledger", "verify"]).map(|_| ()))?,
    );
    let q = report.add(
        "ledger",
        "query",
        "calibration",
        measure(10, 1, || {
            w.evctl(&root, &["ledger", "query", "calibration"])
                .map(|_| ())
        })?,
    );

    println!("\n-- evidence: 10,000 citations --");
    let (import, rehash, check_warm, check_touched) = evidence(w, &root)?;
    let (drift_watch, drift_state) = drift_followed(w, &root)?;
    daemon.shutdown();

    println!("\n-- replay: a 1,000-tick store checked 300 times, 100,000 events --");
    let (replay_events, replay_runs, replay_first, replay_again) = replay(w)?;
    let rehash = report.add(
        "evidence",
        "10k cited",
        "ev.evidence (files unchanged)",
        rehash,
    );

    println!("\nsummary ({} total):", fmt_dur(started.elapsed()));
    report.table();
    println!("\nledger and evidence:");
    println!(
        "  append, 1 event per call (fsync each): {per_sec_single:.0} events/s (p50 {})",
        fmt_dur(single.p50)
    );
    println!("  append, batches of 1,000 (fsync each): {per_sec_batched:.0} events/s");
    println!(
        "  verify at {appended} events: first {} (fresh evd), repeated p50 {}",
        fmt_dur(cold),
        fmt_dur(warm.p50)
    );
    println!(
        "  query calibration at {appended} events: p50 {}",
        fmt_dur(q.p50)
    );
    println!(
        "  replay at {replay_events} events ({replay_runs} check runs over a 1,000-tick store): {} by a fresh evd, {} again",
        fmt_dur(replay_first),
        fmt_dur(replay_again)
    );
    println!(
        "  evidence at 10,000 citations: import with every citation checked {}, ev.evidence p50 {}",
        fmt_dur(import),
        fmt_dur(rehash.p50)
    );
    println!(
        "  check at 10,000 citations: files unchanged p50 {}, cited file rewritten p50 {}",
        fmt_dur(check_warm.p50),
        fmt_dur(check_touched.p50)
    );
    println!(
        "  a cited line edited, no command run (10,000 citations in that file): on `evctl watch` p50 {} / max {}, in the state file p50 {} / max {}",
        fmt_dur(drift_watch.p50),
        fmt_dur(drift_watch.max),
        fmt_dur(drift_state.p50),
        fmt_dur(drift_state.max)
    );
    Ok(())
}

/// With `evctl watch` running and no command run: edit one cited line (its length kept, so
/// the other 9,999 citations still hold), and time the `evidence:drifted` change on the watch
/// and in the decision's state file; then put it back and time `evidence:holds` the same way.
fn drift_followed(w: &World, root: &Path) -> Res<(super::Stats, super::Stats)> {
    const LIMIT: Duration = Duration::from_secs(10);
    let path = root.join("measurements.txt");
    let original = std::fs::read_to_string(&path).map_err(|e| format!("read: {e}"))?;
    let watch = super::bench_follow::Watch::start(w, root)?;
    std::thread::sleep(Duration::from_millis(300));
    let (mut on_watch, mut in_state) = (Vec::new(), Vec::new());
    for k in 0..10 {
        let line = k * 997;
        let was = format!("measurement {line}:");
        let now = format!("measuremenT {line}:");
        for (text, want) in [
            (original.replacen(&was, &now, 1), "evidence:drifted"),
            (original.clone(), "evidence:holds"),
        ] {
            std::fs::write(&path, &text).map_err(|e| format!("write: {e}"))?;
            let t0 = Instant::now();
            let (at, change) = loop {
                if let Some(seen) = watch.seen_change(|c| c.new.as_deref() == Some(want))? {
                    break seen;
                }
                if t0.elapsed() > LIMIT {
                    return Err(format!("no {want} on the watch within {LIMIT:?}"));
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            on_watch.push(at.saturating_duration_since(t0));
            let state = root
                .join(".evolving/results/state")
                .join(format!("{}.json", change.tick_id));
            let state_word = format!("\"state\": \"{}\"", &want["evidence:".len()..]);
            loop {
                let text = std::fs::read_to_string(&state).unwrap_or_default();
                if text.contains(&state_word) {
                    in_state.push(t0.elapsed());
                    break;
                }
                if t0.elapsed() > LIMIT {
                    return Err(format!("no {want} in {} within {LIMIT:?}", state.display()));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    Ok((super::stats(on_watch), super::stats(in_state)))
}

/// 10,000 decisions citing one line each of one file, imported; then how long answering about
/// every citation takes.
fn evidence(w: &World, root: &Path) -> Res<(Duration, super::Stats, super::Stats, super::Stats)> {
    let lines: Vec<String> = (0..10_000)
        .map(|i| format!("measurement {i}: p99 {} ms\n", i % 97))
        .collect();
    std::fs::write(root.join("measurements.txt"), lines.concat())
        .map_err(|e| format!("write: {e}"))?;
    let mut at = 0u64;
    let mut records = String::new();
    for (i, l) in lines.iter().enumerate() {
        let end = at + l.len() as u64;
        let c = proto::evidence::cite("measurements.txt", at, end, l.as_bytes());
        at = end;
        records.push_str(&format!(
            "{}\n",
            json!({"kind": "ev-decision-intake", "decision": format!("bench decision {i}"),
                   "grounds": [{"claim": format!("it holds {}", c.marker()), "supports": "chosen"}],
                   "blame": "bench", "source_ref": format!("B{i}"), "provenance": "imported"})
        ));
    }
    let src = root.join("cited.jsonl");
    std::fs::write(&src, records).map_err(|e| format!("write: {e}"))?;
    let t = Instant::now();
    w.evctl(
        root,
        &[
            "migrate",
            "--source",
            &format!("canonical:{}", src.display()),
        ],
    )?;
    let import = t.elapsed();
    println!(
        "  imported 10,000 cited decisions (each citation checked at the door): {}",
        fmt_dur(import)
    );
    let ctx = json!({"store": root.display().to_string()});
    let mut held = 0;
    let s = measure(20, 1, || {
        let r = call(w, "ev.evidence", json!([{"context": ctx}]))?;
        held = r["holding"].as_u64().unwrap_or(0);
        Ok(())
    })?;
    if held != 10_000 {
        return Err(format!("ev.evidence: {held} of 10,000 citations hold"));
    }
    println!(
        "  ev.evidence over 10,000 citations: p50 {}",
        fmt_dur(s.p50)
    );
    std::fs::write(root.join(".evolving/config"), "staleness_ref = \"none\"\n")
        .map_err(|e| format!("config: {e}"))?;
    let warm = measure(20, 2, || w.evctl(root, &["check"]).map(|_| ()))?;
    println!(
        "  `evctl check` with 10,000 citations holding (files unchanged): p50 {}",
        fmt_dur(warm.p50)
    );
    // Rewrite the cited file (same bytes, new stamp): every citation is hashed again.
    let path = root.join("measurements.txt");
    let touched = measure(10, 1, || {
        let bytes = std::fs::read(&path).map_err(|e| format!("read: {e}"))?;
        std::fs::write(&path, bytes).map_err(|e| format!("write: {e}"))?;
        w.evctl(root, &["check"]).map(|_| ())
    })?;
    println!(
        "  `evctl check` after the cited file was rewritten (all 10,000 hashed again): p50 {}",
        fmt_dur(touched.p50)
    );
    Ok((import, s, warm, touched))
}

/// A generated 1,000-tick store checked 300 times (a CI-style receipt appended to one of its
/// receipt files before each), the ledger filled to about 100,000 events with client events
/// between the checks; then `evctl ledger replay` by a fresh evd, and again. Returns the events,
/// the check runs replayed and both times.
fn replay(w: &World) -> Res<(u64, u64, Duration, Duration)> {
    let dir = tempfile::Builder::new()
        .prefix("evbench-replay")
        .tempdir()
        .map_err(|e| format!("tempdir: {e}"))?;
    let opts = evd_e2e::store_gen::Options {
        ticks: 1_000,
        seed: 3,
        ..evd_e2e::store_gen::Options::default()
    };
    evd_e2e::store_gen::generate(dir.path(), &opts)?;
    let root = std::fs::canonicalize(dir.path()).map_err(|e| format!("canonicalize: {e}"))?;
    let receipts = root.join(".evolving/results/receipts");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&receipts)
        .map_err(|e| format!("receipts: {e}"))?
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err("the generated store has no receipts".into());
    }
    let mut daemon = w.start_daemon()?;
    let ctx = json!({"store": root.display().to_string()});
    start_intent(w, &ctx)?;
    let started = Instant::now();
    for i in 0..300usize {
        // CI appends a receipt like the file's last one, run later.
        let f = &files[i % files.len()];
        let text = std::fs::read_to_string(f).map_err(|e| format!("read: {e}"))?;
        if let Some(last) = text.lines().last() {
            let mut r: Value = serde_json::from_str(last).map_err(|e| format!("receipt: {e}"))?;
            r["ran_at"] = format!(
                "2026-11-0{}T{:02}:{:02}:00Z",
                2 + i / 100,
                (i / 60) % 24,
                i % 60
            )
            .into();
            r["result"] = if i % 7 == 0 { "red" } else { "green" }.into();
            use std::io::Write;
            let mut out = std::fs::OpenOptions::new()
                .append(true)
                .open(f)
                .map_err(|e| format!("open: {e}"))?;
            writeln!(out, "{}", proto::json::compact(&r)).map_err(|e| format!("append: {e}"))?;
        }
        let out = w.evctl_output(&root, &["check"])?;
        if !matches!(out.status.code(), Some(0 | 1)) {
            return Err(format!(
                "evctl check: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        if i % 3 == 0 {
            let events: Vec<Value> = (0..250)
                .flat_map(|k| plan_events(2_000_000 + i * 250 + k))
                .collect();
            call(
                w,
                "ev.ledger.append",
                json!([{"context": ctx, "events": events}]),
            )?;
        }
    }
    daemon.shutdown();
    println!(
        "  built: 300 checks and 100 batches of client events in {}",
        fmt_dur(started.elapsed())
    );
    let mut daemon = w.start_daemon()?;
    let mut answer = Value::Null;
    let mut timed = || -> Res<Duration> {
        let t = Instant::now();
        let out = w.evctl(&root, &["--json", "ledger", "replay"])?;
        let took = t.elapsed();
        answer = serde_json::from_str(&out).map_err(|e| format!("replay --json: {e}"))?;
        if !answer["fault"].is_null() {
            return Err(format!("the replay failed: {answer}"));
        }
        Ok(took)
    };
    let first = timed()?;
    let again = timed()?;
    daemon.shutdown();
    let lines = answer["lines"].as_u64().unwrap_or(0);
    let replayed = answer["replayed"].as_u64().unwrap_or(0);
    println!(
        "  `evctl ledger replay` at {lines} events, {replayed} check runs reproduced ({} tick reads): {} by a fresh evd, {} again",
        answer["ticks_read"],
        fmt_dur(first),
        fmt_dur(again)
    );
    Ok((lines, replayed, first, again))
}
