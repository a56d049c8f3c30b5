//! `ev.ledger.append` and `ev.ledger.verify`: the store's event ledger (see [`crate::ledger`]).

use proto::rpc::{
    LedgerAppendRequest, LedgerAppendResult, LedgerFault, LedgerVerifyResult, Refusal,
};
use serde_json::{Map, Value};

use crate::ledger::{self, Violation};
use crate::open::journal::{git_now, own_agent};
use crate::open::OpenStore;
use crate::sys::beneath::Root;

fn refusal(v: &Violation, what: &str) -> Refusal {
    Refusal::refused("ledger_rule", format!("{what}: {v}; nothing was appended"))
}

fn broken(b: &ledger::Broken) -> Refusal {
    Refusal::refused(
        "ledger_broken",
        format!(
            "the ledger is broken at line {} ({}); nothing was appended — `evctl ledger verify` reports it",
            b.line, b.violation
        ),
    )
}

/// `ev.ledger.append`.
pub fn append(
    store: &mut OpenStore,
    req: &LedgerAppendRequest,
) -> Result<LedgerAppendResult, Refusal> {
    store.require()?;
    if req.events.is_empty() {
        return Err(Refusal::refused("ledger_empty", "no events to append"));
    }
    // evd's own events waiting go first: the ledger keeps the order things happened in.
    store.write_journal();
    let host = ledger::host(store.root());
    let results = store.results_dir();
    let needs_git = req.events.iter().any(|e| e.get("git").is_none());
    let git = if needs_git {
        git_now(store.root())
    } else {
        Value::Null
    };
    let read = store
        .ledger
        .read()
        .map_err(|e| Refusal::io(format!("reading the ledger: {e}")))?;
    if let Some(b) = &read.broken {
        return Err(broken(b));
    }
    // Each event is admitted against the ledger and the events of the batch before it.
    let mut rules = read.tail.rules.clone();
    let mut events = Vec::with_capacity(req.events.len());
    for (i, v) in req.events.iter().enumerate() {
        let what = format!(
            "event {} ({})",
            i + 1,
            v.get("event_type")
                .and_then(Value::as_str)
                .unwrap_or("no event_type")
        );
        let ev = ledger::from_client(v.clone(), &host, &git).map_err(|e| refusal(&e, &what))?;
        rules.admit(&ev).map_err(|e| refusal(&e, &what))?;
        // The artifacts it cites must be there, and hash as it says, before it is written; one
        // without a sha256 is evidence nobody can check (seed 003: missing evidence fails).
        let cited: Vec<(u64, ledger::rules::Artifact)> = ledger::rules::artifacts(&ev)
            .map_err(|e| refusal(&e, &what))?
            .into_iter()
            .map(|a| (0, a))
            .collect();
        if let Some((_, a)) = cited.iter().find(|(_, a)| a.sha256.is_none()) {
            let v = Violation {
                rule: "artifacts",
                message: format!(
                    "artifact {} has no sha256: evidence that cannot be checked is refused",
                    a.path
                ),
            };
            return Err(refusal(&v, &what));
        }
        if let Some(b) = ledger::file::artifact_fault(
            &Root::new(store.root()),
            &results,
            &cited,
            &mut Default::default(),
        ) {
            return Err(refusal(&b.violation, &what));
        }
        rules.take(&ev);
        events.push(ev);
    }
    // With a request id, its intent is durable before the batch is written, so that a retry
    // after a lost answer (or a crash) is told the batch landed instead of writing it twice.
    let id = store.current_request.clone();
    let (ledger, requests) = (&mut store.ledger, &mut store.store.requests);
    let lines = ledger
        .append_noting(
            events,
            &crate::engine::clock::now_rfc3339(),
            |seq, hash| match &id {
                Some(id) => requests.intent_ledger(id, seq, hash),
                None => Ok(()),
            },
        )
        .map_err(|e| Refusal::io(format!("writing the ledger: {e}; nothing was appended")))?;
    // The fault campaign stops evd here: the batch durable, its answer not yet given.
    crate::crash_point!("ledger.appended");
    let first_seq = lines
        .first()
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v.get("seq").and_then(Value::as_u64))
        .unwrap_or(0);
    Ok(LedgerAppendResult { lines, first_seq })
}

