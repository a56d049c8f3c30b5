//! The daemon: the RPC server and its HTTP guard, client connections, the registry of open
//! stores (one actor each), the background watcher, and systemd's socket activation.

pub mod connections;
pub mod http_guard;
pub mod registry;
pub mod server;
pub mod systemd;
pub mod watcher;
