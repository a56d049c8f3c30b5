//! The ev model: Tick, Ground, Check, Liveness, and the strict reader that turns a tick file's
//! JSON into one (the R1/R2 rules of model-and-verify §3, in their exact order and wording), and
//! the canonical shape of the payload a tick id hashes. Pure: no I/O.

use serde_json::{Map, Value};

use crate::vocab;

/// Where a bound test must keep running for its binding to count as alive.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Liveness {
    pub platforms: Vec<String>,
    pub triggered_by: Vec<String>,
    pub surfaces: Vec<String>,
}

impl Liveness {
    /// The canonical form: each set sorted by bytes and de-duplicated.
    pub fn canonical(&self) -> Liveness {
        Liveness {
            platforms: sorted_set(&self.platforms),
            triggered_by: sorted_set(&self.triggered_by),
            surfaces: sorted_set(&self.surfaces),
        }
    }
}

pub fn sorted_set(v: &[String]) -> Vec<String> {
    let mut s = v.to_vec();
    s.sort();
    s.dedup();
    s
}

/// The binding that keeps one ground honest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// A human re-check: `{by: "person", ref}`.
    Person { reference: String },
    /// A test binding. `counter_test: None` is a harvested binding.
    Test {
        reference: String,
        verified_at_sha: String,
        counter_test: Option<String>,
        liveness: Liveness,
    },
}

impl Check {
    pub fn is_test(&self) -> bool {
        matches!(self, Check::Test { .. })
    }
}

/// One reason a decision rests on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ground {
    pub claim: String,
    /// `chosen` or `rejected:<option>`.
    pub supports: String,
    pub check: Option<Check>,
}

impl Ground {
    /// The option of a road not taken, when this ground is one.
    pub fn rejected_option(&self) -> Option<&str> {
        self.supports.strip_prefix("rejected:")
    }
    pub fn is_rejected(&self) -> bool {
        self.rejected_option().is_some()
    }
}

/// An opaque producer identity: a non-empty string or a non-empty JSON object.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceRef {
    Text(String),
    Object(Map<String, Value>),
}

impl SourceRef {
    /// The one thing ev derives from a source_ref: the string verbatim, or the object's compact
    /// sorted-key JSON.
    pub fn key(&self) -> String {
        match self {
            SourceRef::Text(s) => s.clone(),
            SourceRef::Object(m) => crate::json::compact(&Value::Object(m.clone())),
        }
    }
    pub fn to_value(&self) -> Value {
        match self {
            SourceRef::Text(s) => Value::String(s.clone()),
            SourceRef::Object(m) => Value::Object(m.clone()),
        }
    }
    /// Validate a raw value as a source_ref (on read and on write).
    pub fn from_value(v: &Value) -> Result<SourceRef, String> {
        match v {
            Value::String(s) if !s.is_empty() => Ok(SourceRef::Text(s.clone())),
            Value::String(_) => Err("source_ref string is empty".into()),
            Value::Object(m) if !m.is_empty() => Ok(SourceRef::Object(m.clone())),
            Value::Object(_) => Err("source_ref object is empty".into()),
            _ => Err("source_ref must be a non-empty string or object".into()),
        }
    }
}

/// One recorded decision: the hashed payload plus bookkeeping.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    // hashed payload
    pub decision: String,
    pub observe: String,
    pub grounds: Vec<Ground>,
    pub parent_id: String,
    // bookkeeping
    pub id: String,
    pub status: String,
    pub held_since: String,
    pub blame: String,
    pub authority: Option<String>,
    pub jurisdiction: Option<String>,
    pub source_ref: Option<SourceRef>,
    pub provenance: Option<String>,
    pub supersedes: Option<String>,
    pub ratifies: Option<String>,
    /// Top-level keys this reader tolerated without knowing them (sorted). Never written.
    pub unknown_keys: Vec<String>,
}

/// The identity set: the top-level keys every tick must carry.
pub const IDENTITY_KEYS: [&str; 8] = [
    "id",
    "parent_id",
    "observe",
    "decision",
    "grounds",
    "status",
    "held_since",
    "blame",
];

