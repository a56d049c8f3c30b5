//! The fact cache against git itself: a real repository (with a private `HOME`) changed in
//! every way an answer must see — commits, packed refs, checkouts, upstreams set, moved and
//! fetched, config includes and user configs, worktrees, nested repositories, symrefs, a `GIT_*`
//! environment, files changed just now, a save and a load — each answer compared with what git
//! says when asked directly. These tests read the whole folder at once (cache, dependencies,
//! stamps, environment, persisted file), so they sit beside it rather than in one file of it.
//!
//! Test code only: nothing here is built into evd.

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::*;

/// A repository `main` with two commits and an upstream `origin/main` (a remote-tracking
/// ref set by hand, no network), and a private HOME for every git we run.
struct Repo {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let r = Repo::bare_start();
        r.git(&["init", "-q", "-b", "main", "."]);
        r.commit("one");
        r.commit("two");
        r.git(&["config", "remote.origin.url", "/nonexistent/origin"]);
        r.git(&[
            "config",
            "remote.origin.fetch",
            "+refs/heads/*:refs/remotes/origin/*",
        ]);
        r.git(&["update-ref", "refs/remotes/origin/main", "HEAD~1"]);
        r.git(&["branch", "-q", "--set-upstream-to=origin/main"]);
        r
    }

    fn bare_start() -> Repo {
        Repo {
            dir: tempfile::tempdir().expect("tempdir"),
            home: tempfile::tempdir().expect("home"),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// git in `dir` with our HOME; its trimmed stdout when it succeeded and printed something.
    fn git_in(&self, dir: &Path, args: &[&str]) -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("HOME", self.home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("GIT_CONFIG_GLOBAL")
            .env_remove("GIT_CONFIG_SYSTEM")
            .env_remove("GIT_CONFIG_NOSYSTEM")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .expect("run git");
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !s.is_empty()).then_some(s)
    }

    fn git(&self, args: &[&str]) -> Option<String> {
        self.git_in(self.root(), args)
    }

    /// Must succeed.
    fn run(&self, args: &[&str]) {
        let st = Command::new("git")
            .arg("-C")
            .arg(self.root())
            .args(args)
            .env("HOME", self.home.path())
            .env_remove("GIT_CONFIG_GLOBAL")
            .env_remove("GIT_CONFIG_SYSTEM")
            .env_remove("GIT_CONFIG_NOSYSTEM")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("run git");
        assert!(st.success(), "git {args:?} failed");
    }

    fn commit(&self, msg: &str) {
        self.run(&["commit", "-q", "--allow-empty", "-m", msg]);
    }

    /// What git itself says, asked directly.
    fn truth(&self, dir: &Path, q: Query) -> Option<String> {
        match q {
            Query::Head => self.git_in(dir, &["rev-parse", "HEAD"]),
            Query::Upstream => self.git_in(dir, &["rev-parse", "@{upstream}"]),
        }
    }

    /// A caller-mode cache with our HOME, no system config and no racy window (the files
    /// here are all seconds old at most).
    fn cache(&self) -> FactCache {
        self.cache_for(Mode::Caller)
    }

    fn cache_for(&self, mode: Mode) -> FactCache {
        let mut c = FactCache::with_env(
            mode,
            [("HOME".into(), self.home.path().as_os_str().to_owned())],
        );
        c.racy_window = Duration::ZERO;
        c.system_config = self.home.path().join("etc-gitconfig");
        c
    }

    /// Asked in `dir`, the cache must agree with git, and it must spawn nothing the second
    /// time.
    fn cached(&self, c: &mut FactCache, dir: &Path, q: Query) -> Option<String> {
        let a = c.answer(dir, q);
        assert_eq!(a, self.truth(dir, q), "{q:?} in {}", dir.display());
        let n = c.misses();
        assert_eq!(c.answer(dir, q), a, "{q:?} again");
        assert_eq!(
            c.misses(),
            n,
            "{q:?} asked twice must be answered from the cache"
        );
        a
    }

    /// Asked in `dir`, the cache must agree with git and spawn each time.
    fn uncached(&self, c: &mut FactCache, dir: &Path, q: Query) -> Option<String> {
        let a = c.answer(dir, q);
        assert_eq!(a, self.truth(dir, q), "{q:?} in {}", dir.display());
        let n = c.misses();
        assert_eq!(c.answer(dir, q), a, "{q:?} again");
        assert!(c.misses() > n, "{q:?} must not be answered from the cache");
        a
    }
}

