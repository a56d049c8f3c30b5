//! The write surface beyond decide — propose, ratify, pending, guard, supersede — against
//! upstream ev 0.1.32: the same command sequence in twin repositories gives the same stdout,
//! stderr and exit code at every step, the same tick files, and a store upstream verifies.

use std::path::Path;

use evd_e2e::{chain, without_held_since, Repo, Run, World};

const SHA: &str = "d308afac1b2c3d4e5f60718293a4b5c6d7e8f901";

/// Twin repositories driven step by step.
struct Twins {
    w: World,
    ours: Repo,
    theirs: Repo,
}

impl Twins {
    fn new() -> Twins {
        let t = Twins {
            w: World::new(),
            ours: Repo::new(),
            theirs: Repo::new(),
        };
        t.step(&["init"]);
        t
    }

    fn run_both(&self, env: &[(&str, &str)], args: &[&str]) -> (Run, Run) {
        (
            self.w.evctl_env(self.ours.path(), env, args),
            self.w.ev_env(self.theirs.path(), env, args),
        )
    }

    /// Run one step in both and require the same answer; returns ours.
    fn step_env(&self, env: &[(&str, &str)], args: &[&str]) -> Run {
        let (a, b) = self.run_both(env, args);
        assert_eq!(
            (a.code, &a.stdout, &a.stderr),
            (b.code, &b.stdout, &b.stderr),
            "step {args:?}"
        );
        a
    }

    fn step(&self, args: &[&str]) -> Run {
        self.step_env(&[], args)
    }

    fn head(&self) -> String {
        self.ours.head_file()
    }

    /// Same files (modulo held_since), same HEAD, and upstream verifies ours.
    fn same_store(&self) {
        assert_eq!(self.ours.tick_files(), self.theirs.tick_files());
        assert_eq!(self.ours.head_file(), self.theirs.head_file());
        for f in self.ours.tick_files() {
            let read = |r: &Repo| {
                std::fs::read_to_string(r.ev_dir().join("ticks").join(&f)).expect("tick")
            };
            assert_eq!(
                without_held_since(&read(&self.ours)),
                without_held_since(&read(&self.theirs)),
                "{f}"
            );
        }
        let v = self.w.ev(self.ours.path(), &["verify"]).ok();
        assert!(v.stdout.contains("chain intact"));
        for args in [&["list"][..], &["log"], &["pending"], &["verify"]] {
            self.step(args);
        }
    }
}

fn id_of(r: &Run, word: usize) -> String {
    r.stdout
        .split_whitespace()
        .nth(word)
        .expect("an id in the answer")
        .to_string()
}

