//! `evctl report` in a real browser: a store with a lineage (a superseded decision), test
//! grounds whose verdicts moved (green, then red), cited evidence, and a ledger of two agents'
//! plans and executions; the page is loaded from disk by headless Chromium (Debian's, which
//! `.ci/run` installs), which renders it to a screenshot and dumps its DOM. The test checks that
//! the page makes no console error, that each chart is present and has marks, and that the
//! numbers in the DOM are `evctl ledger query --json`'s.

use std::path::Path;
use std::process::Command;

use evd_e2e::{schema_decision, target_dir, Repo, World};
use serde_json::{json, Value};

fn chromium() -> String {
    for c in ["chromium", "chromium-browser"] {
        if Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return c.into();
        }
    }
    panic!("chromium is required for this test (Debian: `apt-get install chromium`; .ci/run installs it)");
}

fn plan_events(agent: &str, intent: &str, plans: &[(f64, bool)]) -> String {
    let ev = |t: &str, payload: Value| {
        json!({"schema_version": "1.1", "event_type": t, "run_id": "R-report",
            "agent_id": agent, "payload": payload})
        .to_string()
    };
    let mut lines = vec![ev(
        "intent_created",
        json!({"intent_id": intent, "parent_intent_id": null, "goal": "g"}),
    )];
    for (i, (pred, ok)) in plans.iter().enumerate() {
        let plan = format!("P-{i}");
        lines.push(ev(
            "plan_variant_created",
            json!({"intent_id": intent, "plan_id": plan,
            "variant_id": "v1", "model": {"provider": "p", "model_id": "m1",
            "tier": if i % 2 == 0 { "flash" } else { "deep" }, "routing_reason": "r"},
            "predicted": {"p_success": pred, "entropy": 1.5,
                          "estimator_versions": {"entropy": "entropy_v1"}}}),
        ));
        lines.push(ev(
            "plan_selected",
            json!({"intent_id": intent, "plan_id": plan, "variant_id": "v1"}),
        ));
        lines.push(ev(
            "execution_started",
            json!({"intent_id": intent, "plan_id": plan, "sandbox_id": "S"}),
        ));
        let mut done = json!({"intent_id": intent, "plan_id": plan, "sandbox_id": "S",
            "status": "success", "actual": {"p_success": 1.0, "entropy": 2.0, "cost": 2.0, "impact": 3.0}});
        if !ok {
            done["status"] = "failure".into();
            done["failure_reason"] = "tests failed".into();
            done["actual"]["p_success"] = 0.0.into();
        }
        lines.push(ev("execution_completed", done));
    }
    lines.join("\n") + "\n"
}

fn append(w: &World, p: &Path, text: &str) {
    std::fs::write(p.join("events.jsonl"), text).expect("write");
    w.evctl(p, &["ledger", "append", "events.jsonl"]).ok();
    std::fs::remove_file(p.join("events.jsonl")).expect("remove");
}

