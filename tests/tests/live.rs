//! Live verdicts: a receipt appended by another process, or a commit touching a declared
//! trigger, reaches the state file and `evctl watch` without any further command, and a
//! restarted daemon gives the same verdicts.

use std::process::Stdio;
use std::time::Duration;

use evd_e2e::{wait_until, Repo, Watch, World};

fn git(repo: &Repo, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .current_dir(repo.path())
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

/// A store with one test-bound decision, verified at the repo's HEAD, policy `none`.
fn setup(w: &World) -> (Repo, String) {
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let config = repo.ev_dir().join("config");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, text.replace("\"live-origin\"", "\"none\"")).expect("config");
    let head = repo.head();
    let r = w
        .evctl(
            repo.path(),
            &[
                "decide",
                "no Redis",
                "--assume",
                "db coordinates pods",
                "--assume-test",
                "true",
                "--counter-test",
                "false",
                "--on-platform",
                "linux-ci",
                "--triggered-by",
                "deps.txt",
                "--surface",
                "deps",
                "--verified-at-sha",
                &head,
                "--blame",
                "b",
            ],
        )
        .ok();
    let id = r.stdout.split_whitespace().nth(1).expect("id").to_string();
    (repo, id)
}

fn state_verdict(repo: &Repo, id: &str) -> Option<String> {
    let text =
        std::fs::read_to_string(repo.ev_dir().join(format!("results/state/{id}.json"))).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["grounds"][0]["verdict"].as_str().map(str::to_string)
}

fn append_receipt(repo: &Repo, commit: &str) {
    append_receipt_at(repo, commit, &now_rfc3339());
}

fn append_receipt_at(repo: &Repo, commit: &str, ran_at: &str) {
    append_green(repo, "true", commit, ran_at);
}

/// A green `linux-ci` receipt of `selector` at `commit`, appended as CI would.
fn append_green(repo: &Repo, selector: &str, commit: &str, ran_at: &str) {
    let line = format!(
        "{{\"commit\":\"{commit}\",\"falsifiable\":true,\"platform\":\"linux-ci\",\"ran_at\":\"{ran_at}\",\"result\":\"green\",\"test\":\"{selector}\"}}\n"
    );
    let dir = repo.ev_dir().join("results/receipts");
    std::fs::create_dir_all(&dir).expect("mkdir");
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(dir.join(format!("{}.jsonl", proto::id::receipt_key(selector))))
        .expect("open receipts");
    f.write_all(line.as_bytes()).expect("append");
}

fn now_rfc3339() -> String {
    rfc3339_in(0)
}

