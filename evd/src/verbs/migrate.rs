//! `migrate`: bring history in (backfill), compare a source with the store (reconcile), and
//! describe a harvested test binding (bind-check). commands.md §8.
//!
//! Backfill is atomic (**[REC]** §8.6): every record is resolved and passes the ingest gates and
//! the write path's detect-only lock before the first tick is written, so a refused run leaves
//! the store exactly as it was; then the whole batch is appended with one HEAD move
//! ([`OpenStore::append_batch`]).

use std::collections::{BTreeSet, HashMap, HashSet};

use proto::json::{o, q};
use proto::model::{has_test_check, Check};
use proto::rpc::{
    BackfillRequest, BackfillResult, BindCheckRequest, BindCheckResult, Discrepancy,
    HarvestedCheck, LivenessLists, MigrateProgress, ReconcileRequest, ReconcileResult, Refusal,
    TagDiff, Warning,
};
use proto::vocab;
use serde_json::{Map, Value};

use super::write_path::{self, NewTick};
use crate::intake::{self, Record};
use crate::open::OpenStore;
use crate::store::Entry;

/// Where a backfill reports how far it has got: phases `parse`, `plan`, `stage`, `write`. Called from the store's own thread: keep it cheap.
pub type Progress<'a> = &'a mut dyn FnMut(MigrateProgress);

/// A progress sink that ignores everything.
pub fn no_progress(_: MigrateProgress) {}

fn report(progress: &mut dyn FnMut(MigrateProgress), phase: &str, done: u64, total: u64) {
    progress(MigrateProgress {
        phase: phase.to_string(),
        done,
        total,
    });
}

/// The three tags a re-import is compared on, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tags {
    authority: Option<String>,
    jurisdiction: Option<String>,
    provenance: Option<String>,
}

/// What the key index knows about a key: the file that holds it, that file's parent, and (when
/// it is a readable tick, or was planned in this pass) its tags to compare a re-import against.
#[derive(Debug, Clone)]
struct Indexed {
    file: String,
    parent: String,
    tags: Option<Tags>,
}

/// The store's key index (§8.6 step 3): every tick file by its source_ref key, else the first
/// round/issue token of its observe; files without a key are counted. Files are visited in name
/// order and a later file wins a shared key. Fails like every whole-store read when a file is
/// not JSON.
fn index_store(store: &mut OpenStore) -> Result<(HashMap<String, Indexed>, usize), Refusal> {
    enum Seen {
        Keyed(String, Indexed),
        Unkeyed,
        Raw(String),
    }
    let seen: Vec<Seen> = store
        .entries()?
        .into_iter()
        .filter_map(|(name, e)| match e {
            Entry::Tick(p) => Some(match intake::store_key_of_tick(&p.tick()) {
                Some(k) => Seen::Keyed(
                    k,
                    Indexed {
                        file: name.to_string(),
                        parent: p.parent_id().to_string(),
                        // Upstream compares only against a file it can open by id.
                        tags: vocab::is_tick_id(name).then(|| Tags {
                            authority: p.authority().map(str::to_string),
                            jurisdiction: p.jurisdiction().map(str::to_string),
                            provenance: p.provenance().map(str::to_string),
                        }),
                    },
                ),
                None => Seen::Unkeyed,
            }),
            Entry::Invalid(_) => Some(Seen::Raw(name.to_string())),
            _ => None,
        })
        .collect();
    let mut index = HashMap::new();
    let mut unkeyed = 0;
    for s in seen {
        match s {
            Seen::Keyed(k, v) => {
                index.insert(k, v);
            }
            Seen::Unkeyed => unkeyed += 1,
            // JSON but not a tick: keyed from its raw fields, never compared.
            Seen::Raw(name) => {
                let raw = store.raw_value(&name);
                match raw.as_ref().and_then(intake::store_key_of_value) {
                    Some(k) => {
                        let parent = raw
                            .as_ref()
                            .and_then(|v| v.get("parent_id"))
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        index.insert(
                            k,
                            Indexed {
                                file: name,
                                parent,
                                tags: None,
                            },
                        );
                    }
                    None => unkeyed += 1,
                }
            }
        }
    }
    Ok((index, unkeyed))
}

