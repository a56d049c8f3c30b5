//! The report page (pure): what [`super::data::Data`] holds, as one self-contained HTML file — inline
//! CSS, inline SVG, no script, nothing fetched — readable in any browser from disk.
//!
//! Large stores are summarised, not dumped: at most [`MAX_NODES`] ticks in the lineage graph
//! (the newest), [`MAX_ROWS`] decisions in the table (those asking for attention first),
//! [`MAX_BANDS`] verdict histories (the decisions whose verdicts moved most), [`MAX_ROWS`]
//! citations (those not holding first); each section says how many it left out.
//!
//! It must not ask evd or compute a ledger number itself: every figure is a row of a ledger
//! query or a field of an answer, as the other verbs print them.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use serde_json::Value;

use super::charts::{self, esc, Band, Bin, Node};
use super::data::Data;

pub const MAX_NODES: usize = 150;
pub const MAX_ROWS: usize = 500;
pub const MAX_BANDS: usize = 60;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}\
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}\
th{background:#f4f4f4}figure{margin:1em 0}figcaption{font-size:.85em;color:#555;max-width:760px}\
.v{display:inline-block;padding:0 .4em;border-radius:3px;color:#fff;font-size:.85em}.note{color:#666;font-size:.9em}";

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn num(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::Null) | None => "–".into(),
        Some(x) => x.to_string(),
    }
}

fn badge(label: &str) -> String {
    format!(
        "<span class=\"v\" style=\"background:{}\">{}</span>",
        charts::verdict_colour(label),
        esc(label)
    )
}

fn rows<'a>(q: &'a BTreeMap<String, Value>, name: &str) -> &'a [Value] {
    q.get(name)
        .and_then(|v| v["rows"].as_array())
        .map_or(&[], Vec::as_slice)
}

fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = write!(
        out,
        "<figure>{svg}<figcaption>{}</figcaption></figure>",
        esc(caption)
    );
}

/// Seconds between two RFC 3339 times, if both read.
fn seconds(from: &str, to: &str) -> Option<f64> {
    let a = evd::api::shared::clock::parse(from)?;
    let b = evd::api::shared::clock::parse(to)?;
    Some((b - a).as_seconds_f64())
}

/// The whole page.
pub fn render(d: &Data) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>evctl report — {}</title><style>{STYLE}</style></head><body>",
        esc(&d.store)
    );
    let t = &d.guards.tally;
    let _ = write!(
        out,
        "<h1>Decisions of {}</h1><p class=\"note\">Written {} by evctl {}{}. Verdicts: <span id=\"tally\" data-green=\"{}\" data-gating=\"{}\" data-non-gating=\"{}\">{} green, {} gating, {} other</span>.</p>",
        esc(&d.store),
        esc(&d.now),
        env!("CARGO_PKG_VERSION"),
        d.guards
            .head
            .as_deref()
            .map(|h| format!(" at commit {}", esc(h.get(..12).unwrap_or(h))))
            .unwrap_or_default(),
        t.green,
        t.gating,
        t.non_gating,
        t.green,
        t.gating,
        t.non_gating
    );
    decisions(&mut out, d);
    history(&mut out, d);
    calibration(&mut out, d);
    evidence(&mut out, d);
    out.push_str("</body></html>\n");
    out
}

/// The worst verdict of each test-bound decision, by tick id.
fn verdicts(d: &Data) -> HashMap<&str, (&str, bool)> {
    let mut m = HashMap::new();
    for dec in &d.guards.decisions {
        let worst = dec
            .grounds
            .iter()
            .max_by_key(|g| (g.gating, g.class == "attention"))
            .map(|g| (g.label.as_str(), g.gating));
        if let Some(w) = worst {
            m.insert(dec.tick_id.as_str(), w);
        }
    }
    m
}

