//! `evctl hook pre-commit | pre-push`: what the installed git hooks run.
//!
//! pre-commit: the paths this commit records (the index git hands the hook, read by evd itself
//! against HEAD's tree, so no git runs here; `git diff --cached` where evd cannot read that
//! index), the decisions guarding them (`ev.guards`, with check's own verdicts), and the
//! store's failing tests. It blocks on a failing test, or on a gating verdict of a decision
//! guarding a staged file; any other verdict asking for attention is named in one line.
//! `--strict` blocks exactly when `evctl check --exit-on-red` would fail. Every decision
//! guarding a staged file is named, so the author knows its check will read stale once the
//! commit lands.
//!
//! pre-push: the files the pushed commits change (from git's list of refs on stdin), blocked
//! when a decision guarding one of them has a gating verdict.
//!
//! A pre-commit gate against a daemon already running is asked before evctl reads its arguments
//! the usual way or starts its runtime ([`quick`]: one HTTP round trip); everything else, and
//! anything that way cannot do, goes the usual way ([`run`]) with the same prelude and the same
//! judgement.
//!
//! A hook never blocks because of evctl's own trouble: no store, git failing, a refusal, evd
//! unreachable (the same engine answers in-process) — each ends in exit 0, saying so in one line
//! at most. Output is a few lines on stderr (git shows a hook's stderr), then a count and the
//! command that shows the rest.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use proto::json::q;
use proto::rpc::{CheckRow, GuardedDecision, GuardedGround, GuardsResult, Refusal};
use serde::Serialize;

use crate::hooks::{Hook, SKIP_VAR, WARN_VAR};
use crate::render::Out;
use crate::session::Session;

/// At most this many decisions are named; the rest are counted.
pub const SHOWN: usize = 4;

/// `evctl hook …`'s arguments.
#[derive(clap::Args, Debug)]
pub struct HookArgs {
    /// Block a commit whenever `evctl check --exit-on-red` would fail, whatever it changes
    /// (what `evctl hooks install --strict` installs). Default: block on a failing test, or on
    /// a gating verdict of a decision guarding what the commit changes.
    #[arg(long)]
    pub strict: bool,
    /// Which hook is running.
    #[arg(value_enum)]
    pub which: Which,
    /// What git passes the hook (pre-push: the remote's name and its URL).
    #[arg(allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    PreCommit,
    PrePush,
}

impl Which {
    fn hook(self) -> Hook {
        match self {
            Which::PreCommit => Hook::PreCommit,
            Which::PrePush => Hook::PrePush,
        }
    }
}

/// What a hook says, and whether it blocks.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Said {
    pub blocked: bool,
    pub lines: Vec<String>,
}

