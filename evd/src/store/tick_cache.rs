//! The cache of a store's parsed ticks: every file of `ticks/` by name, each packed, with the
//! stamp it was read at, brought up to date at the start of every request (the watch names
//! what changed; without one, stamps are compared), and the current view computed once per
//! change. It reads `ticks/` and never writes a store file: appends tell it what they wrote
//! ([`TickCache::took_own`]).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proto::model::TickParseError;
use proto::rpc::Refusal;
use proto::Tick;

use crate::engine::packed::PackedTick;
use crate::sys::beneath::Dir;
use crate::sys::fsio;
use crate::sys::watch::{Changes, DirWatch};

/// What one file of `ticks/` holds, as last read.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A valid tick, packed ([`PackedTick::tick`] rebuilds it).
    Tick(Arc<PackedTick>),
    /// JSON, but not a valid tick: the reader's message.
    Invalid(Box<String>),
    /// Not JSON: poisons whole-store reads (`reading store: <file>: <error>`).
    NotJson(Box<String>),
    /// Not readable as text (bad UTF-8, a symlink): poisons whole-store reads
    /// (`reading store: <error>`).
    Unreadable(Box<String>),
}
// The messages are boxed (rare) so that an entry of the cache stays two words.

/// Enough of a file's metadata to notice it changed. The change time, not the modification
/// time: every write moves both, but putting the modification time back (`touch -d`,
/// `os.utime`) moves the change time once more, so an edit of the same length cannot hide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ctime_ns: i64,
    len: u64,
    /// Never 0 (no file has inode 0), so an absent stamp costs no extra word.
    ino: std::num::NonZeroU64,
}

impl Stamp {
    /// The stamp of what a directory handle's `stat` saw (see [`Stamp::of`]).
    fn of_stat(st: &crate::sys::beneath::Stat) -> Option<Stamp> {
        Some(Stamp {
            ctime_ns: i64::try_from(st.ctime_ns).unwrap_or(i64::MAX),
            len: st.len,
            ino: std::num::NonZeroU64::new(st.ino)?,
        })
    }

    /// `None` for an inode number of 0, which no real file has: such a file is simply never
    /// trusted by its stamp.
    fn of(m: &fs::Metadata) -> Option<Stamp> {
        Some(Stamp {
            ctime_ns: m
                .ctime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.ctime_nsec()),
            len: m.len(),
            ino: std::num::NonZeroU64::new(m.ino())?,
        })
    }
}

#[derive(Debug, Clone)]
struct Cached {
    stamp: Option<Stamp>,
    entry: Entry,
    /// New at every read (see [`TickCache::serial`]).
    serial: u64,
    /// What `verify` found in this file, while the cache has not read it again.
    audit: Option<crate::engine::audit::AuditSlot>,
}

/// Where [`Cached`] serials come from.
static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Cached {
    /// A file that is not a valid tick.
    fn new(stamp: Option<Stamp>, entry: Entry) -> Cached {
        Cached::with(stamp, entry)
    }

    /// A valid tick, packed (with its identity).
    fn tick(stamp: Option<Stamp>, tick: &Tick) -> Cached {
        Cached::with(stamp, Entry::Tick(Arc::new(PackedTick::pack(tick))))
    }

    fn with(stamp: Option<Stamp>, entry: Entry) -> Cached {
        Cached {
            stamp,
            entry,
            serial: SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            audit: None,
        }
    }
}

/// The current view: `(file name, tick)`, newest first.
pub type CurrentView = Vec<(Arc<str>, Arc<PackedTick>)>;

/// The parsed ticks of one `ticks/` directory.
#[derive(Debug)]
pub struct TickCache {
    /// The `ticks/` directory.
    dir: PathBuf,
    /// By file name; the name's handle is shared with the view and the check memo.
    files: BTreeMap<Arc<str>, Cached>,
    /// `ticks/`'s stamp when `files` was last brought up to date.
    stamp: Option<Stamp>,
    /// The watch on `ticks/`: when present, the exact list of what changed since the last
    /// refresh.
    watch: Option<DirWatch>,
    /// Why `ticks/` could not be watched, when it could not: every refresh then re-stats it all.
    watch_error: Option<String>,
    /// Moves whenever the cache took in a change.
    generation: u64,
    /// The current view as of a generation.
    view: Option<(u64, Arc<CurrentView>)>,
    /// An image was taken back and the first scan has not run yet.
    image_taken: bool,
    /// The checksum of the image taken back.
    image_sum: Option<u64>,
    /// The current view the image holds (each tick's place among the files in name order,
    /// newest first), computed by this build: the view while the cache is exactly the image.
    image_view: Option<Vec<u32>>,
    /// That view made already, before the first scan confirmed the image (see
    /// [`TickCache::image_view_unconfirmed`]).
    image_view_made: Option<Arc<CurrentView>>,
    /// Whether the image taken back held a view this build can use.
    image_whole: bool,
    /// The generation at which the cache held exactly the image taken back (its first scan
    /// read no file and found none gone).
    image_generation: Option<u64>,
    /// `ticks/` listed and stamped on a thread of its own while the image is decoded (see
    /// [`TickCache::look_ahead`]), for the first scan.
    ahead: Option<std::thread::JoinHandle<LookedAhead>>,
    /// How recent a change to a tick file is too recent to trust its stamp, once known (see
    /// [`fsio::racy_window_ns`]).
    racy_ns: std::sync::OnceLock<i64>,
}

