//! The git hooks evctl provides (`pre-commit`, `pre-push`), and the names and markers every part
//! of `hooks/` shares: the variables that skip them or make them warn only, the marker of evctl's script and of its one
//! line, the suffix of a chained hook.
//!
//! Only names and constants: it must not read or write files, nor know how a script or a line
//! is written.

use serde::Serialize;

/// The environment variable that makes every evctl hook step aside.
pub const SKIP_VAR: &str = "EVCTL_NO_HOOKS";

/// The environment variable that makes every evctl gate say what it would block, and let git
/// go ahead all the same.
pub const WARN_VAR: &str = "EVCTL_GATE_WARN_ONLY";

/// The marker line of evctl's own hook scripts (their second line starts with it).
pub const SCRIPT_MARK: &str = "# evctl-hooks: ";

/// The marker comment ending the line evctl adds to a project's hook file.
pub const LINE_MARK: &str = "# evctl-hooks line";

/// The suffix a foreign hook is moved aside to while evctl's hook chains it.
pub const CHAINED_SUFFIX: &str = ".evctl-chained";

/// The git hooks evctl provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Hook {
    #[serde(rename = "pre-commit")]
    PreCommit,
    #[serde(rename = "pre-push")]
    PrePush,
}

impl Hook {
    pub const ALL: [Hook; 2] = [Hook::PreCommit, Hook::PrePush];

    pub fn name(self) -> &'static str {
        match self {
            Hook::PreCommit => "pre-commit",
            Hook::PrePush => "pre-push",
        }
    }

    /// The git command whose `--no-verify` skips this hook.
    pub fn git_verb(self) -> &'static str {
        match self {
            Hook::PreCommit => "commit",
            Hook::PrePush => "push",
        }
    }
}
