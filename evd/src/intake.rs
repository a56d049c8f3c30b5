//! Reading history for `migrate`: source specs, the Canonical Decision Intake contract, the four
//! convenience extractors, the `--jurisdiction-map` file, and the dedup keys records and stored
//! ticks are matched by (commands.md §8.2–§8.5, model-and-verify §5.6).
//!
//! Pure: text in, records (or the exact refusal upstream prints) out. Nothing here touches the
//! filesystem; evctl reads the files and evd calls these on what it was sent.

use std::collections::HashMap;

use proto::json::{o, q};
use proto::model::ground_from_value;
use proto::rpc::Refusal;
use proto::vocab;
use proto::{Ground, SourceRef, Tick};
use serde_json::{Map, Value};

/// The source kinds `--source` / `--against` accept, in the order the refusal lists them.
pub const KINDS: [&str; 5] = [
    "canonical",
    "gitlog",
    "to-human",
    "decisions-immutable",
    "escalation",
];

/// The closed envelope of one canonical intake line.
pub const CANONICAL_KEYS: [&str; 9] = [
    "kind",
    "decision",
    "observe",
    "grounds",
    "blame",
    "authority",
    "jurisdiction",
    "source_ref",
    "provenance",
];

/// The `kind` every canonical line must carry.
pub const INTAKE_KIND: &str = "ev-decision-intake";

/// One decision read from a source, not yet resolved against the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// 1-based physical line of the canonical line or of the extractor's header.
    pub line: usize,
    /// The dedup and sort key.
    pub source_key: String,
    pub decision: String,
    pub observe: String,
    pub grounds: Vec<Ground>,
    pub blame: Option<String>,
    pub authority: Option<String>,
    pub jurisdiction: Option<String>,
    pub provenance: Option<String>,
    pub source_ref: Option<SourceRef>,
}

fn refuse(reason: &str, message: impl Into<String>) -> Refusal {
    Refusal::refused(reason, message)
}

// ---------------------------------------------------------------------------------------------
// Source specs

/// Split `<kind>:<path>` at the first colon.
pub fn split_spec(spec: &str) -> Result<(&str, &str), Refusal> {
    spec.split_once(':').ok_or_else(|| {
        refuse(
            "source_spec",
            format!("--source expects <kind>:<path>, got {}", q(spec)),
        )
    })
}

/// Read one source the way upstream does, in its order: the spec's shape, then the file (as the
/// caller read it), then the kind, then the contents.
pub fn read_source(
    spec: &str,
    text: Option<&str>,
    read_error: Option<&str>,
) -> Result<Vec<Record>, Refusal> {
    let (kind, path) = split_spec(spec)?;
    let text = match (text, read_error) {
        (_, Some(e)) => return Err(Refusal::io(format!("reading {path}: {e}"))),
        (Some(t), None) => t,
        (None, None) => {
            return Err(Refusal::io(format!(
                "reading {path}: the caller sent neither its contents nor a read error"
            )))
        }
    };
    parse_source(kind, text)
}

/// Parse a source's text by kind.
pub fn parse_source(kind: &str, text: &str) -> Result<Vec<Record>, Refusal> {
    match kind {
        "canonical" => canonical(text),
        "gitlog" => Ok(gitlog(text)),
        "to-human" | "escalation" => Ok(resolved_flag(text)),
        "decisions-immutable" => Ok(decisions_immutable(text)),
        other => Err(refuse(
            "source_kind",
            format!(
                "unknown source kind {} (expected canonical | gitlog | to-human | decisions-immutable | escalation)",
                q(other)
            ),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Keys

/// The first round/issue token of `text`, splitting at every character that is not an ASCII
/// letter, digit or `#` (`round r12, ok` → `r12`).
pub fn first_round_token(text: &str) -> Option<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '#'))
        .find(|t| vocab::is_round_or_issue_token(t))
}

/// The dedup key of a raw `source_ref` value: a string verbatim, anything else its compact JSON
/// (keys sorted). Used on raw tick files, so no shape is enforced here.
pub fn raw_source_ref_key(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => proto::json::compact(other),
    }
}

/// The store-side key of a tick file's raw JSON: its `source_ref` key, else the first round/issue
/// token of a string `observe`. `None`: the file cannot be keyed.
pub fn store_key_of_value(raw: &Value) -> Option<String> {
    match raw.get("source_ref") {
        Some(sr) => Some(raw_source_ref_key(sr)),
        None => raw
            .get("observe")
            .and_then(Value::as_str)
            .and_then(first_round_token)
            .map(str::to_string),
    }
}