#[test]
fn the_report_renders_in_chromium_with_every_chart_and_the_ledgers_numbers() {
    let chromium = chromium();
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    schema_decision(&w, p, || {
        let cfg = p.join(".evolving/config");
        let text = std::fs::read_to_string(&cfg).expect("config");
        std::fs::write(&cfg, text.replace("\"live-origin\"", "\"none\"")).expect("config");
    });
    std::fs::write(p.join("bench.txt"), "p99 4.8 ms\n").expect("write");
    let first = w
        .evctl(
            p,
            &[
                "decide",
                "use sqlite",
                "--assume",
                "one writer",
                "--blame",
                "Wang Yu",
            ],
        )
        .ok()
        .stdout;
    let first = first.split_whitespace().nth(1).expect("id").to_string();
    w.evctl(
        p,
        &[
            "supersede",
            &first,
            "use postgres",
            "--assume",
            "many writers now",
            "--blame",
            "Wang Yu",
        ],
    )
    .ok();
    let marker = w.evctl(p, &["cite", "bench.txt:1"]).ok().stdout;
    w.evctl(
        p,
        &[
            "decide",
            "keep the queue shallow",
            "--assume",
            &format!("p99 stays low {}", marker.trim_end()),
            "--blame",
            "Wang Yu",
        ],
    )
    .ok();
    w.evctl(p, &["check", "--run"]).ok();
    std::fs::write(p.join("broken"), "").expect("write");
    w.evctl(p, &["check", "--run"]);
    append(
        &w,
        p,
        &plan_events("planner", "I-1", &[(0.9, true), (0.8, true), (0.7, false)]),
    );
    append(
        &w,
        p,
        &plan_events("reviewer", "I-2", &[(0.3, false), (0.2, true)]),
    );

    let out_dir = target_dir().join("report-test");
    std::fs::create_dir_all(&out_dir).expect("mkdir");
    let page = out_dir.join("report.html");
    let r = w
        .evctl(p, &["report", "--out", &page.display().to_string()])
        .ok();
    assert!(r.stdout.starts_with("wrote "), "{r:?}");
    let html = std::fs::read_to_string(&page).expect("page");
    // Self-contained: nothing fetched, no script.
    for banned in ["<script", "src=\"http", "href=\"http", "@import", "url("] {
        assert!(!html.contains(banned), "the page holds {banned}");
    }

    let profile = tempfile::tempdir().expect("profile");
    let shot = out_dir.join("report.png");
    let _ = std::fs::remove_file(&shot);
    let flags = |c: &mut Command| {
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()));
    };
    let url = format!("file://{}", page.display());
    let mut dump = Command::new(&chromium);
    flags(&mut dump);
    let dom = dump
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium --dump-dom");
    assert!(dom.status.success(), "{dom:?}");
    let mut shoot = Command::new(&chromium);
    flags(&mut shoot);
    let shooting = shoot
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1200,3200")
        .arg(&url)
        .output()
        .expect("chromium --screenshot");
    assert!(shooting.status.success() && shot.is_file(), "{shooting:?}");
    eprintln!("screenshot: {}", shot.display());
    for run in [&dom, &shooting] {
        let log = String::from_utf8_lossy(&run.stderr);
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
            .collect();
        assert!(errors.is_empty(), "console errors: {errors:?}");
    }
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();

    // Every chart, present and drawn.
    for id in [
        "lineage",
        "history",
        "reliability",
        "entropy",
        "routing",
        "failures",
    ] {
        let at = dom
            .find(&format!("<svg id=\"{id}\""))
            .unwrap_or_else(|| panic!("no {id} chart in the DOM"));
        let end = dom[at..].find("</svg>").expect("svg end") + at;
        let svg = &dom[at..end];
        assert!(svg.contains("class=\"mark\""), "the {id} chart is empty");
        assert!(
            svg.contains("<desc"),
            "the {id} chart has no text alternative"
        );
    }
    // The lineage shows the supersede edge.
    assert!(
        dom.contains("data-kind=\"supersedes\""),
        "no supersede edge"
    );
    // The verdict history holds green and red for the schema's ground.
    assert!(dom.contains("data-label=\"green\"") && dom.contains("data-label=\"red\""));
    // Calibration numbers are the ledger query's.
    let cal = w
        .evctl(p, &["ledger", "query", "calibration", "--json"])
        .ok()
        .stdout;
    let cal: Value = serde_json::from_str(&cal).expect("json");
    let rows = cal["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{cal}");
    for row in rows {
        let agent = row["agent_id"].as_str().expect("agent");
        let at = dom
            .find(&format!("data-agent=\"{agent}\""))
            .unwrap_or_else(|| panic!("no calibration row for {agent}"));
        let tr = &dom[at..at + dom[at..].find("</tr>").expect("row end")];
        for key in [
            "executions",
            "predicted_p_success",
            "actual_p_success",
            "mean_abs_error",
        ] {
            let cell = format!("data-key=\"{key}\">{}<", row[key]);
            assert!(tr.contains(&cell), "{agent} {key}: want {cell} in {tr}");
        }
    }
    // The tally and the evidence table.
    let tally = w.evctl(p, &["--json", "check"]);
    let t: Value = serde_json::from_str(&tally.stdout).expect("check json");
    assert!(
        dom.contains(&format!("data-gating=\"{}\"", t["tally"]["gating"])),
        "{}",
        tally.stdout
    );
    assert!(dom.contains("<table id=\"evidence\">") && dom.contains("bench.txt:0-11"));
    // Each decision's evidence state beside its grounds.
    assert!(
        dom.contains("1/1 hold"),
        "no evidence state in the decisions table"
    );
}
