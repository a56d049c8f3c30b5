//! `evctl hooks install | uninstall | status`: the verb's flags, the context it works in (the
//! layout and the store the hooks gate), and its output, plain or `--json`.
//!
//! It must not hold the logic of a plan or of a script: it asks `install.rs` for the plan,
//! `steps.rs` to carry it out and `status.rs` for each hook's state, and prints.

use std::fs;
use std::path::Path;

use serde::Serialize;

use super::hook::{Hook, SKIP_VAR};
use super::install::{plan_install, plan_uninstall, Target};
use super::layout::Layout;
use super::status::{state_of, HookState};
use super::steps::{apply, Step};
use crate::render::Out;
use crate::session::Session;

/// Which hooks a command is about.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Which {
    /// The pre-commit gate (blocks a commit when `evctl check --exit-on-red` would fail).
    #[arg(long)]
    pub pre_commit: bool,
    /// The pre-push gate (blocks a push changing files a gating decision guards).
    #[arg(long)]
    pub pre_push: bool,
    /// Both.
    #[arg(long)]
    pub all: bool,
    /// (install) A store-wide pre-commit gate: block whenever `evctl check --exit-on-red`
    /// would fail, whatever the commit changes. Default: block on a failing test, or on a
    /// gating verdict of a decision guarding what the commit changes.
    #[arg(long)]
    pub strict: bool,
}

impl Which {
    /// The hooks named, or `default` when none is.
    pub fn hooks(self, default: &[Hook]) -> Vec<Hook> {
        if self.all {
            return Hook::ALL.to_vec();
        }
        let named: Vec<Hook> = [
            (self.pre_commit, Hook::PreCommit),
            (self.pre_push, Hook::PrePush),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, h)| *h)
        .collect();
        if named.is_empty() {
            default.to_vec()
        } else {
            named
        }
    }
}

/// `evctl hooks …`
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Install the gates (default: pre-commit). Safe to run again; an existing hook is chained.
    ///
    /// When the `evctl` on PATH is this one, the plain pre-commit gate is a link to it, which
    /// git starts with no shell in between; otherwise (and for --strict, a store below the top
    /// of the work tree, or a chained hook) it is a small sh script. Set EVCTL_NO_HOOKS=1 to
    /// skip the gates, EVCTL_GATE_WARN_ONLY=1 to have them say what they would block and let
    /// git go ahead.
    ///
    /// Examples:
    ///   evctl hooks install                 # the pre-commit gate
    ///   evctl hooks install --all           # pre-commit and pre-push
    ///   evctl hooks install --pre-push
    #[command(verbatim_doc_comment)]
    Install(Which),
    /// Remove evctl's hooks (default: all of them), putting back what was there before.
    Uninstall(Which),
    /// Say which hooks directory git uses and, per hook, whose hook is there.
    Status,
}

/// The context the hook verbs work in: the layout, and the store the hooks gate.
pub struct Here {
    pub layout: Layout,
    pub target: Target,
    /// Whether a store exists (the hooks stay silent until one does).
    pub store_found: bool,
}

impl Here {
    pub fn of(s: &Session) -> Result<Here, String> {
        let root = s.root(true);
        let here = if s.explicit_store.is_some() {
            root.clone()
        } else {
            s.cwd.clone()
        };
        Here::at(&here, &root)
    }

    /// The layout of the work tree around `here`, for the store at `root` (if there is one).
    pub fn at(here: &Path, root: &Path) -> Result<Here, String> {
        let layout = Layout::discover(here)?;
        let store_found = fs::symlink_metadata(root.join(".evolving")).is_ok();
        let mut target = Target {
            evctl: std::env::current_exe()
                .ok()
                .and_then(|p| p.to_str().map(str::to_string)),
            store: None,
            strict: false,
            direct: super::direct::self_on_path(),
        };
        if store_found {
            let root = fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
            if let Ok(rel) = root.strip_prefix(&layout.top) {
                if !rel.as_os_str().is_empty() {
                    target.store = Some(
                        rel.to_str()
                            .ok_or_else(|| format!("{} is not valid UTF-8", rel.display()))?
                            .to_string(),
                    );
                }
            } else if !layout.top.starts_with(&root) {
                return Err(format!(
                    "the store at {} is outside this work tree ({}): a hook there would never see its files change",
                    root.display(),
                    layout.top.display()
                ));
            }
        }
        Ok(Here {
            layout,
            target,
            store_found,
        })
    }

