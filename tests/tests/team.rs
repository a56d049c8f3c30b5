//! Receipts beyond one machine, through git: one bare remote and several clones, each with its
//! own evd (its own world) and host id. CI runs and publishes; a developer's plain `git fetch`
//! turns `not-run (missing: linux-ci)` into CI's verdict with no command (state file and
//! `evctl watch`), and upstream `ev` on that clone reads it too; concurrent publishers lose
//! nothing; a publisher the store does not trust never turns a verdict; a notes ref rewritten
//! to drop a red receipt is reported and the red stays.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use evd_e2e::{wait_until, Watch, World};

fn run_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A bare remote holding one commit with a store whose one decision is bound to
/// `test -f ok.txt` on linux-ci (green where ok.txt exists, red where it does not).
struct Team {
    dir: tempfile::TempDir,
    id: String,
}

impl Team {
    fn new(w: &World) -> Team {
        let dir = tempfile::Builder::new()
            .prefix("evteam")
            .tempdir()
            .expect("tempdir");
        run_git(
            dir.path(),
            &["init", "-q", "--bare", "-b", "main", "remote.git"],
        );
        let seed = dir.path().join("seed");
        run_git(dir.path(), &["clone", "-q", "remote.git", "seed"]);
        identity(&seed, "Seed", "seed@example.invalid");
        w.evctl(&seed, &["init"]).ok();
        std::fs::write(seed.join(".gitignore"), ".evolving/results/\n").expect("write");
        std::fs::write(seed.join("code.txt"), "v1\n").expect("write");
        run_git(&seed, &["add", "-A"]);
        run_git(&seed, &["commit", "-q", "-m", "code"]);
        let head = run_git(&seed, &["rev-parse", "HEAD"]);
        let r = w
            .evctl(
                &seed,
                &[
                    "decide",
                    "ok.txt marks a good build",
                    "--assume",
                    "the build leaves ok.txt",
                    "--assume-test",
                    "test -f ok.txt",
                    "--counter-test",
                    "test ! -f ok.txt",
                    "--on-platform",
                    "linux-ci",
                    "--triggered-by",
                    "code.txt",
                    "--surface",
                    "build",
                    "--verified-at-sha",
                    &head,
                    "--blame",
                    "Seed",
                ],
            )
            .ok();
        let id = r.stdout.split_whitespace().nth(1).expect("id").to_string();
        // Verdicts that depend on the receipts alone.
        let config = seed.join(".evolving/config");
        let text = std::fs::read_to_string(&config).expect("config");
        std::fs::write(&config, text.replace("\"live-origin\"", "\"none\"")).expect("config");
        run_git(&seed, &["add", "-A"]);
        run_git(&seed, &["commit", "-q", "-m", "the decision"]);
        run_git(&seed, &["push", "-q", "origin", "main"]);
        Team { dir, id }
    }

    fn remote(&self) -> PathBuf {
        self.dir.path().join("remote.git")
    }

    /// A clone named `name`, with an identity and the receipts fetch refspec set up.
    fn clone(&self, w: &World, name: &str) -> PathBuf {
        run_git(self.dir.path(), &["clone", "-q", "remote.git", name]);
        let dir = self.dir.path().join(name);
        identity(&dir, name, &format!("{name}@example.invalid"));
        let r = w.evctl(&dir, &["remote", "setup"]).ok();
        assert!(r.stdout.contains("origin: `git fetch` now brings"), "{r:?}");
        dir
    }
}

fn identity(dir: &Path, name: &str, email: &str) {
    run_git(dir, &["config", "user.name", name]);
    run_git(dir, &["config", "user.email", email]);
}

/// A CI host: its own world (its own evd), its host id.
fn host(id: &str) -> World {
    World::with_env(&[("EV_HOST_ID", id)])
}

/// Run the bound test here as CI does, with ok.txt present or not, and publish.
fn run_and_publish(w: &World, dir: &Path, ok: bool) -> String {
    let marker = dir.join("ok.txt");
    if ok {
        std::fs::write(&marker, "").expect("write");
    } else {
        let _ = std::fs::remove_file(&marker);
    }
    w.evctl(dir, &["check", "--run", "--platform", "linux-ci"]);
    let r = w.evctl(dir, &["receipts", "publish"]).ok();
    r.stdout
}

