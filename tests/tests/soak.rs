//! A short soak in the suite (`evd_e2e::soak`): mixed traffic over a few stores with evd
//! SIGKILLed every few seconds; nothing acknowledged lost, nothing written twice, every ledger
//! verifying, the daemon's `check` equal to an in-process one. `evbench soak --minutes M` runs
//! it long.

use std::time::Duration;

use evd_e2e::{soak, World};

#[test]
fn mixed_traffic_with_evd_killed_loses_and_duplicates_nothing() {
    let w = World::new();
    let cfg = soak::Config {
        duration: Duration::from_secs(25),
        stores: 4,
        kill_every: Some(Duration::from_secs(4)),
    };
    let r = soak::run(&w, &cfg).expect("soak");
    eprintln!(
        "soak: {:?}, kills {}, decides {} done / {} failed, ledger appends {}",
        r.ops, r.kills, r.decides_done, r.decides_failed, r.appends_done
    );
    assert!(r.kills >= 2, "evd was killed: {r:?}");
    assert!(r.decides_done > 0 && r.appends_done > 0, "{r:?}");
    assert!(r.clean(), "{r:#?}");
    w.stop_daemon();
}
