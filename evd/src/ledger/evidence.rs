//! Evidence cited by grounds ([`proto::evidence`]), checked against the files: at every write
//! door (a citation must hold when it is recorded) and whenever it is asked about since.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use proto::evidence::{citations, Citation};

use crate::sys::watch::{hub, DirWatch, Listener};
use proto::rpc::Refusal;
use proto::Tick;

/// The largest span a citation may cover (and so the most read to check one).
pub const MAX_SPAN: u64 = 16 << 20;

/// What a citation's file says now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// The span's bytes still hash as cited.
    Holds,
    /// They hash otherwise now (the sha256 they have).
    Drifted(String),
    /// The file ends before the span does (its length now).
    OutOfBounds(u64),
    /// The file cannot be read as a regular file (why).
    Unreadable(String),
}

impl State {
    pub fn holds(&self) -> bool {
        matches!(self, State::Holds)
    }

    /// How it reads in a row or a refusal.
    pub fn describe(&self) -> String {
        match self {
            State::Holds => "holds".into(),
            State::Drifted(now) => format!(
                "its bytes changed (they hash to {} now)",
                &now[..12.min(now.len())]
            ),
            State::OutOfBounds(len) => {
                format!("the file is {len} bytes now; the span runs past its end")
            }
            State::Unreadable(why) => why.clone(),
        }
    }

    /// The short label: `holds`, `drifted`, `out-of-bounds`, `unreadable`.
    pub fn label(&self) -> &'static str {
        match self {
            State::Holds => "holds",
            State::Drifted(_) => "drifted",
            State::OutOfBounds(_) => "out-of-bounds",
            State::Unreadable(_) => "unreadable",
        }
    }
}

/// Read `c`'s span from the repository at `root` and compare its hash. Never follows a link.
pub fn state(root: &Path, c: &Citation) -> State {
    if c.end.saturating_sub(c.start) > MAX_SPAN {
        return State::Unreadable(format!(
            "the span is {} bytes; a citation covers at most {MAX_SPAN}",
            c.end - c.start
        ));
    }
    // Walked from the root one component at a time: no link on the way is followed, and a
    // FIFO, socket or directory is refused before anything is read.
    let read = || -> std::io::Result<State> {
        let mut f = crate::sys::beneath::Root::new(root).open_file(Path::new(&c.path))?;
        let m = f.metadata()?;
        if m.len() < c.end {
            return Ok(State::OutOfBounds(m.len()));
        }
        f.seek(SeekFrom::Start(c.start))?;
        let mut span = Vec::with_capacity((c.end - c.start) as usize);
        f.take(c.end - c.start).read_to_end(&mut span)?;
        if (span.len() as u64) < c.end - c.start {
            return Ok(State::OutOfBounds(c.start + span.len() as u64));
        }
        let now = proto::evidence::sha256_hex(&span);
        Ok(if now == c.sha256 {
            State::Holds
        } else {
            State::Drifted(now)
        })
    };
    read().unwrap_or_else(|e| State::Unreadable(unreadable(root, &c.path, &e)))
}

/// Why the cited file cannot be read, named by its path in the repository.
fn unreadable(root: &Path, rel: &str, e: &std::io::Error) -> String {
    // The walk's messages name the absolute path; the citation's own path reads better.
    let text = e.to_string();
    let abs = root.join(rel).display().to_string();
    let text = text.replace(&format!("{abs}: "), "").replace(&abs, rel);
    if text.starts_with(rel) {
        text
    } else {
        format!("{rel}: {text}")
    }
}

/// Every citation of `tick`'s grounds, with the ground it is in; an error names the first
/// marker that is not a citation.
pub fn of_tick(tick: &Tick) -> Result<Vec<(usize, Citation)>, (usize, String)> {
    let mut out = Vec::new();
    for (i, g) in tick.grounds.iter().enumerate() {
        for c in citations(&g.claim).map_err(|e| (i, e))? {
            out.push((i, c));
        }
    }
    Ok(out)
}

