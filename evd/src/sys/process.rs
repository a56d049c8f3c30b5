//! Processes as evd and evctl see them: detaching a daemon into its own session, killing a
//! process group, whether a pid is a live (not zombie) process of a given name, whether it is
//! stopped, and the running executable. Linux reads `/proc`; elsewhere only what POSIX says
//! (a live pid whose name cannot be read is taken to be what the caller expects). It never
//! decides what to do with a process: that is its caller's business.

use std::fs::File;
use std::io;

/// Start a new session (to be called in a child between fork and exec: async-signal-safe).
pub fn detach_session() {
    // SAFETY: setsid has no memory-safety preconditions and is async-signal-safe.
    unsafe { libc::setsid() };
}

/// Lower the calling thread's scheduling priority by `by` nice steps (Linux sets it per
/// thread). It cannot be raised again without privileges: for threads that end with their work.
pub fn lower_this_thread(by: i32) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: gettid and setpriority have no memory-safety preconditions; `which` is
        // PRIO_PROCESS with this thread's id, which Linux takes as this one thread.
        unsafe {
            let tid = libc::gettid();
            let now = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, (now + by).min(19));
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = by;
}

/// Kill (SIGKILL) every process of the group `pgid`.
pub fn kill_group(pgid: i32) {
    if pgid > 0 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// Whether `pid` exists (even if it belongs to another user).
#[cfg_attr(any(target_os = "linux", target_os = "android"), allow(dead_code))]
fn exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether `pid` is a live process (not a zombie) whose command name is `name`.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn is_live(pid: u32, name: &str) -> bool {
    let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) else {
        return false;
    };
    let Some(state) = state_of(pid) else {
        return false;
    };
    comm.trim() == name && !state.starts_with('Z')
}

/// Whether `pid` is a live process whose command name is `name`.
#[cfg(target_os = "macos")]
pub fn is_live(pid: u32, name: &str) -> bool {
    if !exists(pid) {
        return false;
    }
    let Ok(p) = libc::c_int::try_from(pid) else {
        return false;
    };
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is live and its length is passed; proc_name writes at most that many bytes.
    let n = unsafe { libc::proc_name(p, buf.as_mut_ptr().cast(), buf.len() as u32) };
    match usize::try_from(n) {
        Ok(n) if n > 0 => buf.get(..n).is_some_and(|b| b == name.as_bytes()),
        // The name cannot be read (another user's process): take it for what is expected.
        _ => true,
    }
}

/// Whether `pid` is a live process (its name cannot be read here, so any live pid is taken to
/// be `name`).
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos")))]
pub fn is_live(pid: u32, _name: &str) -> bool {
    exists(pid)
}

/// Whether `pid` is stopped (SIGSTOP, a debugger). `false` where that cannot be read.
pub fn is_stopped(pid: u32) -> bool {
    state_of(pid).is_some_and(|s| s.starts_with('T') || s.starts_with('t'))
}

/// The state letter onward of `/proc/<pid>/stat` (after the command name in parentheses).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn state_of(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()
        .map(|rest| rest.trim_start().to_string())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn state_of(_pid: u32) -> Option<String> {
    None
}

/// The running executable, opened: the bytes that run even if the file on disk was replaced
/// since (on Linux); elsewhere the file at the path the process was started from.
pub fn open_own_executable() -> io::Result<File> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Ok(f) = File::open("/proc/self/exe") {
        return Ok(f);
    }
    std::env::current_exe().and_then(File::open)
}

/// A crash point of the fault campaign (see [`crash`]); nothing at all in builds without the
/// `failpoints` feature.
#[macro_export]
macro_rules! crash_point {
    ($name:expr) => {
        #[cfg(feature = "failpoints")]
        {
            if let Some(arg) = fail::eval($name, |a| a) {
                $crate::sys::process::crash(arg);
            }
        }
    };
}

/// What a crash point does when its failpoint is set (`FAILPOINTS='<name>=return'`): end evd
/// as `kill -9` would. With `return(<path>)` only the first process to get there dies (it
/// creates `<path>`); later ones go on, so a retry by the next daemon runs through.
pub fn crash(once: Option<String>) {
    if let Some(path) = once.filter(|p| !p.is_empty()) {
        let first = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .is_ok();
        if !first {
            return;
        }
    }
    die_now()
}

/// End this process at once, as `kill -9` would: nothing flushed, nothing cleaned up. Only the
/// fault campaign's crash points call it (`FAILPOINTS='<point>=return'`), to stop evd exactly
/// between two durable steps.
pub fn die_now() -> ! {
    // SAFETY: signalling our own process; SIGKILL cannot be caught, so this never returns.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn we_are_live_and_a_reaped_child_is_not() {
        let me = std::process::id();
        assert!(exists(me));
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        child.wait().expect("wait");
        assert!(!is_live(pid, "true") || !exists(pid));
        assert!(!is_stopped(me));
        assert!(open_own_executable().is_ok());
    }
}
