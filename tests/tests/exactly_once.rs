//! Exactly-once writes: a retry with the same request id gets the first answer, across a daemon
//! restart too; a write whose answer was lost is never applied twice; a write reported as failed
//! never lands (disk full); a hung git fails one request, and the store keeps serving.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use evd_e2e::{chain, rpc_post, Repo, World};

fn decide_params(repo: &Path, request_id: &str, text: &str) -> serde_json::Value {
    let root = repo.display().to_string();
    serde_json::json!([{
        "context": {"store": root, "cwd": root, "request_id": request_id, "wait_ms": 60000},
        "decision": text,
        "blame": "b",
        "grounds": [],
    }])
}

fn decisions_on_chain(repo: &Repo) -> Vec<String> {
    chain(repo)
        .iter()
        .map(|id| {
            let text = std::fs::read_to_string(repo.ev_dir().join("ticks").join(id)).expect("tick");
            let v: serde_json::Value = serde_json::from_str(&text).expect("json");
            v["decision"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

#[test]
fn a_retried_write_gets_its_first_answer_and_is_applied_once() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let params = decide_params(repo.path(), "req-0001", "write me once");
    let first = rpc_post(&w.socket(), "ev.decide", params.clone());
    assert!(first.get("result").is_some(), "{first}");
    let again = rpc_post(&w.socket(), "ev.decide", params.clone());
    assert_eq!(again["result"], first["result"]);
    assert_eq!(chain(&repo).len(), 1);

    // The next daemon knows it too: the answer is on disk, with the store.
    w.stop_daemon();
    w.evctl(repo.path(), &["status"]); // nothing to answer; starts nothing
    w.evctl(repo.path(), &["list"]).ok(); // starts the next daemon
    let after_restart = rpc_post(&w.socket(), "ev.decide", params.clone());
    assert_eq!(after_restart["result"], first["result"]);
    assert_eq!(chain(&repo).len(), 1);

    // A daemon that died after the tick landed but before its answer was kept: the retry is
    // told the write was applied (and as which tick), and nothing is written again.
    let params = decide_params(repo.path(), "req-0002", "answer lost");
    let landed = rpc_post(&w.socket(), "ev.decide", params.clone());
    let tick = landed["result"]["id"].as_str().expect("id").to_string();
    w.stop_daemon();
    let log = repo.ev_dir().join("results/requests.jsonl");
    let text = std::fs::read_to_string(&log).expect("request log");
    let kept: String = text
        .lines()
        .filter(|l| !(l.contains("req-0002") && l.contains("\"answer\"")))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&log, kept).expect("rewrite the log");
    w.evctl(repo.path(), &["list"]).ok();
    let retry = rpc_post(&w.socket(), "ev.decide", params);
    assert_eq!(retry["error"]["code"], -32048, "{retry}");
    let msg = retry["error"]["data"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(msg.contains(&tick), "{retry}");
    assert_eq!(
        decisions_on_chain(&repo),
        vec!["answer lost".to_string(), "write me once".to_string()]
    );

    // A request id that is not one is refused.
    let bad = rpc_post(
        &w.socket(),
        "ev.decide",
        decide_params(repo.path(), "not an id!", "x"),
    );
    assert_eq!(bad["error"]["code"], -32042, "{bad}");
}

/// SIGKILL three times during a stream of decides: every evctl retries its lost answer with the
/// same request id, so every decision is on the chain exactly once and none fails.
#[test]
fn sigkill_mid_stream_loses_nothing_and_duplicates_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let w = Arc::new(World::new());
    let repo = Arc::new(Repo::new());
    w.evctl(repo.path(), &["init"]).ok();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (w, repo, done) = (Arc::clone(&w), Arc::clone(&repo), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut failures = Vec::new();
            for i in 0..120 {
                let r = w.evctl(
                    repo.path(),
                    &["decide", &format!("streamed {i}"), "--blame", "s"],
                );
                if r.code != 0 {
                    failures.push(r);
                }
            }
            done.store(true, Ordering::SeqCst);
            failures
        })
    };
    let mut kills = 0;
    while kills < 3 && !done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
        if let Some(pid) = w.lock_holder_pid() {
            // SAFETY: sending a signal has no memory-safety preconditions.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            evd_e2e::wait_until(Duration::from_secs(5), || !evd_e2e::pid_alive(pid));
            kills += 1;
        }
    }
    let failures = writer.join().expect("writer");
    assert!(kills >= 1, "the daemon was killed mid-stream");
    assert!(failures.is_empty(), "{failures:?}");
    let texts = decisions_on_chain(&repo);
    let unique: HashSet<&String> = texts.iter().collect();
    assert_eq!(unique.len(), texts.len(), "a decision was applied twice");
    assert_eq!(texts.len(), 120, "every decision is on the chain");
    assert_eq!(repo.tick_files().len(), 120, "no orphan tick file");
}

