//! The read-and-reflect verbs — brief, why, reopen — against upstream ev 0.1.32, through the
//! real evctl → evd path: twin repositories are driven step by step with the same commands, and
//! every step must give the same stdout, stderr and exit code; the events each verb appends must
//! have the same shapes (every line compared with `ts` removed), and the rich forms the same
//! bytes.

use std::path::Path;

use evd_e2e::{Repo, Run, World};

const SHA: &str = "d308afac1b2c3d4e5f60718293a4b5c6d7e8f901";
const OTHER_SHA: &str = "0123456789abcdef0123456789abcdef01234567";

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

    fn run_both(&self, args: &[&str]) -> (Run, Run) {
        self.run_both_env(&[], args)
    }

    fn run_both_env(&self, env: &[(&str, &str)], args: &[&str]) -> (Run, Run) {
        (
            self.w.evctl_env(self.ours.path(), env, args),
            self.w.ev_env(self.theirs.path(), env, args),
        )
    }

    /// The rich forms under each glyph/colour environment, byte for byte.
    fn rich(&self, args: &[&str]) {
        let mut full = vec!["--color", "always"];
        full.extend_from_slice(args);
        for env in [
            &[][..],
            &[("EV_ASCII", "1")],
            &[("EV_TRUECOLOR", "1")],
            &[("EV_ASCII", "1"), ("EV_TRUECOLOR", "1")],
            &[("NO_COLOR", "")],
        ] {
            let (a, b) = self.run_both_env(env, &full);
            assert_eq!(
                (a.code, &a.stdout, &a.stderr),
                (b.code, &b.stdout, &b.stderr),
                "{env:?} {full:?}"
            );
        }
    }

    /// Run one step in both and require the same answer; returns ours.
    fn step(&self, args: &[&str]) -> Run {
        let (a, b) = self.run_both(args);
        assert_eq!(
            (a.code, &a.stdout, &a.stderr),
            (b.code, &b.stdout, &b.stderr),
            "step {args:?}"
        );
        a
    }

    /// `why`: upstream prints matches in directory order, evd sorts them by file then ground
    /// ([REC]); so the same lines as a set, ours in sorted order, and the same stderr and exit.
    fn why(&self, args: &[&str]) -> Run {
        let (a, b) = self.run_both(args);
        assert_eq!((a.code, &a.stderr), (b.code, &b.stderr), "step {args:?}");
        let mut theirs: Vec<&str> = b.stdout.lines().collect();
        theirs.sort();
        let files: Vec<&str> = a
            .stdout
            .lines()
            .filter_map(|l| l.split('\t').next())
            .collect();
        assert!(
            files.windows(2).all(|w| w[0] <= w[1]),
            "sorted by file: {}",
            a.stdout
        );
        let mut ours: Vec<&str> = a.stdout.lines().collect();
        ours.sort();
        assert_eq!(ours, theirs, "step {args:?}");
        assert_eq!(a.stdout.ends_with('\n'), b.stdout.ends_with('\n'));
        a
    }

    /// Write the same bytes to the same path under both repositories.
    fn write(&self, rel: &str, bytes: &str) {
        for r in [&self.ours, &self.theirs] {
            let p = r.path().join(rel);
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir).expect("mkdir");
            }
            std::fs::write(p, bytes).expect("write");
        }
    }

    fn remove(&self, rel: &str) {
        for r in [&self.ours, &self.theirs] {
            let _ = std::fs::remove_file(r.path().join(rel));
        }
    }

    /// Both event logs, line for line, with `ts` removed.
    fn same_events(&self) {
        let read = |r: &Repo| -> Vec<serde_json::Value> {
            std::fs::read_to_string(r.ev_dir().join("results/events.jsonl"))
                .unwrap_or_default()
                .lines()
                .map(|l| {
                    let mut v: serde_json::Value = serde_json::from_str(l).expect("event line");
                    let ts = v.as_object_mut().and_then(|o| o.remove("ts"));
                    assert!(ts.is_some(), "every event has ts: {l}");
                    v
                })
                .collect()
        };
        let (a, b) = (read(&self.ours), read(&self.theirs));
        assert!(!a.is_empty());
        assert_eq!(a, b);
    }
}

