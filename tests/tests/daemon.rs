//! The daemon's life cycle through the real binaries: one evd serving many stores, a private
//! socket, clean stops (RPC, SIGTERM, SIGINT), a stale socket after SIGKILL, one daemon per
//! runtime directory, one owner per store, replacing another build through the handshake, the
//! in-process paths (EVD_NO_DAEMON, no evd binary), socket activation, and `status`/`shutdown`
//! with nothing running.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use evd_e2e::{bin, pid_alive, wait_until, Repo, World};

/// A generous bound for things that should take milliseconds (a guard against hangs, not a
/// timing assertion).
const PATIENCE: Duration = Duration::from_secs(15);

fn status_json(w: &World) -> serde_json::Value {
    let r = w.evctl(w.home.path(), &["status", "--json"]).ok();
    serde_json::from_str(r.stdout.trim()).expect("status --json prints one JSON object")
}

fn status_pid(w: &World) -> u32 {
    let v = status_json(w);
    let pid = v["pid"].as_u64().expect("status has a pid");
    u32::try_from(pid).expect("pid fits u32")
}

/// Record one decision with an explicit blame; returns the new tick id.
fn decide(w: &World, repo: &Repo, text: &str) -> String {
    let r = w
        .evctl(
            repo.path(),
            &["decide", text, "--assume", "it holds", "--blame", "Tester"],
        )
        .ok();
    let id = r
        .stdout
        .strip_prefix("recorded ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected decide output: {:?}", r.stdout));
    id.to_string()
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .expect("canonicalize")
        .display()
        .to_string()
}

fn is_socket(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

/// Wait for `pid` to exit, failing the test if it does not within a generous bound.
fn expect_exit(pid: u32, what: &str) {
    assert!(
        wait_until(PATIENCE, || !pid_alive(pid)),
        "{what}: evd pid {pid} is still running"
    );
}

/// Wait for a child we started, failing (after killing it) if it does not exit.
fn wait_child(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let mut status = None;
    let exited = wait_until(PATIENCE, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what}: process {} did not exit", child.id());
    }
    status.expect("exit status")
}

/// Spawn, retrying while the kernel still reports a freshly written executable as busy (another
/// test thread may briefly hold a copy of its write descriptor across fork).
fn spawn_retrying(cmd: &mut Command) -> Child {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Ok(c) => return c,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("cannot spawn {cmd:?}: {e}"),
        }
    }
}

