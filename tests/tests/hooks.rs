//! `evctl hooks` and `evctl hook`: the gates, run by real git (`git commit`, `git push` to a
//! local bare remote) in real repositories, with a private evd per test.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use evd_e2e::{bin, path_with_evctl, target_dir, Repo, Run, World};

/// `PATH` without any directory holding an `evctl`.
fn path_without_evctl() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| !d.join("evctl").exists() && *d != target_dir())
        .collect();
    std::env::join_paths(kept)
        .expect("PATH")
        .to_string_lossy()
        .into_owned()
}

fn head(w: &World, dir: &Path) -> String {
    w.git(dir, &["rev-parse", "HEAD"])
        .ok()
        .stdout
        .trim()
        .to_string()
}

fn recorded_id(r: &Run) -> String {
    r.stdout
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no id in {r:?}"))
        .to_string()
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open");
    f.write_all(text.as_bytes()).expect("write");
}

/// A repository with a store holding two decisions: one guarding `db/schema.sql` (its test
/// passes), one guarding `api/` (its test passes until `api/extra` exists). Both were run.
struct Fixture {
    repo: Repo,
    /// Where the store is (the repository root, or a subdirectory of it).
    root: PathBuf,
    schema: String,
    api: String,
}

fn fixture(w: &World, sub: Option<&str>) -> Fixture {
    let repo = Repo::new();
    let root = match sub {
        Some(s) => repo.path().join(s),
        None => repo.path().to_path_buf(),
    };
    std::fs::create_dir_all(root.join("db")).expect("mkdir");
    std::fs::create_dir_all(root.join("api")).expect("mkdir");
    std::fs::write(root.join("db/schema.sql"), "create table t(x int);\n").expect("write");
    std::fs::write(root.join("api/routes.rs"), "fn main() {}\n").expect("write");
    // The store's per-machine cache stays out of the commits the tests make.
    std::fs::write(repo.path().join(".gitignore"), "results/\n").expect("write");
    w.git(repo.path(), &["add", "."]).ok();
    w.git(repo.path(), &["commit", "-q", "-m", "code"]).ok();
    w.evctl(&root, &["init"]).ok();
    let schema = recorded_id(
        &w.evctl(
            &root,
            &[
                "decide",
                "freeze the schema",
                "--assume",
                "the schema is stable",
                "--assume-test",
                "true",
                "--counter-test",
                "false",
                "--on-platform",
                "local",
                "--triggered-by",
                "db/schema.sql",
                "--surface",
                "ddl",
            ],
        )
        .ok(),
    );
    let api = recorded_id(
        &w.evctl(
            &root,
            &[
                "decide",
                "keep the api small",
                "--assume",
                "few routes",
                "--assume-test",
                "test ! -e api/extra",
                "--counter-test",
                "test -e api/extra",
                "--on-platform",
                "local",
                "--triggered-by",
                "api",
                "--surface",
                "routes",
            ],
        )
        .ok(),
    );
    w.git(repo.path(), &["add", "."]).ok();
    w.git(repo.path(), &["commit", "-q", "-m", "decisions"])
        .ok();
    w.evctl(&root, &["check", "--run"]).ok();
    Fixture {
        repo,
        root,
        schema,
        api,
    }
}

/// Make the api decision's check read red (a file it forbids, then a run).
fn break_api(w: &World, fx: &Fixture) {
    std::fs::write(fx.root.join("api/extra"), "").expect("write");
    w.evctl(&fx.root, &["check", "--run"]).ok();
    assert_eq!(
        w.evctl(&fx.root, &["check", "--exit-on-red"]).code,
        1,
        "the api decision gates now"
    );
}

/// A linked worktree of the repository at `p` on a new branch `side`, in a temporary directory
/// (kept while the first value lives).
fn linked_worktree(w: &World, p: &Path) -> (tempfile::TempDir, PathBuf) {
    let side = tempfile::tempdir().expect("worktree");
    let wt = side.path().join("wt");
    let wt_arg = wt.display().to_string();
    w.git(p, &["worktree", "add", "-q", "-b", "side", &wt_arg])
        .ok();
    (side, wt)
}

fn stage_change(w: &World, fx: &Fixture, rel: &str) {
    append(&fx.root.join(rel), "-- a change\n");
    w.git(&fx.root, &["add", rel]).ok();
}

