//! Every directory evd watches, through one hub for the whole daemon (see the platform's
//! implementation for how): synchronous drains ([`DirWatch`]) whose "nothing changed" is certain,
//! and live listeners. The API is the same on every platform.
//!
//! - Linux, Android: [`inotify_hub`], one inotify instance read directly. A drain reads the
//!   instance's whole queue itself, so it needs no fence.
//! - Elsewhere: [`notify_hub`], the `notify` crate (FSEvents on macOS, kqueue on the BSDs). Those
//!   do not keep events in order, so there a synchronous watch is refused with its reason (its
//!   owner validates against the disk) and only live listeners are served.
//!
//! The notify hub also runs on Linux (one notify watcher, with a fence for synchronous drains),
//! but it is not used there: under load a receipt appended by another process was sometimes
//! never delivered (`evbench follow`'s receipt-to-green step timed out in 3 runs of 4, against
//! none of the inotify hub's), see docs/platforms.md. It must not be used for Linux again
//! until that is found.

mod common;
pub use common::{Changes, HubStats, Listener, WatchError, DEBOUNCE};

#[cfg(any(target_os = "linux", target_os = "android"))]
mod inotify_hub;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub use inotify_hub::*;

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod notify_hub;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub use notify_hub::*;
