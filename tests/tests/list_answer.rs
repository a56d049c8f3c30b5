//! The plain `list` evd hands over as an answer file is never stale: after an edit in place, a
//! new file, a removed one and a new decision, the daemon's listing is the one a fresh
//! in-process read prints, byte for byte, and upstream's; `--json` still carries the entries.

use std::path::Path;

use evd_e2e::{Repo, World};

fn same_list(w: &World, dir: &Path) -> String {
    let ours = w.evctl(dir, &["list"]).ok();
    let fresh = w.evctl_env(dir, &[("EVD_NO_DAEMON", "1")], &["list"]).ok();
    assert_eq!(ours.stdout, fresh.stdout, "the daemon's list is stale");
    assert_eq!(ours.stderr, fresh.stderr);
    let theirs = w.ev(dir, &["list"]);
    assert_eq!(
        (theirs.code, &theirs.stdout),
        (0, &ours.stdout),
        "upstream's list"
    );
    ours.stdout
}

#[test]
fn the_plain_listing_follows_every_change_to_ticks() {
    let w = World::new();
    let repo = Repo::new();
    evd_e2e::gen_store(repo.path(), 200, 5);
    let dir = repo.path();
    let ticks = repo.ev_dir().join("ticks");
    let first = same_list(&w, dir);
    assert_eq!(
        same_list(&w, dir),
        first,
        "a repeated list answers the same"
    );

    // A decision edited in place (the listing shows the file's decision as it is now).
    // One the listing shows (a superseded decision's file changes nothing listed; which ids
    // the generator supersedes varies from run to run).
    let listed: Vec<&str> = first.lines().filter_map(|l| l.split('\t').next()).collect();
    let victim = ticks.join(listed[listed.len() / 3]);
    let text = std::fs::read_to_string(&victim).expect("read");
    let edited = text.replacen("\"decision\": \"", "\"decision\": \"EDITED ", 1);
    std::fs::write(&victim, &edited).expect("edit");
    let after = same_list(&w, dir);
    assert_ne!(after, first);

    // A file that is JSON but not a tick, then a removed one.
    std::fs::write(ticks.join("0000000000ff"), "{\"not\": \"a tick\"}").expect("write");
    assert!(same_list(&w, dir).contains("0000000000ff\t?\t\"<unparseable>\""));
    std::fs::remove_file(ticks.join("0000000000ff")).expect("rm");
    std::fs::write(&victim, &text).expect("restore");
    assert_eq!(same_list(&w, dir), first);

    // A new decision through evd itself.
    w.evctl(
        dir,
        &["decide", "a brand new decision", "--blame", "Wang Yu"],
    )
    .ok();
    let with_new = same_list(&w, dir);
    assert!(with_new.contains("\"a brand new decision\""), "{with_new}");

    // --json is the entries, as before.
    let json = w.evctl(dir, &["--json", "list"]).ok();
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    let entries = v["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), with_new.lines().count());
    assert!(v.get("plain_file").is_none(), "{v}");
}