/// Whether `var` is set to something other than nothing or `0`.
fn flag_set(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether the user asked every evctl hook to step aside.
pub fn skip_requested() -> bool {
    flag_set(SKIP_VAR)
}

/// A gate that would block, when the user asked the gates to warn only: said in full, then let
/// through, saying so.
fn warn_only(hook: Hook, mut out: Out, json: bool) -> Out {
    if out.code != 0 && flag_set(WARN_VAR) {
        out.code = 0;
        if !json {
            out.err(format!(
                "evctl: {WARN_VAR} is set: the {} goes ahead all the same",
                hook.git_verb()
            ));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Pure: what to say

/// The first `n` characters of a commit id.
fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

/// `a`, `a and b`, `a and 3 other files`.
fn files_phrase(paths: &[String]) -> String {
    match paths {
        [] => "nothing".into(),
        [a] => a.clone(),
        [a, b] => format!("{a} and {b}"),
        [a, rest @ ..] => format!("{a} and {} other files", rest.len()),
    }
}

/// The ground that speaks for `d` about the paths it matched: the one asking for the most
/// attention (the first among equals).
fn speaking(d: &GuardedDecision) -> Option<&GuardedGround> {
    d.matched
        .iter()
        .filter_map(|p| d.worst_ground(Some(p)))
        .fold(None, |worst: Option<&GuardedGround>, g| match worst {
            Some(w) if w.severity() >= g.severity() => Some(w),
            _ => Some(g),
        })
        .or_else(|| d.worst_ground(None))
}

/// `green at a245bc4`, `stale; last ran green at a245bc4`, `not-run, never run`.
fn verdict_phrase(g: &GuardedGround) -> String {
    match &g.last_run {
        Some(r) if r.result == g.label => format!("{} at {}", g.label, short(&r.commit)),
        Some(r) => format!("{}; last ran {} at {}", g.label, r.result, short(&r.commit)),
        None => format!("{}, never run", g.label),
    }
}

/// How to see everything: `evctl guards <paths>` for a few paths, else a command substitution.
fn see_all(paths: &[String], all_paths: &str) -> String {
    if !paths.is_empty() && paths.len() <= 3 && paths.iter().all(|p| plain_word(p)) {
        format!("evctl guards {}", paths.join(" "))
    } else {
        format!("evctl guards {all_paths}")
    }
}

/// Whether `p` can be pasted into a shell as it is.
fn plain_word(p: &str) -> bool {
    !p.is_empty()
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,@%=".contains(&b))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The decisions after the first `shown` of `total`, as one line.
fn more_line(total: usize, shown: usize, what: &str, see: &str) -> Option<String> {
    (total > shown).then(|| {
        format!(
            "evctl: … and {} {what}: see `{see}`",
            plural(total - shown, "more decision", "more decisions")
        )
    })
}

/// What pre-commit says. `shown(p)` turns a store-relative path into the one the user sees;
/// `staged` are the staged paths as shown. By default it blocks on what matters to this commit:
/// a failing test anywhere, a gating verdict of a decision guarding a staged file, cited
/// evidence of a staged file that no longer holds; any other verdict asking for attention is
/// named in one line. `strict`: blocked exactly when `evctl check --exit-on-red` would fail.
pub fn pre_commit(
    r: &GuardsResult,
    shown: &dyn Fn(&str) -> String,
    staged: &[String],
    strict: bool,
) -> Said {
    if strict {
        return pre_commit_strict(r, shown, staged);
    }
    let mut said = Said::default();
    let staged_set: HashSet<&str> = staged.iter().map(String::as_str).collect();
    // 1. Failing tests block whatever the commit changes.
    if r.red_total > 0 {
        said.blocked = true;
        said.lines.push(format!(
            "evctl: commit blocked: {} failing:",
            plural(r.red_total, "bound test is", "bound tests are")
        ));
        for row in r.red_rows.iter().take(3) {
            said.lines.push(format!(
                "  {} {} {} ({})",
                row.label,
                row.tick_id,
                q(&row.decision),
                detail_for(&row.detail, &r.staleness_ref.policy)
            ));
        }
        if r.red_total > 3 {
            said.lines.push(format!(
                "  … and {}: see `evctl check`",
                plural(r.red_total - 3, "more", "more")
            ));
        }
        said.lines.push(
            "evctl: fix the code (or the test), then `evctl check --run` records the run".into(),
        );
    }
    // 2. Decisions guarding what is staged: their gating verdicts block.
    let mut related: HashSet<&str> = HashSet::new();
    let mut notes = Vec::new();
    for d in &r.decisions {
        related.insert(d.tick_id.as_str());
        let paths: Vec<String> = d.matched.iter().map(|p| shown(p)).collect();
        let Some(g) = speaking(d) else {
            continue;
        };
        if g.gating {
            if !matches!(g.label.as_str(), "red" | "gray->red") {
                said.blocked = true;
                let out = if reverifies(&g.label, &g.detail) {
                    set_aside_and_reverify(d, shown)
                } else {
                    way_out(&d.tick_id, &g.label, &g.detail)
                };
                said.lines.push(format!(
                    "evctl: commit blocked: it changes {}, which decision {} {} guards ({}): {}",
                    files_phrase(&paths),
                    d.tick_id,
                    q(&d.decision),
                    verdict_phrase(g),
                    out
                ));
            }
        } else if notes.len() < SHOWN {
            let after = g.last_run.is_some() && !g.label.starts_with("stale");
            notes.push(format!(
                "evctl: you are changing {}, which decision {} guards ({}){}",
                files_phrase(&paths),
                d.tick_id,
                verdict_phrase(g),
                if after {
                    format!(
                        "; it will read stale after this commit: then {}",
                        after_commit(&d.tick_id, &r.staleness_ref.policy)
                    )
                } else {
                    String::new()
                }
            ));
        }
    }
    // 3. Cited evidence of a staged file that no longer holds.
    for e in r
        .evidence
        .iter()
        .filter(|e| e.gating && staged_set.contains(shown(&e.path).as_str()))
        .take(3)
    {
        related.insert(e.tick_id.as_str());
        said.blocked = true;
        said.lines.push(format!(
            "evctl: commit blocked: the evidence {} cites ({} bytes {}-{}) no longer holds ({}): restore the bytes, or record what changed with `evctl supersede {}`",
            e.tick_id, e.path, e.start, e.end, e.detail, e.tick_id
        ));
    }
    said.lines.extend(notes);
    let total = r.matched_total.max(r.decisions.len());
    if let Some(l) = more_line(
        total,
        r.decisions.len().min(SHOWN),
        "guarding what you are changing",
        &see_all(staged, "$(git diff --cached --name-only)"),
    ) {
        said.lines.push(l);
    }
    // 4. Everything else that asks for attention: one line, never a block.
    let elsewhere: Vec<&CheckRow> = r
        .gating_rows
        .iter()
        .filter(|row| !matches!(row.label.as_str(), "red" | "gray->red"))
        .filter(|row| !related.contains(row.tick_id.as_str()))
        .collect();
    let others = r
        .tally
        .gating
        .saturating_sub(r.red_total)
        .max(elsewhere.len());
    if let Some(first) = elsewhere.first().filter(|_| others > 0) {
        said.lines.push(format!(
            "evctl: not blocking: {} this commit does not touch {} attention, e.g. {} {} ({}): {}",
            plural(others, "decision", "decisions"),
            if others == 1 { "asks for" } else { "ask for" },
            first.label,
            first.tick_id,
            detail_for(&first.detail, &r.staleness_ref.policy),
            way_out(&first.tick_id, &first.label, &first.detail)
        ));
    }
    if said.blocked {
        said.lines.push(format!(
            "evctl: or skip this gate once: git commit --no-verify (or {SKIP_VAR}=1)"
        ));
    }
    said
}

/// What clears the `stale` a commit touching what decision `id` guards leaves: with the local
/// HEAD as the staleness reference, it was verified at an older commit (`evctl reverify`);
/// otherwise a triggering change landed after its last run (`evctl check --run`).
fn after_commit(id: &str, policy: &str) -> String {
    if policy == "local-head" {
        format!("`evctl reverify {id}`")
    } else {
        "`evctl check --run`".into()
    }
}

/// A verdict's detail in the gate's words: a `stale` row read against the local HEAD says so
/// (`check` keeps upstream's words, which name the live origin whatever the policy).
fn detail_for(detail: &str, policy: &str) -> String {
    const UPSTREAM: &str = "verified_at_sha behind live origin";
    match policy {
        "local-head" => detail.replace(UPSTREAM, "verified_at_sha behind the local HEAD"),
        "live-origin" => detail.replace(UPSTREAM, "verified_at_sha behind @{upstream}"),
        _ => detail.to_string(),
    }
}

/// The way out of a decision `d` that re-verifying clears, when the commit changes what it
/// guards: re-verifying would run its tests with that change in the work tree, which `evctl
/// reverify` refuses, so the change under its triggers (top-relative pathspecs) is set aside for
/// it and put back.
fn set_aside_and_reverify(d: &GuardedDecision, shown: &dyn Fn(&str) -> String) -> String {
    let mut specs: Vec<String> = Vec::new();
    for t in d.grounds.iter().flat_map(|g| &g.triggered_by) {
        let spec = if t.starts_with(':') {
            t.clone()
        } else {
            format!(":/{}", shown(t))
        };
        if !specs.contains(&spec) {
            specs.push(spec);
        }
    }
    format!("`{}`", proto::shell::reverify_set_aside(&d.tick_id, &specs))
}

/// Whether a verdict `label` (with `detail`) is cleared by re-verifying at HEAD: verified at
/// an older commit than the staleness reference.
fn reverifies(label: &str, detail: &str) -> bool {
    label.starts_with("stale") && detail.contains("verified_at_sha")
}

/// The one command that gets a decision `id` with verdict `label` (and `detail`) out of it.
fn way_out(id: &str, label: &str, detail: &str) -> String {
    if reverifies(label, detail) {
        return format!("`evctl reverify {id}`");
    }
    match label {
        "red" | "gray->red" => "fix the code (or the test), then `evctl check --run`".into(),
        "not-run" => match detail.strip_prefix("missing: ") {
            Some(platforms) if !platforms.split(", ").any(|p| p == "local") => format!(
                "`evctl check --run --platform {}` where that platform runs",
                platforms.split(", ").next().unwrap_or("local")
            ),
            _ => "`evctl check --run`".into(),
        },
        "silently-unbound" => format!(
            "its test was not selected after a change to what it guards: run it, `evctl check --run`, or see `evctl reopen {id}`"
        ),
        _ => "`evctl check --run`".into(),
    }
}

/// [`pre_commit`] with `strict`: blocked exactly when `evctl check --exit-on-red` would fail.
fn pre_commit_strict(r: &GuardsResult, shown: &dyn Fn(&str) -> String, staged: &[String]) -> Said {
    let mut said = Said {
        blocked: r.gating,
        lines: Vec::new(),
    };
    let mut budget = SHOWN;
    let drifted: Vec<_> = r.evidence.iter().filter(|e| e.gating).collect();
    if r.gating && r.tally.gating == 0 && r.gating_rows.is_empty() && !drifted.is_empty() {
        // Only evidence gates: a user-ruled decision's cited bytes changed.
        said.lines.push(format!(
            "evctl: commit blocked: the evidence of {} no longer holds, so `evctl check --exit-on-red` would fail:",
            plural(drifted.len(), "user-ruled decision", "user-ruled decisions")
        ));
        for e in drifted.iter().take(budget.min(3)) {
            said.lines.push(format!(
                "  {} {} {} (evidence {} bytes {}-{}: {})",
                e.label,
                e.tick_id,
                q(&e.decision),
                e.path,
                e.start,
                e.end,
                e.detail
            ));
            budget -= 1;
        }
    } else if r.gating {
        let n = r.tally.gating.max(r.gating_rows.len());
        said.lines.push(format!(
            "evctl: commit blocked: {} gate{}, so `evctl check --exit-on-red` would fail:",
            plural(n, "check verdict", "check verdicts"),
            if n == 1 { "s" } else { "" }
        ));
        let rows: Vec<_> = r.gating_rows.iter().take(budget.min(3)).collect();
        for row in &rows {
            said.lines.push(format!(
                "  {} {} {} ({})",
                row.label,
                row.tick_id,
                q(&row.decision),
                detail_for(&row.detail, &r.staleness_ref.policy)
            ));
        }
        budget -= rows.len();
        if n > rows.len() {
            said.lines.push(format!(
                "  … and {}: see `evctl check`",
                plural(n - rows.len(), "more verdict", "more verdicts")
            ));
        }
    }
    let decisions: Vec<&GuardedDecision> = r.decisions.iter().take(budget).collect();
    for d in &decisions {
        let paths: Vec<String> = d.matched.iter().map(|p| shown(p)).collect();
        let (status, stale_after) = match speaking(d) {
            Some(g) => (
                verdict_phrase(g),
                g.last_run.is_some() && !g.label.starts_with("stale"),
            ),
            None => ("no verdict".into(), false),
        };
        said.lines.push(format!(
            "evctl: you are changing {}, which decision {} guards ({status}){}",
            files_phrase(&paths),
            d.tick_id,
            if stale_after {
                format!(
                    "; its check will read stale after this commit: then {}",
                    after_commit(&d.tick_id, &r.staleness_ref.policy)
                )
            } else {
                String::new()
            }
        ));
    }
    let total = r.matched_total.max(r.decisions.len());
    if let Some(l) = more_line(
        total,
        decisions.len(),
        "guarding what you are changing",
        &see_all(staged, "$(git diff --cached --name-only)"),
    ) {
        said.lines.push(l);
    }
    if said.blocked {
        let behind: Vec<&str> = r
            .gating_rows
            .iter()
            .filter(|row| row.event_label == "stale:sha")
            .map(|row| row.tick_id.as_str())
            .collect();
        said.lines.push(fix_line(&behind, "commit"));
    }
    said
}

/// The last line of a block: how to clear it, and how to skip the gate. A binding whose
/// `verified_at_sha` is behind the staleness reference (`behind`: those decisions) stays stale
/// however often it runs: `evctl reverify` records it verified at HEAD.
fn fix_line(behind: &[&str], verb: &str) -> String {
    let fix = if behind.is_empty() {
        "`evctl check --run` records new runs".to_string()
    } else {
        format!(
            "`evctl check --run` records new runs; `evctl reverify {}` re-verifies at HEAD what a commit made stale",
            behind.join(" ")
        )
    };
    format!(
        "evctl: fix them ({fix}), or skip this gate once: git {verb} --no-verify (or {SKIP_VAR}=1)"
    )
}

/// What pre-push says: blocked when a decision guarding a pushed file has a gating verdict.
pub fn pre_push(r: &GuardsResult, shown: &dyn Fn(&str) -> String, pushed: &[String]) -> Said {
    let gating: Vec<&GuardedDecision> = r
        .decisions
        .iter()
        .filter(|d| speaking(d).is_some_and(|g| g.gating))
        .collect();
    let mut said = Said {
        blocked: !gating.is_empty(),
        lines: Vec::new(),
    };
    let see = see_all(pushed, "<the pushed files>");
    let total = r.matched_total.max(r.decisions.len());
    if said.blocked {
        said.lines.push(
            "evctl: push blocked: it changes files that decisions with gating verdicts guard:"
                .into(),
        );
        for d in gating.iter().take(SHOWN) {
            let paths: Vec<String> = d.matched.iter().map(|p| shown(p)).collect();
            let status = speaking(d).map_or_else(|| "no verdict".into(), verdict_phrase);
            said.lines.push(format!(
                "  {} {} ({status}) guards {}",
                d.tick_id,
                q(&d.decision),
                files_phrase(&paths)
            ));
        }
        let listed = gating.len().min(SHOWN);
        if total > listed {
            said.lines.push(format!(
                "  … and {} guarding the pushed files: see `{see}`",
                plural(total - listed, "more decision", "more decisions")
            ));
        }
        let behind: Vec<&str> = gating
            .iter()
            .filter(|d| {
                speaking(d).is_some_and(|g| {
                    g.label.starts_with("stale") && g.detail.contains("verified_at_sha")
                })
            })
            .map(|d| d.tick_id.as_str())
            .collect();
        said.lines.push(fix_line(&behind, "push"));
        return said;
    }
    let decisions: Vec<&GuardedDecision> = r.decisions.iter().take(SHOWN).collect();
    for d in &decisions {
        let paths: Vec<String> = d.matched.iter().map(|p| shown(p)).collect();
        let status = speaking(d).map_or_else(|| "no verdict".into(), verdict_phrase);
        said.lines.push(format!(
            "evctl: this push changes {}, which decision {} guards ({status})",
            files_phrase(&paths),
            d.tick_id
        ));
    }
    if let Some(l) = more_line(total, decisions.len(), "guarding the pushed files", &see) {
        said.lines.push(l);
    }
    said
}

/// The pushed commits' ranges, from git's pre-push input: `(local sha, remote sha)` per line
/// that pushes something (a deletion pushes nothing; a new branch has no remote sha).
pub fn pushed_ranges(input: &str) -> Vec<(String, Option<String>)> {
    let zero = |s: &str| !s.is_empty() && s.bytes().all(|b| b == b'0');
    input
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [_, local, _, remote] = f[..] else {
                return None;
            };
            if zero(local) || !local.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            let remote =
                (!zero(remote) && remote.bytes().all(|b| b.is_ascii_hexdigit())).then_some(remote);
            Some((local.to_string(), remote.map(str::to_string)))
        })
        .collect()
}

/// NUL-separated paths from git's `-z` output, in order, each once.
pub fn nul_paths(bytes: &[u8], seen: &mut HashSet<String>, out: &mut Vec<String>) {
    for p in bytes.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        let p = String::from_utf8_lossy(p).into_owned();
        if seen.insert(p.clone()) {
            out.push(p);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Git

/// `git <args>` in `dir`, with the hook's environment (git's own `GIT_INDEX_FILE` and the like
/// must reach it): stdout when it succeeded.
fn git_bytes(dir: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = evd::api::shared::child::output(
        Command::new("git").current_dir(dir).args(args),
        evd::api::shared::child::git_timeout(),
    );
    crate::context::warn_git_timeouts();
    let out = out.map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("`git {}` failed ({})", args.join(" "), out.status));
    }
    Ok(out.stdout)
}

/// The top of the work tree around `cwd`: `cwd` itself when it holds `.git` (where git runs
/// hooks), else git's answer.
fn work_tree_top(cwd: &Path) -> Result<PathBuf, String> {
    if std::fs::symlink_metadata(cwd.join(".git")).is_ok() {
        return Ok(cwd.to_path_buf());
    }
    let out = git_bytes(cwd, &["rev-parse", "--show-toplevel"])?;
    let top = String::from_utf8_lossy(&out).trim().to_string();
    if top.is_empty() {
        return Err("not inside a git work tree".into());
    }
    Ok(PathBuf::from(top))
}

fn staged(top: &Path) -> Result<Vec<String>, String> {
    let out = git_bytes(
        top,
        &["diff", "--cached", "--name-only", "-z", "--no-renames"],
    )?;
    let mut v = Vec::new();
    nul_paths(&out, &mut HashSet::new(), &mut v);
    Ok(v)
}

/// The files the pushed commits change (each commit's own changes, merges aside).
fn pushed(top: &Path, input: &str) -> Result<Vec<String>, String> {
    let mut seen = HashSet::new();
    let mut v = Vec::new();
    for (local, remote) in pushed_ranges(input) {
        let log = ["log", "--format=", "--name-only", "-z", "--no-renames"];
        let exact = remote.as_deref().map(|r| {
            let mut a = log.to_vec();
            a.extend([local.as_str(), "--not", r]);
            git_bytes(top, &a)
        });
        let out = match exact {
            Some(Ok(out)) => out,
            // A new branch, or a remote tip this repository does not have: the commits no
            // remote-tracking ref has.
            _ => {
                let mut a = log.to_vec();
                a.extend([local.as_str(), "--not", "--remotes"]);
                git_bytes(top, &a)?
            }
        };
        nul_paths(&out, &mut seen, &mut v);
    }
    v.truncate(evd::api::shared::MAX_GUARDED_PATHS);
    Ok(v)
}

/// git's pre-push input (nothing when stdin is a terminal: run by hand).
fn read_stdin() -> String {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return String::new();
    }
    let mut s = String::new();
    let _ = std::io::stdin().read_to_string(&mut s);
    s
}

// ---------------------------------------------------------------------------------------------
// The verb

/// A hook that could not do its job: one line, and the commit or push goes ahead.
fn trouble(hook: Hook, why: &str, json: bool) -> Out {
    let first = why.lines().next().unwrap_or(why);
    let verb = hook.git_verb();
    let mut out = Out::default();
    let line = format!(
        "evctl: the {} gate could not run ({first}); the {verb} goes ahead",
        hook.name()
    );
    if json {
        out.json(&serde_json::json!({"blocked": false, "lines": [line], "trouble": first}));
    } else {
        out.err(line);
    }
    out
}

/// A store whose HEAD a merge left with conflict markers: the one trouble a gate blocks on, since
/// committing or pushing it breaks every verb in every clone that takes it.
fn conflicted(hook: Hook, head: &str, json: bool) -> Out {
    let verb = hook.git_verb();
    let line = format!(
        "evctl: blocked: {head} holds git's conflict markers; run `evctl doctor --fix`, \
         then `git add .evolving` and {verb} again"
    );
    let mut out = Out {
        code: 1,
        ..Out::default()
    };
    if json {
        out.json(&serde_json::json!({"blocked": true, "lines": [line]}));
    } else {
        out.err(line);
    }
    out
}

/// How long a gate may take before it lets the commit or push through: `EVCTL_GATE_TIMEOUT_MS`
/// (milliseconds), else [`GATE_DEADLINE`].
fn gate_deadline() -> std::time::Duration {
    std::env::var("EVCTL_GATE_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(GATE_DEADLINE, |ms| {
            std::time::Duration::from_millis(ms.max(1))
        })
}

/// The gate's default deadline: a warm gate answers in milliseconds, a cold one (evd just
/// restarted on a large store) in well under this.
const GATE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(4);

/// Set once the gate has its answer: the watchdog then stays silent.
static GATE_DONE: std::sync::Mutex<bool> = std::sync::Mutex::new(false);

/// Never hold a commit or push hostage: past the deadline, whatever the gate is waiting on (a
/// stuck or stopped evd, a slow disk), say so in one line and let git go ahead (exit 0).
/// Armed once per process: the quick way ([`quick`]) may hand over to the usual one ([`run`]),
/// whose deadline is then the one already running.
fn arm_watchdog(hook: Hook, json: bool) {
    static ARMED: std::sync::Once = std::sync::Once::new();
    ARMED.call_once(|| watch_the_deadline(hook, json));
}

fn watch_the_deadline(hook: Hook, json: bool) {
    let deadline = gate_deadline();
    let spawned = std::thread::Builder::new()
        .name("evctl-gate-deadline".into())
        .spawn(move || {
            std::thread::sleep(deadline);
            let done = GATE_DONE.lock().unwrap_or_else(|e| e.into_inner());
            if *done {
                return;
            }
            let why = format!(
                "no answer within {:.1} s (set EVCTL_GATE_TIMEOUT_MS to wait longer; `evctl \
                 status` shows what evd is doing)",
                deadline.as_secs_f64()
            );
            trouble(hook, &why, json).emit();
            std::process::exit(0);
        });
    if let Err(e) = spawned {
        eprintln!("evctl: cannot arm the gate's deadline ({e}); the gate runs without one");
    }
}

/// The index a commit's gate reads: git's `GIT_INDEX_FILE` in a hook (from the top of the work
/// tree, where git runs hooks, when relative), else the repository's own when `.git` is a
/// directory at the top. `None` (a linked worktree, a submodule) asks git instead.
fn index_file(cwd: &Path, top: &Path) -> Option<String> {
    let path = match std::env::var_os("GIT_INDEX_FILE").filter(|v| !v.is_empty()) {
        Some(v) => cwd.join(v),
        None => {
            let git = top.join(".git");
            if !std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir()) {
                return None;
            }
            git.join("index")
        }
    };
    path.to_str().map(str::to_string)
}

