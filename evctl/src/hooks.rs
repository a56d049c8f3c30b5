//! `evctl hooks install | uninstall | status`: evctl's git hooks, put where git really looks for
//! hooks, beside whatever is already there.
//!
//! Where: the directory `git rev-parse --git-path hooks` names, which follows `core.hooksPath`,
//! linked worktrees (they share the main repository's hooks) and submodules.
//!
//! Two ways in, by what that directory is:
//!
//! - **A hooks directory of its own** (`.git/hooks`, or a `core.hooksPath` outside the work
//!   tree): evctl writes a small POSIX `sh` script per hook, recognised later by its marker line.
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

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::render::Out;
use crate::session::Session;

/// The environment variable that makes every evctl hook step aside.
pub const SKIP_VAR: &str = "EVCTL_NO_HOOKS";

/// The marker line of evctl's own hook scripts (their second line starts with it).
pub const SCRIPT_MARK: &str = "# evctl-hooks: ";

/// The marker comment ending the line evctl adds to a project's hook file.
pub const LINE_MARK: &str = "# evctl-hooks line";

/// The suffix a foreign hook is moved aside to while evctl's hook chains it.
pub const CHAINED_SUFFIX: &str = ".evctl-chained";

/// What a hook file evctl creates inside the work tree starts with.
const CREATED_HEAD: &str = "#!/bin/sh\n";

/// Files larger than this are never read to look for a marker (they are not evctl's).
const MAX_HOOK_BYTES: u64 = 1 << 20;

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
    fn git_verb(self) -> &'static str {
        match self {
            Hook::PreCommit => "commit",
            Hook::PrePush => "push",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pure: script text, the one line, markers

/// `s` as one single-quoted `sh` word.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The global flags that point evctl at the store the hook gates: `--store <dir>` relative to
/// the work tree's top (where git runs hooks), or nothing when the store is found from there.
fn store_flag(store: Option<&str>) -> String {
    store.map_or(String::new(), |s| format!("--store {} ", sh_quote(s)))
}

/// The whole script evctl writes as `hook` into a hooks directory of its own. `chained`: a
/// foreign hook was moved aside to `<hook>.evctl-chained` and runs first. `evctl`: the absolute
/// path of the evctl that installed it, tried when `evctl` is not on `PATH`. `store`: the store's
/// directory relative to the work tree's top, when it is not found by walking up from there.
pub fn script(hook: Hook, chained: bool, evctl: Option<&str>, store: Option<&str>) -> String {
    let name = hook.name();
    let mut s = String::new();
    s.push_str("#!/bin/sh\n");
    s.push_str(&format!(
        "{SCRIPT_MARK}the {name} gate of `evctl hooks install`; `evctl hooks uninstall` removes it.\n"
    ));
    s.push_str(match hook {
        Hook::PreCommit => "# It names the recorded decisions whose checks guard what this commit changes, and\n# blocks the commit exactly when `evctl check --exit-on-red` would fail.\n",
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
    let run = format!("\"$evctl\" {}hook {name} \"$@\"", store_flag(store));
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

/// What the line evctl added to a project's hook file remembers about the file before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineFlags {
    /// evctl created the file (uninstall deletes it when nothing else was added since).
    pub created: bool,
    /// The file did not end with a newline; evctl added one before its line.
    pub newline_added: bool,
}

/// The one line evctl adds to a project's hook file (without its newline).
pub fn tree_line(hook: Hook, store: Option<&str>, flags: LineFlags) -> String {
    let name = hook.name();
    let mut mark = LINE_MARK.to_string();
    if flags.created {
        mark.push_str(", file created");
    }
    if flags.newline_added {
        mark.push_str(", newline added");
    }
    format!(
        "if command -v evctl >/dev/null 2>&1; then evctl {}hook {name} \"$@\" || exit $?; else echo \"evctl-hooks: evctl is not on PATH: the {name} gate was skipped\" >&2; fi  {mark} (evctl hooks uninstall removes it)",
        store_flag(store)
    )
}

/// evctl's line in `text`, if any: its byte range (newline included) and its flags.
pub fn find_line(text: &str) -> Option<(std::ops::Range<usize>, LineFlags)> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if let Some(i) = line.find(LINE_MARK) {
            let rest = &line[i + LINE_MARK.len()..];
            let flags_text = rest.split(" (").next().unwrap_or("");
            let flags = LineFlags {
                created: flags_text.contains("file created"),
                newline_added: flags_text.contains("newline added"),
            };
            return Some((at..at + line.len(), flags));
        }
        at += line.len();
    }
    None
}

/// Whether `line` ends the script before anything after it could run.
fn ends_script(line: &str) -> bool {
    let t = line.trim_start();
    let word = |w: &str| {
        t.strip_prefix(w)
            .is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t', ';']))
    };
    word("exit") || word("exec")
}

/// `text` with evctl's `hook` line added: after everything the file runs (so the project's own
/// commands run first, and a pre-push's input reaches them first), or just before a final
/// `exit`/`exec` that would keep it from running. Returns the new text; `text` must not hold the
/// line yet.
pub fn add_line(text: &str, hook: Hook, store: Option<&str>) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let last = lines.iter().rposition(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#')
    });
    if let Some(i) = last.filter(|&i| ends_script(lines[i])) {
        let mut out: String = lines[..i].concat();
        out.push_str(&tree_line(hook, store, LineFlags::default()));
        out.push('\n');
        out.push_str(&lines[i..].concat());
        return out;
    }
    let mut out = text.to_string();
    let flags = LineFlags {
        created: false,
        newline_added: !text.is_empty() && !text.ends_with('\n'),
    };
    if flags.newline_added {
        out.push('\n');
    }
    out.push_str(&tree_line(hook, store, flags));
    out.push('\n');
    out
}

