//! `evctl hooks install | uninstall | status`: evctl's git hooks, put where git really looks for
//! hooks, beside whatever is already there.
//!
//! Where: the directory `git rev-parse --git-path hooks` names, which follows `core.hooksPath`,
//! linked worktrees (they share the main repository's hooks) and submodules.
//!
//! Two ways in, by what that directory is:
//!
//! - **A hooks directory of its own** (`.git/hooks`, or a `core.hooksPath` outside the work
//!   tree): evctl writes a small POSIX `sh` script per hook, recognised later by its marker line
//!   — or, for the plain pre-commit gate when the `evctl` on `PATH` is this one, a symlink to
//!   evctl itself, which git then starts with no shell in between (`direct`).
//!   A hook that is already there and is not evctl's is never overwritten: it is moved aside to
//!   `<hook>.evctl-chained` (a hard link first, so that some hook is in place at every instant;
//!   a symlink is moved as the link itself, its target untouched), and evctl's script runs it
//!   first with the same arguments and input, stopping with its exit code when it fails.
//!   Uninstall moves it back: the same file, so the same bytes and mode.
//! - **A directory inside the work tree** (husky and similar: `core.hooksPath = .husky/_`, or
//!   `.githooks`): the hook files there belong to the project and are usually committed. evctl
//!   adds one marked line to the project's hook file (`.husky/pre-commit` for husky's `_`
//!   directory of generated wrappers, else `<dir>/<hook>`), and uninstall removes exactly that
//!   line, leaving the file byte for byte as it was.
//!
//! The pure parts (script text, marker detection, adding and removing the line, the plan) are
//! separate from the few file operations that carry a plan out, so that they can be tested alone
//! and so that `evctl setup --dry-run` can print a plan without acting on it.
//!
//! This file is the index of `hooks/`: it declares the parts and re-exports what the rest of
//! evctl uses. It must hold no code of its own, so that no part ever needs to import it (the
//! parts import each other directly, bottom up):
//!
//! - `hook`: which hooks evctl provides, and the names and markers every part shares;
//! - `script`: the text of evctl's own hook script (a hooks directory of its own);
//! - `direct`: the pre-commit gate as a link to evctl itself (no shell), and when it fits;
//! - `line`: the one line evctl adds to a project's hook file (husky and similar);
//! - `layout`: where git runs hooks (`git rev-parse --git-path hooks`);
//! - `found`: what is at a hook's path now, and the chained (moved-aside) hook's name;
//! - `steps`: one change to the filesystem, and carrying a list of them out;
//! - `install`: the plans for install and uninstall (chaining a foreign hook, or the line);
//! - `status`: one hook's state as `evctl hooks status` reports it;
//! - `verb`: the `evctl hooks …` verb itself (its flags, its context, its output).

mod direct;
mod found;
mod hook;
mod install;
mod layout;
mod line;
mod script;
mod status;
mod steps;
mod verb;

pub use direct::{invoked_as, self_on_path};
pub use found::{look, Found};
pub use hook::{Hook, SKIP_VAR, WARN_VAR};
pub use install::{plan_install, Target};
pub use layout::Layout;
pub use script::{is_strict, sh_quote};
pub use steps::{apply, Step};
pub use verb::{run, Action};