/// The time `secs` seconds from now, to the second.
fn rfc3339_in(secs: i64) -> String {
    let out = std::process::Command::new("date")
        .args([
            "-u",
            "-d",
            &format!("{secs} seconds"),
            "+%Y-%m-%dT%H:%M:%SZ",
        ])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `evctl check` against the warm daemon, asserted equal to a cold in-process evaluation of a
/// copy of the repository made at the same moment (a copy, so that the cold check's own state
/// files do not disturb the daemon's memory); returns the rows.
fn hot_equals_cold(w: &World, repo: &Repo) -> String {
    let hot = w.evctl(repo.path(), &["check"]).ok().stdout;
    let copy = tempfile::tempdir().expect("tempdir");
    // The daemon may be writing meanwhile (a temp file renamed away between cp's listing and
    // its read): copy again until one copy sees no file vanish.
    let ok = (0..5).any(|_| {
        let _ = std::fs::remove_dir_all(copy.path().join("repo"));
        std::process::Command::new("cp")
            .arg("-a")
            .arg(repo.path())
            .arg(copy.path().join("repo"))
            .status()
            .expect("cp")
            .success()
    });
    assert!(ok, "copying the repository");
    let cold = w
        .evctl_env(
            &copy.path().join("repo"),
            &[("EVD_NO_DAEMON", "1")],
            &["check"],
        )
        .ok()
        .stdout;
    assert_eq!(
        hot, cold,
        "the daemon's answer differs from a cold evaluation"
    );
    hot
}

fn set_config(repo: &Repo, from: &str, to: &str) {
    let config = repo.ev_dir().join("config");
    let text = std::fs::read_to_string(&config).expect("config");
    assert!(text.contains(from), "{text}");
    std::fs::write(&config, text.replace(from, to)).expect("config");
}

#[test]
fn a_receipt_from_another_process_and_a_triggering_commit_flip_verdicts_without_a_command() {
    let w = World::new();
    let (repo, id) = setup(&w);
    let r = w.evctl(repo.path(), &["check"]).ok();
    assert!(r.stdout.starts_with("not-run\t"), "{r:?}");
    assert_eq!(state_verdict(&repo, &id).as_deref(), Some("not-run"));

    let watch = Watch::start(&w, repo.path());
    // The subscription is live once the daemon answers a request after it.
    assert!(wait_until(Duration::from_secs(5), || w
        .daemon_pid()
        .is_some()));
    std::thread::sleep(Duration::from_millis(300));

    // Another process (this test) appends a receipt: the watch and the state file see it.
    append_receipt(&repo, &repo.head());
    let v = watch.expect("green");
    assert_eq!(v["tick_id"], id.as_str());
    assert_eq!(v["old"], "not-run");
    assert!(wait_until(Duration::from_secs(10), || {
        state_verdict(&repo, &id).as_deref() == Some("green")
    }));
    assert!(w
        .evctl(repo.path(), &["check"])
        .ok()
        .stdout
        .starts_with("green\t"));

    // A commit touching the declared trigger makes the last run stale.
    std::fs::write(repo.path().join("deps.txt"), "redis\n").expect("write");
    git(&repo, &["add", "deps.txt"]);
    git(&repo, &["commit", "-q", "-m", "touch the trigger"]);
    watch.expect("stale");
    assert!(wait_until(Duration::from_secs(10), || {
        state_verdict(&repo, &id).as_deref() == Some("stale")
    }));
    let before = w.evctl(repo.path(), &["check"]).ok().stdout;
    assert!(before.starts_with("stale\t"), "{before}");

    // A restarted daemon gives the same verdicts, and leaves a state file that already says
    // them as it is (its computed_at is when the verdict was computed).
    let state = repo.ev_dir().join(format!("results/state/{id}.json"));
    let state_before = std::fs::read_to_string(&state).expect("state file");
    drop(watch);
    w.stop_daemon();
    let after = w.evctl(repo.path(), &["check"]).ok().stdout;
    assert_eq!(before, after);
    assert_eq!(
        std::fs::read_to_string(&state).expect("state file"),
        state_before
    );
}

/// A superseded decision's test ground leaves the watch (`new` is null, with the label it had),
/// and its successor's ground enters it (`old` is null).
#[test]
fn a_superseded_decision_leaves_the_watch_and_its_successor_enters() {
    let w = World::new();
    let (repo, id) = setup(&w);
    append_receipt(&repo, &repo.head());
    assert!(w
        .evctl(repo.path(), &["check"])
        .ok()
        .stdout
        .starts_with("green\t"));
    let watch = Watch::start(&w, repo.path());
    std::thread::sleep(Duration::from_millis(300));
    let r = w
        .evctl(
            repo.path(),
            &[
                "supersede",
                &id,
                "--authority",
                "agent-disposable",
                "--blame",
                "b",
            ],
        )
        .ok();
    let out = w.evctl(repo.path(), &["check"]).ok().stdout;
    assert!(!out.contains(&id), "{r:?}\n{out}");
    let left = |v: &serde_json::Value| v["tick_id"] == id.as_str() && v["new"].is_null();
    let entered = |v: &serde_json::Value| v["tick_id"] != id.as_str() && v["old"].is_null();
    let seen = watch.expect_all(&[&left, &entered]);
    assert_eq!(seen[0]["old"], "green", "{seen:?}");
    assert_eq!(seen[0]["decision"], "no Redis", "{seen:?}");
    assert_eq!(seen[0]["claim"], "db coordinates pods", "{seen:?}");
    assert_eq!(seen[1]["new"], "green", "{seen:?}");
    assert_eq!(seen[1]["ground_index"], 0, "{seen:?}");
    assert!(
        out.contains(seen[1]["tick_id"].as_str().unwrap_or("?")),
        "{out}"
    );
}

/// The daemon answers a repeated check from memory; every change that finished before a
/// request is in its answer, with no waiting: receipts, the selected-list, a commit touching a
/// trigger, a new decision, a tick edited in place, a removed state file, the config and the
/// clock.
#[test]
fn a_repeated_check_is_never_behind_any_change() {
    let w = World::new();
    let _repo = never_behind(&w);
    let st = w.status().expect("status");
    let log = std::fs::read_to_string(w.rt_dir().join("evd.log")).unwrap_or_default();
    assert_eq!(st["stores"][0]["watch"], "watched", "{st}\nevd.log:\n{log}");
}

/// The same with every watch refused: the store is served degraded (validated against the disk
/// on each request), says so in `status`, and is never stale either.
#[test]
fn a_store_that_cannot_be_watched_is_slower_but_never_stale() {
    let w = World::with_env(&[("EVD_NO_WATCH", "1")]);
    let _repo = never_behind(&w);
    let st = w.status().expect("status");
    let watch = st["stores"][0]["watch"].as_str().unwrap_or_default();
    assert!(
        watch.starts_with("degraded: ") && watch.contains("EVD_NO_WATCH"),
        "{st}"
    );
    assert_eq!(st["resources"]["inotify_instances"], 0, "{st}");
}

/// Returns the repository, so that the caller's look at `status` comes before its directory is
/// removed (a store whose directory is gone is, rightly, no longer watched).
fn never_behind(w: &World) -> Repo {
    let (repo, id) = setup(w);
    let rows = |w: &World| hot_equals_cold(w, &repo);
    assert!(rows(w).starts_with("not-run\t"));
    assert!(rows(w).starts_with("not-run\t"));

    append_receipt(&repo, &repo.head());
    assert!(rows(w).starts_with("green\t"));

    let selected = repo.ev_dir().join("results/selected.json");
    std::fs::write(&selected, r#"{"changed":["deps.txt"],"selected":[]}"#).expect("write");
    assert!(rows(w).starts_with("silently-unbound\t"));
    std::fs::remove_file(&selected).expect("rm");
    assert!(rows(w).starts_with("green\t"));

    // A state file removed by hand is back after the next check.
    let state = repo.ev_dir().join(format!("results/state/{id}.json"));
    std::fs::remove_file(&state).expect("rm");
    w.evctl(repo.path(), &["check"]).ok();
    assert_eq!(state_verdict(&repo, &id).as_deref(), Some("green"));

    // A new decision is a new row at once.
    w.evctl(
        repo.path(),
        &[
            "decide",
            "use Postgres",
            "--assume",
            "pg is fine",
            "--blame",
            "b",
        ],
    )
    .ok();
    w.evctl(
        repo.path(),
        &[
            "decide",
            "cache in-process",
            "--assume",
            "it fits",
            "--assume-test",
            "true",
            "--counter-test",
            "false",
            "--on-platform",
            "mac",
            "--triggered-by",
            "x",
            "--surface",
            "s",
            "--blame",
            "b",
        ],
    )
    .ok();
    // (Every tick file an hour old: no cache may treat one as just written, and so suspect.)
    for f in repo.tick_files() {
        let ok = std::process::Command::new("touch")
            .args(["-d", "1 hour ago"])
            .arg(repo.ev_dir().join("ticks").join(f))
            .status()
            .expect("touch")
            .success();
        assert!(ok, "touch");
    }
    let now = rows(w);
    assert_eq!(now.lines().filter(|l| l.contains('\t')).count(), 2, "{now}");

    // A tick edited in place (same file, same inode, as upstream writes ticks): the edit is in
    // the very next answer, whatever it makes of the tick.
    let edited = repo
        .tick_files()
        .into_iter()
        .find(|f| {
            std::fs::read_to_string(repo.ev_dir().join("ticks").join(f))
                .is_ok_and(|t| t.contains("cache in-process"))
        })
        .expect("the tick of the second decision");
    let path = repo.ev_dir().join("ticks").join(&edited);
    let text = std::fs::read_to_string(&path).expect("tick");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .expect("open in place");
        f.write_all(text.replace("\"mac\"", "\"linux-ci\"").as_bytes())
            .expect("rewrite in place");
    }
    let after_edit = rows(w);
    assert_ne!(after_edit, now, "the in-place edit changed the answer");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .expect("open in place");
        f.write_all(text.as_bytes()).expect("restore in place");
    }
    assert_eq!(rows(w), now);

    // A re-tag replaces the first decision in the view by its child.
    w.evctl(
        repo.path(),
        &[
            "supersede",
            &id,
            "--authority",
            "agent-disposable",
            "--blame",
            "b",
        ],
    )
    .ok();
    let retagged = rows(w);
    assert!(
        !retagged.contains(&id),
        "the superseded tick left the view: {retagged}"
    );
    assert!(retagged.contains("green\t"), "{retagged}");

    // A commit touching the trigger makes the run stale, with no wait for the watcher.
    std::fs::write(repo.path().join("deps.txt"), "redis\n").expect("write");
    git(&repo, &["add", "deps.txt"]);
    git(&repo, &["commit", "-q", "-m", "touch the trigger"]);
    assert!(rows(w).contains("stale\t"));

    // A fresh run at the new HEAD, then the clock: with a zero-day window, a receipt dated two
    // seconds ahead is green until a second after that, then stale by age.
    set_config(&repo, "staleness_days = 7", "staleness_days = 0");
    append_receipt_at(&repo, &repo.head(), &rfc3339_in(2));
    let before = rows(w);
    assert!(before.contains("green\t"), "{before}");
    std::thread::sleep(Duration::from_secs(4));
    let after = rows(w);
    assert!(
        after.contains("(deciding receipt older than the staleness window)"),
        "{after}"
    );

    // The work tree (0.1.32's `dirty`): an edit to the tracked trigger, saved and not
    // committed, is in the very next answer; so are its revert, its staging and its commit.
    set_config(&repo, "staleness_days = 0", "staleness_days = 7");
    append_receipt(&repo, &repo.head());
    assert!(rows(w).contains("green\t"));
    let deps = repo.path().join("deps.txt");
    std::fs::write(&deps, "redis\nmemcached\n").expect("edit");
    assert!(rows(w).contains("dirty\t"));
    std::fs::write(&deps, "redis\n").expect("revert");
    assert!(rows(w).contains("green\t"));
    std::fs::write(&deps, "memcached\n").expect("edit");
    git(&repo, &["add", "deps.txt"]);
    assert!(rows(w).contains("dirty\t"));
    git(&repo, &["commit", "-q", "-m", "swap the cache"]);
    let committed = rows(w);
    assert!(committed.contains("stale\t"), "{committed}");
    repo
}