fn id_of(r: &Run, word: usize) -> String {
    r.stdout
        .split_whitespace()
        .nth(word)
        .expect("an id in the answer")
        .to_string()
}

fn test_flags<'a>(selector: &'a str, trigger: &'a str) -> Vec<&'a str> {
    vec![
        "--assume-test",
        selector,
        "--counter-test",
        "false",
        "--on-platform",
        "linux-ci",
        "--triggered-by",
        trigger,
        "--surface",
        "s",
    ]
}

/// A store with user-ruled, load-bearing, agent-proposed, imported (object source_ref),
/// superseded and guarded decisions.
fn varied_store(t: &Twins) {
    let mut args = vec![
        "decide",
        "no Redis",
        "--observe",
        "round R2289",
        "--assume",
        "db coordinates pods",
    ];
    args.extend(test_flags("pytest t_redis.py", "src"));
    args.extend([
        "--reject",
        "Redis: new infra",
        "--reject",
        "memcached: no persistence",
        "--authority",
        "user-ruled",
        "--source-ref",
        "R2289",
        "--verified-at-sha",
        SHA,
        "--blame",
        "Wang Yu",
    ]);
    t.step(&args);
    t.step(&[
        "decide",
        "tabs, not spaces",
        "--assume",
        "the linter says so",
        "--authority",
        "user-ruled",
        "--blame",
        "b",
    ]);
    t.step(&[
        "decide",
        "quiet, not ruled",
        "--reject",
        "noise: nobody reads it",
        "--blame",
        "b",
    ]);
    t.step(&[
        "decide",
        "ship on Fridays",
        "--assume",
        "CI is green",
        "--revisit",
        "Q3",
        "--authority",
        "user-ruled",
        "--blame",
        "b",
    ]);
    t.step(&[
        "propose",
        "agent idea",
        "--reject",
        "other: worse",
        "--source-ref",
        "R9",
    ]);
    t.write(
        "decisions.jsonl",
        concat!(
            r#"{"kind":"ev-decision-intake","decision":"sessions stay in Postgres","observe":"sprint 7","grounds":[{"claim":"one database","supports":"chosen"},{"claim":"another service","supports":"rejected:Redis"}],"authority":"user-ruled","source_ref":{"sprint":"S7","item":"12"},"provenance":"imported"}"#,
            "\n",
            r#"{"kind":"ev-decision-intake","decision":"an imported proposal","grounds":[{"claim":"x","supports":"rejected:y"}],"authority":"user-ruled","source_ref":"R77","provenance":"agent-proposed"}"#,
            "\n"
        ),
    );
    t.step(&[
        "migrate",
        "--source",
        "canonical:decisions.jsonl",
        "--blame",
        "Wang Yu",
    ]);
}

