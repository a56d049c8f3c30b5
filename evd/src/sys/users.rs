//! Who we are: uid and user name (for lock-holder messages and socket checks).

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
