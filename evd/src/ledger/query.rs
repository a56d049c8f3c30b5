//! The questions seed 002 asks of a ledger, answered over its events in order (pure).
//!
//! Plans are joined to their executions by `(intent_id, plan_id)`: what a plan predicted (and
//! which model, tier, agent and estimator versions made the prediction) comes from its
//! `plan_selected`, else its `plan_variant_created`.
//!
//! A question is a fold ([`Fold`]): each ledger's lines are read once, one at a time (a line
//! naming none of the event types the question reads is not even parsed), and only the
//! figures it needs are kept. Several hosts' ledgers fold separately (a plan is joined to its
//! executions, and a decision's red to its resolution, within the ledger of the host that
//! recorded both) and the folds merge in host order: the fleet's answer.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

/// The queries there are, with what each answers.
pub const QUERIES: [(&str, &str); 8] = [
    ("calibration", "predicted vs actual p_success per agent and model, over the last N executions"),
    ("reliability", "a reliability diagram per agent and model: executions by predicted p_success, in tenths, with the actual success in each"),
    ("history", "each decision's verdict changes in order: when, from what, to what"),
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

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

fn round(x: Option<f64>) -> Value {
    x.map_or(Value::Null, |x| json!((x * 10_000.0).round() / 10_000.0))
}

/// The event types each query reads (a ledger's other lines need not be parsed for it).
pub fn reads(query: &str) -> &'static [&'static str] {
    match query {
        "calibration" | "reliability" | "routing" | "entropy" => &[
            "plan_variant_created",
            "plan_selected",
            "execution_completed",
        ],
        "failures" => &[
            "execution_completed",
            "git_rebase_completed",
            "git_merge_attempted",
        ],
        "conflicts" => &["git_rebase_completed"],
        "decisions" | "history" => &["verdict_changed"],
        _ => &[],
    }
}

/// Answer `query` over `events` (the ledger's lines, parsed, in order); `last` bounds the
/// executions `calibration` looks at per group.
pub fn answer(query: &str, events: &[Value], last: Option<usize>) -> Result<Value, String> {
    let mut fold = Fold::new(query, last)?;
    for ev in events {
        fold.take(ev);
    }
    fold.end_host();
    Ok(fold.finish())
}

/// One decision's verdict history, as the `decisions` question folds it.
#[derive(Default)]
struct D {
    resurfaced: usize,
    red_since: Option<time::OffsetDateTime>,
    resolved_secs: Vec<f64>,
    label: Option<String>,
    /// When the label was last set (across hosts, the latest one is the decision's).
    label_at: Option<time::OffsetDateTime>,
}

/// A question folded over one or more ledgers.
pub struct Fold {
    query: &'static str,
    last: usize,
    /// The plans of the ledger being read (its executions are joined to them).
    plans: HashMap<(String, String), Plan>,
    /// `calibration`: (predicted, actual) per (agent, model), in order.
    calibration: BTreeMap<(String, String), Vec<(f64, f64)>>,
    /// `routing`: per tier, executions, successes, cost, impact.
    tiers: BTreeMap<String, (usize, usize, f64, f64)>,
    /// `entropy`: predicted and actual per estimator version.
    entropy: BTreeMap<String, (Vec<f64>, Vec<f64>)>,
    /// `failures`: per (kind, reason).
    modes: BTreeMap<(String, String), usize>,
    /// `conflicts`.
    rebases: usize,
    areas: BTreeMap<String, usize>,
    /// `decisions`: the ledger being read's, then all.
    mine: BTreeMap<String, D>,
    decisions: BTreeMap<String, D>,
    /// `history`: every verdict change, in order.
    history: Vec<Value>,
}

