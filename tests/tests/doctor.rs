//! `evctl doctor [--fix]` on stores real git and real hands broke: a merge made without evctl's
//! merge driver (HEAD left with conflict markers, refused by every verb and by the gate, naming
//! the repair), and a store holding stray files, a misnamed tick, a damaged tick, a deleted
//! parent and a HEAD naming no tick. Without `--fix` nothing on disk changes; with it the store
//! verifies, every decision is back, nothing is deleted, and upstream ev 0.1.32 agrees.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use evd_e2e::{commit_all, decide_one, git, Repo, World};

fn repo(w: &World) -> Repo {
    let repo = Repo::new();
    let p = repo.path();
    w.evctl(p, &["init"]).ok();
    std::fs::write(p.join(".gitignore"), ".evolving/results/\n").expect("gitignore");
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "store"]);
    repo
}

/// Every name in `ticks/` with what it is, and HEAD's bytes: what a dry run must leave alone.
fn on_disk(p: &Path) -> (Vec<(String, String)>, Vec<u8>) {
    let mut names: Vec<(String, String)> = std::fs::read_dir(p.join(".evolving/ticks"))
        .expect("ticks/")
        .map(|e| {
            let e = e.expect("entry");
            let m = std::fs::symlink_metadata(e.path()).expect("stat");
            let bytes = if m.is_file() {
                std::fs::read(e.path()).expect("read")
            } else {
                Vec::new()
            };
            (
                e.file_name().to_string_lossy().into_owned(),
                format!("{:?}:{}", m.file_type(), String::from_utf8_lossy(&bytes)),
            )
        })
        .collect();
    names.sort();
    (
        names,
        std::fs::read(p.join(".evolving/HEAD")).expect("HEAD"),
    )
}

