//! Size limits at every write door, each refused with a message naming it; ids that JSON-RPC
//! cannot carry are refused, not run as notifications; evd's error codes never collide with the
//! ones jsonrpsee answers with itself.

use evd_e2e::{rpc_post, Repo, World};

#[test]
fn oversized_fields_ticks_and_receipts_are_refused_naming_the_limit() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();

    let huge = "x".repeat(70_000);
    let r = w.evctl(repo.path(), &["decide", &huge, "--blame", "b"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("field `decision` is 70000 bytes; the limit is 65536 bytes"),
        "{r:?}"
    );
    // A preview says the same, and nothing was written either way.
    let r = w.evctl(repo.path(), &["decide", &huge, "--blame", "b", "--dry-run"]);
    assert_eq!(r.code, 1, "{r:?}");
    let claim = "y".repeat(70_000);
    let r = w.evctl(
        repo.path(),
        &["decide", "small", "--assume", &claim, "--blame", "b"],
    );
    assert!(r.stderr.contains("field `grounds[0].claim`"), "{r:?}");
    let mut args: Vec<String> = vec!["decide".into(), "many grounds".into()];
    for i in 0..300 {
        args.push("--assume".into());
        args.push(format!("reason {i}"));
    }
    args.extend(["--blame".into(), "b".into()]);
    let r = w.evctl(repo.path(), &args);
    assert!(
        r.stderr
            .contains("the number of grounds is 300 grounds; the limit is 256"),
        "{r:?}"
    );
    assert_eq!(repo.tick_files().len(), 0);

    // A receipt line.
    let root = repo.path().display().to_string();
    let v = rpc_post(
        &w.socket(),
        "ev.receipts.append",
        serde_json::json!([{
            "context": {"store": root, "cwd": root},
            "receipts": [{"test": "t".repeat(20_000), "platform": "linux", "commit": "abc", "result": "green"}],
        }]),
    );
    let msg = v["error"]["data"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("a receipt line is") && msg.contains("the limit is 16384 bytes"),
        "{v}"
    );
    assert!(
        std::fs::read_dir(repo.ev_dir().join("results/receipts"))
            .map(|d| d.count())
            .unwrap_or(0)
            == 0
    );

    // Within the limits, everything goes through.
    w.evctl(repo.path(), &["decide", "fits", "--blame", "b"])
        .ok();
}

#[test]
fn an_id_json_rpc_cannot_carry_is_refused_and_nothing_runs() {
    let w = World::new();
    let repo = Repo::new();
    w.evctl(repo.path(), &["init"]).ok();
    let root = repo.path().display().to_string();
    for id in ["1e400", "1.5", "[1]", "{}"] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"ev.decide","params":[{{"context":{{"store":"{root}","cwd":"{root}"}},"decision":"not run","blame":"b","grounds":[]}}]}}"#
        );
        let v = evd_e2e::rpc_post_raw(&w.socket(), &body);
        assert_eq!(v["error"]["code"], -32600, "{id}: {v}");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("\"id\" must be"));
    }
    assert_eq!(
        repo.tick_files().len(),
        0,
        "a request with a bad id never runs"
    );
}

#[test]
fn evd_codes_stay_clear_of_jsonrpsee_codes() {
    use proto::rpc::codes::*;
    for c in [
        NO_STORE,
        NOT_FOUND,
        REFUSED,
        IO,
        LOCKED,
        BAD_STORE,
        STOPPING,
        EXPIRED,
        ALREADY_APPLIED,
    ] {
        assert!(
            !(-32011..=-32000).contains(&c),
            "{c} is one of jsonrpsee's own"
        );
        assert!(
            (-32099..=-32000).contains(&c),
            "{c} is a server-defined code"
        );
    }
}