/// A developer's clone and CI's, CI's red published and fetched by the developer, whose check
/// reads it.
struct RedFetched {
    team: Team,
    dev_w: World,
    dev: PathBuf,
    ci_w: World,
    ci: PathBuf,
}

fn red_fetched() -> RedFetched {
    let dev_w = World::new();
    let team = Team::new(&dev_w);
    let dev = team.clone(&dev_w, "dev");
    let ci_w = host("ci-linux");
    let ci = team.clone(&ci_w, "ci");
    run_and_publish(&ci_w, &ci, false);
    run_git(&dev, &["fetch", "-q"]);
    assert!(dev_w.evctl(&dev, &["check"]).stdout.starts_with("red\t"));
    RedFetched {
        team,
        dev_w,
        dev,
        ci_w,
        ci,
    }
}

fn state_verdict(dir: &Path, id: &str) -> Option<String> {
    let text =
        std::fs::read_to_string(dir.join(format!(".evolving/results/state/{id}.json"))).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["grounds"][0]["verdict"].as_str().map(str::to_string)
}

#[test]
fn a_ci_red_reaches_a_developer_with_a_plain_fetch_and_no_command() {
    let dev_w = World::new();
    let team = Team::new(&dev_w);
    let dev = team.clone(&dev_w, "dev");
    let r = dev_w.evctl(&dev, &["check"]).ok();
    assert!(
        r.stdout.starts_with("not-run\t") && r.stdout.contains("missing: linux-ci"),
        "{r:?}"
    );
    let watch = Watch::start(&dev_w, &dev);
    assert!(wait_until(Duration::from_secs(5), || dev_w
        .daemon_pid()
        .is_some()));
    std::thread::sleep(Duration::from_millis(300));

    // CI: a red run, published.
    let ci_w = host("ci-linux");
    let ci = team.clone(&ci_w, "ci");
    let said = run_and_publish(&ci_w, &ci, false);
    assert!(
        said.starts_with("published 1 receipt from ci-linux to origin"),
        "{said}"
    );

    // The developer fetches; nothing else is asked of evd.
    run_git(&dev, &["fetch", "-q"]);
    let fetched = std::time::Instant::now();
    watch.expect("red");
    let took = fetched.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(wait_until(Duration::from_secs(5), || state_verdict(
        &dev, &team.id
    )
    .as_deref()
        == Some("red")));
    let r = dev_w.evctl(&dev, &["check"]);
    assert!(r.stdout.starts_with("red\t"), "{r:?}");
    // check says on stderr where the run came from; its rows stay upstream's.
    assert!(
        r.stderr.contains(&format!(
            "note: red {}: its last run (red on linux-ci at ",
            team.id
        )) && r
            .stderr
            .contains("was published by ci-linux (ci@example.invalid) in notes commit "),
        "{r:?}"
    );
    // Upstream ev on this clone reads the same receipt (it is in results/receipts/).
    let theirs = dev_w.ev(&dev, &["check"]);
    assert_eq!(theirs.stdout, r.stdout, "{theirs:?}");
    // Imported once, however often fetched and checked.
    run_git(&dev, &["fetch", "-q"]);
    dev_w.evctl(&dev, &["check"]);
    let receipts: Vec<String> = std::fs::read_dir(dev.join(".evolving/results/receipts"))
        .expect("receipts")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).expect("read"))
        .collect();
    assert_eq!(receipts.concat().lines().count(), 1, "{receipts:?}");
    // Where it came from.
    let st = dev_w.evctl(&dev, &["--json", "receipts", "status"]).ok();
    let v: serde_json::Value = serde_json::from_str(&st.stdout).expect("json");
    assert_eq!(v["imported"], 1, "{v}");
    let origins =
        std::fs::read_to_string(dev.join(".evolving/results/imports/notes-origins.jsonl"))
            .expect("origins");
    assert!(
        origins.contains("\"host\":\"ci-linux\"") && origins.contains("ci@example.invalid"),
        "{origins}"
    );

    // What guards a file (the editor's hover, the hook) says where the run came from.
    let g = dev_w.evctl(&dev, &["--json", "guards", "code.txt"]).ok();
    let v: serde_json::Value = serde_json::from_str(&g.stdout).expect("json");
    let origin = &v["decisions"][0]["grounds"][0]["last_run"]["origin"];
    assert_eq!(origin["host"], "ci-linux", "{v}");
    assert_eq!(origin["by"], "ci@example.invalid", "{v}");

    // CI goes green at the same commit: the developer's fetch turns it green.
    let said = run_and_publish(&ci_w, &ci, true);
    assert!(said.starts_with("published 1 receipt"), "{said}");
    run_git(&dev, &["fetch", "-q"]);
    watch.expect("green");
}

