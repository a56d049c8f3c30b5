//! Who is on the other end of a Unix stream socket: the peer's user id (and process id where
//! the platform says). `SO_PEERCRED` on Linux and Android, `getpeereid` on macOS and the BSDs.
//! It only asks the kernel; deciding whom to let in is the server's business.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The credentials of a connected peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    /// Its process id, where the platform reports one.
    pub pid: Option<i32>,
}

/// The credentials of the peer of the connected Unix stream `sock`.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn of(sock: BorrowedFd<'_>) -> io::Result<Peer> {
    // SAFETY: an all-zero ucred is a valid value for getsockopt to overwrite.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live and sized for SO_PEERCRED; the fd is borrowed for the call.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::addr_of_mut!(cred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Peer {
        uid: cred.uid,
        pid: Some(cred.pid),
    })
}

/// The credentials of the peer of the connected Unix stream `sock`.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn of(sock: BorrowedFd<'_>) -> io::Result<Peer> {
    let mut uid: libc::uid_t = 0;
    let mut gid: libc::gid_t = 0;
    // SAFETY: `uid` and `gid` are live for the call; the fd is borrowed for the call.
    if unsafe { libc::getpeereid(sock.as_raw_fd(), &mut uid, &mut gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Peer { uid, pid: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn the_peer_of_a_socketpair_is_ourselves() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("socketpair");
        let p = of(a.as_fd()).expect("peer");
        assert_eq!(p.uid, crate::sys::users::euid());
        if let Some(pid) = p.pid {
            assert_eq!(u32::try_from(pid).ok(), Some(std::process::id()));
        }
    }
}