/// The non-hashed keys ev knows by name. Exactly two of them are relation edges.
pub const KNOWN_NON_HASHED_KEYS: [&str; 6] = [
    "authority",
    "jurisdiction",
    "source_ref",
    "provenance",
    "supersedes",
    "ratifies",
];

impl Tick {
    /// Provenance with the absent default applied.
    pub fn provenance_or_default(&self) -> &str {
        self.provenance.as_deref().unwrap_or(vocab::HUMAN_NOW)
    }
    pub fn is_agent_proposed(&self) -> bool {
        self.provenance.as_deref() == Some(vocab::AGENT_PROPOSED)
    }
    pub fn is_detect_only(&self) -> bool {
        vocab::is_detect_only(self.jurisdiction.as_deref())
    }
    pub fn has_test_check(&self) -> bool {
        has_test_check(&self.grounds)
    }
    pub fn source_ref_key(&self) -> Option<String> {
        self.source_ref.as_ref().map(SourceRef::key)
    }

    /// The tick as stored on disk: hashed fields plus bookkeeping, optional keys omitted when
    /// absent, liveness sets canonical. Serialize with [`crate::json::pretty`] for the file bytes.
    pub fn to_value(&self) -> Value {
        let mut o = match hashed_value(
            &self.decision,
            &self.observe,
            &self.grounds,
            &self.parent_id,
        ) {
            Value::Object(o) => o,
            _ => Map::new(),
        };
        let s = |v: &str| Value::String(v.to_string());
        o.insert("id".into(), s(&self.id));
        o.insert("status".into(), s(&self.status));
        o.insert("held_since".into(), s(&self.held_since));
        o.insert("blame".into(), s(&self.blame));
        let optional = [
            ("authority", &self.authority),
            ("jurisdiction", &self.jurisdiction),
            ("provenance", &self.provenance),
            ("supersedes", &self.supersedes),
            ("ratifies", &self.ratifies),
        ];
        for (k, v) in optional {
            if let Some(v) = v {
                o.insert(k.into(), s(v));
            }
        }
        if let Some(sr) = &self.source_ref {
            o.insert("source_ref".into(), sr.to_value());
        }
        Value::Object(o)
    }

    /// The exact bytes of the tick file.
    pub fn file_bytes(&self) -> String {
        crate::json::pretty(&self.to_value())
    }

    /// The strict reader (R1/R2). Stops at the first problem and returns its message.
    pub fn from_value(v: &Value) -> Result<Tick, String> {
        let obj = v.as_object().ok_or("tick is not an object")?;
        let grounds_raw = obj
            .get("grounds")
            .and_then(Value::as_array)
            .ok_or("grounds missing/not array")?;
        let grounds = grounds_raw
            .iter()
            .map(ground_from_value)
            .collect::<Result<Vec<_>, _>>()?;
        let id = req_str(obj, "id")?;
        let parent_id = req_str(obj, "parent_id")?;
        let observe = req_str(obj, "observe")?;
        let decision = req_str(obj, "decision")?;
        let status = req_str(obj, "status")?;
        let held_since = req_str(obj, "held_since")?;
        let blame = req_str(obj, "blame")?;

        let tag = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
        let jurisdiction = tag("jurisdiction");
        if let Some(j) = &jurisdiction {
            vocab::check_jurisdiction(j)?;
        }
        let provenance = tag("provenance");
        if let Some(p) = &provenance {
            vocab::check_provenance(p)?;
        }
        let supersedes = tag("supersedes");
        if let Some(e) = &supersedes {
            vocab::check_edge_id("supersedes", e)?;
        }
        let ratifies = tag("ratifies");
        if let Some(e) = &ratifies {
            vocab::check_edge_id("ratifies", e)?;
        }
        let source_ref = match obj.get("source_ref") {
            Some(v) => Some(SourceRef::from_value(v)?),
            None => None,
        };
        Ok(Tick {
            decision,
            observe,
            grounds,
            parent_id,
            id,
            status,
            held_since,
            blame,
            authority: tag("authority"),
            jurisdiction,
            source_ref,
            provenance,
            supersedes,
            ratifies,
            unknown_keys: unknown_top_level_keys(obj),
        })
    }

