//! The evaluation: every test binding of the current live view graded against its receipts
//! and git's answers, reusing the memo made on the very same basis and re-grading only the ticks
//! whose inputs moved. The verdict rules themselves are the engine's
//! ([`crate::engine::verdict`]); this module feeds them.

use std::sync::Arc;
use std::time::Instant;

use proto::model::Check;
use proto::rpc::{CheckRequest, CheckRow, Refusal};
use proto::Tick;

pub use super::basis::WorkTree;
use super::basis::{basis, refuse_on_git_timeouts, staleness_reference};
use super::git_facts::{GitFacts, GroundGit};
use super::state::{read_state_files_ahead, state_dir, verdicts_digest, write_state, Graded};
use crate::engine::verdict::{self, Inputs, Label};
use crate::git::ranges::{self as git_ranges, Range};
use crate::ledger::replay;
pub use crate::memo::check::Evaluated;
use crate::memo::check::{receipt_key_number, Basis, CheckEvent, Evaluation, TestPart, TickPart};
use crate::open::OpenStore;

/// Evaluate — or reuse the evaluation made on the very same basis —, keeping the state files
/// current (§10.1 steps 1, 2, 4, 5).
pub fn evaluated(store: &mut OpenStore, req: &CheckRequest) -> Result<Evaluated, Refusal> {
    evaluated_with(store, req, WorkTree::Look)
}

/// [`evaluated`], looking at the work tree as much as `work` says: with
/// [`WorkTree::LastKnown`], an evaluation already made at the last known state of the work
/// tree answers when nothing else moved; otherwise the work tree is looked at and it goes on as
/// [`evaluated`] does.
pub fn evaluated_with(
    store: &mut OpenStore,
    req: &CheckRequest,
    work: WorkTree,
) -> Result<Evaluated, Refusal> {
    // Only this request's git children count.
    crate::sys::child::take_timeouts();
    store.require()?;
    let attest = req.attest.clone().filter(|a| !a.is_empty());
    store.last_check = (req.offline, attest.clone());
    let config = store.config();
    let mut warnings = Vec::new();
    let reference = staleness_reference(store, req, &config.staleness_ref, &mut warnings, true);
    let started = Instant::now();
    if !req.offline && attest.is_none() {
        // The first plain check of a restarted daemon: the evaluation image decodes while the
        // basis is established.
        store.check_image_ahead();
    }
    let (mut basis, last_known) = basis(
        store,
        req.offline,
        attest.clone(),
        &config,
        reference.clone(),
        work,
    )?;
    warnings.append(&mut store.import_warnings);
    let now = crate::engine::clock::now();
    if last_known {
        if let Some(eval) = store.memos.get(&basis, now, true, store.state_epoch) {
            return Ok(Evaluated {
                eval,
                policy: config.staleness_ref,
                warnings,
                basis,
                now,
            });
        }
        // Nothing made at that state: look at the work tree, as any other request does.
        basis = self::basis(
            store,
            req.offline,
            attest,
            &config,
            reference,
            WorkTree::Look,
        )?
        .0;
    }
    let basis_took = started.elapsed();
    let eval = match store.memos.get(&basis, now, true, store.state_epoch) {
        Some(e) => e,
        None if let Some(e) = restored(store, &basis, now) => {
            store.memos.put(basis.clone(), Arc::clone(&e));
            e
        }
        None => {
            let prior = store.memos.prior(&basis, now);
            let e = Arc::new(evaluate(store, &basis, now, true, prior.as_deref())?);
            tracing::debug!(
                basis_ms = basis_took.as_secs_f64() * 1e3,
                evaluate_ms = (started.elapsed() - basis_took).as_secs_f64() * 1e3,
                prior = prior.is_some(),
                kept = kept_parts(&e, prior.as_deref()),
                parts = e.parts.len(),
                "check evaluated"
            );
            refuse_on_git_timeouts(store)?;
            store.memos.put(basis.clone(), Arc::clone(&e));
            crate::sys::resources::release_free_memory();
            e
        }
    };
    Ok(Evaluated {
        eval,
        policy: config.staleness_ref,
        warnings,
        basis,
        now,
    })
}