/// The reason a pre-push gate with nothing pushed ends quietly.
const NOTHING_PUSHED: &str = "nothing_pushed";

/// The changed paths asked of git (a git child, read while this thread resolves the git facts
/// the verdicts need and reaches evd: the gate waits for the slower, not their sum), then
/// the decisions guarding them.
async fn asked_of_git(
    s: &mut Session,
    hook: Hook,
    root: &Path,
    top: &Path,
    input: String,
) -> (Vec<String>, Result<proto::rpc::GuardsResult, Refusal>) {
    let (changed, ctx) = {
        let top = top.to_path_buf();
        let reader = std::thread::Builder::new()
            .name("evctl-changed".into())
            .spawn(move || match hook {
                Hook::PreCommit => staged(&top),
                Hook::PrePush => pushed(&top, &input),
            });
        let ctx = crate::verbs::verdict_context(s, false);
        let _ = s.daemon().await;
        let changed = match reader {
            Ok(r) => r
                .join()
                .unwrap_or_else(|_| Err("reading the changed paths failed".into())),
            Err(e) => Err(format!("cannot start a thread: {e}")),
        };
        (changed, ctx)
    };
    let changed = match changed {
        Ok(c) => c,
        Err(e) => return (Vec::new(), Err(Refusal::refused("changed_paths", e))),
    };
    if hook == Hook::PrePush && changed.is_empty() {
        return (changed, Err(Refusal::refused(NOTHING_PUSHED, "")));
    }
    // git names paths from the top; the store speaks of paths from its own root.
    let mut rel = Vec::with_capacity(changed.len());
    for p in &changed {
        if let Ok(r) = crate::context::store_relative(root, top, p) {
            rel.push(r);
        }
    }
    let req = proto::rpc::GuardsRequest {
        context: ctx,
        paths: Some(rel),
        limit: Some(SHOWN),
        // What a commit stages is uncommitted by definition: evd need not look at the work tree.
        staged: hook == Hook::PreCommit,
        ..Default::default()
    };
    let r = crate::verbs::ask_guards(s, req).await;
    (changed, r)
}