/// Every name in `ticks/`, sorted by its bytes, with its stamp when it is a regular file.
type Listing = Vec<(std::ffi::OsString, Option<Stamp>)>;

/// What a look ahead found: the watch on `ticks/` (or why there is none), then its listing.
type LookedAhead = (Result<DirWatch, String>, Option<Listing>);

impl TickCache {
    /// An empty cache of `dir` (nothing read yet).
    pub fn new(dir: PathBuf) -> TickCache {
        TickCache {
            dir,
            files: BTreeMap::new(),
            stamp: None,
            watch: None,
            watch_error: None,
            generation: 0,
            view: None,
            image_taken: false,
            image_sum: None,
            image_view: None,
            image_view_made: None,
            image_whole: false,
            image_generation: None,
            ahead: None,
            racy_ns: std::sync::OnceLock::new(),
        }
    }

    /// Forget everything read (the store was removed under its owner): the next refresh reads
    /// `ticks/` afresh.
    pub fn reset(&mut self) {
        self.files.clear();
        self.stamp = None;
        self.watch = None;
        self.image_taken = false;
        self.image_view = None;
        self.image_view_made = None;
        self.image_generation = None;
        self.ahead = None;
    }

    /// Before an image is taken back, on a thread of its own: watch `ticks/`, then list it and
    /// stamp every file, so that the first scan finds the watch and the listing made while the
    /// image was being decoded. Watched first: a change made after a file was stamped is
    /// queued, never missed.
    /// Does nothing once the cache has read `ticks/`.
    pub fn look_ahead(&mut self) {
        if self.stamp.is_some()
            || !self.files.is_empty()
            || self.ahead.is_some()
            || self.watch.is_some()
        {
            return;
        }
        let dir = self.dir.clone();
        self.ahead = std::thread::Builder::new()
            .name("evd-ticks-ahead".into())
            .spawn(move || match DirWatch::new(&dir) {
                Ok(w) => (Ok(w), listing(&dir)),
                Err(e) => (Err(e.0), None),
            })
            .ok();
    }

    /// How recent a change to a tick file is too recent to trust its stamp (see
    /// [`fsio::racy_window_ns`]), looked up once `ticks/` is there to ask about.
    fn racy_ns(&self) -> i64 {
        if let Some(ns) = self.racy_ns.get() {
            return *ns;
        }
        let ns = fsio::racy_window_ns(&self.dir);
        if self.dir.is_dir() {
            let _ = self.racy_ns.set(ns);
        }
        ns
    }

    fn dir_stamp(&self) -> Option<Stamp> {
        fs::symlink_metadata(&self.dir)
            .ok()
            .and_then(|m| Stamp::of(&m))
    }

    /// Whether nobody touched `ticks/` since the cache last brought itself up to date: taken
    /// before an append, so that the append can keep the cache in step without a rescan.
    pub fn in_sync(&self) -> bool {
        self.stamp.is_some() && self.dir_stamp() == self.stamp
    }

