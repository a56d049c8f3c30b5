//! evd: the daemon that owns `.evolving/` stores. Pure logic (the verb rules, the current view,
//! the audit) sits beside the I/O (store, locks, files) and the server, and evctl's in-process
//! fallback calls the same [`verbs`] the daemon serves.

pub mod answers;
pub mod audit;
pub mod check_memo;
pub mod child;
pub mod clock;
pub mod config;
pub mod connections;
pub mod dirwatch;
pub mod events;
pub mod evidence;
pub mod fsio;
pub mod git_ranges;
pub mod gitfacts;
pub mod http_guard;
pub mod intake;
pub mod interned;
pub mod ledger;
pub mod limits;
pub mod lint;
pub mod lock;
pub mod packed;
pub mod par;
pub mod paths;
pub mod receipt_cache;
pub mod receipts;
pub mod registry;
pub mod replay_record;
pub mod requests;
pub mod resources;
pub mod server;
pub mod state_record;
pub mod store;
pub mod systemd;
pub mod users;
pub mod verbs;
pub mod verdict;
pub mod verdict_inputs;
pub mod verify_memo;
pub mod view;
pub mod watcher;
pub mod worktree;
