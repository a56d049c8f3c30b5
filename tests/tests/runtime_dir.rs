//! The runtime directory is private or refused: a loose directory, a planted symlink, a mode
//! loosened while evd runs. evd's log has no colour codes; a daemon's build identity is the
//! hash of its bytes.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use evd_e2e::{bin, wait_until, Repo, World};

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("lstat")
        .permissions()
        .mode()
        & 0o777
}

/// Make the world's runtime directory with `mode`, an `evd.log` symlink planted in it pointing
/// at a file of the user's: the directory and that file.
fn plant_log(w: &World, mode: u32) -> (std::path::PathBuf, std::path::PathBuf) {
    let rt = w.rt_dir();
    std::fs::create_dir(&rt).expect("mkdir");
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(mode)).expect("chmod");
    let victim = w.home.path().join("victim");
    std::fs::write(&victim, "precious\n").expect("write victim");
    std::os::unix::fs::symlink(&victim, rt.join("evd.log")).expect("plant");
    (rt, victim)
}

/// A runtime directory left 0777 with an `evd.log` symlink planted in it: evctl neither starts
/// a daemon there nor writes through the link; it says why and answers in-process.
#[test]
fn a_loose_runtime_directory_with_a_planted_log_is_refused() {
    let w = World::new();
    let repo = Repo::new();
    let (rt, victim) = plant_log(&w, 0o777);

    w.evctl(repo.path(), &["init"]).ok();
    let r = w.evctl(repo.path(), &["decide", "still works", "--blame", "b"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("refusing runtime directory") && r.stderr.contains("0777"),
        "{r:?}"
    );
    let list = w.evctl(repo.path(), &["list"]).ok();
    assert!(list.stdout.contains("still works"), "{list:?}");
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n"
    );
    assert!(!w.socket().exists(), "no daemon was started there");
    assert_eq!(mode(&rt), 0o777, "evctl did not adopt the directory");

    // evd itself refuses it too, naming the mode.
    let out = w
        .command(bin("evd"))
        .args(["serve", "--runtime-dir"])
        .arg(&rt)
        .output()
        .expect("evd");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("its mode is 0777"), "{err}");
}

/// A private runtime directory with a planted `evd.log` symlink: the daemon is not started
/// with its log going through the link.
#[test]
fn a_planted_log_symlink_is_never_written_through() {
    let w = World::new();
    let repo = Repo::new();
    let (_, victim) = plant_log(&w, 0o700);
    w.evctl(repo.path(), &["init"]).ok();
    let r = w.evctl(repo.path(), &["list"]).ok();
    assert!(r.stderr.contains("is a symlink"), "{r:?}");
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n"
    );
}

/// While evd runs, a loosened runtime directory is set back to 0700; its files are 0600 and
/// its log carries no terminal colour codes.
#[test]
fn a_running_daemon_keeps_its_directory_private_and_its_log_plain() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    w.evctl(repo.path(), &["list"]).ok();
    let rt = w.rt_dir();
    for f in ["evd.lock", "start.lock", "evd.log"] {
        assert_eq!(mode(&rt.join(f)), 0o600, "{f}");
    }
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert!(
        wait_until(Duration::from_secs(15), || mode(&rt) == 0o700),
        "evd took the mode back"
    );
    let log = std::fs::read_to_string(rt.join("evd.log")).expect("log");
    assert!(log.contains("runtime directory"), "{log}");
    assert!(log.contains("evd ready"), "{log}");
    assert!(!log.contains('\u{1b}'), "no ANSI codes in the log:\n{log}");
}

/// Byte-identical evd binaries at two paths are one build: neither replaces the other's daemon.
#[test]
fn byte_identical_binaries_at_two_paths_do_not_replace_each_other() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a/evd"), dir.path().join("b/evd"));
    for p in [&a, &b] {
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::copy(bin("evd"), p).expect("copy");
    }
    let pid = |w: &World| w.status().and_then(|s| s["pid"].as_u64());
    let bin_a = a.display().to_string();
    let bin_b = b.display().to_string();
    w.evctl_env(repo.path(), &[("EVD_BIN", &bin_a)], &["list"])
        .ok();
    let first = pid(&w).expect("a daemon");
    for _ in 0..3 {
        for b in [&bin_b, &bin_a] {
            w.evctl_env(repo.path(), &[("EVD_BIN", b)], &["list"]).ok();
            assert_eq!(pid(&w), Some(first), "replaced by a copy of itself");
        }
    }
}
