//! `evctl setup [--dry-run] [TARGET]`: make a git work tree ready for evctl in one go — the store
//! (with `staleness_ref = "local-head"`), an agent skill, a session-start brief for a coding
//! agent, and the pre-commit gate through `evctl hooks install` (so `core.hooksPath`, husky and
//! an existing hook are handled as they are there).
//!
//! It follows upstream ev 0.1.31's `ev setup` where that makes sense: the same three numbered
//! steps, the same places for the agent files, idempotence, an existing `.claude/settings.json`
//! never edited (the snippet to add is printed instead), exit 1 anywhere but the top of a git work
//! tree, a differing skill backed up before it is replaced. Every change is planned first, so
//! `--dry-run` prints exactly what a real run would do and writes nothing; a real run ends with
//! what it did and what is left to do by hand.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::grammar::Globals;
use crate::hooks::{self, Hook, Layout, Step, Target};
use crate::render::Out;
use crate::session::{local_write, Session};

/// Where the agent skill goes, under the target.
pub const SKILL_PATH: &str = ".claude/skills/ev/SKILL.md";
/// Where the session-start hook goes, under the target.
pub const SESSION_HOOK_PATH: &str = ".claude/hooks/ev-brief-sessionstart.sh";
/// The agent's settings file, under the target.
pub const SETTINGS_PATH: &str = ".claude/settings.json";

/// The marker of the files setup writes (and may rewrite).
const MARK: &str = "evctl-setup:";

#[derive(clap::Args, Debug)]
pub struct SetupArgs {
    /// Print every change it would make, and make none.
    #[arg(long)]
    pub dry_run: bool,
    /// The directory to set up (default: the working directory): the top of a git work tree.
    pub target: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Pure: the texts setup writes

/// `text` with the first `key = …` line (the one the config reader honours) set to
/// `key = value`, every other byte kept; appended at the end when no line has that key.
pub fn set_config(text: &str, key: &str, value: &str) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut done = false;
    for line in text.split_inclusive('\n') {
        let is_key = line.split_once('=').is_some_and(|(k, _)| k.trim() == key);
        if !done && is_key {
            out.push_str(&format!("{key} = {value}"));
            if line.ends_with('\n') {
                out.push('\n');
            }
            done = true;
        } else {
            out.push_str(line);
        }
    }
    if !done {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("{key} = {value}\n"));
    }
    out
}

/// The agent skill: how a coding agent works with this repository's decisions through evctl.
pub fn skill_text() -> String {
    format!(
        r#"---
name: decision-memory-with-evctl
description: Work with this repository's recorded decisions through evctl. Read the brief before a task, check which decisions guard a file before changing it, propose (never ratify) the decisions you reach, and bind tests to the claims they rest on.
---
<!-- {MARK} written by `evctl setup`, which rewrites this file when its text changes; keep your own notes in another file. -->

# Decision memory with evctl

This repository records its decisions in `.evolving/`. Each decision carries its grounds: the
reasons it was taken, the roads not taken and why, and for some grounds a test (with a
counter-test that would flip if the claim broke) that keeps the claim honest. `evctl` reads
and writes that store; it is a ledger, append-only, so nothing you record is ever lost or
silently changed.

## Before you start

Read the brief: `evctl brief` (the session-start hook may already have printed it). It lists
the decisions a human ruled on, the ones with rejected roads first.

- A rejected road is a hard no. Do not bring back an option the brief says was rejected, not
  even under another name, unless the user asks you to.
- A user-ruled decision is settled. If what you find contradicts it, stop and tell the user
  what you found; do not work around it.
- A ruling marked `advisory` has no test watching it: nothing will stop a change that breaks
  it, so heed it all the more. Binding a test to one of its grounds makes it bound.
- `evctl reopen <id>` shows one decision in full, with what each of its checks reads now.

## Before you change a file

`evctl guards <path>…` names the decisions whose checks watch that file, with their current
verdict. Changing a guarded file makes that check stale until it runs again: say so in your
summary, and run the check (`evctl check --run`) when you can.

## When you reach a decision

Record it as a proposal; a human ratifies it or not.

    evctl propose "use one connection pool per worker" \
        --observe "p99 latency doubled under load" \
        --assume "workers never share a connection" \
        --reject "a global pool: contention showed up in the profile"

- `--assume` gives a reason for the choice; `--reject "<option>: <why>"` a road not taken.
- Set `EV_AGENT_ID` to name yourself; the proposal's blame is that name.
- `--source-ref <key>` ties it to a ticket; proposing the same key again is a no-op.
- `evctl pending` lists the proposals awaiting a human. Never run `evctl ratify` yourself:
  ratifying is a human's signature.

## Binding a test to a claim

A ground's claim earns a check when a test passes while it holds and a counter-test fails
when it breaks. `evctl guard` binds one to the newest decision (HEAD of the store):

    evctl guard "cargo test pool_per_worker" <head-id> "workers never share a connection" \
        --counter-test "cargo test pool_shared_breaks" \
        --on-platform linux-ci --triggered-by src/pool.rs --surface pooling

The counter-test is a negative control: it must fail on the tree as it is now, where the claim
holds, to show the test can flip at all. One that passes agrees with the test and proves
nothing; the binding then reads `unproven`, never green.

`--triggered-by` names the files whose change makes the last run stale; `evctl why
"<selector>"` shows what a test guards.

## Verdicts

`evctl check` prints one verdict per bound test: green; red, gray->red, not-run, stale,
unproven and silently-unbound ask for attention and gate `evctl check --exit-on-red`; exempt
and memo never gate. `evctl check --run` runs the tests here first and records the results.

The pre-commit hook blocks a commit exactly when `evctl check --exit-on-red` would fail. Fix
the check, or ask the user; skip it (`git commit --no-verify`, or `EVCTL_NO_HOOKS=1`) only when
the user says so.

## Quick reference

| to | run |
| --- | --- |
| read what is settled | `evctl brief` |
| list current decisions | `evctl list` |
| see one decision | `evctl reopen <id>` |
| who guards a file | `evctl guards <path>` |
| propose a decision | `evctl propose "<decision>" --assume "<why>" --reject "<option>: <why>"` |
| proposals awaiting a human | `evctl pending` |
| bind a test | `evctl guard "<test>" <head-id> "<claim>" --counter-test "<test>" --on-platform <p> --triggered-by <path> --surface <s>` |
| verdicts | `evctl check` (`--run` to run the tests first) |

Every command takes `--json` for a machine-readable answer.
"#
    )
}