/// `ev.ledger.verify`.
pub fn verify(store: &mut OpenStore) -> Result<LedgerVerifyResult, Refusal> {
    store.require()?;
    let results = store.results_dir();
    let root = Root::new(store.root());
    let path = store.ledger.path().display().to_string();
    let read = store
        .ledger
        .read()
        .map_err(|e| Refusal::io(format!("reading the ledger: {e}")))?;
    let lines = read.lines;
    let broken = match &read.broken {
        Some(b) => Some(b.clone()),
        None => ledger::file::artifact_fault(
            &root,
            &results,
            &read.artifacts,
            &mut store.artifacts_hashed,
        ),
    };
    // The file against its head: an end removed, or the last line evd wrote edited.
    let broken = match broken {
        Some(b) => Some(b),
        None => store
            .ledger
            .head_fault_now()
            .map_err(|e| Refusal::io(format!("reading the ledger: {e}")))?,
    };
    // The file against what this host published of it (head and file rewritten together are
    // still caught once the head was published).
    let broken = broken.or_else(|| crate::verbs::ledger_share::published_fault(store));
    let Some(b) = broken else {
        return Ok(LedgerVerifyResult {
            path,
            lines,
            fault: None,
            reported_seq: None,
        });
    };
    let fault = LedgerFault {
        line: b.line,
        rule: b.violation.rule.to_string(),
        message: b.violation.message.clone(),
    };
    let mut payload = Map::new();
    payload.insert("line".into(), fault.line.into());
    payload.insert("rule".into(), fault.rule.clone().into());
    payload.insert("message".into(), fault.message.clone().into());
    // Reported once: a verification that finds the fault already reported last adds nothing.
    let last_said = store
        .ledger
        .last_line()
        .and_then(|l| serde_json::from_str::<Value>(&l).ok())
        .filter(|v| v.get("event_type").and_then(Value::as_str) == Some("ledger_validation_error"))
        .and_then(|v| v.get("payload").cloned());
    let reported_seq = if last_said.as_ref() == Some(&Value::Object(payload.clone())) {
        None
    } else {
        store.write_journal();
        let git = git_now(store.root());
        let host = ledger::host(store.root());
        let ev = ledger::own_event("ledger_validation_error", own_agent(), &host, &git, payload);
        // A ledger that takes no event at all (torn, or shorter than its head) cannot carry the
        // report: the fault is still the answer.
        let lines = match store
            .ledger
            .append_own(vec![ev], &crate::engine::clock::now_rfc3339())
        {
            Ok(lines) => lines,
            Err(e) => {
                tracing::info!(error = %e, "the ledger's fault could not be reported in it");
                Vec::new()
            }
        };
        lines
            .first()
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .and_then(|v| v.get("seq").and_then(Value::as_u64))
    };
    Ok(LedgerVerifyResult {
        path,
        lines,
        fault: Some(fault),
        reported_seq,
    })
}

/// `ev.ledger.query`: one of seed 002's questions over every event of the ledger (evd's own
/// waiting ones written first).
pub fn query(
    store: &mut OpenStore,
    req: &proto::rpc::LedgerQueryRequest,
) -> Result<Value, Refusal> {
    store.require()?;
    if !req.queries.is_empty() {
        if req.all_hosts {
            return Err(Refusal::refused(
                "ledger_query",
                "several queries at once are answered over this host's ledger only, not --all-hosts",
            ));
        }
        store.write_journal();
        let bytes = store
            .ledger
            .read_bytes()
            .map_err(|e| Refusal::io(format!("reading the ledger: {e}")))?;
        let answers =
            ledger::query::answer_many(&req.queries, &String::from_utf8_lossy(&bytes), req.last)
                .map_err(|e| Refusal::refused("ledger_query", e))?;
        return Ok(serde_json::json!({ "answers": answers }));
    }
    if !ledger::query::QUERIES.iter().any(|(q, _)| *q == req.query) {
        return ledger::query::answer(&req.query, &[], None)
            .map_err(|e| Refusal::refused("ledger_query", e));
    }
    store.write_journal();
    let bytes = store
        .ledger
        .read_bytes()
        .map_err(|e| Refusal::io(format!("reading the ledger: {e}")))?;
    if !req.all_hosts {
        // This host's ledger alone: folded here, on the bytes read (no copy, no thread).
        let one = [req.query.clone()];
        return ledger::query::answer_many(&one, &String::from_utf8_lossy(&bytes), req.last)
            .map_err(|e| Refusal::refused("ledger_query", e))?
            .remove(&req.query)
            .ok_or_else(|| Refusal::io("ledger query: no answer"));
    }
    let own = if req.host.is_empty() {
        "this host".to_string()
    } else {
        req.host.clone()
    };
    let others = crate::verbs::ledger_share::accepted(store, &req.host)?;
    let mut hosts = vec![
        serde_json::json!({"host": own, "events": bytes.iter().filter(|&&c| c == b'\n').count()}),
    ];
    hosts.extend(
        others
            .iter()
            .map(|(host, _, events)| serde_json::json!({"host": host, "events": events})),
    );
    let root = store.root().to_path_buf();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let mut answer = ledger::query::answer_sources(
        &req.query,
        1 + others.len(),
        req.last,
        workers,
        |i| match i {
            0 => Ok(bytes.clone()),
            i => crate::verbs::ledger_share::copy_bytes(&root, &others[i - 1].1),
        },
    )
    .map_err(|e| Refusal::refused("ledger_query", e))?;
    if let Some(o) = answer.as_object_mut() {
        o.insert("hosts".into(), Value::Array(hosts));
    }
    Ok(answer)
}