#[test]
fn the_agent_lane_propose_pending_ratify_matches_upstream() {
    let t = Twins::new();
    let agent = [("EV_AGENT_ID", "agent:mac")];
    let p = t.step_env(
        &agent,
        &[
            "propose",
            "cache is write-through",
            "--assume",
            "writes hit the DB",
            "--source-ref",
            "round-7",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(p.stdout.trim()).expect("envelope");
    let proposal = v["id"].as_str().expect("id").to_string();
    assert_eq!(v["kind"], "ev-proposed");
    // Idempotent per source_ref, in both forms.
    t.step_env(
        &agent,
        &[
            "propose",
            "cache is write-through",
            "--assume",
            "writes hit the DB",
            "--source-ref",
            "round-7",
        ],
    );
    t.step_env(
        &agent,
        &[
            "propose",
            "something else",
            "--source-ref",
            "round-7",
            "--json",
        ],
    );
    // No agent id: the literal `agent`; explicit blame wins.
    t.step(&[
        "propose",
        "second idea",
        "--reject",
        "Kafka: too heavy",
        "--jurisdiction",
        "C",
    ]);
    t.step(&[
        "propose",
        "third idea",
        "--blame",
        "planner-bot",
        "--observe",
        "round R12",
    ]);
    for forbidden in [
        &["propose", "x", "--observe", "--revisit"][..],
        &["propose", "x", "--assume", "a", "--assume-test", "t"],
        &["propose", "x", "--authority", "user-ruled"],
        &["propose", "x", "--assume", "a", "--dry-run"],
        &["propose", "x", "--blame", ""],
        &["propose"],
    ] {
        t.step(forbidden);
    }
    t.step(&["pending"]);
    t.step(&["pending", "--source-ref", "round-7"]);
    t.step(&["pending", "--source-ref", "nope"]);
    t.step(&["ratify", &proposal, "--blame", "  "]);
    t.step(&["ratify", "nope", "--blame", "x"]);
    let r = t.step(&["ratify", &proposal, "--blame", "Wang Yu"]);
    let child = id_of(&r, 3);
    t.step(&["ratify", &child, "--blame", "x"]);
    // Ratifying again is not refused; the collapse hides the duplicate.
    t.step(&["ratify", &proposal, "--blame", "Ana"]);
    // A ratified proposal still dedups a re-proposal.
    t.step_env(
        &agent,
        &[
            "propose",
            "cache is write-through",
            "--source-ref",
            "round-7",
        ],
    );
    t.same_store();
}

#[test]
fn guard_binds_a_test_to_head_and_refuses_like_upstream() {
    let t = Twins::new();
    t.step(&[
        "decide",
        "build our own retrieval",
        "--assume",
        "schema stays frozen",
        "--assume",
        "team ok",
        "--revisit",
        "Q3",
        "--reject",
        "pgvector: locks the schema",
        "--authority",
        "user-ruled",
        "--jurisdiction",
        "A",
        "--source-ref",
        "R7",
        "--blame",
        "b",
    ]);
    let head = t.head();
    let liveness = [
        "--counter-test",
        "pytest t.py::flips",
        "--on-platform",
        "mac",
        "--on-platform",
        "linux-ci",
        "--triggered-by",
        "schema.sql",
        "--surface",
        "schema-ddl",
        "--verified-at-sha",
        SHA,
        "--blame",
        "Wang Yu",
    ];
    let guard = |target: &[&str], extra: &[&str]| {
        let mut args = vec!["guard", "pytest t.py", head.as_str()];
        args.extend_from_slice(target);
        args.extend_from_slice(&liveness);
        args.extend_from_slice(extra);
        t.step(&args)
    };
    guard(&[], &[]); // two unbound grounds: name one
    guard(&["1"], &[]); // a person ground
    guard(&["9"], &[]);
    guard(&["nope"], &[]);
    guard(&["locks the schema"], &[]); // a rejected road needs user-ruled
    guard(&["0"], &["--authority", "god"]);
    t.step(&["guard", "t", "nope", "--counter-test", "c"]);
    t.step(&[
        "guard",
        "t",
        &head,
        "0",
        "--counter-test",
        " ",
        "--on-platform",
        "p",
        "--triggered-by",
        "f",
        "--surface",
        "s",
        "--verified-at-sha",
        SHA,
    ]);
    t.step(&[
        "guard",
        "t",
        &head,
        "0",
        "--counter-test",
        "c",
        "--on-platform",
        "p",
        "--verified-at-sha",
        SHA,
    ]);
    t.step(&[
        "guard",
        "t",
        &head,
        "0",
        "--counter-test",
        "c",
        "--on-platform",
        "p",
        "--triggered-by",
        "f",
        "--surface",
        "s",
        "--verified-at-sha",
        "bad",
    ]);
    let r = guard(&["schema stays frozen"], &[]);
    let child = id_of(&r, 3);
    // Only HEAD can be amended, and a bound ground cannot be bound again.
    let mut again = vec!["guard", "pytest t.py", head.as_str(), "0"];
    again.extend_from_slice(&liveness);
    t.step(&again);
    let mut bound = vec!["guard", "pytest u.py", child.as_str(), "0"];
    bound.extend_from_slice(&liveness);
    t.step(&bound);
    // A tripwire on the rejected road of the child, with user-ruled.
    let mut trip = vec!["guard", "! grep -q pgvector deps", child.as_str(), "2"];
    trip.extend_from_slice(&liveness);
    trip.extend_from_slice(&["--authority", "user-ruled"]);
    t.step(&trip);
    t.same_store();
    // The guard parent and child are both current (no edge hides the parent).
    assert!(t
        .w
        .evctl(t.ours.path(), &["list"])
        .ok()
        .stdout
        .contains(&head));
}

#[test]
fn supersede_retags_and_overturns_like_upstream() {
    let t = Twins::new();
    t.step(&[
        "decide",
        "http handling = buffer",
        "--assume",
        "simple",
        "--assume",
        "fast",
        "--blame",
        "b",
    ]);
    let first = t.head();
    t.step(&[
        "decide",
        "no Redis",
        "--assume",
        "db coordinates pods",
        "--assume-test",
        "pytest t_redis.py",
        "--counter-test",
        "pytest t_redis.py::flips",
        "--on-platform",
        "linux-ci",
        "--triggered-by",
        "pyproject.toml",
        "--surface",
        "deps",
        "--verified-at-sha",
        SHA,
        "--blame",
        "b",
    ]);
    let tested = t.head();
    for args in [
        &["supersede", first.as_str()][..],
        &["supersede", first.as_str(), "--bogus", "x"],
        &["supersede", first.as_str(), "--blame"],
        &["supersede", "nope", "--authority", "user-ruled"],
        &[
            "supersede",
            first.as_str(),
            "--jurisdiction",
            "E",
            "--authority",
            "bad",
        ],
        &["supersede", first.as_str(), "--provenance", "robot"],
        &[
            "supersede",
            tested.as_str(),
            "--jurisdiction",
            "D",
            "--blame",
            "x",
        ],
        &["supersede", first.as_str(), "-x"],
        &["supersede", "nope", "new ruling", "--assume", "a"],
        &[
            "supersede",
            first.as_str(),
            "new ruling",
            "--reject",
            "X: y",
            "--blame",
            "b",
        ],
        &[
            "supersede",
            first.as_str(),
            "new ruling",
            "--assume",
            "a",
            "--dry-run",
        ],
        &[
            "supersede",
            first.as_str(),
            "new ruling",
            "--assume",
            "a",
            "--from-git",
            "HEAD",
        ],
    ] {
        t.step(args);
    }
    let r = t.step(&[
        "supersede",
        first.as_str(),
        "--authority",
        "user-ruled",
        "--blame",
        "Wang Yu",
    ]);
    let retagged = id_of(&r, 1);
    t.step(&[
        "supersede",
        retagged.as_str(),
        "--authority",
        "user-ruled",
        "--blame",
        "Wang Yu",
    ]);
    t.step(&[
        "supersede",
        retagged.as_str(),
        "--provenance",
        "agent-proposed",
        "--jurisdiction",
        "C",
        "--blame",
        "x",
    ]);
    t.step(&[
        "supersede",
        tested.as_str(),
        "http handling = stream",
        "--assume",
        "buffering OOMs at scale",
        "--blame",
        "You",
    ]);
    t.same_store();
}

#[test]
fn concurrent_proposes_with_one_source_ref_record_exactly_one_tick() {
    let w = std::sync::Arc::new(World::new());
    let repo = std::sync::Arc::new(Repo::new());
    w.evctl(repo.path(), &["init"]).ok();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let (w, repo) = (std::sync::Arc::clone(&w), std::sync::Arc::clone(&repo));
            std::thread::spawn(move || {
                let agent = format!("agent-{i}");
                let r = w.evctl_env(
                    repo.path(),
                    &[("EV_AGENT_ID", agent.as_str())],
                    &[
                        "propose",
                        "shard the queue",
                        "--assume",
                        "load doubled",
                        "--source-ref",
                        "R42",
                        "--json",
                    ],
                );
                let v: serde_json::Value =
                    serde_json::from_str(r.ok().stdout.trim()).expect("envelope");
                v["id"].as_str().expect("id").to_string()
            })
        })
        .collect();
    let ids: Vec<String> = handles
        .into_iter()
        .map(|h| h.join().expect("client"))
        .collect();
    assert_eq!(
        repo.tick_files().len(),
        1,
        "exactly one tick for one source_ref"
    );
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "every client got the same proposal: {ids:?}"
    );
    assert_eq!(chain(&repo), vec![ids[0].clone()]);
}

