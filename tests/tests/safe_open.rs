//! No file evd or evctl open can hang them or lead them outside the repository: a FIFO, a
//! symlinked file, a symlinked parent directory and a directory are planted in turn at every
//! path evd reads or writes in a store (the ledger, receipts, state files, the request log, the
//! events log, HEAD, config, a tick, a run's artifact) and at a cited evidence file and the file
//! `evctl cite` reads. Through the real daemon and socket, every command then finishes with an
//! answer or a clear refusal, none prints a byte of what lies outside, the daemon keeps
//! answering (also once the plant is gone) and still stops when told.

use std::path::Path;
use std::time::Duration;

use evd_e2e::{Repo, Run, World};
use serde_json::json;

/// What lies outside the repository; no output may ever contain it.
const SECRET: &str = "OUTSIDE-SECRET-7f3a";

/// Longer than any honest answer here takes, far shorter than a hang.
const LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plant {
    Fifo,
    SymlinkedFile,
    SymlinkedParent,
    Directory,
}

const PLANTS: [Plant; 4] = [
    Plant::Fifo,
    Plant::SymlinkedFile,
    Plant::SymlinkedParent,
    Plant::Directory,
];

impl Plant {
    /// What a refusal calls it.
    fn word(self) -> &'static str {
        match self {
            Plant::Fifo => "FIFO",
            Plant::SymlinkedFile | Plant::SymlinkedParent => "symlink",
            Plant::Directory => "directory",
        }
    }
}

fn mkfifo(at: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(at)
        .status()
        .expect("mkfifo");
    assert!(st.success(), "mkfifo {}", at.display());
}

/// Put `plant` at `at`, with `outside` holding the secret; whatever was at `at` is kept aside
/// in `outside` for [`unplant`]. A symlinked parent moves `at`'s directory out to `outside`
/// (with a secret file of `at`'s name in it) and leaves a link in its place.
fn plant(plant: Plant, at: &Path, outside: &Path) {
    let parent = at.parent().expect("parent");
    let name = at.file_name().expect("name");
    std::fs::create_dir_all(parent).expect("mkdir");
    let _ = std::fs::rename(at, outside.join("orig"));
    match plant {
        Plant::Fifo => mkfifo(at),
        Plant::SymlinkedFile => {
            let target = outside.join("secret.txt");
            std::fs::write(&target, format!("{SECRET}\n")).expect("write");
            std::os::unix::fs::symlink(&target, at).expect("symlink");
        }
        Plant::SymlinkedParent => {
            let moved = outside.join("moved");
            std::fs::create_dir_all(&moved).expect("mkdir");
            // The daemon's work after the store's last answer (its journal, its images) may make
            // the directory again between its removal and the link: then it is moved out again.
            for attempt in 0.. {
                // What was made again goes aside (the store's own files are in `moved`).
                let to = if attempt == 0 {
                    moved.clone()
                } else {
                    outside.join(format!("again-{attempt}"))
                };
                std::fs::create_dir_all(&to).expect("mkdir");
                for e in std::fs::read_dir(parent).expect("ls").flatten() {
                    std::fs::rename(e.path(), to.join(e.file_name())).expect("move out");
                }
                std::fs::remove_dir(parent).expect("rmdir");
                match std::os::unix::fs::symlink(&moved, parent) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 20 => {
                        std::thread::sleep(std::time::Duration::from_millis(50))
                    }
                    Err(e) => panic!("symlink {}: {e}", parent.display()),
                }
            }
            std::fs::write(moved.join(name), format!("{SECRET}\n")).expect("write");
        }
        Plant::Directory => std::fs::create_dir_all(at).expect("mkdir"),
    }
}

/// Take `plant` away again and put back what was at `at` before.
fn unplant(plant: Plant, at: &Path, outside: &Path) {
    let parent = at.parent().expect("parent");
    match plant {
        Plant::SymlinkedParent => {
            std::fs::remove_file(parent).expect("remove link");
            std::fs::create_dir_all(parent).expect("mkdir");
            let moved = outside.join("moved");
            std::fs::remove_file(moved.join(at.file_name().expect("name"))).expect("rm secret");
            for e in std::fs::read_dir(&moved).expect("ls").flatten() {
                std::fs::rename(e.path(), parent.join(e.file_name())).expect("move back");
            }
        }
        Plant::Directory => std::fs::remove_dir_all(at).expect("rmdir"),
        _ => std::fs::remove_file(at).expect("rm"),
    }
    let _ = std::fs::rename(outside.join("orig"), at);
}

