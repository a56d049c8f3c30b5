//! Receipts that arrive through git: after a fetch moves a notes ref, the receipts its notes
//! hold for commits of HEAD's history are appended to `results/receipts/` like any writer's
//! (so upstream `ev` on this host sees them too), each exactly once however often it is
//! fetched (a line already in its file is never written again), and journaled as
//! `receipt_appended` with where it came from. Receipts from publishers the store does not
//! trust are kept out; receipts at commits HEAD has not reached wait for it. A notes ref that
//! was rewritten rather than extended is reported, naming what it dropped (what was imported
//! stays).
//!
//! Owns `results/imports/` (what was read, and who published each line) and [`catch_up`], which
//! every evaluation calls first. It must not run the network or decide a verdict.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use proto::rpc::{NotesRewrite, NotesSource, PublishedReceipt, ReceiptOrigin, Warning};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::git::notes::{self, Introduced};
use crate::open::OpenStore;
use crate::store::config::{Config, Trust};
use crate::sys::fsio;

/// What was read last, under `results/imports/`.
const SEEN: &str = "notes-seen.json";
/// Who published each line ever read, one JSON object a line, appended.
const ORIGINS: &str = "notes-origins.jsonl";
/// The most commits of HEAD's history receipts are imported for (the newest).
const HISTORY: usize = 1_000_000;
/// The most rewrites remembered.
const MAX_REWRITES: usize = 50;

/// What the last import read, kept between runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Seen {
    /// The refs' stamp when they were read ([`notes::refs_stamp`]).
    #[serde(default)]
    pub stamp: String,
    /// Each notes ref read, with its commit.
    #[serde(default)]
    pub tips: BTreeMap<String, String>,
    /// Notes commits whose history is in the origins file.
    #[serde(default)]
    pub walked: Vec<String>,
    /// HEAD then, and how many receipts waited for HEAD to reach their commit.
    #[serde(default)]
    pub head: Option<String>,
    #[serde(default)]
    pub waiting: usize,
    /// The trust the import was made under.
    #[serde(default)]
    pub trust: String,
    /// Receipts imported, in all.
    #[serde(default)]
    pub imported: usize,
    #[serde(default)]
    pub refused: usize,
    #[serde(default)]
    pub rewrites: Vec<NotesRewrite>,
}

fn imports_dir(store: &OpenStore) -> PathBuf {
    store.results_dir().join("imports")
}

pub fn load_seen(store: &OpenStore) -> Option<Seen> {
    let text = fsio::read_text_opt(&imports_dir(store).join(SEEN)).ok()??;
    serde_json::from_str(&text).ok()
}

fn save_seen(store: &OpenStore, seen: &Seen) -> Result<(), String> {
    let dir = imports_dir(store);
    fsio::ensure_dir(&dir).map_err(|e| format!("results/imports: {e}"))?;
    let tmp = store.tmp_dir().map_err(|r| r.message)?;
    let text = serde_json::to_string_pretty(seen).map_err(|e| e.to_string())?;
    fsio::replace_atomically(&tmp, &dir.join(SEEN), text.as_bytes())
        .map_err(|e| format!("results/imports/{SEEN}: {e}"))
}

/// One line of the origins file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct OriginLine {
    line: String,
    host: String,
    by: String,
    notes_commit: String,
}

/// Who published each receipt line read so far (canonical line → origin).
pub fn load_origins(store: &OpenStore) -> HashMap<String, ReceiptOrigin> {
    let mut out = HashMap::new();
    let Ok(Some(text)) = fsio::read_text_opt(&imports_dir(store).join(ORIGINS)) else {
        return out;
    };
    for l in text.lines() {
        if let Ok(o) = serde_json::from_str::<OriginLine>(l) {
            out.entry(o.line).or_insert(ReceiptOrigin {
                host: o.host,
                by: o.by,
                notes_commit: o.notes_commit,
            });
        }
    }
    out
}