fn commit(w: &World, fx: &Fixture, env: &[(&str, &str)], extra: &[&str]) -> Run {
    let mut args = vec!["commit", "-q", "-m", "change"];
    args.extend_from_slice(extra);
    w.git_env(fx.repo.path(), env, &args)
}

#[test]
fn a_strict_gate_blocks_exactly_when_check_would_fail_and_tells_what_it_changes() {
    let w = World::new();
    let fx = fixture(&w, None);
    let p = fx.repo.path();
    let r = w.evctl(p, &["hooks", "install", "--strict"]).ok();
    assert!(
        r.stdout
            .contains("pre-commit: installed evctl's hook in .git/hooks/pre-commit"),
        "{r:?}"
    );
    assert!(r.stdout.contains("EVCTL_NO_HOOKS=1"), "{r:?}");

    // Green: the commit goes through, and the author hears which decision guards the file.
    let before = head(&w, p);
    stage_change(&w, &fx, "db/schema.sql");
    let r = commit(&w, &fx, &[], &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let said = format!(
        "evctl: you are changing db/schema.sql, which decision {} guards (dirty; last ran green at {}); its check will read stale after this commit: then `evctl check --run`",
        fx.schema,
        &before[..7]
    );
    assert_eq!(r.stderr.trim_end(), said, "{r:?}");
    assert_ne!(head(&w, p), before);

    // That commit made the schema check stale, which gates: the next commit is blocked.
    append(&p.join("README"), "more\n");
    w.git(p, &["add", "README"]).ok();
    let r = commit(&w, &fx, &[], &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("evctl: commit blocked: 1 check verdict gates"),
        "{r:?}"
    );
    assert!(
        r.stderr
            .contains(&format!("  stale {} \"freeze the schema\"", fx.schema)),
        "{r:?}"
    );
    assert!(
        r.stderr
            .contains("git commit --no-verify (or EVCTL_NO_HOOKS=1)"),
        "{r:?}"
    );
    assert!(r.stderr.lines().count() <= 8, "short: {r:?}");

    // Run again: green, the commit goes through (nothing staged is guarded: silence).
    w.evctl(p, &["check", "--run"]).ok();
    let r = commit(&w, &fx, &[], &[]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{r:?}");

    // A red check blocks, naming it first; the commit does not happen.
    break_api(&w, &fx);
    stage_change(&w, &fx, "db/schema.sql");
    let before = head(&w, p);
    let r = commit(&w, &fx, &[], &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert!(lines[0].starts_with("evctl: commit blocked"), "{r:?}");
    assert!(
        lines[1].starts_with(&format!("  red {} \"keep the api small\" (ran ", fx.api)),
        "{r:?}"
    );
    assert!(
        lines[2].starts_with(&format!(
            "evctl: you are changing db/schema.sql, which decision {} guards (dirty; last ran green at",
            fx.schema
        )),
        "{r:?}"
    );
    assert_eq!(head(&w, p), before, "blocked");

    // --no-verify and the variable skip it.
    let r = commit(&w, &fx, &[("EVCTL_NO_HOOKS", "1")], &[]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{r:?}");
    stage_change(&w, &fx, "db/schema.sql");
    let r = commit(&w, &fx, &[], &["--no-verify"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{r:?}");
    assert!(w.daemon_pid().is_some(), "answered by this world's evd");
}

#[test]
fn without_evd_the_gate_answers_in_process() {
    for env in [("EVD_NO_DAEMON", "1"), ("EVD_BIN", "/nonexistent/evd")] {
        let w = World::with_env(&[env]);
        let fx = fixture(&w, None);
        w.evctl(fx.repo.path(), &["hooks", "install"]).ok();
        break_api(&w, &fx);
        stage_change(&w, &fx, "db/schema.sql");
        let r = commit(&w, &fx, &[], &[]);
        assert_eq!(r.code, 1, "{env:?}: {r:?}");
        assert!(r.stderr.contains("evctl: commit blocked"), "{env:?}: {r:?}");
        assert!(r.stderr.contains(&fx.api), "{env:?}: {r:?}");
        assert!(w.daemon_pid().is_none(), "{env:?}: no daemon");
    }
}

#[test]
fn without_evctl_the_commit_goes_through_with_one_line() {
    let w = World::new();
    let fx = fixture(&w, None);
    break_api(&w, &fx);
    // Install from a copy of evctl (its path is what the hook falls back to), then remove it.
    let dir = tempfile::tempdir_in(target_dir()).expect("tempdir");
    let copy = dir.path().join("evctl");
    if std::fs::hard_link(bin("evctl"), &copy).is_err() {
        std::fs::copy(bin("evctl"), &copy).expect("copy evctl");
    }
    let out = w
        .command(&copy)
        .current_dir(fx.repo.path())
        .args(["hooks", "install"])
        .output()
        .expect("evctl");
    assert!(out.status.success(), "{out:?}");
    let hook = std::fs::read_to_string(fx.repo.path().join(".git/hooks/pre-commit")).expect("hook");
    assert!(hook.contains(&copy.display().to_string()), "{hook}");
    std::fs::remove_file(&copy).expect("rm");

    stage_change(&w, &fx, "db/schema.sql");
    let r = commit(&w, &fx, &[("PATH", &path_without_evctl())], &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stderr.lines().count(), 1, "{r:?}");
    assert!(
        r.stderr
            .starts_with("evctl-hooks: evctl is not on PATH (nor at "),
        "{r:?}"
    );
}

#[test]
fn a_foreign_hook_is_chained_and_put_back_byte_for_byte() {
    let w = World::new();
    let fx = fixture(&w, None);
    let p = fx.repo.path();
    let hooks = p.join(".git/hooks");
    std::fs::create_dir_all(&hooks).expect("mkdir");
    let foreign = "#!/bin/sh\n# the project's own check\necho \"foreign ran $*\" >> foreign.log\n[ ! -e fail-foreign ]\n";
    let hook = hooks.join("pre-commit");
    std::fs::write(&hook, foreign).expect("write");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o750)).expect("chmod");

    let r = w.evctl(p, &["hooks", "install"]).ok();
    assert!(
        r.stdout.contains("moved aside to pre-commit.evctl-chained"),
        "{r:?}"
    );
    let installed = std::fs::read(&hook).expect("read");
    // Idempotent: a second install changes nothing.
    let r = w.evctl(p, &["hooks", "install"]).ok();
    assert!(r.stdout.contains("already installed"), "{r:?}");
    assert_eq!(std::fs::read(&hook).expect("read"), installed);
    let r = w.evctl(p, &["hooks", "status"]).ok();
    assert!(
        r.stdout.contains(&format!(
            "hooks directory: {} (git's default)",
            hooks.canonicalize().expect("canon").display()
        )),
        "{r:?}"
    );
    assert!(
        r.stdout.contains(
            "pre-commit: evctl's (.git/hooks/pre-commit), chaining pre-commit.evctl-chained"
        ),
        "{r:?}"
    );
    assert!(r.stdout.contains("pre-push: not installed"), "{r:?}");

    // Both run: the foreign one first.
    stage_change(&w, &fx, "db/schema.sql");
    let r = commit(&w, &fx, &[], &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("you are changing db/schema.sql"), "{r:?}");
    assert_eq!(
        std::fs::read_to_string(p.join("foreign.log")).expect("log"),
        "foreign ran \n"
    );

    // A failing foreign hook still blocks, with its own exit code.
    w.evctl(p, &["check", "--run"]).ok();
    std::fs::write(p.join("fail-foreign"), "").expect("write");
    stage_change(&w, &fx, "api/routes.rs");
    let before = head(&w, p);
    let r = commit(&w, &fx, &[], &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(head(&w, p), before);
    std::fs::remove_file(p.join("fail-foreign")).expect("rm");

    // Uninstall: the very same bytes and mode, and nothing left beside them.
    let r = w.evctl(p, &["hooks", "uninstall"]).ok();
    assert!(r.stdout.contains("put back the hook it chained"), "{r:?}");
    assert_eq!(std::fs::read_to_string(&hook).expect("read"), foreign);
    assert_eq!(
        std::fs::metadata(&hook).expect("stat").permissions().mode() & 0o7777,
        0o750
    );
    assert!(!hooks.join("pre-commit.evctl-chained").exists());
    let r = w.evctl(p, &["hooks", "status"]).ok();
    assert!(r.stdout.contains("pre-commit: not evctl's"), "{r:?}");
}

#[test]
fn pre_push_gates_on_the_pushed_range_and_feeds_a_chained_hook() {
    let w = World::new();
    let fx = fixture(&w, None);
    let p = fx.repo.path();
    // Once the branch has an upstream, a `live-origin` store reads every binding verified before
    // it moved as sha-stale (check's business, tested there); this test is about ranges.
    let config = fx.root.join(".evolving/config");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, text.replace("\"live-origin\"", "\"none\"")).expect("config");
    let remote = tempfile::tempdir().expect("remote");
    w.git(remote.path(), &["init", "-q", "--bare"]).ok();
    let url = remote.path().display().to_string();
    w.git(p, &["remote", "add", "origin", &url]).ok();
    w.git(p, &["push", "-q", "-u", "origin", "main"]).ok();
    // A foreign pre-push that reads git's input: it must still get it.
    let hooks = p.join(".git/hooks");
    std::fs::create_dir_all(&hooks).expect("mkdir");
    std::fs::write(
        hooks.join("pre-push"),
        "#!/bin/sh\ncat >> pushed.log\necho \"remote $1\" >> pushed.log\n",
    )
    .expect("write");
    std::fs::set_permissions(
        hooks.join("pre-push"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    let r = w.evctl(p, &["hooks", "install", "--pre-push"]).ok();
    assert!(
        r.stdout.contains("pre-push: installed evctl's hook"),
        "{r:?}"
    );
    assert!(
        !hooks.join("pre-commit").exists(),
        "only the hook asked for"
    );

    // The api check reads red; pushing a README change is not its business.
    break_api(&w, &fx);
    append(&p.join("README"), "more\n");
    w.git(p, &["commit", "-q", "-am", "readme"]).ok();
    let r = w.git(p, &["push", "-q", "origin", "main"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{r:?}");
    let log = std::fs::read_to_string(p.join("pushed.log")).expect("log");
    assert!(log.starts_with("refs/heads/main "), "{log}");
    assert!(log.ends_with("remote origin\n"), "{log}");

    // A change under api/ is: blocked, and said.
    stage_change(&w, &fx, "api/routes.rs");
    w.git(p, &["commit", "-q", "-m", "api"]).ok();
    let r = w.git(p, &["push", "-q", "origin", "main"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("evctl: push blocked"), "{r:?}");
    assert!(
        r.stderr
            .contains(&format!("  {} \"keep the api small\" (", fx.api)),
        "{r:?}"
    );
    assert!(r.stderr.contains(") guards api/routes.rs"), "{r:?}");
    assert!(r.stderr.contains("git push --no-verify"), "{r:?}");
    let log = std::fs::read_to_string(p.join("pushed.log")).expect("log");
    assert_eq!(
        log.lines().count(),
        4,
        "the chained hook ran again, with its input: {log}"
    );
    w.git(p, &["push", "-q", "--no-verify", "origin", "main"])
        .ok();

    // A new branch: only the commits no remote-tracking ref has are its range.
    stage_change(&w, &fx, "db/schema.sql");
    w.git(p, &["commit", "-q", "-m", "schema"]).ok();
    w.evctl(p, &["check", "--run"]).ok();
    let r = w.git(p, &["push", "-q", "origin", "HEAD:refs/heads/feature"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.stderr.trim_end(),
        format!(
            "evctl: this push changes db/schema.sql, which decision {} guards (green at {})",
            fx.schema,
            &head(&w, p)[..7]
        ),
        "{r:?}"
    );
    // Deleting it pushes nothing.
    let r = w.git(p, &["push", "-q", "origin", ":feature"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{r:?}");
}

#[test]
fn core_hooks_path_outside_the_repository_is_where_the_hook_goes() {
    let w = World::new();
    let fx = fixture(&w, None);
    let p = fx.repo.path();
    let shared = tempfile::tempdir().expect("hooks dir");
    let dir = shared.path().join("hooks");
    w.git(p, &["config", "core.hooksPath", &dir.display().to_string()])
        .ok();
    let r = w.evctl(p, &["hooks", "install"]).ok();
    let canon = shared.path().canonicalize().expect("canon").join("hooks");
    assert!(
        r.stdout.contains(&format!(
            "hooks directory: {} (core.hooksPath)",
            canon.display()
        )),
        "{r:?}"
    );
    assert!(dir.join("pre-commit").is_file());
    assert!(!p.join(".git/hooks/pre-commit").exists());
    break_api(&w, &fx);
    stage_change(&w, &fx, "db/schema.sql");
    let r = commit(&w, &fx, &[], &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("evctl: commit blocked"), "{r:?}");
    w.evctl(p, &["hooks", "uninstall"]).ok();
    assert!(!dir.join("pre-commit").exists());
}

#[test]
fn a_husky_tree_gets_one_line_in_its_own_hook_file() {
    let w = World::new();
    let fx = fixture(&w, None);
    let p = fx.repo.path();
    // husky's layout: core.hooksPath = .husky/_ holds generated wrappers that run the project's
    // files one level up with `sh -e`. A stand-in of our own:
    std::fs::create_dir_all(p.join(".husky/_")).expect("mkdir");
    let wrapper = "#!/bin/sh\n# stand-in wrapper: run the project's hook of the same name, if any\nf=\"$(dirname \"$(dirname \"$0\")\")/$(basename \"$0\")\"\n[ -f \"$f\" ] || exit 0\nexec sh -e \"$f\" \"$@\"\n";
    for h in ["pre-commit", "pre-push"] {
        let f = p.join(".husky/_").join(h);
        std::fs::write(&f, wrapper).expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let user = "npx lint-staged\necho user-hook-ran >&2";
    let npx = tempfile::tempdir().expect("bin");
    std::fs::write(npx.path().join("npx"), "#!/bin/sh\nexit 0\n").expect("write");
    std::fs::set_permissions(
        npx.path().join("npx"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    std::fs::write(p.join(".husky/pre-commit"), user).expect("write");
    w.git(p, &["config", "core.hooksPath", ".husky/_"]).ok();

    let r = w.evctl(p, &["hooks", "install"]).ok();
    assert!(r.stdout.contains("inside the work tree"), "{r:?}");
    assert!(
        r.stdout
            .contains("pre-commit: added evctl's line to .husky/pre-commit"),
        "{r:?}"
    );
    let edited = std::fs::read_to_string(p.join(".husky/pre-commit")).expect("read");
    assert!(edited.starts_with(&format!("{user}\n")), "{edited}");
    assert_eq!(edited.lines().count(), 3, "one line added: {edited}");
    assert_eq!(
        std::fs::read_to_string(p.join(".husky/_/pre-commit")).expect("read"),
        wrapper
    );
    assert!(
        !p.join(".git/hooks/pre-commit").exists(),
        "not a file git never runs"
    );
    // Twice is once.
    let r = w.evctl(p, &["hooks", "install"]).ok();
    assert!(
        r.stdout.contains("already in .husky/pre-commit, unchanged"),
        "{r:?}"
    );
    let r = w.evctl(p, &["hooks", "status"]).ok();
    assert!(
        r.stdout
            .contains("pre-commit: evctl's line is present in .husky/pre-commit"),
        "{r:?}"
    );

    stage_change(&w, &fx, "db/schema.sql");
    let path = format!("{}:{}", npx.path().display(), path_with_evctl());
    let r = commit(&w, &fx, &[("PATH", &path)], &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("user-hook-ran"), "{r:?}");
    assert!(r.stderr.contains("you are changing db/schema.sql"), "{r:?}");
    break_api(&w, &fx);
    stage_change(&w, &fx, "db/schema.sql");
    let r = commit(&w, &fx, &[("PATH", &path)], &[]);
    assert_eq!(r.code, 1, "{r:?}");

    let r = w.evctl(p, &["hooks", "uninstall"]).ok();
    assert!(
        r.stdout
            .contains("pre-commit: removed evctl's line from .husky/pre-commit"),
        "{r:?}"
    );
    assert_eq!(
        std::fs::read_to_string(p.join(".husky/pre-commit")).expect("read"),
        user,
        "byte for byte, missing final newline included"
    );
    assert!(!p.join(".husky/pre-push").exists());
}

#[test]
fn a_linked_worktree_shares_the_hooks_and_gates_its_own_commits() {
    let w = World::new();
    let fx = fixture(&w, None);
    let p = fx.repo.path();
    let (_side, wt) = linked_worktree(&w, p);
    let r = w.evctl(&wt, &["hooks", "install"]).ok();
    let common = p.join(".git/hooks").canonicalize().expect("canon");
    assert!(
        r.stdout.contains(&format!(
            "hooks directory: {} (git's default)",
            common.display()
        )),
        "{r:?}"
    );
    assert!(common.join("pre-commit").is_file());
    w.evctl(&wt, &["check", "--run"]).ok();
    append(&wt.join("db/schema.sql"), "-- in the worktree\n");
    w.git(&wt, &["add", "db/schema.sql"]).ok();
    let r = w.git(&wt, &["commit", "-q", "-m", "from the worktree"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "you are changing db/schema.sql, which decision {} guards (dirty; last ran green at",
            fx.schema
        )),
        "{r:?}"
    );
}

#[test]
fn a_store_in_a_subdirectory_is_gated_with_paths_as_git_shows_them() {
    let w = World::new();
    let fx = fixture(&w, Some("svc"));
    let p = fx.repo.path();
    let r = w.evctl(&fx.root, &["hooks", "install"]).ok();
    assert!(r.stdout.contains("store: svc/.evolving"), "{r:?}");
    let hook = std::fs::read_to_string(p.join(".git/hooks/pre-commit")).expect("hook");
    assert!(hook.contains("--store 'svc' hook pre-commit"), "{hook}");
    stage_change(&w, &fx, "db/schema.sql");
    let r = commit(&w, &fx, &[], &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "you are changing svc/db/schema.sql, which decision {} guards",
            fx.schema
        )),
        "{r:?}"
    );
    // By hand, from anywhere in the tree, the same answer.
    w.evctl(&fx.root, &["check", "--run"]).ok();
    stage_change(&w, &fx, "api/routes.rs");
    let r = w.evctl(&fx.root.join("api"), &["--json", "hook", "pre-commit"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).expect("json");
    assert_eq!(v["blocked"], false, "{v}");
    let line = v["lines"][0].as_str().unwrap_or_default();
    assert!(
        line.starts_with(&format!(
            "evctl: you are changing svc/api/routes.rs, which decision {} guards (dirty; last ran green at",
            fx.api
        )),
        "{v}"
    );
}

#[test]
fn outside_a_work_tree_hooks_are_refused_and_a_hook_without_a_store_is_silent() {
    let w = World::new();
    let d = tempfile::tempdir().expect("dir");
    let r = w.evctl(d.path(), &["hooks", "install"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("is not inside a git work tree"), "{r:?}");
    let repo = Repo::new();
    let r = w.evctl(repo.path(), &["hook", "pre-commit"]);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (0, "", ""),
        "{r:?}"
    );
    let r = w.evctl(repo.path(), &["hooks", "install"]).ok();
    assert!(r.stdout.contains("store: none yet"), "{r:?}");
}

/// The gate reads what this very commit records: the index git hands the hook (a partial
/// commit's, `commit -a`'s), read by evd itself, and git's own answer where evd cannot read
/// the index (a split index).
#[test]
fn the_gate_reads_exactly_what_this_commit_records() {
    let w = World::new();
    let fx = fixture(&w, None);
    let p = fx.repo.path();
    w.evctl(p, &["hooks", "install"]).ok();
    // A commit of the schema makes its decision read stale: a gating verdict of a decision
    // guarding db/schema.sql, so only a commit that records db/schema.sql is blocked.
    stage_change(&w, &fx, "db/schema.sql");
    assert_eq!(commit(&w, &fx, &[], &["--no-verify"]).code, 0);
    let blocked_for_schema = |r: &Run| {
        r.code == 1
            && r.stderr.contains(&format!(
                "it changes db/schema.sql, which decision {}",
                fx.schema
            ))
    };

    // The schema is staged, but a partial commit records only the README: it goes through.
    stage_change(&w, &fx, "db/schema.sql");
    append(&p.join("README"), "more\n");
    let before = head(&w, p);
    let r = w.git(p, &["commit", "-q", "-m", "readme only", "--", "README"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stderr.contains("blocked"), "{r:?}");
    assert_ne!(head(&w, p), before);
    // The staged schema is still there: a plain commit records it, and is blocked.
    let r = commit(&w, &fx, &[], &[]);
    assert!(blocked_for_schema(&r), "{r:?}");
    w.git(p, &["reset", "-q"]).ok();
    // Nothing staged, the schema edited: `commit -a` records it, and is blocked.
    let r = commit(&w, &fx, &[], &["-a"]);
    assert!(blocked_for_schema(&r), "{r:?}");
    w.git(p, &["checkout", "-q", "--", "db/schema.sql"]).ok();
    append(&p.join("README"), "again\n");
    let r = commit(&w, &fx, &[], &["-a"]);
    assert_eq!(r.code, 0, "{r:?}");

    // A split index is git's to read: the gate still sees the staged schema.
    w.git(p, &["update-index", "--split-index"]).ok();
    stage_change(&w, &fx, "db/schema.sql");
    let r = commit(&w, &fx, &[], &[]);
    assert!(blocked_for_schema(&r), "{r:?}");
    assert!(w.daemon_pid().is_some(), "answered by this world's evd");
}

/// The pre-commit gate asks a running evd in one round trip, before evctl sets up anything
/// else; what it says is exactly what the usual way says (here, answered in-process), strict or
/// not. Where it cannot ask that way (no daemon of this build, an index evd does not read
/// itself), it hands over to the usual way, which answers the same; `EVCTL_DEBUG` tells which.
#[test]
fn the_quick_gate_says_what_the_usual_way_says() {
    const QUICK: &str = "evctl: the pre-commit gate asked evd in one round trip\n";
    let w = World::new();
    let fx = fixture(&w, None);
    let p = fx.repo.path();
    w.evctl(p, &["hooks", "install"]).ok();
    break_api(&w, &fx);
    stage_change(&w, &fx, "db/schema.sql");
    for args in [
        &["hook", "pre-commit"][..],
        &["hook", "--strict", "pre-commit"][..],
    ] {
        let quick = w.evctl_env(p, &[("EVCTL_DEBUG", "1")], args);
        assert!(quick.stderr.starts_with(QUICK), "{args:?}: {quick:?}");
        let usual = w.evctl_env(p, &[("EVD_NO_DAEMON", "1")], args);
        assert_eq!(
            (
                quick.code,
                quick.stdout.as_str(),
                &quick.stderr[QUICK.len()..]
            ),
            (usual.code, usual.stdout.as_str(), usual.stderr.as_str()),
            "{args:?}"
        );
        assert_eq!(quick.code, 1, "the failing api test blocks: {quick:?}");
        assert!(quick.stderr.contains(&fx.api), "{quick:?}");
    }
    // Through git: the same gate, asked the quick way.
    let r = commit(&w, &fx, &[("EVCTL_DEBUG", "1")], &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.starts_with(QUICK), "{r:?}");
    assert!(r.stderr.contains("evctl: commit blocked"), "{r:?}");
    // A linked worktree's index is asked of git: the usual way, the same verdicts.
    let (_side, wt) = linked_worktree(&w, p);
    std::fs::write(wt.join("api/extra"), "").expect("write");
    append(&wt.join("db/schema.sql"), "-- in the worktree\n");
    w.git(&wt, &["add", "db/schema.sql"]).ok();
    let r = w.evctl_env(&wt, &[("EVCTL_DEBUG", "1")], &["hook", "pre-commit"]);
    assert!(
        r.stderr.starts_with(
            "evctl: the pre-commit gate takes the usual way (evd cannot read this work tree's index itself)\n"
        ),
        "{r:?}"
    );
    assert!(r.stderr.contains("db/schema.sql"), "{r:?}");
    // No daemon to ask: the usual way answers in-process, and says the same.
    let w2 = World::with_env(&[("EVD_BIN", "/nonexistent/evd")]);
    let r = w2.evctl_env(p, &[("EVCTL_DEBUG", "1")], &["hook", "pre-commit"]);
    assert!(
        r.stderr.starts_with(
            "evctl: the pre-commit gate takes the usual way (no daemon of this build is running)\n"
        ),
        "{r:?}"
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains(&fx.api), "{r:?}");
}

#[test]
fn with_this_evctl_on_path_the_gate_is_a_link_git_runs_without_a_shell() {
    const QUICK: &str = "evctl: the pre-commit gate asked evd in one round trip\n";
    let w = World::new();
    let fx = fixture(&w, None);
    let p = fx.repo.path();
    let hook = p.join(".git/hooks/pre-commit");
    let on_path = [("PATH", path_with_evctl())];
    let on_path: Vec<(&str, &str)> = on_path.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let evctl = target_dir().join("evctl");
    let r = w.evctl_env(p, &on_path, &["hooks", "install"]).ok();
    let said = format!(
        "pre-commit: installed evctl's hook in .git/hooks/pre-commit: a link to {}, which git runs directly (no shell)\n",
        evctl.display()
    );
    assert!(r.stdout.contains(&said), "{r:?}");
    assert_eq!(std::fs::read_link(&hook).expect("a link"), evctl);
    let r = w.evctl(p, &["hooks", "status"]).ok();
    assert!(
        r.stdout.contains(&format!(
            "pre-commit: evctl's (.git/hooks/pre-commit, a link to {}: git runs evctl directly)",
            evctl.display()
        )),
        "{r:?}"
    );
    // Twice is once.
    let r = w.evctl_env(p, &on_path, &["hooks", "install"]).ok();
    assert!(r.stdout.contains("pre-commit: already installed"), "{r:?}");

    // git starts evctl under the hook's name: the same gate, the quick way, no shell.
    break_api(&w, &fx);
    stage_change(&w, &fx, "db/schema.sql");
    let before = head(&w, p);
    let r = commit(&w, &fx, &[("EVCTL_DEBUG", "1")], &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.starts_with(QUICK), "{r:?}");
    let usual = w.evctl_env(p, &[("EVD_NO_DAEMON", "1")], &["hook", "pre-commit"]);
    assert_eq!(
        (r.code, &r.stderr[QUICK.len()..]),
        (usual.code, usual.stderr.as_str()),
        "the link says what `evctl hook pre-commit` says"
    );
    assert!(r.stderr.contains(&fx.api), "{r:?}");
    assert_eq!(head(&w, p), before, "blocked");
    // Warn only: every word said, and the commit goes ahead.
    let r = commit(&w, &fx, &[("EVCTL_GATE_WARN_ONLY", "1")], &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("evctl: commit blocked"), "{r:?}");
    assert!(
        r.stderr
            .ends_with("evctl: EVCTL_GATE_WARN_ONLY is set: the commit goes ahead all the same\n"),
        "{r:?}"
    );
    assert_ne!(head(&w, p), before, "let through");
    // Skipped as the script is.
    stage_change(&w, &fx, "db/schema.sql");
    let r = commit(&w, &fx, &[("EVCTL_NO_HOOKS", "1")], &[]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{r:?}");

    // What the link cannot carry takes the script, and back.
    let r = w
        .evctl_env(p, &on_path, &["hooks", "install", "--strict"])
        .ok();
    assert!(r.stdout.contains("brought up to date"), "{r:?}");
    let text = std::fs::read_to_string(&hook).expect("a script");
    assert!(
        text.contains("# evctl-hooks: ") && text.contains(" hook --strict pre-commit"),
        "{text}"
    );
    let r = w.evctl_env(p, &on_path, &["hooks", "install"]).ok();
    assert!(r.stdout.contains("brought up to date: a link to"), "{r:?}");
    assert_eq!(std::fs::read_link(&hook).expect("a link"), evctl);
    // An evctl that is not the one on PATH (a build directory) writes the script, which looks
    // evctl up on every run.
    let r = w
        .evctl_env(
            p,
            &[("PATH", path_without_evctl().as_str())],
            &["hooks", "install"],
        )
        .ok();
    assert!(r.stdout.contains("brought up to date\n"), "{r:?}");
    assert!(std::fs::read_to_string(&hook)
        .expect("a script")
        .contains("# evctl-hooks: "));

    // A link to an evctl that is gone: git skips it without a word, status says so, install
    // links it again.
    let elsewhere = tempfile::tempdir().expect("tmp");
    let copy = elsewhere.path().join("evctl");
    std::fs::copy(&evctl, &copy).expect("copy");
    let path = format!("{}:{}", elsewhere.path().display(), path_with_evctl());
    let r = w
        .command(&copy)
        .current_dir(p)
        .env("PATH", &path)
        .args(["hooks", "install"])
        .output()
        .expect("evctl");
    assert!(r.status.success(), "{r:?}");
    assert_eq!(std::fs::read_link(&hook).expect("a link"), copy);
    std::fs::remove_file(&copy).expect("rm");
    let r = w.evctl(p, &["hooks", "status"]).ok();
    assert!(
        r.stdout.contains(&format!(
            "a link to {}, which is missing: git skips the hook without a word",
            copy.display()
        )),
        "{r:?}"
    );
    stage_change(&w, &fx, "db/schema.sql");
    let r = commit(&w, &fx, &[], &[]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{r:?}");
    let r = w.evctl_env(p, &on_path, &["hooks", "install"]).ok();
    assert!(r.stdout.contains("brought up to date: a link to"), "{r:?}");

    // Uninstall takes the link away, and nothing else.
    let r = w.evctl(p, &["hooks", "uninstall"]).ok();
    assert!(
        r.stdout
            .contains("pre-commit: removed evctl's hook from .git/hooks/pre-commit"),
        "{r:?}"
    );
    assert!(std::fs::symlink_metadata(&hook).is_err(), "gone");
    assert!(evctl.is_file(), "the link's target is untouched");
}
