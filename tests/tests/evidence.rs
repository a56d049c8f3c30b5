//! Evidence-cited grounds (seed 003, rule 2) through the real daemon and files: `evctl cite`
//! writes markers that hold; legacy, partial, out-of-bounds and mismatched citations are refused
//! at every write door with nothing written; `verify --evidence` hard-fails once a cited file
//! changes; upstream ev reads a cited decision as plain text.

use evd_e2e::{Repo, World};

fn repo(w: &World) -> Repo {
    let r = Repo::new();
    evd_e2e::git(r.path(), &["commit", "-q", "--allow-empty", "-m", "init"]);
    w.evctl(r.path(), &["init"]).ok();
    std::fs::create_dir_all(r.path().join("bench")).expect("mkdir");
    std::fs::write(
        r.path().join("bench/p99.txt"),
        "p50 3.1 ms\np99 4.8 ms\np999 9.2 ms\n",
    )
    .expect("write");
    r
}

fn cite(w: &World, r: &Repo, args: &[&str]) -> String {
    let mut a = vec!["cite"];
    a.extend_from_slice(args);
    w.evctl(r.path(), &a).ok().stdout.trim_end().to_string()
}

#[test]
fn cite_spans_lines_and_bytes_exactly() {
    let w = World::new();
    let r = repo(&w);
    let sha = |s: &str| proto::evidence::sha256_hex(s.as_bytes());
    assert_eq!(
        cite(&w, &r, &["bench/p99.txt:2"]),
        format!("[evidence:bench/p99.txt:11-22:{}]", sha("p99 4.8 ms\n"))
    );
    assert_eq!(
        cite(&w, &r, &["bench/p99.txt:2-3"]),
        format!(
            "[evidence:bench/p99.txt:11-34:{}]",
            sha("p99 4.8 ms\np999 9.2 ms\n")
        )
    );
    assert_eq!(
        cite(&w, &r, &["bench/p99.txt", "--bytes", "0-3"]),
        format!("[evidence:bench/p99.txt:0-3:{}]", sha("p50"))
    );
    assert_eq!(
        cite(&w, &r, &["bench/p99.txt"]),
        format!(
            "[evidence:bench/p99.txt:0-34:{}]",
            sha("p50 3.1 ms\np99 4.8 ms\np999 9.2 ms\n")
        )
    );
    // From a subdirectory, the path is still the repository's.
    let from_sub = w
        .evctl(&r.path().join("bench"), &["cite", "p99.txt:1"])
        .ok();
    assert!(
        from_sub.stdout.starts_with("[evidence:bench/p99.txt:0-11:"),
        "{from_sub:?}"
    );
    for bad in [
        vec!["bench/p99.txt:4"],
        vec!["bench/p99.txt:0"],
        vec!["bench/p99.txt", "--bytes", "5-5"],
        vec!["bench/p99.txt", "--bytes", "0-999"],
        vec!["bench/nope.txt"],
        vec!["bench"],
    ] {
        let mut a = vec!["cite"];
        a.extend(bad.iter().copied());
        let out = w.evctl(r.path(), &a);
        assert_eq!(out.code, 1, "{bad:?} refused: {out:?}");
        assert!(out.stderr.starts_with("error: "), "{out:?}");
    }
}

