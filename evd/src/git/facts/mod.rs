//! A stamp-validated cache of git's own answers to `rev-parse HEAD` and `rev-parse @{upstream}`.
//!
//! Spawning git costs a millisecond or two, which dominates a `check`. Git stays the oracle: on
//! a miss it is spawned exactly as before and its answer is recorded together with a *stamp*
//! (device, inode, mtime, ctime, length, or "absent") of every file that answer can depend on.
//! The answer is reused only while every one of those stamps is unchanged; anything we cannot
//! reason about (a `.git` file, reftable, a nested symref, config includes, a `GIT_*`
//! variable that can redirect git, files changed within the last moments) is simply never
//! cached. Transport, identity, editor, pager and tracing variables are inert (as are the index,
//! prefix and exec path git exports to a hook), and
//! `GIT_CONFIG_NOSYSTEM` is part of an answer's key.
//!
//! What an answer depends on, in a repository whose `.git` is a real directory:
//!
//! - **Discovery.** Every directory from the (canonical) root up to the one holding `.git`, by
//!   identity (a mount or a replaced directory is a change), and the absence of `.git` and
//!   `HEAD` in each below it (git would stop at either). The walk must stay on one device, and
//!   the repository must be ours (else git consults `safe.directory`).
//! - **Head.** `<gitdir>/HEAD`, `<gitdir>/packed-refs`, `<gitdir>/config` (the repository
//!   format), the loose file of the branch HEAD names, the identity of `objects/` and `refs/`,
//!   and the absence of `reftable/` and `commondir`.
//! - **Upstream.** All of Head's, plus `<gitdir>/config.worktree`, the user and system config
//!   files, and the loose file of the upstream ref (its name found with `git for-each-ref
//!   --format=%(upstream)` before the answer is asked for, so that its stamp predates git's read).
//!   Any of these config files (or the repository's) mentioning `include` is not cached.
//!
//! On a network or FUSE filesystem (NFS, SMB, sshfs, …) a `stat` may come from a client-side
//! attribute cache, so nothing there is cached.
//!
//! Stamps are taken before git is spawned and compared again after it exits; an answer during
//! which anything moved is not kept. A file modified within [`RACY_WINDOW`] of being stamped is
//! not trusted (a second change in the same timestamp tick could leave an identical stamp).
//!
//! Two variants: [`Mode::Caller`] answers as the caller's own `git` would (evctl's facts,
//! persisted between runs with [`FactCache::load`] / [`FactCache::save`]), and
//! [`Mode::Repository`] answers as evd's repository-only queries do
//! ([`crate::git::run::git`], which clears `GIT_DIR`, `GIT_WORK_TREE` and
//! `GIT_INDEX_FILE`), kept in memory for the daemon's life.
//!
//! What it must not do: answer from a stamp it cannot vouch for (when in doubt, git is asked),
//! or take in other git questions (rev-list ranges, the work tree): each has its own module in
//! [`crate::git`].
//!
//! The folder, by concern: [`cache`] (the answers kept and the questions asked of git),
//! [`deps`] (which files an answer depends on, and the query), [`stamp`] (a file's stamp and
//! whether it holds), [`env`] (the environment rules and whose git is asked), [`persisted`]
//! (the file the answers are kept in between runs). This file is an index: it declares them and
//! re-exports the public names, and holds no code its children use.

mod cache;
mod deps;
mod env;
mod persisted;
mod stamp;
#[cfg(test)]
mod tests;

pub use cache::{FactCache, MAX_ENTRIES};
pub use deps::Query;
pub use env::{env_allows_caching, Mode, SYSTEM_CONFIG};
pub use stamp::{Dep, Meta, Stamp, RACY_WINDOW};
