//! What the store verbs print: `init`, `list` (rich, `--json`, or the plain listing evd handed
//! over as a file), `log`, `verify`.
//!
//! Pure formatting: it must not ask evd or read the store.

use proto::json::q;
use proto::rpc::{InitResult, ListResult, LogResult, VerifyResult};

use super::out::Out;
use crate::style::Style;

pub fn init(r: &InitResult, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(r);
    } else if r.created {
        out.line("created .evolving/  (content-addressed chain + results cache)");
    } else {
        out.line(".evolving/ already exists (no-op)");
    }
    out
}

pub fn list(r: &ListResult, style: Style, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(r);
        return out;
    }
    if r.entries.is_empty() {
        out.line("no decisions yet");
        return out;
    }
    if !style.rich {
        // Plain rows sort by the whole rendered line (the daemon renders the same lines).
        return Out::raw(proto::rpc::list_plain_lines(&r.entries));
    }
    let tags = |e: &proto::rpc::ListEntry, sep: &str| {
        let mut s = String::new();
        for (k, v) in [
            ("authority", &e.authority),
            ("jurisdiction", &e.jurisdiction),
            ("source_ref", &e.source_ref),
        ] {
            if let Some(v) = v {
                s.push_str(&format!("{sep}{k}={v}"));
            }
        }
        s
    };
    // Rich rows stay in id order.
    for e in &r.entries {
        if !e.parseable {
            out.line(style.dim(&format!("? {} <unparseable>", e.file)));
            continue;
        }
        let decision = q(e.decision.as_deref().unwrap_or(""));
        let status = e.status.as_deref().unwrap_or("");
        let agent = e.provenance.as_deref() == Some(proto::vocab::AGENT_PROPOSED);
        out.line(format!(
            "{} {}  {}  {}",
            style.provenance_glyph(agent),
            style.bold(&decision),
            style.id(&e.file),
            style.dim(&format!("{status}{}", tags(e, " · ")))
        ));
    }
    out
}

/// The plain listing evd handed over as a file (of `len` bytes).
pub fn list_plain(file: std::fs::File, len: u64) -> Out {
    let mut out = Out::default();
    if len == 0 {
        out.line("no decisions yet");
    } else {
        out.stdout_file(file);
    }
    out
}

pub fn log(r: &LogResult, style: Style, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(r);
        if r.unreadable.is_some() {
            out.code = 1;
        }
        return out;
    }
    if r.entries.is_empty() && r.broken_at.is_none() && r.unreadable.is_none() {
        out.line("no decisions yet");
        return out;
    }
    let row = |e: &proto::rpc::LogEntry, indent: &str| -> String {
        if style.rich {
            let agent = e.provenance.as_deref() == Some(proto::vocab::AGENT_PROPOSED);
            let verb = if let Some(s) = &e.supersedes {
                format!("supersedes {s}")
            } else if let Some(rt) = &e.ratifies {
                format!("ratifies {rt}")
            } else if agent {
                "proposed".to_string()
            } else {
                "decided".to_string()
            };
            let mut row = format!(
                "{indent}{} {}  {}  {}  {}",
                style.provenance_glyph(agent),
                style.dim(&verb),
                style.bold(&q(&e.decision)),
                style.id(&e.id),
                style.dim(&e.blame)
            );
            if let Some(child) = &e.superseded_by {
                row.push_str(&format!(
                    "  {}",
                    style.dim(&format!("superseded by {child}"))
                ));
            }
            row
        } else {
            let mut row = format!("{}\t{}\t{}", e.id, e.status, q(&e.decision));
            if let Some(child) = &e.superseded_by {
                row.push_str(&format!("\tsuperseded-by:{child}"));
            }
            row
        }
    };
    for e in &r.entries {
        out.line(row(e, ""));
    }
    // Tips off HEAD's chain (a merge of branches that both decided): each, then its ticks back
    // to where it joins.
    for f in &r.forks {
        let joins = f.joins.as_deref().unwrap_or("-");
        if style.rich {
            out.line(style.dim(&format!("fork: tip {}, joins at {joins}", f.tip)));
        } else {
            out.line(format!("fork\t{}\tjoins:{joins}", f.tip));
        }
        for e in &f.entries {
            out.line(row(e, "  "));
        }
    }
    if let Some(id) = &r.broken_at {
        out.err(format!("warning: {id} not found (broken lineage)"));
    }
    if let Some((id, e)) = &r.unreadable {
        out.err(format!("error: reading {id}: {e}"));
        out.code = 1;
    }
    out
}

pub fn verify(r: &VerifyResult, json: bool) -> Out {
    let mut out = Out {
        code: u8::from(!r.ok()),
        ..Out::default()
    };
    if json {
        out.json(r);
        return out;
    }
    out.warnings(&r.warnings);
    if let Some(vectors) = &r.vectors {
        for v in vectors {
            let mark = if v.pass { "✓" } else { "✗" };
            out.line(format!("{mark} {}: {} (want {})", v.name, v.got, v.want));
        }
        return out;
    }
    if r.violations.is_empty() {
        out.line("✓ chain intact: every id == hash(payload), lineage forward-only");
        out.line("✓ every tick validates against the closed schema (R1) and check shape (R2)");
    } else {
        for v in &r.violations {
            out.line(format!("✗ {v}"));
        }
        out.err(format!("{} violation(s)", r.violations.len()));
    }
    out
}

/// `doctor`: one line per finding (what is wrong, then what `--fix` did or would do), then a
/// summary. Exit 1 while something is left unrepaired.
pub fn doctor(r: &proto::rpc::DoctorResult, json: bool) -> Out {
    let mut out = Out {
        code: u8::from(r.unhealthy()),
        ..Out::default()
    };
    if json {
        out.json(r);
        return out;
    }
    let head = if r.head.is_empty() {
        "empty".to_string()
    } else {
        r.head.clone()
    };
    if r.findings.is_empty() {
        out.line(format!(
            "✓ nothing to repair: {} tick(s), HEAD {head}",
            r.ticks
        ));
        return out;
    }
    for f in &r.findings {
        out.line(format!("✗ {}: {}", f.subject, f.problem));
        match (&f.repair, f.repaired) {
            (Some(how), true) => out.line(format!("  fixed: {how}")),
            (Some(how), false) => out.line(format!("  --fix: {how}")),
            (None, _) => out.line(
                "  cannot be repaired without losing a decision: left as it is (put the missing \
                 tick file back from a clone or a backup)",
            ),
        }
    }
    if let Some(dir) = &r.moved_to {
        let verb = if r.fixed { "moved" } else { "would be moved" };
        out.line(format!(
            "files taken out of ticks/ {verb} to {dir} (nothing is deleted)"
        ));
    }
    if r.fixed {
        out.line(format!(
            "repaired: {} tick(s), HEAD {head}; commit the result (`git add .evolving`)",
            r.ticks
        ));
    } else if r.findings.iter().any(|f| f.repair.is_some()) {
        out.err("nothing was written: `evctl doctor --fix` makes the repairs above");
    }
    out
}