    /// Parse a tick file's text: JSON first, then the strict reader.
    pub fn parse(text: &str) -> Result<Tick, TickParseError> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| TickParseError::NotJson(e.to_string()))?;
        Tick::from_value(&v).map_err(TickParseError::Invalid)
    }
}

/// Why a tick file could not be read as a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TickParseError {
    /// Not JSON at all: upstream aborts whole-store reads on this.
    NotJson(String),
    /// JSON, but not a valid tick (the R1/R2 message).
    Invalid(String),
}

impl std::fmt::Display for TickParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TickParseError::NotJson(e) | TickParseError::Invalid(e) => f.write_str(e),
        }
    }
}

/// Top-level keys outside the identity set and the known non-hashed set, in byte order.
pub fn unknown_top_level_keys(obj: &Map<String, Value>) -> Vec<String> {
    obj.keys()
        .filter(|k| {
            !IDENTITY_KEYS.contains(&k.as_str()) && !KNOWN_NON_HASHED_KEYS.contains(&k.as_str())
        })
        .cloned()
        .collect()
}

pub fn has_test_check(grounds: &[Ground]) -> bool {
    grounds
        .iter()
        .any(|g| g.check.as_ref().is_some_and(Check::is_test))
}

fn req_str(obj: &Map<String, Value>, k: &str) -> Result<String, String> {
    obj.get(k)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("missing or non-string field: {k}"))
}

fn only_keys(obj: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), String> {
    // Map keys iterate in byte order, so the first offending key is the byte-order-first one.
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("{what}: field outside closed schema: {k}")),
        None => Ok(()),
    }
}

pub fn is_40_lower_hex(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `chosen`, or `rejected:<option>` with a non-empty option.
pub fn is_valid_supports(s: &str) -> bool {
    s == "chosen" || s.strip_prefix("rejected:").is_some_and(|o| !o.is_empty())
}

fn str_set(obj: &Map<String, Value>, k: &str) -> Result<Vec<String>, String> {
    let arr = obj
        .get(k)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("liveness.{k} missing/not array"))?;
    let mut out = Vec::with_capacity(arr.len());
    for e in arr {
        let s = e
            .as_str()
            .ok_or_else(|| format!("liveness.{k} element not a string"))?;
        if s.is_empty() {
            return Err(format!("liveness.{k} has an empty element"));
        }
        out.push(s.to_string());
    }
    if out.is_empty() {
        return Err(format!("liveness.{k} must be non-empty"));
    }
    Ok(out)
}

fn check_from_value(v: &Value) -> Result<Check, String> {
    let obj = v.as_object().ok_or("check is not an object")?;
    let by = obj.get("by").and_then(Value::as_str);
    match by {
        Some("person") => {
            only_keys(obj, &["by", "ref"], "person check")?;
            let reference = req_str(obj, "ref")?;
            if reference.is_empty() {
                return Err("person check ref is empty".into());
            }
            Ok(Check::Person { reference })
        }
        Some("test") => {
            only_keys(
                obj,
                &["by", "ref", "verified_at_sha", "counter_test", "liveness"],
                "test check",
            )?;
            let reference = req_str(obj, "ref")?;
            if reference.is_empty() {
                return Err("test check ref is empty".into());
            }
            let verified_at_sha = req_str(obj, "verified_at_sha")?;
            if !is_40_lower_hex(&verified_at_sha) {
                return Err(format!(
                    "verified_at_sha must be 40 lowercase hex: {verified_at_sha}"
                ));
            }
            let counter_test = match obj.get("counter_test") {
                None => None,
                Some(Value::String(s)) if s.is_empty() => {
                    return Err("counter_test present but empty".into())
                }
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err("counter_test present but not a string".into()),
            };
            let lv = obj
                .get("liveness")
                .and_then(Value::as_object)
                .ok_or("liveness missing/not object")?;
            only_keys(lv, &["platforms", "triggered_by", "surfaces"], "liveness")?;
            let liveness = Liveness {
                platforms: str_set(lv, "platforms")?,
                triggered_by: str_set(lv, "triggered_by")?,
                surfaces: str_set(lv, "surfaces")?,
            };
            Ok(Check::Test {
                reference,
                verified_at_sha,
                counter_test,
                liveness,
            })
        }
        other => Err(format!(
            "check.by must be \"test\" or \"person\", got {}",
            crate::json::o(other)
        )),
    }
}

