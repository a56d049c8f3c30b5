//! The ledger's rules, pure: what an event must look like (the common envelope of seed 002),
//! which schema versions are read and how an older one is upgraded, and the consistency rules
//! an event must keep with every event before it (002's list, numbered as there: R1–R9).
//!
//! [`Rules`] is the state those rules need (which intents, plan variants, selections and
//! executions exist so far); the writer asks [`Rules::admit`] before appending and
//! [`Rules::take`]s what it appended, and the verifier does the same line by line.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

/// The schema version evd writes: 002's envelope 1.0 plus `prev`, the hash of the line before.
pub const SCHEMA_VERSION: &str = "1.1";

/// Versions an event may carry when it reaches evd: the current one, and those an upgrader
/// brings to it ([`upgrade`]).
pub const READABLE: [&str; 2] = ["1.0", SCHEMA_VERSION];

/// The event types a client may append (seed 002's canonical list).
pub const CLIENT_TYPES: [&str; 21] = [
    "intent_created",
    "intent_state_changed",
    "intent_abandoned",
    "plan_variant_created",
    "plan_variant_scored",
    "planning_converged",
    "plan_selected",
    "model_routed",
    "sandbox_created",
    "execution_started",
    "tool_call",
    "git_rebase_started",
    "git_rebase_completed",
    "git_merge_attempted",
    "execution_completed",
    "human_review_requested",
    "human_review_decision",
    "intent_promoted_to_main",
    "estimator_proposed",
    "estimator_approved",
    "policy_changed",
];

/// The event types only evd writes (its own journal; a client may not forge them).
pub const DAEMON_TYPES: [&str; 12] = [
    "daemon_started",
    "daemon_stopped",
    "tick_recorded",
    "proposal_ratified",
    "receipt_appended",
    "receipts_observed",
    "basis_changed",
    "verdict_changed",
    "check_run",
    "ledger_validation_error",
    "ledger_correction",
    "ledger_witnessed",
];

/// A broken rule: which one (`envelope`, `schema_version`, `event_type`, `payload`, `R1`…`R9`,
/// and for a file `json`, `seq`, `chain`, `order`), and what exactly is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: &'static str,
    pub message: String,
}

impl Violation {
    fn new(rule: &'static str, message: impl Into<String>) -> Violation {
        Violation {
            rule,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.rule, self.message)
    }
}

/// Bring an event of an older readable version to [`SCHEMA_VERSION`]; refuse a version no
/// upgrader knows. 1.0 (seed 002's envelope as published) differs only in lacking `prev`,
/// which the writer adds: its upgrade is the new version number.
pub fn upgrade(ev: &mut Map<String, Value>) -> Result<(), Violation> {
    let v = match ev.get("schema_version") {
        Some(Value::String(v)) => v.clone(),
        Some(_) => {
            return Err(Violation::new(
                "schema_version",
                "schema_version must be a string",
            ))
        }
        None => return Err(Violation::new("envelope", "missing schema_version")),
    };
    match v.as_str() {
        SCHEMA_VERSION => Ok(()),
        "1.0" => {
            ev.insert("schema_version".into(), SCHEMA_VERSION.into());
            Ok(())
        }
        other => Err(Violation::new(
            "schema_version",
            format!(
                "unsupported schema_version {other:?} (this evd reads {})",
                READABLE.join(", ")
            ),
        )),
    }
}

fn str_field<'a>(o: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a str, Violation> {
    match o.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(Violation::new("envelope", format!("{what}{key} is empty"))),
        Some(_) => Err(Violation::new(
            "envelope",
            format!("{what}{key} must be a string"),
        )),
        None => Err(Violation::new("envelope", format!("missing {what}{key}"))),
    }
}

