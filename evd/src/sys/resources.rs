//! What the daemon process holds (threads, descriptors, memory, watches), for `status` and the
//! bench, and giving freed heap back to the system.

use proto::rpc::Resources;

/// Hand the heap's free pages back to the system, so a long-lived daemon holds what it keeps
/// rather than its peak (after an evaluation, or a store released).
pub fn release_free_memory() {
    // SAFETY: malloc_trim only releases free heap pages.
    unsafe { libc::malloc_trim(0) };
}

/// Make the heap of a long-lived daemon hold what it keeps. Called once, first thing in `main`.
///
/// - Two arenas, not eight per core: the store actors, the runtime and the audit's workers
///   would otherwise each fragment a heap of their own, which `malloc_trim` cannot compact.
/// - A fixed threshold (1 MiB) above which blocks are mapped on their own: glibc otherwise
///   raises it after the first large block is freed, so that every later check's event lines
///   and every answer (megabytes at 100,000 ticks) land in the heap and stay in its RSS.
///
/// An explicit `MALLOC_ARENA_MAX` or `MALLOC_MMAP_THRESHOLD_` in the environment wins.
pub fn tune_allocator() {
    let set = |var: &str| std::env::var_os(var).is_some();
    // SAFETY: mallopt only sets allocator parameters; called before any other thread exists.
    unsafe {
        if !set("MALLOC_ARENA_MAX") {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
        if !set("MALLOC_MMAP_THRESHOLD_") {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}

/// This process's resources right now (Linux `/proc`; zero where unreadable).
pub fn snapshot(open_stores: usize, connections: usize) -> Resources {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    let hub = crate::sys::watch::hub().stats();
    Resources {
        threads: field("Threads:"),
        open_fds,
        rss_bytes: field("VmRSS:") * 1024,
        inotify_instances: hub.instances as u64,
        inotify_watches: hub.watches as u64,
        open_stores: open_stores as u64,
        connections: connections as u64,
    }
}