/// An edit saved to a guarded file flips green to `dirty` in the state file and on `evctl
/// watch` with no command run, and back when it is reverted; a commit of the edit makes it
/// stale.
#[test]
fn a_saved_edit_to_a_guarded_file_reads_dirty_without_a_command() {
    let w = World::new();
    let (repo, id) = setup(&w);
    std::fs::write(repo.path().join("deps.txt"), "redis\n").expect("write");
    git(&repo, &["add", "deps.txt"]);
    git(&repo, &["commit", "-q", "-m", "deps"]);
    append_receipt(&repo, &repo.head());
    let r = w.evctl(repo.path(), &["check"]).ok();
    assert!(r.stdout.starts_with("green\t"), "{r:?}");
    let watch = Watch::start(&w, repo.path());
    std::thread::sleep(Duration::from_millis(300));

    // As an editor saves: a new file renamed over the old one.
    let save = |text: &str| {
        let tmp = repo.path().join(".deps.txt.swp");
        std::fs::write(&tmp, text).expect("write");
        std::fs::rename(&tmp, repo.path().join("deps.txt")).expect("rename");
    };
    save("redis\nmemcached\n");
    let v = watch.expect("dirty");
    assert_eq!(v["tick_id"], id.as_str());
    assert_eq!(v["old"], "green");
    assert!(wait_until(Duration::from_secs(10), || {
        state_verdict(&repo, &id).as_deref() == Some("dirty")
    }));
    save("redis\n");
    watch.expect("green");
    assert!(wait_until(Duration::from_secs(10), || {
        state_verdict(&repo, &id).as_deref() == Some("green")
    }));
    // Edited in place this time, then committed: stale (a triggering change after the run).
    std::fs::write(repo.path().join("deps.txt"), "memcached\n").expect("write");
    watch.expect("dirty");
    git(&repo, &["commit", "-q", "-am", "memcached"]);
    watch.expect("stale");
    assert!(wait_until(Duration::from_secs(10), || {
        state_verdict(&repo, &id).as_deref() == Some("stale")
    }));
}

