//! `check`: evaluate every test binding of the current live view (commands §10, model §6), write
//! a state file per current tick, the cached origin sha and the events, and answer rows. evd never
//! executes a selector: `check --run` runs them in the caller and hands the receipts to
//! [`append_receipts`], after asking [`plan`] what to run.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use proto::json::q;
use proto::model::{is_40_lower_hex, Check};
use proto::rpc::{
    AppendReceiptsRequest, AppendReceiptsResult, CheckPlan, CheckRequest, CheckResult, CheckRow,
    PlannedRun, Refusal, StalenessRef, VerdictChange, Warning,
};
use proto::Tick;
use serde_json::{Map, Value};

use crate::engine::receipts::{Receipt, RunResult};
use crate::engine::verdict::{self, Inputs, Label};
use crate::git::ranges::{self as git_ranges, Answers, Range};
use crate::git::worktree::Uncommitted;
use crate::ledger::replay;
pub use crate::memo::check::Evaluated;
use crate::memo::check::{receipt_key_number, Basis, CheckEvent, Evaluation, TestPart, TickPart};
use crate::open::OpenStore;
use crate::store::results::{cached_origin, read_selected};
use crate::sys::fsio;

/// The warning when the live-origin reference cannot be resolved.
pub const NO_UPSTREAM_WARNING: &str = "warning: cannot resolve the live-origin staleness reference (no upstream?) — sha-staleness skipped";

/// The repository's HEAD commit, as evd sees it (`None` outside git): `git rev-parse --verify
/// -q HEAD`, through the store's cache of git's answers.
fn git_head(facts: &mut crate::git::facts::FactCache, root: &Path) -> Option<String> {
    facts
        .answer(root, crate::git::facts::Query::Head)
        .filter(|s| is_40_lower_hex(s))
}

/// Resolve the staleness reference (§10.3); caches a resolved live-origin sha.
/// With `record` (a real `check`), a resolved live-origin sha is cached to `results/origin-sha`;
/// a background re-evaluation leaves that cache alone.
fn staleness_reference(
    store: &OpenStore,
    req: &CheckRequest,
    policy: &str,
    warnings: &mut Vec<Warning>,
    record: bool,
) -> Option<String> {
    let results = store.results_dir();
    if req.offline {
        return cached_origin(&results);
    }
    match policy {
        "none" => None,
        "local-head" => req.context.git.head.clone().filter(|h| is_40_lower_hex(h)),
        _ => match req
            .context
            .git
            .upstream
            .clone()
            .filter(|u| is_40_lower_hex(u))
        {
            Some(sha) => {
                // Rewritten only when it moves: the cache is read far more often than it changes.
                let moved = cached_origin(&results).as_deref() != Some(sha.as_str());
                if record && moved && fsio::ensure_dir(&results).is_ok() {
                    let _ = fsio::replace_unsynced(&results.join("origin-sha"), sha.as_bytes());
                }
                Some(sha)
            }
            None => {
                warnings.push(Warning {
                    kind: "staleness_ref".into(),
                    message: NO_UPSTREAM_WARNING.into(),
                });
                None
            }
        },
    }
}

/// One ground's outcome.
struct Graded {
    label: Label,
    missing: Vec<String>,
}

