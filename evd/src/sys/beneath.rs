//! Every file evd and evctl open inside a repository (a store's ticks, HEAD, config, receipts,
//! state, requests, ledger, run artifacts, answers; cited evidence; what `cite` reads) is
//! opened here, so that nothing planted in the repository can hang a thread or lead it outside:
//!
//! - The walk starts at the repository's root (which is the user's, and may itself be reached
//!   through links) and opens one component at a time relative to the last (`openat` with
//!   `O_NOFOLLOW`): no symlink below the root is followed, not as the file, not as any directory
//!   on the way. Nothing is resolved by name twice, so swapping a directory for a link between
//!   two steps changes nothing.
//! - The last component is opened non-blocking (a FIFO opens at once instead of waiting for a
//!   writer) and checked with `fstat` before any byte is read or written: a FIFO, socket,
//!   device or directory is refused, naming the path and what sits there.
//! - Writes happen in the directory the walk reached: a temp file created there (`O_EXCL`),
//!   synced, renamed over the name, and the directory synced, all through its descriptor.
//!
//! It must not know what any file means (that is the store's, the ledger's, evidence's) and
//! must never follow a link for convenience.

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use std::sync::atomic::{AtomicU64, Ordering};

/// How the walk refers to a planted link, in every message.
const NO_LINKS: &str = "evd never follows links inside a repository";

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// How every temp file evd makes is named at first.
pub const TEMP_PREFIX: &str = ".evd-tmp-";

/// A fresh temp-file name (unique within this process and time).
pub fn temp_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{TEMP_PREFIX}{}-{}-{}",
        std::process::id(),
        TMP_SEQ.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

/// A repository's root: the base every path below it is walked from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    path: PathBuf,
}

/// A directory reached by a walk that followed no link, held open: opening names inside it
/// costs one `openat` each (the tick cache reads thousands of files through one).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// What sits at a name, without opening it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: Kind,
    pub len: u64,
    pub dev: u64,
    pub ino: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

/// The kind of a file, for decisions and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    Device,
}

impl Kind {
    fn of(t: FileType) -> Kind {
        match t {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            FileType::Fifo => Kind::Fifo,
            FileType::Socket => Kind::Socket,
            _ => Kind::Device,
        }
    }

    /// "a FIFO", "a directory", …
    pub fn describe(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::Symlink => "a symlink",
            Kind::Fifo => "a FIFO",
            Kind::Socket => "a socket",
            Kind::Device => "a device",
        }
    }
}

impl Stat {
    fn from_raw(st: &rfs::Stat) -> Stat {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
        Stat {
            kind: Kind::of(FileType::from_raw_mode(st.st_mode as _)),
            len: u64::try_from(st.st_size).unwrap_or(0),
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            mtime_ns: ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime_ns: ns(st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }
}

fn os(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The refusal for `path`, where a `kind` sits instead of what was wanted.
fn not_wanted(path: &Path, kind: Kind, wanted: &str) -> io::Error {
    match kind {
        Kind::Symlink => invalid(format!("{} is a symlink ({NO_LINKS})", path.display())),
        k => invalid(format!(
            "{} is {}, not {wanted}",
            path.display(),
            k.describe()
        )),
    }
}

/// The repository root of a store's file: the directory holding the path's last `.evolving`
/// component, if it has one.
pub fn store_root_of(path: &Path) -> Option<&Path> {
    let mut found = None;
    let mut at = path;
    while let Some(parent) = at.parent() {
        if at.file_name() == Some(OsStr::new(".evolving")) {
            found = Some(parent);
            break;
        }
        at = parent;
    }
    found
}

/// The root a path is walked from when its caller names none: its store's repository root
/// for a store's file (see [`store_root_of`]), else the path's own directory (then only the
/// last component is guarded: the runtime directory's files, git's hooks).
pub fn root_of(path: &Path) -> Root {
    match store_root_of(path) {
        Some(r) => Root::new(r),
        None => match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => Root::new(p),
            _ => Root::new("."),
        },
    }
}

impl Root {
    pub fn new(path: impl Into<PathBuf>) -> Root {
        Root { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The names from the root to `path` (absolute under the root, or relative to it). A path
    /// outside the root, or one with `..`, is refused: nothing here walks upwards.
    fn names<'a>(&self, path: &'a Path) -> io::Result<Vec<&'a OsStr>> {
        let rel = if path.is_absolute() {
            path.strip_prefix(&self.path).map_err(|_| {
                invalid(format!(
                    "{} is outside the repository {}",
                    path.display(),
                    self.path.display()
                ))
            })?
        } else {
            path
        };
        let mut names = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(n) => names.push(n),
                Component::CurDir => {}
                _ => {
                    return Err(invalid(format!(
                        "{} leads outside the repository {}",
                        path.display(),
                        self.path.display()
                    )))
                }
            }
        }
        Ok(names)
    }