impl Twins {
    /// Set a tick's `held_since` to `when` in both repositories (the tick files stay identical).
    fn set_held_since(&self, id: &str, when: &str) {
        for r in [&self.ours, &self.theirs] {
            let path = r.ev_dir().join("ticks").join(id);
            let text = std::fs::read_to_string(&path).expect("tick");
            let mut v: serde_json::Value = serde_json::from_str(&text).expect("tick is JSON");
            v["held_since"] = when.into();
            let mut out = serde_json::to_string_pretty(&v).expect("json");
            out.push('\n');
            std::fs::write(&path, out).expect("write tick");
        }
    }

    /// `log`, plain and rich, the same in both; returns our plain rows.
    /// `log` in both: the same chain from HEAD. evctl then shows the tips off that chain (a
    /// deliberate deviation: upstream shows HEAD's chain only), which are left out here and
    /// returned apart.
    fn log_step(&self, args: &[&str]) -> (Run, Vec<String>) {
        let (mut a, b) = self.run_both(&[], args);
        let lines: Vec<&str> = a.stdout.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("fork\t") || l.contains("fork: tip "))
            .unwrap_or(lines.len());
        let forks: Vec<String> = lines[at..].iter().map(|l| l.to_string()).collect();
        a.stdout = lines[..at].iter().map(|l| format!("{l}\n")).collect();
        assert_eq!(
            (a.code, &a.stdout, &a.stderr),
            (b.code, &b.stdout, &b.stderr),
            "step {args:?}"
        );
        (a, forks)
    }

    fn logs(&self) -> Vec<String> {
        self.log_step(&["--color", "always", "log"]);
        let (r, _) = self.log_step(&["log"]);
        assert_eq!(r.code, 0, "{r:?}");
        r.stdout.lines().map(str::to_string).collect()
    }
}