fn decisions(out: &mut String, d: &Data) {
    out.push_str("<h2>Decisions in effect, and their lineage</h2>");
    let verdict = verdicts(d);
    let entries = &d.log.entries;
    // HEAD's chain, then each fork's ticks in a lane of their own, the newest MAX_NODES in all.
    let mut shown: Vec<(&proto::rpc::LogEntry, u8)> =
        entries.iter().take(MAX_NODES).map(|e| (e, 0)).collect();
    for f in &d.log.forks {
        for e in &f.entries {
            if shown.len() < MAX_NODES {
                shown.push((e, 1));
            }
        }
    }
    let index: HashMap<&str, usize> = shown
        .iter()
        .enumerate()
        .map(|(i, (e, _))| (e.id.as_str(), i))
        .collect();
    let nodes: Vec<Node> = shown
        .iter()
        .map(|(e, lane)| Node {
            id: e.id.clone(),
            label: format!(
                "{}{}",
                if *lane > 0 { "fork: " } else { "" },
                e.decision.chars().take(80).collect::<String>()
            ),
            colour: verdict
                .get(e.id.as_str())
                .map_or("#bdbdbd", |v| charts::verdict_colour(v.0)),
            current: e.superseded_by.is_none(),
            lane: *lane,
        })
        .collect();
    let mut edges = Vec::new();
    for (i, (e, _)) in shown.iter().enumerate() {
        for (target, kind) in [(&e.supersedes, "supersedes"), (&e.ratifies, "ratifies")] {
            if let Some(j) = target.as_deref().and_then(|t| index.get(t)) {
                edges.push((i, *j, kind));
            }
        }
    }
    for f in &d.log.forks {
        let last = f.entries.last().and_then(|e| index.get(e.id.as_str()));
        let joins = f.joins.as_deref().and_then(|j| index.get(j));
        if let (Some(a), Some(b)) = (last, joins) {
            edges.push((*a, *b, "fork"));
        }
    }
    let in_forks: usize = d.log.forks.iter().map(|f| f.entries.len()).sum();
    let entries_len = entries.len() + in_forks;
    let more = entries_len.saturating_sub(shown.len());
    figure(
        out,
        &charts::lineage(&nodes, &edges, more),
        &format!(
            "The chain of ticks from HEAD back ({} in all{}), newest first: a node per tick, filled with its worst test verdict (grey: no test), outlined while it is in effect; orange arcs join a tick to the one it supersedes, purple ones to the proposal it ratifies; a fork (a branch merged, or a writer that forked the chain) runs in the second lane, a dashed line to where it joins.",
            entries_len,
            if more > 0 {
                format!(", the newest {MAX_NODES} drawn")
            } else {
                String::new()
            }
        ),
    );
    let mut current: Vec<_> = entries
        .iter()
        .filter(|e| e.superseded_by.is_none())
        .collect();
    current.sort_by_key(|e| {
        let v = verdict.get(e.id.as_str());
        (!v.is_some_and(|v| v.1), v.is_none())
    });
    let _ = write!(
        out,
        "<table id=\"decisions\"><tr><th>id</th><th>decision</th><th>on the hook</th><th>grounds and verdicts</th><th>evidence</th></tr>"
    );
    let by_tick: HashMap<&str, &proto::rpc::GuardedDecision> = d
        .guards
        .decisions
        .iter()
        .map(|g| (g.tick_id.as_str(), g))
        .collect();
    let mut cited: HashMap<&str, (usize, usize)> = HashMap::new();
    for c in &d.evidence.citations {
        let e = cited.entry(c.tick_id.as_str()).or_default();
        e.0 += usize::from(c.state == "holds");
        e.1 += 1;
    }
    for e in current.iter().take(MAX_ROWS) {
        let evidence = cited
            .get(e.id.as_str())
            .map_or(String::new(), |(holds, all)| {
                format!(
                    "{} {holds}/{all} hold",
                    badge(if holds == all { "green" } else { "red" })
                        .replace(">green<", ">holds<")
                        .replace(">red<", ">not all hold<")
                )
            });
        let grounds = by_tick.get(e.id.as_str()).map_or(String::new(), |g| {
            g.grounds
                .iter()
                .map(|gr| format!("{} {}", badge(&gr.label), esc(&gr.claim)))
                .collect::<Vec<_>>()
                .join("<br>")
        });
        let _ = write!(
            out,
            "<tr data-id=\"{}\"><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{evidence}</td></tr>",
            esc(&e.id),
            esc(&e.id),
            esc(&e.decision),
            esc(&e.blame),
            grounds
        );
    }
    out.push_str("</table>");
    if current.len() > MAX_ROWS {
        let _ = write!(
            out,
            "<p class=\"note\">{} more decisions in effect are not listed (`evctl list` has them all).</p>",
            current.len() - MAX_ROWS
        );
    }
}

