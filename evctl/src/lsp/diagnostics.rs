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
    let then = evd::api::shared::clock::parse(ran_at)?;
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

// ---------------------------------------------------------------------------------------------
// Evidence: each citation of a current decision, at its span

/// The position of byte `offset` of `text` (lines by `\n`, columns in UTF-16 units, the
/// protocol's default); an offset past the end is the end.
pub fn position_of(text: &[u8], offset: u64) -> Position {
    let offset = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(text.len());
    let before = &text[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count();
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[start..])
        .encode_utf16()
        .count();
    Position::new(
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

/// The byte offset of `p` in `text` (the inverse of [`position_of`]): a column past its line's
/// end is the line's end, a line past the last is the end of the text. A line that is not
/// UTF-8 counts one unit a byte.
pub fn offset_of(text: &[u8], p: Position) -> u64 {
    let mut start = 0usize;
    for _ in 0..p.line {
        match text[start..].iter().position(|&b| b == b'\n') {
            Some(i) => start += i + 1,
            None => return text.len() as u64,
        }
    }
    let end = text[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |i| start + i);
    let want = p.character as usize;
    let at = match std::str::from_utf8(&text[start..end]) {
        Ok(line) => {
            let mut units = 0usize;
            line.char_indices()
                .find_map(|(i, c)| {
                    let here = (units >= want).then_some(i);
                    units += c.len_utf16();
                    here
                })
                .unwrap_or(line.len())
        }
        Err(_) => want.min(end - start),
    };
    (start + at) as u64
}

/// The byte span of a selection in `text`: the selected bytes, or the whole line(s) it is on
/// when nothing is selected (a line's newline included). `None` when that is empty.
pub fn selection_span(text: &[u8], r: Range) -> Option<(u64, u64)> {
    let (a, b) = (offset_of(text, r.start), offset_of(text, r.end));
    let (a, b) = (a.min(b), a.max(b));
    if a < b {
        return Some((a, b));
    }
    let a = offset_of(text, Position::new(r.start.line, 0));
    let b = offset_of(text, Position::new(r.start.line.saturating_add(1), 0));
    (a < b).then_some((a, b))
}

/// Every path a current decision cites as evidence.
pub fn cited_paths(guards: &GuardsResult) -> BTreeSet<String> {
    guards
        .evidence
        .iter()
        .filter(|e| !e.path.is_empty())
        .map(|e| e.path.clone())
        .collect()
}

/// The diagnostics of the citations of the file at `rel`, one at each cited span (`text`: the
/// file's bytes as saved, to place them; without it, on the first line): a hint where the
/// evidence holds; where it does not, a warning, an error when the decision is user-ruled
/// (its drift gates like a red).
pub fn for_evidence(guards: &GuardsResult, rel: &str, text: Option<&[u8]>) -> Vec<Diagnostic> {
    guards
        .evidence
        .iter()
        .filter(|e| e.path == rel)
        .map(|e| {
            let range = match text {
                Some(t) => Range::new(position_of(t, e.start), position_of(t, e.end)),
                None => Range::new(Position::new(0, 0), Position::new(1, 0)),
            };
            let (severity, state) = match e.label.as_str() {
                "holds" => (
                    DiagnosticSeverity::HINT,
                    format!("holds (bytes {}-{} hash as cited)", e.start, e.end),
                ),
                label => (
                    if e.gating {
                        DiagnosticSeverity::ERROR
                    } else {
                        DiagnosticSeverity::WARNING
                    },
                    format!(
                        "{label}{} — bytes {}-{}: {}",
                        if e.gating { " (gating)" } else { "" },
                        e.start,
                        e.end,
                        e.detail
                    ),
                ),
            };
            Diagnostic {
                range,
                severity: Some(severity),
                code: Some(NumberOrString::String(e.tick_id.clone())),
                source: Some(SOURCE.to_string()),
                message: format!(
                    "evidence of decision {} {} — ground {}: {state}",
                    e.tick_id,
                    proto::json::q(&e.decision),
                    e.ground_index,
                ),
                data: Some(serde_json::json!({
                    "tick": e.tick_id,
                    "ground": e.ground_index,
                    "evidence": {"start": e.start, "end": e.end, "state": e.label},
                })),
                ..Diagnostic::default()
            }
        })
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
                origin: None,
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
            red_rows: vec![],
            red_total: 0,
            warnings: vec![],
            evidence: vec![],
            staged_paths: None,
        }
    }

    fn now() -> OffsetDateTime {
        evd::api::shared::clock::parse("2026-11-22T12:00:00Z").expect("time")
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

    fn cited(label: &str, gating: bool, start: u64, end: u64) -> proto::rpc::EvidenceRow {
        proto::rpc::EvidenceRow {
            label: label.into(),
            tick_id: "aaaaaaaaaaaa".into(),
            file: "aaaaaaaaaaaa".into(),
            decision: "keep the queue shallow".into(),
            claim: "p99 stays low [evidence:…]".into(),
            ground_index: 1,
            path: "bench/p99.txt".into(),
            start,
            end,
            detail: if label == "holds" {
                String::new()
            } else {
                "its bytes changed (they hash to 0123456789ab now)".into()
            },
            since: None,
            gating,
        }
    }

    #[test]
    fn positions_and_offsets_count_lines_and_utf16_units() {
        let t = "a\nxé𝄞z\n\nlast".as_bytes();
        assert_eq!(position_of(t, 0), Position::new(0, 0));
        assert_eq!(position_of(t, 2), Position::new(1, 0));
        // é is 2 bytes, 1 unit; 𝄞 is 4 bytes, 2 units.
        assert_eq!(position_of(t, 5), Position::new(1, 2));
        assert_eq!(position_of(t, 9), Position::new(1, 4));
        assert_eq!(position_of(t, 999), Position::new(3, 4));
        for off in [0, 2, 3, 5, 9, 10, 11, 12, 16] {
            assert_eq!(offset_of(t, position_of(t, off)), off, "{off}");
        }
        assert_eq!(
            offset_of(t, Position::new(1, 99)),
            10,
            "past the line's end"
        );
        assert_eq!(offset_of(t, Position::new(9, 0)), t.len() as u64);
        // Nothing selected: the line; a selection: its bytes, either way round.
        let r = |a: (u32, u32), b: (u32, u32)| {
            Range::new(Position::new(a.0, a.1), Position::new(b.0, b.1))
        };
        assert_eq!(selection_span(t, r((1, 1), (1, 1))), Some((2, 11)));
        assert_eq!(selection_span(t, r((1, 4), (1, 1))), Some((3, 9)));
        assert_eq!(selection_span(t, r((3, 0), (3, 0))), Some((12, 16)));
        assert_eq!(selection_span(t, r((2, 0), (2, 0))), Some((11, 12)));
        assert_eq!(selection_span(b"", r((0, 0), (0, 0))), None);
    }

    #[test]
    fn each_citation_shows_at_its_span_by_its_state() {
        let mut r = answer(vec![]);
        r.evidence = vec![
            cited("holds", false, 11, 22),
            cited("drifted", false, 0, 3),
            cited("drifted", true, 0, 3),
        ];
        let text = b"p50 3.1 ms\np99 4.8 ms\n";
        let d = for_evidence(&r, "bench/p99.txt", Some(text));
        assert_eq!(d.len(), 3);
        assert_eq!(d[0].severity, Some(DiagnosticSeverity::HINT));
        assert_eq!(
            d[0].range,
            Range::new(Position::new(1, 0), Position::new(2, 0))
        );
        assert_eq!(
            d[0].message,
            "evidence of decision aaaaaaaaaaaa \"keep the queue shallow\" — ground 1: holds \
             (bytes 11-22 hash as cited)"
        );
        assert_eq!(d[1].severity, Some(DiagnosticSeverity::WARNING));
        assert!(d[1].message.ends_with(
            "ground 1: drifted — bytes 0-3: its bytes changed (they hash to 0123456789ab now)"
        ));
        assert_eq!(d[2].severity, Some(DiagnosticSeverity::ERROR));
        assert!(d[2].message.contains("drifted (gating)"));
        assert!(for_evidence(&r, "other.txt", Some(text)).is_empty());
        let got: Vec<String> = cited_paths(&r).into_iter().collect();
        assert_eq!(got, vec!["bench/p99.txt".to_string()]);
    }
}
