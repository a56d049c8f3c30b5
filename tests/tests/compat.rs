//! Byte compatibility with upstream ev 0.1.32, both directions, through the real evctl → evd
//! path: the same tick bytes, the same refusals, the same list/log/show/verify answers on stores
//! upstream made (clean and tampered), and stores we made that upstream accepts.

use std::path::Path;

use evd_e2e::{chain, gen_store, without_held_since, Repo, Run, World};

const SHA: &str = "d308afac1b2c3d4e5f60718293a4b5c6d7e8f901";

fn genesis_args() -> Vec<&'static str> {
    vec![
        "decide",
        "freeze the retrieval schema for v2",
        "--observe",
        "evaluating retrieval backend",
        "--assume",
        "team still wants a frozen schema",
        "--revisit",
        "Q3 infra review",
        "--reject",
        "pgvector: pgvector would lock our schema",
        "--blame",
        "Wang Yu",
    ]
}

#[test]
fn the_genesis_example_lands_with_upstreams_bytes() {
    let w = World::new();
    let ours = Repo::new();
    let theirs = Repo::new();
    w.evctl(ours.path(), &["init"]).ok();
    w.ev(theirs.path(), &["init"]).ok();
    let r = w.evctl(ours.path(), &genesis_args()).ok();
    assert_eq!(r.stdout, "recorded e2b337f53a1f (2 ground(s))\n");
    w.ev(theirs.path(), &genesis_args()).ok();

    assert_eq!(ours.tick_files(), vec!["e2b337f53a1f"]);
    assert_eq!(ours.head_file(), "e2b337f53a1f");
    let a = std::fs::read_to_string(ours.ev_dir().join("ticks/e2b337f53a1f")).expect("ours");
    let b = std::fs::read_to_string(theirs.ev_dir().join("ticks/e2b337f53a1f")).expect("theirs");
    assert_eq!(without_held_since(&a), without_held_since(&b));
    assert!(!a.ends_with('\n'), "no trailing newline");
    // held_since is RFC 3339 UTC with a Z.
    let v: serde_json::Value = serde_json::from_str(&a).expect("json");
    let held = v["held_since"].as_str().expect("held_since");
    assert!(held.ends_with('Z') && held.starts_with("20"), "{held}");
    // The init layout is upstream's, byte for byte.
    for f in ["HEAD", "config"] {
        let x = std::fs::read(ours.ev_dir().join(f)).expect("ours");
        let y = std::fs::read(theirs.ev_dir().join(f)).expect("theirs");
        if f == "config" {
            assert_eq!(x, y, "{f}");
        }
    }
    // The event upstream appends for a decide has the same keys.
    let ev_line =
        std::fs::read_to_string(ours.ev_dir().join("results/events.jsonl")).expect("events");
    let e: serde_json::Value = serde_json::from_str(ev_line.trim()).expect("event json");
    assert_eq!(e["op"], "decide");
    assert_eq!(e["tick_id"], "e2b337f53a1f");
    assert_eq!(e["age"], "fresh");
}

/// Run the same decide arguments through upstream and evctl in twin directories and compare
/// exit code, stdout and stderr exactly.
fn same_answer(w: &World, ours: &Path, theirs: &Path, args: &[&str]) {
    let a = w.evctl(ours, args);
    let b = w.ev(theirs, args);
    assert_eq!(
        (a.code, &a.stdout, &a.stderr),
        (b.code, &b.stdout, &b.stderr),
        "args {args:?}"
    );
}

