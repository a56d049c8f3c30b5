//! The event ledger (seeds 002 and 003) through the real daemon, socket and files: every
//! consistency rule refused at the door with nothing written, the hash chain catching a
//! reordered line, an edited byte, a removed line and an injected event anywhere in the file,
//! unknown schema versions refused and 1.0 upgraded, and faults reported as events, never by
//! changing history.

use std::path::{Path, PathBuf};

use evd_e2e::{rpc_post, Repo, World};
use serde_json::{json, Value};

fn ledger_file(repo: &Repo) -> PathBuf {
    repo.ev_dir().join("results/ledger/events.jsonl")
}

/// An event of `event_type` with `payload`, the envelope complete but for host and git.
fn ev(event_type: &str, payload: Value) -> Value {
    json!({
        "schema_version": "1.1",
        "event_type": event_type,
        "run_id": "R-test-1",
        "agent_id": "agent-planner-07",
        "payload": payload,
    })
}

/// `evctl ledger append` of `events` (written to a file first); the whole run.
fn append(w: &World, repo: &Repo, events: &[Value]) -> evd_e2e::Run {
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("events.jsonl");
    let text: String = events.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(&f, text).expect("write events");
    w.evctl(
        repo.path(),
        &["ledger", "append", f.to_str().expect("utf-8")],
    )
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn repo(w: &World) -> Repo {
    let r = Repo::new();
    w.evctl(r.path(), &["init"]).ok();
    r
}

fn intent(id: &str, parent: Option<&str>) -> Value {
    ev(
        "intent_created",
        json!({"intent_id": id, "parent_intent_id": parent, "goal": "g",
               "constraints": {}, "scope": {}}),
    )
}

fn variant(intent: &str, plan: &str, p: f64) -> Value {
    ev(
        "plan_variant_created",
        json!({"intent_id": intent, "plan_id": plan, "variant_id": "v1",
               "predicted": {"p_success": p, "entropy": 3.0}}),
    )
}

/// `plan_selected`, then `execution_started` in `sandbox`, of `plan` of `intent`.
fn selected_and_started(intent: &str, plan: &str, sandbox: &str) -> [Value; 2] {
    [
        ev(
            "plan_selected",
            json!({"intent_id": intent, "plan_id": plan, "variant_id": "v1"}),
        ),
        ev(
            "execution_started",
            json!({"intent_id": intent, "plan_id": plan, "sandbox_id": sandbox}),
        ),
    ]
}

#[test]
fn events_are_chained_and_every_consistency_rule_is_refused_at_the_door() {
    let w = World::new();
    let r = repo(&w);
    let path = ledger_file(&r);

    // A whole plan's life, in one batch: accepted, numbered and chained.
    let [selected, started] = selected_and_started("I-1", "P-1", "S-1");
    let life = [
        intent("I-1", None),
        variant("I-1", "P-1", 0.8),
        selected,
        started,
        ev(
            "execution_completed",
            json!({"intent_id": "I-1", "plan_id": "P-1", "sandbox_id": "S-1",
            "status": "success", "actual": {"p_success": 1.0, "entropy": 2.0}}),
        ),
    ];
    let out = append(&w, &r, &life).ok();
    assert_eq!(out.stdout, "appended 5 events, seq 1–5\n");
    let written = lines(&path);
    assert_eq!(written.len(), 5);
    let mut prev = "0".repeat(64);
    for (i, l) in written.iter().enumerate() {
        let v: Value = serde_json::from_str(l).expect("a JSON line");
        assert_eq!(v["seq"], json!(i as u64 + 1));
        assert_eq!(
            v["prev"],
            json!(prev),
            "line {} chains to the one before",
            i + 1
        );
        assert_eq!(v["schema_version"], "1.1");
        assert!(v["host"]["hostname"].is_string() && v["git"]["dirty"].is_boolean());
        prev = evd::ledger::rules::line_hash(l);
    }

    // Each rule broken on purpose: refused naming the rule, and nothing written.
    let cases: Vec<(&str, Vec<Value>)> = vec![
        ("R1", vec![variant("I-unknown", "P-9", 0.5)]),
        ("R1", vec![intent("I-1", None)]),
        (
            "R2",
            vec![ev(
                "plan_selected",
                json!({"intent_id": "I-1", "plan_id": "P-nope"}),
            )],
        ),
        (
            "R3",
            vec![
                variant("I-1", "P-2", 0.5),
                ev(
                    "execution_started",
                    json!({"intent_id": "I-1", "plan_id": "P-2"}),
                ),
            ],
        ),
        (
            "R4",
            vec![ev(
                "execution_completed",
                json!({"intent_id": "I-1", "plan_id": "P-1",
                    "status": "failure"}),
            )],
        ),
        (
            "R5",
            vec![ev(
                "intent_promoted_to_main",
                json!({"intent_id": "I-1", "from_branch": "i1",
                    "to_branch": "main", "merge_sha": "abc"}),
            )],
        ),
        (
            "R6",
            vec![ev(
                "git_rebase_completed",
                json!({"intent_id": "I-1", "branch": "i1",
                    "status": "success"}),
            )],
        ),
        (
            "R7",
            vec![
                ev(
                    "execution_started",
                    json!({"intent_id": "I-1", "plan_id": "P-1"}),
                ),
                ev(
                    "execution_completed",
                    json!({"intent_id": "I-1", "plan_id": "P-1",
                    "status": "success", "actual": {"p_success": 0.0}}),
                ),
            ],
        ),
        ("R8", vec![variant("I-1", "P-3", 1.5)]),
        (
            "R8",
            vec![ev(
                "plan_variant_created",
                json!({"intent_id": "I-1", "plan_id": "P-4",
                    "predicted": {"p_success": 0.5, "entropy": -1}}),
            )],
        ),
        (
            "R9",
            vec![
                intent("I-1.1", Some("I-1")),
                ev(
                    "git_merge_attempted",
                    json!({"intent_id": "I-1.1", "from_branch": "i11",
                    "to_branch": "main", "status": "success"}),
                ),
            ],
        ),
        (
            "envelope",
            vec![
                json!({"schema_version": "1.1", "event_type": "intent_created",
                    "agent_id": "a", "payload": {"intent_id": "I-x"}}),
            ],
        ),
        (
            "envelope",
            vec![{
                let mut e = intent("I-y", None);
                e["seq"] = json!(99);
                e
            }],
        ),
        (
            "schema_version",
            vec![{
                let mut e = intent("I-z", None);
                e["schema_version"] = json!("2.0");
                e
            }],
        ),
        ("event_type", vec![ev("verdict_changed", json!({}))]),
        ("event_type", vec![ev("made_up", json!({}))]),
    ];
    for (rule, events) in cases {
        let before = std::fs::read(&path).expect("ledger");
        let out = append(&w, &r, &events);
        assert_eq!(out.code, 1, "{rule}: refused: {out:?}");
        assert!(
            out.stderr.contains(&format!("{rule}:")) && out.stderr.contains("nothing was appended"),
            "{rule}: the refusal names the rule: {}",
            out.stderr
        );
        assert_eq!(
            std::fs::read(&path).expect("ledger"),
            before,
            "{rule}: nothing written"
        );
    }

    // Seed 002's own 1.0 events are upgraded at the door, not refused.
    let mut old = intent("I-2", None);
    old["schema_version"] = json!("1.0");
    append(&w, &r, &[old]).ok();
    let last: Value = serde_json::from_str(lines(&path).last().expect("a line")).expect("json");
    assert_eq!(
        (last["schema_version"].clone(), last["seq"].clone()),
        (json!("1.1"), json!(6))
    );

    // Through the socket as any client speaks it: the same door.
    let ctx = json!({"store": r.path().display().to_string()});
    let ok = rpc_post(
        &w.socket(),
        "ev.ledger.append",
        json!([{"context": ctx, "events": [variant("I-2", "P-1", 0.3)]}]),
    );
    assert_eq!(ok["result"]["first_seq"], json!(7), "{ok}");
    let refused = rpc_post(
        &w.socket(),
        "ev.ledger.append",
        json!([{"context": ctx, "events": [ev("plan_selected", json!({"intent_id": "I-2", "plan_id": "P-0"}))]}]),
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("R2:")),
        "{refused}"
    );

    let ok = w.evctl(r.path(), &["ledger", "verify"]).ok();
    assert_eq!(
        ok.stdout,
        format!("ledger ok: 7 events in {}\n", path.display())
    );
}