/// The same key for a tick that parsed (identical to [`store_key_of_value`] on its file).
pub fn store_key_of_tick(t: &Tick) -> Option<String> {
    match &t.source_ref {
        Some(sr) => Some(sr.key()),
        None => first_round_token(&t.observe).map(str::to_string),
    }
}

// ---------------------------------------------------------------------------------------------
// canonical:

/// Parse a Canonical Decision Intake stream (JSONL). The first bad line aborts, named by its
/// 1-based physical line number; blank lines and `#` lines are skipped (and still counted).
pub fn canonical(text: &str) -> Result<Vec<Record>, Refusal> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let rec = canonical_line(line, n)
            .map_err(|m| refuse("canonical_line", format!("canonical line {n}: {m}")))?;
        out.push(rec);
    }
    Ok(out)
}

/// One canonical line, its checks in the contract's order; the error is the text after the
/// `canonical line <n>: ` prefix.
fn canonical_line(line: &str, n: usize) -> Result<Record, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    closed_envelope(obj)?;
    let kind = obj.get("kind").and_then(Value::as_str);
    if kind != Some(INTAKE_KIND) {
        return Err(format!(
            "not an ev-decision-intake record (kind={})",
            o(kind)
        ));
    }
    let decision = obj
        .get("decision")
        .and_then(Value::as_str)
        .ok_or("missing or non-string field: decision")?
        .to_string();
    if decision.trim().is_empty() {
        return Err("decision is empty".into());
    }
    // Present but not a string reads as absent, for observe and every tag (upstream leniency).
    let text_of = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    let observe = text_of("observe").unwrap_or_default();
    let grounds = obj
        .get("grounds")
        .and_then(Value::as_array)
        .ok_or("grounds missing/not array")?
        .iter()
        .map(ground_from_value)
        .collect::<Result<Vec<_>, _>>()?;
    let blame = text_of("blame");
    let authority = text_of("authority");
    if let Some(a) = &authority {
        vocab::check_authority(a)?;
    }
    let jurisdiction = text_of("jurisdiction");
    if let Some(j) = &jurisdiction {
        vocab::check_jurisdiction(j)?;
    }
    let provenance = text_of("provenance");
    match &provenance {
        Some(p) => vocab::check_provenance(p)?,
        None => {
            return Err("a canonical record must declare provenance (imported | agent-proposed | human-now) — a live proposal is agent-proposed; backfill is imported".into())
        }
    }
    let source_ref = match obj.get("source_ref") {
        Some(sr) => Some(SourceRef::from_value(sr)?),
        None => None,
    };
    let source_key = match &source_ref {
        Some(sr) => Some(sr.key()),
        None => first_round_token(&observe).map(str::to_string),
    }
    .filter(|k| !k.is_empty())
    .ok_or(
        "a record needs a source_ref (or a round/#issue token in observe) for idempotent re-import",
    )?;
    Ok(Record {
        line: n,
        source_key,
        decision,
        observe,
        grounds,
        blame,
        authority,
        jurisdiction,
        provenance,
        source_ref,
    })
}