#[test]
fn decide_refusals_and_dry_runs_match_upstream() {
    let w = World::new();
    let ours = Repo::new();
    let theirs = Repo::new();
    w.evctl(ours.path(), &["init"]).ok();
    w.ev(theirs.path(), &["init"]).ok();
    let test = [
        "--assume-test",
        "pytest t.py",
        "--counter-test",
        "pytest t.py::flips",
        "--on-platform",
        "linux-ci",
        "--triggered-by",
        "pyproject.toml",
        "--surface",
        "deps",
    ];
    let mut cases: Vec<Vec<&str>> = vec![
        vec!["decide"],
        vec!["decide", "x", "--revisit"],
        vec!["decide", "x", "--bogus", "y"],
        vec!["decide", "x", "--surface", "s"],
        vec!["decide", "x", "--reject", "nocolon"],
        vec!["decide", "x", "--reject", " : y"],
        vec!["decide", "  ", "--blame", "b"],
        vec!["decide", "x", "--blame", "  "],
        vec!["decide", "x", "--assume", "", "--blame", "b"],
        vec![
            "decide",
            "x",
            "--reject",
            "R: why",
            "--revisit",
            "q",
            "--blame",
            "b",
        ],
        vec![
            "decide",
            "x",
            "--reject",
            "R: why",
            "--assume-test",
            "t",
            "--blame",
            "b",
        ],
        vec![
            "decide",
            "x",
            "--assume",
            "a",
            "--revisit",
            "r",
            "--assume-test",
            "t",
            "--blame",
            "b",
        ],
        vec![
            "decide",
            "x",
            "--assume",
            "a",
            "--assume-test",
            "t",
            "--blame",
            "b",
        ],
        vec![
            "decide",
            "x",
            "--assume",
            "a",
            "--assume-test",
            "t",
            "--counter-test",
            "  ",
            "--blame",
            "b",
        ],
        vec![
            "decide",
            "x",
            "--assume",
            "a",
            "--assume-test",
            "t",
            "--counter-test",
            "c",
            "--on-platform",
            "p",
            "--blame",
            "b",
        ],
        vec![
            "decide",
            "x",
            "--assume",
            "a",
            "--counter-test",
            "c",
            "--blame",
            "b",
        ],
        vec!["decide", "x", "--jurisdiction", "E"],
        vec!["decide", "x", "--authority", "god"],
        vec!["decide", "x", "--source-ref", ""],
        vec!["decide", "--from-git", "-x"],
        vec!["decide", "x", "--from-git", "HEAD", "--blame", "b"],
        vec!["decide", "--from-git", "nope", "--blame", "b"],
        vec!["decide", "--from-git", "HEAD", "--dry-run"],
        vec![
            "decide",
            "--dry-run",
            "we self-improve and self-tune",
            "--assume",
            "a",
            "--blame",
            "b",
        ],
        vec![
            "decide",
            "we self-improve",
            "--dry-run",
            "--assume",
            "a",
            "--blame",
            "b",
        ],
        vec![
            "decide",
            "x",
            "--observe",
            "--dry-run",
            "--blame",
            "b",
            "--dry-run",
        ],
        vec![
            "decide",
            "x",
            "--assume",
            "--color",
            "--blame",
            "b",
            "--dry-run",
        ],
        vec!["decide", "-x", "--blame", "b"],
        vec!["decide", "--", "x", "--blame", "b", "--dry-run"],
    ];
    let mut with_test = |extra: &[&'static str]| {
        let mut v = vec!["decide", "no Redis", "--assume", "db coordinates pods"];
        v.extend(test);
        v.extend_from_slice(extra);
        cases.push(v);
    };
    with_test(&["--verified-at-sha", "XYZ", "--blame", "b"]);
    with_test(&[
        "--verified-at-sha",
        SHA,
        "--jurisdiction",
        "C",
        "--blame",
        "b",
    ]);
    with_test(&[
        "--verified-at-sha",
        SHA,
        "--reject",
        "Redis: new infra",
        "--authority",
        "user-ruled",
        "--source-ref",
        "R2289",
        "--observe",
        "round R2289",
        "--blame",
        "Wang Yu",
        "--dry-run",
    ]);
    with_test(&[
        "--on-platform",
        "mac",
        "--on-platform",
        "linux-ci",
        "--verified-at-sha",
        SHA,
        "--jurisdiction",
        "A",
        "--blame",
        "b",
        "--dry-run",
    ]);
    for args in &cases {
        same_answer(&w, ours.path(), theirs.path(), args);
    }
    // Refusals and dry runs wrote nothing.
    assert!(ours.tick_files().is_empty());
    assert_eq!(ours.head_file(), "");

    // Outside any store: validation first, then the no-store refusal.
    let bare_a = tempfile::tempdir().expect("tmp");
    let bare_b = tempfile::tempdir().expect("tmp");
    same_answer(
        &w,
        bare_a.path(),
        bare_b.path(),
        &["decide", "x", "--assume", "", "--blame", "b"],
    );
    same_answer(
        &w,
        bare_a.path(),
        bare_b.path(),
        &["decide", "x", "--blame", "b"],
    );
    // A store outside git: no author, and no HEAD for verified_at_sha.
    w.evctl(bare_a.path(), &["init"]).ok();
    w.ev(bare_b.path(), &["init"]).ok();
    same_answer(&w, bare_a.path(), bare_b.path(), &["decide", "x"]);
    let mut no_sha = vec!["decide", "x", "--assume", "a", "--blame", "b"];
    no_sha.extend(test);
    same_answer(&w, bare_a.path(), bare_b.path(), &no_sha);
}