/// [`load_origins`], kept on the open store while the file is unchanged; `None` when no
/// receipt ever came through git (no file).
pub fn origins_cached(store: &mut OpenStore) -> Option<std::sync::Arc<crate::open::Origins>> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(imports_dir(store).join(ORIGINS)).ok()?;
    if !m.is_file() {
        return None;
    }
    let key = (
        m.len(),
        m.mtime_nsec() + m.mtime() * 1_000_000_000,
        m.ino() as i64,
    );
    if let Some((k, o)) = &store.origins {
        if *k == key {
            return Some(std::sync::Arc::clone(o));
        }
    }
    let lines = load_origins(store);
    let tests = lines
        .keys()
        .filter_map(|l| notes::receipt_of(l).map(|r| r.test))
        .collect();
    let o = std::sync::Arc::new(crate::open::Origins { lines, tests });
    store.origins = Some((key, std::sync::Arc::clone(&o)));
    Some(o)
}

fn append_origins(store: &OpenStore, new: &[(String, Introduced)]) -> Result<(), String> {
    if new.is_empty() {
        return Ok(());
    }
    let dir = imports_dir(store);
    fsio::ensure_dir(&dir).map_err(|e| format!("results/imports: {e}"))?;
    let mut text = String::new();
    for (line, who) in new {
        let o = OriginLine {
            line: line.trim_end().to_string(),
            host: who.host.clone().unwrap_or_else(|| "?".into()),
            by: who.by.clone(),
            notes_commit: who.notes_commit.clone(),
        };
        text.push_str(&serde_json::to_string(&o).map_err(|e| e.to_string())?);
        text.push('\n');
    }
    fsio::append(&dir.join(ORIGINS), text.as_bytes())
        .map_err(|e| format!("results/imports/{ORIGINS}: {e}"))
}

fn unknown_origin() -> ReceiptOrigin {
    ReceiptOrigin {
        host: "?".into(),
        by: String::new(),
        notes_commit: String::new(),
    }
}

fn published(line: &str, origin: &ReceiptOrigin) -> Option<PublishedReceipt> {
    let r = notes::receipt_of(line)?;
    Some(PublishedReceipt {
        test: r.test,
        platform: r.platform,
        commit: r.commit,
        ran_at: r.ran_at,
        result: r.result.as_str().to_string(),
        origin: origin.clone(),
    })
}

/// HEAD's commit, through the store's cache of git's answers (as the verdicts read it).
fn head_of(store: &mut OpenStore, root: &Path) -> Option<String> {
    store
        .git
        .answer(root, crate::git::facts::Query::Head)
        .filter(|h| proto::model::is_40_lower_hex(h))
}

/// The store's git common directory, asked once per open store.
fn common(store: &mut OpenStore) -> Option<PathBuf> {
    if store.notes_common.is_none() {
        let root = store.root().to_path_buf();
        store.notes_common = Some(notes::common_dir(&root));
    }
    store.notes_common.clone().flatten()
}

/// Bring in what the notes refs hold that this store has not taken yet; cheap (a few `stat`s)
/// while nothing moved. A problem is a warning: the verdicts are then those of the receipts
/// already here, never none. `trust` is the config's, as the caller already read it.
pub fn catch_up(store: &mut OpenStore, config: &Config) -> Vec<Warning> {
    let Some(common) = common(store) else {
        return Vec::new();
    };
    let Some(stamp) = notes::refs_stamp(&common) else {
        // Moving right now: read them, and do not remember the stamp.
        return run(store, None);
    };
    let trust = trust_key(config);
    let root = store.root().to_path_buf();
    // HEAD matters only while receipts wait for it.
    let memo_key = |waiting: bool, head: Option<&str>| {
        format!(
            "{stamp}|{trust}|{}",
            if waiting { head.unwrap_or("") } else { "" }
        )
    };
    if let Some((key, waiting)) = store.notes_memo.clone() {
        let head = if waiting { head_of(store, &root) } else { None };
        if key == memo_key(waiting, head.as_deref()) {
            return Vec::new();
        }
    }
    let seen = load_seen(store);
    let nothing_there = !stamp.contains(':');
    if nothing_there && seen.is_none() {
        store.notes_memo = Some((memo_key(false, None), false));
        return Vec::new();
    }
    if let Some(seen) = &seen {
        let head = if seen.waiting > 0 {
            head_of(store, &root)
        } else {
            None
        };
        if seen.stamp == stamp && seen.trust == trust && (seen.waiting == 0 || seen.head == head) {
            store.notes_memo = Some((
                memo_key(seen.waiting > 0, head.as_deref()),
                seen.waiting > 0,
            ));
            return Vec::new();
        }
    }
    run(store, Some(stamp))
}

