//! `log`: the chain from HEAD back to genesis.

use proto::rpc::{LogEntry, LogResult, Refusal};

use crate::open::OpenStore;
use crate::store::Entry;

/// `log`: walk `parent_id` from HEAD. A missing tick ends the walk (broken lineage); an
/// unreadable one is reported after the rows read so far.
pub fn log(store: &mut OpenStore) -> Result<LogResult, Refusal> {
    store.require()?;
    let mut cur = store.head()?;
    let mut out = LogResult {
        entries: Vec::new(),
        broken_at: None,
        unreadable: None,
    };
    let mut children = crate::verbs::common::superseding_children(store);
    let mut seen = std::collections::HashSet::new();
    while !cur.is_empty() && seen.insert(cur.clone()) {
        let entry = if proto::vocab::is_tick_id(&cur) {
            store.entry(&cur)?
        } else {
            None
        };
        match entry {
            None => {
                out.broken_at = Some(cur);
                break;
            }
            Some(Entry::Invalid(e)) | Some(Entry::NotJson(e)) | Some(Entry::Unreadable(e)) => {
                out.unreadable = Some((cur, *e));
                break;
            }
            Some(Entry::Tick(t)) => {
                out.entries.push(LogEntry {
                    id: t.id().to_string(),
                    status: t.status().to_string(),
                    decision: t.decision().to_string(),
                    blame: t.blame().to_string(),
                    provenance: t.provenance().map(str::to_string),
                    supersedes: t.supersedes().map(str::to_string),
                    ratifies: t.ratifies().map(str::to_string),
                    superseded_by: children.remove(t.id()),
                });
                cur = t.parent_id().to_string();
            }
        }
    }
    Ok(out)
}
