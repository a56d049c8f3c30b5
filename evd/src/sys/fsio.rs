//! File primitives the store is built on: reads that never follow a symlink, crash-safe
//! replacement (temp file, fsync, rename, fsync the directory) and appends. A store's files
//! (any path through a `.evolving` directory) are opened by [`beneath`]'s walk from the
//! repository's root, so no link anywhere below it is followed and no FIFO is waited on.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::beneath;

/// The error of an `O_NOFOLLOW` open: ELOOP (the last component is a symlink) becomes
/// `message`; any other error is kept.
pub fn link_refused(e: io::Error, message: impl FnOnce() -> String) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        io::Error::new(io::ErrorKind::InvalidInput, message())
    } else {
        e
    }
}

/// What kind of file `m` describes, for messages ("a directory").
pub fn kind_of(m: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symlink"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a device"
    }
}

/// Open an existing regular file for reading. A store's file is walked from its repository's
/// root (no link below it followed, see [`beneath`]); any other file is opened without
/// following a final link. Non-blocking, so a FIFO in its place is refused, never waited on.
pub fn open_regular(path: &Path) -> io::Result<File> {
    beneath::root_of(path).open_file(path)
}

/// Open a file the user named, or one git itself reads (its config, its refs), following links
/// as they would, but non-blocking and only when it is a regular file: a FIFO, socket, device
/// or directory there is refused, naming what it is, and never waited on.
pub fn open_followed(path: &Path) -> io::Result<File> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    let m = f.metadata()?;
    if m.is_dir() {
        // What reading it would have said (upstream's messages quote it).
        return Err(io::Error::from_raw_os_error(libc::EISDIR));
    }
    if !m.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is {}, not a regular file", path.display(), kind_of(&m)),
        ));
    }
    Ok(f)
}

/// [`open_followed`], read whole (at most `limit` bytes: more is an error naming the limit).
pub fn read_followed(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    read_followed_into(path, limit, &mut bytes)?;
    Ok(bytes)
}

/// [`read_followed`] into `bytes` (cleared first): a caller that reads the same big file often
/// keeps one buffer, sized once from the file's length, rather than regrowing a new one.
pub fn read_followed_into(path: &Path, limit: u64, bytes: &mut Vec<u8>) -> io::Result<()> {
    use std::io::Read;
    let f = open_followed(path)?;
    bytes.clear();
    let len = f.metadata().map_or(0, |m| m.len()).min(limit);
    bytes.reserve(usize::try_from(len).unwrap_or(0).saturating_add(1));
    f.take(limit.saturating_add(1)).read_to_end(bytes)?;
    if bytes.len() as u64 > limit {
        bytes.clear();
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is larger than {limit} bytes", path.display()),
        ));
    }
    Ok(())
}

/// How long after a change the stamp of a file under `dir` (its times, length and inode) may
/// still miss a rewrite of the same length: the filesystem's timestamp resolution, with room to
/// spare. The filesystems that keep nanoseconds (ext2/3/4, XFS, Btrfs, tmpfs, F2FS, ZFS) take
/// them from the kernel's coarse clock, one tick (at most 10 ms) at a time: 50 ms. Any other (FAT
/// keeps 2 s, a network filesystem whatever its server keeps), or one that cannot be told: 2 s.
pub fn racy_window_ns(dir: &Path) -> i64 {
    const FINE: i64 = 50_000_000;
    const COARSE: i64 = 2_000_000_000;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        const FINE_GRAINED: [u64; 6] = [
            0xEF53,      // ext2, ext3, ext4
            0x5846_5342, // XFS
            0x9123_683E, // Btrfs
            0x0102_1994, // tmpfs
            0xF2F5_2010, // F2FS
            0x2FC1_2FC1, // ZFS
        ];
        #[allow(clippy::unnecessary_cast)]
        if let Ok(st) = rustix::fs::statfs(dir) {
            if FINE_GRAINED.contains(&(st.f_type as u64)) {
                return FINE;
            }
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = dir;
    COARSE
}

/// [`open_regular`], read whole (at most `limit` bytes: more is an error naming the limit).
pub fn read_limited(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let f = open_regular(path)?;
    let mut bytes = Vec::with_capacity(f.metadata().map_or(0, |m| m.len().min(limit)) as usize);
    advise_huge_pages(&mut bytes);
    f.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is larger than {limit} bytes", path.display()),
        ));
    }
    Ok(bytes)
}