#[test]
fn three_publishers_at_once_lose_no_receipt() {
    let seed_w = World::new();
    let team = Team::new(&seed_w);
    let hosts: Vec<(World, PathBuf)> = (1..=3)
        .map(|i| {
            let w = host(&format!("ci-{i}"));
            let dir = team.clone(&w, &format!("ci{i}"));
            (w, dir)
        })
        .collect();
    // Each host runs twice (two receipts each), then all publish at the same moment.
    for (w, dir) in &hosts {
        for ok in [true, false] {
            std::fs::write(dir.join("ok.txt"), "").expect("write");
            if !ok {
                std::fs::remove_file(dir.join("ok.txt")).expect("rm");
            }
            w.evctl(dir, &["check", "--run", "--platform", "linux-ci"]);
        }
    }
    std::thread::scope(|s| {
        for (w, dir) in &hosts {
            s.spawn(move || {
                let r = w.evctl(dir, &["receipts", "publish"]).ok();
                assert!(r.stdout.starts_with("published 2 receipts"), "{r:?}");
            });
        }
    });
    // The remote's notes hold all six, each once.
    let check = team.dir.path().join("check");
    run_git(team.dir.path(), &["clone", "-q", "remote.git", "check"]);
    run_git(
        &check,
        &[
            "fetch",
            "-q",
            "origin",
            "refs/notes/evolving-receipts:refs/notes/evolving-receipts",
        ],
    );
    let head = run_git(&check, &["rev-parse", "HEAD"]);
    let note = run_git(&check, &["notes", "--ref=evolving-receipts", "show", &head]);
    assert_eq!(note.lines().count(), 6, "{note}");
    let mut unique: Vec<&str> = note.lines().collect();
    unique.dedup();
    assert_eq!(unique.len(), 6);
    // Publishing again adds nothing.
    let (w, dir) = &hosts[0];
    let r = w.evctl(dir, &["receipts", "publish"]).ok();
    assert!(r.stdout.starts_with("nothing new to publish"), "{r:?}");
    let _ = team.remote();
}

#[test]
fn a_publisher_not_trusted_never_turns_a_verdict() {
    let dev_w = World::new();
    let team = Team::new(&dev_w);
    let dev = team.clone(&dev_w, "dev");
    let r = dev_w.evctl(&dev, &["receipts", "trust", "ci-linux"]).ok();
    assert!(
        r.stdout
            .contains("only receipts published by ci-linux count"),
        "{r:?}"
    );
    assert!(std::fs::read_to_string(dev.join(".evolving/config"))
        .expect("config")
        .contains("trusted_hosts = [\"ci-linux\"]"));
    // Someone else's laptop claims a green run on linux-ci.
    let rogue_w = host("laptop-7");
    let rogue = team.clone(&rogue_w, "rogue");
    run_and_publish(&rogue_w, &rogue, true);
    run_git(&dev, &["fetch", "-q"]);
    let r = dev_w.evctl(&dev, &["check"]);
    assert!(
        r.stdout.starts_with("not-run\t"),
        "an untrusted green counted: {r:?}"
    );
    let st = dev_w.evctl(&dev, &["receipts", "status"]).ok();
    assert!(st.stdout.contains("trusted    ci-linux"), "{}", st.stdout);
    assert!(
        st.stdout.contains("untrusted  1 (shown, never counted):")
            && st
                .stdout
                .contains("published by laptop-7 (rogue@example.invalid)"),
        "{}",
        st.stdout
    );
    // The trusted CI's red does count.
    let ci_w = host("ci-linux");
    let ci = team.clone(&ci_w, "ci");
    run_and_publish(&ci_w, &ci, false);
    run_git(&dev, &["fetch", "-q"]);
    let r = dev_w.evctl(&dev, &["check"]);
    assert!(r.stdout.starts_with("red\t"), "{r:?}");
    // Trusting everyone again lets the laptop's receipt in (its green is older than CI's red,
    // so the verdict stays red, and the receipt is now in the file).
    dev_w.evctl(&dev, &["receipts", "trust", "--everyone"]).ok();
    let r = dev_w.evctl(&dev, &["check"]);
    assert!(r.stdout.starts_with("red\t"), "{r:?}");
    let st = dev_w.evctl(&dev, &["--json", "receipts", "status"]).ok();
    let v: serde_json::Value = serde_json::from_str(&st.stdout).expect("json");
    assert_eq!(v["imported"], 2, "{v}");
    assert!(v["trusted"].is_null(), "{v}");
}

