//! Every directory evd watches, through one hub for the whole daemon: synchronous drains
//! ([`DirWatch`]) whose "nothing changed" is certain, and live listeners. The API is the same on
//! every platform.
//!
//! It is [`notify_hub`]: one `notify` watcher for the whole daemon, which is one inotify
//! instance on Linux and Android, FSEvents on macOS and kqueue on the BSDs. Where the platform
//! delivers one watcher's events in order (inotify), a drain sends a fence through the watcher
//! and so is certain; elsewhere a synchronous watch is refused with its reason (its owner
//! validates against the disk) and only live listeners are served. See docs/platforms.md.

mod common;
pub use common::{Changes, HubStats, Listener, WatchError, DEBOUNCE};

mod notify_hub;
pub use notify_hub::*;

/// What the hub promises, on whichever platform the tests run.
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    fn one(name: &str) -> Changes {
        Changes::Names(std::iter::once(name.to_string()).collect())
    }

    #[test]
    fn writes_renames_and_removals_are_reported_by_name_and_nothing_else() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut w = DirWatch::new(d.path()).expect("watch");
        assert_eq!(w.drain(), Changes::Quiet);
        std::fs::write(d.path().join("a"), "1").expect("write");
        std::fs::write(d.path().join("b.tmp"), "2").expect("write");
        std::fs::rename(d.path().join("b.tmp"), d.path().join("b")).expect("rename");
        let want: BTreeSet<String> = ["a", "b", "b.tmp"].iter().map(|s| s.to_string()).collect();
        assert_eq!(w.drain(), Changes::Names(want));
        assert_eq!(w.drain(), Changes::Quiet);
        // Reading a file is no change.
        let _ = std::fs::read(d.path().join("a")).expect("read");
        assert_eq!(w.drain(), Changes::Quiet);
        std::fs::remove_file(d.path().join("a")).expect("rm");
        assert_eq!(w.drain(), one("a"));
    }

    #[test]
    fn the_directory_going_away_asks_for_a_rescan() {
        let d = tempfile::tempdir().expect("tempdir");
        let sub = d.path().join("ticks");
        std::fs::create_dir(&sub).expect("mkdir");
        let mut w = DirWatch::new(&sub).expect("watch");
        std::fs::rename(&sub, d.path().join("moved")).expect("mv");
        assert_eq!(w.drain(), Changes::Rescan);
    }

    #[test]
    fn two_handles_on_one_directory_share_a_watch_and_each_sees_every_change() {
        let d = tempfile::tempdir().expect("tempdir");
        let before = hub().stats();
        let mut a = DirWatch::new(d.path()).expect("watch");
        let mut b = DirWatch::new(d.path()).expect("watch");
        std::fs::write(d.path().join("x"), "1").expect("write");
        assert_eq!(a.drain(), one("x"));
        assert_eq!(b.drain(), one("x"));
        std::fs::write(d.path().join("y"), "1").expect("write");
        drop(a);
        assert_eq!(b.drain(), one("y"));
        drop(b);
        let after = hub().stats();
        // Other tests share the hub; this one's handles are all given back.
        assert!(after.consumers <= before.consumers + 2);
        assert_eq!(after.instances, 1);
    }

    #[test]
    fn a_listener_hears_changes_without_anyone_draining() {
        let d = tempfile::tempdir().expect("tempdir");
        let (tx, rx) = std::sync::mpsc::channel();
        let tx = Mutex::new(tx);
        let listener: Listener = Arc::new(move |c| {
            if let Ok(t) = tx.lock() {
                let _ = t.send(c);
            }
        });
        let _w = hub().watch(d.path(), Some(listener)).expect("watch");
        std::fs::write(d.path().join("r.jsonl"), "{}\n").expect("write");
        let got = rx.recv_timeout(Duration::from_secs(10)).expect("delivered");
        assert_eq!(got, one("r.jsonl"));
        // A drain by someone else on the same directory does not steal it from the listener.
        let mut other = DirWatch::new(d.path()).expect("watch");
        std::fs::write(d.path().join("s.jsonl"), "{}\n").expect("write");
        assert_eq!(other.drain(), one("s.jsonl"));
        let got = rx.recv_timeout(Duration::from_secs(10)).expect("delivered");
        assert_eq!(got, one("s.jsonl"));
    }

    #[test]
    fn a_hub_that_refuses_says_why() {
        let h: &'static Hub = Box::leak(Box::new(Hub::new(Some("off for this test".into()))));
        let d = tempfile::tempdir().expect("tempdir");
        let e = h.watch(d.path(), None).expect_err("refused");
        assert_eq!(e.0, "off for this test");
        assert_eq!(h.stats().instances, 0);
    }
}
