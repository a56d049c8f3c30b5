//! Who we are: uid, user name and host name (for lock-holder messages, socket checks and event
//! envelopes). Plain POSIX calls, the same on every platform.

pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The login name of `uid`, or `uid <n>` when the passwd database has none.
pub fn name_of(uid: u32) -> String {
    let mut buf = vec![0u8; 4096];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live, correctly sized storage owned by this frame.
    let rc =
        unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr().cast(), buf.len(), &mut out) };
    if rc == 0 && !out.is_null() && !pwd.pw_name.is_null() {
        // SAFETY: getpwuid_r filled pw_name with a NUL-terminated string inside buf.
        let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
        return name.to_string_lossy().into_owned();
    }
    format!("uid {uid}")
}

/// This host's name (`gethostname`), or `None` when it is empty or unreadable.
pub fn hostname() -> Option<String> {
    let mut buf = vec![0u8; 256];
    // SAFETY: `buf` is live and its length is passed; gethostname writes at most that many bytes.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    buf.truncate(end);
    let name = String::from_utf8_lossy(&buf).trim().to_string();
    (!name.is_empty()).then_some(name)
}
