//! `check` as a verb: the evaluation answered as rows (a table, plain lines or an answer file),
//! its events logged and its basis journaled for replay; and the background re-evaluation the
//! watcher runs, which pushes verdict changes to subscribers.

use std::sync::Arc;
use std::time::Instant;

use proto::model::is_40_lower_hex;
use proto::rpc::{CheckRequest, CheckResult, Refusal, StalenessRef, VerdictChange, Warning};
use serde_json::{Map, Value};

use super::basis::{basis, git_head, refuse_on_git_timeouts, WorkTree};
use super::evaluate::{evaluate, evaluated, kept_parts, restored};
use crate::memo::check::Evaluation;
use crate::open::OpenStore;
use crate::store::results::cached_origin;

/// `check` (§10.1 steps 1, 2, 4–6): evaluate, answer the rows, and once the answer has gone
/// record the events.
pub fn check(store: &mut OpenStore, req: &CheckRequest) -> Result<CheckResult, Refusal> {
    let started = Instant::now();
    let e = evaluated(store, req)?;
    let now = crate::engine::clock::now();
    let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (eval, policy, reference, warnings) = (
        Arc::clone(&e.eval),
        e.policy.clone(),
        e.basis.reference.clone(),
        e.warnings.clone(),
    );
    // The events this check records and what a replay needs of it are written once the answer
    // has gone: they cannot change it, and nothing else runs on the store in between, so they
    // are taken from the very same state.
    let (offline, attest) = (req.offline, req.attest.clone());
    store.after_answer(move |store| {
        let mut run = Map::new();
        run.insert("decisions".into(), e.eval.decisions().into());
        run.insert("op".into(), "check-run".into());
        run.insert("ts".into(), crate::engine::clock::format(now).into());
        run.insert("wall_ms".into(), wall_ms.into());
        let mut run = proto::json::compact(&Value::Object(run));
        run.push('\n');
        let mut templates = std::mem::take(&mut store.event_templates);
        store.append_events_with(|sink| {
            e.eval.write_event_lines(now, &mut templates, sink);
            sink(&run);
        });
        store.event_templates = templates;
        let mut p = Map::new();
        p.insert("decisions".into(), e.eval.decisions().into());
        p.insert("gating".into(), e.eval.gating.into());
        p.insert(
            "tally".into(),
            serde_json::to_value(&e.eval.tally).unwrap_or(Value::Null),
        );
        p.insert("fingerprint".into(), e.eval.fingerprint().into());
        p.insert("offline".into(), offline.into());
        if let Some(a) = attest {
            p.insert("attest".into(), a.into());
        }
        p.insert("wall_ms".into(), wall_ms.into());
        let pending = crate::open::replay_record::capture(store, &e, p);
        store.journal_check(pending);
    });
    let evidence = crate::ledger::evidence::drifted_rows(&mut store.store, &mut store.evidence)?;
    let mut warnings = warnings;
    warnings.extend(crate::verbs::receipts::import::origin_notes(store, &eval));
    let mut out = answer(&eval, req, policy, reference, warnings);
    out.gating |= evidence.iter().any(|r| r.gating);
    out.evidence = evidence;
    Ok(out)
}

/// The answer to one request from an evaluation: rows as objects, or the compact table.
pub(super) fn answer(
    e: &Evaluation,
    req: &CheckRequest,
    policy: String,
    sha: Option<String>,
    warnings: Vec<Warning>,
) -> CheckResult {
    use proto::rpc::RowForm;
    let table = (req.form == RowForm::Table).then(|| e.table()).flatten();
    let plain_file = (req.form == RowForm::PlainFile)
        .then(|| e.plain_file())
        .flatten();
    let plain = (req.form == RowForm::Plain
        || (req.form == RowForm::PlainFile && plain_file.is_none()))
    .then(|| e.plain())
    .flatten();
    CheckResult {
        rows: if table.is_some() || plain.is_some() || plain_file.is_some() {
            Vec::new()
        } else {
            e.rows().collect()
        },
        table,
        plain,
        plain_file,
        total_test_bindings: e.total,
        harvested_unproven: e.harvested,
        ran: req.ran,
        staleness_ref: StalenessRef { policy, sha },
        gating: e.gating,
        tally: e.tally.clone(),
        warnings,
        evidence: Vec::new(),
    }
}

/// Re-evaluate after a change seen by the watcher, as a check with the last check's flags
/// would (the view the state files hold), keeping the state files current without recording
/// check events. Only the ticks the change concerns are evaluated again (see [`evaluate`]).
/// Returns the verdicts that changed since the last evaluation.
pub fn refresh_verdicts(store: &mut OpenStore) -> Result<Vec<VerdictChange>, Refusal> {
    store.require()?;
    crate::sys::child::take_timeouts();
    if !store.results_dir().join("state").is_dir() {
        // In the background, never recreate what someone is removing.
        return Ok(Vec::new());
    }
    let root = store.root().to_path_buf();
    let config = store.config();
    let (offline, attest) = store.last_check.clone();
    // Through the store's cache of git's answers: a watcher pass after a receipt costs no git
    // process when the repository did not move.
    let reference = if offline {
        cached_origin(&store.results_dir())
    } else {
        match config.staleness_ref.as_str() {
            "none" => None,
            "local-head" => git_head(&mut store.git, &root),
            _ => store
                .git
                .answer(&root, crate::git::facts::Query::Upstream)
                .filter(|s| is_40_lower_hex(s)),
        }
    };
    let started = Instant::now();
    let (basis, _) = basis(store, offline, attest, &config, reference, WorkTree::Look)?;
    let basis_took = started.elapsed();
    let now = crate::engine::clock::now();
    if store
        .memos
        .get(&basis, now, false, store.state_epoch)
        .is_none()
    {
        // Right after a restart the watch's first catch-up may come before the first check:
        // the evaluation image answers it as it would that check.
        if let Some(e) = restored(store, &basis, now) {
            store.memos.put(basis, e);
            return Ok(std::mem::take(&mut store.pending_changes));
        }
        let prior = store.memos.prior(&basis, now);
        let e = evaluate(store, &basis, now, false, prior.as_deref())?;
        tracing::debug!(
            basis_ms = basis_took.as_secs_f64() * 1e3,
            evaluate_ms = (started.elapsed() - basis_took).as_secs_f64() * 1e3,
            prior = prior.is_some(),
            kept = kept_parts(&e, prior.as_deref()),
            "verdicts refreshed"
        );
        refuse_on_git_timeouts(store)?;
        store.memos.put(basis, Arc::new(e));
        crate::sys::resources::release_free_memory();
    }
    Ok(std::mem::take(&mut store.pending_changes))
}
