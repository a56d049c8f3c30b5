//! `evctl reverify`: a decision whose guarded file changed in a commit reads stale; one command
//! runs its tests at HEAD and records it green again, as a child upstream `ev` reads green too.
//! Refused, with the reason, for a red test, a counter-test that passes, uncommitted changes
//! to a guarded path, and a platform with no run at HEAD. Through the real daemon, real git
//! commits and upstream ev 0.1.32 as the oracle.

use std::path::Path;

use evd_e2e::{code_repo, git, recorded_id, Repo, Run, World};

/// A store whose staleness reference is the local HEAD (what `evctl setup` writes).
fn local_head_repo(w: &World) -> Repo {
    let repo = code_repo(w, &[]);
    let config = repo.ev_dir().join("config");
    let text = std::fs::read_to_string(&config).expect("config");
    let text = if text.contains("staleness_ref") {
        text.lines()
            .map(|l| {
                if l.trim_start().starts_with("staleness_ref") {
                    "staleness_ref = \"local-head\"".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    } else {
        format!("staleness_ref = \"local-head\"\n{text}")
    };
    std::fs::write(&config, text).expect("write config");
    // What `evctl setup` advises: the per-machine results stay out of git (evd writes there
    // while git reads the tree).
    std::fs::write(repo.path().join(".gitignore"), ".evolving/results/\n").expect("gitignore");
    commit_all(repo.path(), "store");
    repo
}

fn commit_all(dir: &Path, message: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
}

/// Decide with one test ground guarding `db/schema.sql`; returns the tick id.
fn decide(w: &World, repo: &Repo, text: &str, test: &str, counter: &str, platform: &str) -> String {
    let r = w
        .evctl(
            repo.path(),
            &[
                "decide",
                text,
                "--assume",
                "the schema holds",
                "--assume-test",
                test,
                "--counter-test",
                counter,
                "--on-platform",
                platform,
                "--triggered-by",
                "db/schema.sql",
                "--surface",
                "db",
                "--blame",
                "Wang Yu",
            ],
        )
        .ok();
    recorded_id(&r.stdout)
}

/// The label `evctl check --json` gives the decision `id` (its first test ground).
fn label_of(w: &World, repo: &Repo, id: &str) -> Option<String> {
    let r = w.evctl(repo.path(), &["check", "--json"]);
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).expect("check --json");
    v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|row| row["tick_id"] == id)
        .and_then(|row| row["label"].as_str().map(str::to_string))
}

/// Upstream's own `ev check`, its row for `id`.
fn upstream_row(w: &World, repo: &Repo, id: &str) -> String {
    let r: Run = w.ev(repo.path(), &["check"]);
    r.stdout
        .lines()
        .find(|l| l.contains(id))
        .unwrap_or_default()
        .to_string()
}

fn change_schema(repo: &Repo, line: &str) {
    let path = repo.path().join("db/schema.sql");
    let mut text = std::fs::read_to_string(&path).expect("schema");
    text.push_str(line);
    text.push('\n');
    std::fs::write(&path, text).expect("write schema");
}

#[test]
fn a_decision_a_commit_made_stale_is_green_again_after_one_reverify() {
    let w = World::new();
    let repo = local_head_repo(&w);
    let id = decide(
        &w,
        &repo,
        "freeze the schema",
        "test -f db/schema.sql",
        "test -f db/nope.sql",
        "local",
    );
    w.evctl(repo.path(), &["check", "--run", "--platform", "local"])
        .ok();
    commit_all(repo.path(), "record decision");
    assert_eq!(label_of(&w, &repo, &id).as_deref(), Some("green"));

    change_schema(&repo, "alter table t add y int;");
    commit_all(repo.path(), "change schema");
    assert_eq!(label_of(&w, &repo, &id).as_deref(), Some("stale"));
    // A run alone does not help: the decision was verified at an older commit.
    w.evctl(repo.path(), &["check", "--run", "--platform", "local"])
        .ok();
    assert_eq!(label_of(&w, &repo, &id).as_deref(), Some("stale"));

    // A dry run says what it would do, and writes nothing.
    let ticks = repo.tick_files().len();
    let r = w.evctl(repo.path(), &["reverify", "--dry-run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains(&format!("would re-verify {id}")), "{r:?}");
    assert_eq!(repo.tick_files().len(), ticks);

    let r = w.evctl(repo.path(), &["reverify"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with(&format!("reverified {id} ")), "{r:?}");
    let child = repo.head_file();
    assert_ne!(child, id);
    assert!(
        r.stdout
            .contains(&format!("wrote child {child} (supersedes {id})")),
        "{r:?}"
    );
    assert_eq!(label_of(&w, &repo, &child).as_deref(), Some("green"));
    assert_eq!(label_of(&w, &repo, &id), None, "the stale one left check");
    // Upstream reads the very same store and agrees.
    let row = upstream_row(&w, &repo, &child);
    assert!(row.starts_with("green"), "upstream says: {row}");
    // The child is the same decision, verified at HEAD, and keeps its author.
    let shown = w.evctl(repo.path(), &["show", &child, "--json"]).ok();
    let tick: serde_json::Value = serde_json::from_str(shown.stdout.trim()).expect("show --json");
    let tick = if tick.get("tick").is_some() {
        tick["tick"].clone()
    } else {
        tick
    };
    assert_eq!(tick["decision"], "freeze the schema");
    assert_eq!(tick["supersedes"], id.as_str());
    assert_eq!(tick["blame"], "Wang Yu");
    assert_eq!(
        tick["grounds"][0]["check"]["verified_at_sha"],
        repo.head().as_str()
    );
    // Nothing left to do: a second run says so.
    let r = w.evctl(repo.path(), &["reverify"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("nothing to re-verify"), "{r:?}");
}

#[test]
fn reverify_refuses_with_the_reason_and_writes_nothing() {
    let w = World::new();
    let repo = local_head_repo(&w);
    let id = decide(
        &w,
        &repo,
        "freeze the schema",
        "grep -q 'create table' db/schema.sql",
        "grep -q 'no such text' db/schema.sql",
        "local",
    );
    let vacuous = decide(
        &w,
        &repo,
        "keep the table",
        "test -f db/schema.sql",
        "true",
        "local",
    );
    let ci = decide(
        &w,
        &repo,
        "schema checked in CI",
        "test -f db/schema.sql",
        "test -f db/nope.sql",
        "linux-ci",
    );
    w.evctl(repo.path(), &["check", "--run", "--platform", "local"])
        .ok();
    commit_all(repo.path(), "record decisions");
    change_schema(&repo, "-- a comment");
    commit_all(repo.path(), "touch the schema");
    let ticks = repo.tick_files().len();

    // Uncommitted changes to a guarded path: refused for every decision guarding it.
    change_schema(&repo, "-- not committed");
    let r = w.evctl(repo.path(), &["reverify", &id]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("guarded paths have uncommitted changes (db/schema.sql)"),
        "{r:?}"
    );
    assert_eq!(repo.tick_files().len(), ticks);
    git(repo.path(), &["checkout", "--", "db/schema.sql"]);

    // A counter-test that passes proves nothing.
    let r = w.evctl(repo.path(), &["reverify", &vacuous]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("counter-test \"true\" passes at HEAD on local"),
        "{r:?}"
    );
    // Another platform's run is not made here.
    let r = w.evctl(repo.path(), &["reverify", &ci]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("no run at HEAD for \"test -f db/schema.sql\" on linux-ci"),
        "{r:?}"
    );
    assert!(
        r.stderr.contains("evctl check --run --platform linux-ci"),
        "{r:?}"
    );
    assert_eq!(repo.tick_files().len(), ticks);

    // A red test: the schema no longer says what the test looks for.
    std::fs::write(repo.path().join("db/schema.sql"), "drop table t;\n").expect("write");
    commit_all(repo.path(), "drop the table");
    let r = w.evctl(repo.path(), &["reverify", &id]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "{id} \"freeze the schema\" not re-verified: test \"grep -q 'create table' db/schema.sql\" is red at HEAD on local"
        )),
        "{r:?}"
    );
    assert_eq!(repo.tick_files().len(), ticks);

    // Unknown ids are refused by name; --json carries every outcome.
    let r = w.evctl(repo.path(), &["reverify", "0123456789ab"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("no such tick: 0123456789ab"), "{r:?}");
    let r = w.evctl(repo.path(), &["reverify", "--json", &ci, &vacuous]);
    assert_eq!(r.code, 1, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).expect("json");
    let statuses: Vec<&str> = v["outcomes"]
        .as_array()
        .expect("outcomes")
        .iter()
        .map(|o| o["status"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(statuses, ["needs-run", "refused"], "{v}");
    assert_eq!(v["head"], repo.head().as_str());
}

/// The loop the product exists for, through real `git commit` with the gate `evctl setup`
/// installs: record a test-bound decision, commit; change what it guards, commit; follow the
/// gate's advice literally; commit again. And an unrelated commit right after a new decision
/// that has never run goes through, its state named in one line.
#[test]
fn the_everyday_loop_never_traps_a_commit() {
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    std::fs::write(p.join("schema.sql"), "create table t(x int);\n").expect("write");
    commit_all(p, "schema");
    let r = w.evctl(p, &["setup"]).ok();
    // Its advice, followed: the per-machine results stay out of git.
    assert!(
        r.stdout.contains("add `.evolving/results/` to .gitignore"),
        "{r:?}"
    );
    std::fs::write(p.join(".gitignore"), ".evolving/results/\n").expect("gitignore");
    let config = std::fs::read_to_string(repo.ev_dir().join("config")).expect("config");
    assert!(
        config.contains("staleness_ref = \"local-head\""),
        "{config}"
    );
    let id = w
        .evctl(
            p,
            &[
                "decide",
                "freeze the schema",
                "--assume",
                "schema is frozen",
                "--assume-test",
                "test -f schema.sql",
                "--counter-test",
                "test -f nope",
                "--on-platform",
                "local",
                "--triggered-by",
                "schema.sql",
                "--surface",
                "db",
                "--blame",
                "Wang Yu",
            ],
        )
        .ok()
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("id")
        .to_string();
    w.evctl(p, &["check", "--run", "--platform", "local"]).ok();
    git(p, &["add", "-A"]);
    let r = w.git(p, &["commit", "-q", "-m", "record decision"]);
    assert_eq!(r.code, 0, "{r:?}");

    // A commit touching what the decision guards goes through, and says what comes next.
    let mut schema = std::fs::read_to_string(p.join("schema.sql")).expect("schema");
    schema.push_str("-- 2\n");
    std::fs::write(p.join("schema.sql"), &schema).expect("write");
    let r = w.git(p, &["commit", "-q", "-am", "change schema"]);
    assert_eq!(r.code, 0, "{r:?}");
    let advice = format!("then `evctl reverify {id}`");
    assert!(r.stderr.contains(&advice), "{r:?}");
    assert_eq!(label_of(&w, &repo, &id).as_deref(), Some("stale"));

    // The next, unrelated commit is not held hostage by that stale decision: it is named, with
    // the one command that gets it back, and the commit goes through.
    std::fs::write(p.join("other.txt"), "y\n").expect("write");
    git(p, &["add", "other.txt"]);
    let r = w.git(p, &["commit", "-q", "-m", "unrelated"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains(&format!("`evctl reverify {id}`")),
        "the way out is named: {r:?}"
    );
    assert!(
        !r.stderr.contains("behind live origin"),
        "the reason names the reference used: {r:?}"
    );

    // The advice, followed literally, gets it green, and commits touching the schema pass.
    let r = w.evctl(p, &["reverify", &id]);
    assert_eq!(r.code, 0, "{r:?}");
    let child = repo.head_file();
    assert_eq!(label_of(&w, &repo, &child).as_deref(), Some("green"));
    git(p, &["add", "-A"]);
    let r = w.git(p, &["commit", "-q", "-m", "reverified"]);
    assert_eq!((r.code, r.stderr.trim()), (0, ""), "{r:?}");

    // Skipping the re-verification after a change, then changing the file again: that commit
    // is blocked, and its one command sets the change aside (re-verifying refuses to run the
    // tests against it), re-verifies, and puts it back staged; followed literally, the commit
    // then goes through.
    schema.push_str("-- 3\n");
    std::fs::write(p.join("schema.sql"), &schema).expect("write");
    let r = w.git(p, &["commit", "-q", "-am", "change schema again"]);
    assert_eq!(r.code, 0, "{r:?}");
    schema.push_str("-- 4\n");
    std::fs::write(p.join("schema.sql"), &schema).expect("write");
    git(p, &["add", "schema.sql"]);
    let r = w.git(p, &["commit", "-q", "-m", "and again"]);
    assert_eq!(r.code, 1, "blocked while stale: {r:?}");
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("commit blocked: it changes schema.sql"))
        .unwrap_or_else(|| panic!("{r:?}"));
    let command = line
        .rsplit('`')
        .nth(1)
        .unwrap_or_else(|| panic!("a command in backquotes: {line}"));
    assert!(
        command.starts_with("git stash push -m evctl-reverify-")
            && command.contains(" -- :/schema.sql && evctl reverify ")
            && command.ends_with(" && git stash pop --index"),
        "{line}"
    );
    // Someone's own stash, older: the command must never take it.
    std::fs::write(p.join("other.txt"), "mine\n").expect("write");
    git(p, &["stash", "push", "-q", "-m", "mine", "--", "other.txt"]);
    let stale = repo.head_file();
    // The command as a user pastes it into a shell where evctl is on PATH.
    let paste = || {
        w.command("sh")
            .current_dir(p)
            .env("PATH", evd_e2e::path_with_evctl())
            .args(["-c", command])
            .output()
            .expect("sh")
    };
    let ran = paste();
    assert!(ran.status.success(), "{command}: {ran:?}");
    assert_ne!(repo.head_file(), stale, "re-verified: a child tick");
    assert!(
        std::fs::read_to_string(p.join("schema.sql"))
            .expect("schema")
            .ends_with("-- 4\n"),
        "the change is back"
    );
    let r = w.git(p, &["commit", "-q", "-m", "and again, after the way out"]);
    assert_eq!(
        r.code, 0,
        "the change was put back staged and now commits: {r:?}"
    );
    // Run again with nothing to set aside: the older stash stays where it was.
    paste();
    let stashes = w.git(p, &["stash", "list", "--format=%s"]).stdout;
    assert!(
        stashes.lines().count() == 1 && stashes.trim_end().ends_with(": mine"),
        "only the user's own stash is left, untouched: {stashes}"
    );
    git(p, &["stash", "pop", "-q"]);
    assert_eq!(
        std::fs::read_to_string(p.join("other.txt")).expect("other"),
        "mine\n"
    );
    git(p, &["checkout", "--", "other.txt"]);
    // The refusal that names the same way out, for whoever runs reverify by hand.
    schema.push_str("-- 5\n");
    std::fs::write(p.join("schema.sql"), &schema).expect("write");
    let head = repo.head_file();
    let r = w.evctl(p, &["reverify", &head]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "`git stash push -m evctl-reverify-{head} -- schema.sql && evctl reverify {head} && git stash list -1 --format=%s | grep -q evctl-reverify-{head} && git stash pop --index`"
        )),
        "{r:?}"
    );
    git(p, &["checkout", "--", "schema.sql"]);
    let r = w.evctl(p, &["reverify", &head]);
    assert_eq!(r.code, 0, "{r:?}");
    git(p, &["add", "-A"]);
    let r = w.git(p, &["commit", "-q", "-m", "reverified again"]);
    assert_eq!(r.code, 0, "{r:?}");

    // A new decision bound to a test that never ran does not block a commit of other files.
    w.evctl(
        p,
        &[
            "decide",
            "keep the readme short",
            "--assume",
            "short readme",
            "--assume-test",
            "test $(wc -l < README) -lt 50",
            "--counter-test",
            "test $(wc -l < README) -ge 50",
            "--on-platform",
            "local",
            "--triggered-by",
            "README",
            "--surface",
            "docs",
            "--blame",
            "Wang Yu",
        ],
    )
    .ok();
    std::fs::write(p.join("other.txt"), "z\n").expect("write");
    git(p, &["add", "-A"]);
    let r = w.git(p, &["commit", "-q", "-m", "after a new decision"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("not-run"), "named, not blocking: {r:?}");
    assert!(r.stderr.contains("`evctl check --run`"), "{r:?}");

    // A failing test still blocks, whatever the commit changes.
    std::fs::write(p.join("README"), "x\n".repeat(60)).expect("write");
    w.evctl(p, &["check", "--run", "--platform", "local"]).ok();
    std::fs::write(p.join("other.txt"), "w\n").expect("write");
    git(p, &["add", "other.txt"]);
    let r = w.git(p, &["commit", "-q", "-m", "while red"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("evctl: commit blocked: 1 bound test is failing:"),
        "{r:?}"
    );
}
