//! Crash safety: a daemon killed with SIGKILL in the middle of a stream of writes loses nothing
//! it acknowledged, leaves no torn file, and the next evctl brings a new one up.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use evd_e2e::{chain, pid_alive, wait_until, Repo, World};

#[test]
fn sigkill_during_a_stream_of_decides_loses_nothing_acknowledged() {
    let w = Arc::new(World::new());
    let repo = Arc::new(Repo::new());
    w.evctl(repo.path(), &["init"]).ok();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (w, repo, done) = (Arc::clone(&w), Arc::clone(&repo), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            let mut failed = 0;
            for i in 0..160 {
                let text = format!("streamed decision {i}");
                let r = w.evctl(repo.path(), &["decide", &text, "--blame", "stream"]);
                if r.code == 0 {
                    // "recorded <id> …", or, when a retry found the write already applied,
                    // a note naming its tick.
                    let id = r
                        .stdout
                        .split_whitespace()
                        .nth(1)
                        .map(str::to_string)
                        .or_else(|| {
                            r.stderr
                                .split("as tick ")
                                .nth(1)
                                .and_then(|t| t.get(..12))
                                .map(str::to_string)
                        })
                        .unwrap_or_else(|| panic!("no id in {r:?}"));
                    acked.push(id);
                } else {
                    // A write whose answer was lost is asked again; one that still fails says so.
                    assert!(r.stderr.contains("error: "), "{r:?}");
                    failed += 1;
                }
            }
            done.store(true, Ordering::SeqCst);
            (acked, failed)
        })
    };
    let mut kills = 0;
    let mut pids = HashSet::new();
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while kills < 3 && !done.load(Ordering::SeqCst) && std::time::Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(250));
        if let Some(pid) = w.daemon_pid() {
            pids.insert(pid);
            // SAFETY: signalling a process has no memory-safety preconditions.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            assert!(wait_until(Duration::from_secs(5), || !pid_alive(pid)));
            kills += 1;
        }
    }
    let (acked, failed) = writer.join().expect("writer");
    assert_eq!(kills, 3, "the daemon was killed mid-stream three times");
    assert!(
        failed <= kills,
        "at most the in-flight write per kill fails ({failed})"
    );
    assert!(acked.len() >= 160 - failed);

    // The next evctl brings a fresh daemon up and the chain is intact.
    let v = w.evctl(repo.path(), &["verify"]).ok();
    assert!(v.stdout.contains("chain intact"), "{v:?}");
    let now = w.daemon_pid().expect("a daemon answers again");
    assert!(!pids.contains(&now), "a new daemon, not a survivor");
    let linear = chain(&repo);
    let on_chain: HashSet<&String> = linear.iter().collect();
    for id in &acked {
        assert!(on_chain.contains(id), "acknowledged {id} is on the chain");
    }
    assert_eq!(
        repo.tick_files().len(),
        linear.len(),
        "no orphan or torn tick file"
    );
    let v = w.ev(repo.path(), &["verify"]).ok();
    assert!(v.stdout.contains("chain intact"));
}

#[test]
fn an_append_interrupted_before_head_moved_is_finished_on_open() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    w.evctl(repo.path(), &["decide", "first", "--blame", "b"])
        .ok();
    let second = w
        .evctl(repo.path(), &["decide", "second", "--blame", "b"])
        .ok();
    let second_id = second
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("id")
        .to_string();
    w.stop_daemon();
    // Simulate a crash after the tick was durable but before HEAD moved.
    let first_id = chain(&repo)[1].clone();
    std::fs::write(repo.ev_dir().join("HEAD"), &first_id).expect("rewind HEAD");

    let third = w
        .evctl(repo.path(), &["decide", "third", "--blame", "b"])
        .ok();
    let third_id = third
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("id")
        .to_string();
    let linear = chain(&repo);
    assert_eq!(
        linear,
        vec![third_id, second_id, first_id],
        "HEAD was rolled forward first"
    );
    assert_eq!(repo.tick_files().len(), 3);
}

#[test]
fn temp_files_never_enter_ticks_and_leftovers_are_cleaned() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    w.evctl(repo.path(), &["decide", "one", "--blame", "b"])
        .ok();
    w.stop_daemon();
    // A temp file a crashed writer left behind lives outside ticks/ and is swept on open.
    let tmp = repo.ev_dir().join("results/tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    std::fs::write(tmp.join(".evd-tmp-1-2-3"), "{\"torn").expect("write");
    w.evctl(repo.path(), &["decide", "two", "--blame", "b"])
        .ok();
    assert_eq!(std::fs::read_dir(&tmp).expect("ls").count(), 0);
    assert_eq!(repo.tick_files().len(), 2);
    // Upstream treats every file in ticks/ as a tick: we never leave anything else there.
    w.ev(repo.path(), &["list"]).ok();
}