/// The write door: every marker in `tick`'s grounds is a whole citation whose span holds now.
pub fn check_tick(root: &Path, tick: &Tick) -> Result<(), Refusal> {
    let cited = of_tick(tick).map_err(|(i, e)| {
        Refusal::refused(
            "evidence_marker",
            format!("ground {i}: {e}; nothing was written"),
        )
    })?;
    for (i, c) in cited {
        let st = state(root, &c);
        if !st.holds() {
            return Err(Refusal::refused(
                "evidence_mismatch",
                format!(
                    "ground {i} cites {} bytes {}-{}, but {}; cite it again (`evctl cite`); nothing was written",
                    c.path,
                    c.start,
                    c.end,
                    st.describe()
                ),
            ));
        }
    }
    Ok(())
}

/// What a cited file looked like when its citations were last hashed.
type FileStamp = (u64, u64, i128, i128);

fn file_stamp(m: &crate::sys::beneath::Stat) -> FileStamp {
    (m.ino, m.len, m.mtime_ns, m.ctime_ns)
}

/// The states of a store's citations, kept per cited file while its stamp (inode, size, mtime,
/// ctime) stays the same: a check looks at each cited file once and hashes again only what
/// changed. In the daemon the cited files' directories are watched too, so that an edit is
/// evaluated (state files, `ev.watch`, the editor) without anyone asking.
#[derive(Default)]
pub struct Cache {
    files: std::collections::HashMap<String, Hashed>,
    /// The current decisions' markers, read once per view (tick generation).
    markers: Option<(u64, std::sync::Arc<Vec<Marker>>)>,
    /// Moves whenever a current live decision's evidence reads otherwise (see [`sync`]).
    generation: u64,
    /// Each current live citing tick: what its citations read at the last sync, and the
    /// generation at which that last changed. `None` until the first sync.
    said: Option<std::collections::HashMap<String, Reading>>,
    /// Who hears of a change to a cited file (the store's actor); `None`: nothing is watched.
    sink: Option<Sink>,
    /// The watched directories and the cited names in each, with their handles.
    watched: Option<(CitedDirs, Vec<DirWatch>)>,
    /// Why the cited files are not watched, when they are not.
    unwatched: Option<String>,
    /// Moves whenever a span is hashed again or a file's hashes are let go.
    hashed: u64,
    /// The tick generation and `hashed` at the last [`sync`] that compared.
    synced_at: Option<(u64, u64)>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("files", &self.files.len())
            .field("generation", &self.generation)
            .field("watched", &self.watched.as_ref().map(|w| w.1.len()))
            .field("unwatched", &self.unwatched)
            .finish()
    }
}

/// What a tick's citations read at a sync, and the generation at which that last changed.
type Reading = (std::sync::Arc<[Cited]>, u64);

/// The directories of cited files, each with the cited names in it.
type CitedDirs = std::collections::BTreeMap<std::path::PathBuf, Vec<String>>;

/// Called (on the watch hub's thread) when a cited file may have changed.
pub type Sink = std::sync::Arc<dyn Fn() + Send + Sync>;

/// At most this many directories of cited files are watched per store; past that, a drift is
/// found when someone asks (every answer still stats each cited file).
pub const MAX_WATCHED_DIRS: usize = 256;

/// One citation of a current decision as its state file records it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cited {
    pub ground: usize,
    pub path: String,
    pub start: u64,
    pub end: u64,
    pub sha256: String,
    /// `holds`, `drifted`, `out-of-bounds`, `unreadable` or `malformed`.
    pub state: &'static str,
}

impl Cited {
    /// The entry of a state file's `evidence` list.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "ground": self.ground,
            "path": self.path,
            "span": format!("{}-{}", self.start, self.end),
            "sha256": self.sha256,
            "state": self.state,
        })
    }

    /// The label a change of it is pushed with (`evidence:drifted` …).
    pub fn label(&self) -> String {
        format!("evidence:{}", self.state)
    }

    fn same_citation(&self, other: &Cited) -> bool {
        self.ground == other.ground
            && self.path == other.path
            && self.start == other.start
            && self.end == other.end
            && self.sha256 == other.sha256
    }
}

/// A cited file's stamp when its citations were hashed, and their states then.
type Hashed = (
    Option<FileStamp>,
    std::collections::HashMap<Citation, State>,
);

/// One marker of a current decision: its file, tick, ground and the citation it reads as (or
/// why it is none).
type Marker = (
    std::sync::Arc<str>,
    std::sync::Arc<crate::engine::packed::PackedTick>,
    usize,
    Result<Citation, String>,
);

