//! The chain audit (`verify`), pure: it takes the tick files' names and texts and returns every
//! violation and warning. The caller does the reading.

use std::collections::HashMap;

use proto::id::tick_id;
use proto::json::q;
use proto::model::unknown_top_level_keys;
use proto::{vocab, Tick};
use serde_json::Value;

use crate::engine::lint;

/// One file of `ticks/` as read from disk.
pub struct AuditFile {
    pub name: String,
    /// The file's text, or the whole-store error it causes, worded as upstream words it (an I/O
    /// error such as bad UTF-8 is reported without the file name, as upstream does).
    pub text: Result<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audit {
    pub warnings: Vec<String>,
    pub violations: Vec<String>,
}

/// What one file contributes to the audit: its warnings and violations, and its parent when
/// it parsed as a tick. Most files contribute nothing but the parent, so the lists live behind
/// one optional box (a remembered audit of 100,000 files stays small).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileAudit {
    /// `parent_id` of a file that parsed as a tick, `None` for one that did not.
    pub parent: Option<Box<str>>,
    pub notes: Option<Box<Notes>>,
}

/// A file's warnings and violations, in upstream's order within each kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notes {
    pub unknown_keys: Vec<String>,
    pub imported_r5: Vec<String>,
    pub violations: Vec<String>,
}

/// Audit one file on its own. `Err` is the whole-store failure it causes (see [`audit`]).
pub fn audit_file(
    name: &str,
    text: &Result<String, String>,
    schema_version: u64,
) -> Result<FileAudit, String> {
    let text = text.as_ref().map_err(String::clone)?;
    let v: Value = serde_json::from_str(text).map_err(|e| format!("{name}: {e}"))?;
    let mut notes = Notes::default();
    if let Some(obj) = v.as_object() {
        for k in unknown_top_level_keys(obj) {
            notes.unknown_keys.push(format!(
                "{name}: warning: tolerated unknown top-level field {} (schema_version {schema_version}) — a typo'd field name parses through but is ignored",
                q(&k)
            ));
        }
    }
    let parent = match Tick::from_value(&v) {
        Err(e) => {
            notes.violations.push(format!("{name}: R1/R2 {e}"));
            None
        }
        Ok(t) => {
            per_file(name, &t, &mut notes);
            Some(t.parent_id.into_boxed_str())
        }
    };
    let empty = notes.unknown_keys.is_empty()
        && notes.imported_r5.is_empty()
        && notes.violations.is_empty();
    Ok(FileAudit {
        parent,
        notes: (!empty).then(|| Box::new(notes)),
    })
}

/// Put the per-file audits of a whole `ticks/` together, `files` in file-name order: the
/// tolerated-key warnings, then the imported-R5 ones; each file's violations, then the chain
/// checks over every parsed tick.
pub fn assemble<'a>(files: impl Iterator<Item = (&'a str, &'a FileAudit)>) -> Audit {
    let mut out = Audit::default();
    let mut imported_r5 = Vec::new();
    let mut parents: Vec<(&str, &str)> = Vec::new();
    for (name, f) in files {
        if let Some(n) = &f.notes {
            out.warnings.extend(n.unknown_keys.iter().cloned());
            imported_r5.extend(n.imported_r5.iter().cloned());
            out.violations.extend(n.violations.iter().cloned());
        }
        if let Some(p) = &f.parent {
            parents.push((name, p));
        }
    }
    out.warnings.extend(imported_r5);
    chain_checks(&parents, &mut out.violations);
    out
}

/// Audit every file. `Err` is the whole-store failure upstream reports as
/// `reading store: <file>: <error>` (a file that is not JSON). Output is in file-name order
/// whatever the order of `files`.
pub fn audit(files: &[AuditFile], schema_version: u64) -> Result<Audit, String> {
    let mut sorted: Vec<&AuditFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let audited = in_parallel(&sorted, |f| audit_file(&f.name, &f.text, schema_version))?;
    let audited = audited.into_iter().collect::<Result<Vec<_>, String>>()?;
    Ok(assemble(
        sorted.iter().map(|f| f.name.as_str()).zip(audited.iter()),
    ))
}