/// A ledger of `n` valid events, and its lines.
fn valid_ledger(w: &World, r: &Repo, n: usize) -> Vec<String> {
    let mut events = vec![intent("I-1", None)];
    for i in 1..n {
        events.push(variant("I-1", &format!("P-{i}"), 0.5));
    }
    append(w, r, &events).ok();
    lines(&ledger_file(r))
}

/// Write `lines` back as the ledger, then verify: the hard failure, its line and rule.
fn tampered(w: &World, r: &Repo, lines: &[String]) -> (u64, String, evd_e2e::Run) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(ledger_file(r), text).expect("tamper");
    let out = w.evctl(r.path(), &["--json", "ledger", "verify"]);
    assert_eq!(out.code, 1, "a tampered ledger fails verification: {out:?}");
    let v: Value = serde_json::from_str(&out.stdout).expect("json");
    let f = &v["fault"];
    (
        f["line"].as_u64().expect("line"),
        f["rule"].as_str().expect("rule").to_string(),
        out,
    )
}

#[test]
fn any_rewrite_reorder_removal_or_injection_anywhere_fails_verification_hard() {
    let w = World::new();
    let r = repo(&w);
    let good = valid_ledger(&w, &r, 8);
    assert_eq!(good.len(), 8);

    // Two lines in the middle swapped.
    let mut l = good.clone();
    l.swap(3, 4);
    assert_eq!(tampered(&w, &r, &l).0, 4);

    // One byte edited in the middle (the goal of an event, JSON still valid).
    let mut l = good.clone();
    l[2] = l[2].replacen("0.5", "0.6", 1);
    let (line, rule, _) = tampered(&w, &r, &l);
    assert_eq!(
        (line, rule.as_str()),
        (4, "chain"),
        "the next line's prev no longer matches"
    );

    // A line removed.
    let mut l = good.clone();
    l.remove(5);
    assert_eq!(tampered(&w, &r, &l).0, 6);

    // An event injected, with a plausible seq and prev copied from its neighbour.
    let mut l = good.clone();
    l.insert(2, l[2].clone());
    let (line, _, _) = tampered(&w, &r, &l);
    assert_eq!(line, 4);

    // The last line cut short (a torn write).
    let mut l = good.clone();
    let last = l.len() - 1;
    l[last].truncate(20);
    let text: String = l.iter().map(|x| format!("{x}\n")).collect();
    std::fs::write(ledger_file(&r), text.trim_end()).expect("tear");
    let out = w.evctl(r.path(), &["ledger", "verify"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("line 8 (json)"), "{}", out.stderr);

    // A broken ledger takes no client events, and a fault is reported once, as an event. (A
    // fresh ledger: the faults above were reported in this one, past the lines rewritten.)
    let r = repo(&w);
    let good = valid_ledger(&w, &r, 8);
    let mut l = good.clone();
    l.swap(1, 2);
    let (_, _, first) = tampered(&w, &r, &l);
    let v: Value = serde_json::from_str(&first.stdout).expect("json");
    assert_eq!(v["reported_seq"], json!(9));
    let after = lines(&ledger_file(&r));
    assert_eq!(&after[..8], &l[..], "history itself is never changed");
    let report: Value = serde_json::from_str(&after[8]).expect("json");
    assert_eq!(report["event_type"], "ledger_validation_error");
    assert_eq!(report["payload"]["line"], json!(2));
    let again = w.evctl(r.path(), &["--json", "ledger", "verify"]);
    let v: Value = serde_json::from_str(&again.stdout).expect("json");
    assert_eq!(
        (again.code, v["reported_seq"].clone()),
        (1, Value::Null),
        "reported once"
    );
    let refused = append(&w, &r, &[intent("I-9", None)]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("broken at line 2"),
        "{}",
        refused.stderr
    );
}

#[test]
fn without_a_daemon_the_same_rules_hold_in_process() {
    let w = World::new();
    let r = repo(&w);
    w.stop_daemon();
    let env = [("EVD_NO_DAEMON", "1")];
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("e.jsonl");
    std::fs::write(
        &f,
        format!("{}\n{}\n", intent("I-1", None), variant("I-1", "P-1", 0.2)),
    )
    .expect("write");
    let out = w
        .evctl_env(
            r.path(),
            &env,
            &["ledger", "append", f.to_str().expect("utf-8")],
        )
        .ok();
    assert_eq!(out.stdout, "appended 2 events, seq 1–2\n");
    std::fs::write(&f, format!("{}\n", variant("I-2", "P-1", 0.2))).expect("write");
    let out = w.evctl_env(
        r.path(),
        &env,
        &["ledger", "append", f.to_str().expect("utf-8")],
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("R1:"), "{}", out.stderr);
    w.evctl_env(r.path(), &env, &["ledger", "verify"]).ok();
}

/// The ledger's lines as JSON.
fn events(r: &Repo) -> Vec<Value> {
    lines(&ledger_file(r))
        .iter()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn of_type<'a>(evs: &'a [Value], t: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["event_type"] == t).collect()
}