/// The common envelope (every field 002 requires, with its type), whoever wrote the event.
/// `seq`, `ts` and `prev` are the writer's and are checked by [`check_written`].
pub fn check_envelope(ev: &Map<String, Value>) -> Result<(), Violation> {
    match ev.get("schema_version") {
        Some(Value::String(v)) if v == SCHEMA_VERSION => {}
        Some(Value::String(v)) => {
            return Err(Violation::new(
                "schema_version",
                format!("unsupported schema_version {v:?} (the ledger holds {SCHEMA_VERSION})"),
            ))
        }
        _ => return Err(Violation::new("envelope", "missing schema_version")),
    }
    let t = str_field(ev, "event_type", "")?;
    if !CLIENT_TYPES.contains(&t) && !DAEMON_TYPES.contains(&t) {
        return Err(Violation::new(
            "event_type",
            format!("unknown event_type {t:?}"),
        ));
    }
    str_field(ev, "run_id", "")?;
    str_field(ev, "agent_id", "")?;
    let host = match ev.get("host") {
        Some(Value::Object(h)) => h,
        Some(_) => return Err(Violation::new("envelope", "host must be an object")),
        None => return Err(Violation::new("envelope", "missing host")),
    };
    for k in ["hostname", "platform", "repo_root"] {
        str_field(host, k, "host.")?;
    }
    let git = match ev.get("git") {
        Some(Value::Object(g)) => g,
        Some(_) => return Err(Violation::new("envelope", "git must be an object")),
        None => return Err(Violation::new("envelope", "missing git")),
    };
    for k in ["branch", "head_sha"] {
        match git.get(k) {
            Some(Value::String(_)) => {}
            _ => {
                return Err(Violation::new(
                    "envelope",
                    format!("git.{k} must be a string"),
                ))
            }
        }
    }
    if !matches!(git.get("dirty"), Some(Value::Bool(_))) {
        return Err(Violation::new("envelope", "git.dirty must be a boolean"));
    }
    if git.get("repo").is_some_and(|r| !r.is_string()) {
        return Err(Violation::new("envelope", "git.repo must be a string"));
    }
    if !matches!(ev.get("payload"), Some(Value::Object(_))) {
        return Err(Violation::new("envelope", "payload must be an object"));
    }
    artifacts(ev)?;
    Ok(())
}

/// One artifact an event cites: its path under the store's host-local area (`results/`), and
/// the sha256 it cites, when it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub path: String,
    pub sha256: Option<String>,
}

/// The artifacts an event's payload cites (`artifacts`, seed 002), held to seed 003's rule 4:
/// they live only under `runs/<run_id>/` — the payload's own `run_id` when it names one, else
/// the event's — each path plain (relative, no `.` or `..` or empty part), each `sha256` 64
/// lowercase hex.
pub fn artifacts(ev: &Map<String, Value>) -> Result<Vec<Artifact>, Violation> {
    let Some(Value::Object(p)) = ev.get("payload") else {
        return Ok(Vec::new());
    };
    let list = match p.get("artifacts") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(Violation::new("artifacts", "artifacts must be an array")),
    };
    let run = p
        .get("run_id")
        .and_then(Value::as_str)
        .or_else(|| ev.get("run_id").and_then(Value::as_str))
        .unwrap_or("");
    let dir = format!("runs/{run}/");
    let mut out = Vec::with_capacity(list.len());
    for (i, a) in list.iter().enumerate() {
        let Some(path) = a.get("path").and_then(Value::as_str) else {
            return Err(Violation::new(
                "artifacts",
                format!("artifact {i} has no path"),
            ));
        };
        let plain = !path.contains('\\')
            && path
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..");
        let rest = path.strip_prefix(&dir).unwrap_or_default();
        if run.is_empty() || !plain || rest.is_empty() {
            return Err(Violation::new(
                "artifacts",
                format!(
                    "artifact {path:?} is not under {dir}: a run's artifacts live only in its own directory (seed 003, rule 4)"
                ),
            ));
        }
        let sha256 = match a.get("sha256") {
            None | Some(Value::Null) => None,
            Some(Value::String(h))
                if h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
            {
                Some(h.clone())
            }
            Some(_) => {
                return Err(Violation::new(
                    "artifacts",
                    format!("artifact {path:?}: sha256 must be 64 lowercase hex digits"),
                ))
            }
        };
        out.push(Artifact {
            path: path.to_string(),
            sha256,
        });
    }
    Ok(out)
}