/// The plain log row of `id`.
fn row_of<'a>(rows: &'a [String], id: &str) -> &'a str {
    rows.iter()
        .find(|r| r.starts_with(id))
        .unwrap_or_else(|| panic!("no row for {id} in {rows:?}"))
}

#[test]
fn log_marks_each_superseded_tick_with_its_newest_child_like_upstream() {
    let t = Twins::new();
    t.step(&[
        "decide",
        "queue = sqs",
        "--assume",
        "managed",
        "--blame",
        "b",
    ]);
    let first = t.head();
    t.step(&[
        "decide",
        "cache = none",
        "--assume",
        "small",
        "--blame",
        "b",
    ]);
    let untouched = t.head();
    // Two re-tags of the same ruling, then an overturn of the second one.
    let r = t.step(&[
        "supersede",
        first.as_str(),
        "--authority",
        "user-ruled",
        "--blame",
        "b",
    ]);
    let retag_a = id_of(&r, 1);
    let r = t.step(&[
        "supersede",
        first.as_str(),
        "--jurisdiction",
        "A",
        "--blame",
        "b",
    ]);
    let retag_b = id_of(&r, 1);
    let r = t.step(&[
        "supersede",
        retag_b.as_str(),
        "queue = kafka",
        "--assume",
        "ordering matters",
        "--blame",
        "b",
    ]);
    let overturn = id_of(&r, 1);
    t.same_store();

    // Real held_since values: the later child wins; the overturn marks its parent; the head and
    // an untouched ruling stay unmarked; the status column stays what is on disk.
    let rows = t.logs();
    let (a, b) = (retag_a.as_str(), retag_b.as_str());
    assert!(row_of(&rows, &first).ends_with(&format!("\tsuperseded-by:{b}")));
    assert!(row_of(&rows, &first).starts_with(&format!("{first}\tlive\t")));
    assert!(row_of(&rows, b).ends_with(&format!("\tsuperseded-by:{overturn}")));
    assert!(!row_of(&rows, a).contains("superseded-by"));
    assert!(!row_of(&rows, &overturn).contains("superseded-by"));
    assert!(!row_of(&rows, &untouched).contains("superseded-by"));
    assert_eq!(
        rows.iter().filter(|r| r.contains("superseded-by")).count(),
        2
    );

    // held_since decides before the id, compared as text.
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    t.set_held_since(lo, "2031-01-01T00:00:00Z");
    t.set_held_since(hi, "2030-12-31T23:59:59.999Z");
    let rows = t.logs();
    assert!(row_of(&rows, &first).ends_with(&format!("superseded-by:{lo}")));

    // A tie on held_since goes to the greater id.
    t.set_held_since(hi, "2031-01-01T00:00:00Z");
    let rows = t.logs();
    assert!(row_of(&rows, &first).ends_with(&format!("superseded-by:{hi}")));

    // A child off the walked lineage still marks: HEAD moved back to before the children.
    for r in [&t.ours, &t.theirs] {
        std::fs::write(r.ev_dir().join("HEAD"), &untouched).expect("HEAD");
    }
    let rows = t.logs();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(row_of(&rows, &first).ends_with(&format!("superseded-by:{hi}")));
    // The children left off HEAD's chain are shown after it, each tip back to where it joins.
    let (_, forks) = t.log_step(&["log"]);
    assert!(
        forks
            .first()
            .is_some_and(|l| l.starts_with("fork\t") && l.contains("\tjoins:")),
        "{forks:?}"
    );
    assert!(forks.iter().any(|l| l.contains(&overturn)), "{forks:?}");

    // A store that cannot be read whole marks nothing (and log still walks).
    for r in [&t.ours, &t.theirs] {
        std::fs::write(r.ev_dir().join("ticks").join("notes.txt"), "not json").expect("write");
    }
    let (r, _) = t.log_step(&["log"]);
    assert!(!r.stdout.contains("superseded-by"), "{r:?}");
    t.log_step(&["--color", "always", "log"]);
}

