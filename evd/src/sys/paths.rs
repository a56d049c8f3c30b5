//! Where the per-user daemon lives: its private runtime directory, socket, locks and log.
//! evctl uses the same functions, so both sides always agree.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::sys::users;

/// `$EVD_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/evd`, else `$TMPDIR/evd-<uid>` (or `/tmp`).
pub fn runtime_dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("EVD_RUNTIME_DIR") {
        return d;
    }
    if let Some(x) = var("XDG_RUNTIME_DIR") {
        return x.join("evd");
    }
    let tmp = var("TMPDIR").unwrap_or_else(|| PathBuf::from("/tmp"));
    tmp.join(format!("evd-{}", users::euid()))
}

pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join("evd.sock")
}

/// Held by the running daemon for its whole life: exactly one daemon per runtime directory.
pub fn daemon_lock_path(dir: &Path) -> PathBuf {
    dir.join("evd.lock")
}

/// Held by a client while it starts a daemon, so two clients starting one at once make one.
pub fn start_lock_path(dir: &Path) -> PathBuf {
    dir.join("start.lock")
}

/// Where an autostarted daemon's log goes.
pub fn log_path(dir: &Path) -> PathBuf {
    dir.join("evd.log")
}

/// Create `dir` (mode 0700) if needed and check it is ours and private: not a symlink, owned by
/// our uid, no access for group or others. A directory someone else made, or one that others
/// could write into (so files in it may have been planted), is refused, the way OpenSSH refuses
/// a key file others can read: it is never silently adopted.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    check_private_dir(dir)
}

/// Check that an existing `dir` is a private directory of ours (see [`ensure_private_dir`]).
pub fn check_private_dir(dir: &Path) -> io::Result<()> {
    let m = fs::symlink_metadata(dir)?;
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("refusing runtime directory {}: {why}", dir.display()),
        ))
    };
    if m.file_type().is_symlink() {
        return refuse("it is a symlink".into());
    }
    if !m.is_dir() {
        return refuse("it is not a directory".into());
    }
    let me = users::euid();
    if m.uid() != me {
        return refuse(format!(
            "it is owned by {} (uid {}), not by us (uid {me})",
            users::name_of(m.uid()),
            m.uid()
        ));
    }
    let mode = m.mode() & 0o777;
    if mode & 0o077 != 0 {
        return refuse(format!(
            "its mode is {mode:04o}, so other users could have planted files in it; look at \
             what is inside, then `chmod 700 {0}`, or remove it (`rm -r {0}`) and a fresh one is \
             made",
            dir.display()
        ));
    }
    Ok(())
}

/// The check a running daemon repeats on its runtime directory: `None` while it is private;
/// otherwise what is wrong. A mode loosened on our own directory is set back to 0700 (the
/// daemon keeps its files there and cannot move); anything else is only reported. `tell` hears
/// the problem before anything is set right.
pub fn recheck_private_dir(dir: &Path, mut tell: impl FnMut(&str)) -> Option<String> {
    let e = check_private_dir(dir).err()?;
    let ours = fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && !m.file_type().is_symlink() && m.uid() == users::euid());
    if !ours {
        let problem = e.to_string();
        tell(&problem);
        return Some(problem);
    }
    // Said before it is set right: whoever sees the mode restored finds the reason logged.
    let problem = format!("{e} — evd set it back to 0700");
    tell(&problem);
    if fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).is_err() {
        let problem = e.to_string();
        tell(&problem);
        return Some(problem);
    }
    Some(problem)
}

/// Open (creating it 0600 if needed) a file of the runtime directory for appending: never
/// through a symlink, and only a regular file of ours. A symlink planted in its place is
/// refused with a message that says so.
pub fn open_private_append(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            crate::sys::fsio::link_refused(e, || {
                format!(
                    "refusing {}: it is a symlink (planted?); remove it",
                    path.display()
                )
            })
        })?;
    let m = f.metadata()?;
    if !m.is_file() || m.uid() != users::euid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing {}: not a regular file of ours (uid {}); remove it",
                path.display(),
                m.uid()
            ),
        ));
    }
    if m.mode() & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    }
    Ok(f)
}

/// Check a socket file before connecting to it: it must belong to us (fail closed).
pub fn check_socket_owner(sock: &Path) -> io::Result<()> {
    let m = fs::symlink_metadata(sock)?;
    let me = users::euid();
    if m.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing socket {}: owned by uid {}, not by us (uid {me})",
                sock.display(),
                m.uid()
            ),
        ));
    }
    Ok(())
}

