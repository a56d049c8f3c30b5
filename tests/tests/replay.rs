//! Replay (seed 003, rule 3) through the real daemon, socket, files and git: every check's
//! verdicts come out the same when the ledger is folded through the verdict engine again —
//! across receipts from evd and from outside it, commits, uncommitted edits, a superseded
//! decision, a restarted daemon and an in-process check — and a receipt changed in the ledger
//! is caught, even by a forger who rewrites the hash chain after it.

use std::path::PathBuf;
use std::time::Duration;

use evd_e2e::{git, wait_until, Repo, World};
use serde_json::Value;

fn ledger_file(repo: &Repo) -> PathBuf {
    repo.ev_dir().join("results/ledger/events.jsonl")
}

fn events(repo: &Repo) -> Vec<Value> {
    std::fs::read_to_string(ledger_file(repo))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn count(repo: &Repo, event_type: &str) -> usize {
    events(repo)
        .iter()
        .filter(|e| e["event_type"] == event_type)
        .count()
}

/// A repository with a committed `deps.txt`, policy `none`, and one decision whose test
/// ground is triggered by it, verified at HEAD. Returns the decision's id.
fn setup(w: &World) -> (Repo, String) {
    let r = Repo::new();
    let p = r.path();
    std::fs::write(p.join("deps.txt"), "a\n").expect("write");
    git(p, &["add", "deps.txt"]);
    git(p, &["commit", "-q", "-m", "deps"]);
    w.evctl(p, &["init"]).ok();
    std::fs::write(r.ev_dir().join("config"), "staleness_ref = \"none\"\n").expect("config");
    let mut args: Vec<String> = ["decide", "no Redis", "--assume", "the db coordinates pods"]
        .map(String::from)
        .to_vec();
    args.extend(binding("test ! -e broken", "test -e broken", &r.head()));
    let out = w.evctl(p, &args).ok();
    let id = out
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("id")
        .to_string();
    (r, id)
}

/// The flags of a test ground run on `local`, triggered by `deps.txt`, verified at `head`.
fn binding(test: &str, counter: &str, head: &str) -> Vec<String> {
    [
        "--assume-test",
        test,
        "--counter-test",
        counter,
        "--on-platform",
        "local",
        "--triggered-by",
        "deps.txt",
        "--surface",
        "deps",
        "--verified-at-sha",
        head,
        "--blame",
        "Wang Yu",
    ]
    .map(String::from)
    .to_vec()
}

/// `evctl --json ledger replay`: its exit code and answer.
fn replay(w: &World, r: &Repo) -> (i32, Value) {
    let out = w.evctl(r.path(), &["--json", "ledger", "replay"]);
    let v: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("replay --json: {e}: {out:?}"));
    (out.code, v)
}

/// Append a receipt line to the selector's receipts file, as CI would.
fn ci_receipt(r: &Repo, result: &str, ran_at: &str) {
    let dir = r.ev_dir().join("results/receipts");
    let key = proto::id::receipt_key("test ! -e broken");
    let line = format!(
        "{{\"commit\":\"{}\",\"platform\":\"local\",\"ran_at\":\"{ran_at}\",\"result\":\"{result}\",\"test\":\"test ! -e broken\"}}\n",
        r.head()
    );
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(dir.join(format!("{key}.jsonl")))
        .expect("open receipts");
    f.write_all(line.as_bytes()).expect("append");
}

fn check(w: &World, r: &Repo) -> String {
    let out = w.evctl(r.path(), &["check"]);
    assert!(matches!(out.code, 0 | 1), "{out:?}");
    out.stdout
}

