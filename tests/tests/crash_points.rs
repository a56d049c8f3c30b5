//! The crash-point campaign: evd killed (as `kill -9` would) at each durable step of every kind
//! of write — decide, guard, supersede, propose and ratify (the tick written, HEAD moved, the
//! journal written), a receipt appended, a ledger append, migrate's batch (staged, published) —
//! while a real `evctl` waits for the answer. evctl asks again with the same request id (the
//! next daemon passes the point: it dies only once), and then, with a daemon that has no crash
//! point at all: every write evctl reported done is there exactly once, nothing it reported
//! failed is there, every tick on the chain has exactly one `tick_recorded`, and `ledger
//! verify` and `ledger replay` are clean.

use std::path::Path;
use std::time::Duration;

use evd_e2e::{chain, Repo, Run, World};

const LIMIT: Duration = Duration::from_secs(60);

/// A world whose daemons die at `point` the first time any of them reaches it.
fn crashing(point: &str, marker: &Path) -> World {
    World::with_env(&[(
        "FAILPOINTS",
        &format!("{point}=return({})", marker.display()),
    )])
}

fn run(w: &World, cwd: &Path, args: &[&str]) -> Run {
    w.evctl_within(cwd, args, LIMIT)
        .unwrap_or_else(|| panic!("`evctl {}` hung", args.join(" ")))
}

/// What must hold after any crash, read by a daemon without crash points.
fn consistent(repo: &Repo, what: &str) {
    let w = World::new();
    let ledger = std::fs::read_to_string(repo.ev_dir().join("results/ledger/events.jsonl"))
        .unwrap_or_default();
    for tick in chain(repo) {
        let n = ledger
            .lines()
            .filter(|l| {
                l.contains("\"event_type\":\"tick_recorded\"")
                    && l.contains(&format!("\"tick_id\":\"{tick}\""))
            })
            .count();
        // The tick a recovery writes is journaled when its retry comes, or by this daemon's
        // first look (a list): asked below, so count after.
        assert!(n <= 1, "{what}: tick {tick} journaled {n} times");
    }
    run(&w, repo.path(), &["list"]).ok();
    let v = run(&w, repo.path(), &["ledger", "verify"]);
    assert_eq!(v.code, 0, "{what}: {v:?}");
    let r = run(&w, repo.path(), &["ledger", "replay"]);
    assert_eq!(r.code, 0, "{what}: {r:?}");
    w.stop_daemon();
}

/// The outcome evctl reported: done (exit 0) or "already applied" after a lost answer both
/// mean the write is there.
fn landed(r: &Run) -> bool {
    r.code == 0 || r.stderr.contains("before its answer was lost")
}

#[test]
fn tick_writes_killed_at_each_durable_step_land_exactly_once() {
    for point in [
        "append.tick_durable",
        "append.head_written",
        "write.journaled",
    ] {
        let dir = tempfile::tempdir().expect("marker dir");
        // Set up without crash points.
        let repo = Repo::new();
        let setup = World::new();
        run(&setup, repo.path(), &["init"]).ok();
        let first = run(
            &setup,
            repo.path(),
            &[
                "decide", "base", "--assume", "a", "--assume", "b", "--blame", "x",
            ],
        )
        .ok();
        let base = first
            .stdout
            .split_whitespace()
            .nth(1)
            .expect("id")
            .to_string();
        let p = run(
            &setup,
            repo.path(),
            &[
                "propose",
                "proposed",
                "--assume",
                "c",
                "--source-ref",
                "r-1",
                "--json",
            ],
        );
        let proposal = serde_json::from_str::<serde_json::Value>(p.stdout.trim())
            .ok()
            .and_then(|v| v["id"].as_str().map(str::to_string));
        setup.stop_daemon();

        let verbs: Vec<(&str, Vec<String>)> = vec![
            (
                "decide",
                ["decide", "crashed decide", "--assume", "y", "--blame", "b"]
                    .map(String::from)
                    .to_vec(),
            ),
            (
                "guard",
                [
                    "guard",
                    "true",
                    "HEAD-AT-THE-TIME",
                    "0",
                    "--counter-test",
                    "false",
                    "--on-platform",
                    "local",
                    "--triggered-by",
                    "README",
                    "--surface",
                    "core",
                    "--blame",
                    "b",
                ]
                .map(String::from)
                .to_vec(),
            ),
            (
                "supersede",
                [
                    "supersede",
                    base.as_str(),
                    "crashed supersede",
                    "--assume",
                    "z",
                    "--blame",
                    "b",
                ]
                .map(String::from)
                .to_vec(),
            ),
        ];
        let mut verbs = verbs;
        if let Some(pid) = &proposal {
            verbs.push((
                "ratify",
                ["ratify", pid.as_str(), "--blame", "b"]
                    .map(String::from)
                    .to_vec(),
            ));
        }
        for (verb, args) in verbs {
            let marker = dir.path().join(format!("{verb}-crashed"));
            let w = crashing(point, &marker);
            let before = chain(&repo).len();
            // A guard amends the tick at HEAD (the decide just before it).
            let head = chain(&repo).first().cloned().unwrap_or_default();
            let args: Vec<&str> = args
                .iter()
                .map(|a| {
                    if a == "HEAD-AT-THE-TIME" {
                        head.as_str()
                    } else {
                        a.as_str()
                    }
                })
                .collect();
            let r = run(&w, repo.path(), &args);
            w.stop_daemon();
            let after = chain(&repo).len();
            let what = format!("{verb} killed at {point}");
            assert!(marker.exists(), "{what}: evd never got there: {r:?}");
            if landed(&r) {
                assert_eq!(
                    after,
                    before + 1,
                    "{what}: reported done, on the chain once: {r:?}"
                );
            } else {
                assert_eq!(
                    after, before,
                    "{what}: reported failed, so not there: {r:?}"
                );
            }
            consistent(&repo, &what);
        }
        // (Each verb's own check above: one tick more when reported done, none when not.)
    }
}

