//! What the verbs that read decisions back print: `brief`, `why`, `guards`, `reopen`.
//!
//! Pure formatting: it must not ask evd or read the store.

use proto::json::q;

use super::out::Out;
use crate::style::Style;

pub fn brief(r: &proto::rpc::BriefResult, style: Style, json: bool) -> Out {
    if json {
        return Out::raw(r.contract_line());
    }
    let mut out = Out::default();
    if r.total == 0 {
        out.line("no user-ruled decisions");
        return out;
    }
    let glyph = style.provenance_glyph(false);
    if style.rich {
        out.line(format!(
            "{glyph} {}",
            style.bold(&format!("{} user-ruled decisions", r.total))
        ));
    }
    for d in &r.decisions {
        match (style.rich, d.bound) {
            (true, bound) => {
                let mut row = format!(
                    "{glyph} {}  {}",
                    style.bold(&q(&d.decision)),
                    style.id(&d.id)
                );
                if !bound {
                    row.push_str(&format!("  {}", style.hue("attention", "advisory")));
                }
                out.line(row);
            }
            (false, true) => out.line(format!("{}  [user-ruled]", d.decision)),
            (false, false) => out.line(format!("{}  [user-ruled · advisory]", d.decision)),
        }
        for road in &d.rejected_roads {
            let text = format!("rejected {}: {}", road.option, road.claim);
            if style.rich {
                out.line(format!("    {}", style.dim(&text)));
            } else {
                out.line(format!("  {text}"));
            }
        }
    }
    if r.elided > 0 {
        let mut footer = format!("… {} more user-ruled decision(s)", r.elided);
        if r.elided_load_bearing > 0 {
            footer.push_str(&format!(", {} with rejected roads", r.elided_load_bearing));
        }
        footer.push_str(" — `evctl list` for all");
        out.line(if style.rich {
            style.dim(&footer)
        } else {
            footer
        });
    }
    if r.advisory > 0 {
        let note = format!(
            "{} of {} advisory — nothing watches them (heed only); bind a check to catch a violation",
            r.advisory, r.total
        );
        out.line(if style.rich {
            style.hue("attention", &note)
        } else {
            note
        });
    }
    out
}

pub fn why(r: &proto::rpc::WhyResult, json: bool) -> Out {
    let mut out = Out::default();
    if r.matches.is_empty() {
        out.code = 1;
    }
    if json {
        out.json(r);
        return out;
    }
    if r.matches.is_empty() {
        out.err(format!("{} guards nothing", q(&r.selector)));
    }
    for m in &r.matches {
        out.line(format!(
            "{}\t{}\tguards: {} ({})",
            m.file,
            q(&m.decision),
            q(&m.claim),
            m.supports
        ));
    }
    out
}

/// `guards`: one line per guarding decision: the verdict that speaks for it, the tick, the
/// decision and the paths it guards (tab-separated, like `why`).
pub fn guards(r: &proto::rpc::GuardsResult, json: bool) -> Out {
    let mut out = Out::default();
    if r.decisions.is_empty() {
        out.code = 1;
    }
    if json {
        out.json(r);
        return out;
    }
    if r.decisions.is_empty() {
        out.err("no current decision guards these paths");
    }
    for d in &r.decisions {
        let label = d.worst_ground(None).map_or("-", |g| g.label.as_str());
        out.line(format!(
            "{label}\t{}\t{}\t{}",
            d.tick_id,
            q(&d.decision),
            d.matched.join(", ")
        ));
    }
    out
}

pub fn reopen(r: &proto::rpc::ReopenResult, style: Style, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(r);
        return out;
    }
    let edges = [
        ("authority", &r.authority),
        ("jurisdiction", &r.jurisdiction),
        ("source_ref", &r.source_ref),
        ("supersedes", &r.supersedes),
        ("ratifies", &r.ratifies),
        ("superseded by", &r.superseded_by),
    ];
    if style.rich {
        out.line(format!(
            "{} {}  {}",
            style.provenance_glyph(r.agent_proposed),
            style.bold(&q(&r.decision)),
            style.id(&r.id)
        ));
        if !r.observe.is_empty() {
            out.line(format!(
                "  {}",
                style.dim(&format!("observe: {}", q(&r.observe)))
            ));
        }
        let tags: Vec<String> = edges
            .iter()
            .filter_map(|(k, v)| {
                v.as_ref().map(|v| match *k {
                    "authority" | "jurisdiction" | "source_ref" => format!("{k}={v}"),
                    _ => format!("{k} {v}"),
                })
            })
            .collect();
        if !tags.is_empty() {
            out.line(format!("  {}", style.dim(&tags.join(" · "))));
        }
    } else {
        out.line(format!("decision {}: {}", r.id, q(&r.decision)));
        if !r.observe.is_empty() {
            out.line(format!("observe: {}", q(&r.observe)));
        }
        for (k, v) in edges {
            if let Some(v) = v {
                out.line(format!("{k}: {v}"));
            }
        }
    }
    for g in &r.grounds {
        let head = format!("[{}]", g.supports);
        let claim = q(&g.claim);
        let reference = q(g.reference.as_deref().unwrap_or(""));
        let sha8: String = g
            .verified_at_sha
            .as_deref()
            .unwrap_or("")
            .chars()
            .take(8)
            .collect();
        let label = g.verdict.as_deref().unwrap_or("n/a");
        let line = match (g.check.as_str(), style.rich) {
            ("test", false) => {
                format!("  {head} {claim} — test {reference} frozen@{sha8} now: {label}")
            }
            ("person", false) => format!("  {head} {claim} — person {reference}"),
            (_, false) => format!("  {head} {claim}"),
            ("test", true) => format!(
                "  {}  {head} {}  {}",
                style.verdict(label),
                style.bold(&claim),
                style.dim(&format!("test {reference} frozen@{sha8}"))
            ),
            ("person", true) => format!(
                "  {} {head} {}  {}",
                style.dot(),
                style.bold(&claim),
                style.dim(&format!("person {reference}"))
            ),
            (_, true) => format!("  {} {head} {}", style.dot(), style.bold(&claim)),
        };
        out.line(line);
    }
    out
}