#[test]
fn every_check_replays_to_the_fingerprint_it_recorded() {
    let w = World::new();
    let (r, id) = setup(&w);
    let p = r.path();
    assert!(check(&w, &r).starts_with("not-run\t"));
    w.evctl(p, &["check", "--run"]).ok();
    assert!(check(&w, &r).starts_with("green\t"));
    // CI appends a newer red receipt to the file; evd did not write it.
    ci_receipt(&r, "red", "2099-01-01T00:00:00Z");
    assert!(check(&w, &r).starts_with("red\t"));
    // Rerun locally (green again, but the red one from the future stays the latest).
    w.evctl(p, &["check", "--run"]).ok();
    // Someone rewrites the receipts file in place: its lines are not those the ledger holds.
    let key = proto::id::receipt_key("test ! -e broken");
    let file = r.ev_dir().join(format!("results/receipts/{key}.jsonl"));
    let text = std::fs::read_to_string(&file).expect("receipts");
    std::fs::write(&file, text.replace("\"red\"", "\"green\"")).expect("rewrite");
    assert!(check(&w, &r).starts_with("green\t"));
    // (evd writes its journal within a moment of the check.)
    let rewritten = wait_until(Duration::from_secs(10), || {
        events(&r)
            .into_iter()
            .filter(|e| e["event_type"] == "receipts_observed")
            .any(|e| e["payload"]["files"][&key]["from"] == 0)
    });
    assert!(rewritten, "a rewritten file is recorded whole");
    // An uncommitted edit of the guarded file, then its commit.
    std::fs::write(p.join("deps.txt"), "b\n").expect("edit");
    assert!(check(&w, &r).starts_with("dirty\t"));
    git(p, &["commit", "-q", "-am", "b"]);
    assert!(check(&w, &r).starts_with("stale\t"));
    // A restarted daemon records against what the ledger already holds.
    w.evctl(p, &["shutdown"]).ok();
    assert!(check(&w, &r).starts_with("stale\t"));
    // Without a daemon, in-process, the same.
    let local = w.evctl_env(p, &[("EVD_NO_DAEMON", "1")], &["check"]);
    assert!(local.stdout.starts_with("stale\t"), "{local:?}");
    // The decision is superseded: its tick leaves, the new one enters.
    let mut args: Vec<String> = [
        "supersede",
        id.as_str(),
        "let pods agree through the db",
        "--assume",
        "pods agree through the db",
    ]
    .map(String::from)
    .to_vec();
    args.extend(binding("true", "false", &r.head()));
    w.evctl(p, &args).ok();
    check(&w, &r);
    w.evctl(p, &["check", "--run"]).ok();
    assert!(check(&w, &r).starts_with("green\t"));

    // Stopped, evd has written everything it journaled.
    w.evctl(p, &["shutdown"]).ok();
    let runs = count(&r, "check_run");
    assert!(runs >= 11, "{runs} check runs");
    let (code, v) = replay(&w, &r);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["fault"], Value::Null, "{v}");
    assert_eq!(v["replayed"], runs as u64, "{v}");
    assert!(v["ticks_read"].as_u64().unwrap_or(0) >= 2, "{v}");
    let plain = w.evctl(p, &["ledger", "replay"]).ok();
    assert!(
        plain
            .stdout
            .starts_with(&format!("replay ok: {runs} check run(s) reproduced from ")),
        "{plain:?}"
    );
    // Only what moved is recorded: live ticks and git answers once each time they change.
    assert!(
        count(&r, "basis_changed") < runs,
        "{}",
        count(&r, "basis_changed")
    );
}

/// Write `lines` as the ledger and its head as evd keeps it beside the file (the seq and hash
/// of the last line): a forger who can write both, which no chain kept on one host can detect
/// (docs/ledger.md says so); the replay still can.
fn put(path: &std::path::Path, lines: &[String]) {
    std::fs::write(
        path,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .expect("write the ledger");
    let last = lines.last().expect("a line");
    let v: Value = serde_json::from_str(last).expect("json");
    let mut head =
        serde_json::json!({"seq": v["seq"], "hash": evd::ledger::rules::line_hash(last)})
            .to_string();
    head.push_str(&" ".repeat(127 - head.len()));
    head.push('\n');
    std::fs::write(path.with_file_name("head"), head).expect("write the head");
}

/// Rewrite `lines[at]` with `edit`, then recompute every later line's `prev` (a forger who
/// knows the chain): the result verifies.
fn forge(lines: &mut [String], at: usize, edit: impl Fn(&str) -> String) {
    lines[at] = edit(&lines[at]);
    for i in at + 1..lines.len() {
        let want = evd::ledger::rules::line_hash(&lines[i - 1]);
        let v: Value = serde_json::from_str(&lines[i]).expect("json");
        let old = v["prev"].as_str().expect("prev").to_string();
        lines[i] = lines[i].replacen(
            &format!("\"prev\":\"{old}\""),
            &format!("\"prev\":\"{want}\""),
            1,
        );
    }
}

#[test]
fn a_receipt_changed_in_the_ledger_fails_the_replay_even_with_the_chain_rewritten() {
    let w = World::new();
    let (r, _) = setup(&w);
    w.evctl(r.path(), &["check", "--run"]).ok();
    assert!(check(&w, &r).starts_with("green\t"));
    w.evctl(r.path(), &["shutdown"]).ok();
    let (code, _) = replay(&w, &r);
    assert_eq!(code, 0);
    let path = ledger_file(&r);
    let good: Vec<String> = std::fs::read_to_string(&path)
        .expect("ledger")
        .lines()
        .map(str::to_string)
        .collect();
    let at = good
        .iter()
        .position(|l| l.contains("\"event_type\":\"receipt_appended\""))
        .expect("the run's receipt was journaled");
    let first_check_after = good
        .iter()
        .enumerate()
        .skip(at)
        .find(|(_, l)| l.contains("\"event_type\":\"check_run\""))
        .map(|(i, _)| i as u64 + 1)
        .expect("a check after the receipt");
    let red = |l: &str| {
        assert!(l.contains("\"result\":\"green\""), "{l}");
        l.replacen("\"result\":\"green\"", "\"result\":\"red\"", 1)
    };

    // Changed in place: the chain breaks at the next line, and nothing is replayed.
    let mut edited = good.clone();
    edited[at] = red(&edited[at]);
    std::fs::write(
        &path,
        edited.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .expect("tamper");
    let (code, v) = replay(&w, &r);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["fault"]["rule"], "chain", "{v}");
    assert_eq!(v["fault"]["line"], at as u64 + 2, "{v}");

    // Changed with the chain rewritten after it: it verifies, but the replay does not come
    // out the same at the first check that read the receipt.
    let mut forged = good.clone();
    forge(&mut forged, at, red);
    put(&path, &forged);
    let verified = w.evctl(r.path(), &["ledger", "verify"]);
    assert_eq!(verified.code, 0, "the forged chain verifies: {verified:?}");
    let (code, v) = replay(&w, &r);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["fault"]["rule"], "replay", "{v}");
    assert_eq!(v["fault"]["line"], first_check_after, "{v}");
    let msg = v["fault"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("the verdicts replay to fingerprint "), "{msg}");
    let plain = w.evctl(r.path(), &["ledger", "replay"]);
    assert_eq!(plain.code, 1);
    assert!(
        plain.stderr.starts_with(&format!(
            "evctl: the replay parts from the ledger at line {first_check_after} (replay): seq "
        )),
        "{plain:?}"
    );

    // The clock a check read is part of its basis: moved past the staleness window, the
    // same receipts read stale, and the replay says so.
    let mut forged = good.clone();
    forge(&mut forged, first_check_after as usize - 1, |l| {
        let v: Value = serde_json::from_str(l).expect("json");
        let now = v["payload"]["basis"]["now"]
            .as_str()
            .expect("now")
            .to_string();
        l.replacen(&now, "2099-01-01T00:00:00Z", 1)
    });
    put(&path, &forged);
    let (code, v) = replay(&w, &r);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["fault"]["line"], first_check_after, "{v}");

    // The counts or the gate a check reported, changed with the chain rewritten: the verdicts
    // do not add up to them.
    let mut forged = good.clone();
    forge(&mut forged, first_check_after as usize - 1, |l| {
        assert!(l.contains("\"non_gating\":0"), "{l}");
        l.replacen("\"non_gating\":0", "\"non_gating\":3", 1)
    });
    put(&path, &forged);
    let (code, v) = replay(&w, &r);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["fault"]["line"], first_check_after, "{v}");
    assert!(
        v["fault"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("tally")),
        "{v}"
    );
    let mut forged = good.clone();
    forge(&mut forged, first_check_after as usize - 1, |l| {
        l.replacen("\"gating\":false", "\"gating\":true", 1)
    });
    put(&path, &forged);
    let (code, v) = replay(&w, &r);
    assert_eq!(code, 1, "{v}");
    assert!(
        v["fault"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("gating")),
        "{v}"
    );

    // Put back, it replays again.
    put(&path, &good);
    assert_eq!(replay(&w, &r).0, 0);
}