pub async fn run(s: &mut Session, a: HookArgs) -> Out {
    let hook = a.which.hook();
    let json = s.json;
    if skip_requested() {
        return Out::default();
    }
    arm_watchdog(hook, json);
    let out = gate(s, hook, json, a.strict).await;
    answered();
    out
}

/// The gate has its answer: the watchdog must not speak (and cannot, while this is held).
fn answered() {
    *GATE_DONE.lock().unwrap_or_else(|e| e.into_inner()) = true;
}

/// The arguments of a pre-commit gate as the installed script passes them, and nothing else:
/// `[--store DIR] hook [--strict] pre-commit`. `Some(store, strict)`.
fn quick_args(args: &[String]) -> Option<(Option<String>, bool)> {
    let mut rest = args;
    let mut store = None;
    match rest {
        [flag, dir, more @ ..] if flag == "--store" => {
            store = Some(dir.clone());
            rest = more;
        }
        [flag, more @ ..] if flag.starts_with("--store=") => {
            store = flag.strip_prefix("--store=").map(str::to_string);
            rest = more;
        }
        _ => {}
    }
    match rest {
        [h, w] if h == "hook" && w == "pre-commit" => Some((store, false)),
        [h, s, w] if h == "hook" && s == "--strict" && w == "pre-commit" => Some((store, true)),
        _ => None,
    }
}