/// Ask for huge pages under a large buffer about to be filled (Linux, where transparent huge
/// pages are given on request): a few faults instead of one per 4 KiB page. Best effort.
fn advise_huge_pages(buf: &mut Vec<u8>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        const PAGE: usize = 4096;
        if buf.capacity() < 2 * HUGE {
            return;
        }
        let start = buf.as_mut_ptr() as usize;
        let from = start.next_multiple_of(PAGE);
        let to = (start + buf.capacity()) / PAGE * PAGE;
        if to > from {
            // SAFETY: [from, to) lies within the buffer's own allocation, page-aligned;
            // MADV_HUGEPAGE changes how its pages are backed, never their contents.
            unsafe {
                libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// Read a whole regular file as UTF-8 (the same error text as `fs::read_to_string` on bad UTF-8).
pub fn read_text(path: &Path) -> io::Result<String> {
    read_regular(path).map(|(_, text)| text)
}

/// [`read_text`], with what the open file's `fstat` said (no other look at the path).
pub fn read_regular(path: &Path) -> io::Result<(fs::Metadata, String)> {
    let (m, bytes) = beneath::root_of(path).read(path)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })?;
    Ok((m, text))
}

/// Read a file that may be missing: `Ok(None)` when it does not exist.
pub fn read_text_opt(path: &Path) -> io::Result<Option<String>> {
    match read_text(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// fsync a directory so a rename inside it is durable (a store's directory is walked to).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    match beneath::store_root_of(dir) {
        Some(root) => beneath::Root::new(root).sync_dir(dir),
        None => File::open(dir)?.sync_all(),
    }
}

pub use super::beneath::{temp_name, TEMP_PREFIX};

/// Replace `dest` with `bytes` crash-safely. The temp file is made in `tmp_dir` (which must be on
/// the same filesystem; on EXDEV the temp goes next to `dest` instead), fsynced, renamed over
/// `dest`, and the destination directory is fsynced. A crash leaves either the old file or the
/// new one, never a torn one.
pub fn replace_atomically(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_atomically_mode(tmp_dir, dest, bytes, None)
}

/// [`replace_unsynced`] with the temp file made in `tmp_dir` (a store's `results/tmp`, which
/// the store's next owner clears): a writer killed mid-way leaves no temp beside `dest`. For
/// large caches a crash may lose but never tear.
pub fn replace_via_unsynced(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    match beneath::store_root_of(dest) {
        Some(root) => beneath::Root::new(root).replace_via(tmp_dir, dest, bytes, None, false),
        None => replace_unsynced(dest, bytes),
    }
}

/// [`replace_atomically`], the new file getting exactly `mode` (umask aside; `None`: 0644 under
/// the umask) before it is renamed into place: an executable script is never seen without its
/// executable bit, not even after a crash.
pub fn replace_atomically_mode(
    tmp_dir: &Path,
    dest: &Path,
    bytes: &[u8],
    mode: Option<u32>,
) -> io::Result<()> {
    if let Some(root) = beneath::store_root_of(dest) {
        return beneath::Root::new(root).replace_via(tmp_dir, dest, bytes, mode, true);
    }
    // Outside a store (git's hooks, the runtime directory): by path, the last component never
    // followed.
    let dest_dir = dest
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "destination has no parent"))?;
    let tmp = tmp_dir.join(temp_name());
    write_new_mode(&tmp, bytes, mode)?;
    match fs::rename(&tmp, dest) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let _ = fs::remove_file(&tmp);
            let near = dest_dir.join(temp_name());
            write_new_mode(&near, bytes, mode)?;
            if let Err(e) = fs::rename(&near, dest) {
                let _ = fs::remove_file(&near);
                return Err(e);
            }
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    }
    sync_dir(dest_dir)
}

fn write_new_mode(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    let res = mode
        .map_or(Ok(()), |m| f.set_permissions(fs::Permissions::from_mode(m)))
        .and_then(|()| f.write_all(bytes))
        .and_then(|()| f.sync_all());
    if res.is_err() {
        let _ = fs::remove_file(path);
    }
    res
}

