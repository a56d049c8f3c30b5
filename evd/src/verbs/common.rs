//! What several verbs share: a stored tick as its JSON answer, the superseding map, the lookup
//! of one tick by id, and the refusal of a publisher's host id that breaks git's ref rules. No
//! verb of its own, and nothing a single verb alone needs.

use proto::Tick;
use serde_json::Value;

/// The stored tick as a JSON object plus `file`.
pub fn tick_value(file: &str, t: &Tick) -> Value {
    let mut v = t.to_value();
    if let Value::Object(o) = &mut v {
        o.insert("file".into(), file.into());
    }
    v
}

/// For every superseded tick, the tick that supersedes it: any parseable tick of the whole store
/// whose `supersedes` names it, whatever its place in the lineage or its status. With several,
/// the newest `held_since` (compared as text) wins, ties going to the greater id. Empty when the
/// store cannot be read whole.
pub fn superseding_children(
    store: &mut crate::open::OpenStore,
) -> std::collections::HashMap<String, String> {
    let mut best: std::collections::HashMap<String, (&str, &str)> = Default::default();
    let Ok(ticks) = store.ticks() else {
        return Default::default();
    };
    for (file, t) in ticks {
        let Some(parent) = t.supersedes() else {
            continue;
        };
        let candidate = (t.held_since(), file);
        best.entry(parent.to_string())
            .and_modify(|b| *b = (*b).max(candidate))
            .or_insert(candidate);
    }
    best.into_iter()
        .map(|(parent, (_, child))| (parent, child.to_string()))
        .collect()
}

/// One tick looked up by id, the way the single-tick verbs need it.
pub enum Lookup {
    /// Not a 12-hex id, no such file, or no store at all.
    Missing,
    /// The file exists but is not a valid tick: the reader's message.
    Broken(String),
    Found(std::sync::Arc<Tick>),
}

/// Look a tick up by id (through the cache, which is exact). A non-id never touches the disk.
pub fn lookup(store: &mut crate::open::OpenStore, id: &str) -> Result<Lookup, proto::rpc::Refusal> {
    // Like upstream's direct read of `ticks/<id>`: no store, or a store whose ticks/ is gone,
    // has no such tick (rather than a whole-store error).
    if !proto::vocab::is_tick_id(id) || !store.exists()? || !store.ticks_dir().is_dir() {
        return Ok(Lookup::Missing);
    }
    use crate::store::Entry;
    Ok(match store.entry(id)? {
        None => Lookup::Missing,
        Some(Entry::Tick(t)) => Lookup::Found(std::sync::Arc::new(t.tick())),
        Some(Entry::Invalid(e)) | Some(Entry::NotJson(e)) | Some(Entry::Unreadable(e)) => {
            Lookup::Broken(*e)
        }
    })
}

/// Refuse a host id (a publisher's, naming refs of its own) that breaks git's ref-name rules.
pub fn require_host_id(host: &str) -> Result<(), proto::rpc::Refusal> {
    crate::sys::users::check_host_id(host).map_err(|rule| {
        proto::rpc::Refusal::refused(
            "host_id",
            format!("{} is not a host id: {rule}", proto::json::q(host)),
        )
    })
}
