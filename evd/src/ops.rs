//! The verbs, each a function of a [`Store`] and a request. The daemon's store actor and
//! evctl's in-process fallback call exactly these, so both give the same answers.

use proto::golden;
use proto::rpc::{
    codes, DecideRequest, DecideResult, InitResult, ListEntry, ListResult, LogEntry, LogResult,
    Refusal, ShowResult, VectorLine, VerifyResult, Warning,
};
use proto::Tick;
use serde_json::Value;

use crate::decide;
use crate::store::{Entry, Store};

pub fn init(store: &mut Store) -> Result<InitResult, Refusal> {
    let created = store.init()?;
    Ok(InitResult {
        created,
        path: store.ev_dir().display().to_string(),
    })
}

/// The stored tick as a JSON object plus `file`.
pub fn tick_value(file: &str, t: &Tick) -> Value {
    let mut v = t.to_value();
    if let Value::Object(o) = &mut v {
        o.insert("file".into(), file.into());
    }
    v
}

/// `decide`: validate, then the shared write path. Writes need the store lock (held by the
/// caller); a dry run writes nothing.
pub fn decide(store: &mut Store, req: &DecideRequest) -> Result<DecideResult, Refusal> {
    let draft = decide::build(req)?;
    let warnings = decide::write_path_checks(
        &draft.decision,
        &draft.observe,
        &draft.grounds,
        draft.jurisdiction.as_deref(),
    )?;
    let with = |r: Refusal| r.with_warnings(warnings.clone());
    store.require().map_err(with)?;
    let parent_id = store.head().map_err(with)?;
    let now = crate::clock::now();
    let id = proto::id::tick_id(&draft.decision, &draft.observe, &draft.grounds, &parent_id);
    let tick = Tick {
        decision: draft.decision,
        observe: draft.observe,
        grounds: draft.grounds,
        parent_id,
        id: id.clone(),
        status: "live".into(),
        held_since: crate::clock::format(now),
        blame: draft.blame,
        authority: draft.authority,
        jurisdiction: draft.jurisdiction,
        source_ref: draft.source_ref.map(proto::SourceRef::Text),
        provenance: None,
        supersedes: None,
        ratifies: None,
        unknown_keys: Vec::new(),
    };
    let value = tick_value(&id, &tick);
    let ground_count = tick.grounds.len();
    if !req.dry_run {
        let event = crate::events::tick_event("decide", &tick, now);
        store.append(tick).map_err(with)?;
        store.append_event(&event);
    }
    Ok(DecideResult {
        id,
        ground_count,
        dry_run: req.dry_run,
        tick: value,
        warnings,
    })
}

fn no_tick(id: &str) -> Refusal {
    Refusal::new(
        codes::NOT_FOUND,
        "not_found",
        format!("no tick with id {id}"),
    )
}

/// `show`: the file's bytes, unparsed. A non-id never touches the disk.
pub fn show(store: &Store, id: &str) -> Result<ShowResult, Refusal> {
    match store.read_tick_file(id) {
        Ok(Some(raw)) => Ok(ShowResult {
            id: id.to_string(),
            tick: serde_json::from_str(&raw).ok(),
            raw,
        }),
        Ok(None) => Err(no_tick(id)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(no_tick(id)),
        Err(e) => Err(Refusal::io(format!("reading {id}: {e}"))),
    }
}

/// `list`: the current view plus every file that is JSON but not a tick, sorted by file name.
pub fn list(store: &mut Store) -> Result<ListResult, Refusal> {
    store.require()?;
    let mut out: Vec<ListEntry> = store
        .current()?
        .into_iter()
        .map(|(file, t)| ListEntry {
            file: file.to_string(),
            parseable: true,
            status: Some(t.status.clone()),
            decision: Some(t.decision.clone()),
            authority: t.authority.clone(),
            jurisdiction: t.jurisdiction.clone(),
            source_ref: t.source_ref_key(),
            provenance: t.provenance.clone(),
        })
        .collect();
    out.extend(
        store
            .entries()?
            .iter()
            .filter(|(_, e)| matches!(e, Entry::Invalid(_)))
            .map(|(n, _)| ListEntry {
                file: n.to_string(),
                parseable: false,
                status: None,
                decision: None,
                authority: None,
                jurisdiction: None,
                source_ref: None,
                provenance: None,
            }),
    );
    out.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(ListResult { entries: out })
}

/// `log`: walk `parent_id` from HEAD. A missing tick ends the walk (broken lineage); an
/// unreadable one is reported after the rows read so far.
pub fn log(store: &mut Store) -> Result<LogResult, Refusal> {
    store.require()?;
    let mut cur = store.head()?;
    let mut out = LogResult {
        entries: Vec::new(),
        broken_at: None,
        unreadable: None,
    };
    let mut seen = std::collections::HashSet::new();
    while !cur.is_empty() && seen.insert(cur.clone()) {
        let entry = if proto::vocab::is_tick_id(&cur) {
            store.entry(&cur)?
        } else {
            None
        };
        match entry {
            None => {
                out.broken_at = Some(cur);
                break;
            }
            Some(Entry::Invalid(e)) | Some(Entry::NotJson(e)) | Some(Entry::Unreadable(e)) => {
                out.unreadable = Some((cur, e));
                break;
            }
            Some(Entry::Tick(t)) => {
                out.entries.push(LogEntry {
                    id: t.id.clone(),
                    status: t.status.clone(),
                    decision: t.decision.clone(),
                    blame: t.blame.clone(),
                    provenance: t.provenance.clone(),
                    supersedes: t.supersedes.clone(),
                    ratifies: t.ratifies.clone(),
                });
                cur = t.parent_id.clone();
            }
        }
    }
    Ok(out)
}

/// The four frozen vectors, as the wire reports them.
pub fn self_test() -> VerifyResult {
    VerifyResult {
        violations: Vec::new(),
        vectors: Some(
            golden::self_test()
                .into_iter()
                .map(|v| VectorLine {
                    pass: v.pass(),
                    name: v.name.to_string(),
                    got: v.got,
                    want: v.want.to_string(),
                })
                .collect(),
        ),
        warnings: Vec::new(),
        files: 0,
    }
}

/// `verify`: audit every tick file, read fresh from disk. A missing store is
/// `reading store: <io error>` here (there is no no-store message).
pub fn verify(store: &Store, self_test_only: bool) -> Result<VerifyResult, Refusal> {
    if self_test_only {
        return Ok(self_test());
    }
    store.exists()?;
    let files = store.read_all_fresh()?;
    let audit = crate::verify::audit(&files, store.config().schema_version)
        .map_err(|e| Refusal::io(format!("reading store: {e}")))?;
    Ok(VerifyResult {
        violations: audit.violations,
        vectors: None,
        warnings: audit
            .warnings
            .into_iter()
            .map(|m| Warning {
                kind: "verify".into(),
                message: m,
            })
            .collect(),
        files: files.len(),
    })
}