    /// Take in `ticks` that this store just wrote to `ticks/` (their names are their ids).
    /// With `in_sync` (see [`TickCache::in_sync`], taken before the write) the directory's new
    /// stamp is adopted too. Whatever was computed from the cache before is out of date
    /// afterwards, whether or not the watch also reports the new files.
    pub fn took_own<'t>(&mut self, in_sync: bool, ticks: impl IntoIterator<Item = &'t Tick>) {
        if in_sync {
            self.stamp = self.dir_stamp();
        }
        for t in ticks {
            let file_stamp = fs::symlink_metadata(self.dir.join(&t.id))
                .ok()
                .and_then(|m| Stamp::of(&m));
            self.files
                .insert(t.id.as_str().into(), Cached::tick(file_stamp, t));
        }
        self.generation += 1;
    }

    /// Bring the tick cache up to date with `ticks/`. With the inotify watch (the normal case)
    /// this costs one stat and one non-blocking read when nothing changed, and re-reads exactly
    /// the files that did. Without it, changes are found through the directory's stamp plus a
    /// re-check of suspect files.
    pub fn refresh(&mut self) -> Result<(), Refusal> {
        let racy = self.racy_ns();
        let dir = self.dir.clone();
        let meta = match fs::symlink_metadata(&dir) {
            // git keeps no empty directory (a fresh clone, a branch switch, an aborted merge):
            // a missing `ticks/` is an empty one, watched again once it is back.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !self.files.is_empty() || self.stamp.is_some() {
                    self.files.clear();
                    self.generation += 1;
                }
                self.watch = None;
                self.stamp = None;
                return Ok(());
            }
            other => {
                other.map_err(|e| Refusal::io(format!("reading store: {}: {e}", dir.display())))?
            }
        };
        if meta.file_type().is_symlink() || !meta.is_dir() {
            return Err(Refusal::io(format!(
                "reading store: {}: ticks/ is not a directory (evd never follows links inside a store)",
                dir.display()
            )));
        }
        let stamp = Stamp::of(&meta);
        if self.stamp.is_some() {
            match self.watch.as_mut().map(DirWatch::drain) {
                Some(Changes::Quiet) => return Ok(()),
                Some(Changes::Names(names)) => {
                    self.generation += 1;
                    for name in names {
                        self.reload_one(&dir, name);
                    }
                    self.stamp = stamp;
                    return Ok(());
                }
                Some(Changes::Rescan) => {
                    // Events were lost: whatever was built on this generation is suspect, even
                    // if the scan below finds every file as it was.
                    self.watch = None;
                    self.generation += 1;
                }
                // No watch: nothing short of looking at every file can tell that a tick was
                // edited in place, so the scan below re-stats them all.
                None => {}
            }
        }
        // Looked ahead: the watch made there (before its listing), and the listing for the
        // image below.
        let listed = match self.ahead.take().map(|h| h.join()) {
            Some(Ok((Ok(w), listed))) => {
                self.watch = Some(w);
                self.watch_error = None;
                listed
            }
            Some(Ok((Err(e), _))) => {
                self.watch_error = Some(e);
                None
            }
            _ => None,
        };
        // Watch first, then scan: a change during the scan is queued, never missed.
        if self.watch.is_none() {
            match DirWatch::new(&dir) {
                Ok(w) => {
                    self.watch = Some(w);
                    self.watch_error = None;
                }
                Err(e) => self.watch_error = Some(e.0),
            }
        }
        if self.image_taken && self.adopt_image(&dir, listed) {
            self.image_taken = false;
            self.generation += 1;
            self.image_generation = Some(self.generation);
            self.stamp = stamp;
            return Ok(());
        }
        let mut next = BTreeMap::new();
        // Whether anything differs from the cache (a first scan always does).
        let mut changed = self.stamp.is_none();
        let mut to_load = Vec::new();
        // One walk to `ticks/` (no link below the repository's root followed), then each file
        // looked at and opened through it.
        let handle = crate::sys::beneath::root_of(&dir).dir(&dir).ok();
        // Files the cache holds that readdir calls regular: their stamps are compared through
        // the handle, on a few threads (a daemon's first scan after taking back an image).
        let mut known_files: Vec<(String, PathBuf, Cached)> = Vec::new();
        let rd = fs::read_dir(&dir).map_err(|e| Refusal::io(format!("reading store: {e}")))?;
        for ent in rd {
            let ent = ent.map_err(|e| Refusal::io(format!("reading store: {e}")))?;
            let name = ent.file_name().to_string_lossy().into_owned();
            let path = ent.path();
            let known = self.files.remove(name.as_str());
            let regular = ent.file_type().is_ok_and(|t| t.is_file());
            let known = match known {
                // A file the cache never saw is read at once (its stamp from the open file's
                // `fstat`): a first scan looks at each path once.
                None if regular => {
                    to_load.push((name, path, None));
                    continue;
                }
                Some(c)
                    if regular
                        && handle.is_some()
                        && c.stamp.is_some()
                        && !is_suspect(&c, racy) =>
                {
                    known_files.push((name, path, c));
                    continue;
                }
                known => known,
            };
            let Ok(m) = fs::symlink_metadata(&path) else {
                continue; // vanished between readdir and stat
            };
            if m.is_dir() {
                continue;
            }
            match known {
                Some(c)
                    if c.stamp.is_some()
                        && c.stamp == stamp_of_regular(&m)
                        && !is_suspect(&c, racy) =>
                {
                    next.insert(name.into(), c);
                }
                _ => to_load.push((name, path, Some(m))),
            }
        }
        if let Some(h) = &handle {
            let same =
                crate::sys::par::map(&known_files, 2048, |(name, _, c)| unchanged(h, name, c));
            for ((name, path, c), same) in known_files.into_iter().zip(same) {
                if same {
                    next.insert(name.into(), c);
                } else {
                    to_load.push((name, path, None));
                }
            }
        }
        let loaded = to_load.len();
        changed |= loaded > 0;
        next.extend(load_all(handle.as_ref(), to_load));
        if loaded >= 1024 {
            // Parsing left the heap full of holes between the packed ticks kept: give the free
            // pages back, so a daemon holding a large store holds what it keeps.
            crate::sys::resources::release_free_memory();
        }
        // What is left in the cache is gone from the directory.
        changed |= !self.files.is_empty();
        if changed {
            self.generation += 1;
        }
        if std::mem::take(&mut self.image_taken) && loaded == 0 && self.files.is_empty() {
            self.image_generation = Some(self.generation);
        }
        self.files = next;
        self.stamp = stamp;
        Ok(())
    }

    /// An image of the parsed ticks (see [`crate::engine::codec`]) for the next daemon to take
    /// back instead of reading and parsing every file: each valid tick with the stamp it was
    /// read at. A tick written too recently for its stamp to tell a later edit apart is left
    /// out (read again from its file).
    pub fn image(&self) -> TickImage {
        let racy = self.racy_ns();
        let entries = self
            .files
            .iter()
            .filter_map(|(name, c)| match (&c.entry, c.stamp) {
                (Entry::Tick(t), Some(stamp)) if !is_suspect(c, racy) => {
                    Some((Arc::clone(name), stamp, Arc::clone(t)))
                }
                _ => None,
            })
            .collect();
        let view = self
            .view
            .as_ref()
            .filter(|(g, _)| *g == self.generation)
            .map(|(_, v)| Arc::clone(v));
        TickImage { entries, view }
    }

    /// Take back an image made by [`TickCache::image`], before the first scan: each tick in it
    /// is kept only if the first scan finds its file with the very same stamp (a file that
    /// changed, or was never imaged, is read as usual). Returns how many ticks were taken; 0
    /// for a damaged or foreign image, or when the cache has already read `ticks/`.
    pub fn take_image(&mut self, image: &Arc<Vec<u8>>, build: Option<&str>) -> usize {
        if self.stamp.is_some() || !self.files.is_empty() {
            return 0;
        }
        match read_image(image) {
            Some((files, view)) => {
                let n = files.len();
                self.files = files;
                self.image_view = view
                    .filter(|(b, _)| Some(b.as_str()) == build)
                    .map(|(_, names)| names);
                self.image_whole = self.image_view.is_some();
                self.image_taken = true;
                self.image_sum = crate::engine::codec::image_sum(image);
                n
            }
            None => 0,
        }
    }

    /// The view the image held, while the cache is exactly that image (once).
    fn view_from_image(&mut self) -> Option<Arc<CurrentView>> {
        let at = self.image_view.take()?;
        let made = self.image_view_made.take();
        if self.image_generation != Some(self.generation) {
            return None;
        }
        made.or_else(|| self.view_at(&at).map(Arc::new))
    }

    /// The view the image taken back holds, before the first scan has confirmed that `ticks/`
    /// is exactly that image: for work done ahead that is thrown away unless it is (whoever
    /// uses it compares [`TickCache::image_generation`] with [`TickCache::generation`] first).
    /// `None` once the first scan ran, or when the image held no view this build can use.
    pub fn image_view_unconfirmed(&mut self) -> Option<Arc<CurrentView>> {
        if !self.image_taken || self.stamp.is_some() {
            return None;
        }
        if let Some(made) = &self.image_view_made {
            return Some(Arc::clone(made));
        }
        let view = Arc::new(self.view_at(self.image_view.as_deref()?)?);
        self.image_view_made = Some(Arc::clone(&view));
        Some(view)
    }

    /// The ticks at places `at` among the files (in name order), each with its name.
    fn view_at(&self, at: &[u32]) -> Option<CurrentView> {
        let files: Vec<(&Arc<str>, &Cached)> = self.files.iter().collect();
        at.iter()
            .map(|&i| {
                let (name, c) = files.get(i as usize)?;
                match &c.entry {
                    Entry::Tick(t) => Some((Arc::clone(name), Arc::clone(t))),
                    _ => None,
                }
            })
            .collect()
    }

    /// The first scan after an image was taken back, when `ticks/` holds exactly the files
    /// the image has, each with the very stamp it recorded: then the cache is the image, found
    /// with one directory listing and a `stat` per file (on a few threads) and no other work.
    /// `false` (nothing changed) when anything differs: the general scan sorts it out.
    fn adopt_image(&self, dir: &Path, listed: Option<Listing>) -> bool {
        let racy = self.racy_ns();
        let listed = listed.or_else(|| listing(dir));
        let Some(listed) = listed else {
            return false;
        };
        // The same names, both sorted by their bytes, and each file with the very same stamp.
        listed.len() == self.files.len()
            && listed.iter().zip(&self.files).all(|((n, stamp), (k, c))| {
                n.as_encoded_bytes() == k.as_bytes()
                    && stamp.is_some()
                    && *stamp == c.stamp
                    && !is_suspect(c, racy)
            })
    }

    /// Re-read one entry inotify named (whatever its stamp says: it changed).
    fn reload_one(&mut self, dir: &Path, name: String) {
        match fs::symlink_metadata(dir.join(&name)) {
            Ok(m) if !m.is_dir() => {
                let fresh = load(&dir.join(&name), &name, &m);
                self.files.insert(name.into(), fresh);
            }
            _ => {
                self.files.remove(name.as_str());
            }
        }
    }

    /// Every file of `ticks/`, refreshed. Fails like upstream's whole-store read when any file is
    /// not JSON: `reading store: <file>: <error>`.
    pub fn entries(&mut self) -> Result<Vec<(&str, &Entry)>, Refusal> {
        self.readable()?;
        Ok(self.files.iter().map(|(n, c)| (&**n, &c.entry)).collect())
    }

    /// Refresh, and fail like upstream's whole-store read when any file is not JSON (see
    /// [`TickCache::entries`]), without listing anything.
    pub fn readable(&mut self) -> Result<(), Refusal> {
        self.refresh()?;
        let poisoned = self.files.iter().find_map(|(name, c)| match &c.entry {
            Entry::Unreadable(e) => Some(e.to_string()),
            Entry::NotJson(e) => Some(format!("{name}: {e}")),
            _ => None,
        });
        match poisoned {
            Some(e) => Err(Refusal::io(format!("reading store: {e}"))),
            None => Ok(()),
        }
    }

    /// Every parseable tick, refreshed (whole-store read rules apply).
    pub fn ticks(&mut self) -> Result<Vec<(&str, &PackedTick)>, Refusal> {
        Ok(self
            .entries()?
            .into_iter()
            .filter_map(|(n, e)| match e {
                Entry::Tick(t) => Some((n, t.as_ref())),
                _ => None,
            })
            .collect())
    }

    /// [`TickCache::current`], each tick rebuilt whole (for the few verbs that need every field of
    /// every current tick).
    pub fn current_ticks(&mut self) -> Result<Vec<(&str, Tick)>, Refusal> {
        Ok(self
            .current()?
            .into_iter()
            .map(|(f, t)| (f, t.tick()))
            .collect())
    }

    /// The current view (see [`crate::engine::view`]), newest first, from the cached identities.
    /// Whole-store read rules apply.
    pub fn current(&mut self) -> Result<Vec<(&str, &PackedTick)>, Refusal> {
        self.entries()?;
        let inputs: Vec<(&str, &PackedTick, crate::engine::view::Identity)> = self
            .files
            .iter()
            .filter_map(|(n, c)| match &c.entry {
                Entry::Tick(t) => Some((&**n, t.as_ref(), t.identity())),
                _ => None,
            })
            .collect();
        Ok(crate::engine::view::current(&inputs))
    }

    /// [`TickCache::current`], as shared handles (no copy of any tick), for callers that go on to
    /// use the store mutably. Computed once per change of the tick cache.
    pub fn current_shared(&mut self) -> Result<Arc<CurrentView>, Refusal> {
        self.refresh()?;
        // A view is only ever made from a store with no poisoned file, and it stands for as
        // long as the tick cache did not move.
        if let Some((generation, view)) = &self.view {
            if *generation == self.generation {
                return Ok(Arc::clone(view));
            }
        }
        self.entries()?;
        if let Some(view) = self.view_from_image() {
            self.view = Some((self.generation, Arc::clone(&view)));
            return Ok(view);
        }
        let inputs: Vec<(&Arc<str>, &Arc<PackedTick>, crate::engine::view::Identity)> = self
            .files
            .iter()
            .filter_map(|(n, c)| match &c.entry {
                Entry::Tick(t) => Some((n, t, t.identity())),
                _ => None,
            })
            .collect();
        let plain: Vec<(&str, &PackedTick, crate::engine::view::Identity)> = inputs
            .iter()
            .map(|(n, t, id)| (&***n, t.as_ref(), *id))
            .collect();
        // The view keeps the inputs' order of identity; map each chosen tick back to its
        // handles (the cache's own name and tick).
        let by_name: std::collections::HashMap<&str, (&Arc<str>, &Arc<PackedTick>)> =
            inputs.iter().map(|(n, t, _)| (&***n, (*n, *t))).collect();
        let mut view: CurrentView = crate::engine::view::current(&plain)
            .into_iter()
            .filter_map(|(f, _)| by_name.get(f).map(|(n, t)| (Arc::clone(n), Arc::clone(t))))
            .collect();
        // Collected in place, it would keep the capacity of every tick the collapse looked at.
        view.shrink_to_fit();
        let view = Arc::new(view);
        self.view = Some((self.generation, Arc::clone(&view)));
        Ok(view)
    }

    /// Why `ticks/` is served degraded (it could not be watched, so every answer is validated
    /// against the disk first), or `None` when it is watched.
    pub fn watch_error(&self) -> Option<String> {
        self.watch_error.clone()
    }

    /// A number that moves whenever the tick cache took in a change (call after a refresh).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The cached entry for one file name as last refreshed (no look at the disk).
    pub fn cached_entry(&self, name: &str) -> Option<Entry> {
        self.files.get(name).map(|c| c.entry.clone())
    }

    /// The cached entry for one file name (after a refresh), without the whole-store rule.
    pub fn entry(&mut self, name: &str) -> Result<Option<Entry>, Refusal> {
        self.refresh()?;
        Ok(self.files.get(name).map(|c| c.entry.clone()))
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the cache holds no file.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Whether `ticks/` is watched (inotify), so that [`TickCache::generation`] moving is the
    /// only way its content can have changed.
    pub fn watched(&self) -> bool {
        self.watch.is_some()
    }

    /// The generation at which the cache held exactly the image it took back: an image
    /// written at that generation would say the same.
    pub fn image_generation(&self) -> Option<u64> {
        self.image_generation
    }

    /// Whether the image taken back held everything this build would write in it (its view
    /// too): when it did not, a new one is worth writing even though no tick moved.
    pub fn image_whole(&self) -> bool {
        self.image_whole
    }

    /// The checksum of the image taken back (see [`crate::engine::codec::image_sum`]).
    pub fn image_sum(&self) -> Option<u64> {
        self.image_sum
    }

    /// Whether the tick cache has read `ticks/` at least once.
    pub fn loaded(&self) -> bool {
        self.stamp.is_some()
    }

    /// The serial of the cached read of one file of `ticks/` (after a refresh): a number that
    /// is new every time the cache reads the file again, so equal serials mean the file was
    /// not seen to change in between.
    pub fn serial(&self, name: &str) -> Option<u64> {
        self.files.get(name).map(|c| c.serial)
    }

    /// The audit `verify` kept for one file of `ticks/` (see [`crate::memo::verify`]), with the
    /// cached tick, while the cache has not read the file again.
    pub fn kept_audit(
        &self,
        name: &str,
    ) -> Option<(&crate::engine::audit::AuditSlot, Option<&PackedTick>)> {
        let c = self.files.get(name)?;
        let tick = match &c.entry {
            Entry::Tick(t) => Some(t.as_ref()),
            _ => None,
        };
        c.audit.as_ref().map(|a| (a, tick))
    }

    /// Keep `verify`'s audit of one file, read while the cache's serial for it was `serial`
    /// (nothing is kept if the cache has read the file again since). `slot` is made from the
    /// cached tick, if the file is one.
    pub fn keep_audit(
        &mut self,
        name: &str,
        serial: u64,
        slot: impl FnOnce(Option<&PackedTick>) -> crate::engine::audit::AuditSlot,
    ) {
        if let Some(c) = self.files.get_mut(name).filter(|c| c.serial == serial) {
            let tick = match &c.entry {
                Entry::Tick(t) => Some(t.as_ref()),
                _ => None,
            };
            c.audit = Some(slot(tick));
        }
    }
}

