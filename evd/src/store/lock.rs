//! Exclusive ownership by a lock file: one writer per store, one daemon per runtime directory.
//!
//! The lock is a `flock` on a file; the kernel drops it when the holder dies, so a killed owner
//! never leaves a store stuck. The file's contents name the holder, so a refusal can say who.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sys::users;

/// Who holds a lock, as written into the lock file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub uid: u32,
    pub user: String,
    /// `evd` for a daemon, `evctl` for an in-process writer.
    pub kind: String,
    pub since: String,
}

impl Holder {
    pub fn me(kind: &str) -> Holder {
        let uid = users::euid();
        Holder {
            pid: std::process::id(),
            uid,
            user: users::name_of(uid),
            kind: kind.into(),
            since: crate::engine::clock::now_rfc3339(),
        }
    }
    pub fn describe(&self) -> String {
        format!(
            "{} pid {} (user {}, uid {}) since {}",
            self.kind, self.pid, self.user, self.uid, self.since
        )
    }
}

/// A held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct LockFile {
    file: File,
    pub path: PathBuf,
}

impl LockFile {
    /// Whether the lock still guards the file at its path: a lock file deleted (or replaced)
    /// under us guards nothing any more.
    pub fn still_valid(&self) -> bool {
        match (self.file.metadata(), std::fs::symlink_metadata(&self.path)) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            _ => false,
        }
    }
}

/// Why a lock could not be taken.
#[derive(Debug)]
pub enum LockError {
    /// Someone else holds it; `None` when the holder could not be read.
    Held {
        holder: Option<Holder>,
        owner_uid: Option<u32>,
    },
    Io(io::Error),
}

impl LockError {
    /// A sentence naming the holder, for error messages.
    pub fn describe(&self, what: &str) -> String {
        match self {
            LockError::Held {
                holder: Some(h), ..
            } => format!("{what} is held by {}", h.describe()),
            LockError::Held {
                holder: None,
                owner_uid: Some(uid),
            } => format!(
                "{what} is held by another process of user {} (uid {uid})",
                users::name_of(*uid)
            ),
            LockError::Held { .. } => format!("{what} is held by another process"),
            LockError::Io(e) => format!("{what}: cannot take the lock: {e}"),
        }
    }
}

/// Try to take the lock at `path` without waiting, recording `holder` in it on success. A new
/// lock file is readable by others (so another user's evd can name who holds a store).
pub fn try_lock(path: &Path, holder: &Holder) -> Result<LockFile, LockError> {
    try_lock_mode(path, holder, 0o644)
}

/// [`try_lock`] for the runtime directory's locks: a new lock file only its owner can read.
pub fn try_lock_private(path: &Path, holder: &Holder) -> Result<LockFile, LockError> {
    try_lock_mode(path, holder, 0o600)
}

fn try_lock_mode(path: &Path, holder: &Holder, mode: u32) -> Result<LockFile, LockError> {
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .and_then(regular);
    let (mut file, writable) = match opened {
        Ok(f) => (f, true),
        // Another user's lock file: we may still be able to read it and learn who holds it.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            match OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
                .open(path)
                .and_then(regular)
            {
                Ok(f) => (f, false),
                Err(_) => {
                    let owner_uid = std::fs::symlink_metadata(path).ok().map(|m| m.uid());
                    return Err(LockError::Held {
                        holder: None,
                        owner_uid,
                    });
                }
            }
        }
        Err(e) => return Err(LockError::Io(e)),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let owner_uid = file.metadata().ok().map(|m| m.uid());
            return Err(LockError::Held {
                holder: serde_json::from_str(text.trim()).ok(),
                owner_uid,
            });
        }
        Err(TryLockError::Error(e)) => return Err(LockError::Io(e)),
    }
    if !writable {
        // We hold the lock but cannot record ourselves in another user's file: refuse rather
        // than own a store whose files we may not be able to write.
        let owner_uid = file.metadata().ok().map(|m| m.uid());
        return Err(LockError::Held {
            holder: None,
            owner_uid,
        });
    }
    let body = serde_json::to_string(holder).unwrap_or_default();
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(body.as_bytes()))
        .map_err(LockError::Io)?;
    Ok(LockFile {
        file,
        path: path.to_path_buf(),
    })
}

/// `f`, when it is a regular file: a FIFO, socket or directory planted where the lock file
/// belongs is refused (it was opened non-blocking, so nothing waited on it).
fn regular(f: File) -> io::Result<File> {
    let m = f.metadata()?;
    if m.is_file() {
        Ok(f)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the lock file is {}, not a regular file",
                crate::sys::fsio::kind_of(&m)
            ),
        ))
    }
}

/// Read who holds (or last held) the lock at `path`.
pub fn read_holder(path: &Path) -> Option<Holder> {
    let text = crate::sys::fsio::read_text(path).ok()?;
    serde_json::from_str(text.trim()).ok()
}

/// Retry `take` for a moment while it fails. For tests that drop a lock and take it again: a
/// child another test thread is spawning (git, say) holds a copy of every descriptor between
/// its fork and its exec, and with it the lock — for microseconds, but it happens.
#[cfg(test)]
pub(crate) fn released_soon<T, E>(mut take: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match take() {
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_refused_with_the_holder_named_until_the_first_drops() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("x.lock");
        let first = try_lock(&p, &Holder::me("evd")).expect("first");
        match try_lock(&p, &Holder::me("evctl")) {
            Err(e @ LockError::Held { .. }) => {
                let msg = e.describe("store");
                assert!(
                    msg.contains(&format!("evd pid {}", std::process::id())),
                    "{msg}"
                );
            }
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        assert!(released_soon(|| try_lock(&p, &Holder::me("evctl"))).is_ok());
    }
}
