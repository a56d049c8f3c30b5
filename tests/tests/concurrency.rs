//! One writer per store: any number of concurrent clients leave one linear chain.

use std::collections::HashSet;
use std::sync::Arc;

use evd_e2e::{chain, Repo, World};

#[test]
fn eight_clients_recording_fifty_decisions_each_leave_one_linear_chain() {
    const CLIENTS: usize = 8;
    const EACH: usize = 50;
    let w = Arc::new(World::new());
    let repo = Arc::new(Repo::new());
    w.evctl(repo.path(), &["init"]).ok();
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (w, repo) = (Arc::clone(&w), Arc::clone(&repo));
            std::thread::spawn(move || {
                let mut ids = Vec::with_capacity(EACH);
                for i in 0..EACH {
                    let text = format!("client {c} decision {i}");
                    let r = w
                        .evctl(
                            repo.path(),
                            &["decide", &text, "--assume", "it holds", "--blame", "load"],
                        )
                        .ok();
                    let id = r
                        .stdout
                        .strip_prefix("recorded ")
                        .and_then(|s| s.split_whitespace().next())
                        .expect("recorded <id>")
                        .to_string();
                    ids.push(id);
                }
                ids
            })
        })
        .collect();
    let acked: Vec<String> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("client thread"))
        .collect();
    assert_eq!(acked.len(), CLIENTS * EACH);
    let unique: HashSet<&String> = acked.iter().collect();
    assert_eq!(
        unique.len(),
        CLIENTS * EACH,
        "every decision got its own tick"
    );

    let files = repo.tick_files();
    assert_eq!(files.len(), CLIENTS * EACH, "no fork, no stray file");
    let linear = chain(&repo);
    assert_eq!(
        linear.len(),
        CLIENTS * EACH,
        "HEAD reaches every tick: one linear chain"
    );
    assert_eq!(
        linear.iter().collect::<HashSet<_>>(),
        unique,
        "the chain holds exactly the acknowledged decisions"
    );
    let v = w.evctl(repo.path(), &["verify"]).ok();
    assert!(v.stdout.contains("chain intact"));
    // Upstream agrees.
    let v = w.ev(repo.path(), &["verify"]).ok();
    assert!(v.stdout.contains("chain intact"));
}