/// The session-start hook: the brief, prefaced by what it is for; silent when there is nothing
/// to say. `evctl`: the absolute path of the evctl that wrote it, tried when none is on PATH.
pub fn session_hook_text(evctl: Option<&str>) -> String {
    let fallback = evctl.map_or(String::new(), |p| {
        format!("    evctl={}\n", hooks::sh_quote(p))
    });
    format!(
        r#"#!/bin/sh
# {MARK} the session-start brief of `evctl setup`, which rewrites this file when its text changes.
# A coding agent's session starts from the decisions this repository has settled. It says
# nothing when there is no store, no evctl, or nothing to brief.
cd "$(dirname "$0")/../.." || exit 0
[ -e .evolving ] || exit 0
evctl=evctl
if ! command -v evctl >/dev/null 2>&1; then
{fallback}    [ -x "$evctl" ] || exit 0
fi
brief=$("$evctl" --plain brief 2>/dev/null) || exit 0
case "$brief" in ''|'no user-ruled decisions') exit 0 ;; esac
echo "Settled decisions of this repository (evctl brief). Work within them: a rejected road"
echo "is not to be taken again, and a user-ruled decision is reopened only by the user."
echo
printf '%s\n' "$brief"
"#
    )
}

/// The command the agent's settings run at session start: the hook by its path from the
/// project directory, which the agent exports as `CLAUDE_PROJECT_DIR` to its hooks, so the
/// settings file means the same in every clone once committed.
pub fn session_command() -> String {
    format!("sh \"$CLAUDE_PROJECT_DIR/{SESSION_HOOK_PATH}\"")
}

/// The command an earlier evctl wired: the hook by its absolute path (still counts as wired).
fn absolute_session_command(hook: &Path) -> String {
    format!("sh \"{}\"", hook.display())
}

/// A fresh settings file wiring `command` as a SessionStart hook (keys sorted, 2-space
/// indent, a final newline).
pub fn settings_text(command: &str) -> String {
    let v = serde_json::json!({
        "hooks": {"SessionStart": [{"hooks": [{"command": command, "type": "command"}]}]}
    });
    format!("{}\n", proto::json::pretty(&v))
}

/// The entry to add under `"hooks"` → `"SessionStart"` of an existing settings file.
pub fn settings_entry(command: &str) -> String {
    proto::json::compact(&serde_json::json!({"hooks": [{"command": command, "type": "command"}]}))
}

