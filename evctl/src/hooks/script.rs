//! The text of evctl's own hook script, written into a hooks directory of its own: `sh` quoting,
//! the script (chaining a moved-aside hook first when there is one, finding evctl, passing
//! `--store`), and reading back what a script was written with.
//!
//! Pure text: it must not touch the filesystem or run git. The line added to a project's hook
//! file is `line.rs`'s.

use super::hook::{Hook, CHAINED_SUFFIX, SCRIPT_MARK, SKIP_VAR};

/// `s` as one single-quoted `sh` word.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The global flags that point evctl at the store the hook gates: `--store <dir>` relative to
/// the work tree's top (where git runs hooks), or nothing when the store is found from there.
pub(super) fn store_flag(store: Option<&str>) -> String {
    store.map_or(String::new(), |s| format!("--store {} ", sh_quote(s)))
}

/// What a hook runs, up to the hook's name: the store's flags, `hook`, and `--strict` for a
/// pre-commit gate installed with `evctl hooks install --strict` (store-wide: blocked whenever
/// `evctl check --exit-on-red` would fail).
pub(super) fn invocation(hook: Hook, store: Option<&str>, strict: bool) -> String {
    let strict = if strict && hook == Hook::PreCommit {
        "--strict "
    } else {
        ""
    };
    format!("{}hook {strict}", store_flag(store))
}

/// The whole script evctl writes as `hook` into a hooks directory of its own. `chained`: a
/// foreign hook was moved aside to `<hook>.evctl-chained` and runs first. `evctl`: the absolute
/// path of the evctl that installed it, tried when `evctl` is not on `PATH`. `store`: the store's
/// directory relative to the work tree's top, when it is not found by walking up from there.
pub fn script(
    hook: Hook,
    chained: bool,
    evctl: Option<&str>,
    store: Option<&str>,
    strict: bool,
) -> String {
    let name = hook.name();
    let mut s = String::new();
    s.push_str("#!/bin/sh\n");
    s.push_str(&format!(
        "{SCRIPT_MARK}the {name} gate of `evctl hooks install`; `evctl hooks uninstall` removes it.\n"
    ));
    s.push_str(match hook {
        Hook::PreCommit if strict => "# It names the recorded decisions whose checks guard what this commit changes, and\n# blocks the commit exactly when `evctl check --exit-on-red` would fail (--strict).\n",
        Hook::PreCommit => "# It names the recorded decisions whose checks guard what this commit changes, and\n# blocks the commit on a failing test, or on a gating verdict of a decision guarding it.\n",
        Hook::PrePush => "# It names the recorded decisions whose checks guard what this push changes, and blocks\n# the push when one of them has a gating verdict.\n",
    });
    s.push_str(&format!(
        "# Skip it once with `git {} --no-verify`, or set {SKIP_VAR}=1.\n",
        hook.git_verb()
    ));
    let chain = format!("\"${{0%/*}}/{name}{CHAINED_SUFFIX}\"");
    let stdin_twice = chained && hook == Hook::PrePush;
    if stdin_twice {
        s.push_str("# git's list of pushed refs on stdin must reach both hooks: read it once.\n");
        s.push_str("evctl_input=$(cat)\n");
        s.push_str(
            "evctl_feed() { [ -z \"$evctl_input\" ] || printf '%s\\n' \"$evctl_input\"; }\n",
        );
    }
    if chained {
        s.push_str(&format!(
            "# The {name} hook that was here before evctl's runs first; its failure stops here.\n"
        ));
        s.push_str(&format!("if [ -x {chain} ]; then\n"));
        if stdin_twice {
            s.push_str(&format!("    evctl_feed | {chain} \"$@\" || exit $?\n"));
        } else {
            s.push_str(&format!("    {chain} \"$@\" || exit $?\n"));
        }
        s.push_str("fi\n");
    }
    s.push_str(&format!(
        "case \"${{{SKIP_VAR}:-}}\" in ''|0) ;; *) exit 0 ;; esac\n"
    ));
    s.push_str("evctl=evctl\n");
    s.push_str("if ! command -v evctl >/dev/null 2>&1; then\n");
    match evctl {
        Some(abs) => {
            s.push_str(&format!("    evctl={}\n", sh_quote(abs)));
            s.push_str("    if [ ! -x \"$evctl\" ]; then\n");
            s.push_str(&format!(
                "        printf '%s\\n' \"evctl-hooks: evctl is not on PATH (nor at $evctl): the {name} gate was skipped\" >&2\n"
            ));
            s.push_str("        exit 0\n");
            s.push_str("    fi\n");
        }
        None => {
            s.push_str(&format!(
                "    echo \"evctl-hooks: evctl is not on PATH: the {name} gate was skipped\" >&2\n"
            ));
            s.push_str("    exit 0\n");
        }
    }
    s.push_str("fi\n");
    let run = format!(
        "\"$evctl\" {}{name} \"$@\"",
        invocation(hook, store, strict)
    );
    if stdin_twice {
        s.push_str(&format!("evctl_feed | {run}\n"));
    } else {
        s.push_str(&format!("exec {run}\n"));
    }
    s
}