/// The pre-commit gate's quick way, taken before evctl reads its arguments the usual way or
/// starts its runtime (`git commit` waits for every millisecond of it): for exactly what the
/// installed script runs, against a daemon already running, the guards are asked in one blocking
/// round trip together with the hello ([`crate::client::batch`]), then judged and said as
/// [`run`] would. `None`: take the usual way ([`run`]), which starts or replaces the daemon,
/// answers in-process without one, asks git for the staged paths when evd cannot read the
/// index, and says what went wrong. Nothing was written meanwhile: the guards are a read.
pub fn quick(args: &[String]) -> Option<Out> {
    let (store, strict) = quick_args(args)?;
    if skip_requested() {
        return Some(Out::default());
    }
    let s = Session::new(&crate::grammar::Globals {
        store,
        ..Default::default()
    });
    if let Some(why) = s.unreachable_reason() {
        return handed_over(why);
    }
    let hook = Hook::PreCommit;
    let place = match place(&s, hook, false) {
        Ok(p) => p,
        Err(out) => return Some(out),
    };
    let Some(index) = index_file(&s.cwd, &place.top) else {
        return handed_over("evd cannot read this work tree's index itself");
    };
    arm_watchdog(hook, false);
    let req = staged_request(&s, &place, index);
    // A slow answer (evd busy opening the store) is left to the usual way, which says what
    // the store is busy with on a terminal.
    let wait = std::time::Duration::from_millis(1500);
    let answer =
        crate::client::batch::hello_and_read::<_, GuardsResult>(&s.rt_dir, "ev.guards", &req, wait);
    let answer = match answer {
        Ok(Some((_, answer))) => answer,
        Ok(None) => return handed_over("no daemon of this build is running"),
        Err(e) => return handed_over(&e),
    };
    let r = match answer {
        Ok(mut r) => match r.staged_paths.take() {
            Some(changed) => (changed, Ok(r)),
            None => return handed_over("evd did not read the staged change"),
        },
        Err(e) => {
            let e = Refusal::from_error_object(&e);
            if e.reason == "staged_unknown" || e.code == proto::rpc::codes::STOPPING {
                return handed_over(&e.message);
            }
            (Vec::new(), Err(e))
        }
    };
    if std::env::var_os("EVCTL_DEBUG").is_some() {
        eprintln!("evctl: the pre-commit gate asked evd in one round trip");
    }
    let out = judged(hook, &place, r, strict, false);
    answered();
    Some(out)
}