fn history(out: &mut String, d: &Data) {
    out.push_str("<h2>Verdicts over time</h2>");
    let all = rows(&d.queries, "history");
    let changes: Vec<&Value> = all
        .iter()
        .filter(|r| d.since.as_deref().is_none_or(|since| s(r, "ts") >= since))
        .collect();
    if changes.is_empty() {
        out.push_str("<p class=\"note\" id=\"history-none\">The ledger holds no verdict change yet (in the window asked for).</p>");
        return;
    }
    let start = d
        .since
        .clone()
        .unwrap_or_else(|| s(changes[0], "ts").to_string());
    let span = seconds(&start, &d.now).unwrap_or(1.0).max(1.0);
    let mut by: BTreeMap<String, Vec<(f64, String)>> = BTreeMap::new();
    for r in &changes {
        let key = format!("{} #{}", s(r, "tick_id"), num(r, "ground_index"));
        let at = seconds(&start, s(r, "ts")).unwrap_or(0.0).max(0.0);
        by.entry(key)
            .or_default()
            .push((at, s(r, "new").to_string()));
    }
    let mut bands: Vec<Band> = by
        .into_iter()
        .map(|(name, segments)| Band { name, segments })
        .collect();
    let total = bands.len();
    bands.sort_by_key(|b| std::cmp::Reverse(b.segments.len()));
    bands.truncate(MAX_BANDS);
    bands.sort_by(|a, b| a.name.cmp(&b.name));
    figure(
        out,
        &charts::history(&bands, span, &start, &d.now, changes.len()),
        &format!(
            "Each test ground's verdict between its recorded changes (green, red, stale in orange, not-run in grey), from {} verdict_changed events{}.",
            changes.len(),
            if total > MAX_BANDS {
                format!("; the {MAX_BANDS} grounds whose verdicts moved most of {total}")
            } else {
                String::new()
            }
        ),
    );
    let decided = rows(&d.queries, "decisions");
    if !decided.is_empty() {
        out.push_str("<table id=\"resurfacing\"><tr><th>decision</th><th>resurfaced</th><th>resolved</th><th>mean seconds red → green</th><th>now</th></tr>");
        for r in decided.iter().take(MAX_ROWS) {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(s(r, "tick_id")),
                num(r, "resurfaced"),
                num(r, "resolved"),
                num(r, "mean_secs_red_to_resolved"),
                badge(s(r, "label"))
            );
        }
        out.push_str("</table>");
    }
}