impl Cache {
    /// Each citation's state now, and since when its file is as it is (its mtime) when it does
    /// not hold.
    pub fn states(&mut self, root: &Path, cited: &[&Citation]) -> Vec<Seen> {
        let mut looked: std::collections::HashMap<&str, (Option<FileStamp>, Option<String>)> =
            std::collections::HashMap::new();
        let mut out = Vec::with_capacity(cited.len());
        for c in cited {
            let (stamp, since) = looked
                .entry(c.path.as_str())
                .or_insert_with(|| {
                    // Walked like the read itself: a link anywhere on the way has no stamp, so
                    // the citation is looked at (and found unreadable) every time.
                    let m = crate::sys::beneath::Root::new(root)
                        .stat(Path::new(&c.path))
                        .ok()
                        .flatten()
                        .filter(|m| m.kind == crate::sys::beneath::Kind::File);
                    let since = m.as_ref().and_then(|m| {
                        time::OffsetDateTime::from_unix_timestamp_nanos(m.mtime_ns)
                            .ok()
                            .map(crate::engine::clock::format)
                    });
                    (m.as_ref().map(file_stamp), since)
                })
                .clone();
            let entry = self
                .files
                .entry(c.path.clone())
                .or_insert_with(|| (stamp, Default::default()));
            // A file that cannot be stamped is hashed every time.
            if entry.0 != stamp || stamp.is_none() {
                *entry = (stamp, Default::default());
            }
            let st = match entry.1.get(*c) {
                Some(st) => st.clone(),
                None => {
                    let st = state(root, c);
                    entry.1.insert((*c).clone(), st.clone());
                    self.hashed += 1;
                    st
                }
            };
            let since = if st.holds() { None } else { since };
            out.push((st, since));
        }
        // Files no longer cited are let go.
        let before = self.files.len();
        self.files.retain(|p, _| looked.contains_key(p.as_str()));
        if self.files.len() != before {
            self.hashed += 1;
        }
        out
    }
}

/// One look at the current decisions' markers (of the live ones with `live_only`): the markers
/// (read once per tick generation), which of them were chosen, and the state of each chosen
/// citation now (`None` for a marker that is not a citation), [`Cache`] hashing a file's spans
/// again only when the file changed.
struct Look {
    markers: std::sync::Arc<Vec<Marker>>,
    chosen: Vec<(usize, Option<Seen>)>,
}

/// A citation's state now, and since when its file is as it is when it does not hold.
type Seen = (State, Option<String>);

fn look(
    store: &mut crate::store::Store,
    cache: &mut Cache,
    live_only: bool,
) -> Result<Look, Refusal> {
    let view = store.current_shared()?;
    let generation = store.ticks_generation();
    let markers = match &cache.markers {
        Some((g, m)) if *g == generation => std::sync::Arc::clone(m),
        _ => {
            let mut m: Vec<Marker> = Vec::new();
            for (file, t) in view.iter().filter(|(_, t)| t.cites_evidence()) {
                for (i, g) in t.grounds().enumerate() {
                    match citations(g.claim) {
                        Ok(cs) => {
                            m.extend(cs.into_iter().map(|c| (file.clone(), t.clone(), i, Ok(c))))
                        }
                        Err(e) if g.claim.contains(proto::evidence::OPEN) => {
                            m.push((file.clone(), t.clone(), i, Err(e)))
                        }
                        Err(_) => {}
                    }
                }
            }
            let m = std::sync::Arc::new(m);
            cache.markers = Some((generation, std::sync::Arc::clone(&m)));
            m
        }
    };
    let chosen: Vec<usize> = (0..markers.len())
        .filter(|&i| !live_only || markers[i].1.status() == "live")
        .collect();
    let good: Vec<&Citation> = chosen
        .iter()
        .filter_map(|&i| markers[i].3.as_ref().ok())
        .collect();
    let root = store.root().to_path_buf();
    let mut states = cache.states(&root, &good).into_iter();
    let chosen = chosen
        .into_iter()
        .map(|i| {
            let st = if markers[i].3.is_ok() {
                states.next()
            } else {
                None
            };
            (i, st)
        })
        .collect();
    Ok(Look { markers, chosen })
}