#[test]
fn evd_journals_its_own_work_with_the_output_of_every_test_it_ran() {
    let w = World::new();
    let r = repo(&w);
    evd_e2e::git(r.path(), &["commit", "-q", "--allow-empty", "-m", "init"]);
    std::fs::write(r.ev_dir().join("config"), "staleness_ref = \"none\"\n").expect("config");
    let decide = w
        .evctl(
            r.path(),
            &[
                "decide",
                "keep the cache",
                "--assume",
                "reads dominate",
                "--assume-test",
                "echo reading; echo careful >&2; true",
                "--counter-test",
                "false",
                "--on-platform",
                "local",
                "--triggered-by",
                "cache/",
                "--surface",
                "api",
                "--blame",
                "Wang Yu",
            ],
        )
        .ok();
    let id = decide
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("an id")
        .to_string();
    let proposed = w
        .evctl_env(
            r.path(),
            &[("EV_AGENT_ID", "planner-bot")],
            &["propose", "shard it", "--assume", "load doubled"],
        )
        .ok();
    let pid = proposed
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("an id")
        .to_string();
    w.evctl(r.path(), &["ratify", &pid, "--blame", "Wang Yu"])
        .ok();
    let run = w
        .evctl(r.path(), &["check", "--run", "--platform", "local"])
        .ok();
    assert!(
        run.stdout.contains("reading"),
        "the test's output is shown as before: {run:?}"
    );
    // A red receipt from outside evd: the watcher re-evaluates and the verdict change is
    // journaled without any command.
    let key = proto::id::receipt_key("echo reading; echo careful >&2; true");
    let head = String::from_utf8(
        std::process::Command::new("git")
            .arg("-C")
            .arg(r.path())
            .args(["rev-parse", "HEAD"])
            .output()
            .expect("git")
            .stdout,
    )
    .expect("utf-8");
    let line = json!({"commit": head.trim(), "falsifiable": true, "platform": "local",
        "ran_at": "2099-01-01T00:00:00Z", "result": "red",
        "test": "echo reading; echo careful >&2; true"});
    let path = r.ev_dir().join(format!("results/receipts/{key}.jsonl"));
    let mut text = std::fs::read_to_string(&path).expect("receipts");
    text.push_str(&format!("{line}\n"));
    std::fs::write(&path, text).expect("append a receipt");
    let seen = evd_e2e::wait_until(std::time::Duration::from_secs(10), || {
        of_type(&events(&r), "verdict_changed")
            .iter()
            .any(|e| e["payload"]["new"] == "red" && e["payload"]["tick_id"] == json!(id))
    });
    assert!(
        seen,
        "the verdict change is in the ledger: {:#?}",
        events(&r)
    );
    w.evctl(r.path(), &["shutdown"]).ok();

    let evs = events(&r);
    let types: Vec<&str> = evs
        .iter()
        .filter_map(|e| e["event_type"].as_str())
        .collect();
    assert_eq!(types.first(), Some(&"daemon_started"));
    assert_eq!(types.last(), Some(&"daemon_stopped"));
    let ticks = of_type(&evs, "tick_recorded");
    let verbs: Vec<&str> = ticks
        .iter()
        .filter_map(|e| e["payload"]["verb"].as_str())
        .collect();
    assert_eq!(verbs, ["decide", "propose", "ratify"]);
    assert_eq!(ticks[1]["payload"]["caller_agent_id"], "planner-bot");
    let ratified = of_type(&evs, "proposal_ratified");
    assert_eq!(ratified.len(), 1);
    assert_eq!(ratified[0]["payload"]["proposal_id"], json!(pid));
    let receipts = of_type(&evs, "receipt_appended");
    assert_eq!(
        receipts.len(),
        1,
        "evd's own receipt (the outside one is the watcher's change)"
    );
    assert_eq!(receipts[0]["payload"]["receipt"]["result"], "green");
    assert!(!of_type(&evs, "check_run").is_empty());
    assert!(of_type(&evs, "check_run")[0]["payload"]["fingerprint"]
        .as_str()
        .is_some_and(|f| f.len() == 64));

    // Every test run, with its output kept under results/runs/<run_id>/ and cited by sha256.
    let calls = of_type(&evs, "tool_call");
    assert_eq!(calls.len(), 2, "the check and its counter-test");
    assert_eq!(calls[0]["payload"]["stdout_trunc"], "reading\n");
    assert_eq!(calls[0]["payload"]["stderr_trunc"], "careful\n");
    assert_eq!(calls[0]["payload"]["exit_code"], json!(0));
    assert_eq!(calls[1]["payload"]["exit_code"], json!(1));
    for c in &calls {
        for a in c["payload"]["artifacts"].as_array().expect("artifacts") {
            let rel = a["path"].as_str().expect("a path");
            assert!(
                rel.starts_with("runs/R-"),
                "only under runs/<run_id>/: {rel}"
            );
            let bytes = std::fs::read(r.ev_dir().join("results").join(rel)).expect("artifact");
            assert_eq!(
                a["sha256"],
                json!(evd::ledger::rules::line_hash(&String::from_utf8_lossy(
                    &bytes
                )))
            );
        }
    }
    w.evctl(r.path(), &["ledger", "verify"]).ok();
}