/// Every live (not zombie) evd process whose environment names this world's runtime directory.
fn evd_processes_of(w: &World) -> Vec<u32> {
    let needle = format!("XDG_RUNTIME_DIR={}", w.rt.path().display());
    let mut out = Vec::new();
    for ent in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let arg0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        let is_evd = Path::new(std::str::from_utf8(arg0).unwrap_or_default())
            .file_name()
            .is_some_and(|n| n == "evd");
        if !is_evd || !pid_alive(pid) {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

// 1 ------------------------------------------------------------------------------------------

#[test]
fn one_daemon_serves_two_stores_that_stay_independent() {
    let w = World::new();
    let a = Repo::new();
    let b = Repo::new();
    w.evctl(a.path(), &["init"]).ok();
    let a1 = decide(&w, &a, "alpha uses postgres");
    let pid = status_pid(&w);
    w.evctl(b.path(), &["init"]).ok();
    let b1 = decide(&w, &b, "beta uses sqlite");
    let a2 = decide(&w, &a, "alpha caches in redis");
    assert_eq!(status_pid(&w), pid, "the same daemon served both stores");

    let list_a = w.evctl(a.path(), &["list"]).ok().stdout;
    let list_b = w.evctl(b.path(), &["list"]).ok().stdout;
    assert!(list_a.contains(&a1) && list_a.contains(&a2), "{list_a}");
    assert!(list_a.contains("alpha uses postgres") && list_a.contains("alpha caches in redis"));
    assert!(
        !list_a.contains(&b1) && !list_a.contains("beta"),
        "{list_a}"
    );
    assert_eq!(list_b, format!("{b1}\tlive\t\"beta uses sqlite\"\n"));

    let log_a = w.evctl(a.path(), &["log"]).ok().stdout;
    let log_b = w.evctl(b.path(), &["log"]).ok().stdout;
    assert!(
        !log_a.contains("beta") && log_a.contains(&a1) && log_a.contains(&a2),
        "{log_a}"
    );
    assert!(!log_b.contains("alpha") && log_b.contains(&b1), "{log_b}");
    assert_eq!(a.tick_files().len(), 2);
    assert_eq!(b.tick_files(), vec![b1.clone()]);

    let v = status_json(&w);
    assert_eq!(v["pid"].as_u64(), Some(u64::from(pid)));
    let stores = v["stores"].as_array().expect("stores array");
    assert_eq!(stores.len(), 2, "{v}");
    let find = |root: &str| {
        stores
            .iter()
            .find(|s| s["root"] == root)
            .unwrap_or_else(|| panic!("store {root} missing from status: {v}"))
    };
    let sa = find(&canonical(a.path()));
    let sb = find(&canonical(b.path()));
    assert_eq!(sa["ticks"], 2, "{sa}");
    assert_eq!(sa["head"], a2.as_str());
    assert_eq!(sa["writes"], 2);
    assert_eq!(sb["ticks"], 1, "{sb}");
    assert_eq!(sb["head"], b1.as_str());
    assert_eq!(sb["writes"], 1);
}

// 2 ------------------------------------------------------------------------------------------

#[test]
fn the_socket_is_private_and_every_clean_stop_removes_it() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    w.evctl(repo.path(), &["list"]).ok();
    let sock = w.socket();
    let sock_mode = std::fs::symlink_metadata(&sock)
        .expect("socket exists while evd runs")
        .permissions()
        .mode();
    assert!(is_socket(&sock), "{} is a socket", sock.display());
    assert_eq!(
        sock_mode & 0o777,
        0o600,
        "socket mode {:o}",
        sock_mode & 0o777
    );
    let dir_mode = std::fs::symlink_metadata(w.rt_dir())
        .expect("runtime dir")
        .permissions()
        .mode();
    assert_eq!(
        dir_mode & 0o777,
        0o700,
        "runtime dir mode {:o}",
        dir_mode & 0o777
    );

    // `evctl shutdown`.
    let pid = status_pid(&w);
    let r = w.evctl(w.home.path(), &["shutdown"]).ok();
    assert_eq!(r.stdout, format!("stopped evd pid {pid}\n"));
    expect_exit(pid, "after evctl shutdown");
    assert!(!sock.exists(), "socket removed after evctl shutdown");

    // SIGTERM, then SIGINT.
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        w.evctl(repo.path(), &["list"]).ok();
        let pid = status_pid(&w);
        assert!(
            is_socket(&sock),
            "a new daemon bound the socket before {name}"
        );
        // SAFETY: sending a signal has no memory-safety preconditions.
        let rc = unsafe { libc::kill(pid as i32, sig) };
        assert_eq!(rc, 0, "kill({pid}, {name})");
        expect_exit(pid, name);
        assert!(!sock.exists(), "socket removed after {name}");
        let log = std::fs::read_to_string(w.rt_dir().join("evd.log")).expect("evd.log");
        assert!(log.contains(&format!("{name}: stopping")), "{log}");
        let r = w.evctl(w.home.path(), &["status"]);
        assert_eq!(r.code, 1, "nothing answers after {name}: {r:?}");
    }
}

// 3 ------------------------------------------------------------------------------------------

