//! One hook's state as `evctl hooks status` reports it: not installed, evctl's (chaining,
//! outdated), foreign, evctl's line present or not, or an interrupted install.
//!
//! It only looks: it must not change anything on disk nor print.

use serde::Serialize;

use super::direct::is_our_link;
use super::found::{chained_path, look, Found};
use super::hook::{Hook, CHAINED_SUFFIX};
use super::layout::Layout;
use super::line::find_line;
use super::script::{chains, is_ours, is_strict, script, script_params};

/// One hook's state, as `status` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct HookState {
    pub hook: Hook,
    pub path: String,
    /// `not-installed`, `ours`, `ours-chaining`, `ours-outdated`, `foreign`, `line-present`,
    /// `no-line`, `interrupted`.
    pub state: &'static str,
    pub detail: String,
}

pub fn state_of(layout: &Layout, hook: Hook) -> HookState {
    let name = hook.name();
    let path = layout.file(hook);
    let shown = layout.show(&path);
    let (state, detail) = if layout.in_tree {
        match look(&path) {
            Found::Text(text, _) if find_line(&text).is_some() => (
                "line-present",
                format!("evctl's line is present in {shown}"),
            ),
            Found::Missing => ("no-line", format!("no evctl line ({shown} does not exist)")),
            _ => ("no-line", format!("no evctl line in {shown}")),
        }
    } else {
        let aside = chained_path(&layout.dir, hook);
        let aside_there = look(&aside) != Found::Missing;
        match look(&path) {
            Found::Text(text, _) if is_ours(&text) => {
                let (evctl, store) = script_params(&text);
                let want = script(
                    hook,
                    chains(&text),
                    evctl.as_deref(),
                    store.as_deref(),
                    is_strict(&text),
                );
                let shown = match &store {
                    Some(s) => format!("{shown}, gating the store in {s}"),
                    None => shown,
                };
                if text != want {
                    (
                        "ours-outdated",
                        format!("evctl's ({shown}), written by another version of evctl: `evctl hooks install` brings it up to date"),
                    )
                } else if chains(&text) {
                    let chained = match look(&aside) {
                        Found::Symlink(to) => format!("{name}{CHAINED_SUFFIX} (a symlink to {to})"),
                        Found::Missing => format!("{name}{CHAINED_SUFFIX}, which is missing"),
                        _ => format!("{name}{CHAINED_SUFFIX}"),
                    };
                    (
                        "ours-chaining",
                        format!("evctl's ({shown}), chaining {chained}, which runs first"),
                    )
                } else {
                    ("ours", format!("evctl's ({shown})"))
                }
            }
            Found::Symlink(to) if is_our_link(&to) => {
                if std::fs::metadata(&path).is_err() {
                    (
                        "ours-outdated",
                        format!("evctl's ({shown}), a link to {to}, which is missing: git skips the hook without a word; `evctl hooks install` links it again"),
                    )
                } else if aside_there {
                    (
                        "ours-outdated",
                        format!("evctl's ({shown}), a link to {to}, but {name}{CHAINED_SUFFIX} is there and does not run: `evctl hooks install` chains it"),
                    )
                } else {
                    (
                        "ours",
                        format!("evctl's ({shown}, a link to {to}: git runs evctl directly)"),
                    )
                }
            }
            Found::Missing if aside_there => (
                "interrupted",
                format!("not installed, but {name}{CHAINED_SUFFIX} is there (an interrupted install or uninstall: run either again)"),
            ),
            Found::Missing => ("not-installed", "not installed".to_string()),
            Found::Symlink(to) => (
                "foreign",
                format!("not evctl's: a symlink to {to} (install would move the link aside and chain it)"),
            ),
            Found::Other(why) => ("foreign", format!("not evctl's: {shown} {why}")),
            Found::Text(..) => (
                "foreign",
                format!("not evctl's ({shown}; install would move it aside and chain it)"),
            ),
        }
    };
    HookState {
        hook,
        path: path.display().to_string(),
        state,
        detail,
    }
}
