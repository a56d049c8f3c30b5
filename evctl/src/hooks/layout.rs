//! Where git runs hooks: the directory `git rev-parse --git-path hooks` names (following
//! `core.hooksPath`, linked worktrees and submodules), the work tree's top, and whether that
//! directory is inside the work tree (husky and similar) or one of its own.
//!
//! It asks git and resolves paths; it must not read or change any hook file.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use super::hook::Hook;

/// The hooks directory git uses for a work tree, and what kind of place it is.
#[derive(Debug, Clone, Serialize)]
pub struct Layout {
    /// Absolute; may not exist yet.
    pub dir: PathBuf,
    /// The work tree's top (where git runs hooks).
    pub top: PathBuf,
    /// The repository's common git directory (shared by its linked worktrees).
    pub common_dir: PathBuf,
    /// Not `<common dir>/hooks`: `core.hooksPath` moved it.
    pub hooks_path: bool,
    /// Inside the work tree, outside the git directory (husky and similar).
    pub in_tree: bool,
}

/// `path` made absolute against `base` and resolved as far as it exists (symlinks and `..` of
/// the existing part by the filesystem, the rest lexically).
fn resolve(base: &Path, path: &str) -> PathBuf {
    let p = base.join(path);
    if let Ok(c) = fs::canonicalize(&p) {
        return c;
    }
    let mut missing = Vec::new();
    let mut cur = p.as_path();
    while let Some(parent) = cur.parent() {
        if let Some(name) = cur.file_name() {
            missing.push(name.to_os_string());
        }
        if let Ok(c) = fs::canonicalize(parent) {
            let mut out = c;
            for m in missing.iter().rev() {
                if m == ".." {
                    out.pop();
                } else if m != "." {
                    out.push(m);
                }
            }
            return out;
        }
        cur = parent;
    }
    p
}

impl Layout {
    /// Ask git (one `rev-parse`, run in `here`) where it runs hooks from.
    pub fn discover(here: &Path) -> Result<Layout, String> {
        let out = evd::api::shared::child::output(
            Command::new("git")
                .arg("-C")
                .arg(here)
                .args(["rev-parse", "--git-path", "hooks", "--show-toplevel"])
                .arg("--git-common-dir"),
            evd::api::shared::child::git_timeout(),
        );
        crate::context::warn_git_timeouts();
        let out = out.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        if !out.status.success() || lines.len() != 3 {
            return Err(format!(
                "{} is not inside a git work tree (git hooks need one)",
                here.display()
            ));
        }
        let dir = resolve(here, lines[0]);
        let top = resolve(here, lines[1]);
        let common_dir = resolve(here, lines[2]);
        let hooks_path = dir != common_dir.join("hooks");
        let in_tree = dir.starts_with(&top) && !dir.starts_with(&common_dir);
        Ok(Layout {
            dir,
            top,
            common_dir,
            hooks_path,
            in_tree,
        })
    }

    /// The file evctl edits or writes for `hook`.
    pub fn file(&self, hook: Hook) -> PathBuf {
        if self.in_tree && self.dir.file_name().is_some_and(|n| n == "_") {
            // husky's layout: `_` holds generated wrappers that run the project's files above.
            if let Some(parent) = self.dir.parent() {
                return parent.join(hook.name());
            }
        }
        self.dir.join(hook.name())
    }

    /// `path` as the user sees it: relative to the top when inside the work tree.
    pub fn show(&self, path: &Path) -> String {
        path.strip_prefix(&self.top)
            .ok()
            .filter(|r| !r.as_os_str().is_empty())
            .map_or_else(|| path.display().to_string(), |r| r.display().to_string())
    }

    /// One line saying which directory git uses, and why.
    pub fn describe(&self) -> String {
        let why = if self.in_tree {
            "core.hooksPath, inside the work tree: evctl adds one line to the project's hook files"
        } else if self.hooks_path {
            "core.hooksPath"
        } else {
            "git's default"
        };
        format!("hooks directory: {} ({why})", self.dir.display())
    }
}
