//! `migrate` against upstream ev 0.1.32, through the real evctl → evd path: the canonical intake
//! contract, the four extractors, the jurisdiction map, idempotent re-runs, re-links and
//! discrepancies, reconcile, bind-check and dry runs — the same stdout, stderr and exit code,
//! and the same tick bytes (modulo `held_since`). Where the spec marks a [REC], the divergence is
//! asserted explicitly. Plus what upstream lacks: a refused run writes nothing, and 10,000
//! records go in as one call.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use evd_e2e::{chain, without_held_since, Repo, Run, World};

const SHA: &str = "d308afac1b2c3d4e5f60718293a4b5c6d7e8f901";

/// Our store and upstream's, side by side, both initialised.
struct Twin {
    ours: Repo,
    theirs: Repo,
}

impl Twin {
    fn new(w: &World) -> Twin {
        let t = Twin {
            ours: Repo::new(),
            theirs: Repo::new(),
        };
        w.evctl(t.ours.path(), &["init"]).ok();
        w.ev(t.theirs.path(), &["init"]).ok();
        t
    }

    /// Write the same file into both working directories.
    fn file(&self, name: &str, text: &str) {
        for r in [&self.ours, &self.theirs] {
            std::fs::write(r.path().join(name), text).expect("write source");
        }
    }

    /// Run `args` on both; return (ours, theirs).
    fn run(&self, w: &World, args: &[&str]) -> (Run, Run) {
        (
            w.evctl(self.ours.path(), args),
            w.ev(self.theirs.path(), args),
        )
    }

    /// Run `args` on both and require the same exit code, stdout and stderr.
    fn same(&self, w: &World, args: &[&str]) -> Run {
        let (a, b) = self.run(w, args);
        assert_eq!(
            (a.code, &a.stdout, &a.stderr),
            (b.code, &b.stdout, &b.stderr),
            "args {args:?}"
        );
        a
    }

    /// The same, except for the [REC] discrepancy remedy: upstream names `ev correct <id>`, a
    /// command that no longer exists; we name `evctl supersede <id>`.
    fn same_but_remedy(&self, w: &World, args: &[&str]) -> Run {
        let (a, b) = self.run(w, args);
        assert!(
            !b.stderr.contains("discrepancy") || b.stderr.contains("`ev correct "),
            "upstream's remedy: {}",
            b.stderr
        );
        assert!(!a.stderr.contains("ev correct"), "{}", a.stderr);
        let theirs = b.stderr.replace("`ev correct ", "`evctl supersede ");
        assert_eq!(
            (a.code, &a.stdout, &a.stderr),
            (b.code, &b.stdout, &theirs),
            "args {args:?}"
        );
        a
    }

    /// Both stores hold the same tick files (byte for byte but `held_since`) and the same HEAD.
    fn same_ticks(&self) {
        assert_eq!(self.ours.tick_files(), self.theirs.tick_files());
        for f in self.ours.tick_files() {
            let a = read(&self.ours.ev_dir().join("ticks").join(&f));
            let b = read(&self.theirs.ev_dir().join("ticks").join(&f));
            assert_eq!(without_held_since(&a), without_held_since(&b), "tick {f}");
        }
        assert_eq!(self.ours.head_file(), self.theirs.head_file());
    }

    /// Both verifiers accept both stores.
    fn verify_both(&self, w: &World) {
        for r in [&self.ours, &self.theirs] {
            let v = w.ev(r.path(), &["verify"]);
            assert_eq!(v.code, 0, "ev verify: {v:?}");
            let v = w.evctl(r.path(), &["verify"]);
            assert_eq!(v.code, 0, "evctl verify: {v:?}");
        }
    }