/// The markers of the current decisions (of the live ones with `live_only`; only those that
/// do not hold unless `holding`), each as a row with its state now and the hash it cites: what
/// `ev.evidence` answers, and what `check` and `ev.guards` show.
pub fn marker_rows(
    store: &mut crate::store::Store,
    cache: &mut Cache,
    live_only: bool,
    holding: bool,
) -> Result<Vec<(proto::rpc::EvidenceRow, String)>, Refusal> {
    let Look { markers, chosen } = look(store, cache, live_only)?;
    let mut rows = Vec::new();
    for (m, st) in chosen {
        let (file, t, i, c) = &markers[m];
        let (label, c, detail, since) = match (c, st) {
            (Ok(c), Some((st, since))) => {
                if st.holds() && !holding {
                    continue;
                }
                let detail = if st.holds() {
                    String::new()
                } else {
                    st.describe()
                };
                (st.label().to_string(), Some(c), detail, since)
            }
            (Ok(_), None) => continue,
            (Err(e), _) => ("malformed".to_string(), None, e.clone(), None),
        };
        // Evidence that holds never gates; a user-ruled decision's that does not, does.
        let gating = label != "holds" && t.authority() == Some(proto::vocab::USER_RULED);
        let row = proto::rpc::EvidenceRow {
            label,
            tick_id: t.id().to_string(),
            file: file.to_string(),
            decision: t.decision().to_string(),
            claim: t.ground_text(*i).0.to_string(),
            ground_index: *i,
            path: c.map(|c| c.path.clone()).unwrap_or_default(),
            start: c.map_or(0, |c| c.start),
            end: c.map_or(0, |c| c.end),
            detail,
            since,
            gating,
        };
        rows.push((row, c.map(|c| c.sha256.clone()).unwrap_or_default()));
    }
    Ok(rows)
}

/// The rows of the current live decisions whose cited evidence does not hold now: each
/// citation that drifted, ran out of bounds or cannot be read, and each marker that is not a
/// citation. A user-ruled decision's row gates.
pub fn drifted_rows(
    store: &mut crate::store::Store,
    cache: &mut Cache,
) -> Result<Vec<proto::rpc::EvidenceRow>, Refusal> {
    Ok(marker_rows(store, cache, true, false)?
        .into_iter()
        .map(|(row, _)| row)
        .collect())
}

impl Cache {
    /// Hear of changes to cited files from now on (`None`: stop watching them).
    pub fn set_sink(&mut self, sink: Option<Sink>) {
        self.sink = sink;
        self.watched = None;
        self.unwatched = None;
    }

    /// Whether a sink was given (see [`Cache::set_sink`]).
    pub fn has_sink(&self) -> bool {
        self.sink.is_some()
    }

    /// The generation of what the current decisions' evidence reads (see [`sync`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether tick `id`'s evidence read otherwise after generation `since`.
    pub fn moved_since(&self, id: &str, since: u64) -> bool {
        self.said
            .as_ref()
            .and_then(|s| s.get(id))
            .is_some_and(|(_, at)| *at > since)
    }

    /// What tick `id`'s citations read at the last sync (`None`: it cites nothing, or is not a
    /// current live decision).
    pub fn of(&self, id: &str) -> Option<std::sync::Arc<[Cited]>> {
        self.said.as_ref()?.get(id).map(|(c, _)| c.clone())
    }

    /// Watch the directories of `paths` (relative to `root`), heeding only the cited names.
    /// Whether new watches were made (a change just before them may have gone unheard).
    fn watch(&mut self, root: &Path, paths: std::collections::BTreeSet<&str>) -> bool {
        let Some(sink) = self.sink.clone() else {
            return false;
        };
        let mut want = CitedDirs::new();
        for p in paths {
            let (dir, name) = match p.rsplit_once('/') {
                Some((d, n)) => (root.join(d), n),
                None => (root.to_path_buf(), p),
            };
            want.entry(dir).or_default().push(name.to_string());
        }
        if self.watched.as_ref().is_some_and(|(w, _)| *w == want) {
            return false;
        }
        self.watched = None;
        if want.len() > MAX_WATCHED_DIRS {
            let why = format!(
                "cited files span {} directories (at most {MAX_WATCHED_DIRS} are watched)",
                want.len()
            );
            if self.unwatched.as_deref() != Some(why.as_str()) {
                tracing::info!(%why, "evidence drift is found when asked, not pushed");
            }
            self.unwatched = Some(why);
            return false;
        }
        let mut handles = Vec::with_capacity(want.len());
        for (dir, names) in &want {
            let names: std::collections::HashSet<String> = names.iter().cloned().collect();
            let sink = sink.clone();
            let listener: Listener = std::sync::Arc::new(move |c| match c {
                crate::sys::watch::Changes::Quiet => {}
                crate::sys::watch::Changes::Rescan => sink(),
                crate::sys::watch::Changes::Names(n) => {
                    if n.iter().any(|n| names.contains(n)) {
                        sink()
                    }
                }
            });
            // A directory that is not there (a cited file removed with it) is not watched: the
            // citation already reads unreadable, and a check looks again.
            if let Ok(h) = hub().watch(dir, Some(listener)) {
                handles.push(h);
            }
        }
        self.unwatched = None;
        self.watched = Some((want, handles));
        true
    }
}