#[test]
fn an_unchanged_repository_is_answered_without_spawning() {
    let r = Repo::new();
    let mut c = r.cache();
    let head = r.cached(&mut c, r.root(), Query::Head);
    let up = r.cached(&mut c, r.root(), Query::Upstream);
    assert!(head.is_some() && up.is_some() && head != up);
    assert_eq!(c.len(), 2);
    // From a subdirectory (git walks up to the same .git).
    let sub = r.root().join("sub");
    fs::create_dir(&sub).expect("mkdir");
    assert_eq!(r.cached(&mut c, &sub, Query::Head), head);
}

#[test]
fn a_new_commit_is_seen() {
    let r = Repo::new();
    let mut c = r.cache();
    let before = r.cached(&mut c, r.root(), Query::Head);
    let up = r.cached(&mut c, r.root(), Query::Upstream);
    r.commit("three");
    // The upstream stays cached across the commit; HEAD is read from the branch's loose
    // ref, with no git process.
    let (spawns, hits) = (c.spawns(), c.hits());
    assert_eq!(c.answer(r.root(), Query::Upstream), up);
    assert_eq!(c.hits(), hits + 1, "a commit leaves the upstream cached");
    let after = r.cached(&mut c, r.root(), Query::Head);
    assert_ne!(before, after);
    assert_eq!(c.spawns(), spawns, "HEAD came from the loose ref");
}

#[test]
fn packed_refs_then_a_commit_is_seen() {
    let r = Repo::new();
    let mut c = r.cache();
    let head = r.cached(&mut c, r.root(), Query::Head);
    let up = r.cached(&mut c, r.root(), Query::Upstream);
    r.run(&["pack-refs", "--all"]);
    assert!(!r.root().join(".git/refs/heads/main").exists());
    assert_eq!(r.cached(&mut c, r.root(), Query::Head), head);
    assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), up);
    r.commit("three");
    assert_ne!(r.cached(&mut c, r.root(), Query::Head), head);
    // The upstream, packed too, moves in packed-refs only.
    r.run(&["pack-refs", "--all"]);
    r.cached(&mut c, r.root(), Query::Upstream);
    r.run(&["update-ref", "refs/remotes/origin/main", "HEAD"]);
    r.run(&["pack-refs", "--all"]);
    assert_eq!(
        r.cached(&mut c, r.root(), Query::Upstream),
        r.git(&["rev-parse", "HEAD"])
    );
}

#[test]
fn a_checkout_is_seen() {
    let r = Repo::new();
    let mut c = r.cache();
    let main = r.cached(&mut c, r.root(), Query::Head);
    assert!(r.cached(&mut c, r.root(), Query::Upstream).is_some());
    r.run(&["checkout", "-q", "-b", "other", "HEAD~1"]);
    let other = r.cached(&mut c, r.root(), Query::Head);
    assert_ne!(main, other);
    // A branch with no upstream: git fails, and that answer is cached too.
    assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), None);
    // Detached.
    r.run(&["checkout", "-q", "--detach", "main"]);
    assert_eq!(r.cached(&mut c, r.root(), Query::Head), main);
    assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), None);
    r.run(&["checkout", "-q", "main"]);
    assert!(r.cached(&mut c, r.root(), Query::Upstream).is_some());
}

#[test]
fn set_upstream_to_is_seen() {
    let r = Repo::new();
    let mut c = r.cache();
    let up = r.cached(&mut c, r.root(), Query::Upstream);
    r.run(&["update-ref", "refs/remotes/origin/dev", "HEAD"]);
    // Only the config changes.
    r.run(&["branch", "-q", "--set-upstream-to=origin/dev"]);
    let dev = r.cached(&mut c, r.root(), Query::Upstream);
    assert_ne!(up, dev);
    assert_eq!(dev, r.git(&["rev-parse", "HEAD"]));
    // A local branch as the upstream (remote "."), then that branch moving.
    r.run(&["branch", "-q", "base", "HEAD~1"]);
    r.run(&["branch", "-q", "--set-upstream-to=base"]);
    let base = r.cached(&mut c, r.root(), Query::Upstream);
    assert_eq!(base, r.git(&["rev-parse", "HEAD~1"]));
    r.run(&["branch", "-q", "-f", "base", "HEAD"]);
    assert_eq!(
        r.cached(&mut c, r.root(), Query::Upstream),
        r.git(&["rev-parse", "HEAD"])
    );
    r.run(&["branch", "-q", "--unset-upstream"]);
    assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), None);
}

