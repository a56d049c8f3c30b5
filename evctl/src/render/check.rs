//! What `check` prints: the verdict rows (rich, `--json`, plain inline or from evd's answer
//! file), the decisions whose cited evidence no longer holds, and the note after a `--run` that
//! could settle nothing.
//!
//! Pure formatting: it must not ask evd, read the store or run tests.

use proto::json::q;
use proto::rpc::Refusal;

use super::out::{refusal, Out, Stream};
use crate::style::Style;

pub fn check(r: &proto::rpc::CheckResult, style: Style, json: bool, exit_on_red: bool) -> Out {
    check_with(r, None, style, json, exit_on_red)
}

/// [`check`], the plain rows in `rows` (an answer file of `len` bytes) when given.
pub fn check_with(
    r: &proto::rpc::CheckResult,
    rows: Option<(std::fs::File, u64)>,
    style: Style,
    json: bool,
    exit_on_red: bool,
) -> Out {
    let mut out = Out {
        code: u8::from(exit_on_red && r.gating),
        ..Out::default()
    };
    out.warnings(&r.warnings);
    if json {
        out.json(r);
        return out;
    }
    let unreadable = |e: serde_json::Error| {
        let e = Refusal::io(format!("evd sent unreadable rows: {e}"));
        refusal(&e, json)
    };
    // Each printed row's final label, for the note after a run.
    let mut labels: Vec<String> = Vec::new();
    if let Some((mut file, len)) = rows {
        if len == 0 {
            out.line("no test-bound grounds to check");
            evidence_rows(r, style, &mut out);
            return out;
        }
        if r.ran {
            // The note after a run needs each row's label: read the rows (a run takes far
            // longer than this anyway).
            let mut text = String::new();
            if let Err(e) = std::io::Read::read_to_string(&mut file, &mut text) {
                let e = Refusal::io(format!("reading evd's answer file: {e}"));
                return refusal(&e, json);
            }
            labels = text
                .lines()
                .map(|l| l.split('\t').next().unwrap_or("").to_string())
                .collect();
            out.push(Stream::Stdout, &text);
        } else {
            out.stdout_file(file);
        }
    } else if let Some(p) = &r.plain {
        match p.text() {
            Ok(text) if text.is_empty() => {
                out.line("no test-bound grounds to check");
                evidence_rows(r, style, &mut out);
                return out;
            }
            Ok(text) => {
                if r.ran {
                    labels = text
                        .lines()
                        .map(|l| l.split('\t').next().unwrap_or("").to_string())
                        .collect();
                }
                out.push(Stream::Stdout, &text)
            }
            Err(e) => return unreadable(e),
        }
    } else {
        let rows: Vec<proto::rpc::RowView<'_>> = match &r.table {
            Some(t) => match t.rows() {
                Ok(rows) => rows,
                Err(e) => return unreadable(e),
            },
            None => r.rows.iter().map(proto::rpc::CheckRow::view).collect(),
        };
        if rows.is_empty() {
            out.line("no test-bound grounds to check");
            evidence_rows(r, style, &mut out);
            return out;
        }
        if r.ran {
            labels = rows.iter().map(|row| row.label().to_string()).collect();
        }
        for row in &rows {
            if style.rich {
                let tail = row.memo_reason().unwrap_or(row.detail());
                out.line(format!(
                    "{} {}  {}  {}  {}",
                    style.verdict_glyph(row.class()),
                    style.hue(row.class(), row.label()),
                    style.bold(&q(row.decision())),
                    style.id(row.tick_id()),
                    style.dim(&format!("{} · {tail}", q(row.claim())))
                ));
            } else {
                out.line(proto::rpc::plain_row(
                    row.label(),
                    row.file(),
                    row.claim(),
                    row.detail(),
                ));
            }
        }
    }
    evidence_rows(r, style, &mut out);
    let note_after_run = if r.ran {
        colocation_note(labels.iter().map(String::as_str), &r.staleness_ref.policy)
    } else {
        None
    };
    let harvested = (r.harvested_unproven > 0).then(|| {
        format!(
            "harvested-unproven: {} of {} test bindings have no counter-test",
            r.harvested_unproven, r.total_test_bindings
        )
    });
    let note = if r.ran {
        None
    } else if r.total_test_bindings > r.harvested_unproven {
        Some("note: run `evctl check --run` to re-run each bound check and prove each declared counter-test's falsifiability")
    } else {
        Some("note: run `evctl check --run` to re-run each bound check and record a fresh receipt")
    };
    if style.rich {
        out.line(style.dim(&format!(
            "{} gating · {} green · {} non-gating",
            r.tally.gating, r.tally.green, r.tally.non_gating
        )));
        if let Some(h) = harvested {
            out.line(style.hue("attention", &h));
        }
        if r.tally.gating > 0 {
            out.line(style.dim("tip: evctl why <selector> · evctl reopen <id> — resurface a red"));
        }
        if let Some(n) = note {
            out.line(style.dim(n));
        }
    } else {
        if let Some(h) = harvested {
            out.line(h);
        }
        if let Some(n) = note {
            out.line(n);
        }
    }
    if let Some(n) = note_after_run {
        out.err(n);
    }
    out
}

