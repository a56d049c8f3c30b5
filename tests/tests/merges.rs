//! Branches that both recorded decisions, brought together by real git: a merge (in both
//! orders), a rebase, a cherry-pick and a pull between two clones of a bare remote never stop on
//! `.evolving/HEAD` once `evctl hooks install` registered the merge driver; every decision stays
//! live, and upstream ev 0.1.32 reads the result. git's octopus, which runs no merge driver,
//! stops cleanly and the same branches merge one at a time.

use std::path::Path;

use evd_e2e::{commit_all, decide_one, git, Repo, Run, World};

/// A repository with a store, results kept out of git, and the gate and merge driver installed.
fn repo_with_driver(w: &World) -> Repo {
    let repo = Repo::new();
    let p = repo.path();
    w.evctl(p, &["init"]).ok();
    std::fs::write(p.join(".gitignore"), ".evolving/results/\n").expect("gitignore");
    let r = w.evctl(p, &["hooks", "install"]).ok();
    assert!(
        r.stdout
            .contains("`.evolving/HEAD merge=evctl-head` added to .gitattributes"),
        "{r:?}"
    );
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "store"]);
    repo
}

fn head_file(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(".evolving/HEAD"))
        .expect("HEAD")
        .trim()
        .to_string()
}

/// Every current decision's text, sorted.
fn decisions(w: &World, dir: &Path) -> Vec<String> {
    let r = w.evctl(dir, &["list"]).ok();
    let mut v: Vec<String> = r
        .stdout
        .lines()
        .filter_map(|l| l.split('\t').nth(2).map(str::to_string))
        .collect();
    v.sort();
    v
}

fn upstream_agrees(w: &World, dir: &Path, expected: &[&str]) {
    let v: Run = w.ev(dir, &["verify"]);
    assert_eq!(v.code, 0, "upstream verify: {v:?}");
    let list = w.ev(dir, &["list"]).ok();
    for d in expected {
        assert!(list.stdout.contains(d), "upstream list lacks {d}: {list:?}");
    }
}