/// The envelope is closed: the byte-order-first key outside it is named.
fn closed_envelope(obj: &Map<String, Value>) -> Result<(), String> {
    match obj.keys().find(|k| !CANONICAL_KEYS.contains(&k.as_str())) {
        Some(k) => Err(format!("field outside closed schema: {k}")),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// The convenience extractors

/// The structured road lines of a record body: `rejected: <option>: <why>` (or `rejected `,
/// `reject:`, `reject ` as the lead), list markers stripped. Prose never becomes a ground.
pub fn road_grounds(body: &[&str]) -> Vec<Ground> {
    let mut out = Vec::new();
    for line in body {
        let l = line.trim_start_matches(['-', '*', ' ', '\t']).trim();
        let rest = ["rejected:", "rejected ", "reject:", "reject "]
            .iter()
            .find_map(|lead| l.strip_prefix(lead));
        let Some((option, why)) = rest.and_then(|r| r.split_once(':')) else {
            continue;
        };
        let (option, why) = (option.trim(), why.trim());
        if !option.is_empty() && !why.is_empty() {
            out.push(Ground {
                claim: why.to_string(),
                supports: format!("rejected:{option}"),
                check: None,
            });
        }
    }
    out
}

/// A header an extractor recognised: its line, key and decision text.
struct Header {
    line: usize,
    key: String,
    decision: String,
}

/// The block structure every extractor shares: a header opens a record whose body runs to the
/// next header; lines before the first header (or under a header that opened nothing) are
/// ignored. `header` returns `Some(None)` for a header line that opens nothing.
fn blocks(
    text: &str,
    mut header: impl FnMut(usize, &str) -> Option<Option<Header>>,
) -> Vec<Record> {
    let mut out = Vec::new();
    let mut open: Option<Header> = None;
    let mut body: Vec<&str> = Vec::new();
    let flush = |open: &mut Option<Header>, body: &mut Vec<&str>, out: &mut Vec<Record>| {
        if let Some(h) = open.take() {
            out.push(extracted(h, body));
        }
        body.clear();
    };
    for (i, line) in text.lines().enumerate() {
        match header(i + 1, line) {
            Some(h) => {
                flush(&mut open, &mut body, &mut out);
                open = h;
            }
            None => body.push(line),
        }
    }
    flush(&mut open, &mut body, &mut out);
    out
}

fn extracted(h: Header, body: &[&str]) -> Record {
    Record {
        line: h.line,
        observe: h.key.clone(),
        source_ref: Some(SourceRef::Text(h.key.clone())),
        source_key: h.key,
        decision: h.decision,
        grounds: road_grounds(body),
        blame: None,
        authority: None,
        jurisdiction: None,
        provenance: None,
    }
}

/// `gitlog:` — a `## ` line opens a record keyed by its first round/issue token; a header without
/// one opens nothing (its section is discarded).
pub fn gitlog(text: &str) -> Vec<Record> {
    blocks(text, |n, line| {
        let rest = line.strip_prefix("## ")?;
        let Some(key) = first_round_token(rest) else {
            return Some(None);
        };
        let after = rest.split_once(key).map_or(rest, |(_, a)| a);
        let decision = after.trim_start_matches([' ', '—', '-', ':']).trim();
        let decision = if decision.is_empty() {
            rest.trim()
        } else {
            decision
        };
        Some(Some(Header {
            line: n,
            key: key.to_string(),
            decision: decision.to_string(),
        }))
    })
}

/// `to-human:` and `escalation:` (one reader) — a line that, after leading `#` and spaces, starts
/// with `RESOLVED` or `FLAG` opens a record. `<key part>: <decision>`; without a colon the rest is
/// both. The key is the first round/issue token of the key part, else the whole part. Neither
/// keyword sets authority.
pub fn resolved_flag(text: &str) -> Vec<Record> {
    blocks(text, |n, line| {
        let lead = line.trim_start_matches(['#', ' ']);
        let rest = lead
            .strip_prefix("RESOLVED")
            .or_else(|| lead.strip_prefix("FLAG"))?
            .trim();
        let (key_part, decision) = match rest.split_once(':') {
            Some((k, d)) => (k.trim(), d.trim()),
            None => (rest, rest),
        };
        let key = first_round_token(key_part).unwrap_or(key_part);
        Some(Some(Header {
            line: n,
            key: key.to_string(),
            decision: decision.to_string(),
        }))
    })
}

/// `decisions-immutable:` — a `## ` line whose trimmed text (after an optional leading `§`)
/// begins with digits opens section `§<digits>`; other `## ` lines are body lines.
pub fn decisions_immutable(text: &str) -> Vec<Record> {
    blocks(text, |n, line| {
        let rest = line.strip_prefix("## ")?.trim();
        let numbered = rest.trim_start_matches('§');
        let digits_end = numbered
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(numbered.len());
        if digits_end == 0 {
            return None;
        }
        let decision = numbered[digits_end..]
            .trim_start_matches(['.', ' ', ':', '—', '-'])
            .trim();
        Some(Some(Header {
            line: n,
            key: format!("§{}", &numbered[..digits_end]),
            decision: decision.to_string(),
        }))
    })
}

// ---------------------------------------------------------------------------------------------
// --jurisdiction-map

/// Whether a trimmed map line is a comment. **[REC]** (commands.md §8.5): only when `#` is
/// followed by a non-digit or ends the line, so issue keys like `#1194 C` can be mapped. Upstream
/// skips every `#` line.
pub fn is_map_comment(line: &str) -> bool {
    line.strip_prefix('#')
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// Parse a `--jurisdiction-map` file: `<source_key> <bucket>` per line, blank and comment lines
/// skipped, a later line for the same key overriding an earlier one.
pub fn jurisdiction_map(text: &str) -> Result<HashMap<String, String>, Refusal> {
    let mut map = HashMap::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || is_map_comment(line) {
            continue;
        }
        let mut tokens = line.split_whitespace();
        match (tokens.next(), tokens.next(), tokens.next()) {
            (Some(key), Some(bucket), None) => {
                vocab::check_jurisdiction(bucket).map_err(|e| {
                    refuse(
                        "map_line",
                        format!("jurisdiction-map line {}: {e}", q(line)),
                    )
                })?;
                map.insert(key.to_string(), bucket.to_string());
            }
            _ => {
                return Err(refuse(
                    "map_line",
                    format!(
                        "jurisdiction-map line {}: expected `<source_key> <bucket>`",
                        q(line)
                    ),
                ))
            }
        }
    }
    Ok(map)
}

/// Read the map the way upstream does: the caller's read error first, then the lines.
pub fn read_jurisdiction_map(
    path: &str,
    text: Option<&str>,
    read_error: Option<&str>,
) -> Result<HashMap<String, String>, Refusal> {
    match (text, read_error) {
        (_, Some(e)) => Err(Refusal::io(format!("reading {path}: {e}"))),
        (Some(t), None) => jurisdiction_map(t),
        (None, None) => Err(Refusal::io(format!(
            "reading {path}: the caller sent neither its contents nor a read error"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(extra: &str) -> String {
        format!(
            r#"{{"kind":"ev-decision-intake","decision":"no Redis","grounds":[],"source_ref":"R1","provenance":"imported"{extra}}}"#
        )
    }

    fn canon_err(text: &str) -> String {
        canonical(text).expect_err("refused").message
    }

    #[test]
    fn spec_shape_read_error_and_kind_are_checked_in_that_order() {
        assert_eq!(
            read_source("nocolon", None, None).unwrap_err().message,
            "--source expects <kind>:<path>, got \"nocolon\""
        );
        assert_eq!(
            read_source(
                "bogus:missing.md",
                None,
                Some("No such file or directory (os error 2)")
            )
            .unwrap_err()
            .message,
            "reading missing.md: No such file or directory (os error 2)"
        );
        assert_eq!(
            read_source("bogus:x.md", Some(""), None).unwrap_err().message,
            "unknown source kind \"bogus\" (expected canonical | gitlog | to-human | decisions-immutable | escalation)"
        );
        // The split is at the first colon: the rest (colons included) is the path.
        assert_eq!(split_spec("gitlog:a:b").expect("splits"), ("gitlog", "a:b"));
    }

    #[test]
    fn every_canonical_refusal_in_the_contracts_words() {
        let cases: Vec<(String, &str)> = vec![
            ("{nope".into(), "canonical line 1: not JSON: key must be a string at line 1 column 2"),
            ("[1]".into(), "canonical line 1: not a JSON object"),
            (line(r#","zeta":1,"id":"x""#), "canonical line 1: field outside closed schema: id"),
            (
                r#"{"kind":"notes","decision":"d","grounds":[]}"#.into(),
                "canonical line 1: not an ev-decision-intake record (kind=Some(\"notes\"))",
            ),
            (
                r#"{"decision":"d","grounds":[]}"#.into(),
                "canonical line 1: not an ev-decision-intake record (kind=None)",
            ),
            (
                r#"{"kind":7,"decision":"d","grounds":[]}"#.into(),
                "canonical line 1: not an ev-decision-intake record (kind=None)",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":5,"grounds":[]}"#.into(),
                "canonical line 1: missing or non-string field: decision",
            ),
            (
                r#"{"kind":"ev-decision-intake","grounds":[]}"#.into(),
                "canonical line 1: missing or non-string field: decision",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"  ","grounds":[]}"#.into(),
                "canonical line 1: decision is empty",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":{}}"#.into(),
                "canonical line 1: grounds missing/not array",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d"}"#.into(),
                "canonical line 1: grounds missing/not array",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":[{"claim":"c","supports":"maybe"}]}"#.into(),
                "canonical line 1: invalid supports: maybe",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":[{"claim":"","supports":"chosen"}]}"#.into(),
                "canonical line 1: ground claim is empty",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":[{"claim":"c","supports":"chosen","check":{"by":"test","ref":"t","verified_at_sha":"d308afac1b2c3d4e5f60718293a4b5c6d7e8f901","liveness":{"platforms":["p"],"triggered_by":["t"],"surfaces":["s"]},"flaky":true}}]}"#.into(),
                "canonical line 1: test check: field outside closed schema: flaky",
            ),
            (
                line(r#","authority":"boss""#),
                "canonical line 1: authority must be user-ruled or agent-disposable",
            ),
            (
                line(r#","jurisdiction":"E""#),
                "canonical line 1: jurisdiction must be one of A, B, C, D (got \"E\")",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":[],"source_ref":"R1","provenance":"self-asserted"}"#.into(),
                "canonical line 1: provenance must be one of imported, agent-proposed, human-now (got \"self-asserted\")",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":[],"source_ref":"R1"}"#.into(),
                "canonical line 1: a canonical record must declare provenance (imported | agent-proposed | human-now) — a live proposal is agent-proposed; backfill is imported",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":[],"source_ref":"R1","provenance":7}"#.into(),
                "canonical line 1: a canonical record must declare provenance (imported | agent-proposed | human-now) — a live proposal is agent-proposed; backfill is imported",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":[],"source_ref":"","provenance":"imported"}"#.into(),
                "canonical line 1: source_ref string is empty",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":[],"source_ref":{},"provenance":"imported"}"#.into(),
                "canonical line 1: source_ref object is empty",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":[],"source_ref":[1],"provenance":"imported"}"#.into(),
                "canonical line 1: source_ref must be a non-empty string or object",
            ),
            (
                r#"{"kind":"ev-decision-intake","decision":"d","grounds":[],"observe":"no token","provenance":"imported"}"#.into(),
                "canonical line 1: a record needs a source_ref (or a round/#issue token in observe) for idempotent re-import",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(canon_err(&text), want, "for {text}");
        }
    }

    #[test]
    fn canonical_line_numbers_count_skipped_lines() {
        let good = line("");
        let text =
            format!("# header\n\n{good}\n{good}\n  \n# x\n{{\"kind\":\"ev-decision-intake\"}}\n");
        assert_eq!(
            canon_err(&text),
            "canonical line 7: missing or non-string field: decision"
        );
    }

    #[test]
    fn canonical_fields_map_onto_the_record() {
        let text = r#"{"kind":"ev-decision-intake","decision":" rate-limit at the edge ","observe":"round R1043","grounds":[{"claim":"edge sees all","supports":"chosen"},{"claim":"double counts","supports":"rejected:app-tier"}],"blame":" Wang Yu ","authority":"user-ruled","jurisdiction":"C","source_ref":{"sprint":"S7","round":"R1"},"provenance":"imported"}"#;
        let r = &canonical(text).expect("valid")[0];
        assert_eq!(
            r.decision, " rate-limit at the edge ",
            "decision is kept verbatim"
        );
        assert_eq!(r.observe, "round R1043");
        assert_eq!(r.grounds.len(), 2);
        assert_eq!(r.blame.as_deref(), Some(" Wang Yu "));
        assert_eq!(r.authority.as_deref(), Some("user-ruled"));
        assert_eq!(r.jurisdiction.as_deref(), Some("C"));
        assert_eq!(r.provenance.as_deref(), Some("imported"));
        assert_eq!(r.source_key, r#"{"round":"R1","sprint":"S7"}"#);
        assert_eq!(r.line, 1);
    }

    #[test]
    fn non_string_tags_read_as_absent_and_observe_supplies_the_key() {
        let text = r#"{"kind":"ev-decision-intake","decision":"d","grounds":[],"observe":"see round r12, ok","authority":5,"jurisdiction":null,"blame":["x"],"provenance":"agent-proposed"}"#;
        let r = &canonical(text).expect("valid")[0];
        assert_eq!(r.authority, None);
        assert_eq!(r.jurisdiction, None);
        assert_eq!(r.blame, None);
        assert_eq!(r.source_key, "r12");
        assert_eq!(r.source_ref, None);
    }

    #[test]
    fn gitlog_headers_keys_and_roads() {
        let text = "preamble\n- rejected: Nope: ignored before any header\n\
## R2289 QA — restore-safety counter DB-backed\n\
- rejected: Redis: would add a new infra dependency\n\
  * reject Memcached : no persistence \n\
we rejected Kafka in prose\n\
- rejected: : empty option\n\
## no token here\n\
- rejected: X: discarded with its header\n\
## #12\n\
## R7: decide: with colons\n";
        let r = gitlog(text);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].source_key, "R2289");
        assert_eq!(r[0].decision, "QA — restore-safety counter DB-backed");
        assert_eq!(r[0].observe, "R2289");
        assert_eq!(r[0].source_ref, Some(SourceRef::Text("R2289".into())));
        assert_eq!(r[0].line, 3);
        let g: Vec<(&str, &str)> = r[0]
            .grounds
            .iter()
            .map(|g| (g.supports.as_str(), g.claim.as_str()))
            .collect();
        assert_eq!(
            g,
            vec![
                ("rejected:Redis", "would add a new infra dependency"),
                ("rejected:Memcached", "no persistence")
            ]
        );
        assert_eq!(r[1].source_key, "#12");
        assert_eq!(
            r[1].decision, "#12",
            "an empty remainder falls back to the header"
        );
        assert!(r[1].grounds.is_empty());
        assert_eq!(r[2].decision, "decide: with colons");
    }

    #[test]
    fn resolved_and_flag_blocks_read_alike() {
        let text = "### RESOLVED R555: restore-safety counter DB-backed; reject Redis\n\
- rejected: Redis: a new infra dependency\n\
### FLAG R600: multi-pod relax policy still open\n\
FLAGGED: x y\n\
## RESOLVED ticket 9 and #44: with key part\n\
# FLAG no colon R3 here\n";
        let r = resolved_flag(text);
        let got: Vec<(&str, &str, usize)> = r
            .iter()
            .map(|r| (r.source_key.as_str(), r.decision.as_str(), r.grounds.len()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("R555", "restore-safety counter DB-backed; reject Redis", 1),
                ("R600", "multi-pod relax policy still open", 0),
                ("GED", "x y", 0),
                ("#44", "with key part", 0),
                ("R3", "no colon R3 here", 0),
            ]
        );
        assert!(r
            .iter()
            .all(|r| r.authority.is_none() && r.provenance.is_none()));
    }

    #[test]
    fn decisions_immutable_sections() {
        let text = "## intro\n## 1. freeze the retrieval schema for v2\n\
- rejected: pgvector: would lock our schema\n\
## not numbered\n\
- rejected: Mongo: counts for section 1\n\
## §2 — restore-safety counter\n\
##3 not a header\n";
        let r = decisions_immutable(text);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].source_key, "§1");
        assert_eq!(r[0].decision, "freeze the retrieval schema for v2");
        assert_eq!(r[0].grounds.len(), 2);
        assert_eq!(r[1].source_key, "§2");
        assert_eq!(r[1].decision, "restore-safety counter");
    }

    #[test]
    fn jurisdiction_map_lines_comments_and_refusals() {
        let m =
            jurisdiction_map("# buckets\n#\n\nR1 A\n  R2\tC  \n#1194 C\nR1 D\n").expect("parses");
        assert_eq!(
            m.get("R1").map(String::as_str),
            Some("D"),
            "later lines win"
        );
        assert_eq!(m.get("R2").map(String::as_str), Some("C"));
        assert_eq!(
            m.get("#1194").map(String::as_str),
            Some("C"),
            "[REC] an issue key is a map line, not a comment"
        );
        assert_eq!(m.len(), 3);
        assert_eq!(
            jurisdiction_map("R1 A extra").unwrap_err().message,
            "jurisdiction-map line \"R1 A extra\": expected `<source_key> <bucket>`"
        );
        assert_eq!(
            jurisdiction_map("#12").unwrap_err().message,
            "jurisdiction-map line \"#12\": expected `<source_key> <bucket>`"
        );
        assert_eq!(
            jurisdiction_map("R1 E").unwrap_err().message,
            "jurisdiction-map line \"R1 E\": jurisdiction must be one of A, B, C, D (got \"E\")"
        );
        assert_eq!(
            read_jurisdiction_map("m.txt", None, Some("Is a directory (os error 21)"))
                .unwrap_err()
                .message,
            "reading m.txt: Is a directory (os error 21)"
        );
    }

    #[test]
    fn store_keys_prefer_source_ref_then_observe() {
        let v: Value = serde_json::from_str(r#"{"source_ref":{"z":"1","a":"2"},"observe":"R9"}"#)
            .expect("json");
        assert_eq!(
            store_key_of_value(&v).as_deref(),
            Some(r#"{"a":"2","z":"1"}"#)
        );
        let v: Value = serde_json::from_str(r#"{"source_ref":5,"observe":"R9"}"#).expect("json");
        assert_eq!(store_key_of_value(&v).as_deref(), Some("5"));
        let v: Value = serde_json::from_str(r#"{"observe":"ran #9, then R2"}"#).expect("json");
        assert_eq!(store_key_of_value(&v).as_deref(), Some("#9"));
        let v: Value = serde_json::from_str(r#"{"observe":"none"}"#).expect("json");
        assert_eq!(store_key_of_value(&v), None);
    }
}