/// A file a caller named: the text or read error it sent, else the absolute `file` read here
/// (evd serves only its own uid, so it reads exactly what the caller could).
fn contents(
    text: &Option<String>,
    read_error: &Option<String>,
    file: &Option<String>,
) -> (Option<String>, Option<String>) {
    match (text, read_error, file) {
        // Read as the caller would (links followed), but never waiting on a FIFO.
        (None, None, Some(f)) => {
            match crate::sys::fsio::read_followed(std::path::Path::new(f), 1 << 30).and_then(|b| {
                String::from_utf8(b).map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "stream did not contain valid UTF-8",
                    )
                })
            }) {
                Ok(t) => (Some(t), None),
                Err(e) => (None, Some(e.to_string())),
            }
        }
        _ => (text.clone(), read_error.clone()),
    }
}

/// Parse every source in order, then the map (§8.2, §8.5).
fn read_inputs(
    req: &BackfillRequest,
    progress: &mut dyn FnMut(MigrateProgress),
) -> Result<(Vec<Record>, HashMap<String, String>), Refusal> {
    let mut records = Vec::new();
    let total = req.sources.len() as u64;
    for (i, s) in req.sources.iter().enumerate() {
        let (text, err) = contents(&s.text, &s.read_error, &s.file);
        records.extend(intake::read_source(
            &s.spec,
            text.as_deref(),
            err.as_deref(),
        )?);
        report(progress, "parse", i as u64 + 1, total);
    }
    let map = match &req.jurisdiction_map {
        Some(m) => {
            let (text, err) = contents(&m.text, &m.read_error, &m.file);
            intake::read_jurisdiction_map(&m.path, text.as_deref(), err.as_deref())?
        }
        None => HashMap::new(),
    };
    Ok((records, map))
}

fn gate(key: &str, message: impl std::fmt::Display) -> Refusal {
    Refusal::refused("ingest_gate", format!("source {}: {message}", q(key)))
}

/// The ingest gates of §8.6 step 5.4, in order.
fn ingest_gates(r: &Record, tags: &Tags) -> Result<(), Refusal> {
    let key = r.source_key.as_str();
    if vocab::is_detect_only(tags.jurisdiction.as_deref()) && has_test_check(&r.grounds) {
        return Err(gate(
            key,
            format!(
                "a {} jurisdiction (detect-only) decision cannot carry a runnable test check",
                tags.jurisdiction.as_deref().unwrap_or("")
            ),
        ));
    }
    let imported = tags.provenance.as_deref() == Some(vocab::IMPORTED);
    for g in &r.grounds {
        if let Some(Check::Test {
            counter_test: None, ..
        }) = &g.check
        {
            if !imported {
                return Err(gate(
                    key,
                    format!(
                        "a harvested test check (no counter-test) is allowed only for imported history, not {}",
                        tags.provenance.as_deref().unwrap_or(vocab::HUMAN_NOW)
                    ),
                ));
            }
        }
    }
    for g in r.grounds.iter().filter(|g| g.is_rejected()) {
        if let Some(Check::Test { counter_test, .. }) = &g.check {
            if tags.authority.as_deref() != Some(vocab::USER_RULED) {
                return Err(gate(
                    key,
                    "a rejected road can carry a tripwire test only when authority=user-ruled",
                ));
            }
            if counter_test.is_none() {
                return Err(gate(
                    key,
                    "a rejected-road tripwire requires a counter-test (no harvested tripwire)",
                ));
            }
        }
    }
    // Write/read symmetry: a RESOLVED/FLAG header with nothing before its colon yields an empty
    // key, and a tick whose source_ref is "" is one the reader (and `verify`) rejects. Upstream
    // writes it anyway; evd refuses in the reader's words.
    if key.is_empty() {
        return Err(gate(key, "source_ref string is empty"));
    }
    Ok(())
}