fn stamp_of_regular(m: &fs::Metadata) -> Option<Stamp> {
    m.file_type().is_file().then(|| Stamp::of(m)).flatten()
}

/// Read one directory entry of `ticks/` into the cache.
fn load(path: &Path, name: &str, m: &fs::Metadata) -> Cached {
    if m.file_type().is_symlink() {
        return Cached::new(
            None,
            Entry::Unreadable(Box::new(format!(
                "{name} is a symlink (evd never follows links inside a store)"
            ))),
        );
    }
    let stamp = stamp_of_regular(m);
    match read_entry(path) {
        Ok(t) => Cached::tick(stamp, &t),
        Err(e) => Cached::new(stamp, e),
    }
}

/// A file of `ticks/` to read: its name, its path, and its metadata when it was looked at.
type ToLoad = (String, PathBuf, Option<fs::Metadata>);

/// [`load`] each of `files`: on a few threads when there are many (the first scan of a large
/// store reads and parses every tick). A file that vanished meanwhile is left out.
fn load_all(dir: Option<&Dir>, files: Vec<ToLoad>) -> Vec<(Arc<str>, Cached)> {
    let loaded = crate::sys::par::map(&files, 512, |(n, p, m)| match m {
        Some(m) => Some(load(p, n, m)),
        None => load_unseen(dir, p, n),
    });
    files
        .into_iter()
        .map(|(n, ..)| n)
        .zip(loaded)
        .filter_map(|(n, c)| Some((n.into(), c?)))
        .collect()
}