/// `ts`, `seq` and `prev` as the writer set them: `seq` one more than the line before, `prev`
/// the hash of that line, `ts` an RFC 3339 UTC time not before the line before's.
pub fn check_written(
    ev: &Map<String, Value>,
    want_seq: u64,
    want_prev: &str,
    last_ts: Option<&str>,
) -> Result<(), Violation> {
    let seq = ev.get("seq").and_then(Value::as_u64);
    // The one jump allowed: evd's own correction declaring the seqs of lines removed from the
    // end of the file (`evctl ledger repair`), so that no seq is ever used twice.
    let declared_gap = ev.get("event_type").and_then(Value::as_str) == Some("ledger_correction")
        && ev.get("payload").is_some_and(|p| {
            p.get("kind").and_then(Value::as_str) == Some("lines_removed")
                && p.get("from_seq").and_then(Value::as_u64) == Some(want_seq)
                && p.get("to_seq")
                    .and_then(Value::as_u64)
                    .is_some_and(|to| to >= want_seq && seq == Some(to + 1))
        });
    if seq != Some(want_seq) && !declared_gap {
        let got = ev.get("seq").map_or("none".to_string(), Value::to_string);
        return Err(Violation::new(
            "seq",
            format!("seq is {got}, expected {want_seq}: a line was removed, moved or injected before it"),
        ));
    }
    match ev.get("prev") {
        Some(Value::String(p)) if p == want_prev => {}
        _ => {
            return Err(Violation::new(
                "chain",
                "prev is not the hash of the line before: a line before it was changed, removed or reordered",
            ))
        }
    }
    let ts = match ev.get("ts") {
        Some(Value::String(t)) if t.ends_with('Z') && crate::engine::clock::parse(t).is_some() => t,
        _ => {
            return Err(Violation::new(
                "envelope",
                "ts must be an ISO-8601 UTC time",
            ))
        }
    };
    if let Some(last) = last_ts {
        if let (Some(a), Some(b)) = (
            crate::engine::clock::parse(last),
            crate::engine::clock::parse(ts),
        ) {
            if b < a {
                return Err(Violation::new(
                    "order",
                    format!("ts {ts} is before the line before's ({last})"),
                ));
            }
        }
    }
    Ok(())
}

/// The sha256 of a line's bytes (without its newline), hex: the next line's `prev`.
pub fn line_hash(line: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(line.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `prev` of the first line.
pub const GENESIS_PREV: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What an intent was created with.
#[derive(Debug, Clone)]
struct Intent {
    parent: Option<String>,
    /// The branch its `intent_created` was recorded on.
    branch: String,
}

/// What the consistency rules need to know of the events so far.
#[derive(Debug, Default, Clone)]
pub struct Rules {
    intents: HashMap<String, Intent>,
    /// `(intent, plan)` of every `plan_variant_created`.
    variants: HashSet<(String, String)>,
    /// `(intent, plan)` of every `plan_selected`.
    selected: HashSet<(String, String)>,
    /// `(intent, plan)` → executions started and not completed.
    running: HashMap<(String, String), u32>,
    /// `(intent, branch)` of every rebase started and not completed.
    rebasing: HashSet<(String, String)>,
    /// `(intent, merge_sha)` of every successful merge recorded.
    merged: HashSet<(String, String)>,
}

fn payload(ev: &Map<String, Value>) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    match ev.get("payload") {
        Some(Value::Object(p)) => p,
        _ => EMPTY.get_or_init(Map::new),
    }
}

fn pstr<'a>(p: &'a Map<String, Value>, key: &str, t: &str) -> Result<&'a str, Violation> {
    match p.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(Violation::new(
            "payload",
            format!("{t} needs payload.{key} (a non-empty string)"),
        )),
    }
}

fn number(o: &Map<String, Value>, key: &str) -> Option<f64> {
    o.get(key).and_then(Value::as_f64)
}

/// The numeric fields seed 002 bounds (R8), wherever in a payload they appear: `p_success`
/// between 0 and 1, the others (the metrics, a policy's `lambda`, an intent's budgets, a
/// routing's signals) never negative.
const R8_FIELDS: [&str; 10] = [
    "p_success",
    "entropy",
    "impact",
    "cost",
    "lambda",
    "entropy_budget",
    "cost_budget",
    "time_budget_sec",
    "predicted_entropy",
    "expected_cost",
];

/// Where seed 002 reuses those names for something else: `estimator_versions` names the
/// estimator of each metric (`"p_success": "p_success_v1"`).
const R8_NOT_METRICS: [&str; 1] = ["estimator_versions"];

/// How deep R8 looks into a payload (deeper nesting is refused: no event of seed 002 needs it).
const R8_DEPTH: usize = 16;