/// Run evctl, failing the test (naming the command) if it does not finish within [`LIMIT`].
fn run(w: &World, cwd: &Path, args: &[&str]) -> Run {
    let r = w
        .evctl_within(cwd, args, LIMIT)
        .unwrap_or_else(|| panic!("`evctl {}` hung (killed after {LIMIT:?})", args.join(" ")));
    for text in [&r.stdout, &r.stderr] {
        assert!(
            !text.contains(SECRET),
            "`evctl {}` printed bytes from outside the repository:\n{text}",
            args.join(" ")
        );
    }
    r
}

/// A store with a decision whose ground is bound to a test that passes, checked once (so
/// receipts, state files, the request log and the ledger all exist).
fn store(w: &World) -> (Repo, tempfile::TempDir) {
    let r = Repo::new();
    let outside = tempfile::tempdir().expect("outside");
    run(w, r.path(), &["init"]).ok();
    run(
        w,
        r.path(),
        &[
            "decide",
            "keep the cache",
            "--assume",
            "the cache is warm",
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
    let c = run(w, r.path(), &["check", "--run", "--platform", "local"]);
    assert!(c.code == 0 || c.code == 1, "{c:?}");
    (r, outside)
}

/// Every command that reads or writes the store, each bounded; what they said, together.
fn everything(w: &World, r: &Repo) -> String {
    let mut said = String::new();
    let events = r.path().join("events-in.jsonl");
    std::fs::write(
        &events,
        format!(
            "{}\n",
            json!({"schema_version": "1.1", "event_type": "intent_created", "run_id": "R-s-1",
                   "agent_id": "agent-x", "payload": {"intent_id": "I-9", "parent_intent_id": null,
                   "goal": "g", "constraints": {}, "scope": {}}})
        ),
    )
    .expect("write events");
    let events = events.to_string_lossy().into_owned();
    for args in [
        vec!["list"],
        vec!["check"],
        vec!["decide", "another", "--assume", "x", "--blame", "b"],
        vec!["verify"],
        vec!["verify", "--evidence"],
        vec!["ledger", "verify"],
        vec!["ledger", "append", events.as_str()],
        vec!["ledger", "query", "failures"],
        vec!["status"],
    ] {
        let out = run(w, r.path(), &args);
        said.push_str(&out.stdout);
        said.push_str(&out.stderr);
    }
    said
}

/// Plant each kind at `rel` in a fresh store, run everything, and check the daemon still
/// answers once the plant is gone. `named`: the refusal must name the file and what it is.
fn at_path(w: &World, rel: &str, named: bool) {
    for p in PLANTS {
        let (r, outside) = store(w);
        let at = r.path().join(rel);
        plant(p, &at, outside.path());
        eprintln!("case: {rel} as {p:?}");
        let said = everything(w, &r);
        if named {
            let file = Path::new(rel)
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let shown = match p {
                // The walk stops at the link, which is the parent directory.
                Plant::SymlinkedParent => Path::new(rel)
                    .parent()
                    .and_then(Path::file_name)
                    .expect("parent name")
                    .to_string_lossy()
                    .into_owned(),
                _ => file,
            };
            assert!(
                said.lines()
                    .any(|l| l.contains(&shown) && l.contains(p.word())),
                "{rel} as {p:?}: no message names {shown} as a {}:\n{said}",
                p.word()
            );
        }
        unplant(p, &at, outside.path());
        let l = run(w, r.path(), &["list"]);
        assert_eq!(l.code, 0, "{rel} as {p:?}, plant removed: {l:?}");
        let c = run(w, r.path(), &["check"]);
        assert!(
            c.code == 0 || c.code == 1,
            "{rel} as {p:?}, plant removed: {c:?}"
        );
    }
}

#[test]
fn the_ledger_never_hangs_evd_nor_is_read_through_a_link() {
    let w = World::new();
    at_path(&w, ".evolving/results/ledger/events.jsonl", true);
    stops(&w);
}

#[test]
fn receipts_state_files_and_logs_never_hang_evd_nor_lead_outside() {
    let w = World::new();
    let (r, _o) = store(&w);
    let receipts = r.ev_dir().join("results/receipts");
    let receipt = std::fs::read_dir(&receipts)
        .expect("receipts")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".jsonl"))
        .expect("a receipt file");
    let state = std::fs::read_dir(r.ev_dir().join("results/state"))
        .expect("state")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".json"))
        .expect("a state file");
    for rel in [
        format!(".evolving/results/receipts/{receipt}"),
        format!(".evolving/results/state/{state}"),
        ".evolving/results/requests.jsonl".to_string(),
        ".evolving/results/events.jsonl".to_string(),
        ".evolving/results/selected.json".to_string(),
        ".evolving/results/origin-sha".to_string(),
    ] {
        at_path(&w, &rel, false);
    }
    stops(&w);
}

