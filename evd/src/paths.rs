//! Where the per-user daemon lives: its private runtime directory, socket, locks and log.
//! evctl uses the same functions, so both sides always agree.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::users;

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
/// our uid, no access for group or others. A directory someone else made is refused.
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
    if m.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
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

/// A fingerprint of an executable file (size and mtime): a rebuilt binary gets a new one, and a
/// client can compute it with one stat.
pub fn exe_fingerprint(exe: &Path) -> Option<String> {
    let m = fs::metadata(exe).ok()?;
    Some(format!(
        "{}+{:x}.{:x}.{:x}",
        env!("CARGO_PKG_VERSION"),
        m.len(),
        m.mtime(),
        m.mtime_nsec()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_dir_is_created_0700_and_loose_modes_are_tightened() {
        let d = tempfile::tempdir().expect("tempdir");
        let rt = d.path().join("evd");
        ensure_private_dir(&rt).expect("created");
        let mode = fs::metadata(&rt).expect("meta").mode() & 0o777;
        assert_eq!(mode, 0o700);
        fs::set_permissions(&rt, fs::Permissions::from_mode(0o755)).expect("chmod");
        ensure_private_dir(&rt).expect("tightened");
        assert_eq!(fs::metadata(&rt).expect("meta").mode() & 0o777, 0o700);
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&rt, &link).expect("symlink");
        assert!(ensure_private_dir(&link).is_err());
    }
}
