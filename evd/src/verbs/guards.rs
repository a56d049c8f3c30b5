//! `guards`: which current decisions guard which files. The verdicts are exactly `check`'s (the
//! same evaluation, reused when nothing moved; no check event is recorded), joined with what each
//! tick says about its triggers, its tests and its roads not taken. A git hook asks it for the
//! staged paths; the language server asks it for every guarded file.

use std::collections::HashMap;

use proto::model::Check;
use proto::pathspec;
use proto::rpc::{
    CheckRequest, GuardedDecision, GuardedGround, GuardsRequest, GuardsResult, LastRun, Refusal,
    StalenessRef,
};

use crate::engine::verdict;
use crate::memo::check as check_memo;
use crate::open::OpenStore;
use crate::verbs::check;

/// Paths a request may name at most (a hook's staged change is usually a handful).
pub const MAX_PATHS: usize = 100_000;

pub fn guards(store: &mut OpenStore, req: &GuardsRequest) -> Result<GuardsResult, Refusal> {
    let Some(si) = req.staged_index.as_ref().filter(|_| req.paths.is_none()) else {
        return guards_of_paths(store, req);
    };
    // A pre-commit gate's staged change, read here from the index: the gate spawns no git.
    let staged = staged_paths(store, si).ok_or_else(|| {
        Refusal::refused(
            "staged_unknown",
            format!(
                "evd cannot read the staged change of {} itself; ask git and send the paths",
                si.index
            ),
        )
    })?;
    let rel: Vec<String> = staged
        .iter()
        .filter_map(|p| p.strip_prefix(si.prefix.as_str()))
        .map(str::to_string)
        .collect();
    let mut r = guards_of_paths(
        store,
        &GuardsRequest {
            paths: Some(rel),
            staged: true,
            staged_index: None,
            ..req.clone()
        },
    )?;
    r.staged_paths = Some(staged);
    Ok(r)
}

/// The paths the index `si` stages against HEAD (from the top of the work tree), HEAD's tree
/// asked of git once per HEAD and kept; `None` when that cannot be read without guessing.
fn staged_paths(store: &mut OpenStore, si: &proto::rpc::StagedIndex) -> Option<Vec<String>> {
    let index = std::path::Path::new(&si.index);
    if !index.is_absolute() {
        return None;
    }
    let root = store.store.root().to_path_buf();
    let head = check::basis::git_head(&mut store.git, &root)?;
    store.head_tree_for(&head)?;
    crate::git::staged::staged(index, store.head_tree.as_ref()?)
}