#[test]
fn a_stale_socket_left_by_a_killed_daemon_is_replaced() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let id = decide(&w, &repo, "keep the socket honest");
    let old = status_pid(&w);
    // SAFETY: sending a signal has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(old as i32, libc::SIGKILL) }, 0);
    expect_exit(old, "SIGKILL");
    assert!(
        is_socket(&w.socket()),
        "a SIGKILLed evd cannot remove its socket; the stale file must still be there"
    );

    let r = w.evctl(repo.path(), &["list"]).ok();
    assert_eq!(
        r.stdout,
        format!("{id}\tlive\t\"keep the socket honest\"\n")
    );
    let new = status_pid(&w);
    assert_ne!(new, old, "a new daemon answers");
    assert!(pid_alive(new));
    assert!(is_socket(&w.socket()));
    // The new daemon owns the store: a write goes through it.
    decide(&w, &repo, "and write after the restart");
    assert_eq!(repo.tick_files().len(), 2);
}

// 4 ------------------------------------------------------------------------------------------

#[test]
fn a_second_evd_in_the_same_runtime_dir_refuses_naming_the_holder() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    w.evctl(repo.path(), &["list"]).ok();
    let pid = status_pid(&w);

    let mut second = w
        .command(bin("evd"))
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a second evd");
    let status = wait_child(&mut second, "second evd");
    let mut stderr = String::new();
    std::io::Read::read_to_string(second.stderr.as_mut().expect("piped stderr"), &mut stderr)
        .expect("read stderr");
    assert!(
        !status.success(),
        "second evd must fail: {status:?}\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("pid {pid}")) && stderr.contains("another evd already serves"),
        "the refusal names the running daemon (pid {pid}): {stderr}"
    );
    // The first one is untouched.
    assert_eq!(status_pid(&w), pid);
    assert!(is_socket(&w.socket()));
    w.evctl(repo.path(), &["list"]).ok();
}

#[test]
fn six_clients_racing_to_start_a_daemon_make_exactly_one() {
    let w = Arc::new(World::new());
    let repo = Arc::new(Repo::new());
    // Make the store without a daemon, so the race below is the first start.
    w.evctl_env(repo.path(), &[("EVD_NO_DAEMON", "1")], &["init"])
        .ok();
    let id = {
        let r = w
            .evctl_env(
                repo.path(),
                &[("EVD_NO_DAEMON", "1")],
                &["decide", "race to start", "--assume", "a", "--blame", "b"],
            )
            .ok();
        r.stdout[9..21].to_string()
    };
    assert!(!w.socket().exists(), "no daemon yet");

    let n = 6;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (w, repo, barrier) = (Arc::clone(&w), Arc::clone(&repo), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut cmd = w.command(bin("evctl"));
                cmd.current_dir(repo.path())
                    .arg("list")
                    .env("EVCTL_DEBUG", "1");
                barrier.wait();
                cmd.output().expect("run evctl")
            })
        })
        .collect();
    for h in handles {
        let out = h.join().expect("client thread");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "evctl failed: {stdout}\n{stderr}");
        assert_eq!(stdout, format!("{id}\tlive\t\"race to start\"\n"));
        // EVCTL_DEBUG reports an in-process answer; every client must have reached the daemon.
        assert!(stderr.is_empty(), "client did not reach evd: {stderr}");
    }

    let pid = status_pid(&w);
    let holder: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(w.rt_dir().join("evd.lock")).expect("daemon lock file"),
    )
    .expect("daemon lock names its holder");
    assert_eq!(holder["pid"].as_u64(), Some(u64::from(pid)), "{holder}");
    assert_eq!(
        evd_processes_of(&w),
        vec![pid],
        "exactly one evd for this runtime dir"
    );
    let log = std::fs::read_to_string(w.rt_dir().join("evd.log")).expect("evd.log");
    assert_eq!(
        log.matches("evd ready").count(),
        1,
        "one daemon started:\n{log}"
    );
    assert!(!log.contains("another evd already serves"), "{log}");
}

// 5 ------------------------------------------------------------------------------------------

