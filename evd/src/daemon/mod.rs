//! The daemon: the RPC server and its HTTP guard, client connections, the registry of open
//! stores (one actor each), the background watcher, and systemd's socket activation.
//!
//! The top layer: it may import every layer below, and nothing imports it. It holds no verb
//! logic: each `ev.*` call is handed to [`crate::api`], the same door evctl's in-process path uses.

pub mod connections;
pub mod exactly_once;
pub mod http_guard;
pub mod registry;
pub mod server;
pub mod systemd;
pub mod watcher;