#[test]
fn brief_caps_orders_and_keeps_its_json_contract_like_upstream() {
    let t = Twins::new();
    for args in [
        &["brief"][..],
        &["brief", "--json"],
        &["brief", "--limit", "0"],
    ] {
        t.step(args);
    }
    varied_store(&t);
    let all = t.step(&["brief", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&all.stdout).expect("contract");
    assert_eq!(
        (v["total"].as_u64(), v["shown"].as_u64()),
        (Some(4), Some(4))
    );
    assert!(all
        .stdout
        .contains(r#""source_ref":"{\"item\":\"12\",\"sprint\":\"S7\"}""#));
    for args in [
        &["brief"][..],
        &["brief", "--limit", "0"],
        &["brief", "--limit", "1"],
        &["brief", "--limit", "1", "--json"],
        &["brief", "--limit", "2"],
        &["brief", "--limit", "3", "--json"],
        &["brief", "--limit", "99"],
        &["--plain", "brief", "--limit", "1"],
    ] {
        t.step(args);
    }
    // The contract is one line of sorted-key JSON, whatever the terminal.
    t.rich(&["brief"]);
    t.rich(&["brief", "--limit", "1"]);
    let j = t.step(&["--color", "always", "brief", "--json"]);
    assert_eq!(j.stdout.lines().count(), 1);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).expect("contract");
    assert_eq!(v["kind"], "ev-brief");
    assert_eq!(proto::json::compact(&v) + "\n", j.stdout);
    // The config's cap, and the flag over it.
    for limit in ["1", "0", "x"] {
        let cfg = format!("brief_limit = {limit}\n");
        t.write(".evolving/config", &cfg);
        t.step(&["brief"]);
        t.step(&["brief", "--limit", "2"]);
    }
    // A re-tag demotes a ruling out of the brief; an overturn replaces it.
    let first = t.step(&["brief", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&first.stdout).expect("contract");
    let top = v["decisions"][0]["id"].as_str().expect("id").to_string();
    t.step(&[
        "supersede",
        &top,
        "--provenance",
        "agent-proposed",
        "--blame",
        "b",
    ]);
    t.step(&["brief", "--limit", "0"]);
    t.step(&["brief", "--json", "--limit", "0"]);
    // Usage errors never reach the store.
    for bad in ["-1", "x", "1.5"] {
        let (a, b) = t.run_both(&["brief", "--limit", bad]);
        assert_eq!((a.code, b.code), (2, 2), "{bad}");
    }
    // The last lines upstream saw are ours too: the brief events included.
    let (a, b) = t.run_both(&["brief", "--limit", "1"]);
    assert_eq!((a.stdout, a.code), (b.stdout, b.code));
    t.same_events();
    // No store: the refusal.
    let w = World::new();
    let empty = tempfile::tempdir().expect("tmp");
    let (a, b) = (
        w.evctl(empty.path(), &["brief"]),
        w.ev(empty.path(), &["brief"]),
    );
    assert_eq!((a.code, a.stdout, a.stderr), (b.code, b.stdout, b.stderr));
}

#[test]
fn brief_marks_bound_and_advisory_rulings_like_upstream() {
    let t = Twins::new();
    let ruled = ["--authority", "user-ruled", "--blame", "b"];
    // Bound only through a tripwire on a rejected road.
    let mut args = vec!["decide", "no ORM", "--reject", "Diesel: too much magic"];
    args.extend(test_flags("pytest t_no_orm.py", "src"));
    args.extend(["--verified-at-sha", SHA]);
    args.extend(ruled);
    t.step(&args);
    // Bound through a chosen ground.
    let mut args = vec!["decide", "UTC everywhere", "--assume", "one clock"];
    args.extend(test_flags("pytest t_tz.py", "src"));
    args.extend(["--verified-at-sha", SHA]);
    args.extend(ruled);
    t.step(&args);
    // All bound so far: no advisory mark, no footer, `advisory` still in the contract.
    let j = t.step(&["brief", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).expect("contract");
    assert_eq!(v["advisory"], 0);
    assert!(v["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .all(|d| d["bound"] == true));
    let plain = t.step(&["brief"]);
    assert!(!plain.stdout.contains("advisory"), "{}", plain.stdout);
    t.rich(&["brief"]);
    // A person check binds nothing; neither does a bare ground or a road with no tripwire.
    let mut args = vec![
        "decide",
        "ship on Fridays",
        "--assume",
        "CI is green",
        "--revisit",
        "Q3",
    ];
    args.extend(ruled);
    t.step(&args);
    let mut args = vec![
        "decide",
        "tabs, not spaces",
        "--assume",
        "the linter says so",
    ];
    args.extend(ruled);
    t.step(&args);
    let mut args = vec!["decide", "one repo", "--reject", "polyrepo: drift"];
    args.extend(ruled);
    t.step(&args);
    // Neither agent-proposed nor unruled decisions are counted.
    t.step(&[
        "decide",
        "quiet, not ruled",
        "--assume",
        "x",
        "--blame",
        "b",
    ]);
    t.step(&["propose", "agent idea", "--assume", "y"]);

    let j = t.step(&["brief", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).expect("contract");
    assert_eq!(
        (v["advisory"].as_u64(), v["total"].as_u64()),
        (Some(3), Some(5))
    );
    let bound = |name: &str| {
        v["decisions"]
            .as_array()
            .expect("decisions")
            .iter()
            .find(|d| d["decision"] == name)
            .unwrap_or_else(|| panic!("{name} in the brief"))["bound"]
            .clone()
    };
    assert_eq!(bound("no ORM"), true);
    assert_eq!(bound("UTC everywhere"), true);
    assert_eq!(bound("ship on Fridays"), false);
    assert_eq!(bound("tabs, not spaces"), false);
    assert_eq!(bound("one repo"), false);
    assert!(j
        .stdout
        .starts_with(r#"{"advisory":3,"decisions":[{"bound":"#));
    let plain = t.step(&["brief"]);
    assert!(plain
        .stdout
        .contains("ship on Fridays  [user-ruled · advisory]\n"));
    assert!(plain.stdout.contains("UTC everywhere  [user-ruled]\n"));
    assert!(plain.stdout.ends_with(
        "3 of 5 advisory — nothing watches them (heed only); bind a check to catch a violation\n"
    ));
    t.rich(&["brief"]);
    // The cap truncates the rows, never the counts.
    for limit in ["1", "2", "4", "0"] {
        let r = t.step(&["brief", "--limit", limit]);
        assert!(
            r.stdout.contains("3 of 5 advisory"),
            "{limit}: {}",
            r.stdout
        );
        let j = t.step(&["brief", "--limit", limit, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&j.stdout).expect("contract");
        assert_eq!(v["advisory"], 3, "{limit}");
        t.rich(&["brief", "--limit", limit]);
        t.step(&["--plain", "brief", "--limit", limit]);
    }
    // Every brief writes its cost event, plain or JSON.
    t.same_events();
    let events =
        std::fs::read_to_string(t.ours.ev_dir().join("results/events.jsonl")).expect("events");
    let briefs = events
        .lines()
        .filter(|l| l.contains(r#""op":"brief""#))
        .count();
    assert!(briefs >= 20, "{briefs} brief events");
}

#[test]
fn why_scans_every_live_tick_like_upstream() {
    let t = Twins::new();
    t.why(&["why", "pytest t.py"]);
    varied_store(&t);
    // A guard parent and child, then a child bound again down the chain.
    t.step(&[
        "decide",
        "build our own retrieval",
        "--assume",
        "schema stays frozen",
        "--assume",
        "team ok",
        "--reject",
        "pgvector: locks the schema",
        "--authority",
        "user-ruled",
        "--blame",
        "b",
    ]);
    let parent = t.ours.head_file();
    let liveness = [
        "--counter-test",
        "false",
        "--on-platform",
        "linux-ci",
        "--triggered-by",
        "schema.sql",
        "--surface",
        "ddl",
        "--verified-at-sha",
        SHA,
        "--blame",
        "b",
    ];
    let mut g = vec!["guard", "pytest t.py", parent.as_str(), "0"];
    g.extend_from_slice(&liveness);
    let child = id_of(&t.step(&g), 3);
    let mut g = vec!["guard", "pytest t.py", child.as_str(), "1"];
    g.extend_from_slice(&liveness);
    t.step(&g);
    // The Redis ruling overturned: the superseded tick still answers `why`.
    let redis = t
        .why(&["why", "pytest t_redis.py"])
        .stdout
        .split('\t')
        .next()
        .expect("file")
        .to_string();
    let mut over = vec![
        "supersede",
        redis.as_str(),
        "Redis after all",
        "--assume",
        "the pods outgrew the db",
    ];
    over.extend(test_flags("pytest t_redis.py", "src"));
    over.extend(["--verified-at-sha", SHA, "--blame", "b"]);
    t.step(&over);
    // The guard child and grandchild (two grounds); the overturned ruling and its successor.
    assert_eq!(t.why(&["why", "pytest t.py"]).stdout.lines().count(), 3);
    assert_eq!(
        t.why(&["why", "pytest t_redis.py"]).stdout.lines().count(),
        2
    );
    for sel in [
        "pytest t.py",
        "pytest t_redis.py",
        "pytest t_redis.py ",
        "PYTEST T.PY",
        "Q3",
        "a\"b\tc",
    ] {
        t.why(&["why", sel]);
    }
    t.why(&["--color", "always", "why", "pytest t.py"]);
    // why appends no event; the history so far has the same shapes.
    t.same_events();
    // A file that is not JSON poisons the whole-store read, in upstream's words.
    t.write(".evolving/ticks/aaaaaaaaaaaa", "{");
    t.why(&["why", "pytest t.py"]);
    let w = World::new();
    let empty = tempfile::tempdir().expect("tmp");
    let (a, b) = (
        w.evctl(empty.path(), &["why", "x"]),
        w.ev(empty.path(), &["why", "x"]),
    );
    assert_eq!((a.code, a.stdout, a.stderr), (b.code, b.stdout, b.stderr));
}

fn receipt(test: &str, commit: &str, ran_at: &str, result: &str, extra: &str) -> String {
    format!(
        "{{\"commit\":\"{commit}\",{extra}\"platform\":\"linux-ci\",\"ran_at\":\"{ran_at}\",\"result\":\"{result}\",\"test\":\"{test}\"}}\n"
    )
}

fn receipts_path(selector: &str) -> String {
    format!(
        ".evolving/results/receipts/{}.jsonl",
        proto::id::receipt_key(selector)
    )
}

fn git(dir: &Path, args: &[&str]) {
    let st = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("git");
    assert!(st.success(), "git {args:?}");
}

#[test]
fn reopen_reads_verdicts_edges_and_refusals_like_upstream() {
    let t = Twins::new();
    for id in ["e2b337f53a1f", "nope", "../../etc/pa"] {
        t.step(&["reopen", id]);
    }
    // One ruling, a ground per verdict to exercise, plus a person and an unbound ground.
    let names = [
        "t-none",
        "t-green",
        "t-red",
        "t-gray",
        "t-unproven",
        "t-old",
        "t-poison",
        "t-unsel",
        "t-trig",
    ];
    let mut args = vec![
        "decide",
        "the verdict zoo",
        "--observe",
        "tab\there \"quoted\"",
    ];
    for n in names {
        args.extend(["--assume", n]);
        args.extend(test_flags(n, if n == "t-trig" { "trig" } else { "src" }));
    }
    args.extend([
        "--assume",
        "a human looks",
        "--revisit",
        "Q3 review",
        "--reject",
        "Kafka: too heavy",
        "--authority",
        "user-ruled",
        "--jurisdiction",
        "B",
        "--source-ref",
        "R1",
        "--verified-at-sha",
        SHA,
        "--blame",
        "b",
    ]);
    let zoo = id_of(&t.step(&args), 1);
    t.step(&["reopen", &zoo]);
    let fresh = "2099-01-01T00:00:00Z";
    let unknown = "f".repeat(40);
    t.write(
        &receipts_path("t-green"),
        &receipt("t-green", &unknown, fresh, "green", ""),
    );
    t.write(
        &receipts_path("t-red"),
        &(receipt("t-red", &unknown, "2098-01-01T00:00:00Z", "green", "")
            + &receipt("t-red", &unknown, fresh, "red", "")),
    );
    t.write(
        &receipts_path("t-gray"),
        &receipt("t-gray", &unknown, fresh, "gray", ""),
    );
    t.write(
        &receipts_path("t-unproven"),
        &receipt(
            "t-unproven",
            &unknown,
            fresh,
            "green",
            "\"falsifiable\":false,",
        ),
    );
    t.write(
        &receipts_path("t-old"),
        &receipt("t-old", &unknown, "2001-01-01T00:00:00Z", "green", ""),
    );
    t.write(
        &receipts_path("t-poison"),
        &(receipt("t-poison", &unknown, fresh, "green", "") + "{\"bogus\":1}\n"),
    );
    t.write(
        &receipts_path("t-unsel"),
        &receipt("t-unsel", &unknown, fresh, "green", ""),
    );
    t.write(
        ".evolving/results/selected.json",
        r#"{"commit":"x","changed":["src"],"selected":["t-green","t-red"]}"#,
    );
    // A triggering change after the run: each repo's receipt names its own first commit, then
    // both commit a change under the trigger path.
    for r in [&t.ours, &t.theirs] {
        let head = r.head();
        std::fs::write(
            r.path().join(receipts_path("t-trig")),
            receipt("t-trig", &head, fresh, "green", ""),
        )
        .expect("write");
        std::fs::write(r.path().join("trig"), "changed\n").expect("write");
        git(r.path(), &["add", "trig"]);
        git(r.path(), &["commit", "-q", "-m", "touch the trigger"]);
    }
    let r = t.step(&["reopen", &zoo]);
    for (sel, label) in [
        ("t-none", "not-run"),
        ("t-green", "green"),
        ("t-red", "red"),
        ("t-gray", "gray->red"),
        ("t-unproven", "unproven"),
        ("t-old", "stale"),
        ("t-poison", "not-run"),
        ("t-unsel", "silently-unbound"),
        ("t-trig", "stale"),
    ] {
        let want = format!("test \"{sel}\" frozen@d308afac now: {label}\n");
        assert!(r.stdout.contains(&want), "{want} in {}", r.stdout);
    }
    t.rich(&["reopen", &zoo]);
    // An invalid selected.json is ignored; the cached origin-sha makes every binding stale,
    // whatever the staleness policy; an equal one changes nothing.
    t.write(".evolving/results/selected.json", r#"{"changed":"src"}"#);
    t.step(&["reopen", &zoo]);
    t.write(".evolving/results/origin-sha", OTHER_SHA);
    t.write(".evolving/config", "staleness_ref = \"none\"\n");
    let r = t.step(&["reopen", &zoo]);
    assert_eq!(r.stdout.matches("now: stale\n").count(), names.len());
    t.rich(&["reopen", &zoo]);
    t.write(".evolving/results/origin-sha", &format!("{SHA}\n"));
    t.step(&["reopen", &zoo]);
    t.remove(".evolving/results/origin-sha");
    // Edges: a re-tag child, the superseded parent (superseded by), a ratified proposal, an
    // agent proposal's rich glyph.
    let child = id_of(
        &t.step(&["supersede", &zoo, "--jurisdiction", "A", "--blame", "b"]),
        3,
    );
    t.step(&["reopen", &zoo]);
    t.step(&["reopen", &child]);
    t.rich(&["reopen", &zoo]);
    let p = t.step(&["propose", "an agent idea", "--assume", "cheap", "--json"]);
    let v: serde_json::Value = serde_json::from_str(p.stdout.trim()).expect("envelope");
    let proposal = v["id"].as_str().expect("id").to_string();
    t.rich(&["reopen", &proposal]);
    let ratified = id_of(&t.step(&["ratify", &proposal, "--blame", "Ana"]), 3);
    t.step(&["reopen", &ratified]);
    t.rich(&["reopen", &ratified]);
    t.step(&["reopen", &proposal]);
    // Refusals: absent, bad shape, unparseable.
    t.step(&["reopen", "000000000000"]);
    t.step(&["reopen", "ZZZ"]);
    t.same_events();
    t.write(".evolving/ticks/aaaaaaaaaaaa", "{");
    t.step(&["reopen", "aaaaaaaaaaaa"]);
    t.write(
        ".evolving/ticks/bbbbbbbbbbbb",
        "{\"decision\":\"half a tick\"}\n",
    );
    t.step(&["reopen", "bbbbbbbbbbbb"]);
    t.remove(".evolving/ticks/aaaaaaaaaaaa");
    t.step(&["reopen", &zoo]);
    t.same_events();
    // No store at all reads as an absent tick.
    let w = World::new();
    let empty = tempfile::tempdir().expect("tmp");
    let (a, b) = (
        w.evctl(empty.path(), &["reopen", &zoo]),
        w.ev(empty.path(), &["reopen", &zoo]),
    );
    assert_eq!((a.code, a.stdout, a.stderr), (b.code, b.stdout, b.stderr));
}
