//! The allocator of a long-lived daemon: giving freed heap back to the system and tuning the
//! heap so it holds what it keeps. glibc's `malloc_trim`/`mallopt` on Linux; nothing elsewhere
//! (other allocators return memory on their own terms). It never allocates on the caller's
//! behalf or reports figures (that is [`crate::sys::resources`]).

/// Hand the heap's free pages back to the system, so a long-lived daemon holds what it keeps
/// rather than its peak (after an evaluation, or a store released).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_free_memory() {
    // SAFETY: malloc_trim only releases free heap pages.
    unsafe { libc::malloc_trim(0) };
}

/// Hand the heap's free pages back to the system (nothing to do with this allocator).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() {}

/// Make the heap of a long-lived daemon hold what it keeps. Called once, first thing in `main`.
///
/// - Two arenas, not eight per core: the store actors, the runtime and the audit's workers
///   would otherwise each fragment a heap of their own, which `malloc_trim` cannot compact.
/// - A fixed threshold (1 MiB) above which blocks are mapped on their own: glibc otherwise
///   raises it after the first large block is freed, so that every later check's event lines
///   and every answer (megabytes at 100,000 ticks) land in the heap and stay in its RSS.
///
/// An explicit `MALLOC_ARENA_MAX` or `MALLOC_MMAP_THRESHOLD_` in the environment wins.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
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

/// Make the heap of a long-lived daemon hold what it keeps (nothing to tune here).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn tune_allocator() {}
