//! A synchronous view of what changed in one directory, from inotify.
//!
//! The kernel queues an event inside the write that causes it, so draining the queue at the start
//! of a request sees every change that finished before the request arrived: the tick cache can
//! trust "no events" completely and re-read exactly the files that changed. (A watcher thread,
//! as the `notify` crate runs, could still be behind; here nothing is.)

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What changed since the last drain.
#[derive(Debug, PartialEq, Eq)]
pub enum Changes {
    /// Nothing at all.
    Quiet,
    /// These entries of the directory changed (created, written, removed, renamed, re-moded).
    Names(BTreeSet<String>),
    /// Events were lost or the directory itself went away: rescan everything.
    Rescan,
}

#[derive(Debug)]
pub struct DirWatch {
    fd: OwnedFd,
}

const MASK: u32 = libc::IN_MODIFY
    | libc::IN_CLOSE_WRITE
    | libc::IN_ATTRIB
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_DONT_FOLLOW
    | libc::IN_ONLYDIR;

impl DirWatch {
    /// Watch `dir` (not following a symlink).
    pub fn new(dir: &Path) -> io::Result<DirWatch> {
        // SAFETY: inotify_init1 has no memory preconditions; we own the returned fd.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let c = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
        // SAFETY: fd is valid and c is a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), MASK) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(DirWatch { fd })
    }

    /// Wait up to `timeout_ms` for any of `watches` to have something queued; returns whether
    /// one has (without taking anything from the queues).
    pub fn wait_any(watches: &[&DirWatch], timeout_ms: i32) -> bool {
        let mut fds: Vec<libc::pollfd> = watches
            .iter()
            .map(|w| libc::pollfd {
                fd: w.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds points to fds.len() initialized pollfd structs that outlive the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        n > 0
    }

    /// Everything queued since the last call, without blocking.
    pub fn drain(&mut self) -> Changes {
        let mut names = BTreeSet::new();
        let mut rescan = false;
        let mut buf = [0u8; 16 * 1024];
        loop {
            // SAFETY: buf is valid for writes of its length; fd is ours.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                let err = io::Error::last_os_error();
                if n < 0 && err.kind() != io::ErrorKind::WouldBlock {
                    rescan = true;
                }
                break;
            }
            let n = n as usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            let mut off = 0;
            while off + header <= n {
                // SAFETY: the kernel wrote a whole inotify_event at `off`; read it unaligned.
                let ev: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf.as_ptr().add(off).cast()) };
                let name_len = ev.len as usize;
                let name_bytes = &buf[off + header..(off + header + name_len).min(n)];
                let name_end = name_bytes
                    .iter()
                    .position(|&b| b == 0)
                    .unwrap_or(name_bytes.len());
                let name = String::from_utf8_lossy(&name_bytes[..name_end]).into_owned();
                if ev.mask
                    & (libc::IN_Q_OVERFLOW
                        | libc::IN_IGNORED
                        | libc::IN_DELETE_SELF
                        | libc::IN_MOVE_SELF
                        | libc::IN_UNMOUNT)
                    != 0
                {
                    rescan = true;
                } else if !name.is_empty() {
                    names.insert(name);
                }
                off += header + name_len;
            }
        }
        if rescan {
            Changes::Rescan
        } else if names.is_empty() {
            Changes::Quiet
        } else {
            Changes::Names(names)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_renames_and_removals_are_reported_by_name_and_nothing_else() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut w = DirWatch::new(d.path()).expect("watch");
        assert_eq!(w.drain(), Changes::Quiet);
        std::fs::write(d.path().join("a"), "1").expect("write");
        std::fs::write(d.path().join("b.tmp"), "2").expect("write");
        std::fs::rename(d.path().join("b.tmp"), d.path().join("b")).expect("rename");
        let want: BTreeSet<String> = ["a", "b", "b.tmp"].iter().map(|s| s.to_string()).collect();
        assert_eq!(w.drain(), Changes::Names(want));
        assert_eq!(w.drain(), Changes::Quiet);
        std::fs::remove_file(d.path().join("a")).expect("rm");
        assert_eq!(
            w.drain(),
            Changes::Names(std::iter::once("a".to_string()).collect())
        );
    }

    #[test]
    fn the_directory_going_away_asks_for_a_rescan() {
        let d = tempfile::tempdir().expect("tempdir");
        let sub = d.path().join("ticks");
        std::fs::create_dir(&sub).expect("mkdir");
        let mut w = DirWatch::new(&sub).expect("watch");
        std::fs::rename(&sub, d.path().join("moved")).expect("mv");
        assert_eq!(w.drain(), Changes::Rescan);
    }
}
