//! `check`: evaluate every test binding of the current live view (commands §10, model §6), write
//! a state file per current tick, the cached origin sha and the events, and answer rows. evd never
//! executes a selector: `check --run` runs them in the caller and hands the receipts to
//! [`append_receipts`], after asking [`plan`] what to run.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use proto::json::q;
use proto::model::{is_40_lower_hex, Check};
use proto::rpc::{
    AppendReceiptsRequest, AppendReceiptsResult, CheckPlan, CheckRequest, CheckResult, CheckRow,
    PlannedRun, Refusal, StalenessRef, Tally, VerdictChange, Warning,
};
use proto::Tick;
use serde_json::{Map, Value};

use crate::fsio;
use crate::receipts::{Receipt, RunResult};
use crate::store::Store;
use crate::verdict::{self, Inputs, Label};
use crate::verdict_inputs::{cached_origin, git, read_receipts, read_selected, triggered_since};

/// The warning when the live-origin reference cannot be resolved.
pub const NO_UPSTREAM_WARNING: &str = "warning: cannot resolve the live-origin staleness reference (no upstream?) — sha-staleness skipped";

/// The repository's HEAD commit, as evd sees it (`None` outside git): `git rev-parse --verify
/// -q HEAD`, through the store's cache of git's answers.
fn git_head(facts: &mut crate::gitfacts::FactCache, root: &Path) -> Option<String> {
    facts
        .answer(root, crate::gitfacts::Query::Head)
        .filter(|s| is_40_lower_hex(s))
}

