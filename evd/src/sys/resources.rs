//! What the daemon process holds (threads, descriptors, memory, watches), for `status` and the
//! bench: `/proc/self` on Linux, `/dev/fd` and `getrusage` elsewhere (zero where a figure is not
//! available). It only reports; giving memory back is [`crate::sys::memory`]'s, re-exported
//! here for its callers.

use proto::rpc::Resources;

pub use crate::sys::memory::{release_free_memory, tune_allocator};

/// This process's resources right now (zero where unreadable).
pub fn snapshot(open_stores: usize, connections: usize) -> Resources {
    let own = own();
    let hub = crate::sys::watch::hub().stats();
    Resources {
        threads: own.threads,
        open_fds: own.open_fds,
        rss_bytes: own.rss_bytes,
        inotify_instances: hub.instances as u64,
        inotify_watches: hub.watches as u64,
        open_stores: open_stores as u64,
        connections: connections as u64,
    }
}

/// The figures the operating system gives about this process.
struct Own {
    threads: u64,
    open_fds: u64,
    rss_bytes: u64,
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn own() -> Own {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    Own {
        threads: field("Threads:"),
        open_fds: count_entries("/proc/self/fd"),
        rss_bytes: field("VmRSS:") * 1024,
    }
}

/// Descriptors from `/dev/fd`; the peak resident size from `getrusage` (the current one has no
/// portable call); threads unknown.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn own() -> Own {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is live and correctly sized for the call.
    let peak = if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
        u64::try_from(ru.ru_maxrss).unwrap_or(0)
    } else {
        0
    };
    // ru_maxrss is in bytes on macOS, in KiB on the BSDs.
    let unit = if cfg!(any(target_os = "macos", target_os = "ios")) {
        1
    } else {
        1024
    };
    Own {
        threads: 0,
        open_fds: count_entries("/dev/fd"),
        rss_bytes: peak * unit,
    }
}

fn count_entries(dir: &str) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| d.count() as u64)
        .unwrap_or(0)
}