#[test]
fn updating_the_remote_tracking_ref_is_seen() {
    let r = Repo::new();
    let mut c = r.cache();
    let up = r.cached(&mut c, r.root(), Query::Upstream);
    let head = r.git(&["rev-parse", "HEAD"]);
    assert_ne!(up, head);
    let sha = head.clone().expect("head");
    r.run(&["update-ref", "refs/remotes/origin/main", &sha]);
    assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), head);
}

#[test]
fn an_upstream_fetched_later_is_seen() {
    let r = Repo::new();
    r.run(&["config", "branch.main.merge", "refs/heads/later"]);
    let mut c = r.cache();
    // Configured but not fetched yet: git fails, and that is cached…
    assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), None);
    // …until the remote-tracking ref appears.
    r.run(&["update-ref", "refs/remotes/origin/later", "HEAD"]);
    assert_eq!(
        r.cached(&mut c, r.root(), Query::Upstream),
        r.git(&["rev-parse", "HEAD"])
    );
}

#[test]
fn an_include_in_any_config_is_never_cached() {
    let r = Repo::new();
    let mut c = r.cache();
    r.cached(&mut c, r.root(), Query::Upstream);
    let extra = r.home.path().join("extra");
    fs::write(&extra, "[branch \"main\"]\n\tmerge = refs/heads/dev\n").expect("write");
    r.run(&["update-ref", "refs/remotes/origin/dev", "HEAD"]);
    r.run(&["config", "--unset", "branch.main.merge"]);
    let mut config = fs::OpenOptions::new()
        .append(true)
        .open(r.root().join(".git/config"))
        .expect("config");
    writeln!(config, "[include]\n\tpath = {}", extra.display()).expect("append");
    drop(config);
    // The include moves the upstream; git still says so, we only stop remembering.
    let dev = r.uncached(&mut c, r.root(), Query::Upstream);
    assert_eq!(dev, r.git(&["rev-parse", "HEAD"]));
    // A HEAD does not read includes.
    r.cached(&mut c, r.root(), Query::Head);

    // In the user's config, any spelling.
    let r = Repo::new();
    let mut c = r.cache();
    r.cached(&mut c, r.root(), Query::Upstream);
    fs::write(
        r.home.path().join(".gitconfig"),
        "[IncludeIf \"gitdir:/nowhere/\"]\n\tpath = x\n",
    )
    .expect("write");
    r.uncached(&mut c, r.root(), Query::Upstream);
    // And in the system config.
    fs::remove_file(r.home.path().join(".gitconfig")).expect("rm");
    r.cached(&mut c, r.root(), Query::Upstream);
    fs::write(r.home.path().join("etc-gitconfig"), "[include]\n").expect("write");
    r.uncached(&mut c, r.root(), Query::Upstream);
}

#[test]
fn a_user_config_change_is_seen() {
    let r = Repo::new();
    let mut c = r.cache();
    let up = r.cached(&mut c, r.root(), Query::Upstream);
    r.run(&["update-ref", "refs/remotes/origin/dev", "HEAD"]);
    r.run(&["config", "--unset", "branch.main.merge"]);
    // The upstream now comes from the user's config alone.
    fs::write(
        r.home.path().join(".gitconfig"),
        "[branch \"main\"]\n\tmerge = refs/heads/dev\n",
    )
    .expect("write");
    let dev = r.cached(&mut c, r.root(), Query::Upstream);
    assert_ne!(dev, up);
    assert_eq!(dev, r.git(&["rev-parse", "HEAD"]));
    // A symlinked user config: an edit of its target is seen.
    let real = r.home.path().join("dotfiles-gitconfig");
    fs::write(&real, "[branch \"main\"]\n\tmerge = refs/heads/main\n").expect("write");
    fs::remove_file(r.home.path().join(".gitconfig")).expect("rm");
    std::os::unix::fs::symlink(&real, r.home.path().join(".gitconfig")).expect("symlink");
    assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), up);
    fs::write(&real, "[branch \"main\"]\n\tmerge = refs/heads/dev\n").expect("write");
    assert_eq!(r.cached(&mut c, r.root(), Query::Upstream), dev);
}

