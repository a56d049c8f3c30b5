//! What a hover on a guarded file shows: every decision guarding it, with the verdict of each of
//! its test grounds, its triggers and its roads not taken, as Markdown. Pure.

use proto::rpc::{GuardedDecision, GuardsResult};
use time::OffsetDateTime;

use super::diagnostics::last_run;

/// At most this many decisions are shown in one hover (the rest are counted).
pub const MAX_DECISIONS: usize = 20;

/// Text inside backticks: a backtick would end the span, so it becomes a quote.
fn code(s: &str) -> String {
    format!("`{}`", s.replace('`', "'"))
}

/// Plain text that Markdown must not interpret.
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '|' | '~'
        ) {
            out.push('\\');
        }
        out.push(if c == '\n' { ' ' } else { c });
    }
    out
}

fn decision_md(d: &GuardedDecision, rel: &str, now: OffsetDateTime, out: &mut String) {
    out.push_str(&format!(
        "**{}** · {}\n\n",
        text(&d.decision),
        code(&d.tick_id)
    ));
    let mut tags = vec![format!(
        "on the hook: {}",
        text(if d.blame.is_empty() {
            "nobody named"
        } else {
            &d.blame
        })
    )];
    if let Some(a) = &d.authority {
        tags.push(text(a));
    }
    if let Some(j) = &d.jurisdiction {
        tags.push(format!("jurisdiction {}", text(j)));
    }
    out.push_str(&tags.join(" · "));
    out.push_str("\n\n");
    for g in &d.grounds {
        let here = if g.guards_path(rel) {
            ""
        } else {
            " (not this file)"
        };
        let gating = if g.gating { " (gating)" } else { "" };
        out.push_str(&format!(
            "- **{}**{gating} — {}{here}\n  - test {}",
            text(&g.label),
            text(&g.claim),
            code(&g.selector)
        ));
        if let Some(ct) = &g.counter_test {
            out.push_str(&format!(", counter-test {}", code(ct)));
        }
        out.push_str(&format!("; {}", text(&last_run(g, now))));
        if let Some(r) = &g.last_run {
            out.push_str(&format!(" on {}", text(&r.platform)));
            if let Some(o) = &r.origin {
                // It came through git: who published it, and in which notes commit.
                let by = if o.by.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", text(&o.by))
                };
                out.push_str(&format!(
                    ", published by {}{by} in {}",
                    text(&o.host),
                    code(o.notes_commit.get(..12).unwrap_or(&o.notes_commit))
                ));
            }
        }
        out.push('\n');
        if !g.triggered_by.is_empty() {
            let t: Vec<String> = g.triggered_by.iter().map(|t| code(t)).collect();
            out.push_str(&format!("  - triggers: {}\n", t.join(", ")));
        }
    }
    for r in &d.rejected {
        out.push_str(&format!(
            "- not taken: {} — {}\n",
            text(&r.option),
            text(&r.claim)
        ));
    }
}

/// The hover of the file at `rel`, or `None` when no current decision guards it.
pub fn markdown(guards: &GuardsResult, rel: &str, now: OffsetDateTime) -> Option<String> {
    let guarding: Vec<&GuardedDecision> = guards
        .decisions
        .iter()
        .filter(|d| d.worst_ground(Some(rel)).is_some())
        .collect();
    if guarding.is_empty() {
        return None;
    }
    let mut out = format!(
        "### ev: {} decision(s) guard {}\n\n",
        guarding.len(),
        code(rel)
    );
    for (i, d) in guarding.iter().take(MAX_DECISIONS).enumerate() {
        if i > 0 {
            out.push_str("\n---\n\n");
        }
        decision_md(d, rel, now, &mut out);
    }
    if guarding.len() > MAX_DECISIONS {
        out.push_str(&format!(
            "\n… and {} more: `evctl guards {}`\n",
            guarding.len() - MAX_DECISIONS,
            rel.replace('`', "'")
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::super::diagnostics::tests::{answer, decision, ground};
    use super::*;

    #[test]
    fn a_hover_lists_the_guarding_decisions_with_verdicts_triggers_and_roads_not_taken() {
        let now = evd::api::shared::clock::parse("2026-11-22T12:00:00Z").expect("time");
        let r = answer(vec![
            decision(
                "1f95ec0c16ce",
                "freeze the *schema*",
                vec![
                    ground(
                        0,
                        "red",
                        true,
                        &["db/schema.sql"],
                        Some(("red", "2026-11-22T09:00:00Z")),
                    ),
                    ground(1, "green", false, &["api"], None),
                ],
            ),
            decision(
                "bbbbbbbbbbbb",
                "unrelated",
                vec![ground(0, "green", false, &["x"], None)],
            ),
        ]);
        let md = markdown(&r, "db/schema.sql", now).expect("guarded");
        assert!(
            md.starts_with("### ev: 1 decision(s) guard `db/schema.sql`"),
            "{md}"
        );
        assert!(
            md.contains("**freeze the \\*schema\\*** · `1f95ec0c16ce`"),
            "{md}"
        );
        assert!(md.contains("on the hook: Wang Yu · user-ruled"), "{md}");
        assert!(md.contains("- **red** (gating) — claim 0\n"), "{md}");
        assert!(
            md.contains(
                "test `test 0`, counter-test `counter 0`; last run 3 h ago at a245bc4 on local"
            ),
            "{md}"
        );
        assert!(md.contains("- **green** — claim 1 (not this file)"), "{md}");
        assert!(md.contains("  - triggers: `db/schema.sql`\n"), "{md}");
        assert!(
            md.contains("- not taken: pgvector — it locks the schema"),
            "{md}"
        );
        assert!(!md.contains("unrelated"), "{md}");
        assert_eq!(markdown(&r, "README", now), None);
    }
}