/// Where the content hashes of executables are remembered, keyed by their stamps.
pub fn build_ids_path(dir: &Path) -> PathBuf {
    dir.join("build-ids.json")
}

/// The identity of an executable: the version and a hash of its bytes. Two byte-identical
/// binaries at two paths have one identity (so neither replaces the other's daemon); a rebuilt
/// one has another. Hashing a debug build takes a fraction of a second, so the hash is kept in
/// `<runtime dir>/build-ids.json` under the file's stamp (device, inode, size, mtime and ctime
/// to the nanosecond) and recomputed only when that changes, as any rewrite changes it.
pub fn build_identity(exe: &Path, rt: Option<&Path>) -> Option<String> {
    let f = fs::File::open(exe).ok()?;
    identity_of_open(f, rt)
}

/// [`build_identity`] of the running executable (the bytes that run, even if the file on disk
/// was replaced since).
pub fn own_build_identity(rt: Option<&Path>) -> Option<String> {
    let f = crate::sys::process::open_own_executable().ok()?;
    identity_of_open(f, rt)
}

fn identity_of_open(mut f: fs::File, rt: Option<&Path>) -> Option<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let m = f.metadata().ok()?;
    if !m.is_file() {
        return None;
    }
    let key = format!(
        "{}:{}:{}:{}.{}:{}.{}",
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    );
    // The cache is used only in a runtime directory that passes the privacy check.
    let cache = rt
        .filter(|d| check_private_dir(d).is_ok())
        .map(build_ids_path);
    let mut known: std::collections::BTreeMap<String, String> = cache
        .as_deref()
        .and_then(|p| crate::sys::fsio::read_text(p).ok())
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let hash = match known.get(&key) {
        Some(h) => h.clone(),
        None => {
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = f.read(&mut buf).ok()?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
            }
            let h: String = hasher
                .finalize()
                .iter()
                .take(8)
                .map(|b| format!("{b:02x}"))
                .collect();
            if let Some(path) = cache.as_deref() {
                // A handful of binaries at most: forget the oldest entries beyond that.
                while known.len() >= 16 {
                    let Some(first) = known.keys().next().cloned() else {
                        break;
                    };
                    known.remove(&first);
                }
                known.insert(key, h.clone());
                if let Ok(body) = serde_json::to_vec(&known) {
                    let _ = crate::sys::fsio::replace_private(path, &body);
                }
            }
            h
        }
    };
    Some(format!("{}+{hash}", env!("CARGO_PKG_VERSION")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_dir_is_created_0700_and_a_loose_one_is_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let rt = d.path().join("evd");
        ensure_private_dir(&rt).expect("created");
        let mode = fs::metadata(&rt).expect("meta").mode() & 0o777;
        assert_eq!(mode, 0o700);
        fs::set_permissions(&rt, fs::Permissions::from_mode(0o755)).expect("chmod");
        let e = ensure_private_dir(&rt).expect_err("refused");
        assert!(e.to_string().contains("its mode is 0755"), "{e}");
        assert_eq!(fs::metadata(&rt).expect("meta").mode() & 0o777, 0o755);
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&rt, &link).expect("symlink");
        assert!(ensure_private_dir(&link).is_err());
    }

    #[test]
    fn a_planted_symlink_is_never_opened() {
        let d = tempfile::tempdir().expect("tempdir");
        let target = d.path().join("victim");
        fs::write(&target, "precious\n").expect("write");
        let log = d.path().join("evd.log");
        std::os::unix::fs::symlink(&target, &log).expect("symlink");
        let e = open_private_append(&log).expect_err("refused");
        assert!(e.to_string().contains("is a symlink"), "{e}");
        assert_eq!(fs::read_to_string(&target).expect("read"), "precious\n");
        fs::remove_file(&log).expect("rm");
        open_private_append(&log).expect("created");
        assert_eq!(fs::metadata(&log).expect("meta").mode() & 0o777, 0o600);
    }

    #[test]
    fn byte_identical_binaries_share_an_identity_and_a_change_makes_another() {
        let d = tempfile::tempdir().expect("tempdir");
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        fs::write(&a, b"the same bytes").expect("write");
        fs::write(&b, b"the same bytes").expect("write");
        let rt = d.path().join("rt");
        ensure_private_dir(&rt).expect("rt");
        let ia = build_identity(&a, Some(&rt)).expect("a");
        assert_eq!(build_identity(&b, Some(&rt)), Some(ia.clone()));
        fs::write(&b, b"other bytes").expect("write");
        assert_ne!(build_identity(&b, Some(&rt)), Some(ia));
    }
}