#[test]
fn watch_needs_a_daemon_and_says_so() {
    let w = World::new();
    let (repo, _) = setup(&w);
    let r = w.evctl_env(repo.path(), &[("EVD_NO_DAEMON", "1")], &["watch"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("evctl watch needs evd"), "{r:?}");
}

/// HEAD moving in every way git moves it — a commit elsewhere, one touching the trigger, a
/// rewind, a merge, a rebase onto a rewritten history, a checkout of an unrelated root — and
/// the warm daemon's verdicts stay exactly a cold evaluation's, whether its carried answers
/// applied or it had to ask git again.
#[test]
fn verdicts_follow_every_kind_of_head_move_exactly() {
    let w = World::new();
    let (repo, _id) = setup(&w);
    let commit = |file: &str, text: &str, msg: &str| {
        std::fs::write(repo.path().join(file), text).expect("write");
        git(&repo, &["add", file]);
        git(&repo, &["commit", "-q", "-m", msg]);
    };
    commit("deps.txt", "redis\n", "deps");
    let base = repo.head();
    append_receipt(&repo, &base);
    let rows = |w: &World| hot_equals_cold(w, &repo);
    assert!(rows(&w).starts_with("green\t"));
    // Plain commits elsewhere: carried, still green.
    commit("a.txt", "1\n", "a1");
    commit("a.txt", "2\n", "a2");
    assert!(rows(&w).starts_with("green\t"));
    // A side branch touching the trigger, merged: stale.
    git(&repo, &["checkout", "-q", "-b", "side", &base]);
    commit("deps.txt", "memcached\n", "side deps");
    git(&repo, &["checkout", "-q", "main"]);
    git(&repo, &["merge", "-q", "--no-edit", "side"]);
    assert!(rows(&w).starts_with("stale\t"));
    // Rewound past the merge: green again.
    git(&repo, &["reset", "-q", "--hard", "HEAD~1"]);
    assert!(rows(&w).starts_with("green\t"));
    // Rebased onto the side branch (a rewritten history that touches the trigger): stale.
    git(&repo, &["rebase", "-q", "side"]);
    assert!(rows(&w).starts_with("stale\t"));
    // An unrelated history (an orphan branch): the receipt's commit is not an ancestor.
    git(&repo, &["checkout", "-q", "--orphan", "fresh"]);
    commit("deps.txt", "redis\n", "fresh start");
    let r = rows(&w);
    assert!(!r.is_empty(), "{r}");
    // Back to where the receipt was taken.
    git(&repo, &["checkout", "-q", "-f", "main"]);
    git(&repo, &["reset", "-q", "--hard", &base]);
    assert!(rows(&w).starts_with("green\t"));

    // A restarted daemon takes the answers back from results/ (and carries them over commits
    // made while it was away); a damaged file is not trusted, and answers stay exact.
    let cache = repo.ev_dir().join("results/evd-git-answers.json");
    w.stop_daemon();
    assert!(cache.is_file(), "answers kept for the next start");
    commit("a.txt", "3\n", "while evd was away");
    assert!(rows(&w).starts_with("green\t"));
    w.stop_daemon();
    let text = std::fs::read_to_string(&cache).expect("cache");
    std::fs::write(&cache, text.replace("true", "false")).expect("damage");
    commit(
        "deps.txt",
        "valkey\n",
        "touch the trigger while evd was away",
    );
    assert!(rows(&w).starts_with("stale\t"));
}

/// `dirty` follows directory and glob triggers live too, including a file tracked after the
/// watches were made, in a directory made after them.
#[test]
fn dirty_follows_directory_and_glob_triggers_live() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let config = repo.ev_dir().join("config");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, text.replace("\"live-origin\"", "\"none\"")).expect("config");
    std::fs::create_dir_all(repo.path().join("db")).expect("mkdir");
    std::fs::write(repo.path().join("db/schema.sql"), "create\n").expect("write");
    std::fs::write(repo.path().join("api.proto"), "service\n").expect("write");
    git(&repo, &["add", "db", "api.proto"]);
    git(&repo, &["commit", "-q", "-m", "files"]);
    let head = repo.head();
    let mut ids = Vec::new();
    for (decision, trigger, selector) in [
        ("the schema", "db", "true"),
        ("the protos", "*.proto", "true "),
    ] {
        let r = w
            .evctl(
                repo.path(),
                &[
                    "decide",
                    decision,
                    "--assume",
                    "holds",
                    "--assume-test",
                    selector,
                    "--counter-test",
                    "false",
                    "--on-platform",
                    "linux-ci",
                    "--triggered-by",
                    trigger,
                    "--surface",
                    "s",
                    "--verified-at-sha",
                    &head,
                    "--blame",
                    "b",
                ],
            )
            .ok();
        ids.push(r.stdout.split_whitespace().nth(1).expect("id").to_string());
        append_green(&repo, selector, &head, &now_rfc3339());
    }
    let r = w.evctl(repo.path(), &["check"]).ok();
    assert_eq!(r.stdout.matches("green\t").count(), 2, "{r:?}");
    let watch = Watch::start(&w, repo.path());
    std::thread::sleep(Duration::from_millis(300));
    let verdict_of = |id: &str| state_verdict(&repo, id);

    std::fs::write(repo.path().join("api.proto"), "service v2\n").expect("write");
    assert_eq!(watch.expect("dirty")["tick_id"], ids[1].as_str());
    std::fs::write(repo.path().join("api.proto"), "service\n").expect("revert");
    watch.expect("green");

    // A new directory under the guarded one, its file tracked, then edited.
    std::fs::create_dir_all(repo.path().join("db/migrations")).expect("mkdir");
    std::fs::write(repo.path().join("db/migrations/001.sql"), "alter\n").expect("write");
    git(&repo, &["add", "db/migrations/001.sql"]);
    assert_eq!(watch.expect("dirty")["tick_id"], ids[0].as_str());
    git(&repo, &["commit", "-q", "-m", "migration"]);
    watch.expect("stale");
    assert!(wait_until(Duration::from_secs(10), || verdict_of(&ids[0])
        .as_deref()
        == Some("stale")));
    // Re-run at the new HEAD: green; then an edit in the new directory reads dirty.
    append_green(&repo, "true", &repo.head(), &now_rfc3339());
    watch.expect("green");
    std::fs::write(repo.path().join("db/migrations/001.sql"), "alter table\n").expect("write");
    watch.expect("dirty");
    assert!(wait_until(Duration::from_secs(10), || verdict_of(&ids[0])
        .as_deref()
        == Some("dirty")));
}