/// Whether settings text already runs `command` at session start.
pub fn settings_wired(text: &str, command: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    v.pointer("/hooks/SessionStart")
        .and_then(Value::as_array)
        .is_some_and(|entries| {
            entries.iter().any(|e| {
                e.get("hooks").and_then(Value::as_array).is_some_and(|hs| {
                    hs.iter()
                        .any(|h| h.get("command").and_then(Value::as_str) == Some(command))
                })
            })
        })
}

/// A path not taken yet: `base`, else `base.2`, `base.3`, …
fn free_name(base: &Path) -> PathBuf {
    let mut n = 1;
    let mut p = base.to_path_buf();
    while fs::symlink_metadata(&p).is_ok() {
        n += 1;
        p = PathBuf::from(format!("{}.{n}", base.display()));
    }
    p
}

// ---------------------------------------------------------------------------------------------
// The run

/// What a run did, said, and leaves to the user.
#[derive(Debug, Default, Serialize)]
struct Report {
    target: String,
    dry_run: bool,
    lines: Vec<String>,
    done: Vec<String>,
    todo: Vec<String>,
}

impl Report {
    fn say(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    /// Record something done (or, in a dry run, that a real run would do).
    fn did(&mut self, what: &str, object: &str) {
        let (done, todo) = what.split_once('|').unwrap_or((what, what));
        self.done.push(format!(
            "{} {object}",
            if self.dry_run { todo } else { done }
        ));
    }
}

/// A file setup owns: written when missing; when it differs, moved aside to a backup then
/// written (`backup`: whoever wrote it, an older evctl or a hand), else rewritten when it is
/// setup's own and left alone when it is someone else's.
fn own_file(
    r: &mut Report,
    path: &Path,
    text: &str,
    mode: u32,
    backup: bool,
    what: &str,
) -> io::Result<bool> {
    let dry = r.dry_run;
    let existing = match hooks::look(path) {
        hooks::Found::Missing => None,
        hooks::Found::Text(t, _) => Some(Some(t)),
        _ => Some(None),
    };
    match existing {
        Some(Some(t)) if t == text => {
            r.say(format!("   ✓ {what}: already up to date"));
            return Ok(false);
        }
        Some(_) if backup => {
            let bak = free_name(&PathBuf::from(format!("{}.bak", path.display())));
            if dry {
                r.say(format!(
                    "   [dry-run] move the existing file (it differs from evctl's) to {}",
                    bak.display()
                ));
            } else {
                fs::rename(path, &bak)?;
                r.say(format!(
                    "   (the existing file differed from evctl's: moved to {})",
                    bak.display()
                ));
                r.todo.push(format!(
                    "compare {} with evctl's {what}, and keep what you need from it",
                    bak.display()
                ));
            }
        }
        Some(Some(t)) if t.contains(MARK) => {}
        Some(_) => {
            r.say(format!(
                "   {} exists and is not evctl's — kept",
                path.display()
            ));
            r.todo.push(format!(
                "{} is not evctl's {what}: remove it and run `evctl setup` again to get evctl's",
                path.display()
            ));
            return Ok(false);
        }
        None => {}
    }
    if dry {
        r.say(format!("   [dry-run] write {}", path.display()));
        return Ok(true);
    }
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other(format!("{} has no directory", path.display())))?;
    fs::create_dir_all(dir)?;
    evd::api::shared::fsio::replace_atomically_mode(dir, path, text.as_bytes(), Some(mode))?;
    r.say(format!("   ✓ {what}: written"));
    Ok(true)
}

