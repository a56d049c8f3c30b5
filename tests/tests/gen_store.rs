//! The repository's own store generator (tests/src/store_gen.rs): what it writes must read as a
//! clean store to upstream `ev` 0.1.32, hold every kind of tick the tests and benches rely on,
//! and come out byte-identical for the same seed.

use std::collections::BTreeMap;
use std::path::Path;

use evd_e2e::{gen_store, World};
use serde_json::Value;

/// Every file under `.evolving/`, by relative path.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).expect("prefix").display().to_string();
                out.insert(rel, std::fs::read(&p).expect("read"));
            }
        }
    }
    let mut out = BTreeMap::new();
    let ev = root.join(".evolving");
    walk(&ev, &ev, &mut out);
    out
}

/// A kind of tick the mix must contain, and how to recognise one.
type Kind<'a> = (&'a str, &'a dyn Fn(&Value) -> bool);

fn git_heads(root: &Path) -> String {
    let out = std::process::Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "HEAD", "@{upstream}"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git rev-parse");
    assert!(out.status.success(), "HEAD and its upstream resolve");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn generated_stores_verify_upstream_and_hold_every_kind() {
    let w = World::new();
    for (ticks, seed) in [(300, 3), (240, 11)] {
        let dir = tempfile::tempdir().expect("tmp");
        let summary = gen_store(dir.path(), ticks, seed);
        let root = dir.path();

        let verify = w.ev(root, &["verify"]);
        assert_eq!(verify.code, 0, "seed {seed}: upstream verify: {verify:?}");
        assert!(
            !verify.stdout.contains('✗') && verify.stderr.trim().is_empty(),
            "seed {seed}: verify is clean: {verify:?}"
        );

        let all = files(root);
        assert_eq!(
            all.get("config").map(Vec::as_slice),
            Some(evd::store::config::DEFAULT_CONFIG.as_bytes())
        );
        let head = String::from_utf8(all["HEAD"].clone()).expect("utf-8 HEAD");
        assert_eq!(head, summary.head);
        let ticks_read: BTreeMap<String, Value> = all
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("ticks/").map(|id| (id, v)))
            .map(|(id, v)| {
                (
                    id.to_string(),
                    serde_json::from_slice(v).expect("tick JSON"),
                )
            })
            .collect();
        assert_eq!(ticks_read.len(), ticks);

        // One chain, genesis .. HEAD, through every tick.
        let mut cur = head.clone();
        let mut walked = 0;
        while !cur.is_empty() {
            cur = ticks_read[&cur]["parent_id"]
                .as_str()
                .expect("parent_id")
                .to_string();
            walked += 1;
        }
        assert_eq!(walked, ticks, "seed {seed}: one chain through every tick");

        let has = |f: &dyn Fn(&Value) -> bool| ticks_read.values().any(f);
        let test_checks = |t: &Value| -> Vec<Value> {
            t["grounds"]
                .as_array()
                .expect("grounds")
                .iter()
                .filter(|g| g["check"]["by"] == "test")
                .map(|g| g["check"].clone())
                .collect()
        };
        let kinds: [Kind; 13] = [
            ("supersedes", &|t| t.get("supersedes").is_some()),
            ("ratifies", &|t| t.get("ratifies").is_some()),
            ("imported", &|t| t["provenance"] == "imported"),
            ("agent-proposed", &|t| {
                t["provenance"] == "agent-proposed" && t["authority"] == "agent-disposable"
            }),
            ("user-ruled", &|t| t["authority"] == "user-ruled"),
            ("jurisdiction A", &|t| t["jurisdiction"] == "A"),
            ("jurisdiction B", &|t| t["jurisdiction"] == "B"),
            ("jurisdiction C", &|t| t["jurisdiction"] == "C"),
            ("jurisdiction D", &|t| t["jurisdiction"] == "D"),
            ("source_ref object", &|t| t["source_ref"].is_object()),
            ("person check", &|t| {
                t["grounds"]
                    .as_array()
                    .expect("grounds")
                    .iter()
                    .any(|g| g["check"]["by"] == "person")
            }),
            ("harvested binding", &|t| {
                test_checks(t)
                    .iter()
                    .any(|c| c.get("counter_test").is_none())
            }),
            ("tripwire", &|t| {
                t["grounds"].as_array().expect("grounds").iter().any(|g| {
                    g["check"]["by"] == "test"
                        && g["supports"]
                            .as_str()
                            .is_some_and(|s| s.starts_with("rejected:"))
                })
            }),
        ];
        for (kind, f) in kinds {
            assert!(has(f), "seed {seed}: no {kind} tick");
        }
        assert!(
            !has(&|t| {
                (t["jurisdiction"] == "C" || t["jurisdiction"] == "D") && !test_checks(t).is_empty()
            }),
            "seed {seed}: C/D never carry a test"
        );

        // Receipts: lines upstream reads, naming commits of the generated history, and some
        // bindings left without any.
        let history = {
            let out = std::process::Command::new("git")
                .current_dir(root)
                .args(["rev-list", "HEAD"])
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .expect("git rev-list");
            String::from_utf8_lossy(&out.stdout).to_string()
        };
        let receipts: Vec<_> = all
            .iter()
            .filter(|(k, _)| k.starts_with("results/receipts/"))
            .collect();
        assert!(!receipts.is_empty(), "seed {seed}: receipts written");
        for (name, bytes) in &receipts {
            let text = std::str::from_utf8(bytes).expect("utf-8 receipts");
            let lines = evd::engine::receipts::parse_file(text).expect("receipts parse");
            for r in &lines {
                assert_eq!(
                    name.as_str(),
                    format!("results/receipts/{}.jsonl", proto::id::receipt_key(&r.test))
                );
                assert!(history.contains(&r.commit), "{} is a real commit", r.commit);
            }
        }
        let selectors: Vec<String> = ticks_read
            .values()
            .flat_map(test_checks)
            .map(|c| c["ref"].as_str().expect("ref").to_string())
            .collect();
        assert!(
            selectors.iter().any(|s| !all.contains_key(&format!(
                "results/receipts/{}.jsonl",
                proto::id::receipt_key(s)
            ))),
            "seed {seed}: some binding was never run"
        );
        assert_eq!(summary.count("receipt_files"), receipts.len());
        assert_eq!(summary.count("ticks"), ticks);
    }
}