/// The discrepancy line upstream prints, with the remedy that exists (**[REC]** §8.6).
fn discrepancy_line(d: &Discrepancy) -> String {
    let diffs: Vec<String> = d
        .diffs
        .iter()
        .map(|x| {
            format!(
                "{} stored={} incoming={}",
                x.tag,
                o(x.stored.as_deref()),
                o(x.incoming.as_deref())
            )
        })
        .collect();
    format!(
        "discrepancy: source {} (tick {}): {} — NOT applied (ticks are immutable; resolve with `evctl supersede {}`)",
        q(&d.source_key),
        d.tick_id,
        diffs.join("; "),
        d.tick_id
    )
}

fn diff_tags(stored: &Tags, incoming: &Tags) -> Vec<TagDiff> {
    [
        ("authority", &stored.authority, &incoming.authority),
        ("jurisdiction", &stored.jurisdiction, &incoming.jurisdiction),
        ("provenance", &stored.provenance, &incoming.provenance),
    ]
    .into_iter()
    .filter(|(_, s, i)| s != i)
    .map(|(tag, s, i)| TagDiff {
        tag: tag.to_string(),
        stored: s.clone(),
        incoming: i.clone(),
    })
    .collect()
}

/// The outcome of planning a backfill: the counts, the stderr lines, and the ticks to write.
struct Plan {
    result: BackfillResult,
    ticks: Vec<proto::Tick>,
}

/// §8.6 steps 3–5 without writing: every record resolved, skipped, counted as a gap, or built
/// into the tick it becomes. Any refusal carries the lines upstream would have printed before it.
fn plan(
    store: &mut OpenStore,
    records: Vec<Record>,
    map: &HashMap<String, String>,
    fallback_blame: Option<&str>,
    dry_run: bool,
    progress: &mut dyn FnMut(MigrateProgress),
) -> Result<Plan, Refusal> {
    let (mut index, _) = index_store(store)?;
    let initial: HashSet<String> = index.keys().cloned().collect();
    let head = store.head()?;
    let first_is_stored_genesis = records
        .first()
        .and_then(|r| index.get(&r.source_key))
        .is_some_and(|e| e.parent.is_empty());
    // Where upstream's pass would place the next record (for re-link detection and previews)…
    let mut prospective = if first_is_stored_genesis {
        String::new()
    } else {
        head.clone()
    };
    // …and where a real write puts it: always on the tip.
    let mut tip = head;
    let mut out = BackfillResult {
        dry_run,
        ..BackfillResult::default()
    };
    let mut ticks = Vec::new();
    let mut warnings: Vec<Warning> = Vec::new();
    let total = records.len() as u64;
    for (i, r) in records.into_iter().enumerate() {
        if i % 1024 == 1023 {
            report(progress, "plan", i as u64 + 1, total);
        }
        let with = |e: Refusal, w: &[Warning]| e.with_warnings(w.to_vec());
        let key = r.source_key.clone();
        let jurisdiction = match (r.jurisdiction.as_deref(), map.get(&key)) {
            (Some(inline), Some(mapped)) if inline != mapped => {
                return Err(with(
                    Refusal::refused(
                        "jurisdiction_conflict",
                        format!(
                            "source {}: inline jurisdiction {} conflicts with the --jurisdiction-map entry {}",
                            q(&key),
                            q(inline),
                            q(mapped)
                        ),
                    ),
                    &warnings,
                ));
            }
            (Some(inline), _) => Some(inline.to_string()),
            (None, mapped) => mapped.cloned(),
        };
        let tags = Tags {
            authority: r.authority.clone(),
            jurisdiction,
            provenance: Some(
                r.provenance
                    .clone()
                    .unwrap_or_else(|| vocab::IMPORTED.to_string()),
            ),
        };
        if let Some(found) = index.get(&key) {
            if initial.contains(&key) && found.parent != prospective {
                out.relinked += 1;
            }
            if let Some(stored) = &found.tags {
                let diffs = diff_tags(stored, &tags);
                if !diffs.is_empty() {
                    let d = Discrepancy {
                        source_key: key.clone(),
                        tick_id: found.file.clone(),
                        diffs,
                    };
                    warnings.push(Warning {
                        kind: "discrepancy".into(),
                        message: discrepancy_line(&d),
                    });
                    out.discrepancies.push(d);
                }
            }
            prospective = found.file.clone();
            out.skipped += 1;
            continue;
        }
        let blame = match r.blame.as_deref().or(fallback_blame) {
            Some(b) if !b.trim().is_empty() => b.trim().to_string(),
            // No author and no fallback: never invented. The record stays a gap (and unindexed).
            _ => {
                out.source_only_gaps += 1;
                continue;
            }
        };
        ingest_gates(&r, &tags).map_err(|e| with(e, &warnings))?;
        if dry_run {
            // No write path on a preview (and so no R3 lines): the id it would take, indexed
            // without tags, as upstream's probe is not on disk to compare against.
            let probe = proto::id::tick_id(&r.decision, &r.observe, &r.grounds, &prospective);
            index.insert(
                key,
                Indexed {
                    file: probe.clone(),
                    parent: std::mem::replace(&mut prospective, probe),
                    tags: None,
                },
            );
            out.imported += 1;
            continue;
        }
        // The single write path, steps 1–2: the detect-only lock, then the R3 lines.
        let lint = write_path::checks(
            &r.decision,
            &r.observe,
            &r.grounds,
            tags.jurisdiction.as_deref(),
        )
        .map_err(|e| with(e, &warnings))?;
        warnings.extend(lint);
        let tick = write_path::mint(
            NewTick {
                decision: r.decision,
                observe: r.observe,
                grounds: r.grounds,
                blame,
                authority: tags.authority.clone(),
                jurisdiction: tags.jurisdiction.clone(),
                source_ref: r.source_ref,
                provenance: tags.provenance.clone(),
                supersedes: None,
                ratifies: None,
            },
            tip,
            crate::engine::clock::now(),
        );
        tip = tick.id.clone();
        index.insert(
            key,
            Indexed {
                file: tick.id.clone(),
                parent: std::mem::replace(&mut prospective, tick.id.clone()),
                tags: Some(tags),
            },
        );
        out.imported += 1;
        ticks.push(tick);
    }
    report(progress, "plan", total, total);
    out.warnings = warnings;
    Ok(Plan { result: out, ticks })
}

