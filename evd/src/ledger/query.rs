//! The questions seed 002 asks of a ledger, answered over its events in order (pure).
//!
//! Plans are joined to their executions by `(intent_id, plan_id)`: what a plan predicted (and
//! which model, tier, agent and estimator versions made the prediction) comes from its
//! `plan_selected`, else its `plan_variant_created`.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

/// The queries there are, with what each answers.
pub const QUERIES: [(&str, &str); 6] = [
    ("calibration", "predicted vs actual p_success per agent and model, over the last N executions"),
    ("routing", "routing ROI by model tier: executions, success rate, cost, impact, impact per cost"),
    ("failures", "the most frequent failure modes: failed executions, rebase conflicts, failed merges"),
    ("entropy", "mean predicted vs actual entropy by entropy estimator version"),
    ("conflicts", "rebase conflict rates by repository area (a conflicting file's first path segment)"),
    ("decisions", "how often each decision resurfaced (a verdict leaving green), and mean time from red to resolved"),
];

fn s<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

fn f(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_f64()
}

/// What a plan said before it ran.
#[derive(Default, Clone)]
struct Plan {
    agent: String,
    model: String,
    tier: String,
    predicted_p: Option<f64>,
    predicted_entropy: Option<f64>,
    entropy_estimator: String,
}

fn plan_of(ev: &Value) -> Plan {
    let p = &ev["payload"];
    Plan {
        agent: s(ev, &["agent_id"]).unwrap_or("?").to_string(),
        model: s(p, &["model", "model_id"]).unwrap_or("?").to_string(),
        tier: s(p, &["model", "tier"]).unwrap_or("?").to_string(),
        predicted_p: f(p, &["predicted", "p_success"]),
        predicted_entropy: f(p, &["predicted", "entropy"]),
        entropy_estimator: s(p, &["predicted", "estimator_versions", "entropy"])
            .unwrap_or("?")
            .to_string(),
    }
}

fn key(ev: &Value) -> (String, String) {
    let p = &ev["payload"];
    (
        s(p, &["intent_id"]).unwrap_or_default().to_string(),
        s(p, &["plan_id"]).unwrap_or_default().to_string(),
    )
}