impl Fold {
    pub fn new(query: &str, last: Option<usize>) -> Result<Fold, String> {
        let Some(&(query, _)) = QUERIES.iter().find(|(q, _)| *q == query) else {
            return Err(format!(
                "no query {query:?}; the queries are {}",
                QUERIES.map(|(q, _)| q).join(", ")
            ));
        };
        Ok(Fold {
            query,
            last: last.unwrap_or(50),
            plans: HashMap::new(),
            calibration: BTreeMap::new(),
            tiers: BTreeMap::new(),
            entropy: BTreeMap::new(),
            modes: BTreeMap::new(),
            rebases: 0,
            areas: BTreeMap::new(),
            mine: BTreeMap::new(),
            decisions: BTreeMap::new(),
            history: Vec::new(),
        })
    }

    /// Fold one host's whole ledger text (its lines that may matter parsed one at a time).
    pub fn take_text(&mut self, text: &str) {
        let quoted: Vec<String> = reads(self.query)
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect();
        for line in text
            .lines()
            .filter(|l| quoted.iter().any(|q| l.contains(q.as_str())))
        {
            if let Ok(v) = serde_json::from_str::<Value>(line) {
                if v.is_object() {
                    self.take(&v);
                }
            }
        }
        self.end_host();
    }

    /// Fold one event of the ledger being read.
    pub fn take(&mut self, ev: &Value) {
        match s(ev, &["event_type"]) {
            Some("plan_variant_created") if self.joins() => {
                self.plans.entry(key(ev)).or_insert_with(|| plan_of(ev));
            }
            Some("plan_selected") if self.joins() => {
                // A selection's prediction is the one acted on; the variant's fills the gaps.
                let sel = plan_of(ev);
                let e = self.plans.entry(key(ev)).or_default();
                if sel.predicted_p.is_some() {
                    e.predicted_p = sel.predicted_p;
                }
                if sel.predicted_entropy.is_some() {
                    e.predicted_entropy = sel.predicted_entropy;
                    e.entropy_estimator = sel.entropy_estimator;
                }
            }
            Some("execution_completed") if self.joins() => {
                let plan = self.plans.get(&key(ev)).cloned().unwrap_or_default();
                self.execution(plan, ev);
            }
            Some(_) if self.query == "failures" => self.failure(ev),
            Some("git_rebase_completed") if self.query == "conflicts" => self.rebase(ev),
            Some("verdict_changed") if self.query == "decisions" => self.verdict(ev),
            Some("verdict_changed") if self.query == "history" => self.change(ev),
            _ => {}
        }
    }

    fn joins(&self) -> bool {
        matches!(
            self.query,
            "calibration" | "reliability" | "routing" | "entropy"
        )
    }

    fn change(&mut self, ev: &Value) {
        let p = &ev["payload"];
        let (Some(tick), Some(new)) = (s(p, &["tick_id"]), s(p, &["new"])) else {
            return;
        };
        if new.starts_with("evidence:") {
            return;
        }
        self.history.push(
            json!({"tick_id": tick, "ground_index": p.get("ground_index"),
            "ts": s(ev, &["ts"]), "old": s(p, &["old"]), "new": new}),
        );
    }

    fn execution(&mut self, plan: Plan, ev: &Value) {
        let p = &ev["payload"];
        match self.query {
            "calibration" | "reliability" => {
                if let (Some(pred), Some(act)) = (plan.predicted_p, f(p, &["actual", "p_success"]))
                {
                    self.calibration
                        .entry((plan.agent, plan.model))
                        .or_default()
                        .push((pred, act));
                }
            }
            "routing" => {
                let t = self.tiers.entry(plan.tier).or_default();
                t.0 += 1;
                if s(p, &["status"]) == Some("success") {
                    t.1 += 1;
                    t.3 += f(p, &["actual", "impact"]).unwrap_or(0.0);
                }
                t.2 += f(p, &["actual", "cost"]).unwrap_or(0.0);
            }
            _ => {
                if let (Some(pred), Some(act)) =
                    (plan.predicted_entropy, f(p, &["actual", "entropy"]))
                {
                    let e = self.entropy.entry(plan.entropy_estimator).or_default();
                    e.0.push(pred);
                    e.1.push(act);
                }
            }
        }
    }