#[test]
fn a_receipt_and_a_ledger_append_killed_after_they_are_durable_land_once() {
    let dir = tempfile::tempdir().expect("marker dir");
    let repo = Repo::new();
    let setup = World::new();
    run(&setup, repo.path(), &["init"]).ok();
    run(
        &setup,
        repo.path(),
        &[
            "decide",
            "tested",
            "--assume",
            "it passes",
            "--assume-test",
            "true",
            "--counter-test",
            "false",
            "--on-platform",
            "local",
            "--triggered-by",
            "README",
            "--surface",
            "core",
            "--blame",
            "b",
        ],
    )
    .ok();
    setup.stop_daemon();

    let receipts = |repo: &Repo| -> usize {
        std::fs::read_dir(repo.ev_dir().join("results/receipts"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| {
                        std::fs::read_to_string(e.path())
                            .unwrap_or_default()
                            .lines()
                            .count()
                    })
                    .sum()
            })
            .unwrap_or(0)
    };
    let w = crashing("receipts.appended", &dir.path().join("receipt"));
    let r = run(&w, repo.path(), &["check", "--run", "--platform", "local"]);
    w.stop_daemon();
    assert!(
        dir.path().join("receipt").exists(),
        "evd never got there: {r:?}"
    );
    // The test and its counter-test: two receipts, written once whatever the retry did.
    assert_eq!(receipts(&repo), 2, "{r:?}");
    consistent(&repo, "check --run killed after its receipts");

    let events = repo.path().join("events-in.jsonl");
    std::fs::write(
        &events,
        "{\"schema_version\":\"1.1\",\"event_type\":\"intent_created\",\"run_id\":\"R-c-1\",\
         \"agent_id\":\"agent-x\",\"payload\":{\"intent_id\":\"I-1\",\"parent_intent_id\":null,\
         \"goal\":\"g\",\"constraints\":{},\"scope\":{}}}\n",
    )
    .expect("write");
    let marker = dir.path().join("ledger");
    let w = crashing("ledger.appended", &marker);
    let r = run(
        &w,
        repo.path(),
        &["ledger", "append", events.to_str().expect("utf-8")],
    );
    w.stop_daemon();
    assert!(marker.exists(), "evd never got there: {r:?}");
    let ledger = std::fs::read_to_string(repo.ev_dir().join("results/ledger/events.jsonl"))
        .unwrap_or_default();
    assert_eq!(
        ledger.matches("\"intent_id\":\"I-1\"").count(),
        1,
        "appended once: {r:?}"
    );
    consistent(&repo, "ledger append killed after the batch");
}

#[test]
fn a_migrate_batch_killed_while_staged_or_published_lands_whole_or_not_at_all() {
    for point in ["batch.staged", "batch.published", "batch.head_written"] {
        let dir = tempfile::tempdir().expect("marker dir");
        let repo = Repo::new();
        let setup = World::new();
        run(&setup, repo.path(), &["init"]).ok();
        setup.stop_daemon();
        let lines: String = (1..=20)
            .map(|i| {
                format!(
                    "{{\"kind\":\"ev-decision-intake\",\"decision\":\"imported {i}\",\"grounds\":[],\
                     \"provenance\":\"imported\",\"source_ref\":\"R{i}\",\"blame\":\"b\"}}\n"
                )
            })
            .collect();
        std::fs::write(repo.path().join("history.jsonl"), lines).expect("write");
        let marker = dir.path().join("migrate");
        let w = crashing(point, &marker);
        let r = run(
            &w,
            repo.path(),
            &["migrate", "--source", "canonical:history.jsonl"],
        );
        w.stop_daemon();
        assert!(marker.exists(), "{point}: evd never got there: {r:?}");
        let n = chain(&repo).len();
        assert!(
            n == 0 || n == 20,
            "{point}: the batch landed whole or not at all, not {n} ticks: {r:?}"
        );
        if landed(&r) {
            assert_eq!(n, 20, "{point}: reported done: {r:?}");
        }
        consistent(&repo, &format!("migrate killed at {point}"));
    }
}