/// `migrate --source …` (§8.6): parse every source and the map, resolve every record against the
/// store, and — unless it is a dry run — append the new ticks in one batch and log a `migrate`
/// event. The caller holds the store lock.
pub fn backfill(
    store: &mut OpenStore,
    req: &BackfillRequest,
    progress: &mut dyn FnMut(MigrateProgress),
) -> Result<BackfillResult, Refusal> {
    let (mut records, map) = read_inputs(req, progress)?;
    // Stable: ties keep source order, then line order.
    records.sort_by(|a, b| a.source_key.cmp(&b.source_key));
    store.require()?;
    let Plan { mut result, ticks } = plan(
        store,
        records,
        &map,
        req.blame.as_deref(),
        req.dry_run,
        progress,
    )?;
    if req.dry_run {
        return Ok(result);
    }
    let warnings = result.warnings.clone();
    store
        .append_batch(&ticks, &mut |phase, done, total| {
            report(progress, phase, done, total)
        })
        .map_err(|e| e.with_warnings(warnings))?;
    for t in &ticks {
        store.journal_tick("migrate", t);
    }
    result.written_ids = ticks.into_iter().map(|t| t.id).collect();
    store.append_event(&migrate_event());
    Ok(result)
}

/// The `migrate` event: `op` and `ts`, no tick fields.
fn migrate_event() -> String {
    let mut o = Map::new();
    o.insert("op".into(), "migrate".into());
    o.insert(
        "ts".into(),
        crate::engine::clock::format(crate::engine::clock::now()).into(),
    );
    proto::json::compact(&Value::Object(o))
}

