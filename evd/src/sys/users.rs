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

/// The longest host id: it names a git ref of its own (`refs/evolving/ledger/<host id>`).
pub const MAX_HOST_ID: usize = 64;

/// This host's id as a publisher of receipts and ledgers: `EV_HOST_ID` when set, else the host
/// name made safe for a ref name. The second value names where it came from. An `EV_HOST_ID`
/// that is not a valid id is an error naming the rule it breaks.
pub fn host_id() -> Result<(String, &'static str), String> {
    match std::env::var("EV_HOST_ID") {
        Ok(v) if !v.is_empty() => {
            check_host_id(&v).map_err(|why| format!("EV_HOST_ID {v:?} is not a host id: {why}"))?;
            Ok((v, "EV_HOST_ID"))
        }
        _ => Ok((host_id_of(&hostname().unwrap_or_default()), "hostname")),
    }
}

/// Why `id` cannot be a host id, if it cannot: 1 to [`MAX_HOST_ID`] characters among `A-Z a-z
/// 0-9 . _ -`, not starting with `.` or `-`, without `..`, not ending in `.lock` (git's ref
/// rules, so that it can name a ref on its own).
pub fn check_host_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() || id.len() > MAX_HOST_ID {
        return Err("it must be 1 to 64 characters");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("only letters, digits, '.', '_' and '-' are allowed");
    }
    if id.starts_with(['.', '-']) || id.contains("..") || id.ends_with(".lock") {
        return Err("it may not start with '.' or '-', hold '..' or end in '.lock'");
    }
    Ok(())
}

/// A host name made into a host id: every other character becomes `-`, what git's ref rules
/// forbid at the ends goes, and an empty result is `localhost`.
fn host_id_of(name: &str) -> String {
    let mut id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    while id.contains("..") {
        id = id.replace("..", ".");
    }
    id.truncate(MAX_HOST_ID);
    let mut id = id.trim_start_matches(['.', '-']).to_string();
    while id.ends_with(".lock") || id.ends_with('.') {
        id = id
            .trim_end_matches(".lock")
            .trim_end_matches('.')
            .to_string();
    }
    if check_host_id(&id).is_err() {
        return "localhost".into();
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_ids_follow_git_ref_rules() {
        for ok in ["ci-linux", "laptop.local", "a", "h_1", &"x".repeat(64)] {
            assert_eq!(check_host_id(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".h",
            "-h",
            "a..b",
            "h.lock",
            "a/b",
            "a b",
            "é",
            &"x".repeat(65),
        ] {
            assert!(check_host_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_host_name_becomes_a_valid_id() {
        assert_eq!(host_id_of("build box #3"), "build-box--3");
        assert_eq!(host_id_of(".hidden..name.lock"), "hidden.name");
        assert_eq!(host_id_of(""), "localhost");
        assert_eq!(host_id_of("///"), "localhost");
        let long = "h".repeat(100);
        assert_eq!(host_id_of(&long).len(), MAX_HOST_ID);
        for name in ["ci", "x.y.lock.lock", "-.-.", "äöü"] {
            let id = host_id_of(name);
            assert_eq!(check_host_id(&id), Ok(()), "{name} -> {id}");
        }
    }
}
