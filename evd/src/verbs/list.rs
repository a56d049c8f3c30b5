//! `list`: the current view plus the files that are JSON but not ticks.

use proto::rpc::{AnswerRef, ListEntry, ListForm, ListRequest, ListResult, Refusal};

use crate::open::OpenStore;
use crate::store::Entry;

/// `list`: the current view plus every file that is JSON but not a tick, sorted by file name.
pub fn list(store: &mut OpenStore) -> Result<ListResult, Refusal> {
    store.require()?;
    let mut out: Vec<ListEntry> = store
        .current()?
        .into_iter()
        .map(|(file, t)| ListEntry {
            file: file.to_string(),
            parseable: true,
            status: Some(t.status().to_string()),
            decision: Some(t.decision().to_string()),
            authority: t.authority().map(str::to_string),
            jurisdiction: t.jurisdiction().map(str::to_string),
            source_ref: t.source_ref_key(),
            provenance: t.provenance().map(str::to_string),
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
    Ok(ListResult {
        entries: out,
        plain_file: None,
    })
}

/// `ev.list` in the form asked for. The plain listing is written to an answer file once per
/// change of the tick cache (see [`crate::sys::answers`]) and handed over by name: a large store's
/// listing is megabytes, which the socket would carry as escaped JSON at a fraction of the
/// speed. Without answer files (in-process), the entries.
pub fn list_answer(store: &mut OpenStore, req: &ListRequest) -> Result<ListResult, Refusal> {
    if req.form == ListForm::PlainFile {
        if let Some(file) = plain_file(store)? {
            return Ok(ListResult {
                entries: Vec::new(),
                plain_file: Some(file),
            });
        }
    }
    list(store)
}

/// The plain listing's answer file for the tick cache as it is now, written if it is not there.
fn plain_file(store: &mut OpenStore) -> Result<Option<AnswerRef>, Refusal> {
    store.require()?;
    // The whole-store read rules first: a poisoned store is refused, never answered from a file.
    store.readable()?;
    let generation = store.ticks_generation();
    let present = store.list_answer.as_ref().is_some_and(|(g, f)| {
        *g == generation
            && std::fs::symlink_metadata(&f.path).is_ok_and(|m| m.is_file() && m.len() == f.len)
    });
    if !present {
        store.list_answer = None;
        let text = proto::rpc::list_plain_lines(&list(store)?.entries);
        store.list_answer =
            crate::sys::answers::AnswerFile::write(text.as_bytes()).map(|f| (generation, f));
        // The entries and the text were a large store's worth of small strings: give the pages
        // back.
        drop(text);
        crate::sys::resources::release_free_memory();
    }
    Ok(store.list_answer.as_ref().map(|(_, f)| AnswerRef {
        path: f.path.display().to_string(),
        len: f.len,
    }))
}