/// The ground reader shared by tick files and the canonical intake.
pub fn ground_from_value(v: &Value) -> Result<Ground, String> {
    let obj = v.as_object().ok_or("ground is not an object")?;
    only_keys(obj, &["claim", "supports", "check"], "ground")?;
    let claim = req_str(obj, "claim")?;
    if claim.is_empty() {
        return Err("ground claim is empty".into());
    }
    let supports = req_str(obj, "supports")?;
    if !is_valid_supports(&supports) {
        return Err(format!("invalid supports: {supports}"));
    }
    let check = match obj.get("check") {
        None => None,
        Some(c) => Some(check_from_value(c)?),
    };
    Ok(Ground {
        claim,
        supports,
        check,
    })
}

// The canonical shape of the hashed payload: what enters a tick id ([`crate::id`] hashes it).

fn check_value(c: &Check) -> Value {
    let mut o = Map::new();
    match c {
        Check::Person { reference } => {
            o.insert("by".into(), "person".into());
            o.insert("ref".into(), reference.as_str().into());
        }
        Check::Test {
            reference,
            verified_at_sha,
            counter_test,
            liveness,
        } => {
            let l = liveness.canonical();
            let mut lv = Map::new();
            lv.insert("platforms".into(), l.platforms.into());
            lv.insert("triggered_by".into(), l.triggered_by.into());
            lv.insert("surfaces".into(), l.surfaces.into());
            o.insert("by".into(), "test".into());
            o.insert("ref".into(), reference.as_str().into());
            o.insert("verified_at_sha".into(), verified_at_sha.as_str().into());
            // An absent counter-test omits the key: a harvested id stays byte-stable.
            if let Some(ct) = counter_test {
                o.insert("counter_test".into(), ct.as_str().into());
            }
            o.insert("liveness".into(), Value::Object(lv));
        }
    }
    Value::Object(o)
}

/// One ground as it enters the hash (and the tick file).
pub fn ground_value(g: &Ground) -> Value {
    let mut o = Map::new();
    o.insert("claim".into(), g.claim.as_str().into());
    o.insert("supports".into(), g.supports.as_str().into());
    if let Some(c) = &g.check {
        o.insert("check".into(), check_value(c));
    }
    Value::Object(o)
}

/// The hashed payload `{decision, grounds, observe, parent_id}` and nothing else.
pub fn hashed_value(decision: &str, observe: &str, grounds: &[Ground], parent_id: &str) -> Value {
    let mut o = Map::new();
    o.insert("decision".into(), decision.into());
    o.insert("observe".into(), observe.into());
    o.insert(
        "grounds".into(),
        Value::Array(grounds.iter().map(ground_value).collect()),
    );
    o.insert("parent_id".into(), parent_id.into());
    Value::Object(o)
}