    /// The root itself, open.
    pub fn open(&self) -> io::Result<Dir> {
        let fd = rfs::open(
            &self.path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io::Error::new(os(e).kind(), format!("{}: {}", self.path.display(), os(e))))?;
        Ok(Dir {
            fd,
            path: self.path.clone(),
        })
    }

    /// The walk itself: from the root through `names`, one directory at a time, each made
    /// where missing when `make`.
    fn walk(&self, names: &[&OsStr], make: bool) -> io::Result<Dir> {
        let mut d = self.open()?;
        for n in names {
            d = if make {
                d.ensure_child(n)?
            } else {
                d.child(n)?
            };
        }
        Ok(d)
    }

    /// The directory at `path`, reached without following a link.
    pub fn dir(&self, path: &Path) -> io::Result<Dir> {
        self.walk(&self.names(path)?, false)
    }

    /// The directory at `path`, made (with its parents, 0755 under the umask) where missing.
    pub fn ensure_dir(&self, path: &Path) -> io::Result<Dir> {
        self.walk(&self.names(path)?, true)
    }

    /// The directory holding `path` (walked; made where missing when `make`) and `path`'s own
    /// name.
    fn parent_of<'a>(&self, path: &'a Path, make: bool) -> io::Result<(Dir, &'a OsStr)> {
        let mut names = self.names(path)?;
        let last = names
            .pop()
            .ok_or_else(|| invalid(format!("{} names no file", path.display())))?;
        Ok((self.walk(&names, make)?, last))
    }

    fn parent<'a>(&self, path: &'a Path) -> io::Result<(Dir, &'a OsStr)> {
        self.parent_of(path, false)
    }

    fn parent_made<'a>(&self, path: &'a Path) -> io::Result<(Dir, &'a OsStr)> {
        self.parent_of(path, true)
    }

    /// Open the regular file at `path` for reading.
    pub fn open_file(&self, path: &Path) -> io::Result<File> {
        let (d, name) = self.parent(path)?;
        d.open_file(name)
    }

    /// The whole regular file at `path`, with what its `fstat` said.
    pub fn read(&self, path: &Path) -> io::Result<(Metadata, Vec<u8>)> {
        let (d, name) = self.parent(path)?;
        d.read(name)
    }

    /// The regular file at `path` as UTF-8.
    pub fn read_text(&self, path: &Path) -> io::Result<String> {
        let (d, name) = self.parent(path)?;
        d.read_text(name)
    }

    /// [`Root::read_text`], `None` when nothing is there (a missing parent directory too).
    pub fn read_text_opt(&self, path: &Path) -> io::Result<Option<String>> {
        match self.read_text(path) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What sits at `path` (a link is reported as one, never followed); `None` when nothing.
    pub fn stat(&self, path: &Path) -> io::Result<Option<Stat>> {
        let (d, name) = match self.parent(path) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        d.stat(name)
    }

    /// Open the regular file at `path` for appending (created 0644 when missing; its
    /// directory must exist).
    pub fn open_append(&self, path: &Path) -> io::Result<File> {
        let (d, name) = self.parent(path)?;
        d.open_append(name)
    }

    /// Append `bytes` to the regular file at `path` in one write (created 0644 when missing;
    /// its directory must exist).
    pub fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.open_append(path)?.write_all(bytes)
    }

    /// Create the file at `path`, which must not exist, holding `bytes` (0644 under the umask;
    /// synced when `durable`). Its directory must exist.
    pub fn create_new(&self, path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
        let (d, name) = self.parent(path)?;
        d.create_new(name, bytes, None, durable)
    }

    /// Replace the file at `path` with `bytes` (made with its directories where missing): a
    /// temp file beside it, synced when `durable`, renamed over it, and the directory synced
    /// when `durable`. A reader sees the old file or the new one, never a torn one; after a
    /// crash, with `durable`, the new one. `mode`: exactly that, or 0644 under the umask.
    pub fn replace(
        &self,
        path: &Path,
        bytes: &[u8],
        mode: Option<u32>,
        durable: bool,
    ) -> io::Result<()> {
        let (d, name) = self.parent_made(path)?;
        d.replace(name, bytes, mode, durable)
    }

    /// [`Root::replace`] through a temp file made in `tmp_dir` (a store's `results/tmp`, so that
    /// no temp is ever left among the files it stands for); where `tmp_dir` is on another
    /// filesystem, the temp goes beside `dest` instead. `dest`'s directory must exist.
    pub fn replace_via(
        &self,
        tmp_dir: &Path,
        dest: &Path,
        bytes: &[u8],
        mode: Option<u32>,
        durable: bool,
    ) -> io::Result<()> {
        let (d, name) = self.parent(dest)?;
        let tmp = self.dir(tmp_dir)?;
        let tname = temp_name();
        tmp.create_new(OsStr::new(&tname), bytes, mode, durable)?;
        match rfs::renameat(&tmp.fd, tname.as_str(), &d.fd, name) {
            Ok(()) => {}
            Err(rustix::io::Errno::XDEV) => {
                let _ = rfs::unlinkat(&tmp.fd, tname.as_str(), AtFlags::empty());
                return d.replace(name, bytes, mode, durable);
            }
            Err(e) => {
                let _ = rfs::unlinkat(&tmp.fd, tname.as_str(), AtFlags::empty());
                return Err(d.failed(name, e, "a regular file"));
            }
        }
        if durable {
            d.sync()?;
        }
        Ok(())
    }

    /// Make the entries of the directory at `path` durable.
    pub fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.dir(path)?.sync()
    }
}

