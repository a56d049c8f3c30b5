//! From `ev.guards`' answer to what an editor shows on a file: one diagnostic per decision
//! guarding it, carried by the ground that speaks for that decision about the file. Pure.
//!
//! Severity: an error when the verdict is red (or gray->red) and gates; a warning for every
//! other verdict that asks for attention (stale, not-run, unproven, silently-unbound, a red that
//! does not gate); information for the verdicts that never gate (exempt, memo); a hint for green.

use std::collections::BTreeSet;

use lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString, Position, Range};
use proto::rpc::{GuardedDecision, GuardedGround, GuardsResult};
use time::OffsetDateTime;

/// The `source` of every diagnostic and hover this server gives.
pub const SOURCE: &str = "ev";

pub fn severity(g: &GuardedGround) -> DiagnosticSeverity {
    match g.label.as_str() {
        "red" | "gray->red" if g.gating => DiagnosticSeverity::ERROR,
        "green" => DiagnosticSeverity::HINT,
        "exempt" | "memo" => DiagnosticSeverity::INFORMATION,
        _ => DiagnosticSeverity::WARNING,
    }
}

/// `3 h ago`, `12 min ago`, `4 d ago`; `just now` under a minute. A receipt dated ahead of the
/// clock says so.
pub fn age(ran_at: &str, now: OffsetDateTime) -> Option<String> {
    let then = evd::clock::parse(ran_at)?;
    let secs = (now - then).whole_seconds();
    Some(match secs {
        s if s < -60 => "dated in the future".to_string(),
        s if s < 60 => "just now".to_string(),
        s if s < 3600 => format!("{} min ago", s / 60),
        s if s < 2 * 86_400 => format!("{} h ago", s / 3600),
        s => format!("{} d ago", s / 86_400),
    })
}

fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

/// The last-run part of a message: `last run 3 h ago at a245bc4`, or `never run`.
pub fn last_run(g: &GuardedGround, now: OffsetDateTime) -> String {
    match &g.last_run {
        None => "never run".to_string(),
        Some(r) => {
            let when = age(&r.ran_at, now).unwrap_or_else(|| format!("at {}", r.ran_at));
            let mut s = format!("last run {when} at {}", short(&r.commit));
            if r.result != g.label {
                s.push_str(&format!(" ({})", r.result));
            }
            s
        }
    }
}

/// One line saying the decision, the ground, the verdict, who is on the hook and how old the
/// receipt is.
pub fn message(d: &GuardedDecision, g: &GuardedGround, now: OffsetDateTime) -> String {
    let gating = if g.gating { " (gating)" } else { "" };
    let blame = if d.blame.is_empty() {
        "nobody named"
    } else {
        d.blame.as_str()
    };
    format!(
        "decision {} {} — ground {} reads {}{gating} — on the hook: {blame} — {}",
        d.tick_id,
        proto::json::q(&d.decision),
        proto::json::q(&g.claim),
        g.label,
        last_run(g, now)
    )
}

/// The diagnostics of the file at `rel` (store-relative, `/`-separated): one per current
/// decision one of whose triggers covers it, in the order of the answer (by tick file).
pub fn for_path(guards: &GuardsResult, rel: &str, now: OffsetDateTime) -> Vec<Diagnostic> {
    guards
        .decisions
        .iter()
        .filter_map(|d| {
            let g = d.worst_ground(Some(rel))?;
            Some(Diagnostic {
                // The first line, whatever its length: no document text is needed for it.
                range: Range::new(Position::new(0, 0), Position::new(1, 0)),
                severity: Some(severity(g)),
                code: Some(NumberOrString::String(d.tick_id.clone())),
                source: Some(SOURCE.to_string()),
                message: message(d, g, now),
                data: Some(serde_json::json!({"tick": d.tick_id, "ground": g.index})),
                ..Diagnostic::default()
            })
        })
        .collect()
}

