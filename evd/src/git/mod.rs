//! git, as the verdicts need it: facts about HEAD and the reference (with their cache), the
//! answers of `rev-list` ranges, the work tree's uncommitted changes, and the verdict inputs
//! that live outside the ticks. Every git process runs with a deadline ([`crate::sys::child`]).
//!
//! It knows nothing of stores, verbs or the daemon (it imports `sys` and `engine` only), and it
//! never writes the repository.

pub mod facts;
pub mod ranges;
pub mod run;
pub mod worktree;