#[test]
fn two_branches_that_both_decided_merge_without_stopping_in_either_order() {
    let w = World::new();
    let repo = repo_with_driver(&w);
    let p = repo.path();
    git(p, &["checkout", "-q", "-b", "a"]);
    let a = decide_one(&w, p, "shard the queue");
    commit_all(p, "decide a");
    git(p, &["checkout", "-q", "main"]);
    // main has no tick: git removed the `ticks/` it emptied, which reads as an empty one.
    assert!(!p.join(".evolving/ticks").exists());
    assert_eq!(w.evctl(p, &["list"]).ok().stdout, "no decisions yet\n");
    git(p, &["checkout", "-q", "-b", "b"]);
    let b = decide_one(&w, p, "keep sqlite");
    commit_all(p, "decide b");

    // b into a.
    git(p, &["checkout", "-q", "a"]);
    let m = w.git(p, &["merge", "-q", "--no-edit", "b"]);
    assert_eq!(m.code, 0, "{m:?}");
    let kept = head_file(p);
    assert_eq!(kept, a.clone().max(b.clone()), "the greater id is kept");
    assert_eq!(
        decisions(&w, p),
        vec!["\"keep sqlite\"", "\"shard the queue\""]
    );
    assert_eq!(w.evctl(p, &["verify"]).code, 0);
    upstream_agrees(&w, p, &["keep sqlite", "shard the queue"]);
    // `log` shows both: HEAD's chain, then the other tip back to where it joins.
    let other = if kept == a { b.clone() } else { a.clone() };
    let log = w.evctl(p, &["log"]).ok();
    let lines: Vec<&str> = log.stdout.lines().collect();
    assert!(lines[0].starts_with(&format!("{kept}\t")), "{log:?}");
    let fork = lines
        .iter()
        .position(|l| l.starts_with(&format!("fork\t{other}\tjoins:")))
        .unwrap_or_else(|| panic!("no fork line: {log:?}"));
    assert!(
        lines[fork + 1]
            .trim_start()
            .starts_with(&format!("{other}\t")),
        "{log:?}"
    );
    let json = w.evctl(p, &["--json", "log"]).ok();
    let v: serde_json::Value = serde_json::from_str(json.stdout.trim()).expect("json");
    assert_eq!(v["forks"][0]["tip"], other.as_str(), "{v}");

    // a into b: the very same HEAD.
    git(p, &["checkout", "-q", "-b", "b2", "b"]);
    let m = w.git(p, &["merge", "-q", "--no-edit", "a^{commit}"]);
    assert_eq!(m.code, 0, "{m:?}");
    assert_eq!(head_file(p), kept, "the same in either order");

    // A rebase of a branch with a decision onto one with others, then a cherry-pick.
    git(p, &["checkout", "-q", "-b", "c", "main"]);
    let c = decide_one(&w, p, "pin the model");
    commit_all(p, "decide c");
    let r = w.git(p, &["rebase", "-q", "a"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(head_file(p), kept.clone().max(c.clone()));
    assert_eq!(decisions(&w, p).len(), 3);
    git(p, &["checkout", "-q", "-b", "d", "main"]);
    let d = decide_one(&w, p, "drop the cache");
    commit_all(p, "decide d");
    git(p, &["checkout", "-q", "a"]);
    let r = w.git(p, &["cherry-pick", "d"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(head_file(p), kept.clone().max(d.clone()));
    assert_eq!(decisions(&w, p).len(), 3);
    upstream_agrees(&w, p, &["keep sqlite", "shard the queue", "drop the cache"]);

    // Conflict markers are left to git: the driver says so and writes nothing.
    let dir = tempfile::tempdir().expect("tmp");
    let f = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    let (o, ours, theirs) = (
        f("o", &format!("{a}\n")),
        f("a", "<<<<<<< ours\n"),
        f("b", &format!("{b}\n")),
    );
    let r = w.evctl(
        p,
        &[
            "merge-driver",
            o.to_str().expect("utf8"),
            ours.to_str().expect("utf8"),
            theirs.to_str().expect("utf8"),
            ".evolving/HEAD",
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("left as a conflict"), "{r:?}");
    assert_eq!(
        std::fs::read_to_string(&ours).expect("ours"),
        "<<<<<<< ours\n"
    );

    // Uninstalled, it is gone from the config and the attributes.
    let r = w.evctl(p, &["hooks", "uninstall"]).ok();
    assert!(
        r.stdout
            .contains("merge driver: removed from this clone's git config"),
        "{r:?}"
    );
    let attrs = std::fs::read_to_string(p.join(".gitattributes")).unwrap_or_default();
    assert!(!attrs.contains("evctl-head"), "{attrs}");
}

#[test]
fn a_pull_between_two_clones_that_both_decided_does_not_stop() {
    let w = World::new();
    let origin = repo_with_driver(&w);
    let bare = tempfile::tempdir().expect("bare");
    let bare_path = bare.path().join("r.git");
    let bare_s = bare_path.to_str().expect("utf8");
    git(origin.path(), &["clone", "-q", "--bare", ".", bare_s]);
    let clone = |name: &str| {
        let dir = tempfile::tempdir().expect("clone dir");
        let path = dir.path().join(name);
        git(dir.path(), &["clone", "-q", bare_s, name]);
        git(&path, &["config", "user.name", "Dev"]);
        git(&path, &["config", "user.email", "dev@example.invalid"]);
        // A fresh clone registers the driver in its own config.
        w.evctl(&path, &["hooks", "install"]).ok();
        (dir, path)
    };
    let (_d1, one) = clone("one");
    let (_d2, two) = clone("two");
    decide_one(&w, &one, "shard the queue");
    commit_all(&one, "one decides");
    git(&one, &["push", "-q", "origin", "main"]);
    decide_one(&w, &two, "keep sqlite");
    commit_all(&two, "two decides");
    let r = w.git(
        &two,
        &["pull", "-q", "--no-rebase", "--no-edit", "origin", "main"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        decisions(&w, &two),
        vec!["\"keep sqlite\"", "\"shard the queue\""]
    );
    assert_eq!(w.evctl(&two, &["verify"]).code, 0);
    upstream_agrees(&w, &two, &["keep sqlite", "shard the queue"]);
}

/// Agents in parallel worktrees: three worktrees of one repository (the gate and the merge driver
/// installed once, in the shared hooks directory and config), each deciding, running its checks
/// and committing at the same time, then merged back one by one: every commit passes, and every
/// decision survives the merges.
#[test]
fn three_worktrees_decide_commit_at_once_and_merge_back_keeping_every_decision() {
    let w = World::new();
    let repo = repo_with_driver(&w);
    let p = repo.path();
    let trees = tempfile::tempdir().expect("worktrees");
    let names = ["one", "two", "three"];
    for n in names {
        let dir = trees.path().join(n);
        git(
            p,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                n,
                dir.to_str().expect("utf8"),
                "main",
            ],
        );
    }
    let dirs: Vec<(String, std::path::PathBuf)> = names
        .iter()
        .map(|n| (n.to_string(), trees.path().join(n)))
        .collect();
    let w = &w;
    std::thread::scope(|s| {
        for (n, dir) in &dirs {
            s.spawn(move || {
                std::fs::write(dir.join(format!("{n}.txt")), "x\n").expect("write");
                let r = w
                    .evctl(
                        dir,
                        &[
                            "decide",
                            &format!("worktree {n} decides"),
                            "--assume",
                            "its own reason",
                            "--assume-test",
                            &format!("test -f {n}.txt"),
                            "--counter-test",
                            &format!("test -f {n}.nope"),
                            "--on-platform",
                            "local",
                            "--triggered-by",
                            &format!("{n}.txt"),
                            "--surface",
                            "s",
                            "--blame",
                            "Agent",
                        ],
                    )
                    .ok();
                assert!(r.stdout.starts_with("recorded "), "{r:?}");
                w.evctl(dir, &["check", "--run", "--platform", "local"])
                    .ok();
                git(dir, &["add", "-A"]);
                let c = w.git(dir, &["commit", "-q", "-m", &format!("{n} decides")]);
                assert_eq!(c.code, 0, "{n}: {c:?}");
            });
        }
    });
    for n in names {
        let m = w.git(p, &["merge", "-q", "--no-edit", n]);
        assert_eq!(m.code, 0, "merging {n}: {m:?}");
    }
    let want: Vec<String> = {
        let mut v: Vec<String> = names
            .iter()
            .map(|n| format!("\"worktree {n} decides\""))
            .collect();
        v.sort();
        v
    };
    assert_eq!(decisions(w, p), want);
    assert_eq!(w.evctl(p, &["verify"]).code, 0);
    upstream_agrees(
        w,
        p,
        &[
            "worktree one decides",
            "worktree two decides",
            "worktree three decides",
        ],
    );
}

/// git's octopus strategy never runs a merge driver: an octopus of branches that each decided
/// stops on `.evolving/HEAD`. It stops cleanly (git takes the whole merge back, nothing is lost,
/// the store reads as before), and the same branches merged one at a time keep every decision.
#[test]
fn an_octopus_of_deciding_branches_stops_cleanly_and_merges_one_at_a_time() {
    let w = World::new();
    let repo = repo_with_driver(&w);
    let p = repo.path();
    let mut ids = Vec::new();
    for (branch, text) in [
        ("a", "shard the queue"),
        ("b", "keep sqlite"),
        ("c", "cache the index"),
    ] {
        git(p, &["checkout", "-q", "-b", branch, "main"]);
        ids.push(decide_one(&w, p, text));
        commit_all(p, branch);
    }
    git(p, &["checkout", "-q", "main"]);
    let before = w.git(p, &["rev-parse", "HEAD"]).stdout;
    let o = w.git(p, &["merge", "--no-edit", "a", "b", "c"]);
    assert_ne!(
        o.code, 0,
        "git's octopus ran a merge driver after all? {o:?}"
    );
    assert_eq!(w.git(p, &["rev-parse", "HEAD"]).stdout, before);
    assert_eq!(w.git(p, &["status", "--porcelain"]).stdout, "");
    assert_eq!(w.evctl(p, &["list"]).ok().stdout, "no decisions yet\n");
    for branch in ["a", "b", "c"] {
        let m = w.git(p, &["merge", "-q", "--no-edit", branch]);
        assert_eq!(m.code, 0, "{branch}: {m:?}");
    }
    assert_eq!(
        decisions(&w, p),
        vec![
            "\"cache the index\"",
            "\"keep sqlite\"",
            "\"shard the queue\""
        ]
    );
    assert_eq!(w.evctl(p, &["verify"]).code, 0);
    let log = w.evctl(p, &["log"]).ok();
    for id in &ids {
        assert!(log.stdout.contains(id.as_str()), "log lacks {id}: {log:?}");
    }
    upstream_agrees(
        &w,
        p,
        &["shard the queue", "keep sqlite", "cache the index"],
    );
}