/// Step 1: the store, co-located with the code.
async fn store_step(r: &mut Report, target: &Path, json: bool) -> Result<(), String> {
    r.say("1. store (co-located)");
    let ev = target.join(".evolving");
    if fs::symlink_metadata(&ev).is_ok() {
        let policy = evd::api::shared::config::Config::parse(
            evd::api::shared::fsio::read_text(&ev.join("config"))
                .ok()
                .as_deref(),
        )
        .staleness_ref;
        r.say(format!(
            "   .evolving/ present — kept (config untouched: staleness_ref = \"{policy}\")"
        ));
        if policy != "local-head" {
            r.todo.push(
                "optional: set staleness_ref = \"local-head\" in .evolving/config, so checks read stale against your own commits rather than the upstream's".into(),
            );
        }
        return Ok(());
    }
    if r.dry_run {
        r.say("   [dry-run] evctl init + staleness_ref=local-head");
        r.done
            .push("create the store (staleness_ref = local-head)".into());
        return Ok(());
    }
    let g = Globals {
        store: Some(target.display().to_string()),
        json,
        ..Globals::default()
    };
    let mut s = Session::new(&g);
    let ctx = s.context(false, crate::context::Needs::default());
    let req = proto::rpc::StoreRequest {
        context: ctx.clone(),
    };
    s.write(crate::rpc!(req, init), || local_write(&ctx, evd::api::init))
        .await
        .map_err(|e| e.message)?;
    let config = ev.join("config");
    let text = evd::api::shared::fsio::read_text(&config)
        .map_err(|e| format!("{}: {e}", config.display()))?;
    let tuned = set_config(&text, "staleness_ref", "\"local-head\"");
    let tmp = ev.join("results").join("tmp");
    evd::api::shared::fsio::ensure_dir(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    evd::api::shared::fsio::replace_atomically(&tmp, &config, tuned.as_bytes())
        .map_err(|e| format!("{}: {e}", config.display()))?;
    r.say("   ✓ evctl init + staleness_ref=local-head");
    r.done
        .push("created the store (staleness_ref = local-head)".into());
    Ok(())
}

/// Whether git ignores the store's per-host cache (`results/`).
fn results_ignored(target: &Path) -> bool {
    evd::api::shared::child::output(
        std::process::Command::new("git")
            .arg("-C")
            .arg(target)
            .args(["check-ignore", "-q", ".evolving/results/receipts/x"]),
        evd::api::shared::child::git_timeout(),
    )
    .is_ok_and(|o| o.status.success())
}

/// The dry-run line for one hook step.
fn dry_line(layout: &Layout, s: &Step) -> Option<String> {
    let show = |p: &Path| layout.show(p);
    Some(match s {
        Step::Keep { message, .. } => format!("   {message}"),
        Step::Refuse { .. } => return None,
        Step::Write { path, mode, .. } => {
            format!("   [dry-run] write {} (mode {mode:o})", show(path))
        }
        Step::Link { path, to, .. } => {
            format!(
                "   [dry-run] link {} to {to} (git runs evctl directly)",
                show(path)
            )
        }
        Step::MoveAside { from, to, .. } => format!(
            "   [dry-run] move the existing {} aside to {} (it keeps running, first)",
            show(from),
            show(to)
        ),
        Step::Restore { from, to, .. } => {
            format!("   [dry-run] move {} back to {}", show(from), show(to))
        }
        Step::Remove { path, .. } => format!("   [dry-run] remove {}", show(path)),
    })
}

pub async fn run(s: &mut Session, a: SetupArgs) -> Out {
    let json = s.json;
    let given = a.target.clone();
    let raw = match &given {
        Some(t) => s.cwd.join(t),
        None => s.cwd.clone(),
    };
    let shown = given.clone().unwrap_or_else(|| s.cwd.display().to_string());
    // Upstream's wording, naming evctl: a line of its own, not an `error: …`.
    let not_a_tree = || {
        let message =
            format!("evctl setup: '{shown}' is not a git working tree — co-location needs one.");
        if json {
            return crate::render::refusal(
                &proto::rpc::Refusal::refused("not_a_work_tree", message),
                json,
            );
        }
        let mut out = Out {
            code: 1,
            ..Out::default()
        };
        out.err(message);
        out
    };
    // The top of a work tree, as upstream has it: TARGET/.git, a directory or a file (a linked
    // work tree, a submodule). A subdirectory of a work tree is refused: the store, the agent's
    // files and the hooks belong together at the top.
    if !raw.join(".git").exists() {
        return not_a_tree();
    }
    let layout = match Layout::discover(&raw) {
        Ok(l) => l,
        Err(_) => return not_a_tree(),
    };
    let target = match fs::canonicalize(&raw) {
        Ok(t) => t,
        Err(e) => {
            let message = format!("evctl setup: {shown}: {e}");
            if json {
                return crate::render::refusal(&proto::rpc::Refusal::io(message), json);
            }
            let mut out = Out {
                code: 1,
                ..Out::default()
            };
            out.err(message);
            return out;
        }
    };
    let mut r = Report {
        target: target.display().to_string(),
        dry_run: a.dry_run,
        ..Report::default()
    };
    r.say(format!("evctl setup → {}", target.display()));
    let outcome = steps(&mut r, &target, &layout, json).await;
    let mut out = Out::default();
    if let Err(e) = &outcome {
        out.code = 1;
        r.todo
            .push(format!("fix this and run `evctl setup` again: {e}"));
    }
    if json {
        let mut v = serde_json::to_value(&r).unwrap_or(Value::Null);
        if let Err(e) = &outcome {
            v["error"] = Value::String(e.clone());
        }
        out.json(&v);
        return out;
    }
    for l in &r.lines {
        out.line(l);
    }
    if let Err(e) = &outcome {
        out.err(format!("evctl setup: {e}"));
    }
    out.line("");
    if r.dry_run {
        out.line("(dry-run) — no changes made.");
        if r.done.is_empty() {
            out.line("a real run would change nothing: everything is in place");
        } else {
            out.line(format!("a real run would: {}", r.done.join("; ")));
        }
    } else if r.done.is_empty() {
        out.line("done: nothing to change — everything was already in place");
    } else {
        out.line(format!("done: {}", r.done.join("; ")));
    }
    if r.todo.is_empty() {
        out.line("still to do by hand: nothing");
    } else {
        out.line("still to do by hand:");
        for t in &r.todo {
            out.line(format!("  - {t}"));
        }
    }
    out
}

async fn steps(r: &mut Report, target: &Path, layout: &Layout, json: bool) -> Result<(), String> {
    store_step(r, target, json).await?;
    let io = |e: io::Error| e.to_string();
    let evctl = std::env::current_exe()
        .ok()
        .and_then(|p| p.to_str().map(str::to_string));

    r.say(format!("2. agent skill → {SKILL_PATH}"));
    if own_file(
        r,
        &target.join(SKILL_PATH),
        &skill_text(),
        0o644,
        true,
        "agent skill",
    )
    .map_err(io)?
    {
        r.did("wrote|write", &format!("the agent skill ({SKILL_PATH})"));
    }

    r.say("3. hooks");
    let hook = target.join(SESSION_HOOK_PATH);
    let hook_text = session_hook_text(evctl.as_deref());
    if own_file(r, &hook, &hook_text, 0o755, false, "session-start brief").map_err(io)? {
        r.did(
            "wrote|write",
            &format!("the session-start brief ({SESSION_HOOK_PATH})"),
        );
    }
    let command = session_command();
    let settings = target.join(SETTINGS_PATH);
    match hooks::look(&settings) {
        hooks::Found::Missing if r.dry_run => {
            r.say(format!(
                "   [dry-run] write {} with a SessionStart hook",
                settings.display()
            ));
            r.did("wired|wire", &format!("the brief in {SETTINGS_PATH}"));
        }
        hooks::Found::Missing => {
            let dir = settings
                .parent()
                .ok_or_else(|| format!("{} has no directory", settings.display()))?;
            fs::create_dir_all(dir).map_err(io)?;
            evd::api::shared::fsio::replace_atomically_mode(
                dir,
                &settings,
                settings_text(&command).as_bytes(),
                Some(0o644),
            )
            .map_err(io)?;
            r.say(format!("   ✓ session-start brief wired ({SETTINGS_PATH})"));
            r.did("wired|wire", &format!("the brief in {SETTINGS_PATH}"));
        }
        hooks::Found::Text(t, _)
            if settings_wired(&t, &command)
                || settings_wired(&t, &absolute_session_command(&hook)) =>
        {
            r.say(format!(
                "   ✓ {SETTINGS_PATH} already runs the session-start brief"
            ));
        }
        _ => {
            r.say(format!(
                "   {SETTINGS_PATH} exists — evctl never edits it. Add this SessionStart entry by hand:"
            ));
            r.say(format!("     {}", settings_entry(&command)));
            r.todo.push(format!(
                "add the SessionStart entry printed above to {SETTINGS_PATH} (under \"hooks\" → \"SessionStart\"), so a new agent session starts with the brief"
            ));
        }
    }

    // The pre-commit gate, through `evctl hooks install`.
    let store_rel = target
        .strip_prefix(&layout.top)
        .ok()
        .and_then(Path::to_str)
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    let t = Target {
        evctl,
        store: store_rel,
        // A gate installed with `evctl hooks install --strict` stays strict.
        strict: matches!(
            hooks::look(&layout.file(Hook::PreCommit)),
            hooks::Found::Text(text, _) if hooks::is_strict(&text)
        ),
        direct: hooks::self_on_path(),
    };
    let plan = hooks::plan_install(layout, Hook::PreCommit, &t);
    r.say(format!("   {}", layout.describe()));
    for st in &plan {
        if let Step::Refuse { message, .. } = st {
            r.say(format!("   {message}"));
            r.todo.push(format!(
                "install the pre-commit gate: {}",
                message.lines().next().unwrap_or(message)
            ));
        } else if r.dry_run {
            if let Some(l) = dry_line(layout, st) {
                r.say(l);
            }
        } else if st.changes() {
            r.say(format!("   ✓ {}", st.message()));
        } else {
            r.say(format!("   {}", st.message()));
        }
    }
    if plan.iter().any(Step::changes) {
        if !r.dry_run {
            hooks::apply(&plan)?;
        }
        r.did("installed|install", "the pre-commit gate");
    }
    // git's merge driver for .evolving/HEAD: merges of branches that both decided never stop.
    if r.dry_run {
        r.say("   [dry-run] register the merge driver for .evolving/HEAD");
    } else {
        let fallback = t
            .evctl
            .as_deref()
            .map_or_else(|| "evctl".to_string(), hooks::sh_quote);
        for line in crate::merge_driver::install(&layout.top, t.store.as_deref(), &fallback)? {
            r.say(format!("   ✓ {line}"));
        }
    }
    // Receipts other hosts publish (CI's) come with every `git fetch` of each remote.
    let remotes: Vec<String> = crate::context::git(&layout.top, &["remote"])
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default();
    for remote in &remotes {
        if r.dry_run {
            r.say(format!(
                "   [dry-run] make `git fetch {remote}` bring its published receipts"
            ));
        } else if crate::team::setup_remote(&layout.top, remote)? {
            r.say(format!(
                "   ✓ `git fetch {remote}` now brings its published receipts (evctl remote setup)"
            ));
        }
    }
    if remotes.is_empty() {
        r.todo.push(
            "once the repository has a remote: `evctl remote setup`, so that `git fetch` brings the receipts CI publishes (docs/team.md)"
                .into(),
        );
    }
    if !results_ignored(target) {
        r.todo.push(
            "keep .evolving/results/ (a per-machine cache) out of git: add `.evolving/results/` to .gitignore"
                .into(),
        );
    }
    r.todo.push(
        "optional: `evctl hooks install --pre-push` gates pushes on the decisions guarding what they change"
            .into(),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_keeps_every_other_byte() {
        let tuned = set_config(
            evd::api::shared::config::DEFAULT_CONFIG,
            "staleness_ref",
            "\"local-head\"",
        );
        assert_eq!(
            tuned,
            evd::api::shared::config::DEFAULT_CONFIG.replace("\"live-origin\"", "\"local-head\"")
        );
        assert_eq!(
            evd::api::shared::config::Config::parse(Some(&tuned)).staleness_ref,
            "local-head"
        );
        // Only the first matching line (the one the reader honours) changes.
        let two = "a = 1\nstaleness_ref=\"none\"\nstaleness_ref = \"x\"";
        assert_eq!(
            set_config(two, "staleness_ref", "\"local-head\""),
            "a = 1\nstaleness_ref = \"local-head\"\nstaleness_ref = \"x\""
        );
        assert_eq!(
            set_config("a = 1", "staleness_ref", "\"local-head\""),
            "a = 1\nstaleness_ref = \"local-head\"\n"
        );
    }

    #[test]
    fn settings_are_wired_once_and_recognised() {
        let cmd = session_command();
        assert_eq!(
            cmd,
            "sh \"$CLAUDE_PROJECT_DIR/.claude/hooks/ev-brief-sessionstart.sh\""
        );
        let text = settings_text(&cmd);
        assert!(text.ends_with("}\n"));
        assert!(settings_wired(&text, &cmd));
        assert!(!settings_wired("{\"hooks\": {}}", &cmd));
        assert!(!settings_wired("not json", &cmd));
        let entry: Value = serde_json::from_str(&settings_entry(&cmd)).expect("json");
        assert_eq!(entry["hooks"][0]["command"], cmd);
    }

    #[test]
    fn the_agent_files_are_marked_and_say_what_they_must() {
        let skill = skill_text();
        assert!(skill.starts_with("---\nname: "));
        assert!(skill.contains(MARK));
        for needle in [
            "evctl brief",
            "evctl propose",
            "evctl guard ",
            "evctl check",
        ] {
            assert!(skill.contains(needle), "{needle}");
        }
        let hook = session_hook_text(Some("/opt/evctl"));
        assert!(hook.starts_with("#!/bin/sh\n"));
        assert!(hook.contains(MARK));
        assert!(hook.contains("evctl='/opt/evctl'"));
        assert!(hook.contains("brief"));
    }
}
