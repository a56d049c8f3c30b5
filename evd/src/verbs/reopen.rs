//! `reopen <id>`: one tick, read directly, with what each test ground reads now. The verdicts
//! come from the pure engine with reopen's own inputs: the cached `results/origin-sha` as the
//! staleness reference (never git), no attest set, no memo locks.

use std::path::Path;
use std::process::{Command, Stdio};

use proto::model::Check;
use proto::rpc::{codes, Refusal, ReopenGround, ReopenResult};
use proto::Tick;

use crate::receipts::{self, Receipt};
use crate::store::Store;
use crate::verbs::{lookup, Lookup};
use crate::verdict::{self, Inputs, Selected};

pub fn reopen(store: &mut Store, id: &str) -> Result<ReopenResult, Refusal> {
    // Upstream reads `ticks/<id>` directly: a store whose ticks/ cannot be listed still
    // answers "no tick" rather than a whole-store error.
    let found = match lookup(store, id) {
        Err(e) if e.code == codes::IO && !store.ticks_dir().is_dir() => Lookup::Missing,
        other => other?,
    };
    let tick = match found {
        Lookup::Missing => {
            return Err(Refusal::new(
                codes::NOT_FOUND,
                "not_found",
                format!("no tick with id {id}"),
            ))
        }
        Lookup::Broken(e) => return Err(Refusal::io(format!("reading {id}: {e}"))),
        Lookup::Found(t) => t,
    };
    // Newest (held_since, then file name) tick whose supersedes names this one; none when the
    // store cannot be listed.
    let superseded_by = store.ticks().ok().and_then(|ts| {
        ts.into_iter()
            .filter(|(_, t)| t.supersedes.as_deref() == Some(id))
            .max_by(|a, b| a.1.held_since.cmp(&b.1.held_since).then(a.0.cmp(b.0)))
            .map(|(f, _)| f.to_string())
    });
    let results = store.results_dir();
    let origin = crate::fsio::read_text(&results.join("origin-sha"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let selected = crate::fsio::read_text(&results.join("selected.json"))
        .ok()
        .and_then(|s| parse_selected(&s));
    let inputs = Inputs {
        reference_sha: origin.as_deref(),
        attest: None,
        selected: selected.as_ref(),
        now: crate::clock::now(),
        staleness_days: store.config().staleness_days,
    };
    let grounds = tick
        .grounds
        .iter()
        .map(|g| {
            let mut row = ReopenGround {
                supports: g.supports.clone(),
                claim: g.claim.clone(),
                check: "none".into(),
                reference: None,
                verified_at_sha: None,
                verdict: None,
            };
            match &g.check {
                Some(Check::Person { reference }) => {
                    row.check = "person".into();
                    row.reference = Some(reference.clone());
                }
                Some(
                    c @ Check::Test {
                        reference,
                        verified_at_sha,
                        liveness,
                        ..
                    },
                ) => {
                    let rs = read_receipts(&results, reference);
                    let triggered = triggered_since(store.root(), &rs, &liveness.triggered_by);
                    let v = verdict::evaluate(Some(c), &rs, triggered, &inputs);
                    row.check = "test".into();
                    row.reference = Some(reference.clone());
                    row.verified_at_sha = Some(verified_at_sha.clone());
                    row.verdict = Some(v.label.as_str().to_string());
                }
                None => {}
            }
            row
        })
        .collect();
    store.append_event(&crate::events::tick_event(
        "reopen",
        &tick,
        crate::clock::now(),
    ));
    Ok(result(&tick, superseded_by, grounds))
}

fn result(t: &Tick, superseded_by: Option<String>, grounds: Vec<ReopenGround>) -> ReopenResult {
    ReopenResult {
        id: t.id.clone(),
        decision: t.decision.clone(),
        observe: t.observe.clone(),
        agent_proposed: t.is_agent_proposed(),
        authority: t.authority.clone(),
        jurisdiction: t.jurisdiction.clone(),
        source_ref: t.source_ref_key(),
        supersedes: t.supersedes.clone(),
        ratifies: t.ratifies.clone(),
        superseded_by,
        grounds,
    }
}

/// The selector's receipts; a missing, unreadable or poisoned file reads as none.
fn read_receipts(results: &Path, selector: &str) -> Vec<Receipt> {
    let path = results
        .join("receipts")
        .join(format!("{}.jsonl", proto::id::receipt_key(selector)));
    crate::fsio::read_text(&path)
        .ok()
        .and_then(|t| receipts::parse_file(&t).ok())
        .unwrap_or_default()
}

/// Whether a triggering change landed after the selector's latest run (any platform): the
/// latest receipt's commit `C`, then `git rev-list C..HEAD -- <triggered_by…>` in the store's
/// root. No receipt or any git failure → not triggered.
fn triggered_since(root: &Path, rs: &[Receipt], triggered_by: &[String]) -> bool {
    let Some(last) = verdict::latest(rs) else {
        return false;
    };
    // A receipt is trusted as written, but never as a git option.
    if last.commit.starts_with('-') {
        return false;
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .arg("rev-list")
        .arg(format!("{}..HEAD", last.commit))
        .arg("--")
        .args(triggered_by)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => !o.stdout.iter().all(u8::is_ascii_whitespace),
        _ => false,
    }
}

/// `results/selected.json`: an object with keys only from {commit, changed, selected}, the two
/// lists arrays of strings. Anything else is invalid, which reads as absent.
pub fn parse_selected(text: &str) -> Option<Selected> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let o = v.as_object()?;
    if o.keys()
        .any(|k| !matches!(k.as_str(), "commit" | "changed" | "selected"))
    {
        return None;
    }
    let list = |k: &str| -> Option<Vec<String>> {
        match o.get(k) {
            None => Some(Vec::new()),
            Some(serde_json::Value::Array(a)) => {
                a.iter().map(|e| e.as_str().map(str::to_string)).collect()
            }
            Some(_) => None,
        }
    };
    Some(Selected {
        changed: list("changed")?,
        selected: list("selected")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selected_json_is_closed_and_typed() {
        let s = parse_selected(r#"{"commit":1,"changed":["a"],"selected":["t"]}"#).expect("ok");
        assert_eq!(s.changed, vec!["a".to_string()]);
        assert_eq!(s.selected, vec!["t".to_string()]);
        assert!(parse_selected("{}").is_some());
        assert!(parse_selected(r#"{"extra":[]}"#).is_none());
        assert!(parse_selected(r#"{"changed":"a"}"#).is_none());
        assert!(parse_selected(r#"{"selected":[1]}"#).is_none());
        assert!(parse_selected("[]").is_none());
        assert!(parse_selected("not json").is_none());
    }

    #[test]
    fn no_receipt_or_a_bad_commit_is_never_triggered() {
        assert!(!triggered_since(Path::new("/nonexistent"), &[], &[]));
        let r = Receipt {
            test: "t".into(),
            platform: "p".into(),
            commit: "--output=/nonexistent/x".into(),
            ran_at: "2026-01-01T00:00:00Z".into(),
            result: crate::receipts::RunResult::Green,
            falsifiable: None,
        };
        assert!(!triggered_since(
            Path::new("/nonexistent"),
            std::slice::from_ref(&r),
            &[]
        ));
        let r = Receipt {
            commit: "f".repeat(40),
            ..r
        };
        assert!(!triggered_since(
            Path::new("/nonexistent"),
            &[r],
            &["src".into()]
        ));
    }
}
