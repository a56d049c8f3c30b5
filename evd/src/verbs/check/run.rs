//! `check --run`'s half in evd: the plan of what to run ([`plan`]), and the receipts the caller
//! ran, appended durably with their tool-run records ([`append_receipts`]). evd never executes
//! a selector itself.

use std::path::Path;

use proto::json::q;
use proto::model::Check;
use proto::rpc::{
    AppendReceiptsRequest, AppendReceiptsResult, CheckPlan, PlannedRun, Refusal, Warning,
};
use serde_json::{Map, Value};

use crate::engine::receipts::{Receipt, RunResult};
use crate::open::OpenStore;
use crate::sys::fsio;

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
    crate::crash_point!("receipts.appended");
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