/// The file evctl creates in the work tree when the project has no `hook` file yet.
pub fn created_file(hook: Hook, store: Option<&str>) -> String {
    let flags = LineFlags {
        created: true,
        newline_added: false,
    };
    format!("{CREATED_HEAD}{}\n", tree_line(hook, store, flags))
}

/// `text` with evctl's line brought up to date (same place, same flags); `None` when it already
/// is, or holds no line.
pub fn refresh_line(text: &str, hook: Hook, store: Option<&str>) -> Option<String> {
    let (range, flags) = find_line(text)?;
    let want = format!("{}\n", tree_line(hook, store, flags));
    let have = &text[range.clone()];
    if have == want || have.trim_end_matches('\n') == want.trim_end_matches('\n') {
        return None;
    }
    let mut out = text[..range.start].to_string();
    out.push_str(&want);
    out.push_str(&text[range.end..]);
    Some(out)
}

/// What removing evctl's line leaves.
#[derive(Debug, PartialEq, Eq)]
pub enum Removed {
    /// The file's text without the line, as it was before evctl added it.
    Text(String),
    /// evctl created the file and nothing else was added since: delete it.
    Delete,
}

/// `text` without evctl's line; `None` when it holds none.
pub fn remove_line(text: &str) -> Option<Removed> {
    let (range, flags) = find_line(text)?;
    let mut out = text[..range.start].to_string();
    out.push_str(&text[range.end..]);
    if flags.created && (out.is_empty() || out == CREATED_HEAD) {
        return Some(Removed::Delete);
    }
    if flags.newline_added && range.end == text.len() && out.ends_with('\n') {
        out.pop();
    }
    Some(Removed::Text(out))
}

// ---------------------------------------------------------------------------------------------
// Where git runs hooks

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

// ---------------------------------------------------------------------------------------------
// What is there now

