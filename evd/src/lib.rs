//! evd: the daemon that owns `.evolving/` stores. Pure logic (the verb rules, the current view,
//! the audit) sits beside the I/O (store, locks, files) and the server, and evctl's in-process
//! fallback calls the same [`verbs`] the daemon serves.

pub mod api;
pub mod daemon;
pub mod engine;
pub mod git;
pub mod intake;
pub mod ledger;
pub mod memo;
pub mod open;
pub mod store;
pub mod sys;
pub mod verbs;