/// The decisions whose cited evidence no longer holds, after the verdict rows.
fn evidence_rows(r: &proto::rpc::CheckResult, style: Style, out: &mut Out) {
    for e in &r.evidence {
        if style.rich {
            let class = if e.gating {
                "attention"
            } else {
                "informational"
            };
            out.line(format!(
                "{} {}  {}  {}  {}",
                style.verdict_glyph(class),
                style.hue(class, &e.label),
                style.bold(&q(&e.decision)),
                style.id(&e.tick_id),
                style.dim(&format!(
                    "evidence {} bytes {}-{}: {}{}",
                    e.path,
                    e.start,
                    e.end,
                    e.detail,
                    e.since
                        .as_deref()
                        .map(|s| format!(", since {s}"))
                        .unwrap_or_default()
                ))
            ));
        } else {
            out.line(e.plain());
        }
    }
}

/// After `check --run`: when the rows are stuck (some `stale`, `not-run` or `unproven`) and none
/// resolved to `green` or `red`, the runs could not settle anything, which is what happens when
/// the git state read is not the guarded code's. Every other label counts as neither. Under the
/// `local-head` policy (`policy`) upstream's advice to set it is already followed: what keeps a
/// row stale there is a commit since it was verified, which `evctl reverify` answers.
pub fn colocation_note<'a>(
    labels: impl IntoIterator<Item = &'a str>,
    policy: &str,
) -> Option<&'static str> {
    let (mut stuck, mut resolved) = (false, false);
    for label in labels {
        match label {
            "stale" | "not-run" | "unproven" => stuck = true,
            "green" | "red" => resolved = true,
            _ => {}
        }
    }
    if policy == "local-head" {
        return (stuck && !resolved).then_some(
            "note: ran the bound checks but none resolved pass/fail (all stale / not-run / unproven) — a decision verified at an older commit stays stale however often it runs: `evctl reverify` re-verifies it at HEAD",
        );
    }
    (stuck && !resolved).then_some(
        "note: ran the bound checks but none resolved pass/fail (all stale / not-run / unproven) — evctl reads git state from this directory; if the ledger is separate from the guarded code, run evctl in the working tree, or set staleness_ref = local-head",
    )
}

#[cfg(test)]
mod tests {
    use super::colocation_note;

    #[test]
    fn the_colocation_note_needs_a_stuck_row_and_no_resolved_one() {
        for (labels, note) in [
            (&["stale"][..], true),
            (&["not-run", "unproven"], true),
            (&["stale", "dirty"], true),
            (
                &[
                    "unproven",
                    "memo",
                    "exempt",
                    "gray->red",
                    "silently-unbound",
                ],
                true,
            ),
            (&["dirty"], false),
            (&["exempt"], false),
            (&["memo", "gray->red", "silently-unbound"], false),
            (&["green", "not-run"], false),
            (&["stale", "red"], false),
            (&[], false),
        ] {
            assert_eq!(
                colocation_note(labels.iter().copied(), "live-origin").is_some(),
                note,
                "{labels:?}"
            );
        }
        let text = colocation_note(["stale"], "live-origin").unwrap_or_default();
        assert!(text.contains("— evctl reads git state"), "{text}");
        assert!(text.contains("run evctl in the working tree"), "{text}");
        // A setting already in force is never advised.
        let text = colocation_note(["stale"], "local-head").unwrap_or_default();
        assert!(!text.contains("staleness_ref"), "{text}");
        assert!(text.contains("`evctl reverify`"), "{text}");
    }
}
