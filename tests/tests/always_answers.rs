//! The daemon always answers, and always stops: a store wedged on a request (a failpoint holds
//! its thread, as a hung filesystem would) is named in `status` and refused at once while
//! other stores answer; `shutdown` and SIGTERM end evd within a bound whatever its stores do;
//! git's pre-commit gate lets the commit through after its deadline, with one line, whether
//! evd is wedged or stopped (SIGSTOP).

use std::path::Path;
use std::time::{Duration, Instant};

use evd_e2e::{pid_alive, wait_until, Repo, Run, World};

/// Far beyond any honest answer here; only a hang reaches it.
const LIMIT: Duration = Duration::from_secs(30);

fn run(w: &World, cwd: &Path, args: &[&str]) -> Run {
    w.evctl_within(cwd, args, LIMIT)
        .unwrap_or_else(|| panic!("`evctl {}` hung", args.join(" ")))
}

/// A daemon whose `check` requests never finish (the store's thread sleeps a minute in them),
/// with a 1.5 s store deadline.
fn wedging_world() -> World {
    World::with_env(&[
        ("FAILPOINTS", "ev.check=sleep(60000)"),
        ("EVD_STORE_DEADLINE_MS", "1500"),
    ])
}

fn store(w: &World) -> Repo {
    let r = Repo::new();
    run(w, r.path(), &["init"]).ok();
    run(
        w,
        r.path(),
        &["decide", "keep it", "--assume", "x", "--blame", "b"],
    )
    .ok();
    r
}

#[test]
fn a_stuck_store_is_named_and_refused_at_once_while_other_stores_answer() {
    let w = wedging_world();
    let a = store(&w);
    let b = store(&w);
    // The check wedges store A: its caller is told, within the deadline, that it did not
    // answer and may still be running.
    let c = run(&w, a.path(), &["check"]);
    assert_ne!(c.code, 0, "{c:?}");
    assert!(
        c.stderr.contains("did not answer within 1.5 s"),
        "{}",
        c.stderr
    );
    // Past the deadline, store A refuses at once, naming what holds it; nothing queues.
    assert!(wait_until(Duration::from_secs(10), || {
        let s = run(&w, w.home.path(), &["status"]);
        s.stdout.contains("STUCK on `ev.check`")
    }));
    let l = run(&w, a.path(), &["list"]);
    assert_ne!(l.code, 0, "{l:?}");
    assert!(
        l.stderr.contains("is stuck") && l.stderr.contains("`ev.check`"),
        "{}",
        l.stderr
    );
    let j = run(&w, w.home.path(), &["--json", "status"]);
    let st: serde_json::Value = serde_json::from_str(j.stdout.trim()).expect("status json");
    let held = st["stores"]
        .as_array()
        .expect("stores")
        .iter()
        .find(|s| s["busy"]["stuck"] == true)
        .expect("a stuck store in status");
    assert_eq!(held["busy"]["what"], "ev.check", "{st}");
    // A write to the stuck store is refused, and is not applied later either.
    let before = a.tick_files().len();
    let d = run(
        &w,
        a.path(),
        &["decide", "later", "--assume", "y", "--blame", "b"],
    );
    assert_ne!(d.code, 0, "{d:?}");
    assert!(d.stderr.contains("nothing was written"), "{}", d.stderr);
    // Store B is untouched by A's trouble.
    let l = run(&w, b.path(), &["list"]);
    assert_eq!(l.code, 0, "{l:?}");
    run(
        &w,
        b.path(),
        &["decide", "more", "--assume", "z", "--blame", "b"],
    )
    .ok();
    // Shutdown ends the process, stuck store and all.
    let pid = w.daemon_pid().expect("daemon pid");
    let t = Instant::now();
    let s = run(&w, w.home.path(), &["shutdown"]);
    assert_eq!(s.code, 0, "{s:?}");
    assert!(
        wait_until(Duration::from_secs(5), || !pid_alive(pid)),
        "evd {pid} still runs after shutdown"
    );
    eprintln!("shutdown with a stuck store: gone after {:?}", t.elapsed());
    assert_eq!(
        a.tick_files().len(),
        before,
        "the refused write never landed"
    );
}

#[test]
fn sigterm_ends_evd_with_a_store_stuck() {
    let w = wedging_world();
    let a = store(&w);
    let c = run(&w, a.path(), &["check"]);
    assert_ne!(c.code, 0, "{c:?}");
    let pid = w.daemon_pid().expect("daemon pid");
    let t = Instant::now();
    // SAFETY: plain kill(2) of the test's own daemon.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    assert!(
        wait_until(Duration::from_secs(5), || !pid_alive(pid)),
        "evd {pid} ignored SIGTERM"
    );
    eprintln!("SIGTERM with a stuck store: gone after {:?}", t.elapsed());
}