/// The evaluation the previous daemon imaged, when it is provably the one an evaluation now
/// would make (see [`crate::open::image`]): taken back instead of evaluating, once per opened
/// store, its verdicts folded into the snapshot live pushes come from as a fresh one's are.
/// Also for the re-evaluation a change (or the watch's first catch-up) asks for, when it comes
/// before the first check: the image is taken by whichever evaluates first.
pub(super) fn restored(
    store: &mut OpenStore,
    basis: &crate::memo::check::Basis,
    now: time::OffsetDateTime,
) -> Option<Arc<Evaluation>> {
    let started = Instant::now();
    let (parts, left) = store.take_check_image(basis, now)?;
    let mut e = Evaluation::new(
        parts,
        true,
        basis.receipts,
        basis.uncommitted.clone(),
        basis.head.clone(),
    );
    e.serial = store.next_evaluation_serial();
    e.state_epoch = store.state_epoch;
    e.state = basis.state;
    e.evidence = basis.evidence;
    e.ticks = basis.ticks;
    store.imaged_evaluation(e.serial);
    tracing::debug!(
        parts = e.parts.len(),
        ms = started.elapsed().as_secs_f64() * 1e3,
        "check taken back from the image"
    );
    let e = Arc::new(e);
    // Nothing below can change the answer: it waits until the answer has gone.
    let (taken, basis) = (Arc::clone(&e), basis.clone());
    store.after_answer(move |store| {
        // Its verdicts folded into the snapshot live pushes come from, as a fresh one's are.
        let all: Vec<&Arc<TickPart>> = taken.parts.iter().collect();
        let changes = store.update_verdicts(&all, false);
        store.pending_changes.extend(changes);
        store.fold_verdicts_from(taken.serial);
        // And its state files looked at, off the store's thread (by the image's stamps: the
        // previous daemon's record of them is not needed).
        store.forget_state_record();
        store.look_at_state_files(Arc::clone(&taken), left, basis);
    });
    Some(e)
}

/// Take in the look at the state files an evaluation taken back from the images left (see
/// [`OpenStore::look_at_state_files`]): with `wait`, whatever it takes, else only when done.
/// When someone changed a state file while no daemon held the store, evaluate afresh, as a
/// first check without an image does, which puts back whichever differ.
pub fn settle_state_files(store: &mut OpenStore, wait: bool) {
    let Some(basis) = store.settle_state_files(wait) else {
        return;
    };
    tracing::info!(store = %store.root().display(), "state files changed since the last daemon imaged its evaluation; evaluating afresh to put them back");
    store.memos.clear();
    let now = crate::engine::clock::now();
    if let Ok(e) = evaluate(store, &basis, now, true, None) {
        store.memos.put(basis, Arc::new(e));
    }
}

/// How many of `e`'s parts it took over from `prior` (for the debug log).
pub(super) fn kept_parts(e: &Evaluation, prior: Option<&Evaluation>) -> usize {
    let Some(prior) = prior else {
        return 0;
    };
    let old: std::collections::HashSet<*const TickPart> =
        prior.parts.iter().map(Arc::as_ptr).collect();
    e.parts
        .iter()
        .filter(|p| old.contains(&Arc::as_ptr(p)))
        .count()
}

