//! What installing or uninstalling one hook takes, given what is there now: in a hooks directory
//! of its own, evctl's script (a foreign hook moved aside and chained, put back on uninstall);
//! in one inside the work tree, evctl's one line in the project's hook file (added, refreshed,
//! removed).
//!
//! It plans only: it must not change the filesystem (`steps.rs` carries a plan out) nor print.

use std::path::Path;

use super::direct;
use super::found::{chained_path, look, same_file, Found};
use super::hook::{Hook, CHAINED_SUFFIX};
use super::layout::Layout;
use super::line::{
    add_line, created_file, find_line, refresh_line, remove_line, tree_line, LineFlags, Removed,
};
use super::script::{is_ours, script};
use super::steps::Step;

/// What an installed hook needs to know besides the layout.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// The absolute path of this evctl (the fallback when `evctl` is not on `PATH`).
    pub evctl: Option<String>,
    /// The store's directory relative to the work tree's top (`None`: found from the top).
    pub store: Option<String>,
    /// The pre-commit gate is store-wide (`evctl hooks install --strict`).
    pub strict: bool,
    /// The `evctl` on `PATH` when it is this very evctl: what the direct form links to.
    pub direct: Option<String>,
}

/// What installing `hook` takes, given what is there now.
pub fn plan_install(layout: &Layout, hook: Hook, t: &Target) -> Vec<Step> {
    let path = layout.file(hook);
    let shown = layout.show(&path);
    if layout.in_tree {
        return plan_line_install(hook, &path, &shown, t.store.as_deref(), t.strict);
    }
    let name = hook.name();
    let aside = chained_path(&layout.dir, hook);
    let aside_found = look(&aside);
    let aside_there = aside_found != Found::Missing;
    // The direct form (a link to evctl, no shell) when nothing needs the script.
    let link_to = t
        .direct
        .as_deref()
        .filter(|_| direct::applies(hook, t.strict, t.store.as_deref(), aside_there));
    let link = |to: &str, message: String| Step::Link {
        hook,
        path: path.clone(),
        to: to.to_string(),
        message,
    };
    let write = |chained: bool, message: String| Step::Write {
        hook,
        path: path.clone(),
        text: script(
            hook,
            chained,
            t.evctl.as_deref(),
            t.store.as_deref(),
            t.strict,
        ),
        mode: 0o755,
        message,
    };
    let found = look(&path);
    let our_link = match &found {
        Found::Symlink(to) if direct::is_our_link(to) => Some(to.as_str()),
        _ => None,
    };
    let our_script = matches!(&found, Found::Text(text, _) if is_ours(text));
    match (link_to, our_link) {
        (Some(to), Some(now)) if now == to => {
            return vec![Step::Keep {
                hook,
                message: format!("{name}: already installed in {shown}, unchanged"),
            }]
        }
        (Some(to), now) if now.is_some() || our_script => {
            return vec![link(
                to,
                format!(
                    "{name}: evctl's hook in {shown} brought up to date: {}",
                    linked(to)
                ),
            )]
        }
        (Some(to), None) if found == Found::Missing => {
            return vec![link(
                to,
                format!("{name}: installed evctl's hook in {shown}: {}", linked(to)),
            )]
        }
        // The direct form no longer fits (strict, a store below the top, evctl elsewhere).
        (None, Some(_)) => {
            return vec![write(
                aside_there,
                format!("{name}: evctl's hook in {shown} brought up to date"),
            )]
        }
        _ => {}
    }
    match found {
        Found::Missing if aside_there => vec![write(
            true,
            format!("{name}: installed evctl's hook in {shown}, chaining the {name}{CHAINED_SUFFIX} left beside it (it runs first)"),
        )],
        Found::Missing => vec![write(false, format!("{name}: installed evctl's hook in {shown}"))],
        Found::Text(text, _) if is_ours(&text) => {
            let want = script(
                hook,
                aside_there,
                t.evctl.as_deref(),
                t.store.as_deref(),
                t.strict,
            );
            if text == want {
                vec![Step::Keep {
                    hook,
                    message: format!("{name}: already installed in {shown}, unchanged"),
                }]
            } else {
                vec![write(
                    aside_there,
                    format!("{name}: evctl's hook in {shown} brought up to date"),
                )]
            }
        }
        found => {
            let what = match &found {
                Found::Symlink(to) => format!("a symlink to {to}"),
                Found::Other(why) => {
                    return vec![Step::Refuse {
                        hook,
                        message: format!(
                            "{name}: {shown} {why}; evctl leaves it alone (move it away and install again)"
                        ),
                    }]
                }
                _ => "a hook that is not evctl's".to_string(),
            };
            if aside_there && !same_file(&path, &aside) {
                return vec![Step::Refuse {
                    hook,
                    message: format!(
                        "{name}: {shown} is {what}, and {} already exists; evctl overwrites neither (merge them by hand, then install again)",
                        layout.show(&aside)
                    ),
                }];
            }
            let link_note = if matches!(found, Found::Symlink(_)) {
                " (the link itself, its target untouched)"
            } else {
                ""
            };
            vec![
                Step::MoveAside {
                    hook,
                    from: path.clone(),
                    to: aside.clone(),
                    message: format!(
                        "{name}: {shown} was {what}: moved aside to {name}{CHAINED_SUFFIX}{link_note}"
                    ),
                },
                write(
                    true,
                    format!("{name}: installed evctl's hook; it runs the moved hook first, with the same arguments and input, and stops with its exit code when it fails"),
                ),
            ]
        }
    }
}