#[test]
fn a_notes_ref_rewritten_to_drop_a_red_is_reported_and_the_red_stays() {
    let RedFetched {
        team,
        dev_w,
        dev,
        ci_w: _ci_w,
        ci: _ci,
    } = red_fetched();
    // Someone with push rights replaces the notes with a history that never had the red.
    let forger = team.dir.path().join("forger");
    run_git(team.dir.path(), &["clone", "-q", "remote.git", "forger"]);
    identity(&forger, "F", "f@example.invalid");
    let head = run_git(&forger, &["rev-parse", "HEAD"]);
    let green = format!(
        "{{\"commit\":\"{head}\",\"platform\":\"linux-ci\",\"ran_at\":\"2026-01-01T00:00:00Z\",\"result\":\"green\",\"test\":\"test -f ok.txt\"}}"
    );
    run_git(
        &forger,
        &[
            "notes",
            "--ref=evolving-receipts",
            "add",
            "-m",
            &green,
            &head,
        ],
    );
    run_git(
        &forger,
        &[
            "push",
            "-q",
            "--force",
            "origin",
            "refs/notes/evolving-receipts:refs/notes/evolving-receipts",
        ],
    );
    run_git(&dev, &["fetch", "-q"]);
    let r = dev_w.evctl(&dev, &["check"]);
    assert!(r.stdout.starts_with("red\t"), "the red was lost: {r:?}");
    assert!(
        r.stderr
            .contains("refs/evolving/remote-notes/origin/receipts was rewritten, not extended")
            && r.stderr
                .contains("1 receipt was dropped, e.g. red \"test -f ok.txt\""),
        "{r:?}"
    );
    let st = dev_w.evctl(&dev, &["receipts", "status"]).ok();
    assert!(
        st.stdout
            .contains("REWRITTEN  refs/evolving/remote-notes/origin/receipts"),
        "{}",
        st.stdout
    );
}

#[test]
fn a_notes_commit_that_takes_a_receipt_away_is_reported_too() {
    let RedFetched {
        team: _team,
        dev_w,
        dev,
        ci_w: _ci_w,
        ci,
    } = red_fetched();
    // A plain, fast-forward notes commit that removes the note (no force needed).
    let head = run_git(&ci, &["rev-parse", "HEAD"]);
    run_git(&ci, &["notes", "--ref=evolving-receipts", "remove", &head]);
    run_git(
        &ci,
        &[
            "push",
            "-q",
            "origin",
            "refs/notes/evolving-receipts:refs/notes/evolving-receipts",
        ],
    );
    run_git(&dev, &["fetch", "-q"]);
    let r = dev_w.evctl(&dev, &["check"]);
    assert!(r.stdout.starts_with("red\t"), "the red was lost: {r:?}");
    assert!(
        r.stderr
            .contains("refs/evolving/remote-notes/origin/receipts took receipts away")
            && r.stderr
                .contains("1 receipt was dropped, e.g. red \"test -f ok.txt\""),
        "{r:?}"
    );
}

