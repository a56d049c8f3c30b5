//! The two systemd contracts evd honours without a library: socket activation (`LISTEN_FDS`)
//! and readiness notification (`NOTIFY_SOCKET`).

use std::os::fd::FromRawFd;
use std::os::unix::net::{UnixDatagram, UnixListener};

/// The first fd systemd passes.
const LISTEN_FDS_START: i32 = 3;

/// The listening socket systemd passed us, if `LISTEN_PID` names this process and
/// `LISTEN_FDS` is at least 1. Call before any other thread exists.
pub fn activated_listener() -> Option<UnixListener> {
    let pid: u32 = std::env::var("LISTEN_PID").ok()?.parse().ok()?;
    let n: i32 = std::env::var("LISTEN_FDS").ok()?.parse().ok()?;
    if pid != std::process::id() || n < 1 {
        return None;
    }
    // SAFETY: systemd hands this fd to us; we take sole ownership of it exactly once.
    unsafe {
        libc::fcntl(LISTEN_FDS_START, libc::F_SETFD, libc::FD_CLOEXEC);
        Some(UnixListener::from_raw_fd(LISTEN_FDS_START))
    }
}

/// Send `state` (e.g. `READY=1`) to the service manager when one is listening.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let sent = if let Some(name) = bytes.strip_prefix(b"@") {
        crate::sys::unix_addr::abstract_name(name)
            .and_then(|addr| sock.send_to_addr(state.as_bytes(), &addr))
    } else {
        sock.send_to(state.as_bytes(), std::path::Path::new(&path))
    };
    if let Err(e) = sent {
        tracing::debug!(error = %e, "sd_notify failed");
    }
}
