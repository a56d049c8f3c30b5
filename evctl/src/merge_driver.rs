//! `evctl merge-driver`: git's merge driver for `.evolving/HEAD`, so that merging, rebasing,
//! cherry-picking or pulling two branches that both recorded decisions never stops on that file.
//! Both branches' tick files merge without a conflict (content-addressed names never collide);
//! only HEAD, one id, differs. The rule, deterministic and the same in either merge order:
//!
//! the side that moved from the base, else the greater id ([`proto::head::merged`], which
//! `evctl doctor` applies to a HEAD left conflicted too). The other tip stays in `ticks/`, a live
//! decision like any other (`list`, `check` and `brief` read every tick; `log` shows the fork);
//! the next decision's parent is the HEAD kept. Upstream `ev` reads the result as a fork, which
//! its `verify` accepts.
//!
//! Anything else in the file (conflict markers, not an id) is left to git as a conflict, with a
//! line saying so. It also owns registering the driver (`git config merge.evctl-head.*` and the
//! `.gitattributes` line) for `evctl hooks install` and `evctl setup`, and removing it.
//!
//! It must not reach evd nor read the store: git runs it mid-merge, with the work tree half
//! written.

use std::path::Path;

use proto::head::merged;

use crate::render::Out;

/// The merge driver's name in git's config and in `.gitattributes`.
pub const DRIVER: &str = "evctl-head";
/// What `.gitattributes` says for a store's HEAD at `store` (relative to the work tree's top).
pub fn attribute_line(store: Option<&str>) -> String {
    match store {
        Some(dir) => format!("{dir}/.evolving/HEAD merge={DRIVER}"),
        None => format!(".evolving/HEAD merge={DRIVER}"),
    }
}

/// The most bytes a HEAD file may hold here (an id and a newline; a conflicted one more).
const MAX_HEAD: u64 = 64 * 1024;

/// `evctl merge-driver`'s arguments, as git passes them (`%O %A %B %P`).
#[derive(clap::Args, Debug)]
pub struct MergeDriverArgs {
    /// The common ancestor's version (a temporary file).
    pub base: std::path::PathBuf,
    /// This branch's version; the result is written here.
    pub ours: std::path::PathBuf,
    /// The other branch's version.
    pub theirs: std::path::PathBuf,
    /// The path being merged (for messages).
    pub path: Option<String>,
}

/// The id a HEAD file names, when it names exactly one.
fn id_in(text: &str) -> Option<&str> {
    let t = text.trim();
    proto::vocab::is_tick_id(t).then_some(t)
}

fn read(path: &Path) -> Result<String, String> {
    evd::api::shared::fsio::read_followed(path, MAX_HEAD)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

pub fn run(a: &MergeDriverArgs) -> Out {
    let mut out = Out::default();
    let shown = a.path.as_deref().unwrap_or(".evolving/HEAD");
    let texts = (read(&a.base), read(&a.ours), read(&a.theirs));
    let (base, ours, theirs) = match texts {
        (base, Ok(o), Ok(t)) => (base.unwrap_or_default(), o, t),
        (_, Err(e), _) | (_, _, Err(e)) => {
            out.err(format!(
                "evctl merge-driver: {shown}: {e}; left as a conflict"
            ));
            out.code = 1;
            return out;
        }
    };
    let (Some(o), Some(t)) = (id_in(&ours), id_in(&theirs)) else {
        out.err(format!(
            "evctl merge-driver: {shown} does not name one tick on both sides; left as a conflict (`evctl verify` says what the store holds)"
        ));
        out.code = 1;
        return out;
    };
    let head = merged(id_in(&base), o, t);
    if let Err(e) = std::fs::write(&a.ours, format!("{head}\n")) {
        out.err(format!(
            "evctl merge-driver: cannot write the merged {shown}: {e}; left as a conflict"
        ));
        out.code = 1;
    }
    out
}

/// `git <args>` in `top`: stdout when it succeeded.
fn git(top: &Path, args: &[&str]) -> Result<String, String> {
    let out = evd::api::shared::child::output(
        std::process::Command::new("git")
            .current_dir(top)
            .args(args),
        evd::api::shared::child::git_timeout(),
    )
    .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "`git {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The driver command git runs: evctl from `PATH`, else `fallback` (the evctl that installed
/// it, one quoted `sh` word, passed as the script's `$0`).
fn driver_command(fallback: &str) -> String {
    format!(
        "sh -c 'command -v evctl >/dev/null 2>&1 && exec evctl merge-driver \"$@\"; exec \"$0\" merge-driver \"$@\"' {fallback} %O %A %B %P"
    )
}

/// Register the driver for the store at `store` (relative to the work tree's top `top`): git's
/// config of this clone, and the `.gitattributes` line (committed, it reaches every clone, whose
/// `evctl setup` or `evctl hooks install` registers the driver there). What changed, as lines.
pub fn install(top: &Path, store: Option<&str>, fallback: &str) -> Result<Vec<String>, String> {
    let mut said = Vec::new();
    let command = driver_command(fallback);
    let key = format!("merge.{DRIVER}.driver");
    if git(top, &["config", "--get", &key]).ok().as_deref() != Some(command.as_str()) {
        git(
            top,
            &[
                "config",
                &format!("merge.{DRIVER}.name"),
                "evctl: .evolving/HEAD, both branches' decisions kept",
            ],
        )?;
        git(top, &["config", &key, &command])?;
        said.push(format!(
            "merge driver: registered in this clone's git config (merge.{DRIVER})"
        ));
    }
    let attributes = top.join(".gitattributes");
    let line = attribute_line(store);
    let text = match std::fs::symlink_metadata(&attributes) {
        Ok(m) if m.is_file() => read(&attributes)?,
        Ok(_) => {
            return Err(format!(
                "{} is not a regular file: add `{line}` to your attributes by hand",
                attributes.display()
            ))
        }
        Err(_) => String::new(),
    };
    if !text.lines().any(|l| l.trim() == line) {
        let mut new = text.clone();
        if !new.is_empty() && !new.ends_with('\n') {
            new.push('\n');
        }
        new.push_str(&line);
        new.push('\n');
        std::fs::write(&attributes, new)
            .map_err(|e| format!("cannot write {}: {e}", attributes.display()))?;
        said.push(format!(
            "merge driver: `{line}` added to .gitattributes (commit it: merges of .evolving/HEAD never stop)"
        ));
    }
    Ok(said)
}

/// Undo [`install`]: the config section and the `.gitattributes` line (the file goes when
/// nothing else is left in it). What changed, as lines.
pub fn uninstall(top: &Path, store: Option<&str>) -> Result<Vec<String>, String> {
    let mut said = Vec::new();
    if git(top, &["config", "--get", &format!("merge.{DRIVER}.driver")]).is_ok() {
        git(
            top,
            &["config", "--remove-section", &format!("merge.{DRIVER}")],
        )?;
        said.push("merge driver: removed from this clone's git config".to_string());
    }
    let attributes = top.join(".gitattributes");
    let line = attribute_line(store);
    if let Ok(text) = read(&attributes) {
        if text.lines().any(|l| l.trim() == line) {
            let kept: Vec<&str> = text.lines().filter(|l| l.trim() != line).collect();
            let result = if kept.iter().all(|l| l.trim().is_empty()) {
                std::fs::remove_file(&attributes)
            } else {
                std::fs::write(&attributes, format!("{}\n", kept.join("\n")))
            };
            result.map_err(|e| format!("cannot write {}: {e}", attributes.display()))?;
            said.push(format!(
                "merge driver: `{line}` removed from .gitattributes"
            ));
        }
    }
    Ok(said)
}