#[test]
fn every_write_door_refuses_a_citation_that_does_not_hold_and_verify_fails_once_it_drifts() {
    let w = World::new();
    let r = repo(&w);
    let marker = cite(&w, &r, &["bench/p99.txt:2"]);
    let claim = format!("p99 stays under 5 ms {marker}");
    let ok = w
        .evctl(
            r.path(),
            &[
                "decide",
                "keep the queue shallow",
                "--assume",
                &claim,
                "--blame",
                "Wang Yu",
            ],
        )
        .ok();
    let id = ok
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("an id")
        .to_string();
    let ticks_before = r.tick_files();

    let zeros = "0".repeat(64);
    let wrong_hash = format!("see [evidence:bench/p99.txt:11-22:{zeros}]");
    let past_end = marker.replace(":11-22:", ":11-99:");
    let refused = [
        ("evidence_marker", "see [evidence:X]".to_string()),
        (
            "evidence_marker",
            "see [evidence:bench/p99.txt]".to_string(),
        ),
        (
            "evidence_marker",
            "see [evidence:bench/p99.txt:11-22".to_string(),
        ),
        ("evidence_mismatch", wrong_hash),
        ("evidence_mismatch", past_end),
        (
            "evidence_mismatch",
            marker.replace("bench/p99.txt", "bench/gone.txt"),
        ),
    ];
    for (reason, text) in &refused {
        for door in [
            vec!["decide", "d", "--assume", text.as_str(), "--blame", "b"],
            vec![
                "decide",
                "d",
                "--assume",
                text.as_str(),
                "--blame",
                "b",
                "--dry-run",
            ],
            vec!["propose", "p", "--assume", text.as_str()],
            vec!["supersede", id.as_str(), "d2", "--assume", text.as_str()],
        ] {
            let out = w.evctl(
                r.path(),
                &["--json"]
                    .into_iter()
                    .chain(door.iter().copied())
                    .collect::<Vec<_>>(),
            );
            assert_eq!(out.code, 1, "{door:?} refused: {out:?}");
            let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
            assert_eq!(v["error"]["reason"], *reason, "{door:?}: {out:?}");
        }
    }
    // migrate is a write door too.
    let src = r.path().join("adr.jsonl");
    let record = serde_json::json!({"kind": "ev-decision-intake", "decision": "imported",
        "grounds": [{"claim": "see [evidence:X]", "supports": "chosen"}], "blame": "b",
        "source_ref": "ADR-1", "provenance": "imported"});
    std::fs::write(&src, format!("{record}\n")).expect("write");
    let m = w.evctl(
        r.path(),
        &[
            "migrate",
            "--source",
            &format!("canonical:{}", src.display()),
        ],
    );
    assert_eq!(m.code, 1, "{m:?}");
    assert!(m.stderr.contains("not a citation"), "{m:?}");
    assert_eq!(
        r.tick_files(),
        ticks_before,
        "nothing was written by any refused door"
    );

    // Holding: verify --evidence passes, and upstream reads the cited decision as plain text.
    let v = w.evctl(r.path(), &["verify", "--evidence"]).ok();
    assert!(
        v.stdout
            .ends_with("evidence: 1 citation(s), every one holds\n"),
        "{v:?}"
    );
    let up = w.ev(r.path(), &["verify"]);
    assert_eq!(up.code, 0, "upstream verify: {up:?}");
    let show = w.ev(r.path(), &["show", &id]);
    assert!(show.stdout.contains(&marker), "{show:?}");

    // One byte of the cited span changes: hard failure, naming file, span and tick.
    let p = r.path().join("bench/p99.txt");
    let text = std::fs::read_to_string(&p).expect("read");
    std::fs::write(&p, text.replace("4.8", "4.9")).expect("edit");
    let v = w.evctl(r.path(), &["verify", "--evidence"]);
    assert_eq!(v.code, 1, "{v:?}");
    assert!(
        v.stdout.contains(&format!(
            "✗ evidence {id} ground 0: cites bench/p99.txt bytes 11-22: its bytes changed"
        )),
        "{v:?}"
    );
    // A change outside the span leaves the citation holding.
    std::fs::write(&p, text.replace("9.2", "9.9")).expect("edit");
    w.evctl(r.path(), &["verify", "--evidence"]).ok();
    // The file shrinking under the span, or going away.
    std::fs::write(&p, "p50\n").expect("shrink");
    let v = w.evctl(r.path(), &["--json", "verify", "--evidence"]);
    assert_eq!(v.code, 1);
    let j: serde_json::Value = serde_json::from_str(&v.stdout).expect("json");
    assert_eq!(j["evidence"]["citations"][0]["state"], "out-of-bounds");
    std::fs::remove_file(&p).expect("rm");
    let v = w.evctl(r.path(), &["--json", "verify", "--evidence"]);
    let j: serde_json::Value = serde_json::from_str(&v.stdout).expect("json");
    assert_eq!(
        (v.code, j["evidence"]["citations"][0]["state"].clone()),
        (1, "unreadable".into())
    );
}