/// A stopped daemon records the state files it wrote (`results/evd-state-written.txt`), and the
/// next one trusts that record only for files nobody touched meanwhile: an untouched file keeps
/// its bytes without being read, one edited while evd was away (even with its length and mtime
/// put back) is read and rewritten.
#[test]
fn state_files_touched_while_evd_was_away_are_read_again() {
    let w = World::new();
    let (repo, id) = setup(&w);
    append_receipt(&repo, &repo.head());
    assert!(hot_equals_cold(&w, &repo).starts_with("green\t"));
    let state = repo.ev_dir().join(format!("results/state/{id}.json"));
    let record = repo.ev_dir().join("results/evd-state-written.txt");
    w.stop_daemon();
    assert!(record.is_file(), "the state files are recorded at stop");
    let kept = std::fs::read_to_string(&state).expect("state file");

    // Untouched: the restarted daemon's check leaves it byte for byte (its computed_at too),
    // and the record is read once.
    assert!(hot_equals_cold(&w, &repo).starts_with("green\t"));
    assert_eq!(std::fs::read_to_string(&state).expect("state"), kept);
    assert!(!record.exists(), "a record is read once");

    // Edited while evd was away, length and mtime put back: read again and rewritten.
    w.stop_daemon();
    assert!(record.is_file());
    let mtime = std::fs::metadata(&state)
        .and_then(|m| m.modified())
        .expect("mtime");
    let edited = kept.replacen("\"green\"", "\"stale\"", 1);
    assert_ne!(edited, kept);
    std::fs::write(&state, &edited).expect("edit");
    std::fs::File::options()
        .write(true)
        .open(&state)
        .and_then(|f| f.set_modified(mtime))
        .expect("mtime back");
    assert!(hot_equals_cold(&w, &repo).starts_with("green\t"));
    assert_eq!(state_verdict(&repo, &id).as_deref(), Some("green"));
}

