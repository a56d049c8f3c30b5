//! `ev.receipts.publish`: this host's receipts, at commits the repository has, gathered into
//! the receipts notes ref (see [`crate::git::notes`]) on top of the remote's copy the caller
//! just fetched, so that the caller's push is a fast-forward. Two histories that diverged are
//! joined by a merge commit holding the union of their notes (it adds nothing of its own); the
//! new receipts then go in a commit of their own whose message names the host, so every line
//! has one publisher. The ref moves only from the value it was read at.
//!
//! It must not push or fetch (the client does, with the user's credentials) nor publish a
//! receipt another publisher's notes brought here.

use std::collections::BTreeSet;

use proto::json::q;
use proto::rpc::{PublishReceiptsRequest, PublishReceiptsResult, Refusal, Warning};

use crate::git::notes::{self, NewCommit, Notes, NOTES_REF};
use crate::open::OpenStore;
use crate::sys::fsio;

/// The most receipt files read for one publish.
const MAX_FILES: usize = 100_000;

/// An email address fit for a commit's ident line (no angle brackets, no line breaks).
fn ident_email(by: &str) -> String {
    let e: String = by
        .chars()
        .filter(|c| !matches!(c, '<' | '>' | '\n' | '\r' | '\0'))
        .take(200)
        .collect();
    e.trim().to_string()
}

/// This host's receipts at commits of the repository, by commit (canonical lines), leaving out
/// lines other publishers' notes brought (a line this host published and read back is still
/// its own); and how many were left out.
fn local_receipts(
    store: &OpenStore,
    host: &str,
    warnings: &mut Vec<Warning>,
) -> Result<(Notes, usize), Refusal> {
    let dir = store.results_dir().join("receipts");
    let brought = super::import::load_origins(store);
    let mut by_commit = Notes::new();
    let mut skipped = 0;
    let entries = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((by_commit, 0)),
        Err(e) => return Err(Refusal::io(format!("results/receipts: {e}"))),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".jsonl"))
        .take(MAX_FILES)
        .collect();
    names.sort();
    for name in names {
        let text = match fsio::read_text_opt(&dir.join(&name)) {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(e) => {
                warnings.push(Warning {
                    kind: "receipt_file".into(),
                    message: format!("warning: results/receipts/{name} was not published: {e}"),
                });
                continue;
            }
        };
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let Some(r) = notes::receipt_of(l) else {
                continue;
            };
            let line = r.line();
            let others = brought.get(line.trim_end()).is_some_and(|o| o.host != host);
            if others || !proto::model::is_40_lower_hex(&r.commit) {
                skipped += 1;
                continue;
            }
            by_commit.entry(r.commit.clone()).or_default().insert(line);
        }
    }
    Ok((by_commit, skipped))
}

pub fn publish(
    store: &mut OpenStore,
    req: &PublishReceiptsRequest,
) -> Result<PublishReceiptsResult, Refusal> {
    store.require()?;
    crate::verbs::common::require_host_id(&req.host)?;
    if let Some(r) = &req.remote {
        if r.is_empty()
            || r.contains(['\0', '\n', ' ', ':', '*', '?', '[', '\\', '^', '~'])
            || r.contains("..")
            || r.starts_with(['-', '/'])
            || r.ends_with('/')
            || r.len() > 200
        {
            return Err(Refusal::refused(
                "remote",
                format!("{} is not a remote name", q(r)),
            ));
        }
    }
    let root = store.root().to_path_buf();
    let git_err = |e: String| Refusal::io(format!("receipts publish: {e}"));
    let tips = notes::tips(&root).map_err(git_err)?;
    let tip_of = |name: &str| tips.iter().find(|(r, _)| r == name).map(|(_, c)| c.clone());
    let local = tip_of(NOTES_REF);
    let remote = req
        .remote
        .as_deref()
        .and_then(|r| tip_of(&notes::remote_notes_ref(r)));
    let mut warnings = Vec::new();
    let (mine, mut skipped) = local_receipts(store, &req.host, &mut warnings)?;
    let commits: BTreeSet<String> = mine.keys().cloned().collect();
    let present = notes::existing(&root, &commits).map_err(git_err)?;
    let sources: Vec<String> = [local.clone(), remote.clone()]
        .into_iter()
        .flatten()
        .collect();
    let (mut all, _) = notes::union(&root, &sources).map_err(git_err)?;
    let mut added = 0;
    let mut adding = Notes::new();
    for (commit, lines) in mine {
        if !present.contains(&commit) {
            skipped += lines.len();
            continue;
        }
        let have = all.get(&commit);
        let new: BTreeSet<String> = lines
            .into_iter()
            .filter(|l| !have.is_some_and(|h| h.contains(l)))
            .collect();
        if !new.is_empty() {
            added += new.len();
            adding.insert(commit, new);
        }
    }
    let ident = |email: &str| format!("{} <{}>", req.host, email);
    let email = match ident_email(&req.by) {
        e if e.is_empty() => format!("evctl@{}", req.host),
        e => e,
    };
    // Where the new notes go on top of: one history, or the two joined.
    let base = match (&local, &remote) {
        (None, None) => None,
        (Some(l), None) => Some(l.clone()),
        (None, Some(r)) => Some(r.clone()),
        (Some(l), Some(r)) if l == r => Some(l.clone()),
        (Some(l), Some(r)) => match (
            notes::is_ancestor(&root, l, r),
            notes::is_ancestor(&root, r, l),
        ) {
            (Some(true), _) => Some(r.clone()),
            (_, Some(true)) => Some(l.clone()),
            _ => Some(
                notes::write_commit(
                    &root,
                    &NewCommit {
                        parents: &[r.clone(), l.clone()],
                        notes: &all,
                        message: &format!(
                            "evctl receipts publish: join this clone's receipts notes with {}'s\n\n{}: {}\n",
                            req.remote.as_deref().unwrap_or("the remote"),
                            notes::HOST_TRAILER,
                            req.host
                        ),
                        ident: &ident(&email),
                    },
                )
                .map_err(git_err)?,
            ),
        },
    };
    let new_tip = if adding.is_empty() {
        base
    } else {
        for (commit, lines) in adding {
            all.entry(commit).or_default().extend(lines);
        }
        let parents: Vec<String> = base.into_iter().collect();
        Some(
            notes::write_commit(
                &root,
                &NewCommit {
                    parents: &parents,
                    notes: &all,
                    message: &format!(
                        "evctl receipts publish: {added} receipt{} from {}\n\n{}: {}\n",
                        if added == 1 { "" } else { "s" },
                        req.host,
                        notes::HOST_TRAILER,
                        req.host
                    ),
                    ident: &ident(&email),
                },
            )
            .map_err(git_err)?,
        )
    };
    if let Some(t) = &new_tip {
        if local.as_ref() != Some(t) {
            notes::update_ref(&root, NOTES_REF, t, local.as_deref()).map_err(|e| {
                Refusal::io(format!(
                    "receipts publish: {NOTES_REF} moved while it was being written ({e}); run it again"
                ))
            })?;
        }
    }
    Ok(PublishReceiptsResult {
        notes_ref: NOTES_REF.to_string(),
        push: new_tip.is_some() && new_tip != remote,
        commit: new_tip,
        added,
        receipts: all.values().map(BTreeSet::len).sum(),
        commits: all.len(),
        skipped,
        warnings,
    })
}