#[test]
fn a_store_is_owned_by_one_daemon_and_another_is_refused_until_it_stops() {
    let first = World::new();
    let second = World::new();
    let repo = Repo::new();
    first.evctl(repo.path(), &["init"]).ok();
    let id = decide(&first, &repo, "owned by the first daemon");
    let p1 = status_pid(&first);

    for args in [
        vec!["list"],
        vec!["decide", "x", "--assume", "y", "--blame", "z"],
    ] {
        let r = second.evctl(repo.path(), &args);
        assert_eq!(r.code, 1, "{args:?}: {r:?}");
        assert!(
            r.stderr.contains(&format!("held by evd pid {p1}")),
            "{args:?}: the refusal names the owner: {r:?}"
        );
    }
    let p2 = status_pid(&second);
    assert_ne!(p1, p2, "two worlds, two daemons");
    assert_eq!(
        repo.tick_files(),
        vec![id.clone()],
        "the refused decide wrote nothing"
    );

    first.stop_daemon();
    assert!(!pid_alive(p1));
    let r = second.evctl(repo.path(), &["list"]).ok();
    assert_eq!(
        r.stdout,
        format!("{id}\tlive\t\"owned by the first daemon\"\n")
    );
    decide(&second, &repo, "now owned by the second");
    assert_eq!(repo.tick_files().len(), 2);
    assert_eq!(status_pid(&second), p2, "the second daemon served it");
    let holder: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo.ev_dir().join("results/evd.lock")).expect("store lock"),
    )
    .expect("store lock names its holder");
    assert_eq!(holder["pid"].as_u64(), Some(u64::from(p2)));
}

// 6 ------------------------------------------------------------------------------------------

#[test]
fn a_daemon_of_another_build_is_replaced_through_the_handshake() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl_env(repo.path(), &[("EVD_NO_DAEMON", "1")], &["init"])
        .ok();

    let tmp = tempfile::tempdir().expect("tempdir");
    let old_bin: PathBuf = tmp.path().join("evd");
    std::fs::copy(bin("evd"), &old_bin).expect("copy evd");
    // Other bytes make another build (trailing bytes leave the ELF runnable).
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&old_bin)
            .expect("open the copy");
        f.write_all(b"\0another build").expect("append");
    }
    let old_log = tmp.path().join("old.log");
    let mut old = spawn_retrying(
        w.command(&old_bin)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&old_log).expect("old log")),
    );
    assert!(
        wait_until(PATIENCE, || w.daemon_pid().is_some()),
        "the copied evd came up"
    );
    let before = status_json(&w);
    assert_eq!(before["pid"].as_u64(), Some(u64::from(old.id())));
    let old_build = before["build_id"].as_str().expect("build_id").to_string();

    let r = w.evctl(repo.path(), &["list"]).ok();
    assert_eq!(r.stdout, "no decisions yet\n");

    let status = wait_child(&mut old, "the replaced evd");
    assert!(
        status.success(),
        "the old daemon stopped cleanly, not by a signal: {status:?}"
    );
    let log = std::fs::read_to_string(&old_log).expect("old log");
    assert!(
        log.contains("shutdown requested over RPC"),
        "it was asked to stop with ev.shutdown:\n{log}"
    );
    let after = status_json(&w);
    let new_pid = after["pid"].as_u64().expect("pid");
    assert_ne!(new_pid, u64::from(old.id()));
    assert_ne!(after["build_id"].as_str().expect("build_id"), old_build);
    // A second call keeps the replacement (same build now).
    w.evctl(repo.path(), &["list"]).ok();
    assert_eq!(status_json(&w)["pid"].as_u64(), Some(new_pid));
}

// 7 ------------------------------------------------------------------------------------------