#[test]
fn a_fifo_or_a_directory_where_the_import_keeps_its_files_never_hangs_a_check() {
    let RedFetched {
        team: _team,
        dev_w,
        dev,
        ci_w,
        ci,
    } = red_fetched();
    let imports = dev.join(".evolving/results/imports");
    // Planted while no evd writes there (the next command starts one, which meets them).
    dev_w.stop_daemon();
    // A FIFO for what was read, a directory for who published what.
    std::fs::remove_file(imports.join("notes-seen.json")).expect("rm");
    let ok = Command::new("mkfifo")
        .arg(imports.join("notes-seen.json"))
        .status()
        .expect("mkfifo")
        .success();
    assert!(ok);
    std::fs::remove_file(imports.join("notes-origins.jsonl")).expect("rm");
    std::fs::create_dir(imports.join("notes-origins.jsonl")).expect("mkdir");
    // The CI goes green; the developer fetches and asks: an answer, never a hang.
    run_and_publish(&ci_w, &ci, true);
    run_git(&dev, &["fetch", "-q"]);
    for args in [&["check"][..], &["receipts", "status"][..]] {
        let r = dev_w
            .evctl_within(&dev, args, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("evctl {args:?} hung"));
        assert!(r.code <= 1, "{r:?}");
        if args == ["check"] {
            // The receipts already here still speak (red: the green could not be taken in), and
            // the check says what it could not write.
            assert!(r.stdout.starts_with("red\t"), "{r:?}");
            assert!(
                r.stderr
                    .contains("receipts published through git could not be read")
                    && r.stderr.contains("notes-origins.jsonl"),
                "{r:?}"
            );
        }
    }
}