/// `migrate --reconcile --against …` (§8.8): parse the source, then join its keys with the
/// store's. Writes nothing.
pub fn reconcile(
    store: &mut OpenStore,
    req: &ReconcileRequest,
) -> Result<ReconcileResult, Refusal> {
    let a = &req.against;
    let (text, err) = contents(&a.text, &a.read_error, &a.file);
    let records = intake::read_source(&a.spec, text.as_deref(), err.as_deref())?;
    store.require()?;
    let (index, un_keyable) = index_store(store)?;
    let source_keys: BTreeSet<&str> = records.iter().map(|r| r.source_key.as_str()).collect();
    let source_only_keys: Vec<String> = source_keys
        .iter()
        .filter(|k| !index.contains_key(**k))
        .map(|k| k.to_string())
        .collect();
    Ok(ReconcileResult {
        in_both: source_keys.len() - source_only_keys.len(),
        source_only: source_only_keys.len(),
        store_only: index
            .keys()
            .filter(|k| !source_keys.contains(k.as_str()))
            .count(),
        un_keyable,
        source_only_keys,
    })
}

/// `migrate --bind-check …` (§8.9): the harvested check a selector would bind. Needs no store.
pub fn bind_check(req: &BindCheckRequest) -> Result<BindCheckResult, Refusal> {
    let sha = super::decide::resolve_sha(req.verified_at_sha.as_deref(), &req.context)?;
    if req.selector.trim().is_empty() {
        return Err(Refusal::refused(
            "harvest_incomplete",
            "a harvested binding requires a non-empty test reference",
        ));
    }
    if req.platforms.is_empty() || req.triggered_by.is_empty() || req.surfaces.is_empty() {
        return Err(Refusal::refused(
            "harvest_incomplete",
            "a harvested binding requires at least one platform, triggered-by, and surface (no half-harvest)",
        ));
    }
    Ok(BindCheckResult {
        check: HarvestedCheck {
            by: "test".into(),
            reference: req.selector.clone(),
            verified_at_sha: sha,
            liveness: LivenessLists {
                platforms: req.platforms.clone(),
                triggered_by: req.triggered_by.clone(),
                surfaces: req.surfaces.clone(),
            },
        },
    })
}

/// The stdout line of a backfill (§8.7).
pub fn summary_line(r: &BackfillResult) -> String {
    let mut s = format!(
        "{}imported {}, skipped {}, re-linked {}, {} source-only gap(s)",
        if r.dry_run { "(dry-run) " } else { "" },
        r.imported,
        r.skipped,
        r.relinked,
        r.source_only_gaps
    );
    if !r.discrepancies.is_empty() {
        s.push_str(&format!(
            ", {} discrepancy(ies) — see above",
            r.discrepancies.len()
        ));
    }
    s
}

/// The stdout line of a reconcile (§8.8).
pub fn reconcile_line(r: &ReconcileResult) -> String {
    format!(
        "reconcile: in-both {}, source-only {} (the capture gap), store-only {}, un-keyable {}",
        r.in_both, r.source_only, r.store_only, r.un_keyable
    )
}

