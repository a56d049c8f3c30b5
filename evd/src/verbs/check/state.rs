//! The state files of `results/state/`: the body written for each current tick, a digest of
//! its verdicts so an unchanged one is not rewritten, and what the previous daemon left there,
//! read ahead in parallel. It writes state files; it does not grade anything.

use std::path::Path;

use proto::model::Check;
use proto::Tick;
use serde_json::{Map, Value};

use crate::engine::verdict::Label;
use crate::open::OpenStore;
use crate::sys::fsio;

/// One ground's outcome.
pub(super) struct Graded {
    pub(super) label: Label,
    pub(super) missing: Vec<String>,
}

/// The state file of one tick, without its `computed_at` (added when written).
fn state_body(
    tick: &Tick,
    graded: &[Graded],
    policy: &str,
    sha: Option<&str>,
    evidence: Option<&[crate::ledger::evidence::Cited]>,
) -> Map<String, Value> {
    let grounds: Vec<Value> = tick
        .grounds
        .iter()
        .zip(graded)
        .map(|(g, v)| {
            let mut o = Map::new();
            o.insert("claim".into(), g.claim.as_str().into());
            o.insert("supports".into(), g.supports.as_str().into());
            o.insert("verdict".into(), v.label.as_str().into());
            match &g.check {
                Some(Check::Test {
                    reference,
                    verified_at_sha,
                    ..
                }) => {
                    o.insert("check".into(), "test".into());
                    o.insert("ref".into(), reference.as_str().into());
                    o.insert("verified_at_sha".into(), verified_at_sha.as_str().into());
                }
                Some(Check::Person { .. }) => {
                    o.insert("check".into(), "person".into());
                }
                None => {
                    o.insert("check".into(), "none".into());
                }
            }
            if v.label == Label::NotRun {
                o.insert("missing_platforms".into(), v.missing.clone().into());
            }
            Value::Object(o)
        })
        .collect();
    let mut o = Map::new();
    // Only a tick citing evidence has the list (upstream's files never do).
    if let Some(cited) = evidence.filter(|c| !c.is_empty()) {
        let list: Vec<Value> = cited
            .iter()
            .map(crate::ledger::evidence::Cited::to_json)
            .collect();
        o.insert("evidence".into(), list.into());
    }
    o.insert("grounds".into(), grounds.into());
    let mut r = Map::new();
    r.insert("policy".into(), policy.into());
    r.insert("sha".into(), sha.map_or(Value::Null, Value::from));
    o.insert("staleness_ref".into(), Value::Object(r));
    o.insert("tick_id".into(), tick.id.as_str().into());
    o
}

/// What a state file says but the time, as a digest: the tick (content-addressed), each
/// verdict, the reference. A state file this store wrote with the same digest needs no write.
pub(super) fn verdicts_digest(
    tick: &Tick,
    graded: &[Graded],
    policy: &str,
    sha: Option<&str>,
    evidence: Option<&[crate::ledger::evidence::Cited]>,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    evidence.hash(&mut h);
    tick.id.hash(&mut h);
    tick.grounds.len().hash(&mut h);
    for g in graded {
        g.label.as_str().hash(&mut h);
        g.missing.hash(&mut h);
    }
    policy.hash(&mut h);
    sha.hash(&mut h);
    h.finish()
}