impl Dir {
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn at(&self, name: &OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// What is at each of `names` here, looked at on a few threads (a directory of thousands
    /// of files): `None` for a name with nothing there, or that could not be looked at.
    pub fn stat_each<N: AsRef<OsStr> + Sync>(&self, names: &[N]) -> Vec<Option<Stat>> {
        crate::sys::par::map(names, 2048, |n| self.stat(n.as_ref()).ok().flatten())
    }

    /// What sits at `name` here (a link as one); `None` when nothing.
    pub fn stat(&self, name: &OsStr) -> io::Result<Option<Stat>> {
        match rfs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Stat::from_raw(&st))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(io::Error::new(
                os(e).kind(),
                format!("{}: {}", self.at(name).display(), os(e)),
            )),
        }
    }

    /// Why opening `name` as `wanted` failed with `e`: what sits there when it is the wrong
    /// kind of file, else the system's error with the path.
    fn failed(&self, name: &OsStr, e: rustix::io::Errno, wanted: &str) -> io::Error {
        let path = self.at(name);
        if matches!(
            e,
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR | rustix::io::Errno::NXIO
        ) || e == rustix::io::Errno::ISDIR
        {
            if let Ok(Some(st)) = self.stat(name) {
                return not_wanted(&path, st.kind, wanted);
            }
        }
        let e = os(e);
        io::Error::new(e.kind(), format!("{}: {e}", path.display()))
    }

    /// The directory `name` here, never through a link.
    pub fn child(&self, name: &OsStr) -> io::Result<Dir> {
        let fd = rfs::openat(
            &self.fd,
            name,
            OFlags::RDONLY
                | OFlags::DIRECTORY
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC
                | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| self.failed(name, e, "a directory"))?;
        Ok(Dir {
            fd,
            path: self.at(name),
        })
    }

    /// [`Dir::child`], made (0755 under the umask) when missing.
    pub fn ensure_child(&self, name: &OsStr) -> io::Result<Dir> {
        match rfs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => self.child(name),
            Err(e) => Err(self.failed(name, e, "a directory")),
        }
    }

    /// Open `name` here with `flags` (never following a link, never waiting on a FIFO) and
    /// make sure it is a regular file before anyone reads or writes it.
    fn open_regular(&self, name: &OsStr, flags: OFlags, mode: u32) -> io::Result<File> {
        let fd = rfs::openat(
            &self.fd,
            name,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::from_raw_mode(mode as _),
        )
        .map_err(|e| self.failed(name, e, "a regular file"))?;
        let st = rfs::fstat(&fd).map_err(os)?;
        let kind = Kind::of(FileType::from_raw_mode(st.st_mode as _));
        if kind != Kind::File {
            return Err(not_wanted(&self.at(name), kind, "a regular file"));
        }
        // Regular files ignore O_NONBLOCK; clearing it keeps later reads plain all the same.
        let _ = rfs::fcntl_setfl(&fd, flags | OFlags::CLOEXEC);
        Ok(File::from(fd))
    }

    /// Open the regular file `name` here for reading.
    pub fn open_file(&self, name: &OsStr) -> io::Result<File> {
        self.open_regular(name, OFlags::RDONLY, 0)
    }

    /// The whole regular file `name`, with what its `fstat` said.
    pub fn read(&self, name: &OsStr) -> io::Result<(Metadata, Vec<u8>)> {
        let f = self.open_file(name)?;
        let m = f.metadata()?;
        let mut bytes = Vec::with_capacity(usize::try_from(m.len()).unwrap_or(0).saturating_add(1));
        (&f).take(u64::MAX).read_to_end(&mut bytes)?;
        Ok((m, bytes))
    }

    /// The regular file `name` as UTF-8.
    pub fn read_text(&self, name: &OsStr) -> io::Result<String> {
        let (_, bytes) = self.read(name)?;
        String::from_utf8(bytes).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not valid UTF-8", self.at(name).display()),
            )
        })
    }

    /// Open `name` here to read and write in place (created 0644 when missing, never
    /// truncated).
    pub fn open_rw(&self, name: &OsStr) -> io::Result<File> {
        self.open_regular(name, OFlags::RDWR | OFlags::CREATE, 0o644)
    }

    /// Open `name` here for appending (created 0644 when missing).
    pub fn open_append(&self, name: &OsStr) -> io::Result<File> {
        self.open_regular(
            name,
            OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE,
            0o644,
        )
    }

    /// Create `name` here, which must not exist, holding `bytes` (synced when `durable`).
    /// `mode`: exactly that (set before any byte is written), or 0644 under the umask.
    pub fn create_new(
        &self,
        name: &OsStr,
        bytes: &[u8],
        mode: Option<u32>,
        durable: bool,
    ) -> io::Result<()> {
        let mut f = self.open_regular(
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            mode.map_or(0o644, |_| 0o600),
        )?;
        let res = mode
            .map_or(Ok(()), |m| {
                rfs::fchmod(&f, Mode::from_raw_mode(m as _)).map_err(os)
            })
            .and_then(|()| f.write_all(bytes))
            .and_then(|()| if durable { f.sync_all() } else { Ok(()) });
        if res.is_err() {
            let _ = rfs::unlinkat(&self.fd, name, AtFlags::empty());
        }
        res
    }

    /// Replace `name` here with `bytes` (`mode` as for [`Dir::create_new`]): a temp file in
    /// this directory, renamed over the name; with `durable`, the file is synced before the
    /// rename and this directory after it.
    pub fn replace(
        &self,
        name: &OsStr,
        bytes: &[u8],
        mode: Option<u32>,
        durable: bool,
    ) -> io::Result<()> {
        let tmp = temp_name();
        self.create_new(OsStr::new(&tmp), bytes, mode, durable)?;
        if let Err(e) = rfs::renameat(&self.fd, tmp.as_str(), &self.fd, name) {
            let _ = rfs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
            return Err(self.failed(name, e, "a regular file"));
        }
        if durable {
            self.sync()?;
        }
        Ok(())
    }

    /// Remove the file `name` here (a link is removed itself, never what it points to).
    pub fn remove(&self, name: &OsStr) -> io::Result<()> {
        rfs::unlinkat(&self.fd, name, AtFlags::empty()).map_err(|e| {
            let e = os(e);
            io::Error::new(e.kind(), format!("{}: {e}", self.at(name).display()))
        })
    }

    /// Make the entries of this directory durable.
    pub fn sync(&self) -> io::Result<()> {
        rfs::fsync(&self.fd).map_err(os)
    }

    /// The names in this directory (read through its own descriptor), `.` and `..` aside.
    pub fn names(&self) -> io::Result<Vec<std::ffi::OsString>> {
        use std::os::unix::ffi::OsStrExt;
        let fd = rfs::openat(
            &self.fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(os)?;
        let mut dir = rfs::Dir::read_from(fd.as_fd()).map_err(os)?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(os)?;
            let n = entry.file_name().to_bytes();
            if n != b"." && n != b".." {
                out.push(OsStr::from_bytes(n).to_os_string());
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn reads_and_writes_stay_below_the_root_and_refuse_what_is_not_a_file() {
        let d = tempfile::tempdir().expect("tmp");
        let outside = tempfile::tempdir().expect("outside");
        std::fs::write(outside.path().join("secret"), "outside").expect("write");
        let root = Root::new(d.path());
        root.replace(Path::new("a/b/f"), b"one", None, true)
            .expect("replace");
        assert_eq!(root.read_text(Path::new("a/b/f")).expect("read"), "one");
        root.append(Path::new("a/b/f"), b"+two").expect("append");
        assert_eq!(
            root.read_text(&d.path().join("a/b/f"))
                .expect("absolute path"),
            "one+two"
        );

        // A link as the file, as a parent directory, and a path leading out: all refused.
        std::os::unix::fs::symlink(outside.path().join("secret"), d.path().join("a/l"))
            .expect("symlink");
        std::os::unix::fs::symlink(outside.path(), d.path().join("a/dir")).expect("symlink");
        for p in ["a/l", "a/dir/secret", "../secret"] {
            let e = root.read_text(Path::new(p)).expect_err(p);
            assert!(
                e.to_string().contains("symlink") || e.to_string().contains("outside"),
                "{p}: {e}"
            );
        }
        assert!(root.append(Path::new("a/dir/secret"), b"x").is_err());
        assert!(root
            .replace(Path::new("a/dir/new"), b"x", None, true)
            .is_err());
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret")).expect("read"),
            "outside"
        );
        assert!(!outside.path().join("new").exists());

        // A FIFO is refused at once, for reading and for appending; so is a directory.
        mkfifo(&d.path().join("a/fifo"));
        for e in [
            root.read_text(Path::new("a/fifo")).expect_err("fifo"),
            root.append(Path::new("a/fifo"), b"x").expect_err("fifo"),
        ] {
            assert!(e.to_string().contains("is a FIFO"), "{e}");
        }
        let e = root.read_text(Path::new("a/b")).expect_err("directory");
        assert!(e.to_string().contains("is a directory"), "{e}");
        assert_eq!(
            root.stat(Path::new("a/l")).expect("stat").map(|s| s.kind),
            Some(Kind::Symlink)
        );
        assert_eq!(root.stat(Path::new("a/none")).expect("stat"), None);
    }

    #[test]
    fn the_repository_root_of_a_store_path_is_above_its_evolving() {
        assert_eq!(
            store_root_of(Path::new("/r/x/.evolving/results/ledger/events.jsonl")),
            Some(Path::new("/r/x"))
        );
        assert_eq!(
            store_root_of(Path::new("/r/x/.evolving")),
            Some(Path::new("/r/x"))
        );
        assert_eq!(store_root_of(Path::new("/r/x/file")), None);
        assert_eq!(root_of(Path::new("/r/x/file")).path(), Path::new("/r/x"));
    }
}