    fn failure(&mut self, ev: &Value) {
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
            *self
                .modes
                .entry((kind.to_string(), reason.to_string()))
                .or_default() += 1;
        }
    }

    fn rebase(&mut self, ev: &Value) {
        self.rebases += 1;
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
            *self.areas.entry(a).or_default() += 1;
        }
    }

    fn verdict(&mut self, ev: &Value) {
        let p = &ev["payload"];
        let Some(tick) = s(p, &["tick_id"]) else {
            return;
        };
        let ts = s(ev, &["ts"]).and_then(crate::engine::clock::parse);
        let old = s(p, &["old"]);
        let new = s(p, &["new"]);
        let d = self.mine.entry(tick.to_string()).or_default();
        // Cited evidence that stopped holding brings a decision back too; it is not a
        // verdict, so it leaves the red-to-resolved clock and the label alone.
        if new.is_some_and(|n| n.starts_with("evidence:")) {
            if old == Some("evidence:holds") && new != Some("evidence:holds") {
                d.resurfaced += 1;
            }
            return;
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
        d.label_at = ts;
    }

    /// The ledger being read is done: its plans are let go, its decisions merged in.
    pub fn end_host(&mut self) {
        self.plans.clear();
        let mine = std::mem::take(&mut self.mine);
        merge_decisions(&mut self.decisions, mine);
    }

    /// Take in `other`, a fold of the ledgers after this one's (hosts in order).
    pub fn merge(&mut self, other: Fold) {
        for (k, v) in other.calibration {
            self.calibration.entry(k).or_default().extend(v);
        }
        for (k, v) in other.tiers {
            let t = self.tiers.entry(k).or_default();
            t.0 += v.0;
            t.1 += v.1;
            t.2 += v.2;
            t.3 += v.3;
        }
        for (k, v) in other.entropy {
            let e = self.entropy.entry(k).or_default();
            e.0.extend(v.0);
            e.1.extend(v.1);
        }
        for (k, v) in other.modes {
            *self.modes.entry(k).or_default() += v;
        }
        self.rebases += other.rebases;
        self.history.extend(other.history);
        for (k, v) in other.areas {
            *self.areas.entry(k).or_default() += v;
        }
        merge_decisions(&mut self.decisions, other.decisions);
    }

    /// The answer.
    pub fn finish(self) -> Value {
        match self.query {
            "calibration" => {
                let last = self.last;
                let rows: Vec<Value> = self
                    .calibration
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
            "reliability" => {
                let mut rows = Vec::new();
                for ((agent, model), all) in self.calibration {
                    let mut bins: [(usize, f64, f64); 10] = [(0, 0.0, 0.0); 10];
                    for (pred, act) in all {
                        let b = ((pred * 10.0).floor() as usize).min(9);
                        bins[b].0 += 1;
                        bins[b].1 += pred;
                        bins[b].2 += act;
                    }
                    for (b, (n, pred, act)) in bins.into_iter().enumerate() {
                        if n == 0 {
                            continue;
                        }
                        rows.push(json!({"agent_id": agent, "model_id": model,
                            "bin": format!("{:.1}-{:.1}", b as f64 / 10.0, (b + 1) as f64 / 10.0),
                            "executions": n, "predicted_p_success": round(Some(pred / n as f64)),
                            "actual_p_success": round(Some(act / n as f64))}));
                    }
                }
                json!({"query": "reliability", "rows": rows})
            }
            "history" => json!({"query": "history", "rows": self.history}),
            "routing" => {
                let rows: Vec<Value> = self
                    .tiers
                    .into_iter()
                    .map(|(tier, (n, ok, cost, impact))| {
                        json!({"tier": tier, "executions": n, "success_rate": round(Some(ok as f64 / n as f64)),
                               "cost": round(Some(cost)), "impact": round(Some(impact)),
                               "impact_per_cost": round((cost > 0.0).then(|| impact / cost))})
                    })
                    .collect();
                json!({"query": "routing", "rows": rows})
            }
            "failures" => {
                let mut rows: Vec<((String, String), usize)> = self.modes.into_iter().collect();
                rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                let rows: Vec<Value> = rows
                    .into_iter()
                    .map(|((kind, reason), n)| json!({"kind": kind, "reason": reason, "count": n}))
                    .collect();
                json!({"query": "failures", "rows": rows})
            }
            "entropy" => {
                let rows: Vec<Value> = self
                    .entropy
                    .into_iter()
                    .map(|(version, (pred, act))| {
                        json!({"estimator_version": version, "executions": pred.len(),
                               "predicted_entropy": round(mean(&pred)), "actual_entropy": round(mean(&act))})
                    })
                    .collect();
                json!({"query": "entropy", "rows": rows})
            }
            "conflicts" => {
                let rebases = self.rebases;
                let mut rows: Vec<(String, usize)> = self.areas.into_iter().collect();
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
            _ => {
                let rows: Vec<Value> = self
                    .decisions
                    .into_iter()
                    .map(|(tick, d)| {
                        json!({"tick_id": tick, "resurfaced": d.resurfaced, "resolved": d.resolved_secs.len(),
                               "mean_secs_red_to_resolved": round(mean(&d.resolved_secs)),
                               "open_red": d.red_since.is_some(), "label": d.label})
                    })
                    .collect();
                json!({"query": "decisions", "rows": rows})
            }
        }
    }
}

/// One host's decisions folded into all hosts': counts add up, a red still open anywhere stays
/// open, the latest label wins.
fn merge_decisions(all: &mut BTreeMap<String, D>, mine: BTreeMap<String, D>) {
    for (tick, d) in mine {
        let a = all.entry(tick).or_default();
        a.resurfaced += d.resurfaced;
        a.resolved_secs.extend(d.resolved_secs);
        if a.red_since.is_none() {
            a.red_since = d.red_since;
        }
        if a.label.is_none() || d.label_at > a.label_at {
            a.label = d.label;
            a.label_at = d.label_at;
        }
    }
}

/// Answer several `queries` over one ledger's text in a single pass: each line is parsed once,
/// and only when one of the questions reads its type.
pub fn answer_many(
    queries: &[String],
    text: &str,
    last: Option<usize>,
) -> Result<BTreeMap<String, Value>, String> {
    let mut folds: Vec<(Fold, Vec<String>)> = Vec::new();
    for q in queries {
        let fold = Fold::new(q, last)?;
        let quoted = reads(fold.query)
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect();
        folds.push((fold, quoted));
    }
    for line in text.lines() {
        let wanted: Vec<usize> = folds
            .iter()
            .enumerate()
            .filter(|(_, (_, quoted))| quoted.iter().any(|q| line.contains(q.as_str())))
            .map(|(i, _)| i)
            .collect();
        if wanted.is_empty() {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if !v.is_object() {
            continue;
        }
        for i in wanted {
            folds[i].0.take(&v);
        }
    }
    Ok(folds
        .into_iter()
        .map(|(mut fold, _)| {
            fold.end_host();
            (fold.query.to_string(), fold.finish())
        })
        .collect())
}

/// Answer `query` over `n` hosts' ledgers (in host order), `load(i)` giving the i-th one's
/// bytes: each is loaded and folded on one of at most `workers` threads, so no more than
/// `workers` ledgers are held at once; the folds merge in host order, so the answer does not
/// depend on the threads. A ledger that cannot be loaded fails the answer.
pub fn answer_sources(
    query: &str,
    n: usize,
    last: Option<usize>,
    workers: usize,
    load: impl Fn(usize) -> Result<Vec<u8>, String> + Sync,
) -> Result<Value, String> {
    let mut slots: Vec<std::sync::Mutex<Result<Fold, String>>> = Vec::new();
    for _ in 0..n {
        slots.push(std::sync::Mutex::new(Fold::new(query, last)));
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..workers.clamp(1, n.max(1)) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(slot) = slots.get(i) else { break };
                let loaded = load(i);
                if let Ok(mut slot) = slot.lock() {
                    match (loaded, slot.as_mut()) {
                        (Ok(bytes), Ok(fold)) => fold.take_text(&String::from_utf8_lossy(&bytes)),
                        (Err(e), _) => *slot = Err(e),
                        _ => {}
                    }
                }
            });
        }
    });
    let mut out = Fold::new(query, last)?;
    for slot in slots {
        let fold = slot
            .into_inner()
            .map_err(|_| "a ledger's fold failed".to_string())??;
        out.merge(fold);
    }
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t: &str, agent: &str, payload: Value) -> String {
        json!({"event_type": t, "agent_id": agent, "payload": payload}).to_string()
    }

    fn host(agent: &str, plans: &[(&str, f64, f64)]) -> String {
        let mut lines = Vec::new();
        for (plan, pred, act) in plans {
            lines.push(ev(
                "plan_variant_created",
                agent,
                json!({"intent_id": "I", "plan_id": plan,
                "model": {"model_id": "m", "tier": "flash"}, "predicted": {"p_success": pred}}),
            ));
            lines.push(ev(
                "execution_completed",
                agent,
                json!({"intent_id": "I", "plan_id": plan,
                "status": "success", "actual": {"p_success": act, "cost": 1.0, "impact": 2.0}}),
            ));
        }
        lines.join("\n") + "\n"
    }

    #[test]
    fn hosts_fold_apart_and_merge_in_order_whatever_the_threads() {
        // The same plan ids on two hosts: each joins within its own ledger.
        let a = host("planner", &[("P-1", 0.9, 1.0), ("P-2", 0.5, 0.0)]);
        let b = host("planner", &[("P-1", 0.1, 0.0)]);
        let texts = [a.clone(), b.clone()];
        let load = |i: usize| Ok(texts[i].clone().into_bytes());
        let one = answer_sources("calibration", 2, None, 1, load).expect("answer");
        let two = answer_sources("calibration", 2, None, 2, load).expect("answer");
        assert_eq!(one, two);
        let row = &one["rows"][0];
        assert_eq!(row["executions"], 3);
        assert_eq!(row["predicted_p_success"], json!(0.5));
        assert_eq!(row["actual_p_success"], json!(0.3333));
        // Only the latest N of a group, across hosts in host order: a's last, then b's one.
        let last = answer_sources("calibration", 2, Some(2), 2, load).expect("answer");
        assert_eq!(last["rows"][0]["predicted_p_success"], json!(0.3));
        // One host folded alone is what `answer` gives over its parsed events.
        let events: Vec<Value> = a
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(
            answer("routing", &events, None).expect("answer"),
            answer_sources("routing", 1, None, 1, |_| Ok(a.clone().into_bytes())).expect("answer")
        );
        assert!(answer_sources("routing", 2, None, 2, |i| if i == 1 {
            Err("gone".into())
        } else {
            Ok(a.clone().into_bytes())
        })
        .is_err());
        assert!(answer("nope", &[], None).is_err());
        // Several questions in one pass give what each gives alone.
        let many = answer_many(
            &["routing".to_string(), "calibration".to_string()],
            &a,
            None,
        )
        .expect("answers");
        for q in ["routing", "calibration"] {
            assert_eq!(
                many[q],
                answer_sources(q, 1, None, 1, |_| Ok(a.clone().into_bytes())).expect("answer")
            );
        }
        // The reliability diagram: a's 0.9 and b's 0.1 in their tenths, a's 0.5 in its own.
        let r = answer_sources("reliability", 2, None, 1, load).expect("answer");
        let bins: Vec<(String, u64)> = r["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|x| {
                (
                    x["bin"].as_str().unwrap_or("").to_string(),
                    x["executions"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        assert_eq!(
            bins,
            [
                ("0.1-0.2".to_string(), 1),
                ("0.5-0.6".to_string(), 1),
                ("0.9-1.0".to_string(), 1)
            ]
        );
    }
}
