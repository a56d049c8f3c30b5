//! git, as the verdicts need it: facts about HEAD and the reference (with their cache), the
//! answers of `rev-list` ranges, the work tree's uncommitted changes, the verdict inputs
//! that live outside the ticks, and a file's last copy in git (for `doctor`). Every git process runs with a deadline ([`crate::sys::child`]).
//!
//! It knows nothing of stores, verbs or the daemon (it imports `sys` and `engine` only), and it
//! never writes the repository.

pub mod facts;
pub mod history;
pub mod notes;
pub mod ranges;
pub mod run;
pub mod staged;
pub mod worktree;
