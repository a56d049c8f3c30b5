//! A crowd of idle or slow clients never locks the owner out: silent sockets, WebSockets that
//! never ask anything, and HTTP requests whose body trickles in a byte a second.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use evd_e2e::{wait_until, Repo, World};

/// Let this test process hold a few thousand sockets.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn slow_http(sock: &std::path::Path) -> Option<UnixStream> {
    let mut s = UnixStream::connect(sock).ok()?;
    s.write_all(
        b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
          Content-Length: 4000\r\n\r\n{",
    )
    .ok()?;
    Some(s)
}

#[test]
fn hundreds_of_idle_and_slow_connections_do_not_lock_the_owner_out() {
    raise_fd_limit();
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let sock = w.socket();

    let mut silent = Vec::new();
    let mut sockets = Vec::new();
    let mut slow = Vec::new();
    for _ in 0..200 {
        silent.push(UnixStream::connect(&sock).expect("connect"));
        if let Some(s) = evd_e2e::idle_websocket(&sock) {
            sockets.push(s);
        }
        if let Some(s) = slow_http(&sock) {
            slow.push(s);
        }
    }
    assert!(sockets.len() >= 100, "only {} WebSockets", sockets.len());
    // The slow ones keep trickling a byte a second while the owner works.
    let stop = Arc::new(AtomicBool::new(false));
    let trickle = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for s in &mut slow {
                    let _ = s.write_all(b" ");
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };

    // The owner is served, every time, during the crowd.
    for i in 0..5 {
        let r = w.evctl(repo.path(), &["list"]);
        assert_eq!(r.code, 0, "round {i}: {r:?}");
        assert_eq!(r.stdout, "no decisions yet\n");
    }
    let r = w.evctl(repo.path(), &["decide", "still served", "--blame", "me"]);
    assert_eq!(r.code, 0, "{r:?}");

    // The crowd is let go: incomplete requests and idle sockets are closed, however slowly
    // their bytes keep coming.
    assert!(
        wait_until(Duration::from_secs(15), || w
            .status()
            .is_some_and(|s| s["resources"]["connections"].as_u64() <= Some(2))),
        "{:?}",
        w.status()
    );
    stop.store(true, Ordering::Relaxed);
    let _ = trickle.join();
    // A closed silent socket reads end-of-file.
    let mut buf = [0u8; 16];
    let _ = silent[0].set_read_timeout(Some(Duration::from_secs(5)));
    assert_eq!(silent[0].read(&mut buf).ok(), Some(0));
    drop(sockets);
}

/// A subscriber is never closed for being quiet.
#[test]
fn a_quiet_subscriber_stays_connected() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let mut child = w
        .command(evd_e2e::bin("evctl"))
        .current_dir(repo.path())
        .args(["watch", "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("evctl watch");
    // Longer than the deadline for a request, with nothing said either way.
    std::thread::sleep(Duration::from_secs(7));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the watch ended"
    );
    let st = w.status().expect("status");
    assert!(st["resources"]["connections"].as_u64() >= Some(1), "{st}");
    let _ = child.kill();
    let _ = child.wait();
}