/// The quick way cannot answer (`why`): the usual way will. Said with `EVCTL_DEBUG`.
fn handed_over(why: &str) -> Option<Out> {
    if std::env::var_os("EVCTL_DEBUG").is_some() {
        eprintln!("evctl: the pre-commit gate takes the usual way ({why})");
    }
    None
}

/// Where a gate runs: the store's root, the work tree's top, and the store's place below it
/// (`sub/`, or nothing) by which git's paths name the store's files.
struct Place {
    root: PathBuf,
    top: PathBuf,
    prefix: String,
}

impl Place {
    fn shown(&self, p: &str) -> String {
        format!("{}{p}", self.prefix)
    }
}

/// Find the [`Place`], or the gate's whole answer when there is nothing to gate (no store
/// here) or it cannot tell (not in a git work tree).
fn place(s: &Session, hook: Hook, json: bool) -> Result<Place, Out> {
    let root = s.root(true);
    if std::fs::symlink_metadata(root.join(".evolving")).is_err() {
        return Err(Out::default());
    }
    let top = match work_tree_top(&s.cwd) {
        Ok(t) => t,
        Err(e) => return Err(trouble(hook, &e, json)),
    };
    let prefix = root
        .strip_prefix(&top)
        .ok()
        .and_then(Path::to_str)
        .filter(|p| !p.is_empty())
        .map(|p| format!("{p}/"))
        .unwrap_or_default();
    Ok(Place { root, top, prefix })
}

/// A commit's guards request, evd reading the staged paths from the `index` itself.
fn staged_request(s: &Session, place: &Place, index: String) -> proto::rpc::GuardsRequest {
    proto::rpc::GuardsRequest {
        context: crate::verbs::verdict_context(s, false),
        limit: Some(SHOWN),
        staged: true,
        staged_index: Some(proto::rpc::StagedIndex {
            index,
            prefix: place.prefix.clone(),
        }),
        ..Default::default()
    }
}

async fn gate(s: &mut Session, hook: Hook, json: bool, strict: bool) -> Out {
    // Read git's input first, whatever happens next: a hook that leaves it unread can make git
    // report a broken pipe.
    let input = if hook == Hook::PrePush {
        read_stdin()
    } else {
        String::new()
    };
    let place = match place(s, hook, json) {
        Ok(p) => p,
        Err(out) => return out,
    };
    // A commit's staged change is read by evd from the index itself (no git child here); an
    // index it cannot read that way, or a push, is asked of git.
    let index = match hook {
        Hook::PreCommit => index_file(&s.cwd, &place.top),
        Hook::PrePush => None,
    };
    let (root, top) = (&place.root, &place.top);
    let answer = match index {
        Some(index) => {
            let req = staged_request(s, &place, index);
            match crate::verbs::ask_guards(s, req).await {
                Ok(mut r) => match r.staged_paths.take() {
                    Some(changed) => (changed, Ok(r)),
                    None => asked_of_git(s, hook, root, top, input).await,
                },
                Err(e) if e.reason == "staged_unknown" => {
                    asked_of_git(s, hook, root, top, input).await
                }
                Err(e) => (Vec::new(), Err(e)),
            }
        }
        None => asked_of_git(s, hook, root, top, input).await,
    };
    judged(hook, &place, answer, strict, json)
}