/// A trigger as a plain store-relative file path, when it names one literally: no wildcard, not
/// the whole tree, nothing leaving the store.
pub fn literal(trigger: &str) -> Option<String> {
    let mut t = trigger.trim_end_matches('/');
    while let Some(rest) = t.strip_prefix("./") {
        t = rest.trim_start_matches('/');
    }
    let plain = !t.is_empty()
        && t != "."
        && !t.starts_with('/')
        && !t.bytes().any(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'))
        && !t.split('/').any(|c| c == "..");
    plain.then(|| t.to_string())
}

/// Every path a current decision's trigger names literally (files or directories: the caller
/// keeps the ones that are files).
pub fn literal_paths(guards: &GuardsResult) -> BTreeSet<String> {
    guards
        .decisions
        .iter()
        .flat_map(|d| &d.grounds)
        .flat_map(|g| &g.triggered_by)
        .filter_map(|t| literal(t))
        .collect()
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use proto::rpc::{BriefRoad, LastRun, StalenessRef, Tally};

    pub fn ground(
        index: usize,
        label: &str,
        gating: bool,
        triggers: &[&str],
        last: Option<(&str, &str)>,
    ) -> GuardedGround {
        GuardedGround {
            index,
            claim: format!("claim {index}"),
            supports: "chosen".into(),
            selector: format!("test {index}"),
            counter_test: Some(format!("counter {index}")),
            triggered_by: triggers.iter().map(|t| t.to_string()).collect(),
            platforms: vec!["local".into()],
            label: label.into(),
            class: "attention".into(),
            gating,
            detail: String::new(),
            last_run: last.map(|(result, ran_at)| LastRun {
                result: result.into(),
                commit: "a245bc4d00000000000000000000000000000000".into(),
                ran_at: ran_at.into(),
                platform: "local".into(),
            }),
        }
    }

    pub fn decision(id: &str, text: &str, grounds: Vec<GuardedGround>) -> GuardedDecision {
        GuardedDecision {
            tick_id: id.into(),
            file: id.into(),
            decision: text.into(),
            blame: "Wang Yu".into(),
            authority: Some("user-ruled".into()),
            jurisdiction: None,
            rejected: vec![BriefRoad {
                claim: "it locks the schema".into(),
                option: "pgvector".into(),
            }],
            matched: vec![],
            grounds,
        }
    }

    pub fn answer(decisions: Vec<GuardedDecision>) -> GuardsResult {
        GuardsResult {
            head: None,
            staleness_ref: StalenessRef {
                policy: "none".into(),
                sha: None,
            },
            gating: false,
            tally: Tally::default(),
            matched_total: decisions.len(),
            decisions,
            gating_rows: vec![],
            warnings: vec![],
            evidence: vec![],
        }
    }

    fn now() -> OffsetDateTime {
        evd::clock::parse("2026-11-22T12:00:00Z").expect("time")
    }

    #[test]
    fn severity_follows_the_verdict_and_whether_it_gates() {
        let sev = |label, gating| severity(&ground(0, label, gating, &["x"], None));
        assert_eq!(sev("red", true), DiagnosticSeverity::ERROR);
        assert_eq!(sev("gray->red", true), DiagnosticSeverity::ERROR);
        assert_eq!(sev("red", false), DiagnosticSeverity::WARNING);
        assert_eq!(sev("stale", true), DiagnosticSeverity::WARNING);
        assert_eq!(
            sev(
                "stale (deciding receipt older than the staleness window)",
                true
            ),
            DiagnosticSeverity::WARNING
        );
        assert_eq!(sev("not-run", true), DiagnosticSeverity::WARNING);
        assert_eq!(sev("unproven", true), DiagnosticSeverity::WARNING);
        assert_eq!(sev("silently-unbound", true), DiagnosticSeverity::WARNING);
        assert_eq!(sev("memo", false), DiagnosticSeverity::INFORMATION);
        // A green run against uncommitted files: never gating, but shown (0.1.32).
        assert_eq!(sev("dirty", false), DiagnosticSeverity::WARNING);
        assert_eq!(sev("green", false), DiagnosticSeverity::HINT);
    }

    #[test]
    fn the_message_names_decision_ground_verdict_blame_and_receipt_age() {
        let g = ground(
            0,
            "red",
            true,
            &["db/schema.sql"],
            Some(("red", "2026-11-22T09:00:00Z")),
        );
        let d = decision("1f95ec0c16ce", "freeze the schema", vec![g.clone()]);
        assert_eq!(
            message(&d, &g, now()),
            "decision 1f95ec0c16ce \"freeze the schema\" — ground \"claim 0\" reads red (gating) \
             — on the hook: Wang Yu — last run 3 h ago at a245bc4"
        );
        let g = ground(0, "not-run", false, &["x"], None);
        assert!(
            message(&d, &g, now()).ends_with("reads not-run — on the hook: Wang Yu — never run")
        );
        // A verdict that is not the receipt's own result says what the receipt said.
        let g = ground(
            0,
            "stale",
            true,
            &["x"],
            Some(("green", "2026-11-20T12:00:00Z")),
        );
        assert!(message(&d, &g, now()).ends_with("last run 2 d ago at a245bc4 (green)"));
    }

    #[test]
    fn ages_read_naturally() {
        let at = |s| age(s, now()).expect("parses");
        assert_eq!(at("2026-11-22T11:59:30Z"), "just now");
        assert_eq!(at("2026-11-22T11:48:00Z"), "12 min ago");
        assert_eq!(at("2026-11-21T10:00:00Z"), "26 h ago");
        assert_eq!(at("2026-11-12T12:00:00Z"), "10 d ago");
        assert_eq!(at("2026-11-23T12:00:00Z"), "dated in the future");
        assert_eq!(age("yesterday", now()), None);
    }

    #[test]
    fn one_diagnostic_per_decision_from_its_worst_ground_for_that_file() {
        let a = decision(
            "aaaaaaaaaaaa",
            "freeze the schema",
            vec![
                ground(0, "green", false, &["db/schema.sql"], None),
                ground(1, "red", true, &["db/schema.sql", "db/other.sql"], None),
                ground(2, "stale", true, &["api"], None),
            ],
        );
        let b = decision(
            "bbbbbbbbbbbb",
            "keep the api small",
            vec![ground(0, "green", false, &["api/", "*.sql"], None)],
        );
        let r = answer(vec![a, b]);
        let d = for_path(&r, "db/schema.sql", now());
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].severity, Some(DiagnosticSeverity::ERROR));
        assert_eq!(
            d[0].code,
            Some(NumberOrString::String("aaaaaaaaaaaa".into()))
        );
        assert_eq!(d[0].source.as_deref(), Some("ev"));
        assert_eq!(
            d[1].severity,
            Some(DiagnosticSeverity::HINT),
            "the glob covers it"
        );
        // Under api/, decision a speaks through its stale ground only.
        let d = for_path(&r, "api/routes.rs", now());
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].severity, Some(DiagnosticSeverity::WARNING));
        assert!(d[0].message.contains("reads stale (gating)"));
        assert!(for_path(&r, "README", now()).is_empty());
    }

    #[test]
    fn only_literal_triggers_name_files() {
        assert_eq!(literal("db/schema.sql").as_deref(), Some("db/schema.sql"));
        assert_eq!(literal("./api/").as_deref(), Some("api"));
        for t in [
            "",
            ".",
            "*.sql",
            "db/?.sql",
            "x[ab]",
            "../outside",
            "/etc/passwd",
            "a/../b",
        ] {
            assert_eq!(literal(t), None, "{t}");
        }
        let r = answer(vec![decision(
            "aaaaaaaaaaaa",
            "d",
            vec![ground(
                0,
                "green",
                false,
                &["b.txt", "*.md", "a/", "b.txt"],
                None,
            )],
        )]);
        let got: Vec<String> = literal_paths(&r).into_iter().collect();
        assert_eq!(got, vec!["a".to_string(), "b.txt".to_string()]);
    }
}