    /// Both verifiers accept both stores, and they list the same.
    fn all_verify(&self, w: &World) {
        self.verify_both(w);
        let a = w.evctl(self.ours.path(), &["list"]).ok();
        let b = w.ev(self.theirs.path(), &["list"]).ok();
        assert_eq!(a.stdout, b.stdout);
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every file under `.evolving/`, with its bytes — except `results/state/`, the per-host
/// verdict cache evd keeps current in the background whenever the ticks change.
fn snapshot(repo: &Repo) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).expect("ls").flatten() {
            let p = e.path();
            if p == base.join("results").join("state") {
                continue;
            }
            if p.is_dir() {
                walk(&p, base, out);
            } else {
                let rel = p.strip_prefix(base).expect("under base").to_path_buf();
                out.insert(rel, std::fs::read(&p).expect("read"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&repo.ev_dir(), &repo.ev_dir(), &mut out);
    out
}

/// [`snapshot`] once evd has journaled what it did so far. evd journals its own events (ticks
/// just recorded, a store's first `daemon_started`) to the ledger shortly after each write, off
/// the request's path: a query writes what waits, so that a comparison against this snapshot
/// sees only what the commands after it could have touched.
fn settled_snapshot(w: &World, repo: &Repo) -> BTreeMap<PathBuf, Vec<u8>> {
    w.evctl(repo.path(), &["ledger", "query", "failures"]).ok();
    snapshot(repo)
}

/// Two snapshots hold the same files with the same bytes; on a difference, names the files.
fn assert_same_files(now: &BTreeMap<PathBuf, Vec<u8>>, before: &BTreeMap<PathBuf, Vec<u8>>) {
    let differ: Vec<_> = now
        .keys()
        .chain(before.keys())
        .filter(|k| now.get(*k) != before.get(*k))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|k| {
            let text = |m: &BTreeMap<PathBuf, Vec<u8>>| {
                m.get(k).map(|b| String::from_utf8_lossy(b).into_owned())
            };
            format!(
                "{}:\n  before: {:?}\n  now:    {:?}",
                k.display(),
                text(before),
                text(now)
            )
        })
        .collect();
    assert!(differ.is_empty(), "files changed:\n{}", differ.join("\n"));
}

/// The JSON of one tick of `repo`.
fn tick(repo: &Repo, id: &str) -> serde_json::Value {
    serde_json::from_str(&read(&repo.ev_dir().join("ticks").join(id))).expect("tick JSON")
}

/// The tick of `repo` whose source_ref is `key`.
fn tick_by_ref(repo: &Repo, key: &str) -> serde_json::Value {
    repo.tick_files()
        .iter()
        .map(|f| tick(repo, f))
        .find(|t| t["source_ref"] == key)
        .unwrap_or_else(|| panic!("no tick with source_ref {key}"))
}

fn intake(fields: serde_json::Value) -> String {
    let mut v = serde_json::json!({"kind": "ev-decision-intake", "grounds": []});
    if let (Some(o), Some(extra)) = (v.as_object_mut(), fields.as_object()) {
        for (k, x) in extra {
            o.insert(k.clone(), x.clone());
        }
    }
    serde_json::to_string(&v).expect("json")
}

fn test_check(counter: bool) -> serde_json::Value {
    let mut c = serde_json::json!({
        "by": "test", "ref": "pytest t_redis.py", "verified_at_sha": SHA,
        "liveness": {"platforms": ["mac", "linux-ci", "mac"], "triggered_by": ["pyproject.toml"], "surfaces": ["deps"]}
    });
    if counter {
        c["counter_test"] = "pytest t_redis.py::flips".into();
    }
    c
}

/// A canonical file exercising every field the contract has.
fn rich_canonical() -> String {
    let lines = [
        "# exported from the old tracker".to_string(),
        String::new(),
        intake(serde_json::json!({
            "decision": "rate-limit lives at the edge proxy", "observe": "round R1043",
            "grounds": [
                {"claim": "the edge sees every request first", "supports": "chosen"},
                {"claim": "the app tier double-counts", "supports": "rejected:app-tier"}
            ],
            "blame": "Wang Yu", "authority": "user-ruled", "jurisdiction": "C",
            "source_ref": "R1043", "provenance": "imported"
        })),
        intake(serde_json::json!({
            "decision": "no Redis", "observe": "sprint review",
            "grounds": [
                {"claim": "db coordinates pods", "supports": "chosen", "check": test_check(false)},
                {"claim": "new infra", "supports": "rejected:Redis", "check": test_check(true)},
                {"claim": "Q3 review", "supports": "chosen", "check": {"by": "person", "ref": "Q3 infra review"}}
            ],
            "blame": " Ann ", "authority": "user-ruled", "jurisdiction": "A",
            "source_ref": {"sprint": "S7", "round": "R2289"}, "provenance": "imported"
        })),
        intake(serde_json::json!({
            "decision": "cache is write-through", "observe": "agent run, issue #77",
            "provenance": "agent-proposed", "authority": "agent-disposable", "blame": "agent:mac"
        })),
        intake(serde_json::json!({
            "decision": "we tune the ranking", "observe": "R5 retro",
            "provenance": "human-now", "jurisdiction": "B"
        })),
        intake(serde_json::json!({
            "decision": "no author anywhere", "source_ref": "ticket-9",
            "provenance": "imported", "blame": "   "
        })),
        intake(serde_json::json!({
            "decision": "tags that are not strings", "source_ref": "ticket-10",
            "provenance": "imported", "authority": 7, "jurisdiction": null, "observe": 3
        })),
        "   ".to_string(),
    ];
    lines.join("\n") + "\n"
}

#[test]
fn canonical_intake_lands_with_upstreams_bytes_and_reruns_skip() {
    let w = World::new();
    let t = Twin::new(&w);
    t.file("history.jsonl", &rich_canonical());
    let src = "canonical:history.jsonl";

    // A dry run reports the same counts and writes nothing.
    let before = settled_snapshot(&w, &t.ours);
    let r = t.same(&w, &["migrate", "--source", src, "--dry-run"]);
    assert_eq!(
        r.stdout,
        "(dry-run) imported 3, skipped 0, re-linked 0, 3 source-only gap(s)\n"
    );
    assert_eq!(r.stderr, "", "a preview has no write path, so no R3 lines");
    assert_same_files(&snapshot(&t.ours), &before);

    let r = t.same(&w, &["migrate", "--source", src, "--blame", "Migrator"]);
    assert_eq!(
        r.stdout,
        "imported 5, skipped 0, re-linked 0, 1 source-only gap(s)\n"
    );
    assert_eq!(r.stderr, "");
    t.same_ticks();
    t.all_verify(&w);
    assert_eq!(chain(&t.ours).len(), 5, "one linear chain");

    // What the contract promises, on our side.
    let files = t.ours.tick_files();
    let by_decision = |d: &str| {
        files
            .iter()
            .map(|f| tick(&t.ours, f))
            .find(|x| x["decision"] == d)
            .unwrap_or_else(|| panic!("{d}"))
    };
    let redis = by_decision("no Redis");
    assert_eq!(redis["blame"], "Ann", "blame is trimmed");
    assert_eq!(
        redis["source_ref"]["round"], "R2289",
        "object refs stay objects"
    );
    assert!(redis["grounds"][0]["check"].get("counter_test").is_none());
    assert_eq!(
        redis["grounds"][0]["check"]["liveness"]["platforms"],
        serde_json::json!(["linux-ci", "mac"])
    );
    assert_eq!(
        by_decision("cache is write-through")["provenance"],
        "agent-proposed"
    );
    assert_eq!(
        by_decision("we tune the ranking")["provenance"],
        "human-now"
    );
    assert_eq!(by_decision("we tune the ranking")["blame"], "Migrator");
    let loose = by_decision("tags that are not strings");
    assert!(loose.get("authority").is_none() && loose.get("jurisdiction").is_none());
    assert_eq!(loose["observe"], "");
    assert_eq!(loose["provenance"], "imported");

    // The event: one `migrate` line, no tick fields.
    let events = read(&t.ours.ev_dir().join("results/events.jsonl"));
    let last: serde_json::Value =
        serde_json::from_str(events.lines().last().expect("an event")).expect("json");
    assert_eq!(last["op"], "migrate");
    assert_eq!(
        last.as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["op".to_string(), "ts".to_string()])
    );

    // Re-running is idempotent: everything keyed is skipped, the gap stays a gap.
    let r = t.same(&w, &["migrate", "--source", src, "--blame", "Migrator"]);
    assert_eq!(
        r.stdout,
        "imported 0, skipped 5, re-linked 0, 1 source-only gap(s)\n"
    );
    t.same_ticks();
    // The write path's R3 lint warns for each written record (and `verify` will refuse it).
    t.file(
        "r3.jsonl",
        &[
            intake(serde_json::json!({"decision": "the ranker should self-improve", "observe": "the loop will self-tune", "source_ref": "R800", "provenance": "imported", "blame": "b",
                "grounds": [{"claim": "it can self-evaluate", "supports": "chosen"}]})),
            intake(serde_json::json!({"decision": "we self-grade", "source_ref": "R801", "provenance": "imported"})),
        ]
        .join("\n"),
    );
    let r = t.same(
        &w,
        &["migrate", "--source", "canonical:r3.jsonl", "--dry-run"],
    );
    assert_eq!(r.stderr, "");
    let r = t.same(&w, &["migrate", "--source", "canonical:r3.jsonl"]);
    assert_eq!(r.stderr.lines().count(), 3, "{r:?}");
    t.same_ticks();
    // Machine form.
    let j = w.evctl(
        t.ours.path(),
        &["--json", "migrate", "--source", src, "--dry-run"],
    );
    let v: serde_json::Value = serde_json::from_str(j.stdout.trim()).expect("json");
    assert_eq!(
        (v["skipped"].as_u64(), v["dry_run"].as_bool()),
        (Some(5), Some(true))
    );
}

#[test]
fn canonical_and_gate_refusals_match_upstream() {
    let w = World::new();
    let good = |key: &str| {
        intake(
            serde_json::json!({"decision": format!("d {key}"), "source_ref": key, "provenance": "imported", "blame": "b"}),
        )
    };
    let with_test = |extra: serde_json::Value, check: serde_json::Value, supports: &str| {
        let mut f = serde_json::json!({
            "decision": "gated", "source_ref": "R50", "blame": "b",
            "grounds": [{"claim": "c", "supports": supports, "check": check}]
        });
        if let (Some(o), Some(e)) = (f.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                o.insert(k.clone(), x.clone());
            }
        }
        intake(f)
    };
    // (file text, extra args) — the map, where given, is written as map.txt.
    let cases: Vec<(String, Option<&str>)> = vec![
        (format!("{}\n{{not json\n", good("R1")), None),
        ("[1,2]\n".into(), None),
        (
            r#"{"kind":"ev-decision-intake","decision":"d","grounds":[],"provenance":"imported","source_ref":"R1","held_since":"x"}"#.into(),
            None,
        ),
        (r#"{"kind":"notes","decision":"d","grounds":[]}"#.into(), None),
        (r#"{"decision":"d","grounds":[]}"#.into(), None),
        (r#"{"kind":"ev-decision-intake","grounds":[]}"#.into(), None),
        (r#"{"kind":"ev-decision-intake","decision":" ","grounds":[]}"#.into(), None),
        (r#"{"kind":"ev-decision-intake","decision":"d"}"#.into(), None),
        (
            r#"{"kind":"ev-decision-intake","decision":"d","grounds":[{"claim":"c","supports":"maybe"}]}"#.into(),
            None,
        ),
        (
            r#"{"kind":"ev-decision-intake","decision":"d","grounds":[{"claim":"c","supports":"chosen","check":{"by":"person","ref":""}}]}"#.into(),
            None,
        ),
        (intake(serde_json::json!({"decision": "d", "source_ref": "R1", "provenance": "imported", "authority": "boss"})), None),
        (intake(serde_json::json!({"decision": "d", "source_ref": "R1", "provenance": "imported", "jurisdiction": "E"})), None),
        (intake(serde_json::json!({"decision": "d", "source_ref": "R1", "provenance": "self"})), None),
        (intake(serde_json::json!({"decision": "d", "source_ref": "R1"})), None),
        (intake(serde_json::json!({"decision": "d", "source_ref": "", "provenance": "imported"})), None),
        (intake(serde_json::json!({"decision": "d", "source_ref": {}, "provenance": "imported"})), None),
        (intake(serde_json::json!({"decision": "d", "source_ref": 12, "provenance": "imported"})), None),
        (intake(serde_json::json!({"decision": "d", "observe": "no key", "provenance": "imported"})), None),
        // The ingest gates, after good records that sort first.
        (
            format!("{}\n{}\n", good("R1"), with_test(serde_json::json!({"provenance": "imported", "jurisdiction": "D"}), test_check(true), "chosen")),
            None,
        ),
        (
            format!("{}\n{}\n", good("R1"), with_test(serde_json::json!({"provenance": "agent-proposed"}), test_check(false), "chosen")),
            None,
        ),
        (
            format!("{}\n{}\n", good("R1"), with_test(serde_json::json!({"provenance": "human-now"}), test_check(false), "rejected:Redis")),
            None,
        ),
        (
            format!("{}\n{}\n", good("R1"), with_test(serde_json::json!({"provenance": "imported", "authority": "agent-disposable"}), test_check(true), "rejected:Redis")),
            None,
        ),
        (
            format!("{}\n{}\n", good("R1"), with_test(serde_json::json!({"provenance": "imported", "authority": "user-ruled"}), test_check(false), "rejected:Redis")),
            None,
        ),
        // Inline jurisdiction against the map.
        (
            format!("{}\n{}\n", good("R1"), intake(serde_json::json!({"decision": "d", "source_ref": "R2", "provenance": "imported", "jurisdiction": "A", "blame": "b"}))),
            Some("R2 B\n"),
        ),
        (good("R1"), Some("R1 A B\n")),
        (good("R1"), Some("R1 Z\n")),
    ];
    for (text, map) in cases {
        let t = Twin::new(&w);
        t.file("in.jsonl", &text);
        let mut args = vec!["migrate", "--source", "canonical:in.jsonl"];
        if let Some(m) = map {
            t.file("map.txt", m);
            args.extend(["--jurisdiction-map", "map.txt"]);
        }
        let before = settled_snapshot(&w, &t.ours);
        let r = t.same(&w, &args);
        assert_eq!(r.code, 1, "{text}: {r:?}");
        assert!(r.stderr.starts_with("error: "), "{r:?}");
        assert_eq!(
            snapshot(&t.ours),
            before,
            "[REC] a refused run writes nothing: {text}"
        );
    }
}

#[test]
fn spec_and_mode_refusals_match_upstream() {
    let w = World::new();
    let t = Twin::new(&w);
    t.file("ok.md", "## R1 one\n");
    let cases: Vec<Vec<&str>> = vec![
        vec!["migrate"],
        vec!["migrate", "--dry-run", "--blame", "b"],
        vec!["migrate", "--source", "gitlog"],
        vec!["migrate", "--source", "gitlog:missing.md"],
        vec!["migrate", "--source", "gitlog:."],
        vec!["migrate", "--source", "wiki:ok.md"],
        vec!["migrate", "--source", "gitlog:ok.md", "--source", "nocolon"],
        vec![
            "migrate",
            "--source",
            "gitlog:ok.md",
            "--jurisdiction-map",
            "nope.txt",
        ],
        vec!["migrate", "--reconcile"],
        vec!["migrate", "--reconcile", "--source", "gitlog:ok.md"],
        vec!["migrate", "--reconcile", "--against", "gitlog"],
        vec!["migrate", "--reconcile", "--against", "wiki:ok.md"],
        vec!["migrate", "--against", "gitlog:ok.md"],
    ];
    for args in &cases {
        t.same(&w, args);
    }
    assert!(t.ours.tick_files().is_empty());
    // Usage errors come from the argument parser: exit 2 on both.
    for args in [
        vec!["migrate", "--bogus"],
        vec!["migrate", "--source"],
        vec!["migrate", "--blame", "a", "--blame", "b"],
    ] {
        let (a, b) = t.run(&w, &args);
        assert_eq!((a.code, b.code), (2, 2), "{args:?}: {a:?} {b:?}");
    }
    // Outside a store: sources are parsed first, then the store is missing.
    let bare_a = tempfile::tempdir().expect("tmp");
    let bare_b = tempfile::tempdir().expect("tmp");
    for d in [bare_a.path(), bare_b.path()] {
        std::fs::write(d.join("ok.md"), "## R1 one\n").expect("write");
        std::fs::write(d.join("bad.jsonl"), "{\n").expect("write");
    }
    for args in [
        vec!["migrate", "--source", "gitlog:ok.md"],
        vec!["migrate", "--source", "canonical:bad.jsonl"],
        vec!["migrate", "--reconcile", "--against", "gitlog:ok.md"],
    ] {
        let a = w.evctl(bare_a.path(), &args);
        let b = w.ev(bare_b.path(), &args);
        assert_eq!(
            (a.code, &a.stdout, &a.stderr),
            (b.code, &b.stdout, &b.stderr)
        );
    }
    assert!(!bare_a.path().join(".evolving").exists());
}

const GITLOG: &str = "\
# Team log
- rejected: Nope: before any header, ignored
## R2289 QA — restore-safety counter DB-backed
- rejected: Redis: would add a new infra dependency
  * reject Memcached: no persistence
we also talked about Kafka, rejected in prose
## no round token in this header
- rejected: Lost: discarded with its header
## R2290 Dev — ship the cross-pod drain
## #1194: re-milestone the search epic
rejected: : empty option is prose
";

const TO_HUMAN: &str = "\
### RESOLVED R555: restore-safety counter DB-backed; reject Redis
- rejected: Redis: a new infra dependency
### FLAG R600: multi-pod relax policy still open
FLAGGED ticket-7: words like FLAGGED open a block too
## RESOLVED no colon here R601 and more
";

const IMMUTABLE: &str = "\
# Decisions (immutable)
## 1. freeze the retrieval schema for v2
- rejected: pgvector: would lock our schema
## Notes
- reject Mongo: counted for section 1
## §2 — restore-safety counter DB-backed
## 10: cap the queue at 10k
";

const ESCALATION: &str = "\
### FLAG #1195: re-milestoned without sign-off
- rejected: silent move: nobody signed off
### RESOLVED #1196 (infra): keep the pager rotation
";

#[test]
fn each_extractor_matches_upstream() {
    let w = World::new();
    for (kind, text, want) in [
        (
            "gitlog",
            GITLOG,
            "imported 3, skipped 0, re-linked 0, 0 source-only gap(s)\n",
        ),
        (
            "to-human",
            TO_HUMAN,
            "imported 4, skipped 0, re-linked 0, 0 source-only gap(s)\n",
        ),
        (
            "decisions-immutable",
            IMMUTABLE,
            "imported 3, skipped 0, re-linked 0, 0 source-only gap(s)\n",
        ),
        (
            "escalation",
            ESCALATION,
            "imported 2, skipped 0, re-linked 0, 0 source-only gap(s)\n",
        ),
    ] {
        let t = Twin::new(&w);
        t.file("src.md", text);
        let spec = format!("{kind}:src.md");
        // Without a fallback author, every extracted record is a gap.
        let r = t.same(&w, &["migrate", "--source", &spec]);
        assert!(r.stdout.contains("imported 0, "), "{kind}: {r:?}");
        let r = t.same(
            &w,
            &[
                "migrate",
                "--source",
                &spec,
                "--blame",
                "Historian",
                "--dry-run",
            ],
        );
        assert!(r.stdout.starts_with("(dry-run) "), "{kind}");
        let r = t.same(&w, &["migrate", "--source", &spec, "--blame", "Historian"]);
        assert_eq!(r.stdout, want, "{kind}");
        t.same_ticks();
        t.all_verify(&w);
        t.same(&w, &["migrate", "--source", &spec, "--blame", "Historian"]);
    }
    // Road lines become rejected grounds, prose never does; RESOLVED sets no authority.
    let t = Twin::new(&w);
    t.file("log.md", GITLOG);
    t.file("th.md", TO_HUMAN);
    w.evctl(
        t.ours.path(),
        &[
            "migrate",
            "--source",
            "gitlog:log.md",
            "--source",
            "to-human:th.md",
            "--blame",
            "H",
        ],
    )
    .ok();
    let r2289 = tick_by_ref(&t.ours, "R2289");
    assert_eq!(r2289["decision"], "QA — restore-safety counter DB-backed");
    assert_eq!(r2289["observe"], "R2289");
    assert_eq!(
        r2289["grounds"],
        serde_json::json!([
            {"claim": "would add a new infra dependency", "supports": "rejected:Redis"},
            {"claim": "no persistence", "supports": "rejected:Memcached"}
        ])
    );
    let r555 = tick_by_ref(&t.ours, "R555");
    assert!(r555.get("authority").is_none());
    assert_eq!(r555["provenance"], "imported");
}

#[test]
fn several_sources_sort_together_and_within_pass_duplicates_are_skipped() {
    let w = World::new();
    let t = Twin::new(&w);
    t.file("log.md", "## R555 from the log\n## R1 first\n");
    t.file("th.md", TO_HUMAN);
    t.file(
        "c.jsonl",
        &[
            intake(serde_json::json!({"decision": "canonical R555", "source_ref": "R555", "provenance": "imported", "authority": "user-ruled", "blame": "b"})),
            intake(serde_json::json!({"decision": "canonical R600", "source_ref": "R600", "provenance": "imported"})),
        ]
        .join("\n"),
    );
    let args = [
        "migrate",
        "--source",
        "to-human:th.md",
        "--source",
        "gitlog:log.md",
        "--source",
        "canonical:c.jsonl",
        "--blame",
        "H",
    ];
    let r = t.same_but_remedy(
        &w,
        &[
            "migrate",
            "--source",
            "to-human:th.md",
            "--source",
            "gitlog:log.md",
            "--source",
            "canonical:c.jsonl",
            "--blame",
            "H",
            "--dry-run",
        ],
    );
    assert!(
        !r.stderr.contains("discrepancy"),
        "a preview's duplicate is not compared"
    );
    let r = t.same_but_remedy(&w, &args);
    assert!(r.stderr.contains("discrepancy: source \"R555\""), "{r:?}");
    assert!(r.stdout.contains("discrepancy(ies) — see above"));
    t.same_ticks();
    t.all_verify(&w);
}

#[test]
fn jurisdiction_map_tags_records_and_issue_keys_map_rec() {
    let w = World::new();
    let t = Twin::new(&w);
    t.file("log.md", GITLOG);
    t.file(
        "map.txt",
        "# buckets for the old log\n\nR2289 A\n  R2290\tC  \n#1194 C\n#\nR2289 B\n",
    );
    let args = [
        "migrate",
        "--source",
        "gitlog:log.md",
        "--jurisdiction-map",
        "map.txt",
        "--blame",
        "H",
    ];
    let r = t.same(&w, &args);
    assert_eq!(
        r.stdout,
        "imported 3, skipped 0, re-linked 0, 0 source-only gap(s)\n"
    );
    // Same ids and payloads; tags agree except the one the [REC] changes.
    assert_eq!(t.ours.tick_files(), t.theirs.tick_files());
    assert_eq!(
        tick_by_ref(&t.ours, "R2289")["jurisdiction"],
        "B",
        "a later line wins"
    );
    assert_eq!(tick_by_ref(&t.theirs, "R2289")["jurisdiction"], "B");
    assert_eq!(tick_by_ref(&t.ours, "R2290")["jurisdiction"], "C");
    assert_eq!(tick_by_ref(&t.theirs, "R2290")["jurisdiction"], "C");
    // [REC] §8.5: `#1194 C` maps here; upstream skips it as a comment and imports untagged.
    assert_eq!(tick_by_ref(&t.ours, "#1194")["jurisdiction"], "C");
    assert!(tick_by_ref(&t.theirs, "#1194")
        .get("jurisdiction")
        .is_none());
    for f in t.ours.tick_files() {
        let mut a = tick(&t.ours, &f);
        let mut b = tick(&t.theirs, &f);
        if a["source_ref"] == "#1194" {
            a.as_object_mut().map(|o| o.remove("jurisdiction"));
        }
        for x in [&mut a, &mut b] {
            x.as_object_mut().map(|o| o.remove("held_since"));
        }
        assert_eq!(a, b, "{f}");
    }
    t.verify_both(&w);
    // Re-running with a different map reports what differs and applies nothing.
    t.file("map.txt", "R2289 B\nR2290 D\n#1194 C\n");
    let r = t.same_but_remedy(&w, &args);
    assert!(
        r.stderr
            .contains("jurisdiction stored=Some(\"C\") incoming=Some(\"D\")"),
        "{r:?}"
    );
    assert_eq!(
        r.stdout,
        "imported 0, skipped 3, re-linked 0, 0 source-only gap(s), 1 discrepancy(ies) — see above\n"
    );
}

#[test]
fn re_links_and_discrepancies_are_reported_like_upstream() {
    let w = World::new();
    let t = Twin::new(&w);
    let rec = |key: &str, extra: serde_json::Value| {
        let mut f = serde_json::json!({"decision": format!("decision {key}"), "source_ref": key, "provenance": "imported", "blame": "b"});
        if let (Some(o), Some(e)) = (f.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                o.insert(k.clone(), x.clone());
            }
        }
        intake(f)
    };
    // Import R2 and R4 first, then the full history: R1 and R3 are back-dated inserts.
    t.file(
        "part.jsonl",
        &[
            rec("R2", serde_json::json!({})),
            rec("R4", serde_json::json!({"jurisdiction": "A"})),
        ]
        .join("\n"),
    );
    t.same(&w, &["migrate", "--source", "canonical:part.jsonl"]);
    w.evctl(
        t.ours.path(),
        &[
            "decide",
            "an unrelated decision",
            "--source-ref",
            "R9",
            "--blame",
            "x",
        ],
    )
    .ok();
    w.ev(
        t.theirs.path(),
        &[
            "decide",
            "an unrelated decision",
            "--source-ref",
            "R9",
            "--blame",
            "x",
        ],
    )
    .ok();
    t.file(
        "all.jsonl",
        &[
            rec("R1", serde_json::json!({})),
            rec(
                "R2",
                serde_json::json!({"authority": "user-ruled", "provenance": "human-now"}),
            ),
            rec("R3", serde_json::json!({})),
            rec("R4", serde_json::json!({})),
            rec("R9", serde_json::json!({})),
        ]
        .join("\n"),
    );
    let r = t.same_but_remedy(&w, &["migrate", "--source", "canonical:all.jsonl"]);
    assert_eq!(
        r.stdout,
        "imported 2, skipped 3, re-linked 2, 0 source-only gap(s), 3 discrepancy(ies) — see above\n"
    );
    assert!(r.stderr.contains("authority stored=None incoming=Some(\"user-ruled\"); provenance stored=Some(\"imported\") incoming=Some(\"human-now\")"), "{r:?}");
    assert!(
        r.stderr.contains("resolve with `evctl supersede "),
        "[REC] the remedy that exists"
    );
    t.same_ticks();
    t.all_verify(&w);
}

#[test]
fn reconcile_counts_match_upstream() {
    let w = World::new();
    let t = Twin::new(&w);
    t.file("log.md", GITLOG);
    t.file("th.md", TO_HUMAN);
    t.same(
        &w,
        &["migrate", "--source", "gitlog:log.md", "--blame", "H"],
    );
    for args in [
        vec![
            "decide",
            "keyed by observe",
            "--observe",
            "see round R600",
            "--blame",
            "x",
        ],
        vec![
            "decide",
            "keyed by ref",
            "--source-ref",
            "ticket-7",
            "--blame",
            "x",
        ],
        vec!["decide", "no key at all", "--blame", "x"],
        vec![
            "decide",
            "store only",
            "--source-ref",
            "R9999",
            "--blame",
            "x",
        ],
    ] {
        w.evctl(t.ours.path(), &args).ok();
        w.ev(t.theirs.path(), &args).ok();
    }
    for spec in [
        "to-human:th.md",
        "gitlog:log.md",
        "decisions-immutable:th.md",
    ] {
        let r = t.same(&w, &["migrate", "--reconcile", "--against", spec]);
        assert!(r.stdout.starts_with("reconcile: in-both "), "{r:?}");
    }
    let r = t.same(
        &w,
        &["migrate", "--reconcile", "--against", "to-human:th.md"],
    );
    assert_eq!(
        r.stdout,
        "reconcile: in-both 1, source-only 3 (the capture gap), store-only 5, un-keyable 1\n"
    );
    // --source and the backfill flags are ignored in this mode; nothing is written.
    let before = settled_snapshot(&w, &t.ours);
    t.same(
        &w,
        &[
            "migrate",
            "--reconcile",
            "--against",
            "to-human:th.md",
            "--source",
            "gitlog:nope",
            "--blame",
            "b",
        ],
    );
    assert_same_files(&snapshot(&t.ours), &before);
    let j = w.evctl(
        t.ours.path(),
        &[
            "migrate",
            "--reconcile",
            "--against",
            "to-human:th.md",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(j.stdout.trim()).expect("json");
    assert_eq!(
        v["source_only_keys"],
        serde_json::json!(["GED ticket-7", "R555", "R601"])
    );
}

#[test]
fn bind_check_matches_upstream_and_needs_no_store() {
    let w = World::new();
    let repo_a = Repo::new();
    let repo_b = Repo::new();
    let live = [
        "--on-platform",
        "mac",
        "--on-platform",
        "linux-ci",
        "--triggered-by",
        "b.py",
        "--triggered-by",
        "a.py",
        "--surface",
        "api",
    ];
    let with = |head: &[&'static str]| {
        let mut v: Vec<&str> = vec!["migrate"];
        v.extend_from_slice(head);
        v
    };
    let mut cases: Vec<Vec<&str>> = Vec::new();
    let mut full = with(&[
        "--bind-check",
        "pytest t_schema.py",
        "--verified-at-sha",
        SHA,
    ]);
    full.extend(live);
    cases.push(full.clone());
    let mut from_head = with(&["--bind-check", "pytest \"quoted\" t.py"]);
    from_head.extend(live);
    cases.push(from_head);
    let mut bad_sha = with(&["--bind-check", "t", "--verified-at-sha", "XYZ"]);
    bad_sha.extend(live);
    cases.push(bad_sha);
    let mut empty = with(&["--bind-check", "  ", "--verified-at-sha", SHA]);
    empty.extend(live);
    cases.push(empty);
    cases.push(with(&[
        "--bind-check",
        "t",
        "--verified-at-sha",
        SHA,
        "--on-platform",
        "mac",
    ]));
    // Other flags are ignored in harvest mode.
    let mut mixed = with(&[
        "--bind-check",
        "t",
        "--reconcile",
        "--source",
        "nocolon",
        "--verified-at-sha",
        SHA,
    ]);
    mixed.extend(live);
    cases.push(mixed);
    for args in &cases {
        let a = w.evctl(repo_a.path(), args);
        let b = w.ev(repo_b.path(), args);
        // The default sha is each repo's own HEAD.
        let theirs = b.stdout.replace(&repo_b.head(), &repo_a.head());
        assert_eq!(
            (a.code, &a.stdout, &a.stderr),
            (b.code, &theirs, &b.stderr),
            "{args:?}"
        );
    }
    let r = w.evctl(repo_a.path(), &full).ok();
    assert_eq!(
        r.stdout,
        "harvested check (falsifiability not proven; no counter-test): \"pytest t_schema.py\" on [mac, linux-ci] triggered-by [b.py, a.py] surface [api]\n"
    );
    assert!(!repo_a.ev_dir().exists(), "no store was needed or made");
    // Outside git, without a sha: the same refusal.
    let bare_a = tempfile::tempdir().expect("tmp");
    let bare_b = tempfile::tempdir().expect("tmp");
    let mut no_git = with(&["--bind-check", "t"]);
    no_git.extend(live);
    let a = w.evctl(bare_a.path(), &no_git);
    let b = w.ev(bare_b.path(), &no_git);
    assert_eq!(
        (a.code, &a.stdout, &a.stderr),
        (b.code, &b.stdout, &b.stderr)
    );
}

#[test]
fn a_malformed_line_7_leaves_every_file_as_it_was() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    w.evctl(
        repo.path(),
        &["decide", "an earlier decision", "--blame", "b"],
    )
    .ok();
    let good = |i: usize| {
        intake(
            serde_json::json!({"decision": format!("record {i}"), "source_ref": format!("R{i}"), "provenance": "imported", "blame": "b"}),
        )
    };
    std::fs::write(repo.path().join("seed.jsonl"), good(100)).expect("write");
    w.evctl(
        repo.path(),
        &["migrate", "--source", "canonical:seed.jsonl"],
    )
    .ok();
    let mut lines: Vec<String> = (1..=6).map(good).collect();
    lines.push(r#"{"kind":"ev-decision-intake","decision":"seventh","grounds":[],"provenance":"imported","source_ref":"R7","status":"live"}"#.into());
    lines.extend((8..=12).map(good));
    std::fs::write(repo.path().join("history.jsonl"), lines.join("\n")).expect("write");
    let before = settled_snapshot(&w, &repo);
    let r = w.evctl(
        repo.path(),
        &["migrate", "--source", "canonical:history.jsonl"],
    );
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout, "");
    assert_eq!(
        r.stderr,
        "error: canonical line 7: field outside closed schema: status\n"
    );
    assert_eq!(
        snapshot(&repo),
        before,
        "ticks/, HEAD, events: byte for byte"
    );

    // [REC] §8.6: a gate refusal late in the pass writes nothing either (upstream keeps the
    // records it wrote before the refusal).
    let gated = intake(serde_json::json!({
        "decision": "zz last", "source_ref": "R99", "provenance": "imported", "blame": "b", "jurisdiction": "C",
        "grounds": [{"claim": "c", "supports": "chosen", "check": test_check(true)}]
    }));
    let mut lines: Vec<String> = (1..=6).map(good).collect();
    lines.push(gated);
    std::fs::write(repo.path().join("gated.jsonl"), lines.join("\n")).expect("write");
    let r = w.evctl(
        repo.path(),
        &["migrate", "--source", "canonical:gated.jsonl"],
    );
    assert_eq!(
        r.stderr,
        "error: source \"R99\": a C jurisdiction (detect-only) decision cannot carry a runnable test check\n"
    );
    assert_same_files(&snapshot(&repo), &before);
    let theirs = Repo::new();
    w.ev(theirs.path(), &["init"]).ok();
    std::fs::write(theirs.path().join("gated.jsonl"), lines.join("\n")).expect("write");
    let u = w.ev(
        theirs.path(),
        &["migrate", "--source", "canonical:gated.jsonl"],
    );
    assert_eq!((u.code, &u.stderr), (1, &r.stderr));
    assert_eq!(theirs.tick_files().len(), 6, "upstream is not atomic");
}

#[test]
fn the_in_process_engine_gives_the_same_answers() {
    let w = World::new();
    let t = Twin::new(&w);
    w.stop_daemon();
    t.file("log.md", GITLOG);
    t.file("th.md", TO_HUMAN);
    let args = [
        "migrate",
        "--source",
        "gitlog:log.md",
        "--source",
        "to-human:th.md",
        "--blame",
        "H",
    ];
    let a = w.evctl_env(t.ours.path(), &[("EVD_NO_DAEMON", "1")], &args);
    let b = w.ev(t.theirs.path(), &args);
    assert_eq!(
        (a.code, &a.stdout, &a.stderr),
        (b.code, &b.stdout, &b.stderr)
    );
    t.same_ticks();
    let a = w.evctl_env(
        t.ours.path(),
        &[("EVD_NO_DAEMON", "1")],
        &["migrate", "--reconcile", "--against", "to-human:th.md"],
    );
    let b = w.ev(
        t.theirs.path(),
        &["migrate", "--reconcile", "--against", "to-human:th.md"],
    );
    assert_eq!(
        (a.code, &a.stdout, &a.stderr),
        (b.code, &b.stdout, &b.stderr)
    );
    assert_eq!(w.daemon_pid(), None, "no daemon was started");
}

#[test]
fn concurrent_migrates_make_one_chain_without_interleaving() {
    let w = std::sync::Arc::new(World::new());
    let repo = std::sync::Arc::new(Repo::new());
    w.evctl(repo.path(), &["init"]).ok();
    let batch = |prefix: &str| {
        (0..400)
            .map(|i| intake(serde_json::json!({"decision": format!("{prefix} {i}"), "source_ref": format!("{prefix}-{i:04}"), "provenance": "imported", "blame": "b"})))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for p in ["alpha", "beta", "gamma"] {
        std::fs::write(repo.path().join(format!("{p}.jsonl")), batch(p)).expect("write");
    }
    let handles: Vec<_> = ["alpha", "beta", "gamma"]
        .into_iter()
        .map(|p| {
            let (w, repo) = (std::sync::Arc::clone(&w), std::sync::Arc::clone(&repo));
            std::thread::spawn(move || {
                w.evctl(
                    repo.path(),
                    &["migrate", "--source", &format!("canonical:{p}.jsonl")],
                )
                .ok()
            })
        })
        .collect();
    for h in handles {
        let r = h.join().expect("thread");
        assert_eq!(
            r.stdout,
            "imported 400, skipped 0, re-linked 0, 0 source-only gap(s)\n"
        );
    }
    let linear = chain(&repo);
    assert_eq!(linear.len(), 1200);
    assert_eq!(repo.tick_files().len(), 1200);
    // Each run's ticks are one contiguous stretch of the chain.
    let prefixes: Vec<String> = linear
        .iter()
        .map(|id| {
            let t = tick(&repo, id);
            t["source_ref"]
                .as_str()
                .unwrap_or("")
                .split('-')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let mut runs = prefixes.clone();
    runs.dedup();
    assert_eq!(runs.len(), 3, "no interleaving: {runs:?}");
    let v = w.evctl(repo.path(), &["verify"]);
    assert_eq!(v.code, 0, "{v:?}");
}

#[test]
fn ten_thousand_records_import_as_one_call_and_verify_clean() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let text: Vec<String> = (0..10_000)
        .map(|i| {
            intake(serde_json::json!({
                "decision": format!("decision number {i}"), "observe": format!("round R{i}"),
                "grounds": [
                    {"claim": format!("claim {i}"), "supports": "chosen"},
                    {"claim": "too heavy", "supports": "rejected:other"}
                ],
                "blame": "Wang Yu", "source_ref": format!("R{i}"), "provenance": "imported"
            }))
        })
        .collect();
    std::fs::write(repo.path().join("big.jsonl"), text.join("\n")).expect("write");
    let r = w
        .evctl(repo.path(), &["migrate", "--source", "canonical:big.jsonl"])
        .ok();
    assert_eq!(
        r.stdout,
        "imported 10000, skipped 0, re-linked 0, 0 source-only gap(s)\n"
    );
    assert_eq!(
        r.stderr, "",
        "no progress line when stderr is not a terminal"
    );
    assert_eq!(chain(&repo).len(), 10_000);
    assert_eq!(repo.tick_files().len(), 10_000);
    let v = w.evctl(repo.path(), &["verify"]);
    assert_eq!(v.code, 0, "{v:?}");
    let r = w
        .evctl(repo.path(), &["migrate", "--source", "canonical:big.jsonl"])
        .ok();
    assert_eq!(
        r.stdout,
        "imported 0, skipped 10000, re-linked 0, 0 source-only gap(s)\n"
    );
    // The events log has one line per run, not per record.
    let events = read(&repo.ev_dir().join("results/events.jsonl"));
    assert_eq!(
        events
            .lines()
            .filter(|l| l.contains("\"op\":\"migrate\""))
            .count(),
        2
    );
}

/// A pseudo-terminal: (master, slave).
fn pty() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let (mut m, mut s) = (-1, -1);
    // SAFETY: openpty writes two fds into the out-pointers; name/termios/winsize may be null.
    let rc = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both fds are fresh and owned by nobody else.
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(m),
            std::os::fd::OwnedFd::from_raw_fd(s),
        )
    }
}

#[test]
fn progress_is_shown_on_a_terminal_and_erased_before_the_answer() {
    use std::io::Read;
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let text: Vec<String> = (0..3_000)
        .map(|i| {
            intake(serde_json::json!({"decision": format!("d {i}"), "source_ref": format!("R{i}"), "provenance": "imported", "blame": "b"}))
        })
        .collect();
    std::fs::write(repo.path().join("h.jsonl"), text.join("\n")).expect("write");
    let (master, slave) = pty();
    let mut cmd = w.command(evd_e2e::bin("evctl"));
    cmd.current_dir(repo.path())
        .args(["migrate", "--source", "canonical:h.jsonl"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::from(slave));
    let child = cmd.spawn().expect("spawn evctl");
    drop(cmd); // our copy of the terminal's slave side
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::from(master);
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        // The master reads EIO once the last slave fd is closed.
        while let Ok(n) = f.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    });
    let out = child.wait_with_output().expect("wait");
    let terminal = reader.join().expect("reader");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "imported 3000, skipped 0, re-linked 0, 0 source-only gap(s)\n"
    );
    assert!(terminal.contains("migrate: "), "{terminal:?}");
    assert!(terminal.contains("3000/3000 (100%)"), "{terminal:?}");
    assert!(terminal.ends_with("\r\x1b[K"), "erased: {terminal:?}");
    assert!(!terminal.contains("error"), "{terminal:?}");
}

#[test]
fn files_that_are_not_ticks_are_read_like_upstream() {
    let w = World::new();
    let t = Twin::new(&w);
    t.file("log.md", "## R1 one\n## R2 two\n## R3 three\n");
    // JSON that is not a tick still carries a key (raw source_ref / observe), or none.
    for r in [&t.ours, &t.theirs] {
        let ticks = r.ev_dir().join("ticks");
        std::fs::write(
            ticks.join("aaaaaaaaaaaa"),
            r#"{"source_ref":"R1","parent_id":"","note":"hand-made"}"#,
        )
        .expect("write");
        std::fs::write(ticks.join("notes.json"), r#"{"observe":"about r2"}"#).expect("write");
        std::fs::write(ticks.join("bbbbbbbbbbbb"), r#"{"grounds":[]}"#).expect("write");
    }
    t.same(
        &w,
        &["migrate", "--reconcile", "--against", "gitlog:log.md"],
    );
    t.same(
        &w,
        &["migrate", "--source", "gitlog:log.md", "--blame", "b"],
    );
    t.same_ticks();
    // A file that is not JSON at all fails every whole-store read, migrate's too.
    for r in [&t.ours, &t.theirs] {
        std::fs::write(r.ev_dir().join("ticks/cccccccccccc"), "{\"torn").expect("write");
    }
    t.same(
        &w,
        &["migrate", "--source", "gitlog:log.md", "--blame", "b"],
    );
    t.same(
        &w,
        &["migrate", "--reconcile", "--against", "gitlog:log.md"],
    );
}

#[test]
fn each_side_skips_what_the_other_imported() {
    let w = World::new();
    let t = Twin::new(&w);
    t.file("history.jsonl", &rich_canonical());
    t.file("log.md", GITLOG);
    let args = [
        "migrate",
        "--source",
        "canonical:history.jsonl",
        "--source",
        "gitlog:log.md",
        "--blame",
        "H",
    ];
    // Upstream imports into its store; evctl re-runs there, and the other way round.
    w.ev(t.theirs.path(), &args).ok();
    w.evctl(t.ours.path(), &args).ok();
    t.same_ticks();
    let a = w.evctl(t.theirs.path(), &args).ok();
    let b = w.ev(t.ours.path(), &args).ok();
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(
        a.stdout,
        "imported 0, skipped 8, re-linked 0, 1 source-only gap(s)\n"
    );
    t.same_ticks();
}

#[test]
fn a_header_with_no_key_is_refused_rather_than_written_unreadably() {
    // Write/read symmetry (the spirit of the [REC] of commands.md §3.3): `RESOLVED: …` has
    // nothing before its colon, so its key and source_ref would be "". Upstream writes that tick,
    // which its own reader and `verify` then reject; evd refuses the run in the reader's words.
    let w = World::new();
    let t = Twin::new(&w);
    t.file(
        "th.md",
        "### RESOLVED R1: fine\n### RESOLVED: no key here\n",
    );
    let args = ["migrate", "--source", "to-human:th.md", "--blame", "b"];
    let before = settled_snapshot(&w, &t.ours);
    let (a, b) = t.run(&w, &args);
    assert_eq!(
        (a.code, a.stdout.as_str(), a.stderr.as_str()),
        (1, "", "error: source \"\": source_ref string is empty\n")
    );
    assert_same_files(&snapshot(&t.ours), &before);
    assert_eq!(b.code, 0, "upstream imports it: {b:?}");
    let v = w.ev(t.theirs.path(), &["verify"]);
    assert!(v.stdout.contains("source_ref string is empty"), "{v:?}");
    // The dry run says the same before anything could be written.
    let r = w.evctl(
        t.ours.path(),
        &[
            "migrate",
            "--source",
            "to-human:th.md",
            "--blame",
            "b",
            "--dry-run",
        ],
    );
    assert_eq!(r.stderr, "error: source \"\": source_ref string is empty\n");
}