    /// A line saying which store the hooks gate (or that none exists yet).
    pub fn store_line(&self) -> String {
        match (&self.target.store, self.store_found) {
            (_, false) => format!(
                "store: none yet; the hooks stay quiet until `evctl init` (or `evctl setup`) creates one at {}",
                self.layout.top.display()
            ),
            (Some(rel), true) => format!("store: {rel}/.evolving (the hooks pass --store {rel})"),
            (None, true) => "store: found from the top of the work tree".to_string(),
        }
    }
}

#[derive(Serialize)]
struct StepJson<'a> {
    hook: Hook,
    action: &'static str,
    message: &'a str,
}

fn steps_json(steps: &[Step]) -> Vec<StepJson<'_>> {
    steps
        .iter()
        .map(|s| StepJson {
            hook: s.hook(),
            action: s.slug(),
            message: s.message(),
        })
        .collect()
}

fn refusal(message: String, json: bool) -> Out {
    crate::render::refusal(
        &proto::rpc::Refusal::refused("hooks", format!("evctl hooks: {message}")),
        json,
    )
}

/// Run one `evctl hooks …` action.
pub fn run(s: &Session, action: Action) -> Out {
    let json = s.json;
    let mut here = match Here::of(s) {
        Ok(h) => h,
        Err(e) => return refusal(e, json),
    };
    let mut out = Out::default();
    match action {
        Action::Status => {
            let states: Vec<HookState> = Hook::ALL
                .iter()
                .map(|&h| state_of(&here.layout, h))
                .collect();
            if json {
                out.json(&serde_json::json!({
                    "layout": here.layout,
                    "store": here.target.store,
                    "store_found": here.store_found,
                    "hooks": states,
                }));
            } else {
                out.line(here.layout.describe());
                if here.store_found {
                    out.line(here.store_line());
                }
                for st in &states {
                    out.line(format!("{}: {}", st.hook.name(), st.detail));
                }
            }
        }
        Action::Install(which) | Action::Uninstall(which) => {
            let install = matches!(action, Action::Install(_));
            let hooks = which.hooks(if install {
                &[Hook::PreCommit]
            } else {
                &Hook::ALL
            });
            let mut steps = Vec::new();
            here.target.strict = install && which.strict;
            for &h in &hooks {
                let plan = if install {
                    plan_install(&here.layout, h, &here.target)
                } else {
                    plan_uninstall(&here.layout, h)
                };
                steps.extend(plan);
            }
            let mut applied = apply(&steps);
            // git's merge driver for .evolving/HEAD goes and comes with the pre-commit gate.
            let mut driver = Vec::new();
            if applied.is_ok() && here.store_found && hooks.contains(&Hook::PreCommit) {
                let top = &here.layout.top;
                let store = here.target.store.as_deref();
                let done = if install {
                    let fallback = here
                        .target
                        .evctl
                        .as_deref()
                        .map_or_else(|| "evctl".to_string(), super::script::sh_quote);
                    crate::merge_driver::install(top, store, &fallback)
                } else {
                    crate::merge_driver::uninstall(top, store)
                };
                match done {
                    Ok(lines) => driver = lines,
                    Err(e) => applied = Err(e),
                }
            }
            if json {
                let mut v = serde_json::json!({
                    "layout": here.layout,
                    "store": here.target.store,
                    "store_found": here.store_found,
                    "steps": steps_json(&steps),
                    "merge_driver": driver,
                });
                if let Err(e) = &applied {
                    v["error"] = serde_json::Value::String(e.clone());
                }
                out.json(&v);
            } else {
                out.line(here.layout.describe());
                if install {
                    out.line(here.store_line());
                }
                for st in &steps {
                    if st.refused() {
                        out.err(st.message());
                    } else {
                        out.line(st.message());
                    }
                }
                for line in &driver {
                    out.line(line);
                }
                if install && applied.is_ok() && !steps.iter().all(Step::refused) {
                    out.line(format!(
                        "skip the gates once with `git commit --no-verify` / `git push --no-verify`, or {SKIP_VAR}=1"
                    ));
                }
                if let Err(e) = &applied {
                    out.err(format!("error: evctl hooks: {e}"));
                }
            }
            if applied.is_err() || steps.iter().any(Step::refused) {
                out.code = 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hooks_named_or_the_default() {
        let w = |pc, pp, all| Which {
            pre_commit: pc,
            pre_push: pp,
            all,
            strict: false,
        };
        assert_eq!(
            w(false, false, false).hooks(&[Hook::PreCommit]),
            vec![Hook::PreCommit]
        );
        assert_eq!(
            w(false, true, false).hooks(&[Hook::PreCommit]),
            vec![Hook::PrePush]
        );
        assert_eq!(w(false, false, true).hooks(&[]), Hook::ALL.to_vec());
        assert_eq!(w(false, false, false).hooks(&Hook::ALL), Hook::ALL.to_vec());
    }
}