#[test]
fn empty_references_upstream_would_write_unreadably_are_refused() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--assume", "a", "--revisit", ""],
            "error: person check ref is empty\n",
        ),
        (
            &[
                "--assume",
                "a",
                "--assume-test",
                "",
                "--counter-test",
                "c",
                "--on-platform",
                "p",
                "--triggered-by",
                "f",
                "--surface",
                "s",
            ],
            "error: test check ref is empty\n",
        ),
        (
            &[
                "--assume",
                "a",
                "--assume-test",
                "t",
                "--counter-test",
                "c",
                "--on-platform",
                "",
                "--triggered-by",
                "f",
                "--surface",
                "s",
            ],
            "error: liveness.platforms has an empty element\n",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["decide", "x", "--blame", "b", "--verified-at-sha", SHA];
        args.extend_from_slice(extra);
        let r = w.evctl(repo.path(), &args);
        assert_eq!((r.code, r.stderr.as_str()), (1, want), "{args:?}");
    }
    assert!(repo.tick_files().is_empty());
}

/// A store built by upstream from a sequence of decides, plus a generated one.
fn upstream_store(w: &World) -> Repo {
    let repo = Repo::new();
    w.ev(repo.path(), &["init"]).ok();
    w.ev(repo.path(), &genesis_args()).ok();
    let steps: Vec<Vec<&str>> = vec![
        vec![
            "decide",
            "no Redis",
            "--observe",
            "round R2289",
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
            "--reject",
            "Redis: new infra",
            "--authority",
            "user-ruled",
            "--jurisdiction",
            "A",
            "--source-ref",
            "R2289",
            "--blame",
            "Wang Yu",
        ],
        vec![
            "decide",
            "café — “quoted” \t tab",
            "--assume",
            "non-ascii ✓",
            "--jurisdiction",
            "C",
            "--blame",
            "Ana",
        ],
        vec![
            "decide",
            "freeze the schema",
            "--assume",
            "schema",
            "--authority",
            "agent-disposable",
            "--source-ref",
            "{\"a\":1}",
            "--blame",
            "Mei",
        ],
    ];
    for s in steps {
        w.ev(repo.path(), &s).ok();
    }
    repo
}

fn same_read(w: &World, dir: &Path, args: &[&str]) {
    let a = w.evctl(dir, args);
    let b = w.ev(dir, args);
    assert_eq!(
        (a.code, &a.stdout, &a.stderr),
        (b.code, &b.stdout, &b.stderr),
        "{args:?}"
    );
}

/// verify output order is not meaningful upstream: compare line sets.
fn same_verify(w: &World, dir: &Path) -> Run {
    let a = w.evctl(dir, &["verify"]);
    let b = w.ev(dir, &["verify"]);
    let sorted = |s: &str| {
        let mut v: Vec<&str> = s.lines().collect();
        v.sort_unstable();
        v.join("\n")
    };
    assert_eq!(a.code, b.code, "verify exit\nours: {a:?}\ntheirs: {b:?}");
    assert_eq!(sorted(&a.stdout), sorted(&b.stdout), "verify stdout");
    assert_eq!(sorted(&a.stderr), sorted(&b.stderr), "verify stderr");
    a
}