/// `ev.ledger.repair`: a torn last line moved aside (under `runs/<evd's run id>/`), lines
/// removed from the end declared skipped, each journaled as a `ledger_correction`.
pub fn repair(store: &mut OpenStore) -> Result<proto::rpc::LedgerRepairResult, Refusal> {
    store.require()?;
    store.write_journal();
    let results = store.results_dir();
    let path = store.ledger.path().display().to_string();
    let (host, git) = (ledger::host(store.root()), git_now(store.root()));
    let stamp = crate::engine::clock::now_rfc3339().replace([':', '-', '.'], "");
    let aside = format!("runs/{}/ledger-torn-tail-{stamp}", ledger::run_id());
    let done = store
        .ledger
        .repair(
            &results,
            &aside,
            &crate::engine::clock::now_rfc3339(),
            |p| ledger::own_event("ledger_correction", own_agent(), &host, &git, p),
        )
        .map_err(|e| Refusal::io(format!("repairing the ledger: {e}")))?;
    let first_seq = if done.is_empty() {
        None
    } else {
        store
            .ledger
            .read()
            .ok()
            .map(|r| r.tail.seq + 1 - done.len() as u64)
    };
    Ok(proto::rpc::LedgerRepairResult {
        path,
        repaired: done.into_iter().map(Value::Object).collect(),
        first_seq,
    })
}

/// `ev.ledger.replay`: verify the ledger, then fold it through the verdict engine (ticks read
/// from the store by content id), comparing every `check_run`'s fingerprint. Needs no clock,
/// locale or network: everything comes from the ledger and the ticks.
pub fn replay(store: &mut OpenStore) -> Result<proto::rpc::LedgerReplayResult, Refusal> {
    store.require()?;
    // evd's own events still waiting belong to the ledger replayed.
    store.write_journal();
    // A ledger that does not verify (its artifacts included) is not replayed.
    let verified = verify(store)?;
    let mut out = proto::rpc::LedgerReplayResult {
        path: verified.path,
        lines: verified.lines,
        ..Default::default()
    };
    if let Some(f) = verified.fault {
        out.fault = Some(LedgerFault {
            message: format!(
                "{} (a ledger that does not verify is not replayed)",
                f.message
            ),
            ..f
        });
        return Ok(out);
    }
    let text = match store.ledger.read_bytes() {
        Ok(b) => String::from_utf8(b)
            .map_err(|_| Refusal::io("reading the ledger: it is not UTF-8".to_string()))?,
        Err(e) => return Err(Refusal::io(format!("reading the ledger: {e}"))),
    };
    store.refresh()?;
    let mut r = ledger::replay::Replay::new();
    let mut ticks = |id: &str| match store.cached_entry(id) {
        Some(crate::store::Entry::Tick(p)) => Some(std::sync::Arc::new(p.tick())),
        _ => None,
    };
    for (i, line) in text.lines().enumerate() {
        let Ok(Value::Object(ev)) = serde_json::from_str::<Value>(line) else {
            continue; // verified above: every line is an object
        };
        if let Err(p) = r.event(i as u64 + 1, &ev, &mut ticks) {
            out.fault = Some(LedgerFault {
                line: p.line,
                rule: "replay".into(),
                message: format!("seq {}: {}", p.seq, p.message),
            });
            break;
        }
    }
    out.replayed = r.replayed;
    out.ticks_read = r.ticks_read;
    Ok(out)
}