/// How an install message describes the direct form.
fn linked(to: &str) -> String {
    format!("a link to {to}, which git runs directly (no shell)")
}

fn plan_line_install(
    hook: Hook,
    path: &Path,
    shown: &str,
    store: Option<&str>,
    strict: bool,
) -> Vec<Step> {
    let name = hook.name();
    match look(path) {
        Found::Missing => vec![Step::Write {
            hook,
            path: path.to_path_buf(),
            text: created_file(hook, store, strict),
            mode: 0o755,
            message: format!("{name}: created {shown} holding evctl's one line"),
        }],
        Found::Text(text, mode) => match (find_line(&text), refresh_line(&text, hook, store, strict)) {
            (Some(_), None) => vec![Step::Keep {
                hook,
                message: format!("{name}: evctl's line is already in {shown}, unchanged"),
            }],
            (Some(_), Some(new)) => vec![Step::Write {
                hook,
                path: path.to_path_buf(),
                text: new,
                mode,
                message: format!("{name}: evctl's line in {shown} brought up to date"),
            }],
            (None, _) => vec![Step::Write {
                hook,
                path: path.to_path_buf(),
                text: add_line(&text, hook, store, strict),
                mode,
                message: format!("{name}: added evctl's line to {shown}"),
            }],
        },
        Found::Symlink(to) => vec![Step::Refuse {
            hook,
            message: format!(
                "{name}: {shown} is a symlink to {to}; evctl does not edit through links. Add this line to the file it names by hand:\n    {}",
                tree_line(hook, store, strict, LineFlags::default())
            ),
        }],
        Found::Other(why) => vec![Step::Refuse {
            hook,
            message: format!(
                "{name}: {shown} {why}; evctl leaves it alone. Add this line to it by hand:\n    {}",
                tree_line(hook, store, strict, LineFlags::default())
            ),
        }],
    }
}