/// The exact bytes that are hashed.
pub fn canonical_payload(
    decision: &str,
    observe: &str,
    grounds: &[Ground],
    parent_id: &str,
) -> String {
    crate::json::compact(&hashed_value(decision, observe, grounds, parent_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn genesis() -> Value {
        json!({
            "blame": "Wang Yu",
            "decision": "freeze the retrieval schema for v2",
            "grounds": [
                {"check": {"by": "person", "ref": "Q3 infra review"},
                 "claim": "team still wants a frozen schema", "supports": "chosen"},
                {"claim": "pgvector would lock our schema", "supports": "rejected:pgvector"}
            ],
            "held_since": "2026-11-21T22:44:22.478445301Z",
            "id": "e2b337f53a1f",
            "observe": "evaluating retrieval backend",
            "parent_id": "",
            "status": "live"
        })
    }

    #[test]
    fn a_well_formed_tick_round_trips_to_the_same_value() {
        let t = Tick::from_value(&genesis()).expect("parses");
        assert_eq!(t.to_value(), genesis());
    }

    fn err_of(mut edit: impl FnMut(&mut Value)) -> String {
        let mut v = genesis();
        edit(&mut v);
        Tick::from_value(&v).expect_err("must be refused")
    }

    #[test]
    fn the_reader_names_each_problem_in_the_spec_wording() {
        assert_eq!(
            Tick::from_value(&json!([])).unwrap_err(),
            "tick is not an object"
        );
        assert_eq!(
            err_of(|v| v["grounds"] = json!({})),
            "grounds missing/not array"
        );
        assert_eq!(
            err_of(|v| v["grounds"][0]["zz"] = json!(1)),
            "ground: field outside closed schema: zz"
        );
        assert_eq!(
            err_of(|v| v["grounds"][1]["supports"] = json!("rejected:")),
            "invalid supports: rejected:"
        );
        assert_eq!(
            err_of(|v| v["grounds"][1]["claim"] = json!("")),
            "ground claim is empty"
        );
        assert_eq!(
            err_of(|v| v["grounds"][0]["check"] = Value::Null),
            "check is not an object"
        );
        assert_eq!(
            err_of(|v| v["grounds"][0]["check"]["by"] = json!("robot")),
            "check.by must be \"test\" or \"person\", got Some(\"robot\")"
        );
        assert_eq!(
            err_of(|v| v["grounds"][0]["check"]["ref"] = json!("")),
            "person check ref is empty"
        );
        assert_eq!(
            err_of(|v| {
                v.as_object_mut().map(|o| o.remove("blame"));
            }),
            "missing or non-string field: blame"
        );
        assert_eq!(
            err_of(|v| v["jurisdiction"] = json!("E")),
            "jurisdiction must be one of A, B, C, D (got \"E\")"
        );
        assert_eq!(
            err_of(|v| v["supersedes"] = json!("../x")),
            "supersedes must be a 12-char lowercase-hex tick id (got \"../x\")"
        );
        assert_eq!(
            err_of(|v| v["source_ref"] = json!(5)),
            "source_ref must be a non-empty string or object"
        );
    }

    #[test]
    fn unknown_top_level_keys_are_tolerated_and_non_string_tags_read_as_absent() {
        let mut v = genesis();
        v["future_field"] = json!("x");
        v["authority"] = json!(7);
        let t = Tick::from_value(&v).expect("tolerated");
        assert_eq!(t.unknown_keys, vec!["future_field".to_string()]);
        assert_eq!(t.authority, None);
    }

    #[test]
    fn test_check_errors_follow_the_liveness_order() {
        let base = json!({"by":"test","ref":"t","verified_at_sha":"d308afac1b2c3d4e5f60718293a4b5c6d7e8f901",
            "counter_test":"c","liveness":{"platforms":["p"],"triggered_by":["t"],"surfaces":["s"]}});
        let run = |edit: &dyn Fn(&mut Value)| {
            let mut c = base.clone();
            edit(&mut c);
            check_from_value(&c).err()
        };
        assert_eq!(run(&|_| {}), None);
        assert_eq!(
            run(&|c| c["verified_at_sha"] = json!("ABC")),
            Some("verified_at_sha must be 40 lowercase hex: ABC".into())
        );
        assert_eq!(
            run(&|c| c["counter_test"] = json!("")),
            Some("counter_test present but empty".into())
        );
        assert_eq!(
            run(&|c| c["liveness"]["surfaces"] = json!([])),
            Some("liveness.surfaces must be non-empty".into())
        );
        assert_eq!(
            run(&|c| c["liveness"]["platforms"] = json!([""])),
            Some("liveness.platforms has an empty element".into())
        );
        assert_eq!(
            run(&|c| c["extra"] = json!(1)),
            Some("test check: field outside closed schema: extra".into())
        );
    }
}
