//! `evctl guards` / `ev.guards`: which current decisions guard which files, with check's own
//! verdicts. Through a real evd and in-process, in a real git repository.

use evd_e2e::{code_repo, Repo, Run, World};
use serde_json::Value;

fn json(r: &Run) -> Value {
    serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

/// A repository with two decisions: one on the schema (a test that passes, a road not taken),
/// one on the `api/` directory (a test that fails once run).
fn setup(w: &World, env: &[(&str, &str)]) -> Repo {
    let repo = code_repo(w, env);
    let p = repo.path();
    w.evctl_env(
        p,
        env,
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
            "--reject",
            "pgvector: it locks the schema",
        ],
    )
    .ok();
    w.evctl_env(
        p,
        env,
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
    .ok();
    repo
}

fn exercise(w: &World, env: &[(&str, &str)]) {
    let repo = setup(w, env);
    let p = repo.path();
    let run = |args: &[&str]| w.evctl_env(p, env, args);

    // Before any run: both read not-run, and only the schema decision guards the schema.
    let r = run(&["guards", "db/schema.sql"]).ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{r:?}");
    assert!(lines[0].starts_with("not-run\t"), "{r:?}");
    assert!(
        lines[0].ends_with("\t\"freeze the schema\"\tdb/schema.sql"),
        "{r:?}"
    );

    // A directory trigger covers what is beneath it, from a subdirectory too.
    let r = w.evctl_env(&p.join("api"), env, &["guards", "routes.rs", "../README"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("\"keep the api small\"\tapi/routes.rs"),
        "{r:?}"
    );
    assert!(!r.stdout.contains("README"), "{r:?}");

    // Nothing guards the README: exit 1, said on stderr.
    let r = run(&["guards", "README"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.is_empty() && r.stderr.contains("no current decision guards"),
        "{r:?}"
    );

    // A path outside the store is refused, naming it.
    let r = run(&["guards", "/etc/passwd"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("/etc/passwd is outside the store"),
        "{r:?}"
    );

    // Run the tests, then break the api decision's claim: its verdict turns red.
    run(&["check", "--run"]).ok();
    std::fs::write(p.join("api/extra"), "").expect("write");
    run(&["check", "--run"]).ok();
    let all = json(&run(&["--json", "guards"]).ok());
    let ds = all["decisions"].as_array().expect("decisions");
    assert_eq!(ds.len(), 2, "{all}");
    assert_eq!(all["gating"], true, "a red gates: {all}");
    let schema = ds
        .iter()
        .find(|d| d["decision"] == "freeze the schema")
        .expect("schema");
    assert_eq!(schema["matched"], serde_json::json!(["db/schema.sql"]));
    assert_eq!(schema["rejected"][0]["option"], "pgvector");
    assert_eq!(schema["blame"], "Repo Owner");
    let g = &schema["grounds"][0];
    assert_eq!(
        (g["label"].as_str(), g["gating"].as_bool()),
        (Some("green"), Some(false))
    );
    assert_eq!(g["last_run"]["result"], "green");
    assert_eq!(g["last_run"]["commit"].as_str(), Some(repo.head().as_str()));
    assert_eq!(g["triggered_by"], serde_json::json!(["db/schema.sql"]));
    let api = ds
        .iter()
        .find(|d| d["decision"] == "keep the api small")
        .expect("api");
    assert_eq!(api["grounds"][0]["label"], "red");
    assert_eq!(api["grounds"][0]["gating"], true);

    // Asked about one decision by id (what an editor does after a pushed change), only it is
    // answered, with the same store-wide facts.
    if env.is_empty() {
        let api_id = api["tick_id"].as_str().expect("id");
        let one = evd_e2e::rpc_post(
            &w.socket(),
            "ev.guards",
            serde_json::json!([{"context": {"store": p.display().to_string()}, "ticks": [api_id]}]),
        );
        let ds = one["result"]["decisions"].as_array().expect("decisions");
        assert_eq!(ds.len(), 1, "{one}");
        assert_eq!(ds[0]["tick_id"].as_str(), Some(api_id));
        assert_eq!(one["result"]["gating"], true, "{one}");
    }

    // The same verdicts as check's own.
    let check = run(&["check", "--plain"]);
    assert_eq!(check.code, 0);
    assert!(check.stdout.contains("red\t"), "{check:?}");
    let r = run(&["guards", "api/routes.rs", "db/schema.sql"]).ok();
    assert!(r.stdout.contains("red\t"), "{r:?}");
    assert!(r.stdout.contains("green\t"), "{r:?}");
}

#[test]
fn guards_through_the_daemon() {
    let w = World::new();
    exercise(&w, &[]);
    assert!(w.daemon_pid().is_some(), "answered by evd");
}

#[test]
fn guards_in_process() {
    let w = World::new();
    exercise(&w, &[("EVD_NO_DAEMON", "1")]);
    assert!(w.daemon_pid().is_none(), "no daemon was started");
}