/// Evaluate every test binding of the current live view on `basis` at `now`, one tick at a
/// time. A tick part of `prior` (an evaluation on the same facts but older ticks, receipts or
/// state files) is kept as is when its tick is the very same cached tick, none of its receipt
/// files changed since, and its state file is the one this store wrote: then nothing it depends
/// on moved. With `record` (a real check), state files are created as needed. A plain
/// evaluation (no attest, not offline) also updates the store's verdict snapshot; the changes
/// found are left in `store.pending_changes`.
pub(super) fn evaluate(
    store: &mut OpenStore,
    basis: &Basis,
    now: time::OffsetDateTime,
    record: bool,
    prior: Option<&Evaluation>,
) -> Result<Evaluation, Refusal> {
    // What the state files say must be known before any is compared or written.
    settle_state_files(store, true);
    let view = store.current_shared()?;
    let generation = store.ticks_generation();
    // Receipt files named otherwise are no selector's: they change no part.
    let changed: Option<std::collections::HashSet<u64>> = prior.and_then(|p| {
        store
            .receipts
            .changed_since(p.receipts)
            .map(|keys| keys.into_iter().filter_map(receipt_key_number).collect())
    });
    // The prior's parts, found by file: usually at the same place in the view, else by name.
    let prior_parts: &[Arc<TickPart>] = match (prior, &changed) {
        (Some(p), Some(_)) => &p.parts,
        _ => &[],
    };
    let by_name: std::cell::OnceCell<std::collections::HashMap<&str, &Arc<TickPart>>> =
        std::cell::OnceCell::new();
    let reusable_at = |i: usize, file: &str| -> Option<&Arc<TickPart>> {
        match prior_parts.get(i) {
            Some(p) if *p.file == *file => Some(p),
            _ if prior_parts.is_empty() => None,
            _ => by_name
                .get_or_init(|| prior_parts.iter().map(|t| (&*t.file, t)).collect())
                .get(file)
                .copied(),
        }
    };
    let receipts_changed = changed.as_ref().is_some_and(|c| !c.is_empty());
    // The work tree's changes that moved since the prior evaluation: a part whose triggers
    // cover one of them is evaluated again. Unknown on either side: every part is.
    let moved: Option<Vec<String>> = match (prior.map(|p| &p.uncommitted), &basis.uncommitted) {
        (None, _) => Some(Vec::new()),
        (Some(Some(a)), Some(b)) => Some(a.difference(b).into_iter().map(str::to_string).collect()),
        (Some(None), None) => Some(Vec::new()),
        _ => None,
    };
    let inputs = Inputs {
        reference_sha: basis.reference.as_deref(),
        attest: basis.attest.as_deref(),
        selected: basis.selected.as_ref(),
        now,
        staleness_days: basis.staleness_days,
    };
    let root = store.root().to_path_buf();
    let mut git = GitFacts::take(store, basis, root.clone());
    // HEAD moved since the prior evaluation: a part is kept only where every trigger answer it
    // rests on is still the same (asked ahead, together, for what the memo cannot answer).
    let head_moved = prior.is_some_and(|p| p.head.is_none() || p.head != basis.head);
    if head_moved && !prior_parts.is_empty() {
        git.ask_recorded(prior_parts.iter().map(|p| p.as_ref()));
    }
    // Which ticks keep their part, and which are evaluated again.
    // The current live ticks, each with the prior's part for it if there is one: on the very
    // view the prior read (its parts are those ticks, in order), without looking at the view.
    let same_view = prior.is_some_and(|p| p.ticks == generation) && !prior_parts.is_empty();
    let live: Vec<Candidate> = if same_view {
        prior_parts
            .iter()
            .map(|p| (&p.file, &p.tick, Some(p)))
            .collect()
    } else {
        view.iter()
            .filter(|(_, t)| t.status() == "live")
            .enumerate()
            .map(|(i, (file, packed))| (file, packed, reusable_at(i, file)))
            .collect()
    };
    // Every state file is as the prior left it (it wrote or found them all, and neither this
    // store nor anyone else wrote one since): no part needs to look at its own.
    let evidence_then = prior.map_or(0, |p| p.evidence);
    let state_as_left = prior.is_some_and(|p| {
        p.state_complete && p.state_epoch == store.state_epoch && p.state == basis.state
    });
    let plan: Vec<_> = live
        .into_iter()
        .map(|(file, packed, prior_part)| {
            let kept = prior_part.filter(|p| {
                Arc::ptr_eq(&p.tick, packed)
                    && !p.volatile()
                    && (!receipts_changed
                        || changed
                            .as_ref()
                            .is_some_and(|c| !p.keys().iter().any(|k| c.contains(k))))
                    && moved
                        .as_ref()
                        .is_some_and(|m| m.is_empty() || !guards_any(packed, m))
                    // Its state file still says what it says (another flag set may have
                    // rewritten it since).
                    && (state_as_left
                        || store.state_written.get(packed.id()) == Some(&p.state_digest))
                    && (!head_moved || git.same_triggers(p))
                    // Its cited evidence reads as it did.
                    && !store.evidence.moved_since(packed.id(), evidence_then)
            });
            (file, packed, kept)
        })
        .collect();
    let fresh = plan
        .iter()
        .filter(|(_, _, kept)| kept.is_none())
        .map(|(_, packed, _)| packed.as_ref());
    git.ask_ahead(store, fresh, basis);
    let unrecorded: Vec<&str> = plan
        .iter()
        .filter(|(_, packed, kept)| {
            kept.is_none() && !store.state_written.contains_key(packed.id())
        })
        .map(|(_, packed, _)| packed.id())
        .collect();
    read_state_files_ahead(store, unrecorded);
    let mut parts = Vec::with_capacity(plan.len());
    // Where the parts evaluated again sit.
    let mut fresh_at = Vec::new();
    let mut complete = true;
    // Whether state files may be created: asked once, when the first one is written.
    let mut create = None;
    for (file, packed, kept) in plan {
        if let Some(p) = kept {
            parts.push(Arc::clone(p));
            continue;
        }
        fresh_at.push(parts.len());
        let create = *create.get_or_insert_with(|| record && state_dir(store));
        // Rebuilt whole for its evaluation, one at a time (and dropped after it): a first
        // check of a large store never holds them all.
        let tick = Arc::new(packed.tick());
        let (mut part, graded) = evaluate_tick(store, file, packed, &tick, &inputs, &mut git);
        let (policy, sha) = (&basis.policy, basis.reference.as_deref());
        let cited = store.evidence.of(&tick.id);
        let cited = cited.as_deref();
        let digest = verdicts_digest(&tick, &graded, policy, sha, cited);
        let written = write_state(store, &tick, &graded, (policy, sha), cited, create, digest);
        complete &= written;
        part.state_digest = digest;
        parts.push(Arc::new(part));
    }
    store.state_read_ahead.clear();
    // An answer from a git that overran is no answer: nothing learnt in this pass is kept.
    let timeouts = crate::sys::child::take_timeouts();
    if timeouts.is_empty() {
        git.give_back(store, record);
    } else {
        crate::sys::child::note_timeouts(timeouts);
    }
    // Take in this pass's own writes now, so that a change someone makes to one of those files
    // later is never mistaken for ours.
    store.state_watch.sync(&mut store.state_written);
    let mut e = Evaluation::new(
        parts,
        complete,
        basis.receipts,
        basis.uncommitted.clone(),
        basis.head.clone(),
    );
    // Every part kept, in the same order: no verdict moved, and the answers read the same.
    if let Some(p) = prior {
        if !e.share_renderings(p) && same_view {
            e.copy_plain_lines_from(p, &fresh_at);
            e.carry_trigger_index_from(p, &fresh_at);
        }
    }
    e.serial = store.next_evaluation_serial();
    if basis.attest.is_none() && !basis.offline {
        // When the snapshot holds the prior's verdicts and the view is the same, only the parts
        // evaluated again can have moved.
        let only_fresh = same_view && prior.is_some_and(|p| store.verdicts_folded_from(p.serial));
        let folded: Vec<&Arc<TickPart>> = if only_fresh {
            fresh_at.iter().filter_map(|&i| e.parts.get(i)).collect()
        } else {
            e.parts.iter().collect()
        };
        if !(only_fresh && folded.is_empty()) {
            let changes = store.update_verdicts(&folded, only_fresh);
            store.pending_changes.extend(changes);
        }
        store.fold_verdicts_from(e.serial);
    }
    e.state_epoch = store.state_epoch;
    e.state = basis.state;
    e.evidence = basis.evidence;
    e.ticks = generation;
    Ok(e)
}

