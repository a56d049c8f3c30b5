//! A daemon left running for months: what it holds stays bounded whatever clients do (inotify,
//! threads, open stores), and no answer is ever behind a write that was acknowledged before the
//! request was sent, watched or not.

use std::path::Path;
use std::time::Duration;

use evd_e2e::{wait_until, Repo, World};

/// inotify instances the process `pid` holds, counted from its descriptors.
fn inotify_instances(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy() == "anon_inode:inotify")
                })
                .count()
        })
        .unwrap_or(0)
}

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn decide_bound(w: &World, dir: &Path, text: &str) {
    w.evctl(
        dir,
        &[
            "decide",
            text,
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
            "me",
            "--verified-at-sha",
            "0123456789abcdef0123456789abcdef01234567",
        ],
    )
    .ok();
}

/// `init; check; decide …; check --exit-on-red` back to back: the decision is in the second
/// check's answer (not-run, exit 1), never "no test-bound grounds" with exit 0. A hook that
/// runs right after a decide must not let a red commit through.
fn decide_then_check_at_once(w: &World) {
    for round in 0..8 {
        let dir = tempfile::tempdir().expect("tempdir");
        // Half the rounds in a repository without a commit yet (no HEAD to key anything on).
        let git = std::process::Command::new("git")
            .current_dir(dir.path())
            .args(["init", "-q", "-b", "main"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .expect("git init");
        assert!(git.success());
        if round % 2 == 1 {
            let c = std::process::Command::new("git")
                .current_dir(dir.path())
                .args([
                    "-c",
                    "user.name=a",
                    "-c",
                    "user.email=a@b.invalid",
                    "commit",
                    "-q",
                    "--allow-empty",
                    "-m",
                    "one",
                ])
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .status()
                .expect("git commit");
            assert!(c.success());
        }
        w.evctl(dir.path(), &["init"]).ok();
        let first = w.evctl(dir.path(), &["check"]).ok();
        assert!(first.stdout.contains("no test-bound grounds"), "{first:?}");
        decide_bound(w, dir.path(), &format!("decision {round}"));
        let r = w.evctl(dir.path(), &["check", "--exit-on-red"]);
        assert_eq!(r.code, 1, "round {round}: {r:?}");
        assert!(r.stdout.starts_with("not-run\t"), "round {round}: {r:?}");
    }
}

#[test]
fn a_write_acknowledged_before_a_check_is_in_its_answer() {
    let w = World::new();
    decide_then_check_at_once(&w);
}

#[test]
fn a_write_acknowledged_before_a_check_is_in_its_answer_when_unwatched() {
    let w = World::with_env(&[("EVD_NO_WATCH", "1")]);
    decide_then_check_at_once(&w);
}

/// Forty stores in one daemon: one inotify instance, however many stores; each store a few
/// watch descriptors on it.
#[test]
fn forty_stores_share_one_inotify_instance() {
    let w = World::new();
    let repos: Vec<Repo> = (0..40).map(|_| Repo::new()).collect();
    for r in &repos {
        w.evctl(r.path(), &["init"]).ok();
        w.evctl(r.path(), &["check"]).ok();
    }
    let st = w.status().expect("status");
    let pid = u32::try_from(st["pid"].as_u64().expect("pid")).expect("pid");
    assert_eq!(st["stores"].as_array().map(Vec::len), Some(32), "{st}");
    assert!(inotify_instances(pid) <= 2, "{st}");
    assert_eq!(st["resources"]["inotify_instances"], 1, "{st}");
    for s in st["stores"].as_array().expect("stores") {
        assert_eq!(s["watch"], "watched", "{s}");
    }
    // Every store still answers, and correctly (the ones released reopen).
    for r in &repos {
        let out = w.evctl(r.path(), &["list"]).ok();
        assert_eq!(out.stdout, "no decisions yet\n", "{out:?}");
    }
}

/// Requests for directories without a store open nothing; the daemon's threads stay few.
#[test]
fn requests_for_directories_without_a_store_leave_nothing_behind() {
    let w = World::new();
    let anchor = Repo::new();
    w.evctl(anchor.path(), &["init"]).ok();
    let pid = w.daemon_pid().expect("daemon");
    let before = threads(pid);
    for _ in 0..200 {
        let d = tempfile::tempdir().expect("tempdir");
        let r = w.evctl(
            d.path(),
            &["--store", &d.path().display().to_string(), "list"],
        );
        assert_ne!(r.code, 0, "{r:?}");
        assert!(r.stderr.contains(".evolving"), "{r:?}");
    }
    let st = w.status().expect("status");
    assert_eq!(st["resources"]["open_stores"], 1, "{st}");
    let after = threads(pid);
    assert!(
        after <= before + 4,
        "threads grew from {before} to {after}: {st}"
    );
}

/// A store idle past the limit is released (its lock too) and opens again on the next request;
/// past the open-store cap, the least recently used one is released first.
#[test]
fn idle_stores_are_released_and_reopen_and_the_open_count_is_capped() {
    let w = World::with_env(&[("EVD_STORE_IDLE_SECS", "1"), ("EVD_MAX_OPEN_STORES", "3")]);
    let repos: Vec<Repo> = (0..6).map(|_| Repo::new()).collect();
    for (i, r) in repos.iter().enumerate() {
        w.evctl(r.path(), &["init"]).ok();
        decide_bound(&w, r.path(), &format!("d{i}"));
        let st = w.status().expect("status");
        assert!(st["stores"].as_array().map_or(0, Vec::len) <= 3, "{st}");
        // Released ones finish letting go at once.
        assert!(
            wait_until(Duration::from_secs(5), || w
                .status()
                .is_some_and(|s| s["resources"]["open_stores"].as_u64() <= Some(3))),
            "{:?}",
            w.status()
        );
    }
    // Idle: everything is released, locks included.
    assert!(
        wait_until(Duration::from_secs(10), || {
            w.status()
                .is_some_and(|s| s["resources"]["open_stores"] == 0)
        }),
        "{:?}",
        w.status()
    );
    for (i, r) in repos.iter().enumerate() {
        // Nobody holds the store any more: a write without the daemon takes the lock itself.
        let out = w.evctl_env(
            r.path(),
            &[("EVD_NO_DAEMON", "1")],
            &["decide", &format!("offline {i}"), "--blame", "me"],
        );
        assert_eq!(out.code, 0, "{out:?}");
    }
    // Reopened on demand, with everything that was written.
    for (i, r) in repos.iter().enumerate() {
        let out = w.evctl(r.path(), &["list"]).ok();
        assert!(out.stdout.contains(&format!("\"d{i}\"")), "{out:?}");
        decide_bound(&w, r.path(), &format!("again {i}"));
        let out = w.evctl(r.path(), &["list"]).ok();
        assert_eq!(out.stdout.lines().count(), 3, "{out:?}");
    }
}

/// A served repository renamed: the next request under its new path is served (the daemon does
/// not refuse its own store), and writes land there.
#[test]
fn a_served_repository_that_moves_is_followed() {
    let w = World::new();
    let parent = tempfile::tempdir().expect("tempdir");
    let repo = Repo::new();
    let old = parent.path().join("old");
    let new = parent.path().join("new");
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(repo.path())
        .arg(&old)
        .status()
        .expect("cp")
        .success();
    assert!(ok);
    w.evctl(&old, &["init"]).ok();
    decide_bound(&w, &old, "before the move");
    std::fs::rename(&old, &new).expect("rename");
    let out = w.evctl(&new, &["list"]).ok();
    assert!(out.stdout.contains("before the move"), "{out:?}");
    decide_bound(&w, &new, "after the move");
    let out = w.evctl(&new, &["list"]).ok();
    assert_eq!(out.stdout.lines().count(), 2, "{out:?}");
    let st = w.status().expect("status");
    let roots: Vec<&str> = st["stores"]
        .as_array()
        .expect("stores")
        .iter()
        .filter_map(|s| s["root"].as_str())
        .collect();
    let want = std::fs::canonicalize(&new).expect("canonical");
    assert_eq!(roots, vec![want.to_string_lossy().as_ref()], "{st}");
}

/// A daemon that is alive but does not answer (SIGSTOP) is named as such, with what to do —
/// never "not running", never "exited during startup", never advice about a variable that is
/// not set — and once it resumes, everything goes through it again.
#[test]
fn a_stopped_daemon_is_named_and_not_declared_dead() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    w.evctl(repo.path(), &["decide", "before", "--blame", "b"])
        .ok();
    let pid = w.daemon_pid().expect("daemon");
    // SAFETY: signalling a process has no memory-safety preconditions.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    struct Resume(u32);
    impl Drop for Resume {
        fn drop(&mut self) {
            // SAFETY: as above.
            unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
        }
    }
    let resume = Resume(pid);

    let st = w.evctl(repo.path(), &["status"]);
    assert_eq!(st.code, 1, "{st:?}");
    assert!(!st.stdout.contains("not running"), "{st:?}");
    assert!(
        st.stderr.contains(&format!("evd pid {pid}")) && st.stderr.contains("stopped"),
        "{st:?}"
    );

    let r = w.evctl(repo.path(), &["decide", "while stopped", "--blame", "b"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains(&format!("evd pid {pid}")), "{r:?}");
    assert!(!r.stderr.contains("exited during startup"), "{r:?}");
    assert!(!r.stderr.contains("EVD_NO_DAEMON"), "{r:?}");
    // Reads are still answered, in-process.
    let list = w.evctl(repo.path(), &["list"]).ok();
    assert_eq!(list.stdout.lines().count(), 1, "{list:?}");

    drop(resume);
    w.evctl(repo.path(), &["decide", "after", "--blame", "b"])
        .ok();
    assert_eq!(w.daemon_pid(), Some(pid), "the same daemon serves again");
    assert_eq!(
        w.evctl(repo.path(), &["list"]).ok().stdout.lines().count(),
        2
    );
}
