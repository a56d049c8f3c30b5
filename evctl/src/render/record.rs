//! What the verbs that write decisions print: `decide`, `propose`, `supersede`, `guard`,
//! `ratify`, and the `pending` proposals awaiting ratification.
//!
//! Pure formatting: it must not ask evd or read the store.

use proto::json::q;
use proto::rpc::DecideResult;

use super::out::Out;
use crate::style::Style;

pub fn decide(r: &DecideResult, json: bool) -> Out {
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if json {
        out.json(r);
    } else if r.dry_run {
        out.line(format!(
            "would record {} ({} ground(s)) — dry run, nothing written",
            r.id, r.ground_count
        ));
    } else {
        out.line(format!("recorded {} ({} ground(s))", r.id, r.ground_count));
    }
    out
}

pub fn propose(r: &proto::rpc::ProposeResult, json: bool) -> Out {
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if json {
        out.json(&r.envelope);
    } else if r.deduped {
        out.line(format!(
            "already proposed {} as {} for this source_ref — no-op (awaiting ratification)",
            q(&r.envelope.decision),
            r.id
        ));
    } else {
        out.line(format!(
            "proposed {} ({} ground(s)) — agent-proposed, awaiting ratification",
            r.id, r.ground_count
        ));
    }
    out
}

pub fn ratify(r: &proto::rpc::RatifyResult, json: bool) -> Out {
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if json {
        out.json(r);
    } else {
        out.line(format!(
            "ratified {} → {} (now user-ruled, human-now)",
            r.proposal_id, r.child_id
        ));
    }
    out
}

pub fn pending(r: &proto::rpc::PendingResult, style: Style, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(r);
        return out;
    }
    if r.proposals.is_empty() {
        match &r.filter {
            Some(k) => out.line(format!(
                "no proposals awaiting ratification for source_ref {k}"
            )),
            None => out.line("no proposals awaiting ratification"),
        }
        return out;
    }
    for p in &r.proposals {
        if style.rich {
            let mut meta = p.blame.clone();
            if let Some(k) = &p.source_ref {
                meta.push_str(&format!(" · {k}"));
            }
            meta.push_str(&format!(" · {}", p.held_since));
            out.line(format!(
                "{} {}  {}  {}",
                style.provenance_glyph(true),
                style.bold(&q(&p.decision)),
                style.id(&p.id),
                style.dim(&meta)
            ));
        } else {
            out.line(format!(
                "{}\t{}\t{}\t{}",
                p.id,
                p.status,
                q(&p.decision),
                p.blame
            ));
        }
    }
    if style.rich {
        out.line(style.dim(&format!(
            "{} awaiting ratification — evctl ratify <id> --blame <you>",
            r.proposals.len()
        )));
    }
    out
}

pub fn guard(r: &proto::rpc::GuardResult, json: bool) -> Out {
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if json {
        out.json(r);
    } else {
        out.line(format!("bound; wrote child {}", r.child_id));
    }
    out
}

pub fn supersede(r: &proto::rpc::SupersedeResult, json: bool) -> Out {
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if json {
        out.json(r);
    } else {
        match r.ground_count {
            None => out.line(format!(
                "re-tagged {} (supersedes {})",
                r.child_id, r.superseded_id
            )),
            Some(n) => out.line(format!(
                "recorded {} ({n} ground(s)) — supersedes {}",
                r.child_id, r.superseded_id
            )),
        }
    }
    out
}

/// `reverify`'s answer: one line per decision (stdout for what was recorded, stderr for what
/// was not, with what to do about it); exit 1 when any decision was left as it was.
pub fn reverify(r: &proto::rpc::ReverifyResult, dry_run: bool, platform: &str, json: bool) -> Out {
    use proto::rpc::ReverifyStatus as S;
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if r.outcomes
        .iter()
        .any(|o| matches!(o.status, S::Refused | S::NeedsRun))
    {
        out.code = 1;
    }
    if json {
        out.json(r);
        return out;
    }
    let at = r.head.get(..7).unwrap_or(&r.head);
    if r.outcomes.is_empty() {
        out.line(
            "nothing to re-verify: no decision reads stale because of a commit to a path it guards",
        );
    }
    for o in &r.outcomes {
        let what = format!("{} {}", o.id, q(&o.decision));
        let why = o.reason.as_deref().unwrap_or("");
        match o.status {
            S::Reverified => match (&o.child_id, dry_run) {
                (Some(child), _) => out.line(format!(
                    "reverified {what} at {at}: wrote child {child} (supersedes {})",
                    o.id
                )),
                (None, _) => out.line(format!("would re-verify {what} at {at}")),
            },
            S::Current => out.line(format!("current {what}: already verified at {at}")),
            S::NeedsRun => {
                let elsewhere: Vec<&str> = o
                    .missing
                    .iter()
                    .map(|m| m.platform.as_str())
                    .filter(|p| *p != platform)
                    .collect();
                let next = if dry_run && elsewhere.is_empty() {
                    format!("`evctl reverify {}` runs them here first", o.id)
                } else if elsewhere.is_empty() {
                    format!(
                        "run `evctl check --run --platform {platform}`, then `evctl reverify {}`",
                        o.id
                    )
                } else {
                    format!(
                        "run `evctl check --run --platform {}` where that platform runs, then `evctl reverify {}`",
                        elsewhere.first().copied().unwrap_or(platform),
                        o.id
                    )
                };
                out.err(format!("evctl: {what} not re-verified: {why}: {next}"));
            }
            S::Refused => out.err(format!("evctl: {what} not re-verified: {why}")),
        }
    }
    out
}