/// A hook file as found (never read through a symlink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Missing,
    /// A regular file's text, and its permission bits.
    Text(String, u32),
    /// A symlink, and where it points.
    Symlink(String),
    /// Something evctl does not edit: a directory, a binary, a huge file, an unreadable one.
    Other(String),
}

/// Look at `path` without following a symlink there.
pub fn look(path: &Path) -> Found {
    let m = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Found::Missing,
        Err(e) => return Found::Other(format!("cannot be examined: {e}")),
    };
    if m.file_type().is_symlink() {
        let to = fs::read_link(path)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        return Found::Symlink(to);
    }
    if !m.is_file() {
        return Found::Other(format!("is {}", evd::api::shared::fsio::kind_of(&m)));
    }
    if m.len() > MAX_HOOK_BYTES {
        return Found::Other("is too large to be a script evctl wrote".into());
    }
    match evd::api::shared::fsio::read_text(path) {
        Ok(t) => Found::Text(t, m.permissions().mode() & 0o7777),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Found::Other("is not text".into()),
        Err(e) => Found::Other(format!("cannot be read: {e}")),
    }
}

/// The path a foreign `hook` is moved aside to.
pub fn chained_path(dir: &Path, hook: Hook) -> PathBuf {
    dir.join(format!("{}{CHAINED_SUFFIX}", hook.name()))
}

/// Whether two paths are the same file (a hard link left by an interrupted install).
fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::symlink_metadata(a), fs::symlink_metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Plans

/// One change to the filesystem, or a reason not to make one.
#[derive(Debug, Clone)]
pub enum Step {
    /// Nothing to do; the message says why.
    Keep { hook: Hook, message: String },
    /// Write `text` to `path` (a crash-safe replace) with exactly `mode`.
    Write {
        hook: Hook,
        path: PathBuf,
        text: String,
        mode: u32,
        message: String,
    },
    /// Give the foreign hook at `from` the name `to` (a hard link, then `from` is replaced by the
    /// next step's write; a rename where hard links are not supported).
    MoveAside {
        hook: Hook,
        from: PathBuf,
        to: PathBuf,
        message: String,
    },
    /// Rename `from` over `to` (the chained hook back into place).
    Restore {
        hook: Hook,
        from: PathBuf,
        to: PathBuf,
        message: String,
    },
    /// Delete evctl's file at `path`.
    Remove {
        hook: Hook,
        path: PathBuf,
        message: String,
    },
    /// Not done: `message` says why and what to do by hand.
    Refuse { hook: Hook, message: String },
}

impl Step {
    pub fn hook(&self) -> Hook {
        match self {
            Step::Keep { hook, .. }
            | Step::Write { hook, .. }
            | Step::MoveAside { hook, .. }
            | Step::Restore { hook, .. }
            | Step::Remove { hook, .. }
            | Step::Refuse { hook, .. } => *hook,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Step::Keep { message, .. }
            | Step::Write { message, .. }
            | Step::MoveAside { message, .. }
            | Step::Restore { message, .. }
            | Step::Remove { message, .. }
            | Step::Refuse { message, .. } => message,
        }
    }

    /// Whether this step changes the filesystem.
    pub fn changes(&self) -> bool {
        !matches!(self, Step::Keep { .. } | Step::Refuse { .. })
    }

    /// Whether this step could not be done.
    pub fn refused(&self) -> bool {
        matches!(self, Step::Refuse { .. })
    }

    fn slug(&self) -> &'static str {
        match self {
            Step::Keep { .. } => "keep",
            Step::Write { .. } => "write",
            Step::MoveAside { .. } => "move-aside",
            Step::Restore { .. } => "restore",
            Step::Remove { .. } => "remove",
            Step::Refuse { .. } => "refused",
        }
    }
}

/// What an installed hook needs to know besides the layout.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// The absolute path of this evctl (the fallback when `evctl` is not on `PATH`).
    pub evctl: Option<String>,
    /// The store's directory relative to the work tree's top (`None`: found from the top).
    pub store: Option<String>,
}