/// One plan's whole life: created by `agent` with `model` on `tier`, predicting `p` and
/// entropy `e` (estimator `est`), selected, run, and completed with `ok` and `actual_e`.
#[allow(clippy::too_many_arguments)]
fn plan_life(
    intent: &str,
    plan: &str,
    agent: &str,
    (model, tier): (&str, &str),
    (p, e, est): (f64, f64, &str),
    ok: bool,
    actual_e: f64,
    reason: &str,
) -> Vec<Value> {
    let mut variant = ev(
        "plan_variant_created",
        json!({"intent_id": intent, "plan_id": plan, "variant_id": "v1",
               "model": {"provider": "p", "model_id": model, "tier": tier, "routing_reason": "r"},
               "predicted": {"p_success": p, "entropy": e, "estimator_versions": {"entropy": est}}}),
    );
    variant["agent_id"] = json!(agent);
    let mut done = json!({"intent_id": intent, "plan_id": plan, "sandbox_id": "S",
        "status": if ok { "success" } else { "failure" },
        "actual": {"p_success": if ok { 1.0 } else { 0.0 }, "entropy": actual_e,
                   "cost": 2.0, "impact": if ok { 6.0 } else { 0.0 }}});
    if !ok {
        done["failure_reason"] = json!(reason);
    }
    let [selected, started] = selected_and_started(intent, plan, "S");
    vec![variant, selected, started, ev("execution_completed", done)]
}