#[test]
fn head_config_and_ticks_are_refused_as_what_they_are() {
    let w = World::new();
    let (r, _o) = store(&w);
    let tick = r.tick_files().into_iter().next().expect("a tick");
    // Their parent is `.evolving` or `ticks/`: a link there is refused as a whole store.
    for rel in [".evolving/HEAD", ".evolving/config"] {
        at_path(&w, rel, false);
    }
    at_path(&w, &format!(".evolving/ticks/{tick}"), false);
    stops(&w);
}

#[test]
fn a_run_artifact_behind_a_linked_run_directory_is_refused() {
    let w = World::new();
    let r = Repo::new();
    run(&w, r.path(), &["init"]).ok();
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("passwd"), format!("{SECRET}\n")).expect("write");
    let runs = r.ev_dir().join("results/runs");
    std::fs::create_dir_all(&runs).expect("mkdir");
    std::os::unix::fs::symlink(outside.path(), runs.join("R-S")).expect("symlink");
    let sha = proto::evidence::sha256_hex(format!("{SECRET}\n").as_bytes());
    let ev = |t: &str, payload: serde_json::Value| {
        json!({"schema_version": "1.1", "event_type": t, "run_id": "R-S",
               "agent_id": "agent-x", "payload": payload})
    };
    let lines = [
        ev(
            "intent_created",
            json!({"intent_id": "I-1", "parent_intent_id": null, "goal": "g",
                   "constraints": {}, "scope": {}}),
        ),
        ev(
            "plan_variant_created",
            json!({"intent_id": "I-1", "plan_id": "P-1",
                   "predicted": {"p_success": 0.5, "entropy": 1.0}}),
        ),
        ev(
            "plan_selected",
            json!({"intent_id": "I-1", "plan_id": "P-1"}),
        ),
        ev(
            "execution_started",
            json!({"intent_id": "I-1", "plan_id": "P-1", "sandbox_id": "S-1"}),
        ),
        ev(
            "execution_completed",
            json!({"intent_id": "I-1", "plan_id": "P-1", "sandbox_id": "S-1",
                   "status": "success", "actual": {"p_success": 1.0},
                   "artifacts": [{"kind": "log", "path": "runs/R-S/passwd", "sha256": sha}]}),
        ),
    ];
    let f = r.path().join("events-in.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&f, text).expect("write");
    let out = run(
        &w,
        r.path(),
        &["ledger", "append", f.to_str().expect("utf-8")],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("R-S") && out.stderr.contains("symlink"),
        "{}",
        out.stderr
    );
    // Written by hand behind evd's back: verification refuses to read through the link.
    let ledger = r.ev_dir().join("results/ledger/events.jsonl");
    let _ = run(&w, r.path(), &["ledger", "verify"]);
    let mut have = std::fs::read_to_string(&ledger).unwrap_or_default();
    if have.is_empty() {
        // No event of evd's own yet: nothing to chain the artifact line to by hand.
        return;
    }
    let last: serde_json::Value =
        serde_json::from_str(have.lines().last().expect("a line")).expect("json");
    let mut done = lines[4].clone();
    done["seq"] = json!(last["seq"].as_u64().expect("seq") + 1);
    done["prev"] = json!(evd::ledger::rules::line_hash(
        have.lines().last().expect("a line")
    ));
    done["ts"] = last["ts"].clone();
    have.push_str(&format!("{done}\n"));
    std::fs::write(&ledger, have).expect("write");
    let v = run(&w, r.path(), &["ledger", "verify"]);
    assert_ne!(v.code, 0, "{v:?}");
}