/// The gate's answer from evd's (the changed paths, and the guards or a refusal): blocked or
/// not (unless the gates warn only), and the lines that say why.
fn judged(
    hook: Hook,
    place: &Place,
    answer: (Vec<String>, Result<GuardsResult, Refusal>),
    strict: bool,
    json: bool,
) -> Out {
    warn_only(hook, verdict(hook, place, answer, strict, json), json)
}

fn verdict(
    hook: Hook,
    place: &Place,
    (changed, r): (Vec<String>, Result<GuardsResult, Refusal>),
    strict: bool,
    json: bool,
) -> Out {
    let r = match r {
        Ok(r) => r,
        Err(e) if e.reason == "conflicted_head" => {
            return conflicted(hook, &place.shown(".evolving/HEAD"), json)
        }
        Err(e) if e.reason == NOTHING_PUSHED => return Out::default(),
        Err(e) => return trouble(hook, &e.message, json),
    };
    let shown = |p: &str| place.shown(p);
    let said = match hook {
        Hook::PreCommit => pre_commit(&r, &shown, &changed, strict),
        Hook::PrePush => pre_push(&r, &shown, &changed),
    };
    let mut out = Out {
        code: u8::from(said.blocked),
        ..Out::default()
    };
    if json {
        out.json(&said);
    } else {
        for l in &said.lines {
            out.err(l);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::rpc::{CheckRow, LastRun, StalenessRef, Tally};

    fn ground(
        label: &str,
        gating: bool,
        trigger: &str,
        run: Option<(&str, &str)>,
    ) -> GuardedGround {
        GuardedGround {
            index: 0,
            claim: "c".into(),
            supports: "chosen".into(),
            selector: "true".into(),
            counter_test: Some("false".into()),
            triggered_by: vec![trigger.into()],
            platforms: vec!["local".into()],
            label: label.into(),
            class: "clear".into(),
            gating,
            detail: String::new(),
            last_run: run.map(|(result, commit)| LastRun {
                result: result.into(),
                commit: commit.into(),
                ran_at: "t".into(),
                platform: "local".into(),
                origin: None,
            }),
        }
    }

    fn decision(id: &str, matched: &[&str], grounds: Vec<GuardedGround>) -> GuardedDecision {
        GuardedDecision {
            tick_id: id.into(),
            file: id.into(),
            decision: format!("decision {id}"),
            blame: "b".into(),
            authority: None,
            jurisdiction: None,
            rejected: Vec::new(),
            matched: matched.iter().map(|s| s.to_string()).collect(),
            grounds,
        }
    }

    fn result(gating: bool, decisions: Vec<GuardedDecision>) -> GuardsResult {
        GuardsResult {
            red_rows: Vec::new(),
            red_total: 0,
            head: None,
            staleness_ref: StalenessRef {
                policy: "local-head".into(),
                sha: None,
            },
            gating,
            tally: Tally::default(),
            matched_total: decisions.len(),
            decisions,
            gating_rows: Vec::new(),
            warnings: Vec::new(),
            evidence: Vec::new(),
            staged_paths: None,
        }
    }

    fn row(label: &str, id: &str) -> CheckRow {
        CheckRow {
            label: label.into(),
            tick_id: id.into(),
            file: id.into(),
            decision: format!("decision {id}"),
            claim: "few routes".into(),
            supports: "chosen".into(),
            ground_index: 0,
            detail: "ran t".into(),
            harvested: false,
            class: "attention".into(),
            gating: true,
            memo_reason: None,
            event_label: label.into(),
        }
    }

    const SHA: &str = "a245bc4e0000000000000000000000000000000f";

    #[test]
    fn a_green_guard_informs_in_the_promised_words() {
        let r = result(
            false,
            vec![decision(
                "1f95ec0c16ce",
                &["schema.sql"],
                vec![ground("green", false, "schema.sql", Some(("green", SHA)))],
            )],
        );
        let said = pre_commit(&r, &|p| format!("db/{p}"), &["db/schema.sql".into()], true);
        assert!(!said.blocked);
        assert_eq!(
            said.lines,
            vec!["evctl: you are changing db/schema.sql, which decision 1f95ec0c16ce guards (green at a245bc4); its check will read stale after this commit: then `evctl reverify 1f95ec0c16ce`"]
        );
    }

    #[test]
    fn a_gating_store_blocks_naming_the_gating_verdicts_first() {
        let mut r = result(
            true,
            vec![decision(
                "aaaaaaaaaaaa",
                &["schema.sql"],
                vec![ground("not-run", true, "schema.sql", None)],
            )],
        );
        r.tally.gating = 5;
        r.gating_rows = (0..5).map(|i| row("red", &format!("b{i}"))).collect();
        let said = pre_commit(&r, &|p| p.to_string(), &["schema.sql".into()], true);
        assert!(said.blocked);
        assert_eq!(
            said.lines[0],
            "evctl: commit blocked: 5 check verdicts gate, so `evctl check --exit-on-red` would fail:"
        );
        assert_eq!(said.lines[1], "  red b0 \"decision b0\" (ran t)");
        assert_eq!(said.lines[4], "  … and 2 more verdicts: see `evctl check`");
        assert_eq!(
            said.lines[5],
            "evctl: you are changing schema.sql, which decision aaaaaaaaaaaa guards (not-run, never run)"
        );
        assert_eq!(
            said.lines.last().map(String::as_str),
            Some("evctl: fix them (`evctl check --run` records new runs), or skip this gate once: git commit --no-verify (or EVCTL_NO_HOOKS=1)")
        );
        assert!(said.lines.len() <= 8, "{:?}", said.lines);
        // A binding behind the staleness reference is not cleared by running it again.
        r.gating_rows[0].event_label = "stale:sha".into();
        let said = pre_commit(&r, &|p| p.to_string(), &["schema.sql".into()], true);
        assert!(
            said.lines
                .last()
                .is_some_and(|l| l.contains("`evctl reverify b0` re-verifies at HEAD")),
            "{:?}",
            said.lines
        );
    }

    #[test]
    fn many_guards_are_counted_with_the_command_to_see_them() {
        let ds: Vec<GuardedDecision> = (0..4)
            .map(|i| {
                decision(
                    &format!("d{i}"),
                    &["a", "b", "c"],
                    vec![ground("stale", false, "a", Some(("green", SHA)))],
                )
            })
            .collect();
        let mut r = result(false, ds);
        r.matched_total = 10;
        let staged: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let said = pre_commit(&r, &|p| p.to_string(), &staged, true);
        assert_eq!(said.lines.len(), 5);
        assert_eq!(
            said.lines[0],
            "evctl: you are changing a and 2 other files, which decision d0 guards (stale; last ran green at a245bc4)"
        );
        assert_eq!(
            said.lines[4],
            "evctl: … and 6 more decisions guarding what you are changing: see `evctl guards $(git diff --cached --name-only)`"
        );
        let few = pre_commit(&r, &|p| p.to_string(), &staged[..2], true);
        assert!(
            few.lines[4].ends_with("see `evctl guards a b`"),
            "{:?}",
            few.lines
        );
    }

    #[test]
    fn by_default_a_verdict_elsewhere_is_named_in_one_line_and_does_not_block() {
        let mut r = result(
            true,
            vec![decision(
                "aaaaaaaaaaaa",
                &["schema.sql"],
                vec![ground("green", false, "schema.sql", Some(("green", SHA)))],
            )],
        );
        r.tally.gating = 2;
        let mut stale = row("stale", "010ceb0a983c");
        stale.event_label = "stale:sha".into();
        stale.detail = "verified_at_sha behind live origin".into();
        r.gating_rows = vec![stale, row("not-run", "bbbbbbbbbbbb")];
        let said = pre_commit(&r, &|p| p.to_string(), &["schema.sql".into()], false);
        assert!(!said.blocked, "{:?}", said.lines);
        assert_eq!(
            said.lines,
            vec![
                "evctl: you are changing schema.sql, which decision aaaaaaaaaaaa guards (green at a245bc4); it will read stale after this commit: then `evctl reverify aaaaaaaaaaaa`",
                "evctl: not blocking: 2 decisions this commit does not touch ask for attention, e.g. stale 010ceb0a983c (verified_at_sha behind the local HEAD): `evctl reverify 010ceb0a983c`",
            ]
        );
        // --strict keeps the store-wide gate.
        assert!(pre_commit(&r, &|p| p.to_string(), &["schema.sql".into()], true).blocked);
    }

    #[test]
    fn by_default_a_failing_test_or_a_gating_guard_of_a_staged_file_blocks() {
        let mut r = result(true, vec![]);
        r.tally.gating = 1;
        r.red_total = 1;
        r.red_rows = vec![row("red", "cccccccccccc")];
        r.gating_rows = r.red_rows.clone();
        let said = pre_commit(&r, &|p| p.to_string(), &["README".into()], false);
        assert!(said.blocked);
        assert_eq!(
            said.lines[0],
            "evctl: commit blocked: 1 bound test is failing:"
        );
        assert_eq!(
            said.lines[1],
            "  red cccccccccccc \"decision cccccccccccc\" (ran t)"
        );
        assert!(
            said.lines[2].contains("`evctl check --run`"),
            "{:?}",
            said.lines
        );

        let mut r = result(
            true,
            vec![decision(
                "dddddddddddd",
                &["schema.sql"],
                vec![ground("not-run", true, "schema.sql", None)],
            )],
        );
        r.tally.gating = 1;
        r.decisions[0].grounds[0].detail = "missing: linux-ci".into();
        let said = pre_commit(&r, &|p| p.to_string(), &["schema.sql".into()], false);
        assert!(said.blocked);
        assert_eq!(
            said.lines[0],
            "evctl: commit blocked: it changes schema.sql, which decision dddddddddddd \"decision dddddddddddd\" guards (not-run, never run): `evctl check --run --platform linux-ci` where that platform runs"
        );
        assert_eq!(
            said.lines.last().map(String::as_str),
            Some("evctl: or skip this gate once: git commit --no-verify (or EVCTL_NO_HOOKS=1)")
        );
    }

    #[test]
    fn nothing_guarded_and_nothing_gating_says_nothing() {
        let said = pre_commit(&result(false, vec![]), &|p| p.to_string(), &[], true);
        assert_eq!(said, Said::default());
    }

    #[test]
    fn a_push_blocks_only_on_a_gating_guard_of_a_pushed_file() {
        let r = result(
            true,
            vec![decision(
                "cafecafecafe",
                &["api/routes.rs"],
                vec![ground("green", false, "api", Some(("green", SHA)))],
            )],
        );
        let said = pre_push(&r, &|p| p.to_string(), &["api/routes.rs".into()]);
        assert!(!said.blocked, "the store gates, but not on what is pushed");
        assert_eq!(
            said.lines,
            vec!["evctl: this push changes api/routes.rs, which decision cafecafecafe guards (green at a245bc4)"]
        );
        let r = result(
            false,
            vec![decision(
                "cafecafecafe",
                &["api/routes.rs"],
                vec![ground("red", true, "api", Some(("red", SHA)))],
            )],
        );
        let said = pre_push(&r, &|p| p.to_string(), &["api/routes.rs".into()]);
        assert!(said.blocked);
        assert_eq!(
            said.lines[1],
            "  cafecafecafe \"decision cafecafecafe\" (red at a245bc4) guards api/routes.rs"
        );
        assert!(said.lines[2].contains("git push --no-verify"));
    }

    #[test]
    fn pre_push_input_ranges() {
        let z = "0000000000000000000000000000000000000000";
        let a = "1111111111111111111111111111111111111111";
        let b = "2222222222222222222222222222222222222222";
        let input = format!(
            "refs/heads/main {a} refs/heads/main {b}\nrefs/heads/new {a} refs/heads/new {z}\n(delete) {z} refs/heads/gone {b}\ngarbage\n"
        );
        assert_eq!(
            pushed_ranges(&input),
            vec![(a.to_string(), Some(b.to_string())), (a.to_string(), None)]
        );
    }

    #[test]
    fn nul_separated_paths_once_each() {
        let mut seen = HashSet::new();
        let mut v = Vec::new();
        nul_paths(b"a\0b c\0\0a\0", &mut seen, &mut v);
        assert_eq!(v, vec!["a", "b c"]);
    }
}