/// The state file of one tick, without its `computed_at` (added when written).
fn state_body(
    tick: &Tick,
    graded: &[Graded],
    policy: &str,
    sha: Option<&str>,
    evidence: Option<&[crate::ledger::evidence::Cited]>,
) -> Map<String, Value> {
    let grounds: Vec<Value> = tick
        .grounds
        .iter()
        .zip(graded)
        .map(|(g, v)| {
            let mut o = Map::new();
            o.insert("claim".into(), g.claim.as_str().into());
            o.insert("supports".into(), g.supports.as_str().into());
            o.insert("verdict".into(), v.label.as_str().into());
            match &g.check {
                Some(Check::Test {
                    reference,
                    verified_at_sha,
                    ..
                }) => {
                    o.insert("check".into(), "test".into());
                    o.insert("ref".into(), reference.as_str().into());
                    o.insert("verified_at_sha".into(), verified_at_sha.as_str().into());
                }
                Some(Check::Person { .. }) => {
                    o.insert("check".into(), "person".into());
                }
                None => {
                    o.insert("check".into(), "none".into());
                }
            }
            if v.label == Label::NotRun {
                o.insert("missing_platforms".into(), v.missing.clone().into());
            }
            Value::Object(o)
        })
        .collect();
    let mut o = Map::new();
    // Only a tick citing evidence has the list (upstream's files never do).
    if let Some(cited) = evidence.filter(|c| !c.is_empty()) {
        let list: Vec<Value> = cited
            .iter()
            .map(crate::ledger::evidence::Cited::to_json)
            .collect();
        o.insert("evidence".into(), list.into());
    }
    o.insert("grounds".into(), grounds.into());
    let mut r = Map::new();
    r.insert("policy".into(), policy.into());
    r.insert("sha".into(), sha.map_or(Value::Null, Value::from));
    o.insert("staleness_ref".into(), Value::Object(r));
    o.insert("tick_id".into(), tick.id.as_str().into());
    o
}

/// What a state file says but the time, as a digest: the tick (content-addressed), each
/// verdict, the reference. A state file this store wrote with the same digest needs no write.
fn verdicts_digest(
    tick: &Tick,
    graded: &[Graded],
    policy: &str,
    sha: Option<&str>,
    evidence: Option<&[crate::ledger::evidence::Cited]>,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    evidence.hash(&mut h);
    tick.id.hash(&mut h);
    tick.grounds.len().hash(&mut h);
    for g in graded {
        g.label.as_str().hash(&mut h);
        g.missing.hash(&mut h);
    }
    policy.hash(&mut h);
    sha.hash(&mut h);
    h.finish()
}

/// Write a tick's state file unless this store already wrote the same verdicts there (`digest`,
/// see [`verdicts_digest`]): a verdict that did not change keeps its file (and its `computed_at`, the time it was computed).
/// `create`: a real check makes `results/state/` and new files; a background re-evaluation only
/// rewrites files that exist (it never resurrects a store being removed, nor writes a file for
/// a tick no check has seen); with it, `results/state/` is there ([`state_dir`]). Returns
/// whether the file now holds these verdicts.
fn write_state(
    store: &mut OpenStore,
    tick: &Tick,
    graded: &[Graded],
    (policy, sha): (&str, Option<&str>),
    evidence: Option<&[crate::ledger::evidence::Cited]>,
    create: bool,
    digest: u64,
) -> bool {
    let id = tick.id.as_str();
    if store.state_written.get(id) == Some(&digest) {
        return true;
    }
    let dir = store.results_dir().join("state");
    let name = format!("{id}.json");
    // In the background, only keep existing files current: a state file appears when a check
    // first sees its tick, as upstream's do.
    let ready = create || std::fs::symlink_metadata(dir.join(&name)).is_ok_and(|m| m.is_file());
    if !ready || !proto::vocab::is_tick_id(id) {
        return false;
    }
    let mut body = state_body(tick, graded, policy, sha, evidence);
    // A file this store has no record of (a fresh daemon, or written by someone else) that
    // already says exactly this keeps its bytes and its `computed_at`: reading is cheaper than
    // rewriting, and the verdict did not change.
    let same_on_disk = match store.state_read_ahead.remove(id) {
        Some(said) => said.is_some_and(|d| d == state_digest(&body)),
        None => read_state_file(&dir.join(&name)).is_some_and(|o| o == body),
    };
    if same_on_disk {
        store.state_written.insert(id, digest);
        return true;
    }
    body.insert(
        "computed_at".into(),
        crate::engine::clock::now_rfc3339().into(),
    );
    let bytes = proto::json::pretty(&Value::Object(body));
    store
        .state_watch
        .ours(name.clone(), &mut store.state_written);
    store.state_epoch += 1;
    if fsio::replace_unsynced(&dir.join(&name), bytes.as_bytes()).is_ok() {
        store.state_written.insert(id, digest);
        true
    } else {
        false
    }
}