/// Every execution that completed, with the plan it ran (in ledger order).
fn executions(events: &[Value]) -> Vec<(Plan, &Value)> {
    let mut plans: HashMap<(String, String), Plan> = HashMap::new();
    let mut out = Vec::new();
    for ev in events {
        match s(ev, &["event_type"]) {
            Some("plan_variant_created") => {
                plans.entry(key(ev)).or_insert_with(|| plan_of(ev));
            }
            Some("plan_selected") => {
                // A selection's prediction is the one acted on; the variant's fills the gaps.
                let sel = plan_of(ev);
                let e = plans.entry(key(ev)).or_default();
                if sel.predicted_p.is_some() {
                    e.predicted_p = sel.predicted_p;
                }
                if sel.predicted_entropy.is_some() {
                    e.predicted_entropy = sel.predicted_entropy;
                    e.entropy_estimator = sel.entropy_estimator;
                }
            }
            Some("execution_completed") => {
                let plan = plans.get(&key(ev)).cloned().unwrap_or_default();
                out.push((plan, ev));
            }
            _ => {}
        }
    }
    out
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

fn round(x: Option<f64>) -> Value {
    x.map_or(Value::Null, |x| json!((x * 10_000.0).round() / 10_000.0))
}

/// Answer `query` over `events` (the ledger's lines, parsed, in order); `last` bounds the
/// executions `calibration` looks at per group.
pub fn answer(query: &str, events: &[Value], last: Option<usize>) -> Result<Value, String> {
    match query {
        "calibration" => Ok(calibration(events, last.unwrap_or(50))),
        "routing" => Ok(routing(events)),
        "failures" => Ok(failures(events)),
        "entropy" => Ok(entropy(events)),
        "conflicts" => Ok(conflicts(events)),
        "decisions" => Ok(decisions(events)),
        other => Err(format!(
            "no query {other:?}; the queries are {}",
            QUERIES.map(|(q, _)| q).join(", ")
        )),
    }
}

fn calibration(events: &[Value], last: usize) -> Value {
    let mut groups: BTreeMap<(String, String), Vec<(f64, f64)>> = BTreeMap::new();
    for (plan, ev) in executions(events) {
        let (Some(pred), Some(act)) = (
            plan.predicted_p,
            f(&ev["payload"], &["actual", "p_success"]),
        ) else {
            continue;
        };
        groups
            .entry((plan.agent, plan.model))
            .or_default()
            .push((pred, act));
    }
    let rows: Vec<Value> = groups
        .into_iter()
        .map(|((agent, model), all)| {
            let recent = &all[all.len().saturating_sub(last)..];
            let pred: Vec<f64> = recent.iter().map(|x| x.0).collect();
            let act: Vec<f64> = recent.iter().map(|x| x.1).collect();
            let err: Vec<f64> = recent.iter().map(|x| (x.0 - x.1).abs()).collect();
            json!({"agent_id": agent, "model_id": model, "executions": recent.len(),
                   "predicted_p_success": round(mean(&pred)), "actual_p_success": round(mean(&act)),
                   "mean_abs_error": round(mean(&err))})
        })
        .collect();
    json!({"query": "calibration", "last": last, "rows": rows})
}

fn routing(events: &[Value]) -> Value {
    let mut tiers: BTreeMap<String, (usize, usize, f64, f64)> = BTreeMap::new();
    for (plan, ev) in executions(events) {
        let p = &ev["payload"];
        let t = tiers.entry(plan.tier).or_default();
        t.0 += 1;
        if s(p, &["status"]) == Some("success") {
            t.1 += 1;
            t.3 += f(p, &["actual", "impact"]).unwrap_or(0.0);
        }
        t.2 += f(p, &["actual", "cost"]).unwrap_or(0.0);
    }
    let rows: Vec<Value> = tiers
        .into_iter()
        .map(|(tier, (n, ok, cost, impact))| {
            json!({"tier": tier, "executions": n, "success_rate": round(Some(ok as f64 / n as f64)),
                   "cost": round(Some(cost)), "impact": round(Some(impact)),
                   "impact_per_cost": round((cost > 0.0).then(|| impact / cost))})
        })
        .collect();
    json!({"query": "routing", "rows": rows})
}

fn failures(events: &[Value]) -> Value {
    let mut modes: BTreeMap<(String, String), usize> = BTreeMap::new();
    for ev in events {
        let p = &ev["payload"];
        let mode = match (s(ev, &["event_type"]), s(p, &["status"])) {
            (Some("execution_completed"), Some("failure")) => Some((
                "execution",
                s(p, &["failure_reason"]).unwrap_or("(no reason given)"),
            )),
            (Some("git_rebase_completed"), Some("conflict")) => Some(("rebase", "conflict")),
            (Some("git_merge_attempted"), Some("failed")) => Some((
                "merge",
                s(p, &["failure_reason"]).unwrap_or("(no reason given)"),
            )),
            _ => None,
        };
        if let Some((kind, reason)) = mode {
            *modes
                .entry((kind.to_string(), reason.to_string()))
                .or_default() += 1;
        }
    }
    let mut rows: Vec<((String, String), usize)> = modes.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let rows: Vec<Value> = rows
        .into_iter()
        .map(|((kind, reason), n)| json!({"kind": kind, "reason": reason, "count": n}))
        .collect();
    json!({"query": "failures", "rows": rows})
}

fn entropy(events: &[Value]) -> Value {
    let mut by: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for (plan, ev) in executions(events) {
        let (Some(pred), Some(act)) = (
            plan.predicted_entropy,
            f(&ev["payload"], &["actual", "entropy"]),
        ) else {
            continue;
        };
        let e = by.entry(plan.entropy_estimator).or_default();
        e.0.push(pred);
        e.1.push(act);
    }
    let rows: Vec<Value> = by
        .into_iter()
        .map(|(version, (pred, act))| {
            json!({"estimator_version": version, "executions": pred.len(),
                   "predicted_entropy": round(mean(&pred)), "actual_entropy": round(mean(&act))})
        })
        .collect();
    json!({"query": "entropy", "rows": rows})
}

fn conflicts(events: &[Value]) -> Value {
    let mut rebases = 0usize;
    let mut areas: BTreeMap<String, usize> = BTreeMap::new();
    for ev in events
        .iter()
        .filter(|e| s(e, &["event_type"]) == Some("git_rebase_completed"))
    {
        rebases += 1;
        let mut seen: Vec<String> = ev["payload"]["conflict_files"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|p| p.split('/').next().unwrap_or(p).to_string())
                    .collect()
            })
            .unwrap_or_default();
        seen.sort();
        seen.dedup();
        for a in seen {
            *areas.entry(a).or_default() += 1;
        }
    }
    let mut rows: Vec<(String, usize)> = areas.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let rows: Vec<Value> = rows
        .into_iter()
        .map(|(area, n)| {
            json!({"area": area, "conflicted_rebases": n,
                   "rate": round(Some(n as f64 / rebases.max(1) as f64))})
        })
        .collect();
    json!({"query": "conflicts", "rebases": rebases, "rows": rows})
}

fn decisions(events: &[Value]) -> Value {
    #[derive(Default)]
    struct D {
        resurfaced: usize,
        red_since: Option<time::OffsetDateTime>,
        resolved_secs: Vec<f64>,
        label: Option<String>,
    }
    let mut by: BTreeMap<String, D> = BTreeMap::new();
    for ev in events
        .iter()
        .filter(|e| s(e, &["event_type"]) == Some("verdict_changed"))
    {
        let p = &ev["payload"];
        let Some(tick) = s(p, &["tick_id"]) else {
            continue;
        };
        let ts = s(ev, &["ts"]).and_then(crate::engine::clock::parse);
        let old = s(p, &["old"]);
        let new = s(p, &["new"]);
        let d = by.entry(tick.to_string()).or_default();
        // Cited evidence that stopped holding brings a decision back too; it is not a
        // verdict, so it leaves the red-to-resolved clock and the label alone.
        if new.is_some_and(|n| n.starts_with("evidence:")) {
            if old == Some("evidence:holds") && new != Some("evidence:holds") {
                d.resurfaced += 1;
            }
            continue;
        }
        if old == Some("green") && new.is_some_and(|n| n != "green") {
            d.resurfaced += 1;
        }
        if new == Some("red") && d.red_since.is_none() {
            d.red_since = ts;
        }
        if new == Some("green") {
            if let (Some(a), Some(b)) = (d.red_since.take(), ts) {
                d.resolved_secs.push((b - a).as_seconds_f64());
            }
        }
        d.label = new.map(str::to_string);
    }
    let rows: Vec<Value> = by
        .into_iter()
        .map(|(tick, d)| {
            json!({"tick_id": tick, "resurfaced": d.resurfaced, "resolved": d.resolved_secs.len(),
                   "mean_secs_red_to_resolved": round(mean(&d.resolved_secs)),
                   "open_red": d.red_since.is_some(), "label": d.label})
        })
        .collect();
    json!({"query": "decisions", "rows": rows})
}

/// The events of a ledger's text that parse, in order (a query reads what is there; `ledger
/// verify` is what judges it).
pub fn events_of(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.is_object())
        .collect()
}
