//! `check` against upstream ev 0.1.32: twin git repositories with identical commits (fixed dates)
//! hold the same ticks, receipts, selected-list and config; every step must give the same stdout,
//! stderr and exit code through the real evctl → evd path, and the same state files and events
//! (modulo their timestamps). `check --run` executes real shell selectors on both sides.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use evd_e2e::{Repo, Run, TempDir, World};

const DATE: &str = "2026-01-01T00:00:00Z";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_DATE", DATE)
        .env("GIT_COMMITTER_DATE", DATE)
        .stdin(Stdio::null())
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {:?}", out);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository whose commits have fixed dates, so its twin has the very same shas.
fn fixed_repo() -> TempDir {
    let d = tempfile::Builder::new()
        .prefix("evcheck")
        .tempdir()
        .expect("tempdir");
    git(d.path(), &["init", "-q", "-b", "main"]);
    git(d.path(), &["config", "user.name", "Repo Owner"]);
    git(d.path(), &["config", "user.email", "owner@example.invalid"]);
    std::fs::write(d.path().join("README"), "x\n").expect("write");
    git(d.path(), &["add", "README"]);
    git(d.path(), &["commit", "-q", "-m", "first"]);
    d
}

fn now_utc() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Replace every `ran <timestamp>` (written by --run, so different on each side) with `ran <t>`.
fn mask_ran(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("ran 2") {
        out.push_str(&rest[..i + 4]);
        let tail = &rest[i + 4..];
        let end = tail
            .find(|c: char| !(c.is_ascii_digit() || "-:.TZ".contains(c)))
            .unwrap_or(tail.len());
        out.push_str("<t>");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

struct Twins {
    w: World,
    ours: TempDir,
    theirs: TempDir,
}

impl Twins {
    fn new(config: &str) -> Twins {
        let t = Twins {
            w: World::new(),
            ours: fixed_repo(),
            theirs: fixed_repo(),
        };
        t.step(&["init"]);
        t.put("config", config);
        t
    }

    fn dirs(&self) -> [&Path; 2] {
        [self.ours.path(), self.theirs.path()]
    }

    fn head(&self) -> String {
        let (a, b) = (
            git(self.ours.path(), &["rev-parse", "HEAD"]),
            git(self.theirs.path(), &["rev-parse", "HEAD"]),
        );
        assert_eq!(a, b, "twin repositories must have the same commits");
        a
    }

    /// Write `.evolving/<rel>` in both.
    fn put(&self, rel: &str, text: &str) {
        for d in self.dirs() {
            let p = d.join(".evolving").join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }
    }

    /// Append to `.evolving/<rel>` in both (as another process would).
    fn append(&self, rel: &str, text: &str) {
        use std::io::Write;
        for d in self.dirs() {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(d.join(".evolving").join(rel))
                .expect("open");
            f.write_all(text.as_bytes()).expect("append");
        }
    }

    /// Commit a change to `file` in both.
    fn commit(&self, file: &str) {
        for d in self.dirs() {
            std::fs::write(d.join(file), "changed\n").expect("write");
            git(d, &["add", file]);
            git(d, &["commit", "-q", "-m", file]);
        }
        self.head();
    }

    /// Both sides' answers. One deliberate deviation is taken out first: upstream warns that the
    /// live-origin reference cannot be resolved on every check, evctl once per store (see
    /// `the_no_upstream_warning_is_said_once_per_store`), so the line is compared only when
    /// ours says it.
    fn run_both(&self, env: &[(&str, &str)], args: &[&str]) -> (Run, Run) {
        let ours = self.w.evctl_env(self.ours.path(), env, args);
        let mut theirs = self.w.ev_env(self.theirs.path(), env, args);
        let warning = format!("{}\n", evd::api::shared::NO_UPSTREAM_WARNING);
        if !ours.stderr.contains(&warning) {
            theirs.stderr = theirs.stderr.replace(&warning, "");
        }
        (ours, theirs)
    }

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

    /// Like `step`, but `ran <timestamp>` details may differ (--run stamps fresh receipts).
    fn step_masked(&self, args: &[&str]) -> Run {
        let (a, b) = self.run_both(&[], args);
        assert_eq!(
            (a.code, mask_ran(&a.stdout), &a.stderr),
            (b.code, mask_ran(&b.stdout), &b.stderr),
            "step {args:?}"
        );
        a
    }

    fn results(&self, d: &Path) -> PathBuf {
        d.join(".evolving/results")
    }

    /// Same state files (modulo computed_at) and events (modulo ts and wall_ms).
    fn same_results(&self) {
        let state = |d: &Path| -> Vec<(String, String)> {
            let mut v: Vec<(String, String)> = std::fs::read_dir(self.results(d).join("state"))
                .map(|rd| {
                    rd.flatten()
                        .map(|e| {
                            let text = std::fs::read_to_string(e.path()).expect("state");
                            assert!(!text.ends_with('\n'), "no trailing newline");
                            let masked: Vec<&str> = text
                                .lines()
                                .filter(|l| !l.contains("\"computed_at\""))
                                .collect();
                            (
                                e.file_name().to_string_lossy().into_owned(),
                                mask_ran(&masked.join("\n")),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        assert_eq!(state(self.ours.path()), state(self.theirs.path()));
        let events = |d: &Path| -> Vec<String> {
            std::fs::read_to_string(self.results(d).join("events.jsonl"))
                .unwrap_or_default()
                .lines()
                .map(|l| {
                    let mut v: serde_json::Value = serde_json::from_str(l).expect("event JSON");
                    if let Some(o) = v.as_object_mut() {
                        o.remove("ts");
                        o.remove("wall_ms");
                    }
                    v.to_string()
                })
                .collect()
        };
        // evd writes a check's events right after its answer has gone (they cannot change
        // it): on a loaded machine the last line may land a moment after evctl returned.
        evd_e2e::wait_until(std::time::Duration::from_secs(10), || {
            events(self.ours.path()) == events(self.theirs.path())
        });
        assert_eq!(events(self.ours.path()), events(self.theirs.path()));
        let origin = |d: &Path| std::fs::read(self.results(d).join("origin-sha")).ok();
        assert_eq!(origin(self.ours.path()), origin(self.theirs.path()));
    }

    /// The receipts of `selector` on our side, parsed (each must be one line).
    fn receipts(&self, d: &Path, selector: &str) -> Vec<serde_json::Value> {
        let key = proto::id::receipt_key(selector);
        let text = std::fs::read_to_string(self.results(d).join(format!("receipts/{key}.jsonl")))
            .unwrap_or_default();
        assert!(text.is_empty() || text.ends_with('\n'));
        text.lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).expect("receipt line");
                assert!(v["ran_at"].is_string());
                if let Some(o) = v.as_object_mut() {
                    o.remove("ran_at");
                }
                v
            })
            .collect()
    }
}

const NONE_POLICY: &str = "staleness_days = 7\nstaleness_ref = \"none\"\n";

fn receipt(
    test: &str,
    platform: &str,
    commit: &str,
    ran_at: &str,
    result: &str,
    f: Option<bool>,
) -> String {
    let mut v = serde_json::json!({"commit": commit, "platform": platform, "ran_at": ran_at, "result": result, "test": test});
    if let Some(f) = f {
        v["falsifiable"] = f.into();
    }
    format!("{v}\n")
}

fn key(selector: &str) -> String {
    format!(
        "results/receipts/{}.jsonl",
        proto::id::receipt_key(selector)
    )
}

/// `--assume <claim> --assume-test <sel> --counter-test c --on-platform … --triggered-by … --surface s`.
fn ground(claim: &str, sel: &str, platforms: &[&str], trigger: &str) -> Vec<String> {
    let mut v: Vec<String> = [
        "--assume",
        claim,
        "--assume-test",
        sel,
        "--counter-test",
        "counter",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for p in platforms {
        v.push("--on-platform".into());
        v.push(p.to_string());
    }
    for s in ["--triggered-by", trigger, "--surface", "s"] {
        v.push(s.into());
    }
    v
}

fn decide(t: &Twins, decision: &str, grounds: &[Vec<String>], extra: &[&str]) -> Run {
    let sha = t.head();
    let mut args: Vec<String> = vec!["decide".into(), decision.into()];
    for g in grounds {
        args.extend(g.iter().cloned());
    }
    args.extend([
        "--verified-at-sha".into(),
        sha,
        "--blame".into(),
        "Wang Yu".into(),
    ]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    t.step(&refs)
}

#[test]
fn every_verdict_label_matches_upstream() {
    let t = Twins::new(NONE_POLICY);
    t.step(&["check"]);
    let c = t.head();
    let now = now_utc();
    let old = "2020-01-01T00:00:00Z";
    decide(
        &t,
        "the labels",
        &[
            ground("is green", "t-green", &["linux-ci"], "g.txt"),
            ground("is red", "t-red", &["linux-ci"], "r.txt"),
            ground("is gray", "t-gray", &["linux-ci", "mac"], "gr.txt"),
            ground("never ran", "t-none", &["linux-ci", "mac"], "n.txt"),
            ground("is old", "t-old", &["linux-ci"], "o.txt"),
            ground("not falsifiable", "t-unproven", &["linux-ci"], "u.txt"),
            ground("silently unbound", "t-su", &["linux-ci"], "su.txt"),
            ground("triggered since", "t-cw", &["linux-ci"], "cw.txt"),
        ],
        &["--reject", "Kafka: too heavy"],
    );
    t.put(
        &key("t-green"),
        &receipt("t-green", "linux-ci", &c, &now, "green", Some(true)),
    );
    t.put(
        &key("t-red"),
        &receipt("t-red", "linux-ci", &c, &now, "red", Some(true)),
    );
    t.put(
        &key("t-gray"),
        &format!(
            "{}{}",
            receipt("t-gray", "linux-ci", &c, &now, "gray", None),
            receipt("t-gray", "mac", &c, &now, "green", None)
        ),
    );
    t.put(
        &key("t-old"),
        &receipt("t-old", "linux-ci", &c, old, "green", Some(true)),
    );
    t.put(
        &key("t-unproven"),
        &receipt("t-unproven", "linux-ci", &c, &now, "green", Some(false)),
    );
    t.put(
        &key("t-su"),
        &receipt("t-su", "linux-ci", &c, &now, "green", Some(true)),
    );
    t.put(
        &key("t-cw"),
        &receipt("t-cw", "linux-ci", &c, &now, "green", Some(true)),
    );
    t.put(
        "results/selected.json",
        r#"{"commit":"x","changed":["su.txt"],"selected":["t-green"]}"#,
    );
    // Not stale before the triggering commit, stale after it.
    t.step(&["check"]);
    t.commit("cw.txt");
    let r = t.step(&["check"]);
    for label in [
        "green",
        "red",
        "gray->red",
        "not-run",
        "stale",
        "unproven",
        "silently-unbound",
    ] {
        assert!(
            r.stdout.contains(&format!("{label}\t")),
            "{label}: {}",
            r.stdout
        );
    }
    assert!(r
        .stdout
        .contains("(a triggering change landed after the last run)"));
    assert!(r
        .stdout
        .contains("(deciding receipt older than the staleness window)"));
    assert_eq!(r.code, 0, "a red without --exit-on-red exits 0");
    assert_eq!(t.step(&["check", "--exit-on-red"]).code, 1);
    // Exempt: this runner attests none of the declared platforms; attest values accumulate.
    t.step(&["check", "--attest", "windows"]);
    t.step(&["check", "--attest", "mac", "--attest", "windows,linux-ci"]);
    t.step(&["check", "--attest", "mac", "--exit-on-red"]);
    // Pieces are taken verbatim: an empty or padded name attests nothing declared.
    t.step(&["check", "--attest", ""]);
    t.step(&["check", "--attest", ",", "--attest", " mac"]);
    // An invalid selected-list is ignored.
    t.put(
        "results/selected.json",
        r#"{"changed":["su.txt"],"extra":1}"#,
    );
    t.step(&["check"]);
    // A poisoned receipts file reads as none.
    t.append(&key("t-green"), "{\"commit\":\"x\"}\n");
    let r = t.step(&["check"]);
    assert!(r.stdout.contains("not-run\t"));
    // The rich form, named and truecolor, and ASCII glyphs.
    t.step(&["check", "--color", "always"]);
    t.step_env(&[("EV_TRUECOLOR", "1")], &["check", "--color", "always"]);
    t.step_env(
        &[("EV_ASCII", "1")],
        &["check", "--color", "always", "--attest", "mac"],
    );
    t.same_results();
    // Our --json is one parseable line with the same rows.
    let j = t.w.evctl(t.ours.path(), &["check", "--json"]);
    let v: serde_json::Value = serde_json::from_str(j.stdout.trim()).expect("json");
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(8));
}

#[test]
fn harvested_memo_and_notes_match_upstream() {
    let t = Twins::new(NONE_POLICY);
    let sha = t.head();
    let src = format!(
        "{}\n",
        serde_json::json!({"kind":"ev-decision-intake","decision":"imported rule","grounds":[{"claim":"old test holds","supports":"chosen","check":{"by":"test","ref":"t-harv","verified_at_sha":sha,"liveness":{"platforms":["local"],"triggered_by":["h.txt"],"surfaces":["s"]}}}],"provenance":"imported","source_ref":"H1"})
    );
    for d in t.dirs() {
        std::fs::write(d.join("src.jsonl"), &src).expect("write");
    }
    t.step(&[
        "migrate",
        "--source",
        "canonical:src.jsonl",
        "--blame",
        "Old Owner",
    ]);
    // Only harvested rows: the "fresh receipt" note.
    t.step(&["check"]);
    t.step(&["check", "--color", "always"]);
    t.put(
        &key("t-harv"),
        &receipt("t-harv", "local", &sha, &now_utc(), "green", None),
    );
    t.step(&["check"]);
    // An agent-proposed re-tag of a bound decision locks it to memo.
    decide(
        &t,
        "bound",
        &[ground("memo me", "t-memo", &["local"], "m.txt")],
        &[],
    );
    let head = std::fs::read_to_string(t.ours.path().join(".evolving/HEAD")).expect("HEAD");
    t.step(&[
        "supersede",
        head.trim(),
        "--provenance",
        "agent-proposed",
        "--blame",
        "me",
    ]);
    let r = t.step(&["check", "--exit-on-red"]);
    assert!(r.stdout.contains("memo\t"), "{}", r.stdout);
    assert!(r.stdout.contains("harvested-unproven: 1 of 2"));
    t.step(&["check", "--color", "always"]);
    // A hand-made detect-only tick with a test (no write door makes one): LOCK 1.
    let r = decide(
        &t,
        "detect only",
        &[ground("watch it", "t-c", &["local"], "c.txt")],
        &["--jurisdiction", "B"],
    );
    let id = r.stdout.split_whitespace().nth(1).expect("id").to_string();
    for d in t.dirs() {
        let p = d.join(".evolving/ticks").join(&id);
        let text = std::fs::read_to_string(&p).expect("tick");
        assert!(text.contains("\"jurisdiction\": \"B\""));
        std::fs::write(
            &p,
            text.replace("\"jurisdiction\": \"B\"", "\"jurisdiction\": \"C\""),
        )
        .expect("write");
    }
    let r = t.step(&["check", "--exit-on-red"]);
    assert_eq!(r.code, 0, "memo never gates");
    assert!(
        r.stdout.contains(&format!("memo\t{id}\t\"watch it\"")),
        "{}",
        r.stdout
    );
    t.step(&["check", "--color", "always"]);
    t.same_results();
}

#[test]
fn staleness_reference_policies_match_upstream() {
    // live-origin with no upstream: the warning, even with nothing to check.
    let t = Twins::new("staleness_ref = \"live-origin\"\n");
    t.step(&["check"]);
    decide(
        &t,
        "pinned",
        &[ground("holds", "t-a", &["local"], "a.txt")],
        &[],
    );
    let c = t.head();
    t.put(
        &key("t-a"),
        &receipt("t-a", "local", &c, &now_utc(), "green", Some(true)),
    );
    t.step(&["check"]);
    // A real upstream: resolved, cached to origin-sha; after a new commit upstream moves on.
    for d in t.dirs() {
        let bare = d.join(".evolving/../remote.git");
        git(d, &["init", "-q", "--bare", bare.to_str().expect("utf8")]);
        git(
            d,
            &["remote", "add", "origin", bare.to_str().expect("utf8")],
        );
        git(d, &["push", "-q", "-u", "origin", "main"]);
    }
    t.step(&["check"]);
    // The origin moves past verified_at_sha by a commit the binding's triggers do not cover:
    // 0.1.29's diff-aware staleness keeps it green.
    t.commit("b.txt");
    for d in t.dirs() {
        git(d, &["push", "-q", "origin", "main"]);
    }
    let r = t.step(&["check", "--exit-on-red"]);
    assert!(r.stdout.starts_with("green\t"), "{}", r.stdout);
    // One that touches a.txt keeps it stale for good.
    t.commit("a.txt");
    for d in t.dirs() {
        git(d, &["push", "-q", "origin", "main"]);
    }
    let r = t.step(&["check", "--exit-on-red"]);
    assert!(r.stdout.contains("verified_at_sha behind live origin"));
    t.same_results();
    // --offline reads the cache whatever the policy; local-head and none.
    t.put("config", "staleness_ref = \"none\"\n");
    t.step(&["check"]);
    t.step(&["check", "--offline"]);
    t.put("config", "staleness_ref = \"local-head\"\n");
    t.step(&["check"]);
    t.put("results/origin-sha", &c);
    t.put(
        "config",
        "staleness_ref = \"loacl-head\"\nstaleness_days = 0\n",
    );
    t.step(&["check", "--offline"]);
    t.same_results();
}

/// 0.1.29's diff-aware staleness and 0.1.32's `dirty`, under `local-head`: a commit elsewhere
/// keeps a binding green, an uncommitted edit (staged or not, a deletion, a rename) to a tracked
/// guarded path reads `dirty` (non-gating, attention style, its own tally bucket, no tip), an
/// untracked file does not, and committing the edit makes the binding stale for good.
#[test]
fn diff_aware_staleness_and_dirty_match_upstream() {
    let t = Twins::new("staleness_days = 7\nstaleness_ref = \"local-head\"\n");
    for d in t.dirs() {
        std::fs::create_dir_all(d.join("db")).expect("mkdir");
        std::fs::write(d.join("db/schema.sql"), "create\n").expect("write");
        std::fs::write(d.join("a.txt"), "a\n").expect("write");
        git(d, &["add", "db/schema.sql", "a.txt"]);
        git(d, &["commit", "-q", "-m", "files"]);
    }
    decide(
        &t,
        "guarded by a file",
        &[ground("file holds", "t-file", &["local"], "a.txt")],
        &[],
    );
    decide(
        &t,
        "guarded by a directory",
        &[ground("dir holds", "t-dir", &["local"], "db")],
        &[],
    );
    decide(
        &t,
        "guarded by a glob",
        &[ground("glob holds", "t-glob", &["local"], "*.sql")],
        &[],
    );
    let c = t.head();
    let now = now_utc();
    for sel in ["t-file", "t-dir", "t-glob"] {
        t.put(
            &key(sel),
            &receipt(sel, "local", &c, &now, "green", Some(true)),
        );
    }
    let r = t.step(&["check", "--exit-on-red"]);
    assert_eq!(r.stdout.matches("green\t").count(), 3, "{}", r.stdout);
    // HEAD moves by a commit no trigger covers: still green (0.1.27 read stale here).
    t.commit("README");
    let r = t.step(&["check", "--exit-on-red"]);
    assert_eq!(r.stdout.matches("green\t").count(), 3, "{}", r.stdout);
    t.same_results();
    // An untracked file under a guarded directory is not a change to a tracked path.
    for d in t.dirs() {
        std::fs::write(d.join("db/new.sql"), "new\n").expect("write");
    }
    let r = t.step(&["check", "--exit-on-red"]);
    assert_eq!(r.stdout.matches("green\t").count(), 3, "{}", r.stdout);
    // An unstaged edit: the directory and the glob read dirty; exit 0 all the same.
    for d in t.dirs() {
        std::fs::write(d.join("db/schema.sql"), "create or replace\n").expect("write");
    }
    let r = t.step(&["check", "--exit-on-red"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.stdout.matches("dirty\t").count(), 2, "{}", r.stdout);
    t.step(&["check", "--color", "always"]);
    t.same_results();
    // Staged, then a guarded file deleted and another renamed.
    for d in t.dirs() {
        git(d, &["add", "db/schema.sql"]);
    }
    t.step(&["check"]);
    for d in t.dirs() {
        git(d, &["mv", "a.txt", "b.txt"]);
    }
    let r = t.step(&["check", "--color", "always"]);
    assert!(
        !r.stdout.contains("tip:"),
        "dirty alone asks nothing: {}",
        r.stdout
    );
    let r = t.step(&["check"]);
    let ids: Vec<String> = r
        .stdout
        .lines()
        .filter_map(|l| l.split('\t').nth(1))
        .map(str::to_string)
        .collect();
    assert_eq!(r.stdout.matches("dirty\t").count(), 3, "{}", r.stdout);
    for id in &ids {
        t.step(&["reopen", id]);
        t.step(&["reopen", id, "--color", "always"]);
    }
    t.same_results();
    // A red with a dirty: one gating, one non-gating, and the tip.
    let now = now_utc();
    t.append(
        &key("t-glob"),
        &receipt("t-glob", "local", &c, &now, "red", Some(true)),
    );
    let r = t.step(&["check", "--color", "always", "--exit-on-red"]);
    assert_eq!(r.code, 1);
    t.same_results();
    // Committed: the edit is history now, past verified_at_sha: stale.
    for d in t.dirs() {
        git(d, &["commit", "-q", "-m", "edit"]);
    }
    let r = t.step(&["check", "--exit-on-red"]);
    assert!(
        r.stdout.contains("verified_at_sha behind live origin"),
        "{}",
        r.stdout
    );
    assert_eq!(r.code, 1);
    t.same_results();
}

#[test]
fn a_receipt_written_by_another_process_changes_the_next_answer() {
    let t = Twins::new(NONE_POLICY);
    decide(
        &t,
        "watched",
        &[ground("holds", "t-w", &["ci"], "w.txt")],
        &[],
    );
    let c = t.head();
    let r = t.step(&["check"]);
    assert!(r.stdout.starts_with("not-run\t"));
    t.append(
        &key("t-w"),
        &receipt("t-w", "ci", &c, "2999-01-01T00:00:00Z", "green", Some(true)),
    );
    let r = t.step(&["check"]);
    assert!(r.stdout.starts_with("green\t"), "{}", r.stdout);
    t.append(
        &key("t-w"),
        &receipt("t-w", "ci", &c, "2999-01-02T00:00:00Z", "red", Some(true)),
    );
    let r = t.step(&["check", "--exit-on-red"]);
    assert!(r.stdout.starts_with("red\t"), "{}", r.stdout);
    assert_eq!(r.code, 1);
    t.same_results();
}

#[test]
fn check_run_executes_in_the_caller_and_matches_upstream() {
    let t = Twins::new("green_exit_code = 0\nstaleness_ref = \"none\"\n");
    let sha = t.head();
    let g = run_ground;
    decide(
        &t,
        "run them",
        &[
            g("passes and flips", "true", "false", "local"),
            g("fails", "false", "true", "local"),
            g("does not flip", "exit 3", "exit 3", "local"),
            g("cannot run", "nosuchcmd-ev-test", "true", "local"),
            g(
                "counter cannot run",
                "echo out; echo err >&2",
                "nosuchcmd-ev-counter",
                "local",
            ),
            g("elsewhere", "true", "false", "linux-ci"),
        ],
        &[],
    );
    let r = t.step_masked(&["check", "--run", "--exit-on-red"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("could not be executed (exit 127)"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("— recording unproven"), "{}", r.stderr);
    assert!(
        r.stdout.starts_with("out\n"),
        "test output comes first: {}",
        r.stdout
    );
    for d in t.dirs() {
        assert_eq!(
            t.receipts(d, "true"),
            vec![
                serde_json::json!({"commit": sha, "falsifiable": true, "platform": "local", "result": "green", "test": "true"})
            ]
        );
        assert_eq!(t.receipts(d, "exit 3")[0]["falsifiable"], false);
        assert!(t.receipts(d, "nosuchcmd-ev-test").is_empty());
    }
    assert_eq!(
        t.receipts(t.ours.path(), "false"),
        t.receipts(t.theirs.path(), "false")
    );
    // Receipts that cannot be written: warnings in upstream's words, the exit unchanged.
    for d in t.dirs() {
        let r = d.join(".evolving/results/receipts");
        std::fs::rename(&r, d.join("receipts.bak")).expect("mv");
        std::fs::write(&r, "").expect("file in the way");
    }
    t.step_masked(&["check", "--run"]);
    for d in t.dirs() {
        let r = d.join(".evolving/results/receipts");
        std::fs::remove_file(&r).expect("rm");
        std::fs::rename(d.join("receipts.bak"), &r).expect("mv back");
    }
    // Another platform; a green exit code other than 0.
    t.step_masked(&["check", "--run", "--platform", "linux-ci"]);
    t.put("config", "green_exit_code = 3\nstaleness_ref = \"none\"\n");
    t.step_masked(&["check", "--run"]);
    t.same_results();
    for sel in ["true", "false", "exit 3", "echo out; echo err >&2"] {
        assert_eq!(
            t.receipts(t.ours.path(), sel),
            t.receipts(t.theirs.path(), sel),
            "{sel}"
        );
    }
}

/// One ground bound to `sel` with `counter` as its counter-test, on `platform`.
fn run_ground(claim: &str, sel: &str, counter: &str, platform: &str) -> Vec<String> {
    [
        "--assume",
        claim,
        "--assume-test",
        sel,
        "--counter-test",
        counter,
        "--on-platform",
        platform,
        "--triggered-by",
        "x.txt",
        "--surface",
        "s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

const DID_NOT_FLIP: &str =
    "did not flip (it agreed with the check) — not a valid negative control; recording unproven";

#[test]
fn check_run_warns_when_a_counter_test_does_not_flip_like_upstream() {
    // live-origin with no upstream: the staleness-reference warning follows the run's.
    let t = Twins::new("staleness_ref = \"live-origin\"\n");
    decide(
        &t,
        "first tick",
        &[
            run_ground("both pass", "true", "true", "local"),
            run_ground("flips", "true", "false", "local"),
            run_ground("both fail", "exit 3", "exit 4", "local"),
            run_ground("check cannot run", "nosuchcmd-ev-a", "true", "local"),
            run_ground("counter cannot run", "false", "nosuchcmd-ev-b", "local"),
            run_ground("not this platform", "true", "true", "linux-ci"),
        ],
        &[],
    );
    decide(
        &t,
        "second tick",
        &[run_ground(
            "quoted",
            r#"test "x" = y"#,
            r#"test "x" = z || exit 1"#,
            "local",
        )],
        &[],
    );
    // Never without --run.
    let r = t.step(&["check"]);
    assert!(!r.stderr.contains("did not flip"), "{}", r.stderr);
    for args in [
        &["check", "--run"][..],
        &["--color", "always", "check", "--run"],
        &["check", "--run", "--exit-on-red"],
        &["check", "--run", "--platform", "linux-ci"],
    ] {
        t.step_masked(args);
    }
    // evctl says the staleness-reference warning once per store: forgotten here, so that this
    // run says it again and its place after the run's own warnings is compared.
    let said = t
        .ours
        .path()
        .join(".evolving/results")
        .join(evd::api::shared::NO_UPSTREAM_SAID);
    std::fs::remove_file(&said).expect("said once already");
    let r = t.step_masked(&["check", "--run"]);
    let lines: Vec<&str> = r.stderr.lines().collect();
    let flips: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("did not flip"))
        .collect();
    // Once per ground, in evaluation order (which is upstream's: the comparison above), the
    // command Debug-quoted.
    assert_eq!(flips.len(), 3, "{}", r.stderr);
    for (got, q) in flips
        .iter()
        .zip([r#""true""#, r#""exit 4""#, r#""test \"x\" = z || exit 1""#])
    {
        if !flips.contains(&format!("warning: counter-test {q} {DID_NOT_FLIP}").as_str()) {
            panic!("no warning for {q}: {got}\n{}", r.stderr);
        }
    }
    let last_flip = lines
        .iter()
        .rposition(|l| l.contains("did not flip"))
        .expect("a did-not-flip line");
    let reference = lines
        .iter()
        .position(|l| l.contains("staleness reference"))
        .expect("the staleness-reference warning");
    assert!(last_flip < reference, "{}", r.stderr);
    assert!(r.stderr.contains("could not run ("), "{}", r.stderr);
    // The receipts record it as not falsifiable.
    for d in t.dirs() {
        let rs = t.receipts(d, "exit 3");
        assert_eq!(rs.last().expect("a receipt")["falsifiable"], false);
    }
    t.same_results();
}

#[test]
fn check_run_notes_when_no_bound_check_resolved_like_upstream() {
    let t = Twins::new(NONE_POLICY);
    let note = "note: ran the bound checks but none resolved pass/fail";
    // No rows: no note.
    let r = t.step(&["check", "--run"]);
    assert!(!r.stderr.contains(note), "{}{}", r.stdout, r.stderr);
    // Only unproven (a counter-test that agrees) and exempt rows: the note, in both forms.
    decide(
        &t,
        "agreeing counter",
        &[run_ground("agrees", "true", "true", "local")],
        &[],
    );
    decide(
        &t,
        "elsewhere",
        &[run_ground("on ci", "true", "false", "linux-ci")],
        &[],
    );
    for args in [
        &["check", "--run", "--attest", "local"][..],
        &["--color", "always", "check", "--run", "--attest", "local"],
        &["check", "--run", "--attest", "local", "--exit-on-red"],
    ] {
        let r = t.step_masked(args);
        assert!(r.stderr.ends_with(&format!("{note} (all stale / not-run / unproven) — evctl reads git state from this directory; if the ledger is separate from the guarded code, run evctl in the working tree, or set staleness_ref = local-head\n")), "{args:?}: {}", r.stderr);
    }
    // Never without --run.
    let r = t.step_masked(&["check", "--attest", "local"]);
    assert!(!r.stderr.contains(note), "{}{}", r.stdout, r.stderr);
    // not-run (the ci binding, attested here) is stuck too.
    let r = t.step_masked(&["check", "--run"]);
    assert!(r.stderr.contains(note), "{}{}", r.stdout, r.stderr);
    // Exempt alone is neither stuck nor resolved.
    let r = t.step_masked(&["check", "--run", "--attest", "other"]);
    assert!(!r.stderr.contains(note), "{}{}", r.stdout, r.stderr);
    // One resolved row silences it: green beside not-run and unproven.
    decide(
        &t,
        "proven",
        &[run_ground("flips", "exit 0", "exit 1", "local")],
        &[],
    );
    let r = t.step_masked(&["check", "--run"]);
    assert!(r.stdout.contains("green\t"), "{}", r.stdout);
    assert!(!r.stderr.contains(note), "{}{}", r.stdout, r.stderr);
    t.same_results();
    // A stale row (an old receipt on a platform the run does not cover) and nothing resolved.
    let t = Twins::new(NONE_POLICY);
    let c = t.head();
    decide(
        &t,
        "aged",
        &[run_ground("old", "t-old", "c-old", "mac")],
        &[],
    );
    t.put(
        &key("t-old"),
        &receipt(
            "t-old",
            "mac",
            &c,
            "2020-01-01T00:00:00Z",
            "green",
            Some(true),
        ),
    );
    for args in [
        &["check", "--run"][..],
        &["--color", "always", "check", "--run"],
        &["check", "--run", "--platform", "mac"],
    ] {
        let r = t.step_masked(args);
        assert!(r.stdout.contains("stale"), "{args:?}: {}", r.stdout);
        assert!(
            r.stderr.contains(note),
            "{args:?}: {}{}",
            r.stdout,
            r.stderr
        );
    }
    t.same_results();
}

#[test]
fn check_run_of_a_harvested_binding_and_outside_git_match_upstream() {
    let t = Twins::new(NONE_POLICY);
    let sha = t.head();
    let src = format!(
        "{}\n",
        serde_json::json!({"kind":"ev-decision-intake","decision":"imported","grounds":[{"claim":"h","supports":"chosen","check":{"by":"test","ref":"exit 1","verified_at_sha":sha,"liveness":{"platforms":["local"],"triggered_by":["h.txt"],"surfaces":["s"]}}}],"provenance":"imported","source_ref":"H2"})
    );
    for d in t.dirs() {
        std::fs::write(d.join("src.jsonl"), &src).expect("write");
    }
    t.step(&[
        "migrate",
        "--source",
        "canonical:src.jsonl",
        "--blame",
        "Old Owner",
    ]);
    t.step_masked(&["check", "--run"]);
    for d in t.dirs() {
        let r = t.receipts(d, "exit 1");
        assert_eq!(r.len(), 1);
        assert!(
            r[0].get("falsifiable").is_none(),
            "harvested: no falsifiable"
        );
    }
    // No git at all: the commit cannot be resolved, nothing runs.
    for d in t.dirs() {
        std::fs::remove_dir_all(d.join(".git")).expect("rm .git");
    }
    let r = t.step_masked(&["check", "--run"]);
    assert!(
        r.stderr.contains("cannot resolve verified_at_sha"),
        "{}",
        r.stderr
    );
    t.same_results();
}

#[test]
fn no_store_and_the_in_process_fallback_match_upstream() {
    let t = Twins::new(NONE_POLICY);
    // Our side's daemon owns that store: stopped first, so that nothing it keeps for the next
    // start lands in the directory while it is being removed.
    t.w.stop_daemon();
    for d in t.dirs() {
        std::fs::remove_dir_all(d.join(".evolving")).expect("rm");
    }
    t.step(&["check"]);
    t.step(&["check", "--run"]);
    t.step(&["init"]);
    t.put("config", NONE_POLICY);
    decide(
        &t,
        "local",
        &[ground("holds", "t-l", &["ci"], "l.txt")],
        &[],
    );
    t.step_env(&[("EVD_NO_DAEMON", "1")], &["check", "--exit-on-red"]);
    t.same_results();
}

/// State files always hold what the last check read, whatever flags the checks before it had:
/// a repeated plain check after an `--attest` one rewrites what the attested check wrote.
#[test]
fn state_files_follow_the_last_check_whatever_its_flags() {
    let t = Twins::new(NONE_POLICY);
    decide(
        &t,
        "two platforms",
        &[ground("holds", "t-p", &["linux-ci", "mac"], "p.txt")],
        &[],
    );
    let c = t.head();
    let now = now_utc();
    t.put(
        &key("t-p"),
        &receipt("t-p", "linux-ci", &c, &now, "green", Some(true)),
    );
    t.append(
        &key("t-p"),
        &receipt("t-p", "mac", &c, &now, "green", Some(true)),
    );
    // Files an hour old: nothing is suspected of being half-written, so a repeated check with
    // the same flags is answered from memory.
    for d in t.dirs() {
        let ok = Command::new("touch")
            .args(["-d", "1 hour ago"])
            .arg(d.join(".evolving").join(key("t-p")))
            .status()
            .expect("touch")
            .success();
        assert!(ok, "touch");
    }
    t.step(&["check"]);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for args in [
        &["check"][..],
        &["check", "--attest", "windows"],
        &["check"],
        &["check", "--attest", "windows"],
        &["check", "--attest", "mac"],
        &["check"],
    ] {
        t.step(args);
        t.same_results();
    }
}

/// A repository without a remote hears that its live-origin reference cannot be resolved once,
/// not on every check (upstream says it every time); `status` names it meanwhile, and once an
/// upstream was resolved and lost again it is said again.
#[test]
fn the_no_upstream_warning_is_said_once_per_store() {
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    w.evctl(p, &["init"]).ok();
    std::fs::write(
        repo.ev_dir().join("config"),
        "staleness_ref = \"live-origin\"\n",
    )
    .expect("config");
    let warning = evd::api::shared::NO_UPSTREAM_WARNING;
    let first = w.evctl(p, &["check"]);
    assert!(first.stderr.contains(warning), "{first:?}");
    let second = w.evctl(p, &["check"]);
    assert!(!second.stderr.contains(warning), "{second:?}");
    let in_process = w.evctl_env(p, &[("EVD_NO_DAEMON", "1")], &["check"]);
    assert!(!in_process.stderr.contains(warning), "{in_process:?}");
    let status = w.evctl(p, &["status"]).ok();
    assert!(
        status
            .stdout
            .contains("note: the live-origin staleness reference cannot be resolved"),
        "{status:?}"
    );
    // An upstream appears: resolved, the note goes; lost again, said again once.
    let bare = tempfile::tempdir().expect("bare");
    git(
        p,
        &["init", "-q", "--bare", bare.path().to_str().expect("utf8")],
    );
    git(
        p,
        &[
            "remote",
            "add",
            "origin",
            bare.path().to_str().expect("utf8"),
        ],
    );
    git(p, &["push", "-q", "-u", "origin", "main"]);
    let resolved = w.evctl(p, &["check"]);
    assert!(!resolved.stderr.contains(warning), "{resolved:?}");
    let status = w.evctl(p, &["status"]).ok();
    assert!(!status.stdout.contains("cannot be resolved"), "{status:?}");
    git(p, &["branch", "--unset-upstream"]);
    let lost = w.evctl(p, &["check"]);
    assert!(lost.stderr.contains(warning), "{lost:?}");
    let again = w.evctl(p, &["check"]);
    assert!(!again.stderr.contains(warning), "{again:?}");
}