/// Read a file of `ticks/` that readdir called regular and nothing has looked at yet: opened
/// without following links, its stamp from the open file. Anything unusual (it is no longer
/// regular, it cannot be read) goes the long way, through [`load`]; `None` when it vanished.
fn load_unseen(dir: Option<&Dir>, path: &Path, name: &str) -> Option<Cached> {
    let read = match dir {
        Some(d) => d.read(std::ffi::OsStr::new(name)).and_then(|(m, bytes)| {
            String::from_utf8(bytes)
                .map(|t| (m, t))
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))
        }),
        None => fsio::read_regular(path),
    };
    if let Ok((m, text)) = read {
        return Some(match Tick::parse(&text) {
            Ok(t) => Cached::tick(stamp_of_regular(&m), &t),
            Err(e) => Cached::new(stamp_of_regular(&m), parse_error(e)),
        });
    }
    let m = fs::symlink_metadata(path).ok()?;
    (!m.is_dir()).then(|| load(path, name, &m))
}

/// What an image of the parsed ticks holds, taken from the cache at one moment (shared handles,
/// no copy of any tick), to be encoded off the store's thread ([`TickImage::encode`]).
#[derive(Debug)]
pub struct TickImage {
    entries: Vec<(Arc<str>, Stamp, Arc<PackedTick>)>,
    /// The current view, when it was current.
    view: Option<Arc<CurrentView>>,
}

