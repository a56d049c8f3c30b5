//! `guards`: which current decisions guard which files. The verdicts are exactly `check`'s (the
//! same evaluation, reused when nothing moved; no check event is recorded), joined with what each
//! tick says about its triggers, its tests and its roads not taken. A git hook asks it for the
//! staged paths; the language server asks it for every guarded file.

use std::collections::HashMap;

use proto::model::Check;
use proto::pathspec;
use proto::rpc::{
    CheckRequest, GuardedDecision, GuardedGround, GuardsRequest, GuardsResult, LastRun, Refusal,
    StalenessRef, GATING_ROWS,
};

use crate::store::Store;
use crate::verbs::check;
use crate::verdict;

/// Paths a request may name at most (a hook's staged change is usually a handful).
pub const MAX_PATHS: usize = 100_000;

pub fn guards(store: &mut Store, req: &GuardsRequest) -> Result<GuardsResult, Refusal> {
    let wanted: Option<Vec<&str>> = req
        .paths
        .as_ref()
        .map(|p| p.iter().map(String::as_str).collect());
    if wanted.as_ref().is_some_and(|p| p.len() > MAX_PATHS) {
        return Err(Refusal::refused(
            "too_many_paths",
            format!("guards takes at most {MAX_PATHS} paths in one request"),
        ));
    }
    let e = check::evaluated(
        store,
        &CheckRequest {
            context: req.context.clone(),
            ..CheckRequest::default()
        },
    )?;
    // First the decisions that match, and (under a limit) how much each asks for attention;
    // only the ones answered are then dressed with grounds, receipts and roads not taken.
    struct Hit {
        part: usize,
        matched: Vec<String>,
        severity: u8,
    }
    let mut hits = Vec::new();
    for (at, part) in e.eval.parts.iter().enumerate() {
        let tick = &part.tick;
        // Which paths it guards first: most decisions of a large store guard none of a
        // commit's few files, and are passed over without reading their receipts.
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
        if triggers.is_empty() {
            continue;
        }
        let matched: Vec<String> = match &wanted {
            None => triggers.iter().map(|t| t.to_string()).collect(),
            Some(paths) => paths
                .iter()
                .filter(|p| triggers.iter().any(|t| pathspec::covers(t, p)))
                .map(|p| p.to_string())
                .collect(),
        };
        if matched.is_empty() {
            continue;
        }
        let severity = if req.limit.is_some() {
            worst_severity(part, &matched, wanted.is_some())
        } else {
            0
        };
        hits.push(Hit {
            part: at,
            matched,
            severity,
        });
    }
    let matched_total = hits.len();
    if let Some(limit) = req.limit {
        // A stable sort: equals keep their file-name order.
        hits.sort_by_key(|h| std::cmp::Reverse(h.severity));
        hits.truncate(limit);
    }
    let mut decisions = Vec::with_capacity(hits.len());
    for Hit { part, matched, .. } in hits {
        let part = &e.eval.parts[part];
        let tick = &part.tick;
        let rows: HashMap<usize, &proto::rpc::CheckRow> =
            part.rows.iter().map(|r| (r.ground_index, r)).collect();
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
            let last_run = verdict::latest(recs.iter()).map(|r| LastRun {
                result: r.result.as_str().into(),
                commit: r.commit.clone(),
                ran_at: r.ran_at.clone(),
                platform: r.platform.clone(),
            });
            grounds.push(GuardedGround {
                index,
                claim: g.claim.clone(),
                supports: g.supports.clone(),
                selector: reference.clone(),
                counter_test: counter_test.clone(),
                triggered_by: liveness.triggered_by.clone(),
                platforms: liveness.platforms.clone(),
                label: row.label.clone(),
                class: row.class.clone(),
                gating: row.gating,
                detail: row.detail.clone(),
                last_run,
            });
        }
        decisions.push(GuardedDecision {
            tick_id: tick.id.clone(),
            file: part.file.clone(),
            decision: tick.decision.clone(),
            blame: tick.blame.clone(),
            authority: tick.authority.clone(),
            jurisdiction: tick.jurisdiction.clone(),
            rejected: super::brief::roads_not_taken(tick),
            matched,
            grounds,
        });
    }
    let gating_rows = if e.eval.gating {
        e.eval
            .rows()
            .filter(|r| r.gating)
            .take(GATING_ROWS)
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    Ok(GuardsResult {
        head: e.head,
        staleness_ref: StalenessRef {
            policy: e.policy,
            sha: e.reference,
        },
        gating: e.eval.gating,
        tally: e.eval.tally.clone(),
        decisions,
        matched_total,
        gating_rows,
        warnings: e.warnings,
    })
}

/// The severity of the worst test ground of `part` whose triggers cover one of `matched` (any
/// ground with triggers when `matched` lists triggers rather than requested paths).
fn worst_severity(part: &crate::check_memo::TickPart, matched: &[String], paths: bool) -> u8 {
    part.rows
        .iter()
        .filter(|row| {
            let Some(Some(Check::Test { liveness, .. })) = part
                .tick
                .grounds
                .get(row.ground_index)
                .map(|g| g.check.as_ref())
            else {
                return false;
            };
            !liveness.triggered_by.is_empty()
                && (!paths
                    || liveness
                        .triggered_by
                        .iter()
                        .any(|t| matched.iter().any(|p| pathspec::covers(t, p))))
        })
        .map(|row| proto::rpc::severity(&row.label, row.gating))
        .max()
        .unwrap_or(0)
}