#[test]
fn upstream_stores_read_identically() {
    let w = World::new();
    let repo = upstream_store(&w);
    for args in [
        &["list"][..],
        &["log"],
        &["--color", "always", "list"],
        &["--color", "always", "log"],
        &["--color", "always", "--plain", "list"],
        &["show", "e2b337f53a1f"],
        &["show", "nope"],
        &["show", "E2B337F53A1F"],
    ] {
        same_read(&w, repo.path(), args);
    }
    for id in repo.tick_files() {
        same_read(&w, repo.path(), &["show", &id]);
    }
    // The rich form's ASCII glyphs, and NO_COLOR beating --color always.
    for env in [("EV_ASCII", "1"), ("NO_COLOR", "")] {
        let a = w.evctl_env(repo.path(), &[env], &["--color", "always", "list"]);
        let b = w.ev_env(repo.path(), &[env], &["--color", "always", "list"]);
        assert_eq!(a.stdout, b.stdout, "{env:?}");
    }
    assert_eq!(same_verify(&w, repo.path()).code, 0);

    let generated = tempfile::tempdir().expect("tmp");
    gen_store(generated.path(), 600, 7);
    for args in [&["list"][..], &["log"]] {
        same_read(&w, generated.path(), args);
    }
    assert_eq!(same_verify(&w, generated.path()).code, 0);
    // Walking up: the same answers from a subdirectory.
    let sub = generated.path().join("deep/er");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let a = w.evctl(&sub, &["list"]).ok();
    let b = w.ev(generated.path(), &["list"]).ok();
    assert_eq!(a.stdout, b.stdout);
}

/// Copy a store directory tree (the .evolving part) into a fresh repo.
fn copy_store(from: &Repo) -> Repo {
    let to = Repo::new();
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(from.ev_dir())
        .arg(to.path())
        .status()
        .expect("cp");
    assert!(st.success());
    to
}

fn edit_json(repo: &Repo, id: &str, f: impl FnOnce(&mut serde_json::Value)) {
    let p = repo.ev_dir().join("ticks").join(id);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
    f(&mut v);
    std::fs::write(&p, serde_json::to_string_pretty(&v).expect("ser")).expect("write");
}

/// How a tampering case damages the store: a JSON edit of one tick on the chain (by position,
/// 0 = HEAD), or a change to the files themselves.
enum Damage {
    Edit(usize, fn(&mut serde_json::Value)),
    Remove(usize),
    Truncate(usize),
    Write(&'static str, &'static [u8]),
}

#[test]
fn tampered_upstream_stores_verify_and_list_like_upstream() {
    let w = World::new();
    let base = upstream_store(&w);
    let ids = chain(&base);
    let (last, middle) = (ids.len() - 1, 1);
    // (case, damage, verify exit code): a tolerated unknown top-level key is only a warning.
    let cases: Vec<(&str, Damage, i32)> = vec![
        (
            "edited decision",
            Damage::Edit(middle, |v| v["decision"] = "rewritten by hand".into()),
            1,
        ),
        (
            "wrong id field",
            Damage::Edit(0, |v| v["id"] = "000000000000".into()),
            1,
        ),
        (
            "blank blame",
            Damage::Edit(last, |v| v["blame"] = "  ".into()),
            1,
        ),
        (
            "unknown top-level key",
            Damage::Edit(middle, |v| v["reviewer"] = "x".into()),
            0,
        ),
        (
            "unknown ground key",
            Damage::Edit(last, |v| v["grounds"][0]["weight"] = 3.into()),
            1,
        ),
        (
            "bad jurisdiction",
            Damage::Edit(0, |v| v["jurisdiction"] = "Z".into()),
            1,
        ),
        (
            "C/D with a test",
            Damage::Edit(last - 1, |v| v["jurisdiction"] = "D".into()),
            1,
        ),
        (
            "lint words",
            Damage::Edit(middle, |v| {
                v["observe"] = "we Self-Improve and auto-close".into();
                v["provenance"] = "imported".into();
            }),
            1,
        ),
        ("deleted middle tick", Damage::Remove(middle), 1),
        ("not an object", Damage::Write("notes", b"[1,2]"), 1),
        ("truncated tick", Damage::Truncate(0), 1),
        (
            "binary junk",
            Damage::Write(".DS_Store", &[0xff, 0xfe, 0x00]),
            1,
        ),
    ];
    for (name, damage, want) in cases {
        let repo = copy_store(&base);
        let tick = |i: usize| repo.ev_dir().join("ticks").join(&ids[i]);
        match damage {
            Damage::Edit(i, f) => edit_json(&repo, &ids[i], f),
            Damage::Remove(i) => std::fs::remove_file(tick(i)).expect("rm"),
            Damage::Truncate(i) => {
                let t = std::fs::read_to_string(tick(i)).expect("read");
                std::fs::write(tick(i), &t[..t.len() / 2]).expect("write");
            }
            Damage::Write(file, bytes) => {
                std::fs::write(repo.ev_dir().join("ticks").join(file), bytes).expect("write")
            }
        }
        let r = same_verify(&w, repo.path());
        assert_eq!(r.code, want, "{name}: {r:?}");
        same_read(&w, repo.path(), &["list"]);
        same_read(&w, repo.path(), &["log"]);
    }
}