fn calibration(out: &mut String, d: &Data) {
    out.push_str("<h2>Calibration, routing and failures</h2>");
    let bins: Vec<Bin> = rows(&d.queries, "reliability")
        .iter()
        .map(|r| Bin {
            group: format!("{} / {}", s(r, "agent_id"), s(r, "model_id")),
            predicted: r["predicted_p_success"].as_f64().unwrap_or(0.0),
            actual: r["actual_p_success"].as_f64().unwrap_or(0.0),
            executions: r["executions"].as_u64().unwrap_or(0),
        })
        .collect();
    let executions: u64 = bins.iter().map(|b| b.executions).sum();
    if bins.is_empty() {
        out.push_str("<p class=\"note\" id=\"calibration-none\">No execution with a predicted p_success in the ledger yet.</p>");
    } else {
        figure(
            out,
            &charts::reliability(&bins),
            &format!("Reliability diagram: executions grouped by agent and model and by predicted p_success in tenths; each dot is a tenth, at its mean prediction and its actual success, sized by its executions ({executions} in all). Dots on the dashed diagonal are perfectly calibrated."),
        );
    }
    let cal = rows(&d.queries, "calibration");
    if !cal.is_empty() {
        let _ = write!(
            out,
            "<table id=\"calibration\"><tr><th>agent</th><th>model</th><th>executions (latest {})</th><th>predicted</th><th>actual</th><th>mean abs error</th></tr>",
            num(d.queries.get("calibration").unwrap_or(&Value::Null), "last")
        );
        for r in cal {
            let _ = write!(
                out,
                "<tr data-agent=\"{}\" data-model=\"{}\"><td>{}</td><td>{}</td><td data-key=\"executions\">{}</td><td data-key=\"predicted_p_success\">{}</td><td data-key=\"actual_p_success\">{}</td><td data-key=\"mean_abs_error\">{}</td></tr>",
                esc(s(r, "agent_id")),
                esc(s(r, "model_id")),
                esc(s(r, "agent_id")),
                esc(s(r, "model_id")),
                num(r, "executions"),
                num(r, "predicted_p_success"),
                num(r, "actual_p_success"),
                num(r, "mean_abs_error")
            );
        }
        out.push_str("</table>");
    }
    let entropy = rows(&d.queries, "entropy");
    if !entropy.is_empty() {
        let bars: Vec<(String, f64, String)> = entropy
            .iter()
            .flat_map(|r| {
                let v = s(r, "estimator_version");
                [
                    (
                        format!("{v} predicted"),
                        r["predicted_entropy"].as_f64().unwrap_or(0.0),
                        num(r, "predicted_entropy"),
                    ),
                    (
                        format!("{v} actual"),
                        r["actual_entropy"].as_f64().unwrap_or(0.0),
                        num(r, "actual_entropy"),
                    ),
                ]
            })
            .collect();
        let n: u64 = entropy
            .iter()
            .filter_map(|r| r["executions"].as_u64())
            .sum();
        figure(
            out,
            &charts::bars("entropy", "Entropy, predicted and actual, by estimator version", &format!("Mean predicted and actual entropy per estimator version, over {n} executions."), &bars, "#00838f"),
            &format!("Mean predicted against actual entropy for each entropy estimator version ({n} executions)."),
        );
    }
    let routing = rows(&d.queries, "routing");
    if !routing.is_empty() {
        let bars: Vec<(String, f64, String)> = routing
            .iter()
            .map(|r| {
                (
                    s(r, "tier").to_string(),
                    r["impact_per_cost"].as_f64().unwrap_or(0.0),
                    format!(
                        "impact/cost {}, success {}, {} executions",
                        num(r, "impact_per_cost"),
                        num(r, "success_rate"),
                        num(r, "executions")
                    ),
                )
            })
            .collect();
        let n: u64 = routing
            .iter()
            .filter_map(|r| r["executions"].as_u64())
            .sum();
        figure(
            out,
            &charts::bars("routing", "Routing ROI by model tier", &format!("Impact per unit cost for each model tier, over {n} executions."), &bars, "#1565c0"),
            &format!("Routing ROI: impact per cost for each model tier, with its success rate ({n} executions)."),
        );
    }
    let failures = rows(&d.queries, "failures");
    if !failures.is_empty() {
        let bars: Vec<(String, f64, String)> = failures
            .iter()
            .take(10)
            .map(|r| {
                (
                    format!("{}: {}", s(r, "kind"), s(r, "reason")),
                    r["count"].as_f64().unwrap_or(0.0),
                    num(r, "count"),
                )
            })
            .collect();
        let n: u64 = failures.iter().filter_map(|r| r["count"].as_u64()).sum();
        figure(
            out,
            &charts::bars("failures", "Top failure modes", &format!("The most frequent failure modes, {n} failures in all."), &bars, "#c62828"),
            &format!("Top failure modes: failed executions by reason, rebase conflicts and failed merges ({n} in all; the ten most frequent drawn)."),
        );
    }
}

fn evidence(out: &mut String, d: &Data) {
    out.push_str("<h2>Evidence</h2>");
    let cites = &d.evidence.citations;
    if cites.is_empty() {
        out.push_str("<p class=\"note\">No current decision cites evidence (`evctl cite`).</p>");
        return;
    }
    let mut sorted: Vec<_> = cites.iter().collect();
    sorted.sort_by_key(|c| c.state == "holds");
    let _ = write!(
        out,
        "<p class=\"note\">{} of {} citations hold.</p><table id=\"evidence\"><tr><th>decision</th><th>ground</th><th>span</th><th>state</th></tr>",
        d.evidence.holding,
        cites.len()
    );
    for c in sorted.iter().take(MAX_ROWS) {
        let _ = write!(
            out,
            "<tr data-state=\"{}\"><td><code>{}</code> {}</td><td>{}</td><td><code>{}:{}-{}</code></td><td>{} {}</td></tr>",
            esc(&c.state),
            esc(&c.tick_id),
            esc(&c.decision),
            c.ground_index,
            esc(&c.path),
            c.start,
            c.end,
            badge(if c.state == "holds" { "green" } else { "red" }).replace(">green<", ">holds<").replace(">red<", &format!(">{}<", esc(&c.state))),
            esc(&c.detail)
        );
    }
    out.push_str("</table>");
    if cites.len() > MAX_ROWS {
        let _ = write!(
            out,
            "<p class=\"note\">{} more citations are not listed (`evctl verify --evidence` has them all).</p>",
            cites.len() - MAX_ROWS
        );
    }
}