/// The `evidence` list of a tick's state file: `(path, span, state)` per citation.
fn state_evidence(repo: &Repo, id: &str) -> Vec<(String, String, String)> {
    let Ok(text) = std::fs::read_to_string(repo.ev_dir().join(format!("results/state/{id}.json")))
    else {
        return Vec::new();
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    v["evidence"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                    (s("path"), s("span"), s("state"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// An edit to a file a decision cites as evidence reaches the state file and `evctl watch`
/// with no command run (evd watches the cited files), and so does putting the bytes back;
/// an edit elsewhere in a cited file's directory, or outside the span, moves nothing.
#[test]
fn an_edit_to_cited_evidence_reaches_the_state_file_and_the_watch_without_a_command() {
    let w = World::new();
    let (repo, _) = setup(&w);
    let dir = repo.path().join("bench");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let original = "p50 3.1 ms\np99 4.8 ms\n";
    std::fs::write(dir.join("p99.txt"), original).expect("write");
    let marker = w
        .evctl(repo.path(), &["cite", "bench/p99.txt:2"])
        .ok()
        .stdout;
    let claim = format!("p99 stays under 5 ms {}", marker.trim_end());
    let out = w
        .evctl(
            repo.path(),
            &[
                "decide",
                "keep the queue shallow",
                "--assume",
                &claim,
                "--blame",
                "b",
            ],
        )
        .ok();
    let id = out
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("id")
        .to_string();
    w.evctl(repo.path(), &["check"]).ok();
    let span = "11-22".to_string();
    let holds = vec![(
        "bench/p99.txt".to_string(),
        span.clone(),
        "holds".to_string(),
    )];
    assert_eq!(state_evidence(&repo, &id), holds);

    let watch = Watch::start(&w, repo.path());
    // A subscriber is only told what changes after it subscribed.
    std::thread::sleep(Duration::from_millis(300));
    // Neighbours of the cited file, and the cited file outside its span, change nothing.
    std::fs::write(dir.join("other.txt"), "x").expect("write");
    std::fs::write(dir.join("p99.txt"), format!("{original}p999 9 ms\n")).expect("write");
    // The cited line changes.
    std::fs::write(dir.join("p99.txt"), "p50 3.1 ms\np99 5.9 ms\n").expect("write");
    let v = watch.expect("evidence:drifted");
    assert_eq!(v["tick_id"], id.as_str(), "{v}");
    assert_eq!(v["old"], "evidence:holds", "{v}");
    assert_eq!(v["ground_index"], 0, "{v}");
    let drifted = vec![(
        "bench/p99.txt".to_string(),
        span.clone(),
        "drifted".to_string(),
    )];
    assert!(
        wait_until(Duration::from_secs(10), || state_evidence(&repo, &id)
            == drifted),
        "state file: {:?}",
        state_evidence(&repo, &id)
    );
    // Put back: it holds again, pushed and written the same way.
    std::fs::write(dir.join("p99.txt"), original).expect("write");
    let v = watch.expect("evidence:holds");
    assert_eq!(v["old"], "evidence:drifted", "{v}");
    assert!(
        wait_until(Duration::from_secs(10), || state_evidence(&repo, &id)
            == holds),
        "state file: {:?}",
        state_evidence(&repo, &id)
    );
    // Removed: unreadable, said the same way.
    std::fs::remove_file(dir.join("p99.txt")).expect("rm");
    let v = watch.expect("evidence:unreadable");
    assert_eq!(v["tick_id"], id.as_str(), "{v}");
    drop(watch);
    // The journal has each change, as verdict_changed events.
    w.evctl(repo.path(), &["shutdown"]).ok();
    let ledger =
        std::fs::read_to_string(repo.ev_dir().join("results/ledger/events.jsonl")).expect("ledger");
    let changes: Vec<String> = ledger
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event_type"] == "verdict_changed" && e["payload"]["tick_id"] == id.as_str())
        .map(|e| e["payload"]["new"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        changes,
        ["evidence:drifted", "evidence:holds", "evidence:unreadable"],
        "{ledger}"
    );
    // Each time its evidence stopped holding, the decision resurfaced.
    let q = w
        .evctl(repo.path(), &["--json", "ledger", "query", "decisions"])
        .ok();
    let v: serde_json::Value = serde_json::from_str(&q.stdout).expect("json");
    let row = v["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["tick_id"] == id.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["resurfaced"], 2, "{v}");
    assert_eq!(row["label"], serde_json::Value::Null, "{v}");
}
