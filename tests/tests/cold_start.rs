//! A restarted evd answers its first check from the images its predecessor kept (the parsed
//! ticks, the last plain evaluation) — with the very answer a cold evaluation gives — and never
//! trusts an image when anything it was made from changed: a tick edited in place with its
//! modification time put back, a receipt appended, a state file rewritten, HEAD moved; nor an
//! image that is damaged, or a FIFO, a directory or a symlink in its place. Each is checked
//! against a fresh in-process evaluation (`EVD_NO_DAEMON`, which keeps no image).

use std::path::Path;
use std::time::Duration;

use evd_e2e::{Repo, Run, World};

/// `args` through a daemon started for the occasion, and the same in-process: the answers
/// (exit code, stdout, stderr) must be the same.
fn same_as_cold(w: &World, dir: &Path, args: &[&str]) -> Run {
    let ours = w
        .evctl_within(dir, args, Duration::from_secs(60))
        .unwrap_or_else(|| panic!("evctl {args:?} did not answer within 60 s"));
    let cold = w.evctl_env(dir, &[("EVD_NO_DAEMON", "1")], args);
    assert_eq!(
        (ours.code, &ours.stdout, &ours.stderr),
        (cold.code, &cold.stdout, &cold.stderr),
        "evctl {args:?}: the restarted daemon differs from a cold evaluation"
    );
    ours
}

/// What the daemon took back from the images for this store (`status --json`).
fn warm_start(w: &World, dir: &Path) -> Option<serde_json::Value> {
    let status = w.status()?;
    let root = std::fs::canonicalize(dir).expect("canonical root");
    status["stores"]
        .as_array()?
        .iter()
        .find(|s| s["root"].as_str() == root.to_str())
        .and_then(|s| s.get("warm_start").cloned())
}

/// Check with a warm daemon, stop it (it keeps its images as it lets the store go), then
/// return the first check of a new daemon.
fn restart_and_check(w: &World, dir: &Path) -> Run {
    w.stop_daemon();
    same_as_cold(w, dir, &["check"])
}

/// An image is only made of files whose stamps can tell a later change apart (changed longer
/// ago than the filesystem's timestamp resolution: 50 ms where it keeps nanoseconds, 2 s
/// elsewhere): let what the test just wrote age past the longer of the two.
fn age() {
    std::thread::sleep(Duration::from_millis(2100));
}

fn images(repo: &Repo) -> [std::path::PathBuf; 2] {
    let results = repo.ev_dir().join("results");
    [
        results.join("evd-ticks.image"),
        results.join("evd-check.image"),
    ]
}