#[test]
fn a_decision_whose_evidence_drifts_resurfaces_in_check_and_gates_when_user_ruled() {
    let w = World::new();
    let r = repo(&w);
    std::fs::write(r.ev_dir().join("config"), "staleness_ref = \"none\"\n").expect("config");
    let ruled_claim = format!(
        "p99 stays under 5 ms {}",
        cite(&w, &r, &["bench/p99.txt:2"])
    );
    let ruled = w
        .evctl(
            r.path(),
            &[
                "decide",
                "keep the queue shallow",
                "--assume",
                &ruled_claim,
                "--authority",
                "user-ruled",
                "--blame",
                "Wang Yu",
            ],
        )
        .ok();
    let ruled_id = ruled
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("id")
        .to_string();
    let advisory_claim = format!("p999 is fine {}", cite(&w, &r, &["bench/p99.txt:3"]));
    let advisory = w
        .evctl(
            r.path(),
            &[
                "decide",
                "no tail work",
                "--assume",
                &advisory_claim,
                "--blame",
                "Li Na",
            ],
        )
        .ok();
    let advisory_id = advisory
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("id")
        .to_string();
    let quiet = w.evctl(r.path(), &["check", "--exit-on-red"]).ok();
    assert_eq!(
        quiet.stdout, "no test-bound grounds to check\n",
        "everything holds"
    );

    // The advisory decision's line changes: it resurfaces, but does not gate.
    let p = r.path().join("bench/p99.txt");
    let text = std::fs::read_to_string(&p).expect("read");
    std::fs::write(&p, text.replace("9.2", "9.7")).expect("edit");
    let out = w.evctl(r.path(), &["check", "--exit-on-red"]).ok();
    assert!(
        out.stdout.contains(&format!("drifted\t{advisory_id}\t"))
            && !out.stdout.contains(&ruled_id),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("evidence bench/p99.txt bytes 22-34: its bytes changed"),
        "{out:?}"
    );

    // The user-ruled one's line changes too: it gates, like a red.
    std::fs::write(&p, text.replace("9.2", "9.7").replace("4.8", "5.9")).expect("edit");
    let out = w.evctl(r.path(), &["--json", "check", "--exit-on-red"]);
    assert_eq!(out.code, 1, "{out:?}");
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(v["gating"], true);
    let rows = v["evidence"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    let gating: Vec<_> = rows
        .iter()
        .filter(|r| r["gating"] == true)
        .map(|r| r["tick_id"].clone())
        .collect();
    assert_eq!(gating, vec![serde_json::json!(ruled_id)]);
    assert!(
        rows.iter().all(|r| r["since"].is_string()),
        "since when the file changed"
    );

    // The pre-commit gate blocks a commit while it does (a real `git commit`).
    w.evctl(r.path(), &["hooks", "install"]).ok();
    evd_e2e::git(r.path(), &["add", "bench/p99.txt"]);
    let commit = w.git(r.path(), &["commit", "-q", "-m", "new numbers"]);
    assert_ne!(commit.code, 0, "{commit:?}");
    assert!(
        commit.stderr.contains(&format!(
            "evctl: commit blocked: the evidence {ruled_id} cites (bench/p99.txt bytes "
        )) && commit
            .stderr
            .contains(&format!("`evctl supersede {ruled_id}`")),
        "{commit:?}"
    );

    // The bytes come back: nothing resurfaces, and the commit goes through.
    std::fs::write(&p, &text).expect("restore");
    let out = w.evctl(r.path(), &["check", "--exit-on-red"]).ok();
    assert_eq!(out.stdout, "no test-bound grounds to check\n");
    evd_e2e::git(r.path(), &["add", "bench/p99.txt"]);
    w.git(r.path(), &["commit", "-q", "-m", "same numbers"])
        .ok();
}