#[test]
fn a_head_a_merge_left_conflicted_is_refused_everywhere_and_doctor_fix_resolves_it() {
    let w = World::new();
    let repo = repo(&w);
    let p = repo.path();
    let base = decide_one(&w, p, "keep sqlite");
    commit_all(p, "base");
    git(p, &["checkout", "-q", "-b", "topic"]);
    let theirs = decide_one(&w, p, "shard the queue");
    commit_all(p, "topic decides");
    git(p, &["checkout", "-q", "main"]);
    let ours = decide_one(&w, p, "cache the index");
    commit_all(p, "main decides");
    // No merge driver registered: git stops on HEAD.
    let m = w.git(p, &["merge", "-q", "--no-edit", "topic"]);
    assert_ne!(m.code, 0, "{m:?}");
    let head = std::fs::read_to_string(p.join(".evolving/HEAD")).expect("HEAD");
    assert!(head.contains("<<<<<<<") && head.contains(&ours) && head.contains(&theirs));

    // Every verb refuses, naming the repair, and writes nothing.
    let ticks_before = repo.tick_files();
    for args in [
        vec!["list"],
        vec!["log"],
        vec!["check"],
        vec!["show", base.as_str()],
        vec!["brief"],
        vec!["verify"],
        vec!["decide", "x", "--assume", "y", "--blame", "b"],
    ] {
        let r = w.evctl(p, &args);
        assert_ne!(r.code, 0, "{args:?}: {r:?}");
        // `verify` reports it among its violations (stdout); the others refuse (stderr).
        let said = format!("{}{}", r.stdout, r.stderr);
        assert!(
            said.contains("conflict markers") && said.contains("`evctl doctor --fix`"),
            "{args:?}: {r:?}"
        );
        assert!(!said.contains("not a tick id"), "{args:?}: {r:?}");
    }
    assert_eq!(repo.tick_files(), ticks_before);

    // The gate blocks committing the markers, naming the same way out.
    w.evctl(p, &["hooks", "install"]).ok();
    git(p, &["add", "-A"]);
    let c = w.git(p, &["commit", "-q", "--no-edit"]);
    assert_ne!(c.code, 0, "the gate let a conflicted HEAD in: {c:?}");
    assert!(c.stderr.contains("evctl doctor --fix"), "{c:?}");

    // A dry run says what it would do and changes nothing.
    let before = on_disk(p);
    let d = w.evctl(p, &["doctor"]);
    assert_eq!(d.code, 1, "{d:?}");
    let kept = ours.as_str().max(theirs.as_str()).to_string();
    assert!(
        d.stdout.contains("✗ HEAD: holds git's conflict markers"),
        "{d:?}"
    );
    assert!(d.stdout.contains(&format!("--fix: set to {kept}")), "{d:?}");
    assert!(d.stderr.contains("nothing was written"), "{d:?}");
    assert_eq!(on_disk(p), before);

    let f = w.evctl(p, &["doctor", "--fix"]);
    assert_eq!(f.code, 0, "{f:?}");
    assert!(f.stdout.contains(&format!("fixed: set to {kept}")), "{f:?}");
    assert_eq!(repo.head_file(), kept);
    assert_eq!(w.evctl(p, &["verify"]).code, 0);
    let log = w.evctl(p, &["log"]).ok();
    for id in [&base, &ours, &theirs] {
        assert!(log.stdout.contains(id.as_str()), "log lacks {id}: {log:?}");
    }
    assert!(log.stdout.contains("fork"), "{log:?}");
    let again = w.evctl(p, &["doctor"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(
        again.stdout.starts_with("✓ nothing to repair: 3 tick(s)"),
        "{again:?}"
    );
    git(p, &["add", "-A"]);
    let c = w.git(p, &["commit", "-q", "--no-edit"]);
    assert_eq!(c.code, 0, "{c:?}");
    // The next decision builds on the HEAD kept.
    let next = decide_one(&w, p, "after the merge");
    let shown = w.evctl(p, &["show", next.as_str()]).ok();
    assert!(
        shown.stdout.contains(&format!("\"parent_id\": \"{kept}\"")),
        "{shown:?}"
    );
    let v = w.ev(p, &["verify"]);
    assert_eq!(v.code, 0, "upstream verify: {v:?}");
    let list = w.ev(p, &["list"]).ok();
    for d in [
        "keep sqlite",
        "shard the queue",
        "cache the index",
        "after the merge",
    ] {
        assert!(list.stdout.contains(d), "upstream list lacks {d}: {list:?}");
    }
}

#[test]
fn doctor_finds_strays_a_misnamed_and_a_damaged_tick_a_lost_parent_and_a_lost_head() {
    let w = World::new();
    let repo = repo(&w);
    let p = repo.path();
    let first = decide_one(&w, p, "keep sqlite");
    let second = decide_one(&w, p, "shard the queue");
    let third = decide_one(&w, p, "cache the index");
    commit_all(p, "three decisions");
    let ticks = p.join(".evolving/ticks");
    // What hands and tools leave: a merge tool's copy, an editor's backup of a tick (the tick
    // itself gone), a damaged tick, a parent deleted from the work tree, and things no tick is.
    std::fs::copy(ticks.join(&third), ticks.join(format!("{third}.orig"))).expect("orig");
    std::fs::rename(ticks.join(&second), ticks.join(format!("{second}~"))).expect("backup");
    std::fs::write(ticks.join(&third), "{\"decision\": \"edited by hand\"").expect("damage");
    std::fs::remove_file(ticks.join(&first)).expect("delete");
    std::fs::create_dir(ticks.join("notes")).expect("dir");
    std::fs::write(ticks.join(".DS_Store"), b"\0\0junk").expect("junk");
    std::os::unix::fs::symlink("/etc/passwd", ticks.join("passwd")).expect("symlink");
    let fifo = ticks.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    std::fs::write(p.join(".evolving/HEAD"), "0123456789ab").expect("HEAD");

    let before = on_disk(p);
    let d = w.evctl(p, &["doctor"]);
    assert_eq!(d.code, 1, "{d:?}");
    for (subject, says) in [
        (format!(".evolving/ticks/{third}.orig"), "a copy of tick"),
        (format!(".evolving/ticks/{second}~"), "under another name"),
        (format!(".evolving/ticks/{third}"), "is not a tick"),
        (".evolving/ticks/notes".to_string(), "a directory in ticks/"),
        (".evolving/ticks/.DS_Store".to_string(), "not a tick file"),
        (".evolving/ticks/passwd".to_string(), "a symlink in ticks/"),
        (".evolving/ticks/pipe".to_string(), "a FIFO in ticks/"),
        (
            format!(".evolving/ticks/{second}"),
            &format!("its parent {first} is missing"),
        ),
        ("HEAD".to_string(), "names 0123456789ab, but there is no"),
    ] {
        let line = format!("✗ {subject}: ");
        let found = d
            .stdout
            .lines()
            .find(|l| l.starts_with(&line))
            .unwrap_or_else(|| panic!("no finding for {subject}: {d:?}"));
        assert!(found.contains(says), "{found:?} should say {says:?}");
    }
    assert_eq!(on_disk(p), before, "a dry run changed the store");
    assert!(!p.join(".evolving/results/doctor").exists());

    let f = w.evctl(p, &["doctor", "--fix"]);
    assert_eq!(f.code, 0, "{f:?}");
    assert!(!f.stdout.contains("--fix:"), "{f:?}");
    assert_eq!(w.evctl(p, &["verify"]).code, 0);
    assert_eq!(repo.head_file(), third, "HEAD: the newest tip");
    let mut ids = repo.tick_files();
    ids.sort();
    let mut want = vec![first.clone(), second.clone(), third.clone()];
    want.sort();
    assert_eq!(ids, want);
    // The damaged tick came back from git exactly as committed.
    let committed = std::process::Command::new("git")
        .current_dir(p)
        .args(["show", &format!("HEAD:.evolving/ticks/{third}")])
        .output()
        .expect("git show");
    assert_eq!(
        std::fs::read(ticks.join(&third)).expect("third"),
        committed.stdout
    );
    // Nothing was deleted: every stray is in the doctor's directory, as it was.
    let moved = f
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("files taken out of ticks/ moved to "))
        .and_then(|l| l.split(" (").next())
        .unwrap_or_else(|| panic!("no moved-to line: {f:?}"));
    let moved = p.join(moved);
    assert!(moved.join("notes").is_dir());
    assert!(std::fs::symlink_metadata(moved.join("passwd"))
        .expect("link")
        .file_type()
        .is_symlink());
    assert!(std::fs::symlink_metadata(moved.join("pipe"))
        .expect("fifo")
        .file_type()
        .is_fifo());
    assert_eq!(
        std::fs::read(moved.join(".DS_Store")).expect("junk"),
        b"\0\0junk"
    );
    assert!(moved.join(format!("{third}.orig")).is_file());
    assert_eq!(
        std::fs::read_to_string(moved.join(&third)).expect("damaged copy"),
        "{\"decision\": \"edited by hand\""
    );
    let list = w.evctl(p, &["list"]).ok();
    for d in ["keep sqlite", "shard the queue", "cache the index"] {
        assert!(list.stdout.contains(d), "list lacks {d}: {list:?}");
    }
    let v = w.ev(p, &["verify"]);
    assert_eq!(v.code, 0, "upstream verify: {v:?}");
    let g = w.git(p, &["status", "--porcelain", ".evolving"]);
    assert_eq!(
        g.stdout.trim(),
        "",
        "the repaired store is the committed one: {g:?}"
    );
}

#[test]
fn a_parent_nothing_can_give_back_is_reported_and_left_in_place() {
    let w = World::new();
    let repo = repo(&w);
    let p = repo.path();
    let first = decide_one(&w, p, "keep sqlite");
    let second = decide_one(&w, p, "shard the queue");
    // Never committed: git has no copy of it.
    std::fs::remove_file(p.join(".evolving/ticks").join(&first)).expect("delete");
    let f = w.evctl(p, &["doctor", "--fix"]);
    assert_eq!(f.code, 1, "{f:?}");
    assert!(
        f.stdout.contains(&format!(
            "✗ .evolving/ticks/{second}: its parent {first} is missing from ticks/, and git holds no copy of it"
        )),
        "{f:?}"
    );
    assert!(
        f.stdout
            .contains("cannot be repaired without losing a decision"),
        "{f:?}"
    );
    assert_eq!(repo.tick_files(), vec![second.clone()]);
    assert_eq!(repo.head_file(), second);
}
