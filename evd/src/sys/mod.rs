//! The operating system, as the rest of evd sees it: child processes with deadlines,
//! crash-safe files, files opened inside a repository without leaving it ([`beneath`]), users,
//! threads for many small reads, the runtime directory, resource figures, the watch hub and
//! answer files. The bottom layer: it imports nothing else of evd.
//!
//! Whatever differs between operating systems lives in one small module each, with a
//! `cfg(target_os = …)` implementation per platform family and a portable fallback, so that no
//! other code of evd (or evctl) needs a `cfg`: [`watch`] (directory watching), [`peer`] (a
//! socket peer's uid), [`memory`] (the allocator), [`process`] (sessions, process groups, live
//! pids, the running executable), [`resources`] (what the process holds), [`filesystem`]
//! (whole-filesystem flush, network filesystems) and [`unix_addr`] (abstract socket names).
//! docs/platforms.md says what is tested where.

pub mod answers;
pub mod beneath;
pub mod child;
pub mod filesystem;
pub mod fsio;
pub mod memory;
pub mod par;
pub mod paths;
pub mod peer;
pub mod process;
pub mod resources;
pub mod unix_addr;
pub mod users;
pub mod watch;