#[test]
fn each_hosts_ledger_is_shared_append_only_and_a_rewrite_is_refused_naming_its_line() {
    let seed_w = World::new();
    let team = Team::new(&seed_w);
    // Two hosts, each with a ledger of its own (evd journals each check it runs).
    let a_w = host("host-a");
    let a = team.clone(&a_w, "a");
    let b_w = host("host-b");
    let b = team.clone(&b_w, "b");
    for (w, dir) in [(&a_w, &a), (&b_w, &b)] {
        w.evctl(dir, &["check"]);
        w.evctl(dir, &["check", "--run", "--platform", "linux-ci"]);
        let r = w.evctl(dir, &["ledger", "publish"]).ok();
        assert!(
            r.stdout.starts_with("published the ledger of host-"),
            "{r:?}"
        );
    }
    // A third clone fetches both and verifies them.
    let dev_w = World::new();
    let dev = team.clone(&dev_w, "dev");
    run_git(&dev, &["fetch", "-q"]);
    let r = dev_w.evctl(&dev, &["ledger", "verify", "--all-hosts"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("host host-a ok: ") && r.stdout.contains("host host-b ok: "),
        "{r:?}"
    );
    // host-a goes on and publishes more: accepted as an extension.
    a_w.evctl(&a, &["check"]);
    a_w.evctl(&a, &["ledger", "publish"]).ok();
    run_git(&dev, &["fetch", "-q"]);
    assert_eq!(
        dev_w.evctl(&dev, &["ledger", "verify", "--all-hosts"]).code,
        0
    );
    // Someone force-pushes a rewritten history for host-b: its second line changed.
    let b_ref = "refs/evolving/ledger/host-b";
    let original = run_git(&b, &["show", &format!("{b_ref}:events.jsonl")]);
    let mut lines: Vec<String> = original.lines().map(str::to_string).collect();
    assert!(lines.len() >= 2, "{original}");
    lines[1] = lines[1].replacen("\"seq\":2", "\"seq\":2,\"forged\":true", 1);
    force_publish(&b, "host-b", &format!("{}\n", lines.join("\n")));
    run_git(&dev, &["fetch", "-q"]);
    let r = dev_w.evctl(&dev, &["ledger", "verify", "--all-hosts"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("host host-b's ledger was rewritten: from line 2 it does not extend the copy accepted before"),
        "{r:?}"
    );
    assert!(r.stdout.contains("host host-a ok: "), "{r:?}");
    // The last good copy is kept.
    let kept = run_git(
        &dev,
        &[
            "show",
            "refs/evolving/seen/origin/ledger/host-b:events.jsonl",
        ],
    );
    assert_eq!(kept, original);
}

/// Client events for `plans` plans of one intent, predicted `pred`, actually `act` (one JSON
/// object a line, as `evctl ledger append` reads them).
fn plan_events(intent: &str, plans: usize, pred: f64, act: f64) -> String {
    let ev = |t: &str, payload: serde_json::Value| {
        serde_json::json!({"schema_version": "1.1", "event_type": t, "run_id": "R-team",
            "agent_id": "planner", "payload": payload})
        .to_string()
    };
    let mut lines = vec![ev(
        "intent_created",
        serde_json::json!({"intent_id": intent, "parent_intent_id": null, "goal": "g"}),
    )];
    for i in 0..plans {
        let plan = format!("P-{i}");
        lines.push(ev(
            "plan_variant_created",
            serde_json::json!({"intent_id": intent,
            "plan_id": plan, "variant_id": "v1",
            "model": {"provider": "p", "model_id": "m1", "tier": "flash", "routing_reason": "r"},
            "predicted": {"p_success": pred, "entropy": 1.0}}),
        ));
        lines.push(ev(
            "plan_selected",
            serde_json::json!({"intent_id": intent, "plan_id": plan, "variant_id": "v1"}),
        ));
        lines.push(ev(
            "execution_started",
            serde_json::json!({"intent_id": intent, "plan_id": plan, "sandbox_id": "S"}),
        ));
        let mut done = serde_json::json!({"intent_id": intent, "plan_id": plan,
            "sandbox_id": "S", "status": "success",
            "actual": {"p_success": act, "entropy": 1.0, "cost": 1.0, "impact": 1.0}});
        if act < 1.0 {
            done["status"] = "failure".into();
            done["failure_reason"] = "tests failed".into();
        }
        lines.push(ev("execution_completed", done));
    }
    lines.join("\n") + "\n"
}

fn append_events(w: &World, dir: &Path, text: &str) {
    let file = dir.join("events-in.jsonl");
    std::fs::write(&file, text).expect("write");
    w.evctl(dir, &["ledger", "append", "events-in.jsonl"]).ok();
    std::fs::remove_file(&file).expect("remove");
}

/// Force-push `text` as `host`'s published ledger from `dir` (a fresh history, as a forger
/// with push rights would).
fn force_publish(dir: &Path, host: &str, text: &str) {
    std::fs::write(dir.join("forged.jsonl"), text).expect("write");
    let blob = run_git(dir, &["hash-object", "-w", "forged.jsonl"]);
    std::fs::remove_file(dir.join("forged.jsonl")).expect("remove");
    let mut c = Command::new("git")
        .current_dir(dir)
        .arg("mktree")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("mktree");
    {
        use std::io::Write;
        c.stdin
            .take()
            .expect("stdin")
            .write_all(format!("100644 blob {blob}\tevents.jsonl\n").as_bytes())
            .expect("write");
    }
    let out = c.wait_with_output().expect("mktree");
    let tree = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let commit = run_git(dir, &["commit-tree", &tree, "-m", "forged"]);
    run_git(
        dir,
        &[
            "push",
            "-q",
            "--force",
            "origin",
            &format!("{commit}:refs/evolving/ledger/{host}"),
        ],
    );
}

#[test]
fn the_fleet_is_queried_together_and_a_rewritten_tail_is_caught_by_a_host_that_never_saw_it() {
    let seed_w = World::new();
    let team = Team::new(&seed_w);
    let a_w = host("host-a");
    let a = team.clone(&a_w, "a");
    let b_w = host("host-b");
    let b = team.clone(&b_w, "b");
    // Both hosts' agents record work: host-a's planner is well calibrated, host-b's is not.
    append_events(&a_w, &a, &plan_events("I-a", 3, 0.9, 1.0));
    append_events(&b_w, &b, &plan_events("I-b", 2, 0.9, 0.0));
    b_w.evctl(&b, &["ledger", "publish"]).ok();
    // host-a fetches host-b's ledger, accepts it (witnessing its head), and publishes.
    run_git(&a, &["fetch", "-q"]);
    let r = a_w.evctl(&a, &["ledger", "verify", "--all-hosts"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("host host-b ok: "), "{r:?}");
    a_w.evctl(&a, &["ledger", "publish"]).ok();
    let witnessed = run_git(&a, &["show", "refs/evolving/ledger/host-a:events.jsonl"]);
    assert!(
        witnessed.contains("\"event_type\":\"ledger_witnessed\"")
            && witnessed.contains("\"host\":\"host-b\""),
        "{witnessed}"
    );

    // The fleet asked together: both hosts' executions, each joined within its own ledger.
    let r = a_w.evctl(
        &a,
        &["ledger", "query", "calibration", "--all-hosts", "--json"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
    let row = &v["rows"][0];
    assert_eq!(row["executions"], 5, "{v}");
    assert_eq!(row["actual_p_success"], serde_json::json!(0.6), "{v}");
    let hosts: Vec<&str> = v["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .filter_map(|h| h["host"].as_str())
        .collect();
    assert_eq!(hosts, ["host-a", "host-b"], "{v}");
    // Alone, each host sees only its own.
    let r = a_w.evctl(&a, &["ledger", "query", "calibration", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(v["rows"][0]["executions"], 3, "{v}");
    let r = a_w.evctl(&a, &["ledger", "query", "calibration", "--all-hosts"]);
    assert!(r.stdout.starts_with("over 2 hosts: host-a ("), "{r:?}");

    // host-b's published tail is rewritten (its last event changed, the chain still whole)
    // and force-pushed. A host that never saw the original catches it by host-a's witness.
    let original = run_git(&b, &["show", "refs/evolving/ledger/host-b:events.jsonl"]);
    let mut lines: Vec<String> = original.lines().map(str::to_string).collect();
    let last = lines.len() - 1;
    let flipped = if lines[last].contains("\"dirty\":false") {
        lines[last].replace("\"dirty\":false", "\"dirty\":true")
    } else {
        lines[last].replace("\"dirty\":true", "\"dirty\":false")
    };
    assert_ne!(flipped, lines[last]);
    lines[last] = flipped;
    force_publish(&b, "host-b", &(lines.join("\n") + "\n"));
    let c_w = host("host-c");
    let c = team.clone(&c_w, "c");
    run_git(&c, &["fetch", "-q"]);
    let r = c_w.evctl(&c, &["ledger", "verify", "--all-hosts"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "host host-b's ledger was rewritten: host host-a witnessed its event {}",
            last + 1
        )) && r.stderr.contains("this copy differs at it"),
        "{r:?}"
    );
    assert!(r.stdout.contains("host host-a ok: "), "{r:?}");
    // The refused copy is not folded into the fleet's answers.
    let r = c_w.evctl(
        &c,
        &["ledger", "query", "calibration", "--all-hosts", "--json"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
    let hosts: Vec<&str> = v["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .filter_map(|h| h["host"].as_str())
        .collect();
    assert_eq!(hosts, ["host-c", "host-a"], "{v}");
    assert!(
        r.stderr.contains("host host-b's ledger was rewritten"),
        "{r:?}"
    );

    // host-b's own ledger rewritten at home, file and head together (its last event cut, the
    // head moved back to the event before): the local chain alone looks whole, but the head
    // it published says otherwise.
    b_w.evctl(&b, &["shutdown"]).ok();
    let ledger = b.join(".evolving/results/ledger");
    let text = std::fs::read_to_string(ledger.join("events.jsonl")).expect("ledger");
    let mut kept: Vec<&str> = text.lines().collect();
    let cut = kept.pop().expect("a line");
    let cut: serde_json::Value = serde_json::from_str(cut).expect("json");
    let head = serde_json::json!({"seq": cut["seq"].as_u64().expect("seq") - 1,
        "hash": cut["prev"].as_str().expect("prev")})
    .to_string();
    std::fs::write(ledger.join("events.jsonl"), kept.join("\n") + "\n").expect("write");
    std::fs::write(ledger.join("head"), format!("{head:<127}\n")).expect("write");
    let r = b_w.evctl(&b, &["ledger", "verify"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("this host published its ledger as refs/evolving/ledger/host-b")
            && r.stderr.contains("it was rewritten after it was published"),
        "{r:?}"
    );
}

#[test]
fn a_host_trusted_only_when_signed_counts_only_in_signed_notes_commits() {
    let dev_w = World::new();
    let team = Team::new(&dev_w);
    let dev = team.clone(&dev_w, "dev");
    let ci_w = host("ci-linux");
    let ci = team.clone(&ci_w, "ci");
    // CI signs with an SSH key; the developer's clone verifies with it (allowed signers).
    let keys = team.dir.path().join("keys");
    std::fs::create_dir_all(&keys).expect("mkdir");
    let key = keys.join("ci");
    let made = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "ci@example.invalid",
            "-f",
        ])
        .arg(&key)
        .status()
        .expect("ssh-keygen (openssh-client) is needed for this test");
    assert!(made.success());
    let public = std::fs::read_to_string(keys.join("ci.pub")).expect("public key");
    let listed = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(keys.join("ci.pub"))
        .output()
        .expect("ssh-keygen -lf");
    let fingerprint = String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .nth(1)
        .expect("fingerprint")
        .to_string();
    assert!(fingerprint.starts_with("SHA256:"), "{fingerprint}");
    std::fs::write(keys.join("allowed"), format!("ci@example.invalid {public}")).expect("write");
    run_git(&ci, &["config", "gpg.format", "ssh"]);
    run_git(&ci, &["config", "user.signingkey", &key.to_string_lossy()]);
    run_git(
        &dev,
        &[
            "config",
            "gpg.ssh.allowedSignersFile",
            &keys.join("allowed").to_string_lossy(),
        ],
    );
    let r = dev_w
        .evctl(
            &dev,
            &["receipts", "trust", "ci-linux", "--signer", &fingerprint],
        )
        .ok();
    assert!(
        r.stdout.starts_with(&format!(
            "only receipts published by ci-linux count, signed as ci-linux by {fingerprint}"
        )),
        "{r:?}"
    );
    let config = std::fs::read_to_string(dev.join(".evolving/config")).expect("config");
    assert!(
        config.contains(&format!("trusted_signers = [\"ci-linux={fingerprint}\"]")),
        "{config}"
    );
    // An unsigned publish from ci-linux: shown, never counted.
    run_and_publish(&ci_w, &ci, false);
    run_git(&dev, &["fetch", "-q"]);
    let r = dev_w.evctl(&dev, &["check"]);
    assert!(r.stdout.starts_with("not-run\t"), "{r:?}");
    let r = dev_w.evctl(&dev, &["receipts", "status"]).ok();
    assert!(
        r.stdout
            .contains(&format!("signed     ci-linux by {fingerprint}")),
        "{r:?}"
    );
    assert!(
        r.stdout.contains("UNTRUSTED") || r.stdout.contains("untrusted"),
        "{r:?}"
    );
    // Signed: the red counts.
    std::thread::sleep(Duration::from_millis(20));
    ci_w.evctl(&ci, &["check", "--run", "--platform", "linux-ci"]);
    let r = ci_w.evctl(&ci, &["receipts", "publish", "--sign"]).ok();
    assert!(
        r.stdout.starts_with("published 1 receipt from ci-linux"),
        "{r:?}"
    );
    let tip = run_git(&ci, &["rev-parse", "refs/notes/evolving-receipts"]);
    let raw = run_git(&ci, &["cat-file", "commit", &tip]);
    assert!(
        raw.contains("gpgsig -----BEGIN SSH SIGNATURE-----"),
        "{raw}"
    );
    run_git(&dev, &["fetch", "-q"]);
    let r = dev_w.evctl(&dev, &["check"]);
    assert!(r.stdout.starts_with("red\t"), "{r:?}");
    // Another key listed instead: the config and status say so.
    dev_w.evctl(&dev, &["receipts", "untrust", "ci-linux"]).ok();
    dev_w
        .evctl(
            &dev,
            &[
                "receipts",
                "trust",
                "ci-linux",
                "--signer",
                "SHA256:someone-else",
            ],
        )
        .ok();
    let config = std::fs::read_to_string(dev.join(".evolving/config")).expect("config");
    assert!(!config.contains(&fingerprint), "{config}");
    let r = dev_w.evctl(&dev, &["receipts", "status"]).ok();
    assert!(
        r.stdout
            .contains("signed     ci-linux by SHA256:someone-else"),
        "{r:?}"
    );
}