#[test]
fn the_same_seed_gives_the_same_bytes() {
    let (a, b, c) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let sa = gen_store(a.path(), 300, 5);
    let sb = gen_store(b.path(), 300, 5);
    let sc = gen_store(c.path(), 300, 6);
    assert_eq!(git_heads(a.path()), git_heads(b.path()));
    let (fa, fb) = (files(a.path()), files(b.path()));
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (k, v) in &fa {
        assert!(fb[k] == *v, "{k} differs between two runs with one seed");
    }
    assert_eq!(sa.head, sb.head);
    assert_ne!(sa.head, sc.head, "another seed, another store");
}

/// Every tick of a generated store survives the daemon's packed form whole: texts kept in the
/// tick and texts kept as numbers of the shared table alike.
#[test]
fn every_generated_tick_packs_losslessly() {
    let dir = tempfile::tempdir().expect("tmp");
    gen_store(dir.path(), 2_000, 5);
    let ticks = dir.path().join(".evolving/ticks");
    let mut n = 0;
    for e in std::fs::read_dir(&ticks).expect("read_dir").flatten() {
        let text = std::fs::read_to_string(e.path()).expect("read");
        let t = proto::Tick::parse(&text).expect("a generated tick parses");
        let p = evd::engine::packed::PackedTick::pack(&t);
        assert_eq!(p.tick(), t, "{}", e.path().display());
        assert_eq!(
            (p.id(), p.blame(), p.status()),
            (&*t.id, &*t.blame, &*t.status)
        );
        n += 1;
    }
    assert_eq!(n, 2_000);
}