#[test]
fn a_refused_write_writes_nothing() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    w.evctl(
        repo.path(),
        &["decide", "x", "--assume", "a", "--blame", "b"],
    )
    .ok();
    let before = snapshot(repo.ev_dir().as_path());
    for args in [
        &["propose", "y", "--assume-test", "t"][..],
        &["ratify", "000000000000", "--blame", "b"],
        &["guard", "t", "000000000000", "--counter-test", "c"],
        &["supersede", "000000000000", "--authority", "user-ruled"],
        &[
            "decide",
            "z",
            "--assume",
            "a",
            "--jurisdiction",
            "C",
            "--assume-test",
            "t",
            "--counter-test",
            "c",
            "--on-platform",
            "p",
            "--triggered-by",
            "f",
            "--surface",
            "s",
            "--verified-at-sha",
            SHA,
            "--blame",
            "b",
        ],
    ] {
        let r = w.evctl(repo.path(), args);
        assert_eq!(r.code, 1, "{args:?} must be refused: {r:?}");
    }
    assert_eq!(
        snapshot(repo.ev_dir().as_path()),
        before,
        "ticks and HEAD untouched"
    );
}

/// Every file under ticks/ plus HEAD, with contents.
fn snapshot(ev: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(ev.join("ticks"))
        .expect("ticks")
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect();
    v.push(("HEAD".into(), std::fs::read(ev.join("HEAD")).expect("HEAD")));
    v.sort();
    v
}