impl TickImage {
    /// The image's bytes (see [`crate::engine::codec`]); the view goes in for a daemon of the
    /// same `build` (the view is its code's).
    pub fn encode(&self, build: Option<&str>) -> Vec<u8> {
        use crate::engine::codec::Writer;
        let mut texts = crate::engine::packed::ImageTexts::default();
        // In chunks, so that a daemon taking the image back decodes them on a few threads.
        let mut chunks = Vec::new();
        for chunk in self.entries.chunks(IMAGE_CHUNK) {
            let mut one = Writer::new();
            for (name, stamp, t) in chunk {
                one.str(name);
                one.i64(stamp.ctime_ns);
                one.u64(stamp.len);
                one.u64(stamp.ino.get());
                t.encode(&mut one, &mut texts);
            }
            chunks.push((chunk.len(), one.into_body()));
        }
        let mut w = Writer::new();
        w.str(IMAGE_MAGIC);
        texts.encode(&mut w);
        w.u32(u32::try_from(chunks.len()).unwrap_or(u32::MAX));
        for (n, chunk) in chunks {
            w.u32(u32::try_from(n).unwrap_or(u32::MAX));
            w.bytes(&chunk);
        }
        // The view as places among the entries (all of its ticks must be among them).
        let at: Option<Vec<u32>> = self.view.as_ref().and_then(|view| {
            let place: std::collections::HashMap<&str, u32> = self
                .entries
                .iter()
                .enumerate()
                .map(|(i, (name, _, _))| (&**name, u32::try_from(i).unwrap_or(u32::MAX)))
                .collect();
            view.iter()
                .map(|(name, _)| place.get(&**name).copied())
                .collect()
        });
        match (build, at) {
            (Some(build), Some(at)) => {
                w.bool(true);
                w.str(build);
                w.u32(u32::try_from(at.len()).unwrap_or(u32::MAX));
                for i in at {
                    w.u32(i);
                }
            }
            _ => w.bool(false),
        }
        w.finish()
    }
}

