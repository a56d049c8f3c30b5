//! What evd asks of a filesystem as a whole: flushing it in one call (`syncfs` on Linux) and
//! whether it is a network or FUSE one, where `stat` may answer from a client's cache (the
//! filesystem's type: a magic number on Linux, a type name on macOS and the BSDs). It never
//! reads or writes a file's contents.

use std::fs::File;
use std::io;
use std::path::Path;

/// Make everything written so far to the filesystem holding `dir` (open) durable in one call.
/// `Unsupported` where the platform has no such call: the caller then fsyncs file by file.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn sync_whole(dir: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: syncfs takes an fd we own for the duration of the call.
    if unsafe { libc::syncfs(dir.as_raw_fd()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// No whole-filesystem flush here: the caller fsyncs file by file.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn sync_whole(_dir: &File) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Whether `path` is on a network or FUSE filesystem. `None` when unknown.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn is_remote(path: &Path) -> Option<bool> {
    const REMOTE: &[i64] = &[
        0x6969,      // NFS
        0x517b,      // SMB
        0xff53_4d42, // CIFS
        0xfe53_4d42, // SMB2
        0x6573_5546, // FUSE (sshfs, …)
        0x0102_1997, // 9P
        0x5346_414f, // AFS
        0x00c3_6400, // Ceph
        0x7375_7245, // Coda
    ];
    let st = statfs(path)?;
    // f_type's integer type varies by target.
    #[allow(clippy::useless_conversion)]
    let kind = i64::from(st.f_type);
    Some(REMOTE.contains(&kind))
}

/// Whether `path` is on a network or FUSE filesystem (by its type name). `None` when unknown.
#[cfg(any(
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "dragonfly"
))]
pub fn is_remote(path: &Path) -> Option<bool> {
    const REMOTE: &[&str] = &[
        "nfs", "smbfs", "afpfs", "webdav", "cifs", "fusefs", "macfuse", "osxfuse", "sshfs",
    ];
    let st = statfs(path)?;
    let name: Vec<u8> = st
        .f_fstypename
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    let name = String::from_utf8_lossy(&name);
    Some(REMOTE.iter().any(|r| name.starts_with(r)))
}

/// Unknown on this platform.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "dragonfly"
)))]
pub fn is_remote(_path: &Path) -> Option<bool> {
    None
}

#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "dragonfly"
))]
fn statfs(path: &Path) -> Option<libc::statfs> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statfs is a valid value for statfs(2) to overwrite.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid statfs we own, both live for the call.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_directory_is_local_and_can_be_flushed() {
        let d = tempfile::tempdir().expect("tempdir");
        assert_ne!(is_remote(d.path()), Some(true));
        let f = File::open(d.path()).expect("open");
        match sync_whole(&f) {
            Ok(()) => {}
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::Unsupported),
        }
    }
}