/// Resolve the staleness reference (§10.3); caches a resolved live-origin sha.
/// With `record` (a real `check`), a resolved live-origin sha is cached to `results/origin-sha`;
/// a background re-evaluation leaves that cache alone.
fn staleness_reference(
    store: &Store,
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
                if record && fsio::ensure_dir(&results).is_ok() {
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

/// The state file's bytes for one tick.
/// The state file of one tick, without its `computed_at` (added when written).
fn state_body(
    tick: &Tick,
    graded: &[Graded],
    policy: &str,
    sha: Option<&str>,
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
    o.insert("grounds".into(), grounds.into());
    let mut r = Map::new();
    r.insert("policy".into(), policy.into());
    r.insert("sha".into(), sha.map_or(Value::Null, Value::from));
    o.insert("staleness_ref".into(), Value::Object(r));
    o.insert("tick_id".into(), tick.id.as_str().into());
    o
}

/// A tick-scoped event line with extra fields.
fn event(op: &str, tick: &Tick, extra: &[(&str, String)]) -> String {
    let mut o = crate::events::tick_event_fields(op, tick, crate::clock::now());
    for (k, x) in extra {
        o.insert((*k).to_string(), x.as_str().into());
    }
    proto::json::compact(&Value::Object(o))
}

/// Write a tick's state file unless this store already wrote the same verdicts there: a
/// verdict that did not change keeps its file (and its `computed_at`, the time it was computed).
/// Write a tick's state file unless this store already wrote the same verdicts there: a
/// verdict that did not change keeps its file (and its `computed_at`, the time it was computed).
/// `create`: a real check makes `results/state/` and new files; a background re-evaluation only
/// rewrites files that exist (it never resurrects a store being removed, nor writes a file for
/// a tick no check has seen).
fn write_state(
    store: &mut Store,
    tick: &Tick,
    graded: &[Graded],
    policy: &str,
    sha: Option<&str>,
    create: bool,
) {
    use std::hash::{Hash, Hasher};
    // Everything the file says but the time: the tick (content-addressed), each verdict, the
    // reference.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tick.id.hash(&mut h);
    tick.grounds.len().hash(&mut h);
    for g in graded {
        g.label.as_str().hash(&mut h);
        g.missing.hash(&mut h);
    }
    policy.hash(&mut h);
    sha.hash(&mut h);
    let digest = h.finish();
    let id = tick.id.as_str();
    if store.state_written.get(id) == Some(&digest) {
        return;
    }
    let dir = store.results_dir().join("state");
    // In the background, only keep existing files current: a state file appears when a check
    // first sees its tick, as upstream's do.
    let ready = if create {
        fsio::ensure_dir(&dir).is_ok()
    } else {
        std::fs::symlink_metadata(dir.join(format!("{id}.json"))).is_ok_and(|m| m.is_file())
    };
    if ready && proto::vocab::is_tick_id(id) {
        let mut body = state_body(tick, graded, policy, sha);
        body.insert("computed_at".into(), crate::clock::now_rfc3339().into());
        let bytes = proto::json::pretty(&Value::Object(body));
        if fsio::replace_unsynced(&dir.join(format!("{id}.json")), bytes.as_bytes()).is_ok() {
            store.state_written.insert(id.to_string(), digest);
        }
    }
}

/// `check` (§10.1 steps 1, 2, 4–6): evaluate, write state files, record the events, answer the rows.
pub fn check(store: &mut Store, req: &CheckRequest) -> Result<CheckResult, Refusal> {
    evaluate(store, req, true, None).map(|(r, _)| r)
}

/// What a partial re-evaluation covers: the ticks bound to these receipt keys, and these tick
/// files themselves.
#[derive(Debug, Default, Clone)]
pub struct Scope {
    pub receipt_keys: std::collections::BTreeSet<String>,
    pub ticks: std::collections::BTreeSet<String>,
}

/// Re-evaluate after a change seen by the watcher, as a plain `check` with no flags would (the
/// view the state files hold), keeping the state files current without recording check events.
/// `only`: when only receipts and tick files changed, the ticks to re-evaluate. Returns the verdicts that changed since the last evaluation.
pub fn refresh_verdicts(
    store: &mut Store,
    only: Option<&Scope>,
) -> Result<Vec<VerdictChange>, Refusal> {
    store.require()?;
    let root = store.root().to_path_buf();
    let ask = |args: &[&str]| git(&root, args);
    let policy = store.config().staleness_ref;
    let mut context = proto::rpc::Context {
        store: root.display().to_string(),
        cwd: root.display().to_string(),
        ..Default::default()
    };
    match policy.as_str() {
        "none" => {}
        "local-head" => context.git.head = ask(&["rev-parse", "HEAD"]),
        _ => context.git.upstream = ask(&["rev-parse", "@{upstream}"]),
    }
    let (offline, attest) = store.last_check.clone();
    let req = CheckRequest {
        context,
        offline,
        attest,
        ran: false,
    };
    evaluate(store, &req, false, only).map(|(_, changes)| changes)
}

/// The evaluation shared by [`check`] and [`refresh_verdicts`]. With `record`, the check
/// events are appended; `only` limits the work to ticks bound to those receipt keys. A plain
/// evaluation (no attest, not offline) also updates the store's verdict snapshot and reports
/// what changed in it.
fn evaluate(
    store: &mut Store,
    req: &CheckRequest,
    record: bool,
    only: Option<&Scope>,
) -> Result<(CheckResult, Vec<VerdictChange>), Refusal> {
    let started = Instant::now();
    store.require()?;
    if record {
        store.last_check = (req.offline, req.attest.clone().filter(|a| !a.is_empty()));
    } else if !store.results_dir().join("state").is_dir() {
        // In the background, never recreate what someone is removing.
        return Ok((empty_result(req), Vec::new()));
    }
    let config = store.config();
    let ticks: Vec<(String, std::sync::Arc<Tick>)> = store
        .current_shared()?
        .into_iter()
        .filter(|(_, t)| t.status == "live")
        .collect();
    let mut warnings = Vec::new();
    let policy = config.staleness_ref.clone();
    let sha = staleness_reference(store, req, &policy, &mut warnings, record);
    let results = store.results_dir();
    let selected = read_selected(&results);
    let attest: Option<Vec<String>> = req.attest.clone().filter(|a| !a.is_empty());
    let inputs = Inputs {
        reference_sha: sha.as_deref(),
        attest: attest.as_deref(),
        selected: selected.as_ref(),
        now: crate::clock::now(),
        staleness_days: config.staleness_days,
    };
    let root = store.root().to_path_buf();
    let head = git_head(&mut store.git, &root);
    let mut memo = store.take_trigger_memo(head.as_deref());
    let mut cache: HashMap<String, Vec<Receipt>> = HashMap::new();
    let mut rows = Vec::new();
    let mut events = Vec::new();
    let plain = attest.is_none() && !req.offline;
    let mut seen_labels: Vec<(String, usize, String, String, &'static str)> = Vec::new();
    let touches = |tick: &Tick, keys: &std::collections::BTreeSet<String>| {
        tick.grounds.iter().any(|g| match &g.check {
            Some(Check::Test { reference, .. }) => {
                keys.contains(&proto::id::receipt_key(reference))
            }
            _ => false,
        })
    };
    for (file, tick) in &ticks {
        if only.is_some_and(|sc| !sc.ticks.contains(file) && !touches(tick, &sc.receipt_keys)) {
            continue;
        }
        let mut graded = Vec::with_capacity(tick.grounds.len());
        let mut test_labels = Vec::new();
        let mut replaced = Vec::new();
        for (gi, g) in tick.grounds.iter().enumerate() {
            let Some(Check::Test {
                reference,
                counter_test,
                liveness,
                ..
            }) = &g.check
            else {
                graded.push(Graded {
                    label: Label::NotApplicable,
                    missing: Vec::new(),
                });
                continue;
            };
            let recs = cache
                .entry(reference.clone())
                .or_insert_with(|| read_receipts(&results, reference));
            let triggered = verdict::latest(recs.iter()).is_some_and(|r| {
                let key = (r.commit.clone(), liveness.triggered_by.clone());
                *memo
                    .entry(key)
                    .or_insert_with(|| triggered_since(&root, &r.commit, &liveness.triggered_by))
            });
            let v = verdict::evaluate(g.check.as_ref(), recs, triggered, &inputs);
            let (label, memo_reason) = verdict::lock(tick, v.label);
            if memo_reason.is_some() {
                replaced.push(v.label);
            }
            let harvested = counter_test.is_none();
            let mut detail = verdict::detail(label, &v.missing, recs);
            if harvested {
                detail = format!("harvested — falsifiability not proven; {detail}");
                events.push(event(
                    "harvested",
                    tick,
                    &[("verdict", label.event_label())],
                ));
            }
            rows.push(CheckRow {
                label: label.as_str().into(),
                tick_id: tick.id.clone(),
                file: file.clone(),
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
            if plain {
                seen_labels.push((
                    tick.id.clone(),
                    gi,
                    tick.decision.clone(),
                    g.claim.clone(),
                    label.as_str(),
                ));
            }
            test_labels.push(label);
            graded.push(Graded {
                label,
                missing: v.missing,
            });
        }
        if let Some((worst, masked)) = verdict::roll_up(&test_labels) {
            let mut extra = vec![("verdict", worst)];
            if let Some(m) = masked {
                extra.push(("masked_stale", m));
            }
            if let Some((from, _)) = verdict::roll_up(&replaced) {
                extra.push(("suppressed_from", from));
            }
            events.push(event("check", tick, &extra));
        }
        write_state(store, tick, &graded, &policy, sha.as_deref(), record);
    }
    store.keep_trigger_memo(head, memo);
    let changes = if plain {
        let full = only.is_none();
        store.update_verdicts(seen_labels, full)
    } else {
        Vec::new()
    };
    if !record {
        let result = CheckResult {
            total_test_bindings: rows.len(),
            harvested_unproven: rows.iter().filter(|r| r.harvested).count(),
            ran: req.ran,
            staleness_ref: StalenessRef { policy, sha },
            gating: rows.iter().any(|r| r.gating),
            tally: Tally::default(),
            rows,
            warnings,
        };
        return Ok((result, changes));
    }
    for e in &events {
        store.append_event(e);
    }
    let mut tally = Tally::default();
    for r in &rows {
        match r.class.as_str() {
            "attention" => tally.gating += 1,
            "clear" => tally.green += 1,
            _ => tally.non_gating += 1,
        }
    }
    let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut run = Map::new();
    run.insert("decisions".into(), ticks.len().into());
    run.insert("op".into(), "check-run".into());
    run.insert("ts".into(), crate::clock::now_rfc3339().into());
    run.insert("wall_ms".into(), wall_ms.into());
    store.append_event(&proto::json::compact(&Value::Object(run)));
    Ok((
        CheckResult {
            total_test_bindings: rows.len(),
            harvested_unproven: rows.iter().filter(|r| r.harvested).count(),
            ran: req.ran,
            staleness_ref: StalenessRef { policy, sha },
            gating: rows.iter().any(|r| r.gating),
            tally,
            rows,
            warnings,
        },
        changes,
    ))
}

fn empty_result(req: &CheckRequest) -> CheckResult {
    CheckResult {
        rows: Vec::new(),
        total_test_bindings: 0,
        harvested_unproven: 0,
        ran: req.ran,
        staleness_ref: StalenessRef {
            policy: String::new(),
            sha: None,
        },
        tally: Tally::default(),
        gating: false,
        warnings: Vec::new(),
    }
}

/// `ev.check.plan`: every test binding of the current live view, in check order.
pub fn plan(store: &mut Store) -> Result<CheckPlan, Refusal> {
    store.require()?;
    let green_exit_code = store.config().green_exit_code;
    let mut runs = Vec::new();
    for (_, tick) in store
        .current()?
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
    store: &mut Store,
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
    let mut out = AppendReceiptsResult::default();
    for (r, result) in checked {
        let receipt = Receipt {
            test: r.test.clone(),
            platform: r.platform.clone(),
            commit: r.commit.clone(),
            ran_at: crate::clock::now_rfc3339(),
            result,
            falsifiable: r.falsifiable,
        };
        let line = receipt.line();
        let path = dir.join(format!("{}.jsonl", proto::id::receipt_key(&r.test)));
        match receipts_dir(&dir).and_then(|()| fsio::append(&path, line.as_bytes())) {
            Ok(()) => out.written.push(line),
            Err(e) => out.warnings.push(Warning {
                kind: "receipt_write".into(),
                message: format!("warning: could not write receipt for {}: {e}", q(&r.test)),
            }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_receipts_are_one_parseable_line_each_and_bad_results_are_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut store = Store::new(d.path().to_path_buf());
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
        };
        let r = append_receipts(&mut store, &req).expect("appended");
        assert_eq!(r.written.len(), 2);
        assert!(r.warnings.is_empty());
        let text = std::fs::read_to_string(store.results_dir().join("receipts/b5bea41b6c62.jsonl"))
            .expect("receipts file");
        let parsed = crate::receipts::parse_file(&text).expect("parses");
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1].result, RunResult::Red);
        let bad = AppendReceiptsRequest {
            context: Default::default(),
            receipts: vec![new("blue")],
        };
        assert!(append_receipts(&mut store, &bad).is_err());
    }
}