/// Replace `dest` with `bytes` through a temp file and a rename, without fsync: for per-host
/// caches (state files, the cached origin sha) that are recomputed from the ledger anyway. A
/// reader never sees a torn file; a power cut may lose the newest version, never the ledger.
pub fn replace_unsynced(dest: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_unsynced_mode(dest, bytes, 0o644)
}

/// [`replace_unsynced`] for a file only its owner may read (mode 0600): the runtime directory's
/// caches.
pub fn replace_private(dest: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_unsynced_mode(dest, bytes, 0o600)
}

fn replace_unsynced_mode(dest: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let (dir, name) = parent_and_name(dest)?;
    beneath::root_of(dest)
        .dir(dir)?
        .replace(name, bytes, (mode != 0o644).then_some(mode), false)
}

fn parent_and_name(path: &Path) -> io::Result<(&Path, &std::ffi::OsStr)> {
    match (path.parent(), path.file_name()) {
        (Some(d), Some(n)) => Ok((d, n)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file in a directory", path.display()),
        )),
    }
}

/// Create `path` (which must not exist) holding `bytes`, without syncing it: the caller makes a
/// whole batch durable at once (see [`sync_filesystem`]) before publishing any of it.
pub fn write_new_unsynced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    beneath::root_of(path).create_new(path, bytes, false)
}

/// Make everything written so far to the filesystem holding `dir` durable with one call
/// (syncfs(2) on Linux). Where that is unavailable or fails, every file in `files` is fsynced
/// instead, and `dir` itself.
pub fn sync_filesystem(dir: &Path, files: &[std::path::PathBuf]) -> io::Result<()> {
    let d = File::open(dir)?;
    if crate::sys::filesystem::sync_whole(&d).is_ok() {
        return Ok(());
    }
    for f in files {
        open_regular(f)?.sync_all()?;
    }
    d.sync_all()
}

/// Append `line` (which should end with `\n`) in one write, creating the file if needed.
pub fn append(path: &Path, line: &[u8]) -> io::Result<()> {
    open_append(path)?.write_all(line)
}

/// Open `path` for appending (created 0644 if missing), never through a symlink (a store's
/// file: none below its repository's root) and never waiting on a FIFO.
pub fn open_append(path: &Path) -> io::Result<File> {
    beneath::root_of(path).open_append(path)
}

/// Create a directory (and parents) unless it exists; refuse when it exists as a symlink (a
/// store's directory: when any directory below its repository's root is one).
pub fn ensure_dir(path: &Path) -> io::Result<()> {
    if let Some(root) = beneath::store_root_of(path) {
        return beneath::Root::new(root).ensure_dir(path).map(|_| ());
    }
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symlink (evd never follows links inside a store)",
                path.display()
            ),
        )),
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a directory", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir_all(path),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_writes_the_new_bytes_and_leaves_no_temp_behind() {
        let d = tempfile::tempdir().expect("tempdir");
        let tmp = d.path().join("tmp");
        fs::create_dir(&tmp).expect("mkdir");
        let dest = d.path().join("HEAD");
        fs::write(&dest, "old").expect("write");
        replace_atomically(&tmp, &dest, b"new").expect("replace");
        assert_eq!(fs::read_to_string(&dest).expect("read"), "new");
        assert_eq!(fs::read_dir(&tmp).expect("ls").count(), 0);
    }

    #[test]
    fn a_replacement_gets_its_mode_before_it_appears() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("tempdir");
        let dest = d.path().join("hook");
        replace_atomically_mode(d.path(), &dest, b"#!/bin/sh\n", Some(0o775)).expect("replace");
        let mode = fs::metadata(&dest).expect("stat").permissions().mode() & 0o7777;
        assert_eq!(
            mode, 0o775,
            "exactly the mode asked for, whatever the umask"
        );
        assert_eq!(fs::read(&dest).expect("read"), b"#!/bin/sh\n");
    }

    #[test]
    fn reads_refuse_symlinks_and_directories() {
        let d = tempfile::tempdir().expect("tempdir");
        let target = d.path().join("t");
        fs::write(&target, "x").expect("write");
        let link = d.path().join("l");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let e = read_text(&link).expect_err("symlink refused");
        assert!(e.to_string().contains("symlink"), "{e}");
        assert!(read_text(d.path()).is_err());
        assert_eq!(read_text(&target).expect("read"), "x");
    }
}