fn guards_of_paths(store: &mut OpenStore, req: &GuardsRequest) -> Result<GuardsResult, Refusal> {
    let wanted: Option<Vec<&str>> = req
        .paths
        .as_ref()
        .map(|p| p.iter().map(String::as_str).collect());
    if wanted.as_ref().is_some_and(|p| p.len() > MAX_PATHS)
        || req.ticks.as_ref().is_some_and(|t| t.len() > MAX_PATHS)
    {
        return Err(Refusal::refused(
            "too_many_paths",
            format!(
                "guards takes at most {MAX_PATHS} paths (and {MAX_PATHS} tick ids) in one request"
            ),
        ));
    }
    // A pre-commit gate's paths are uncommitted by definition: that is all it needs of the work
    // tree (see `dirty` below), so an evaluation made before the last `git add` answers it.
    let work = if req.staged && wanted.is_some() {
        check::WorkTree::LastKnown
    } else {
        check::WorkTree::Look
    };
    let e = check::evaluated_with(
        store,
        &CheckRequest {
            context: req.context.clone(),
            ..CheckRequest::default()
        },
        work,
    )?;
    let origins = crate::verbs::receipts::import::origins_cached(store);
    // Which decisions match, and how much each asks for attention, through the evaluation's
    // trigger index: a store has few distinct triggers, so each is compared with the requested
    // paths once, and a large store's many ticks cost a byte each. Only the decisions answered
    // are then read: grounds, receipts and roads not taken.
    let covered: HashMap<&str, Vec<usize>> = match &wanted {
        None => HashMap::new(),
        Some(paths) => e
            .eval
            .trigger_index()
            .triggers
            .iter()
            .filter_map(|(t, _)| {
                let c: Vec<usize> = (0..paths.len())
                    .filter(|&i| pathspec::covers(t, paths[i]))
                    .collect();
                (!c.is_empty()).then_some((t.as_str(), c))
            })
            .collect(),
    };
    let mut marks = e.eval.trigger_index().marks(e.eval.parts.len(), |t| {
        wanted.is_none() || covered.contains_key(t)
    });
    if let Some(ticks) = &req.ticks {
        let only: std::collections::HashSet<&str> = ticks.iter().map(String::as_str).collect();
        for (m, part) in marks.iter_mut().zip(&e.eval.parts) {
            if !only.contains(part.tick.id()) {
                *m = 0;
            }
        }
    }
    let matched_total = marks.iter().filter(|&&m| m > 0).count();
    let hits = check_memo::chosen(&marks, req.limit);
    let mut decisions = Vec::with_capacity(hits.len());
    for at in hits {
        let part = &e.eval.parts[at];
        // Only the chosen few are rebuilt whole.
        let tick = &part.tick.tick();
        // The requested paths it covers, in request order; without paths, its triggers.
        let mut triggers: Vec<&str> = Vec::new();
        for g in &tick.grounds {
            if let Some(Check::Test { liveness, .. }) = &g.check {
                for t in &liveness.triggered_by {
                    if !triggers.contains(&t.as_str()) {
                        triggers.push(t);
                    }
                }
            }
        }
        let matched: Vec<String> = match &wanted {
            Some(wanted) => {
                let mut idx: Vec<usize> = triggers
                    .iter()
                    .filter_map(|t| covered.get(t))
                    .flatten()
                    .copied()
                    .collect();
                idx.sort_unstable();
                idx.dedup();
                idx.iter().map(|&i| wanted[i].to_string()).collect()
            }
            None => triggers.iter().map(|t| t.to_string()).collect(),
        };
        let rows: HashMap<usize, proto::rpc::CheckRow> =
            part.rows().map(|r| (r.ground_index, r)).collect();
        let mut grounds = Vec::new();
        for (index, g) in tick.grounds.iter().enumerate() {
            let Some(Check::Test {
                reference,
                counter_test,
                liveness,
                ..
            }) = &g.check
            else {
                continue;
            };
            let Some(row) = rows.get(&index) else {
                continue;
            };
            let recs = store.receipts.get(reference);
            let mut row = row.clone();
            if req.staged
                && row.label == verdict::Label::Green.as_str()
                && wanted.as_ref().is_some_and(|w| {
                    liveness
                        .triggered_by
                        .iter()
                        .any(|t| w.iter().any(|p| pathspec::covers(t, p)))
                })
            {
                if !crate::git::ranges::plain_paths(&liveness.triggered_by) {
                    // Asked of git path by path when evaluated: look at the work tree.
                    if work == check::WorkTree::LastKnown {
                        return guards_of_paths(
                            store,
                            &GuardsRequest {
                                staged: false,
                                ..req.clone()
                            },
                        );
                    }
                } else {
                    dirty(&mut row, counter_test.is_none());
                }
            }
            let last_run = verdict::latest(recs.iter()).map(|r| LastRun {
                result: r.result.as_str().into(),
                commit: r.commit.clone(),
                ran_at: r.ran_at.clone(),
                platform: r.platform.clone(),
                origin: origins
                    .as_ref()
                    .filter(|o| o.tests.contains(&r.test))
                    .and_then(|o| o.lines.get(r.line().trim_end()).cloned()),
            });
            grounds.push(GuardedGround {
                index,
                claim: g.claim.clone(),
                supports: g.supports.clone(),
                selector: reference.clone(),
                counter_test: counter_test.clone(),
                triggered_by: liveness.triggered_by.clone(),
                platforms: liveness.platforms.clone(),
                label: row.label,
                class: row.class,
                gating: row.gating,
                detail: row.detail,
                last_run,
            });
        }
        decisions.push(GuardedDecision {
            tick_id: tick.id.clone(),
            file: part.file.to_string(),
            decision: tick.decision.clone(),
            blame: tick.blame.clone(),
            authority: tick.authority.clone(),
            jurisdiction: tick.jurisdiction.clone(),
            rejected: super::brief::roads_not_taken(tick),
            matched,
            grounds,
        });
    }
    // Counted when the evaluation was made: nothing here walks every part again.
    let gating_rows = if e.eval.gating {
        e.eval.gating_rows.clone()
    } else {
        Vec::new()
    };
    let (red_rows, red_total) = (e.eval.red_rows.clone(), e.eval.red_total);
    let evidence = crate::ledger::evidence::marker_rows(
        &mut store.store,
        &mut store.evidence,
        true,
        req.all_evidence,
    )?
    .into_iter()
    .map(|(row, _)| row)
    .collect::<Vec<_>>();
    Ok(GuardsResult {
        gating: e.eval.gating || evidence.iter().any(|r| r.gating),
        evidence,
        head: e.basis.head,
        staleness_ref: StalenessRef {
            policy: e.policy,
            sha: e.basis.reference,
        },
        tally: e.eval.tally.clone(),
        decisions,
        matched_total,
        gating_rows,
        red_rows,
        red_total,
        warnings: e.warnings,
        staged_paths: None,
    })
}

/// A staged path's green ground as `check` reads it: `dirty` (a green whose triggers cover an
/// uncommitted change), with `dirty`'s words.
fn dirty(row: &mut proto::rpc::CheckRow, harvested: bool) {
    let label = verdict::Label::Dirty;
    row.detail = verdict::row_detail(label, &[], &[], harvested);
    row.label = label.as_str().into();
    row.class = label.class().into();
    row.gating = label.gates();
    row.event_label = label.event_label();
}