/// Import now; `stamp`: the refs' stamp to remember (`None`: they were moving).
fn run(store: &mut OpenStore, stamp: Option<String>) -> Vec<Warning> {
    // Only the store's owner writes receipts (a client answering in-process while a daemon
    // holds the store leaves this to the daemon).
    if !store.is_locked() && store.acquire("evctl (receipts import)").is_err() {
        return Vec::new();
    }
    match import(store, stamp.clone()) {
        Ok((seen, warnings)) => {
            let waiting = seen.waiting > 0;
            let key = stamp.map(|s| {
                format!(
                    "{s}|{}|{}",
                    seen.trust,
                    if waiting {
                        seen.head.as_deref().unwrap_or("")
                    } else {
                        ""
                    }
                )
            });
            store.notes_memo = key.map(|k| (k, waiting));
            warnings
        }
        Err(e) => {
            store.notes_memo = None;
            vec![Warning {
                kind: "receipts_import".into(),
                message: format!("warning: receipts published through git could not be read: {e}"),
            }]
        }
    }
}

/// What the notes hold, sorted out: for each line, its origin and where it stands.
pub struct Survey {
    pub sources: Vec<NotesSource>,
    /// Trusted, at commits of HEAD's history, by receipt file key.
    pub ready: BTreeMap<String, Vec<(String, ReceiptOrigin)>>,
    pub waiting: usize,
    pub untrusted: Vec<PublishedReceipt>,
    pub refused: usize,
    pub head: Option<String>,
}

