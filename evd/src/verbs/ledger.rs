//! `ev.ledger.append` and `ev.ledger.verify`: the store's event ledger (see [`crate::ledger`]).

use proto::rpc::{
    LedgerAppendRequest, LedgerAppendResult, LedgerFault, LedgerVerifyResult, Refusal,
};
use serde_json::{Map, Value};

use crate::ledger::{self, Violation};
use crate::store::Store;

/// The id of this process's run, for the events it writes itself: `R-<start>-<pid>`.
pub fn run_id() -> &'static str {
    static RUN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    RUN.get_or_init(|| {
        let start = crate::clock::now_rfc3339().replace([':', '-'], "");
        let start = start.split('.').next().unwrap_or_default().to_string();
        format!("R-{start}-{}", std::process::id())
    })
}

/// The `git` envelope of the store's repository now: branch (`HEAD` when detached), head sha
/// and whether tracked files have uncommitted changes (empty strings outside a repository).
fn git_now(store: &Store) -> Value {
    let root = store.root();
    let head = crate::verdict_inputs::git(root, &["rev-parse", "--verify", "-q", "HEAD"])
        .unwrap_or_default();
    let branch = crate::verdict_inputs::git(root, &["symbolic-ref", "--short", "-q", "HEAD"])
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| {
            if head.is_empty() {
                String::new()
            } else {
                "HEAD".into()
            }
        });
    let dirty = crate::worktree::status(root).is_some_and(|u| !u.paths.is_empty());
    ledger::git(&branch, &head, dirty)
}

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
pub fn append(store: &mut Store, req: &LedgerAppendRequest) -> Result<LedgerAppendResult, Refusal> {
    store.require()?;
    if req.events.is_empty() {
        return Err(Refusal::refused("ledger_empty", "no events to append"));
    }
    let host = ledger::host(store.root());
    let needs_git = req.events.iter().any(|e| e.get("git").is_none());
    let git = if needs_git {
        git_now(store)
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
        rules.take(&ev);
        events.push(ev);
    }
    let lines = store
        .ledger
        .append(events, &crate::clock::now_rfc3339())
        .map_err(|e| Refusal::io(format!("writing the ledger: {e}; nothing was appended")))?;
    let first_seq = lines
        .first()
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v.get("seq").and_then(Value::as_u64))
        .unwrap_or(0);
    Ok(LedgerAppendResult { lines, first_seq })
}

/// An event evd writes about its own work (its type one of [`ledger::rules::DAEMON_TYPES`]).
pub fn own_event(
    store: &Store,
    event_type: &str,
    git: Value,
    payload: Map<String, Value>,
) -> Map<String, Value> {
    let mut ev = Map::new();
    ev.insert("schema_version".into(), ledger::SCHEMA_VERSION.into());
    ev.insert("event_type".into(), event_type.into());
    ev.insert("run_id".into(), run_id().into());
    ev.insert("agent_id".into(), "evd".into());
    ev.insert("host".into(), ledger::host(store.root()));
    ev.insert("git".into(), git);
    ev.insert("payload".into(), Value::Object(payload));
    ev
}

/// `ev.ledger.verify`.
pub fn verify(store: &mut Store) -> Result<LedgerVerifyResult, Refusal> {
    store.require()?;
    let path = store.ledger.path().display().to_string();
    let read = store
        .ledger
        .read()
        .map_err(|e| Refusal::io(format!("reading the ledger: {e}")))?;
    let lines = read.lines;
    let Some(b) = read.broken.clone() else {
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
        let git = git_now(store);
        let ev = own_event(store, "ledger_validation_error", git, payload);
        let lines = store
            .ledger
            .append(vec![ev], &crate::clock::now_rfc3339())
            .map_err(|e| Refusal::io(format!("writing the ledger: {e}")))?;
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