/// R8 over every object of `v` (the payload and whatever it nests), `at` naming where.
fn metric_ranges(v: &Value, at: &str, depth: usize) -> Result<(), Violation> {
    if depth > R8_DEPTH {
        return Err(Violation::new(
            "payload",
            format!("{at} nests deeper than {R8_DEPTH} levels"),
        ));
    }
    match v {
        Value::Object(m) => {
            for (key, x) in m {
                let here = format!("{at}.{key}");
                if R8_NOT_METRICS.contains(&key.as_str()) {
                    continue;
                }
                if R8_FIELDS.contains(&key.as_str()) {
                    let Some(n) = x.as_f64() else {
                        return Err(Violation::new("R8", format!("{here} must be a number")));
                    };
                    if key == "p_success" && !(0.0..=1.0).contains(&n) {
                        return Err(Violation::new(
                            "R8",
                            format!("{here} is {n}; it must be between 0 and 1"),
                        ));
                    }
                    if key != "p_success" && n < 0.0 {
                        return Err(Violation::new(
                            "R8",
                            format!("{here} is {n}; it must be >= 0"),
                        ));
                    }
                } else {
                    metric_ranges(x, &here, depth + 1)?;
                }
            }
            Ok(())
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                metric_ranges(x, &format!("{at}[{i}]"), depth + 1)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A trunk branch, which no sub-intent merges into (R9).
fn is_trunk(branch: &str) -> bool {
    matches!(branch, "main" | "master")
}

impl Rules {
    /// Whether `ev` (envelope already checked) keeps every rule with the events taken so far.
    pub fn admit(&self, ev: &Map<String, Value>) -> Result<(), Violation> {
        let t = ev
            .get("event_type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let p = payload(ev);
        if let Some(v) = ev.get("payload") {
            metric_ranges(v, "payload", 0)?;
        }
        if DAEMON_TYPES.contains(&t) {
            return Ok(());
        }
        // R1: an intent is created once, before anything names it.
        let intent = match t {
            "estimator_proposed" | "estimator_approved" | "policy_changed" => None,
            // A tool may run outside any intent (a test `check --run` executes).
            "tool_call" if !p.contains_key("intent_id") => None,
            _ => Some(pstr(p, "intent_id", t)?),
        };
        if let Some(i) = intent {
            let known = self.intents.contains_key(i);
            if t == "intent_created" {
                if known {
                    return Err(Violation::new(
                        "R1",
                        format!("intent {i:?} was already created"),
                    ));
                }
                if let Some(Value::String(parent)) = p.get("parent_intent_id") {
                    if !self.intents.contains_key(parent) {
                        return Err(Violation::new(
                            "R1",
                            format!("parent intent {parent:?} of {i:?} was never created"),
                        ));
                    }
                }
            } else if !known {
                return Err(Violation::new(
                    "R1",
                    format!("{t} names intent {i:?} before its intent_created"),
                ));
            }
        }
        let i = intent.unwrap_or_default();
        let key = |plan: &str| (i.to_string(), plan.to_string());
        match t {
            "plan_variant_created" | "plan_variant_scored" => {
                let plan = pstr(p, "plan_id", t)?;
                if t == "plan_variant_scored" && !self.variants.contains(&key(plan)) {
                    return Err(Violation::new(
                        "R2",
                        format!("{t} names plan {plan:?}, which no plan_variant_created made"),
                    ));
                }
            }
            "plan_selected" => {
                let plan = pstr(p, "plan_id", t)?;
                if !self.variants.contains(&key(plan)) {
                    return Err(Violation::new(
                        "R2",
                        format!("plan_selected names plan {plan:?} of intent {i:?}, which no plan_variant_created made"),
                    ));
                }
            }
            "execution_started" => {
                let plan = pstr(p, "plan_id", t)?;
                if !self.selected.contains(&key(plan)) {
                    return Err(Violation::new(
                        "R3",
                        format!("execution_started names plan {plan:?} of intent {i:?}, which was never selected"),
                    ));
                }
            }
            "execution_completed" => {
                let plan = pstr(p, "plan_id", t)?;
                if self.running.get(&key(plan)).copied().unwrap_or(0) == 0 {
                    return Err(Violation::new(
                        "R4",
                        format!("execution_completed for plan {plan:?} of intent {i:?} follows no execution_started"),
                    ));
                }
                let status = pstr(p, "status", t)?;
                if !matches!(status, "success" | "failure") {
                    return Err(Violation::new(
                        "payload",
                        format!(
                            "execution_completed.status must be success or failure, not {status:?}"
                        ),
                    ));
                }
                if status == "success" {
                    let ps = match p.get("actual") {
                        Some(Value::Object(a)) => number(a, "p_success"),
                        _ => None,
                    };
                    if ps != Some(1.0) {
                        return Err(Violation::new(
                            "R7",
                            "a successful execution_completed must report actual.p_success 1.0",
                        ));
                    }
                }
            }
            "git_rebase_started" => {
                let b = pstr(p, "branch", t)?;
                if self.rebasing.contains(&key(b)) {
                    return Err(Violation::new(
                        "R6",
                        format!("a rebase of {b:?} for intent {i:?} is already started and not completed"),
                    ));
                }
            }
            "git_rebase_completed" => {
                let b = pstr(p, "branch", t)?;
                if !self.rebasing.contains(&key(b)) {
                    return Err(Violation::new(
                        "R6",
                        format!("git_rebase_completed for {b:?} of intent {i:?} follows no git_rebase_started"),
                    ));
                }
                let status = pstr(p, "status", t)?;
                if !matches!(status, "success" | "conflict") {
                    return Err(Violation::new(
                        "payload",
                        format!("git_rebase_completed.status must be success or conflict, not {status:?}"),
                    ));
                }
            }
            "git_merge_attempted" => {
                let to = pstr(p, "to_branch", t)?;
                pstr(p, "from_branch", t)?;
                let status = pstr(p, "status", t)?;
                if !matches!(status, "success" | "failed") {
                    return Err(Violation::new(
                        "payload",
                        format!(
                            "git_merge_attempted.status must be success or failed, not {status:?}"
                        ),
                    ));
                }
                self.check_hierarchy(i, to)?;
            }
            "intent_promoted_to_main" => {
                let to = pstr(p, "to_branch", t)?;
                let sha = pstr(p, "merge_sha", t)?;
                self.check_hierarchy(i, to)?;
                if !self.merged.contains(&key(sha)) {
                    return Err(Violation::new(
                        "R5",
                        format!("intent {i:?} is promoted with merge {sha:?}, but no successful git_merge_attempted recorded it"),
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// R9: a sub-intent merges into its parent's branch, never into the trunk.
    fn check_hierarchy(&self, intent: &str, to: &str) -> Result<(), Violation> {
        let Some(parent) = self.intents.get(intent).and_then(|x| x.parent.clone()) else {
            return Ok(());
        };
        let parent_branch = self.intents.get(&parent).map(|x| x.branch.as_str());
        if is_trunk(to) {
            return Err(Violation::new(
                "R9",
                format!("sub-intent {intent:?} may not merge into {to:?}: it merges into its parent {parent:?}'s branch"),
            ));
        }
        match parent_branch {
            Some(b) if !b.is_empty() && b != to => Err(Violation::new(
                "R9",
                format!("sub-intent {intent:?} merges into {to:?}, not its parent {parent:?}'s branch {b:?}"),
            )),
            _ => Ok(()),
        }
    }

    /// Take in an admitted event.
    pub fn take(&mut self, ev: &Map<String, Value>) {
        let t = ev
            .get("event_type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let p = payload(ev);
        let s = |k: &str| {
            p.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let i = s("intent_id");
        match t {
            "intent_created" => {
                let branch = ev
                    .get("git")
                    .and_then(|g| g.get("branch"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let parent = p
                    .get("parent_intent_id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.intents.insert(i, Intent { parent, branch });
            }
            "plan_variant_created" => {
                self.variants.insert((i, s("plan_id")));
            }
            "plan_selected" => {
                self.selected.insert((i, s("plan_id")));
            }
            "execution_started" => {
                *self.running.entry((i, s("plan_id"))).or_default() += 1;
            }
            "execution_completed" => {
                if let Some(n) = self.running.get_mut(&(i, s("plan_id"))) {
                    *n = n.saturating_sub(1);
                }
            }
            "git_rebase_started" => {
                self.rebasing.insert((i, s("branch")));
            }
            "git_rebase_completed" => {
                self.rebasing.remove(&(i, s("branch")));
            }
            "git_merge_attempted" if s("status") == "success" => {
                self.merged.insert((i, s("merge_sha")));
            }
            _ => {}
        }
    }
}