/// A repository with hooks installed and a decision, through `setup`'s own hook install.
fn hooked(w: &World) -> Repo {
    let r = store(w);
    run(w, r.path(), &["hooks", "install"]).ok();
    std::fs::write(r.path().join("f.txt"), "1\n").expect("write");
    w.git(r.path(), &["add", "f.txt"]);
    r
}

#[test]
fn the_gate_lets_a_commit_through_when_evd_is_wedged_or_stopped() {
    // Wedged: every guards request sleeps in the store.
    let w = World::with_env(&[
        ("FAILPOINTS", "ev.guards=sleep(60000)"),
        ("EVD_STORE_DEADLINE_MS", "30000"),
        ("EVCTL_GATE_TIMEOUT_MS", "1500"),
    ]);
    let r = hooked(&w);
    let t = Instant::now();
    let c = w.git(r.path(), &["commit", "-q", "-m", "wedged"]);
    assert_eq!(c.code, 0, "{c:?}");
    assert!(
        c.stderr.contains("the pre-commit gate could not run")
            && c.stderr.contains("no answer within 1.5 s")
            && c.stderr.contains("the commit goes ahead"),
        "{}",
        c.stderr
    );
    assert_eq!(
        c.stderr.lines().filter(|l| l.contains("evctl")).count(),
        1,
        "one line: {}",
        c.stderr
    );
    eprintln!("commit with a wedged store: {:?}", t.elapsed());

    // Stopped: the daemon is SIGSTOPped (it accepts nothing).
    let w = World::with_env(&[("EVCTL_GATE_TIMEOUT_MS", "1500")]);
    let r = hooked(&w);
    let pid = w.daemon_pid().expect("daemon pid");
    // SAFETY: plain kill(2) of the test's own daemon.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
    let c = w.git(r.path(), &["commit", "-q", "-m", "stopped"]);
    // SAFETY: as above; it must be running again to be stopped at the end.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    assert_eq!(c.code, 0, "{c:?}");
    assert!(c.stderr.contains("the commit goes ahead"), "{}", c.stderr);
    w.stop_daemon();
}

/// A backfill may rightly take longer than the deadline (it reports progress as it goes): it is
/// never cut off for its length, nor is its store called stuck meanwhile.
#[test]
fn a_long_backfill_is_not_cut_off_by_the_deadline() {
    let w = World::with_env(&[
        ("FAILPOINTS", "ev.migrate.backfill=sleep(3000)"),
        ("EVD_STORE_DEADLINE_MS", "1000"),
    ]);
    let r = Repo::new();
    run(&w, r.path(), &["init"]).ok();
    let line = r#"{"kind":"ev-decision-intake","decision":"imported","grounds":[],"provenance":"imported","source_ref":"R1","blame":"b"}"#;
    std::fs::write(r.path().join("history.jsonl"), format!("{line}\n")).expect("write");
    let m = run(
        &w,
        r.path(),
        &["migrate", "--source", "canonical:history.jsonl"],
    );
    assert_eq!(m.code, 0, "{m:?}");
    assert!(m.stdout.starts_with("imported 1"), "{m:?}");
    let s = run(&w, w.home.path(), &["status"]);
    assert!(!s.stdout.contains("STUCK"), "{}", s.stdout);
    w.stop_daemon();
}

/// A request kept waiting by its store's thread says so on a terminal, every few seconds, with
/// what the thread is at; into a pipe (a script, a test) nothing is added.
#[test]
fn a_slow_answer_says_what_it_waits_for_on_a_terminal() {
    let w = World::with_env(&[("FAILPOINTS", "ev.check=sleep(4000)")]);
    let r = store(&w);
    let piped = run(&w, r.path(), &["check"]);
    assert!(!piped.stderr.contains("waiting for evd"), "{piped:?}");
    // On a terminal (a pseudo-terminal `script` gives it), the wait is named.
    let evctl = evd_e2e::bin("evctl");
    let out = w
        .command("script")
        .current_dir(r.path())
        .args(["-q", "-e", "-c"])
        .arg(format!("'{}' check", evctl.display()))
        .arg("/dev/null")
        .output()
        .expect("script");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("evctl: waiting for evd: the store's thread has been at ev.check for"),
        "{said}"
    );
    assert!(out.status.success(), "the check still answers: {said}");
}