/// What a tick cache image starts with (its layout's version in the name).
const IMAGE_MAGIC: &str = "evd tick image 3";
/// Ticks per chunk of an image: small enough that the chunks split evenly between the threads
/// that decode them (2,048 left one of two threads a third more to do at 10k ticks).
const IMAGE_CHUNK: usize = 512;

/// What a tick cache image holds: its entries, and the current view (each tick's place among
/// the entries, in name order) with the build that computed it.
type Image = (BTreeMap<Arc<str>, Cached>, Option<(String, Vec<u32>)>);

/// The entries of a tick cache image; `None` when any of it does not read.
fn read_image(image: &Arc<Vec<u8>>) -> Option<Image> {
    let mut r = crate::engine::codec::Reader::checked(image)?;
    if r.str()? != IMAGE_MAGIC {
        return None;
    }
    let numbers = crate::engine::packed::ImageTexts::decode(&mut r)?;
    let n = r.count(8)?;
    let chunks: Vec<(usize, &[u8])> = (0..n)
        .map(|_| Some((r.u32()? as usize, r.bytes()?)))
        .collect::<Option<_>>()?;
    let view = if r.bool()? {
        let build = r.str()?.to_string();
        let n = r.count(4)?;
        let at = (0..n).map(|_| r.u32()).collect::<Option<Vec<_>>>()?;
        Some((build, at))
    } else {
        None
    };
    if !r.at_end() {
        return None;
    }
    let decoded = crate::sys::par::map(&chunks, 1, |&(n, bytes)| {
        let mut r = crate::engine::codec::Reader::part(bytes);
        let n = if n <= bytes.len() / 32 {
            n
        } else {
            return None;
        };
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let name: Arc<str> = r.str()?.into();
            let stamp = Stamp {
                ctime_ns: r.i64()?,
                len: r.u64()?,
                ino: std::num::NonZeroU64::new(r.u64()?)?,
            };
            // The tick's text stays in the image (see `PackedTick::decode`).
            let tick = PackedTick::decode(&mut r, &numbers, Some(image))?;
            out.push((name, Cached::with(Some(stamp), Entry::Tick(Arc::new(tick)))));
        }
        r.at_end().then_some(out)
    });
    // Written in name order: the map is built from the sorted run in one pass.
    let files: BTreeMap<_, _> = decoded
        .into_iter()
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    Some((files, view))
}