/// Read every notes ref and sort its lines (walking the notes history not walked before, and
/// recording who published each new line).
fn survey(store: &mut OpenStore, seen: &mut Seen) -> Result<Survey, String> {
    let root = store.root().to_path_buf();
    let tips = notes::tips(&root)?;
    let shas: Vec<String> = tips
        .iter()
        .map(|(_, s)| s.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    // Who published what: only the history not walked yet (a walked commit that is gone, as
    // after a rewrite and a gc, is simply not excluded).
    let walked: BTreeSet<String> = seen.walked.iter().cloned().collect();
    let still = notes::existing(&root, &walked)?;
    let not: Vec<String> = walked.into_iter().filter(|w| still.contains(w)).collect();
    let mut origins = load_origins(store);
    let found = notes::introductions(&root, &shas, &not)?;
    let mut new: Vec<(String, Introduced)> = found
        .into_iter()
        .filter(|(l, _)| !origins.contains_key(l.trim_end()))
        .collect();
    new.sort_by(|a, b| a.0.cmp(&b.0));
    append_origins(store, &new)?;
    for (line, who) in new {
        origins.insert(
            line.trim_end().to_string(),
            ReceiptOrigin {
                host: who.host.unwrap_or_else(|| "?".into()),
                by: who.by,
                notes_commit: who.notes_commit,
            },
        );
    }
    seen.walked = shas.clone();
    let (all, refused) = notes::union(&root, &shas)?;
    let config = store.config();
    let trust = config.trust;
    let signers = config.signers;
    let signed = if signers.any() {
        let wanted: BTreeSet<String> = all
            .values()
            .flatten()
            .filter_map(|l| origins.get(l.trim_end()))
            .filter(|o| signers.required(&o.host).is_some())
            .map(|o| o.notes_commit.clone())
            .collect();
        signatures(store, &root, wanted)?
    } else {
        HashMap::new()
    };
    let head = head_of(store, &root);
    let history = match (&head, all.is_empty()) {
        (Some(h), false) => notes::history(&root, h, HISTORY)?,
        _ => Default::default(),
    };
    let mut s = Survey {
        sources: tips
            .iter()
            .map(|(r, c)| NotesSource {
                notes_ref: r.clone(),
                commit: c.clone(),
            })
            .collect(),
        ready: BTreeMap::new(),
        waiting: 0,
        untrusted: Vec::new(),
        refused,
        head,
    };
    for (commit, lines) in &all {
        for line in lines {
            let origin = origins
                .get(line.trim_end())
                .cloned()
                .unwrap_or_else(unknown_origin);
            let signature = signed.get(&origin.notes_commit).map(Vec::as_slice);
            if !trust.allows(&origin.host) || !signers.allows(&origin.host, signature) {
                s.untrusted.extend(published(line, &origin));
            } else if !history.contains(commit) {
                s.waiting += 1;
            } else if let Some(r) = notes::receipt_of(line) {
                s.ready
                    .entry(proto::id::receipt_key(&r.test))
                    .or_default()
                    .push((line.clone(), origin));
            }
        }
    }
    Ok(s)
}

/// The trust an import is made under, as remembered with it (a change reads everything again).
fn trust_key(config: &Config) -> String {
    format!("{:?}{:?}", config.trust, config.signers)
}

/// What git reported of notes commits' signatures, by commit, under `results/imports/`
/// (definite answers only: a commit git could not verify, for want of a key or of its
/// settings, is asked again next time).
const SIGNATURES: &str = "notes-signatures.json";
/// The most signatures remembered.
const MAX_SIGNATURES: usize = 100_000;

/// The names each of `commits`' good signatures goes by (a commit without a good signature is
/// left out), remembered between imports.
fn signatures(
    store: &OpenStore,
    root: &Path,
    commits: BTreeSet<String>,
) -> Result<HashMap<String, Vec<String>>, String> {
    let path = imports_dir(store).join(SIGNATURES);
    let mut known: BTreeMap<String, (String, Vec<String>)> = fsio::read_text_opt(&path)
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let ask: Vec<String> = commits
        .iter()
        .filter(|c| !known.contains_key(*c))
        .cloned()
        .collect();
    if !ask.is_empty() {
        let found = notes::signatures(root, &ask)?;
        let mut added = false;
        for (c, (status, names)) in found {
            if matches!(status.as_str(), "N" | "E") || known.len() >= MAX_SIGNATURES {
                continue;
            }
            known.insert(c, (status, names));
            added = true;
        }
        if added {
            let dir = imports_dir(store);
            fsio::ensure_dir(&dir).map_err(|e| format!("results/imports: {e}"))?;
            let tmp = store.tmp_dir().map_err(|r| r.message)?;
            let text = serde_json::to_string(&known).map_err(|e| e.to_string())?;
            fsio::replace_atomically(&tmp, &path, text.as_bytes())
                .map_err(|e| format!("results/imports/{SIGNATURES}: {e}"))?;
        }
    }
    Ok(commits
        .into_iter()
        .filter_map(|c| {
            let (status, names) = known.get(&c)?;
            matches!(status.as_str(), "G" | "U").then(|| (c, names.clone()))
        })
        .collect())
}

/// Rewrites since the refs were last read: a ref whose commit does not descend from the one
/// seen, with the receipts the old notes held that the new ones do not.
fn rewrites(root: &Path, seen: &Seen, tips: &[NotesSource]) -> Vec<NotesRewrite> {
    let mut found = Vec::new();
    for t in tips {
        let Some(old) = seen.tips.get(&t.notes_ref) else {
            continue;
        };
        if *old == t.commit {
            continue;
        }
        let extended = match notes::is_ancestor(root, old, &t.commit) {
            Some(true) => true,
            Some(false) => false,
            // The commit seen is gone (a gc after a rewrite): nothing to compare with.
            None => continue,
        };
        let dropped: Vec<PublishedReceipt> =
            match (notes::notes_of(root, old), notes::notes_of(root, &t.commit)) {
                (Ok((before, _)), Ok((after, _))) => before
                    .iter()
                    .flat_map(|(c, lines)| {
                        let kept = after.get(c);
                        lines
                            .iter()
                            .filter(move |l| !kept.is_some_and(|a| a.contains(*l)))
                    })
                    .filter_map(|l| published(l, &unknown_origin()))
                    .collect(),
                _ => Vec::new(),
            };
        // Extending the notes may add lines, never take one away: a commit on top that removes
        // a receipt is a rewrite too.
        if extended && dropped.is_empty() {
            continue;
        }
        found.push(NotesRewrite {
            extended,
            notes_ref: t.notes_ref.clone(),
            seen: old.clone(),
            now: t.commit.clone(),
            dropped,
            found_at: crate::engine::clock::now_rfc3339(),
        });
    }
    found
}

/// A rewrite in the words `check` and `status` say it.
pub fn rewrite_said(r: &NotesRewrite) -> String {
    let short = |s: &str| s.get(..12).unwrap_or(s).to_string();
    let dropped = match r.dropped.len() {
        0 => "no receipt was dropped".to_string(),
        n => {
            let first = &r.dropped[0];
            format!(
                "{n} receipt{} dropped, e.g. {} {} at {} on {} (kept here)",
                if n == 1 { " was" } else { "s were" },
                first.result,
                proto::json::q(&first.test),
                short(&first.commit),
                first.platform
            )
        }
    };
    if r.extended {
        return format!(
            "warning: {} took receipts away: {} removes what {} seen before held; {dropped}",
            r.notes_ref,
            short(&r.now),
            short(&r.seen)
        );
    }
    format!(
        "warning: {} was rewritten, not extended: {} does not descend from {} seen before; {dropped}",
        r.notes_ref,
        short(&r.now),
        short(&r.seen)
    )
}

fn import(store: &mut OpenStore, stamp: Option<String>) -> Result<(Seen, Vec<Warning>), String> {
    let root = store.root().to_path_buf();
    let mut seen = load_seen(store).unwrap_or_default();
    // The refs' files moved (or are moving) but not their commits, the trust or what waits:
    // nothing to take in (the stamp alone is brought up to date).
    let tips: std::collections::BTreeMap<String, String> =
        notes::tips(&root)?.into_iter().collect();
    let trust = trust_key(&store.config());
    if seen.tips == tips && seen.trust == trust && !tips.is_empty() {
        let head = head_of(store, &root);
        if seen.waiting == 0 || seen.head == head {
            if let Some(stamp) = stamp {
                if seen.stamp != stamp {
                    seen.stamp = stamp;
                    save_seen(store, &seen)?;
                }
            }
            return Ok((seen, Vec::new()));
        }
    }
    let mut warnings = Vec::new();
    let s = survey(store, &mut seen)?;
    let found = rewrites(&root, &seen, &s.sources);
    for r in &found {
        warnings.push(Warning {
            kind: "notes_rewritten".into(),
            message: rewrite_said(r),
        });
    }
    seen.rewrites.extend(found);
    let over = seen.rewrites.len().saturating_sub(MAX_REWRITES);
    seen.rewrites.drain(..over);
    let dir = store.results_dir().join("receipts");
    let mut imported = 0;
    for (key, lines) in &s.ready {
        let path = dir.join(format!("{key}.jsonl"));
        let have: BTreeSet<String> = match fsio::read_text_opt(&path) {
            Ok(Some(text)) => text
                .lines()
                .map(|l| match notes::receipt_of(l) {
                    Some(r) => r.line(),
                    None => format!("{l}\n"),
                })
                .collect(),
            Ok(None) => BTreeSet::new(),
            Err(e) => return Err(format!("results/receipts/{key}.jsonl: {e}")),
        };
        let mut text = String::new();
        let mut taken = Vec::new();
        for (line, origin) in lines {
            if !have.contains(line) && !taken.iter().any(|(l, _)| l == line) {
                text.push_str(line);
                taken.push((line.clone(), origin.clone()));
            }
        }
        if text.is_empty() {
            continue;
        }
        fsio::ensure_dir(&dir).map_err(|e| format!("results/receipts: {e}"))?;
        // A line already there when a file ends without its newline would be glued to ours.
        let glued = std::fs::read(&path).is_ok_and(|b| b.last().is_some_and(|&c| c != b'\n'));
        if glued {
            text.insert(0, '\n');
        }
        fsio::append(&path, text.as_bytes())
            .map_err(|e| format!("results/receipts/{key}.jsonl: {e}"))?;
        for (line, origin) in taken {
            let mut p = Map::new();
            p.insert("key".into(), key.clone().into());
            if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(&line) {
                p.insert("receipt".into(), Value::Object(o));
            }
            let mut from = Map::new();
            from.insert("host".into(), origin.host.into());
            from.insert("by".into(), origin.by.into());
            from.insert("notes_commit".into(), origin.notes_commit.into());
            p.insert("imported".into(), Value::Object(from));
            store.journal("receipt_appended", p);
            imported += 1;
        }
    }
    seen.stamp = stamp.unwrap_or_default();
    seen.tips = s
        .sources
        .iter()
        .map(|t| (t.notes_ref.clone(), t.commit.clone()))
        .collect();
    seen.head = s.head.clone();
    seen.waiting = s.waiting;
    seen.trust = trust_key(&store.config());
    seen.imported += imported;
    seen.refused = s.refused;
    save_seen(store, &seen)?;
    tracing::info!(
        store = %root.display(),
        imported,
        waiting = s.waiting,
        untrusted = s.untrusted.len(),
        "receipts read from the notes refs"
    );
    Ok((seen, warnings))
}

/// At most this many notes on where gating verdicts' runs came from, per check.
const ORIGIN_NOTES: usize = 8;

/// For each gating verdict whose latest run came through git: a note saying who published it
/// (said on stderr by `check`, after which the rows stay upstream's byte for byte). Nothing when
/// no receipt ever came through git.
pub fn origin_notes(store: &mut OpenStore, eval: &crate::memo::check::Evaluation) -> Vec<Warning> {
    let Some(origins) = origins_cached(store) else {
        return Vec::new();
    };
    let short = |s: &str| s.get(..12).unwrap_or(s).to_string();
    let mut notes = Vec::new();
    let mut more = 0;
    for part in &eval.parts {
        let Some(tests) = &part.tests else {
            continue;
        };
        for row in tests.rows.iter().filter(|r| r.gating) {
            let Some(crate::engine::packed::CheckRef::Test { reference, .. }) =
                part.tick.grounds().nth(row.ground_index).map(|g| g.check)
            else {
                continue;
            };
            if !origins.tests.contains(reference) {
                continue;
            }
            let receipts = store.receipts.get(reference);
            let Some(r) = crate::engine::verdict::latest(receipts.iter()) else {
                continue;
            };
            let Some(o) = origins.lines.get(r.line().trim_end()) else {
                continue;
            };
            if notes.len() == ORIGIN_NOTES {
                more += 1;
                continue;
            }
            notes.push(Warning {
                kind: "receipt_origin".into(),
                message: format!(
                    "note: {} {}: its last run ({} on {} at {}) was published by {}{} in notes commit {}",
                    row.label,
                    part.tick.id(),
                    r.result.as_str(),
                    r.platform,
                    short(&r.commit),
                    o.host,
                    if o.by.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", o.by)
                    },
                    short(&o.notes_commit)
                ),
            });
        }
    }
    if more > 0 {
        notes.push(Warning {
            kind: "receipt_origin".into(),
            message: format!(
                "note: … and {more} more gating verdict{} rest on runs published through git (evctl receipts status)",
                if more == 1 { "" } else { "s" }
            ),
        });
    }
    notes
}