/// A disk that fills up between the tick and HEAD: the decide fails, and it leaves nothing
/// behind — not in `list`, not after a restart (no roll-forward adopts it).
#[test]
fn a_write_that_fails_for_a_full_disk_never_lands() {
    let mnt = tempfile::tempdir().expect("tempdir");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=400k", "tmpfs"])
        .arg(mnt.path())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a small tmpfs here (needs root and mount rights)");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(self.0)
                .status();
        }
    }
    let _guard = Unmount(mnt.path());
    let w = World::new();
    let root = mnt.path().join("repo");
    std::fs::create_dir(&root).expect("mkdir");
    w.evctl(&root, &["init"]).ok();
    w.evctl(&root, &["decide", "fits", "--blame", "b"]).ok();
    let before = w.evctl(&root, &["list"]).ok().stdout;
    let head_before = std::fs::read_to_string(root.join(".evolving/HEAD")).expect("HEAD");

    // Fill the filesystem, then give back exactly one page: room for the tick, none for the
    // HEAD that would make it count.
    use std::io::Write;
    let filler_path = mnt.path().join("filler");
    let mut filler = std::fs::File::create(&filler_path).expect("filler");
    let page = vec![0u8; 4096];
    while filler.write_all(&page).is_ok() {}
    let _ = filler.sync_all();
    let len = std::fs::metadata(&filler_path).expect("meta").len();
    filler
        .set_len(len - (len % 4096) - 4096)
        .expect("free a page");
    drop(filler);

    let r = w.evctl(&root, &["decide", "does not fit", "--blame", "b"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("nothing was recorded") || r.stderr.contains("No space"),
        "{r:?}"
    );
    assert_eq!(w.evctl(&root, &["list"]).ok().stdout, before);
    std::fs::remove_file(&filler_path).expect("free the disk");
    w.stop_daemon();
    assert_eq!(
        w.evctl(&root, &["list"]).ok().stdout,
        before,
        "adopted after a restart"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".evolving/HEAD")).expect("HEAD"),
        head_before
    );
    let ticks: Vec<_> = std::fs::read_dir(root.join(".evolving/ticks"))
        .expect("ticks")
        .flatten()
        .collect();
    assert_eq!(ticks.len(), 1, "no orphan tick");
    w.evctl(&root, &["decide", "fits now", "--blame", "b"]).ok();
    assert!(w
        .evctl(&root, &["verify"])
        .ok()
        .stdout
        .contains("chain intact"));
}