/// A current live tick — its file and its cached tick — with the prior's part for it, if any.
type Candidate<'v> = (
    &'v Arc<str>,
    &'v Arc<crate::engine::packed::PackedTick>,
    Option<&'v Arc<TickPart>>,
);

/// Whether one of `tick`'s test grounds has a trigger covering one of `paths` (or one git must
/// be asked about directly).
fn guards_any(tick: &crate::engine::packed::PackedTick, paths: &[String]) -> bool {
    tick.test_bindings().any(|(_, _, triggers)| {
        triggers.iter().any(|t| {
            !git_ranges::plain_path(t) || paths.iter().any(|p| proto::pathspec::covers(t, p))
        })
    })
}

/// One tick's rows, events and state-file verdicts.
#[allow(clippy::too_many_arguments)]
fn evaluate_tick(
    store: &mut OpenStore,
    file: &Arc<str>,
    packed: &Arc<crate::engine::packed::PackedTick>,
    tick: &Tick,
    inputs: &Inputs,
    git: &mut GitFacts,
) -> (TickPart, Vec<Graded>) {
    let mut graded = Vec::with_capacity(tick.grounds.len());
    let mut rows = Vec::new();
    let mut keys = Vec::new();
    let mut expires: Option<time::OffsetDateTime> = None;
    let mut test_labels = Vec::new();
    let mut replaced = Vec::new();
    let mut volatile = false;
    let mut asked = Vec::new();
    let mut git_bits = Vec::new();
    for (gi, g) in tick.grounds.iter().enumerate() {
        let Some(Check::Test {
            reference,
            counter_test,
            liveness,
            verified_at_sha,
        }) = &g.check
        else {
            graded.push(Graded {
                label: Label::NotApplicable,
                missing: Vec::new(),
            });
            continue;
        };
        let key = proto::id::receipt_key(reference);
        let recs = store.receipts.get_keyed(&key, reference);
        keys.extend(receipt_key_number(&key));
        let paths = liveness.triggered_by.as_slice();
        let triggered = verdict::latest(recs.iter()).is_some_and(|r| {
            let t = git.range(false, &r.commit, paths) == Range::Touched;
            let shared = &mut store.shared_texts;
            asked.push((shared.list(paths), shared.text(&r.commit), t));
            t
        });
        let mut asker = GroundGit {
            git,
            verified: verified_at_sha,
            paths,
            direct: false,
            said: 0,
        };
        let v = verdict::evaluate_with_git(g.check.as_ref(), &recs, triggered, inputs, &mut asker);
        volatile |= asker.direct;
        git_bits.push(asker.said | if triggered { replay::TRIGGERED } else { 0 });
        if let Some(at) = v.expires {
            expires = Some(expires.map_or(at, |u| u.min(at)));
        }
        let (label, memo_reason) = verdict::lock(tick, v.label);
        if memo_reason.is_some() {
            replaced.push(v.label);
        }
        let harvested = counter_test.is_none();
        let detail = verdict::row_detail(label, &v.missing, &recs, harvested);
        rows.push(CheckRow {
            label: label.as_str().into(),
            tick_id: tick.id.clone(),
            file: file.to_string(),
            decision: tick.decision.clone(),
            claim: g.claim.clone(),
            supports: g.supports.clone(),
            ground_index: gi,
            detail,
            harvested,
            class: label.class().into(),
            gating: label.gates(),
            memo_reason,
            event_label: label.event_label(),
        });
        test_labels.push(label);
        graded.push(Graded {
            label,
            missing: v.missing,
        });
    }
    let check_event = verdict::roll_up(&test_labels).map(|(worst, masked)| {
        let suppressed = verdict::roll_up(&replaced).map(|(from, _)| from);
        CheckEvent::new(&worst, masked.as_deref(), suppressed.as_deref())
    });
    let tests = (!rows.is_empty()).then(|| {
        Box::new(TestPart {
            rows: crate::memo::check::Rows::from(rows).with_git(&git_bits),
            check_event,
            keys: keys.into(),
            expires,
            volatile,
            triggered: asked.into(),
        })
    });
    let part = TickPart {
        file: Arc::clone(file),
        tick: Arc::clone(packed),
        state_digest: 0,
        tests,
    };
    (part, graded)
}