/// Every name in `dir` sorted by its bytes, each with its stamp when it is a regular file
/// (looked at through one handle, on a few threads); `None` when `dir` cannot be listed.
fn listing(dir: &Path) -> Option<Listing> {
    let handle = crate::sys::beneath::root_of(dir).dir(dir).ok()?;
    let mut names = handle.names().ok()?;
    names.sort_unstable();
    let stamps = handle.stat_each(&names).into_iter().map(|st| {
        st.filter(|st| st.kind == crate::sys::beneath::Kind::File)
            .and_then(|st| Stamp::of_stat(&st))
    });
    Some(names.into_iter().zip(stamps).collect())
}

/// Whether the file `name` in the directory `dir` is still the regular file `c` was read from
/// (the same stamp, looked at through the handle).
fn unchanged(dir: &Dir, name: &str, c: &Cached) -> bool {
    matches!(
        dir.stat(std::ffi::OsStr::new(name)),
        Ok(Some(st)) if st.kind == crate::sys::beneath::Kind::File && Stamp::of_stat(&st) == c.stamp
    )
}

/// Whether `c`'s stamp cannot be trusted yet: it was changed less than `racy_ns` ago (a
/// same-size rewrite within the filesystem's timestamp resolution would go unseen, see
/// [`fsio::racy_window_ns`]), or it is no regular file's.
fn is_suspect(c: &Cached, racy_ns: i64) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    match (&c.entry, c.stamp) {
        (Entry::Tick(_), Some(s)) => now.saturating_sub(s.ctime_ns) < racy_ns,
        (Entry::Unreadable(_), None) => false, // a symlink stays a symlink until ticks/ changes
        _ => true,
    }
}

/// Read and parse one tick file: the tick, or the entry that says why it is none.
fn read_entry(path: &Path) -> Result<Tick, Entry> {
    match fsio::read_text(path) {
        Err(e) => Err(Entry::Unreadable(Box::new(e.to_string()))),
        Ok(text) => Tick::parse(&text).map_err(parse_error),
    }
}

/// The entry that says why a tick file's text is no tick.
fn parse_error(e: TickParseError) -> Entry {
    match e {
        TickParseError::NotJson(e) => Entry::NotJson(Box::new(e)),
        TickParseError::Invalid(e) => Entry::Invalid(Box::new(e)),
    }
}