#[test]
fn evd_no_daemon_answers_every_verb_in_process() {
    let w = World::new();
    let repo = Repo::new();
    let nd = [("EVD_NO_DAEMON", "1")];
    let r = w.evctl_env(repo.path(), &nd, &["init"]).ok();
    assert!(r.stdout.starts_with("created .evolving/"), "{r:?}");
    let r = w
        .evctl_env(
            repo.path(),
            &nd,
            &[
                "decide",
                "in process",
                "--assume",
                "no daemon",
                "--blame",
                "Tester",
            ],
        )
        .ok();
    let id = r.stdout[9..21].to_string();
    assert_eq!(repo.tick_files(), vec![id.clone()]);
    assert_eq!(repo.head_file(), id);
    let r = w.evctl_env(repo.path(), &nd, &["list"]).ok();
    assert_eq!(r.stdout, format!("{id}\tlive\t\"in process\"\n"));
    let r = w.evctl_env(repo.path(), &nd, &["log"]).ok();
    assert!(
        r.stdout.contains(&id) && r.stdout.contains("in process"),
        "{r:?}"
    );
    let r = w.evctl_env(repo.path(), &nd, &["show", &id]).ok();
    let file = std::fs::read_to_string(repo.ev_dir().join("ticks").join(&id)).expect("tick");
    assert_eq!(r.stdout, format!("{file}\n"));
    let r = w.evctl_env(repo.path(), &nd, &["verify"]).ok();
    assert!(r.stdout.contains("✓ chain intact"), "{r:?}");
    assert!(!w.socket().exists(), "no daemon was started");
    assert!(w.daemon_pid().is_none());

    // Now a daemon owns the store: in-process writes are refused, reads still answer.
    w.evctl(repo.path(), &["list"]).ok();
    let pid = status_pid(&w);
    let r = w.evctl_env(
        repo.path(),
        &nd,
        &["decide", "sneak past", "--assume", "a", "--blame", "b"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains(&format!("held by evd pid {pid}")),
        "{r:?}"
    );
    assert_eq!(repo.tick_files(), vec![id.clone()], "nothing written");
    let r = w.evctl_env(repo.path(), &nd, &["list"]).ok();
    assert_eq!(r.stdout, format!("{id}\tlive\t\"in process\"\n"));
}

// 8 ------------------------------------------------------------------------------------------

#[test]
fn reads_fall_back_in_process_when_no_daemon_can_start() {
    let w = World::new();
    let repo = Repo::new();
    let nd = [("EVD_NO_DAEMON", "1")];
    w.evctl_env(repo.path(), &nd, &["init"]).ok();
    let r = w
        .evctl_env(
            repo.path(),
            &nd,
            &["decide", "fallback works", "--assume", "a", "--blame", "b"],
        )
        .ok();
    let id = r.stdout[9..21].to_string();

    let missing = w.home.path().join("no-such-evd");
    let env = [("EVD_BIN", missing.to_str().expect("utf-8 path"))];
    // Each command completing at all is the no-hang check (the daemon start would fail fast).
    let r = w.evctl_env(repo.path(), &env, &["list"]).ok();
    assert_eq!(r.stdout, format!("{id}\tlive\t\"fallback works\"\n"));
    let r = w.evctl_env(repo.path(), &env, &["log"]).ok();
    assert!(
        r.stdout.contains(&id) && r.stdout.contains("fallback works"),
        "{r:?}"
    );
    let r = w.evctl_env(repo.path(), &env, &["verify"]).ok();
    assert!(r.stdout.contains("✓ chain intact"), "{r:?}");
    assert!(w.daemon_pid().is_none(), "no daemon runs");
    assert!(!w.socket().exists());
}

// 9 ------------------------------------------------------------------------------------------

const ACTIVATE: &str = r#"
import os, socket, sys
rt, evd = sys.argv[1], sys.argv[2]
d = os.path.join(rt, "evd")
os.makedirs(d, mode=0o700, exist_ok=True)
os.chmod(d, 0o700)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(os.path.join(d, "evd.sock"))
s.listen(64)
pid = os.fork()
if pid == 0:
    if s.fileno() != 3:
        os.dup2(s.fileno(), 3)
    os.set_inheritable(3, True)
    env = dict(os.environ)
    env["LISTEN_FDS"] = "1"
    env["LISTEN_PID"] = str(os.getpid())
    env["XDG_RUNTIME_DIR"] = rt
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    log = os.open(os.path.join(d, "evd.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 2)
    os.execve(evd, [evd, "serve"], env)
print(pid, flush=True)
"#;

#[test]
fn evd_serves_a_socket_passed_by_socket_activation() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl_env(repo.path(), &[("EVD_NO_DAEMON", "1")], &["init"])
        .ok();
    let id = {
        let r = w
            .evctl_env(
                repo.path(),
                &[("EVD_NO_DAEMON", "1")],
                &["decide", "activated", "--assume", "a", "--blame", "b"],
            )
            .ok();
        r.stdout[9..21].to_string()
    };
    let out = w
        .command("python3")
        .arg("-c")
        .arg(ACTIVATE)
        .arg(w.rt.path())
        .arg(bin("evd"))
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "activation script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let child: u32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the script prints the child pid");

    // The socket already accepts connections (the kernel queues them), so evctl must not start a
    // daemon of its own: it reaches the activated one.
    let r = w.evctl(repo.path(), &["list"]).ok();
    assert_eq!(r.stdout, format!("{id}\tlive\t\"activated\"\n"));
    assert_eq!(status_pid(&w), child, "the activated process answers");
    let log = std::fs::read_to_string(w.rt_dir().join("evd.log")).expect("evd.log");
    assert!(log.contains("using the socket systemd passed"), "{log}");
    w.stop_daemon();
    assert!(!pid_alive(child));
}

// 10 -----------------------------------------------------------------------------------------

#[test]
fn status_and_shutdown_with_no_daemon() {
    let w = World::new();
    let r = w.evctl(w.home.path(), &["status"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.starts_with("evd is not running"), "{r:?}");
    let r = w.evctl(w.home.path(), &["shutdown"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("evd is not running"), "{r:?}");
    assert!(!w.socket().exists(), "neither verb starts a daemon");
    assert!(evd_processes_of(&w).is_empty());
}

/// `status` names this host's id as a publisher: `EV_HOST_ID` when set and valid, refused with
/// the rule it breaks when not, else the host name made fit for a ref.
#[test]
fn status_names_the_host_id_and_where_it_came_from() {
    // A daemon of each world's own, started by a read of a store of its own.
    let started = |w: &World| {
        let repo = Repo::new();
        w.evctl(repo.path(), &["init"]).ok();
        w.evctl(repo.path(), &["list"]).ok();
        repo
    };
    let w = World::with_env(&[("EV_HOST_ID", "ci-linux.1")]);
    let repo = started(&w);
    let r = w.evctl(repo.path(), &["status"]).ok();
    assert!(
        r.stdout
            .contains("\nhost     ci-linux.1 (from EV_HOST_ID)\n"),
        "{r:?}"
    );
    let j = status_json(&w);
    assert_eq!(j["host"]["id"], "ci-linux.1", "{j}");
    assert_eq!(j["host"]["from"], "EV_HOST_ID", "{j}");

    let w = World::with_env(&[("EV_HOST_ID", "ci/linux")]);
    let repo = started(&w);
    let r = w.evctl(repo.path(), &["status"]).ok();
    assert!(
        r.stdout.contains(
            "host     none: EV_HOST_ID \"ci/linux\" is not a host id: only letters, digits, '.', '_' and '-' are allowed"
        ),
        "{r:?}"
    );
    assert!(status_json(&w)["host"]["id"].is_null());

    let w = World::new();
    let _repo = started(&w);
    let j = status_json(&w);
    assert_eq!(j["host"]["from"], "hostname", "{j}");
    let id = j["host"]["id"].as_str().expect("an id from the host name");
    assert!(
        !id.is_empty()
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')),
        "{id}"
    );
}