/// What removing evctl's `hook` takes.
pub fn plan_uninstall(layout: &Layout, hook: Hook) -> Vec<Step> {
    let name = hook.name();
    let path = layout.file(hook);
    let shown = layout.show(&path);
    if layout.in_tree {
        return match look(&path) {
            Found::Text(text, mode) => match remove_line(&text) {
                Some(Removed::Text(t)) => vec![Step::Write {
                    hook,
                    path,
                    text: t,
                    mode,
                    message: format!("{name}: removed evctl's line from {shown}"),
                }],
                Some(Removed::Delete) => vec![Step::Remove {
                    hook,
                    path,
                    message: format!("{name}: removed {shown} (evctl had created it)"),
                }],
                None => vec![Step::Keep {
                    hook,
                    message: format!("{name}: no evctl line in {shown}; nothing to remove"),
                }],
            },
            _ => vec![Step::Keep {
                hook,
                message: format!("{name}: no evctl line in {shown}; nothing to remove"),
            }],
        };
    }
    let aside = chained_path(&layout.dir, hook);
    let aside_there = look(&aside) != Found::Missing;
    let restore = |message: String| Step::Restore {
        hook,
        from: aside.clone(),
        to: path.clone(),
        message,
    };
    let found = look(&path);
    let ours = match &found {
        Found::Text(text, _) => is_ours(text),
        Found::Symlink(to) => direct::is_our_link(to),
        _ => false,
    };
    match found {
        _ if ours => {
            if aside_there {
                vec![restore(format!(
                    "{name}: removed evctl's hook and put back the hook it chained, as it was"
                ))]
            } else {
                vec![Step::Remove {
                    hook,
                    path,
                    message: format!("{name}: removed evctl's hook from {shown}"),
                }]
            }
        }
        Found::Missing if aside_there => vec![restore(format!(
            "{name}: put {name}{CHAINED_SUFFIX} back in place (an install or uninstall was interrupted)"
        ))],
        Found::Missing => vec![Step::Keep {
            hook,
            message: format!("{name}: not installed"),
        }],
        _ if aside_there && same_file(&path, &aside) => vec![Step::Remove {
            hook,
            path: aside,
            message: format!(
                "{name}: removed the second name {name}{CHAINED_SUFFIX} an interrupted install left (the hook itself stays)"
            ),
        }],
        _ => vec![Step::Keep {
            hook,
            message: format!("{name}: {shown} is not evctl's; left alone"),
        }],
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;
    use crate::hooks::script::chains;
    use crate::hooks::status::state_of;
    use crate::hooks::steps::apply;

    /// A hooks directory of its own, without git: the plan and its application.
    fn layout(dir: &Path) -> Layout {
        Layout {
            dir: dir.join("hooks"),
            top: dir.to_path_buf(),
            common_dir: dir.join(".git"),
            hooks_path: false,
            in_tree: false,
        }
    }

    #[test]
    fn install_chains_a_foreign_hook_and_uninstall_puts_it_back_exactly() {
        let d = tempfile::tempdir().expect("tempdir");
        let l = layout(d.path());
        fs::create_dir_all(&l.dir).expect("mkdir");
        let hook = l.dir.join("pre-commit");
        fs::write(&hook, "#!/bin/sh\nexit 3\n").expect("write");
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o741)).expect("chmod");
        let ino = fs::metadata(&hook).expect("stat").ino();
        let t = Target::default();
        let steps = plan_install(&l, Hook::PreCommit, &t);
        assert!(matches!(steps[0], Step::MoveAside { .. }), "{steps:?}");
        apply(&steps).expect("install");
        let ours = fs::read_to_string(&hook).expect("read");
        assert!(is_ours(&ours) && chains(&ours));
        assert_eq!(
            fs::metadata(&hook).expect("stat").permissions().mode() & 0o777,
            0o755
        );
        // Twice is once.
        let again = plan_install(&l, Hook::PreCommit, &t);
        assert!(matches!(again[..], [Step::Keep { .. }]), "{again:?}");
        assert_eq!(state_of(&l, Hook::PreCommit).state, "ours-chaining");
        apply(&plan_uninstall(&l, Hook::PreCommit)).expect("uninstall");
        assert_eq!(fs::read(&hook).expect("read"), b"#!/bin/sh\nexit 3\n");
        let m = fs::metadata(&hook).expect("stat");
        assert_eq!((m.ino(), m.permissions().mode() & 0o7777), (ino, 0o741));
        assert!(!chained_path(&l.dir, Hook::PreCommit).exists());
        assert_eq!(state_of(&l, Hook::PreCommit).state, "foreign");
    }

    #[test]
    fn the_plain_gate_links_to_evctl_and_a_foreign_hook_still_takes_the_script() {
        let d = tempfile::tempdir().expect("tempdir");
        let l = layout(d.path());
        let hook = l.dir.join("pre-commit");
        let evctl = d.path().join("bin/evctl");
        fs::create_dir_all(evctl.parent().expect("dir")).expect("mkdir");
        fs::write(&evctl, "#!/bin/sh\n").expect("write");
        let t = Target {
            direct: evctl.to_str().map(str::to_string),
            ..Target::default()
        };
        let steps = plan_install(&l, Hook::PreCommit, &t);
        assert!(matches!(steps[..], [Step::Link { .. }]), "{steps:?}");
        apply(&steps).expect("install");
        assert_eq!(fs::read_link(&hook).expect("link"), evctl);
        assert_eq!(state_of(&l, Hook::PreCommit).state, "ours");
        let again = plan_install(&l, Hook::PreCommit, &t);
        assert!(matches!(again[..], [Step::Keep { .. }]), "{again:?}");
        // pre-push, --strict, a store below the top: the script.
        for (hook_kind, t2) in [
            (Hook::PrePush, t.clone()),
            (
                Hook::PreCommit,
                Target {
                    strict: true,
                    ..t.clone()
                },
            ),
            (
                Hook::PreCommit,
                Target {
                    store: Some("sub".into()),
                    ..t.clone()
                },
            ),
        ] {
            let steps = plan_install(&l, hook_kind, &t2);
            assert!(matches!(steps[..], [Step::Write { .. }]), "{steps:?}");
        }
        // The link goes away whole on uninstall, its target untouched.
        apply(&plan_uninstall(&l, Hook::PreCommit)).expect("uninstall");
        assert!(fs::symlink_metadata(&hook).is_err());
        assert!(evctl.is_file());
        // A foreign hook is chained by the script, never replaced by a link.
        fs::write(&hook, "#!/bin/sh\nexit 0\n").expect("write");
        let steps = plan_install(&l, Hook::PreCommit, &t);
        assert!(
            matches!(steps[..], [Step::MoveAside { .. }, Step::Write { .. }]),
            "{steps:?}"
        );
        apply(&steps).expect("install");
        assert!(chains(&fs::read_to_string(&hook).expect("script")));
        // A link to an evctl that is gone is evctl's, outdated.
        apply(&plan_uninstall(&l, Hook::PreCommit)).expect("uninstall");
        fs::remove_file(&hook).expect("rm");
        std::os::unix::fs::symlink(d.path().join("gone/evctl"), &hook).expect("symlink");
        assert_eq!(state_of(&l, Hook::PreCommit).state, "ours-outdated");
        let steps = plan_install(&l, Hook::PreCommit, &t);
        assert!(matches!(steps[..], [Step::Link { .. }]), "{steps:?}");
    }

    #[test]
    fn an_interrupted_install_is_finished_not_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let l = layout(d.path());
        fs::create_dir_all(&l.dir).expect("mkdir");
        let hook = l.dir.join("pre-commit");
        fs::write(&hook, "#!/bin/sh\ntrue\n").expect("write");
        // The hard link was made, the write never happened.
        fs::hard_link(&hook, chained_path(&l.dir, Hook::PreCommit)).expect("link");
        let steps = plan_install(&l, Hook::PreCommit, &Target::default());
        apply(&steps).expect("install");
        assert!(is_ours(&fs::read_to_string(&hook).expect("read")));
        // A different file under the chained name is never overwritten.
        let d2 = tempfile::tempdir().expect("tempdir");
        let l2 = layout(d2.path());
        fs::create_dir_all(&l2.dir).expect("mkdir");
        fs::write(l2.dir.join("pre-commit"), "a\n").expect("write");
        fs::write(chained_path(&l2.dir, Hook::PreCommit), "b\n").expect("write");
        let steps = plan_install(&l2, Hook::PreCommit, &Target::default());
        assert!(matches!(steps[..], [Step::Refuse { .. }]), "{steps:?}");
    }

    #[test]
    fn a_symlinked_hook_is_moved_as_a_link() {
        let d = tempfile::tempdir().expect("tempdir");
        let l = layout(d.path());
        fs::create_dir_all(&l.dir).expect("mkdir");
        let target = d.path().join("real-hook");
        fs::write(&target, "#!/bin/sh\ntrue\n").expect("write");
        let hook = l.dir.join("pre-push");
        std::os::unix::fs::symlink(&target, &hook).expect("symlink");
        let steps = plan_install(&l, Hook::PrePush, &Target::default());
        assert!(steps[0].message().contains("the link itself"), "{steps:?}");
        apply(&steps).expect("install");
        assert_eq!(
            fs::read(&target).expect("read"),
            b"#!/bin/sh\ntrue\n",
            "target untouched"
        );
        assert!(fs::symlink_metadata(chained_path(&l.dir, Hook::PrePush))
            .expect("stat")
            .file_type()
            .is_symlink());
        apply(&plan_uninstall(&l, Hook::PrePush)).expect("uninstall");
        assert_eq!(fs::read_link(&hook).expect("link"), target);
    }

    #[test]
    fn husky_layout_edits_the_project_file_above_the_wrappers() {
        let d = tempfile::tempdir().expect("tempdir");
        let l = Layout {
            dir: d.path().join(".husky/_"),
            top: d.path().to_path_buf(),
            common_dir: d.path().join(".git"),
            hooks_path: true,
            in_tree: true,
        };
        assert_eq!(l.file(Hook::PreCommit), d.path().join(".husky/pre-commit"));
        fs::create_dir_all(d.path().join(".husky/_")).expect("mkdir");
        let user = d.path().join(".husky/pre-commit");
        fs::write(&user, "npm test\n").expect("write");
        fs::set_permissions(&user, fs::Permissions::from_mode(0o644)).expect("chmod");
        let t = Target::default();
        apply(&plan_install(&l, Hook::PreCommit, &t)).expect("install");
        assert_eq!(state_of(&l, Hook::PreCommit).state, "line-present");
        assert_eq!(
            fs::metadata(&user).expect("stat").permissions().mode() & 0o777,
            0o644
        );
        apply(&plan_uninstall(&l, Hook::PreCommit)).expect("uninstall");
        assert_eq!(fs::read(&user).expect("read"), b"npm test\n");
        // No project pre-push: created, then removed again.
        apply(&plan_install(&l, Hook::PrePush, &t)).expect("install");
        assert!(d.path().join(".husky/pre-push").exists());
        apply(&plan_uninstall(&l, Hook::PrePush)).expect("uninstall");
        assert!(!d.path().join(".husky/pre-push").exists());
    }
}