#[test]
fn the_first_check_after_a_restart_comes_from_the_images_and_equals_a_cold_one() {
    let w = World::new();
    let repo = Repo::new();
    evd_e2e::gen_store(repo.path(), 400, 5);
    age();
    let dir = repo.path();
    let warm = w.evctl(dir, &["check"]);
    assert!(warm.code == 0 || warm.code == 1, "{warm:?}");
    let again = w.evctl(dir, &["check"]);
    assert_eq!(again.stdout, warm.stdout);
    w.stop_daemon();
    for image in images(&repo) {
        assert!(image.is_file(), "{} kept at shutdown", image.display());
    }

    // Nothing changed: the answer of the image is the warm daemon's and a cold evaluation's.
    let first = same_as_cold(&w, dir, &["check"]);
    assert_eq!(first.stdout, warm.stdout);
    let taken = warm_start(&w, dir).expect("a warm start");
    assert_eq!(taken["evaluation"], true, "{taken}");
    assert!(taken["ticks"].as_u64().expect("ticks") >= 400, "{taken}");
    same_as_cold(&w, dir, &["list"]);
    same_as_cold(&w, dir, &["verify"]);
    // The ledger is as complete as after a cold check: every receipt that check rested on is
    // in it, and its record replays.
    w.stop_daemon();
    restart_and_check(&w, dir);
    assert_eq!(warm_start(&w, dir).expect("warm")["evaluation"], true);
    w.stop_daemon();
    for args in [["ledger", "verify"], ["ledger", "replay"]] {
        let r = w.evctl(dir, &args);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
    }

    // A tick edited in place, same size, its modification time put back: read again, and the
    // evaluation image is not trusted.
    let ticks = repo.ev_dir().join("ticks");
    let mut names = repo.tick_files();
    names.sort();
    let victim = ticks.join(&names[names.len() / 2]);
    let text = std::fs::read_to_string(&victim).expect("a tick");
    let mtime = std::fs::metadata(&victim)
        .and_then(|m| m.modified())
        .expect("mtime");
    w.stop_daemon();
    let at = text.find("\"decision\": \"").expect("a decision") + "\"decision\": \"".len();
    let mut edited = text.clone();
    let swapped = if edited.as_bytes()[at] == b'Q' {
        "R"
    } else {
        "Q"
    };
    edited.replace_range(at..at + 1, swapped);
    std::fs::write(&victim, &edited).expect("edit in place");
    std::fs::File::options()
        .write(true)
        .open(&victim)
        .and_then(|f| f.set_modified(mtime))
        .expect("mtime put back");
    same_as_cold(&w, dir, &["check"]);
    let taken = warm_start(&w, dir).expect("ticks still taken");
    assert_eq!(taken["evaluation"], false, "{taken}");
    same_as_cold(&w, dir, &["verify"]);
    same_as_cold(&w, dir, &["list"]);
    w.stop_daemon();
    std::fs::write(&victim, &text).expect("put back");
    age();

    // Settle on images of the store as it is again.
    same_as_cold(&w, dir, &["check"]);
    let settled = restart_and_check(&w, dir);
    assert_eq!(settled.stdout, warm.stdout);
    assert_eq!(warm_start(&w, dir).expect("warm")["evaluation"], true);

    // A receipt appended while no daemon runs: seen.
    let test = std::fs::read_dir(repo.ev_dir().join("results/receipts"))
        .expect("receipts")
        .flatten()
        .next()
        .expect("a receipts file")
        .path();
    let last = std::fs::read_to_string(&test).expect("receipts");
    let line = last
        .lines()
        .last()
        .expect("a receipt")
        .replace("green", "red");
    w.stop_daemon();
    let mut all = last.clone();
    all.push_str(&line);
    all.push('\n');
    std::fs::write(&test, all).expect("append a receipt");
    same_as_cold(&w, dir, &["check"]);
    assert_eq!(warm_start(&w, dir).expect("warm")["evaluation"], false);
    w.stop_daemon();
    std::fs::write(&test, &last).expect("put back");
    age();
    same_as_cold(&w, dir, &["check"]);
    restart_and_check(&w, dir);
    assert_eq!(warm_start(&w, dir).expect("warm")["evaluation"], true);

    // A state file rewritten by someone else (upstream `ev check` rewrites them all).
    let state = std::fs::read_dir(repo.ev_dir().join("results/state"))
        .expect("state")
        .flatten()
        .next()
        .expect("a state file")
        .path();
    w.stop_daemon();
    let body = std::fs::read_to_string(&state).expect("state file");
    std::fs::write(&state, body.replace("\"verdict\": \"", "\"verdict\": \"x")).expect("rewrite");
    // State files are what a check writes, never what it reads: the answer may come from the
    // images, and the file is put back shortly after it, off the request's path.
    same_as_cold(&w, dir, &["check"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let now = loop {
        let now = std::fs::read_to_string(&state).expect("state file");
        if !now.contains("\"verdict\": \"x") || std::time::Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(
        !now.contains("\"verdict\": \"x"),
        "the state file someone rewrote was not put back: {now}"
    );
    assert_eq!(
        strip_computed_at(&now),
        strip_computed_at(&body),
        "the state file was put back otherwise than it was"
    );
    same_as_cold(&w, dir, &["check"]);
}

/// A state file's text without its `computed_at` line (the one thing a rewrite changes).
fn strip_computed_at(text: &str) -> String {
    text.lines()
        .filter(|l| !l.contains("\"computed_at\""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_damaged_or_misplaced_image_is_never_used_and_never_hangs() {
    let w = World::new();
    let repo = Repo::new();
    evd_e2e::gen_store(repo.path(), 200, 9);
    age();
    let dir = repo.path();
    let warm = w.evctl(dir, &["check"]);
    w.stop_daemon();
    let [ticks_image, check_image] = images(&repo);
    let kept_ticks = std::fs::read(&ticks_image).expect("tick image");
    let kept_check = std::fs::read(&check_image).expect("check image");
    let put_back = || {
        for p in [&ticks_image, &check_image] {
            let _ = std::fs::remove_file(p);
            let _ = std::fs::remove_dir_all(p);
        }
        std::fs::write(&ticks_image, &kept_ticks).expect("put back");
        std::fs::write(&check_image, &kept_check).expect("put back");
    };

    // Flipped bytes, a cut, an empty file.
    for (which, kept) in [(&ticks_image, &kept_ticks), (&check_image, &kept_check)] {
        for damage in 0..3 {
            w.stop_daemon();
            put_back();
            let mut bytes = kept.clone();
            match damage {
                0 => {
                    let at = bytes.len() / 2;
                    bytes[at] ^= 0x20;
                }
                1 => bytes.truncate(bytes.len() * 2 / 3),
                _ => bytes.clear(),
            }
            std::fs::write(which, &bytes).expect("damage");
            let r = same_as_cold(&w, dir, &["check"]);
            assert_eq!(
                r.stdout,
                warm.stdout,
                "{} damaged ({damage})",
                which.display()
            );
            if which == &ticks_image {
                // Without its tick image the evaluation image is not trusted either.
                assert!(warm_start(&w, dir).is_none_or(|s| s["evaluation"] == false));
            } else {
                assert_eq!(warm_start(&w, dir).expect("ticks")["evaluation"], false);
            }
        }
    }

    // A FIFO, a directory and a symlink where an image belongs: refused at once.
    let outside = tempfile::tempdir().expect("outside");
    for (k, which) in [&ticks_image, &check_image].into_iter().enumerate() {
        for kind in ["fifo", "dir", "link"] {
            w.stop_daemon();
            put_back();
            std::fs::remove_file(which).expect("rm");
            match kind {
                "fifo" => {
                    let c = std::ffi::CString::new(which.to_str().expect("utf-8")).expect("path");
                    // SAFETY: a valid C string naming a path in our temp repository.
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                }
                "dir" => std::fs::create_dir(which).expect("dir"),
                _ => {
                    let target = outside.path().join(format!("image-{k}"));
                    std::fs::write(&target, if k == 0 { &kept_ticks } else { &kept_check })
                        .expect("outside copy");
                    std::os::unix::fs::symlink(&target, which).expect("link");
                }
            }
            let r = same_as_cold(&w, dir, &["check"]);
            assert_eq!(r.stdout, warm.stdout, "{kind} at {}", which.display());
            assert!(
                warm_start(&w, dir).is_none_or(|s| s["evaluation"] == false),
                "{kind} at {}",
                which.display()
            );
        }
    }
}

/// How many times the store's own thread (`evd-store`) of the daemon `pid` has gone to sleep
/// and been woken, summed over its threads of that name.
fn store_thread_wakeups(pid: u64) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the daemon's threads");
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "evd-store")
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
        .sum()
}

/// An idle daemon takes its images in as soon as they are written, and its store thread then
/// sleeps until the next request. It used to ask to look again "shortly" at a writing under
/// way, each time anew, so the look was never due: the images written in the background were
/// only put in place once a later request left idle work of its own (or at shutdown), and the
/// thread woke every 50 ms for ever.
#[test]
#[cfg(target_os = "linux")]
fn an_idle_daemon_sleeps_once_its_images_are_written() {
    let w = World::new();
    let repo = Repo::new();
    evd_e2e::gen_store(repo.path(), 300, 7);
    age();
    let dir = repo.path();
    let r = w.evctl(dir, &["check"]);
    assert!(r.code == 0 || r.code == 1, "{r:?}");
    let pid = w.status().expect("status")["pid"]
        .as_u64()
        .expect("status has a pid");
    // The images are written a few seconds after the evaluation (a burst is imaged once).
    let [ticks_image, check_image] = images(&repo);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !(ticks_image.is_file() && check_image.is_file()) {
        assert!(
            std::time::Instant::now() < deadline,
            "no images written within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Whatever else was left for a quiet moment (the journal, git's answers) is done by now.
    std::thread::sleep(Duration::from_secs(2));
    let before = store_thread_wakeups(pid);
    std::thread::sleep(Duration::from_secs(2));
    let woke = store_thread_wakeups(pid) - before;
    assert!(
        woke <= 2,
        "the idle store thread woke {woke} times in 2 s (it looked 40 times when it polled)"
    );
    // And it still answers at once.
    let again = w.evctl(dir, &["check"]);
    assert_eq!(again.stdout, r.stdout);
}