/// `f` over every item, on up to eight threads, results in the items' order. `Err` when a
/// worker died.
pub fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> R + Sync,
) -> Result<Vec<R>, String> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let chunk = items.len().div_ceil(workers).max(256);
    if items.len() <= chunk {
        return Ok(items.iter().map(&f).collect());
    }
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| scope.spawn(move || c.iter().map(f).collect::<Vec<R>>()))
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for h in handles {
            out.extend(
                h.join()
                    .map_err(|_| "internal error while auditing".to_string())?,
            );
        }
        Ok(out)
    })
}

/// R6 over the parsed ticks (`parents` sorted by file name): unresolved parents, then every
/// start whose parent walk revisits a tick — the ticks on a cycle and those whose ancestry runs
/// into one. Linear time: each tick is walked once.
fn chain_checks(parents: &[(&str, &str)], violations: &mut Vec<String>) {
    let index: HashMap<&str, usize> = parents
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (*n, i))
        .collect();
    let parent: Vec<Option<usize>> = parents.iter().map(|(_, p)| index.get(p).copied()).collect();
    for (name, p) in parents {
        if !p.is_empty() && !index.contains_key(p) {
            violations.push(format!("{name}: parent_id {p} does not resolve (R6)"));
        }
    }
    #[derive(Clone, Copy, PartialEq)]
    enum Walk {
        Unknown,
        OnPath,
        Ends,
        Loops,
    }
    let mut state = vec![Walk::Unknown; parents.len()];
    let mut path = Vec::new();
    for start in 0..parents.len() {
        let mut cur = Some(start);
        let verdict = loop {
            match cur {
                None => break Walk::Ends,
                Some(i) => match state[i] {
                    Walk::Unknown => {
                        state[i] = Walk::OnPath;
                        path.push(i);
                        cur = parent[i];
                    }
                    Walk::OnPath | Walk::Loops => break Walk::Loops,
                    Walk::Ends => break Walk::Ends,
                },
            }
        };
        for i in path.drain(..) {
            state[i] = verdict;
        }
    }
    for (i, (name, _)) in parents.iter().enumerate() {
        if state[i] == Walk::Loops {
            violations.push(format!("{name}: parent chain has a cycle (R6)"));
        }
    }
}

fn per_file(name: &str, t: &Tick, out: &mut Notes) {
    let recomputed = tick_id(&t.decision, &t.observe, &t.grounds, &t.parent_id);
    if recomputed != name {
        out.violations.push(format!(
            "{name}: id != hash(payload) (R4/R6) — recomputed {recomputed}"
        ));
    }
    if t.id != name {
        out.violations
            .push(format!("{name}: stored id field {} != filename (R6)", t.id));
    }
    if t.blame.trim().is_empty() {
        out.violations.push(format!(
            "{name}: empty blame (R5) — every mutating op names a human"
        ));
    }
    if vocab::is_detect_only(t.jurisdiction.as_deref()) && t.has_test_check() {
        out.violations.push(format!(
            "{name}: a C/D jurisdiction (detect-only) tick may carry no test check"
        ));
    }
    let imported = t.provenance.as_deref() == Some(vocab::IMPORTED);
    let texts = [t.decision.as_str(), t.observe.as_str()]
        .into_iter()
        .chain(t.grounds.iter().map(|g| g.claim.as_str()));
    for text in texts {
        for w in lint::r3_hits(text) {
            out.violations.push(format!(
                "{name}: R3 self-evolve subject \"{w}\" should be a human (best-effort lint)"
            ));
        }
        for w in lint::r5_hits(text) {
            if imported {
                out.imported_r5.push(format!("{name}: warning: R5 op language \"{w}\" in imported historical text (recorded, not authored — best-effort lint)"));
            } else {
                out.violations.push(format!(
                    "{name}: R5 forbidden op language \"{w}\" (best-effort lint)"
                ));
            }
        }
    }
}

