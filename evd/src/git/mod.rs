//! git, as the verdicts need it: facts about HEAD and the reference (with their cache), the
//! answers of `rev-list` ranges, the work tree's uncommitted changes, the index a commit
//! records, the verdict inputs that live outside the ticks, a file's last copy in git (for
//! `doctor`), and what travels between hosts through refs: receipts as notes ([`notes`]) and
//! each host's ledger ([`ledger_refs`]). Every git process runs with a deadline
//! ([`crate::sys::child`]).
//!
//! It knows nothing of stores, verbs or the daemon (it imports `sys` and `engine` only). It
//! writes nothing of the repository but objects and evd's own refs (`refs/notes/evolving-receipts`,
//! `refs/evolving/…`), each moved only from the value it was read at; never the work tree, the
//! index or a branch.

pub mod facts;
pub mod history;
pub mod ledger_refs;
pub mod notes;
pub mod ranges;
pub mod run;
pub mod staged;
#[cfg(test)]
mod test_git;
pub mod worktree;
