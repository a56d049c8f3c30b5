//! `list`: the current view plus the files that are JSON but not ticks.

use proto::rpc::{ListEntry, ListResult, Refusal};

use crate::store::{Entry, Store};

/// `list`: the current view plus every file that is JSON but not a tick, sorted by file name.
pub fn list(store: &mut Store) -> Result<ListResult, Refusal> {
    store.require()?;
    let mut out: Vec<ListEntry> = store
        .current()?
        .into_iter()
        .map(|(file, t)| ListEntry {
            file: file.to_string(),
            parseable: true,
            status: Some(t.status.clone()),
            decision: Some(t.decision.clone()),
            authority: t.authority.clone(),
            jurisdiction: t.jurisdiction.clone(),
            source_ref: t.source_ref_key(),
            provenance: t.provenance.clone(),
        })
        .collect();
    out.extend(
        store
            .entries()?
            .iter()
            .filter(|(_, e)| matches!(e, Entry::Invalid(_)))
            .map(|(n, _)| ListEntry {
                file: n.to_string(),
                parseable: false,
                status: None,
                decision: None,
                authority: None,
                jurisdiction: None,
                source_ref: None,
                provenance: None,
            }),
    );
    out.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(ListResult { entries: out })
}