/// What installing `hook` takes, given what is there now.
pub fn plan_install(layout: &Layout, hook: Hook, t: &Target) -> Vec<Step> {
    let path = layout.file(hook);
    let shown = layout.show(&path);
    if layout.in_tree {
        return plan_line_install(hook, &path, &shown, t.store.as_deref());
    }
    let name = hook.name();
    let aside = chained_path(&layout.dir, hook);
    let aside_found = look(&aside);
    let aside_there = aside_found != Found::Missing;
    let write = |chained: bool, message: String| Step::Write {
        hook,
        path: path.clone(),
        text: script(hook, chained, t.evctl.as_deref(), t.store.as_deref()),
        mode: 0o755,
        message,
    };
    match look(&path) {
        Found::Missing if aside_there => vec![write(
            true,
            format!("{name}: installed evctl's hook in {shown}, chaining the {name}{CHAINED_SUFFIX} left beside it (it runs first)"),
        )],
        Found::Missing => vec![write(false, format!("{name}: installed evctl's hook in {shown}"))],
        Found::Text(text, _) if is_ours(&text) => {
            let want = script(hook, aside_there, t.evctl.as_deref(), t.store.as_deref());
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

fn plan_line_install(hook: Hook, path: &Path, shown: &str, store: Option<&str>) -> Vec<Step> {
    let name = hook.name();
    match look(path) {
        Found::Missing => vec![Step::Write {
            hook,
            path: path.to_path_buf(),
            text: created_file(hook, store),
            mode: 0o755,
            message: format!("{name}: created {shown} holding evctl's one line"),
        }],
        Found::Text(text, mode) => match (find_line(&text), refresh_line(&text, hook, store)) {
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
                text: add_line(&text, hook, store),
                mode,
                message: format!("{name}: added evctl's line to {shown}"),
            }],
        },
        Found::Symlink(to) => vec![Step::Refuse {
            hook,
            message: format!(
                "{name}: {shown} is a symlink to {to}; evctl does not edit through links. Add this line to the file it names by hand:\n    {}",
                tree_line(hook, store, LineFlags::default())
            ),
        }],
        Found::Other(why) => vec![Step::Refuse {
            hook,
            message: format!(
                "{name}: {shown} {why}; evctl leaves it alone. Add this line to it by hand:\n    {}",
                tree_line(hook, store, LineFlags::default())
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
    match look(&path) {
        Found::Text(text, _) if is_ours(&text) => {
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

/// Carry out `steps` in order, stopping at the first failure (every step before it stays done,
/// and each is whole: crash-safe writes and renames only).
pub fn apply(steps: &[Step]) -> Result<(), String> {
    for s in steps {
        match s {
            Step::Keep { .. } | Step::Refuse { .. } => {}
            Step::Write {
                path, text, mode, ..
            } => {
                let dir = path
                    .parent()
                    .ok_or_else(|| format!("{} has no directory", path.display()))?;
                fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
                evd::api::shared::fsio::replace_atomically_mode(
                    dir,
                    path,
                    text.as_bytes(),
                    Some(*mode),
                )
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            }
            Step::MoveAside { from, to, .. } => {
                if !same_file(from, to) {
                    // A second name first: the hook stays in place until evctl's replaces it.
                    if fs::hard_link(from, to).is_err() {
                        fs::rename(from, to).map_err(|e| {
                            format!("moving {} to {}: {e}", from.display(), to.display())
                        })?;
                    }
                }
            }
            Step::Restore { from, to, .. } => {
                fs::rename(from, to).map_err(|e| {
                    format!("moving {} back to {}: {e}", from.display(), to.display())
                })?;
                if let Some(d) = to.parent() {
                    let _ = evd::api::shared::fsio::sync_dir(d);
                }
            }
            Step::Remove { path, .. } => {
                fs::remove_file(path).map_err(|e| format!("removing {}: {e}", path.display()))?;
                if let Some(d) = path.parent() {
                    let _ = evd::api::shared::fsio::sync_dir(d);
                }
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Status

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
                let want = script(hook, chains(&text), evctl.as_deref(), store.as_deref());
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

// ---------------------------------------------------------------------------------------------
// The verbs

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
    let here = match Here::of(s) {
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
            for h in hooks {
                let plan = if install {
                    plan_install(&here.layout, h, &here.target)
                } else {
                    plan_uninstall(&here.layout, h)
                };
                steps.extend(plan);
            }
            let applied = apply(&steps);
            if json {
                let mut v = serde_json::json!({
                    "layout": here.layout,
                    "store": here.target.store,
                    "store_found": here.store_found,
                    "steps": steps_json(&steps),
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
        let bare = script(Hook::PrePush, false, None, None);
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
        let s = script(Hook::PrePush, true, None, None);
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
        let pc = script(Hook::PreCommit, true, None, None);
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
                    let text = script(hook, chained, evctl, store);
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

    #[test]
    fn the_line_goes_last_and_comes_out_leaving_identical_bytes() {
        for original in [
            "npx lint-staged\n",
            "#!/usr/bin/env sh\n. \"$(dirname -- \"$0\")/_/husky.sh\"\n\nnpm test\n",
            "npm test",
            "",
            "#!/bin/sh\nnpm test\n\n# trailing comment\n",
        ] {
            let with = add_line(original, Hook::PreCommit, None);
            assert!(find_line(&with).is_some(), "{with:?}");
            assert!(
                with.trim_end()
                    .ends_with("(evctl hooks uninstall removes it)"),
                "{with:?}"
            );
            assert_eq!(
                remove_line(&with),
                Some(Removed::Text(original.to_string())),
                "{original:?}"
            );
            assert_eq!(refresh_line(&with, Hook::PreCommit, None), None);
        }
    }

    #[test]
    fn the_line_goes_before_a_final_exit_or_exec() {
        let original = "#!/bin/sh\nnpm test\nexec git lfs pre-push \"$@\"\n";
        let with = add_line(original, Hook::PrePush, None);
        let lines: Vec<&str> = with.lines().collect();
        assert!(lines[2].contains("evctl hook pre-push"), "{with}");
        assert_eq!(lines[3], "exec git lfs pre-push \"$@\"");
        assert_eq!(remove_line(&with), Some(Removed::Text(original.into())));
        let exit = add_line("run\nexit 0\n", Hook::PreCommit, None);
        assert!(exit.ends_with("exit 0\n"), "{exit}");
        // A word that merely starts with "exit" is no exit.
        let not = add_line("exited_already\n", Hook::PreCommit, None);
        assert!(not.starts_with("exited_already\n"), "{not}");
    }

    #[test]
    fn a_created_file_is_deleted_only_while_nothing_else_was_added() {
        let created = created_file(Hook::PreCommit, Some("sub"));
        assert!(created.contains("evctl --store 'sub' hook pre-commit"));
        assert_eq!(remove_line(&created), Some(Removed::Delete));
        let edited = format!("{created}npm test\n");
        assert_eq!(
            remove_line(&edited),
            Some(Removed::Text("#!/bin/sh\nnpm test\n".into()))
        );
    }

    #[test]
    fn refreshing_keeps_the_place_and_the_flags() {
        let with = add_line("npm test", Hook::PreCommit, None);
        let moved = refresh_line(&with, Hook::PreCommit, Some("sub")).expect("changed");
        assert!(moved.contains("--store 'sub'"));
        assert!(moved.contains("newline added"));
        assert_eq!(remove_line(&moved), Some(Removed::Text("npm test".into())));
        assert_eq!(remove_line("npm test\n"), None);
    }

    #[test]
    fn the_hooks_named_or_the_default() {
        let w = |pc, pp, all| Which {
            pre_commit: pc,
            pre_push: pp,
            all,
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