/// One file's audit, or the whole-store failure it causes.
pub type Outcome = Result<FileAudit, String>;

/// What a cache entry keeps of its file's audit.
#[derive(Debug, Clone)]
pub enum AuditSlot {
    /// A valid tick without a warning or a violation of its own, whose parent is the cached
    /// tick's `parent_id`.
    CleanTick,
    /// Anything else, with the `schema_version` it was audited under (a tolerated-key warning
    /// names it). Boxed: rare, and a cache entry per file stays small.
    Other(Box<(u64, Outcome)>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::Ground;

    fn file(t: &Tick) -> AuditFile {
        AuditFile {
            name: t.id.clone(),
            text: Ok(t.file_bytes()),
        }
    }

    fn tick(parent: &str, decision: &str) -> Tick {
        let grounds = vec![Ground {
            claim: "c".into(),
            supports: "chosen".into(),
            check: None,
        }];
        Tick {
            id: tick_id(decision, "", &grounds, parent),
            decision: decision.into(),
            observe: String::new(),
            grounds,
            parent_id: parent.into(),
            status: "live".into(),
            held_since: String::new(),
            blame: "Wang Yu".into(),
            authority: None,
            jurisdiction: None,
            source_ref: None,
            provenance: None,
            supersedes: None,
            ratifies: None,
            unknown_keys: vec![],
        }
    }

    #[test]
    fn a_clean_chain_has_no_violations() {
        let a = tick("", "a");
        let b = tick(&a.id, "b");
        let out = audit(&[file(&a), file(&b)], 1).expect("readable");
        assert_eq!(out, Audit::default());
    }

    #[test]
    fn tampering_is_reported_and_non_json_fails_the_whole_store() {
        let a = tick("", "a");
        let mut b = tick(&a.id, "b");
        b.decision = "edited by hand".into();
        b.blame = " ".into();
        let out = audit(&[file(&a), file(&b)], 1).expect("readable");
        assert_eq!(out.violations.len(), 2, "{:?}", out.violations);
        assert!(out.violations[0].contains("id != hash(payload) (R4/R6)"));
        assert!(out.violations[1].contains("empty blame (R5)"));
        let bad = AuditFile {
            name: "zzz".into(),
            text: Ok("{\"trunc".into()),
        };
        let err = audit(&[file(&a), bad], 1).expect_err("not JSON");
        assert!(err.starts_with("zzz: "), "{err}");
    }

    #[test]
    fn an_unresolved_parent_and_a_cycle_are_chain_violations() {
        let mut a = tick("bbbbbbbbbbbb", "a");
        a.id = "aaaaaaaaaaaa".into();
        let mut b = tick("aaaaaaaaaaaa", "b");
        b.id = "bbbbbbbbbbbb".into();
        let c = tick("ffffffffffff", "c");
        let mut d = tick("aaaaaaaaaaaa", "d");
        d.id = "dddddddddddd".into();
        let out = audit(&[file(&a), file(&b), file(&c), file(&d)], 1).expect("readable");
        assert!(out.violations.contains(&format!(
            "{}: parent_id ffffffffffff does not resolve (R6)",
            c.id
        )));
        assert!(out
            .violations
            .contains(&"aaaaaaaaaaaa: parent chain has a cycle (R6)".to_string()));
        assert!(out
            .violations
            .contains(&"bbbbbbbbbbbb: parent chain has a cycle (R6)".to_string()));
        // A tick whose ancestry runs into the cycle loops too (upstream walks from every start).
        assert!(out
            .violations
            .contains(&"dddddddddddd: parent chain has a cycle (R6)".to_string()));
        let cycles = out
            .violations
            .iter()
            .filter(|v| v.contains("cycle"))
            .count();
        assert_eq!(cycles, 3);
    }
}
