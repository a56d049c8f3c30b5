//! Unix socket addresses other than a path: Linux's abstract namespace (systemd hands its
//! `NOTIFY_SOCKET` as `@name`). Other platforms have no such namespace and say `Unsupported`.
//! It only builds addresses; sending is the caller's business.

use std::io;
use std::os::unix::net::SocketAddr;

/// The address of the abstract socket `name` (without the leading `@`).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn abstract_name(name: &[u8]) -> io::Result<SocketAddr> {
    #[cfg(target_os = "android")]
    use std::os::android::net::SocketAddrExt;
    #[cfg(target_os = "linux")]
    use std::os::linux::net::SocketAddrExt;
    SocketAddr::from_abstract_name(name)
}

/// No abstract namespace on this platform.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn abstract_name(_name: &[u8]) -> io::Result<SocketAddr> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}
