//! What makes a repeated `verify` cheap: the last audit, file by file, reused for every file
//! the tick cache has not seen change since.
//!
//! The audit of one file depends only on its name, its bytes and the config's
//! `schema_version`; only the chain checks (R6) look at all files together, and they are a
//! linear pass over the parents. So a daemon that owns a store keeps each file's contribution
//! keyed by the tick cache's serial for that file ([`Store::tick_serial`]): the cache reads a
//! file again exactly when inotify names it (or, unwatched, when its stamp moved or it is too
//! recent to trust), and every read gets a new serial. Then:
//!
//! - nothing changed (`ticks/` watched and its generation where the last audit left it, same
//!   `schema_version`): the last answer stands, and no file is opened;
//! - something changed: `ticks/` is listed afresh, each file whose serial moved (or that is new)
//!   is read from disk and audited again, every other file's audit is reused, removed files are
//!   dropped, and the chain checks run over the whole again.
//!
//! HEAD is never remembered: it is read and checked on every call. A store served in-process
//! (no daemon, no lock) remembers nothing and audits every file.

use std::collections::HashMap;

use proto::rpc::Refusal;

use crate::audit::{self, Audit, FileAudit};
use crate::store::Store;

/// One file's audit, or the whole-store failure it causes.
type Outcome = Result<FileAudit, String>;

/// Each file's audit by name, with the cache serial it was audited at.
type PerFile = HashMap<Box<str>, (Option<u64>, Outcome)>;

/// The last audit of a store.
#[derive(Debug, Default)]
pub struct VerifyMemo {
    /// Each file as last audited: the cache serial it was audited at (`None`: the cache did not
    /// know the file then, so it is audited again next time), and the outcome.
    files: PerFile,
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
pub fn audit_store(store: &mut Store, schema_version: u64) -> Result<Audited, Refusal> {
    // Only an owner sees every change as it happens (in-process reads come and go).
    if !store.is_locked() || store.refresh().is_err() {
        store.verify_memo.clear();
        return audit_all(store, schema_version, None).map_err(reading_store);
    }
    let generation = store.ticks_generation();
    if let Some(last) = &store.verify_memo.last {
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
    let mut memo = std::mem::take(&mut store.verify_memo);
    if memo
        .last
        .as_ref()
        .is_some_and(|l| l.schema_version != schema_version)
    {
        memo.files.clear();
    }
    let answer = audit_all(store, schema_version, Some(&mut memo.files));
    // A watched store's answer stands until the generation moves; an unwatched one's is only
    // a basis for the next (its files are re-validated by stamp on every call).
    memo.last = store.ticks_watched().then(|| Last {
        generation,
        schema_version,
        answer: answer.clone(),
    });
    store.verify_memo = memo;
    answer.map_err(reading_store)
}

fn reading_store(e: String) -> Refusal {
    Refusal::io(format!("reading store: {e}"))
}

/// List `ticks/`, audit each file (reusing `memo`'s audit of a file whose serial did not move)
/// and put the whole together. `memo`, when given, is left holding every file's audit.
fn audit_all(
    store: &Store,
    schema_version: u64,
    mut memo: Option<&mut PerFile>,
) -> Result<Audited, String> {
    let listing = store.list_ticks_dir().map_err(|r| {
        r.message
            .strip_prefix("reading store: ")
            .unwrap_or(&r.message)
            .to_string()
    })?;
    let mut names = listing.files;
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let serials: Vec<Option<u64>> = names
        .iter()
        .map(|(n, _)| memo.as_ref().and_then(|_| store.tick_serial(n)))
        .collect();
    let mut known = match memo.as_deref_mut() {
        Some(m) => std::mem::take(m),
        None => HashMap::new(),
    };
    // The files whose audit cannot be reused: read and audited on several threads, each text
    // dropped as soon as it is audited.
    let todo: Vec<usize> = (0..names.len())
        .filter(|&i| {
            let Some(serial) = serials[i] else {
                return true;
            };
            known
                .get(names[i].0.as_str())
                .is_none_or(|(s, _)| *s != Some(serial))
        })
        .collect();
    let fresh = audit::in_parallel(&todo, |&i| {
        let (name, link) = &names[i];
        audit::audit_file(name, &store.read_for_audit(name, *link), schema_version)
    })?;
    let reaudited = todo.len();
    let mut fresh = todo.into_iter().zip(fresh).peekable();
    let mut next: PerFile = HashMap::with_capacity(names.len());
    for (i, (name, _)) in names.iter().enumerate() {
        let outcome = match fresh.peek() {
            Some((at, _)) if *at == i => fresh.next().map(|(_, o)| o),
            _ => known.remove(name.as_str()).map(|(_, o)| o),
        };
        let outcome =
            outcome.unwrap_or_else(|| Err(format!("{name}: internal error while auditing")));
        next.insert(name.as_str().into(), (serials[i], outcome));
    }
    let files = names.len();
    let audits = names
        .iter()
        .map(|(n, _)| {
            next.get(n.as_str())
                .map(|(_, o)| (n.as_str(), o))
                .ok_or_else(|| format!("{n}: internal error while auditing"))
        })
        .collect::<Result<Vec<_>, String>>();
    let result = audits.and_then(|audits| {
        // The first file, in name order, that fails the whole store decides the error.
        let ok = audits
            .into_iter()
            .map(|(n, o)| o.as_ref().map(|a| (n, a)).map_err(String::clone))
            .collect::<Result<Vec<_>, String>>()?;
        Ok(audit::assemble(ok.into_iter()))
    });
    let result = result.map(|audit| Audited {
        audit,
        odd: listing.odd,
        files,
        reaudited,
    });
    if let Some(memo) = memo {
        *memo = next;
    }
    result
}
