//! Store integrity holes: a write never follows a symlinked `ticks/` or `results/` into another
//! directory, never builds on a HEAD that does not name a tick file, never writes into another
//! user's store; `verify` reports what a tick reader skips. Each case through the daemon and
//! in-process (`EVD_NO_DAEMON=1`).

use std::path::Path;

use evd_e2e::{Repo, Run, World};

const MODES: [&[(&str, &str)]; 2] = [&[], &[("EVD_NO_DAEMON", "1")]];

fn decide(w: &World, dir: &Path, env: &[(&str, &str)], text: &str) -> Run {
    w.evctl_env(dir, env, &["decide", text, "--blame", "b"])
}

fn store_with_one_decision(w: &World, env: &[(&str, &str)]) -> Repo {
    let repo = Repo::new();
    w.evctl_env(repo.path(), env, &["init"]).ok();
    decide(w, repo.path(), env, "first").ok();
    repo
}

/// Every file under `dir`, with its bytes, to show that nothing changed there.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).expect("lstat");
            if m.is_dir() {
                stack.push(p);
            } else if m.is_file() && !p.ends_with("evd.lock") {
                let bytes = std::fs::read(&p).expect("read");
                out.push((p.display().to_string(), bytes));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_symlinked_ticks_or_results_is_refused_by_every_write() {
    let w = World::new();
    let victim = store_with_one_decision(&w, &[]);
    let victim_ticks = snapshot(&victim.ev_dir().join("ticks"));
    for sub in ["ticks", "results"] {
        for env in MODES {
            // Made without the daemon, so nothing holds it while its directory is swapped.
            let repo = Repo::new();
            w.evctl_env(repo.path(), &[("EVD_NO_DAEMON", "1")], &["init"])
                .ok();
            let link = repo.ev_dir().join(sub);
            std::fs::remove_dir_all(&link).expect("rm");
            std::os::unix::fs::symlink(victim.ev_dir().join(sub), &link).expect("symlink");
            let r = decide(&w, repo.path(), env, "through the link");
            assert_eq!(r.code, 1, "{sub} {env:?}: {r:?}");
            assert!(
                r.stderr.contains(&format!(".evolving/{sub} is a symlink")),
                "{sub} {env:?}: {r:?}"
            );
            assert_eq!(
                snapshot(&victim.ev_dir().join("ticks")),
                victim_ticks,
                "{sub} {env:?}: the other store was written"
            );
        }
    }
    // The victim store itself is untouched and still serves.
    let list = w.evctl(victim.path(), &["list"]).ok();
    assert!(list.stdout.contains("first"), "{list:?}");
}

#[test]
fn a_head_that_names_no_tick_file_is_refused_by_writes_and_reported_by_verify() {
    let w = World::new();
    let cases: Vec<(&str, String)> = vec![
        ("garbage", "not a tick id at all\n".to_string()),
        ("a path", "../../etc/passwd".to_string()),
        ("100 KB", "a".repeat(100 * 1024)),
        ("a missing tick", "0123456789ab".to_string()),
    ];
    for (what, content) in cases {
        for env in MODES {
            let repo = store_with_one_decision(&w, env);
            std::fs::write(repo.ev_dir().join("HEAD"), &content).expect("write HEAD");
            let before = repo.tick_files();
            let r = decide(&w, repo.path(), env, "on a bad HEAD");
            assert_eq!(r.code, 1, "{what} {env:?}: {r:?}");
            assert!(
                r.stderr.contains("refusing to write") && r.stderr.contains("HEAD"),
                "{what} {env:?}: {r:?}"
            );
            assert_eq!(repo.tick_files(), before, "{what}: a tick was written");
            let v = w.evctl_env(repo.path(), env, &["verify"]);
            assert_ne!(v.code, 0, "{what} {env:?}: {v:?}");
            assert!(v.stdout.contains("HEAD: "), "{what} {env:?}: {v:?}");
        }
    }
}

#[test]
fn a_directory_in_place_of_the_head_tick_is_reported_and_not_built_on() {
    let w = World::new();
    for env in MODES {
        let repo = store_with_one_decision(&w, env);
        let head = repo.head_file().trim().to_string();
        let tick = repo.ev_dir().join("ticks").join(&head);
        std::fs::remove_file(&tick).expect("rm tick");
        std::fs::create_dir(&tick).expect("mkdir in its place");
        let v = w.evctl_env(repo.path(), env, &["verify"]);
        assert_ne!(v.code, 0, "{env:?}: {v:?}");
        assert!(
            v.stdout
                .contains(&format!("{head}: a directory in ticks/, not a tick file")),
            "{env:?}: {v:?}"
        );
        assert!(
            v.stdout.contains(&format!(
                "HEAD: HEAD names {head}, but ticks/{head} is a directory"
            )),
            "{env:?}: {v:?}"
        );
        let r = decide(&w, repo.path(), env, "on a directory");
        assert_eq!(r.code, 1, "{env:?}: {r:?}");
        assert!(r.stderr.contains("refusing to write"), "{env:?}: {r:?}");
    }
}

#[test]
fn a_store_of_another_user_is_refused_like_a_dubious_git_repository() {
    let w = World::new();
    let repo = store_with_one_decision(&w, &[]);
    w.stop_daemon();
    // Give the store to another uid (the tests run as root in CI; elsewhere chown is refused).
    let other = 65534;
    let chowned = std::process::Command::new("chown")
        .arg("-R")
        .arg(format!("{other}:{other}"))
        .arg(repo.ev_dir())
        .status()
        .is_ok_and(|s| s.success());
    if !chowned {
        eprintln!("skipped: cannot chown a store to another uid here");
        return;
    }
    let before = snapshot(&repo.ev_dir());
    for env in MODES {
        let r = decide(&w, repo.path(), env, "into someone else's store");
        assert_eq!(r.code, 1, "{env:?}: {r:?}");
        assert!(
            r.stderr.contains("dubious ownership") && r.stderr.contains("uid 65534"),
            "{env:?}: {r:?}"
        );
    }
    assert_eq!(snapshot(&repo.ev_dir()), before, "nothing was written");
    let mut owned_by_us = Vec::new();
    let mut stack = vec![repo.ev_dir()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let m = std::fs::symlink_metadata(e.path()).expect("lstat");
            if std::os::unix::fs::MetadataExt::uid(&m) != other {
                owned_by_us.push(e.path());
            }
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    assert!(owned_by_us.is_empty(), "files created: {owned_by_us:?}");
}