/// `ev.receipts.status`.
pub fn status(store: &mut OpenStore) -> Result<proto::rpc::ReceiptsStatus, proto::rpc::Refusal> {
    store.require()?;
    let mut warnings = catch_up(store, &store.config());
    let mut seen = load_seen(store).unwrap_or_default();
    let trusted = match store.config().trust {
        Trust::Everyone => None,
        Trust::Only(h) => Some(h),
        Trust::Unreadable(why) => {
            warnings.push(Warning {
                kind: "trusted_hosts".into(),
                message: format!("warning: {why}"),
            });
            Some(Vec::new())
        }
    };
    let signers = store.config().signers;
    if let crate::store::config::Signers::Unreadable(why) = &signers {
        warnings.push(Warning {
            kind: "trusted_signers".into(),
            message: format!("warning: {why}"),
        });
    }
    let s = if common(store).is_some() {
        survey(store, &mut seen).map_err(proto::rpc::Refusal::io)?
    } else {
        Survey {
            sources: Vec::new(),
            ready: BTreeMap::new(),
            waiting: 0,
            untrusted: Vec::new(),
            refused: 0,
            head: None,
        }
    };
    Ok(proto::rpc::ReceiptsStatus {
        trusted,
        signers: signers.entries(),
        sources: s.sources,
        imported: seen.imported,
        waiting: s.waiting,
        untrusted: s.untrusted,
        refused: s.refused,
        rewrites: seen.rewrites,
        warnings,
    })
}
