//! What makes a repeated `verify` cheap: the last audit, file by file, reused for every file
//! the tick cache has not seen change since.
//!
//! The audit of one file depends only on its name, its bytes and the config's
//! `schema_version`; only the chain checks (R6) look at all files together, and they are a
//! linear pass over the parents. So a daemon that owns a store keeps each file's contribution in
//! the tick cache's entry for that file ([`Store::keep_audit`], the slot type is [`AuditSlot`]): the cache reads a file again
//! exactly when inotify names it (or, unwatched, when its stamp moved or it is too recent to
//! trust), and a read starts a new entry, without the audit. A file that is a clean tick (the
//! common case) keeps nothing but that fact: its parent is the cached tick's. Then:
//!
//! - nothing changed (`ticks/` watched and its generation where the last audit left it, same
//!   `schema_version`): the last answer stands, and no file is opened;
//! - something changed: `ticks/` is listed afresh, each file without a kept audit (new, or read
//!   again by the cache) is read from disk and audited, every other file's audit is reused,
//!   and the chain checks run over the whole again.
//!
//! HEAD is never remembered: it is read and checked on every call. A store served in-process
//! (no daemon, no lock) remembers nothing and audits every file.

use proto::rpc::Refusal;

use crate::engine::audit::{self, Audit, FileAudit};
use crate::store::Store;

pub use crate::engine::audit::AuditSlot;
use crate::engine::audit::Outcome;

/// The last audit of a store.
#[derive(Debug, Default)]
pub struct VerifyMemo {
    /// The whole answer, and what it rests on.
    last: Option<Last>,
}
#[derive(Debug)]
struct Last {
    generation: u64,
    schema_version: u64,
    answer: Result<Audited, String>,
}

/// The audit of `ticks/`, without HEAD.
#[derive(Debug, Clone)]
pub struct Audited {
    pub audit: Audit,
    /// Entries of `ticks/` that are not files, by name, with what they are.
    pub odd: Vec<(String, &'static str)>,
    /// How many tick files the audit covers.
    pub files: usize,
    /// How many of them were read and audited for this answer (the rest were reused).
    pub reaudited: usize,
}

impl VerifyMemo {
    pub fn clear(&mut self) {
        *self = VerifyMemo::default();
    }
}

/// Audit every file of `ticks/`, reusing what the last audit found for files that did not
/// change since. `Err` is the whole-store failure (`reading store: …`).
pub fn audit_store(
    store: &mut Store,
    memo: &mut VerifyMemo,
    schema_version: u64,
) -> Result<Audited, Refusal> {
    // Only an owner sees every change as it happens (in-process reads come and go).
    if !store.is_locked() || store.refresh().is_err() {
        memo.clear();
        return audit_all(store, schema_version, false).map_err(reading_store);
    }
    let generation = store.ticks_generation();
    if let Some(last) = &memo.last {
        if store.ticks_watched()
            && last.generation == generation
            && last.schema_version == schema_version
        {
            return match &last.answer {
                Ok(a) => Ok(Audited {
                    reaudited: 0,
                    ..a.clone()
                }),
                Err(e) => Err(reading_store(e.clone())),
            };
        }
    }
    let answer = audit_all(store, schema_version, true);
    // A watched store's answer stands until the generation moves; an unwatched one's is only
    // a basis for the next (its files are re-validated by stamp on every call).
    memo.last = store.ticks_watched().then(|| Last {
        generation,
        schema_version,
        answer: answer.clone(),
    });
    answer.map_err(reading_store)
}

fn reading_store(e: String) -> Refusal {
    Refusal::io(format!("reading store: {e}"))
}

/// List `ticks/`, audit each file (with `remember`, reusing the audit the cache kept for a file
/// it has not read again, and keeping each new one there) and put the whole together.
fn audit_all(store: &mut Store, schema_version: u64, remember: bool) -> Result<Audited, String> {
    let listing = store.list_ticks_dir().map_err(|r| {
        r.message
            .strip_prefix("reading store: ")
            .unwrap_or(&r.message)
            .to_string()
    })?;
    let mut names = listing.files;
    names.sort_by(|a, b| a.0.cmp(&b.0));
    // Each file's audit: kept, or to be made (with the cache's serial for it, if any).
    let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(names.len());
    let mut todo: Vec<(usize, Option<u64>)> = Vec::new();
    for (i, (name, _)) in names.iter().enumerate() {
        let kept = if remember {
            store.kept_audit(name).and_then(|(slot, tick)| match slot {
                AuditSlot::CleanTick => tick.map(|t| {
                    Ok(FileAudit {
                        parent: Some(t.parent_id().into()),
                        notes: None,
                    })
                }),
                AuditSlot::Other(other) => {
                    let (v, outcome) = &**other;
                    (*v == schema_version).then(|| outcome.clone())
                }
            })
        } else {
            None
        };
        if kept.is_none() {
            todo.push((i, remember.then(|| store.tick_serial(name)).flatten()));
        }
        outcomes.push(kept);
    }
    // Read and audited on several threads, each text dropped as soon as it is audited; every
    // file opened through one walk to `ticks/`.
    let ticks = store.ticks_handle();
    let fresh = audit::in_parallel(&todo, |&(i, _)| {
        let (name, link) = &names[i];
        let text = store.read_for_audit(ticks.as_ref(), name, *link);
        audit::audit_file(name, &text, schema_version)
    })?;
    let reaudited = todo.len();
    for ((i, serial), outcome) in todo.into_iter().zip(fresh) {
        if let Some(serial) = serial {
            store.keep_audit(&names[i].0, serial, |tick| {
                let clean = matches!(&outcome, Ok(FileAudit { notes: None, parent: Some(p) })
                    if tick.is_some_and(|t| t.parent_id() == &**p));
                if clean {
                    AuditSlot::CleanTick
                } else {
                    AuditSlot::Other(Box::new((schema_version, outcome.clone())))
                }
            });
        }
        outcomes[i] = Some(outcome);
    }
    let files = names.len();
    let mut audits = Vec::with_capacity(files);
    for ((name, _), outcome) in names.iter().zip(&outcomes) {
        match outcome {
            // The first file, in name order, that fails the whole store decides the error.
            Some(Err(e)) => return Err(e.clone()),
            Some(Ok(a)) => audits.push((name.as_str(), a)),
            None => return Err(format!("{name}: internal error while auditing")),
        }
    }
    Ok(Audited {
        audit: audit::assemble(audits.into_iter()),
        odd: listing.odd,
        files,
        reaudited,
    })
}