/// Write a tick's state file unless this store already wrote the same verdicts there (`digest`,
/// see [`verdicts_digest`]): a verdict that did not change keeps its file (and its `computed_at`, the time it was computed).
/// `create`: a real check makes `results/state/` and new files; a background re-evaluation only
/// rewrites files that exist (it never resurrects a store being removed, nor writes a file for
/// a tick no check has seen); with it, `results/state/` is there ([`state_dir`]). Returns
/// whether the file now holds these verdicts.
pub(super) fn write_state(
    store: &mut OpenStore,
    tick: &Tick,
    graded: &[Graded],
    (policy, sha): (&str, Option<&str>),
    evidence: Option<&[crate::ledger::evidence::Cited]>,
    create: bool,
    digest: u64,
) -> bool {
    let id = tick.id.as_str();
    if store.state_written.get(id) == Some(&digest) {
        return true;
    }
    let dir = store.results_dir().join("state");
    let name = format!("{id}.json");
    // In the background, only keep existing files current: a state file appears when a check
    // first sees its tick, as upstream's do.
    let ready = create || std::fs::symlink_metadata(dir.join(&name)).is_ok_and(|m| m.is_file());
    if !ready || !proto::vocab::is_tick_id(id) {
        return false;
    }
    let mut body = state_body(tick, graded, policy, sha, evidence);
    // A file this store has no record of (a fresh daemon, or written by someone else) that
    // already says exactly this keeps its bytes and its `computed_at`: reading is cheaper than
    // rewriting, and the verdict did not change.
    let same_on_disk = match store.state_read_ahead.remove(id) {
        Some(said) => said.is_some_and(|d| d == state_digest(&body)),
        None => read_state_file(&dir.join(&name)).is_some_and(|o| o == body),
    };
    if same_on_disk {
        store.state_written.insert(id, digest);
        return true;
    }
    body.insert(
        "computed_at".into(),
        crate::engine::clock::now_rfc3339().into(),
    );
    let bytes = proto::json::pretty(&Value::Object(body));
    store
        .state_watch
        .ours(name.clone(), &mut store.state_written);
    store.state_epoch += 1;
    if fsio::replace_unsynced(&dir.join(&name), bytes.as_bytes()).is_ok() {
        store.state_written.insert(id, digest);
        true
    } else {
        false
    }
}

/// Make sure `results/state/` is there, once per evaluation that creates state files; whether
/// it is.
pub(super) fn state_dir(store: &mut OpenStore) -> bool {
    let dir = store.results_dir().join("state");
    let fresh = !dir.is_dir();
    let made = fsio::ensure_dir(&dir).is_ok();
    if made && fresh {
        store.state_watch.ensure(&mut store.state_written);
    }
    made
}

/// What a state file says but its `computed_at` (`None` when it is missing, unreadable, or not
/// a state file's shape).
fn read_state_file(path: &Path) -> Option<Map<String, Value>> {
    let text = fsio::read_text(path).ok()?;
    match serde_json::from_str::<Value>(&text).ok()? {
        Value::Object(mut o) => o.remove("computed_at").map(|_| o),
        _ => None,
    }
}

/// A digest of what a state file says but its `computed_at` (what is read ahead is kept as this
/// alone: at 100,000 ticks the parsed files would be hundreds of megabytes).
pub(super) fn state_digest(said: &Map<String, Value>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    // Keys come out sorted (no `preserve_order`): the same map, the same text.
    serde_json::to_string(said).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// Read, on a few threads, the state files of `ids` this store has no record of, for the
/// evaluation about to compare them (a fresh daemon's first check compares thousands). A file
/// the previous daemon recorded (see [`crate::store::state_record`]) and nobody touched since is not
/// read: what it says is known.
pub(super) fn read_state_files_ahead(store: &mut OpenStore, ids: Vec<&str>) {
    if ids.is_empty() {
        return;
    }
    let record = store.take_state_record();
    let dir = store.results_dir().join("state");
    /// What is known of one state file.
    enum Known {
        Recorded(u64),
        Read(Option<u64>),
    }
    let known = crate::sys::par::map(&ids, 256, |id| {
        let path = dir.join(format!("{id}.json"));
        let recorded = record.get(*id).filter(|(_, stamp)| {
            crate::store::state_record::Stamp::of(&path).as_ref() == Some(stamp)
        });
        match recorded {
            Some(&(digest, _)) => Known::Recorded(digest),
            None => Known::Read(read_state_file(&path).map(|o| state_digest(&o))),
        }
    });
    for (id, k) in ids.into_iter().zip(known) {
        let id = id.to_string();
        match k {
            Known::Recorded(digest) => {
                store.state_written.insert(&id, digest);
            }
            Known::Read(said) => {
                store.state_read_ahead.insert(id, said);
            }
        }
    }
}