/// A git that hangs (`.git/HEAD` made a FIFO): the request that needs it fails with a clear
/// error within the git time limit, and the store keeps serving everything else.
#[test]
fn a_hung_git_fails_one_request_and_the_store_keeps_serving() {
    let w = World::with_env(&[("EVD_GIT_TIMEOUT_MS", "1500")]);
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let head = repo.head();
    w.evctl(
        repo.path(),
        &[
            "decide",
            "bound",
            "--assume",
            "c",
            "--assume-test",
            "t::a",
            "--counter-test",
            "t::b",
            "--on-platform",
            "linux",
            "--triggered-by",
            "src",
            "--surface",
            "x",
            "--blame",
            "b",
            "--verified-at-sha",
            &head,
        ],
    )
    .ok();
    let git_head = repo.path().join(".git/HEAD");
    std::fs::remove_file(&git_head).expect("rm HEAD");
    let made = std::process::Command::new("mkfifo")
        .arg(&git_head)
        .status()
        .expect("mkfifo")
        .success();
    assert!(made);
    let r = w.evctl(repo.path(), &["check"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("did not finish within") || r.stderr.contains("did not answer in time"),
        "{r:?}"
    );
    // The store still serves, writes included.
    assert_eq!(
        w.evctl(repo.path(), &["list"]).ok().stdout.lines().count(),
        1
    );
    w.evctl(
        repo.path(),
        &[
            "decide",
            "after",
            "--blame",
            "b",
            "--verified-at-sha",
            &head,
        ],
    )
    .ok();
    assert_eq!(
        w.evctl(repo.path(), &["list"]).ok().stdout.lines().count(),
        2
    );
    std::fs::remove_file(&git_head).expect("rm fifo");
    std::fs::write(&git_head, "ref: refs/heads/main\n").expect("restore HEAD");
    w.evctl(repo.path(), &["check"]).ok();
}

fn ledger_params(repo: &Path, request_id: &str, intent: &str) -> serde_json::Value {
    let root = repo.display().to_string();
    serde_json::json!([{
        "context": {"store": root, "cwd": root, "request_id": request_id, "wait_ms": 60000},
        "events": [{"schema_version": "1.1", "event_type": "intent_created", "run_id": "R-x-1",
            "agent_id": "agent-x", "payload": {"intent_id": intent, "parent_intent_id": null,
            "goal": "g", "constraints": {}, "scope": {}}}],
    }])
}

fn ledger_lines_of(repo: &Repo, intent: &str) -> usize {
    std::fs::read_to_string(repo.ev_dir().join("results/ledger/events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&format!("\"intent_id\":\"{intent}\"")))
        .count()
}

/// `ev.ledger.append` with a request id is applied once: a repeat gets the first answer, and a
/// daemon killed right after the batch was durable (before its answer) is not made to write it
/// again by the retry.
#[test]
fn a_ledger_append_is_applied_once_per_request_id() {
    let w = World::with_env(&[("FAILPOINTS", "ledger.appended=1*off->return")]);
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let params = ledger_params(repo.path(), "rid-T1", "I-1");
    let first = rpc_post(&w.socket(), "ev.ledger.append", params.clone());
    assert!(first.get("result").is_some(), "{first}");
    for _ in 0..2 {
        let again = rpc_post(&w.socket(), "ev.ledger.append", params.clone());
        assert_eq!(again["result"], first["result"], "{again}");
    }
    assert_eq!(ledger_lines_of(&repo, "I-1"), 1);

    // The second batch kills the daemon once it is durable (the failpoint's second hit).
    let params = ledger_params(repo.path(), "rid-T2", "I-2");
    let pid = w.daemon_pid().expect("daemon pid");
    let lost =
        std::panic::catch_unwind(|| rpc_post(&w.socket(), "ev.ledger.append", params.clone()));
    assert!(
        evd_e2e::wait_until(Duration::from_secs(10), || !evd_e2e::pid_alive(pid)),
        "the crash point did not stop evd"
    );
    if let Ok(v) = &lost {
        assert!(v.get("result").is_none(), "an answer came back: {v}");
    }
    assert_eq!(ledger_lines_of(&repo, "I-2"), 1, "the batch is durable");
    // A new daemon (without the failpoint) is asked again with the same id: not written twice.
    let mut w2 = w;
    w2.env.clear();
    w2.evctl(repo.path(), &["list"]).ok();
    let retry = rpc_post(&w2.socket(), "ev.ledger.append", params);
    assert_eq!(retry["error"]["code"], -32048, "{retry}");
    assert!(
        retry["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("in the ledger from seq")),
        "{retry}"
    );
    assert_eq!(ledger_lines_of(&repo, "I-2"), 1, "not appended twice");
    let v = w2.evctl(repo.path(), &["ledger", "verify"]);
    assert_eq!(v.code, 0, "{v:?}");
    w2.stop_daemon();
}

/// Killed at each durable step of a decide (the tick written, HEAD moved, the journal written),
/// then asked again with the same request id by a daemon without the crash point: the decision
/// is on the chain exactly once, its `tick_recorded` is in the ledger (recovered when the dead
/// daemon had not written it), and the ledger verifies. Without a crash, the journal event is
/// in the ledger by the time the answer comes back.
#[test]
fn a_decide_killed_at_each_durable_step_lands_once_with_its_journal_event() {
    let recorded = |repo: &Repo, tick: &str| {
        std::fs::read_to_string(repo.ev_dir().join("results/ledger/events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                l.contains("\"event_type\":\"tick_recorded\"")
                    && l.contains(&format!("\"tick_id\":\"{tick}\""))
            })
            .count()
    };
    // No crash: journaled before the answer.
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let a = rpc_post(
        &w.socket(),
        "ev.decide",
        decide_params(repo.path(), "req-j0", "now"),
    );
    let tick = a["result"]["id"].as_str().expect("id").to_string();
    assert_eq!(recorded(&repo, &tick), 1, "journaled before the answer");
    w.stop_daemon();

    for point in [
        "append.tick_durable",
        "append.head_written",
        "write.journaled",
    ] {
        let mut w = World::with_env(&[("FAILPOINTS", &format!("{point}=return"))]);
        let repo = Repo::new();
        w.evctl(repo.path(), &["init"]).ok();
        let params = decide_params(repo.path(), "req-crash", &format!("crash at {point}"));
        let pid = w.daemon_pid().expect("daemon pid");
        let _ = std::panic::catch_unwind(|| rpc_post(&w.socket(), "ev.decide", params.clone()));
        assert!(
            evd_e2e::wait_until(Duration::from_secs(10), || !evd_e2e::pid_alive(pid)),
            "{point}: the crash point did not stop evd"
        );
        w.env.clear();
        w.evctl(repo.path(), &["list"]).ok(); // a daemon without the crash point
        let again = rpc_post(&w.socket(), "ev.decide", params);
        let on_chain = decisions_on_chain(&repo)
            .iter()
            .filter(|d| d.starts_with("crash at"))
            .count();
        assert_eq!(on_chain, 1, "{point}: exactly once ({again})");
        let tick = chain(&repo).last().cloned().expect("a tick");
        assert_eq!(
            recorded(&repo, &tick),
            1,
            "{point}: journaled once ({again})"
        );
        let v = w.evctl(repo.path(), &["ledger", "verify"]);
        assert_eq!(v.code, 0, "{point}: {v:?}");
        w.stop_daemon();
    }
}