#[test]
fn a_worktree_is_never_cached_but_answered() {
    let r = Repo::new();
    let wt = r.home.path().join("wt");
    let wts = wt.to_str().expect("utf-8");
    r.run(&["worktree", "add", "-q", "-b", "side", wts, "HEAD~1"]);
    assert!(wt.join(".git").is_file());
    let mut c = r.cache();
    let head = r.uncached(&mut c, &wt, Query::Head);
    assert_ne!(head, r.git(&["rev-parse", "HEAD"]));
    r.uncached(&mut c, &wt, Query::Upstream);
    assert!(c.is_empty());
    // The main checkout is still cached.
    r.cached(&mut c, r.root(), Query::Head);
}

#[test]
fn a_repository_appearing_below_is_seen() {
    let r = Repo::new();
    let sub = r.root().join("sub");
    fs::create_dir(&sub).expect("mkdir");
    let mut c = r.cache();
    let outer = r.cached(&mut c, &sub, Query::Head);
    r.git_in(&sub, &["init", "-q", "-b", "main", "."]);
    // An unborn branch: git fails, and that is an answer too.
    assert_eq!(r.cached(&mut c, &sub, Query::Head), None);
    assert!(outer.is_some());
}

#[test]
fn a_nested_symref_is_never_cached() {
    let r = Repo::new();
    r.run(&["symbolic-ref", "refs/heads/alias", "refs/heads/main"]);
    r.run(&["symbolic-ref", "HEAD", "refs/heads/alias"]);
    let mut c = r.cache();
    assert!(r.uncached(&mut c, r.root(), Query::Head).is_some());
}

#[test]
fn outside_any_repository_git_is_asked_every_time() {
    let r = Repo::bare_start();
    let mut c = r.cache();
    assert_eq!(r.uncached(&mut c, r.root(), Query::Head), None);
    assert_eq!(
        c.answer(Path::new("/nonexistent/repo"), Query::Upstream),
        None
    );
}

#[test]
fn a_git_environment_is_never_cached() {
    assert!(env_allows_caching(
        Mode::Caller,
        ["HOME", "PATH", "XGIT_DIR"]
    ));
    assert!(!env_allows_caching(Mode::Caller, ["HOME", "GIT_DIR"]));
    assert!(!env_allows_caching(Mode::Caller, ["GIT_CONFIG_GLOBAL"]));
    // Keyed, so allowed.
    assert!(env_allows_caching(Mode::Caller, ["GIT_CONFIG_NOSYSTEM"]));
    assert!(!env_allows_caching(Mode::Caller, ["GIT_SSHX_DIR"]));
    // Transport, identity, editor and tracing variables cannot change these answers.
    assert!(env_allows_caching(
        Mode::Caller,
        [
            "GIT_SSL_CAINFO",
            "GIT_SSH_COMMAND",
            "GIT_AUTHOR_NAME",
            "GIT_PAGER",
            "GIT_TRACE"
        ]
    ));
    // What git exports to a hook (`git commit` running pre-commit) keeps the cache.
    assert!(env_allows_caching(
        Mode::Caller,
        [
            "GIT_INDEX_FILE",
            "GIT_PREFIX",
            "GIT_EXEC_PATH",
            "GIT_AUTHOR_DATE"
        ]
    ));
    assert!(!env_allows_caching(Mode::Caller, ["GIT_INDEX_FILES"]));
    // evd's spawn clears these three; the ones that redirect git's reads still count.
    assert!(env_allows_caching(
        Mode::Repository,
        [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_SSL_CAINFO"
        ]
    ));
    assert!(!env_allows_caching(Mode::Repository, ["GIT_COMMON_DIR"]));
    assert!(!env_allows_caching(Mode::Repository, ["GIT_CONFIG_GLOBAL"]));

    let r = Repo::new();
    let mut c = FactCache::with_env(
        Mode::Caller,
        [
            ("HOME".into(), r.home.path().as_os_str().to_owned()),
            ("GIT_NAMESPACE".into(), "x".into()),
        ],
    );
    c.racy_window = Duration::ZERO;
    r.uncached(&mut c, r.root(), Query::Head);
    assert!(c.is_empty());
    // A relative HOME cannot be turned into the paths git reads.
    let c = FactCache::with_env(Mode::Caller, [("HOME".into(), "rel".into())]);
    assert!(!c.caches());
}

