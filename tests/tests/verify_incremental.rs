//! A repeated `verify` re-audits only what changed since the last audit, and is never stale:
//! a tick file edited in place (even keeping its size), a new file, a removed file, a directory
//! dropped into `ticks/` and a moved HEAD are all reported by the very next `verify`, exactly
//! as a fresh audit (in-process, nothing remembered) and upstream `ev` report them. Watched by
//! inotify, and unwatched (`EVD_NO_WATCH`, where every file is stat-validated).

use std::path::Path;

use evd_e2e::{Repo, Run, World};

/// `verify --json` through the daemon: (files, reaudited, violations).
fn verify_json(w: &World, dir: &Path) -> (u64, u64, Vec<String>) {
    let r = w.evctl(dir, &["--json", "verify"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("verify --json is JSON ({e}): {r:?}"));
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    let violations = v["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|x| x.as_str().expect("a string").to_string())
        .collect();
    (n("files"), n("reaudited"), violations)
}

fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort_unstable();
    v
}

/// The daemon's plain `verify` is the one a fresh in-process audit gives, byte for byte, and
/// (when `upstream`) the one upstream gives, as line sets (upstream's order is not meaningful).
fn same_as_fresh(w: &World, dir: &Path, upstream: bool) -> Run {
    let ours = w.evctl(dir, &["verify"]);
    let fresh = w.evctl_env(dir, &[("EVD_NO_DAEMON", "1")], &["verify"]);
    assert_eq!(
        (ours.code, &ours.stdout, &ours.stderr),
        (fresh.code, &fresh.stdout, &fresh.stderr),
        "the daemon's verify differs from a fresh audit"
    );
    if upstream {
        let theirs = w.ev(dir, &["verify"]);
        assert_eq!(ours.code, theirs.code, "ours: {ours:?}\ntheirs: {theirs:?}");
        assert_eq!(sorted_lines(&ours.stdout), sorted_lines(&theirs.stdout));
        assert_eq!(sorted_lines(&ours.stderr), sorted_lines(&theirs.stderr));
    }
    ours
}

fn ticks_in_order(repo: &Repo) -> Vec<String> {
    let mut names = repo.tick_files();
    names.sort();
    names
}

/// `watched`: the daemon watches `ticks/`, so how many files it reads again is exact (unwatched,
/// a file modified in the last two seconds is read again on every call, to be safe).
fn scenario(w: &World, watched: bool) {
    let repo = Repo::new();
    evd_e2e::gen_store(repo.path(), 300, 11);
    let dir = repo.path();
    let ticks = repo.ev_dir().join("ticks");

    // Cold, then repeated: nothing is read again.
    same_as_fresh(w, dir, true);
    let (files, _, clean) = verify_json(w, dir);
    let (again, reaudited, same) = verify_json(w, dir);
    assert_eq!(again, files);
    assert!(!watched || reaudited == 0, "nothing changed: {reaudited}");
    assert_eq!(same, clean);

    // A tick in the middle edited in place, keeping its size: re-audited, reported.
    let names = ticks_in_order(&repo);
    let middle = ticks.join(&names[names.len() / 2]);
    let text = std::fs::read_to_string(&middle).expect("read a tick");
    let at = text.find("\"blame\": \"").expect("a blame") + "\"blame\": \"".len();
    let mut edited = text.clone();
    let first = edited.as_bytes()[at];
    let swapped = if first == b'Z' { "Y" } else { "Z" };
    edited.replace_range(at..at + 1, swapped);
    assert_eq!(edited.len(), text.len());
    std::fs::write(&middle, &edited).expect("edit in place");
    let (_, reaudited, _) = verify_json(w, dir);
    assert!(reaudited >= 1, "the edited file is read again");
    assert!(
        !watched || reaudited == 1,
        "only the edited file: {reaudited}"
    );
    same_as_fresh(w, dir, true);
    // The blame is bookkeeping, not payload: put the payload itself out of step instead.
    let tampered = text.replacen("\"decision\": \"", "\"decision\": \"X", 1);
    std::fs::write(&middle, &tampered).expect("tamper");
    let r = same_as_fresh(w, dir, true);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("id != hash(payload)"), "{r:?}");
    let (_, reaudited, _) = verify_json(w, dir);
    assert!(!watched || reaudited == 0, "and then reused: {reaudited}");
    // Put back: clean again.
    std::fs::write(&middle, &text).expect("restore");
    assert_eq!(same_as_fresh(w, dir, true).code, 0);

    // A new file: a copy of a tick under another name.
    let copy = ticks.join("0123456789ab");
    std::fs::copy(ticks.join(&names[0]), &copy).expect("copy");
    let (files_now, reaudited, v) = verify_json(w, dir);
    assert_eq!(files_now, files + 1, "{v:?}");
    assert!(
        reaudited >= 1 && (!watched || reaudited == 1),
        "{reaudited}"
    );
    assert!(v.iter().any(|x| x.starts_with("0123456789ab: ")), "{v:?}");
    same_as_fresh(w, dir, true);
    std::fs::remove_file(&copy).expect("rm copy");

    // A removed file: its children's parents no longer resolve.
    let victim = names
        .iter()
        .find(|n| {
            std::fs::read_to_string(ticks.join(n.as_str()))
                .is_ok_and(|_| names.iter().any(|m| parent_of(&ticks.join(m)) == **n))
        })
        .expect("a tick with a child")
        .clone();
    let saved = std::fs::read(ticks.join(&victim)).expect("read");
    std::fs::remove_file(ticks.join(&victim)).expect("rm");
    let (files_now, reaudited, v) = verify_json(w, dir);
    assert_eq!(files_now, files - 1, "{v:?}");
    assert!(!watched || reaudited == 0, "{reaudited}");
    assert!(
        v.iter()
            .any(|x| x.contains(&format!("parent_id {victim} does not resolve"))),
        "{v:?}"
    );
    same_as_fresh(w, dir, false);
    std::fs::write(ticks.join(&victim), &saved).expect("put back");
    let (_, reaudited, v) = verify_json(w, dir);
    assert!(
        reaudited >= 1 && (!watched || reaudited == 1),
        "{reaudited}"
    );
    assert_eq!(v, clean);

    // A directory in ticks/ (no tick reader sees it; verify does).
    std::fs::create_dir(ticks.join("stray")).expect("mkdir");
    let (_, _, v) = verify_json(w, dir);
    assert!(
        v.contains(&"stray: a directory in ticks/, not a tick file".to_string()),
        "{v:?}"
    );
    same_as_fresh(w, dir, false);
    std::fs::remove_dir(ticks.join("stray")).expect("rmdir");
    assert_eq!(verify_json(w, dir).2, clean);

    // HEAD moved to something that is not a tick: reported without any file re-audited.
    let head = repo.head_file();
    std::fs::write(repo.ev_dir().join("HEAD"), "ffffffffffff").expect("HEAD");
    let (_, reaudited, v) = verify_json(w, dir);
    assert!(!watched || reaudited == 0, "{reaudited}");
    assert!(
        v.contains(
            &"HEAD: HEAD names ffffffffffff, but there is no ticks/ffffffffffff (`evctl doctor --fix` repairs it)"
                .into()
        ),
        "{v:?}"
    );
    same_as_fresh(w, dir, false);
    std::fs::write(repo.ev_dir().join("HEAD"), head).expect("HEAD back");
    assert_eq!(verify_json(w, dir).2, clean);

    // A tolerated unknown key is a warning naming the config's schema_version: a new
    // schema_version is seen by the next verify, though no tick file changed.
    let with_key = text.replacen("{", "{\n  \"zz_extra\": 1,", 1);
    std::fs::write(&middle, &with_key).expect("an unknown key");
    let r = same_as_fresh(w, dir, true);
    assert!(r.stderr.contains("(schema_version 1)"), "{r:?}");
    let config = repo.ev_dir().join("config");
    let before = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        before.replace("schema_version = 1", "schema_version = 7"),
    )
    .expect("config");
    let r = same_as_fresh(w, dir, false);
    assert!(r.stderr.contains("(schema_version 7)"), "{r:?}");
    std::fs::write(&config, &before).expect("config back");
    std::fs::write(&middle, &text).expect("restore");
    assert_eq!(verify_json(w, dir).2, clean);

    // A file that is not JSON fails the whole store, as upstream's does; fixed, it is clean.
    std::fs::write(&middle, "{\"trunc").expect("break");
    let r = same_as_fresh(w, dir, true);
    assert_eq!(r.code, 1, "{r:?}");
    std::fs::write(&middle, &text).expect("restore");
    assert_eq!(same_as_fresh(w, dir, true).code, 0);
}

fn parent_of(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["parent_id"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn a_repeated_verify_reaudits_only_what_changed_and_is_never_stale() {
    scenario(&World::new(), true);
}

#[test]
fn unwatched_every_file_is_stat_validated_and_nothing_is_missed() {
    scenario(&World::with_env(&[("EVD_NO_WATCH", "1")]), false);
}