/// Make sure `results/state/` is there, once per evaluation that creates state files; whether
/// it is.
fn state_dir(store: &mut OpenStore) -> bool {
    let dir = store.results_dir().join("state");
    let fresh = !dir.is_dir();
    let made = fsio::ensure_dir(&dir).is_ok();
    if made && fresh {
        store.state_watch.ensure(&mut store.state_written);
    }
    made
}

/// What a state file says but its `computed_at` (`None` when it is missing, unreadable, or not
/// a state file's shape).
fn read_state_file(path: &Path) -> Option<Map<String, Value>> {
    let text = fsio::read_text(path).ok()?;
    match serde_json::from_str::<Value>(&text).ok()? {
        Value::Object(mut o) => o.remove("computed_at").map(|_| o),
        _ => None,
    }
}

/// A digest of what a state file says but its `computed_at` (what is read ahead is kept as this
/// alone: at 100,000 ticks the parsed files would be hundreds of megabytes).
fn state_digest(said: &Map<String, Value>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    // Keys come out sorted (no `preserve_order`): the same map, the same text.
    serde_json::to_string(said).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// Read, on a few threads, the state files of `ids` this store has no record of, for the
/// evaluation about to compare them (a fresh daemon's first check compares thousands). A file
/// the previous daemon recorded (see [`crate::store::state_record`]) and nobody touched since is not
/// read: what it says is known.
fn read_state_files_ahead(store: &mut OpenStore, ids: Vec<&str>) {
    if ids.is_empty() {
        return;
    }
    let record = store.take_state_record();
    let dir = store.results_dir().join("state");
    /// What is known of one state file.
    enum Known {
        Recorded(u64),
        Read(Option<u64>),
    }
    let known = crate::sys::par::map(&ids, 256, |id| {
        let path = dir.join(format!("{id}.json"));
        let recorded = record.get(*id).filter(|(_, stamp)| {
            crate::store::state_record::Stamp::of(&path).as_ref() == Some(stamp)
        });
        match recorded {
            Some(&(digest, _)) => Known::Recorded(digest),
            None => Known::Read(read_state_file(&path).map(|o| state_digest(&o))),
        }
    });
    for (id, k) in ids.into_iter().zip(known) {
        let id = id.to_string();
        match k {
            Known::Recorded(digest) => {
                store.state_written.insert(&id, digest);
            }
            Known::Read(said) => {
                store.state_read_ahead.insert(id, said);
            }
        }
    }
}

/// What the verdicts rest on right now, re-established from the disk and git: everything a
/// remembered evaluation must match to be reused.
fn basis(
    store: &mut OpenStore,
    offline: bool,
    attest: Option<Vec<String>>,
    config: &crate::store::config::Config,
    reference: Option<String>,
) -> Result<Basis, Refusal> {
    store.refresh()?;
    store.receipts.sync();
    if store.results_dir().join("state").is_dir() {
        store.state_watch.ensure(&mut store.state_written);
    }
    let state = store.state_watch.sync(&mut store.state_written);
    let root = store.root().to_path_buf();
    let head = git_head(&mut store.git, &root);
    let guarded = store.guarded_paths()?;
    let uncommitted = store.uncommitted_and_ranges(head.as_deref(), &guarded);
    let (evidence, changes) = crate::ledger::evidence::sync(&mut store.store, &mut store.evidence)?;
    store.note_changes(changes);
    Ok(Basis {
        offline,
        attest,
        policy: config.staleness_ref.clone(),
        staleness_days: config.staleness_days,
        reference,
        selected: read_selected(&store.results_dir()),
        head,
        uncommitted,
        ticks: store.ticks_generation(),
        receipts: store.receipts.generation(),
        state,
        evidence,
    })
}

/// When a git child overran during this evaluation, its verdicts rest on facts that could not be
/// learnt: refuse, keep nothing, and say what hung.
fn refuse_on_git_timeouts(store: &mut OpenStore) -> Result<(), Refusal> {
    let timeouts = crate::sys::child::take_timeouts();
    let Some(first) = timeouts.first() else {
        return Ok(());
    };
    store.memos.clear();
    store.forget_ranges();
    std::mem::take(&mut store.pending_changes);
    Err(Refusal::io(format!(
        "git did not answer in time: `{first}` ran past {} s and was stopped{}, so the verdicts \
         that depend on it are unknown — look for a hung filesystem, a FIFO or a stale lock in \
         the repository, then check again",
        crate::sys::child::git_timeout().as_secs_f32(),
        if timeouts.len() > 1 {
            format!(" ({} git commands in all)", timeouts.len())
        } else {
            String::new()
        }
    )))
}

/// Evaluate — or reuse the evaluation made on the very same basis —, keeping the state files
/// current (§10.1 steps 1, 2, 4, 5).
pub fn evaluated(store: &mut OpenStore, req: &CheckRequest) -> Result<Evaluated, Refusal> {
    // Only this request's git children count.
    crate::sys::child::take_timeouts();
    store.require()?;
    let attest = req.attest.clone().filter(|a| !a.is_empty());
    store.last_check = (req.offline, attest.clone());
    let config = store.config();
    let mut warnings = Vec::new();
    let reference = staleness_reference(store, req, &config.staleness_ref, &mut warnings, true);
    let started = Instant::now();
    let basis = basis(store, req.offline, attest, &config, reference)?;
    let basis_took = started.elapsed();
    let now = crate::engine::clock::now();
    let eval = match store.memos.get(&basis, now, true, store.state_epoch) {
        Some(e) => e,
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

/// How many of `e`'s parts it took over from `prior` (for the debug log).
fn kept_parts(e: &Evaluation, prior: Option<&Evaluation>) -> usize {
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

/// `check` (§10.1 steps 1, 2, 4–6): evaluate, record the events, answer the rows.
pub fn check(store: &mut OpenStore, req: &CheckRequest) -> Result<CheckResult, Refusal> {
    let started = Instant::now();
    let e = evaluated(store, req)?;
    let now = crate::engine::clock::now();
    let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
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
    p.insert("offline".into(), req.offline.into());
    if let Some(a) = &req.attest {
        p.insert("attest".into(), a.clone().into());
    }
    p.insert("wall_ms".into(), wall_ms.into());
    let pending = crate::open::replay_record::capture(store, &e, p);
    store.journal_check(pending);
    let evidence = crate::ledger::evidence::drifted_rows(&mut store.store, &mut store.evidence)?;
    let mut out = answer(&e.eval, req, e.policy, e.basis.reference, e.warnings);
    out.gating |= evidence.iter().any(|r| r.gating);
    out.evidence = evidence;
    Ok(out)
}

/// The answer to one request from an evaluation: rows as objects, or the compact table.
fn answer(
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
    let basis = basis(store, offline, attest, &config, reference)?;
    let basis_took = started.elapsed();
    let now = crate::engine::clock::now();
    if store
        .memos
        .get(&basis, now, false, store.state_epoch)
        .is_none()
    {
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

/// Evaluate every test binding of the current live view on `basis` at `now`, one tick at a
/// time. A tick part of `prior` (an evaluation on the same facts but older ticks, receipts or
/// state files) is kept as is when its tick is the very same cached tick, none of its receipt
/// files changed since, and its state file is the one this store wrote: then nothing it depends
/// on moved. With `record` (a real check), state files are created as needed. A plain
/// evaluation (no attest, not offline) also updates the store's verdict snapshot; the changes
/// found are left in `store.pending_changes`.
fn evaluate(
    store: &mut OpenStore,
    basis: &Basis,
    now: time::OffsetDateTime,
    record: bool,
    prior: Option<&Evaluation>,
) -> Result<Evaluation, Refusal> {
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

/// What git says during one evaluation: the range answers against HEAD (trigger liveness) and
/// against the staleness reference (diff-aware staleness) — one map when they are the same
/// commit — and the work tree's changes.
struct GitFacts {
    root: std::path::PathBuf,
    head: Option<String>,
    reference: Option<String>,
    at_head: Answers,
    /// `None` when the reference is HEAD (or there is none): `at_head` answers for both.
    at_reference: Option<Answers>,
    uncommitted: Option<Arc<Uncommitted>>,
    /// Grounds asked upstream's way (`git status -- <paths>`), by their paths.
    direct: std::collections::HashMap<Vec<String>, bool>,
    learnt: bool,
}

impl GitFacts {
    fn take(store: &mut OpenStore, basis: &Basis, root: std::path::PathBuf) -> GitFacts {
        let head = basis.head.clone();
        let reference = basis.reference.clone().filter(|r| is_40_lower_hex(r));
        let at_head = head
            .as_deref()
            .map(|h| store.take_ranges(h))
            .unwrap_or_default();
        let at_reference = reference
            .as_deref()
            .filter(|r| head.as_deref() != Some(*r))
            .map(|r| store.take_ranges(r));
        GitFacts {
            root,
            head,
            reference: basis.reference.clone(),
            at_head,
            at_reference,
            uncommitted: basis.uncommitted.clone(),
            direct: std::collections::HashMap::new(),
            learnt: false,
        }
    }

    /// Hand the answers back to the store; `persist` (a real check, never a background pass)
    /// writes them for the next start.
    fn give_back(self, store: &mut OpenStore, persist: bool) {
        if let (Some(r), Some(answers)) = (self.reference, self.at_reference) {
            // Written once, with HEAD's below.
            store.keep_ranges(r, answers, self.learnt, false);
        }
        if let Some(h) = self.head {
            store.keep_ranges(h, self.at_head, self.learnt, persist);
        }
    }

    /// The memo and tip for questions against HEAD (`reference == false`) or the reference.
    fn memo(&mut self, reference: bool) -> (Option<&str>, &mut Answers) {
        if reference {
            match self.at_reference.as_mut() {
                Some(m) => (self.reference.as_deref(), m),
                None => (self.reference.as_deref(), &mut self.at_head),
            }
        } else {
            (self.head.as_deref(), &mut self.at_head)
        }
    }

    /// `git rev-list <base>..<tip> -- <paths>`, remembered; the tip is HEAD, or the reference.
    /// With no HEAD (not a repository, an unborn branch), git is asked about `HEAD` itself, as
    /// upstream does.
    fn range(&mut self, reference: bool, base: &str, paths: &[String]) -> Range {
        let (tip, memo) = self.memo(reference);
        let Some(tip) = tip else {
            return git_ranges::ask(&self.root, base, "HEAD", paths);
        };
        if let Some(&r) = memo.get(base).and_then(|m| m.get(paths)) {
            return r;
        }
        let tip = tip.to_string();
        let r = git_ranges::ask(&self.root, base, &tip, paths);
        self.memo(reference)
            .1
            .entry(base.to_string())
            .or_default()
            .insert(paths.to_vec(), r);
        self.learnt = true;
        r
    }

    /// Ask, in parallel, every range question evaluating `ticks` will ask that the memos cannot
    /// answer yet: a store's first check asks thousands, each a `git rev-list` process.
    fn ask_ahead<'t>(
        &mut self,
        store: &mut OpenStore,
        ticks: impl Iterator<Item = &'t crate::engine::packed::PackedTick>,
        basis: &Basis,
    ) {
        let mut todo: [Vec<(String, Vec<String>)>; 2] = [Vec::new(), Vec::new()];
        let mut seen = std::collections::HashSet::new();
        for tick in ticks {
            for g in tick.grounds() {
                let crate::engine::packed::CheckRef::Test {
                    reference,
                    verified_at_sha,
                    triggered_by,
                    ..
                } = g.check
                else {
                    continue;
                };
                let paths: Vec<String> = triggered_by.iter().map(str::to_string).collect();
                let paths = paths.as_slice();
                let mut want = |which: usize, base: &str, this: &mut GitFacts| {
                    let (tip, memo) = this.memo(which == 1);
                    if tip.is_none() || memo.get(base).is_some_and(|m| m.contains_key(paths)) {
                        return;
                    }
                    let tip = tip.map(str::to_string);
                    if seen.insert((tip, base.to_string(), paths.to_vec())) {
                        todo[which].push((base.to_string(), paths.to_vec()));
                    }
                };
                if basis
                    .reference
                    .as_deref()
                    .is_some_and(|r| r != verified_at_sha)
                {
                    want(1, verified_at_sha, self);
                }
                let recs = store.receipts.get(reference);
                if let Some(r) = verdict::latest(recs.iter()) {
                    want(0, &r.commit, self);
                }
            }
        }
        for (which, todo) in todo.into_iter().enumerate() {
            let root = self.root.clone();
            let (tip, memo) = self.memo(which == 1);
            let Some(tip) = tip.map(str::to_string) else {
                continue;
            };
            // A worker that panicked answers nothing: those questions are asked again, one by
            // one, when the ticks are evaluated.
            let Some(answers) = git_ranges::ask_all(&root, &tip, &todo) else {
                continue;
            };
            for ((base, paths), answer) in todo.into_iter().zip(answers) {
                memo.entry(base).or_default().insert(paths, answer);
            }
            self.learnt = true;
        }
    }

    /// Ask ahead, in parallel, the trigger questions `parts` recorded that the memo for the new
    /// HEAD cannot answer.
    fn ask_recorded<'p>(&mut self, parts: impl Iterator<Item = &'p TickPart>) {
        let Some(head) = self.head.clone() else {
            return;
        };
        let mut todo = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for p in parts {
            for (paths, commit, _) in p.triggered() {
                let paths: &[String] = paths;
                let known = self
                    .at_head
                    .get(&**commit)
                    .is_some_and(|m| m.contains_key(paths));
                if !known && seen.insert((&**commit, paths)) {
                    todo.push((commit.to_string(), paths.to_vec()));
                }
            }
        }
        if todo.is_empty() {
            return;
        }
        if let Some(answers) = git_ranges::ask_all(&self.root, &head, &todo) {
            for ((base, paths), answer) in todo.into_iter().zip(answers) {
                self.at_head.entry(base).or_default().insert(paths, answer);
            }
            self.learnt = true;
        }
    }

    /// Whether every trigger answer `part` recorded is the same at the current HEAD.
    fn same_triggers(&mut self, part: &TickPart) -> bool {
        part.triggered().iter().all(|(paths, commit, was)| {
            (self.range(false, commit, paths) == Range::Touched) == *was
        })
    }

    /// Whether the work tree has uncommitted changes under `paths` (upstream's `git status
    /// --porcelain --untracked-files=no -- <paths>`), and whether that was asked directly.
    fn uncommitted(&mut self, paths: &[String]) -> (bool, bool) {
        if paths.is_empty() {
            return (false, false);
        }
        if git_ranges::plain_paths(paths) {
            return (
                self.uncommitted.as_ref().is_some_and(|u| u.touches(paths)),
                false,
            );
        }
        if let Some(&d) = self.direct.get(paths) {
            return (d, true);
        }
        let d = crate::git::worktree::status_of(&self.root, paths);
        self.direct.insert(paths.to_vec(), d);
        (d, true)
    }
}

/// One ground's view of [`GitFacts`], for the verdict engine.
struct GroundGit<'g> {
    git: &'g mut GitFacts,
    verified: &'g str,
    paths: &'g [String],
    /// The work tree was asked directly.
    direct: bool,
    /// The answers that were not the default, as the ledger records them.
    said: u8,
}

impl verdict::GitSays for GroundGit<'_> {
    fn touched_since_verified(&mut self) -> bool {
        let touched = self.git.range(true, self.verified, self.paths) != Range::Untouched;
        if !touched {
            self.said |= replay::UNTOUCHED;
        }
        touched
    }

    fn uncommitted(&mut self) -> bool {
        let (dirty, direct) = self.git.uncommitted(self.paths);
        self.direct |= direct;
        if dirty {
            self.said |= replay::DIRTY;
        }
        dirty
    }
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
        let mut detail = verdict::detail(label, &v.missing, &recs);
        if harvested {
            detail = format!("harvested — falsifiability not proven; {detail}");
        }
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

/// `ev.check.plan`: every test binding of the current live view, in check order.
pub fn plan(store: &mut OpenStore) -> Result<CheckPlan, Refusal> {
    store.require()?;
    let green_exit_code = store.config().green_exit_code;
    let mut runs = Vec::new();
    for (_, tick) in store
        .current_ticks()?
        .into_iter()
        .filter(|(_, t)| t.status == "live")
    {
        for (gi, g) in tick.grounds.iter().enumerate() {
            if let Some(Check::Test {
                reference,
                counter_test,
                liveness,
                ..
            }) = &g.check
            {
                runs.push(PlannedRun {
                    tick_id: tick.id.clone(),
                    ground_index: gi,
                    reference: reference.clone(),
                    counter_test: counter_test.clone(),
                    platforms: liveness.platforms.clone(),
                });
            }
        }
    }
    Ok(CheckPlan {
        green_exit_code,
        runs,
    })
}

/// Create `results/receipts` on demand: a symlink is refused, anything else fails with the
/// plain OS error upstream reports (`File exists (os error 17)` for a file in the way).
fn receipts_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => fsio::ensure_dir(dir),
        _ => std::fs::create_dir_all(dir),
    }
}

/// `ev.receipts.append`: stamp each receipt with evd's clock and append it as one line.
pub fn append_receipts(
    store: &mut OpenStore,
    req: &AppendReceiptsRequest,
) -> Result<AppendReceiptsResult, Refusal> {
    store.require()?;
    let dir = store.results_dir().join("receipts");
    // Validate the whole batch before writing any of it.
    let checked = req
        .receipts
        .iter()
        .map(|r| match r.result.as_str() {
            "green" => Ok((r, RunResult::Green)),
            "red" => Ok((r, RunResult::Red)),
            "gray" => Ok((r, RunResult::Gray)),
            other => Err(Refusal::refused(
                "receipt_result",
                format!("receipt: invalid result: {other}"),
            )),
        })
        .collect::<Result<Vec<_>, Refusal>>()?;
    let lines: Vec<(&proto::rpc::NewReceipt, String)> = checked
        .into_iter()
        .map(|(r, result)| {
            let receipt = Receipt {
                test: r.test.clone(),
                platform: r.platform.clone(),
                commit: r.commit.clone(),
                ran_at: crate::engine::clock::now_rfc3339(),
                result,
                falsifiable: r.falsifiable,
            };
            (r, receipt.line())
        })
        .collect();
    crate::engine::limits::check_receipts(lines.iter().map(|(_, l)| l.as_str()))?;
    let run_id = match req.run_id.as_deref() {
        None => crate::ledger::run_id().to_string(),
        Some(r) if valid_run_id(r) => r.to_string(),
        Some(r) => {
            return Err(Refusal::refused(
                "run_id",
                format!(
                    "run id {}: use at most 64 of A-Z a-z 0-9 . _ - (and not . or ..)",
                    q(r)
                ),
            ))
        }
    };
    let mut out = AppendReceiptsResult::default();
    for (r, line) in lines {
        let path = dir.join(format!("{}.jsonl", proto::id::receipt_key(&r.test)));
        match receipts_dir(&dir).and_then(|()| fsio::append(&path, line.as_bytes())) {
            Ok(()) => {
                let mut p = Map::new();
                p.insert("key".into(), proto::id::receipt_key(&r.test).into());
                if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(&line) {
                    p.insert("receipt".into(), Value::Object(o));
                }
                store.journal("receipt_appended", p);
                out.written.push(line)
            }
            Err(e) => out.warnings.push(Warning {
                kind: "receipt_write".into(),
                message: format!("warning: could not write receipt for {}: {e}", q(&r.test)),
            }),
        }
    }
    for run in &req.runs {
        record_tool_run(store, &run_id, run);
    }
    Ok(out)
}

/// A run id fit to name a directory: `[A-Za-z0-9._-]{1,64}`, not `.` or `..`.
fn valid_run_id(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 64
        && r != "."
        && r != ".."
        && r.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// At most this much of each stream goes into the `tool_call` event itself (the whole kept
/// output is its artifact).
const EVENT_OUTPUT: usize = 4096;

/// `s` cut to at most `max` bytes, at a character boundary.
fn truncated(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

/// Keep one test run's output under `results/runs/<run_id>/` (crash-safe, each file named in
/// the ledger with its sha256) and journal it as a `tool_call`. Best effort: output that cannot
/// be kept is left out of the event's artifacts, never half-written.
fn record_tool_run(store: &mut OpenStore, run_id: &str, run: &proto::rpc::ToolRun) {
    use sha2::{Digest, Sha256};
    let rel_dir = format!("runs/{run_id}");
    let dir = store.results_dir().join(&rel_dir);
    // The next number no file of this run has taken: an artifact, once cited, is never
    // overwritten.
    let taken = std::fs::read_dir(&dir).map_or(0, |d| d.count());
    let role = if run.role == "counter-test" {
        "counter"
    } else {
        "check"
    };
    let key = proto::id::receipt_key(&run.command);
    let stem = (taken / 2 + 1..)
        .map(|n| format!("{n:04}-{key}-{role}"))
        .find(|stem| {
            ["stdout", "stderr"]
                .iter()
                .all(|s| std::fs::symlink_metadata(dir.join(format!("{stem}.{s}"))).is_err())
        })
        .unwrap_or_default();
    let mut artifacts = Vec::new();
    if let (Ok(tmp), Ok(())) = (store.tmp_dir(), fsio::ensure_dir(&dir)) {
        for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
            let name = format!("{stem}.{stream}");
            if fsio::replace_atomically(&tmp, &dir.join(&name), text.as_bytes()).is_ok() {
                let sha: String = Sha256::digest(text.as_bytes())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                let mut a = Map::new();
                a.insert("kind".into(), "log".into());
                a.insert("stream".into(), stream.into());
                a.insert("path".into(), format!("{rel_dir}/{name}").into());
                a.insert("sha256".into(), sha.into());
                a.insert("bytes".into(), text.len().into());
                artifacts.push(Value::Object(a));
            }
        }
    }
    let mut p = Map::new();
    p.insert("tool_name".into(), "sh".into());
    p.insert("command".into(), run.command.clone().into());
    p.insert("role".into(), run.role.clone().into());
    p.insert("exit_code".into(), run.exit_code.into());
    p.insert(
        "stdout_trunc".into(),
        truncated(&run.stdout, EVENT_OUTPUT).into(),
    );
    p.insert(
        "stderr_trunc".into(),
        truncated(&run.stderr, EVENT_OUTPUT).into(),
    );
    p.insert("duration_ms".into(), run.duration_ms.into());
    p.insert("run_id".into(), run_id.into());
    p.insert("artifacts".into(), Value::Array(artifacts));
    store.journal("tool_call", p);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_receipts_are_one_parseable_line_each_and_bad_results_are_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut store = OpenStore::new(d.path().to_path_buf());
        assert!(append_receipts(&mut store, &AppendReceiptsRequest::default()).is_err());
        store.init().expect("init");
        let new = |result: &str| proto::rpc::NewReceipt {
            test: "true".into(),
            platform: "local".into(),
            commit: "c".into(),
            result: result.into(),
            falsifiable: Some(true),
        };
        let req = AppendReceiptsRequest {
            context: Default::default(),
            receipts: vec![new("green"), new("red")],
            ..Default::default()
        };
        let r = append_receipts(&mut store, &req).expect("appended");
        assert_eq!(r.written.len(), 2);
        assert!(r.warnings.is_empty());
        let text = std::fs::read_to_string(store.results_dir().join("receipts/b5bea41b6c62.jsonl"))
            .expect("receipts file");
        let parsed = crate::engine::receipts::parse_file(&text).expect("parses");
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1].result, RunResult::Red);
        let bad = AppendReceiptsRequest {
            context: Default::default(),
            receipts: vec![new("blue")],
            ..Default::default()
        };
        assert!(append_receipts(&mut store, &bad).is_err());
        let escaping = AppendReceiptsRequest {
            context: Default::default(),
            receipts: vec![new("green")],
            run_id: Some("../../x".into()),
            ..Default::default()
        };
        assert!(
            append_receipts(&mut store, &escaping).is_err(),
            "a run id names no path"
        );
    }
}