#[test]
fn the_repository_mode_answers_as_evd_did() {
    let r = Repo::new();
    let mut c = r.cache_for(Mode::Repository);
    let evd = |dir: &Path| crate::git::run::git(dir, &["rev-parse", "--verify", "-q", "HEAD"]);
    let a = c.answer(r.root(), Query::Head);
    assert_eq!(a, evd(r.root()));
    let n = c.spawns();
    assert_eq!(c.answer(r.root(), Query::Head), a);
    assert_eq!(c.spawns(), n);
    r.commit("three");
    assert_eq!(c.answer(r.root(), Query::Head), evd(r.root()));
    // Unborn.
    let u = Repo::bare_start();
    u.run(&["init", "-q", "-b", "main", "."]);
    let mut c = u.cache_for(Mode::Repository);
    assert_eq!(c.answer(u.root(), Query::Head), None);
    assert_eq!(evd(u.root()), None);
}

#[test]
fn a_file_changed_just_now_is_not_trusted() {
    let r = Repo::new();
    let mut c = FactCache::with_env(
        Mode::Caller,
        [("HOME".into(), r.home.path().as_os_str().to_owned())],
    );
    c.system_config = r.home.path().join("etc-gitconfig");
    // Everything was written within the last two seconds.
    r.uncached(&mut c, r.root(), Query::Head);
    assert!(c.is_empty());
}

#[test]
fn answers_survive_a_save_and_load() {
    let r = Repo::new();
    let rt = tempfile::tempdir().expect("rt");
    let file = rt.path().join("git-facts.json");
    let mut c = r.cache();
    let head = r.cached(&mut c, r.root(), Query::Head);
    let up = r.cached(&mut c, r.root(), Query::Upstream);
    assert!(c.changed());
    c.save(&file).expect("save");
    assert!(!c.changed());
    let mode = fs::metadata(&file).expect("meta").mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Only the file is left behind, no temp.
    assert_eq!(fs::read_dir(rt.path()).expect("ls").count(), 1);

    let mut d = r.cache().read_from(&file);
    assert_eq!(d.len(), 2);
    assert_eq!(d.answer(r.root(), Query::Head), head);
    assert_eq!(d.answer(r.root(), Query::Upstream), up);
    assert_eq!((d.spawns(), d.hits()), (0, 2));
    assert!(!d.changed());
    // Nothing changed, so nothing is written.
    fs::remove_file(&file).expect("rm");
    d.save(&file).expect("save");
    assert!(!file.exists());
    // A change is written.
    r.commit("three");
    assert_ne!(d.answer(r.root(), Query::Head), head);
    assert!(d.changed());
    d.save(&file).expect("save");
    assert_eq!(r.cache().read_from(&file).len(), 2);
    // Another HOME is another key.
    let mut e =
        FactCache::with_env(Mode::Caller, [("HOME".into(), "/elsewhere".into())]).read_from(&file);
    e.racy_window = Duration::ZERO;
    assert_eq!(
        e.answer(r.root(), Query::Head),
        r.git(&["rev-parse", "HEAD"])
    );
    assert_eq!(e.misses(), 1);
}

/// The cost of a cached answer against a spawn (run with `--nocapture` to see it).
#[test]
fn bench_a_hit_against_a_spawn() {
    let r = Repo::new();
    let mut c = r.cache();
    const N: u32 = 200;
    for q in [Query::Head, Query::Upstream] {
        let truth = c.answer(r.root(), q);
        let t = Instant::now();
        for _ in 0..N {
            assert_eq!(c.answer(r.root(), q), truth);
        }
        let hit = t.elapsed() / N;
        let t = Instant::now();
        for _ in 0..N {
            assert_eq!(c.ask(r.root(), q), truth);
        }
        let spawn = t.elapsed() / N;
        println!("{q:?}: cache hit {hit:?}, git spawn {spawn:?} (mean of {N})");
    }
}