/// The stdout line of a bind-check (§8.9): lists in the order given.
pub fn bind_check_line(r: &BindCheckResult) -> String {
    let l = &r.check.liveness;
    format!(
        "harvested check (falsifiability not proven; no counter-test): {} on [{}] triggered-by [{}] surface [{}]",
        q(&r.check.reference),
        l.platforms.join(", "),
        l.triggered_by.join(", "),
        l.surfaces.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::rpc::{Context, SourceInput};

    fn store() -> (tempfile::TempDir, OpenStore) {
        let d = tempfile::tempdir().expect("tempdir");
        let mut s = OpenStore::new(d.path().to_path_buf());
        assert!(s.init().expect("init"));
        s.acquire("test").expect("lock");
        (d, s)
    }

    fn canon(lines: &[&str]) -> SourceInput {
        SourceInput {
            spec: "canonical:in.jsonl".into(),
            file: None,
            text: Some(lines.join("\n")),
            read_error: None,
        }
    }

    fn rec(key: &str, extra: &str) -> String {
        format!(
            r#"{{"kind":"ev-decision-intake","decision":"decision {key}","grounds":[],"source_ref":"{key}","provenance":"imported"{extra}}}"#
        )
    }

    fn req(sources: Vec<SourceInput>, blame: Option<&str>, dry_run: bool) -> BackfillRequest {
        BackfillRequest {
            context: Context::default(),
            sources,
            jurisdiction_map: None,
            blame: blame.map(str::to_string),
            dry_run,
        }
    }

    fn snapshot(s: &OpenStore) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(s.ticks_dir())
            .expect("ls")
            .flatten()
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).expect("read"),
                )
            })
            .collect();
        v.sort();
        v.push((
            "HEAD".into(),
            std::fs::read(s.ev_dir().join("HEAD")).expect("HEAD"),
        ));
        v
    }

    #[test]
    fn imports_sorted_by_key_as_one_chain_then_skips_on_rerun() {
        let (_d, mut s) = store();
        let src = canon(&[
            &rec("R2", ""),
            &rec("R1", ""),
            &rec("R3", r#","blame":"Ann""#),
        ]);
        let r = backfill(
            &mut s,
            &req(vec![src.clone()], None, false),
            &mut no_progress,
        )
        .expect("imports");
        assert_eq!(
            summary_line(&r),
            "imported 1, skipped 0, re-linked 0, 2 source-only gap(s)"
        );
        let r = backfill(
            &mut s,
            &req(vec![src.clone()], Some("Bob"), false),
            &mut no_progress,
        )
        .expect("imports");
        assert_eq!(
            summary_line(&r),
            "imported 2, skipped 1, re-linked 1, 0 source-only gap(s)"
        );
        assert_eq!(s.head().expect("head"), r.written_ids[1]);
        let again = backfill(
            &mut s,
            &req(vec![src], Some("Bob"), false),
            &mut no_progress,
        )
        .expect("re-run");
        assert_eq!(again.imported, 0);
        assert_eq!(again.skipped, 3);
        assert!(again.written_ids.is_empty());
    }

    #[test]
    fn a_refused_run_writes_nothing_even_after_good_records() {
        let (_d, mut s) = store();
        backfill(
            &mut s,
            &req(vec![canon(&[&rec("R0", "")])], Some("b"), false),
            &mut no_progress,
        )
        .expect("seed");
        let before = snapshot(&s);
        let bad_grounds = r#","grounds":[{"claim":"c","supports":"chosen","check":{"by":"test","ref":"t","verified_at_sha":"d308afac1b2c3d4e5f60718293a4b5c6d7e8f901","liveness":{"platforms":["p"],"triggered_by":["t"],"surfaces":["s"]}}}],"jurisdiction":"C""#;
        let line = rec("R9", bad_grounds).replace(r#""grounds":[],"#, "");
        let e = backfill(
            &mut s,
            &req(
                vec![canon(&[&rec("R1", ""), &rec("R2", ""), &line])],
                Some("b"),
                false,
            ),
            &mut no_progress,
        )
        .expect_err("gate");
        assert_eq!(
            e.message,
            "source \"R9\": a C jurisdiction (detect-only) decision cannot carry a runnable test check"
        );
        assert_eq!(snapshot(&s), before, "nothing written");
    }

    #[test]
    fn every_gate_and_the_map_conflict_in_upstreams_words() {
        let test = |counter: bool| {
            format!(
                r#"{{"by":"test","ref":"t","verified_at_sha":"d308afac1b2c3d4e5f60718293a4b5c6d7e8f901",{}"liveness":{{"platforms":["p"],"triggered_by":["t"],"surfaces":["s"]}}}}"#,
                if counter {
                    r#""counter_test":"c","#
                } else {
                    ""
                }
            )
        };
        let line = |supports: &str, counter: bool, extra: &str| {
            format!(
                r#"{{"kind":"ev-decision-intake","decision":"d","source_ref":"R5","blame":"b","grounds":[{{"claim":"c","supports":"{supports}","check":{}}}]{extra}}}"#,
                test(counter)
            )
        };
        let cases = [
            (
                line("chosen", true, r#","provenance":"imported","jurisdiction":"D""#),
                None,
                "source \"R5\": a D jurisdiction (detect-only) decision cannot carry a runnable test check",
            ),
            (
                line("chosen", false, r#","provenance":"agent-proposed""#),
                None,
                "source \"R5\": a harvested test check (no counter-test) is allowed only for imported history, not agent-proposed",
            ),
            (
                line("rejected:X", true, r#","provenance":"imported""#),
                None,
                "source \"R5\": a rejected road can carry a tripwire test only when authority=user-ruled",
            ),
            (
                line("rejected:X", false, r#","provenance":"imported","authority":"user-ruled""#),
                None,
                "source \"R5\": a rejected-road tripwire requires a counter-test (no harvested tripwire)",
            ),
            (
                rec("R5", r#","jurisdiction":"A","blame":"b""#),
                Some("R5 B"),
                "source \"R5\": inline jurisdiction \"A\" conflicts with the --jurisdiction-map entry \"B\"",
            ),
        ];
        for (text, map, want) in cases {
            let (_d, mut s) = store();
            let mut r = req(vec![canon(&[&text])], None, false);
            r.jurisdiction_map = map.map(|m| proto::rpc::MapInput {
                path: "map.txt".into(),
                file: None,
                text: Some(m.into()),
                read_error: None,
            });
            let e = backfill(&mut s, &r, &mut no_progress).expect_err("refused");
            assert_eq!(e.message, want);
        }
    }

    #[test]
    fn a_dry_run_counts_without_writing() {
        let (_d, mut s) = store();
        let before = snapshot(&s);
        let r = backfill(
            &mut s,
            &req(
                vec![canon(&[
                    &rec("R1", ""),
                    &rec("R1", r#","authority":"user-ruled""#),
                ])],
                Some("b"),
                true,
            ),
            &mut no_progress,
        )
        .expect("dry run");
        assert_eq!(
            summary_line(&r),
            "(dry-run) imported 1, skipped 1, re-linked 0, 0 source-only gap(s)",
            "a within-pass duplicate of a preview is not compared"
        );
        assert_eq!(snapshot(&s), before);
    }

    #[test]
    fn within_pass_duplicates_are_compared_on_a_real_run() {
        let (_d, mut s) = store();
        let r = backfill(
            &mut s,
            &req(
                vec![canon(&[
                    &rec("R1", ""),
                    &rec("R1", r#","authority":"user-ruled""#),
                ])],
                Some("b"),
                false,
            ),
            &mut no_progress,
        )
        .expect("runs");
        assert_eq!(r.discrepancies.len(), 1);
        assert_eq!(
            r.warnings[0].message,
            format!(
                "discrepancy: source \"R1\" (tick {id}): authority stored=None incoming=Some(\"user-ruled\") — NOT applied (ticks are immutable; resolve with `evctl supersede {id}`)",
                id = r.written_ids[0]
            )
        );
        assert!(summary_line(&r).ends_with(", 1 discrepancy(ies) — see above"));
    }

    #[test]
    fn bind_check_order_sha_then_selector_then_liveness() {
        let mut r = BindCheckRequest {
            selector: " ".into(),
            ..BindCheckRequest::default()
        };
        assert_eq!(
            bind_check(&r).unwrap_err().message,
            "cannot resolve verified_at_sha (not a git repo?) — pass --verified-at-sha"
        );
        r.verified_at_sha = Some("abc".into());
        assert_eq!(
            bind_check(&r).unwrap_err().message,
            "verified_at_sha must be 40 lowercase hex: abc"
        );
        r.verified_at_sha = Some(" d308afac1b2c3d4e5f60718293a4b5c6d7e8f901 ".into());
        assert_eq!(
            bind_check(&r).unwrap_err().message,
            "a harvested binding requires a non-empty test reference"
        );
        r.selector = "pytest t.py".into();
        r.platforms = vec!["mac".into(), "linux".into()];
        assert_eq!(
            bind_check(&r).unwrap_err().message,
            "a harvested binding requires at least one platform, triggered-by, and surface (no half-harvest)"
        );
        r.triggered_by = vec!["a.py".into()];
        r.surfaces = vec!["s".into()];
        assert_eq!(
            bind_check_line(&bind_check(&r).expect("ok")),
            "harvested check (falsifiability not proven; no counter-test): \"pytest t.py\" on [mac, linux] triggered-by [a.py] surface [s]"
        );
    }
}