fn query(w: &World, r: &Repo, name: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--json", "ledger", "query", name];
    args.extend_from_slice(extra);
    let out = w.evctl(r.path(), &args).ok();
    serde_json::from_str(&out.stdout).expect("json")
}

#[test]
fn the_ledger_answers_seed_002s_questions() {
    let w = World::new();
    let r = repo(&w);
    let mut evs = vec![intent("I-1", None)];
    evs.extend(plan_life(
        "I-1",
        "P-1",
        "planner-a",
        ("m-fast", "flash"),
        (0.9, 2.0, "entropy_v1"),
        true,
        3.0,
        "",
    ));
    evs.extend(plan_life(
        "I-1",
        "P-2",
        "planner-a",
        ("m-fast", "flash"),
        (0.8, 4.0, "entropy_v1"),
        false,
        5.0,
        "tests failed",
    ));
    evs.extend(plan_life(
        "I-1",
        "P-3",
        "planner-b",
        ("m-deep", "deep"),
        (0.6, 1.0, "entropy_v2"),
        true,
        1.0,
        "",
    ));
    evs.extend(plan_life(
        "I-1",
        "P-4",
        "planner-a",
        ("m-fast", "flash"),
        (0.7, 2.0, "entropy_v1"),
        false,
        2.0,
        "tests failed",
    ));
    for (files, status) in [
        (json!(["db/a.sql", "db/b.sql", "api/x.rs"]), "conflict"),
        (json!([]), "success"),
        (json!(["db/c.sql"]), "conflict"),
        (json!([]), "success"),
    ] {
        evs.push(ev("git_rebase_started", json!({"intent_id": "I-1", "branch": "i1", "parent_branch": "main", "parent_head_sha": "abc"})));
        evs.push(ev("git_rebase_completed", json!({"intent_id": "I-1", "branch": "i1", "status": status, "conflict_files": files, "duration_ms": 5})));
    }
    append(&w, &r, &evs).ok();
    w.evctl(r.path(), &["ledger", "verify"]).ok();

    let c = query(&w, &r, "calibration", &[]);
    assert_eq!(
        c["rows"],
        json!([
            {"agent_id": "planner-a", "model_id": "m-fast", "executions": 3, "predicted_p_success": 0.8, "actual_p_success": 0.3333, "mean_abs_error": 0.5333},
            {"agent_id": "planner-b", "model_id": "m-deep", "executions": 1, "predicted_p_success": 0.6, "actual_p_success": 1.0, "mean_abs_error": 0.4},
        ])
    );
    let c = query(&w, &r, "calibration", &["--last", "1"]);
    assert_eq!(c["rows"][0]["executions"], json!(1));
    assert_eq!(
        c["rows"][0]["predicted_p_success"],
        json!(0.7),
        "the latest of planner-a's"
    );

    let routing = query(&w, &r, "routing", &[]);
    assert_eq!(
        routing["rows"],
        json!([
            {"tier": "deep", "executions": 1, "success_rate": 1.0, "cost": 2.0, "impact": 6.0, "impact_per_cost": 3.0},
            {"tier": "flash", "executions": 3, "success_rate": 0.3333, "cost": 6.0, "impact": 6.0, "impact_per_cost": 1.0},
        ])
    );
    let failures = query(&w, &r, "failures", &[]);
    assert_eq!(
        failures["rows"],
        json!([
            {"kind": "execution", "reason": "tests failed", "count": 2},
            {"kind": "rebase", "reason": "conflict", "count": 2},
        ])
    );
    let entropy = query(&w, &r, "entropy", &[]);
    assert_eq!(
        entropy["rows"],
        json!([
            {"estimator_version": "entropy_v1", "executions": 3, "predicted_entropy": 2.6667, "actual_entropy": 3.3333},
            {"estimator_version": "entropy_v2", "executions": 1, "predicted_entropy": 1.0, "actual_entropy": 1.0},
        ])
    );
    let conflicts = query(&w, &r, "conflicts", &[]);
    assert_eq!(conflicts["rebases"], json!(4));
    assert_eq!(
        conflicts["rows"],
        json!([
            {"area": "db", "conflicted_rebases": 2, "rate": 0.5},
            {"area": "api", "conflicted_rebases": 1, "rate": 0.25},
        ])
    );

    // Decisions: a verdict that goes red and back, from evd's own journal.
    evd_e2e::git(r.path(), &["commit", "-q", "--allow-empty", "-m", "init"]);
    std::fs::write(r.ev_dir().join("config"), "staleness_ref = \"none\"\n").expect("config");
    let d = w
        .evctl(
            r.path(),
            &[
                "decide",
                "d",
                "--assume",
                "a",
                "--assume-test",
                "true",
                "--counter-test",
                "false",
                "--on-platform",
                "local",
                "--triggered-by",
                "x",
                "--surface",
                "s",
                "--blame",
                "b",
            ],
        )
        .ok();
    let id = d.stdout.split_whitespace().nth(1).expect("id").to_string();
    w.evctl(r.path(), &["check", "--run", "--platform", "local"])
        .ok();
    w.evctl(r.path(), &["check"]).ok();
    let key = proto::id::receipt_key("true");
    let path = r.ev_dir().join(format!("results/receipts/{key}.jsonl"));
    let first = std::fs::read_to_string(&path).expect("receipts");
    for result in ["red", "green"] {
        let mut v: Value =
            serde_json::from_str(first.lines().next().expect("a line")).expect("json");
        v["result"] = json!(result);
        v["ran_at"] = json!(if result == "red" {
            "2098-01-01T00:00:00Z"
        } else {
            "2099-01-01T00:00:00Z"
        });
        let mut text = std::fs::read_to_string(&path).expect("receipts");
        text.push_str(&format!("{v}\n"));
        std::fs::write(&path, text).expect("write");
        w.evctl(r.path(), &["check"]);
    }
    let q = query(&w, &r, "decisions", &[]);
    let row = q["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|x| x["tick_id"] == json!(id)).cloned())
        .expect("a row");
    assert_eq!(
        (
            row["resurfaced"].clone(),
            row["resolved"].clone(),
            row["label"].clone()
        ),
        (json!(1), json!(1), json!("green")),
        "{q}"
    );
    assert!(row["mean_secs_red_to_resolved"]
        .as_f64()
        .is_some_and(|s| s >= 0.0));

    let plain = w.evctl(r.path(), &["ledger", "query", "routing"]).ok();
    assert_eq!(
        plain.stdout.lines().next(),
        Some("tier   executions  success_rate  cost  impact  impact_per_cost")
    );
    let bad = w.evctl(r.path(), &["ledger", "query", "vibes"]);
    assert_eq!(bad.code, 2, "clap names the queries there are: {bad:?}");
}

/// Seed 003's rule 4: an event's artifacts live only under `runs/<run_id>/` of the store's
/// host-local area, and hash as the event says, at the door and whenever the ledger is
/// verified; an artifact changed after the fact fails verification hard, naming the line.
#[test]
fn artifacts_live_only_under_their_run_and_a_changed_one_fails_verification() {
    let w = World::new();
    let r = repo(&w);
    let results = r.ev_dir().join("results");
    std::fs::create_dir_all(results.join("runs/R-test-1")).expect("mkdir");
    std::fs::write(results.join("runs/R-test-1/diff.patch"), "+ cache\n").expect("write");
    std::fs::create_dir_all(results.join("elsewhere")).expect("mkdir");
    std::fs::write(results.join("elsewhere/diff.patch"), "+ cache\n").expect("write");
    let sha = proto::evidence::sha256_hex(b"+ cache\n");
    append(
        &w,
        &r,
        &[intent("I-1", None), variant("I-1", "P-1", 0.7)]
            .into_iter()
            .chain(selected_and_started("I-1", "P-1", "S-1"))
            .collect::<Vec<_>>(),
    )
    .ok();
    let done = |artifacts: Value| {
        ev(
            "execution_completed",
            json!({"intent_id": "I-1", "plan_id": "P-1", "sandbox_id": "S-1", "status": "failure",
                   "failure_reason": "tests", "artifacts": artifacts,
                   "actual": {"p_success": 0.0}}),
        )
    };
    let before = lines(&ledger_file(&r)).len();
    for (bad, why) in [
        (
            json!([{"kind": "diff", "path": "elsewhere/diff.patch"}]),
            "is not under runs/R-test-1/",
        ),
        (
            json!([{"kind": "diff", "path": "runs/R-other/diff.patch"}]),
            "is not under runs/R-test-1/",
        ),
        (
            json!([{"kind": "diff", "path": "runs/R-test-1/../../elsewhere/diff.patch"}]),
            "is not under runs/R-test-1/",
        ),
        (
            json!([{"kind": "diff", "path": "/runs/R-test-1/diff.patch"}]),
            "is not under runs/R-test-1/",
        ),
        (
            json!([{"kind": "diff", "path": "runs/R-test-1/diff.patch", "sha256": "abc"}]),
            "64 lowercase hex",
        ),
        (
            json!([{"kind": "diff", "path": "runs/R-test-1/diff.patch", "sha256": "0".repeat(64)}]),
            "no longer hashes to the sha256",
        ),
        (
            json!([{"kind": "diff", "path": "runs/R-test-1/gone.patch", "sha256": sha}]),
            "cannot be read",
        ),
        (json!("runs/R-test-1/diff.patch"), "must be an array"),
    ] {
        let out = append(&w, &r, &[done(bad.clone())]);
        assert_eq!(out.code, 1, "{bad}: {out:?}");
        assert!(out.stderr.contains(why), "{bad}: {}", out.stderr);
        assert!(
            out.stderr.contains("nothing was appended"),
            "{}",
            out.stderr
        );
    }
    assert_eq!(lines(&ledger_file(&r)).len(), before, "nothing was written");
    append(
        &w,
        &r,
        &[done(
            json!([{"kind": "diff", "path": "runs/R-test-1/diff.patch", "sha256": sha}]),
        )],
    )
    .ok();
    let line = lines(&ledger_file(&r)).len() as u64;
    w.evctl(r.path(), &["ledger", "verify"]).ok();

    // The artifact changes afterwards: verification fails hard, naming the line citing it.
    std::fs::write(
        results.join("runs/R-test-1/diff.patch"),
        "+ cache\n+ more\n",
    )
    .expect("edit");
    let out = w.evctl(r.path(), &["--json", "ledger", "verify"]);
    assert_eq!(out.code, 1, "{out:?}");
    let v: Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(v["fault"]["rule"], "artifact", "{v}");
    assert_eq!(v["fault"]["line"], line, "{v}");
    assert!(
        v["fault"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("runs/R-test-1/diff.patch no longer hashes")),
        "{v}"
    );
    // Put back, it verifies again (the fault stays on record as an event).
    std::fs::write(results.join("runs/R-test-1/diff.patch"), "+ cache\n").expect("restore");
    w.evctl(r.path(), &["ledger", "verify"]).ok();
    let evs = events(&r);
    assert_eq!(of_type(&evs, "ledger_validation_error").len(), 1);
}

/// The end of the chain: a removed or edited last line is caught by the head evd keeps beside
/// the file (an edit that keeps the length and puts the mtime back too, by a running evd); a
/// torn or shortened ledger takes no event until `evctl ledger repair`, which moves a torn
/// fragment aside, declares removed seqs skipped (never used twice) and says so in the ledger.
#[test]
fn the_end_of_the_chain_is_held_by_its_head_and_repaired_explicitly() {
    let w = World::new();
    let r = repo(&w);
    let good = valid_ledger(&w, &r, 5);
    let path = ledger_file(&r);
    let write = |lines: &[String], end: &str| {
        let text: String = lines.iter().map(|x| format!("{x}\n")).collect();
        std::fs::write(&path, format!("{}{end}", text)).expect("write");
    };
    let verify = || {
        let out = w.evctl(r.path(), &["--json", "ledger", "verify"]);
        let v: Value = serde_json::from_str(&out.stdout).expect("json");
        (out.code, v)
    };
    assert_eq!(verify().0, 0);
    let head = std::fs::read_to_string(r.ev_dir().join("results/ledger/head")).expect("head");
    assert!(head.contains("\"seq\":5"), "{head}");

    // The last line edited in place, same length, its mtime put back: a warm evd sees it.
    let before = std::fs::metadata(&path)
        .expect("stat")
        .modified()
        .expect("mtime");
    let mut l = good.clone();
    l[4] = l[4].replacen("0.5", "0.6", 1);
    assert_eq!(l[4].len(), good[4].len());
    write(&l, "");
    std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open")
        .set_modified(before)
        .expect("utime");
    let (code, v) = verify();
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["fault"]["rule"], "head", "{v}");
    assert!(
        v["fault"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("edited"),
        "{v}"
    );
    // (The fault was reported as seq 6; a fresh ledger for the next case.)
    let r = repo(&w);
    let good = valid_ledger(&w, &r, 5);
    let path = ledger_file(&r);
    let write = |lines: &[String], end: &str| {
        let text: String = lines.iter().map(|x| format!("{x}\n")).collect();
        std::fs::write(&path, format!("{}{end}", text)).expect("write");
    };
    let verify = || {
        let out = w.evctl(r.path(), &["--json", "ledger", "verify"]);
        let v: Value = serde_json::from_str(&out.stdout).expect("json");
        (out.code, v)
    };

    // The last line removed: caught, and nothing reuses its seq.
    write(&good[..4], "");
    let (code, v) = verify();
    assert_eq!(
        (code, v["fault"]["rule"].clone()),
        (1, json!("head")),
        "{v}"
    );
    assert!(
        v["fault"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("removed from its end"),
        "{v}"
    );
    let refused = append(&w, &r, &[variant("I-1", "P-9", 0.5)]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("ledger repair"),
        "{}",
        refused.stderr
    );
    let fixed = w.evctl(r.path(), &["ledger", "repair"]).ok();
    assert!(
        fixed.stdout.contains("seq 5–5 declared skipped"),
        "{}",
        fixed.stdout
    );
    assert_eq!(verify().0, 0, "a repaired ledger verifies");
    let out = append(&w, &r, &[variant("I-1", "P-9", 0.5)]).ok();
    assert!(
        out.stdout.contains("seq 7"),
        "seq 5 is never used again: {}",
        out.stdout
    );

    // A torn last line: reported, nothing appended after it, moved aside whole by a repair.
    let now = lines(&path);
    let mut torn = now.clone();
    let last = torn.len() - 1;
    torn[last].truncate(30);
    let fragment = torn[last].clone();
    let text: String = torn.iter().map(|x| format!("{x}\n")).collect();
    std::fs::write(&path, text.trim_end_matches('\n')).expect("tear");
    assert_eq!(verify().0, 1);
    let refused = append(&w, &r, &[variant("I-1", "P-10", 0.5)]);
    assert_eq!(refused.code, 1, "{refused:?}");
    let fixed = w.evctl(r.path(), &["--json", "ledger", "repair"]).ok();
    let v: Value = serde_json::from_str(&fixed.stdout).expect("json");
    let moved = v["repaired"]
        .as_array()
        .expect("repaired")
        .iter()
        .find(|p| p["kind"] == "torn_tail_moved")
        .expect("the fragment moved")
        .clone();
    let kept = r
        .ev_dir()
        .join("results")
        .join(moved["artifacts"][0]["path"].as_str().expect("path"));
    assert_eq!(std::fs::read_to_string(kept).expect("kept"), fragment);
    assert!(!std::fs::read_to_string(&path)
        .expect("read")
        .contains(&format!("{fragment}\n")));
    assert_eq!(verify().0, 0, "{:?}", lines(&path));
    append(&w, &r, &[variant("I-1", "P-10", 0.5)]).ok();
    let again = w.evctl(r.path(), &["ledger", "repair"]).ok();
    assert!(
        again.stdout.starts_with("ledger needs no repair"),
        "{}",
        again.stdout
    );
}

/// The door: evd's own agent ids are reserved (a client's `tool_call` is accepted under its own
/// agent id, never under `evd`), R8 holds for a bounded field wherever it appears, and an
/// artifact without a sha256 is refused (evidence nobody can check).
#[test]
fn the_door_reserves_evds_agent_id_bounds_every_metric_and_wants_artifact_hashes() {
    let w = World::new();
    let r = repo(&w);
    let tool = |agent: &str| {
        json!({"schema_version": "1.1", "event_type": "tool_call", "run_id": "R-tool-1",
               "agent_id": agent, "payload": {"tool_name": "bash", "command": "make",
               "exit_code": 0, "duration_ms": 5}})
    };
    let out = append(&w, &r, &[tool("evd")]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("reserved for evd's own events"),
        "{}",
        out.stderr
    );
    let out = append(&w, &r, &[tool("evctl")]);
    assert_eq!(out.code, 1, "{out:?}");
    append(&w, &r, &[tool("agent-runner-3")]).ok();

    let policy = json!({"schema_version": "1.1", "event_type": "policy_changed",
        "run_id": "R-p-1", "agent_id": "ops", "payload": {"lambda": -1}});
    let out = append(&w, &r, &[policy]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("R8") && out.stderr.contains("payload.lambda is -1"),
        "{}",
        out.stderr
    );

    let results = r.ev_dir().join("results");
    std::fs::create_dir_all(results.join("runs/R-test-1")).expect("mkdir");
    std::fs::write(results.join("runs/R-test-1/log.txt"), "ok\n").expect("write");
    append(
        &w,
        &r,
        &[intent("I-1", None), variant("I-1", "P-1", 0.7)]
            .into_iter()
            .chain(selected_and_started("I-1", "P-1", "S-1"))
            .collect::<Vec<_>>(),
    )
    .ok();
    let done = ev(
        "execution_completed",
        json!({"intent_id": "I-1", "plan_id": "P-1", "sandbox_id": "S-1", "status": "failure",
               "failure_reason": "tests", "actual": {"p_success": 0.0},
               "artifacts": [{"kind": "log", "path": "runs/R-test-1/log.txt"}]}),
    );
    let out = append(&w, &r, &[done]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("has no sha256"), "{}", out.stderr);
    w.evctl(r.path(), &["ledger", "verify"]).ok();
}