/// A write whose daemon died after its tick was durable and before its journal, never asked
/// again: the next daemon to take the store journals the tick as recovered (no acknowledged —
/// or landed — tick without its event), and a late retry is told it was applied.
#[test]
fn a_crashed_write_nobody_retries_is_journaled_as_recovered_by_the_next_daemon() {
    let mut w = World::with_env(&[("FAILPOINTS", "append.head_written=return")]);
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let params = decide_params(repo.path(), "req-orphan", "orphaned");
    let pid = w.daemon_pid().expect("daemon pid");
    let _ = std::panic::catch_unwind(|| rpc_post(&w.socket(), "ev.decide", params.clone()));
    assert!(
        evd_e2e::wait_until(Duration::from_secs(10), || !evd_e2e::pid_alive(pid)),
        "the crash point did not stop evd"
    );
    w.env.clear();
    w.evctl(repo.path(), &["list"]).ok();
    let tick = chain(&repo).first().cloned().expect("the tick landed");
    let ledger = std::fs::read_to_string(repo.ev_dir().join("results/ledger/events.jsonl"))
        .unwrap_or_default();
    let recorded: Vec<&str> = ledger
        .lines()
        .filter(|l| l.contains("\"event_type\":\"tick_recorded\"") && l.contains(&tick))
        .collect();
    assert_eq!(recorded.len(), 1, "{ledger}");
    assert!(
        recorded[0].contains("\"verb\":\"recovered\""),
        "{}",
        recorded[0]
    );
    w.evctl(repo.path(), &["ledger", "verify"]).ok();
    let late = rpc_post(&w.socket(), "ev.decide", params);
    assert_eq!(late["error"]["code"], -32048, "{late}");
    assert_eq!(chain(&repo).len(), 1);
    w.stop_daemon();
}

/// A write whose daemon dies before answering is said in evctl's own words, never the client
/// library's ("The background task closed …; restart required").
#[test]
fn a_write_whose_daemon_dies_is_said_in_evctls_words() {
    let w = World::with_env(&[("FAILPOINTS", "append.tick_durable=return")]);
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let r = w.evctl(
        repo.path(),
        &["decide", "x", "--assume", "a", "--blame", "b"],
    );
    assert!(r.stderr.contains("the connection to evd was lost"), "{r:?}");
    assert!(
        !r.stderr.contains("background task") && !r.stderr.contains("restart required"),
        "{r:?}"
    );
}