/// A receipts file far larger than one ledger line (CI has been appending for years) is
/// recorded in parts, written to the ledger as they are made rather than held in memory, and
/// replays like any other.
#[test]
fn a_receipts_file_too_large_for_one_event_is_recorded_in_parts_and_replays() {
    let w = World::new();
    let (r, _) = setup(&w);
    let head = r.head();
    let years: String = (0..8_000)
        .map(|i| {
            format!(
                "{{\"commit\":\"{head}\",\"platform\":\"local\",\"ran_at\":\"2026-01-{:02}T{:02}:{:02}:00Z\",\"result\":\"{}\",\"test\":\"test ! -e broken\"}}\n",
                1 + i / 1440 % 28,
                i / 60 % 24,
                i % 60,
                if i % 3 == 0 { "red" } else { "green" }
            )
        })
        .collect();
    let file = r.ev_dir().join(format!(
        "results/receipts/{}.jsonl",
        proto::id::receipt_key("test ! -e broken")
    ));
    std::fs::create_dir_all(file.parent().expect("dir")).expect("mkdir");
    std::fs::write(&file, years).expect("write");
    check(&w, &r);
    ci_receipt(&r, "green", "2099-01-01T00:00:00Z");
    assert!(check(&w, &r).starts_with("green\t"));
    w.evctl(r.path(), &["shutdown"]).ok();
    let key = proto::id::receipt_key("test ! -e broken");
    let parts: Vec<(u64, usize)> = events(&r)
        .iter()
        .filter(|e| e["event_type"] == "receipts_observed")
        .filter_map(|e| {
            let f = &e["payload"]["files"][&key];
            Some((f["from"].as_u64()?, f["receipts"].as_array()?.len()))
        })
        .collect();
    assert!(parts.len() > 2, "{parts:?}");
    // Each part starts where the one before ended; the last one is the single new receipt.
    let mut at = 0;
    for (from, n) in &parts {
        assert_eq!(*from, at, "{parts:?}");
        at += *n as u64;
    }
    assert_eq!(at, 8_001);
    assert_eq!(parts.last().map(|p| p.1), Some(1));
    let (code, v) = replay(&w, &r);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["replayed"], 2, "{v}");
}
