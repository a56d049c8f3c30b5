//! The direct form of the pre-commit gate: the hook is a symlink to evctl itself, so that git
//! starts evctl with no shell in between (a `sh` script costs a second program start on every
//! commit, most of a millisecond). git names the hook `pre-commit` in the program's name, and
//! evctl, started under that name, runs `evctl hook pre-commit` ([`invoked_as`]).
//!
//! When it may be used: the plain gate only (not `--strict`), a store found from the top of the
//! work tree (no `--store` to pass), no foreign hook to chain, and an `evctl` on `PATH` that is
//! this very evctl — the script would have run it, and the link keeps naming it (the `PATH`
//! entry, not the file it resolves to, so that an upgrade in place keeps the link working).
//! Everything else keeps the script, which can carry flags, chain a hook, and look evctl up.
//!
//! It looks at `PATH` and at files' identities; it must not change anything on disk.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::hook::Hook;

/// The program name evctl is started under as evctl's direct pre-commit hook.
pub const HOOK_NAME: &str = "pre-commit";

/// Whether `hook` may take the direct form, given how the gate is installed.
pub fn applies(hook: Hook, strict: bool, store: Option<&str>, chaining: bool) -> bool {
    hook == Hook::PreCommit && !strict && store.is_none() && !chaining
}

/// Whether a symlink at a hook's path, pointing at `target`, is evctl's direct hook: an absolute
/// path to a program named `evctl`.
pub fn is_our_link(target: &str) -> bool {
    let p = Path::new(target);
    p.is_absolute() && p.file_name().is_some_and(|n| n == "evctl")
}

/// The first `evctl` on `PATH` (as `command -v evctl` finds it), when it is this very program:
/// the path the direct hook links to. `None` when evctl runs from elsewhere (a build directory,
/// another install), where the script's lookup is the safer choice.
pub fn self_on_path() -> Option<String> {
    let me = fs::metadata(std::env::current_exe().ok()?).ok()?;
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        if !dir.is_absolute() {
            continue;
        }
        let candidate = dir.join("evctl");
        let Ok(m) = fs::metadata(&candidate) else {
            continue;
        };
        if !m.is_file() || m.permissions().mode() & 0o111 == 0 {
            continue;
        }
        let same = m.dev() == me.dev() && m.ino() == me.ino();
        return same.then(|| candidate.to_str().map(str::to_string))?;
    }
    None
}

/// The arguments evctl runs with: those given, or `hook pre-commit` and git's own arguments when
/// git started evctl as its direct pre-commit hook (the program's name is the hook's).
pub fn invoked_as(argv0: Option<&std::ffi::OsStr>, args: Vec<String>) -> Vec<String> {
    let as_hook = argv0
        .and_then(|a| Path::new(a).file_name())
        .is_some_and(|n| n == HOOK_NAME);
    if !as_hook {
        return args;
    }
    let mut v = Vec::with_capacity(args.len() + 2);
    v.push("hook".to_string());
    v.push(HOOK_NAME.to_string());
    v.extend(args);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn started_as_the_hook_it_runs_the_gate() {
        let as_hook = invoked_as(Some(OsStr::new(".git/hooks/pre-commit")), vec![]);
        assert_eq!(as_hook, ["hook", "pre-commit"]);
        let plain = invoked_as(Some(OsStr::new("/usr/bin/evctl")), vec!["list".to_string()]);
        assert_eq!(plain, ["list"]);
        assert_eq!(invoked_as(None, vec![]), Vec::<String>::new());
        // Only the name counts, not a directory called so.
        let dir = invoked_as(Some(OsStr::new("/x/pre-commit/evctl")), vec![]);
        assert!(dir.is_empty());
    }

    #[test]
    fn only_the_plain_gate_found_from_the_top_goes_direct() {
        assert!(applies(Hook::PreCommit, false, None, false));
        assert!(!applies(Hook::PreCommit, true, None, false));
        assert!(!applies(Hook::PreCommit, false, Some("sub"), false));
        assert!(!applies(Hook::PreCommit, false, None, true));
        assert!(!applies(Hook::PrePush, false, None, false));
    }

    #[test]
    fn a_link_to_an_evctl_is_ours() {
        assert!(is_our_link("/usr/local/bin/evctl"));
        assert!(!is_our_link("evctl"));
        assert!(!is_our_link("/usr/local/bin/pre-commit-foreign"));
        assert!(!is_our_link("/opt/evctl/run"));
    }
}