/// The first single-quoted `sh` word at the start of `s` (as [`sh_quote`] writes it), unquoted.
fn sh_unquote(s: &str) -> Option<String> {
    let mut rest = s.strip_prefix('\'')?;
    let mut out = String::new();
    loop {
        let end = rest.find('\'')?;
        out.push_str(&rest[..end]);
        rest = &rest[end + 1..];
        match rest.strip_prefix("\\''") {
            Some(more) => {
                out.push('\'');
                rest = more;
            }
            None => return Some(out),
        }
    }
}

/// Whether evctl's hook `text` (a script or a line) runs the store-wide gate (`--strict`).
pub fn is_strict(text: &str) -> bool {
    text.contains(" hook --strict ")
}

/// What evctl's script `text` was written with: the evctl it falls back to, and the store it
/// passes with `--store`.
pub fn script_params(text: &str) -> (Option<String>, Option<String>) {
    let evctl = text
        .lines()
        .find_map(|l| l.strip_prefix("    evctl="))
        .and_then(sh_unquote);
    let store = text
        .lines()
        .find_map(|l| l.split_once(" --store ").map(|(_, r)| r))
        .and_then(sh_unquote);
    (evctl, store)
}

/// Whether `text` is one of evctl's hook scripts.
pub fn is_ours(text: &str) -> bool {
    text.lines()
        .nth(1)
        .is_some_and(|l| l.starts_with(SCRIPT_MARK))
}

/// Whether evctl's script `text` chains a moved-aside hook.
pub fn chains(text: &str) -> bool {
    text.contains(CHAINED_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_every_quote() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn the_script_is_marked_and_calls_evctl_with_the_store() {
        let s = script(
            Hook::PreCommit,
            false,
            Some("/opt/ev ctl/evctl"),
            Some("sub dir"),
            false,
        );
        assert!(s.starts_with("#!/bin/sh\n# evctl-hooks: "), "{s}");
        assert!(is_ours(&s));
        assert!(!chains(&s));
        assert!(s.contains("evctl='/opt/ev ctl/evctl'\n"), "{s}");
        assert!(
            s.ends_with("exec \"$evctl\" --store 'sub dir' hook pre-commit \"$@\"\n"),
            "{s}"
        );
        assert!(s.contains("EVCTL_NO_HOOKS"), "{s}");
        assert!(s.contains("git commit --no-verify"), "{s}");
        let bare = script(Hook::PrePush, false, None, None, false);
        assert!(
            bare.ends_with("exec \"$evctl\" hook pre-push \"$@\"\n"),
            "{bare}"
        );
        assert!(
            !bare.contains("evctl_input"),
            "stdin is passed straight through"
        );
    }

    #[test]
    fn a_chaining_pre_push_reads_its_input_once_and_feeds_both() {
        let s = script(Hook::PrePush, true, None, None, false);
        assert!(chains(&s));
        let read = s.find("evctl_input=$(cat)").expect("reads stdin");
        let chained = s
            .find("evctl_feed | \"${0%/*}/pre-push.evctl-chained\" \"$@\" || exit $?")
            .expect("feeds the chained hook");
        let ours = s
            .find("evctl_feed | \"$evctl\" hook pre-push \"$@\"")
            .expect("feeds evctl");
        let skip = s.find("EVCTL_NO_HOOKS:-").expect("skip");
        assert!(read < chained && chained < skip && skip < ours, "{s}");
        let pc = script(Hook::PreCommit, true, None, None, false);
        assert!(pc.contains("    \"${0%/*}/pre-commit.evctl-chained\" \"$@\" || exit $?\n"));
        assert!(!pc.contains("evctl_input"));
    }

    #[test]
    fn a_script_tells_what_it_was_written_with() {
        for (evctl, store) in [
            (Some("/opt/it's/evctl"), Some("sub dir")),
            (None, None),
            (Some("/usr/bin/evctl"), None),
        ] {
            for hook in Hook::ALL {
                for chained in [false, true] {
                    let text = script(hook, chained, evctl, store, false);
                    assert_eq!(
                        script_params(&text),
                        (evctl.map(str::to_string), store.map(str::to_string)),
                        "{text}"
                    );
                }
            }
        }
        assert_eq!(sh_unquote("'a'\\''b' rest"), Some("a'b".into()));
        assert_eq!(sh_unquote("'open"), None);
    }

    #[test]
    fn a_foreign_script_is_not_ours() {
        assert!(!is_ours("#!/bin/sh\nnpm test\n"));
        assert!(!is_ours("#!/bin/sh\necho '# evctl-hooks: '\n"));
        assert!(!is_ours(""));
    }
}