#[test]
fn stores_we_write_are_upstreams_stores() {
    let w = World::new();
    let ours = Repo::new();
    let theirs = Repo::new();
    w.evctl(ours.path(), &["init"]).ok();
    w.ev(theirs.path(), &["init"]).ok();
    let steps: Vec<Vec<&str>> = vec![
        genesis_args(),
        vec![
            "decide",
            "no Redis",
            "--observe",
            "round R2289",
            "--assume",
            "db coordinates pods",
            "--assume-test",
            "pytest t_redis.py",
            "--counter-test",
            "pytest t_redis.py::flips",
            "--on-platform",
            "mac",
            "--on-platform",
            "linux-ci",
            "--on-platform",
            "mac",
            "--triggered-by",
            "pyproject.toml",
            "--surface",
            "deps",
            "--verified-at-sha",
            SHA,
            "--reject",
            "Redis: new infra",
            "--authority",
            "user-ruled",
            "--jurisdiction",
            "B",
            "--source-ref",
            "R2289",
            "--blame",
            "  Wang Yu  ",
        ],
        vec![
            "decide",
            "esc: quote\" back\\ nl\n tab\t \u{1} é 😀",
            "--assume",
            "c",
            "--blame",
            "b",
        ],
        vec![
            "decide",
            "no grounds at all",
            "--jurisdiction",
            "D",
            "--source-ref",
            "{\"z\":1}",
        ],
    ];
    for s in &steps {
        let a = w.evctl(ours.path(), s).ok();
        let b = w.ev(theirs.path(), s).ok();
        assert_eq!(a.stdout, b.stdout, "{s:?}");
    }
    assert_eq!(ours.tick_files(), theirs.tick_files());
    assert_eq!(ours.head_file(), theirs.head_file());
    for f in ours.tick_files() {
        let a = std::fs::read_to_string(ours.ev_dir().join("ticks").join(&f)).expect("ours");
        let b = std::fs::read_to_string(theirs.ev_dir().join("ticks").join(&f)).expect("theirs");
        assert_eq!(without_held_since(&a), without_held_since(&b), "{f}");
    }
    // Upstream reads our store as its own.
    let v = w.ev(ours.path(), &["verify"]).ok();
    assert!(v.stdout.contains("chain intact"));
    for args in [&["list"][..], &["log"]] {
        same_read(&w, ours.path(), args);
    }
}

#[test]
fn no_store_answers_match_upstream() {
    let w = World::new();
    let a = tempfile::tempdir().expect("tmp");
    for args in [
        &["list"][..],
        &["log"],
        &["verify"],
        &["show", "e2b337f53a1f"],
        &["show", "../../etc/passwd"],
        &["verify", "--self-test"],
    ] {
        same_read(&w, a.path(), args);
    }
}

#[test]
fn verify_interleaves_its_streams_like_upstream() {
    // stdout carries the ✗ line, stderr the count after it: a terminal shows them in that order.
    let w = World::new();
    let base = upstream_store(&w);
    let repo = copy_store(&base);
    let ids = chain(&repo);
    edit_json(&repo, &ids[1], |v| {
        v["decision"] = "rewritten by hand".into()
    });
    let merged = |prog: &Path| {
        let out = w
            .command("bash")
            .arg("-c")
            .arg(format!("{} verify 2>&1", prog.display()))
            .current_dir(repo.path())
            .output()
            .expect("bash");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ours = merged(&evd_e2e::bin("evctl"));
    let theirs = merged(&evd_e2e::upstream_ev());
    assert_eq!(ours, theirs);
    assert!(ours.ends_with("1 violation(s)\n"), "{ours}");
}