/// Look at every citation of the current live decisions again (each cited file stat'ed, spans
/// hashed again only where a file changed) and note which ticks' evidence reads otherwise since
/// the last look: their state files are written again by the evaluation that follows (the
/// generation is in its basis), and each citation whose state moved is pushed to subscribers
/// like a verdict (`evidence:holds` → `evidence:drifted`) and journaled. The first look after a
/// start sets the baseline and pushes nothing. When neither the markers nor any cited file
/// changed since the last look, nothing is compared. Returns the generation, and the changes
/// for the caller to journal and push.
pub fn sync(
    store: &mut crate::store::Store,
    cache: &mut Cache,
) -> Result<(u64, Vec<proto::rpc::VerdictChange>), Refusal> {
    let mut seen = look(store, cache, true)?;
    let root = store.root().to_path_buf();
    let paths = seen
        .chosen
        .iter()
        .filter_map(|(m, _)| seen.markers[*m].3.as_ref().ok())
        .map(|c| c.path.as_str())
        .collect();
    if cache.watch(&root, paths) {
        // Watched from now on: look once more, so that an edit made while the watches were
        // being made is not missed.
        seen = look(store, cache, true)?;
    }
    let generation = store.ticks_generation();
    let at = (generation, cache.hashed);
    if cache.said.is_some() && cache.synced_at == Some(at) {
        return Ok((cache.generation, Vec::new()));
    }
    cache.synced_at = Some(at);
    // Per tick, in view order: its citations as read now.
    let mut now: Vec<(usize, Vec<Cited>)> = Vec::new();
    for (m, st) in &seen.chosen {
        let (_, t, i, c) = &seen.markers[*m];
        let cited = match (c, st) {
            (Ok(c), Some((st, _))) => Cited {
                ground: *i,
                path: c.path.clone(),
                start: c.start,
                end: c.end,
                sha256: c.sha256.clone(),
                state: st.label(),
            },
            _ => Cited {
                ground: *i,
                path: String::new(),
                start: 0,
                end: 0,
                sha256: String::new(),
                state: "malformed",
            },
        };
        match now.last_mut() {
            Some((last, list)) if seen.markers[*last].1.id() == t.id() => list.push(cited),
            _ => now.push((*m, vec![cited])),
        }
    }
    let baseline = cache.said.is_none();
    let said = cache.said.take().unwrap_or_default();
    let next = cache.generation + 1;
    let mut moved = false;
    let mut changes = Vec::new();
    let mut kept = std::collections::HashMap::with_capacity(now.len());
    for (m, cited) in now {
        let t = &seen.markers[m].1;
        let id = t.id();
        let was = said.get(id);
        if let Some((c, at)) = was.filter(|(c, _)| **c == *cited) {
            kept.insert(id.to_string(), (c.clone(), *at));
            continue;
        }
        moved = true;
        let was = was.map(|(c, _)| c.as_ref());
        for c in &cited {
            let old = was.and_then(|w| w.iter().find(|o| o.same_citation(c)));
            let quiet = match old {
                Some(o) => o.state == c.state,
                None => c.state == "holds",
            };
            if !quiet && !baseline {
                changes.push(proto::rpc::VerdictChange {
                    tick_id: id.to_string(),
                    ground_index: c.ground,
                    decision: t.decision().to_string(),
                    claim: t.ground_text(c.ground).0.to_string(),
                    old: old.map(Cited::label),
                    new: Some(c.label()),
                });
            }
        }
        kept.insert(id.to_string(), (cited.into(), next));
    }
    moved |= kept.len() != said.len();
    cache.said = Some(kept);
    if moved {
        cache.generation = next;
    }
    Ok((cache.generation, changes))
}
