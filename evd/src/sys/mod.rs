//! The operating system, as the rest of evd sees it: child processes with deadlines,
//! crash-safe files, users, threads for many small reads, the runtime directory, resource
//! figures, the watch hub and answer files. The bottom layer: it imports nothing else of evd.

pub mod answers;
pub mod child;
pub mod fsio;
pub mod par;
pub mod paths;
pub mod resources;
pub mod users;
pub mod watch;