#[test]
fn cited_evidence_behind_a_link_fifo_or_directory_reads_unreadable() {
    let w = World::new();
    for p in PLANTS {
        let r = Repo::new();
        let outside = tempfile::tempdir().expect("outside");
        run(&w, r.path(), &["init"]).ok();
        std::fs::create_dir_all(r.path().join("bench")).expect("mkdir");
        std::fs::write(r.path().join("bench/p99.txt"), "p99 4ms\n").expect("write");
        let marker = run(&w, r.path(), &["cite", "bench/p99.txt:1"]).ok();
        let marker = marker.stdout.trim().to_string();
        run(
            &w,
            r.path(),
            &[
                "decide",
                "use the fast path",
                "--assume",
                &format!("p99 is low {marker}"),
                "--blame",
                "b",
            ],
        )
        .ok();
        // The outside copy holds the very bytes cited, so only a read through a link would
        // find them "holding".
        let at = r.path().join("bench/p99.txt");
        plant(p, &at, outside.path());
        if p == Plant::SymlinkedParent {
            std::fs::write(outside.path().join("moved/p99.txt"), "p99 4ms\n").expect("write");
        }
        if p == Plant::SymlinkedFile {
            std::fs::write(outside.path().join("secret.txt"), "p99 4ms\n").expect("write");
        }
        let v = run(&w, r.path(), &["--json", "verify", "--evidence"]);
        assert_ne!(v.code, 0, "{p:?}: {v:?}");
        let j: serde_json::Value = serde_json::from_str(v.stdout.trim()).expect("json");
        let row = &j["evidence"]["citations"][0];
        assert_eq!(row["state"], "unreadable", "{p:?}: {j}");
        assert!(
            row.to_string().contains(p.word()),
            "{p:?}: the citation does not say what is there: {j}"
        );
        // `cite` refuses it too, naming it.
        let c = run(&w, r.path(), &["cite", "bench/p99.txt:1"]);
        assert_eq!(c.code, 1, "{p:?}: {c:?}");
        assert!(c.stderr.contains(p.word()), "{p:?}: {}", c.stderr);
        // And the daemon still answers.
        run(&w, r.path(), &["list"]).ok();
    }
    stops(&w);
}

#[test]
fn cite_reads_only_the_span_of_a_huge_file() {
    let w = World::new();
    let r = Repo::new();
    run(&w, r.path(), &["init"]).ok();
    // 64 GiB, sparse: reading it whole would take minutes; the span is its first bytes.
    let big = r.path().join("big.bin");
    let f = std::fs::File::create(&big).expect("create");
    std::io::Write::write_all(&mut &f, b"first line\nsecond\n").expect("write");
    f.set_len(64 << 30).expect("sparse");
    drop(f);
    let c = run(&w, r.path(), &["cite", "big.bin", "--bytes", "0-10"]).ok();
    assert!(c.stdout.contains("big.bin"), "{c:?}");
    let c = run(&w, r.path(), &["cite", "big.bin:2"]).ok();
    assert!(c.stdout.contains("big.bin"), "{c:?}");
    // Line 3 runs to the end of the file: refused as too long as soon as that is seen.
    let c = run(&w, r.path(), &["cite", "big.bin:3"]);
    assert_eq!(c.code, 1, "{c:?}");
    assert!(c.stderr.contains("at most"), "{}", c.stderr);
    let c = run(&w, r.path(), &["cite", "big.bin"]);
    assert_eq!(c.code, 1, "{c:?}");
    assert!(c.stderr.contains("at most"), "{}", c.stderr);
}

/// `evctl shutdown` ends the daemon (its process gone) within a few seconds.
fn stops(w: &World) {
    let pid = w.daemon_pid();
    let s = run(w, w.home.path(), &["shutdown"]);
    assert_eq!(s.code, 0, "{s:?}");
    if let Some(pid) = pid {
        assert!(
            evd_e2e::wait_until(Duration::from_secs(5), || !evd_e2e::pid_alive(pid)),
            "evd {pid} still runs after shutdown"
        );
    }
}
